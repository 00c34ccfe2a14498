"""Element and fancy keys, ``where``, ``clip`` and ``astype`` on mesh layouts, natively.

numpy is the oracle, on slabs, process meshes (2x1, 1x2, 2x2 as the ranks allow, a
replica mesh axis), block-cyclic layouts with small blocks and reversed views; the trace
checks that only the selected elements move (`d2o.ops.meshindex`) and that ``where``,
``clip`` and ``astype`` with scalars or operands of one layout move nothing.
"""

from __future__ import annotations

import numpy as np
import pytest
from _helpers import sample

import d2o
import d2o.numpy as dnp
from d2o import default_comm, distributed_data_object
from d2o.testing import assert_equal_to_numpy, assert_raises_everywhere, collective_assert

P = default_comm().size
DTYPES = ["float64", "int32", "complex128", "bool"]
SHAPES = [(7,), (1,), (5, 6), (1, 1), (3, 4, 5)]


def _mesh(mesh, split, block=None):
    return d2o.layout(mesh=mesh, split=split, block=block)


def layouts(ndim: int) -> list:
    """(name, builder of the distributed array of a global numpy array) for ``ndim``."""
    half = (2, P // 2) if P % 2 == 0 else (P, 1)
    specs = [
        ("slab", "equal"),
        ("replica", _mesh(half, (0, None))),
        ("cyclic", _mesh((P,), (0,), 2)),
    ]
    if ndim >= 2:
        specs += [
            ("mesh Px1", _mesh((P, 1), (0, 1))),
            ("mesh 1xP", _mesh((1, P), (0, 1))),
            ("mesh 2-d", _mesh(half, (0, 1))),
            ("mesh 1,0", _mesh(half, (1, 0))),
            ("cyclic 2-d", _mesh(half, (0, 1), (2, 3))),
        ]
    if ndim >= 3:
        specs += [("mesh 0,2", _mesh(half, (0, 2))), ("cyclic 0,2", _mesh(half, (2, 0), 2))]
    out = [
        (n, lambda a, s=s: distributed_data_object(a, distribution_strategy=s)) for n, s in specs
    ]
    rev = (slice(None, None, -1),) * ndim

    def reversed_view(a, s):  # a view whose pieces run in descending order: global data a
        return distributed_data_object(a[rev].copy(), distribution_strategy=s)[rev]

    out.append(("reversed slab", lambda a: reversed_view(a, "equal")))
    out.append(("reversed cyclic", lambda a: reversed_view(a, _mesh((P,), (0,), 2))))
    if ndim >= 2:
        out.append(("reversed mesh", lambda a: reversed_view(a, _mesh(half, (0, 1)))))
    return out


def assert_pieces(x, expected) -> None:
    """Every rank's piece (replicas included) equals its part of ``expected``."""
    part = expected[x.distributor.local_slice]
    mine = x.get_local_data(copy=False)
    collective_assert(np.array_equal(mine, part), f"piece {mine!r} != {part!r}")


def points(shape: tuple) -> list:
    """Element keys: corners, a middle point, negative indices."""
    last = tuple(n - 1 for n in shape)
    mid = tuple(n // 2 for n in shape)
    neg = tuple(-1 - (i % n) for i, n in enumerate(shape))
    return [tuple(0 for _ in shape), last, mid, neg]


def _one(key):
    return key[0] if len(key) == 1 else key


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_element_get_and_set(shape, dtype):
    a = sample(shape, dtype)
    vals = sample((4,), dtype, seed=3)
    for name, make in layouts(len(shape)):
        x = make(a)
        b = a.copy()
        for i, key in enumerate(points(shape)):
            key = _one(key) if i == 1 else key  # a bare integer on 1-d arrays too
            got = x[key]
            collective_assert(
                isinstance(got, np.generic) and got.dtype == a.dtype and got == b[key],
                f"{name}: x[{key}] gave {got!r}, numpy {b[key]!r}",
            )
            x[key] = vals[i]
            b[key] = vals[i]
        assert_equal_to_numpy(x, b)
        x[points(shape)[2]] = 1  # a Python scalar, cast as numpy does
        b[points(shape)[2]] = 1
        assert_equal_to_numpy(x, b)
        assert_pieces(x, b)


@pytest.mark.parametrize("shape", SHAPES + [(0, 3)])
def test_element_keys_out_of_range_raise_everywhere(shape):
    a = sample(shape, "float64")
    bad = [tuple(n for n in shape), tuple(-n - 1 for n in shape)]
    for _name, make in layouts(len(shape)):
        x = make(a)
        for key in bad:
            assert_raises_everywhere(IndexError, lambda x=x, key=key: x[key])
            assert_raises_everywhere(IndexError, x.__setitem__, key, 5.0)
        if a.size:
            # a value numpy refuses for one element, on every rank, nothing written
            assert_raises_everywhere(ValueError, x.__setitem__, points(shape)[0], [1.0, 2.0])
            assert_raises_everywhere(TypeError, x.__setitem__, points(shape)[0], 1j)
        assert_equal_to_numpy(x, a)


def fancy_keys(shape: tuple) -> list:
    n0 = shape[0]
    keys = [[0], [n0 - 1, 0, n0 - 1], np.array([-1, 0]), np.array([[0, n0 - 1], [n0 - 1, 0]])]
    keys.append(np.arange(n0)[::-1] % 2 == 0)  # a boolean numpy mask of axis 0
    if len(shape) >= 2:
        n1 = shape[1]
        keys += [
            ([0, n0 - 1], [n1 - 1, 0]),
            (slice(None), [n1 - 1, 0, 0]),
            (-1, [0, n1 - 1]),
            ([[0], [n0 - 1]], [0, n1 - 1]),
            (Ellipsis, [0]),
        ]
    if len(shape) >= 3:
        keys += [([0, -1], slice(1, None), [shape[2] - 1, 0]), (0, slice(None), [1, 0])]
    return keys


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(7,), (1,), (5, 6), (1, 1), (3, 4, 5)])
def test_fancy_get_and_set(shape, dtype):
    a = sample(shape, dtype)
    for _name, make in layouts(len(shape)):
        x = make(a)
        for key in fancy_keys(shape):
            assert_equal_to_numpy(x[key], a[key])
        b = a.copy()
        for i, key in enumerate(fancy_keys(shape)):
            sel = a[key].shape
            v = sample(sel, dtype, seed=10 + i)
            x[key] = v  # values with numpy's write order for repeated indices
            b[key] = v
        assert_equal_to_numpy(x, b)
        key = fancy_keys(shape)[1]
        x[key] = sample((), dtype, seed=5)[()]  # a scalar into the selection
        b[key] = sample((), dtype, seed=5)[()]
        assert_equal_to_numpy(x, b)
        assert_pieces(x, b)


