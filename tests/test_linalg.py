"""Matrix products against numpy for every pair of layouts."""

from __future__ import annotations

import numpy as np
import pytest
from _helpers import Checks, layouts, make, sample

import d2o
from d2o import distributed_data_object
from d2o.testing import assert_equal_to_numpy, assert_raises_everywhere, collective_assert

CASES = [((5, 4), (4, 3)), ((5, 4), (4,)), ((4,), (4, 3)), ((4,), (4,)), ((3, 0), (0, 2)),
         ((1, 6), (6, 1)), ((6, 2), (2, 7))]  # fmt: skip


@pytest.mark.parametrize("sa,sb", CASES)
def test_matmul_every_layout_pair(sa, sb):
    a = sample(sa, "float64")
    b = sample(sb, "float64", seed=3)
    expected = a @ b
    check = Checks()
    for la in layouts(len(sa)):
        x = make(a, *la)
        for lb in layouts(len(sb)):
            y = make(b, *lb)
            for got, what in ((x @ y, "d2o@d2o"), (np.matmul(x, y), "np.matmul"),
                              (np.dot(x, y), "np.dot"), (x @ b, "d2o@np"),
                              (a @ y, "np@d2o")):  # fmt: skip
                if expected.ndim:
                    check.equal(got, expected, rtol=1e-12, what=(what, la, lb))
                else:
                    ok = isinstance(got, np.generic) and np.isclose(got, expected, rtol=1e-12)
                    check.true(ok, (what, la, lb, got, expected))
    check.done()


@pytest.mark.parametrize("dtype", ["int64", "bool", "complex128", "float32"])
def test_matmul_dtypes(dtype):
    a = sample((4, 3), dtype)
    b = sample((3, 5), dtype, seed=1)
    check = Checks()
    for la in layouts(2):
        for lb in (("equal", 0), ("fftw", 1), ("not", 0)):
            got = make(a, *la) @ make(b, *lb)
            rtol = {"float32": 1e-5, "complex128": 1e-12}.get(dtype)  # summation order differs
            check.equal(got, a @ b, rtol=rtol, what=(la, lb))
    check.done()


def test_matmul_errors_and_unsupported_gufuncs():
    x = distributed_data_object(np.ones((3, 4)))
    assert_raises_everywhere(ValueError, x.__matmul__, distributed_data_object(np.ones((3, 4))))
    assert_raises_everywhere(ValueError, np.matmul, x, 2.0)
    y = distributed_data_object(np.ones((2, 3, 4)))
    assert_raises_everywhere(TypeError, lambda: y @ np.ones((4, 2)))
    if hasattr(np, "vecdot"):  # a generalized ufunc: never applied piece-wise
        assert_raises_everywhere(TypeError, np.vecdot, x, x)


# -- products picked by shape -----------------------------------------------------------

OUTER_CASES = [((5, 1), (1, 4)), ((1, 1), (1, 3)), ((0, 1), (1, 3)), ((4, 1), (1, 0)),
               ((1, 1), (1, 1)), ((7, 1), (1, 2)), ((1,), (1, 5)), ((6, 1), (1,))]  # fmt: skip


@pytest.mark.parametrize("sa,sb", OUTER_CASES)
def test_contraction_of_length_1_every_layout_pair(sa, sb):
    a = sample(sa, "float64")
    b = sample(sb, "float64", seed=3)
    expected = a @ b
    check = Checks()
    for la in layouts(len(sa)):
        x = make(a, *la)
        for lb in layouts(len(sb)):
            y = make(b, *lb)
            for got, what in ((x @ y, "d2o@d2o"), (np.dot(x, y), "np.dot"), (x @ b, "d2o@np"),
                              (a @ y, "np@d2o")):  # fmt: skip
                check.equal(got, expected, what=(what, la, lb))
    check.done()


@pytest.mark.parametrize("dta,dtb", [("int64", "int64"), ("bool", "bool"), ("complex128", "float64"),
                                     ("float32", "float32"), ("int32", "float32"), ("uint8", "int8"),
                                     ("uint64", "int64"), ("float16", "float16")])  # fmt: skip
