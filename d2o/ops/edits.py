"""numpy's ``insert`` and ``delete`` on distributed arrays: one exchange, no gather.

Along the edited axis the result's positions are runs of the source's (the elements
that survive, in order) and the inserted values.  Every rank works out, from the index
argument alone (replicated, as numpy's), the *segments*: (result start, source start,
length) of the source elements that survive.  The result's layout is the source's rule
on the new shape (`d2o.layouts.distributors.like`, `d2o.layouts.mesh.moved`); each rank
wants the source runs that land in its result box, and one `exchange`
(`d2o.move.redistribution`) brings exactly those elements, nothing else.  Where the
edited axis is whole on every rank (a slab cut along another axis) nothing moves at all.
The inserted values (a numpy operand, or a distributed one made whole first: they are
the caller's, usually small) are cut locally: every rank copies the part of the
broadcast values block that falls into its piece.  ``axis=None`` works on the
flattened array (`d2o.ops.reductions.ravel`: local for arrays cut along axis 0, one
exchange before otherwise).

Index errors are numpy's (the same types and messages): the index argument is the same
on every rank, so every rank raises, before anything moves.
"""

from __future__ import annotations

import operator
from bisect import bisect_right
from typing import Any

import numpy as np

from ..array.base import Array as D2O
from ..array.base import from_local as _from_local
from ..layouts.distributors import (
    Distributor,
    as_runs,
    entry_indices,
    is_runs,
    like,
    normalize_axis,
)
from ..layouts.mesh import is_mesh, moved
from ..move.redistribution import exchange
from .reductions import ravel

__all__ = ["insert", "delete", "segments_delete", "segments_insert"]


def _whole(x: Any) -> Any:
    return x.get_full_data() if isinstance(x, D2O) else x


def segments_delete(obj: Any, n: int, axis: int) -> np.ndarray:
    """The positions along the axis (length ``n``) that numpy's ``delete`` removes,
    sorted and unique; numpy's errors.  Local."""
    if isinstance(obj, slice):
        start, stop, step = obj.indices(n)
        return np.unique(np.arange(start, stop, step, dtype=np.intp))
    if isinstance(obj, (int, np.integer)) and not isinstance(obj, bool):
        single = True
    else:
        single = False
        given = obj
        obj = np.asarray(obj)
        if obj.size == 0 and not isinstance(given, np.ndarray):
            obj = obj.astype(np.intp)
        elif obj.size == 1 and obj.dtype.kind in "ui":
            obj = obj.item()
            single = True
    if single:
        if obj < -n or obj >= n:
            raise IndexError(f"index {obj} is out of bounds for axis {axis} with size {n}")
        return np.array([obj + n if obj < 0 else obj], dtype=np.intp)
    if obj.dtype == bool:
        if obj.shape != (n,):
            raise ValueError(
                "boolean array argument obj to delete must be one dimensional and match "
                f"the axis length of {n}"
            )
        return np.flatnonzero(obj)
    # numpy's own indexing checks (types, bounds) on a broadcast view: O(len(obj)) memory
    np.broadcast_to(np.False_, (n,))[obj,]
    idx = np.asarray(obj).astype(np.intp).reshape(-1)
    return np.unique(np.where(idx < 0, idx + n, idx))


def _kept_segments(gone: np.ndarray, n: int) -> list:
    """(result start, source start, length) of the runs of [0, n) outside ``gone``."""
    out, pos, r = [], 0, 0
    for g in gone.tolist() + [n]:
        if g > pos:
            out.append((r, pos, g - pos))
            r += g - pos
        pos = g + 1
    return out


def _source_runs(segs: list, starts: list, entry: tuple) -> tuple:
    """The source runs whose elements land in the result axis entry ``entry``."""
    out: list = []
    for a, b in as_runs(entry):
        k = max(bisect_right(starts, a) - 1, 0)
        while k < len(segs) and segs[k][0] < b:
            r0, s0, ln = segs[k]
            lo, hi = max(a, r0), min(b, r0 + ln)
            if lo < hi:
                s, e = s0 + lo - r0, s0 + hi - r0
                if out and out[-1][1] == s:
                    out[-1] = (out[-1][0], e)
                else:
                    out.append((s, e))
            k += 1
    return tuple(out)


def _result_layout(d: Distributor, shape: tuple) -> Distributor:
    if is_mesh(d):
        return moved(d, shape, 0)  # type: ignore[arg-type]
    return like(d, shape)


def _move(x: D2O, dst: Distributor, ax: int, segs: list) -> np.ndarray:
    """Collective: this rank's source elements of ``dst``'s piece (compact along ``ax``),
    in one exchange of exactly those elements."""
    src = x.distributor
    starts = [s[0] for s in segs]

    def want(r: int) -> tuple | None:
        box = dst.region(r)
        runs = _source_runs(segs, starts, box[ax])
        if not runs:
            return None
        return box[:ax] + (runs,) + box[ax + 1 :]

    data = x.data
    if src.comm.size == 1 or src.replicated:
        box = want(src.comm.rank)
        shape = list(dst.local_shape)
        if box is None:
            shape[ax] = 0
            return np.empty(shape, dtype=x.dtype)
        index = tuple(entry_indices(e) if is_runs(e) else slice(*e) for e in box)
        return _take_box(data, index)
    return exchange(src.comm, data, src.region, want, send=src.source)


def _take_box(data: np.ndarray, index: tuple) -> np.ndarray:
    out = data
    for a, i in enumerate(index):
        out = out[(slice(None),) * a + (i,)]
    return np.ascontiguousarray(out)


