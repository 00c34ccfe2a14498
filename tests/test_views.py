"""Views (issue 12, first stage): basic keys, transposes, real/imag and reshape return
views whose pieces are numpy views of the base's pieces; writes go through both ways.

numpy is the oracle: every test applies the same steps to a numpy array and compares.
Slab and replicated layouts ('equal', 'fftw', 'freeform', 'not'), block mesh layouts
(mesh01, mesh10, meshrep) and block-cyclic ones (cyc2; cyc3, whose block of 3 a step
of 2 does not divide: such a slice is a copy, see docs/concepts.md).
"""

from __future__ import annotations

import numpy as np
import pytest
from _helpers import Checks, layouts, make
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import d2o
from d2o import distributed_data_object
from d2o.ops import getting
from d2o.testing import assert_equal_to_numpy, assert_raises_everywhere, collective_assert

STRATEGIES = ["equal", "fftw", "freeform", "not"]
MESHES = ["mesh01", "mesh10", "meshrep", "cyc2"]
AXES = [0, 1]


def _pair(strategy: str, axis: int = 0, shape=(7, 5), dtype=np.float64):
    a = np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape)
    if strategy in MESHES or strategy == "cyc3":
        return a, make(a.copy(), strategy)
    if strategy == "freeform":  # a local-type strategy: uneven local pieces
        return a, make(a.copy(), strategy, axis)
    return a, distributed_data_object(a.copy(), distribution_strategy=strategy, axis=axis)


KEYS = [
    slice(1, -1),
    slice(None, None, 2),
    (slice(None), slice(None, None, -1)),  # negative step off the split axis
    (slice(1, 6, 2), slice(None, None, -2)),
    2,  # a row
    -1,
    (slice(None), 3),  # a column
    (Ellipsis, 1),
    (None, slice(2, 4)),
    (slice(3, 3),),  # empty
    (slice(2, 4), None, slice(1, 4)),
]


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("axis", AXES)
@pytest.mark.parametrize("key", KEYS, ids=repr)
def test_basic_key_views_write_through_both_ways(strategy, axis, key):
    if strategy == "not" and axis:
        pytest.skip("one replicated layout")
    a, x = _pair(strategy, axis)
    nv, v = a[key], x[key]
    collective_assert(v.base is x, "a view's base is the array it was taken from")
    # through the view into the base
    vals = -np.arange(nv.size, dtype=a.dtype).reshape(nv.shape) - 1
    v[...] = vals
    nv[...] = vals
    assert_equal_to_numpy(x, a)
    # in-place arithmetic on the view
    v += 3
    nv += 3
    assert_equal_to_numpy(x, a)
    # through the base into the view
    x[...] = x * 2 + 1
    a[...] = a * 2 + 1
    assert_equal_to_numpy(v, nv)
    np.add(v, 1, out=v)
    np.add(nv, 1, out=nv)
    assert_equal_to_numpy(x, a)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_views_of_views_and_transposes(strategy):
    a, x = _pair(strategy, 0, shape=(8, 6))
    v, nv = x[1:-1], a[1:-1]
    w, nw = v[::2, ::-1], nv[::2, ::-1]
    collective_assert(w.base is x)
    w[...] = 0
    nw[...] = 0
    assert_equal_to_numpy(x, a)
    t, nt = x.T, a.T
    collective_assert(t.base is x)
    t[2] = -5  # a row of the transpose: a column of x
    nt[2] = -5
    assert_equal_to_numpy(x, a)
    s, ns = x.swapaxes(0, 1)[1:3], a.swapaxes(0, 1)[1:3]
    s += 100
    ns += 100
    assert_equal_to_numpy(x, a)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_real_and_imag_are_views(strategy):
    a = (np.arange(12) + 1j * np.arange(12)[::-1]).reshape(4, 3)
    x = make(a.copy(), strategy, 0)
    x.real += 1
    a.real += 1
    x.imag[1:3] = 0
    a.imag[1:3] = 0
    assert_equal_to_numpy(x, a)
    x.real = 7
    a.real = 7
    assert_equal_to_numpy(x, a)
    collective_assert(x.real.base is x and x.imag.base is x)


