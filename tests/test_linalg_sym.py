"""Cholesky, triangular solves and symmetric eigenvalues, distributed (issue 34, part B).

numpy is the oracle on the same global matrix: ``cholesky`` on every 2-D mesh the process
count allows (Px1, 1xP, 2x(P/2)), blocks of 1, 7 and 64, rectangular blocks (3x5) and
plain blocks, the four dtypes, and every other layout of the suite (redistributed once to
the default mesh); ``solve_triangular``/``cho_solve`` (internal, `d2o.ops.cholesky`);
``eigh``/``eigvalsh`` (block Jacobi) compared by eigenvalues, ``A v = lambda v`` and
orthonormality.  Bad input raises numpy's exception on every rank.  The trace bounds the
bytes of a Cholesky by the module's model (``n^2 (pr + pc - 1) / 2`` elements), checks
that no call brings a whole matrix, and traced memory stays O(N/P).
"""

from __future__ import annotations

import numpy as np
import pytest
from _helpers import Checks, layouts, make, traced_peak

import d2o
import d2o.numpy as dnp
from d2o import default_comm, distributed_data_object
from d2o.ops import cholesky as chol
from d2o.testing import assert_raises_everywhere, collective_assert

comm = default_comm()
P = comm.size
DTYPES = ["float32", "float64", "complex64", "complex128"]
BLOCKS = [1, 7, 64, (3, 5), None]


