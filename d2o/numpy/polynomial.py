"""`d2o.numpy`'s polynomials: their table entries.

``polyfit`` of many distributed sample points builds its Vandermonde rows where the points
are and solves the least squares with TSQR (`d2o.numpy.linalg.qr`): what moves is one
``deg + 1``-square R factor per rank and a few sums of ``deg + 1`` numbers, never the
points.  ``polyadd``, ``polysub``, ``polyder``, ``polyint`` and ``polymul`` of distributed
coefficient arrays are composed of slices, element-wise operations, joins and `convolve`;
``polyval`` of a large ``x`` is element-wise, of distributed coefficients a reduction.
``poly``, ``roots`` and ``polydiv`` keep the bounded fallback: coefficient arrays are small
by nature, and their algorithms (eigenvalues, a sequential recurrence) do not compose.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from ..array.align import align
from ..array.base import Array as D2O
from ..array.base import from_local
from ..core.errors import agreed
from ..layouts.distributors import Distributor, get_distributor
from ..move.halo import slab_rows
from ..ops.axislocal import elementwise, fallback
from ..ops.creation import asarray
from ..ops.joining import concatenate
from . import composed
from .factories import ew
from .linalg import qr

__all__ = ["fill", "polyfit", "polyval", "polyadd", "polysub", "polyder", "polyint", "polymul"]


#: numpy's own, for numpy data alone (its overloads want literal flags)
_np_polyfit: Any = np.polyfit


# -- polyfit --------------------------------------------------------------------------
def _rows(ops: list, m: int, comm: Any) -> Distributor:
    """The 1-d row layout of ``m`` sample points: the cuts of the first operand split
    along its first axis (its rows stay), else 'equal'.  Local."""
    for v in ops:
        d = v.distributor
        if slab_rows(d) and d.axis == 0:
            return d.slabs_like((m,), 0)
    return get_distributor("equal", (m,), comm)


def _mine(v: Any, rows: Distributor) -> np.ndarray:
    """This rank's rows of ``v`` (first axis cut as ``rows``): a distributed ``v`` is
    redistributed (each element moves at most once), a numpy one sliced."""
    if isinstance(v, D2O):
        target = rows if v.ndim == 1 else rows.slabs_like(v.shape, 0)
        return np.asarray(align(v, target))
    lo, hi = rows.span()
    return np.asarray(v)[lo:hi]


def _ndim(v: Any) -> int:
    return v.ndim if isinstance(v, D2O) else np.ndim(v)


def _shape(v: Any) -> tuple:
    return v.shape if isinstance(v, D2O) else np.shape(v)


def polyfit(x: Any, y: Any, deg: Any, rcond: Any = None, full: bool = False, w: Any = None,
            cov: Any = False) -> Any:  # fmt: skip
    """numpy's ``polyfit`` of distributed sample points: every rank builds the (weighted,
    column-scaled as numpy does) Vandermonde rows of its points, the column norms are one
    ``Allreduce`` of ``deg + 1`` numbers, TSQR (`d2o.numpy.linalg.qr`) gathers one
    ``(deg + 1)``-square R per rank, ``Q^H y`` and the residuals are one ``Allreduce``
    each; the minimum-norm solution comes from the SVD of R (LAPACK's ``gelsd`` cut-off,
    so rank-deficient fits match numpy's too).  ``y``, ``w`` move to ``x``'s row cuts if
    theirs differ.  The coefficients (and covariance) are replicated."""
    ops = [v for v in (x, y, w) if isinstance(v, D2O)]
    if not ops:
        return _np_polyfit(x, y, deg, rcond, full, w, cov)
    comm = ops[0].distributor.comm
    order = int(deg) + 1
    if deg < 0:
        raise ValueError("expected deg >= 0")
    if _ndim(x) != 1:
        raise TypeError("expected 1D vector for x")
    if _shape(x)[0] == 0:
        raise TypeError("expected non-empty vector for x")
    if _ndim(y) < 1 or _ndim(y) > 2:
        raise TypeError("expected 1D or 2D array for y")
    if _shape(x)[0] != _shape(y)[0]:
        raise TypeError("expected x and y to have same length")
    if w is not None:
        if _ndim(w) != 1:
            raise TypeError("expected a 1-d array for weights")
        if _shape(w)[0] != _shape(y)[0]:
            raise TypeError("expected w and y to have the same length")
    m = _shape(x)[0]
    rows = _rows(ops, m, comm)
    xl = _mine(x, rows) + 0.0
    rhs = _mine(y, rows) + 0.0
    if rcond is None:
        rcond = m * np.finfo(xl.dtype).eps
    with agreed(comm):
        lhs = np.vander(xl, order)
        if w is not None:
            wl = _mine(w, rows) + 0.0
            lhs *= wl[:, np.newaxis]
            if rhs.ndim == 2:
                rhs *= wl[:, np.newaxis]
            else:
                rhs *= wl
    scale = np.sqrt(comm.Allreduce(np.ascontiguousarray((lhs * lhs).sum(axis=0)), "sum"))
    with agreed(comm):
        lhs /= scale
    c, resids, rank, s = _lstsq(lhs, rhs, rcond, rows, comm)
    c = (c.T / scale).T
    if rank != order and not full:
        warnings.warn("Polyfit may be poorly conditioned", np.exceptions.RankWarning, stacklevel=2)
    rep = lambda v: asarray(v, dist=False, comm=comm)  # noqa: E731
    if full:
        return rep(c), rep(resids), rank, s, rcond
    if cov:
        gram = comm.Allreduce(np.ascontiguousarray(lhs.T @ lhs), "sum")
        vbase = np.linalg.inv(gram)
        vbase /= np.outer(scale, scale)
        if cov == "unscaled":
            fac: Any = 1
        else:
            if m <= order:
                raise ValueError(
                    "the number of data points must exceed order to scale the covariance matrix"
                )
            fac = resids / (m - order)
        v = vbase * fac if rhs.ndim == 1 else vbase[:, :, np.newaxis] * fac
        return rep(c), rep(v)
    return rep(c)


def _lstsq(lhs: np.ndarray, rhs: np.ndarray, rcond: float, rows: Distributor, comm: Any) -> tuple:
    """numpy's ``linalg.lstsq`` of the row-distributed system ``lhs c = rhs`` (this rank's
    rows): TSQR, then the SVD of R; ``(c, residuals, rank, s)`` on every rank."""
    m, n = rows.global_shape[0], lhs.shape[1]
    cplx = lhs.dtype.kind == "c" or rhs.dtype.kind == "c"
    single = all(v.dtype in (np.float32, np.complex64) for v in (lhs, rhs))  # numpy's
    t = np.complex128 if cplx else np.float64
    result_t = np.dtype((np.complex64 if cplx else np.float32) if single else t)
    real_t = np.empty(0, result_t).real.dtype
    a = from_local(np.ascontiguousarray(lhs, dtype=t), rows.slabs_like((m, n), 0))
    q, r = qr(a)
    ql, rl = q.get_local_data(copy=False), r.get_full_data()
    b = rhs.astype(t)
    qtb = comm.Allreduce(np.ascontiguousarray(ql.conj().T @ b), "sum")
    u, s, vh = np.linalg.svd(rl, full_matrices=False)
    s = s[: min(m, n)]
    rank = int((s > rcond * s[0]).sum()) if s.size else 0
    uh = u[:, :rank].conj().T @ qtb
    sr = s[:rank] if b.ndim == 1 else s[:rank, None]
    c = vh[:rank].conj().T @ (uh / sr)
    if rank == n and m > n:
        resid = b - lhs.astype(t) @ c
        part = np.atleast_1d((abs(resid) ** 2).sum(axis=0))
        resids = comm.Allreduce(np.ascontiguousarray(part), "sum").astype(real_t)
    else:
        resids = np.array([], real_t)
    return c.astype(result_t), resids, rank, s.astype(real_t)


# -- the coefficient helpers ----------------------------------------------------------
def _dist1(*vs: Any) -> bool:
    """True when the operands are plain coefficient vectors (no poly1d) and one is a
    distributed 1-d array cut between ranks: the composed path."""
    if any(isinstance(v, np.poly1d) for v in vs):
        return False
    ds = [v for v in vs if isinstance(v, D2O)]
    return bool(ds) and all(v.ndim == 1 for v in ds) and any(
        not v.distributor.replicated for v in ds
    ) and all(np.ndim(v) <= 1 for v in vs)  # fmt: skip


def _fb(name: str, args: tuple, kwargs: dict | None = None) -> Any:
    return fallback(name, getattr(np, name), args, kwargs or {})


def _1d(v: Any) -> Any:
    return v if isinstance(v, D2O) else np.atleast_1d(v)


def _padded(a1: Any, a2: Any) -> tuple:
    """``a1``, ``a2`` as numpy's ``polyadd`` lines them up: the shorter one behind zeros."""
    a1, a2 = _1d(a1), _1d(a2)
    diff = len(a2) - len(a1)
    if diff > 0:
        a1 = _join(np.zeros(diff, a1.dtype), a1)
    elif diff < 0:
        a2 = _join(np.zeros(-diff, a2.dtype), a2)
    return a1, a2


