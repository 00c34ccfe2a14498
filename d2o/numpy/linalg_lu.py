"""``d2o.numpy.linalg``'s ``solve``, ``inv``, ``det`` and ``slogdet``: distributed LU with
partial pivoting on a 2-D block-cyclic mesh (`d2o.ops.lu`).

A 2-d distributed matrix is factored where it lies when it is on such a mesh, else after
one redistribution to the default mesh (`d2o.ops.lu.default_layout`); bytes moved are
``O(n^2 sqrt(P))`` in all (`d2o.ops.lu.model_bytes`), memory ``O(n^2 / P)`` per rank.
Results of ``solve``/``inv`` stay on that mesh; ``det``/``slogdet`` are numpy scalars,
the same on every rank.  Stacked (``ndim > 2``) operands, numpy-only operands, empty
matrices and single-process runs of arrays not on a mesh take the bounded fallback
(numpy's LAPACK on the gathered operands).
"""

from __future__ import annotations

from collections import namedtuple
from typing import Any

import numpy as np

from ..array.base import Array as D2O
from ..array.walk import find_arrays
from ..core.registry import operation
from ..layouts.mesh import is_mesh
from ..ops import lu as _lu
from ..ops.axislocal import fallback

__all__ = ["solve", "inv", "det", "slogdet", "SlogdetResult"]

SlogdetResult = namedtuple("SlogdetResult", "sign logabsdet")

_LinAlgError = np.linalg.LinAlgError
_TYPES = (np.dtype("f4"), np.dtype("f8"), np.dtype("c8"), np.dtype("c16"))


def _common(*xs: Any) -> np.dtype:
    """numpy.linalg's computation type: integers and booleans as float64."""
    ts = []
    for x in xs:
        t = np.asarray(x).dtype if not isinstance(x, D2O) else x.dtype
        ts.append(t if t.kind in "fc" else np.dtype("f8"))
    t = np.result_type(*ts)
    if t not in _TYPES:
        raise TypeError(f"array type {t} is unsupported in linalg")
    return t


def _square(a: Any) -> None:
    """numpy's checks of a (stacked) square matrix: LinAlgError on every rank (the shape is
    global, so every rank raises alike)."""
    if a.ndim < 2:
        raise _LinAlgError(
            f"{a.ndim}-dimensional array given. Array must be at least two-dimensional"
        )
    if a.shape[-1] != a.shape[-2]:
        raise _LinAlgError("Last 2 dimensions of the array must be square")


def _native(a: Any) -> bool:
    """A 2-d distributed matrix the distributed LU takes (see the module notes)."""
    if not isinstance(a, D2O) or a.ndim != 2 or a.shape[0] == 0:
        return False
    d = a.distributor
    return d.comm.size > 1 or is_mesh(d)


@operation("linalg.solve", mesh=True)
def solve(a: Any, b: Any, *, overwrite_a: bool = False, overwrite_b: bool = False) -> Any:
    """numpy's ``linalg.solve``: LU of ``[a | b]`` on the mesh (``b``: ``(n,)`` or
    ``(n, k)``), then back substitution; communicates ``O(n (n + k) sqrt(P))`` bytes.
    ``LinAlgError`` on every rank for a singular ``a``.

    d2o's extension, scipy.linalg.solve's convention: ``overwrite_a=True`` lets the LU
    run in ``a``'s own memory where ``a`` is on its LU mesh already (of the computation
    dtype): no working copy, ``a`` holds L and U afterwards (its values are undefined for
    the caller); elsewhere it changes nothing.  ``overwrite_b`` is accepted alike (the
    right-hand sides are always copied: they are ``k`` columns)."""
    if not find_arrays((a, b)):
        return np.linalg.solve(a, b)
    _square(a)
    t = _common(a, b)
    bn = np.ndim(b)
    if not _native(a) or bn > 2:
        return fallback("linalg.solve", np.linalg.solve, (a, b), {})
    del overwrite_b  # a permission only: b's copy on the mesh is small
    n = a.shape[0]
    if bn == 0:
        raise ValueError(
            "solve: Input operand 1 does not have enough dimensions (has 0, gufunc core "
            "with signature (m,m),(m,n)->(m,n) requires 2)"
        )
    if np.shape(b)[0] != n:
        sig = "(m,m),(m)->(m)" if bn == 1 else "(m,m),(m,n)->(m,n)"
        raise ValueError(
            f"solve: Input operand 1 has a mismatch in its core dimension 0, with gufunc "
            f"signature {sig} (size {np.shape(b)[0]} is different from {n})"
        )
    return _lu.solve(a, b, t, _LinAlgError, overwrite_a=bool(overwrite_a))


@operation("linalg.inv", mesh=True)
def inv(a: Any) -> Any:
    """numpy's ``linalg.inv``: `solve` with the identity (built in place); ``LinAlgError``
    on every rank for a singular ``a``."""
    if not find_arrays((a,)):
        return np.linalg.inv(a)
    _square(a)
    t = _common(a)
    if not _native(a):
        return fallback("linalg.inv", np.linalg.inv, (a,), {})
    return _lu.inverse(a, t, _LinAlgError)


@operation("linalg.slogdet", mesh=True)
def slogdet(a: Any) -> Any:
    """numpy's ``linalg.slogdet``: from U's diagonal and the pivots, which every rank holds
    after the LU (no further communication); ``(0, -inf)`` for a singular ``a``."""
    if not find_arrays((a,)):
        return np.linalg.slogdet(a)
    _square(a)
    t = _common(a)
    if not _native(a):
        r = fallback("linalg.slogdet", np.linalg.slogdet, (a,), {})
        return SlogdetResult(*r)
    sign, logdet = _lu.sign_logdet(_lu.lu_factor(a, t))
    real = np.dtype(t.char.lower())
    return SlogdetResult(t.type(sign), real.type(logdet))


@operation("linalg.det", mesh=True)
def det(a: Any) -> Any:
    """numpy's ``linalg.det``: ``sign * exp(logabsdet)`` of `slogdet`, as numpy computes it;
    0 for a singular ``a``."""
    if not find_arrays((a,)):
        return np.linalg.det(a)
    _square(a)
    t = _common(a)
    if not _native(a):
        return fallback("linalg.det", np.linalg.det, (a,), {})
    sign, logdet = _lu.sign_logdet(_lu.lu_factor(a, t))
    with np.errstate(all="ignore"):
        return t.type(sign * np.exp(logdet))
