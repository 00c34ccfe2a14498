"""Scaling kernels (issue 15): SUMMA and matrix-vector products on process meshes, pencil
FFTs, and what a stencil step moves, against numpy, with the communication asserted by
the trace."""

from __future__ import annotations

import operator

import numpy as np
import pytest
from _helpers import make, mesh_of, spy_sends

import d2o
import d2o.fft
import d2o.numpy as dnp
from d2o import default_comm
from d2o.move.redistribution import same_pieces
from d2o.testing import assert_equal_to_numpy, assert_raises_everywhere, collective_assert

P = default_comm().size


def _meshes() -> list:
    """2-d process meshes for the communicator: (P, 1), (1, P) and a square one at 4."""
    out = [(P, 1), (1, P)]
    if P == 4:
        out.append((2, 2))
    return out


def _lay(mesh, split=(0, 1), block=None):
    return d2o.layout(mesh=mesh, split=split, block=block)


SHAPES = [(7, 5, 6), (12, 9, 10), (3, 1, 2), (1, 4, 1), (5, 0, 3)]


@pytest.mark.parametrize("mesh", _meshes())
@pytest.mark.parametrize("m,k,n", SHAPES)
def test_summa_against_numpy(mesh, m, k, n):
    rng = np.random.default_rng(m * 100 + k * 10 + n)
    A, B = rng.standard_normal((m, k)), rng.standard_normal((k, n))
    lay = _lay(mesh)
    a, b = dnp.asarray(A, dist=lay), dnp.asarray(B, dist=lay)
    got = a @ b
    if k > 1 and (m == 1 or n == 1):  # a vector product: the mesh matrix-vector layout
        vec = (0, None) if n == 1 else (None, 1)
        want = d2o.layout(mesh=mesh, split=vec).distributor(got.shape)
    else:  # SUMMA: the operands' layout
        want = lay.distributor(got.shape)
    collective_assert(same_pieces(got.distributor, want), "on the mesh")
    assert_equal_to_numpy(got, A @ B, rtol=1e-12, atol=1e-12)
    # mixed operands: numpy, slabs, block-cyclic, the transposed split
    assert_equal_to_numpy(a @ B, A @ B, rtol=1e-12, atol=1e-12)
    assert_equal_to_numpy(A @ b, A @ B, rtol=1e-12, atol=1e-12)
    assert_equal_to_numpy(a @ make(B, "equal"), A @ B, rtol=1e-12, atol=1e-12)
    cyc = dnp.asarray(B, dist=_lay(mesh, block=2))
    assert_equal_to_numpy(a @ cyc, A @ B, rtol=1e-12, atol=1e-12)
    tr = dnp.asarray(A, dist=_lay(mesh, split=(1, 0)))
    assert_equal_to_numpy(tr @ b, A @ B, rtol=1e-12, atol=1e-12)
    assert_equal_to_numpy(dnp.dot(a, b), A @ B, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("mesh", _meshes())
@pytest.mark.parametrize("dtype", ["int64", "complex128", "float32"])
def test_summa_dtypes_and_vectors(mesh, dtype):
    rng = np.random.default_rng(7)
    A = (rng.standard_normal((9, 7)) * 10).astype(dtype)
    B = (rng.standard_normal((7, 4)) * 10).astype(dtype)
    x, y = (rng.standard_normal(7) * 10).astype(dtype), (rng.standard_normal(9)).astype(dtype)
    lay = _lay(mesh)
    a, b = dnp.asarray(A, dist=lay), dnp.asarray(B, dist=lay)
    tol = 1e-4 if dtype == "float32" else 1e-12
    assert_equal_to_numpy(a @ b, A @ B, rtol=tol, atol=tol)
    assert_equal_to_numpy(a @ x, A @ x, rtol=tol, atol=tol)
    assert_equal_to_numpy(a @ make(x, "equal"), A @ x, rtol=tol, atol=tol)
    assert_equal_to_numpy(y @ a, y @ A, rtol=tol, atol=tol)


def test_summa_bad_shapes_raise_everywhere():
    lay = _lay(_meshes()[0])
    a = dnp.asarray(np.ones((4, 3)), dist=lay)
    for other in (np.ones((4, 2)), dnp.asarray(np.ones((2, 2)), dist=lay)):
        exc = assert_raises_everywhere(ValueError, operator.matmul, a, other)
        collective_assert("mismatch" in str(exc), str(exc))
    assert_equal_to_numpy(a @ np.ones((3, 2)), np.full((4, 2), 3.0))  # the next call works


@pytest.mark.skipif(P != 4, reason="a 2 x 2 mesh needs 4 ranks")
def test_summa_communication_on_a_square_mesh():
    """Bytes received over all ranks (a broadcast's sender counts its bytes once, whatever
    the group) <= 1.25 (sqrt(P) - 1)(|A| + |B|); broadcasts in groups of 2."""
    rng = np.random.default_rng(3)
    A, B = rng.standard_normal((40, 30)), rng.standard_normal((30, 20))
    lay = _lay((2, 2))
    a, b = dnp.asarray(A, dist=lay), dnp.asarray(B, dist=lay)
    a @ b  # the sub-communicators are made once
    with d2o.options(check_args=False), d2o.trace() as t:
        c = a @ b
    assert_equal_to_numpy(c, A @ B, rtol=1e-12, atol=1e-12)
    moving = [call for call in t.calls if call[2] > 1 or call[3] > 1]  # not the agreement
    collective_assert(all(call[1] == "Bcast" and call[4] == 2 for call in moving), f"{moving}")
    total = default_comm().allreduce(sum(call[3] for call in moving))
    collective_assert(total <= 1.25 * (2 - 1) * (A.nbytes + B.nbytes), f"{total}")


# -- pencil FFTs -------------------------------------------------------------------------


@pytest.mark.parametrize("mesh", _meshes())
@pytest.mark.parametrize("split", [(0, 1), (1, 2), (2, 0), (None, 1)])
def test_pencil_fft_against_numpy(mesh, split):
    rng = np.random.default_rng(11)
    X = rng.standard_normal((8, 6, 5)) + 1j * rng.standard_normal((8, 6, 5))
    lay = _lay(mesh, split)
    x = dnp.asarray(X, dist=lay)
    f = d2o.fft.fftn(x)
    collective_assert(same_pieces(f.distributor, x.distributor), "in the input's layout")
    assert_equal_to_numpy(f, np.fft.fftn(X), rtol=1e-10, atol=1e-10)
    assert_equal_to_numpy(d2o.fft.ifftn(f), X, rtol=1e-10, atol=1e-10)
    assert_equal_to_numpy(d2o.fft.fftn(x, axes=(0, 2)), np.fft.fftn(X, axes=(0, 2)), rtol=1e-10)
    assert_equal_to_numpy(d2o.fft.fftn(x, s=(4, 6, 7)), np.fft.fftn(X, s=(4, 6, 7)), rtol=1e-10)
    R = X.real.copy()
    r = dnp.asarray(R, dist=lay)
    rf = d2o.fft.rfftn(r)
    assert_equal_to_numpy(rf, np.fft.rfftn(R), rtol=1e-10, atol=1e-10)
    assert_equal_to_numpy(d2o.fft.irfftn(rf, s=R.shape), R, rtol=1e-10, atol=1e-10)


def test_pencil_fft_bad_axis_raises_everywhere():
    x = dnp.asarray(np.ones((4, 4, 4)), dist=_lay(_meshes()[0]))
    assert_raises_everywhere(np.exceptions.AxisError, d2o.fft.fftn, x, axes=(0, 3))
    assert_equal_to_numpy(d2o.fft.fftn(x), np.fft.fftn(np.ones((4, 4, 4))))


@pytest.mark.skipif(P != 4, reason="a 2 x 2 mesh needs 4 ranks")
def test_pencil_fft_communication_on_a_square_mesh():
    """Every exchange runs in a group of 2; the transform moves at most twice the array."""
    X = np.random.default_rng(2).standard_normal((8, 8, 8)) + 0j
    x = dnp.asarray(X, dist=_lay((2, 2)))
    d2o.fft.fftn(x)  # the sub-communicators are made once
    with d2o.options(check_args=False), d2o.trace() as t:
        f = d2o.fft.fftn(x)
    assert_equal_to_numpy(f, np.fft.fftn(X), rtol=1e-10, atol=1e-10)
    moving = [call for call in t.calls if call[2] > 1 or call[3] > 1]  # not the agreement
    collective_assert(bool(moving) and all(call[4] == 2 for call in moving), f"{moving}")
    total = default_comm().allreduce(sum(call[2] for call in moving))
    collective_assert(total <= 2 * X.nbytes, f"{total} > {2 * X.nbytes}")


# -- stencils: what a Jacobi step moves ----------------------------------------------------


@pytest.mark.parametrize("strategy", ["equal", "fftw", "freeform"])
def test_jacobi_step_moves_boundary_rows_to_neighbours(strategy, monkeypatch):
    n = 40
    U = np.random.default_rng(1).random((n, n))
    u = make(U.copy(), strategy)
    calls = spy_sends(monkeypatch)
    with d2o.options(check_args=False), d2o.trace() as t:
        u[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])
    seen = [peers for _, peers in calls]  # the step's exchanges only (the check gathers)
    U[1:-1, 1:-1] = 0.25 * (U[:-2, 1:-1] + U[2:, 1:-1] + U[1:-1, :-2] + U[1:-1, 2:])
    assert_equal_to_numpy(u, U)
    me = default_comm().rank
    collective_assert(all(p <= {me - 1, me + 1} for p in seen), f"peers {seen}")
    row = (n - 2) * 8
    sent = sum(call[2] for call in t.calls)
    # four shifted operands, at most one boundary row each to each of two neighbours, and
    # the two-row shift of u[2:] against u[:-2]
    collective_assert(sent <= 2 * 5 * row + 64, f"{sent} bytes > {2 * 5 * row}")


