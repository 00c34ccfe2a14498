"""numpy's argument rules for shapes and axes, on every rank (issue 9, item 4)."""

from __future__ import annotations

import numpy as np
import pytest

import d2o
from d2o import default_comm, distributed_data_object
from d2o.testing import (
    assert_equal_to_numpy,
    assert_layout,
    assert_raises_everywhere,
    collective_assert,
)

comm = default_comm()


@pytest.mark.parametrize("bad", [(6, 1.5), "6", (2.5,), 1.0, ("3",)])
def test_reshape_takes_integers_only(bad):
    x = distributed_data_object(np.arange(6.0))
    a = np.arange(6.0)
    assert_raises_everywhere(TypeError, a.reshape, bad)  # numpy's own rule
    assert_raises_everywhere(TypeError, x.reshape, bad)


@pytest.mark.parametrize("bad", [(2.5, 1), "3", 3.0, (np.float64(2),)])
def test_global_shape_takes_integers_only(bad):
    assert_raises_everywhere(TypeError, np.empty, bad)  # numpy's own rule
    assert_raises_everywhere(TypeError, distributed_data_object, global_shape=bad)


def test_negative_shape_is_value_error():
    assert_raises_everywhere(ValueError, distributed_data_object, global_shape=(3, -1))


def test_integer_like_shapes_are_accepted():
    x = distributed_data_object(global_shape=(np.int32(4), np.int64(3)))
    assert_layout(x, axis=0)
    x = distributed_data_object(global_shape=np.int64(5), dtype=np.int8)
    collective_assert(x.shape == (5,), x.shape)
    collective_assert(x.reshape(np.array([5, 1])[0], 1).shape == (5, 1))


def test_scalar_fills_global_shape():
    x = distributed_data_object(1, global_shape=(13, 7))
    assert_equal_to_numpy(x, np.full((13, 7), 1))
    y = distributed_data_object(2.5, global_shape=(5,), dtype=np.float32, axis=0)
    assert_equal_to_numpy(y, np.full(5, 2.5, dtype=np.float32))


def test_axis_must_be_the_same_on_every_rank():
    if comm.size == 1:
        pytest.skip("needs two ranks")
    a = np.zeros((4, 6))
    with d2o.options(check_args=False):  # the constructor's own metadata check
        assert_raises_everywhere(ValueError, distributed_data_object, a, axis=comm.rank % 2)
        bad = 3 if comm.rank == 0 else 1
        assert_raises_everywhere(np.exceptions.AxisError, distributed_data_object, a, axis=bad)
    x = distributed_data_object(a, axis=1)
    assert_equal_to_numpy(x, a)


def test_ragged_fancy_key_is_value_error():
    x = distributed_data_object(np.arange(6.0))
    assert_raises_everywhere(ValueError, lambda: np.arange(6.0)[[[0, 1], [2]]])
    assert_raises_everywhere(ValueError, x.get_data, [[0, 1], [2]])