def test_outer_products_keep_numpys_dtype(dta, dtb):
    a = sample((5, 1), dta)
    b = sample((1, 3), dtb, seed=1)
    expected = a @ b
    check = Checks()
    for la in (("equal", 0), ("fftw", 1), ("not", 0), ("cyc2", 0), ("mesh01", 0)):
        for lb in (("equal", 0), ("freeform", 1), ("not", 0), ("mesh10", 0)):
            got = make(a, *la) @ make(b, *lb)
            check.equal(got, expected, rtol=1e-15 if dta == "complex128" else None, what=(la, lb))
    check.done()


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_outer_products_are_numpys_bits(dtype):
    """numpy's matmul adds each product to 0: a zero product is +0.0, never -0.0."""
    a = np.array([[-1.0], [2.0], [0.0], [-0.0], [np.nan], [1e-30], [np.inf]], dtype=dtype)
    b = np.array([[0.0, 1.0, -0.0, -3.0, np.inf, 1e-30, -2.0]], dtype=dtype)
    with np.errstate(invalid="ignore"):
        expected = a @ b
        check = Checks()
        for la in (("equal", 0), ("not", 0), ("equal", 1)):
            for lb in (("equal", 1), ("not", 0), ("equal", 0)):
                got = (make(a, *la) @ make(b, *lb)).get_full_data()
                same = np.array_equal(got, expected, equal_nan=True) and np.array_equal(
                    np.signbit(got), np.signbit(expected)
                )
                check.true(same, (la, lb, got))
    check.done()


COLUMN_CASES = [((6, 6), (6, 1)), ((2, 7), (7, 1)), ((5, 3), (3, 2)), ((3, 8), (8, 5)),
                ((0, 4), (4, 1)), ((4, 0), (0, 1)), ((1, 5), (5, 1))]  # fmt: skip


@pytest.mark.parametrize("sa,sb", COLUMN_CASES)
@pytest.mark.parametrize("dtype", ["float64", "int64", "complex128"])
def test_matrix_times_columns_every_layout_pair(sa, sb, dtype):
    """B gathered (no larger than A's largest piece) or circulated (larger): numpy's result."""
    a = sample(sa, dtype)
    b = sample(sb, dtype, seed=3)
    expected = a @ b
    rtol = None if dtype == "int64" else 1e-12
    some = [("equal", 0), ("equal", 1), ("not", 0), ("freeform", 0), ("mesh01", 0), ("cyc2", 0)]
    check = Checks()
    for la in layouts(2) if dtype == "float64" else some:
        x = make(a, *la)
        for lb in layouts(2) if dtype == "float64" else some:
            check.equal(x @ make(b, *lb), expected, rtol=rtol, what=(la, lb))
    check.done()


def test_tensordot_matrix_products_are_dot():
    F = sample((6, 5), "float64")
    c = sample((5, 1), "float64", seed=1)
    col, row = sample((6, 1), "int64", seed=2), sample((1, 4), "int64", seed=3)
    check = Checks()
    for la in (("equal", 0), ("not", 0), ("mesh01", 0), ("equal", 1)):
        x = make(F, *la)
        check.equal(np.tensordot(x, make(c, "equal", 0), 1), np.tensordot(F, c, 1), rtol=1e-12,
                    what=("F c", la))  # fmt: skip
        check.equal(np.tensordot(x, c[:, 0], axes=([1], [0])), np.tensordot(F, c[:, 0], 1),
                    rtol=1e-12, what=("F v", la))  # fmt: skip
        check.equal(np.tensordot(make(col, *la), make(row, "equal", 1), 1),
                    np.tensordot(col, row, 1), what=("outer", la))  # fmt: skip
    check.done()
    x = make(F, "equal", 0)
    assert_raises_everywhere(ValueError, np.tensordot, x, make(c[:4], "equal", 0), 1)


def test_shape_mismatch_in_shaped_products_raises_everywhere():
    col, row = distributed_data_object(np.ones((4, 1))), distributed_data_object(np.ones((2, 3)))
    assert_raises_everywhere(ValueError, np.dot, col, row)  # (4,1) @ (2,3)
    assert_raises_everywhere(ValueError, np.matmul, row, col)  # (2,3) @ (4,1)
    F = distributed_data_object(np.ones((5, 5)))
    assert_raises_everywhere(ValueError, np.dot, F, np.ones((4, 1)))
    assert_raises_everywhere(ValueError, np.dot, np.ones((1, 4)), F)


# -- what the shaped products move -------------------------------------------------------


def _alltoallw(t) -> list:
    return [c for c in t.calls if c[1] == "Alltoallw"]


def _moved(t) -> tuple:
    """(bytes sent, bytes received) on this rank, less the one-byte agreements."""
    small = [c for c in t.calls if c[1] == "Allreduce" and c[2] == 1]
    return t.bytes_sent - len(small), t.bytes_received - len(small)


