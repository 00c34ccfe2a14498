"""Indexing's helpers: the layouts of results, owners of coordinates, canonical keys.

Part of `d2o.ops.indexing` (see its notes); nothing here communicates except
`_resolve_replicated` (a distributed key made replicated).
"""

from __future__ import annotations

from itertools import accumulate
from typing import Any

import numpy as np

from ..array.base import Array as D2O
from ..core.comm import Comm
from ..core.keys import (
    Key,
    canonical,
)
from ..layouts.distributors import Distributor, get_distributor, slab_distributor

__all__: list[str] = []

_NUMERIC = (int, float, complex, bool, np.number, np.bool_)


# -- layouts --------------------------------------------------------------------


def offsets(lengths) -> list[int]:
    if isinstance(lengths, np.ndarray):
        lengths = lengths.tolist()
    return [0, *accumulate(int(n) for n in lengths)]


def freeform_slab(shape: tuple, comm: Comm, axis: int, lengths, strategy: str = "freeform"):
    return slab_distributor(tuple(shape), comm, axis, offsets(lengths), strategy)


def spread(shape: tuple, comm: Comm) -> Distributor:
    """'equal' along the longest axis (a result produced away from its owners)."""
    if not shape:
        return get_distributor("not", (), comm)
    return get_distributor("equal", tuple(shape), comm, int(np.argmax(shape)))


def owner_lin(d: Distributor, coords: list, shape: tuple) -> tuple[np.ndarray, np.ndarray]:
    """Owner rank and flat position in the owner's piece of each element (C order)."""
    g = d.global_shape
    n = len(g)
    if d.replicated:
        lin = np.zeros((), dtype=np.intp)
        for k in range(n):
            lin = lin * g[k] + coords[k]
        lin = np.broadcast_to(lin, shape).ravel()
        return np.full(lin.size, d.comm.rank, dtype=np.intp), lin
    ax = d.axis
    offs = d.bounds_array()
    c_ax = np.broadcast_to(coords[ax], shape)
    owner = np.searchsorted(offs, c_ax, side="right") - 1
    lin = c_ax - offs[owner]
    for k in range(ax + 1, n):
        lin = lin * g[k] + coords[k]
    if ax > 0:
        inner = int(np.prod(g[ax + 1 :], dtype=np.int64))
        pre = np.zeros((), dtype=np.intp)
        for k in range(ax):
            pre = pre * g[k] + coords[k]
        lin = lin + pre * ((offs[owner + 1] - offs[owner]) * inner)
    return owner.ravel(), np.broadcast_to(lin, shape).ravel()


def full_box(shape: tuple) -> tuple:
    return tuple((0, n) for n in shape)


def box_along(shape: tuple, axis: int, a: int, b: int) -> tuple:
    box = list(full_box(shape))
    box[axis] = (a, b)
    return tuple(box)


def shape_of(box: tuple) -> tuple:
    return tuple(b - a for a, b in box)


# -- keys -----------------------------------------------------------------------


def _resolve_replicated(key: Any, comm: Comm) -> Any:
    """Replace distributed objects that every rank holds whole by their numpy data."""
    if isinstance(key, D2O):
        d = key.distributor
        return key.data if (d.replicated or d.comm.size == 1) else key
    if type(key) is tuple and any(isinstance(x, D2O) for x in key):
        return tuple(_resolve_replicated(x, comm) for x in key)
    return key


def canonical_key(obj: D2O, key: Any) -> Key:
    return canonical(
        _resolve_replicated(key, obj.distributor.comm), obj.distributor.global_shape, D2O
    )


def adv_items(k: Key):
    return [(i, it) for i, it in enumerate(k.items) if it[0] == "a"]
