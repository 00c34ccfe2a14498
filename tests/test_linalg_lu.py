"""Distributed LU (d2o.ops.lu) and d2o.numpy.linalg's solve, inv, det and slogdet against
numpy: every mesh shape the process count allows, block sizes 1, 7, 64 and rectangular
(3 x 5), the four dtypes, every layout of tests/_helpers (redistributed once), tiny
matrices, singular and NaN input, HPL's scaled residual, the bytes moved against
`d2o.ops.lu.model_bytes` and the memory peak."""

from __future__ import annotations

import os

import numpy as np
import pytest
from _helpers import Checks, layouts, make, sample, traced_peak

import d2o
import d2o.numpy as dnp
from d2o import default_comm, distributed_data_object
from d2o.core import comm as _comm
from d2o.ops import lu
from d2o.testing import assert_raises_everywhere, collective_assert

comm = default_comm()
P = comm.size
MESHES = [(r, P // r) for r in range(1, P + 1) if P % r == 0]
BLOCKS = [1, 7, 64, (3, 5)]
DTYPES = ["float32", "float64", "complex64", "complex128"]
LinAlgError = np.linalg.LinAlgError


def matrix(n: int, dtype: str, seed: int = 0) -> np.ndarray:
    return sample((n, n), dtype, seed=seed) / 10


def tol(a: np.ndarray) -> float:
    """A tolerance from the condition number and the precision of ``a``."""
    eps = np.finfo(a.dtype).eps
    cond = np.linalg.cond(a.astype(np.complex128 if a.dtype.kind == "c" else np.float64))
    return max(1e-13, 20 * max(1, a.shape[0]) * eps * cond)


def close(check: Checks, got, want: np.ndarray, t: float, what) -> None:
    """Compare this rank's piece of ``got`` with numpy's ``want`` (relative to its size)."""
    want = np.asarray(want)
    if not isinstance(got, distributed_data_object) or got.shape != want.shape:
        check.true(False, (what, "shape", getattr(got, "shape", None), want.shape))
        return
    check.true(got.dtype == want.dtype, (what, "dtype", got.dtype, want.dtype))
    part = want[got.distributor.local_slice]
    scale = max(1.0, float(np.abs(want).max())) if want.size else 1.0
    check.true(np.allclose(got.data, part, rtol=t, atol=t * scale), (what, "values"))


def scalar_close(check: Checks, got, want, t: float, what) -> None:
    ok = np.asarray(got).dtype == np.asarray(want).dtype
    ok = ok and np.allclose(got, want, rtol=t, atol=t * 1e-3)
    check.true(ok, (what, got, want))


def everything(check: Checks, x, a: np.ndarray, what, k: int = 3) -> None:
    """det, slogdet, solve (a vector and k right-hand sides) and inv of ``x`` (holding ``a``)."""
    t = tol(a)
    n = a.shape[0]
    scalar_close(check, dnp.linalg.det(x), np.linalg.det(a), t, (what, "det"))
    s, ld = dnp.linalg.slogdet(x)
    ws, wld = np.linalg.slogdet(a)
    scalar_close(check, s, ws, t, (what, "sign"))
    scalar_close(check, ld, wld, t, (what, "logabsdet"))
    v = sample((n,), a.dtype.name, seed=5)
    close(check, dnp.linalg.solve(x, v), np.linalg.solve(a, v), t, (what, "solve vector"))
    b = sample((n, k), a.dtype.name, seed=6)
    close(check, dnp.linalg.solve(x, b), np.linalg.solve(a, b), t, (what, "solve matrix"))
    close(check, dnp.linalg.inv(x), np.linalg.inv(a), t, (what, "inv"))


@pytest.mark.parametrize("block", BLOCKS, ids=str)
def test_every_mesh_shape_and_block(block):
    check = Checks()
    for i, mesh in enumerate(MESHES):
        lay = d2o.layout(mesh, (0, 1), block)
        for j, n in enumerate((1, 6, 19)):
            dtype = DTYPES[(i + j) % 4]
            a = matrix(n, dtype, seed=n)
            x = distributed_data_object(a, distribution_strategy=lay)
            everything(check, x, a, (mesh, block, n, dtype))
    check.done()


@pytest.mark.parametrize("dtype", [*DTYPES, "int64", "bool"])
def test_dtypes_on_the_default_and_a_given_mesh(dtype):
    check = Checks()
    n = 12
    a = sample((n, n), dtype, seed=2)
    if dtype == "bool":
        a = a | np.eye(n, dtype=bool)  # not singular
    want = a if a.dtype.kind in "fc" else a.astype(float)
    for spec in ("equal", d2o.layout(MESHES[-1], (0, 1), 7)):
        x = distributed_data_object(a, distribution_strategy=spec)
        everything(check, x, want, (dtype, spec)) if dtype != "bool" else None
        got = dnp.linalg.solve(x, np.ones(n, dtype=a.dtype))
        close(check, got, np.linalg.solve(a, np.ones(n, dtype=a.dtype)), tol(want), spec)
    check.done()


def test_every_layout_of_the_matrix_and_of_b():
    check = Checks()
    n = 9
    a = matrix(n, "float64", seed=4)
    b = sample((n, 2), "float64", seed=7)
    v = sample((n,), "float64", seed=8)
    t = tol(a)
    for la in layouts(2):
        x = make(a, *la)
        close(check, dnp.linalg.solve(x, b), np.linalg.solve(a, b), t, (la, "solve"))
        close(check, dnp.linalg.inv(x), np.linalg.inv(a), t, (la, "inv"))
        scalar_close(check, dnp.linalg.det(x), np.linalg.det(a), t, (la, "det"))
    x = make(a, "cyc2")
    for lb in layouts(2):
        close(check, dnp.linalg.solve(x, make(b, *lb)), np.linalg.solve(a, b), t, ("b", lb))
    for lv in layouts(1):
        close(check, dnp.linalg.solve(x, make(v, *lv)), np.linalg.solve(a, v), t, ("v", lv))
    check.done()


def test_tiny_empty_and_numpy_operands():
    check = Checks()
    for n in (0, 1, 2):
        a = matrix(n, "float64", seed=3) + 2 * np.eye(n)
        x = distributed_data_object(a, distribution_strategy="equal")
        scalar_close(check, dnp.linalg.det(x), np.linalg.det(a), 1e-12, (n, "det"))
        got = dnp.linalg.solve(x, np.ones(n))
        check.true(np.allclose(np.asarray(got.get_full_data()), np.linalg.solve(a, np.ones(n))), n)
        check.true(got.shape == (n,), (n, got.shape))
    a = matrix(4, "float64") + np.eye(4)
    check.true(np.allclose(dnp.linalg.inv(a), np.linalg.inv(a)), "numpy operand")
    check.true(np.isclose(dnp.linalg.det(a), np.linalg.det(a)), "numpy det")
    check.done()


def test_singular_matrices_raise_everywhere_and_have_det_zero():
    n = 8
    a = matrix(n, "float64")
    a[:, 5] = a[:, 1] * 0  # an exact zero column: an exact zero pivot
    check = Checks()
    for spec in ("equal", *(d2o.layout(m, (0, 1), 3) for m in MESHES)):
        x = distributed_data_object(a, distribution_strategy=spec)
        assert_raises_everywhere(LinAlgError, dnp.linalg.solve, x, np.ones(n))
        assert_raises_everywhere(LinAlgError, dnp.linalg.inv, x)
        check.true(dnp.linalg.det(x) == 0.0, (spec, "det"))
        s, ld = dnp.linalg.slogdet(x)
        check.true(s == 0 and ld == -np.inf, (spec, "slogdet", s, ld))
    z = distributed_data_object(np.zeros((5, 5)), distribution_strategy=d2o.layout(split=(0, 1)))
    assert_raises_everywhere(LinAlgError, dnp.linalg.solve, z, np.ones((5, 2)))
    check.true(dnp.linalg.det(z) == 0.0, "zeros")
    check.done()


def test_bad_input():
    lay = d2o.layout(MESHES[0], (0, 1), 2)
    rect = distributed_data_object(np.ones((4, 6)), distribution_strategy=lay)
    for f in (dnp.linalg.inv, dnp.linalg.det, dnp.linalg.slogdet):
        assert_raises_everywhere(LinAlgError, f, rect)
    assert_raises_everywhere(LinAlgError, dnp.linalg.solve, rect, np.ones(4))
    vec = distributed_data_object(np.ones(4))
    assert_raises_everywhere(LinAlgError, dnp.linalg.det, vec)
    x = distributed_data_object(matrix(4, "float64") + np.eye(4), distribution_strategy=lay)
    assert_raises_everywhere(ValueError, dnp.linalg.solve, x, np.ones(5))
    assert_raises_everywhere(ValueError, dnp.linalg.solve, x, np.ones((5, 2)))
    assert_raises_everywhere(ValueError, dnp.linalg.solve, x, 1.0)
    assert_raises_everywhere(ValueError, dnp.linalg.solve, x, distributed_data_object(np.ones(3)))
    half = distributed_data_object(np.eye(4, dtype=np.float16), distribution_strategy=lay)
    assert_raises_everywhere(TypeError, dnp.linalg.det, half)
    assert np.array_equal(x.get_full_data(), matrix(4, "float64") + np.eye(4))  # unchanged


def test_nan_gives_nan_not_a_hang():
    n = 10
    a = matrix(n, "float64")
    a[3, 4] = np.nan
    check = Checks()
    for spec in ("equal", d2o.layout(MESHES[-1], (0, 1), 2)):
        x = distributed_data_object(a, distribution_strategy=spec)
        check.true(np.isnan(dnp.linalg.det(x)), (spec, "det"))
        got = dnp.linalg.solve(x, np.ones(n)).get_full_data()
        check.true(np.isnan(got).any(), (spec, "solve"))
        check.true(np.isnan(dnp.linalg.inv(x).get_full_data()).any(), (spec, "inv"))
    check.done()


def hpl_residual(n: int, spec) -> float:
    a = sample((n, n), "float64", seed=11)
    b = sample((n,), "float64", seed=12)
    x = dnp.linalg.solve(distributed_data_object(a, distribution_strategy=spec), b)
    xs = x.get_full_data()
    r = np.abs(a @ xs - b).max()
    return r / (np.abs(a).sum(axis=1).max() * np.abs(xs).max() * n * np.finfo(float).eps)


def test_hpl_scaled_residual():
    for spec in ("equal", d2o.layout(MESHES[-1], (0, 1), (16, 24))):
        r = hpl_residual(256, spec)
        collective_assert(r < 16, (spec, r))


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("D2O_LU_BIG"), reason="set D2O_LU_BIG=1 (n = 4096)")
def test_hpl_scaled_residual_n4096():
    r = hpl_residual(4096, "equal")
    if comm.rank == 0:
        print(f"HPL scaled residual n=4096 at {P} ranks: {r:.4f}")
    collective_assert(r < 16, r)


def test_bytes_within_the_model_and_one_redistribution():
    n = 48
    a = matrix(n, "float64")
    for mesh in MESHES:
        for block in (4, (3, 5)):
            lay = d2o.layout(mesh, (0, 1), block)
            x = distributed_data_object(a, distribution_strategy=lay)
            with d2o.options(check_args=False), d2o.trace() as t:
                dnp.linalg.det(x)
            got = comm.allreduce(t.bytes_received)
            model = lu.model_bytes(n, n, mesh, 8, 5)
            kinds = {c[1] for c in t.calls}
            collective_assert(got <= model, (mesh, block, got, model))
            collective_assert("Alltoallw" not in kinds, (mesh, block, kinds))  # no exchange
            collective_assert(not any(r.via_slab or r.fallback for r in t.records), t.records)
            if P == 1:
                collective_assert(t.collectives == 0, t.calls)
    x = distributed_data_object(a, distribution_strategy="equal")
    with d2o.options(check_args=False), d2o.trace() as t:
        dnp.linalg.det(x)
    moves = [c for c in t.calls if c[1] == "Alltoallw"]
    collective_assert(len(moves) == (P > 1), moves)  # redistributed once, to the default mesh
    collective_assert([r.op for r in t.records] == ["linalg.det"], t.records)
    if P > 1:
        lay = lu.default_layout(comm, n)
        got = comm.allreduce(t.bytes_received - moves[0][3])
        collective_assert(got <= lu.model_bytes(n, n, lay.mesh, 8, lay.block[1]), got)
        collective_assert(comm.allreduce(moves[0][3]) <= a.nbytes, moves)  # never a gather


def test_peak_memory_is_a_share_of_the_matrix():
    n = 256
    mesh = MESHES[len(MESHES) // 2]
    lay = d2o.layout(mesh, (0, 1), 16)
    x = distributed_data_object(matrix(n, "float64"), distribution_strategy=lay)
    _, peak = traced_peak(lambda _: dnp.linalg.det(x))
    piece = x.data.nbytes
    pr, pc = mesh
    # the working copy, a GEMM chunk (1/4 of it), the swapped rows sent and received, one
    # panel, one block row and its solution (see d2o.ops.lu's notes)
    w, s = 16, 8
    bound = 1.25 * piece + 4 * w * s * (n // pc + 1) + 2 * w * s * (n // pr + 2 * n // pc + 3)
    bound += 64 * 1024
    collective_assert(peak <= bound, (peak, bound, piece))


def test_solve_moves_the_lu_and_the_back_substitution_only():
    n, k = 40, 2
    a = matrix(n, "float64")
    b = sample((n, k), "float64", seed=9)
    for mesh in MESHES:
        pr, pc = mesh
        x = distributed_data_object(a, distribution_strategy=d2o.layout(mesh, (0, 1), 5))
        with d2o.options(check_args=False), d2o.trace() as t:
            got = dnp.linalg.solve(x, b)
        moved = comm.allreduce(t.bytes_received)
        # the LU of [A | b], then the fan-in back substitution: the partial sums of each
        # panel's rows along a mesh row (an Allreduce), the diagonal block and those rows
        # along a mesh column (Allgatherv); U's panels never move; and the solution's one
        # redistribution
        sums = n * k * 8 * pc * 2 * int(np.ceil(np.log2(pc)))
        back = sums + (pr - 1) * n * (5 + k) * 8 + n * k * 8 * P
        bound = lu.model_bytes(n, n + k, mesh, 8, 5) + back
        collective_assert(moved <= bound, (mesh, moved, bound))
        collective_assert(not any(r.via_slab or r.fallback for r in t.records), t.records)
        collective_assert(np.allclose(got.get_full_data(), np.linalg.solve(a, b)), mesh)


def test_overwrite_a_factors_in_place_where_native():
    """d2o's ``overwrite_a``: numpy's solution; ``a`` changed only where it is on its LU mesh
    in the computation dtype, untouched elsewhere and without the keyword."""
    n, k = 23, 2
    check = Checks()
    for dtype in ("float64", "complex64"):
        a = matrix(n, dtype) + np.eye(n, dtype=dtype)
        t = tol(a)
        for rhs in (sample((n,), dtype, seed=5), sample((n, k), dtype, seed=6)):
            want = np.linalg.solve(a, rhs)
            for mesh in MESHES:
                for block in (7, (3, 5)):
                    spec = d2o.layout(mesh, (0, 1), block)
                    for over in (False, True):
                        x = distributed_data_object(a, distribution_strategy=spec)
                        got = dnp.linalg.solve(x, rhs, overwrite_a=over, overwrite_b=over)
                        close(check, got, want, t, (dtype, mesh, block, over))
                        kept = np.array_equal(x.get_full_data(), a)
                        check.true(kept != over, (dtype, mesh, block, over, "a changed"))
            for spec in ("equal", "not"):  # not on a mesh: redistributed, a untouched
                x = distributed_data_object(a, distribution_strategy=spec)
                close(check, dnp.linalg.solve(x, rhs, overwrite_a=True), want, t, spec)
                check.true(np.array_equal(x.get_full_data(), a), (spec, "kept"))
    lay = d2o.layout(MESHES[-1], (0, 1), 4)
    ints = np.arange(n * n).reshape(n, n) % 7 + 7 * np.eye(n, dtype=int)
    x = distributed_data_object(ints, distribution_strategy=lay)  # int64: a float64 copy
    got = dnp.linalg.solve(x, np.ones(n), overwrite_a=True)
    close(check, got, np.linalg.solve(ints, np.ones(n)), 1e-10, "int64")
    check.true(np.array_equal(x.get_full_data(), ints), "int64 kept")
    check.done()


def test_overwrite_a_bad_input_and_nan_on_one_rank():
    n = 12
    lay = d2o.layout(MESHES[-1], (0, 1), 4)
    a = matrix(n, "float64") + np.eye(n)
    x = distributed_data_object(a, distribution_strategy=lay)
    for bad in (np.ones(5), np.ones((5, 2)), distributed_data_object(np.ones(3))):
        assert_raises_everywhere(ValueError, dnp.linalg.solve, x, bad, overwrite_a=True)
    assert np.array_equal(x.get_full_data(), a)  # refused: nothing changed
    z = distributed_data_object(np.zeros((n, n)), distribution_strategy=lay)
    assert_raises_everywhere(LinAlgError, dnp.linalg.solve, z, np.ones(n), overwrite_a=True)
    b = distributed_data_object(np.ones(n), distribution_strategy="equal")
    if comm.rank == P - 1 and b.data.size:  # NaN on one rank's piece only
        b.data[-1] = np.nan
    got = dnp.linalg.solve(x, b, overwrite_a=True).get_full_data()
    want = np.linalg.solve(a, b.get_full_data())
    collective_assert(np.array_equal(np.isnan(got), np.isnan(want)), (got, want))


def test_overwrite_a_moves_the_model_and_makes_no_copy():
    n, k = 96, 1
    a = matrix(n, "float64") + np.eye(n)
    b = sample((n,), "float64", seed=9)
    for mesh in MESHES:
        pr, pc = mesh
        lay = d2o.layout(mesh, (0, 1), 8)
        x = distributed_data_object(a, distribution_strategy=lay)
        with d2o.options(check_args=False), d2o.trace() as t:
            dnp.linalg.solve(x, b, overwrite_a=True)
        moved = comm.allreduce(t.bytes_received)
        exchanged = comm.allreduce(sum(c[3] for c in t.calls if c[1] == "Alltoallw"))
        # the LU, L's and U's panels along mesh rows, b's rows (gathered per panel, its row
        # swaps) along mesh columns, and the solution's one redistribution
        subst = 2 * (pc - 1) * n * (n + 8) / 2 * 8 + 4 * (pr - 1) * n * k * 8 + n * k * 8 * P
        bound = lu.model_bytes(n, n, mesh, 8, 8) + subst
        collective_assert(moved <= bound, (mesh, moved, bound))
        collective_assert(exchanged <= n * k * 8 * P, (mesh, exchanged))  # the solution only
        collective_assert(not any(r.via_slab or r.fallback for r in t.records), t.records)
    n = 512
    mesh = MESHES[len(MESHES) // 2]
    lay = d2o.layout(mesh, (0, 1), 16)
    a = matrix(n, "float64") + np.eye(n)

    def run(over: bool):
        x = distributed_data_object(a, distribution_strategy=lay)
        piece = x.data.nbytes
        _, peak = traced_peak(lambda _: dnp.linalg.solve(x, np.ones(n), overwrite_a=over))
        return peak, piece

    inplace, piece = run(True)
    copied, _ = run(False)
    collective_assert(copied >= piece, (copied, piece))  # the default: a working copy
    collective_assert(inplace <= 0.5 * piece, (inplace, piece))  # overwrite_a: none


def test_ibcast_moves_the_buffer_and_is_traced():
    """`Comm.Ibcast` (the look-ahead's broadcast) and `Comm.wait`: the root's values on every
    rank, counted by the trace as a broadcast."""
    for root in range(P):
        buf = np.full(10, float(comm.rank)) if comm.rank == root else np.zeros(10)
        with d2o.trace() as t:
            req = comm.Ibcast(buf, root=root)
            comm.wait(req)
        collective_assert(np.array_equal(buf, np.full(10, float(root))), (root, buf))
        got = comm.allreduce(t.bytes_received)
        collective_assert(got == 80 * (P - 1), (root, got))
        collective_assert((req is None) == (P == 1), req)


@pytest.mark.skipif(P == 1, reason="a mesh column of several ranks")
def test_pivot_search_is_one_max_location_reduction():
    """The pivot search is a max-location reduction: gathered and folded locally (few ranks)
    or MPI's user op (forced here), the same pivots (ties: the lowest row, NaN wins) and
    numpy's determinant; the trace shows one collective per column, no more."""
    n = 12
    ties = (np.arange(n * n).reshape(n, n) * 7 % 5).astype(float) + np.eye(n)
    nan = matrix(n, "float64", seed=3)
    nan[5, 2] = np.nan
    cases = [("ties", ties), ("random", matrix(n, "complex128", seed=4)), ("nan", nan)]
    check = Checks()
    spec = d2o.layout((P, 1), (0, 1), 2)
    for name, a in cases:
        got = []
        for gather in (8, 1):
            saved = _comm.RECORD_GATHER_MAX[0]
            _comm.RECORD_GATHER_MAX[0] = gather
            try:
                x = distributed_data_object(a, distribution_strategy=spec)
                with d2o.options(check_args=False), d2o.trace() as t:
                    f = lu.lu_factor(x, a.dtype)
                got.append(f.ipiv)
                det = dnp.linalg.det(x)
            finally:
                _comm.RECORD_GATHER_MAX[0] = saved
            kind = "Allgather" if gather == 8 else "Allreduce"
            calls = sum(1 for c in t.calls if c[1] == kind)
            check.true(calls == n, (name, gather, kind, calls))
            if name == "nan":
                check.true(np.isnan(det), (name, gather, det))
            else:
                scalar_close(check, det, np.linalg.det(a), 1e-10, (name, gather))
        check.true(np.array_equal(got[0], got[1]), (name, got))
    check.done()
