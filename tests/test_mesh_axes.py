"""Reductions, ``roll``, ``diff`` and ``gradient`` along any axis on process meshes and
block-cyclic layouts, natively (issue 30, item 2).

numpy is the oracle on every mesh layout of `_helpers.MESH_LAYOUTS` (and a slab as a
control), for ``d2o.numpy``'s functions and the methods alike; the trace checks that a
reduction moves only partials (inside the sub-communicator of the mesh axis that splits
the reduced axis), that ``roll`` moves exactly the elements that change owner, and that
``diff`` moves boundary slices only, none of them through the slab equivalent.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from _helpers import Checks, make, mesh_names, sample

import d2o
import d2o.numpy as dnp
from d2o import default_comm, distributed_data_object
from d2o.layouts.distributors import as_runs
from d2o.testing import _compare, assert_raises_everywhere, collective_assert

P = default_comm().size
DTYPES = ["int32", "float32", "float64", "complex128", "bool"]
SHAPES = [(0, 5), (1, 1), (7, 5), (3, 4, 5)]

#: name -> (numpy's function, d2o.numpy's, the method's name or None)
REDUCTIONS = {
    n: (getattr(np, n), getattr(dnp, n), n)
    for n in ("sum prod max min mean var std any all argmax argmin nansum nanmax nanmin").split()
}
REDUCTIONS.update(
    {
        n: (getattr(np, n), getattr(dnp, n), None)
        for n in ("nanprod nanmean nanvar nanstd ptp count_nonzero average").split()
    }
)
# numpy's functions (and methods) that reject some dtypes or empty axes raise; d2o raises alike


def _names(ndim: int) -> list:
    return ["equal", *mesh_names(ndim)]


def _rtol(dtype: str, name: str):
    if dtype in ("int32", "bool") and name not in ("mean", "var", "std", "nanmean", "nanvar",
                                                    "nanstd", "average"):  # fmt: skip
        return None
    return 1e-4 if dtype == "float32" else 1e-10


def _check(check: Checks, got, want, rtol, what: str) -> None:
    if isinstance(got, distributed_data_object):
        check.equal(got, want, rtol, what)
        return
    msg = _compare(got, want, rtol, 0, True)
    check.true(msg is None, f"{what}: {msg}")


def _axes(ndim: int) -> list:
    return [0, -1, (0, 1), None] if ndim >= 2 else [0, None]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_reductions_along_axes_equal_numpy(dtype, shape):
    a = sample(shape, dtype)
    check = Checks()
    for lay in _names(len(shape)):
        x = make(a, lay)
        for name, (np_f, d_f, meth) in REDUCTIONS.items():
            for axis in _axes(len(shape)):
                if name.startswith("arg") and isinstance(axis, tuple):
                    continue
                kw = {"axis": axis}
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    try:
                        want = np_f(a, **kw)
                    except Exception as exc:
                        err = type(exc)
                        assert_raises_everywhere(err, lambda x=x, kw=kw, f=d_f: f(x, **kw))
                        continue
                    calls = [("d2o.numpy", lambda x=x, kw=kw, f=d_f: f(x, **kw))]
                    if meth is not None:
                        calls.append(("method", lambda x=x, kw=kw, m=meth: getattr(x, m)(**kw)))
                    for how, f in calls:
                        got = f()
                        _check(check, got, want, _rtol(dtype, name), f"{lay} {how} {name} {kw}")
    check.done()


@pytest.mark.parametrize("lay", mesh_names(2))
def test_keepdims_ddof_and_dtype_on_meshes(lay):
    a = sample((7, 5), "float64")
    x = make(a, lay)
    check = Checks()
    for axis in (0, 1):
        _check(check, x.sum(axis=axis, keepdims=True), a.sum(axis=axis, keepdims=True), 1e-12,
               f"sum keepdims {axis}")  # fmt: skip
        _check(check, dnp.var(x, axis=axis, ddof=1), np.var(a, axis=axis, ddof=1), 1e-12, "var")
        _check(check, x.std(axis=axis, keepdims=True), a.std(axis=axis, keepdims=True), 1e-12,
               "std keepdims")  # fmt: skip
        _check(check, dnp.mean(x, axis=axis, dtype=np.float32),
               np.mean(a, axis=axis, dtype=np.float32), 1e-5, "mean float32")  # fmt: skip
        _check(check, x.argmin(axis=axis, keepdims=True), a.argmin(axis=axis, keepdims=True),
               None, "argmin keepdims")  # fmt: skip
    check.done()


def test_argmax_ties_and_nans_on_meshes():
    """Ties go to the lowest global index, the first NaN wins (numpy's rules), whichever
    block or rank holds the candidates."""
    a = np.zeros((9, 8))
    a[[2, 6], 3] = 5.0  # a tie along axis 0
    a[7, 1], a[4, 1] = np.nan, np.nan  # two NaNs: the first wins
    a[5, :] = -1.0
    check = Checks()
    for lay in mesh_names(2):
        x = make(a, lay)
        for axis in (0, 1):
            for name in ("argmax", "argmin"):
                want = getattr(np, name)(a, axis=axis)
                _check(check, getattr(dnp, name)(x, axis=axis), want, None, f"{lay} {name}")
    check.done()


# -- what moves: partials only ----------------------------------------------------------

N = 32


def _traced(f):
    with d2o.options(check_args=False), d2o.trace() as t:
        f()
    return t


@pytest.mark.parametrize("lay", mesh_names(2))
def test_reductions_move_only_partials(lay):
    """Every reduction along every axis, through d2o.numpy and as a method: no slab
    equivalent, no fallback, the partials combined inside the group of ranks that split
    the reduced axis, and at most a few partials (this rank's piece of the result) sent
    to each other rank of the group."""
    a = sample((2 * N, 2 * N), "float64")
    x = make(a, lay)
    d = x.distributor
    for name, (_, d_f, meth) in REDUCTIONS.items():
        for axis in (0, 1):
            calls = [("d2o.numpy", lambda f=d_f, ax=axis: f(x, axis=ax))]
            if meth is not None:
                calls.append(("method", lambda m=meth, ax=axis: getattr(x, m)(axis=ax)))
            split = getattr(d, "split", (d.axis,) if d.axis is not None else ())
            mesh = getattr(getattr(d, "layout", None), "mesh", (P,))
            group = int(np.prod([mesh[m] for m, s in enumerate(split) if s == axis]))
            piece = d.local_shape[1 - axis]  # this rank's part of the result
            for how, f in calls:
                t = _traced(f)
                slab = sum(r.via_slab for r in t.records)
                fell = [r.fallback for r in t.records if r.fallback]
                # a partial: values and, for argmax, indices; at most three (nanvar: the
                # mean, the count, the sum of squares) to each other rank of the group,
                # plus the one-byte agreements on the arguments
                bound = 3 * piece * 16 * (group - 1) + 64
                wide = [c for c in t.calls if c[2] > 16 and c[4] > group]
                ok = slab == 0 and not fell and t.bytes_sent <= bound and not wide
                collective_assert(ok, f"{lay} {how} {name} axis={axis}: {slab} via slab, "
                                  f"fallback {fell}, {t.bytes_sent} B > {bound} B, "
                                  f"outside the group of {group}: {wide}")  # fmt: skip


@pytest.mark.parametrize("lay", mesh_names(2))
def test_comparisons_and_weighted_average_equal_numpy_without_slabs(lay):
    a = sample((N, N), "float64")
    w = np.abs(sample((N, N), "float64", seed=3)) + 0.5
    x, y, wx = make(a, lay), make(a + 1e-9, lay), make(w, lay)
    check = Checks()
    calls = {
        "allclose": (lambda: dnp.allclose(x, y), np.allclose(a, a + 1e-9)),
        "array_equal": (lambda: dnp.array_equal(x, y), np.array_equal(a, a + 1e-9)),
        "array_equiv": (lambda: dnp.array_equiv(x, x), True),
        "average": (lambda: dnp.average(x, axis=0, weights=wx), np.average(a, axis=0, weights=w)),
        "nanargmax": (lambda: dnp.nanargmax(x, axis=1), np.nanargmax(a, axis=1)),
    }
    for name, (f, want) in calls.items():
        t = _traced(f)
        _check(check, f(), want, 1e-12, f"{lay} {name}")
        check.true(sum(r.via_slab for r in t.records) == 0, f"{lay} {name}: via slab")
    check.done()


def test_mean_along_rows_of_a_2x2_mesh_moves_a_few_percent():
    """The issue's row: ``dnp.mean(x, axis=1)`` on a 2x2 mesh moved half of the array."""
    a = sample((64, 64), "float64")
    for lay in ("mesh01", "cyc2"):
        x = make(a, lay)
        t = _traced(lambda x=x: dnp.mean(x, axis=1))
        total = default_comm().allreduce(t.bytes_sent, "sum")
        collective_assert(total <= a.nbytes // 16, f"{lay}: {total} B of {a.nbytes}")


# -- roll, diff, gradient ---------------------------------------------------------------

ROLLS = [(1, 0), (-2, 0), (3, -1), (13, 0), (0, 0), ((1, 2), (0, -1)), ((5, -4), (0, 0)),
         (3, None)]  # fmt: skip


def _rolls(ndim: int) -> list:
    if ndim == 1:
        return [(s, a) for s, a in ROLLS if a in (0, (0, 0), None)]
    return ROLLS


@pytest.mark.parametrize("shape", [(0, 5), (5, 0), (1, 1), (7, 5), (9,), (3, 4, 5)])
@pytest.mark.parametrize("dtype", ["int32", "float32", "complex128", "bool"])
def test_roll_equals_numpy_and_keeps_the_layout(dtype, shape):
    a = sample(shape, dtype)
    check = Checks()
    for lay in _names(len(shape)):
        x = make(a, lay)
        for shift, axis in _rolls(len(shape)):
            got = dnp.roll(x, shift, axis=axis)
            check.equal(got, np.roll(a, shift, axis=axis), None, f"{lay} roll {shift} {axis}")
            if axis is not None or len(shape) == 1:  # (the flattened order: a slab)
                check.true(got.distributor is x.distributor, f"{lay}: roll changed the layout")
    check.done()


def _moved(d, ax: int, s: int) -> int:
    """How many elements change rank when ``d``'s array rolls by ``s`` along ``ax``,
    counted at every rank that receives them (replicas included)."""
    n, total = d.global_shape[ax], 0
    for r in range(d.comm.size):
        box = d.region(r)
        held = {j for lo, hi in as_runs(box[ax]) for j in range(lo, hi)}
        foreign = sum((j - s) % n not in held for j in held)
        rest = 1
        for k, e in enumerate(box):
            if k != ax:
                rest *= sum(hi - lo for lo, hi in as_runs(e))
        total += foreign * rest
    return total


@pytest.mark.parametrize("lay", mesh_names(2))
def test_roll_moves_exactly_the_elements_that_change_rank(lay):
    """One exchange inside the mesh axis's sub-communicator: on block axes ``s`` slices per
    block boundary, on block-cyclic ones every element whose block changes owner (the
    minimum), never the slab equivalent."""
    a = sample((N, N), "float64")
    x = make(a, lay)
    for shift, ax in ((1, 0), (-3, 0), (2, 1), (N + 1, 1)):
        t = _traced(lambda s=shift, k=ax: dnp.roll(x, s, axis=k))
        got = default_comm().allreduce(t.bytes_received, "sum")
        want = _moved(x.distributor, ax, shift) * 8
        slab = sum(r.via_slab for r in t.records)
        # (the agreement on the arguments: a byte or two per rank)
        ok = slab == 0 and want <= got <= want + 16 * P
        collective_assert(ok, f"{lay} roll {shift} along {ax}: {got} B, {want} B move")


@pytest.mark.parametrize("shape", [(0, 5), (1, 1), (7, 5), (9,), (3, 4, 5)])
@pytest.mark.parametrize("dtype", ["int32", "float32", "complex128", "bool"])
def test_diff_and_gradient_equal_numpy(dtype, shape):
    a = sample(shape, dtype)
    check = Checks()
    rtol = 1e-5 if dtype == "float32" else 1e-12
    for lay in _names(len(shape)):
        x = make(a, lay)
        for n, axis in ((1, 0), (2, -1), (3, 0)):
            check.equal(dnp.diff(x, n, axis=axis), np.diff(a, n, axis=axis), None,
                        f"{lay} diff {n} {axis}")  # fmt: skip
        if dtype == "bool":
            continue
        for axis, edge in ((0, 1), (-1, 2)):
            if a.shape[axis] < edge + 1:
                continue
            want = np.gradient(a, 2.0, axis=axis, edge_order=edge)
            got = dnp.gradient(x, 2.0, axis=axis, edge_order=edge)
            check.equal(got, want, rtol, f"{lay} gradient {axis} {edge}")
    check.done()


@pytest.mark.parametrize("lay", ["mesh01", "mesh10", "meshrep"])
def test_diff_on_block_meshes_moves_boundary_slices(lay):
    a = sample((N, N), "float64")
    x = make(a, lay)
    for n, ax in ((1, 0), (2, 1)):
        t = _traced(lambda n=n, k=ax: dnp.diff(x, n, axis=k))
        got = default_comm().allreduce(t.bytes_sent, "sum")
        slab = sum(r.via_slab for r in t.records)
        # each order: one slice (at most N values) per rank and block boundary
        bound = n * P * N * 8 + 64 * P
        collective_assert(slab == 0 and got <= bound, f"{lay} diff {n} {ax}: {got} B")


# -- scans along block-cyclic axes ------------------------------------------------------


def _big_blocks(ndim: int) -> list:
    """Block-cyclic layouts whose blocks (at least twice the mesh extent) make the native
    scan cheaper than the slab equivalent."""
    half = (2, P // 2) if P % 2 == 0 else (P, 1)
    out = [d2o.layout(mesh=(P,), split=(0,), block=2 * P)]
    if ndim >= 2:
        out.append(d2o.layout(mesh=half, split=(1, 0), block=(4, 2 * max(half))))
        # rows in blocks, columns block-cyclic (small blocks: the slab equivalent at 4 ranks)
        out.append(d2o.layout(mesh=half, split=(0, 1), block=(None, 2)))
    return out


@pytest.mark.parametrize("shape", [(0, 3), (1, 1), (7, 5), (30, 4), (41,), (3, 9, 2)])
@pytest.mark.parametrize("dtype", ["int32", "float64", "complex128", "bool"])
def test_scans_along_block_cyclic_axes_equal_numpy(dtype, shape):
    a = sample(shape, dtype)
    check = Checks()
    for lay in _big_blocks(len(shape)):
        x = distributed_data_object(a, distribution_strategy=lay)
        for axis in range(len(shape)):
            for fn in ("cumsum", "cumprod"):
                want = getattr(np, fn)(a, axis=axis)
                check.equal(getattr(x, fn)(axis=axis), want, 1e-12 if dtype != "bool" else None,
                            f"{lay} {fn} {axis}")  # fmt: skip
                check.equal(getattr(dnp, fn)(x, axis=axis), want,
                            1e-12 if dtype != "bool" else None, f"{lay} dnp.{fn} {axis}")  # fmt: skip
        check.equal(np.add.accumulate(x, axis=0), np.add.accumulate(a, axis=0), 1e-12, "add")
    check.done()


def test_a_scan_along_a_block_cyclic_axis_moves_the_block_totals():
    """Each block scanned alone, then one Allgather of the blocks' last slices inside the
    mesh axis: (extent - 1) / block of the array in all, no slab equivalent."""
    b = 2 * P
    n = 8 * b
    a = sample((n, 6), "float64")
    x = distributed_data_object(a, distribution_strategy=d2o.layout(mesh=(P,), split=(0,), block=b))
    t = _traced(lambda: x.cumsum(axis=0))
    total = default_comm().allreduce(t.bytes_sent, "sum")
    slab = sum(r.via_slab for r in t.records)
    # every rank sends its blocks' last rows (padded to the most blocks a rank holds)
    bound = P * -(-(n // b) // P) * 6 * 8 + 16 * P
    collective_assert(slab == 0 and total <= bound, f"{total} B > {bound} B, {slab} via slab")
    assert_close = Checks()
    assert_close.equal(x.cumsum(axis=0), np.cumsum(a, axis=0), 1e-12, "cumsum")
    assert_close.done()
