"""reshape, transpose/swapaxes, wrap, global_slice, enumerate, local_array."""

from __future__ import annotations

import numpy as np
import pytest

import d2o
import d2o.numpy as dnp
from d2o import distributed_data_object as D2O
from d2o.core.comm import default_comm
from d2o.testing import assert_equal_to_numpy, assert_raises_everywhere, collective_assert

COMM = default_comm()
A = np.arange(24.0).reshape(2, 3, 4)
LAYOUTS = [("not", 0)] + [(s, ax) for s in ("equal", "fftw") for ax in range(3)]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_transpose_and_swapaxes_are_local(layout):
    x = D2O(A, distribution_strategy=layout[0], axis=layout[1])
    for axes in [(), ((2, 0, 1),), (1, 2, 0), (None,)]:
        y = x.transpose(*axes)
        assert_equal_to_numpy(y, A.transpose(*axes))
        collective_assert(np.shares_memory(y.local_array, x.local_array) or not x.local_array.size)
    assert_equal_to_numpy(x.T, A.T)
    assert_equal_to_numpy(x.swapaxes(0, -1), A.swapaxes(0, -1))
    assert_equal_to_numpy(d2o.swapaxes(x, 1, 2), A.swapaxes(1, 2))
    if x.axis is not None:
        collective_assert(x.transpose(2, 1, 0).axis == 2 - x.axis, "axis must move")


@pytest.mark.parametrize("layout", LAYOUTS)
def test_reshape(layout):
    x = D2O(A, distribution_strategy=layout[0], axis=layout[1])
    for shape in [(6, 4), (24,), (4, 6), (2, 12), (2, 3, 2, 2), (3, 8), (1, 24, 1), (2, -1, 2)]:
        y = x.reshape(shape)
        assert_equal_to_numpy(y, A.reshape(shape))
    assert_equal_to_numpy(d2o.reshape(x, 4, 6), A.reshape(4, 6))
    assert_raises_everywhere(ValueError, x.reshape, (5, 5))
    assert_raises_everywhere(ValueError, x.reshape, (-1, -1))


def test_reshape_local_when_distributed_axis_survives():
    x = D2O(np.arange(8.0 * COMM.size * 6).reshape(8 * COMM.size, 6))
    y = x.reshape(8 * COMM.size, 2, 3)  # split trailing axis: local view
    collective_assert(y.axis == 0 and np.shares_memory(y.local_array, x.local_array))
    z = x.reshape(None, 3, 2)  # caput's None marks the distributed axis
    collective_assert(z.axis == 0 and z.local_shape[0] == x.local_shape[0])
    assert_equal_to_numpy(z, x.get_full_data().reshape(-1, 3, 2))
    x1 = D2O(np.arange(12.0), distribution_strategy="equal").reshape(1, 12)
    collective_assert(x1.axis == 1, f"expected axis 1, got {x1.axis}")


def test_wrap():
    n = COMM.rank + 1
    piece = np.full((n, 3), float(COMM.rank))
    x = d2o.wrap(piece, axis=0)
    expected = np.concatenate([np.full((r + 1, 3), float(r)) for r in range(COMM.size)])
    assert_equal_to_numpy(x, expected)
    collective_assert(x.local_array is piece, "wrap must not copy")
    y = D2O.wrap(piece.T.copy(), axis=1)
    assert_equal_to_numpy(y, expected.T)
    even = D2O.wrap(np.zeros((2, 3)), axis=0)
    collective_assert(even.distribution_strategy == "equal", even.distribution_strategy)


def test_wrap_length_checks_raise_everywhere():
    bad = np.zeros((2, 3 + (COMM.rank == COMM.size - 1)))
    if COMM.size > 1:
        assert_raises_everywhere(ValueError, d2o.wrap, bad, 0)
    bad_dtype = np.zeros((2, 3), dtype=np.float32 if COMM.rank == 0 else np.float64)
    if COMM.size > 1:
        assert_raises_everywhere(ValueError, d2o.wrap, bad_dtype, 0)
    assert_raises_everywhere(ValueError, d2o.wrap, np.float64(1.0), 0)


