"""Scans along an axis (``cumsum``, ``cumprod``, ``ufunc.accumulate``) of distributed arrays.

On slabs: the local scan, then the exclusive prefix of the ranks before, from one
Allgather of each rank's last slice.  On process meshes the same inside the
sub-communicator of the mesh axis that splits the scanned axis (none: local);
block-cyclic and explicit pieces through the slab equivalent.  Non-associative ufuncs
move the axis whole to one rank's piece first.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..array.base import Array as D2O
from ..array.base import from_local as _from_local
from ..array.slabs import as_slab
from ..core.errors import agreed
from ..layouts.distributors import get_distributor, normalize_axis, run_length, slab_distributor
from ..layouts.mesh import is_mesh, subcomm
from ..move.redistribution import redistribute
from .reductions import ASSOCIATIVE, ravel, store

__all__ = ["cumulative", "ufunc_accumulate"]


def _accumulate(obj: D2O, ufunc: np.ufunc, local_fn: Callable, axis: Any, dtype: Any) -> D2O:
    if axis is None:
        if is_mesh(obj.distributor):  # the flattened order: through the slab equivalent
            obj = as_slab(obj)
        obj, axis = ravel(obj), 0
    d: Any = obj.distributor
    with agreed(d.comm):
        ax = normalize_axis(axis, d.ndim)
    if is_mesh(d):
        return _mesh_accumulate(obj, ufunc, local_fn, ax, dtype)
    if d.replicated or d.comm.size == 1 or ax != d.axis:
        return _from_local(local_fn(obj.data, axis=ax, dtype=dtype), d)
    if ufunc not in ASSOCIATIVE:
        other = next((a for a in range(d.ndim) if a != ax), None)
        if other is None:  # 1-d: the whole array on every rank (an implicit gather)
            there = get_distributor("not", d.global_shape, d.comm)
        else:
            there = get_distributor("equal", d.global_shape, d.comm, other)
        acc = local_fn(redistribute(obj.data, d, there), axis=ax, dtype=dtype)
        strategy = d.strategy if d.strategy != "freeform" else "equal"
        back = get_distributor(strategy, d.global_shape, d.comm, ax)
        return _from_local(redistribute(acc, there, back), back)
    acc = local_fn(obj.data, axis=ax, dtype=dtype)
    _add_prefix(acc, ax, ufunc, d.comm, d.comm.rank, d.lengths())
    return _from_local(acc, d)


def _mesh_accumulate(obj: D2O, ufunc: np.ufunc, local_fn: Callable, ax: int, dtype: Any) -> D2O:
    """Collective in the sub-communicator of the mesh axis that splits ``ax`` (none: local):
    the local scan, then the exclusive prefix of the blocks before this one, from one
    Allgather of each block's last slice (O(mesh extent x slice) per rank).  Block-cyclic
    and explicit pieces, or two mesh axes cutting ``ax``, go through the slab equivalent."""
    d: Any = obj.distributor
    along = [m for m, s in enumerate(d.split) if s == ax]
    if d.cyclic or d.explicit or len(along) > 1 or ufunc not in ASSOCIATIVE:
        return _accumulate(as_slab(obj), ufunc, local_fn, ax, dtype)
    acc = local_fn(obj.data, axis=ax, dtype=dtype)
    if not along:  # every rank holds whole columns along ax
        return _from_local(acc, d)
    m = along[0]
    sub = subcomm(d, (m,))  # ordered by the coordinate along m: the blocks' order along ax
    lengths = [run_length(d.runs[m][c]) for c in range(d.layout.mesh[m])]
    _add_prefix(acc, ax, ufunc, sub, d.coords[m], lengths)
    return _from_local(acc, d)


def _add_prefix(acc: np.ndarray, ax: int, ufunc: np.ufunc, comm: Any, me: int, lengths) -> None:
    """Collective over ``comm``, whose ranks hold consecutive blocks along ``ax`` in rank
    order (``lengths`` of them): combine into the local scan ``acc`` the totals of the
    non-empty blocks before this one, from one Allgather of each block's last slice."""
    n = acc.shape[ax]
    last = (
        np.take(acc, [n - 1], axis=ax)
        if n
        else np.zeros(tuple(1 if i == ax else s for i, s in enumerate(acc.shape)), dtype=acc.dtype)
    )
    stacked = comm.Allgather(last)
    prior = [stacked[r] for r in range(me) if lengths[r]]
    if prior and n:
        prefix = prior[0]
        for p in prior[1:]:
            prefix = ufunc(prefix, p)
        ufunc(prefix, acc, out=acc)


def ufunc_accumulate(
    ufunc: np.ufunc, obj: Any, axis: int = 0, dtype: Any = None, out: Any = None
) -> Any:
    """``ufunc.accumulate`` on a distributed object."""
    if out is not None:
        return NotImplemented
    return _accumulate(obj, ufunc, ufunc.accumulate, axis, dtype)


def cumulative(obj: D2O, name: str, axis: Any = None, dtype: Any = None, out: Any = None,
               include_initial: bool = False) -> Any:  # fmt: skip
    """``cumsum``/``cumprod`` (``name``) along ``axis`` (flattened when None); collective.

    The local scan of each piece plus the exclusive prefix of the ranks before (one
    Allgather of each rank's last slice); ``axis=None`` scans the flattened array
    (`d2o.ops.reductions.ravel`: the pieces' own memory when split along axis 0, else one
    redistribution).  ``include_initial`` (``cumulative_sum``/``cumulative_prod``) puts
    the identity first along the axis: the first rank's piece grows by one slice, nothing
    moves."""
    uf, fn = (np.add, np.cumsum) if name == "cumsum" else (np.multiply, np.cumprod)
    res = _accumulate(obj, uf, fn, axis, dtype)
    if include_initial:
        res = _with_initial(res, 0 if axis is None else normalize_axis(axis, res.ndim), uf)
    return store(res, out)


def _with_initial(res: D2O, ax: int, ufunc: np.ufunc) -> D2O:
    """``res`` with one slice of ``ufunc``'s identity put first along ``ax``: each rank's
    own piece, the identity slice on the rank that holds the start (no communication;
    process meshes through the slab equivalent)."""
    if is_mesh(res.distributor):
        res = as_slab(res)
    d: Any = res.distributor
    piece = res.data
    shape = list(res.shape)
    shape[ax] += 1
    split = not d.replicated and d.axis == ax
    if split:
        b = d.bounds()
        first = next((r for r in range(d.comm.size) if b[r + 1] > b[r]), 0)
        offsets = [0] + [o + 1 for o in b[1:]]
        offsets[1 : first + 1] = [0] * first  # the empty pieces before the first one stay empty
        lay = slab_distributor(tuple(shape), d.comm, ax, offsets, "freeform")
        grow = d.comm.rank == first
    else:
        grow = True
        lay = (
            get_distributor("not", tuple(shape), d.comm)
            if d.replicated
            else d.slabs_like(tuple(shape), d.axis)
        )
    if grow:
        one = list(piece.shape)
        one[ax] = 1
        piece = np.concatenate([np.full(one, ufunc.identity, dtype=piece.dtype), piece], axis=ax)
    return _from_local(piece, lay)
