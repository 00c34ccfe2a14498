"""Reused temporaries: in ``((a + 1) * 2 + 3) - 4`` the operators after the first write
into the first result's piece (as numpy does with its own temporaries), and nothing that
is still referenced is ever written."""

from __future__ import annotations

import functools
import inspect
import itertools
import operator

import numpy as np
import pytest
from _helpers import make, traced_peak

import d2o
from d2o import default_comm, distributed_data_object
from d2o.core.registry import flagged
from d2o.testing import assert_equal_to_numpy, collective_assert


@pytest.fixture(autouse=True)
def _eager():
    """These tests count the eager path's temporaries: with the ``lazy`` option on
    (``D2O_LAZY=1``) the calls would be recorded instead (tests/test_fusion.py)."""
    with d2o.options(lazy=False):
        yield


P = default_comm().size
N = 2**17 * max(P, 2)  # 1 MiB of float64 per rank at most: above the 256 KiB threshold


@pytest.fixture
def plain_operators():
    """The operators without the funnel's wrappers (checked mode wraps everything, and
    its wrappers switch the reuse off); neither mesh layouts nor 0-d views wrap them."""
    with d2o.options(check_args=False):
        op = inspect.getattr_static(distributed_data_object, "__add__")
        collective_assert(not flagged(op))
        yield


@pytest.mark.parametrize("strategy", ["not", "equal", "freeform"])
def test_a_chain_allocates_one_result(strategy, plain_operators):
    A = np.arange(N, dtype=np.float64)
    a = make(A, strategy)
    piece = a.get_local_data(copy=False).nbytes
    r, peak = traced_peak(lambda _: 0.5 * (((a + 1) * 2 + 3) - 4))
    assert_equal_to_numpy(r, 0.5 * (((A + 1) * 2 + 3) - 4))
    # without reuse two pieces are alive at once after the first operator
    collective_assert(peak < 1.5 * piece, f"peak {peak} for pieces of {piece}")


def test_referenced_operands_are_never_written():
    A = np.arange(N, dtype=np.float64)
    a = make(A, "equal")
    t = a + 1
    assert_equal_to_numpy(t.__add__(1.0), A + 2)  # an explicit call of a named operand
    assert_equal_to_numpy(t.__rmul__(3.0), 3 * (A + 1))
    assert_equal_to_numpy(operator.add(t, 1.0), A + 2)
    assert_equal_to_numpy(functools.reduce(operator.add, [t, a, a]), 3 * A + 1)
    assert_equal_to_numpy(sum([t, a]), 2 * A + 1)
    steps = list(itertools.accumulate([t, a, a]))
    assert_equal_to_numpy(steps[1], 2 * A + 1)
    assert_equal_to_numpy(steps[2], 3 * A + 1)
    v = (a + 0)[1:]  # a view keeps its base's piece alive: the base is not reused
    w = v + 1
    assert_equal_to_numpy(w, A[1:] + 1)
    assert_equal_to_numpy(t, A + 1)
    assert_equal_to_numpy(a, A)


@pytest.mark.parametrize("strategy", ["not", "equal"])
def test_results_of_another_dtype_or_shape_are_new(strategy):
    A = np.arange(N, dtype=np.int64)
    a = make(A, strategy)
    assert_equal_to_numpy((a + 1) / 2, (A + 1) / 2)  # int64 / int -> float64: a new piece
    assert_equal_to_numpy((a + 1) ** 2, (A + 1) ** 2)  # power keeps numpy's square path
    assert_equal_to_numpy((a + 1) < 5, (A + 1) < 5)
    B = A.reshape(-1, 2)
    b = make(B, strategy)
    row = np.array([10, 20])
    assert_equal_to_numpy((b + 1) - row, (B + 1) - row)
    col = make(B[:, :1].copy(), strategy)
    assert_equal_to_numpy((col + 1) + b, (B[:, :1] + 1) + B)  # broadcast to a larger shape
    x = make(np.arange(N, dtype=np.float32), strategy)
    collective_assert((x + 1).dtype == np.float32)
    collective_assert(((x + 1) * 2.0).dtype == np.float32)  # numpy 2's weak Python scalars
    collective_assert(((x + 1) * np.float64(2.0)).dtype == np.float64)


def test_a_replicated_temporary_meets_a_distributed_operand(plain_operators):
    """The result takes the distributed operand's layout (no gather into the temporary)."""
    A = np.arange(N, dtype=np.float64)
    r = make(A, "not")
    x = make(A, "equal")
    y = (r + 1) + x  # (not traced: a trace's wrappers switch the reuse off)
    collective_assert(y.distribution_strategy == "equal", y.distribution_strategy)
    assert_equal_to_numpy(y, 2 * A + 1)


@pytest.mark.parametrize("strategy", ["not", "equal"])
def test_temporary_views_of_a_named_array_are_never_written(strategy, plain_operators):
    # a view made in the expression is a temporary, but its piece is the named array's
    A = np.arange(N, dtype=np.float64)
    a = make(A, strategy)
    assert_equal_to_numpy(a[:] + 1, A + 1)
    assert_equal_to_numpy(a.reshape(2, -1) * 2, A.reshape(2, -1) * 2)
    assert_equal_to_numpy(a.real - 3, A - 3)
    assert_equal_to_numpy(a[::-1] + 0.5, A[::-1] + 0.5)
    assert_equal_to_numpy(a, A)


def test_reuse_survives_a_mesh_layout_and_a_zero_d_view():
    """Made in this process, a mesh layout and a 0-d view leave ``x + y`` unwrapped: the
    chain still allocates one result (before: every operation was wrapped for good)."""
    m = distributed_data_object(
        np.arange(24.0).reshape(4, 6), distribution_strategy=d2o.layout(split=(0, 1))
    )
    v = m[1, 2, ...]  # a 0-d view: held by one rank where P > 1
    A = np.arange(N, dtype=np.float64)
    a = make(A, "equal")
    with d2o.options(check_args=False):
        for name in ("__add__", "__mul__", "__iadd__", "__neg__", "__array_ufunc__"):
            op = inspect.getattr_static(distributed_data_object, name)
            collective_assert(not flagged(op), name)
        piece = a.get_local_data(copy=False).nbytes
        r, peak = traced_peak(lambda _: 0.5 * (((a + 1) * 2 + 3) - 4))
        assert_equal_to_numpy(r, 0.5 * (((A + 1) * 2 + 3) - 4))
        collective_assert(peak < 1.5 * piece, f"peak {peak} for pieces of {piece}")
        # the operators take the 0-d view themselves (a replicated copy of its element)
        assert_equal_to_numpy(m + v, np.arange(24.0).reshape(4, 6) + 8.0)
        assert_equal_to_numpy(-v * 2, np.float64(-16.0))
        v += 1
        collective_assert(float(m[1, 2]) == 9.0)
