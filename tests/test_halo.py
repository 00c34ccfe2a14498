"""Shifted slab operands (stencils): element-wise operations and assignments between views
cut differently move boundary rows point to point and never copy an operand whole; the
results are numpy's, on every slab layout, split axis, dtype and tiny shape (ranks
holding nothing included)."""

from __future__ import annotations

import numpy as np
import pytest
from _helpers import Checks, freeform_lengths, layouts, make, sample, spy_sends

import d2o
from d2o import default_comm
from d2o.testing import assert_equal_to_numpy, collective_assert

P = default_comm().size
SLABS = [("equal", 0), ("fftw", 0), ("freeform", 0), ("equal", 1), ("freeform", 1)]


def _cut(axis: int, sl: slice, ndim: int = 2) -> tuple:
    return (slice(None),) * axis + (sl,) + (slice(None),) * (ndim - axis - 1)


@pytest.mark.parametrize("strategy,axis", SLABS)
@pytest.mark.parametrize("n", [0, 1, 3, 7, 12])
def test_shifted_sum_against_numpy(strategy, axis, n):
    A = sample((n + 2, 5) if axis == 0 else (5, n + 2), "float64", seed=n)
    a = make(A, strategy, axis)
    lo, hi, mid = _cut(axis, slice(None, -2)), _cut(axis, slice(2, None)), _cut(axis, slice(1, -1))
    assert_equal_to_numpy(a[lo] + a[hi], A[lo] + A[hi])
    assert_equal_to_numpy(a[lo] - 2 * a[hi] * a[mid], A[lo] - 2 * A[hi] * A[mid])
    assert_equal_to_numpy(np.maximum(a[hi], a[lo]), np.maximum(A[hi], A[lo]))


@pytest.mark.parametrize("dtype", ["bool", "int32", "uint64", "float32", "complex128"])
@pytest.mark.parametrize("strategy", ["equal", "freeform"])
def test_shifted_operands_keep_numpy_dtypes(dtype, strategy):
    A = sample((11, 3), dtype, seed=3, positive=True)
    a = make(A, strategy)
    for r, R in [(a[:-3] * a[3:], A[:-3] * A[3:]), (a[1:] == a[:-1], A[1:] == A[:-1])]:
        assert_equal_to_numpy(r, R)
        collective_assert(r.dtype == R.dtype, (r.dtype, R.dtype))
    if dtype not in ("bool", "complex128"):
        q, m = np.divmod(a[2:], a[:-2] + 1)  # two outputs, segment by segment
        Q, M = np.divmod(A[2:], A[:-2] + 1)
        assert_equal_to_numpy(q, Q)
        assert_equal_to_numpy(m, M)


@pytest.mark.parametrize("strategy", ["equal", "fftw", "freeform"])
def test_shifted_operand_broadcast_and_out(strategy):
    A = sample((10, 4), "float64", seed=5)
    B = sample((4,), "float64", seed=6)
    a = make(A, strategy)
    assert_equal_to_numpy(a[1:] * B + a[:-1], A[1:] * B + A[:-1])
    c = make(np.zeros((9, 4)), strategy)
    np.add(a[1:], a[:-1], out=c)  # out on a third layout
    assert_equal_to_numpy(c, A[1:] + A[:-1])
    v = a[1:]
    w = a[:-1]
    res = np.multiply(w, v, out=v)  # the output is the shifted input's own memory
    A[1:] = A[:-1] * A[1:]
    collective_assert(res is v, "out= must return the output array")
    assert_equal_to_numpy(a, A)


@pytest.mark.parametrize("strategy", ["equal", "fftw", "freeform"])
def test_in_place_on_overlapping_views(strategy):
    A = sample((13, 3), "int64", seed=7)
    a = make(A, strategy)
    v = a[1:]
    v += a[:-1]  # reads rows that the write changes: numpy reads them first
    A[1:] += A[:-1]
    assert_equal_to_numpy(a, A)


@pytest.mark.parametrize("strategy,axis", SLABS)
@pytest.mark.parametrize("n", [1, 4, 9])
def test_shifted_assignment(strategy, axis, n):
    A = sample((n + 2, 4) if axis == 0 else (4, n + 2), "float64", seed=n)
    B = A * 3
    a = make(A, strategy, axis)
    b = make(B, strategy, axis)
    lo, hi, mid = _cut(axis, slice(None, -2)), _cut(axis, slice(2, None)), _cut(axis, slice(1, -1))
    a[mid] = b[lo] + b[hi]
    A[mid] = B[lo] + B[hi]
    assert_equal_to_numpy(a, A)
    a[hi] = a[lo]  # the value overlaps the target in memory
    A[hi] = A[lo].copy()
    assert_equal_to_numpy(a, A)
    a[_cut(axis, slice(None, None, -1))] = b[_cut(axis, slice(None, None, -1))]
    assert_equal_to_numpy(a, B)


