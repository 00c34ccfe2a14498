"""Bad input on ONE rank only must raise on every rank, quickly, without a hang.

Each case gives rank 0 (or the last rank) a wrong argument and the others a
right one.  Without agreement the good ranks would wait forever in their next
collective; pytest-timeout (thread method) would then kill the job.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

import d2o
from d2o import default_comm, distributed_data_object
from d2o.testing import assert_raises_everywhere, collective_assert

comm = default_comm()
BAD = comm.size - 1  # the rank that gets the wrong input

pytestmark = pytest.mark.skipif(comm.size == 1, reason="needs two ranks to disagree")


@pytest.fixture(autouse=True)
def _agreement_path():
    """These cases exercise the agreement itself, not the checked mode (which would
    report the differing argument first); tests/test_check_args.py covers that."""
    with d2o.options(check_args=False):
        yield


def _raises_everywhere(exc_type, fn):
    start = time.perf_counter()
    try:
        fn()
    except exc_type:
        raised = True
    except Exception as exc:  # a different type is a failure too
        raised = f"{type(exc).__name__}: {exc}"
    else:
        raised = False
    elapsed = time.perf_counter() - start
    collective_assert(raised is True, f"rank {comm.rank}: {raised}")
    collective_assert(elapsed < 30, f"took {elapsed:.1f} s")
    # the communicator is still usable and in step afterwards
    collective_assert(comm.allreduce(1) == comm.size)


def _per_rank(good, bad):
    return bad if comm.rank == BAD else good


def test_construction_shape_mismatch():
    a = _per_rank(np.zeros((4, 3)), np.zeros((5, 3)))
    _raises_everywhere(ValueError, lambda: distributed_data_object(a))


def test_construction_dtype_mismatch():
    dt = _per_rank(np.float64, np.int32)
    _raises_everywhere(ValueError, lambda: distributed_data_object(global_shape=(4,), dtype=dt))


def test_construction_bad_strategy():
    s = _per_rank("equal", "cyclic")
    _raises_everywhere(
        ValueError, lambda: distributed_data_object(np.arange(4), distribution_strategy=s)
    )


def test_freeform_wrong_trailing_shape():
    piece = _per_rank(np.zeros((2, 3)), np.zeros((2, 4)))
    _raises_everywhere(
        ValueError,
        lambda: distributed_data_object(local_data=piece, distribution_strategy="freeform"),
    )


def test_bad_target_rank():
    obj = distributed_data_object(np.arange(8))
    t = _per_rank(0, comm.size + 3)
    _raises_everywhere(ValueError, lambda: obj.get_full_data(target_rank=t))


def test_reduction_axis_on_one_rank():
    obj = distributed_data_object(np.arange(12).reshape(4, 3))
    ax = _per_rank(0, 5)
    _raises_everywhere(np.exceptions.AxisError, lambda: obj.sum(axis=ax))
    _raises_everywhere(np.exceptions.AxisError, lambda: obj.argmax(axis=ax))


def test_binary_op_with_wrong_numpy_shape_on_one_rank():
    obj = distributed_data_object(np.arange(12).reshape(4, 3), axis=1)
    other = _per_rank(np.ones(3), np.ones(5))
    _raises_everywhere(ValueError, lambda: obj + distributed_data_object(np.ones(3)) + other)
    _raises_everywhere(ValueError, lambda: np.add(obj, other))


def test_copy_with_bad_strategy_on_one_rank():
    obj = distributed_data_object(np.arange(12).reshape(4, 3))
    s = _per_rank("not", "bogus")
    _raises_everywhere(ValueError, lambda: obj.copy(distribution_strategy=s))


def test_bincount_negative_value_on_one_rank_only():
    # the negative value sits in the last rank's piece only: data-dependent error
    x = np.arange(4 * comm.size)
    x[-1] = -1
    obj = distributed_data_object(x)
    _raises_everywhere(ValueError, obj.bincount)


def test_nothing_changed_after_failed_operation():
    a = np.arange(12.0).reshape(4, 3)
    obj = distributed_data_object(a)

    def bad_add():
        obj.__iadd__(_per_rank(np.ones(3), np.ones(4)))

    assert_raises_everywhere(ValueError, bad_add)
    collective_assert(np.array_equal(obj.get_full_data(), a))


def test_local_keys_with_a_distributed_value_on_one_rank_only():
    # each rank's data is its own argument: a distributed object on one rank, numpy elsewhere
    obj = distributed_data_object(np.zeros(7))
    src = distributed_data_object(np.arange(7.0) + 10)
    data = src if comm.rank == 0 else np.arange(7.0)
    obj.set_data(data, slice(None), local_keys=True)
    got = obj.get_full_data()
    # writes land in rank order: the last rank's numpy data wins everywhere
    collective_assert(np.array_equal(got, np.arange(7.0)), got)
    obj.set_data(src if comm.rank == BAD else np.arange(7.0), [0, 1], from_key=[2, 3],
                 local_keys=True)  # fmt: skip
    want = np.arange(7.0)
    want[:2] = [12.0, 13.0]
    collective_assert(np.array_equal(obj.get_full_data(), want), obj.get_full_data())


def test_local_get_with_different_bad_keys():
    obj = distributed_data_object(np.arange(7.0))
    key = slice(0, 3, 0) if comm.rank == 0 else (0, 0, 0)
    _raises_everywhere(ValueError, lambda: obj.get_data(key, local_keys=True))


def test_every_rank_raises_the_lowest_failing_ranks_exception():
    # every rank fails, each with its own message: all must raise rank 0's
    x = distributed_data_object(np.arange(12.0))
    try:
        x.get_data([0, 90 + comm.rank])
        got = None
    except Exception as exc:
        got = exc
    ok = isinstance(got, IndexError) and "index 90 " in str(got)
    collective_assert(ok, f"rank {comm.rank}: {type(got).__name__}: {got}")
