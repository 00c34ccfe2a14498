"""`d2o.numpy` functions that assemble their result from distributed pieces: their entries.

``diag``/``diagflat`` of a vector build the matrix row by row (each rank its own rows,
from the part of the vector they need: one redistribution of O(n) elements);
``packbits``/``unpackbits`` of the flattened array move at most 7 elements per rank
boundary so that every rank packs whole bytes; ``block`` is nested `concatenate` calls;
``sort_complex`` is the distributed sort; ``apply_over_axes`` calls the distributed
function once per axis.  None gathers.
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
from ..layouts.distributors import Distributor, get_distributor, slab_distributor
from ..move.redistribution import redistribute
from ..ops import joining as _joining
from ..ops.axislocal import fallback
from ..ops.creation import distributor_for
from .axes import diagonal
from .factories import axis_entry

__all__ = [
    "fill", "diagflat", "diag", "packbits", "unpackbits", "block", "sort_complex_of",
    "apply_over_axes",
]  # fmt: skip


def _flat(v: D2O) -> D2O:
    """``v`` flattened in C order: a 1-d slab or replicated array (`d2o.ops.reductions.ravel`:
    the pieces' own memory when cut along axis 0, else one redistribution)."""
    return as_slab(v).ravel()


def _part(flat: D2O, offsets: list) -> np.ndarray:
    """This rank's part ``[offsets[r], offsets[r + 1])`` of the 1-d ``flat`` (collective:
    one redistribution, nothing from a replicated array)."""
    d = flat.distributor
    target = slab_distributor(flat.shape, d.comm, 0, offsets, "freeform")
    return redistribute(flat.data, d, target)


# -- diag / diagflat -------------------------------------------------------------------------


def diagflat(v, k=0):
    """numpy's ``diagflat``: the ``(n + |k|)``-square matrix with the flattened ``v`` on
    diagonal ``k``, built distributed (rows cut like a new array's): each rank writes its
    own rows from the part of ``v`` they hold (one redistribution of ``v``'s O(n)
    elements; nothing from a replicated ``v``).  A replicated ``v`` gives a replicated
    matrix (as element-wise operations do)."""
    if not isinstance(v, D2O):
        return np.diagflat(v, k)
    with agreed(v.distributor.comm):
        k = operator.index(k)
    return _diag_matrix(_flat(v), k)


def _diag_matrix(flat: D2O, k: int) -> D2O:
    d = flat.distributor
    n = flat.shape[0]
    m = n + abs(k)
    shape = (m, m)
    if d.replicated:
        return _from_local(np.diagflat(flat.data, k), get_distributor("not", shape, d.comm))
    target: Distributor = distributor_for(True, shape, flat.dtype, d.comm)
    if target.replicated or target.axis != 0:
        target = get_distributor("equal", shape, d.comm, 0)
    b = target.bounds()
    s = max(-k, 0)  # row r holds v[r - s] in column r - s + max(k, 0)
    offsets = [min(max(o - s, 0), n) for o in b]
    part = _part(flat, offsets)
    lo, hi = b[d.comm.rank], b[d.comm.rank + 1]
    piece = np.zeros((hi - lo, m), dtype=flat.dtype)
    i = np.arange(offsets[d.comm.rank], offsets[d.comm.rank + 1])
    piece[i + s - lo, i + max(k, 0)] = part
    return _from_local(piece, target)


def diag(v, k=0):
    """numpy's ``diag``: of a 2-d array its diagonal (`d2o.numpy.axes.diagonal`), of a
    1-d one the matrix (as `diagflat`), else numpy's ValueError on every rank."""
    if not isinstance(v, D2O):
        return np.diag(v, k)
    with agreed(v.distributor.comm):
        if v.ndim not in (1, 2):
            raise ValueError("Input must be 1- or 2-d.")
        k = operator.index(k)
    return _diag_matrix(_flat(v), k) if v.ndim == 1 else diagonal(v, k)


# -- packbits / unpackbits -------------------------------------------------------------------


def packbits(a, /, axis=None, bitorder="big"):
    """numpy's ``packbits``; ``axis=None`` packs the flattened array: its pieces move so
    that each rank's starts at a multiple of 8 (at most 7 elements per rank boundary),
    then each rank packs its own bytes.  Along an axis: axis-local."""
    if not isinstance(a, D2O) or axis is not None or a.ndim == 0:
        return _packbits_axis(a, axis=axis, bitorder=bitorder)
    with agreed(a.distributor.comm):
        np.packbits(np.zeros(0, a.dtype), bitorder=bitorder)  # numpy's dtype/bitorder errors
    flat = _flat(a)
    d = flat.distributor
    n = flat.shape[0]
    nb = -(-n // 8)
    if d.replicated:
        return _from_local(np.packbits(flat.data, bitorder=bitorder),
                           get_distributor("not", (nb,), d.comm))  # fmt: skip
    b = d.bounds()
    offsets = [min(n, -(-o // 8) * 8) for o in b]
    piece = np.packbits(_part(flat, offsets), bitorder=bitorder)
    lay = slab_distributor((nb,), d.comm, 0, [-(-o // 8) for o in offsets], "freeform")
    return _from_local(piece, lay)


def unpackbits(a, /, axis=None, count=None, bitorder="big"):
    """numpy's ``unpackbits``; ``axis=None`` unpacks the flattened array where its bytes
    are (each rank its own, nothing moves), ``count`` cutting or padding the end.  Along
    an axis: axis-local."""
    if not isinstance(a, D2O) or axis is not None or a.ndim == 0:
        return _unpackbits_axis(a, axis=axis, count=count, bitorder=bitorder)
    flat = _flat(a)
    d = flat.distributor
    nbits = 8 * flat.shape[0]
    with agreed(d.comm):
        np.unpackbits(np.zeros(0, a.dtype), bitorder=bitorder)  # numpy's dtype/bitorder errors
        if count is None:
            size = nbits
        else:
            count = operator.index(count)
            if count < 0 and -count > nbits:
                raise ValueError("-count larger than number of elements")
            size = nbits + count if count < 0 else count
    # (numpy's own leaves the padding of an empty input uninitialized: zeros here)
    r, last = (0, True) if d.replicated else (d.comm.rank, d.comm.rank == d.comm.size - 1)
    offsets = [0, size] if d.replicated else [min(8 * o, size) for o in d.bounds()]
    offsets[-1] = size
    bits = np.unpackbits(flat.data, bitorder=bitorder)[: offsets[r + 1] - offsets[r]]
    if last and size > nbits:  # count beyond the bits: zeros at the end
        bits = np.concatenate([bits, np.zeros(size - nbits, np.uint8)])
    if d.replicated:
        return _from_local(bits, get_distributor("not", (size,), d.comm))
    return _from_local(bits, slab_distributor((size,), d.comm, 0, offsets, "freeform"))


_packbits_axis = axis_entry(np.packbits, "packbits")
_unpackbits_axis = axis_entry(np.unpackbits, "unpackbits")


# -- block -----------------------------------------------------------------------------------


def _depth(arrays: Any, where: str = "arrays") -> tuple:
    """numpy's checks of ``block``'s nesting: (list depth, largest leaf ndim, any leaf
    distributed); tuples and empty lists are numpy's errors."""
    if type(arrays) is tuple:
        raise TypeError(
            f"{where} is a tuple. Only lists can be used to arrange blocks, and np.block does "
            "not allow implicit conversion from tuple to ndarray."
        )
    if type(arrays) is not list:
        return 0, np.ndim(arrays), isinstance(arrays, D2O)
    if not arrays:
        raise ValueError(f"List at {where} cannot be empty")
    subs = [_depth(x, f"{where}[{i}]") for i, x in enumerate(arrays)]
    first = subs[0][0]
    for i, s in enumerate(subs):
        if s[0] != first:
            raise ValueError(
                f"List depths are mismatched. First element was at depth {first + 1}, but "
                f"there is an element at depth {s[0] + 1} ({where}[{i}])"
            )
    return first + 1, max(s[1] for s in subs), any(s[2] for s in subs)


def block(arrays):
    """numpy's ``block``: nested `concatenate` calls, innermost lists along the last axis
    (each input moves once per nesting level at most; inputs cut along another axis with
    the same bounds join locally)."""
    depth, ndim, dist = _depth(arrays)
    if not dist:
        return np.block(arrays)
    return _block(arrays, depth, max(ndim, depth), 0)


def _block(arrays: Any, depth: int, ndim: int, level: int) -> Any:
    if level == depth:
        if isinstance(arrays, D2O):
            return arrays[(None,) * (ndim - arrays.ndim) + (Ellipsis,)]
        x = np.asarray(arrays)
        return x.reshape((1,) * (ndim - x.ndim) + x.shape)
    parts = [_block(x, depth, ndim, level + 1) for x in arrays]
    ax = -(depth - level)
    if any(isinstance(p, D2O) for p in parts):
        return _joining.concatenate(parts, axis=ax)
    return np.concatenate(parts, axis=ax)


# -- sort_complex / apply_over_axes ----------------------------------------------------------


def sort_complex_of(sort: Callable) -> Callable:
    """numpy's ``sort_complex``: the sort along the last axis (``sort``: the distributed
    sort where that axis is cut), then numpy's complex dtype (``complex64`` for 8- and
    16-bit integers, ``complex128`` for the others, kept for complex input)."""

    def sort_complex(a):
        if not isinstance(a, D2O):
            return np.sort_complex(a)
        with agreed(a.distributor.comm):
            if a.ndim == 0:
                raise np.exceptions.AxisError(-1, 0)
        b = sort(a, axis=-1)
        if b.dtype.kind == "c":
            return b
        ct = {"b": "F", "h": "F", "B": "F", "H": "F", "g": "G"}.get(b.dtype.char, "D")
        return b.astype(ct)

    return sort_complex


def apply_over_axes(func, a, axes):
    """numpy's ``apply_over_axes``: ``func(a, axis)`` for each axis in turn (the distributed
    function when ``func`` is a numpy function d2o implements), a dropped axis put back
    as numpy does (a view)."""
    if not isinstance(a, D2O):
        return fallback("apply_over_axes", np.apply_over_axes, (func, a, axes), {})
    val = a
    n = a.ndim
    if np.ndim(axes) == 0:
        axes = (axes,)
    for axis in axes:
        if axis < 0:
            axis = n + axis
        res = func(val, axis)
        if res.ndim == val.ndim:
            val = res
        else:
            res = _joining.expand_dims(res, axis)
            if res.ndim != val.ndim:
                raise ValueError("function is not returning an array of the correct shape")
            val = res
    return val


def fill(table: dict) -> None:
    """Enter the assembled functions (after the axis-local and sort entries they refine)."""
    table["diagflat"] = ("create", diagflat, "each rank builds its own rows of the matrix")
    table["diag"] = ("axis", diag, "1-d input: each rank builds its own rows of the matrix")
    table["sort_complex"] = (
        "sort",
        sort_complex_of(table["sort"][1]),
        "the sort along the last axis",
    )
    note = "axis=None: whole bytes per rank (at most 7 elements per rank boundary move)"
    table["packbits"] = ("axis", packbits, note)
    table["unpackbits"] = ("axis", unpackbits, "axis=None: each rank unpacks its own bytes")
    table["block"] = ("join", block, "nested concatenate calls")
    table["apply_over_axes"] = ("composed", apply_over_axes, "the distributed function per axis")