def test_stepped_assignment_from_shifted_value():
    A = sample((15, 2), "float64", seed=9)
    a = make(A, "freeform")
    a[::2] = a[1:9] * 2
    A[::2] = A[1:9] * 2
    assert_equal_to_numpy(a, A)


def test_3d_shift_along_the_split_axis():
    U = sample((6, 5, 4), "float64", seed=11)
    u = make(U, "equal")
    u[1:-1] = u[:-2] + u[2:] - u[1:-1, None, 0]
    U[1:-1] = U[:-2] + U[2:] - U[1:-1, None, 0]
    assert_equal_to_numpy(u, U)


@pytest.mark.parametrize("strategy", ["equal", "fftw", "freeform"])
def test_shifted_operands_move_boundary_rows_only(strategy, monkeypatch):
    n, m = 24, 6
    A = sample((n, m), "float64", seed=2)
    a = make(A, strategy)
    seen = spy_sends(monkeypatch)
    with d2o.options(check_args=False), d2o.trace() as t:
        r = a[:-2] + a[2:]
        a[1:-1] = r
    seen = list(seen)
    A[1:-1] = A[:-2] + A[2:]
    assert_equal_to_numpy(a, A)
    me = default_comm().rank
    collective_assert(all(kind == "Sendrecv" for kind, _ in seen), f"{seen}")
    collective_assert(all(p <= {me - 1, me + 1} for _, p in seen), f"peers {seen}")
    # at most two rows to each neighbour for the sum, one row each way for the assignment
    sent = sum(call[2] for call in t.calls if call[1] == "Sendrecv")
    collective_assert(sent <= (2 * 2 + 2) * m * 8, f"{sent} bytes")


def test_one_row_arrays_cut_differently():
    """Extent 1 along the split axis: a shifted operand meets operands that broadcast."""
    A = sample((1, 3), "float64", seed=1)
    a = make(A, "freeform")
    b = make(A * 2, "equal")
    assert_equal_to_numpy(a + b + A, A + 2 * A + A)
    out = make(np.zeros((1, 3)), "equal")
    np.subtract(a, b, out=out)
    assert_equal_to_numpy(out, A - 2 * A)


# -- neighbour functions along the split axis: boundary rows only ---------------------


@pytest.mark.parametrize("dtype", ["int64", "uint64", "float32", "float64", "complex128"])
@pytest.mark.parametrize("strategy", ["equal", "fftw", "freeform"])
def test_diff_and_gradient_along_the_split_axis(dtype, strategy):
    import d2o.numpy as dnp

    A = sample((13, 4), dtype, seed=4)
    a = make(A, strategy)
    for n in (1, 2, 3):
        r = dnp.diff(a, n=n, axis=0)
        assert_equal_to_numpy(r, np.diff(A, n=n, axis=0))
        collective_assert(r.dtype == np.diff(A, n=n, axis=0).dtype, r.dtype)
    for edge in (1, 2):
        for h in (1.0, 0.5):
            g = dnp.gradient(a, h, axis=0, edge_order=edge)
            G = np.gradient(A, h, axis=0, edge_order=edge)
            collective_assert(g.dtype == G.dtype, (g.dtype, G.dtype))
            assert_equal_to_numpy(g, G, rtol=1e-6 if dtype == "float32" else 1e-13)
    gs = dnp.gradient(a)  # both axes: the split one by halos, the other locally
    for g, G in zip(gs, np.gradient(A)):
        assert_equal_to_numpy(g, G, rtol=1e-6 if dtype == "float32" else 1e-13)


