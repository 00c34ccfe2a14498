"""The array API standard's signatures and special values that d2o.numpy adds to numpy's.

``sort``/``argsort`` take ``descending``, ``clip`` names its bounds ``min``/``max`` (and
still takes numpy's ``a_min``/``a_max``), ``from_dlpack`` takes ``device``/``copy``,
``std``/``var`` of 0-d arrays (NaN included), and complex ``expm1``'s special values
for non-finite input (C99's, as the standard lists them; numpy's own complex ``expm1``
gives NaNs there).  numpy is the oracle elsewhere, on every layout.
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


#: (input, the standard's result) for complex expm1 of non-finite input
SPECIAL = [
    (complex("inf+0j"), complex("inf+0j")),
    (complex("-inf+infj"), complex(-1, 0)),
    (complex("inf+infj"), complex("inf+nanj")),
    (complex("-inf+nanj"), complex(-1, 0)),
    (complex("inf+nanj"), complex("inf+nanj")),
    (complex("nan+0j"), complex("nan+0j")),
    (complex("-inf+0j"), complex(-1, 0)),
    (complex(-0.0, 0.0), complex(0, 0)),
]


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("strategy,axis", layouts(1))
@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_complex_expm1_special_values(strategy, axis, dtype):
    finite = sample((6,), "complex128").astype(dtype)
    z = np.concatenate([np.array([s for s, _ in SPECIAL], dtype), finite])
    x = make(z, strategy, axis)
    want = np.concatenate([np.array([r for _, r in SPECIAL], dtype), np.expm1(finite)])
    check = Checks()
    for what, got in [("dnp.expm1", dnp.expm1(x)), ("np.expm1", np.expm1(x))]:
        check.true(got.dtype == dtype, f"{what}: dtype {got.dtype}")
        check.equal(got, want, what=what)  # finite input: numpy's result, bit for bit
    out = make(np.zeros_like(z), strategy, axis)
    np.expm1(x, out=out)
    check.equal(out, want, what="out=")
    check.equal(dnp.expm1(x[1:]), want[1:], what="shifted view")
    check.done()


def test_expm1_of_real_and_0d_input_is_numpys():
    a = np.array([-np.inf, np.inf, np.nan, -1.0, 0.0, 2.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        check = Checks()
        check.equal(dnp.expm1(make(a, "equal")), np.expm1(a), what="real")
        z = make(np.asarray(complex("-inf+infj")), "not")
        check.equal(dnp.expm1(z), np.asarray(complex(-1, 0)), what="0-d")
        # the standard: expm1(-0+0j) is +0+0j (numpy's complex expm1 gives -0+0j)
        r = dnp.expm1(make(np.array([complex(-0.0, 0.0), complex(0.0, -0.0)]), "equal"))
        r = r.get_full_data()
        check.true(not np.signbit(r.real).any(), f"real parts {r.real}")
        check.true(list(np.signbit(r.imag)) == [False, True], f"imaginary parts {r.imag}")
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
