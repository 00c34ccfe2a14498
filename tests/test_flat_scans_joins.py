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
            for ax in [None, *range(len(shape))]:
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
            for ax in axes + list(range(-len(shape), len(shape))):
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
