"""``d2o.numpy.linalg``: the linear algebra of distributed arrays.

``norm`` (every ``ord`` and ``axis`` numpy supports: reductions of the pieces),
``matmul``/``vecdot``/``outer`` and ``trace``/``diagonal`` through d2o.numpy; ``qr`` and
``lstsq`` of tall matrices split along their rows (TSQR); ``solve``, ``inv``, ``det`` and
``slogdet`` (``d2o.numpy.linalg_lu``: LU with partial pivoting on block-cyclic meshes);
``cholesky``, ``eigh`` and ``eigvalsh`` (``d2o.numpy.linalg_sym``: meshes, block Jacobi);
every other function takes the bounded fallback (its operands gathered up to the
``fallback_limit`` option, NotImplementedError above it) until it has a distributed
algorithm.
"""

from __future__ import annotations

from collections import namedtuple as _namedtuple
from typing import TYPE_CHECKING, Any

import numpy as _np

from ..array.align import align
from ..array.base import Array as _D2O
from ..array.base import from_local as _from_local
from ..array.walk import find_arrays as _find_arrays
from ..core.errors import agreed
from ..core.registry import operation
from ..ops.axislocal import fallback as _fallback
from ..ops.creation import asarray
from ..ops.joining import squeeze
from .linalg_lu import SlogdetResult, det, inv, slogdet, solve  # noqa: F401
from .linalg_sym import cholesky, eigh, eigvalsh  # noqa: F401 - distributed, not fallbacks

QRResult = _namedtuple("QRResult", "Q R")


@operation(traced=False)
def norm(x: Any, ord: Any = None, axis: Any = None, keepdims: bool = False) -> Any:
    """numpy's ``linalg.norm``: vector norms are reductions of the pieces; matrix norms
    ``'fro'``, ``'nuc'`` aside, 1, -1, inf and -inf are sums then max/min; 2, -2 and
    ``'nuc'`` need singular values (the bounded fallback)."""
    if not isinstance(x, _D2O):
        return _np.linalg.norm(x, ord, axis, keepdims)
    if not _np.issubdtype(x.dtype, _np.inexact):
        x = x.astype(float)
    nd = x.ndim
    if axis is None:
        if ord is None or (ord in ("f", "fro") and nd == 2) or (ord == 2 and nd == 1):
            r = _np.sqrt(_sq(x).sum())
            return _keep(r, nd, keepdims)
        if nd == 1:
            axis = 0
        elif nd == 2:
            axis = (0, 1)
        else:
            raise ValueError("Improper number of dimensions to norm.")
    axes = (axis,) if isinstance(axis, (int, _np.integer)) else tuple(axis)
    axes = tuple(a % nd for a in axes)
    if len(axes) == 1:
        return _vector_norm(x, ord, axes[0], keepdims)
    if len(axes) != 2 or axes[0] == axes[1]:
        raise ValueError("Improper number of dimensions to norm." if len(axes) != 2
                         else "Duplicate axes given.")  # fmt: skip
    r, c = axes
    a = abs(x)
    if ord in (None, "fro", "f"):
        res = _np.sqrt(_sq(x).sum(axis=axes, keepdims=keepdims))
    elif ord in (1, -1):
        s = a.sum(axis=r, keepdims=True)
        res = s.max(axis=axes, keepdims=True) if ord == 1 else s.min(axis=axes, keepdims=True)
        res = res if keepdims else _squeeze(res, axes)
    elif ord in (_np.inf, -_np.inf):
        s = a.sum(axis=c, keepdims=True)
        res = s.max(axis=axes, keepdims=True) if ord > 0 else s.min(axis=axes, keepdims=True)
        res = res if keepdims else _squeeze(res, axes)
    elif ord in (2, -2, "nuc"):
        return _fallback(
            "linalg.norm", _np.linalg.norm, (x,), {"ord": ord, "axis": axis, "keepdims": keepdims}
        )
    else:
        raise ValueError("Invalid norm order for matrices.")
    return res


def _sq(x: _D2O) -> _D2O:
    return (x * x.conjugate()).real if x.dtype.kind == "c" else x * x


def _squeeze(res: Any, axes: tuple) -> Any:
    if not isinstance(res, _D2O):
        return _np.squeeze(res, axis=axes)

    return squeeze(res, axes).copy()


def _keep(r: Any, nd: int, keepdims: bool) -> Any:
    return _np.reshape(r, (1,) * nd) if keepdims else r


def _vector_norm(x: _D2O, ord: Any, axis: int, keepdims: bool) -> Any:
    a = abs(x)
    if ord is None or ord == 2:
        return _np.sqrt(_sq(x).sum(axis=axis, keepdims=keepdims))
    if ord == _np.inf:
        return a.max(axis=axis, keepdims=keepdims)
    if ord == -_np.inf:
        return a.min(axis=axis, keepdims=keepdims)
    if ord == 0:
        return (x != 0).sum(axis=axis, keepdims=keepdims, dtype=float)
    if ord == 1:
        return a.sum(axis=axis, keepdims=keepdims)
    if isinstance(ord, str):
        raise ValueError(f"Invalid norm order '{ord}' for vectors")
    return (a**ord).sum(axis=axis, keepdims=keepdims) ** (1.0 / ord)


