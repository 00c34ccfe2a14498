"""Construction, attributes, data access, copies, the librarian and iteration."""

from __future__ import annotations

import gc

import numpy as np
import pytest
from _helpers import DTYPES, MESH_SPLITS, layouts, make, mesh_of, sample, spec

from d2o import d2o_librarian, default_comm, distributed_data_object, evaluate, options
from d2o.layouts.distributors import equal_lengths, fftw_lengths, get_distributor
from d2o.testing import assert_equal_to_numpy, assert_raises_everywhere, collective_assert

SHAPES = [(0,), (1,), (7,), (4, 3), (0, 3), (3, 0), (1, 1), (2, 3, 4)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_roundtrip_every_layout(shape, dtype):
    a = sample(shape, dtype)
    for strategy, axis in layouts(len(shape)):
        obj = make(a, strategy, axis)
        collective_assert(obj.shape == a.shape and obj.dtype == a.dtype, (strategy, axis))
        collective_assert(obj.ndim == a.ndim and obj.size == a.size and len(obj) == len(a))
        assert_equal_to_numpy(obj, a)
        if strategy in MESH_SPLITS and a.ndim >= 2:
            collective_assert(obj.distributor is mesh_of(strategy).distributor(a.shape))
        elif strategy not in MESH_SPLITS:
            collective_assert(obj.distribution_strategy == strategy)


def test_strategy_piece_lengths(comm):
    a = np.arange(16).reshape(4, 4)
    for strategy, rule in (("equal", equal_lengths), ("fftw", fftw_lengths)):
        obj = distributed_data_object(a, distribution_strategy=strategy)
        expected = rule(4, comm.size)[comm.rank]
        collective_assert(obj.local_shape == (expected, 4), (strategy, obj.local_shape))
    collective_assert(equal_lengths(4, 3) == [2, 1, 1] and fftw_lengths(4, 3) == [2, 2, 0])
    obj = distributed_data_object(a, distribution_strategy="not")
    collective_assert(obj.local_shape == (4, 4))


def test_any_axis_local_piece(comm):
    a = np.arange(24).reshape(2, 3, 4)
    for axis in (0, 1, 2, -1):
        obj = distributed_data_object(a, axis=axis)
        ax = axis % 3
        lengths = equal_lengths(a.shape[ax], comm.size)
        start = sum(lengths[: comm.rank])
        expected = np.take(a, np.arange(start, start + lengths[comm.rank]), axis=ax)
        collective_assert(np.array_equal(obj.get_local_data(), expected), axis)
        collective_assert(obj.axis == ax and obj.local_offset[ax] == start)


def test_precedence_dtype_data_shape():
    a = np.arange(12).reshape(3, 4)
    obj = distributed_data_object(global_data=a, global_shape=(7, 7), dtype=complex)
    collective_assert(obj.shape == (3, 4) and obj.dtype == np.complex128)
    assert_equal_to_numpy(obj, a.astype(complex))
    obj = distributed_data_object(global_shape=(2, 3))
    collective_assert(obj.dtype == np.float64 and obj.shape == (2, 3))
    obj = distributed_data_object(global_shape=5, dtype=np.int32)
    collective_assert(obj.shape == (5,) and obj.dtype == np.int32)


@pytest.mark.parametrize("value", [[1, 2, 3], (1.5, 2.5), 7, 2.5 + 1j, [[True, False]], []])
def test_python_inputs(value):
    expected = np.asarray(value)
    obj = distributed_data_object(value)
    assert_equal_to_numpy(obj, expected)


def test_zero_d_is_replicated():
    obj = distributed_data_object(5.0)
    collective_assert(obj.shape == () and obj.local_shape == () and obj.axis is None)
    assert_equal_to_numpy(obj, np.asarray(5.0))
    assert_raises_everywhere(TypeError, len, obj)


def test_freeform_global_shape(comm):
    piece = np.arange(4 * 4).reshape(4, 4) + comm.rank
    obj = distributed_data_object(local_data=piece, distribution_strategy="freeform")
    collective_assert(obj.shape == (4 * comm.size, 4))
    expected = np.concatenate([np.arange(16).reshape(4, 4) + r for r in range(comm.size)])
    assert_equal_to_numpy(obj, expected)
    obj = distributed_data_object(local_shape=(comm.rank + 1, 2), dtype=np.int8)
    collective_assert(obj.distribution_strategy == "freeform")
    collective_assert(obj.shape == (sum(range(1, comm.size + 1)), 2) and obj.dtype == np.int8)


def test_freeform_mismatch_raises_everywhere(comm):
    shape = (2, 3) if comm.rank == 0 else (2, 4)
    if comm.size == 1:
        pytest.skip("needs two ranks")
    assert_raises_everywhere(ValueError, distributed_data_object, local_data=np.zeros(shape),
                             distribution_strategy="freeform")  # fmt: skip


def test_from_distributed_input_redistributes():
    a = np.arange(20).reshape(5, 4)
    src = distributed_data_object(a, distribution_strategy="fftw")
    for strategy, axis in layouts(2):
        if strategy == "freeform":
            continue
        obj = distributed_data_object(src, distribution_strategy=spec(strategy), axis=axis)
        assert_equal_to_numpy(obj, a)
        collective_assert(obj.data is not src.data)
    obj = distributed_data_object(src, dtype=np.float32)
    assert_equal_to_numpy(obj, a.astype(np.float32))


def test_local_data_from_distributed_object_concentrates(comm):
    src = distributed_data_object(np.arange(6))
    obj = distributed_data_object(local_data=src, distribution_strategy="freeform")
    assert_equal_to_numpy(obj, np.tile(np.arange(6), comm.size))


def test_copy_false_shares_memory():
    a = np.arange(10.0)
    obj = distributed_data_object(a, distribution_strategy="not", copy=False)
    collective_assert(np.shares_memory(obj.data, a))
    obj = distributed_data_object(a, copy=True)
    collective_assert(not np.shares_memory(obj.data, a))


def test_bad_arguments():
    D = distributed_data_object
    assert_raises_everywhere(ValueError, D, np.arange(3), distribution_strategy="cyclic")
    assert_raises_everywhere(ValueError, D)
    assert_raises_everywhere(TypeError, D, np.arange(3), bogus=1)
    assert_raises_everywhere(np.exceptions.AxisError, D, np.arange(3), axis=2)
    assert_raises_everywhere(ValueError, D, global_shape=(-1, 2))


def test_local_data_access():
    a = np.arange(12.0).reshape(4, 3)
    obj = distributed_data_object(a)
    local = obj.get_local_data()
    local += 1
    assert_equal_to_numpy(obj, a)
    view = obj.get_local_data(copy=False)
    view += 1
    assert_equal_to_numpy(obj, a + 1)
    obj.set_local_data(np.zeros(obj.local_shape))
    assert_equal_to_numpy(obj, np.zeros_like(a))
    obj.set_local_data(3)
    assert_equal_to_numpy(obj, np.full_like(a, 3))


def test_full_data(comm):
    a = np.arange(12).reshape(3, 4)
    obj = distributed_data_object(a, axis=1)
    for target in range(comm.size):
        full = obj.get_full_data(target_rank=target)
        ok = np.array_equal(full, a) if comm.rank == target else full is None
        collective_assert(ok, target)
    assert_raises_everywhere(ValueError, obj.get_full_data, target_rank=comm.size)
    obj.set_full_data(a * 2)
    assert_equal_to_numpy(obj, a * 2)
    collective_assert(np.array_equal(np.asarray(obj), a * 2))
    collective_assert(np.array_equal(obj.allgather(), a * 2))


@pytest.mark.parametrize("dtype", ["int64", "float32", "complex128"])
def test_copy_and_copy_empty(dtype):
    a = sample((5, 3), dtype)
    for strategy, axis in layouts(2):
        obj = make(a, strategy, axis)
        c = obj.copy()
        collective_assert(c.distributor is obj.distributor and c.data is not obj.data)
        assert_equal_to_numpy(c, a)
        assert_equal_to_numpy(obj.copy(dtype=np.float64), a.astype(np.float64))
        for target in ("not", "equal", "fftw"):
            assert_equal_to_numpy(obj.copy(distribution_strategy=target), a)
            assert_equal_to_numpy(obj.copy(distribution_strategy=target, axis=1), a)
        e = obj.copy_empty()
        collective_assert(e.distributor is obj.distributor and e.dtype == obj.dtype)
        e = obj.copy_empty(global_shape=(2, 2), dtype=np.int8)
        collective_assert(e.shape == (2, 2) and e.dtype == np.int8)
        e = obj.copy_empty(distribution_strategy="not")
        collective_assert(e.local_shape == (5, 3) and e.distribution_strategy == "not")


def test_librarian_same_index_everywhere(comm):
    objs = [distributed_data_object(np.arange(4) * k) for k in range(3)]
    indices = [o.index for o in objs]
    gathered = comm.allgather(indices)
    collective_assert(all(g == indices for g in gathered))
    collective_assert(indices == sorted(indices) and len(set(indices)) == 3)
    collective_assert(all(d2o_librarian[o.index] is o for o in objs))
    gone = objs.pop().index
    gc.collect()
    collective_assert(gone not in d2o_librarian)
    assert_raises_everywhere(KeyError, d2o_librarian.__getitem__, gone)


def test_librarian_indices_agree_after_an_error_on_one_rank(comm):
    """An operation that fails on one rank only may have made objects on the others before
    the ranks agreed on the error: the indices drawn after it agree again."""
    x = make(np.arange(42.0).reshape(7, 6), "mesh01")
    row = 100 if comm.rank == comm.size - 1 else 2
    with options(check_args=False):
        assert_raises_everywhere(
            IndexError, x.__setitem__, row, distributed_data_object(np.ones(6))
        )
        assert_raises_everywhere(IndexError, x.__getitem__, (row, 1))
    indices = [distributed_data_object(np.arange(2)).index for _ in range(2)]
    collective_assert(all(g == indices for g in comm.allgather(indices)), str(indices))


def test_librarian_costs_nothing_per_object(comm):
    """Creating an object (a constructor or an operation's result) only draws its index:
    no weak reference is made until someone looks objects up."""
    import weakref

    x = distributed_data_object(np.arange(6.0))
    y = x + 1
    evaluate(y)  # with lazy on, a pending result is tracked (weakly) until evaluated
    collective_assert(weakref.getweakrefcount(y) == 0 and y.index == x.index + 1)
    collective_assert(d2o_librarian[y.index] is y and y.index in d2o_librarian)
    collective_assert(len(d2o_librarian) >= 2)


@pytest.mark.parametrize("shape", [(0,), (1,), (9,), (5, 2), (2, 5)])
def test_iteration(shape):
    a = np.arange(int(np.prod(shape))).reshape(shape)
    for strategy, axis in layouts(len(shape)):
        obj = make(a, strategy, axis)
        items = list(obj)
        ok = len(items) == len(a) and all(np.array_equal(x, y) for x, y in zip(items, a))
        collective_assert(ok, (strategy, axis))


def test_iteration_in_chunks_is_collective_and_bounded():
    # Tiny chunk setting: many exchanges, still the same elements everywhere.
    from d2o.core import config as _config

    old = _config._ITER_CHUNK
    _config._ITER_CHUNK = 1
    try:
        a = np.arange(30).reshape(10, 3)
        obj = distributed_data_object(a, axis=1)
        collective_assert(np.array_equal(np.array(list(obj)), a))
    finally:
        _config._ITER_CHUNK = old


def test_repr_shows_local_piece_without_communication(comm):
    obj = distributed_data_object(np.arange(8))
    ok, text = True, ""
    if comm.rank == 0:  # would hang if repr communicated
        text = repr(obj)
        ok = (
            text.startswith("<distributed_data_object>\n")
            and repr(obj.get_local_data(copy=False)) in text
            and str(obj) == text
        )
    collective_assert(ok, text)


def test_distributors_are_shared():
    comm = default_comm()
    d1 = get_distributor("equal", (10, 3), comm, 0)
    d2 = get_distributor("equal", [10, 3], comm, 0)
    collective_assert(d1 is d2)
    a = distributed_data_object(global_shape=(10, 3))
    b = distributed_data_object(np.zeros((10, 3)))
    collective_assert(a.distributor is b.distributor is d1)


def test_astype_real_imag_conj():
    a = sample((4, 3), "complex128")
    for strategy, axis in layouts(2):
        obj = make(a, strategy, axis)
        assert_equal_to_numpy(obj.real, a.real)
        assert_equal_to_numpy(obj.imag, a.imag)
        assert_equal_to_numpy(obj.conj(), a.conj())
        assert_equal_to_numpy(np.conjugate(obj), a.conj())
        assert_equal_to_numpy(obj.astype(np.complex64), a.astype(np.complex64))
        b = obj.real.astype(np.int32)
        assert_equal_to_numpy(b, a.real.astype(np.int32))


def test_bool_and_pickle():
    obj = distributed_data_object([3])
    collective_assert(bool(obj) is True)
    assert_raises_everywhere(ValueError, bool, distributed_data_object([1, 2]))
    import pickle

    assert_raises_everywhere(TypeError, pickle.dumps, obj)


def test_distributor_cache_is_bounded_and_identity_is_not_needed(monkeypatch):
    from d2o.layouts import distributors as _distributors

    monkeypatch.setattr(_distributors._CACHE, "maxsize", 4)
    old = distributed_data_object(np.arange(12.0).reshape(4, 3), distribution_strategy="fftw")
    for n in range(5, 15):  # many other layouts: the cache starts afresh
        distributed_data_object(global_shape=(n, 3))
    collective_assert(len(_distributors._CACHE) <= 4)
    new = distributed_data_object(np.ones((4, 3)), distribution_strategy="fftw")
    collective_assert(new.distributor is not old.distributor)  # equal, not identical
    assert_equal_to_numpy(old + new, np.arange(12.0).reshape(4, 3) + 1)
    assert_equal_to_numpy(np.add(old, new, out=old), np.arange(12.0).reshape(4, 3) + 1)
    collective_assert(old.distributor.offsets == new.distributor.offsets)