def test_mesh_stencil_against_numpy():
    U = np.random.default_rng(4).random((9, 8, 7))
    lay = mesh_of("mesh01")
    u = dnp.asarray(U.copy(), dist=lay)
    u[1:-1, 1:-1, 1:-1] = (
        u[:-2, 1:-1, 1:-1] + u[2:, 1:-1, 1:-1] + u[1:-1, :-2, 1:-1] + u[1:-1, 2:, 1:-1]
    ) / 4
    U[1:-1, 1:-1, 1:-1] = (
        U[:-2, 1:-1, 1:-1] + U[2:, 1:-1, 1:-1] + U[1:-1, :-2, 1:-1] + U[1:-1, 2:, 1:-1]
    ) / 4
    assert_equal_to_numpy(u, U, rtol=1e-14)


def test_matmul_operand_bad_on_one_rank_raises_everywhere():
    """A numpy operand that differs on one rank: ValueError on every rank (checked mode),
    and the next product works."""
    lay = _lay(_meshes()[0])
    A = np.arange(12.0).reshape(4, 3)
    a = dnp.asarray(A, dist=lay)
    if P > 1:
        bad = np.ones((3, 2)) * (1 + default_comm().rank)
        with d2o.options(check_args=True):
            assert_raises_everywhere(ValueError, operator.matmul, a, bad)
    assert_equal_to_numpy(a @ np.ones((3, 2)), A @ np.ones((3, 2)))
