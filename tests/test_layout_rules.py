"""Result layouts from the documented rules, checked against literal tables.

The expected piece lengths are written out per number of ranks, not computed by
d2o's own functions, so a wrong rule cannot agree with itself.
"""

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
    assert_layout(r, a[::-1], axis=0, lengths=FFTW_4[P][::-1])
    v = x[::-1]  # a view: every rank keeps its rows, now in descending rank order
    collective_assert(v.base is x)
    assert_layout(v, a[::-1], axis=0, lengths=FFTW_4[P], descending=True)
    assert_layout(v.copy(), a[::-1], axis=0, lengths=FFTW_4[P], descending=True)  # same layout
    assert_layout(v[1:], a[::-1][1:], axis=0, lengths=_cut_front(FFTW_4[P][::-1], 1)[::-1],
                  descending=True)  # fmt: skip
    # reversed twice: the ranks' rows in rank order again (a layout with given pieces)
    offsets = np.cumsum([0] + FFTW_4[P])
    boxes = [((int(offsets[q]), int(offsets[q + 1])), (0, 3)) for q in range(P)]
    assert_layout(v[::-1], a, regions=boxes)


def _cut_front(lengths: list, k: int) -> list:
    """Piece lengths after the first ``k`` elements (in this order) are dropped."""
    out = []
    for n in lengths:
        out.append(max(0, n - k))
        k = max(0, k - n)
    return out


# an uneven 'freeform' layout of 4 rows: rank 0 holds nothing
FREE_4 = {1: [4], 2: [0, 4], 3: [0, 3, 1], 4: [0, 3, 0, 1]}
TABLES_4 = {"equal": EQUAL_4, "fftw": FFTW_4, "freeform": FREE_4}


def _slabs(a: np.ndarray, strategy: str):
    if strategy != "freeform":
        return distributed_data_object(a, distribution_strategy=strategy)
    lo = sum(FREE_4[P][:RANK])
    return distributed_data_object(local_data=a[lo : lo + FREE_4[P][RANK]],
                                   distribution_strategy="freeform")  # fmt: skip


RANK = default_comm().rank


@need_table
@pytest.mark.parametrize("strategy", ["equal", "fftw", "freeform"])
def test_axis_local_results_follow_the_rule(strategy):
    """d2o/ops/axislocal.py: a result of the input's shape comes back in the input's layout;
    another result keeps the slabs it was computed on: the input's pieces where the core
    axes are whole, else the 'equal' slabs of the longest other axis.  The label must
    name the pieces' own rule (a follow-up reduction rebuilds the layout from it)."""
    import d2o.numpy as dnp

    a = (np.arange(24.0).reshape(4, 6) * 7) % 11
    x = _slabs(a, strategy)
    mine = TABLES_4[strategy][P]
    cases = [  # (name, d2o result, numpy result, expected lengths along axis 0)
        ("sort axis 0", dnp.sort(x, axis=0), np.sort(a, axis=0), mine),
        ("sort axis 1", dnp.sort(x, axis=1), np.sort(a, axis=1), mine),
        ("partition axis 0", dnp.partition(x, 1, axis=0), np.partition(a, 1, axis=0), mine),
        ("diff axis 1", dnp.diff(x, axis=1), np.diff(a, axis=1), mine),
        ("quantile axis 1", dnp.quantile(x, 0.3, axis=1), np.quantile(a, 0.3, axis=1), mine),
        ("apply_along_axis 1", dnp.apply_along_axis(lambda v: v[:2], 1, x),
         np.apply_along_axis(lambda v: v[:2], 1, a), mine),
        ("quantile axis 0", dnp.quantile(x, 0.3, axis=0), np.quantile(a, 0.3, axis=0),
         EQUAL_6[P]),  # computed on the 'equal' slabs of axis 1
    ]  # fmt: skip
    for name, got, want, lengths in cases:
        assert_layout(got, want, axis=0, lengths=lengths, rtol=1e-12, msg=f"{strategy} {name}")
        if want.ndim == 2:
            assert_equal_to_numpy(got.sum(axis=1), want.sum(axis=1), rtol=1e-12)


@need_table
def test_block_cyclic_pieces_and_their_transpose():
    """layout(block=2) on 7 rows: blocks of 2 dealt round-robin, stored in global order;
    the transpose keeps each rank's runs, now along axis 1."""
    a = np.arange(21.0).reshape(7, 3)
    x = distributed_data_object(a, distribution_strategy=d2o.layout(mesh=(P,), block=2))
    runs = [tuple((2 * k, min(2 * k + 2, 7)) for k in range(q, 4, P)) for q in range(P)]
    assert_layout(x, a, regions=[(r, (0, 3)) for r in runs])
    assert_layout(x.T, a.T, regions=[((0, 3), r) for r in runs])
    assert_layout(x.T.copy(), a.T, regions=[((0, 3), r) for r in runs])


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


def test_assert_layout_fails_right_values_in_wrong_pieces():
    """The helper itself: right values in pieces the rule does not give, a label that
    names another rule than the pieces follow, or a wrong value in one piece fail on
    every rank."""
    from d2o.layouts.distributors import slab_distributor

    comm = default_comm()
    a = np.arange(8 * 2.0).reshape(8, 2)
    even = [8 // P + (1 if r < 8 % P else 0) for r in range(P)]
    x = distributed_data_object(a, distribution_strategy="equal")
    assert_layout(x, a, axis=0, lengths=even, strategy="equal")
    bad = AssertionError
    assert_raises_everywhere(bad, assert_layout, x, a + (RANK == P - 1), axis=0, lengths=even)
    assert_raises_everywhere(bad, assert_layout, x, a, axis=1)
    assert_raises_everywhere(bad, assert_layout, x, a[:-1])
    if P == 1:
        return
    lopsided = [0] * (P - 1) + [8]  # all rows on the last rank
    y = distributed_data_object(local_data=a if RANK == P - 1 else a[:0],
                                distribution_strategy="freeform")  # fmt: skip
    assert_layout(y, a, axis=0, lengths=lopsided)
    assert_raises_everywhere(bad, assert_layout, y, a, axis=0, lengths=even)
    offsets = np.cumsum([0] + lopsided)
    mislabelled = distributed_data_object._from_local(
        y.data, slab_distributor((8, 2), comm, 0, offsets, "equal")
    )
    assert_raises_everywhere(bad, assert_layout, mislabelled, a)
    v = x[::-1]
    assert_layout(v, a[::-1], axis=0, lengths=even, descending=True)
    assert_raises_everywhere(bad, assert_layout, v, a[::-1], axis=0, lengths=even)
    o = np.cumsum([0] + even)
    ascending = [((int(o[q]), int(o[q + 1])), (0, 2)) for q in range(P)]  # same piece shapes
    assert_raises_everywhere(bad, assert_layout, v, a[::-1], regions=ascending)
    boxes = [((0, 8), (0, 2))] * P  # replicated: every rank the whole array
    assert_raises_everywhere(bad, assert_layout, x, a, regions=boxes)
    assert_layout(x.copy(distribution_strategy="not"), a, regions=boxes)
