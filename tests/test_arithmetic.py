"""Operators and ufuncs against numpy, for every layout, dtype and operand kind."""

from __future__ import annotations

import operator

import numpy as np
import pytest
from _helpers import DTYPES, Checks, layouts, make, sample

from d2o import distributed_data_object
from d2o.testing import assert_equal_to_numpy, assert_raises_everywhere, collective_assert

BINARY = [
    operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv,
    operator.mod, operator.pow, operator.and_, operator.or_, operator.xor,
    operator.lshift, operator.rshift,
    operator.lt, operator.le, operator.eq, operator.ne, operator.gt, operator.ge,
]  # fmt: skip
INPLACE = [
    operator.iadd,
    operator.isub,
    operator.imul,
    operator.itruediv,
    operator.ifloordiv,
    operator.imod,
    operator.ipow,
    operator.iand,
    operator.ior,
    operator.ixor,
]
UNARY = [operator.neg, operator.pos, abs, operator.invert]


def _outcome(fn, *args):
    """numpy's result, or the exception type it raises."""
    with np.errstate(all="ignore"):
        try:
            return fn(*args), None
        except Exception as exc:
            return None, type(exc)


def _check(check, fn, d_args, n_args):
    expected, exc = _outcome(fn, *n_args)
    got, got_exc = _outcome(fn, *d_args)
    what = f"{fn.__name__}{[type(x).__name__ for x in d_args]}"
    if exc is not None:
        check.true(got_exc is not None and issubclass(got_exc, exc), (what, exc, got_exc))
        return
    check.true(got_exc is None, (what, got_exc))
    if got_exc is None:
        check.equal(got, expected, what=what)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", BINARY, ids=lambda f: f.__name__)
def test_binary_with_scalars_and_self(op, dtype):
    a = sample((5, 3), dtype, positive=True)
    b = sample((5, 3), dtype, seed=1, positive=True)
    check = Checks()
    for strategy, axis in layouts(2):
        obj = make(a, strategy, axis)
        other = obj.copy_empty()
        other.set_full_data(b)
        _check(check, op, (obj, other), (a, b))
        _check(check, op, (obj, b), (a, b))
        for scalar in (2, 1.5, True):
            _check(check, op, (obj, scalar), (a, scalar))
            _check(check, op, (scalar, obj), (scalar, a))
    check.done()


@pytest.mark.parametrize("dtype", ["int64", "float64", "complex128", "bool"])
@pytest.mark.parametrize("op", UNARY, ids=lambda f: f.__name__)
def test_unary(op, dtype):
    a = sample((4, 3), dtype)
    check = Checks()
    for strategy, axis in layouts(2):
        _check(check, op, (make(a, strategy, axis),), (a,))
    check.done()


@pytest.mark.parametrize("dtype", ["int32", "float64", "complex128"])
@pytest.mark.parametrize("op", INPLACE, ids=lambda f: f.__name__)
def test_inplace_keeps_object_and_matches_numpy(op, dtype):
    a = sample((5, 2), dtype, positive=True) + 1
    b = sample((5, 2), dtype, seed=3, positive=True) + 1
    for strategy, axis in layouts(2):
        obj = make(a, strategy, axis)
        expected, exc = _outcome(op, a.copy(), b)
        try:
            with np.errstate(all="ignore"):
                res = op(obj, distributed_data_object(b, distribution_strategy="equal"))
            got_exc = None
        except Exception as e:
            res, got_exc = None, type(e)
        if exc is not None:
            collective_assert(got_exc is not None and issubclass(got_exc, exc))
            continue
        collective_assert(res is obj, "in-place op must return the same object")
        assert_equal_to_numpy(obj, expected)


@pytest.mark.parametrize(
    "dshape,nshape",
    [((4, 3), (3,)), ((4, 3), (4, 1)), ((4, 3), (1, 3)), ((4, 3), ()), ((3,), (4, 3)),
     ((4, 1), (1, 5)), ((1, 3), (4, 3)), ((0, 3), (3,)), ((2, 3, 4), (3, 1))],
)  # fmt: skip
def test_broadcasting_with_numpy_arrays(dshape, nshape):
    a = sample(dshape, "float64")
    b = sample(nshape, "float64", seed=5)
    for strategy, axis in layouts(len(dshape)):
        obj = make(a, strategy, axis)
        assert_equal_to_numpy(obj + b, a + b)
        assert_equal_to_numpy(b - obj, b - a)
        res = b * obj  # ndarray first: handled by __array_ufunc__, no gather
        collective_assert(isinstance(res, distributed_data_object))
        assert_equal_to_numpy(res, b * a)


def test_operands_of_different_layouts():
    a = sample((6, 4), "float64")
    b = sample((6, 4), "float64", seed=9)
    for s1, ax1 in layouts(2):
        x = make(a, s1, ax1)
        for s2, ax2 in layouts(2):
            y = make(b, s2, ax2)
            res = x + y
            assert_equal_to_numpy(res, a + b)
            lead = x if not x.distributor.replicated or y.distributor.replicated else y
            collective_assert(res.axis == lead.axis, (s1, ax1, s2, ax2, res.axis))
            z = x.copy()
            z *= y
            assert_equal_to_numpy(z, a * b)
            collective_assert(z.distributor is x.distributor)


