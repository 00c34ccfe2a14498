"""Hand-written indexing tests: every key kind, values, injection, layouts, errors.

numpy on the same global data is the oracle; every check is collective.
"""

from __future__ import annotations

import numpy as np
import pytest
from _helpers import MESH_SPLITS, Checks, layouts
from _helpers import make as make_layout

from d2o import distributed_data_object
from d2o.core.comm import default_comm
from d2o.testing import assert_equal_to_numpy, assert_raises_everywhere, collective_assert

# (strategy, axis): every strategy, distributed axes 0, 1 and -1
LAYOUTS = [
    ("not", 0),
    ("equal", 0),
    ("equal", 1),
    ("fftw", 0),
    ("fftw", -1),
    ("freeform", 0),
    ("freeform", 1),
    ("mesh01", 0),
    ("mesh10", 0),
    ("meshrep", 0),
    ("mesh02", 0),
]


def freeform_lengths(n: int, size: int) -> list[int]:
    """Uneven lengths with rank 0 holding nothing when there are several ranks."""
    if size == 1:
        return [n]
    lengths = [0] * size
    for i in range(n):
        lengths[1 + (i * 7) % (size - 1)] += 1
    return lengths


def make(a: np.ndarray, strategy: str, axis: int = 0):
    """A distributed copy of ``a`` in the given layout (axis clipped to a.ndim)."""
    a = np.asarray(a)
    if a.ndim == 0:
        return distributed_data_object(a, distribution_strategy="not")
    if strategy in MESH_SPLITS:
        return make_layout(a, strategy)
    ax = axis % a.ndim if -a.ndim <= axis < a.ndim else 0
    if strategy != "freeform":
        return distributed_data_object(a, distribution_strategy=strategy, axis=ax)
    comm = default_comm()
    lengths = freeform_lengths(a.shape[ax], comm.size)
    lo = sum(lengths[: comm.rank])
    piece = np.take(a, np.arange(lo, lo + lengths[comm.rank]), axis=ax)
    return distributed_data_object(local_data=piece, distribution_strategy="freeform", axis=ax)


A = np.arange(60).reshape(3, 4, 5)

GET_KEYS = [
    1,
    -1,
    (1, 2),
    (1, 2, 3),
    (-1, -2, -3),
    slice(None, None, -1),
    slice(10, -10, -1),
    (slice(None), 2),
    (slice(None, None, -2), slice(1, 3)),
    (slice(1, None, 2), slice(None, None, -3), slice(-2, None)),
    (Ellipsis, 1),
    (0, Ellipsis, 0),
    (Ellipsis,),
    (),
    (None, 1),
    (slice(None), None, 2, None),
    [0, 2],
    [-1, -3, 0, 2, 2],
    ([0, 2], [1, 3]),
    (slice(None), [0, 3]),
    (0, slice(None), [1, 2]),
    ([[0], [2]], slice(None), [1, 2]),
    (slice(None), [0, 1], None, [0, 1]),
    (slice(None), [0, 1], [0, 1]),
    ([2, 0, 1], Ellipsis, [4, 0, 1]),
    (slice(None), slice(None), [4, -5]),
    (slice(None, None, -1), [3, 0]),
    A > 30,
    A[:, :, 0] > 7,
    (slice(None), A[0] > 3),
    (slice(None), np.array([True, False, True, True]), [0, 4, 4]),
    True,
    False,
    (slice(None), True, [1]),
    [],
    np.array([], dtype=int),
    np.array([[2, 0], [1, 1]]),
    np.array(2),
]


def _check_get(obj, a, key):
    expected = a[key]
    result = obj[key]
    if np.ndim(expected) == 0 and not isinstance(expected, np.ndarray):
        collective_assert(
            isinstance(result, np.generic)
            and result == expected
            and type(result) is type(expected),
            f"key {key!r}: got {result!r}, expected the scalar {expected!r}",
        )
        values = obj.comm.allgather(result) if hasattr(obj.comm, "allgather") else [result]
        collective_assert(all(v == values[0] for v in values), "scalar differs between ranks")
    else:
        assert_equal_to_numpy(result, expected)


