"""Joining and splitting for `d2o.numpy`: ``concatenate`` and the functions built on it
(``stack``, ``hstack``, ``vstack``, ``dstack``, ``column_stack``, ``append``), and the
splits (``split``, ``array_split``, ...), which are views as in numpy.

``concatenate`` is local when every input is cut along the same other axis with the
same bounds (the common case: columns of row-split arrays); otherwise each input moves
once, straight into the result's pieces (one exchange per distributed input).
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

try:
    from numpy.lib.array_utils import normalize_axis_index
except ImportError:  # numpy < 2
    from numpy.core.multiarray import normalize_axis_index

from ..array.base import Array as D2O
from ..array.base import from_local as _from_local
from ..array.slabs import as_slab
from ..core.errors import agreed
from ..layouts.distributors import Distributor
from ..layouts.mesh import is_mesh
from ..move.redistribution import exchange
from .creation import asarray, distributor_for

__all__ = [
    "concatenate", "stack", "hstack", "vstack", "dstack", "column_stack", "append",
    "split", "array_split", "hsplit", "vsplit", "dsplit", "unstack", "atleast_1d",
    "atleast_2d", "atleast_3d", "expand_dims", "squeeze",
]  # fmt: skip


def _comm_of(arrays: list) -> Any:
    return next(a.distributor.comm for a in arrays if isinstance(a, D2O))


def _check_concat(shapes: list, axis: Any) -> int:
    if not shapes:
        raise ValueError("need at least one array to concatenate")
    nd = len(shapes[0])
    if nd == 0:
        raise ValueError("zero-dimensional arrays cannot be concatenated")
    ax = normalize_axis_index(operator.index(axis), nd)
    for i, s in enumerate(shapes[1:], 1):
        if len(s) != nd:
            raise ValueError(
                "all the input array dimensions except for the concatenation axis must match "
                f"exactly, but along dimension 0, the array at index 0 has {nd} dimension(s) "
                f"and the array at index {i} has {len(s)} dimension(s)"
            )
        for a in range(nd):
            if a != ax and s[a] != shapes[0][a]:
                raise ValueError(
                    "all the input array dimensions except for the concatenation axis must "
                    f"match exactly, but along dimension {a}, the array at index 0 has size "
                    f"{shapes[0][a]} and the array at index {i} has size {s[a]}"
                )
    return ax


def _same_slabs(arrays: list, ax: int) -> Distributor | None:
    """The common slab layout of all inputs when they are cut along one axis other than
    ``ax`` with the same bounds (then concatenation is local)."""
    ds = [a.distributor for a in arrays]
    d0 = ds[0]
    if d0.replicated or d0.axis is None or d0.axis == ax or is_mesh(d0):
        return None
    for d in ds[1:]:
        if d.replicated or is_mesh(d) or d.axis != d0.axis or d.bounds() != d0.bounds():
            return None
    return d0


def concatenate(arrays: Any, axis: Any = 0, out: Any = None, *, dtype: Any = None,
                casting: str = "same_kind") -> D2O:  # fmt: skip
    """numpy's ``concatenate``; ``axis=None`` joins the flattened arrays.  Collective
    (see the module notes)."""
    arrays = list(arrays)
    comm = _comm_of(arrays)
    if axis is None:
        arrays = [a.ravel() if isinstance(a, D2O) else np.ravel(a) for a in arrays]
        axis = 0
    with agreed(comm):
        ax = _check_concat([np.shape(a) for a in arrays], axis)
        dt = np.result_type(*[a.dtype if isinstance(a, D2O) else np.asarray(a) for a in arrays])
        if dtype is not None:
            dt = np.dtype(dtype)
        for a in arrays:
            src = a.dtype if isinstance(a, D2O) else np.asarray(a).dtype
            if not np.can_cast(src, dt, casting=casting):
                raise TypeError(
                    f"Cannot cast array data from {src!r} to {dt!r} according to the rule "
                    f"{casting!r}"
                )
    dist = [as_slab(a) if isinstance(a, D2O) else asarray(a, dist=False, comm=comm)
            for a in arrays]  # fmt: skip
    shape = list(dist[0].shape)
    shape[ax] = sum(a.shape[ax] for a in dist)
    shape = tuple(shape)
    common = _same_slabs(dist, ax)
    if common is not None:
        piece = np.concatenate([a.data for a in dist], axis=ax).astype(dt, copy=False)
        res = _from_local(piece, common.slabs_like(shape, common.axis))
    else:
        first = next(a for a in dist if not a.distributor.replicated) if any(
            not a.distributor.replicated for a in dist) else None  # fmt: skip
        target = distributor_for(None if first is None else True, shape, dt, comm)
        piece = np.empty(target.local_shape, dtype=dt)
        mine = target.region(comm.rank)
        lo = 0
        for a in dist:
            hi = lo + a.shape[ax]
            _place(a, target, ax, lo, hi, piece, mine)
            lo = hi
        res = _from_local(piece, target)
    if out is not None:
        out[...] = res
        return out
    return res


def _place(a: D2O, target: Distributor, ax: int, lo: int, hi: int, piece, mine) -> None:
    """Copy input ``a`` (slot ``[lo, hi)`` of axis ``ax`` of the result) into this rank's
    ``piece`` of the result's layout ``target``."""
    d = a.distributor

    def want(r: int) -> tuple | None:
        box = list(target.region(r))
        s, e = max(box[ax][0], lo), min(box[ax][1], hi)
        if e <= s:
            return None
        box[ax] = (s - lo, e - lo)
        return tuple(box)

    w = want(a.distributor.comm.rank)
    if d.replicated:
        part = None if w is None else a.data[tuple(slice(*b) for b in w)]
    else:
        part = exchange(
            d.comm, a.data, d.region, want, send=d.source, key=("place", d, target, ax, lo, hi)
        )
    if w is None:
        return
    at = [slice(None)] * piece.ndim
    at[ax] = slice(w[ax][0] + lo - mine[ax][0], w[ax][1] + lo - mine[ax][0])
    piece[tuple(at)] = part