@pytest.mark.parametrize("strategy", ["equal", "not"])
def test_reshape_that_keeps_pieces_is_a_view(strategy):
    a, x = _pair(strategy, 0, shape=(6, 4))
    r, nr = x.reshape(6, 2, 2), a.reshape(6, 2, 2)
    r[:, 1, 1] = -1
    nr[:, 1, 1] = -1
    assert_equal_to_numpy(x, a)
    collective_assert(r.base is x)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_copies_stay_copies(strategy):
    a, x = _pair(strategy)
    for c in (x[[0, 2]], x[a > 10], x.copy(), x.astype(np.float32), x.flatten(), x.get_data(1)):
        c[...] = -1
    assert_equal_to_numpy(x, a)
    collective_assert(x.copy().base is None and x[[0, 2]].base is None)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_shares_memory(strategy):
    a, x = _pair(strategy)
    collective_assert(np.shares_memory(x, x[1:3]) and np.may_share_memory(x[::2], x))
    collective_assert(not np.shares_memory(x, x.copy()))
    collective_assert(not np.may_share_memory(x[:, 1], distributed_data_object(a)))


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_overlapping_assignment_is_numpys(strategy):
    a, x = _pair(strategy, 0, shape=(9, 3))
    x[1:] = x[:-1]
    a[1:] = a[:-1]
    assert_equal_to_numpy(x, a)
    x[:-2] = x[2:]
    a[:-2] = a[2:]
    assert_equal_to_numpy(x, a)
    x[::-1] = x
    a[::-1] = a.copy()
    assert_equal_to_numpy(x, a)


@pytest.mark.parametrize("strategy", ["equal", "fftw", "not"])
def test_jacobi_stencil_with_in_place_slice_updates(strategy):
    n = 12
    u = np.zeros((n, n))
    u[0, :] = 1.0
    x = distributed_data_object(u.copy(), distribution_strategy=strategy)
    for _ in range(5):
        inner, xin = u[1:-1, 1:-1], x[1:-1, 1:-1]
        new = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])
        xnew = 0.25 * (x[:-2, 1:-1] + x[2:, 1:-1] + x[1:-1, :-2] + x[1:-1, 2:])
        inner[...] = new
        xin[...] = xnew
        assert_equal_to_numpy(x, u, rtol=1e-12)


def test_creating_a_slice_view_moves_nothing():
    a, x = _pair("equal", 0, shape=(8, 6))
    with d2o.options(check_args=False), d2o.trace() as t:
        v = x[1:-1, ::-1]
        w = v.T[2:]
        r = x.real
        s = x.swapaxes(0, 1)
    collective_assert(t.calls == [], f"views communicated: {t.calls}")
    assert_equal_to_numpy(w, a[1:-1, ::-1].T[2:])
    assert_equal_to_numpy(r, a)
    assert_equal_to_numpy(s, a.swapaxes(0, 1))


@pytest.mark.parametrize("strategy", STRATEGIES + MESHES + ["cyc3"])
@pytest.mark.parametrize("key", [(3, 4, Ellipsis), (Ellipsis, -1, 2), (slice(2, 6), 1)])
def test_zero_d_views(strategy, key):
    """``a[3, 4]`` is a scalar, ``a[3, 4, ...]`` a 0-d view held by the ranks whose piece
    has the element: made without communication, writes go through both ways."""
    a, x = _pair(strategy, 0)
    collective_assert(np.ndim(x[3, 4]) == 0 and x[3, 4] == a[3, 4])
    with d2o.options(check_args=False), d2o.trace() as t:
        v = x[key]
        if key[-1] == 1:  # a 0-d view of a view
            v = v[0, ...]
    nv = a[key] if key[-1] != 1 else a[key][0, ...]
    collective_assert(v.shape == () and v.base is x, f"0-d view: {v.shape}, {v.base}")
    collective_assert(t.calls == [], f"a 0-d view moved: {t.calls}")
    collective_assert(float(v) == float(nv) and np.shares_memory(v, x))
    v[...] = -7
    nv[...] = -7
    assert_equal_to_numpy(x, a)
    v += 2
    nv += 2
    np.multiply(v, 3, out=v)
    np.multiply(nv, 3, out=nv)
    assert_equal_to_numpy(x, a)
    x[...] = x * 2  # writes to the base are seen through the view
    a[...] = a * 2
    assert_equal_to_numpy(v, nv)
    assert_equal_to_numpy(v + x, nv + a)
    collective_assert(v.sum() == nv.sum() and int(v) == int(nv))
    c = v.copy()
    c[...] = 0
    assert_equal_to_numpy(x, a)