@pytest.mark.parametrize("strategy,axis", LAYOUTS)
def test_get_every_key_kind(strategy, axis):
    obj = make(A, strategy, axis)
    for key in GET_KEYS:
        _check_get(obj, A, key)
    assert_equal_to_numpy(obj, A)  # getting never changes the array


@pytest.mark.parametrize("strategy,axis", LAYOUTS)
def test_distributed_keys(strategy, axis):
    obj = make(A, strategy, axis)
    for ks, kax in [("equal", 0), ("not", 0), ("freeform", 0), ("fftw", 1)]:
        mask = make(A > 30, ks, kax)
        assert_equal_to_numpy(obj[mask], A[A > 30])
        assert_equal_to_numpy(obj[obj > 30], A[A > 30])
        pmask = make(A[:, :, 1] > 7, ks, kax)
        assert_equal_to_numpy(obj[pmask], A[A[:, :, 1] > 7])
        assert_equal_to_numpy(obj[:, pmask[0]], A[:, A[0, :, 1] > 7])
        ikey = make(np.array([2, 0, -1, 1, 1]), ks, 0)
        assert_equal_to_numpy(obj[ikey], A[[2, 0, -1, 1, 1]])
        assert_equal_to_numpy(obj[1, ikey], A[1, [2, 0, -1, 1, 1]])
        ikey2 = make(np.array([[0, 3], [1, 2]]), ks, kax)
        assert_equal_to_numpy(obj[:, ikey2, [[4], [0]]], A[:, [[0, 3], [1, 2]], [[4], [0]]])


@pytest.mark.parametrize("dtype", [np.int64, np.float64, np.complex128, np.bool_])
@pytest.mark.parametrize("strategy,axis", [("equal", 0), ("fftw", 1), ("freeform", 0), ("not", 0)])
def test_dtypes(dtype, strategy, axis):
    a = (A % 7).astype(dtype) if dtype is not np.complex128 else A * (1 - 2j)
    obj = make(a, strategy, axis)
    for key in [1, (2, 3, 4), (slice(None, None, -1), [0, 3]), a != a.flat[3], [2, 0]]:
        _check_get(obj, a, key)
    b = a.copy()
    b[[2, 0], 1] = a[0, 0, 0]
    obj[[2, 0], 1] = a[0, 0, 0]
    assert_equal_to_numpy(obj, b)


@pytest.mark.parametrize("shape", [(0,), (1,), (0, 3), (3, 0), (1, 1), (2,)])
@pytest.mark.parametrize("strategy", ["not", "equal", "fftw", "freeform"])
def test_empty_and_tiny(shape, strategy):
    a = np.arange(int(np.prod(shape)), dtype=float).reshape(shape)
    obj = make(a, strategy, 0)
    keys = [slice(None), slice(None, None, -1), (Ellipsis, None), np.zeros(shape, bool), []]
    if shape[0]:
        keys += [0, -1, [0, 0]]
    for key in keys:
        _check_get(obj, a, key)
        a[key] = 7
        obj[key] = 7
        assert_equal_to_numpy(obj, a)


# Empty slices with a negative step (issue 28): ``slice(-3, None, -3)`` on a length-1 axis
# resolves to start -1, which a key handed back to numpy read as "the last element".
EMPTY_NEG = [
    slice(-3, None, -3),
    slice(2, 6, -2),
    slice(None, None, -1),
    slice(0, None, -1),  # one element
    slice(-10, None, -1),
    slice(None, -10, -2),
    slice(1, 1, -1),
    slice(5, 2),
]


@pytest.mark.parametrize("shape", [(1, 4), (3, 5), (0, 2), (1,), (4,), (0,)])
def test_empty_and_negative_step_slices_on_every_layout(shape):
    """Every pair of those slices, on every layout: the view, a copy and an assignment
    against numpy; each rank's piece has its layout's local shape."""
    a = np.arange(int(np.prod(shape))).reshape(shape)
    keys = [(k0, k1) for k0 in EMPTY_NEG for k1 in EMPTY_NEG] if a.ndim == 2 else EMPTY_NEG
    for strategy, axis in layouts(a.ndim):
        x = make_layout(a, strategy, axis)
        check = Checks()
        for key in keys:
            what = f"{strategy} axis {axis} key {key}"
            v = x[key]
            check.equal(v, a[key], what=f"{what} (view)")
            check.true(v.data.shape == v.distributor.local_shape, f"{what}: piece {v.data.shape} "
                       f"in a layout of local shape {v.distributor.local_shape}")  # fmt: skip
            check.equal(v.copy(), a[key], what=f"{what} (copy)")
        check.done()
        b = a.copy()
        for i, key in enumerate(keys[::3]):
            x[key] = -1 - i
            b[key] = -1 - i
        assert_equal_to_numpy(x, b)


