"""Reused temporaries: in ``((a + 1) * 2 + 3) - 4`` the operators after the first write
into the first result's piece (as numpy does with its own temporaries), and nothing that
is still referenced is ever written."""

from __future__ import annotations

import functools
import itertools
import operator

import numpy as np
import pytest
from _helpers import make, traced_peak

import d2o
from d2o import default_comm, distributed_data_object
from d2o.testing import assert_equal_to_numpy, collective_assert

P = default_comm().size
N = 2**17 * max(P, 2)  # 1 MiB of float64 per rank at most: above the 256 KiB threshold


@pytest.fixture
def plain_operators():
    """The operators without the funnel's wrappers (which switch the reuse off: checked
    mode, and every operation once a 0-d view was made in this process)."""
    from d2o.runtime import funnel as _funnel

    held = _funnel.held_in_use[0]
    with d2o.options(check_args=False):
        _funnel.held_in_use[0] = False
        _funnel._uninstall()
        _funnel.activate()  # the mesh-only wrappers, if meshes are in use
        try:
            collective_assert(not hasattr(distributed_data_object.__add__, "__d2o_original__"))
            yield
        finally:
            _funnel.held_in_use[0] = held
            _funnel._uninstall()
            _funnel.activate()


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