def test_broadcast_between_distributed_objects():
    a = sample((5, 4), "float64")
    row = sample((4,), "float64", seed=2)
    col = sample((5, 1), "float64", seed=3)
    for s, ax in layouts(2):
        x = make(a, s, ax)
        for s2 in ("not", "equal", "fftw"):
            r = distributed_data_object(row, distribution_strategy=s2)
            c = distributed_data_object(col, distribution_strategy=s2)
            assert_equal_to_numpy(x + r, a + row)
            assert_equal_to_numpy(r + x, row + a)
            assert_equal_to_numpy(x * c, a * col)
            assert_equal_to_numpy(c - x, col - a)


def test_result_dtypes_follow_numpy_promotion():
    for d1 in DTYPES:
        a = sample((3,), d1, positive=True)
        x = distributed_data_object(a)
        for d2 in DTYPES:
            b = sample((3,), d2, positive=True)
            y = distributed_data_object(b, distribution_strategy="fftw")
            collective_assert((x + y).dtype == (a + b).dtype, (d1, d2))
            collective_assert((x * b).dtype == (a * b).dtype, (d1, d2))
        for scalar in (1, 1.0, 1j, np.float32(1), np.int8(1)):
            try:
                expected = (a + scalar).dtype
            except Exception:
                continue
            collective_assert((x + scalar).dtype == expected, (d1, scalar))


UFUNCS_1 = [
    np.sqrt,
    np.exp,
    np.sin,
    np.abs,
    np.negative,
    np.isnan,
    np.isinf,
    np.isfinite,
    np.floor,
    np.conjugate,
    np.square,
    np.sign,
    np.logical_not,
    np.log1p,
]
UFUNCS_2 = [
    np.add,
    np.maximum,
    np.minimum,
    np.fmax,
    np.arctan2,
    np.hypot,
    np.power,
    np.logical_and,
    np.equal,
    np.copysign,
    np.heaviside,
]


@pytest.mark.parametrize("uf", UFUNCS_1, ids=lambda u: u.__name__)
def test_unary_ufuncs(uf):
    for dtype in ("float64", "float32", "int64", "complex128"):
        a = sample((4, 3), dtype, positive=True)
        for strategy, axis in layouts(2):
            obj = make(a, strategy, axis)
            expected, exc = _outcome(uf, a)
            got, got_exc = _outcome(uf, obj)
            if exc is not None:
                collective_assert(got_exc is not None and issubclass(got_exc, exc))
                continue
            collective_assert(isinstance(got, distributed_data_object))
            assert_equal_to_numpy(got, expected, rtol=1e-6 if dtype == "float32" else 1e-12)


@pytest.mark.parametrize("uf", UFUNCS_2, ids=lambda u: u.__name__)
def test_binary_ufuncs_and_out(uf):
    a = sample((4, 3), "float64", positive=True)
    b = sample((4, 3), "float64", seed=4, positive=True)
    for strategy, axis in layouts(2):
        x, y = make(a, strategy, axis), make(b, "equal", 1)
        with np.errstate(all="ignore"):
            expected = uf(a, b)
            assert_equal_to_numpy(uf(x, y), expected)
            assert_equal_to_numpy(uf(a, y), expected)
            out = x.copy_empty(dtype=expected.dtype)
            res = uf(x, b, out=out)
        collective_assert(res is out)
        assert_equal_to_numpy(out, expected)


def test_ufunc_where_and_divmod():
    a = sample((5, 3), "int64", positive=True) + 1
    for strategy, axis in layouts(2):
        x = make(a, strategy, axis)
        q, r = divmod(x, 3)
        assert_equal_to_numpy(q, a // 3)
        assert_equal_to_numpy(r, a % 3)
        q, r = np.divmod(7, x)
        assert_equal_to_numpy(q, 7 // a)
        out = x.copy()
        np.add(x, 100, out=out, where=x > 5)
        assert_equal_to_numpy(out, np.where(a > 5, a + 100, a))


def test_ufunc_reduce_and_accumulate():
    a = sample((5, 4), "int64")
    for strategy, axis in layouts(2):
        x = make(a, strategy, axis)
        assert_equal_to_numpy(np.add.reduce(x), np.add.reduce(a))
        assert_equal_to_numpy(np.add.reduce(x, axis=1), np.add.reduce(a, axis=1))
        assert_equal_to_numpy(np.maximum.reduce(x, axis=None), np.maximum.reduce(a, axis=None))
        assert_equal_to_numpy(np.multiply.reduce(x, axis=(0, 1)), np.multiply.reduce(a, (0, 1)))
        assert_equal_to_numpy(np.bitwise_or.reduce(x, axis=0), np.bitwise_or.reduce(a, axis=0))
        for ax in (0, 1):
            assert_equal_to_numpy(np.add.accumulate(x, axis=ax), np.add.accumulate(a, axis=ax))
            assert_equal_to_numpy(np.maximum.accumulate(x, axis=ax), np.maximum.accumulate(a, ax))
            assert_equal_to_numpy(
                np.subtract.accumulate(x, axis=ax), np.subtract.accumulate(a, axis=ax)
            )


def test_array_gathers_explicitly_and_unknown_functions_raise():
    a = np.arange(6.0)
    x = distributed_data_object(a)
    collective_assert(np.array_equal(np.asarray(x), a))
    got = np.concatenate([x, x])  # numpy's main namespace routes to d2o.numpy
    collective_assert(isinstance(got, distributed_data_object))
    collective_assert(np.array_equal(got.get_full_data(), np.concatenate([a, a])))
    # functions outside numpy's namespaces stay refused
    assert_raises_everywhere(TypeError, np.lib.stride_tricks.sliding_window_view, x, 2)
