"""Original D2O behaviours found by running NIFTy's D2O suite (issue 9, item 5)."""

from __future__ import annotations

import os

import numpy as np

import d2o
from d2o import default_comm, distributed_data_object
from d2o.testing import (
    assert_equal_to_numpy,
    assert_layout,
    assert_raises_everywhere,
    collective_assert,
)

comm = default_comm()


def test_empty_selection_from_a_distributed_value():
    a = np.arange(64.0).reshape(4, 4, 4)
    for s1 in ("equal", "fftw", "freeform", "not"):
        for s2 in ("equal", "fftw", "not"):
            src = a if s1 != "freeform" else distributed_data_object(a)  # (local-type)
            obj = distributed_data_object(src, distribution_strategy=s1)
            p = distributed_data_object(100 * a, distribution_strategy=s2)
            obj[2, 5:18] = p[2, 5:18]  # selects nothing: a no-op everywhere
            assert_equal_to_numpy(obj, a)


def test_freeform_from_a_distributed_array_takes_its_pieces():
    """'freeform' from a distributed global_data takes the source's local pieces (the
    original D2O); the copy methods keep the global array, with equal lengths."""
    a = np.arange(20.0).reshape(10, 2)
    e = distributed_data_object(a)
    x = distributed_data_object(global_data=e, distribution_strategy="freeform")
    assert_layout(x, axis=0, strategy="freeform")
    collective_assert(x.local_shape == e.local_shape)
    assert_equal_to_numpy(x, a)
    # the d2o wins over local_data and local_shape; a given dtype over the d2o's
    p = distributed_data_object(global_data=e, local_data=np.array([1, 2, 3]),
                                distribution_strategy="freeform")  # fmt: skip
    assert_equal_to_numpy(p, a)
    p = distributed_data_object(global_data=e, local_shape=(4, 4), dtype=np.int32,
                                distribution_strategy="freeform")  # fmt: skip
    assert_equal_to_numpy(p, a.astype(np.int32))
    # a replicated source: every rank's piece is the whole array (held once per rank)
    n = distributed_data_object(a, distribution_strategy="not")
    w = distributed_data_object(global_data=n, distribution_strategy="freeform")
    assert_equal_to_numpy(w, np.concatenate([a] * comm.size))
    # another split axis: redistributed to equal lengths along axis 0
    c = distributed_data_object(a, axis=1)
    v = distributed_data_object(global_data=c, distribution_strategy="freeform")
    assert_layout(v, axis=0, strategy="freeform")
    assert_equal_to_numpy(v, a)
    y = e.copy(distribution_strategy="freeform")
    assert_layout(y, axis=0, strategy="freeform")
    collective_assert(y.local_shape == e.local_shape)
    assert_equal_to_numpy(y, a)
    z = n.copy_empty(distribution_strategy="freeform")
    collective_assert(z.shape == (10, 2) and z.distribution_strategy == "freeform", f"{z.shape}")
    assert_equal_to_numpy(n.copy(distribution_strategy="freeform"), a)


def test_freeform_refuses_global_data_and_shape():
    """The original D2O's class raises ValueError for global information alone with the
    local-type strategy, and for a scalar without a local shape; nothing is built."""
    cases = [
        dict(global_data=1),
        dict(global_shape=(8, 8)),
        dict(global_shape=(4, 4), dtype=np.int64),
        dict(global_data=np.array([1, 2, 3]), global_shape=(3,)),
        dict(global_data=np.arange(6.0)),
        dict(local_data=1.0),
        dict(local_shape=()),
        dict(global_data=distributed_data_object(np.float64(3.0))),
    ]
    for kw in cases:
        assert_raises_everywhere(
            ValueError,
            lambda kw=kw: distributed_data_object(distribution_strategy="freeform", **kw),
        )


