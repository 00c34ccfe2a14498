"""Kept buffers (d2o/core/buffers.py): large temporaries reuse freed buffers, never one
that an array still uses; the memory kept unused is bounded.  Local: the same on every
rank, without MPI and under mpiexec."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

import d2o
from d2o.core import buffers
from d2o.testing import collective_assert

BIG = (400, 400)  # 1.2 MiB of float64: above MIN_BYTES


def _address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


@pytest.fixture(autouse=True)
def _fresh_pool():
    saved = buffers._POOL[:]
    buffers._POOL.clear()
    yield
    buffers._POOL[:] = saved


def test_a_buffer_is_reused_only_once_no_array_uses_it():
    a = buffers.empty(BIG, np.float64)
    a[...] = 1.0
    first = _address(a)
    v = a[::2, 1:]  # a view of a view: its base is the kept buffer itself
    del a
    b = buffers.empty(BIG, np.float64)
    assert _address(b) != first and np.all(v == 1.0)  # the view keeps its buffer
    b[...] = 2.0
    assert np.all(v == 1.0)
    del v
    c = buffers.empty(BIG, np.float64)
    assert _address(c) == first  # free now: reused
    assert c.shape == BIG and c.dtype == np.float64 and c.flags.c_contiguous


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.complex128, bool])
def test_pieces_of_other_dtypes_and_shapes(dtype):
    shape = (3, 700, 200)
    a = buffers.empty(shape, dtype)
    assert a.shape == shape and a.dtype == np.dtype(dtype)
    a[...] = np.ones(shape, dtype)
    b = buffers.empty(shape, dtype)
    b[...] = a
    assert np.array_equal(a, b) and not np.shares_memory(a, b)


def test_small_and_object_arrays_come_from_numpy():
    for shape, dt in [((10, 10), np.float64), ((400, 400), object)]:
        a = buffers.empty(shape, dt)
        assert a.base is None and a.shape == shape
    assert buffers._POOL == []


def test_unused_memory_kept_is_bounded():
    sizes = [(300 + 50 * k, 400) for k in range(10)]
    for shape in sizes:
        buffers.empty(shape, np.float64)  # dropped at once
    largest = max(np.prod(s) * 8 for s in sizes)
    assert buffers.held() <= buffers.FREE * largest
    live = [buffers.empty(s, np.float64) for s in sizes]  # in use: kept by their arrays
    assert len(buffers._POOL) <= buffers.HELD
    assert len({_address(a) for a in live}) == len(live)


def test_a_stepping_loop_allocates_no_new_pieces():
    """``v = u - u_old`` each step, deferred and evaluated by the fused kernels: after the
    first steps its piece comes from a kept buffer (no new large allocation: the traced
    peak is the eager ``u.copy()`` alone), and the values are numpy's."""
    comm = d2o.default_comm()
    a = np.random.default_rng(0).random((600 * comm.size, 400))  # 1.8 MiB a rank
    with d2o.options(lazy=True, lazy_min=0):
        u = d2o.distributed_data_object(a)
        for _ in range(3):
            u_old = u.copy()
            v = u - u_old
            d2o.evaluate(v)
            del u_old, v
        tracemalloc.start()
        try:
            base = tracemalloc.get_traced_memory()[0]
            for _ in range(5):
                u_old = u.copy()
                u *= 0.5
                v = u - u_old
                d2o.evaluate(v)
                del u_old, v
            peak = tracemalloc.get_traced_memory()[1] - base
        finally:
            tracemalloc.stop()
        u_old = u.copy()
        u *= 0.5
        v = u - u_old
        d2o.evaluate(v)
        collective_assert(buffers.kept(v.get_local_data(copy=False).base))
        got = v.get_full_data()
    share = u.get_local_data().nbytes
    collective_assert(np.array_equal(u.get_full_data(), a * 0.5**6))
    collective_assert(np.array_equal(got, a * 0.5**6 - a * 0.5**5))
    collective_assert(peak < share + (1 << 18), f"peak {peak} B, share {share} B")


def test_resize_refuses_a_kept_piece_that_another_array_references():
    comm = d2o.default_comm()
    a = np.arange(600.0 * comm.size * 400).reshape(600 * comm.size, 400)
    with d2o.options(lazy=True, lazy_min=0):
        x = d2o.distributed_data_object(a) * 1.0  # a fused result: its piece is kept
        d2o.evaluate(x)
    collective_assert(buffers.kept(x.get_local_data(copy=False).base))
    view = x.get_local_data(copy=False)[1:]
    with pytest.raises(ValueError, match="referenced"):
        x.resize((10, 10))
    del view
    x.resize((10, 10))
    collective_assert(np.array_equal(x.get_full_data(), a.reshape(-1)[:100].reshape(10, 10)))