@pytest.mark.parametrize("shape", [(7,), (5, 6), (3, 4, 5)])
def test_fancy_set_with_distributed_values(shape):
    a = sample(shape, "float64")
    for _name, make in layouts(len(shape)):
        x = make(a)
        b = a.copy()
        for i, key in enumerate(fancy_keys(shape)):
            sel = a[key].shape
            cells = np.arange(a.size).reshape(shape)[key]
            if np.unique(cells).size < cells.size:
                continue  # repeated indices: the write order of a distributed value is open
            v = sample(sel, "float64", seed=20 + i)
            for _vname, vmake in layouts(len(sel))[:4]:
                x[key] = vmake(v)
                b[key] = v
            x[key] = distributed_data_object(v[(0,) * (len(sel) - 1)])  # broadcast
            b[key] = v[(0,) * (len(sel) - 1)]
        assert_equal_to_numpy(x, b)
        assert_pieces(x, b)


def test_fancy_set_repeated_indices_last_wins():
    a = np.zeros((6, 4))
    for _name, make in layouts(2):
        x = make(a)
        b = a.copy()
        x[[1, 3, 1]] = np.array([[1.0], [2.0], [3.0]])
        b[[1, 3, 1]] = np.array([[1.0], [2.0], [3.0]])
        assert_equal_to_numpy(x, b)


