"""Data-dependent numpy errors of local work reach every rank (issue 9, item 1).

Integer ``**`` negative raises only where the negative exponent lives, and an
element-wise operation of one layout has no collective to agree in; the error is
raised on every rank at the next operation that communicates (at once on one
process).
"""

from __future__ import annotations

import numpy as np
import pytest

import d2o
from d2o import default_comm, distributed_data_object
from d2o.testing import assert_equal_to_numpy, assert_raises_everywhere, collective_assert


@pytest.fixture(autouse=True)
def _eager():
    """These tests check when the eager path raises data-dependent errors: with the ``lazy`` option on
    (``D2O_LAZY=1``) the calls would be recorded instead (tests/test_fusion.py)."""
    with d2o.options(lazy=False):
        yield


comm = default_comm()


def _exponents():
    e = np.ones(4 * comm.size, dtype=np.int64)
    e[-1] = -1  # in the last rank's piece only
    return e


@pytest.mark.parametrize("form", ["operator", "ufunc", "reflected-scalar", "inplace"])
def test_negative_integer_power_on_one_rank(form):
    base = np.full(4 * comm.size, 2, dtype=np.int64)
    x = distributed_data_object(base)
    e = distributed_data_object(_exponents())
    run = {
        "operator": lambda: x**e,
        "ufunc": lambda: np.power(x, e),
        "reflected-scalar": lambda: 2 ** (e * 1),
        "inplace": lambda: x.__ipow__(e),
    }[form]
    if comm.size == 1:
        assert_raises_everywhere(ValueError, run)
    else:
        run()  # the ranks without the negative exponent cannot know yet
        assert_raises_everywhere(ValueError, x.sum)  # the next collective: everywhere
    collective_assert(x.sum() == base.sum() or form == "inplace")  # in step again
    assert_equal_to_numpy(x**2, base**2)


@pytest.mark.parametrize("form", ["other layout", "shifted view", "out on another layout"])
def test_negative_power_with_operands_to_align(form):
    """The same error where operands are aligned first (another layout, a shifted view):
    the ranks that see it do not leave the others waiting."""
    n = 4 * comm.size
    base = np.full(n, 2, dtype=np.int64)
    x = distributed_data_object(base)
    e = distributed_data_object(_exponents(), distribution_strategy="fftw")
    out = distributed_data_object(np.zeros(n, dtype=np.int64), distribution_strategy="fftw")
    run = {
        "other layout": lambda: x**e,
        "shifted view": lambda: x[1:] ** e[1:],
        "out on another layout": lambda: np.power(x, e, out=out),
    }[form]
    if comm.size == 1:
        assert_raises_everywhere(ValueError, run)
    else:
        run()
        assert_raises_everywhere(ValueError, x.sum)
    assert_equal_to_numpy(x**2, base**2)


def test_errstate_raise_on_one_rank():
    a = np.ones(4 * comm.size)
    a[-1] = -1.0
    x = distributed_data_object(a)
    with np.errstate(invalid="raise"):
        if comm.size == 1:
            assert_raises_everywhere(FloatingPointError, np.sqrt, x)
        else:
            np.sqrt(x)
            assert_raises_everywhere(FloatingPointError, x.get_full_data)
    assert_equal_to_numpy(x * 1, a)


def test_type_errors_are_immediate():
    x = distributed_data_object(np.array([True, False] * comm.size))
    assert_raises_everywhere(TypeError, lambda: x - x)
    collective_assert(d2o.core.errors._PENDING[0] is None)
