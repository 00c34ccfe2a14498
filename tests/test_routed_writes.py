"""``d2o.numpy.insert``/``delete`` (one exchange of the elements that change rank) and the
routed in-place writes ``place``, ``put_along_axis``, ``fill_diagonal``, against numpy on
every layout (`d2o.ops.edits`, `d2o.ops.writes`)."""

from __future__ import annotations

import numpy as np
import pytest
from _helpers import Checks, layouts, make, sample

import d2o
import d2o.numpy as dnp
from d2o import default_comm
from d2o.testing import assert_raises_everywhere, collective_assert

SHAPES = [(7,), (1,), (0,), (5, 6), (0, 3), (3, 4, 5)]
DTYPES = ["float64", "int32", "bool"]


def _objs(n: int) -> list:
    """Index arguments of ``insert``/``delete`` along an axis of length ``n``."""
    out: list = [slice(1, None, 2), []]
    if n:
        out += [-1, [n - 1, 0, -n], np.arange(n) % 2 == 0, np.int64(n // 2)]
    return out


def _check_edits(a: np.ndarray, check: Checks) -> None:
    for strategy, ax in layouts(a.ndim):
        x = make(a, strategy, ax)
        for axis in [None, 0, -1][: a.ndim + 1]:
            n = a.size if axis is None else a.shape[axis]
            for obj in _objs(n):
                what = f"{strategy}/{ax} axis={axis} obj={obj!r}"
                check.equal(dnp.delete(x, obj, axis=axis), np.delete(a, obj, axis=axis),
                            what="delete " + what)  # fmt: skip
                if isinstance(obj, np.ndarray) and obj.dtype == bool:
                    continue
                v = a.reshape(-1)[:1] if a.size else np.zeros(1, a.dtype)
                check.equal(dnp.insert(x, obj, v[0], axis=axis),
                            np.insert(a, obj, v[0], axis=axis), what="insert " + what)  # fmt: skip
        check.true(np.array_equal(x.get_full_data(), a), f"input unchanged {strategy}/{ax}")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_insert_delete_match_numpy(shape, dtype):
    a = sample(shape, dtype)
    check = Checks()
    _check_edits(a, check)
    collective_assert(not check.failures, "\n".join(check.failures[:5]))


@pytest.mark.parametrize("shape", [(5, 6), (7,), (3, 4, 5)])
def test_insert_values_broadcast_and_cast(shape):
    a = sample(shape, "int32")
    check = Checks()
    for strategy, ax in layouts(a.ndim):
        x = make(a, strategy, ax)
        last = a.ndim - 1
        row = np.arange(a.shape[last]) * 1.7  # floats cast to the array's dtype
        cases = [
            (1, row[None], 0),
            ([0, 2, 2], 5.5, last),
            (2, [[1], [2]], last if a.ndim > 1 else 0),
        ]
        for obj, values, axis in cases:
            try:
                want = np.insert(a, obj, values, axis=axis)
            except ValueError:
                assert_raises_everywhere(ValueError, dnp.insert, x, obj, values, axis=axis)
                continue
            check.equal(dnp.insert(x, obj, values, axis=axis), want, what=f"{strategy} {obj}")
    collective_assert(not check.failures, "\n".join(check.failures[:5]))


def test_insert_delete_errors():
    a = sample((5, 6), "float64")
    for strategy, ax in layouts(2):
        x = make(a, strategy, ax)
        assert_raises_everywhere(IndexError, dnp.delete, x, 5, axis=0)
        assert_raises_everywhere(IndexError, dnp.delete, x, [0, 9], axis=1)
        assert_raises_everywhere(IndexError, dnp.delete, x, [0.5], axis=1)
        assert_raises_everywhere(ValueError, dnp.delete, x, np.ones(3, bool), axis=0)
        assert_raises_everywhere(np.exceptions.AxisError, dnp.delete, x, 0, axis=2)
        assert_raises_everywhere(IndexError, dnp.insert, x, 7, 1.0, axis=1)
        assert_raises_everywhere(IndexError, dnp.insert, x, [0, 12], 1.0, axis=1)
        assert_raises_everywhere(ValueError, dnp.insert, x, [[0]], 1.0, axis=1)
        assert_raises_everywhere(ValueError, dnp.insert, x, [0, 1], np.ones((2, 2)), axis=0)
        collective_assert(np.array_equal(x.get_full_data(), a), strategy)


def _sent(f) -> int:
    with d2o.options(check_args=False), d2o.trace() as t:
        f()
    return default_comm().allreduce(t.bytes_sent, "max")


def test_edits_move_only_what_changes_rank():
    p = default_comm().size
    n = 40 * p
    a = sample((n, 3), "float64")
    x = make(a, "equal", 0)
    # deleting the last row: nothing moves on the slab of its rank's neighbours but a
    # few rows per boundary; a wholesale gather would send (n - n/p) * 3 * 8 bytes
    sent = _sent(lambda: dnp.delete(x, [0], axis=0))
    collective_assert(sent <= 3 * 8 * 2, f"delete of row 0 sent {sent} bytes")
    sent = _sent(lambda: dnp.insert(x, n, 1.0, axis=0))
    collective_assert(sent <= 3 * 8 * 2 * p, f"insert at the end sent {sent} bytes")
    # along an axis that is whole on every rank nothing moves at all
    collective_assert(_sent(lambda: dnp.delete(x, 1, axis=1)) == 0, "delete along axis 1")
    collective_assert(_sent(lambda: dnp.insert(x, 1, 7.0, axis=1)) == 0, "insert along axis 1")
    y = make(a, "cyc2") if a.ndim == 2 else x
    with d2o.trace() as t:
        dnp.delete(y, [1, 2], axis=0)
    collective_assert(all(r.via_slab == 0 for r in t.records), "mesh delete went via slab")


# -- place ------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float64", "int32", "bool"])
@pytest.mark.parametrize("shape", [(7,), (0,), (5, 6), (3, 4, 5)])
def test_place_matches_numpy(shape, dtype):
    a = sample(shape, dtype)
    m = sample(shape, "bool", seed=3)
    check = Checks()
    for strategy, ax in layouts(a.ndim):
        for vals in ([1, 2, 3], np.arange(40)):
            want = a.copy()
            try:
                np.place(want, m, vals)
            except TypeError:  # an int64 array into a narrower dtype: numpy refuses
                x = make(a, strategy, ax)
                assert_raises_everywhere(TypeError, dnp.place, x, m, vals)
                collective_assert(np.array_equal(x.get_full_data(), a), "unchanged")
                continue
            for dist_mask in (False, True):
                x = make(a, strategy, ax)
                dnp.place(x, make(m, strategy, ax) if dist_mask else m, vals)
                check.equal(x, want, what=f"{strategy}/{ax} {vals!r} dist_mask={dist_mask}")
    collective_assert(not check.failures, "\n".join(check.failures[:5]))


def test_place_errors_leave_the_array_unchanged():
    a = sample((5, 6), "float64")
    m = sample((5, 6), "bool", seed=3)
    for strategy, ax in layouts(2):
        x = make(a, strategy, ax)
        assert_raises_everywhere(ValueError, dnp.place, x, m, [])
        assert_raises_everywhere(ValueError, dnp.place, x, make(m, strategy, ax), [])
        assert_raises_everywhere(ValueError, dnp.place, x, m[:2], [1.0])
        collective_assert(np.array_equal(x.get_full_data(), a), strategy)
        dnp.place(x, np.zeros((5, 6), bool), [])  # no True entry: nothing to insert, fine
        collective_assert(np.array_equal(x.get_full_data(), a), strategy)


def test_place_with_numpy_mask_moves_nothing():
    a = sample((8, 6), "float64")
    m = sample((8, 6), "bool", seed=3)
    for strategy, ax in layouts(2):
        x = make(a, strategy, ax)
        sent = _sent(lambda x=x: dnp.place(x, m, [1.0, 2.0]))
        collective_assert(sent == 0, f"{strategy}: {sent} bytes")


# -- put_along_axis -----------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float64", "int64"])
@pytest.mark.parametrize("shape", [(7,), (5, 6), (1, 1), (3, 4, 5)])
def test_put_along_axis_matches_numpy(shape, dtype):
    a = sample(shape, dtype)
    check = Checks()
    for strategy, ax in layouts(a.ndim):
        for axis in range(a.ndim):
            idx = np.argsort(a.real if a.dtype.kind == "c" else a, axis=axis)
            first = np.take(idx, [0], axis=axis)
            for ind, values in ((idx, 9), (first, sample(first.shape, dtype, seed=5)),
                                (-first - 1, 7)):  # fmt: skip
                want = a.copy()
                np.put_along_axis(want, ind, values, axis)
                x = make(a, strategy, ax)
                dnp.put_along_axis(x, ind, values, axis)
                check.equal(x, want, what=f"{strategy}/{ax} axis={axis} {ind.shape}")
            # distributed indices and values of the array's shape
            values = sample(idx.shape, dtype, seed=6)
            want = a.copy()
            np.put_along_axis(want, idx, values, axis)
            x = make(a, strategy, ax)
            dnp.put_along_axis(x, make(idx, strategy, ax), make(values, strategy, ax), axis)
            check.equal(x, want, what=f"{strategy}/{ax} axis={axis} distributed indices")
    collective_assert(not check.failures, "\n".join(check.failures[:5]))


def test_put_along_axis_errors_leave_the_array_unchanged():
    a = sample((5, 6), "float64")
    ind = np.zeros((5, 1), dtype=np.intp)
    for strategy, ax in layouts(2):
        x = make(a, strategy, ax)
        assert_raises_everywhere(IndexError, dnp.put_along_axis, x, ind + 6, 1.0, 1)
        assert_raises_everywhere(IndexError, dnp.put_along_axis, x, ind.astype(float), 1.0, 1)
        assert_raises_everywhere(ValueError, dnp.put_along_axis, x, ind[:, 0], 1.0, 1)
        assert_raises_everywhere(np.exceptions.AxisError, dnp.put_along_axis, x, ind, 1.0, 2)
        bad = make(np.full((5, 6), 9, dtype=np.intp), strategy, ax)
        assert_raises_everywhere(IndexError, dnp.put_along_axis, x, bad, 1.0, 0)
        dnp.put_along_axis(x, ind[:, 0], 1.0, None)  # numpy writes into a flattened copy
        collective_assert(np.array_equal(x.get_full_data(), a), strategy)


def test_put_along_axis_with_numpy_indices_moves_nothing():
    a = sample((8, 6), "float64")
    ind = np.argmax(a, axis=1, keepdims=True)
    for strategy, ax in layouts(2):
        x = make(a, strategy, ax)
        sent = _sent(lambda x=x: dnp.put_along_axis(x, ind, 99.0, 1))
        collective_assert(sent == 0, f"{strategy}: {sent} bytes")


# -- fill_diagonal ------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float64", "int32", "bool"])
@pytest.mark.parametrize("shape", [(5, 5), (7, 3), (3, 7), (1, 1), (0, 0), (3, 3, 3)])
def test_fill_diagonal_matches_numpy(shape, dtype):
    a = sample(shape, dtype)
    check = Checks()
    for strategy, ax in layouts(a.ndim):
        for val in (1, [1, 0, 1], np.arange(2)):
            for wrap in (False, True):
                want = a.copy()
                np.fill_diagonal(want, val, wrap=wrap)
                x = make(a, strategy, ax)
                dnp.fill_diagonal(x, val, wrap=wrap)
                check.equal(x, want, what=f"{strategy}/{ax} {val!r} wrap={wrap}")
    collective_assert(not check.failures, "\n".join(check.failures[:5]))


def test_fill_diagonal_is_local_and_checks_shapes():
    a = sample((9, 9), "float64")
    for strategy, ax in layouts(2):
        x = make(a, strategy, ax)
        sent = _sent(lambda x=x: dnp.fill_diagonal(x, [1.0, 2.0]))
        collective_assert(sent == 0, f"{strategy}: {sent} bytes")
    x = make(sample((7,), "float64"), "equal")
    assert_raises_everywhere(ValueError, dnp.fill_diagonal, x, 1.0)
    y = make(sample((3, 3, 4), "float64"), "equal")
    assert_raises_everywhere(ValueError, dnp.fill_diagonal, y, 1.0)


def test_numpy_arrays_take_numpy():
    a = sample((4, 4), "float64")
    b = a.copy()
    dnp.fill_diagonal(b, 3.0)
    want = a.copy()
    np.fill_diagonal(want, 3.0)
    collective_assert(np.array_equal(b, want), "fill_diagonal on numpy")
    collective_assert(np.array_equal(dnp.delete(a, 1), np.delete(a, 1)), "delete on numpy")


def test_distributed_keys_move_only_the_written_elements():
    """A distributed mask or distributed indices: the True positions (one prefix count)
    and their values travel to their owners only, never the whole array."""
    p = default_comm().size
    n = 40 * p
    a = sample((n, 6), "float64")
    m = np.zeros(a.shape, bool)
    m[[0, 17, -1], [5, 0, 3]] = True
    for strategy, ax in [("equal", 0), ("equal", 1), ("fftw", 0)]:
        x = make(a, strategy, ax)
        mask = make(m, strategy, ax)
        sent = _sent(lambda x=x, mask=mask: dnp.place(x, mask, [1.0, 2.0]))
        collective_assert(sent <= 1024, f"{strategy}/{ax}: place sent {sent} bytes")
        # every target in row 0: each rank's (index, value) pairs travel once to its owner
        d_ind = make(np.zeros((n, 6), dtype=np.intp), strategy, ax)
        sent = _sent(lambda x=x, d=d_ind: dnp.put_along_axis(x, d, 1.0, 0))
        limit = 2 * 16 * (n * 6 // p + 6) + 1024
        collective_assert(sent <= limit, f"{strategy}/{ax}: put_along_axis sent {sent} B")
