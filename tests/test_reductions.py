"""Reductions and special methods against numpy, for every layout and dtype."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from _helpers import DTYPES, Checks, layouts, make, sample

import d2o
from d2o import distributed_data_object
from d2o.core.comm import RECORD_GATHER_MAX
from d2o.testing import assert_raises_everywhere, collective_assert

SHAPES = [(0,), (1,), (6,), (5, 3), (0, 3), (2, 3, 4)]
REDUCTIONS = ["sum", "prod", "max", "min", "amax", "amin", "all", "any", "mean", "var", "std",
              "nansum", "nanmax", "nanmin", "argmax", "argmin"]  # fmt: skip


def _axes(ndim):
    out = [None, 0, -1]
    if ndim == 2:
        out += [(0, 1)]
    if ndim >= 3:
        out += [(0, 2)]
    return out


# every dtype for the reductions with dtype-specific paths, a representative set for the rest
_ALL = {"sum", "max", "argmax", "mean", "nanmax"}
CASES = [(n, d) for n in REDUCTIONS for d in DTYPES
         if n in _ALL or d in ("int64", "float64", "complex128")
         or (n in ("all", "any") and d == "bool")]  # fmt: skip


def _call(obj, name, axis, keepdims):
    fn = getattr(np, name)
    kw = {"axis": axis}
    if keepdims:
        kw["keepdims"] = True
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            return fn(obj, **kw), None
        except Exception as exc:
            return None, type(exc)


def _same(check, got, expected, what, rtol):
    if isinstance(expected, np.ndarray) and expected.ndim:
        check.equal(got, expected, rtol=rtol, what=what)
        return
    ok = np.isscalar(got) or isinstance(got, np.generic)
    check.true(ok, (what, "expected a numpy scalar", type(got)))
    if not ok:
        return
    got_a, exp_a = np.asarray(got), np.asarray(expected)
    check.true(got_a.dtype == exp_a.dtype, (what, got_a.dtype, exp_a.dtype))
    if rtol is None:
        check.true(np.array_equal(got_a, exp_a, equal_nan=True), (what, got, expected))
    else:
        check.true(np.allclose(got_a, exp_a, rtol=rtol, atol=rtol, equal_nan=True),
                   (what, got, expected))  # fmt: skip


def _tolerance(name, dtype):
    if name in ("mean", "var", "std") and dtype != "float32":
        return 1e-10
    if name in ("mean", "var", "std", "sum", "nansum", "prod") and dtype in ("float32",):
        return 1e-4
    if name in ("mean", "var", "std", "sum", "nansum", "prod") and dtype.startswith(("float", "c")):
        return 1e-10
    return None


@pytest.mark.parametrize("name,dtype", CASES)
def test_reduction_matches_numpy(name, dtype):
    check = Checks()
    for shape in SHAPES:
        if name in ("prod",) and dtype in ("int32", "int64", "uint64") and len(shape) == 3:
            continue  # overflow ordering is not numpy's concern here
        a = sample(shape, dtype, positive=name == "prod")
        if name == "prod" and dtype.startswith("float"):
            a = (a / 10 + 1).astype(dtype)
        for strategy, axis in layouts(len(shape)):
            obj = make(a, strategy, axis)
            for ax in _axes(len(shape)):
                if name.startswith("arg") and isinstance(ax, tuple):
                    continue
                for keepdims in (False, True) if ax in (None, 0) else (False,):
                    expected, exc = _call(a, name, ax, keepdims)
                    got, got_exc = _call(obj, name, ax, keepdims)
                    what = (name, shape, strategy, axis, ax, keepdims)
                    if exc is not None:
                        check.true(got_exc is not None and issubclass(got_exc, exc),
                                   (what, exc, got_exc))  # fmt: skip
                        continue
                    check.true(got_exc is None, (what, got_exc))
                    if got_exc is None:
                        _same(check, got, expected, what, _tolerance(name, dtype))
    check.done()


def test_scalar_results_identical_on_every_rank(comm):
    a = sample((37, 5), "float64")
    for strategy, axis in layouts(2):
        obj = make(a, strategy, axis)
        for name in ("sum", "mean", "var", "std", "max", "argmin", "prod"):
            value = getattr(obj, name)()
            collective_assert(isinstance(value, np.generic), (name, type(value)))
            everywhere = comm.allgather(np.asarray(value).tobytes())
            collective_assert(len(set(everywhere)) == 1, (name, strategy, axis))


def test_nan_handling():
    a = np.array([[1.0, np.nan, 3.0], [np.nan, 5.0, -1.0], [2.0, 2.0, 2.0], [7.0, 0.5, 1.0]])
    check = Checks()
    for strategy, axis in layouts(2):
        obj = make(a, strategy, axis)
        for name in ("max", "min", "argmax", "argmin", "nanmax", "nanmin", "nansum", "sum"):
            for ax in (None, 0, 1):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    _same(check, getattr(np, name)(obj, axis=ax), getattr(np, name)(a, axis=ax),
                          (name, strategy, axis, ax), None)  # fmt: skip
    check.done()


def test_argmax_ties_take_first_index():
    a = np.array([[3, 1, 3], [3, 3, 0], [1, 3, 3]])
    check = Checks()
    for strategy, axis in layouts(2):
        obj = make(a, strategy, axis)
        for ax in (None, 0, 1):
            _same(check, obj.argmax(axis=ax), a.argmax(axis=ax), (strategy, axis, ax), None)
            _same(check, obj.argmin(axis=ax), a.argmin(axis=ax), (strategy, axis, ax), None)
    check.done()


def test_reduction_result_layouts():
    a = sample((6, 4), "float64")
    obj = distributed_data_object(a, distribution_strategy="equal", axis=0)
    collective_assert(obj.sum(axis=1).distribution_strategy == "equal")
    collective_assert(obj.sum(axis=1).axis == 0)
    collective_assert(obj.sum(axis=0).distribution_strategy == "not")
    obj = distributed_data_object(a, distribution_strategy="fftw", axis=1)
    collective_assert(obj.sum(axis=0).axis == 0 and obj.sum(axis=0).distribution_strategy == "fftw")


def test_large_result_uses_allreduce_path():
    from d2o.core import config as _config

    old = _config._SMALL_REDUCE
    _config._SMALL_REDUCE = 0
    try:
        a = sample((7, 5), "float64")
        check = Checks()
        for strategy, axis in layouts(2):
            obj = make(a, strategy, axis)
            for name in ("sum", "max", "min", "prod", "all", "any", "nanmax"):
                _same(check, getattr(obj, name)(axis=0), getattr(a, name)(axis=0)
                      if hasattr(a, name) else getattr(np, name)(a, axis=0),
                      (name, strategy, axis), 1e-12 if name in ("sum", "prod") else None)  # fmt: skip
            i = sample((7, 5), "int64")
            _same(check, make(i, strategy, axis).max(axis=0), i.max(axis=0), "int max", None)
        check.done()
    finally:
        _config._SMALL_REDUCE = old


@pytest.mark.parametrize("dtype", ["bool", "int32", "int64", "uint64", "float32", "complex128"])
def test_cumulative(dtype):
    check = Checks()
    for shape in [(0,), (1,), (7,), (5, 3), (0, 2), (2, 3, 2)]:
        a = sample(shape, dtype, positive=True)
        for strategy, axis in layouts(len(shape)):
            obj = make(a, strategy, axis)
            for ax in [None] + list(range(len(shape))):
                for name in ("cumsum", "cumprod"):
                    rtol = 1e-5 if dtype in ("float32", "complex128") else None
                    check.equal(getattr(obj, name)(axis=ax), getattr(a, name)(axis=ax), rtol=rtol,
                                what=(name, shape, strategy, axis, ax))  # fmt: skip
                check.equal(
                    np.cumsum(obj, axis=ax, dtype=np.float64),
                    np.cumsum(a, axis=ax, dtype=np.float64),
                    rtol=1e-12,
                    what="dtype",
                )
    check.done()


@pytest.mark.parametrize("n", [0, 1, 13])
def test_bincount(n):
    x = np.random.default_rng(n).integers(0, 9, n)
    w = np.linspace(-1, 1, n)
    check = Checks()
    for strategy in ("not", "equal", "fftw", "freeform"):
        obj = make(x, strategy)
        check.equal(obj.bincount(), np.bincount(x), what=strategy)
        check.equal(np.bincount(obj, minlength=12), np.bincount(x, minlength=12), what="minlength")
        check.equal(obj.bincount(weights=w), np.bincount(x, weights=w), rtol=1e-12, what="w")
        wd = distributed_data_object(w, distribution_strategy="fftw")
        check.equal(obj.bincount(weights=wd), np.bincount(x, weights=w), rtol=1e-12, what="wd")
    check.done()
    D = distributed_data_object
    assert_raises_everywhere(ValueError, D(np.array([1, -1, 2])).bincount)
    assert_raises_everywhere(TypeError, D(np.array([1.0, 2.0])).bincount)
    assert_raises_everywhere(ValueError, D(np.zeros((2, 2), int)).bincount)


def test_bincount_moves_one_record_and_the_counts():
    """On every layout: one 96-byte record agrees on errors and the length (gathered, the
    same 96 bytes, up to RECORD_GATHER_MAX ranks), one Allreduce combines the counts;
    nothing else moves, meshes included (one replica of each element counts)."""
    x = np.random.default_rng(3).integers(0, 9, 40)
    check = Checks()
    for strategy, axis in layouts(1):
        obj = make(x, strategy, axis)
        with d2o.options(check_args=False), d2o.trace() as t:
            got = obj.bincount()
        check.equal(got, np.bincount(x), what=strategy)
        kinds = [c[1] for c in t.calls]
        size = obj.distributor.comm.size
        record = "Allgather" if size <= RECORD_GATHER_MAX[0] else "Allreduce"  # fixed size
        want = [] if size == 1 or strategy == "not" else [record, "Allreduce"]
        check.true(kinds == want, (strategy, t.calls))
        check.true(not any(r.via_slab or r.fallback for r in t.records), (strategy, t.records))
        check.true(sum(c[3] for c in t.calls) <= 96 * size + 2 * 8 * 9, (strategy, t.calls))
    check.done()


@pytest.mark.parametrize("dtype", ["bool", "int64", "float64", "complex128"])
def test_unique_where_nonzero(dtype):
    check = Checks()
    for shape in [(0,), (1,), (9,), (4, 3), (0, 3), (2, 3, 2)]:
        a = sample(shape, dtype)
        if dtype != "bool":
            a = (a.real.astype(np.int64) % 3).astype(dtype)
        for strategy, axis in layouts(len(shape)):
            obj = make(a, strategy, axis)
            check.equal(np.unique(obj), np.unique(a), what=("unique", shape, strategy, axis))
            for got, exp in zip(np.nonzero(obj), np.nonzero(a)):
                check.equal(got, exp, what=("nonzero", shape, strategy, axis))
            for got, exp in zip(np.where(obj), np.where(a)):
                check.equal(got, exp, what=("where1", shape, strategy, axis))
            check.equal(np.where(obj, obj, -1), np.where(a, a, -1), what="where3")
            check.equal(np.where(a, 1, obj), np.where(a, 1, a), what="where3 np cond")
            check.equal(obj.isnan(), np.isnan(a), what="isnan")
            check.equal(obj.isfinite(), np.isfinite(a), what="isfinite")
            check.equal(obj.isinf(), np.isinf(a), what="isinf")
    check.done()


@pytest.mark.parametrize("dtype", ["int64", "float64", "complex128"])
def test_vdot(dtype):
    a = sample((5, 3), dtype)
    b = sample((5, 3), dtype, seed=7)
    check = Checks()
    for s1, ax1 in layouts(2):
        for s2, ax2 in layouts(2):
            got = np.vdot(make(a, s1, ax1), make(b, s2, ax2))
            _same(check, got, np.vdot(a, b), (s1, ax1, s2, ax2), 1e-12)
        _same(check, np.vdot(make(a, s1, ax1), b), np.vdot(a, b), "numpy operand", 1e-12)
    check.done()


def test_reduction_errors_match_numpy():
    obj = distributed_data_object(np.zeros((0, 3)))
    assert_raises_everywhere(ValueError, obj.max)
    assert_raises_everywhere(ValueError, obj.argmin, axis=0)
    assert_raises_everywhere(np.exceptions.AxisError, obj.sum, axis=2)
    assert_raises_everywhere(ValueError, obj.sum, axis=(0, 0))
    obj = distributed_data_object(np.ones((4, 3)))
    assert_raises_everywhere(TypeError, obj.max, dtype=np.float32)
    res = obj.max(axis=0, initial=5.0).get_full_data()
    collective_assert(np.array_equal(res, np.full(3, 5.0)))


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "complex128"])
def test_median_of_an_empty_array_is_numpys_nan(dtype):
    """numpy's median of nothing: NaN, and for complex input NaN in both parts."""
    a = np.array([], dtype=dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want = np.median(a)
        got = distributed_data_object(a).median()
    collective_assert(np.asarray(got).dtype == np.asarray(want).dtype, (got, want))
    collective_assert(np.isnan(got.real) and np.isnan(got.imag) == np.isnan(want.imag), got)