def meshes() -> list:
    """Every 2-D mesh shape of P ranks used here."""
    out = [(P, 1), (1, P)]
    if P % 2 == 0 and P > 2:
        out.append((2, P // 2))
    return sorted(set(out))


def _tol(dtype) -> float:
    return 2e-4 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-10


def spd(n: int, dtype: str, seed: int = 0) -> np.ndarray:
    """A Hermitian positive-definite matrix with garbage above the diagonal (numpy reads
    the lower triangle only)."""
    rng = np.random.default_rng(seed)
    m = rng.standard_normal((n, n))
    if np.dtype(dtype).kind == "c":
        m = m + 1j * rng.standard_normal((n, n))
    a = m @ m.conj().T + n * np.eye(n)
    a[np.triu_indices(n, 1)] = 99.0  # never read
    return a.astype(dtype)


def hermitian(n: int, dtype: str, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    m = rng.standard_normal((n, n))
    if np.dtype(dtype).kind == "c":
        m = m + 1j * rng.standard_normal((n, n))
    return m.astype(dtype)  # eigh reads one triangle: any square matrix will do


def on_mesh(a: np.ndarray, mesh: tuple, block) -> distributed_data_object:
    return distributed_data_object(a, distribution_strategy=d2o.layout(mesh, (0, 1), block))


def close(got: np.ndarray, want: np.ndarray, dtype) -> bool:
    scale = max(1.0, float(np.abs(want).max())) if want.size else 1.0
    return bool(np.allclose(got, want, rtol=_tol(dtype), atol=_tol(dtype) * scale))


# -- cholesky ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("block", BLOCKS, ids=str)
def test_cholesky_on_every_mesh(block, dtype):
    check = Checks()
    for n in (1, 11, 23):
        lower = spd(n, dtype)
        for mesh in meshes():
            for upper in (False, True):
                a = lower.conj().T.copy() if upper else lower  # garbage in the other triangle
                x = on_mesh(a, mesh, block)
                want = np.linalg.cholesky(a, upper=upper)
                got = dnp.linalg.cholesky(x, upper=upper)
                check.true(got.distributor is x.distributor, f"{mesh} {block}: layout changed")
                check.true(got.dtype == want.dtype, f"dtype {got.dtype} != {want.dtype}")
                part = want[got.distributor.local_slice]
                check.true(close(got.data, part, dtype), f"n={n} {mesh} {block} upper={upper}")
    check.done()


@pytest.mark.parametrize("strategy, axis", layouts(2))
def test_cholesky_of_other_layouts(strategy, axis):
    check = Checks()
    for dtype in ("float64", "complex64", "int64"):
        a = spd(13, "float64" if dtype == "int64" else dtype)
        if dtype == "int64":
            a = np.tril(np.rint(a)).astype(np.int64) + np.tril(np.rint(a), -1).T.astype(np.int64)
        x = make(a, strategy, axis)
        want = np.linalg.cholesky(a)
        with d2o.trace() as t:
            got = dnp.linalg.cholesky(x)
        check.equal(got, want, rtol=_tol(dtype), what=f"{strategy} {dtype}")
        (rec,) = [r for r in t.records if r.op == "linalg.cholesky"]
        check.true(rec.via_slab == 0 and rec.gathers == 0, f"{strategy}: {rec}")
        if x.distributor.replicated:  # numpy on every rank: no data moves (checked mode's
            check.true(rec.bytes_received <= 128 * P, f"replicated input moved: {rec}")  # record)
        elif chol.mesh_grid(x.distributor) is None and P > 1:  # one move to the default mesh
            kinds = [c[1] for c in t.calls if c[0] == "linalg.cholesky"]
            check.true(kinds.count("Alltoallw") == 1, f"{strategy}: {kinds[:5]}")
            check.true(rec.fallback is None, f"{strategy}: fell back")
    check.done()


def test_not_positive_definite_raises_everywhere():
    for mesh in meshes():
        for bad in (0, 6, 12):  # the failing diagonal block sits on different ranks
            a = spd(13, "float64")
            a[bad, bad] = -1e6
            x = on_mesh(a, mesh, 2)
            assert_raises_everywhere(np.linalg.LinAlgError, dnp.linalg.cholesky, x)
            x = make(a, "equal", 1)
            assert_raises_everywhere(np.linalg.LinAlgError, dnp.linalg.cholesky, x)
    y = dnp.linalg.cholesky(on_mesh(spd(13, "float64"), meshes()[0], 2))  # and it goes on
    collective_assert(y.shape == (13, 13))


def test_bad_input_raises_numpys_error_everywhere():
    x = make(np.ones((4, 5)), "equal", 0)
    for f in (dnp.linalg.cholesky, dnp.linalg.eigh, dnp.linalg.eigvalsh):
        assert_raises_everywhere(np.linalg.LinAlgError, f, x)
        assert_raises_everywhere(np.linalg.LinAlgError, f, make(np.ones(4), "equal", 0))
    sq = make(np.eye(4), "equal", 0)
    assert_raises_everywhere(ValueError, dnp.linalg.eigh, sq, UPLO="X")
    assert_raises_everywhere(ValueError, dnp.linalg.eigvalsh, sq, UPLO="X")


@pytest.mark.parametrize("strategy", ["equal", "mesh"])
def test_nan_empty_and_stacked_give_numpys_result(strategy):
    def dist(a):
        if strategy == "mesh" and a.ndim == 2 and a.size:
            return on_mesh(a, meshes()[-1], 2)
        return make(a, "equal", 0)

    check = Checks()
    a = spd(6, "float64")
    a[3, 2] = np.nan
    want = np.linalg.cholesky(a)
    got = dnp.linalg.cholesky(dist(a)).get_full_data()
    check.true(np.array_equal(got, want, equal_nan=True), f"NaN: {got} != {want}")
    try:
        ref = np.linalg.eigvalsh(a)
    except np.linalg.LinAlgError:  # numpy's LAPACK gives up on NaN: so do we, everywhere
        assert_raises_everywhere(np.linalg.LinAlgError, dnp.linalg.eigvalsh, dist(a))
    else:
        got = dnp.linalg.eigvalsh(dist(a)).get_full_data()
        check.true(np.array_equal(got, ref, equal_nan=True), "NaN eigvalsh")
    e = np.zeros((0, 0))
    check.true(dnp.linalg.cholesky(dist(e)).shape == (0, 0), "empty cholesky")
    check.true(dnp.linalg.eigh(dist(e)).eigenvalues.shape == (0,), "empty eigh")
    s = np.stack([spd(5, "float64", k) for k in range(3)])  # stacks: the bounded fallback
    check.equal(dnp.linalg.cholesky(make(s, "equal", 0)), np.linalg.cholesky(s), 1e-12, "stack")
    w = dnp.linalg.eigvalsh(make(s, "equal", 0)).get_full_data()
    check.true(np.allclose(w, np.linalg.eigvalsh(s)), "stacked eigvalsh")
    check.done()


def test_cholesky_bytes_within_the_model():
    """Bytes into all ranks together <= (pr + pc - 1) n^2 / 2 + (pr - 1) n b elements, no
    call brings the whole matrix, nothing via slabs, no fallback."""
    n, b = 48, 4
    a = spd(n, "float64")
    for mesh in meshes():
        x = on_mesh(a, mesh, b)
        with d2o.trace() as t:
            dnp.linalg.cholesky(x)
        (rec,) = [r for r in t.records if r.op == "linalg.cholesky"]
        total = comm.allreduce(rec.bytes_received, "sum")
        model = chol.bytes_model(n, mesh, b, 8)
        collective_assert(total <= model + 64 * P, f"{mesh}: {total} > model {model}")
        if P == 1:
            collective_assert(total == 0, f"one process moved {total}")
        biggest = max([c[3] for c in t.calls if c[0] == "linalg.cholesky"], default=0)
        collective_assert(biggest < n * n * 8 / 2, f"{mesh}: a call received {biggest}")
        collective_assert(rec.via_slab == 0 and rec.fallback is None and rec.gathers == 0)
        if P > 1 and mesh[0] == mesh[1] == 2:  # sqrt(P) n^2 on the square mesh
            collective_assert(total <= 1.5 * 8 * n * n + 64 * P, f"2x2: {total}")


def test_cholesky_memory_is_O_N_over_P():
    n = 96
    a = spd(n, "float64")
    x = on_mesh(a, meshes()[-1], 8)
    share = x.data.nbytes
    _, peak = traced_peak(lambda _: dnp.linalg.cholesky(x))
    collective_assert(peak <= 4 * share + 64 * 1024, f"peak {peak} for a share of {share}")


# -- triangular solves ------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_solve_triangular_against_numpy(dtype):
    check = Checks()
    n = 17
    rng = np.random.default_rng(3)
    t = (np.tril(hermitian(n, dtype, 1)) + 4 * n * np.eye(n)).astype(dtype)
    t[np.triu_indices(n, 1)] = 7  # never read
    lo = np.tril(t)
    for mesh in meshes():
        for block in (1, 7, (3, 5)):
            tt = on_mesh(t, mesh, block)
            tu = on_mesh(t.T.copy(), mesh, block)  # upper triangular (garbage below)
            for rhs in (rng.standard_normal(n), rng.standard_normal((n, 3))):
                rhs = rhs.astype(dtype)
                cases = [
                    (chol.solve_triangular(tt, rhs), np.linalg.solve(lo, rhs)),
                    (chol.solve_triangular(tt, rhs, trans=True), np.linalg.solve(lo.conj().T, rhs)),
                    (chol.solve_triangular(tu, make(rhs, "equal", 0), lower=False),
                     np.linalg.solve(lo.T, rhs)),
                ]  # fmt: skip
                for k, (got, want) in enumerate(cases):
                    check.true(got.shape == want.shape, f"shape {got.shape}")
                    part = want[got.distributor.local_slice]
                    check.true(close(got.data, part, dtype), f"{mesh} {block} case {k}")
    check.done()


def test_cho_solve_and_singular_triangles():
    n = 19
    a = spd(n, "complex128")
    full = np.tril(a) + np.tril(a, -1).conj().T
    b = np.random.default_rng(5).standard_normal((n, 2))
    check = Checks()
    for mesh in meshes():
        lfac = dnp.linalg.cholesky(on_mesh(a, mesh, 3))
        x = chol.cho_solve(lfac, b)
        check.equal(x, np.linalg.solve(full, b), rtol=1e-9, what=f"{mesh}")
        t = np.tril(np.ones((n, n)))
        t[9, 9] = 0
        assert_raises_everywhere(
            np.linalg.LinAlgError, chol.solve_triangular, on_mesh(t, mesh, 3), b
        )
    check.done()


# -- eigh / eigvalsh --------------------------------------------------------------------


def _check_eigh(check, a, w, v, uplo, dtype, what):
    h = np.tril(a) + np.tril(a, -1).conj().T if uplo == "L" else np.triu(a) + np.triu(a, 1).conj().T
    h[np.diag_indices(len(a))] = h.diagonal().real
    ww = np.linalg.eigvalsh(a, UPLO=uplo)
    scale = max(1.0, float(np.abs(ww).max())) if ww.size else 1.0
    tol = _tol(dtype) * 10
    check.true(w.dtype == ww.dtype, f"{what}: dtype {w.dtype}")
    check.true(np.allclose(w, ww, atol=tol * scale), f"{what}: eigenvalues {w} != {ww}")
    if v is not None:
        n = len(a)
        check.true(np.allclose(h @ v, v * w, atol=tol * scale * 10), f"{what}: A v != v w")
        check.true(np.allclose(v.conj().T @ v, np.eye(n), atol=tol * 10), f"{what}: not unitary")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("strategy, axis", layouts(2))
def test_eigh_on_every_layout(strategy, axis, dtype):
    check = Checks()
    for n in (1, 2, 9, 16):
        a = hermitian(n, dtype, n)
        for uplo in ("L", "u"):
            x = make(a, strategy, axis)
            res = dnp.linalg.eigh(x, UPLO=uplo)
            w = res.eigenvalues.get_full_data()
            v = res.eigenvectors.get_full_data()
            _check_eigh(check, a, w, v, uplo.upper(), dtype, f"{strategy} {dtype} {n}")
            wo = dnp.linalg.eigvalsh(x, uplo).get_full_data()
            _check_eigh(check, a, wo, None, uplo.upper(), dtype, f"eigvalsh {strategy}")
    check.done()


@pytest.mark.parametrize("block", [1, 7, 64])
def test_eigh_on_meshes_and_repeated_eigenvalues(block):
    check = Checks()
    q, _ = np.linalg.qr(np.random.default_rng(2).standard_normal((21, 21)))
    repeated = (q * np.repeat([-1.0, 2.0, 5.0], 7)) @ q.T
    for mesh in meshes():
        for a in (repeated, np.eye(21), hermitian(21, "complex128")):
            res = dnp.linalg.eigh(on_mesh(a, mesh, block))
            w, v = res.eigenvalues.get_full_data(), res.eigenvectors.get_full_data()
            _check_eigh(check, a, w, v, "L", a.dtype, f"{mesh} {block}")
    check.done()


def test_eigh_moves_no_whole_matrix_and_memory_is_O_N_over_P():
    n = 64
    a = hermitian(n, "float64")
    x = on_mesh(a, meshes()[-1], 4)
    with d2o.trace() as t:
        res = dnp.linalg.eigh(x)
    (rec,) = [r for r in t.records if r.op == "linalg.eigh"]
    collective_assert(rec.via_slab == 0 and rec.fallback is None and rec.gathers == 0, str(rec))
    biggest = max([c[3] for c in t.calls if c[0] == "linalg.eigh"], default=0)
    if P > 1:
        collective_assert(biggest < n * n * 8, f"a call received {biggest} bytes")
    else:
        collective_assert(rec.bytes_received == 0, str(rec))
    collective_assert(res.eigenvectors.distributor.local_shape[1] <= -(-n // P))
    share = x.data.nbytes
    _, peak = traced_peak(lambda _: dnp.linalg.eigh(x))
    collective_assert(peak <= 12 * share + 64 * 1024, f"peak {peak} for a share of {share}")


def test_cho_solve_scaled_residual_and_a_larger_eigh():
    """HPL's scaled residual ||A x - b||_inf / (||A||_inf ||x||_inf n eps) < 16 for a solve
    through the distributed Cholesky factor (n = 160, default mesh from row slabs), and
    eigh of n = 72 against numpy."""
    n = 160
    a = spd(n, "float64", 9)
    full = np.tril(a) + np.tril(a, -1).T
    b = np.random.default_rng(9).standard_normal(n)
    lfac = dnp.linalg.cholesky(make(a, "equal", 0))
    x = chol.cho_solve(lfac, b).get_full_data()
    eps = np.finfo(float).eps
    r = np.abs(full @ x - b).max() / (np.abs(full).sum(1).max() * np.abs(x).max() * n * eps)
    collective_assert(r < 16, f"scaled residual {r}")
    check = Checks()
    h = hermitian(72, "float64", 4)
    res = dnp.linalg.eigh(make(h, "equal", 1))
    _check_eigh(check, h, res.eigenvalues.get_full_data(), res.eigenvectors.get_full_data(),
                "L", "float64", "n=72")  # fmt: skip
    check.done()
