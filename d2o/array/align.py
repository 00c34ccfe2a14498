"""Alignment of operands to a result layout, and the result-layout rule.

The layer below the feature modules (ufuncs, reductions, indexing, special
functions, shape functions): they all ask "which layout does a result of this
shape take" (`result_layout`) and "which part of this operand do I need for my
piece of that result" (`align`), on every layout, slabs and meshes alike.

Rule for mixed operands: ``out``'s layout when given; otherwise the first
distributed operand whose split axes survive broadcasting; replicated operands
are cut locally; all-replicated inputs give a replicated result.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..array.base import Array as D2O
from ..layouts.distributors import Distributor, get_distributor, index_of, like
from ..layouts.mesh import is_mesh, moved
from ..move.halo import Parts, boxes_for, rows_for, slab_rows
from ..move.redistribution import exchange, redistribute

__all__ = ["align", "align_out", "align_parts", "result_layout", "shifted_rows", "SCALARS",
           "SCALAR_TYPES"]  # fmt: skip

SCALARS = (int, float, complex, bool, np.generic)


def _subclasses(cls: type) -> set[type]:
    found = {cls}
    sub: type
    for sub in cls.__subclasses__():
        found |= _subclasses(sub)
    return found


#: The exact types of `SCALARS`' instances that are not user subclasses (Python's and
#: numpy's scalar types): ``type(x) in SCALAR_TYPES`` is the operators' first test, where
#: ``isinstance(x, SCALARS)`` of an array would try each of the five in turn.
SCALAR_TYPES = frozenset({int, float, complex, bool} | _subclasses(np.generic))


def shape_of(x: Any) -> tuple:
    return x.shape if isinstance(x, D2O) else np.shape(x)


def result_layout(operands: list, shape: tuple) -> Distributor:
    """The layout of a result of ``shape`` computed from ``operands`` (see module doc)."""
    comm = None
    fallback = None
    for x in operands:
        if not isinstance(x, D2O):
            continue
        d = x.distributor
        if comm is None:
            comm = d.comm
        elif d.comm is not comm:
            raise ValueError("operands live on different communicators")
        if d.replicated:
            continue
        shift = len(shape) - d.ndim
        if all(x.shape[a] == shape[a + shift] for a in d.split_axes()):
            if d.global_shape == shape:
                return d
            return moved(d, shape, shift) if is_mesh(d) else like(d, shape, axis=d.axis + shift)
        if fallback is None:
            fallback = d
    if fallback is not None:
        return like(fallback, shape, axis=0) if shape else get_distributor("not", shape, comm)
    return get_distributor("not", shape, comm)


def align_parts(x: Any, target: Distributor) -> Parts | None:
    """``x``'s rows for this rank's piece of ``target`` as `Parts` (own rows in place,
    boundary rows from the neighbours) where both are slabs along the same axis of ``x``
    but cut differently (a shifted view); None otherwise, communicating nothing.

    Collective (point to point) when it returns Parts.  The answer depends on the
    layouts only, so every rank takes the same branch."""
    if not isinstance(x, D2O):
        return None
    d = x.distributor
    if d is target:
        return None
    if is_mesh(target) and _near(d, target) and x.ndim == target.ndim:
        if not all(x.shape[a] == target.global_shape[a] for a in target.split_axes()):
            return None
        if _same_boxes(d, target, _wanted(x.shape, target)):
            return None  # align hands over x.data itself
        return boxes_for(x.data, d, _wanted(x.shape, target))
    if not shifted_rows(x, target):
        return None
    tb = target.bounds()
    return rows_for(x.data, d, [(tb[r], tb[r + 1]) for r in range(d.comm.size)])


def shifted_rows(x: D2O, target: Distributor) -> bool:
    """True when ``x``'s part for ``target``'s pieces is its own rows and its neighbours'
    boundary rows (`align_parts` returns them as `Parts`): both slabs along the same axis
    of ``x``, cut differently.  Depends on the layouts alone; no communication."""
    d = x.distributor
    if not (slab_rows(d) and slab_rows(target)):
        return False
    k = target.axis - (target.ndim - x.ndim)  # type: ignore[operator]
    if k < 0 or d.axis != k or x.shape[k] != target.global_shape[target.axis]:  # type: ignore[index]
        return False
    return d.bounds() != target.bounds()


def align(x: Any, target: Distributor) -> Any:
    """``x``'s part needed locally for a result of layout ``target`` (broadcast-aligned).

    Collective when ``x`` is a distributed object of another layout.
    """
    if isinstance(x, D2O):
        d = x.distributor
        if d is target:
            return x.data
        if not target.ndim:  # a 0-d result (a 0-d view's holders): one broadcast
            return redistribute(x.data, d, target)
        if target.replicated:
            return redistribute(x.data, d, get_distributor("not", x.shape, d.comm))
        if is_mesh(target):
            return _align_to_boxes(x, target)
        k = target.axis - (target.ndim - x.ndim)
        if k >= 0 and x.shape[k] == target.global_shape[target.axis]:
            if not d.replicated and d.axis == k and d.bounds() == target.bounds():
                return x.data
            want = target.slabs_like(x.shape, k)
            return redistribute(x.data, d, want)
        return redistribute(x.data, d, get_distributor("not", x.shape, d.comm))
    if target.replicated or not target.ndim or isinstance(x, SCALARS) or x is None:
        return x
    x = np.asarray(x)
    if is_mesh(target):
        return x[index_of(_wanted(x.shape, target)(target.comm.rank))]
    k = target.axis - (target.ndim - x.ndim)
    if k >= 0 and x.shape[k] != 1:
        return x[(slice(None),) * k + (slice(*target.span()),)]
    return x


def _wanted(shape: tuple, target: Distributor):
    """Per rank, the box of an operand of ``shape`` that meets ``target``'s box under
    broadcasting (whole along the operand's broadcast axes)."""
    shift = target.ndim - len(shape)
    full = target.global_shape[shift:]

    def want(rank: int) -> tuple:
        box = target.region(rank)[shift:]
        return tuple(b if n == m else (0, n) for n, m, b in zip(shape, full, box))

    return want


#: (operand distributor, target) -> True when the operand's boxes already are the wanted ones.
_IN_PLACE: dict = {}


def _same_boxes(d: Distributor, target: Distributor, want: Any) -> bool:
    """True when every rank's piece of ``d`` already is its wanted box (cached)."""
    key = (d, target)
    same = _IN_PLACE.get(key)
    if same is None:
        if len(_IN_PLACE) > 256:
            _IN_PLACE.clear()
        same = _IN_PLACE[key] = all(d.region(r) == want(r) for r in range(d.comm.size))
    return same


def _near(d: Distributor, target: Distributor) -> bool:
    """True when ``d`` and mesh layout ``target`` cut the same mesh the same way in
    blocks (views of one array: the pieces differ by the slices' offsets only), so
    that `boxes_for` meets few pieces."""
    return (
        is_mesh(d)
        and d.comm.size > 1
        and d.layout is target.layout  # type: ignore[attr-defined]
        and d.split == target.split  # type: ignore[attr-defined]
        and not d.cyclic  # type: ignore[attr-defined]
        and not target.cyclic  # type: ignore[attr-defined]
    )


def _align_to_boxes(x: D2O, target: Distributor) -> np.ndarray:
    """``x``'s part for a result on a mesh layout: cut locally when ``x`` is replicated,
    else one exchange (none when ``x``'s boxes already are the wanted ones)."""
    d = x.distributor
    want = _wanted(x.shape, target)
    if d.replicated:
        return x.data[index_of(want(d.comm.rank))]
    if _same_boxes(d, target, want):
        return x.data
    return exchange(d.comm, x.data, d.region, want, send=d.source, key=("wanted", d, target))


def align_out(o: D2O, target: Distributor) -> np.ndarray:
    if o.distributor is not target:  # pragma: no cover - target is out[0]'s layout
        raise ValueError("all out= arrays must share one layout")
    return o.data
