"""Special methods: bincount, unique, where/nonzero, vdot; numpy function dispatch.

``__array_function__`` routes the numpy functions listed in `HANDLED` to
their distributed implementations (``np.sum(obj)``, ``np.bincount(obj)``,
``np.where(obj > 0)``, ...).  Any other numpy function raises TypeError
instead of silently gathering the array: call ``obj.get_full_data()`` (an
explicit gather) when the whole array is really wanted on every rank.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..core.registry import operation

try:
    from numpy.lib.array_utils import normalize_axis_tuple
except ImportError:  # numpy < 2
    from numpy.core.numeric import normalize_axis_tuple

from ..array.base import Array as D2O
from ..array.base import from_local as _from_local
from ..array.slabs import as_slab
from ..core.errors import agree, agreed
from ..layouts.distributors import get_distributor, slab_distributor
from ..layouts.mesh import is_mesh
from .axislocal import local_elementwise
from .linalg import dot
from .reductions import agreed_max, agreed_total, combine_partials, ravel
from .sorting import unique as sorted_unique
from .ufuncs import align, result_layout

__all__ = ["bincount", "unique", "where", "nonzero", "vdot"]


@operation(mesh=True)
def bincount(x: D2O, weights: Any = None, minlength: int = 0) -> D2O:
    """Collective: numpy's ``bincount`` of a 1-d non-negative integer array.

    Each rank counts its piece in one numpy call (on a mesh, one rank of each set of
    replicas); then one 96-byte Allreduce agrees on errors and the result length
    (`d2o.ops.reductions.agreed_max`), and one combination of the counts (``max(x)+1``
    elements) follows.  The result is replicated ('not').
    """
    d = x.distributor
    if x.ndim != 1:  # global shapes: every rank raises alike
        raise ValueError("object too deep for desired array")
    if weights is not None and np.shape(weights) != x.shape:
        raise ValueError("The weights and list don't have the same length.")
    w = None if weights is None else align(weights, d)
    error, counts = None, None
    data = x.data
    if is_mesh(d) and d.source(d.comm.rank) is None:  # a replica: another rank counts it
        data, w = data[:0], None if w is None else w[:0]
    try:  # numpy's own errors: negative values, non-integer dtypes, negative minlength
        counts = np.bincount(data, weights=w, minlength=minlength)
    except Exception as exc:
        error = exc
    if d.replicated or d.comm.size == 1:
        if error is not None:
            raise error
        return _from_local(counts, get_distributor("not", counts.shape, d.comm))
    n = agreed_max(d.comm, error, len(counts) if error is None else 0)
    if w is not None and x.size:  # numpy counts an empty input as int even with weights
        counts = counts.astype(np.float64, copy=False)
    if len(counts) < n:
        counts = np.concatenate((counts, np.zeros(n - len(counts), counts.dtype)))
    total = combine_partials(counts, np.add, d)
    return _from_local(total, get_distributor("not", total.shape, d.comm))


@operation()
def unique(x: D2O, *args: Any, **kwargs: Any) -> Any:
    """Collective: numpy's ``unique`` through the distributed sort (`d2o.ops.sorting.unique`):
    the sorted unique values, distributed as the runs start; no gather."""
    return sorted_unique(x, *args, **kwargs)


@operation()
def nonzero(x: D2O) -> tuple:
    """Collective: a tuple of 1-d index arrays (numpy's C order), distributed by rank.

    Local when the array is distributed along axis 0 (or replicated);
    otherwise one redistribution to axis 0 first.  Each rank holds the
    indices of its own nonzero elements ('freeform').
    """
    d = x.distributor
    if x.ndim == 0:
        raise ValueError("Calling nonzero on 0d arrays is not allowed. Use np.atleast_1d")
    if not d.replicated and d.axis != 0 and d.comm.size > 1:
        x = x.copy(distribution_strategy="equal", axis=0)
        d = x.distributor
    idx = np.nonzero(x.data)
    if d.replicated:
        lay = get_distributor("not", idx[0].shape, d.comm)
        return tuple(_from_local(i, lay) for i in idx)
    counts = d.comm.allgather(int(idx[0].size)) if d.comm.size > 1 else [idx[0].size]
    offsets = np.concatenate(([0], np.cumsum(counts))).tolist()
    lay = slab_distributor((offsets[-1],), d.comm, 0, offsets, "freeform")
    out = [i.astype(np.intp, copy=False) for i in idx]
    out[0] = out[0] + d.span(0)[0]
    return tuple(_from_local(i, lay) for i in out)


@operation(mesh=True)
def where(condition: Any, x: Any = None, y: Any = None) -> Any:
    """numpy's ``where``: ``nonzero(condition)`` with one argument, else element-wise choice.

    The three-argument form aligns its operands like any element-wise
    operation (see d2o.ops.ufuncs) and returns a distributed object; with scalars and
    operands of one layout it communicates nothing, on every layout.
    """
    ops = [condition, x, y]
    if not any(isinstance(o, D2O) for o in ops):  # numpy data only: numpy's own answer
        return np.where(condition) if x is None and y is None else np.where(condition, x, y)
    if x is None and y is None:
        # nonzero has no mesh algorithm: a mesh operand goes through its slab equivalent
        return nonzero(as_slab(condition))
    if x is None or y is None:
        raise ValueError("either both or neither of x and y should be given")
    res = local_elementwise(np.where, ops)
    if res is not None:
        return res
    first = next(o for o in ops if isinstance(o, D2O))
    with agreed(first.distributor.comm):
        shape = np.broadcast_shapes(
            *(np.shape(o) if not isinstance(o, D2O) else o.shape for o in ops)
        )
        target = result_layout(ops, shape)
    local = [align(o, target) for o in ops]
    return _from_local(np.where(*local), target)


@operation()
def vdot(a: Any, b: Any) -> Any:
    """Collective: ``sum(conj(a.ravel()) * b.ravel())``; a numpy scalar identical on every
    rank.  The ranks' partials and errors travel in one Allreduce of a 96-byte record
    (`d2o.ops.reductions.agreed_total`: an error on one rank is raised on every rank,
    nobody left waiting); other dtypes agree, then combine.  Replicated vectors: no
    communication."""
    da = a if isinstance(a, D2O) else None
    db = b if isinstance(b, D2O) else None
    lead = da if da is not None else db
    if lead is None:  # numpy data only
        return np.vdot(a, b)
    if np.size(a) != np.size(b):  # (global sizes where both are d2o's: raised everywhere)
        error: BaseException | None = ValueError(
            "vector dot product requires both arrays to have the same size"
        )
    else:
        error = None
    if da is None or db is None:  # a numpy operand: its size may differ between ranks
        agree(lead.distributor.comm, error)
    elif error is not None:
        raise error
    fa = ravel(a) if da is not None else np.ravel(a)
    fb = ravel(b) if db is not None else np.ravel(b)
    lead_flat = fa if da is not None else fb
    d = lead_flat.distributor
    la = align(fa, d)
    lb = align(fb, d)
    dtype = np.result_type(la, lb)
    part = None
    try:
        part = np.asarray(np.vdot(la, lb)).reshape(1)
    except Exception as exc:
        error = exc
    if d.replicated:  # every rank computed the same from the same data
        if error is not None:
            raise error
        return part[0]
    if dtype.kind in "biufc":  # the partials and the errors in one 96-byte record
        return agreed_total(d.comm, error, part[0] if error is None else None, dtype)
    agree(d.comm, error)
    return combine_partials(part, np.add, d)[0]


def _reduction(name: str) -> Callable:
    def f(a: Any, *args: Any, **kwargs: Any) -> Any:
        return getattr(a, name)(*args, **kwargs)

    return f


def _sharing(test: Callable) -> Callable:
    """``np.shares_memory``/``np.may_share_memory`` of d2o arrays (and numpy arrays):
    each rank tests its pieces (errors agreed: one 1-byte allreduce), then one 1-byte
    allreduce of the answers; no array data moves."""

    def f(a: Any, b: Any, max_work: Any = None) -> bool:
        comm = (a if isinstance(a, D2O) else b).distributor.comm
        with agreed(comm):
            local = [x.data if isinstance(x, D2O) else np.asarray(x) for x in (a, b)]
            kw = {} if max_work is None else {"max_work": max_work}
            mine = bool(test(local[0], local[1], **kw))
        return comm.any_flag(mine)

    return f


def _moveaxis(a: D2O, source: Any, destination: Any) -> D2O:
    """numpy's ``moveaxis``: a transpose (a view; local)."""
    n = a.ndim
    src = normalize_axis_tuple(source, n, "source")
    dst = normalize_axis_tuple(destination, n, "destination")
    if len(src) != len(dst):
        raise ValueError(
            "`source` and `destination` arguments must have the same number of elements"
        )
    order = [i for i in range(n) if i not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return a.transpose(tuple(order))


# numpy function -> distributed implementation (first argument is the array)
HANDLED: dict = {
    np.shares_memory: _sharing(np.shares_memory),
    np.may_share_memory: _sharing(np.may_share_memory),
    np.bincount: bincount,
    np.unique: unique,
    np.where: where,
    np.nonzero: nonzero,
    np.vdot: vdot,
    np.dot: lambda a, b, out=None: _dot(a, b),
    np.ravel: lambda a, order="C": ravel(a),
    np.shape: lambda a: a.shape,
    np.ndim: lambda a: a.ndim,
    np.size: lambda a, axis=None: a.size if axis is None else a.shape[axis],
    np.isrealobj: lambda x: x.dtype.kind != "c",
    np.iscomplexobj: lambda x: x.dtype.kind == "c",
    np.real: lambda v: v.real,
    np.transpose: lambda a, axes=None: a.transpose(axes),
    np.swapaxes: lambda a, axis1, axis2: a.swapaxes(axis1, axis2),
    np.moveaxis: lambda a, source, destination: _moveaxis(a, source, destination),
    np.imag: lambda v: v.imag,
    np.copy: lambda a, *args, **kw: a.copy(),
    np.isreal: lambda x: x.isreal(),
    np.iscomplex: lambda x: x.iscomplex(),
    np.nan_to_num: lambda x, copy=True, nan=0.0, posinf=None, neginf=None: x.nan_to_num(
        copy=copy, nan=nan, posinf=posinf, neginf=neginf
    ),
    np.median: lambda a, axis=None, out=None, overwrite_input=False, keepdims=False: (
        a.median(axis=axis, keepdims=keepdims) if out is None else _no_out()
    ),
}
for _name in (
    "sum",
    "prod",
    "max",
    "min",
    "amax",
    "amin",
    "mean",
    "var",
    "std",
    "all",
    "any",
    "argmax",
    "argmin",
    "cumsum",
    "cumprod",
    "nansum",
    "nanmax",
    "nanmin",
):
    HANDLED[getattr(np, _name)] = _reduction(_name)
for _name in ("nansum", "nanmax", "nanmin"):
    HANDLED[getattr(np, _name)] = _reduction(_name)


def _no_out() -> Any:
    raise TypeError("out= is not supported for distributed arrays")


def _dot(a: Any, b: Any) -> Any:
    return dot(a, b)
