"""``d2o.numpy.linalg``'s ``cholesky``, ``eigh`` and ``eigvalsh``, distributed.

- ``cholesky``: right-looking blocked Cholesky on a 2-D (block-cyclic) process mesh
  (`d2o.ops.cholesky`); a matrix in another layout is redistributed once to the default
  mesh, and the factor comes back in the mesh layout it was computed on.
- ``eigh``/``eigvalsh``: parallel two-sided block Jacobi over column slabs
  (`d2o.ops.eigh`, which says why); eigenvalues ascending on every rank (replicated),
  eigenvectors in column slabs.  Eigenvectors equal numpy's up to the sign (phase) of
  each column, where eigenvalues are distinct.

numpy's semantics: a non-square or 1-d operand raises ``LinAlgError``, a matrix that is
not positive definite raises ``LinAlgError`` on every rank (agreed, no hang), integers
compute in float64.  The bounded fallback (gathered operands, numpy's own result) takes
stacked (3-d and more) inputs, replicated ones (no communication), empty matrices,
matrices holding NaN or infinities (one agreed flag decides) and dtypes numpy.linalg
does not compute in natively (float16, longdouble).
"""

from __future__ import annotations

from collections import namedtuple
from typing import Any

import numpy as np

from ..array.base import Array as D2O
from ..core.registry import operation
from ..ops import cholesky as _chol
from ..ops import eigh as _eigh
from ..ops.axislocal import fallback
from ..ops.creation import asarray

__all__ = ["cholesky", "eigh", "eigvalsh", "EighResult"]

EighResult = namedtuple("EighResult", "eigenvalues eigenvectors")


def _square(a: D2O) -> None:
    """numpy's checks of a stack of square matrices (global facts: no communication)."""
    if a.ndim < 2:
        raise np.linalg.LinAlgError(
            f"{a.ndim}-dimensional array given. Array must be at least two-dimensional"
        )
    if a.shape[-1] != a.shape[-2]:
        raise np.linalg.LinAlgError("Last 2 dimensions of the array must be square")


def _native(a: D2O) -> np.dtype | None:
    """The working dtype when ``a`` takes the distributed path, else None (the fallback).
    Collective (one agreed flag: does any rank hold a NaN or an infinity?)."""
    dt = _chol.work_dtype(a.dtype)
    d = a.distributor
    if a.ndim != 2 or dt is None or a.shape[0] == 0 or d.replicated:
        return None
    bad = a.dtype.kind in "fc" and not bool(np.isfinite(a.data).all())
    return None if d.comm.any_flag(bad) else dt


@operation("linalg.cholesky", kind="linalg", mesh=True)
def cholesky(a: Any, /, *, upper: bool = False) -> Any:
    """numpy's ``linalg.cholesky``: blocked right-looking Cholesky on a 2-D process mesh.

    Communicates: the diagonal blocks down their mesh column, each panel along the mesh
    rows and its transpose down the mesh columns (``~ n^2 (pr + pc) / 2`` elements in
    all, `d2o.ops.cholesky.bytes_model`); one redistribution first for a matrix not on a
    2-D mesh.  The factor is in the mesh layout it was computed on.  ``LinAlgError`` on
    every rank for a matrix that is not positive definite.
    """
    if not isinstance(a, D2O):
        return np.linalg.cholesky(a, upper=upper)
    _square(a)
    dt = _native(a)
    if dt is None:
        return fallback("linalg.cholesky", np.linalg.cholesky, (a,), {"upper": upper})
    return _chol.cholesky(a, dt, upper=bool(upper))


def _uplo(uplo: Any) -> str:
    u = uplo.upper() if isinstance(uplo, str) else uplo
    if u not in ("L", "U"):
        raise ValueError("UPLO argument must be 'L' or 'U'")
    return u


@operation("linalg.eigh", kind="linalg", mesh=True)
def eigh(a: Any, UPLO: Any = "L") -> Any:
    """numpy's ``linalg.eigh`` by parallel block Jacobi over column slabs.

    Communicates: two exchanges into column and row slabs (the Hermitian matrix of the
    ``UPLO`` triangle), per Jacobi step one allgather of the rotations and point-to-point
    moves of two block columns, one tiny allreduce per sweep, and one ``Alltoallv`` of the
    eigenvectors into ascending order.  Eigenvalues replicated, eigenvectors in column
    slabs.
    """
    if not isinstance(a, D2O):
        return np.linalg.eigh(a, UPLO=UPLO)
    u = _uplo(UPLO)
    _square(a)
    dt = _native(a)
    if dt is None:
        return fallback("linalg.eigh", np.linalg.eigh, (a,), {"UPLO": u})
    w, v = _eigh.eigh(a, dt, u, vectors=True)
    return EighResult(asarray(w, dist=False, comm=a.distributor.comm), v)


@operation("linalg.eigvalsh", kind="linalg", mesh=True)
def eigvalsh(a: Any, UPLO: Any = "L") -> Any:
    """numpy's ``linalg.eigvalsh``: `eigh`'s Jacobi without accumulating eigenvectors
    (the same messages, half the block columns moved); replicated result."""
    if not isinstance(a, D2O):
        return np.linalg.eigvalsh(a, UPLO=UPLO)
    u = _uplo(UPLO)
    _square(a)
    dt = _native(a)
    if dt is None:
        return fallback("linalg.eigvalsh", np.linalg.eigvalsh, (a,), {"UPLO": u})
    w, _ = _eigh.eigh(a, dt, u, vectors=False)
    return asarray(w, dist=False, comm=a.distributor.comm)