def test_slice_result_stays_in_place(comm):
    """obj[0:3:2, 1:3] keeps each rank's rows where they are (get_set_data.py)."""
    a = np.arange(16).reshape(4, 4)
    obj = distributed_data_object(a)
    sub = obj[0:3:2, 1:3]
    lo, hi = obj.distributor.local_start, obj.distributor.local_stop
    rows = [r for r in range(0, 3, 2) if lo <= r < hi]
    collective_assert(np.array_equal(sub.get_local_data(), a[rows, 1:3]), "piece moved")
    collective_assert(sub.distribution_strategy == "freeform" or comm.size == 1, "strategy")
    assert_equal_to_numpy(sub, a[0:3:2, 1:3])


def test_results_are_distributed_not_gathered(comm):
    a = np.arange(40.0)
    obj = distributed_data_object(a)
    for key in [slice(None, None, -2), [39, 0, 5, 17, 3, 22, 8, 30], a > 10]:
        res = obj[key]
        n = res.shape[0]
        biggest = comm.allreduce(res.local_shape[0], op="max")
        collective_assert(comm.size == 1 or biggest < n, f"key {key!r} replicated a result")
        assert_equal_to_numpy(res, a[key])
    b = np.arange(48).reshape(4, 12)
    x = distributed_data_object(b)
    row = x.get_data(1)  # a copy (the paper's get_data): spread over the ranks
    collective_assert(comm.size == 1 or row.local_shape[0] < 12, "row not spread")
    assert_equal_to_numpy(row, b[1])
    view = x[1]  # a view (numpy): the owner of row 1 holds it, nothing moves
    held = comm.allgather(view.local_shape[0])
    collective_assert(sorted(held) == [0] * (comm.size - 1) + [12], f"row view held as {held}")
    assert_equal_to_numpy(view, b[1])


def test_basic_keys_give_views_and_get_data_copies():
    """obj[basic key] is a view, as in numpy; the paper's get_data returns a copy."""
    obj = distributed_data_object(np.arange(10))
    sub = obj[2:5]
    sub[0] = 100
    expected = np.arange(10)
    expected[2] = 100
    assert_equal_to_numpy(obj, expected)
    cp = obj.get_data(slice(2, 5))
    cp[0] = -1
    assert_equal_to_numpy(obj, expected)


SET_CASES = [
    (1, -7),
    (1, np.arange(20).reshape(4, 5)),
    ((1, 2), [1, 2, 3, 4, 5]),
    ((1, 2, 3), 99),
    (slice(None, None, -1), -A),
    ((slice(None), 2), np.arange(15).reshape(3, 5)),
    ((Ellipsis, 1), np.arange(12).reshape(3, 4)),
    ((slice(None, None, -2), slice(1, 3)), np.arange(10).reshape(1, 2, 5)),
    ([0, 2], np.arange(40).reshape(2, 4, 5)),
    (([0, 2], [1, 3]), np.arange(10).reshape(2, 5)),
    ((slice(None), [0, 3]), np.arange(5)),
    ((0, slice(None), [1, 2]), np.arange(8).reshape(2, 4)),
    ([2, 0, 2], -A),
    (A > 30, -np.arange(29)),
    (A[:, :, 0] > 7, 7),
    (([[0], [2]], slice(None), [1, 2]), np.arange(16).reshape(2, 2, 4)),
    ((slice(None), [0, 1], None, [0, 1]), np.arange(6).reshape(2, 3, 1)),
    ((0, Ellipsis, 0), -1),
    ((slice(None), slice(None), [4, -5]), np.arange(24).reshape(3, 4, 2)),
    (np.s_[::-1, 1, ::2], np.arange(9).reshape(3, 3)),
    (np.s_[1:3], np.ones((1, 1, 2, 4, 5))),
    ([[1, 2], [0, 1]], 5.5),
]