def _join(z: np.ndarray, a: Any) -> Any:
    return concatenate([z, a]) if isinstance(a, D2O) else np.concatenate((z, a))


def polyadd(a1: Any, a2: Any) -> Any:
    """numpy's ``polyadd``: the shorter operand joined behind zeros (a join), then an
    element-wise sum."""
    if not _dist1(a1, a2):
        return _fb("polyadd", (a1, a2))
    p, q = _padded(a1, a2)
    return elementwise(np.add, [p, q])


def polysub(a1: Any, a2: Any) -> Any:
    """numpy's ``polysub``: `polyadd`'s alignment, then an element-wise difference."""
    if not _dist1(a1, a2):
        return _fb("polysub", (a1, a2))
    p, q = _padded(a1, a2)
    return elementwise(np.subtract, [p, q])


def polyder(p: Any, m: Any = 1) -> Any:
    """numpy's ``polyder``: per order a slice times ``arange(n, 0, -1)`` (element-wise;
    the shifted view moves one element per rank boundary)."""
    if not _dist1(p):
        return _fb("polyder", (p,), {"m": m})
    m = int(m)
    if m < 0:
        raise ValueError("Order of derivative must be positive (see polyint)")
    for _ in range(m):
        n = len(p) - 1
        p = elementwise(np.multiply, [p[:-1], np.arange(n, 0, -1)])
    return p