def atleast_1d(*arys: Any) -> Any:
    """numpy's ``atleast_1d``: views."""
    res = [_at_least(a, 1) for a in arys]
    return res[0] if len(res) == 1 else tuple(res)


def atleast_2d(*arys: Any) -> Any:
    """numpy's ``atleast_2d``: views."""
    res = [_at_least(a, 2) for a in arys]
    return res[0] if len(res) == 1 else tuple(res)


def atleast_3d(*arys: Any) -> Any:
    """numpy's ``atleast_3d``: views (1-d ``(n,)`` becomes ``(1, n, 1)`` as in numpy)."""
    res = [_at_least(a, 3) for a in arys]
    return res[0] if len(res) == 1 else tuple(res)


def _at_least(a: Any, n: int) -> Any:
    if not isinstance(a, D2O):
        return (np.atleast_1d, np.atleast_2d, np.atleast_3d)[n - 1](a)
    if a.ndim >= n:
        return a
    if n == 3:
        key = {0: (None, None, None), 1: (None, slice(None), None), 2: (Ellipsis, None)}
        return a[key[a.ndim]]
    return a[(None,) * (n - a.ndim) + (Ellipsis,)]


def expand_dims(a: D2O, axis: Any) -> D2O:
    """numpy's ``expand_dims``: a view."""
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    nd = a.ndim + len(axes)
    axes = sorted(normalize_axis_index(operator.index(x), nd) for x in axes)
    if len(set(axes)) != len(axes):
        raise ValueError("repeated axis")
    key: list = []
    src = 0
    for i in range(nd):
        if i in axes:
            key.append(None)
        else:
            key.append(slice(None))
            src += 1
    return a[tuple(key)]


def squeeze(a: D2O, axis: Any = None) -> D2O:
    """numpy's ``squeeze``: a view."""
    if axis is None:
        axes = [i for i, n in enumerate(a.shape) if n == 1]
    else:
        axes = [axis] if isinstance(axis, (int, np.integer)) else list(axis)
        axes = [normalize_axis_index(operator.index(x), a.ndim) for x in axes]
        if any(a.shape[x] != 1 for x in axes):
            raise ValueError("cannot select an axis to squeeze out which has size not equal to one")
    return a[tuple(0 if i in axes else slice(None) for i in range(a.ndim)) + (Ellipsis,)]


