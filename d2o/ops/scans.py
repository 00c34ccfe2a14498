"""Scans along an axis (``cumsum``, ``cumprod``, ``ufunc.accumulate``) of distributed arrays.

On slabs: the local scan, then the exclusive prefix of the ranks before, from one
Allgather of each rank's last slice.  On process meshes the same inside the
sub-communicator of the mesh axis that splits the scanned axis (none: local); on a
block-cyclic axis each block scanned alone, then the blocks' totals allgathered there
(where they weigh less than the slab equivalent's exchange: blocks of at least
``2 * (extent - 1)``); explicit pieces (views) through the slab equivalent.
Non-associative ufuncs move the axis whole to one rank's piece first.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..array.base import Array as D2O
from ..array.base import from_local as _from_local
from ..array.slabs import as_slab
from ..core.errors import agreed
from ..layouts.distributors import (
    as_runs,
    get_distributor,
    normalize_axis,
    run_length,
    slab_distributor,
)
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
    Allgather of each block's last slice (O(mesh extent x slice) per rank); block-cyclic
    axes with large enough blocks: `_cyclic_accumulate`.  Small cyclic blocks, explicit
    pieces, or two mesh axes cutting ``ax``, go through the slab equivalent."""
    d: Any = obj.distributor
    along = [m for m, s in enumerate(d.split) if s == ax]
    if d.explicit or len(along) > 1 or ufunc not in ASSOCIATIVE:
        return _accumulate(as_slab(obj), ufunc, local_fn, ax, dtype)
    if along and d.layout.block[along[0]] is not None:
        m = along[0]
        if 2 * (d.layout.mesh[m] - 1) > d.layout.block[m]:  # the block totals outweigh
            return _accumulate(as_slab(obj), ufunc, local_fn, ax, dtype)  # one exchange
        return _cyclic_accumulate(obj, ufunc, local_fn, ax, dtype, m)
    acc = local_fn(obj.data, axis=ax, dtype=dtype)
    if not along:  # every rank holds whole columns along ax
        return _from_local(acc, d)
    m = along[0]
    sub = subcomm(d, (m,))  # ordered by the coordinate along m: the blocks' order along ax
    lengths = [run_length(d.runs[m][c]) for c in range(d.layout.mesh[m])]
    _add_prefix(acc, ax, ufunc, sub, d.coords[m], lengths)
    return _from_local(acc, d)


def _cyclic_accumulate(
    obj: D2O, ufunc: np.ufunc, local_fn: Callable, ax: int, dtype: Any, m: int
) -> D2O:
    """The scan along ``ax``, split block-cyclically by mesh axis ``m``: each local run (one
    block) scanned on its own, then one Allgather in the mesh axis's sub-communicator of
    every block's last slice; each rank combines the totals in block order and adds the
    exclusive prefix to its blocks.  O(blocks x slice) bytes: ``(extent - 1) / block`` of
    the array in all, against about 0.75 for the slab equivalent, so `_mesh_accumulate`
    takes this path for blocks of at least ``2 * (extent - 1)``."""
    d: Any = obj.distributor
    data = obj.data
    b, pg, n = d.layout.block[m], d.layout.mesh[m], d.global_shape[ax]
    src = np.moveaxis(data, ax, 0)
    rdt = local_fn(src[:0], axis=0, dtype=dtype).dtype
    out = np.empty(data.shape, dtype=rdt)
    dst = np.moveaxis(out, ax, 0)  # a view: writes land in ``out``
    blocks, pos = [], 0  # (block index, local start, length) per run
    for lo, hi in as_runs(d.region(d.comm.rank)[ax]):
        dst[pos : pos + hi - lo] = local_fn(src[pos : pos + hi - lo], axis=0, dtype=dtype)
        blocks.append((lo // b, pos, hi - lo))
        pos += hi - lo
    nblocks = -(-n // b)
    per_rank = -(-nblocks // pg)
    last = np.zeros((per_rank,) + dst.shape[1:], dtype=rdt)
    for q, (_, p0, length) in enumerate(blocks):
        last[q] = dst[p0 + length - 1]
    stacked = subcomm(d, (m,)).Allgather(last)  # ordered by the coordinate along m
    # block k = q * pg + c is row q of coordinate c
    totals = np.swapaxes(stacked, 0, 1).reshape((per_rank * pg,) + dst.shape[1:])[:nblocks]
    prefix = ufunc.accumulate(totals, axis=0, dtype=rdt) if nblocks else totals
    for k, p0, length in blocks:
        if k:
            seg = dst[p0 : p0 + length]
            ufunc(prefix[k - 1], seg, out=seg)
    return _from_local(out, d)


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
