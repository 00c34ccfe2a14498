"""``import d2o.numpy as np``: numpy's namespace on distributed arrays.

Every public numpy function is here.  With distributed operands it runs the class of
algorithm `d2o.numpy.table` gives it (element-wise, reduction, axis-local, view,
joining, creation, linear algebra), or the bounded fallback (operands up to the
``fallback_limit`` option gathered, recorded in the trace; NotImplementedError above).
With only numpy operands it is numpy's own function.  Creation functions take ``dist=``
(see `d2o.ops.creation`): without it arrays are distributed along their first axis.
Ufuncs, dtypes and constants are numpy's own objects (ufuncs dispatch through
``__array_ufunc__``).  See docs/coverage.md for every name's class.
"""

from __future__ import annotations

import inspect as _inspect
from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any as _Any

import numpy as _np

from ..array.walk import any_array as _any_array
from ..core import registry as _registry
from .table import TABLE as _TABLE
from .table import implementation as _implementation

if _TYPE_CHECKING:  # `_install` fills the namespace with numpy's names at import

    def __getattr__(name: str) -> _Any: ...


__array_api_version__ = "2023.12"
#: the array API's inspection namespace: numpy's (same dtypes, one "cpu" device)
__array_namespace_info__ = _np.__array_namespace_info__


#: numpy functions that handle process meshes themselves (views on every layout, the
#: matrix products, the reductions: partials combined inside the mesh axis's
#: sub-communicator, `d2o.ops.reductions`; ``roll``/``diff``: boundary slices only); the
#: others run on slab equivalents of mesh operands.
#: Functions whose signature is d2o's own, numpy's extended by the array API's
#: parameters (``sort``/``argsort``'s ``descending``; ``clip``'s ``min``/``max``).
_API_SIGNATURES = {"sort", "argsort", "clip"}

_MESH_NATIVE = {"dot", "flip", "fliplr", "flipud", "imag", "matmul", "matrix_transpose",
                "moveaxis", "permute_dims", "real", "rollaxis", "rot90", "swapaxes",
                "transpose", "where", "clip", "astype", "insert", "delete", "place",
                "put_along_axis", "fill_diagonal", "array2string",
                "sum", "prod", "max", "min", "amax", "amin", "mean", "var", "std", "all",
                "any", "argmax", "argmin", "nansum", "nanmax", "nanmin", "nanprod", "nanmean",
                "nanvar", "nanstd", "nanargmax", "nanargmin", "count_nonzero", "ptp",
                "cumsum", "cumprod", "roll", "diff", "gradient", "average", "allclose",
                "array_equal", "array_equiv"}  # fmt: skip


#: the registry's kind (`d2o.core.registry.KINDS`) of each class of d2o.numpy's table
_KINDS = {"ufunc": "elementwise", "local": "elementwise", "reduce": "reduction",
          "create": "creation", "axis": "axis-local", "join": "joining", "index": "indexing",
          "view": "view", "sort": "sort", "linalg": "linalg", "meta": "meta",
          "composed": "composed", "fallback": "fallback"}  # fmt: skip


def _dispatcher(name: str):
    """``d2o.numpy.<name>``, declared an operation (`d2o.core.registry`)."""
    kind, impl = _implementation(name)
    np_func = getattr(_np, name)
    key = ("f", __name__, name)
    facts = {"mesh": name in _MESH_NATIVE, "kind": _KINDS.get(kind, "other")}
    if kind in ("create", "ufunc", "meta"):
        t = _registry.declare(impl, "numpy." + name, key, **facts)
        t.__name__ = t.__qualname__ = name
        return t

    def plain(*args, **kwargs):
        if not _any_array(args, kwargs):
            return np_func(*args, **kwargs)
        return impl(*args, **kwargs)

    op = _registry.declare_op(plain, "numpy." + name, key, **facts)
    on, run = op.on, _registry.RUN

    def f(*args, **kwargs):
        if on[0]:
            return run[0](op, args, kwargs)
        if not _any_array(args, kwargs):
            return np_func(*args, **kwargs)
        return impl(*args, **kwargs)

    for g in (f, plain):
        g.__name__ = name
        g.__qualname__ = name
        g.__doc__ = f"numpy's ``{name}`` on distributed arrays ({kind})."
        g.__wrapped__ = np_func
        if name in _API_SIGNATURES:  # numpy's signature, extended: d2o's own
            g.__signature__ = _inspect.signature(impl)
        # controller mode runs calls on numpy data alone on rank 0 (`d2o.runtime.controller`)
        g.__d2o_numpy_only__ = _numpy_only
    f.__d2o_operation__ = op
    return f


def _numpy_only(args: tuple, kwargs: dict) -> bool:
    return not _any_array(args, kwargs)


def _install() -> list:
    g = globals()
    names = []
    for n in dir(_np):
        if n.startswith("_") or n in ("linalg", "fft", "random", "testing"):
            continue
        obj = getattr(_np, n)
        plain_ufunc = isinstance(obj, _np.ufunc) and _TABLE.get(n, ("ufunc",))[0] == "ufunc"
        if plain_ufunc or isinstance(obj, type) or not callable(obj):
            g[n] = obj  # ufuncs, dtypes and classes, constants: numpy's own objects
            continue
        g[n] = _dispatcher(n)
        names.append(n)
    return names


_FUNCTIONS = _install()
__all__ = [n for n in dir() if not n.startswith("_")]


from . import fft, linalg, random  # noqa: E402


class finfo:  # noqa: N801 - numpy's name
    """numpy's ``finfo`` of a dtype or a (distributed) array, with the array API's Python
    float attributes (``eps``, ``max``, ``min``, ``smallest_normal``, ``resolution``)."""

    eps: float
    max: float
    min: float
    smallest_normal: float
    resolution: float
    tiny: float
    epsneg: float

    def __init__(self, type) -> None:  # noqa: A002
        info = _np.finfo(type.dtype if hasattr(type, "distributor") else type)
        self.bits, self.dtype = info.bits, info.dtype
        for k in ("eps", "max", "min", "smallest_normal", "resolution", "tiny", "epsneg"):
            setattr(self, k, float(getattr(info, k)))
        self.precision, self.maxexp, self.minexp = info.precision, info.maxexp, info.minexp

    def __repr__(self) -> str:
        return f"finfo(dtype={self.dtype}, eps={self.eps}, max={self.max})"


def iinfo(type):  # noqa: A002
    """numpy's ``iinfo`` of a dtype or a (distributed) array."""
    return _np.iinfo(type.dtype if hasattr(type, "distributor") else type)


__all__ += ["fft", "linalg", "random"]