@pytest.mark.parametrize("shape", [(7,), (5, 6), (0, 3)])
def test_fancy_keys_out_of_range_raise_everywhere(shape):
    a = sample(shape, "int32")
    n0 = shape[0]
    for _name, make in layouts(len(shape)):
        x = make(a)
        for key in ([0, n0], [-n0 - 1], ([0], [shape[-1] + 2]) if len(shape) > 1 else [n0 + 5]):
            assert_raises_everywhere(IndexError, lambda x=x, key=key: x[key])
            assert_raises_everywhere(IndexError, x.__setitem__, key, 1)
        if n0:
            assert_raises_everywhere(ValueError, x.__setitem__, [0, 0], [1, 2, 3])
        assert_equal_to_numpy(x, a)


def test_large_fancy_get_asks_the_owners():
    """A result above the small-plan limit: requests travel to the owners (`fetch`)."""
    a = sample((300, 300), "float64")
    key = np.arange(300)[::-1] * 7 % 300
    for _name, make in layouts(2):
        x = make(a)
        assert_equal_to_numpy(x[key], a[key])
        assert_equal_to_numpy(x[:, key], a[:, key])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(7,), (5, 6), (1, 1), (3, 4, 5)])
def test_where_clip_astype(shape, dtype):
    a = sample(shape, dtype)
    c = sample(shape, "bool", seed=4)
    for _name, make in layouts(len(shape)):
        x = make(a)
        y = make(a * 2 if dtype != "bool" else ~a)
        assert_equal_to_numpy(dnp.where(x > 0, x, 0), np.where(a > 0, a, 0))
        assert_equal_to_numpy(
            np.where(x > 0, x, y), np.where(a > 0, a, a * 2 if dtype != "bool" else ~a)
        )
        assert_equal_to_numpy(x.where(1, 0) if dtype == "bool" else dnp.where(make(c), 1.5, x),
                              np.where(a, 1, 0) if dtype == "bool" else np.where(c, 1.5, a))  # fmt: skip
        if dtype != "complex128":
            assert_equal_to_numpy(dnp.clip(x, 0, 1), np.clip(a, 0, 1))
            assert_equal_to_numpy(x.clip(0, 1), np.clip(a, 0, 1))
            assert_equal_to_numpy(
                dnp.clip(x, y, 3), np.clip(a, a * 2 if dtype != "bool" else ~a, 3)
            )
        assert_equal_to_numpy(dnp.astype(x, np.int16), a.astype(np.int16))
        assert_equal_to_numpy(dnp.astype(x, np.complex64), a.astype(np.complex64))


def test_where_clip_astype_errors_raise_everywhere():
    a = sample((5, 6), "float64")
    for _name, make in layouts(2):
        x = make(a)
        day = np.datetime64("2020-01-01")
        assert_raises_everywhere(TypeError, dnp.where, x > 0, x, day)
        assert_raises_everywhere(TypeError, dnp.clip, x, day, 3)
        assert_raises_everywhere(TypeError, dnp.astype, x, "no such dtype")


def test_data_errors_are_deferred_to_the_next_collective():
    """An ``errstate`` error of some ranks' data is raised on every rank by the next
    collective call, as for the ufuncs."""
    a = np.zeros((4, 4))
    a[0, 0] = np.nan
    for _name, make in layouts(2):
        x = make(a)

        def cast_then_sum(x=x):
            with np.errstate(invalid="raise"):
                y = dnp.astype(x, np.int64)
            return y.sum()

        assert_raises_everywhere(FloatingPointError, cast_then_sum)


# -- what moves -------------------------------------------------------------------------

N = 64


def _traced(f):
    with d2o.options(check_args=False), d2o.trace() as t:
        f()
    return t


def _sent(f) -> int:
    """The largest number of bytes one rank sent for ``f()``."""
    t = _traced(f)
    return default_comm().allreduce(t.bytes_sent, "max")


