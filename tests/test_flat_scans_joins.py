"""Distributed algorithms for d2o.numpy cases that used to gather (issue 31, item 2).

Scans of the flattened array (``nancumsum``, ``nancumprod``, ``cumulative_sum``,
``cumulative_prod`` with ``include_initial``), ``diag``/``diagflat`` of 1-d input,
``block``, ``packbits``/``unpackbits`` with ``axis=None``, ``sort_complex`` and
``apply_over_axes``, against numpy on every layout, with trace assertions that nothing
is gathered (``gather='raise'``) and that the bytes moved stay small, and numpy's
exceptions on every rank for bad input.
"""

from __future__ import annotations

import numpy as np
import pytest
from _helpers import Checks, layouts, make, sample

import d2o
import d2o.numpy as dnp
from d2o import default_comm
from d2o.testing import assert_raises_everywhere, collective_assert

comm = default_comm()
P = comm.size

SHAPES = [(7,), (0,), (1,), (4, 3), (0, 3), (1, 1), (2, 3, 2)]
SCAN_DTYPES = ["bool", "int32", "int64", "float32", "float64", "complex128"]


def _rtol(dt) -> float | None:
    dt = np.dtype(dt)
    if dt.kind not in "fc":
        return None
    return 1e-4 if dt.itemsize <= 4 or dt == np.complex64 else 1e-11


def _no_gather(f, *args, **kwargs):
    """``f(*args, **kwargs)`` under ``gather='raise'``, traced: (result, largest bytes one rank sent)."""
    with d2o.options(gather="raise", check_args=False), d2o.trace() as t:
        res = f(*args, **kwargs)
    collective_assert(all(r.fallback is None for r in t.records), repr(t.records))
    return res, comm.allreduce(t.bytes_sent, "max")


def _with_nans(a: np.ndarray) -> np.ndarray:
    if a.dtype.kind in "fc" and a.size:
        a = a.copy()
        a.flat[::3] = np.nan
    return a


# -- scans of the flattened array and along an axis ----------------------------------------


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", SCAN_DTYPES)
def test_nan_scans_flat_and_along_axes(shape, dtype):
    a = _with_nans(sample(shape, dtype, seed=1))
    check = Checks()
    for strategy, axis in layouts(len(shape)):
        x = make(a, strategy, axis)
        for name in ("nancumsum", "nancumprod", "cumsum", "cumprod"):
            f, g = getattr(dnp, name), getattr(np, name)
            # (cumsum/cumprod along an axis are tested with the reductions)
            for ax in [None, *range(len(shape))] if name.startswith("nan") else [None]:
                res, _ = _no_gather(f, x, axis=ax)
                check.equal(res, g(a, axis=ax), _rtol(dtype), f"{name} {strategy} {axis} {ax}")
        dt = np.complex128 if dtype == "complex128" else np.float64
        check.equal(dnp.nancumsum(x, dtype=dt), np.nancumsum(a, dtype=dt), 1e-11, f"dt {strategy}")
    check.done()


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", SCAN_DTYPES)
def test_cumulative_sum_prod(shape, dtype):
    a = sample(shape, dtype, seed=2)
    check = Checks()
    for strategy, axis in layouts(len(shape)):
        x = make(a, strategy, axis)
        for name in ("cumulative_sum", "cumulative_prod"):
            f, g = getattr(dnp, name), getattr(np, name)
            axes = [None] if len(shape) == 1 else []
            for ax in axes + [*range(len(shape)), -1]:
                for init in (False, True):
                    res, _ = _no_gather(f, x, axis=ax, include_initial=init)
                    check.equal(res, g(a, axis=ax, include_initial=init), _rtol(dtype),
                                f"{name} {strategy} {axis} ax={ax} init={init}")  # fmt: skip
    check.done()