def test_diff_and_gradient_move_boundary_rows_only(monkeypatch):
    import d2o.numpy as dnp

    n, m = 200, 6  # the whole array is 25 times the bound below
    A = sample((n, m), "float64", seed=8)
    a = make(A, "equal")
    seen = spy_sends(monkeypatch)
    with d2o.options(check_args=False), d2o.trace() as t:
        d = dnp.diff(a, axis=0)
        g = dnp.gradient(a, axis=0)
    seen = list(seen)
    assert_equal_to_numpy(d, np.diff(A, axis=0))
    assert_equal_to_numpy(g, np.gradient(A, axis=0), rtol=1e-13)
    me = default_comm().rank
    collective_assert(all(p <= {me - 1, me + 1} for k, p in seen if k == "Sendrecv"), f"{seen}")
    row = m * 8
    # diff: one row; gradient: two for the interior, one for the assignment, and the
    # edge rows (a few rows each) to their owners
    sent = sum(c[2] for c in t.calls)
    collective_assert(sent <= 16 * row + 512, f"{sent} bytes for rows of {row}")


@pytest.mark.parametrize("strategy,axis", SLABS)
@pytest.mark.parametrize("shift", [0, 1, -2, 5, 13, 40])
def test_roll_along_the_split_axis(strategy, axis, shift):
    import d2o.numpy as dnp

    A = sample((13, 4) if axis == 0 else (4, 13), "int64", seed=shift % 7)
    a = make(A, strategy, axis)
    assert_equal_to_numpy(dnp.roll(a, shift, axis=axis), np.roll(A, shift, axis=axis))
    both = dnp.roll(a, (shift, 1, -3), axis=(axis, 1 - axis, axis))  # summed per axis
    assert_equal_to_numpy(both, np.roll(A, (shift, 1, -3), axis=(axis, 1 - axis, axis)))
    E = np.zeros((0, 3))
    assert_equal_to_numpy(dnp.roll(make(E, strategy), shift, axis=0), np.roll(E, shift, axis=0))


def test_roll_moves_the_crossing_rows_only(monkeypatch):
    import d2o.numpy as dnp

    n, m = 200, 6
    A = sample((n, m), "float64", seed=9)
    a = make(A, "equal")
    seen = spy_sends(monkeypatch)
    with d2o.options(check_args=False), d2o.trace() as t:
        r = dnp.roll(a, 2, axis=0)
    seen = list(seen)
    assert_equal_to_numpy(r, np.roll(A, 2, axis=0))
    me, P_ = default_comm().rank, default_comm().size
    ring = {(me - 1) % P_, (me + 1) % P_} - {me}
    collective_assert(all(k == "Sendrecv" and p <= ring for k, p in seen), f"{seen}")
    sent = sum(c[2] for c in t.calls if c[1] == "Sendrecv")  # besides 1-byte agreements
    collective_assert(sent == (2 * m * 8 if P_ > 1 else 0), f"{sent} bytes")


@pytest.mark.parametrize("shift", [0, 1, -2, 5, 13, (1, 2)])
def test_roll_without_axis_against_numpy(shift):
    """``axis=None`` rolls the flattened array, on every layout (issue 28)."""
    import d2o.numpy as dnp

    check = Checks()
    for shape in [(7,), (0,), (1,), (5, 3), (0, 2), (3, 2, 2)]:
        A = sample(shape, "int64", seed=len(shape))
        for strategy, axis in layouts(len(shape)):
            r = dnp.roll(make(A, strategy, axis), shift)
            check.equal(r, np.roll(A, shift), what=f"{shape} {strategy} axis {axis}")
    check.done()