@pytest.mark.parametrize("strategy", STRATEGIES + MESHES + ["cyc3"])
def test_assignments_through_zero_d_keys(strategy):
    a, x = _pair(strategy, 0)
    x[3, 4, ...] = 5
    a[3, 4, ...] = 5
    x[..., 2, 1] = x[0, 0, ...]  # a distributed 0-d value
    a[..., 2, 1] = a[0, 0, ...]
    assert_equal_to_numpy(x, a)
    for bad, exc in (((9, 4, Ellipsis), IndexError), ((3, 4, Ellipsis, 0), IndexError)):
        assert_raises_everywhere(exc, x.__getitem__, bad)
        assert_raises_everywhere(exc, x.__setitem__, bad, 1)
    assert_raises_everywhere(ValueError, x.__setitem__, (3, 4, Ellipsis), [1.0, 2.0])
    assert_equal_to_numpy(x, a)  # failed writes changed nothing


def test_bad_writes_through_views_change_nothing():
    a, x = _pair("equal", 0)
    v = x[1:4]
    from d2o.testing import assert_raises_everywhere

    assert_raises_everywhere(ValueError, v.__setitem__, Ellipsis, np.ones((2, 5)))
    assert_raises_everywhere(IndexError, v.__getitem__, 3)
    assert_raises_everywhere(IndexError, v.__getitem__, (0, 0, 0))
    ro = x.imag  # of a real array: numpy's read-only zeros
    assert_raises_everywhere(ValueError, ro.__setitem__, Ellipsis, 1.0)
    assert_raises_everywhere(TypeError, setattr, x, "imag", 1.0)
    assert_equal_to_numpy(x, a)


_slices = st.builds(
    slice,
    st.one_of(st.none(), st.integers(-8, 8)),
    st.one_of(st.none(), st.integers(-8, 8)),
    st.one_of(st.none(), st.sampled_from([1, 2, 3, -1, -2])),
)
_steps = st.lists(
    st.one_of(
        st.tuples(st.just("key"), st.tuples(_slices, _slices)),
        st.tuples(st.just("T"), st.none()),
    ),
    min_size=1,
    max_size=3,
)


@settings(
    derandomize=True,
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    database=None,
)
@given(steps=_steps, strategy=st.sampled_from(STRATEGIES + MESHES + ["cyc3"]))
def test_chains_of_views_write_through(steps, strategy):
    a, x = _pair(strategy, 0, shape=(7, 6))
    nv, v = a, x
    for kind, key in steps:
        if kind == "T":
            nv, v = nv.T, v.T
        else:
            nv, v = nv[key], v[key]
    vals = np.arange(nv.size, dtype=a.dtype).reshape(nv.shape) * -1.0 - 1
    before = a.copy()
    v[...] = vals
    nv[...] = vals
    assert_equal_to_numpy(v, nv)
    if v.base is x:
        assert_equal_to_numpy(x, a)
    else:  # an integer on a mesh layout's split axis made a copy (see docs/concepts.md)
        assert_equal_to_numpy(x, before)


def _has_int(key) -> bool:
    return any(isinstance(it, int) for it in (key if isinstance(key, tuple) else (key,)))


@pytest.mark.parametrize("name", MESHES)
@pytest.mark.parametrize("key", KEYS, ids=repr)
def test_block_mesh_layouts_give_views(name, key):
    """Slices on a block mesh layout are views in the sliced layout (nothing moves)."""
    a, x = _pair(name, 0, shape=(7, 6))
    with d2o.options(check_args=False), d2o.trace() as t:
        v = x[key]
    nv = a[key]
    collective_assert(t.calls == [] and v.base is x, f"mesh view: {t.calls}, base {v.base}")
    vals = np.arange(nv.size, dtype=a.dtype).reshape(nv.shape) - 100
    v[...] = vals
    nv[...] = vals
    assert_equal_to_numpy(x, a)
    w, nw = v[::-1], nv[::-1]  # a view of a view
    w += 1
    nw += 1
    assert_equal_to_numpy(x, a)
    assert_equal_to_numpy(v * 2 + 1, nv * 2 + 1)
    assert_equal_to_numpy(v.sum(axis=0), nv.sum(axis=0))