def delete(arr: D2O, obj: Any, axis: Any = None) -> D2O:
    """numpy's ``delete``: a new array without the entries ``obj`` along ``axis``.

    Collective: one exchange of the surviving elements that change rank (none where the
    axis is whole on every rank); ``axis=None`` flattens first (`ravel`)."""
    if axis is None:
        arr, ax = ravel(arr) if arr.ndim != 1 else arr, 0
    else:
        ax = normalize_axis(operator.index(axis), arr.ndim)
    n = arr.shape[ax]
    gone = segments_delete(_whole(obj), n, ax)
    shape = list(arr.shape)
    shape[ax] = n - gone.size
    dst = _result_layout(arr.distributor, tuple(shape))
    data = _move(arr, dst, ax, _kept_segments(gone, n))
    return _from_local(data.reshape(dst.local_shape), dst)


def segments_insert(obj: Any, values: Any, shape: tuple, axis: int, dtype: Any) -> tuple:
    """numpy's ``insert`` worked out on the index argument: the result positions of the
    inserted values (in the order of the values block along ``axis``), and the values
    block (a broadcast view of the new shape's block, ``dtype``).  numpy's errors.  Local."""
    n = shape[axis]
    ndim = len(shape)
    if isinstance(obj, slice):
        indices = np.arange(*obj.indices(n), dtype=np.intp)
    else:
        indices = np.array(obj)
        if indices.dtype == bool:
            if obj.ndim != 1:
                raise ValueError("boolean array argument obj to insert must be one dimensional")
            indices = np.flatnonzero(obj)
        elif indices.ndim > 1:
            raise ValueError("index array argument obj to insert must be one dimensional or scalar")
    if indices.size == 1:
        index = indices.item()
        if index < -n or index > n:
            raise IndexError(f"index {obj} is out of bounds for axis {axis} with size {n}")
        if index < 0:
            index += n
        vals = np.array(values, copy=None, ndmin=ndim, dtype=dtype)
        if indices.ndim == 0:
            vals = np.moveaxis(vals, 0, axis)
        numnew = vals.shape[axis]
        block = list(shape)
        block[axis] = numnew
        pos = np.arange(index, index + numnew, dtype=np.intp)
        return pos, _broadcast(vals, tuple(block))
    if indices.size == 0 and not isinstance(obj, np.ndarray):
        indices = indices.astype(np.intp)
    indices = indices.copy()
    indices[indices < 0] += n
    numnew = len(indices)
    order = indices.argsort(kind="mergesort")
    indices[order] += np.arange(numnew)
    total = n + numnew
    np.broadcast_to(np.False_, (total,))[indices]  # numpy's index checks (types, bounds)
    pos = np.asarray(indices, dtype=np.intp) % max(total, 1)
    if np.unique(pos).size != pos.size:
        raise ValueError(
            f"shape mismatch: value array of shape {tuple(shape)} could not be broadcast "
            "to the positions left for it"
        )
    block = list(shape)
    block[axis] = numnew
    return pos, _broadcast(np.asarray(values), tuple(block))


def _broadcast(vals: np.ndarray, block: tuple) -> np.ndarray:
    """``vals`` broadcast to ``block`` as numpy's assignment does (leading length-1 axes
    dropped); numpy's ValueError where it does not fit."""
    while vals.ndim > len(block) and vals.shape[0] == 1:
        vals = vals[0]
    try:
        return np.broadcast_to(vals, block)
    except ValueError:
        raise ValueError(
            f"shape mismatch: value array of shape {vals.shape} could not be broadcast to "
            f"indexing result of shape {block}"
        ) from None


def insert(arr: D2O, obj: Any, values: Any, axis: Any = None) -> D2O:
    """numpy's ``insert``: a new array with ``values`` before the entries ``obj``.

    Collective: one exchange of the source elements that change rank (none where the
    axis is whole on every rank); each rank cuts its part of the values locally.
    ``axis=None`` flattens first (`ravel`)."""
    if axis is None:
        arr, ax = ravel(arr) if arr.ndim != 1 else arr, 0
    else:
        ax = normalize_axis(operator.index(axis), arr.ndim)
    n = arr.shape[ax]
    pos, block = segments_insert(_whole(obj), _whole(values), arr.shape, ax, arr.dtype)
    shape = list(arr.shape)
    shape[ax] = n + pos.size
    order = np.argsort(pos, kind="stable")
    spos = pos[order]
    # the source elements: the runs between the inserted positions
    segs, r, s = [], 0, 0
    for p in spos.tolist() + [shape[ax]]:
        if p > r:
            segs.append((r, s, p - r))
            s += p - r
        r = p + 1
    dst = _result_layout(arr.distributor, tuple(shape))
    moved_in = _move(arr, dst, ax, segs)
    out = np.empty(dst.local_shape, dtype=arr.dtype)
    box = dst.region(dst.comm.rank)
    gi = entry_indices(box[ax])
    k = np.searchsorted(spos, gi)
    new = np.zeros(gi.size, dtype=bool)
    if spos.size:
        new = (k < spos.size) & (spos[np.minimum(k, spos.size - 1)] == gi)
    lead = (slice(None),) * ax
    if moved_in.size:
        out[lead + (~new,)] = moved_in
    if new.any():
        vidx = order[k[new]]
        index = [entry_indices(e) for e in box]
        index[ax] = vidx
        out[lead + (new,)] = block[np.ix_(*index)]
    return _from_local(out, dst)
