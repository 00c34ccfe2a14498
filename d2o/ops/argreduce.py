"""``argmax``/``argmin`` of distributed arrays: each rank's best candidates (value and
global index) combined by numpy's rules (a NaN wins, ties go to the lowest index).

Over every axis the candidates travel in the reductions' 96-byte agreement record; along
one axis they are allgathered among the ranks that split it (the sub-communicator of the
mesh axis on process meshes and block-cyclic layouts), so only O(result) bytes move.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..array.base import Array as D2O
from ..array.base import from_local as _from_local
from ..array.slabs import as_slab
from ..core.errors import (
    PAYLOAD_BYTES,
    VALUE,
    agreed,
    allreduce_agreed,
    combiner,
    new_record,
    payload,
)
from ..layouts.distributors import get_distributor
from ..layouts.mesh import is_mesh, reduced_layout, subcomm
from .reductions import (
    kept_layout,
    norm_axes,
    probe,
    probe_dtype,
    reduced_shape,
    store,
    wrap_result,
)

__all__ = ["arg"]


def _stride(shape: tuple, ax: int) -> int:
    out = 1
    for n in shape[ax + 1 :]:
        out *= n
    return out


def _arg_local(obj: D2O, fn: Callable, axis: Any, axes: tuple) -> tuple:
    """This rank's candidates: global indices, values and the reduced axis."""
    d = obj.distributor
    data = obj.data
    if axis is None:
        data = data.reshape(-1)
        if data.size:
            li = int(fn(data))
            gi = 0  # the local flat index, unravelled and re-ravelled globally (C order)
            rest = li
            for ax in range(d.ndim - 1, -1, -1):
                n_loc = obj.data.shape[ax]
                i = rest % n_loc
                rest //= n_loc
                i = int(d.global_indices(ax)[i])
                gi += i * _stride(d.global_shape, ax)
            return np.array([gi], dtype=np.int64), data[li : li + 1], 0
        return np.array([-1], dtype=np.int64), np.zeros(1, dtype=obj.dtype), 0
    ax = axes[0]
    if data.shape[ax]:
        at = np.expand_dims(fn(data, axis=ax), ax)
        val = np.take_along_axis(data, at, axis=ax)
        return d.global_indices(ax)[at].astype(np.int64), val, ax
    shp = tuple(1 if i == ax else n for i, n in enumerate(data.shape))
    return np.full(shp, -1, dtype=np.int64), np.zeros(shp, dtype=obj.dtype), ax


def _arg_full(obj: D2O, fn: Callable, name: str, keepdims: bool) -> int:
    """Collective: the global flat index of ``fn`` (argmax/argmin) over every axis, with
    the error agreement, in one Allreduce of a 96-byte record (each rank's candidate,
    value and global index, combined by numpy's rules: `_arg_combiner`)."""
    d = obj.distributor
    error = None
    rec = new_record()
    try:
        probe_dtype(fn, obj, axis=None, keepdims=keepdims)
        gi, val, _ = _arg_local(obj, fn, None, ())
        code = _arg_combiner(name, obj.dtype)  # registered on every rank: all may fold
        if gi[0] >= 0:  # this rank holds elements
            pay = payload(rec)
            pay[:8].view(np.int64)[0] = gi[0]
            pay[8 : 8 + obj.dtype.itemsize] = np.ascontiguousarray(val).view(np.uint8)
            rec[0] |= VALUE
            rec[3] = code
    except Exception as exc:
        error = exc
    out = allreduce_agreed(d.comm, error, rec, combine=True)
    return int(payload(out)[:8].view(np.int64)[0])


#: (name, dtype) -> the code of the record combiner of argmax/argmin candidates
_ARG_CODES: dict = {}


def _arg_combiner(name: str, dtype: np.dtype) -> int:
    """The code of the record combiner keeping the better of two (global index, value)
    candidates by numpy's rules: the first NaN wins, ties go to the lowest index."""
    code = _ARG_CODES.get((name, dtype))
    if code is None:
        n, argmax = dtype.itemsize, name == "argmax"

        def fold(a: np.ndarray, b: np.ndarray) -> None:
            pa, pb = a.view(np.uint8), b.view(np.uint8)
            ia, ib = int(a[0]), int(b[0])  # global indices are never negative here
            va, vb = pa[8 : 8 + n].view(dtype)[0], pb[8 : 8 + n].view(dtype)[0]
            anan, bnan = va != va, vb != vb
            if bnan:
                better = anan and ia < ib
            elif anan:
                better = True
            else:
                better = (va > vb if argmax else va < vb) or (va == vb and ia < ib)
            if better:
                b[:] = a

        code = _ARG_CODES[name, dtype] = combiner(f"{name}:{dtype.str}", fold)
    return code


