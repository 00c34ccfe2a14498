"""Property-based tests (Hypothesis, derandomized: every rank draws the same cases).

Broadcasting element-wise operations and reductions are checked against numpy
on random shapes, layouts, dtypes and axes.
"""

from __future__ import annotations

import warnings

import hypothesis.extra.numpy as hnp
import numpy as np
from _helpers import Checks, make, sample
from hypothesis import given
from hypothesis import strategies as st

from d2o import distributed_data_object

DTYPES = ["bool", "int64", "float64", "complex128", "float32", "uint64"]


@st.composite
def layout_for(draw, ndim):
    if ndim == 0:
        return ("equal", 0)
    strategy = draw(st.sampled_from(["not", "equal", "fftw", "freeform"]))
    return strategy, draw(st.integers(-ndim, ndim - 1))


@st.composite
def broadcast_case(draw):
    shapes = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3,
                                                    max_side=4))  # fmt: skip
    s1, s2 = shapes.input_shapes
    l1 = draw(layout_for(len(s1)))
    second = draw(st.sampled_from(["numpy", "d2o", "scalar"]))
    l2 = draw(layout_for(len(s2)))
    d1, d2 = draw(st.sampled_from(DTYPES)), draw(st.sampled_from(DTYPES))
    op = draw(st.sampled_from(["add", "multiply", "subtract", "maximum", "equal", "true_divide"]))
    return s1, s2, l1, l2, second, d1, d2, op, draw(st.integers(0, 99))


@given(broadcast_case())
def test_broadcasting_binary_ops(case):
    s1, s2, l1, l2, second, d1, d2, op, seed = case
    a = sample(s1, d1, seed)
    b = sample(s2, d2, seed + 1) if second != "scalar" else sample((), d2, seed + 1)[()]
    x = make(a, *l1)
    y = make(b, *l2) if second == "d2o" else b
    uf = getattr(np, op)
    check = Checks()
    with np.errstate(all="ignore"):
        try:
            expected = uf(a, b)
        except Exception as exc:
            expected = exc
        try:
            got = uf(x, y)
            got_r = uf(y, x)
        except Exception as exc:
            got = got_r = exc
    if isinstance(expected, Exception):
        check.true(isinstance(got, type(expected)), (case, expected, got))
    else:
        with np.errstate(all="ignore"):
            expected_r = uf(b, a)
        check.equal(got, expected, what=case)
        check.equal(got_r, expected_r, what=("reflected", case))
    check.done()


@st.composite
def reduction_case(draw):
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=5))
    layout = draw(layout_for(len(shape)))
    dtype = draw(st.sampled_from(DTYPES))
    name = draw(st.sampled_from(["sum", "prod", "max", "min", "mean", "var", "std", "all",
                                 "any", "argmax", "argmin", "cumsum", "nanmax"]))  # fmt: skip
    if name in ("argmax", "argmin", "cumsum"):
        axis = draw(st.one_of(st.none(), st.integers(-len(shape), len(shape) - 1)))
    else:
        axis = draw(st.one_of(st.none(), hnp.valid_tuple_axes(len(shape), min_size=1)))
    keepdims = draw(st.booleans()) if name != "cumsum" else False
    return shape, layout, dtype, name, axis, keepdims, draw(st.integers(0, 99))


@given(reduction_case())
def test_reductions(case):
    shape, layout, dtype, name, axis, keepdims, seed = case
    a = sample(shape, dtype, seed, positive=name == "prod")
    if name == "prod" and a.dtype.kind in "iu":
        a = (a % 3).astype(a.dtype)
    x = make(a, *layout)
    kw = {"axis": axis} if name == "cumsum" else {"axis": axis, "keepdims": keepdims}
    rtol = 1e-4 if dtype == "float32" else 1e-9
    if name not in ("mean", "var", "std") and dtype in ("bool", "int64", "uint64"):
        rtol = None
    check = Checks()
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            expected = getattr(np, name)(a, **kw)
        except Exception as exc:
            expected = exc
        try:
            got = getattr(np, name)(x, **kw)
        except Exception as exc:
            got = exc
    if isinstance(expected, Exception):
        check.true(isinstance(got, type(expected)), (case, expected, got))
    elif isinstance(expected, np.ndarray) and expected.ndim:
        check.equal(got, expected, rtol=rtol, what=case)
    else:
        ok = isinstance(got, np.generic) and np.asarray(got).dtype == np.asarray(expected).dtype
        check.true(ok, (case, type(got), expected))
        if ok:
            same = (np.array_equal(got, expected, equal_nan=True) if rtol is None
                    else np.allclose(got, expected, rtol=rtol, atol=rtol, equal_nan=True))  # fmt: skip
            check.true(same, (case, got, expected))
    check.done()


@given(st.integers(0, 40), st.sampled_from(["not", "equal", "fftw", "freeform"]))
def test_bincount_property(n, strategy):
    x = np.random.default_rng(n).integers(0, 7, n)
    check = Checks()
    check.equal(make(x, strategy).bincount(), np.bincount(x), what=(n, strategy))
    check.done()


def test_d2o_is_a_distributed_result_type():
    # guard: the property tests would be vacuous if ufuncs returned numpy arrays
    x = distributed_data_object(np.arange(3))
    assert isinstance(np.add(x, 1), distributed_data_object)