if TYPE_CHECKING:  # `_install` adds numpy.linalg's other names at import

    def __getattr__(name: str) -> Any: ...


def _fallback_for(name: str):
    import functools

    np_func = getattr(_np.linalg, name)

    @functools.wraps(np_func)
    def f(*args: Any, **kwargs: Any) -> Any:
        if not _find_arrays((args, kwargs)):
            return np_func(*args, **kwargs)
        return _fallback(f"linalg.{name}", np_func, args, kwargs)

    f.__doc__ = f"numpy's ``linalg.{name}`` (the bounded fallback)."
    return f


def _install() -> list:
    g = globals()
    names = [
        "norm",
        "qr",
        "lstsq",
        "solve",
        "inv",
        "det",
        "slogdet",
        "cholesky",
        "eigh",
        "eigvalsh",
    ]
    for n in dir(_np.linalg):
        if n.startswith("_") or n in g:
            continue
        obj = getattr(_np.linalg, n)
        if callable(obj) and not isinstance(obj, type):
            g[n] = _fallback_for(n)
            names.append(n)
        else:
            g[n] = obj
    return names


def _tall(a: Any) -> bool:
    """A distributed 2-d array split along its rows (the TSQR case)."""
    if not isinstance(a, _D2O) or a.ndim != 2:
        return False
    d = a.distributor
    return not d.replicated and d.axis == 0 and d.comm.size > 1


@operation(traced=False)
def qr(a: Any, mode: str = "reduced") -> Any:
    """numpy's ``linalg.qr``; for a tall matrix split along its rows, TSQR: a local QR of
    every piece, the small R factors gathered (n x n per rank), one QR of their stack on
    every rank, and Q's piece as the local Q times its block.  R is replicated, Q keeps
    the row layout.  Column signs may differ from numpy's (LAPACK fixes none either)."""
    if mode not in ("reduced", "r", "complete", "raw"):
        raise ValueError(f"Unrecognized mode '{mode}'")
    if not _tall(a) or mode not in ("reduced", "r"):
        return _fallback("linalg.qr", _np.linalg.qr, (a,), {"mode": mode})

    d = a.distributor
    comm = d.comm
    x = a if a.dtype.kind in "fc" else a.astype(float)
    with agreed(comm):
        q1, r1 = _np.linalg.qr(x.data, mode="reduced")
    rs = comm.allgather(r1)
    q2, r = _np.linalg.qr(_np.vstack(rs), mode="reduced")
    rr = asarray(r, dist=False, comm=comm)
    if mode == "r":
        return rr
    off = sum(m.shape[0] for m in rs[: comm.rank])
    piece = q1 @ q2[off : off + r1.shape[0]]
    q = _from_local(piece, d.slabs_like((a.shape[0], piece.shape[1]), 0))
    return QRResult(q, rr)


@operation(traced=False)
def lstsq(a: Any, b: Any, rcond: Any = None) -> Any:
    """numpy's ``linalg.lstsq``; for a tall full-rank matrix split along its rows, through
    TSQR: x solves R x = Q^H b (one sum of n numbers per column), the singular values are
    R's; residuals are sums of squares of ``b - a @ x``.  Rank-deficient or wide systems
    take the bounded fallback."""
    if not _tall(a) or a.shape[0] < a.shape[1] or _np.ndim(b) > 2:
        return _fallback("linalg.lstsq", _np.linalg.lstsq, (a, b), {"rcond": rcond})

    d = a.distributor
    comm = d.comm
    m, n = a.shape
    q, r = qr(a)
    rl = r.get_local_data(copy=False)
    s = _np.linalg.svd(rl, compute_uv=False)
    tol = (_np.finfo(s.dtype).eps * max(m, n) if rcond is None else rcond) * (s[0] if s.size else 0)
    rank = int((s > tol).sum())
    if rank < n:
        return _fallback("linalg.lstsq", _np.linalg.lstsq, (a, b), {"rcond": rcond})
    bl = align(b, q.distributor if _np.ndim(b) == 2 else d.slabs_like((m,), 0))
    with agreed(comm):
        qtb = q.get_local_data(copy=False).conj().T @ bl
    qtb = comm.Allreduce(_np.ascontiguousarray(qtb), "sum")
    x = _np.linalg.solve(rl, qtb)
    xd = asarray(x, dist=False, comm=comm)
    if m > n:
        resid_piece = bl - a.get_local_data(copy=False) @ x
        res = comm.Allreduce(_np.atleast_1d((abs(resid_piece) ** 2).sum(axis=0)), "sum")
        res = res.astype(s.dtype)
    else:
        res = _np.empty(0, dtype=s.dtype)
    return xd, asarray(res, dist=False, comm=comm), rank, s


_FUNCTIONS = _install()
__all__ = [*_FUNCTIONS, "QRResult", "SlogdetResult"]