@pytest.mark.parametrize("strategy", ["equal", "fftw", "not"])
def test_global_slice_get(strategy):
    a = np.arange(7 * 3.0).reshape(7, 3)
    x = D2O(a, distribution_strategy=strategy)
    lo, hi = (0, 7) if x.axis is None else x.distributor.region(COMM.rank)[0]
    full = x.global_slice[:, 1]
    if strategy == "not":
        collective_assert(np.array_equal(full, a[:, 1]))
    else:
        assert_equal_to_numpy(full, a[:, 1])
    if strategy != "not":
        assert_equal_to_numpy(x.global_slice[..., 0], a[..., 0])
    for key in [5, (2, 1), slice(1, 6, 2), (slice(6, 0, -2), 2)]:
        got = x.global_slice[key]
        k0 = key[0] if isinstance(key, tuple) else key
        if isinstance(k0, slice):
            rows = [i for i in range(*k0.indices(7)) if lo <= i < hi]
            held = bool(rows)
        else:
            rows, held = [k0], lo <= k0 < hi
        ok = (got is None) == (not held)
        if held:
            rest = key[1:] if isinstance(key, tuple) else ()
            if isinstance(k0, slice):
                want = a[rows][(slice(None),) + tuple(rest)]
            else:
                want = a[(k0,) + tuple(rest)]
            ok = ok and np.array_equal(got, want)
        collective_assert(ok, f"global_slice[{key}] on rank {COMM.rank}: {got}")


def test_global_slice_set():
    a = np.zeros((6, 4))
    x = D2O(a)
    x.global_slice[3] = 17.0
    x.global_slice[:, 1] = np.arange(6.0)
    x.global_slice[4:, 2] = np.array([5.0, 6.0])
    a[3] = 17.0
    a[:, 1] = np.arange(6.0)
    a[4:, 2] = [5.0, 6.0]
    assert_equal_to_numpy(x, a)
    assert_raises_everywhere(IndexError, lambda: x.global_slice[6])


def test_enumerate_and_local_offset():
    a = np.arange(10 * 2.0).reshape(10, 2)
    x = D2O(a, distribution_strategy="fftw")
    pairs = list(x.enumerate(axis=0))
    ok = all(np.array_equal(x.local_array[li], a[gi]) for li, gi in pairs)
    ok = ok and len(pairs) == x.local_shape[0]
    ok = ok and (not pairs or pairs[0][1] == x.local_offset[0])
    collective_assert(ok, f"enumerate gave {pairs}")
    collective_assert(list(x.enumerate(1)) == [(0, 0), (1, 1)])
    total = COMM.allreduce(len(pairs))
    collective_assert(total == 10, f"{total} rows enumerated")


def test_concatenate_of_pieces_cut_differently():
    # along an axis that is not split, but the split axis is cut differently in each
    # operand ('equal', uneven 'freeform' and 'fftw'): the pieces cannot be joined locally
    comm = default_comm()
    a = np.arange(7 * 3.0).reshape(7, 3)
    b = np.arange(7 * 2.0).reshape(7, 2) + 100
    lengths = [7 - comm.size + 1] + [1] * (comm.size - 1)  # rank 0 holds most rows
    start = sum(lengths[: comm.rank])
    xb = D2O(local_data=b[start : start + lengths[comm.rank]], distribution_strategy="freeform")
    for other in (xb, D2O(b, distribution_strategy="fftw")):
        got = dnp.concatenate([D2O(a), other], axis=1)
        assert_equal_to_numpy(got, np.concatenate([a, b], axis=1))
        got = dnp.concatenate([other, D2O(a)], axis=1)
        assert_equal_to_numpy(got, np.concatenate([b, a], axis=1))
