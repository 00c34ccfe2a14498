"""Who holds which elements of a mesh layout: vectorised owner lookups for indexing.

The element and fancy keys of `d2o.ops.meshindex` ask, for global coordinates, which
rank sends an element (its *owner*: the holder with coordinate 0 along every replica
mesh axis, the rank whose `source` holds it), where it sits in that rank's piece, and
which of them this rank holds (every replica writes).  Per mesh axis that splits an
array axis, the runs of all its coordinates form one sorted table (`_table`: a
``searchsorted`` finds the coordinate and the local position of any index), so a
lookup costs a few numpy calls per axis whatever the layout: blocks, block-cyclic
runs, or the given pieces of a sliced or reversed view.

Nothing here communicates.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..core.cache import BoundedCache
from .distributors import as_runs, run_length
from .mesh import MeshDistributor

__all__ = ["lookup_ok", "element_owner", "element_here", "owner_lin", "held_here"]


def lookup_ok(d: MeshDistributor) -> bool:
    """True where every array axis is split by one mesh axis at most (a view whose pieces
    intersect the cuts of two mesh axes is left to the slab equivalent)."""
    named = [s for s in d.split if s is not None]
    return len(set(named)) == len(named)


_TABLES = BoundedCache(512)


def _table(d: MeshDistributor, m: int) -> tuple:
    """Mesh axis ``m``'s runs as sorted arrays: (starts, stops, coordinate, local position
    of the start in that coordinate's piece, piece length per coordinate); cached."""
    key = (d, m)
    t = _TABLES.get(key)
    if t is None:
        rows = []
        for c, entry in enumerate(d.runs[m]):
            pos = 0
            for lo, hi in as_runs(entry):
                rows.append((lo, hi, c, pos))
                pos += hi - lo
        rows.sort()
        arr = np.array(rows, dtype=np.intp).reshape(-1, 4)
        lengths = np.array([run_length(e) for e in d.runs[m]], dtype=np.intp)
        t = _TABLES.put(key, (arr[:, 0].copy(), arr[:, 1].copy(), arr[:, 2].copy(),
                              arr[:, 3].copy(), lengths))  # fmt: skip
    return t


def _find(d: MeshDistributor, m: int, x: Any) -> tuple[np.ndarray, np.ndarray]:
    """(coordinate along mesh axis ``m``, local position) of the global indices ``x`` of
    the array axis it splits (valid indices: every index lies in one run)."""
    starts, _, coord, pos, _ = _table(d, m)
    j = np.searchsorted(starts, x, side="right") - 1
    return coord[j], pos[j] + (x - starts[j])


def element_owner(d: MeshDistributor, point: list) -> tuple[int, tuple]:
    """(owner rank, index into the owner's piece) of the element at global ``point`` (valid
    non-negative indices)."""
    mesh = d.layout.mesh
    coords = [0] * len(mesh)
    idx = list(point)
    for m, s in enumerate(d.split):
        if s is None:
            continue
        c, p = _find(d, m, np.intp(point[s]))
        coords[m], idx[s] = int(c), int(p)
    return int(np.ravel_multi_index(coords, mesh)), tuple(idx)


def element_here(d: MeshDistributor, point: list) -> tuple | None:
    """The index into this rank's piece of the element at global ``point``, None when this
    rank does not hold it (replicas hold it too)."""
    idx = list(point)
    for m, s in enumerate(d.split):
        if s is None:
            continue
        c, p = _find(d, m, np.intp(point[s]))
        if int(c) != d.coords[m]:
            return None
        idx[s] = int(p)
    return tuple(idx)


def owner_lin(d: MeshDistributor, coords: list, shape: tuple) -> tuple[np.ndarray, np.ndarray]:
    """Owner rank and flat position (C order) in the owner's piece of each element whose
    global coordinates per array axis ``coords`` broadcast to ``shape``; raveled."""
    mesh = d.layout.mesh
    g = d.global_shape
    owner = np.zeros((), dtype=np.intp)
    pos = [np.asarray(c, dtype=np.intp) for c in coords]
    ext: list = list(g)  # per array axis: the owner's piece length (array where it varies)
    for m, n in enumerate(mesh):
        s = d.split[m]
        if s is None:
            owner = owner * n
            continue
        c, p = _find(d, m, pos[s])
        owner = owner * n + c
        pos[s] = p
        ext[s] = _table(d, m)[4][c]
    lin = np.zeros((), dtype=np.intp)
    for a in range(len(g)):
        lin = lin * ext[a] + pos[a]
    return np.broadcast_to(owner, shape).ravel(), np.broadcast_to(lin, shape).ravel()


def held_here(d: MeshDistributor, coords: list, shape: tuple) -> tuple[np.ndarray, tuple]:
    """Of the elements at global ``coords`` (broadcast to ``shape``): a boolean mask of
    those this rank holds and, for them, their index arrays into its piece (C order)."""
    held = np.ones((), dtype=bool)
    pos = [np.asarray(c, dtype=np.intp) for c in coords]
    for m, s in enumerate(d.split):
        if s is None:
            continue
        c, p = _find(d, m, pos[s])
        held = held & (c == d.coords[m])
        pos[s] = p
    held = np.broadcast_to(held, shape)
    return held, tuple(np.broadcast_to(p, shape)[held] for p in pos)
