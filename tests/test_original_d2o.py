"""Original D2O behaviours found by running NIFTy's D2O suite (issue 9, item 5)."""

from __future__ import annotations

import os

import numpy as np

from d2o import default_comm, distributed_data_object
from d2o.testing import assert_equal_to_numpy, assert_layout, collective_assert

comm = default_comm()


def test_empty_selection_from_a_distributed_value():
    a = np.arange(64.0).reshape(4, 4, 4)
    for s1 in ("equal", "fftw", "freeform", "not"):
        for s2 in ("equal", "fftw", "not"):
            obj = distributed_data_object(a, distribution_strategy=s1)
            p = distributed_data_object(100 * a, distribution_strategy=s2)
            obj[2, 5:18] = p[2, 5:18]  # selects nothing: a no-op everywhere
            assert_equal_to_numpy(obj, a)


def test_freeform_without_local_pieces_takes_equal_lengths():
    a = np.arange(20.0).reshape(10, 2)
    x = distributed_data_object(a, distribution_strategy="freeform")
    assert_layout(x, axis=0, strategy="freeform")
    assert_equal_to_numpy(x, a)
    e = distributed_data_object(a)
    y = e.copy(distribution_strategy="freeform")
    assert_layout(y, axis=0, strategy="freeform")
    collective_assert(y.local_shape == e.local_shape)
    assert_equal_to_numpy(y, a)
    n = distributed_data_object(a, distribution_strategy="not")
    z = n.copy_empty(distribution_strategy="freeform")
    collective_assert(z.shape == (10, 2) and z.distribution_strategy == "freeform", z.shape)
    w = n.copy(distribution_strategy="freeform")
    assert_equal_to_numpy(w, a)


def test_flatten_apply_generator_equal():
    a = np.arange(12.0).reshape(3, 4)
    x = distributed_data_object(a, axis=1)
    f = x.flatten()
    assert_equal_to_numpy(f, a.ravel())
    x.flatten(inplace=True)
    assert_equal_to_numpy(x, a.ravel())
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
    from d2o.testing import assert_raises_everywhere

    assert_raises_everywhere(ValueError, x.save, "field", path=path, overwriteQ=False)