def _piece_lengths(strategy: str, n: int, p: int) -> list[int]:
    """The slab rules, written out independently of d2o."""
    if strategy == "freeform":
        return freeform_lengths(n, p)
    if strategy == "fftw":
        block = -(-n // p)
        return [max(0, min(block, n - r * block)) for r in range(p)]
    return [n // p + (1 if r < n % p else 0) for r in range(p)]


@pytest.mark.parametrize("strategy", ["equal", "fftw", "freeform"])
@pytest.mark.parametrize("shift", [1, -3, 11])
def test_roll_without_axis_moves_boundary_elements_only(strategy, shift):
    """A 1-d roll with ``axis=None`` is ``axis=0``: no fallback, and each rank sends (and
    receives) exactly the elements whose owner changes, point to point; N-d slabs split
    along axis 0 roll their flattened pieces the same way."""
    import d2o.numpy as dnp

    comm = default_comm()
    me, p = comm.rank, comm.size
    for shape in [(23,), (9, 2)]:
        A = sample(shape, "float64", seed=shift % 5)
        a = make(A, strategy)
        with d2o.options(check_args=False), d2o.trace() as t:
            r = dnp.roll(a, shift)
        assert_equal_to_numpy(r, np.roll(A, shift))
        row = int(np.prod(shape[1:]))
        bounds = np.cumsum([0] + _piece_lengths(strategy, shape[0], p)) * row
        n = A.size
        new = np.arange(n)
        new_owner = np.searchsorted(bounds, new, side="right") - 1
        old_owner = np.searchsorted(bounds, (new - shift) % n, side="right") - 1
        sent = int(np.sum((old_owner == me) & (new_owner != me))) * 8
        got = int(np.sum((new_owner == me) & (old_owner != me))) * 8
        rec = t.records[-1] if t.records else None  # (one record: checked below)
        moved = [c for c in t.calls if c[1] == "Sendrecv"]
        other = [c for c in t.calls if c[1] != "Sendrecv"]
        collective_assert(
            len(t.records) == 1 and rec.fallback is None and rec.gathers == 0
            and sum(c[2] for c in moved) == sent and sum(c[3] for c in moved) == got
            and all(c[2] <= 1 for c in other),  # besides the data: one-byte agreements
            f"{shape}: {rec}, {t.calls}; expected {sent} bytes sent, {got} received",
        )  # fmt: skip


@pytest.mark.parametrize("mesh", [None, "square"])
def test_mesh_stencil_moves_boundary_cells_point_to_point(mesh, monkeypatch):
    """On a 2-d process mesh the shifted views of a 5-point stencil take their boundary
    cells from the mesh neighbours point to point (no operand copied whole)."""
    if mesh == "square" and P != 4:
        pytest.skip("a 2 x 2 mesh needs 4 ranks")
    lay = d2o.layout(None if mesh is None else (2, 2), (0, 1))
    U = sample((20, 18), "float64", seed=12)
    u = d2o.distributed_data_object(U, distribution_strategy=lay)
    seen = spy_sends(monkeypatch)
    with d2o.options(check_args=False):
        u[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])
    seen = list(seen)
    U[1:-1, 1:-1] = 0.25 * (U[:-2, 1:-1] + U[2:, 1:-1] + U[1:-1, :-2] + U[1:-1, 2:])
    assert_equal_to_numpy(u, U)
    d = u.distributor
    here = np.array(d.coords_of(default_comm().rank))
    far = {r for r in range(P) if np.abs(np.array(d.coords_of(r)) - here).max() > 1}
    collective_assert(all(k == "Sendrecv" and not p & far for k, p in seen), f"{seen}")


# -- property: any two windows of one array, any slab layout -------------------------

from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_UFUNCS = [np.add, np.subtract, np.multiply, np.maximum, np.hypot]


@st.composite
def _windows(draw):
    """An array, its layout, and two equally long windows along the split axis (with
    steps), plus a ufunc, an output window and an in-place flag."""
    n = draw(st.integers(1, 12))
    m = draw(st.integers(1, 3))
    axis = draw(st.integers(0, 1))
    strategy = draw(st.sampled_from(["equal", "fftw", "freeform"]))
    step = draw(st.sampled_from([1, 1, 2, -1]))
    length = draw(st.integers(0, max(0, (n - 1) // abs(step) + 1)))
    span = (length - 1) * abs(step) + 1 if length else 0

    def window():
        start = draw(st.integers(0, n - span))
        if not length:
            return slice(start, start, step)
        if step > 0:
            return slice(start, start + span, step)
        return slice(start + span - 1, start - 1 if start else None, step)

    return n, m, axis, strategy, window(), window(), window(), draw(st.sampled_from(_UFUNCS))


@given(_windows())
def test_two_windows_against_numpy(case):
    n, m, axis, strategy, w1, w2, w3, ufunc = case
    A = sample((n, m) if axis == 0 else (m, n), "float64", seed=n)
    a = make(A, strategy, axis)
    s1, s2, s3 = (_cut(axis, w) for w in (w1, w2, w3))
    assert_equal_to_numpy(ufunc(a[s1], a[s2]), ufunc(A[s1], A[s2]), rtol=1e-15)
    a[s3] = ufunc(a[s1], a[s2])  # the value may overlap the target
    A[s3] = ufunc(A[s1], A[s2])
    assert_equal_to_numpy(a, A, rtol=1e-15)
    v = a[s1]
    v += a[s2]  # in place on a window that the other one may overlap
    A[s1] += A[s2]
    assert_equal_to_numpy(a, A, rtol=1e-15)
