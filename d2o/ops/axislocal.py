"""Running numpy's own functions on the pieces: the mechanisms behind `d2o.numpy`.

* `elementwise`: broadcasting functions of several arrays (``clip``, ``isclose``,
  ``where``, ...): operands aligned to the result layout (`d2o.array.align`), numpy on the
  pieces.  `local_elementwise`, for functions whose errors depend on dtypes and data
  alone (``where``, ``clip``, ``astype``): scalars and operands of one layout, numpy on
  the pieces with no communication at all, on every layout (meshes included).
* `axis_local`: functions acting independently along their non-core axes (``sort``,
  ``diff``, ``cumsum`` along an axis, ``median`` over an axis, ...): numpy on the pieces
  when the core axes are whole on every rank; otherwise one exchange to the slabs of the
  longest other axis first.  A result of the input's shape returns to the input's
  layout; any other result keeps the slabs it was computed on.
* `fallback`: the bounded fallback of functions without a distributed algorithm yet:
  distributed operands up to the ``fallback_limit`` option are gathered explicitly
  (recorded in the trace, refused under ``gather='raise'``); above it,
  NotImplementedError naming the function and the limit.  Never an unbounded gather.

Errors of numpy's calls are agreed (one one-byte allreduce), so every rank raises.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import numpy as np

from ..array.align import SCALARS, align, result_layout
from ..array.base import Array as D2O
from ..array.base import from_local as _from_local
from ..array.slabs import as_slab
from ..array.walk import find_arrays, substitute
from ..core import config as _config
from ..core import trace as _trace
from ..core.errors import agreed, check_gather, defer
from ..layouts.distributors import Distributor, get_distributor
from ..layouts.mesh import MeshDistributor, is_mesh, moved
from ..move.redistribution import redistribute
from .creation import asarray

__all__ = [
    "elementwise", "local_elementwise", "axis_local", "fallback", "find_arrays", "wrap_result",
]  # fmt: skip


def elementwise(func: Callable, arrays: list, *args: Any, **kwargs: Any) -> Any:
    """``func(*arrays_pieces, *args, **kwargs)`` on the pieces of the broadcast result's
    layout.  Collective only where an operand must move to that layout."""
    shape = np.broadcast_shapes(*[np.shape(a) for a in arrays])
    target = result_layout(arrays, shape)
    comm = target.comm
    pieces = [align(a, target) for a in arrays]
    with agreed(comm):
        res = func(*pieces, *args, **kwargs)
    if isinstance(res, tuple):
        return tuple(_from_local(np.asarray(r), target) for r in res)
    return _from_local(np.asarray(res), target)


def local_elementwise(func: Callable, arrays: list) -> Any:
    """``func(*pieces)`` when every operand is a scalar or an array of one layout (the
    result takes that layout), None otherwise.  Local: no communication, no agreement.

    For functions whose errors depend only on dtypes and on the data (``where``, ``clip``,
    ``astype``).  An error that a call on empty pieces of the same dtypes raises too is
    one of dtypes: every rank raises it at once.  Otherwise it depends on this rank's
    data (``np.errstate``): raised at the next collective on every rank
    (`d2o.core.errors.defer`), the piece meanwhile zeros, as for the ufuncs.
    """
    d = None
    for a in arrays:
        if isinstance(a, D2O):
            if d is None:
                d = a.distributor
            elif a.distributor is not d:
                return None
        elif not isinstance(a, SCALARS):
            return None
    if d is None:
        return None
    pieces = [a.data if isinstance(a, D2O) else a for a in arrays]
    try:
        res = np.asarray(func(*pieces))
    except Exception as exc:
        if d.replicated or d.comm.size == 1:
            raise
        empty = [p[(slice(0, 0),) * p.ndim] if isinstance(p, np.ndarray) and p.ndim else p
                 for p in pieces]  # fmt: skip
        res = np.asarray(func(*empty))  # raises where the error is one of dtypes
        defer(d.comm, exc)
        res = np.zeros(d.local_shape, dtype=res.dtype)
    if res.shape != d.local_shape:
        return None
    return _from_local(res, d)


def whole_along(x: D2O, core: tuple) -> tuple[np.ndarray, Distributor]:
    """``x``'s piece on a layout where the axes ``core`` are whole on every rank: its
    own when it is one, else the 'equal' slabs of the longest other axis (one exchange).
    NotImplementedError where every axis is core and ``x`` is above the fallback limit."""
    d = x.distributor
    if d.replicated or d.comm.size == 1 or not set(d.split_axes()) & set(core):
        return x.data, d
    free = [a for a in range(x.ndim) if a not in core]
    if not free:
        raise NotImplementedError  # the caller's fallback decides
    ax = max(free, key=lambda a: x.shape[a])
    target = get_distributor("equal", x.shape, d.comm, ax)
    return redistribute(x.data, d, target), target


def axis_local(
    name: str,
    func: Callable,
    x: D2O,
    core: tuple,
    args: tuple = (),
    kwargs: dict | None = None,
    out_axis: Callable | None = None,
) -> Any:
    """``func(piece, *args, **kwargs)`` where ``func`` acts independently along the axes
    not in ``core`` (numpy's function with its axis arguments).

    ``out_axis(a, ndim)`` gives the result axis that input axis ``a`` (not core)
    becomes in a result of ``ndim`` dimensions (default: the same axis).  Collective: at most one exchange in, and one back for a
    result of the input's shape; the bounded fallback when every axis is core.
    """
    kwargs = kwargs or {}
    core = tuple(sorted({a % x.ndim for a in core})) if x.ndim else ()
    if is_mesh(x.distributor):
        if not set(x.distributor.split_axes()) & set(core):
            try_mesh = True
        else:
            x, try_mesh = as_slab(x), False
    else:
        try_mesh = False
    d0 = x.distributor
    try:
        data, d = whole_along(x, core)
    except NotImplementedError:
        return fallback(name, func, (x,) + tuple(args), kwargs)
    comm = d.comm
    with agreed(comm):
        if data.size == 0 and x.size and not d.replicated:
            # an empty piece: learn the result's shape from one zero row
            # (on a mesh: the split axis this rank holds none of)
            pa = d.axis if d.axis is not None else data.shape.index(0)
            probe_shape = list(data.shape)
            probe_shape[pa] = 1
            res = func(np.zeros(probe_shape, dtype=data.dtype), *args, **kwargs)
            res = np.asarray(res)
            o = pa if out_axis is None else out_axis(pa, res.ndim)
            res = res[(slice(None),) * o + (slice(0, 0),)]
        else:
            res = np.asarray(func(data, *args, **kwargs))
    if d.replicated or res.ndim == 0:
        return _from_local(res, get_distributor("not", res.shape, comm))
    if comm.size == 1 and not try_mesh:  # one process: keep the array's kind of layout
        if res.shape == x.shape:
            return _from_local(res, d0)
        o = d.axis if out_axis is None else out_axis(d.axis, res.ndim)
        o = o if d.axis not in core and 0 <= o < res.ndim else 0
        return _from_local(res, get_distributor("equal", res.shape, comm, o))
    if try_mesh:
        if res.shape == data.shape:
            return _from_local(res, d)
        if (
            out_axis is None
            and res.ndim == data.ndim
            and all(res.shape[a] == data.shape[a] for a in range(res.ndim) if a not in core)
        ):  # only the whole (core) axes changed length: the mesh's pieces of the new shape
            gshape = tuple(res.shape[a] if a in core else n for a, n in enumerate(x.shape))
            return _from_local(res, moved(cast(MeshDistributor, d), gshape, 0))
        x = as_slab(x)  # a mesh result of another shape: on the slabs instead
        return axis_local(name, func, x, core, args, kwargs, out_axis)
    ax = d.axis
    o = ax if out_axis is None else out_axis(ax, res.ndim)
    shape = list(res.shape)
    shape[o] = x.shape[ax]
    out_d = d.slabs_like(tuple(shape), o)  # these pieces, under their own rule's label
    if tuple(shape) == x.shape and out_d is not d0 and o == ax and not is_mesh(d0):
        return _from_local(redistribute(res, out_d, d0), d0)
    return _from_local(res, out_d)


def fallback(name: str, func: Callable, args: tuple, kwargs: dict, inplace: bool = False) -> Any:
    """The bounded fallback: ``func`` on gathered operands (see the module notes);
    ``inplace``: ``func`` writes into its first argument, which takes the result."""
    arrays = find_arrays((args, kwargs))
    if not arrays:
        return func(*args, **kwargs)
    comm = arrays[0].distributor.comm
    # replicated operands are whole on every rank already: only the others are gathered
    total = sum(a.nbytes for a in arrays if not a.distributor.replicated)
    if comm.size == 1 or total == 0:
        return _local_fallback(func, args, kwargs, inplace, arrays[0])
    limit = _config.get_option("fallback_limit")
    if total > limit:
        raise NotImplementedError(
            f"d2o.numpy.{name} has no distributed algorithm yet, and its distributed "
            f"operands ({total} bytes) exceed the fallback limit of {limit} bytes; raise "
            "it with d2o.options(fallback_limit=...) to gather them, or use another function"
        )
    check_gather(comm, f"the operands of {name} (bounded fallback, {total} bytes)")
    rec = _trace.current[0]
    if rec is not None:
        rec.fallback = name
    return _local_fallback(func, args, kwargs, inplace, arrays[0])


def _local_fallback(func: Callable, args: tuple, kwargs: dict, inplace: bool, like: D2O) -> Any:
    """``func`` on the operands gathered whole (each rank calls ``get_full_data``)."""
    arrays = find_arrays((args, kwargs))
    out = kwargs.get("out")
    full = {id(a): a.get_full_data() for a in arrays}
    res = func(*substitute(args, full), **substitute(kwargs, full))
    if inplace and isinstance(args[0], D2O):
        args[0][...] = full[id(args[0])]  # numpy wrote into the gathered copy: cut it back
        return res
    if isinstance(out, D2O):
        out[...] = full[id(out)]  # numpy wrote into the gathered copy: back into the pieces
        return out
    return wrap_result(res, like)


def wrap_result(res: Any, like: D2O) -> Any:
    """A result computed identically on every rank, as distributed arrays: ``like``'s
    layout where the shape is ``like``'s, else the default layout.  Local."""
    if isinstance(res, np.ndarray) and res.ndim:
        return asarray(res, dist=like if res.shape == like.shape else None, comm=like.comm)
    if isinstance(res, (tuple, list)):
        items = [wrap_result(r, like) for r in res]
        return type(res)(*items) if hasattr(res, "_fields") else type(res)(items)
    return res
