"""Result layouts from the documented rules, checked against literal tables.

The expected piece lengths are written out per number of ranks, not computed by
d2o's own functions, so a wrong rule cannot agree with itself.
"""

from __future__ import annotations

import numpy as np
import pytest

import d2o
from d2o import default_comm, distributed_data_object
from d2o.testing import assert_equal_to_numpy, assert_layout, collective_assert

P = default_comm().size

# piece lengths per number of ranks (1, 2, 3, 4)
EQUAL_4 = {1: [4], 2: [2, 2], 3: [2, 1, 1], 4: [1, 1, 1, 1]}
FFTW_4 = {1: [4], 2: [2, 2], 3: [2, 2, 0], 4: [1, 1, 1, 1]}
EQUAL_6 = {1: [6], 2: [3, 3], 3: [2, 2, 2], 4: [2, 2, 1, 1]}
FFTW_6 = {1: [6], 2: [3, 3], 3: [2, 2, 2], 4: [2, 2, 2, 0]}
FFTW_7 = {1: [7], 2: [4, 3], 3: [3, 3, 1], 4: [2, 2, 2, 1]}

need_table = pytest.mark.skipif(P > 4, reason="literal tables cover 1-4 ranks")


@need_table
def test_strategy_piece_lengths():
    a = np.arange(4 * 3.0).reshape(4, 3)
    assert_layout(distributed_data_object(a, distribution_strategy="fftw"), axis=0,
                  lengths=FFTW_4[P], strategy="fftw")  # fmt: skip
    assert_layout(distributed_data_object(a), axis=0, lengths=EQUAL_4[P], strategy="equal")
    b = np.arange(7.0)
    assert_layout(distributed_data_object(b, distribution_strategy="fftw"), lengths=FFTW_7[P])


@need_table
@pytest.mark.parametrize("strategy,table", [("equal", EQUAL_6), ("fftw", FFTW_6)])
def test_copy_to_another_strategy_keeps_the_axis(strategy, table):
    a = np.arange(4 * 6.0).reshape(4, 6)
    x = distributed_data_object(a, axis=1)
    y = x.copy(distribution_strategy=strategy)
    assert_layout(y, axis=1, lengths=table[P], strategy=strategy)
    assert_equal_to_numpy(y, a)
    z = x.copy_empty(distribution_strategy=strategy)
    assert_layout(z, axis=1, lengths=table[P], strategy=strategy)


@need_table
def test_broadcasting_result_follows_the_added_axis():
    # (4,) split along its axis 0 meets a (4, 4) ndarray: in the result it is axis 1
    v = distributed_data_object(np.arange(4.0))
    w = v + np.ones((4, 4))
    assert_layout(w, axis=1, lengths=EQUAL_4[P])
    assert_equal_to_numpy(w, np.arange(4.0) + np.ones((4, 4)))
    w = np.ones((4, 4)) * v
    assert_layout(w, axis=1, lengths=EQUAL_4[P])


@need_table
def test_reversal_mirrors_the_pieces():
    a = np.arange(4 * 3.0).reshape(4, 3)
    x = distributed_data_object(a, distribution_strategy="fftw")
    r = x.get_data(slice(None, None, -1))  # a copy: slabs in rank order
    assert_layout(r, axis=0, lengths=FFTW_4[P][::-1])
    assert_equal_to_numpy(r, a[::-1])
    v = x[::-1]  # a view: every rank keeps its rows, now in descending rank order
    collective_assert(v.local_shape == x.local_shape and v.base is x)
    assert_equal_to_numpy(v, a[::-1])


@pytest.mark.parametrize("left,right", [("int64", "float64"), ("float32", "complex128"),
                                        ("int32", "float32")])  # fmt: skip
def test_mixed_dtype_matrix_products(left, right):
    a = (np.arange(12).reshape(4, 3) % 5).astype(left)
    b = (np.arange(6).reshape(3, 2) / 4).astype(right)
    for axis in (0, 1):
        x = distributed_data_object(a, axis=axis)
        y = distributed_data_object(b, axis=0)
        for got, want in ((x @ b, a @ b), (x @ y, a @ b), (np.dot(x, y), np.dot(a, b)),
                          (d2o.dot(a, y), np.dot(a, b))):  # fmt: skip
            assert_equal_to_numpy(got, want, rtol=1e-6)


@pytest.mark.parametrize("ddof", [1, 2])
def test_var_std_with_ddof(ddof):
    a = np.arange(20.0).reshape(5, 4) ** 1.5
    for axis in (0, 1):
        x = distributed_data_object(a, axis=axis)
        for ax in (None, 0, 1):
            assert_equal_to_numpy(x.var(axis=ax, ddof=ddof), a.var(axis=ax, ddof=ddof), rtol=1e-12)
            assert_equal_to_numpy(x.std(axis=ax, ddof=ddof), a.std(axis=ax, ddof=ddof), rtol=1e-12)
    collective_assert(np.isscalar(x.var(ddof=ddof)))


@pytest.mark.parametrize("n", [7, 11, 13])
def test_inverse_fft_of_a_prime_length_along_the_split_axis(n):
    a = np.arange(n) + 1j * np.arange(n) ** 2
    x = distributed_data_object(a)
    assert_equal_to_numpy(d2o.fft.ifft(x), np.fft.ifft(a), rtol=1e-9)
    assert_equal_to_numpy(d2o.fft.fft(x), np.fft.fft(a), rtol=1e-9)
    b = a.reshape(n, 1) * np.ones((1, 3))
    y = distributed_data_object(b)
    assert_equal_to_numpy(d2o.fft.ifft(y, axis=0), np.fft.ifft(b, axis=0), rtol=1e-9)


def test_freeform_arrays_of_one_shape_keep_their_own_pieces():
    # two 'freeform' arrays of the same global shape, cut differently: layouts are cached
    # by their parameters, the offsets table included
    first = [r + 1 for r in range(P)]
    second = first[::-1]
    n = sum(first)
    a = distributed_data_object(
        local_data=np.full(first[default_comm().rank], 1.0), distribution_strategy="freeform"
    )
    b = distributed_data_object(
        local_data=np.full(second[default_comm().rank], 2.0), distribution_strategy="freeform"
    )
    collective_assert(a.shape == b.shape == (n,))
    for x, lengths in ((a, first), (b, second)):  # the layout's own account of the pieces
        d = x.distributor
        r = d.comm.rank
        box = ((sum(lengths[:r]), sum(lengths[: r + 1])),)
        own = d.local_shape == x.data.shape and tuple(d.region(r)) == box
        collective_assert(own, f"layout {d.local_shape} {d.region(r)}, expected {box}")
    assert_layout(a, lengths=first, strategy="freeform")
    assert_layout(b, lengths=second, strategy="freeform")
    assert_equal_to_numpy(a + b.copy(distribution_strategy="equal"), np.full(n, 3.0))