def _evenly_strided(n: int, block: int, p: int, key) -> bool:
    """The oracle of a block-cyclic view: on every rank the rows a key picks sit evenly
    strided in the local piece (blocks of ``block`` rows dealt round-robin to ``p``)."""
    rows = np.arange(n)
    picked = rows[key if isinstance(key, slice) else key[0]]
    for r in range(p):
        held = rows[(rows // block) % p == r]
        pos = np.nonzero(np.isin(held, picked))[0]
        if picked[0] > picked[-1]:
            pos = pos[::-1]
        if pos.size > 2 and len(set(np.diff(pos))) > 1:
            return False
    return True


@pytest.mark.parametrize(
    "key",
    [
        slice(1, 30),
        slice(None, None, -1),
        slice(None, None, 3),  # the step divides the block of 3: a view
        slice(35, None, -3),
        slice(None, None, 2),  # it does not: picks unevenly strided at 2 and 4 ranks
        slice(38, 0, -2),
        (slice(None), 2),
    ],
    ids=repr,
)
def test_block_cyclic_views(key):
    """Slices of a block-cyclic axis are views when every rank's picks are evenly strided
    in its local piece (always when the step divides the block); otherwise copies, made
    through the slab equivalent, and assignments through such keys still write."""
    from d2o import default_comm

    a, x = _pair("cyc3", 0, shape=(40, 3))
    with d2o.options(check_args=False), d2o.trace() as t:
        v = x[key]
    nv = a[key]
    is_view = _evenly_strided(40, 3, default_comm().size, key)
    collective_assert((v.base is x) == is_view, f"view {v.base is x}, expected {is_view}")
    if is_view:
        collective_assert(t.calls == [], f"a block-cyclic view moved: {t.calls}")
    vals = np.arange(nv.size, dtype=a.dtype).reshape(nv.shape) - 100
    if not is_view:
        nv = nv.copy()  # the oracle of a copy
    v[...] = vals
    nv[...] = vals
    assert_equal_to_numpy(x, a)
    x[key] = vals * 2  # an assignment writes through either way
    a[key] = vals * 2
    assert_equal_to_numpy(x, a)
    assert_equal_to_numpy(v, nv)
    w, nw = v[1:], nv[1:]  # a view of the view
    w *= 3
    nw *= 3
    assert_equal_to_numpy(x, a)
    assert_equal_to_numpy(v.sum(axis=0), nv.sum(axis=0))


@pytest.mark.parametrize("strategy", ["equal", "fftw", "freeform"])
def test_negative_step_on_the_split_axis_is_a_view(strategy):
    """The ranks hold their ranges in descending order; nothing moves, writes go through,
    and element-wise work, reductions, transposes and copies see numpy's values."""
    a, x = _pair(strategy, 0)
    with d2o.options(check_args=False), d2o.trace() as t:
        v = x[::-2]
    collective_assert(t.calls == [] and v.base is x, f"reversed view moved: {t.calls}")
    nv = a[::-2]
    v[1] = -1
    nv[1] = -1
    v += 2
    nv += 2
    assert_equal_to_numpy(x, a)
    assert_equal_to_numpy(v * 2 + x[::-2], nv * 2 + a[::-2])
    assert_equal_to_numpy(v.sum(axis=0), nv.sum(axis=0))
    assert_equal_to_numpy(v.sum(axis=1), nv.sum(axis=1))
    collective_assert(v.sum() == nv.sum() and v.argmax() == nv.argmax())
    assert_equal_to_numpy(v.T, nv.T)
    assert_equal_to_numpy(v.copy(distribution_strategy="equal"), nv)
    assert_equal_to_numpy(v[1:3], nv[1:3])
    x[...] = 0
    a[...] = 0
    assert_equal_to_numpy(v, nv)


@pytest.mark.parametrize("strategy", ["equal", "not", "mesh01"])
def test_moveaxis_ravel_flags_and_set_local_data_on_views(strategy):
    a, x = _pair(strategy, 0, shape=(4, 3, 2))
    m, nm = np.moveaxis(x, 0, -1), np.moveaxis(a, 0, -1)
    collective_assert(m.base is x and m.shape == nm.shape)
    m[0] = -3
    nm[0] = -3
    assert_equal_to_numpy(x, a)
    collective_assert(x.flags.owndata and not m.flags.owndata)
    f = x.flatten()
    collective_assert(f.base is None and f.flags.owndata)
    v = x[1:3]
    v.set_local_data(7.0)
    a[1:3] = 7.0
    assert_equal_to_numpy(x, a)
    if strategy != "mesh01":  # ravel of a slab piece reuses its memory
        r = x.ravel()
        collective_assert(r.base is x)
        r[...] = 0
        a[...] = 0
        assert_equal_to_numpy(x, a)


def _np_or_d2o(name: str):
    """numpy's function ``name`` for numpy arrays, d2o.numpy's for distributed ones."""
    import d2o.numpy as dnp

    return lambda m, *args: getattr(np if isinstance(m, np.ndarray) else dnp, name)(m, *args)


# permutations that are not their own inverse, several axes moved in non-ascending order
_MOVES_3 = [([0, 2], [2, 0]), ([2, 0], [0, 1]), ([1, 0], [2, 0]), ([0, 1, 2], [1, 2, 0]),
            ([2, 1], [0, 2]), ([-1, 0], [0, -1])]  # fmt: skip
_MOVES_4 = [([3, 0], [0, 1]), ([0, 3, 1], [1, 0, 3]), ([2, 3], [0, 1]), ([1, 3, 0], [3, 0, 2])]
_PERMS = {3: [(1, 2, 0), (2, 0, 1)], 4: [(1, 2, 3, 0), (3, 0, 1, 2), (2, 3, 1, 0), (1, 3, 0, 2)]}


def _transposes(ndim: int) -> list:
    """(name, function of an array) for moveaxis and transposes of ``ndim``-d arrays, as
    numpy's methods and functions and as d2o.numpy's."""
    ops: list = []
    for src, dst in _MOVES_3 + (_MOVES_4 if ndim == 4 else []):
        ops.append((f"np.moveaxis{src, dst}", lambda m, s=src, d=dst: np.moveaxis(m, s, d)))
        ops.append((f"d2o.numpy.moveaxis{src, dst}",
                    lambda m, s=src, d=dst: _np_or_d2o("moveaxis")(m, s, d)))  # fmt: skip
    for p in _PERMS[ndim]:
        ops.append((f"x.transpose{p}", lambda m, p=p: m.transpose(p)))
        ops.append((f"np.transpose{p}", lambda m, p=p: np.transpose(m, p)))
        ops.append((f"d2o.numpy.permute_dims{p}", lambda m, p=p: _np_or_d2o("permute_dims")(m, p)))
        ops.append((f"transpose twice {p}", lambda m, p=p: m.transpose(p).transpose(p)))
    ops += [
        ("d2o.numpy.transpose", lambda m: _np_or_d2o("transpose")(m, (2, 0, 1) + (3,) * (ndim > 3))),
        ("d2o.numpy.rollaxis(2, 0)", lambda m: _np_or_d2o("rollaxis")(m, 2, 0)),
        ("d2o.numpy.rollaxis(0, 3)", lambda m: _np_or_d2o("rollaxis")(m, 0, 3)),
        ("d2o.numpy.swapaxes(-1, 0)", lambda m: _np_or_d2o("swapaxes")(m, -1, 0)),
        ("d2o.numpy.matrix_transpose", lambda m: _np_or_d2o("matrix_transpose")(m)),
        ("d2o.numpy.rot90", lambda m: _np_or_d2o("rot90")(m, 1, (2, 0))),
        ("d2o.numpy.flip", lambda m: _np_or_d2o("flip")(m, (0, 2))),
        # numpy's own functions (``__array_function__``)
        ("np.rollaxis(2, 0)", lambda m: np.rollaxis(m, 2, 0)),
        ("np.rot90", lambda m: np.rot90(m, 1, (2, 0))),
        ("np.flip", lambda m: np.flip(m, (0, 2))),
        ("np.flipud", lambda m: np.flipud(m)),
        ("np.fliplr", lambda m: np.fliplr(m)),
        ("np.swapaxes(-1, 0)", lambda m: np.swapaxes(m, -1, 0)),
    ] + ([("np.matrix_transpose", lambda m: np.matrix_transpose(m))]
         if hasattr(np, "matrix_transpose") else [])  # fmt: skip
    return ops


@pytest.mark.parametrize("shape", [(3, 4, 5), (2, 3, 4, 3)])
def test_multi_axis_moveaxis_and_transposes_are_numpys_views(shape):
    """moveaxis of several axes in non-ascending order and transposes that are not their
    own inverse, on every layout (meshes included), through numpy's functions,
    d2o.numpy's and the method: numpy's shape and values, a view of the base, and writes
    through the view (and into the base) land where numpy's do (issue 28)."""
    a0 = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
    check = Checks()
    for strategy, axis in layouts(len(shape)):
        for name, f in _transposes(len(shape)):
            what = f"{strategy} axis {axis} {name}"
            a = a0.copy()
            x = make(a, strategy, axis)
            v, nv = f(x), f(a)
            check.equal(v, nv, what=what)
            check.true(v.base is x, f"{what}: not a view of the base (base {v.base!r:.60})")
            check.true(v.data.shape == v.distributor.local_shape, f"{what}: piece of shape "
                       f"{v.data.shape} in a layout of local shape {v.distributor.local_shape}")  # fmt: skip
            check.done()  # agreed before writing: a wrong layout must not desynchronise ranks
            v[0] = -1
            nv[0] = -1
            v[..., 1] += 100
            nv[..., 1] += 100
            x[1] = -7
            a[1] = -7
            check.equal(x, a, what=f"{what}: base after writes")
            check.equal(v, nv, what=f"{what}: view after writes")
    check.done()


@pytest.mark.parametrize("name", MESHES)
def test_slice_assignment_on_a_mesh_is_local(name):
    """obj[slices] = numpy value on a block mesh layout: every rank writes its part of the
    selection, nothing moves; a distributed value of another layout moves once."""
    a, x = _pair(name, 0, shape=(7, 6))
    vals = -np.arange(12.0).reshape(3, 4)
    with d2o.options(check_args=False), d2o.trace() as t:
        x[1:7:2, ::-1][:, 1:5] = vals
    a[1:7:2, ::-1][:, 1:5] = vals
    collective_assert(t.calls == [], f"moved: {t.calls}")
    assert_equal_to_numpy(x, a)
    x[2:5] = distributed_data_object(np.ones((3, 6)))
    a[2:5] = 1
    assert_equal_to_numpy(x, a)
    x[1:] = x[:-1]
    a[1:] = a[:-1]
    assert_equal_to_numpy(x, a)


def test_shares_memory_bad_on_one_rank_and_what_it_moves():
    """Errors of the local test are agreed (no rank waits); two 1-byte allreduces."""
    from d2o import default_comm
    from d2o.testing import assert_raises_everywhere

    comm = default_comm()
    a, x = _pair("equal", 0)
    bad = "x" if comm.rank == 0 else None
    with d2o.options(check_args=False):
        assert_raises_everywhere(ValueError, np.shares_memory, x, x[1:], max_work=bad)
        with d2o.trace() as t:
            same = np.shares_memory(x, x[1:])
    collective_assert(same)
    moved = [(c[1], c[2], c[3]) for c in t.calls]
    expected = [] if comm.size == 1 else [("Allreduce", 1, 1)] * 2
    collective_assert(moved == expected, f"shares_memory moved {moved}")


@pytest.mark.parametrize("name", MESHES)
def test_mesh_keys_bad_on_one_rank_raise_everywhere(name):
    """A mesh key whose value is wrong on one rank: with a distributed value (data moves)
    or a 0-d result (the slab path) every rank raises and nothing is written."""
    from d2o import default_comm
    from d2o.testing import assert_raises_everywhere

    comm = default_comm()
    a, x = _pair(name, 0, shape=(7, 6))
    row = 100 if comm.rank == comm.size - 1 else 2
    value = distributed_data_object(np.ones(6))
    with d2o.options(check_args=False):
        assert_raises_everywhere(IndexError, x.__setitem__, row, value)
        assert_raises_everywhere(IndexError, x.__getitem__, (row, 1))
        with d2o.trace() as t:
            x[2] = value
    a[2] = 1
    assert_equal_to_numpy(x, a)
    ops = [c[1] for c in t.calls]
    collective_assert(comm.size == 1 or ops[0] == "Allreduce", f"no agreement first: {ops}")
    collective_assert(comm.size == 1 or set(ops[1:]) <= {"Alltoallw"}, f"moved {ops}")


def test_slice_plans_kept_give_the_same_views():
    """A view by slices is planned once per layout and key (`d2o.ops.getting._PLANS`):
    the second view of one key, and views after the plans were emptied, are numpy's."""
    keys = [(slice(None, -2), slice(1, -1)), (slice(2, None), slice(1, -1)), slice(1, -1),
            (slice(1, 6, 2), slice(None, None, -1)), (slice(5, 1, -1),)]  # fmt: skip
    for strategy in ("equal", "freeform"):
        for axis in AXES:
            a, x = _pair(strategy, axis)
            for key in keys * 2:
                v = x[key]
                assert_equal_to_numpy(v, a[key])
                v[...] = v + 1.0  # a view: writes reach the base
                a[key] = a[key] + 1.0
                assert_equal_to_numpy(x, a)
    old = getting._PLANS_MAX
    getting._PLANS_MAX = 1  # emptied at every new plan
    try:
        a, x = _pair("equal")
        for key in keys * 2:
            assert_equal_to_numpy(x[key], a[key])
    finally:
        getting._PLANS_MAX = old
    collective_assert(len(getting._PLANS) <= getting._PLANS_MAX, "bounded")
