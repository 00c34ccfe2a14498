"""``d2o.numpy.linalg``: the linear algebra of distributed arrays.

``norm`` (every ``ord`` and ``axis`` numpy supports: reductions of the pieces),
``matmul``/``vecdot``/``outer`` and ``trace``/``diagonal`` through d2o.numpy; every
other function takes the bounded fallback (its operands gathered up to the
``fallback_limit`` option, NotImplementedError above it) until it has a distributed
algorithm (TSQR ``qr``/``lstsq`` are next).
"""

from __future__ import annotations

from typing import Any

import numpy as _np

from .._axislocal import fallback as _fallback
from .._axislocal import find_arrays as _find_arrays
from .._d2o import distributed_data_object as _D2O


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
    from .._joining import squeeze

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
    names = ["norm"]
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


_FUNCTIONS = _install()
__all__ = list(_FUNCTIONS)