@pytest.mark.parametrize("strategy,axis", LAYOUTS)
def test_set_numpy_and_scalar_values(strategy, axis):
    for key, value in SET_CASES:
        b = A.copy()
        b[key] = value
        obj = make(A, strategy, axis)
        obj[key] = value
        assert_equal_to_numpy(obj, b)


@pytest.mark.parametrize("strategy,axis", [("equal", 0), ("fftw", -1), ("freeform", 1)])
def test_set_distributed_values(strategy, axis):
    for key, value in SET_CASES:
        if np.ndim(value) == 0:
            continue
        for vs, vax in [("equal", 0), ("not", 0), ("freeform", -1), ("fftw", 1)]:
            b = A.copy()
            b[key] = value
            obj = make(A, strategy, axis)
            obj[key] = make(np.asarray(value), vs, vax)
            assert_equal_to_numpy(obj, b)


def test_set_distributed_keys():
    for ks in ["equal", "not", "freeform"]:
        b = A.copy()
        b[A > 30] = -5
        obj = make(A, "equal", 0)
        obj[obj > 30] = -5
        assert_equal_to_numpy(obj, b)
        b = A.copy()
        b[A > 30] = -np.arange(29)
        obj = make(A, "fftw", 1)
        obj[make(A > 30, ks, 1)] = make(-np.arange(29), ks, 0)
        assert_equal_to_numpy(obj, b)
        b = A.copy()
        b[1, [3, 0, 2]] = [[1], [2], [3]]
        obj = make(A, ks, 2)
        obj[1, make(np.array([3, 0, 2]), ks, 0)] = [[1], [2], [3]]
        assert_equal_to_numpy(obj, b)


def test_paper_listings():
    """The Basic-usage and Appendix-1 snippets (see examples/indexing.py)."""
    obj = distributed_data_object(np.arange(12).reshape(3, 4))
    assert_equal_to_numpy(obj[1], np.array([4, 5, 6, 7]))
    collective_assert(obj[1, -2] == 6 and obj[2, 1] == 9, "single entries")
    assert_equal_to_numpy(obj[::2, 1::2], np.array([[1, 3], [9, 11]]))
    obj[::2, 1::2] = [[111, 222], [333, 444]]
    assert_equal_to_numpy(obj, np.array([[0, 111, 2, 222], [4, 5, 6, 7], [8, 333, 10, 444]]))
    obj = distributed_data_object(np.arange(12).reshape(3, 4))
    idx = (np.array([1, 1, 2, 2, 2, 2]), np.array([2, 3, 0, 1, 2, 3]))
    assert_equal_to_numpy(obj[idx], np.arange(6, 12))
    assert_equal_to_numpy(obj[:, ::-2], np.array([[3, 1], [7, 5], [11, 9]]))
    assert_equal_to_numpy(obj[obj > 5], np.arange(6, 12))
    obj[obj > 5] = [11, 22, 33, 44, 55, 66]
    assert_equal_to_numpy(obj, np.array([[0, 1, 2, 3], [4, 5, 11, 22], [33, 44, 55, 66]]))


@pytest.mark.parametrize("strategy,axis", [("equal", 0), ("freeform", 1), ("not", 0)])
def test_injection(strategy, axis):
    src = np.arange(100, 160).reshape(3, 4, 5)
    for to_key, from_key in [
        (np.s_[1:3], np.s_[::-2]),
        (np.s_[:, 1], np.s_[:, 3]),
        ([2, 0], [0, 1]),
        (A > 40, src < 119),
        (np.s_[..., 0], np.s_[::-1, :, 2]),
    ]:
        b = A.copy()
        b[to_key] = src[from_key]
        obj = make(A, strategy, axis)
        obj.set_data(src, to_key, from_key)
        assert_equal_to_numpy(obj, b)
        for ds, dax in [("equal", 0), ("fftw", 2), ("freeform", 1)]:
            obj = make(A, strategy, axis)
            obj.set_data(make(src, ds, dax), to_key, from_key)
            assert_equal_to_numpy(obj, b)


