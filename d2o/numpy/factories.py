"""The factories `d2o.numpy`'s table builds implementations with, from numpy's own functions.

`ew` (element-wise: local on the aligned pieces), `axis_entry` (along given axes: local where
they are whole on every rank, else one exchange; ``axis=None`` takes the bounded fallback),
`meta_entry` (no array data: nothing moves), and the helpers the family modules share.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import numpy as np

try:
    from numpy.lib.array_utils import normalize_axis_index, normalize_axis_tuple
except ImportError:  # numpy < 2
    from numpy.core.multiarray import normalize_axis_index  # type: ignore[no-redef]
    from numpy.core.numeric import normalize_axis_tuple  # type: ignore[no-redef]

from ..array.base import Array as D2O
from ..core.errors import agreed
from ..ops.axislocal import axis_local, elementwise, fallback, local_elementwise
from ..ops.special import HANDLED

__all__ = [
    "normalize_axis_index",
    "normalize_axis_tuple",
    "agreed_axes",
    "ew",
    "out_axis_drop",
    "axis_entry",
    "meta_entry",
    "finish",
    "register",
    "from_handled",
    "handled",
]


def _sig(f: Callable) -> inspect.Signature:
    return inspect.signature(f)


def agreed_axes(x: D2O, axis: Any, allow_duplicate: bool = False) -> tuple:
    """``x``'s axes ``axis`` normalized; an error on any rank raised on every rank (one
    one-byte allreduce) before anything moves."""
    with agreed(x.distributor.comm):
        return normalize_axis_tuple(axis, x.ndim, allow_duplicate=allow_duplicate)


def ew(np_func: Callable, arrays: tuple = ("a",), local: bool = False) -> Callable:
    """An element-wise numpy function of the parameters ``arrays`` (broadcast together);
    ``local``: with scalars and operands of one layout it communicates nothing
    (`d2o.ops.axislocal.local_elementwise`), for functions whose errors depend on dtypes
    and data alone."""
    sig = _sig(np_func)

    def impl(*args: Any, **kwargs: Any) -> Any:
        b = sig.bind(*args, **kwargs)  # only what the caller passed: numpy's own defaults
        out = b.arguments.pop("out", None) if "out" in b.arguments else None
        names = [n for n in arrays if n in b.arguments and b.arguments[n] is not None]
        ops = [b.arguments[n] for n in names]

        def f(*pieces: Any) -> Any:
            b.arguments.update(zip(names, pieces))
            return np_func(*b.args, **b.kwargs)

        res = local_elementwise(f, ops) if local else None
        if res is None:
            res = elementwise(f, ops)
        if out is not None:
            out[...] = res
            return out
        return res

    return impl


def out_axis_drop(core: tuple, ndim: int, keepdims: bool) -> Callable:
    """Where a kept input axis lands when ``core`` axes are reduced (extra leading result
    axes, as ``percentile``'s q axes, counted from the result's rank)."""
    kept = ndim if keepdims else ndim - len(core)

    def out_axis(a: int, res_ndim: int) -> int:
        extra = res_ndim - kept
        return extra + (a if keepdims else a - sum(c < a for c in core))

    return out_axis


def axis_entry(np_func: Callable, name: str, drop: bool = False, axis_param: str = "axis",
          default: Any = "numpy") -> Callable:  # fmt: skip
    """A numpy function acting along ``axis`` (its core axes) independently elsewhere;
    ``drop``: the core axes leave the result (``median``, ``percentile``).  ``axis=None``
    (the flattened array) takes the bounded fallback."""
    sig = _sig(np_func)
    first = next(iter(sig.parameters))

    def impl(*args: Any, **kwargs: Any) -> Any:
        b = sig.bind(*args, **kwargs)
        x = b.arguments[first]
        out = b.arguments.pop("out", None)
        axis = b.arguments.get(axis_param, sig.parameters[axis_param].default)
        if not isinstance(x, D2O) or x.ndim == 0 or axis is None:
            if out is not None:
                b.arguments["out"] = out
            return fallback(name, np_func, b.args, b.kwargs)
        if axis is inspect.Parameter.empty:
            raise TypeError(f"{name}() missing required argument {axis_param!r}")
        core = agreed_axes(x, axis)
        keepdims = bool(b.arguments.get("keepdims", False))

        def f(piece: np.ndarray) -> Any:
            b.arguments[first] = piece
            return np_func(*b.args, **b.kwargs)

        oa = out_axis_drop(core, x.ndim, keepdims) if drop else None
        res = axis_local(name, f, x, core, out_axis=oa)
        if out is not None:
            out[...] = res
            return out
        return res

    return impl


def meta_entry(np_func: Callable) -> Callable:
    """numpy's own function with distributed arrays replaced by empty arrays of their dtype
    (``result_type``, ``can_cast``, ...): nothing moves."""

    def conv(v: Any) -> Any:
        if isinstance(v, D2O):  # its shape and dtype, no memory
            return np.broadcast_to(np.zeros((), dtype=v.dtype), v.shape)
        if type(v) in (list, tuple):
            return type(v)(conv(e) for e in v)
        return v

    @functools.wraps(np_func)
    def impl(*args: Any, **kwargs: Any) -> Any:
        return np_func(*conv(args), **{k: conv(v) for k, v in kwargs.items()})

    return impl


def finish(res: Any, out: Any) -> Any:
    if out is not None:
        out[...] = res
        return out
    return res


def register(table: dict, kind: str, names: str, impl: Callable | None = None,
              note: str = "") -> None:  # fmt: skip
    for n in names.split():
        table[n] = (kind, impl, note)


def from_handled(name: str) -> Callable:
    return HANDLED[getattr(np, name)]


def handled(table: dict, kind: str, names: str) -> None:
    """Enter d2o's own implementations (`d2o.ops.special.HANDLED`) of ``names`` as ``kind``."""
    for n in names.split():
        f = HANDLED.get(getattr(np, n))
        if f is not None:
            table[n] = (kind, f, "")
