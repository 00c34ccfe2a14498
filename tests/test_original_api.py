"""The original D2O methods beyond the paper's listings (issue 9, item 5), against numpy."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from _helpers import Checks, layouts, make, sample

import d2o
from d2o import distributed_data_object
from d2o.testing import assert_equal_to_numpy, assert_raises_everywhere, collective_assert


def test_apply_scalar_function():
    a = sample((5, 4), "float64", positive=True)
    for strategy, axis in layouts(2):
        x = make(a, strategy, axis)
        assert_equal_to_numpy(x.apply_scalar_function(np.sqrt), np.sqrt(a))
        assert_equal_to_numpy(x.apply_scalar_function(math.floor, dtype=np.int64),
                              np.floor(a).astype(np.int64))  # fmt: skip
        y = x.copy()
        y.apply_scalar_function(lambda v: v * 2, inplace=True)
        assert_equal_to_numpy(y, a * 2)
    h = distributed_data_object(a, hermitian=True)
    collective_assert(h.hermitian and h.copy().hermitian)
    collective_assert(h.apply_scalar_function(np.exp).hermitian)
    collective_assert(not h.apply_scalar_function(np.sqrt).hermitian)
    collective_assert(not distributed_data_object(a).hermitian)


def test_median_over_axis_tuples_3d():
    a = sample((4, 3, 5), "int64")
    for strategy, axis in layouts(3):
        x = make(a, strategy, axis)
        for ax in ((0, 1), (1, 2), (0, 2), (2,), (0, 1, 2)):
            for kd in (False, True):
                assert_equal_to_numpy(np.median(x, axis=ax, keepdims=kd),
                                      np.median(a, axis=ax, keepdims=kd))  # fmt: skip


@pytest.mark.parametrize("shape", [(1,), (7,), (3, 4), (2, 3, 4)])
def test_arg_nonflat(shape):
    a = sample(shape, "float64")
    for strategy, axis in layouts(len(shape)):
        x = make(a, strategy, axis)
        got = x.argmax_nonflat(), x.argmin_nonflat()
        want = np.unravel_index(a.argmax(), shape), np.unravel_index(a.argmin(), shape)
        collective_assert(got == tuple(tuple(int(i) for i in w) for w in want), (got, want))
        assert_raises_everywhere(NotImplementedError, x.argmax_nonflat, axis=0)


def test_isreal_iscomplex_nan_to_num():
    c = np.array([1 + 0j, 2 + 1j, np.nan + 0j, 3j, -4, np.inf])
    f = np.array([1.0, np.nan, np.inf, -np.inf, 0.0])
    for strategy, axis in layouts(1):
        x = make(c, strategy, axis)
        assert_equal_to_numpy(x.isreal(), np.isreal(c))
        assert_equal_to_numpy(np.iscomplex(x), np.iscomplex(c))
        y = make(f, strategy, axis)
        assert_equal_to_numpy(y.nan_to_num(), np.nan_to_num(f))
        assert_equal_to_numpy(
            np.nan_to_num(y, nan=-1.0, posinf=9.0), np.nan_to_num(f, nan=-1.0, posinf=9.0)
        )


MEDIAN_DATA = {
    "odd": np.array([5.0, -1.0, 3.0, 3.0, 8.0, 0.5, 2.0]),
    "even": np.array([4, -7, 1, 9, 2, 2, 6, 0], dtype=np.int64),
    "equal": np.full(9, 2.5),
    "two-values": np.array([1, 2] * 5, dtype=np.int32),
    "sorted": np.arange(10.0),
    "reversed": np.arange(10.0)[::-1].copy(),
    "negative-zero": np.array([-0.0, 0.0, -1e-300, 1e-300]),
    "uint": np.array([3, 1, 2**63 + 5, 7], dtype=np.uint64),
    "bool": np.array([True, False, True]),
    "one": np.array([4.0]),
    "float32": np.array([1.5, 2.25, -3.0, 7.5], dtype=np.float32),
    "complex": np.array([1 + 2j, 3 - 1j, 3 - 2j, 0 + 5j, -1j]),
    "complex-even": np.array([2 + 1j] * 5 + [2 - 1j] * 3 + [-4 + 0j, 7 + 7j]),
    "complex64": (np.arange(9) * (1 - 1j)).astype(np.complex64),
}


@pytest.mark.parametrize("name", sorted(MEDIAN_DATA))
def test_median_of_everything(name):
    a = MEDIAN_DATA[name]
    check = Checks()
    for strategy, axis in layouts(1):
        x = make(a, strategy, axis)
        got, want = x.median(), np.median(a)
        check.true(np.isscalar(got) and type(got) is type(want), (name, type(got), type(want)))
        check.true(got == want or str(got) == str(want), (name, strategy, got, want))
        check.true(np.median(x) == want, (name, "np.median"))
    check.done()


def test_median_nan_and_empty():
    a = np.array([1.0, np.nan, 3.0, 4.0])
    for strategy, axis in layouts(1):
        collective_assert(np.isnan(make(a, strategy, axis).median()))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        e = distributed_data_object(np.zeros(0)).median()
    warned = any(issubclass(w.category, RuntimeWarning) for w in seen)
    collective_assert(warned and np.isnan(e), f"{e}, warnings {[str(w.message) for w in seen]}")


def test_median_complex_nans_sort_last_as_in_numpy():
    """numpy's median of complex data with NaNs is the last element of its sort
    order: R+nanj, then nan+Rj, then nan+nanj after every number."""
    nan = np.nan
    check = Checks()
    for a in (
        np.array([1 + 2j, complex(nan, 0), 3 - 2j, 4, 5]),
        np.array([1 + 2j, complex(0, nan), 3 - 2j]),
        np.array([complex(nan, 1), complex(2, nan), 1j, complex(nan, -3)]),
    ):
        for strategy, axis in layouts(1):
            got, want = make(a, strategy, axis).median(), np.median(a)
            check.true(str(got) == str(want) and type(got) is type(want), (a, strategy, got, want))
    check.done()


def test_median_along_axes_and_keepdims():
    a = sample((5, 6), "float64")
    for strategy, axis in layouts(2):
        x = make(a, strategy, axis)
        for ax in (None, 0, 1, -1, (0,), (0, 1)):
            assert_equal_to_numpy(x.median(axis=ax), np.median(a, axis=ax))
            assert_equal_to_numpy(np.median(x, axis=ax, keepdims=True),
                                  np.median(a, axis=ax, keepdims=True))  # fmt: skip


def test_median_moves_counts_not_data(comm):
    a = np.arange(20_000.0)
    x = distributed_data_object(a)
    with d2o.options(check_args=False), d2o.trace() as t:
        m = x.median()
    collective_assert(m == np.median(a))
    collective_assert(t.bytes_sent <= 20 * 256 * 8 + 1024, t.bytes_sent)  # never the array
    with d2o.options(gather="raise"):
        collective_assert(x.median() == np.median(a))


def test_median_bad_input_everywhere():
    from d2o.testing import assert_raises_everywhere

    x = distributed_data_object(np.arange(6.0).reshape(2, 3))
    assert_raises_everywhere(np.exceptions.AxisError, x.median, axis=2)
    z = distributed_data_object(np.arange(3) + 1j)
    assert_raises_everywhere(ValueError, d2o.median, z, out=z)  # shape (3,) for a scalar
    assert_raises_everywhere(TypeError, d2o.median, z, out=np.zeros(()))


def test_median_axis_bad_on_one_rank_only(comm):
    from d2o.testing import assert_raises_everywhere

    x = distributed_data_object(np.arange(12.0).reshape(3, 4))
    with d2o.options(check_args=False):  # the agreement itself, not the checked mode
        bad = 5 if comm.rank == comm.size - 1 else 0
        assert_raises_everywhere(np.exceptions.AxisError, x.median, axis=bad)
    assert_equal_to_numpy(x.median(axis=0), np.median(np.arange(12.0).reshape(3, 4), axis=0))
