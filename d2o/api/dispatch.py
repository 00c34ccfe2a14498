"""``__array_function__``: numpy's functions called on distributed arrays.

The functions listed in `d2o.ops.special.HANDLED` run their distributed implementation;
any other function of numpy's main namespace, ``numpy.linalg`` or ``numpy.fft`` runs
d2o.numpy's (its table, loaded on first use); everything else is a TypeError (never a
silent gather).  Without a mesh algorithm, mesh operands run on their slab equivalents.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..array.slabs import on_slabs as _on_slabs
from ..core.hooks import mesh_in_use
from ..core.registry import operation_of
from ..ops import fft as _fft
from ..ops.special import HANDLED

__all__ = ["array_function"]


def _namespace_impl(func: Callable) -> Callable | None:
    """d2o.numpy's implementation of a numpy function (main namespace, ``linalg``,
    ``fft``), None for any other function."""
    import d2o.numpy  # lazy: ``import d2o`` does not load the numpy namespace (import time)

    name = getattr(func, "__name__", "")
    for np_mod, ours in ((np, d2o.numpy), (np.linalg, d2o.numpy.linalg), (np.fft, _fft)):
        if getattr(np_mod, name, None) is func:
            return getattr(ours, name, None)
    return None


def array_function(self: Any, func: Callable, types: tuple, args: tuple, kwargs: dict) -> Any:
    impl = HANDLED.get(func)
    if impl is None:
        impl = _namespace_impl(func)
    if impl is None:
        raise TypeError(
            f"numpy.{func.__name__} is not implemented for distributed_data_object; "
            "use obj.get_full_data() to gather the array explicitly"
        )
    op = operation_of(impl)  # its plain function: __array_function__ is the operation
    if op is not None:
        impl = op.fn
    native = func in _MESH_ALGORITHM or (op is not None and op.mesh and func not in _VIEWS)
    if func in _LOCAL or native or not mesh_in_use[0]:
        return impl(*args, **kwargs)
    # no mesh algorithm: mesh operands (views: only 0-d ones) run on slab equivalents;
    # named as the funnel names d2o.numpy's functions, so that those writing into their
    # first argument (numpy.copyto, numpy.put, ...) have the result written back
    name = f"numpy.{func.__name__}"
    return _on_slabs(impl, name, args, kwargs, held_only=func in _VIEWS)


#: numpy functions that are views (they handle every layout themselves)
_VIEWS = {getattr(np, n) for n in ("transpose", "swapaxes", "moveaxis", "real", "imag",
          "rollaxis", "flip", "fliplr", "flipud", "rot90", "matrix_transpose") if hasattr(np, n)}  # fmt: skip
#: numpy functions that ask questions every layout answers locally
_LOCAL = {np.shape, np.ndim, np.size, np.shares_memory, np.may_share_memory}
#: numpy functions whose HANDLED implementation has its own mesh algorithm (`d2o.ops.linalg`);
#: the others are native where their operation says so (``Operation.mesh``)
_MESH_ALGORITHM = {np.dot}
