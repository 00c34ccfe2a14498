"""Shape operations and caput-style access: reshape, transpose, wrap, global_slice, enumerate.

Layout rules
------------
* ``transpose``/``swapaxes`` are always local: every rank transposes its own
  piece and the distributed axis moves with it (no data moves).
* ``reshape`` is local when the distributed axis survives: the axes before it
  keep their product and every rank's slab maps to a whole slab of one axis of
  the new shape.  Otherwise it is a ravel plus one redistribution, and the
  result is distributed along axis 0.
* ``wrap`` turns local pieces into one array (one small allgather of shapes).
* ``global_slice`` and ``enumerate`` never communicate.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from ..array.align import align
from ..array.base import Array as D2O
from ..array.base import as_index as _index
from ..array.base import from_local as _from_local
from ..core.comm import as_comm
from ..core.errors import agree_gather, agreed
from ..core.registry import operation
from ..layouts.distributors import (
    Distributor,
    equal_lengths,
    fftw_lengths,
    get_distributor,
    like,
    normalize_axis,
    slab_distributor,
)
from ..layouts.mesh import is_mesh, permuted
from ..move.redistribution import exchange
from .reductions import ravel

__all__ = ["reshape", "transpose", "swapaxes", "wrap"]


# -- transpose -------------------------------------------------------------------


def _parse_axes(axes: tuple, ndim: int) -> tuple:
    if len(axes) == 1 and (axes[0] is None or isinstance(axes[0], (tuple, list))):
        axes = axes[0]
    if axes is None or axes == ():
        return tuple(range(ndim))[::-1]
    axes = tuple(normalize_axis(a, ndim) for a in axes)
    if len(axes) != ndim:
        raise ValueError("axes don't match array")
    if len(set(axes)) != ndim:
        raise ValueError("repeated axis in transpose")
    return axes


def _permuted(d: Distributor, axes: tuple) -> Distributor:
    shape = tuple(d.global_shape[a] for a in axes)
    if d.replicated:
        return get_distributor(d.strategy, shape, d.comm)
    if is_mesh(d):
        return permuted(d, axes)
    return d.slabs_like(shape, axes.index(d.axis))


@operation(mesh=True)
def transpose(obj: D2O, *axes: Any) -> D2O:
    """The array with permuted axes, as numpy's ``transpose``.

    Local: the distributed axis moves with the permutation and the result's
    pieces are views of the input's pieces.
    """
    d = obj.distributor
    axes = _parse_axes(axes, d.ndim)
    return obj._view(obj.data.transpose(axes), _permuted(d, axes))


@operation(mesh=True)
def swapaxes(obj: D2O, axis1: int, axis2: int) -> D2O:
    """The array with two axes interchanged (a view); local."""
    n = obj.ndim
    a1, a2 = normalize_axis(axis1, n), normalize_axis(axis2, n)
    axes = list(range(n))
    axes[a1], axes[a2] = a2, a1
    return transpose(obj, tuple(axes))


# -- reshape ---------------------------------------------------------------------


def _new_shape(shape: Any, size: int, dist_len: int | None) -> tuple[tuple, int | None]:
    """numpy's shape parsing (one -1 allowed); also caput's None for the distributed axis."""
    if isinstance(shape, (int, np.integer)) or shape is None:
        shape = (shape,)
    if isinstance(shape, (str, bytes)) or not hasattr(shape, "__iter__"):
        raise TypeError(f"{type(shape).__name__!r} object cannot be interpreted as an integer")
    shape = list(shape)
    fixed = None
    if any(s is None for s in shape):
        if shape.count(None) > 1 or dist_len is None:
            raise ValueError("only the distributed axis of a distributed array may be None")
        fixed = shape.index(None)
        shape[fixed] = dist_len
    shape = [_index(s) for s in shape]
    unknown = [i for i, s in enumerate(shape) if s == -1]
    if len(unknown) > 1:
        raise ValueError("can only specify one unknown dimension")
    if any(s < -1 for s in shape):
        raise ValueError("negative dimensions not allowed")
    known = int(np.prod([s for s in shape if s != -1], dtype=np.int64))
    if unknown:
        if known == 0 or size % known:
            raise ValueError(f"cannot reshape array of size {size} into shape {tuple(shape)}")
        shape[unknown[0]] = size // known
    elif known != size:
        raise ValueError(f"cannot reshape array of size {size} into shape {tuple(shape)}")
    return tuple(shape), fixed


def _local_reshape_layout(d: Distributor, new: tuple, fixed: int | None) -> Distributor | None:
    """The layout for which ``data.reshape`` of every piece is the global reshape, or None."""
    old = d.global_shape
    a = d.axis
    prefix = int(np.prod(old[:a], dtype=np.int64))
    inner = int(np.prod(old[a + 1 :], dtype=np.int64))
    candidates = range(len(new)) if fixed is None else (fixed,)
    # prefer an axis of the old distributed length (the axis "survives"), then the first
    candidates = sorted(candidates, key=lambda k: (new[k] != old[a], k))
    for k in candidates:
        if int(np.prod(new[:k], dtype=np.int64)) != prefix:
            continue
        if int(np.prod(new[k:], dtype=np.int64)) != old[a] * inner:
            continue
        inner_new = int(np.prod(new[k + 1 :], dtype=np.int64))
        bounds = d.bounds()
        if inner_new == 0 or any((o * inner) % inner_new for o in bounds):
            continue
        offsets = tuple((o * inner) // inner_new for o in bounds)
        for s in ("equal", "fftw"):
            if s == d.strategy or d.strategy == "freeform":
                cand = get_distributor(s, new, d.comm, k)
                if cand.bounds() == offsets:
                    return cand
        return slab_distributor(new, d.comm, k, offsets, "freeform")
    return None


def _view_or_copy(obj: D2O, data: np.ndarray, lay: Distributor) -> D2O:
    """numpy's reshape rule: a view where the piece's memory is reused, else a copy."""
    if np.may_share_memory(data, obj.data):
        return obj._view(data, lay)
    return _from_local(data, lay)


@operation()
def reshape(obj: D2O, *shape: Any, order: str = "C") -> D2O:
    """The array with a new shape, as numpy's ``reshape`` (``order`` 'C', 'F' or 'A').

    ``order='F'`` reshapes the transpose in C order and transposes back (the
    transposes are local views).  Local (views of the pieces where numpy gives
    views) when every rank's slab stays a slab of one axis of the new shape (see the module notes); caput's
    ``None`` marks where the distributed axis must go.  Otherwise collective:
    a ravel plus one redistribution, the result distributed along axis 0.
    """
    d = obj.distributor
    if not shape:
        raise TypeError("reshape() takes exactly 1 argument (0 given)")
    if len(shape) == 1:
        shape = shape[0]
    dist_len = None if d.replicated else d.global_shape[d.axis]
    with agreed(d.comm):
        if order not in ("C", "F", "A"):
            raise ValueError(f"order must be one of 'C', 'F', 'A' for reshaping, not {order!r}")
        new, fixed = _new_shape(shape, d.size, dist_len)
        if order == "F" and fixed is not None:
            raise NotImplementedError("caput's None marker needs order='C'")
        fortran = order == "F" and (obj.ndim > 1 or len(new) > 1)
        lay = None if d.replicated or fortran else _local_reshape_layout(d, new, fixed)
        if fixed is not None and lay is None:
            raise ValueError(
                f"cannot keep the distributed axis at position {fixed} in reshape to {new}"
            )
    if fortran:
        return transpose(reshape(transpose(obj), *new[::-1]))
    if d.replicated:
        return _view_or_copy(obj, obj.data.reshape(new), get_distributor(d.strategy, new, d.comm))
    if lay is not None:
        local = list(lay.local_shape)
        return _view_or_copy(obj, obj.data.reshape(local), lay)
    if not new:  # a one-element distributed array to a 0-d (replicated) array
        full = exchange(
            d.comm, obj.data, d.region, lambda r: tuple((0, n) for n in d.global_shape),
            key=("allgather", d),
        )  # fmt: skip
        return _from_local(full.reshape(()), get_distributor("not", (), d.comm))

    flat = ravel(obj)
    fd = flat.distributor
    strategy = d.strategy if d.strategy in ("equal", "fftw") else "equal"
    target = get_distributor(strategy, new, d.comm, 0)
    inner = int(np.prod(new[1:], dtype=np.int64))
    offs = target.bounds()
    want = slab_distributor((d.size,), d.comm, 0, [o * inner for o in offs])
    moved = exchange(d.comm, flat.data, fd.region, want.region)
    return _from_local(moved.reshape(target.local_shape), target)


# -- wrap ------------------------------------------------------------------------


@operation()
def wrap(local_array: Any, axis: int = 0, comm: Any = None) -> D2O:
    """Collective: one distributed array from every rank's piece, stacked along ``axis``.

    The pieces must agree in dtype and in every dimension but ``axis``
    (checked with one small allgather; on a mismatch every rank raises
    ValueError).  The result uses the pieces as they are (no copy); its
    strategy is 'equal' or 'fftw' when the lengths follow that rule, else
    'freeform'.
    """
    c = as_comm(comm)
    error, meta, arr = None, None, None
    try:
        arr = np.asarray(local_array)
        if arr.ndim == 0:
            raise ValueError("wrap needs local arrays with at least one dimension")
        ax = normalize_axis(axis, arr.ndim)
        meta = (arr.shape, arr.dtype.str, ax)
    except Exception as exc:
        error = exc
    metas = agree_gather(c, error, meta) if c.size > 1 else [meta]
    if error is not None:  # pragma: no cover - agree_gather re-raised it
        raise error
    shapes = [m[0] for m in metas]
    ax = meta[2]
    rest = {(len(s), s[:ax] + s[ax + 1 :]) for s in shapes}
    if len(rest) != 1 or len({m[1] for m in metas}) != 1 or len({m[2] for m in metas}) != 1:
        raise ValueError(
            f"wrap: local arrays must agree in dtype, axis and every dimension but axis {ax}; "
            f"got shapes {shapes} and dtypes {sorted({m[1] for m in metas})}"
        )
    lengths = [s[ax] for s in shapes]
    gshape = list(arr.shape)
    gshape[ax] = sum(lengths)
    gshape = tuple(gshape)
    offsets = tuple(np.concatenate(([0], np.cumsum(lengths))).astype(int).tolist())
    strategy = "freeform"
    for name, rule in (("equal", equal_lengths), ("fftw", fftw_lengths)):
        if rule(gshape[ax], c.size) == lengths:
            strategy = name
            break
    if strategy == "freeform":
        dist = slab_distributor(gshape, c, ax, offsets, "freeform")
    else:
        dist = get_distributor(strategy, gshape, c, ax)
    return _from_local(arr, dist)


# -- global_slice / enumerate ----------------------------------------------------


def _expand_key(key: Any, ndim: int) -> tuple:
    if not isinstance(key, tuple):
        key = (key,)
    if sum(k is Ellipsis for k in key) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    for k in key:
        if not (k is Ellipsis or isinstance(k, slice) or _is_int(k)):
            raise IndexError(
                f"global_slice supports integers, slices and Ellipsis only (got {type(k).__name__})"
            )
    if Ellipsis in key:
        i = key.index(Ellipsis)
        fill = ndim - (len(key) - 1)
        key = key[:i] + (slice(None),) * max(fill, 0) + key[i + 1 :]
    if len(key) > ndim:
        raise IndexError(
            f"too many indices for array: array is {ndim}-dimensional, but {len(key)} were indexed"
        )
    return key + (slice(None),) * (ndim - len(key))


def _is_int(k: Any) -> bool:
    return isinstance(k, (int, np.integer)) and not isinstance(k, (bool, np.bool_))


class _Selection:
    """A global basic index resolved against this rank's piece."""

    __slots__ = ("local_key", "full", "shape", "result_axis", "cut", "empty")

    def __init__(self, obj: D2O, key: Any) -> None:
        d = obj.distributor
        key = _expand_key(key, d.ndim)
        shape = []
        for ax, (k, n) in enumerate(zip(key, d.global_shape)):
            if _is_int(k):
                if not -n <= k < n:
                    raise IndexError(f"index {k} is out of bounds for axis {ax} with size {n}")
            else:
                shape.append(len(range(*k.indices(n))))
        self.shape = tuple(shape)
        self.cut = None  # positions of this rank's part within the selection (dist axis)
        self.empty = False
        a = d.axis
        if d.replicated:
            self.local_key, self.full, self.result_axis = key, False, None
            return
        n = d.global_shape[a]
        k = key[a]
        lo, hi = d.span()
        self.result_axis = a - sum(_is_int(x) for x in key[:a])
        if isinstance(k, slice) and k.indices(n) == (0, n, 1):
            self.full = True
            lk = slice(None)
        elif _is_int(k):
            self.full = False
            i = int(k) % n
            self.empty = not lo <= i < hi
            lk = i - lo
            self.result_axis = None
        else:
            self.full = False
            idx = np.arange(*k.indices(n))
            pos = np.nonzero((idx >= lo) & (idx < hi))[0]
            self.empty = pos.size == 0
            if self.empty:
                lk = slice(0, 0)
            else:
                step = k.indices(n)[2]
                first, last = idx[pos[0]] - lo, idx[pos[-1]] - lo
                stop = last + (1 if step > 0 else -1)
                lk = slice(int(first), None if stop < 0 else int(stop), step)
                self.cut = slice(int(pos[0]), int(pos[-1]) + 1)
        self.local_key = key[:a] + (lk,) + key[a + 1 :]


