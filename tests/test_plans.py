"""Exchange plans: the datatypes of a repeated redistribution are built once, cached (LRU),
freed on eviction, and change nothing that moves."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest
from _helpers import make, mesh_of, sample

import d2o
from d2o import distributed_data_object as D2O
from d2o.core.comm import datatypes, default_comm
from d2o.layouts.distributors import get_distributor
from d2o.move import redistribution as rd
from d2o.testing import assert_equal_to_numpy, collective_assert

COMM = default_comm()
P = COMM.size


def _counts() -> tuple:
    return datatypes["created"], datatypes["freed"]


def _delta(before: tuple) -> tuple:
    now = _counts()
    return now[0] - before[0], now[1] - before[1]


@pytest.fixture(autouse=True)
def _fresh_cache():
    """Every test starts with no plans and the default cache size, and leaves it so."""
    rd.free_plans()
    old = rd.plan_cache_size(64)
    yield
    rd.plan_cache_size(old)
    rd.free_plans()


def _target(name: str):
    """What to pass as ``distribution_strategy`` (with its axis) for the moves below."""
    if name == "rows only":  # the mesh of 'mesh01' with mesh axis 1 holding replicas
        lay = mesh_of("mesh01")
        return d2o.layout(mesh=lay.mesh, split=(0, None), comm=COMM), 0
    if name in ("mesh01", "cyc2"):
        return mesh_of(name), 0
    strategy, axis = name.split("/")
    return strategy, int(axis)


MOVES = [
    ("equal/0", "fftw/1"),  # a transpose between the paper's strategies
    ("equal/0", "fftw/0"),  # same axis, other offsets (rank 3 of 4 holds less)
    ("mesh01", "equal/1"),  # a 2x2 mesh (at 4 ranks) to slabs
    ("cyc2", "equal/0"),  # block-cyclic to slabs (nested hindexed datatypes)
    ("mesh01", "rows only"),  # differs along one mesh axis: the sub-communicator exchange
]


@pytest.mark.parametrize(("src", "dst"), MOVES, ids=[f"{a}->{b}" for a, b in MOVES])
def test_repeated_redistribution_builds_datatypes_once(src, dst):
    a = sample((10, 6), "float64")
    s, sa = _target(src)
    x = make(a, s, sa) if isinstance(s, str) else D2O(a, distribution_strategy=s)
    t, ta = _target(dst)
    before = _counts()
    y = x.copy(distribution_strategy=t, axis=ta)
    first = _delta(before)
    for _ in range(99):
        y = x.copy(distribution_strategy=t, axis=ta)
    total = _delta(before)
    assert_equal_to_numpy(y, a)
    collective_assert(total == (first[0], 0), f"100 moves made/freed {total}, the first {first}")
    if P == 1:  # nothing moves between ranks, and the serial stand-in makes no datatypes
        collective_assert(total == (0, 0), total)
    elif not rd.same_pieces(x.distributor, y.distributor):  # (equal/fftw alike at 2 ranks)
        collective_assert(COMM.allreduce(first[0]) > 0, "no datatype counted at all")


def test_eviction_frees_datatypes():
    size = 3
    rd.plan_cache_size(size)
    before = _counts()
    for n in range(5, 13):  # 8 shapes: 8 distinct plans, 5 of them evicted
        a = sample((n, 4), "float64")
        x = D2O(a, axis=0)
        y = x.copy(axis=1)
        assert_equal_to_numpy(y, a)
        y = x.copy(axis=1)  # again: from the cache
        assert_equal_to_numpy(y, a)
    made, freed = _delta(before)
    held = sum(len(p.made) for p in rd._PLANS.values())
    collective_assert(len(rd._PLANS) <= size, f"{len(rd._PLANS)} plans kept, limit {size}")
    collective_assert(made - freed == held, f"made {made}, freed {freed}, held by plans {held}")
    if P == 1:
        collective_assert((made, freed) == (0, 0), (made, freed))
    else:
        collective_assert(COMM.allreduce(freed) > 0, "eviction freed nothing")
    rd.plan_cache_size(1)  # shrinking evicts too
    collective_assert(len(rd._PLANS) <= 1, len(rd._PLANS))
    rd.free_plans()
    collective_assert(_delta(before)[0] == _delta(before)[1], f"not all freed: {_delta(before)}")


def test_cache_changes_nothing_that_moves():
    """The trace (calls, bytes, temporaries) is the same with plans cached and without."""
    a = sample((9, 7), "complex128")
    x = make(a, "cyc2")
    seen = []
    for cache in (0, 64, 64):  # off, then building the plan, then using it
        rd.plan_cache_size(cache)
        with d2o.trace() as t:
            y = x.copy(distribution_strategy="equal", axis=1)
            z = y.copy(distribution_strategy="fftw", axis=0)
        assert_equal_to_numpy(z, a)
        seen.append((t.calls, t.bytes_sent, t.bytes_received, t.collectives))
    collective_assert(seen[0] == seen[1] == seen[2], seen)
    if P > 1:
        collective_assert(any(c[1] == "Alltoallw" for c in seen[0][0]), seen[0][0])


def test_ad_hoc_exchanges_free_their_datatypes():
    """An exchange whose boxes come from lambdas (no key) builds and frees per call."""
    shape = (7, 5)
    a = sample(shape, "float64")
    src = get_distributor("equal", shape, COMM, 0)
    dst = get_distributor("equal", shape, COMM, 1)
    before = _counts()
    for _ in range(3):
        out = rd.exchange(COMM, a[src.local_slice].copy(), lambda r: src.region(r),
                          lambda r: dst.region(r))  # fmt: skip
        collective_assert(np.array_equal(out, a[dst.local_slice]), "values differ")
    made, freed = _delta(before)
    collective_assert(made == freed and not rd._PLANS, (made, freed, len(rd._PLANS)))


def test_one_plan_serves_every_memory_layout_and_dtype_of_an_itemsize():
    """Plans depend on the boxes and the item size only: C-ordered, Fortran-ordered and
    strided pieces, int64 and float64, share one; float32 gets its own."""
    shape = (6, 5)
    src = get_distributor("equal", shape, COMM, 0)
    dst = get_distributor("fftw", shape, COMM, 1)
    a = sample(shape, "float64")
    wide = np.zeros((shape[0], 2 * shape[1]))
    wide[:, ::2] = a
    cases = [
        a[src.local_slice].copy(),
        np.asfortranarray(a[src.local_slice]),
        wide[:, ::2][src.local_slice],  # strided
        a[src.local_slice].astype(np.int64),
        a[src.local_slice].astype(np.float32),
    ]
    for data in cases * 2:
        out = rd.redistribute(data, src, dst)
        ok = out.dtype == data.dtype and np.array_equal(out, a[dst.local_slice].astype(data.dtype))
        collective_assert(ok, f"{data.dtype} {data.strides}: values differ")
    expected = 0 if P == 1 else 2  # item sizes 8 and 4
    collective_assert(len(rd._PLANS) == expected, list(rd._PLANS))


@pytest.mark.parametrize("shape", [(2, 9), (0, 5), (3, 0)], ids=str)
def test_ranks_holding_nothing_and_empty_arrays(shape):
    a = sample(shape, "int32")
    x = D2O(a, distribution_strategy="fftw", axis=0)
    before = _counts()
    for _ in range(5):
        y = x.copy(distribution_strategy="equal", axis=1)
        z = y.copy(distribution_strategy="fftw", axis=0)
    assert_equal_to_numpy(y, a)
    assert_equal_to_numpy(z, a)
    collective_assert(_delta(before)[1] == 0, _delta(before))


def test_plans_keep_no_array_alive():
    a = sample((8, 6), "float64")
    x = D2O(a, axis=0)
    y = x.copy(axis=1)
    refs = [weakref.ref(x.data), weakref.ref(y.data)]
    collective_assert(len(rd._PLANS) == (0 if P == 1 else 1), len(rd._PLANS))
    del x, y
    gc.collect()
    collective_assert(all(r() is None for r in refs), "a piece outlived its array")
