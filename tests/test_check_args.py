"""The checked mode: global arguments that differ between ranks raise ValueError everywhere."""

from __future__ import annotations

import numpy as np
import pytest

import d2o
from d2o import default_comm, distributed_data_object
from d2o.testing import assert_equal_to_numpy, assert_raises_everywhere, collective_assert

comm = default_comm()
BAD = comm.size - 1


def _per_rank(good, bad):
    return bad if comm.rank == BAD else good


@pytest.fixture(autouse=True)
def _checked():
    with d2o.options(check_args=True):
        yield


def _differs(fn, *args, argname=None, **kwargs):
    """ValueError on every rank naming the argument (the calling tests need two ranks)."""
    err = assert_raises_everywhere(ValueError, fn, *args, **kwargs)
    collective_assert(argname is None or repr(argname) in str(err), str(err))
    collective_assert(comm.allreduce(1) == comm.size)  # still in step


_two = pytest.mark.skipif(comm.size == 1, reason="needs two ranks to differ")


@_two
def test_valid_arguments_that_differ():
    x = distributed_data_object(np.arange(24.0).reshape(4, 6))
    a = np.arange(24.0).reshape(4, 6)
    _differs(x.sum, axis=_per_rank(0, 1), argname="axis")
    _differs(x.std, axis=_per_rank(None, 0), argname="axis")
    _differs(x.copy, axis=_per_rank(0, 1), argname="axis")
    _differs(x.copy, dtype=_per_rank(None, np.float32), argname="dtype")
    _differs(x.__getitem__, _per_rank(1, 2), argname="key")
    _differs(x.__setitem__, slice(0, 2), _per_rank(1.0, 2.0), argname="value")
    _differs(x.reshape, _per_rank((6, 4), (24,)))
    _differs(x.__add__, _per_rank(np.ones(6), np.zeros(6)), argname="other")
    _differs(d2o.fft.fftn, x, axes=_per_rank((0,), (1,)), argname="axes")
    _differs(distributed_data_object, global_shape=_per_rank((4,), (5,)), argname="global_shape")
    _differs(distributed_data_object, a, axis=_per_rank(0, 1), argname="axis")
    assert_equal_to_numpy(x, a)  # nothing was written


def test_equal_arguments_and_local_ones_pass():
    a = np.arange(12.0).reshape(4, 3)
    x = distributed_data_object(a)
    assert_equal_to_numpy(x.sum(axis=0), a.sum(axis=0))
    x[1] = 7.0
    a[1] = 7.0
    assert_equal_to_numpy(x, a)
    # per-rank arguments are not compared: local data, local keys
    y = distributed_data_object(local_data=np.full((comm.rank + 1, 3), comm.rank))
    collective_assert(y.shape == (sum(range(1, comm.size + 1)), 3))
    got = x.get_data(comm.rank % 4, local_keys=True)
    collective_assert(np.array_equal(np.asarray(got.get_local_data()), a[comm.rank % 4]))
    x.set_local_data(x.get_local_data() * 0 + comm.rank)
    collective_assert(np.all(x.get_local_data() == comm.rank))


@_two
def test_large_numpy_values_are_compared_by_sample():
    x = distributed_data_object(global_shape=(300_000,))
    v = np.ones(300_000)
    if comm.rank == BAD:
        v[-1] = 2.0
    _differs(x.__setitem__, slice(None), v, argname="value")