class GlobalSlicer:
    """``obj.global_slice[key]``: basic indexing with global indices, no communication.

    * the full range (``:``) along the distributed axis: a distributed array
      (views of the pieces) on every rank;
    * otherwise: this rank's part of the selection as a numpy array, or None on
      ranks holding none of it (every rank gets the full selection when the
      array is replicated).

    Assignment writes the part each rank holds; a numpy value may have the
    shape of the whole selection (each rank takes its part) or anything that
    broadcasts to the local part.
    """

    __slots__ = ("obj",)

    def __init__(self, obj: D2O) -> None:
        self.obj = obj

    def __getitem__(self, key: Any) -> Any:
        obj = self.obj
        d = obj.distributor
        sel = _Selection(obj, key)
        if d.replicated:
            return obj.data[sel.local_key]
        if sel.full:
            part = obj.data[sel.local_key]
            return _from_local(part, like(d, sel.shape, axis=sel.result_axis))
        if sel.empty:
            return None
        return obj.data[sel.local_key]

    def __setitem__(self, key: Any, value: Any) -> None:
        obj = self.obj
        d = obj.distributor
        sel = _Selection(obj, key)
        if sel.full and isinstance(value, D2O):
            value = align(value, like(d, sel.shape, axis=sel.result_axis))
            obj.data[sel.local_key] = value
            return
        if isinstance(value, D2O):
            value = value.get_local_data(copy=False)
        if sel.empty:
            return
        value = np.asarray(value)
        if sel.result_axis is not None and value.shape == sel.shape and not d.replicated:
            cut = slice(*d.span()) if sel.full else sel.cut
            value = value[(slice(None),) * sel.result_axis + (cut,)]
        obj.data[sel.local_key] = value


def global_slice(self: D2O) -> GlobalSlicer:
    """Index with global indices without communicating (caput's ``global_slice``)."""
    return GlobalSlicer(self)


def enumerate_local(self: D2O, axis: int) -> Iterator[tuple[int, int]]:
    """Pairs (local index, global index) along ``axis`` for this rank's piece; local."""
    d = self.distributor
    ax = normalize_axis(axis, d.ndim)
    glob = d.global_indices(ax).tolist()
    return ((i, g) for i, g in enumerate(glob))