def _even(n: int, p: int) -> list:
    return [n // p + (1 if r < n % p else 0) for r in range(p)]


def test_outer_product_of_split_column_and_replicated_row_moves_nothing(comm):
    m, n = 13, 9
    col, row = sample((m, 1), "float64"), sample((1, n), "float64", seed=1)
    x = distributed_data_object(col, distribution_strategy="equal")
    y = distributed_data_object(row, distribution_strategy="not")
    with d2o.options(check_args=False), d2o.trace() as t:
        z = x @ y
        w = np.dot(x, row)
    collective_assert(_moved(t) == (0, 0) and not _alltoallw(t), t.calls)
    collective_assert(z.distributor.axis == 0 and z.local_shape == (_even(m, comm.size)[comm.rank], n),
                      z.local_shape)  # fmt: skip
    assert_equal_to_numpy(z, col @ row)
    assert_equal_to_numpy(w, col @ row)


def test_outer_product_moves_only_the_row_vector(comm):
    """A column split by rows times a row split by columns: the row is gathered (n
    elements), the column stays; the result is split like the column."""
    P, me = comm.size, comm.rank
    m, n = 11, 10
    col, row = sample((m, 1), "complex128"), sample((1, n), "complex128", seed=1)
    x = distributed_data_object(col, distribution_strategy="equal")
    y = distributed_data_object(row, distribution_strategy="equal", axis=1)
    with d2o.options(check_args=False), d2o.trace() as t:
        z = np.dot(x, y)
    cols = _even(n, P)
    item = 16
    expected = ((P - 1) * cols[me] * item, (n - cols[me]) * item) if P > 1 else (0, 0)
    collective_assert(_moved(t) == expected, (t.calls, expected))
    collective_assert(len(_alltoallw(t)) == (P > 1) and t.records[0].gathers == (P > 1), t.calls)
    collective_assert(z.distributor.axis == 0, z.distributor)
    assert_equal_to_numpy(z, col @ row, rtol=1e-15)


@pytest.mark.parametrize("m,n", [(10, 7), (3, 11)])
def test_outer_product_of_vectors_on_one_rank_is_shared(comm, m, n):
    """A column split along its length-1 axis lives on one rank: the result is still cut
    into equal slabs (along its longer axis), and only the two vectors move."""
    P, me = comm.size, comm.rank
    col, row = sample((m, 1), "int64"), sample((1, n), "int64", seed=1)
    x = distributed_data_object(col, distribution_strategy="equal", axis=1)
    y = distributed_data_object(row, distribution_strategy="equal", axis=0)
    with d2o.options(check_args=False), d2o.trace() as t:
        z = x @ y
    sent, got = _moved(t)
    collective_assert(got <= (m + n) * 8 and sent <= (P - 1) * (m + n) * 8, t.calls)
    piece = (_even(m, P)[me], n) if m >= n else (m, _even(n, P)[me])
    collective_assert(z.local_shape == piece, (z.local_shape, piece))
    assert_equal_to_numpy(z, col @ row)


def test_matrix_times_split_column_gathers_only_the_column(comm):
    """``dot(F, OnesCol)`` with F split by rows: the column is gathered, the row sums are
    local (no circulation of blocks, no partial results)."""
    P, me = comm.size, comm.rank
    n = 14
    F, ones = sample((n, n), "float64"), np.ones((n, 1))
    x = distributed_data_object(F, distribution_strategy="equal")
    c = distributed_data_object(ones, distribution_strategy="equal")
    with d2o.options(check_args=False), d2o.trace() as t:
        s = np.dot(x, c)
    rows = _even(n, P)
    expected = ((P - 1) * rows[me] * 8, (n - rows[me]) * 8) if P > 1 else (0, 0)
    collective_assert(_moved(t) == expected, (t.calls, expected))
    # one gather of the column (not P - 1 circulating exchanges of its blocks)
    collective_assert(len(_alltoallw(t)) == (P > 1) and t.records[0].gathers == (P > 1), t.calls)
    collective_assert(s.distributor.axis == 0 and s.local_shape == (rows[me], 1), s.local_shape)
    assert_equal_to_numpy(s, F @ ones, rtol=1e-13)


def test_matrix_on_a_mesh_times_a_column_never_moves_the_matrix(comm):
    n = 12
    F, v = sample((n, n), "float64"), sample((n, 1), "float64", seed=1)
    x = make(F, "mesh01")
    c = distributed_data_object(v, distribution_strategy="equal")
    with d2o.options(check_args=False), d2o.trace() as t:
        s = x @ c
        r = np.dot(c.T, x)
    sent, got = _moved(t)
    # the vector's pieces and the partial results (n each), never F (n * n)
    collective_assert(max(sent, got) <= 4 * n * 8, t.calls)
    assert_equal_to_numpy(s, F @ v, rtol=1e-12)
    assert_equal_to_numpy(r, v.T @ F, rtol=1e-12)


def test_slab_matrix_times_a_mesh_column_moves_only_the_column(comm):
    n = 12
    F, v = sample((n, n), "float64"), sample((n, 1), "float64", seed=1)
    x = distributed_data_object(F, distribution_strategy="equal")
    c = make(v, "mesh01")
    with d2o.options(check_args=False), d2o.trace() as t:
        s = x @ c
    sent, got = _moved(t)
    collective_assert(max(sent, got) <= 2 * n * 8, t.calls)
    assert_equal_to_numpy(s, F @ v, rtol=1e-12)