def test_freeform_scalar_local_data_fills_the_local_shape():
    x = distributed_data_object(local_data=1, local_shape=(13, 7), dtype=np.float64,
                                distribution_strategy="freeform")  # fmt: skip
    collective_assert(x.shape == (13 * comm.size, 7) and x.dtype == np.float64, f"{x.shape}")
    assert_equal_to_numpy(x, np.ones((13 * comm.size, 7)))
    y = distributed_data_object(local_data=2, local_shape=(comm.rank, 3),
                                distribution_strategy="freeform")  # fmt: skip
    n = comm.size * (comm.size - 1) // 2
    collective_assert(y.dtype == np.array(2).dtype and y.shape == (n, 3), f"{y.dtype} {y.shape}")
    assert_equal_to_numpy(y, np.full((n, 3), 2))


def test_flatten_apply_generator_equal():
    a = np.arange(12.0).reshape(3, 4)
    x = distributed_data_object(a, axis=1)
    f = x.flatten()
    assert_equal_to_numpy(f, a.ravel())
    assert_equal_to_numpy(x.flatten(inplace=True), a.ravel())
    assert_equal_to_numpy(x, a)  # keeps its shape
    y = distributed_data_object(global_shape=(5, 3))
    y.apply_generator(lambda shape: np.full(shape, 7.0))
    assert_equal_to_numpy(y, np.full((5, 3), 7.0))
    collective_assert(y.equal(np.full((5, 3), 7.0)) and not y.equal(np.zeros((5, 3))))
    collective_assert(not y.equal(np.zeros(3)))


def test_hdf5_alias_and_path(shared_dir):
    import pytest

    pytest.importorskip("h5py")
    a = np.arange(24.0).reshape(6, 4)
    x = distributed_data_object(a)
    path = os.path.join(shared_dir, "d2o.h5")
    x.save("field", path=path)
    y = distributed_data_object(alias="field", path=path, distribution_strategy="fftw")
    assert_equal_to_numpy(y, a)
    assert_layout(y, axis=0, strategy="fftw")
    x.save("field", path=path)  # the original API replaces the dataset by default
    assert_raises_everywhere(ValueError, x.save, "field", path=path, overwriteQ=False)


def test_flatten_inplace_shares_memory():
    """``flatten(inplace=True)`` as the original D2O: a flat array without a copy where
    the layout allows it (the original's strategies), so writes to it show in the
    array, which keeps its shape; ``flatten()`` is a copy."""
    for shape in ((4,), (8, 8), (0, 4), (4, 0, 8)):
        a = np.arange(float(np.prod(shape))).reshape(shape)
        for s in ("not", "equal", "fftw", "freeform"):
            x = (distributed_data_object(local_data=a[: comm.rank % 2 * 2], distribution_strategy=s)
                 if s == "freeform" else distributed_data_object(a, distribution_strategy=s))  # fmt: skip
            b = x.get_full_data()
            assert_equal_to_numpy(x.flatten(), b.ravel())
            p = x.flatten(inplace=True)
            assert_equal_to_numpy(p, b.ravel())
            collective_assert(x.shape == b.shape, f"{x.shape}")
            if b.size:
                x.flatten()[0] = -1.0  # a copy: no effect
                assert_equal_to_numpy(x, b)
                p[0] = 2222
                b.ravel()[0] = 2222
                assert_equal_to_numpy(x, b)


def test_freeform_pieces_and_flat_view_move_no_data():
    """Taking a d2o's pieces ('freeform') and the copy-free flattening communicate no
    array data (pieces of 4 kB or more here): the constructor's agreement on metadata
    (plus checked mode's argument check), under 256 bytes a rank; for the flattening
    at most the agreement on the new layout."""
    a = np.arange(2000.0).reshape(1000, 2)  # 16 kB
    for src in (
        distributed_data_object(a),
        distributed_data_object(a, distribution_strategy="not"),
    ):
        with d2o.trace() as t:
            distributed_data_object(global_data=src, distribution_strategy="freeform")
        collective_assert(
            t.collectives <= 2 and t.bytes_sent < 256, f"{t.collectives} {t.bytes_sent}"
        )
        with d2o.trace() as t:
            src.flatten(inplace=True)
        collective_assert(t.collectives <= 1 and t.bytes_sent < 256, f"{t.bytes_sent}")
