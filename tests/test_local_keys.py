"""Local keys: every rank its own key (and data); results land on the asking rank."""

from __future__ import annotations

import numpy as np
import pytest
from test_indexing import make

from d2o import distributed_data_object
from d2o.testing import assert_equal_to_numpy, assert_raises_everywhere, collective_assert

A = np.arange(30).reshape(6, 5)


def _my_keys(rank):
    return [
        slice(None, None, 2 + rank),
        (slice(rank % 6, None), [4, 0]),
        [5 - rank % 6, 0, 3],
        A > 10 + rank,
        (Ellipsis, rank % 5),
    ]


@pytest.mark.parametrize("strategy,axis", [("equal", 0), ("fftw", 1), ("freeform", 0), ("not", 0)])
def test_get_local_keys(comm, strategy, axis):
    obj = make(A, strategy, axis)
    for i in range(5):
        key = _my_keys(comm.rank)[i]
        res = obj.get_data(key, local_keys=True)
        expected = A[key]
        collective_assert(
            np.array_equal(res.get_local_data(), expected), f"rank's own result for key {i}"
        )
        collective_assert(res.distribution_strategy == "freeform", "result layout")


def test_get_local_keys_scalars(comm):
    obj = make(A, "equal", 0)
    key = (comm.rank % 6, 1)
    res = obj.get_data(key, local_keys=True)
    collective_assert(isinstance(res, np.generic) and res == A[key], "own scalar")


def test_set_local_keys(comm):
    for strategy, axis in [("equal", 0), ("fftw", 1), ("not", 0)]:
        obj = make(A, strategy, axis)
        b = A.copy()
        for r in range(comm.size):  # writes of later ranks win
            b[r % 6, ::2] = -r - 1
        for r in range(comm.size):
            b[[5 - r % 6]] = 100 + r
        obj.set_data(-comm.rank - 1, (comm.rank % 6, slice(None, None, 2)), local_keys=True)
        obj.set_data(np.full((1, 5), 100 + comm.rank), [5 - comm.rank % 6], local_keys=True)
        assert_equal_to_numpy(obj, b)


def test_set_local_keys_injection(comm):
    src = np.arange(100, 130).reshape(6, 5)
    obj = make(A, "equal", 0)
    b = A.copy()
    for r in range(comm.size):
        b[r % 6] = src[(r + 1) % 6]
    obj.set_data(src, comm.rank % 6, from_key=(comm.rank + 1) % 6, local_keys=True)
    assert_equal_to_numpy(obj, b)
    dsrc = make(src, "fftw", 1)
    obj = make(A, "equal", 0)
    obj.set_data(dsrc, comm.rank % 6, from_key=(comm.rank + 1) % 6, local_keys=True)
    assert_equal_to_numpy(obj, b)


def test_local_d2o_keys_through_librarian(comm):
    obj = distributed_data_object(np.arange(16) * 2)
    keys = [distributed_data_object(np.arange(r, 16, 2 + r % 3)) for r in range(comm.size)]
    res = obj.get_data(keys[comm.rank], local_keys=True)
    expected = (np.arange(16) * 2)[np.arange(comm.rank, 16, 2 + comm.rank % 3)]
    collective_assert(np.array_equal(res.get_local_data(), expected), "librarian key")


def test_paper_local_keys_listing(comm):
    """local_keys.py of the paper (its printed values hold for 2 processes)."""
    obj = distributed_data_object(np.arange(16) * 2)
    res = obj.get_data(key=slice(None, None, 2 + comm.rank), local_keys=True)
    collective_assert(
        np.array_equal(res.get_local_data(), np.arange(0, 32, 2 * (2 + comm.rank))), "slices"
    )
    key_tuple = (distributed_data_object([1, 3, 5, 7]), distributed_data_object([2, 4, 6, 8]))
    key = key_tuple[comm.rank % 2]
    res = obj.get_data(key=key, local_keys=True)
    expected = [[2, 6, 10, 14], [4, 8, 12, 16]][comm.rank % 2]
    collective_assert(np.array_equal(res.get_local_data(), expected), "librarian")


def test_bad_local_key_on_one_rank(comm):
    obj = make(A, "equal", 0)
    last = comm.size - 1
    bad = [
        (IndexError, 7),
        (IndexError, 1.5),
        (IndexError, np.ones(5, bool)),
        (IndexError, (0, 0, 0)),
    ]
    for exc, badkey in bad:
        key = badkey if comm.rank == last else 1
        assert_raises_everywhere(exc, obj.get_data, key, local_keys=True)
        assert_raises_everywhere(exc, obj.set_data, 0, key, local_keys=True)
    value = np.ones(3) if comm.rank == last else np.ones(5)
    assert_raises_everywhere(ValueError, obj.set_data, value, 2, local_keys=True)
    # results that cannot form one array
    if comm.size > 1:
        key = 1 if comm.rank == last else slice(0, 2)
        assert_raises_everywhere(ValueError, obj.get_data, key, local_keys=True)
    assert_equal_to_numpy(obj, A)  # nothing was written


@pytest.mark.parametrize("strategy", ["not", "equal"])
def test_local_keys_of_uneven_counts(comm, strategy):
    # rank r writes r + 1 elements (its own keys and values); on a replicated array every
    # rank applies every rank's writes, in rank order
    n = sum(r + 2 for r in range(comm.size))
    x = distributed_data_object(np.zeros(n), distribution_strategy=strategy)
    start = sum(r + 2 for r in range(comm.rank))
    keys = np.arange(start, start + comm.rank + 1)
    x.set_data(keys + 100.0, keys, local_keys=True)
    want = np.zeros(n)
    for r in range(comm.size):
        s = sum(q + 2 for q in range(r))
        want[s : s + r + 1] = np.arange(s, s + r + 1) + 100.0
    assert_equal_to_numpy(x, want)
