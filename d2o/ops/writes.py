"""numpy's in-place routed writes: ``place``, ``put_along_axis``, ``fill_diagonal``.

Each is numpy's argument checking followed by one flat assignment ``a.flat[key] =
values`` (`d2o.ops.flat.flat_set`), which writes where the elements live:

* a numpy key (``fill_diagonal``'s strided slice, ``place``'s numpy mask,
  ``put_along_axis``'s numpy indices): every rank writes the targets that fall into its
  own piece, taking its values from the numpy values (cycled) by their positions: no
  communication at all;
* a distributed key (``place``'s distributed mask, ``put_along_axis``'s distributed
  indices): a distributed mask becomes the flat indices of its True elements in global C
  order (``nonzero``: local counts, one small prefix exchange), which with their values
  travel to the owners of the targets only (the point-to-point router,
  `d2o.move.p2p`, through the fancy assignment).  A distributed key is flattened first
  (`ravel`: local when it is cut along its first axis, else one exchange of the key);
  on meshes the fancy assignment of a distributed key takes the slab way (the trace
  records ``via_slab``), numpy keys stay local there too.

Errors are numpy's types and messages, found before anything is written (the checks
depend on shapes and on the replicated arguments, or are agreed), so a failed call leaves
the array unchanged.  A distributed ``val`` of ``fill_diagonal`` is fetched by position
(it is at most as long as the diagonal).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..array.align import align
from ..array.base import Array as D2O
from ..array.base import from_local as _from_local
from ..core.errors import agreed
from ..layouts.distributors import normalize_axis
from .flat import flat_set, local_flat

__all__ = ["place", "put_along_axis", "fill_diagonal"]


def place(arr: D2O, mask: Any, vals: Any) -> None:
    """numpy's ``place``: the True positions of ``mask`` (global C order) take ``vals``,
    cycled.  Collective: local for a numpy mask; for a distributed mask its True
    positions (one prefix count) and their values travel to their owners only."""
    msize = mask.size if isinstance(mask, D2O) else np.size(mask)
    if msize != arr.size:
        raise ValueError("place: mask and data must be the same size")
    v = vals.get_full_data() if isinstance(vals, D2O) else vals
    if isinstance(v, (np.ndarray, np.generic)) and not np.can_cast(v.dtype, arr.dtype, "safe"):
        raise TypeError(
            f"Cannot cast array data from {v.dtype!r} to {arr.dtype!r} according to the rule 'safe'"
        )
    v = np.asarray(v).reshape(-1)
    if isinstance(mask, D2O):
        m = mask if mask.dtype == bool else mask != 0
        m = m.ravel()
        if v.size == 0:
            if bool(m.any()):
                raise ValueError("Cannot insert from an empty array!")
            return
        flat_set(arr, m, v.astype(arr.dtype))
        return
    mk = np.asarray(mask).astype(bool).reshape(-1)
    if v.size == 0:
        if mk.any():
            raise ValueError("Cannot insert from an empty array!")
        return
    flat_set(arr, mk, v.astype(arr.dtype))


def _along_index(shape: tuple, idx: np.ndarray, axis: int, start: tuple) -> list:
    """The coordinates of the targets of ``idx`` (a block at ``start``, in the indices'
    own coordinates) in an array of ``shape``: numpy's orthogonal aranges with ``idx``
    along ``axis`` (negative indices counted from the end)."""
    coords = []
    nd = len(shape)
    for a in range(nd):
        if a == axis:
            coords.append(np.where(idx < 0, idx + shape[a], idx))
        else:
            r = np.arange(start[a], start[a] + idx.shape[a]).reshape(
                (1,) * a + (-1,) + (1,) * (nd - a - 1)
            )
            coords.append(r)
    return coords


def _check_indices(arr_shape: tuple, indices: Any, axis: Any) -> int:
    ax = 0 if axis is None else normalize_axis(axis, len(arr_shape))
    if not np.issubdtype(indices.dtype, np.integer):
        raise IndexError("`indices` must be an integer array")
    if len(arr_shape) != indices.ndim:
        raise ValueError("`indices` and `arr` must have the same number of dimensions")
    return ax


def put_along_axis(arr: D2O, indices: Any, values: Any, axis: Any) -> None:
    """numpy's ``put_along_axis``: ``arr[aranges with indices along axis] = values``.

    Collective: numpy indices write locally (every rank its own targets, no
    communication); distributed indices send each target's (position, value) to its
    owner only.  ``axis=None`` checks the arguments and writes nothing, as numpy (which
    writes into a flattened copy)."""
    if axis is None:
        if indices.ndim != 1:
            raise ValueError("when axis=None, `indices` must have a single dimension.")
        _check_indices((arr.size,), indices, None)
        probe = np.broadcast_to(np.False_, (arr.size,))
        if not isinstance(indices, D2O):
            probe[indices]  # numpy's bounds errors; the flattened copy is dropped, as numpy
            np.broadcast_to(np.asarray(values), np.shape(indices))
        return
    ax = _check_indices(arr.shape, indices, axis)
    if isinstance(indices, D2O):
        _put_distributed(arr, indices, values, ax)
        return
    idx = np.asarray(indices)
    coords = _along_index(arr.shape, idx, ax, (0,) * idx.ndim)
    np.broadcast_to(np.False_, arr.shape)[tuple(coords)]  # numpy's index errors
    bshape = np.broadcast_shapes(*[c.shape for c in coords])
    vals = np.asarray(values)
    while vals.ndim > len(bshape) and vals.shape[0] == 1:
        vals = vals[0]
    try:
        vals = np.broadcast_to(vals, bshape)
    except ValueError:
        raise ValueError(
            f"shape mismatch: value array of shape {np.shape(values)} could not be "
            f"broadcast to indexing result of shape {bshape}"
        ) from None
    full = [np.broadcast_to(c, bshape) for c in coords]
    if arr.size == 0 or math.prod(bshape) == 0:
        return
    flat = np.ravel_multi_index(tuple(full), arr.shape).reshape(-1)
    flat_set(arr, flat, vals.reshape(-1).astype(arr.dtype, copy=False))


def _put_distributed(arr: D2O, indices: D2O, values: Any, ax: int) -> None:
    """Distributed indices: each rank turns its piece of the indices into flat targets;
    the fancy assignment routes them with their values to the owners."""
    for a in range(arr.ndim):
        if a != ax and indices.shape[a] != arr.shape[a]:
            raise NotImplementedError(
                "d2o.numpy.put_along_axis: distributed indices broadcast against the "
                "array; pass them with the array's shape off the axis"
            )
    d = indices.distributor
    n = arr.shape[ax]
    with agreed(d.comm):
        idx = indices.data.astype(np.intp, copy=False)
        bad = (idx < -n) | (idx >= n)
        if bad.any():
            raise IndexError(
                f"index {int(idx[bad][0])} is out of bounds for axis {ax} with size {n}"
            )
        g = np.unravel_index(local_flat(d), indices.shape)
        coords = list(g)
        coords[ax] = np.where(idx < 0, idx + n, idx)
        flat = np.ravel_multi_index(tuple(coords), arr.shape) if idx.size else idx
    vals = align(values, d)
    vals = np.broadcast_to(np.asarray(vals), d.local_shape).astype(arr.dtype)
    flat_set(arr, _from_local(flat, d).ravel(), _from_local(vals, d).ravel())


def fill_diagonal(a: D2O, val: Any, wrap: bool = False) -> None:
    """numpy's ``fill_diagonal``: the main diagonal takes ``val`` (cycled).

    Local: every rank writes the diagonal elements of its own piece (global indices
    known), taking their values from ``val`` by their position on the diagonal; a
    distributed ``val`` is fetched by those positions."""
    if a.ndim < 2:
        raise ValueError("array must be at least 2-d")
    end = None
    if a.ndim == 2:
        step = a.shape[1] + 1
        if not wrap:
            end = a.shape[1] * a.shape[1]
    else:
        if not np.all(np.diff(a.shape) == 0):
            raise ValueError("All dimensions of input must be of equal length")
        step = 1 + int(np.cumprod(a.shape[:-1]).sum())
    flat_set(a, slice(None, end, step), val)
