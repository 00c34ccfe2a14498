"""Ghost cells: ``d2o.layout(..., halo=w)`` and ``x.update_halos()``.

For users who run their own local kernels (C, Cython, Numba, numpy) over
``x.get_local_data(copy=False, halos=True)``: on a layout with halo width ``w`` each
rank's piece lives inside a buffer padded by ``w`` cells on both sides of every split
axis (Global Arrays' and GAiN's ghost cells), and ``x.data`` is a view of the buffer's
interior, so every d2o operation sees the piece as usual.  `update_halos` fills the
padding with the neighbours' boundary cells; padding beyond the global array's edge is
left as it is (zero when the buffer was made).

The width is a property of the layout's distributors (`width`), kept in a side table so
the distributors themselves stay plain slab or mesh layouts: results of operations on
such arrays keep the layout, and get their buffer when first asked (`padded`: the piece
moves into it then, so a view made of such a result before that keeps the old memory;
arrays created with the layout have their buffer from the start).

Communication of `update_halos`: each rank sends the cells of its piece that lie in a
neighbour's ghost layers to that neighbour, point to point, and nothing else: on slabs
its ``w`` boundary layers (`d2o.move.halo.rows_for`); on meshes the faces, edges and corners
(diagonal neighbours included), from the replica responsible for sending.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..layouts.distributors import SlabDistributor
from ..layouts.ghost import interior as _interior
from ..layouts.ghost import width
from .halo import boxes_for, rows_for

if TYPE_CHECKING:
    from ..array.base import Array as D2O

__all__ = ["padded", "padded_or_raise", "update_halos"]


def padded_or_raise(x: D2O) -> np.ndarray:
    """`padded`, ValueError for an array without ghost cells."""
    if not width(x.distributor):
        raise ValueError(_NONE)
    return padded(x)


_NONE = "this array has no ghost cells: create it with d2o.layout(..., halo=width)"


def padded(x: D2O) -> np.ndarray:
    """``x``'s padded buffer, made (zeros around a copy of the piece) when ``x`` has none
    yet; ``x.data`` then is the buffer's interior.  A piece replaced by another array
    (``x.data = ...``) is copied into the buffer it had, so the buffer (held by a kernel,
    its cells beyond the array's edge included) stays the array's.  Local."""
    d = x.distributor
    w = width(d)
    buf = getattr(x, "_padded", None)
    if buf is not None and x.data.base is buf and x.data.shape == d.local_shape:
        return buf
    shape = tuple(n + 2 * w if a in d.split_axes() else n for a, n in enumerate(d.local_shape))
    if buf is None or buf.shape != shape or buf.dtype != x.data.dtype:
        buf = np.zeros(shape, dtype=x.data.dtype)
    inner = buf[_interior(d, w)]
    inner[...] = x.data
    x.data = inner
    x._padded = buf
    return buf


def update_halos(x: D2O) -> None:
    """Collective: fill ``x``'s ghost cells from its neighbours (module notes)."""
    d = x.distributor
    w = width(d)
    if not w:
        raise ValueError(_NONE)
    buf = padded(x)
    comm, me = d.comm, d.comm.rank
    if comm.size == 1:
        return
    if type(d) is SlabDistributor:
        k, b, n = d.axis, d.bounds(), d.global_shape[d.axis]  # type: ignore[index]
        assert k is not None
        want = [
            (max(b[r] - w, 0), min(b[r + 1] + w, n)) if b[r + 1] > b[r] else (b[r], b[r])
            for r in range(comm.size)
        ]
        parts = rows_for(x.data, d, want)
        start = want[me][0] - b[me] + w  # the buffer row of the first wanted row
        for i, (box, arr) in enumerate(parts.pieces):
            lo, hi = box[k]
            if i != parts.own and hi > lo:
                buf[(slice(None),) * k + (slice(start + lo, start + hi),)] = arr
        return
    shape, axes = d.global_shape, set(d.split_axes())

    def grown(r: int) -> tuple | None:
        box = d.region(r)
        if any(hi <= lo for lo, hi in box):
            return None
        return tuple(
            (max(lo - w, 0), min(hi + w, n)) if a in axes else (lo, hi)
            for a, ((lo, hi), n) in enumerate(zip(box, shape))
        )

    parts = boxes_for(x.data, d, grown)  # own cells stay; the others are ghost cells
    mine = grown(me)
    if mine is None:
        return
    own = d.region(me)
    for i, (box, arr) in enumerate(parts.pieces):
        if i != parts.own and arr.size:
            buf[
                tuple(
                    slice(
                        lo + g - o + (w if a in axes else 0), hi + g - o + (w if a in axes else 0)
                    )
                    for a, ((lo, hi), (g, _), (o, _)) in enumerate(zip(box, mine, own))
                )
            ] = arr
