"""`d2o.numpy`'s axis-local functions: their table entries.

A function acting along some axes runs locally where they are whole on every rank, else
after one exchange that makes them whole (`d2o.ops.axislocal.axis_local`).  ``roll``
along a slab's split axis sends only the rows that cross a rank boundary (point to
point); ``diagonal`` of a 2-d slab is local.  ``axis=None`` (the flattened array) takes
the bounded fallback unless said otherwise.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from ..array.base import Array as D2O
from ..array.base import from_local as _from_local
from ..array.slabs import as_slab
from ..core.errors import agreed
from ..layouts.distributors import as_runs, get_distributor, slab_distributor
from ..layouts.mesh import is_mesh, subcomm
from ..move.halo import rows_for, slab_rows
from ..move.redistribution import exchange, redistribute
from ..ops import creation as _creation
from ..ops.axislocal import axis_local, fallback, whole_along
from . import composed as _composed
from .factories import agreed_axes, axis_entry, normalize_axis_index, out_axis_drop
from .shapes import flip

__all__ = ["fill", "roll", "apply_along_axis", "gradient", "diagonal", "take_along_axis"]


def roll(a, shift, axis=None):
    """numpy's ``roll`` along given axes: along a slab's split axis the rows that cross a
    rank boundary move point to point (`_roll_split`), along other axes it is local
    (axis-local).  ``axis=None`` rolls the flattened array: for 1-d input that is
    ``axis=0``; for slabs split along axis 0 the flattened pieces are the pieces' own
    memory, so it is a roll of ``a.ravel()`` along its split axis, reshaped back (meshes
    through their slab equivalent); other layouts take the fallback.  On process meshes
    and block-cyclic layouts, along split axes: `_roll_mesh`."""
    if axis is None and isinstance(a, D2O):
        if a.ndim > 1 and is_mesh(a.distributor):
            a = as_slab(a)  # the flattened order: through the slab equivalent
        if a.ndim == 1:
            axis = 0
        elif a.ndim > 1 and slab_rows(a.distributor) and a.distributor.axis == 0:
            return roll(a.ravel(), shift, 0).reshape(a.shape)
    if axis is None or not isinstance(a, D2O):
        return fallback("roll", np.roll, (a, shift), {"axis": axis})
    core = agreed_axes(a, axis, allow_duplicate=True)
    d = a.distributor
    if is_mesh(d) and set(core) & set(d.split_axes()):
        with agreed(d.comm):
            net = _net_shifts(a, shift, axis, core)
        return _roll_mesh(a, net)
    if slab_rows(d) and d.axis in core:
        with agreed(d.comm):
            net = _net_shifts(a, shift, axis, core)
        rolled = _roll_split(a, net.pop(d.axis))
        rest = [(ax, sh) for ax, sh in net.items() if sh]
        if not rest:
            return rolled
        piece = np.roll(rolled.data, [sh for _, sh in rest], axis=[ax for ax, _ in rest])
        return _from_local(piece, d)
    return axis_local("roll", lambda p: np.roll(p, shift, axis=axis), a, core)


def _net_shifts(a, shift: Any, axis: Any, core: tuple) -> dict:
    """The total shift per rolled axis (numpy's broadcasting of ``shift`` and ``axis``)."""
    net = dict.fromkeys(core, 0)
    for sh, ax in np.broadcast(shift, axis):
        net[int(ax) % a.ndim] += operator.index(sh)
    return net


def _shifted(entry: tuple, s: int, n: int) -> tuple:
    """One axis of a rank's region rolled by ``s`` (``0 <= s < n``): the runs of the old
    indices ``(j - s) % n`` its indices ``j`` take their values from, sorted, and how many
    of its indices wrap around (``j < s``: their sources are the last runs)."""
    straight, wrapped, below = [], [], 0
    for lo, hi in as_runs(entry):
        if min(hi, s) > lo:
            wrapped.append((lo - s + n, min(hi, s) - s + n))
            below += min(hi, s) - lo
        if hi > max(lo, s):
            straight.append((max(lo, s) - s, hi - s))
    runs: list = []
    for lo, hi in straight + wrapped:  # ascending: every wrapped source is >= n - s
        if runs and runs[-1][1] == lo:
            runs[-1] = (runs[-1][0], hi)
        else:
            runs.append((lo, hi))
    return tuple(runs), below


def _roll_mesh(a, net: dict):
    """``np.roll`` of an array on a process mesh or block-cyclic layout by ``net`` (axis:
    shift), in its own layout.  Collective in the sub-communicator of the mesh axes that
    split a rolled axis: one exchange (`d2o.move.redistribution.exchange`, its plan cached)
    in which each rank receives exactly the elements of its piece that another rank held
    (on block axes the ``s`` slices that cross each block boundary; on block-cyclic axes
    every element whose block changes owner), then a local roll puts the wrapped part in
    place; the shifts of whole axes are local."""
    d = a.distributor
    shifts = {ax: (sh % a.shape[ax] if a.shape[ax] else 0) for ax, sh in net.items()}
    split = {ax: sh for ax, sh in shifts.items() if sh and ax in d.split_axes()}
    local = {ax: sh for ax, sh in shifts.items() if sh and ax not in split}
    data = a.data
    if split:
        mesh_axes = tuple(m for m, s in enumerate(d.split) if s in split)
        sub = subcomm(d, mesh_axes)
        extents = [d.layout.mesh[m] for m in mesh_axes]

        def rank_of(j: int) -> int:
            coords = list(d.coords)
            for m, c in zip(mesh_axes, np.unravel_index(j, extents)):
                coords[m] = int(c)
            return int(np.ravel_multi_index(coords, d.layout.mesh))

        def have(j: int) -> tuple:
            return d.region(rank_of(j))

        def want(j: int) -> tuple:
            box = d.region(rank_of(j))
            return tuple(
                _shifted(e, split[ax], a.shape[ax])[0] if ax in split else e
                for ax, e in enumerate(box)
            )

        key = ("roll", d, tuple(sorted(split.items())))  # rank_of: this rank's coordinates
        data = exchange(sub, data, have, want, key=key)
        for ax, sh in split.items():
            local[ax] = _shifted(d.region(d.comm.rank)[ax], sh, a.shape[ax])[1]
    local = {ax: sh for ax, sh in local.items() if sh}
    if local:
        data = np.roll(data, list(local.values()), axis=list(local))
    elif data is a.data:
        data = data.copy()
    return _from_local(data, d)


def _roll_split(a, s: int):
    """``np.roll(a, s, axis)`` along the split axis of a slab layout: each rank takes
    its new rows from old rows ``s`` before them (wrapping around), its own in place and
    the others point to point (two rounds: before and after the wrap).  Collective."""
    d = a.distributor
    ax, n, b = d.axis, a.shape[d.axis], d.bounds()
    s = s % n if n else 0
    ranks = range(d.comm.size)
    # new rows [0, s) are old rows [n - s, n); new rows [s, n) are old rows [0, n - s)
    wrapped = [(min(b[r], s) + n - s, min(b[r + 1], s) + n - s) for r in ranks]
    straight = [(max(b[r], s) - s, max(b[r + 1], s) - s) for r in ranks]
    pieces = [arr for want in (wrapped, straight) for _, arr in rows_for(a.data, d, want).pieces]
    return _from_local(np.concatenate(pieces, axis=ax), d)


def apply_along_axis(func1d, axis, arr, *args, **kwargs):
    """numpy's ``apply_along_axis`` (axis-local: rows of the other axes stay in place)."""
    (ax,) = agreed_axes(arr, operator.index(axis))

    def out_axis(a: int, res_ndim: int) -> int:
        return a if a < ax else a + res_ndim - arr.ndim

    return axis_local("apply_along_axis",
                      lambda p: np.apply_along_axis(func1d, ax, p, *args, **kwargs),
                      arr, (ax,), out_axis=out_axis)  # fmt: skip


def gradient(f, *varargs, axis=None, edge_order=1):
    """numpy's ``gradient`` with scalar spacings, one axis at a time: along split axes of
    slabs and block meshes shifted views (boundary slices move), along whole axes local;
    block-cyclic operands go through their slab equivalent (one exchange)."""
    axes = tuple(range(f.ndim)) if axis is None else agreed_axes(f, axis)
    if len(varargs) == 0:
        spacing = [1.0] * len(axes)
    elif len(varargs) == 1 and np.ndim(varargs[0]) == 0:
        spacing = list(varargs) * len(axes)
    elif len(varargs) == len(axes) and all(np.ndim(v) == 0 for v in varargs):
        spacing = list(varargs)
    else:
        return fallback(
            "gradient", np.gradient, (f,) + varargs, {"axis": axis, "edge_order": edge_order}
        )
    if any(_cyclic_along(f.distributor, k) for k in axes):
        f = as_slab(f)  # block-cyclic: shifted views would move a slice per small block
    out = [_gradient_one(f, k, h, edge_order) for k, h in zip(axes, spacing)]
    return out[0] if len(out) == 1 else tuple(out)


def _gradient_one(f, k: int, h: Any, edge_order: Any):
    """One axis of ``gradient``: shifted views along a split axis of a slab or a block
    mesh (boundary slices only; `d2o.numpy.composed.gradient_along`), else axis-local.
    (`gradient` moves block-cyclic operands to their slab equivalent first.)"""
    if (
        _composed.split_axis(f, k) is not None
        and edge_order in (1, 2)
        and f.shape[k] >= edge_order + 1
        and f.dtype.kind in "iufc"
    ):
        return _composed.gradient_along(f, k, h, edge_order)
    return axis_local(
        "gradient", lambda p: np.gradient(p, h, axis=k, edge_order=edge_order), f, (k,)
    )


def unwrap(p, discont=None, axis=-1, *, period=2 * np.pi):
    """numpy's ``unwrap`` along ``axis`` (axis-local); ``axis=None`` is numpy's TypeError,
    raised on every rank before anything moves."""
    if axis is None and isinstance(p, D2O):
        raise TypeError("'NoneType' object cannot be interpreted as an integer")
    return _unwrap(p, discont, axis, period=period)


_unwrap = axis_entry(np.unwrap, "unwrap")


def _cyclic_along(d: Any, k: int) -> bool:
    """True where a block-cyclic mesh axis splits axis ``k`` (shifted views along it would
    move a slice per small block)."""
    return is_mesh(d) and any(
        s == k and d.layout.block[m] is not None for m, s in enumerate(d.split)
    )


def diagonal(a, offset=0, axis1=0, axis2=1):
    """numpy's ``diagonal`` (a copy here): 2-d slabs take the diagonal of their rows or
    columns locally; other arrays act axis-locally over the two axes."""
    a1, a2 = agreed_axes(a, (axis1, axis2), allow_duplicate=True)
    if a1 == a2:
        raise ValueError("axis1 and axis2 cannot be the same")

    a = as_slab(a)
    d = a.distributor
    if (
        a.ndim == 2
        and not d.replicated
        and d.axis is not None
        and d.comm.size > 1
        and (a1, a2) in ((0, 1), (1, 0))
    ):
        return _slab_diagonal(a, offset if (a1, a2) == (0, 1) else -offset)
    oa = out_axis_drop((a1, a2), a.ndim, False)
    return axis_local("diagonal", lambda p: np.diagonal(p, offset, a1, a2), a, (a1, a2),
                      out_axis=lambda x, n: oa(x, n - 1))  # fmt: skip


def _slab_diagonal(a: D2O, k: int) -> D2O:
    d = a.distributor
    n, m = a.shape
    bounds = d.bounds()

    def count(
        lo: int, hi: int
    ) -> int:  # diagonal elements (i, i + k) with i (or i + k) in [lo, hi)
        if d.axis == 0:
            s, e = max(lo, -k, 0), min(hi, m - k, n)
        else:
            s, e = max(lo - k, 0, -k), min(hi - k, n, m - k)
        return max(0, e - s)

    lengths = [count(bounds[r], bounds[r + 1]) for r in range(d.comm.size)]
    lo = bounds[d.comm.rank]
    piece = np.diagonal(a.data, k + lo if d.axis == 0 else k - lo).copy()
    offs = tuple(np.concatenate(([0], np.cumsum(lengths))).tolist())
    return _from_local(piece, slab_distributor((offs[-1],), d.comm, 0, offs, "freeform"))


def take_along_axis(arr, indices, axis=-1):
    """numpy's ``take_along_axis`` (axis-local: both operands cut along another axis)."""
    if axis is None or not isinstance(arr, D2O) or arr.ndim < 2:
        return fallback("take_along_axis", np.take_along_axis, (arr, indices), {"axis": axis})

    arr = as_slab(arr)
    (ax,) = agreed_axes(arr, axis)
    idx = indices if isinstance(indices, D2O) else _creation.asarray(indices, dist=False)
    if idx.ndim != arr.ndim:
        raise ValueError("`indices` and `arr` must have the same number of dimensions")
    data, d = whole_along(arr, (ax,))
    if d.replicated:
        it = get_distributor("not", idx.shape, d.comm)
    else:
        if idx.shape[d.axis] != arr.shape[d.axis]:
            return fallback("take_along_axis", np.take_along_axis, (arr, indices), {"axis": axis})
        it = d.slabs_like(idx.shape, d.axis)
    idx = as_slab(idx)
    piece = redistribute(idx.data, idx.distributor, it)
    with agreed(d.comm):
        res = np.take_along_axis(data, piece, axis=ax)
    if d.replicated:
        return _from_local(res, get_distributor("not", res.shape, d.comm))
    return _from_local(
        res,
        d.slabs_like(res.shape[: d.axis] + (arr.shape[d.axis],) + res.shape[d.axis + 1 :], d.axis),
    )


def with_descending(f: Callable, indices: bool) -> Callable:
    """sort/argsort with the array API's ``descending`` (stable: equal keys keep their
    order, from a stable ascending sort of the reversed axis)."""

    def g(a, axis=-1, kind=None, order=None, *, stable=None, descending=False):
        kw = {} if stable is None else {"stable": stable}
        if not descending:
            return f(a, axis=axis, kind=kind, order=order, **kw)
        if axis is None:
            a, axis = (a.ravel() if isinstance(a, D2O) else np.ravel(a)), 0
        ax = normalize_axis_index(axis, np.ndim(a))
        rev = flip(a, ax) if isinstance(a, D2O) else np.flip(a, ax)
        res = flip(f(rev, axis=ax, kind="stable", order=order), ax)
        return (a.shape[ax] - 1) - res if indices else res

    return g


def fill(table: dict) -> None:
    """Enter the axis-local functions (the sort machinery, `d2o.numpy.sorting`, refines
    some of them later)."""
    for n in ("partition", "argpartition", "diff"):
        table[n] = ("axis", axis_entry(getattr(np, n), n), "along the axis")
    table["unwrap"] = ("axis", unwrap, "along the axis")
    for n in ("percentile quantile nanmedian nanpercentile nanquantile").split():
        note = "over given axes (the sort machinery refines them: d2o.numpy.sorting)"
        table[n] = ("axis", axis_entry(getattr(np, n), n, drop=True), note)
    table["sort"] = (
        "axis",
        with_descending(axis_entry(np.sort, "sort"), False),
        "axis=None: fallback",
    )
    table["argsort"] = (
        "axis",
        with_descending(axis_entry(np.argsort, "argsort"), True),
        "axis=None: fallback",
    )
    for f in (roll, apply_along_axis, gradient, diagonal, take_along_axis):
        table[f.__name__] = ("axis", f, "")