def test_get_data_set_data_methods():
    obj = make(A, "equal", 1)
    assert_equal_to_numpy(obj.get_data((slice(None), [1, 3])), A[:, [1, 3]])
    obj.set_data(0, (Ellipsis, 2))
    b = A.copy()
    b[..., 2] = 0
    assert_equal_to_numpy(obj, b)
    assert_raises_everywhere(TypeError, obj.get_data, 1, bogus=True)


ERRORS = [
    (IndexError, (0, 0, 0, 0)),  # too many indices
    (IndexError, 5),  # out of bounds
    (IndexError, (1, -6)),
    (IndexError, [0, 3]),
    (IndexError, (slice(None), [0, 9])),
    (IndexError, 1.0),  # float keys
    (IndexError, [1.0]),
    (IndexError, np.array([0.5])),
    (IndexError, "a"),
    (IndexError, np.ones((3, 3), bool)),  # wrong mask shape
    (IndexError, np.ones(4, bool)),
    (IndexError, ([0, 1], [0, 1, 2])),  # index arrays do not broadcast
    (IndexError, (Ellipsis, Ellipsis)),
    (ValueError, slice(None, None, 0)),
]


@pytest.mark.parametrize("strategy,axis", [("equal", 0), ("fftw", 1), ("not", 0), ("freeform", 0)])
def test_errors(strategy, axis):
    obj = make(A, strategy, axis)
    for exc, key in ERRORS:
        assert_raises_everywhere(exc, A.__getitem__, key)  # numpy's own rule
        assert_raises_everywhere(exc, obj.__getitem__, key)
        assert_raises_everywhere(exc, obj.__setitem__, key, 1)
    assert_raises_everywhere(IndexError, obj.__getitem__, make(np.array([0, 7]), "equal", 0))
    assert_raises_everywhere(IndexError, obj.__getitem__, make(np.ones((2, 4), bool), "equal"))
    # shape mismatch on assignment (ValueError), nothing written
    for key, value in [
        (1, np.ones(3)),
        (np.s_[:2], np.ones((3, 4, 5))),
        ([0, 2], np.ones((3, 4, 5))),
        (A > 3, np.ones(3)),
        (1, make(np.ones((2, 5)), "equal", 0)),
        ([2, 1], make(np.ones((3, 4, 5)), "equal", 1)),
    ]:
        assert_raises_everywhere(ValueError, obj.__setitem__, key, value)
    assert_raises_everywhere(IndexError, obj.__setitem__, make(np.array([0, 7]), "equal"), 0)
    assert_raises_everywhere(TypeError, obj.__setitem__, (0, 0, 0), 1j)
    assert_equal_to_numpy(obj, A)


def test_fast_paths():
    for strategy in ["equal", "not", "freeform"]:
        a = np.arange(10.0)
        obj = make(a, strategy)
        collective_assert(obj[5] == 5.0 and obj[-1] == 9.0, "obj[5]")
        obj[5] = 1
        obj[-1] = True
        a[5], a[-1] = 1, True
        assert_equal_to_numpy(obj, a)
        assert_raises_everywhere(IndexError, obj.__getitem__, 10)
        assert_raises_everywhere(IndexError, obj.__setitem__, -11, 1)
        assert_raises_everywhere(TypeError, obj.__setitem__, 0, 1j)
        assert_equal_to_numpy(obj, a)


def test_successive_fancy_results_are_independent():
    # large row fetches (4096 elements or more, owners unsorted) reuse scratch buffers
    # internally; their results must not share them
    a = np.arange(6000.0)
    rng = np.random.default_rng(3)
    # random keys, and rotations (each rank's share of the result comes from its sources
    # in order, though the owners of the whole key are not sorted)
    keys = [rng.permutation(6000)[:5000] for _ in range(2)]
    keys += [np.roll(np.arange(6000), s)[:5000] for s in (3000, 1700)]
    for strategy in ("equal", "fftw", "not"):
        x = distributed_data_object(a, distribution_strategy=strategy)
        results = [x[k] if i % 2 else x.get_data(k) for i, k in enumerate(keys)]
        for got, k in zip(results, keys):
            assert_equal_to_numpy(got, a[k])