def stack(arrays: Any, axis: int = 0, out: Any = None, *, dtype: Any = None,
          casting: str = "same_kind") -> D2O:  # fmt: skip
    """numpy's ``stack``: views with a new axis, then `concatenate`."""
    arrays = list(arrays)
    if not arrays:
        raise ValueError("need at least one array to stack")
    shapes = {np.shape(a) for a in arrays}
    if len(shapes) != 1:
        raise ValueError("all input arrays must have the same shape")
    nd = len(shapes.pop()) + 1
    ax = normalize_axis_index(operator.index(axis), nd)
    expanded = [expand_dims(a, ax) if isinstance(a, D2O) else np.expand_dims(a, ax)
                for a in arrays]  # fmt: skip
    return concatenate(expanded, axis=ax, out=out, dtype=dtype, casting=casting)


def hstack(tup: Any, *, dtype: Any = None, casting: str = "same_kind") -> D2O:
    """numpy's ``hstack``."""
    arrs = [_at_least(a, 1) for a in tup]
    return concatenate(arrs, axis=0 if arrs and arrs[0].ndim == 1 else 1, dtype=dtype,
                       casting=casting)  # fmt: skip


def vstack(tup: Any, *, dtype: Any = None, casting: str = "same_kind") -> D2O:
    """numpy's ``vstack``."""
    return concatenate([_at_least(a, 2) for a in tup], axis=0, dtype=dtype, casting=casting)


def dstack(tup: Any) -> D2O:
    """numpy's ``dstack``."""
    return concatenate([_at_least(a, 3) for a in tup], axis=2)


def column_stack(tup: Any) -> D2O:
    """numpy's ``column_stack``: 1-d inputs become columns."""
    cols = []
    for a in tup:
        if np.ndim(a) < 2:
            a = a[:, None] if isinstance(a, D2O) else np.array(a, ndmin=2).T
        cols.append(a)
    return concatenate(cols, axis=1)


def append(arr: Any, values: Any, axis: Any = None) -> D2O:
    """numpy's ``append``."""
    if axis is None:
        return concatenate([arr, values], axis=None)
    return concatenate([arr, values], axis=axis)


def array_split(ary: D2O, indices_or_sections: Any, axis: int = 0) -> list:
    """numpy's ``array_split``: views (nothing moves)."""
    ax = normalize_axis_index(operator.index(axis), ary.ndim)
    n = ary.shape[ax]
    if isinstance(indices_or_sections, (int, np.integer)):
        k = int(indices_or_sections)
        if k <= 0:
            raise ValueError("number sections must be larger than 0.")
        each, extra = divmod(n, k)
        sizes = [each + 1] * extra + [each] * (k - extra)
        cuts = np.concatenate(([0], np.cumsum(sizes))).tolist()
    else:
        cuts = [0] + list(indices_or_sections) + [n]
    lead = (slice(None),) * ax
    return [ary[lead + (slice(cuts[i], max(cuts[i], cuts[i + 1])),)]
            for i in range(len(cuts) - 1)]  # fmt: skip


def split(ary: D2O, indices_or_sections: Any, axis: int = 0) -> list:
    """numpy's ``split``: views; equal sections must divide the axis."""
    if isinstance(indices_or_sections, (int, np.integer)):
        n = ary.shape[normalize_axis_index(operator.index(axis), ary.ndim)]
        if indices_or_sections <= 0 or n % indices_or_sections:
            raise ValueError("array split does not result in an equal division")
    return array_split(ary, indices_or_sections, axis)


def hsplit(ary: D2O, indices_or_sections: Any) -> list:
    """numpy's ``hsplit``."""
    if ary.ndim == 0:
        raise ValueError("hsplit only works on arrays of 1 or more dimensions")
    return split(ary, indices_or_sections, 1 if ary.ndim > 1 else 0)


def vsplit(ary: D2O, indices_or_sections: Any) -> list:
    """numpy's ``vsplit``."""
    if ary.ndim < 2:
        raise ValueError("vsplit only works on arrays of 2 or more dimensions")
    return split(ary, indices_or_sections, 0)


def dsplit(ary: D2O, indices_or_sections: Any) -> list:
    """numpy's ``dsplit``."""
    if ary.ndim < 3:
        raise ValueError("dsplit only works on arrays of 3 or more dimensions")
    return split(ary, indices_or_sections, 2)


def unstack(x: D2O, /, *, axis: int = 0) -> tuple:
    """numpy's ``unstack``: views."""
    ax = normalize_axis_index(operator.index(axis), x.ndim)
    return tuple(x[(slice(None),) * ax + (i,) + (Ellipsis,)] for i in range(x.shape[ax]))