@pytest.mark.parametrize("strategy", ["equal", "freeform", "fftw"])
def test_flat_scan_moves_one_slice_per_rank(strategy):
    """A slab split along axis 0 scans its flattened pieces in place: one element per rank
    moves (the Allgather of the last ones), whatever the size."""
    a = sample((40, 5), "float64", seed=3)
    x = make(a, strategy, 0)
    for f, g in ((dnp.nancumsum, np.nancumsum), (dnp.cumsum, np.cumsum)):
        res, sent = _no_gather(f, x)
        collective_assert(sent <= 8 * max(P - 1, 0) * 2 + 64, f"{f.__name__}: {sent} bytes")
        check = Checks()
        check.equal(res, g(a), 1e-11)
        check.done()
    y = make(a[:, 0].copy(), strategy, 0)
    res, sent = _no_gather(dnp.cumulative_prod, y, include_initial=True)
    collective_assert(sent <= 8 * max(P - 1, 0) * 2 + 64, f"cumulative_prod: {sent} bytes")


def test_flat_scan_other_layouts_move_at_most_the_array_once():
    """Slabs split along another axis: one redistribution to a 1-d slab (never a gather)."""
    a = sample((6, 10), "int64", seed=4)
    for strategy, axis in [("equal", 1), ("freeform", 1), ("mesh01", 0), ("cyc2", 0)]:
        x = make(a, strategy, axis)
        res, sent = _no_gather(dnp.nancumsum, x)
        collective_assert(sent <= 2 * a.nbytes // max(P, 1) + 256, f"{strategy}: {sent}")
        check = Checks()
        check.equal(res, np.nancumsum(a))
        check.done()


def test_scan_bad_input_raises_everywhere():
    a = sample((4, 3), "float64")
    x = make(a, "equal", 0)
    for f in (dnp.cumulative_sum, dnp.cumulative_prod):
        assert_raises_everywhere(ValueError, f, x)  # axis required for 2-d input
        assert_raises_everywhere(np.exceptions.AxisError, f, x, axis=2)
    for f in (dnp.nancumsum, dnp.nancumprod):
        assert_raises_everywhere(np.exceptions.AxisError, f, x, axis=-3)
    assert_raises_everywhere(TypeError, dnp.unwrap, x, axis=None)
    check = Checks()
    check.equal(dnp.unwrap(x, axis=0), np.unwrap(a, axis=0), 1e-12)
    check.done()


def test_scans_of_plain_and_zero_d_input():
    a = np.arange(5.0)
    np.testing.assert_array_equal(dnp.nancumsum(a), np.nancumsum(a))
    np.testing.assert_array_equal(dnp.cumulative_sum(a, include_initial=True),
                                  np.cumulative_sum(a, include_initial=True))  # fmt: skip
    x = make(np.array(3.0), "equal")
    r = dnp.cumulative_sum(x, include_initial=True)
    np.testing.assert_array_equal(np.asarray(r.get_full_data()), [0.0, 3.0])


# -- diag / diagflat of a vector -------------------------------------------------------------

DIAG_DTYPES = ["bool", "int32", "float32", "float64", "complex128"]


@pytest.mark.parametrize("shape", [(7,), (0,), (1,), (3, 2)])
@pytest.mark.parametrize("dtype", DIAG_DTYPES)
def test_diag_diagflat_of_vectors(shape, dtype):
    a = sample(shape, dtype, seed=5)
    check = Checks()
    for strategy, axis in layouts(len(shape)):
        x = make(a, strategy, axis)
        for k in (0, 2, -3):
            res, _ = _no_gather(dnp.diagflat, x, k)
            check.equal(res, np.diagflat(a, k), None, f"diagflat {strategy} {axis} {k}")
            if len(shape) == 1:
                res, _ = _no_gather(dnp.diag, x, k=k)
                check.equal(res, np.diag(a, k), None, f"diag {strategy} {axis} {k}")
    check.done()


@pytest.mark.parametrize("strategy", ["equal", "fftw", "freeform"])
def test_diag_builds_rows_in_place(strategy):
    """The matrix is O(n^2) but only the vector's O(n) elements move (none when the
    vector's pieces already match the rows)."""
    a = sample((40,), "float64", seed=6)
    x = make(a, strategy)
    for k in (0, 3, -5):
        res, sent = _no_gather(dnp.diagflat, x, k)
        collective_assert(sent <= a.nbytes + 64, f"k={k}: {sent} bytes")
        if strategy == "equal" and k == 0:
            collective_assert(sent <= 64, f"k=0: {sent} bytes")
        collective_assert(res.distributor.axis == 0 and not res.distributor.replicated, "rows")
        check = Checks()
        check.equal(res, np.diagflat(a, k))
        check.done()
    r = np.diagflat(x)  # numpy's own function dispatches to d2o's
    check = Checks()
    check.equal(r, np.diagflat(a))
    check.done()


def test_diag_bad_input_raises_everywhere():
    x = make(sample((2, 2, 2), "float64"), "equal")
    assert_raises_everywhere(ValueError, dnp.diag, x)
    v = make(sample((5,), "float64"), "equal")
    assert_raises_everywhere(TypeError, dnp.diag, v, 1.5)
    assert_raises_everywhere(TypeError, dnp.diagflat, v, 1.5)


# -- packbits / unpackbits of the flattened array --------------------------------------------


@pytest.mark.parametrize("shape", [(13,), (0,), (1,), (3, 7), (2, 3, 2)])
@pytest.mark.parametrize("dtype", ["bool", "int32", "uint8", "int64"])
def test_packbits_flat(shape, dtype):
    a = sample(shape, dtype, seed=7)
    check = Checks()
    for strategy, axis in layouts(len(shape)):
        x = make(a, strategy, axis)
        for order in ("big", "little"):
            res, _ = _no_gather(dnp.packbits, x, bitorder=order)
            check.equal(res, np.packbits(a, bitorder=order), None, f"{strategy} {axis} {order}")
        if len(shape) > 1:
            check.equal(dnp.packbits(x, axis=1), np.packbits(a, axis=1), None, "axis=1")
    check.done()


@pytest.mark.parametrize("shape", [(5,), (0,), (1,), (3, 2), (2, 3, 2)])
def test_unpackbits_flat(shape):
    a = sample(shape, "int64", seed=8).astype(np.uint8) * 29
    check = Checks()
    for strategy, axis in layouts(len(shape)):
        x = make(a, strategy, axis)
        counts = [None, 0, 3, 200] + ([-5] if a.size else [])
        for count in counts:
            for order in ("big", "little"):
                res, _ = _no_gather(dnp.unpackbits, x, count=count, bitorder=order)
                want = np.unpackbits(a, count=count, bitorder=order)
                if not a.size:  # numpy leaves the padding of empty input uninitialized
                    want = np.zeros_like(want)
                check.equal(res, want, None, f"{strategy} {axis} {count} {order}")
    check.done()


@pytest.mark.parametrize("strategy", ["equal", "fftw", "freeform"])
def test_packbits_moves_at_most_seven_per_boundary(strategy):
    a = sample((1001,), "bool", seed=9)
    x = make(a, strategy)
    res, sent = _no_gather(dnp.packbits, x)
    collective_assert(sent <= 7 + 64, f"packbits: {sent} bytes")
    u = make(np.packbits(a), strategy)
    res2, sent = _no_gather(dnp.unpackbits, u, count=-3)
    collective_assert(sent <= 64, f"unpackbits: {sent} bytes")
    check = Checks()
    check.equal(res, np.packbits(a))
    check.equal(res2, np.unpackbits(np.packbits(a), count=-3))
    check.done()


def test_packbits_bad_input_raises_everywhere():
    x = make(sample((9,), "float64"), "equal")
    assert_raises_everywhere(TypeError, dnp.packbits, x)
    b = make(sample((9,), "bool"), "equal")
    assert_raises_everywhere(ValueError, dnp.packbits, b, bitorder="x")
    assert_raises_everywhere(TypeError, dnp.unpackbits, make(sample((3,), "int32"), "equal"))
    u = make(np.arange(3, dtype=np.uint8), "equal")
    assert_raises_everywhere(ValueError, dnp.unpackbits, u, count=-25)
    assert_raises_everywhere(ValueError, dnp.unpackbits, u, bitorder="x")


# -- block -----------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["int32", "float64", "complex128"])
def test_block(dtype):
    a = sample((4, 3), dtype, seed=10)
    b = sample((4, 2), dtype, seed=11)
    c = sample((1, 5), dtype, seed=12)
    v, w = sample((3,), dtype, seed=13), sample((0,), dtype, seed=14)
    check = Checks()
    for strategy, axis in layouts(2):
        x, y, z = make(a, strategy, axis), make(b, strategy, axis), make(c, strategy, axis)
        got, _ = _no_gather(dnp.block, [[x, y], [z]])
        check.equal(got, np.block([[a, b], [c]]), None, f"2x2 {strategy} {axis}")
        got, _ = _no_gather(dnp.block, [[x, b], [c]])  # numpy arrays mixed in
        check.equal(got, np.block([[a, b], [c]]), None, f"mixed {strategy} {axis}")
        got, _ = _no_gather(dnp.block, [[[x]], [[x]]])  # deeper than the arrays: 3-d
        check.equal(got, np.block([[[a]], [[a]]]), None, f"3-d {strategy} {axis}")
        check.equal(dnp.block(x), np.block(a), None, "bare")
    for strategy, axis in layouts(1):
        p, q = make(v, strategy, axis), make(w, strategy, axis)
        got, _ = _no_gather(dnp.block, [p, q, 1, p])
        check.equal(got, np.block([v, w, 1, v]), None, f"1-d {strategy}")
        got, _ = _no_gather(dnp.block, [[p], [v]])
        check.equal(got, np.block([[v], [v]]), None, f"1-d stacked {strategy}")
    check.done()


def test_block_bad_input_raises_everywhere():
    x = make(sample((4, 3), "float64"), "equal")
    assert_raises_everywhere(TypeError, dnp.block, ([x], [x]))
    assert_raises_everywhere(ValueError, dnp.block, [])
    assert_raises_everywhere(ValueError, dnp.block, [[x], x])
    assert_raises_everywhere(ValueError, dnp.block, [[x, make(sample((3, 3), "float64"), "equal")]])


# -- sort_complex, apply_over_axes -----------------------------------------------------------


@pytest.mark.parametrize("shape", [(7,), (0,), (1,), (4, 3)])
@pytest.mark.parametrize("dtype", ["bool", "int16", "int32", "float32", "float64", "complex128"])
def test_sort_complex(shape, dtype):
    a = sample(shape, dtype, seed=15)
    if dtype == "complex128" and a.size > 2:
        a.real[:2] = a.real[2]  # ties on the real part: the imaginary part decides
    check = Checks()
    for strategy, axis in layouts(len(shape))[:: 1 if len(shape) == 1 else 3]:
        x = make(a, strategy, axis)
        res, _ = _no_gather(dnp.sort_complex, x)
        check.equal(res, np.sort_complex(a), None, f"{strategy} {axis}")
    check.done()


def test_apply_over_axes():
    a = sample((2, 3, 4), "float64", seed=16)
    check = Checks()
    for strategy, axis in layouts(3):
        x = make(a, strategy, axis)
        for f, g in ((np.sum, np.sum), (dnp.mean, np.mean)):
            for axes in ([0, 2], -1, (1,)):
                res, _ = _no_gather(dnp.apply_over_axes, f, x, axes)
                check.equal(res, np.apply_over_axes(g, a, axes), 1e-12, f"{strategy} {axes}")
    check.done()
    x = make(a, "equal")
    assert_raises_everywhere(np.exceptions.AxisError, dnp.apply_over_axes, np.sum, x, [3])