def polyint(p: Any, m: Any = 1, k: Any = None) -> Any:
    """numpy's ``polyint``: per order an element-wise division by ``arange(n, 0, -1)``
    and the constant joined on at the end (a join)."""
    if not _dist1(p) or (isinstance(k, D2O) and not k.distributor.replicated):
        return _fb("polyint", (p,), {"m": m, "k": k})
    m = int(m)
    if m < 0:
        raise ValueError("Order of integral must be positive (see polyder)")
    kk = np.zeros(m, float) if k is None else np.atleast_1d(np.asarray(k))
    if len(kk) == 1 and m > 1:
        kk = kk[0] * np.ones(m, float)
    if len(kk) < m:
        raise ValueError("k must be a scalar or a rank-1 array of length 1 or >m.")
    for i in range(m):
        q = elementwise(np.true_divide, [p, np.arange(len(p), 0, -1)])
        p = concatenate([q, kk[i : i + 1]])
    return p


def _trimmed(a: Any) -> Any:
    """``poly1d(a).coeffs``: leading zeros trimmed (two reductions and a slice), ``[0]``
    when nothing is left."""
    if not isinstance(a, D2O):
        return np.poly1d(a).coeffs
    t = composed.trim_zeros(a, "f")
    return t if len(t) else asarray(np.zeros(1, a.dtype), dist=False, comm=a.distributor.comm)


def polymul(a1: Any, a2: Any) -> Any:
    """numpy's ``polymul``: `convolve` of the trimmed coefficients, the longer one
    distributed (numpy data: every rank takes its piece); the shorter one (the kernel) is
    held on every rank, moved there once (one allgather of its coefficients) when it is
    distributed."""
    if not _dist1(a1, a2):
        return _fb("polymul", (a1, a2))
    comm = next(v for v in (a1, a2) if isinstance(v, D2O)).distributor.comm
    p, q = _trimmed(a1), _trimmed(a2)
    if len(q) > len(p):
        p, q = q, p
    if not isinstance(p, D2O):  # the longer one held as numpy data: each rank its piece
        p = asarray(p, comm=comm)
    if isinstance(q, D2O) and not q.distributor.replicated:
        q = q.copy(distribution_strategy="not")
    return composed.convolve(p, q)


def polyval(p: Any, x: Any) -> Any:
    """numpy's ``polyval``: element-wise in ``x`` (Horner on the pieces) with coefficients
    held on every rank.  Distributed 1-d coefficients and a numpy ``x``: every rank
    evaluates its run of coefficients and scales it by ``x`` to the power of the number of
    coefficients after it; one ``Allreduce`` of ``x``'s shape sums them.  Distributed
    coefficients and a distributed ``x``: the coefficients are replicated first (one
    allgather of them)."""
    if isinstance(p, D2O) and not p.distributor.replicated and p.ndim == 1:
        if isinstance(x, (D2O, np.poly1d)):
            return _polyval_ew(p.copy(distribution_strategy="not").get_local_data(), x)
        comm = p.distributor.comm
        n = p.shape[0]
        rows = _rows([p], n, comm)
        pl = _mine(p, rows)
        lo, hi = rows.span()
        xa = np.asanyarray(x)
        dt = np.result_type(xa.dtype, p.dtype) if n else xa.dtype
        with agreed(comm):
            part = (np.polyval(pl, xa) * xa ** (n - hi)).astype(dt, copy=False)
        return comm.Allreduce(np.ascontiguousarray(part), "sum").reshape(part.shape)[()]
    if isinstance(p, D2O):
        if p.ndim != 1:
            return _fb("polyval", (p, x))
        p = p.get_local_data()  # replicated: whole on every rank
    return _polyval_ew(p, x) if isinstance(x, D2O) else np.polyval(p, x)


#: ``polyval`` element-wise in ``x`` (coefficients whole on every rank)
_polyval_ew = ew(np.polyval, ("x",))


def fill(table: dict) -> None:
    """Enter the polynomials."""
    for n in ("poly", "roots", "polydiv"):
        table[n] = ("fallback", None, "coefficient arrays are small by nature (eigenvalues, "
                    "a sequential recurrence)")  # fmt: skip
    table["polyfit"] = ("linalg", polyfit, "Vandermonde rows stay with the points; TSQR")
    note = "1-d coefficients; poly1d operands: fallback"
    for f in (polyadd, polysub, polyder, polyint):
        table[f.__name__] = ("composed", f, note)
    table["polymul"] = ("composed", polymul, note + "; the shorter factor is replicated")
    table["polyval"] = ("local", polyval, "distributed coefficients: a reduction")
