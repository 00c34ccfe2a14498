"""Ghost-cell widths of layouts: ``d2o.layout(..., halo=w)``.

The width is a property of the layout's distributors (`width`), kept in a side table so
the distributors themselves stay plain slab or mesh layouts.  The buffers and the
exchange that fills them are `d2o.move.ghost`.  Nothing here communicates.
"""

from __future__ import annotations

import weakref

import numpy as np

from .distributors import Distributor, SlabDistributor, is_runs

__all__ = ["width", "check_width", "halo_distributor", "interior"]

#: distributor -> halo width (only distributors made by a layout with ``halo=``)
_WIDTH: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def width(d: Distributor) -> int:
    """The ghost-cell width of layout ``d`` (0: none)."""
    return _WIDTH.get(d, 0)


def check_width(w: object) -> int:
    """A halo width argument: a non-negative integer (TypeError, ValueError)."""
    if isinstance(w, bool) or not isinstance(w, (int, np.integer)):
        raise TypeError(f"halo width must be an integer, got {w!r}")
    if w < 0:
        raise ValueError(f"halo width must be non-negative, got {w}")
    return int(w)


def halo_distributor(d: Distributor, w: int) -> Distributor:
    """``d`` with ghost cells of width ``w`` (a twin instance for a shared slab layout;
    a layout's own mesh distributor itself), ValueError where ``w`` exceeds a piece (the ghost cells would
    reach past the neighbour) or the layout is block-cyclic.  Local."""
    if w == 0 or d.replicated:
        return d
    axes = d.split_axes()
    for a in axes:
        extents = []
        for r in range(d.comm.size):
            e = d.region(r)[a]
            if is_runs(e):
                raise ValueError("ghost cells need block partitions, not block-cyclic ones")
            if e[1] > e[0]:
                extents.append(e[1] - e[0])
        if extents and w > min(extents):
            raise ValueError(
                f"halo width {w} exceeds the smallest piece ({min(extents)} along axis {a}) of "
                f"shape {d.global_shape} on {d.comm.size} ranks"
            )
    out = d
    if type(d) is SlabDistributor:  # the plain one is shared (cached): a twin of its own
        out = SlabDistributor(d.global_shape, d.comm, d.strategy, d.axis, d.bounds())  # type: ignore[arg-type]
    _WIDTH[out] = w
    return out


def interior(d: Distributor, w: int) -> tuple:
    axes = set(d.split_axes())
    return tuple(slice(w, w + n) if a in axes else slice(None) for a, n in enumerate(d.local_shape))