def _best(vals: np.ndarray, idxs: np.ndarray, name: str) -> np.ndarray:
    """The global index of the best candidate per position among stacked ones (``vals``,
    ``idxs``: one row per rank; index -1 where a rank holds none): numpy's rules, a NaN
    wins and ties (the first NaN too) go to the lowest global index, since rank order is
    not flat order when the distributed axis is not the first.  Local."""
    best_v, best_i = vals[0].copy(), idxs[0].copy()
    for v, i in zip(vals[1:], idxs[1:]):
        earlier = i < best_i
        cmp = (v > best_v) if name == "argmax" else (v < best_v)
        better = cmp | ((v == best_v) & earlier)
        if v.dtype.kind in "fc":
            vnan, bnan = np.isnan(v), np.isnan(best_v)
            better = np.where(bnan, vnan & earlier, vnan | better)
        better = (better & (i >= 0)) | (best_i < 0)  # ranks holding nothing never win
        best_v = np.where(better, v, best_v)
        best_i = np.where(better, i, best_i)
    return best_i


def _arg(obj: D2O, name: str, axis: Any = None, out: Any = None, keepdims: bool = False) -> Any:
    if out is not None:
        return store(_arg(obj, name, axis, None, keepdims), out)
    fn = np.argmax if name == "argmax" else np.argmin
    d = obj.distributor
    if d.replicated or d.comm.size == 1:
        res = fn(obj.data, axis=axis, keepdims=keepdims)
        if np.ndim(res) == 0:
            return np.asarray(res)[()]
        axes = norm_axes(axis, d.ndim)
        lay = (
            kept_layout(d, res.shape, axes, keepdims)
            if d.axis not in axes
            else get_distributor("not", res.shape, d.comm)
        )
        return _from_local(res, lay)
    if axis is None and not obj.dtype.hasobject and obj.dtype.itemsize <= PAYLOAD_BYTES - 8:
        best = _arg_full(obj, fn, name, keepdims)
        if not keepdims:
            return np.intp(best)
        res = np.full((1,) * d.ndim, best, dtype=np.intp)
        return wrap_result(res, get_distributor("not", res.shape, d.comm))
    with agreed(d.comm):
        fn(probe(obj), axis=axis, keepdims=keepdims)
        axes = norm_axes(axis, d.ndim)
    if is_mesh(d) and axis is not None:
        return _mesh_arg(obj, fn, name, axes, keepdims)
    if is_mesh(d):  # the flat index of wide dtypes: through the slab equivalent
        return _arg(as_slab(obj), name, axis, None, keepdims)
    if axis is not None and d.axis not in axes:
        res = fn(obj.data, axis=axis, keepdims=keepdims)
        gshape = reduced_shape(d.global_shape, axes, keepdims)
        return _from_local(res, kept_layout(d, gshape, axes, keepdims))
    gi, val, ax = _arg_local(obj, fn, axis, axes)
    best_i = _best(d.comm.Allgather(val), d.comm.Allgather(gi), name)
    if axis is None:
        res = best_i.reshape(()) if not keepdims else best_i.reshape((1,) * d.ndim)
    else:
        res = best_i if keepdims else np.squeeze(best_i, axis=ax)
    res = res.astype(np.intp, copy=False)
    return wrap_result(res, get_distributor("not", res.shape, d.comm))


def _mesh_arg(obj: D2O, fn: Callable, name: str, axes: tuple, keepdims: bool) -> D2O:
    """Collective in the sub-communicator of the mesh axes that split the reduced axis
    (none: local): each rank's candidates (value and global index per result element of
    its piece) allgathered there and the best kept; O(result piece x mesh extent) bytes
    per rank.  The result keeps the mesh, those mesh axes now holding replicas."""
    d: Any = obj.distributor
    (ax,) = axes
    gshape = reduced_shape(d.global_shape, axes, keepdims)
    target = reduced_layout(d, axes, keepdims, gshape)
    mesh_axes = tuple(m for m, s in enumerate(d.split) if s == ax)
    if not mesh_axes:
        return _from_local(fn(obj.data, axis=ax, keepdims=keepdims), target)
    sub = subcomm(d, mesh_axes)
    gi, val, _ = _arg_local(obj, fn, ax, axes)
    best_i = _best(sub.Allgather(val), sub.Allgather(gi), name) if sub.size > 1 else gi
    res = best_i if keepdims else np.squeeze(best_i, axis=ax)
    return _from_local(res.astype(np.intp, copy=False), target)


def arg(obj: D2O, name: str, axis: Any = None, out: Any = None, keepdims: bool = False) -> Any:
    """``argmax``/``argmin`` (``name``) of the global array; collective.

    Over every axis: one Allreduce of a 96-byte record (each rank's candidate).  Along
    the split axis of a slab: each rank's candidates allgathered; of a process mesh or
    block-cyclic layout: the same inside the sub-communicator of the mesh axis that
    splits it (`_mesh_arg`); along other axes: local."""
    return _arg(obj, name, axis, out, keepdims)
