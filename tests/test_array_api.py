"""The array API standard's signatures and special values that d2o.numpy adds to numpy's.

``sort``/``argsort`` take ``descending``, ``clip`` names its bounds ``min``/``max`` (and
still takes numpy's ``a_min``/``a_max``), ``from_dlpack`` takes ``device``/``copy``,
and ``std``/``var`` of 0-d arrays (NaN included).  numpy is the oracle elsewhere, on
every layout: complex ``expm1`` of non-finite input keeps numpy's values where the
standard lists C99's.
"""

from __future__ import annotations

import inspect
import warnings

import numpy as np
import pytest
from _helpers import Checks, layouts, make, sample

import d2o.numpy as dnp
from d2o import distributed_data_object as D2O
from d2o.testing import collective_assert


def test_signatures_name_the_standards_parameters():
    for name in ("sort", "argsort"):
        params = inspect.signature(getattr(dnp, name)).parameters
        assert {"axis", "descending", "stable", "kind", "order"} <= set(params)
    params = list(inspect.signature(dnp.clip).parameters)
    assert params[:4] == ["a", "min", "max", "out"] and {"a_min", "a_max"} <= set(params)
    params = inspect.signature(dnp.from_dlpack).parameters
    assert {"device", "copy", "dist"} <= set(params)


@pytest.mark.parametrize("strategy,axis", layouts(2))
@pytest.mark.parametrize("dtype", ["int64", "float64"])
def test_clip_takes_numpys_and_the_standards_names(strategy, axis, dtype):
    a = sample((5, 3), dtype)
    x = make(a, strategy, axis)
    check = Checks()
    for args, kw in [
        ((-2, 3), {}),
        ((), {"a_min": -2, "a_max": 3}),
        ((), {"min": -1}),
        ((), {"max": 2}),
        ((None, 4), {}),
        ((), {"min": -3, "max": 5}),
    ]:
        check.equal(dnp.clip(x, *args, **kw), np.clip(a, *args, **kw), what=f"{args} {kw}")
    out = make(np.zeros_like(a), strategy, axis)
    res = dnp.clip(x, -1, 1, out)
    check.true(res is out, "clip(x, lo, hi, out) returns out")
    check.equal(out, np.clip(a, -1, 1), what="out")
    check.done()


def test_clip_refuses_both_names_as_numpy_does():
    x = make(np.arange(6.0), "equal")
    with pytest.raises(ValueError):
        np.clip(np.arange(6.0), a_min=1, a_max=2, min=0)
    with pytest.raises(ValueError):
        dnp.clip(x, a_min=1, a_max=2, min=0)


@pytest.mark.parametrize("strategy,axis", layouts(1))
def test_sort_and_argsort_descending(strategy, axis):
    a = sample((9,), "int64")
    x = make(a, strategy, axis)
    check = Checks()
    want = np.flip(np.sort(a, stable=True))
    check.equal(dnp.sort(x, descending=True), want, what="sort")
    # stable: equal keys keep their order
    idx = np.flip(np.argsort(np.flip(a), stable=True))
    check.equal(dnp.argsort(x, descending=True, stable=True), len(a) - 1 - idx, what="argsort")
    check.equal(dnp.sort(x, axis=0, kind="stable"), np.sort(a, axis=0, kind="stable"))
    check.done()


@pytest.mark.parametrize("strategy", ["not", "equal"])
@pytest.mark.parametrize(
    "value", [np.float64("nan"), np.float32(2.5), np.complex128(1 - 2j), np.int64(3)]
)
def test_std_and_var_of_0d_arrays(strategy, value):
    x = make(np.asarray(value), strategy)
    for f in ("std", "var"):
        got = getattr(dnp, f)(x)
        got = got.get_full_data() if isinstance(got, D2O) else got
        want = getattr(np, f)(np.asarray(value))
        ok = np.asarray(got).dtype == want.dtype and np.array_equal(got, want, equal_nan=True)
        collective_assert(ok, f"{f}({value!r}) = {got!r}, numpy {want!r}")


#: complex expm1 of non-finite and zero input: numpy's values stay d2o's (the standard asks
#: C99's here, e.g. -1+0j for -inf+infj where numpy gives nan+nanj; numpy is the oracle)
SPECIAL = [complex("inf+0j"), complex("-inf+infj"), complex("inf+infj"), complex("-inf+nanj"),
           complex("inf+nanj"), complex("nan+0j"), complex("-inf+0j"), complex(-0.0, 0.0)]  # fmt: skip


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("strategy,axis", layouts(1))
@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_complex_expm1_is_numpys(strategy, axis, dtype):
    z = np.concatenate([np.array(SPECIAL, dtype), sample((6,), "complex128").astype(dtype)])
    x = make(z, strategy, axis)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want = np.expm1(z)
        check = Checks()
        for what, got in [("dnp.expm1", dnp.expm1(x)), ("np.expm1", np.expm1(x))]:
            got = got.get_full_data()
            same = got.dtype == want.dtype and np.array_equal(got, want, equal_nan=True)
            same = same and np.array_equal(np.signbit(got.real), np.signbit(want.real))
            check.true(same, f"{what}: {got} against numpy's {want}")
        check.done()


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_numpy_data_keeps_numpys_expm1():
    z = np.array([complex("-inf+infj")])
    check = Checks()
    check.true(np.isnan(dnp.expm1(z)).all(), "numpy input: numpy's own result")
    check.done()


def test_from_dlpack_takes_device_and_copy():
    a = np.arange(7.0)
    check = Checks()
    check.equal(dnp.from_dlpack(a, copy=True), a, what="copy")
    check.equal(dnp.from_dlpack(a, device="cpu"), a, what="device")
    check.equal(dnp.from_dlpack(a, dist="not"), a, what="dist")
    check.done()