@pytest.mark.parametrize("dtype", DTYPES)
def test_element_ops_move_a_few_bytes(dtype):
    a = sample((N, N), dtype)
    for name, make in layouts(2):
        x = make(a)
        get = _sent(lambda x=x: x[7, 9])
        put = _sent(lambda x=x: x.__setitem__((7, -9), a[0, 0]))
        collective_assert(get <= 512 and put == 0, f"{name}: x[7, 9] {get} B, set {put} B")


def test_fancy_ops_move_only_the_selected_elements():
    a = sample((N, N), "float64")
    for name, make in layouts(2):
        x = make(a)
        rows = _sent(lambda x=x: x[[1, 5, 9]])
        pts = _sent(lambda x=x: x[[1, 5], [2, 3]])
        put = _sent(lambda x=x: x.__setitem__([1, 5, 9], 2.0))
        cols = _sent(lambda x=x: x.__setitem__((slice(None), [3, 0]), a[:, :2]))
        ok = rows <= 3 * N * 8 + 512 and pts <= 512 and put == 0 and cols == 0
        collective_assert(ok, f"{name}: rows {rows} B, points {pts} B, sets {put}/{cols} B")


def test_where_clip_astype_move_nothing():
    a = sample((N, N), "float64")
    for name, make in layouts(2):
        x = make(a)
        y = make(a + 1)
        ops = {
            "where": lambda x=x: dnp.where(x > 5, x, 0),
            "where y": lambda x=x, y=y: dnp.where(x > 5, x, y),
            "clip": lambda x=x: dnp.clip(x, -1, 1),
            "clip y": lambda x=x, y=y: x.clip(-1, y),
            "astype": lambda x=x: dnp.astype(x, np.int32),
        }
        for op, f in ops.items():
            t = _traced(f)
            n = default_comm().allreduce(t.bytes_sent + t.collectives, "max")
            collective_assert(n == 0, f"{name}: {op} sent {n} bytes or calls")


# -- scans along an axis (cumsum, cumprod) -----------------------------------------------


@pytest.mark.parametrize("dtype", ["float64", "int32", "complex128", "bool"])
@pytest.mark.parametrize("shape", [(7,), (5, 6), (1, 1), (0, 3), (3, 4, 5)])
def test_scans_equal_numpy_on_every_layout(dtype, shape):
    a = sample(shape, dtype)
    for _, build in layouts(len(shape)):
        x = build(a)
        for axis in (None, *range(len(shape))):
            for fn in ("cumsum", "cumprod"):
                want = getattr(np, fn)(a, axis=axis)
                got = getattr(x, fn)(axis=axis)
                assert_equal_to_numpy(got, want, rtol=1e-12 if dtype != "bool" else None)


@pytest.mark.parametrize("mesh,split", [((P, 1), (0, 1)), ((1, P), (0, 1)), (None, (1, 0))])
def test_a_scan_on_a_block_mesh_moves_one_slice_per_block(mesh, split):
    """Local scans plus the blocks' last slices inside the mesh axis's sub-communicator:
    no slab equivalent, at most (extent - 1) slices received per rank."""
    mesh = mesh or ((2, P // 2) if P % 2 == 0 else (P, 1))
    a = sample((8, 6), "float64")
    x = distributed_data_object(a, distribution_strategy=_mesh(mesh, split))
    for axis in (0, 1):
        with d2o.options(check_args=False), d2o.trace() as t:  # (checked mode: one more)
            got = x.cumsum(axis=axis)
        rec = t.records[0]
        m = split.index(axis)  # the mesh axis that splits the scanned axis
        other = a.shape[1 - axis]  # one slice holds at most a whole row or column
        collective_assert(rec.via_slab == 0, repr(rec))
        # the slices, and the 1-byte agreement on the axis
        collective_assert(rec.bytes_received <= (mesh[m] - 1) * other * 8 + 1, (axis, t.calls))
        slices = [c for c in t.calls if c[1] == "Allgather"]  # inside the mesh axis only
        collective_assert(all(c[4] <= mesh[m] for c in slices), repr(t.calls))
        assert_equal_to_numpy(got, np.cumsum(a, axis=axis), rtol=1e-12)  # (sums regrouped)
