"""Key canonicalisation for indexing: numpy's rules, worked out once per call.

`canonical(key, shape)` turns any key numpy accepts (ints, slices, Ellipsis,
None, integer and boolean arrays or lists, tuples of these, distributed
objects) into a `Key`: one entry per source dimension, one per output axis,
the broadcast shape ``B`` of the advanced indices and where it lands in the
result.  All checks numpy makes (bounds, too many indices, mask shapes, float
keys, broadcasting of index arrays) happen here, with numpy's exception types
and messages, before anything is communicated.

numpy's placement rule for advanced indices: the key's items (Ellipsis and
None count as items; integers are advanced indices as soon as any array index
is present; an n-d boolean mask is one item standing for its ``nonzero()``)
are *adjacent* when the advanced items follow each other directly; then the
``B`` axes replace them in place, otherwise they come first.

Nothing here communicates.  Distributed objects in a key are kept as they are
(entry kind ``'d'`` for integer keys, ``'m'`` for masks) for the caller.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

__all__ = ["Key", "canonical", "localize_slice", "jrange", "coords_for", "emit"]

_INTS = (int, np.integer)
_BAD_KEY = (
    "only integers, slices (`:`), ellipsis (`...`), numpy.newaxis (`None`) and integer or "
    "boolean arrays are valid indices"
)


class Key:
    """A canonical key against a global ``shape``.

    Attributes
    ----------
    items : list
        The key's items in order: ``('s', dim, start, stop, step, n)``,
        ``('i', dim, index)``, ``('n',)`` (newaxis), ``('e', count)`` (Ellipsis
        that expanded to ``count`` slices, already listed as 's' items after it),
        ``('a', dim, array)`` (integer index array, normalised),
        ``('z', array)`` (0-d boolean: an index array over no source dimension),
        ``('d', dim, obj)`` / ``('m', dims, obj)`` (distributed integer key / mask).
    src : list
        Per source dimension: the item of the key that indexes it.
    out : list
        Per output axis: ``('s', dim)``, ``('n',)`` or ``('b', j)`` (j-th axis of B).
    bshape, bpos : tuple, int
        Broadcast shape of the advanced indices and the output axis where it starts.
    out_shape : tuple
    scalar : bool
        The result is one element and numpy returns a scalar.
    advanced, distributed : bool
    """

    __slots__ = (
        "shape",
        "items",
        "src",
        "out",
        "bshape",
        "bpos",
        "out_shape",
        "scalar",
        "advanced",
        "distributed",
        "out_of",
    )
    # declared for type checkers (`canonical` sets them)
    shape: tuple
    items: list
    src: list
    out: list
    bshape: tuple | None
    bpos: int
    out_shape: tuple
    scalar: bool
    advanced: bool
    distributed: bool
    out_of: list


def _as_item(item: Any, d2o_type: type | None) -> tuple:
    """Classify one item of a key: ('n'|'e'|'s'|'i'|'b0'|'arr'|'mask'|'d'|'m', payload)."""
    if item is None:
        return ("n", None)
    if item is Ellipsis:
        return ("e", None)
    if isinstance(item, slice):
        return ("s", item)
    if isinstance(item, (bool, np.bool_)):
        return ("b0", bool(item))
    if isinstance(item, _INTS):
        return ("i", int(item))
    if d2o_type is not None and isinstance(item, d2o_type):
        kind = item.dtype.kind
        if kind == "b":
            return ("m", item) if item.ndim else ("b0", bool(item.data))
        if kind not in "iu":
            raise IndexError(_BAD_KEY)
        if item.ndim == 0:
            return ("i", int(item.data))
        return ("d", item)
    if isinstance(item, np.ndarray) or isinstance(item, (list, tuple)):
        try:
            arr = np.asarray(item)  # a ragged list raises numpy's ValueError
        except TypeError:
            raise IndexError(_BAD_KEY) from None
        if arr.dtype.kind == "b":
            return ("b0", bool(arr)) if arr.ndim == 0 else ("mask", arr)
        if arr.dtype.kind not in "iu":
            if not isinstance(item, np.ndarray) and arr.size == 0:
                return ("arr", arr.astype(np.intp))
            if isinstance(item, np.ndarray):
                raise IndexError("arrays used as indices must be of integer (or boolean) type")
            raise IndexError(_BAD_KEY)
        if arr.ndim == 0:
            return ("i", int(arr))
        return ("arr", arr)
    if isinstance(item, (float, complex, str, bytes, np.floating)):
        raise IndexError(_BAD_KEY)
    try:
        return ("i", operator.index(item))
    except TypeError:
        raise IndexError(_BAD_KEY) from None


def _oob(index: Any, dim: int, n: int) -> IndexError:
    return IndexError(f"index {index} is out of bounds for axis {dim} with size {n}")


def _check_mask(mask_shape: tuple, shape: tuple, dim: int) -> None:
    """numpy's IndexError when a boolean mask does not match the axes it indexes."""
    for j, m in enumerate(mask_shape):
        if m != shape[dim + j]:
            raise IndexError(
                f"boolean index did not match indexed array along axis {dim + j}; "
                f"size of axis is {shape[dim + j]} but size of corresponding "
                f"boolean axis is {m}"
            )


def broadcast_index_shapes(shapes: list) -> tuple:
    """The broadcast shape of index arrays, or numpy's IndexError when they do not broadcast."""
    try:
        return np.broadcast_shapes(*shapes)
    except ValueError:
        raise IndexError(
            "shape mismatch: indexing arrays could not be broadcast together with shapes "
            + " ".join(str(s) for s in shapes)
            + " "
        ) from None


def normalize_index_array(arr: np.ndarray, dim: int, n: int) -> np.ndarray:
    """``arr`` (integers) with negatives wrapped; IndexError when out of bounds."""
    arr = np.asarray(arr)
    if arr.size:
        lo, hi = arr.min(), arr.max()
        if lo < -n or hi >= n:
            bad = arr.flat[int(np.flatnonzero((arr < -n) | (arr >= n))[0])]
            raise _oob(int(bad), dim, n)
        if lo < 0:
            arr = np.where(arr < 0, arr + n, arr)
    return arr.astype(np.intp, copy=False)


def canonical(key: Any, shape: tuple, d2o_type: type | None = None) -> Key:
    """Canonicalise ``key`` for an array of global ``shape`` (numpy's rules and errors).

    Four steps: parse the items (`_as_item`), count what they consume (`_consumed`),
    resolve each against its axis (`_resolve`), then place the result's axes (`_out_axes`).
    """
    raw = key if type(key) is tuple else (key,)
    parsed = [_as_item(it, d2o_type) for it in raw]
    consumed, n_ell, advanced = _consumed(parsed, len(shape))
    k = Key()
    k.shape = shape
    k.advanced = advanced
    k.distributed = False
    adv_pos, shapes = _resolve(k, parsed, consumed)
    if advanced:
        # with distributed keys, the caller sets bshape once masks are counted
        k.bshape = None if k.distributed else broadcast_index_shapes(shapes)
        adjacent = adv_pos[-1] - adv_pos[0] + 1 == len(adv_pos)
    else:
        k.bshape = ()
        adjacent = True
    k.out, k.bpos = _out_axes(parsed, k.items, advanced, adv_pos, adjacent)
    k.scalar = not advanced and n_ell == 0 and not k.out
    if k.bshape is not None:
        _finish(k)
    return k


def _consumed(parsed: list, ndim: int) -> tuple:
    """(axes the items consume, number of Ellipses, whether any item is advanced);
    numpy's IndexErrors for several Ellipses and too many indices."""
    consumed = n_ell = 0
    advanced = False
    for kind, p in parsed:
        if kind in ("s", "i", "arr", "d"):
            consumed += 1
        elif kind in ("mask", "m"):
            consumed += p.ndim
        elif kind == "e":
            n_ell += 1
        if kind in ("arr", "mask", "b0", "d", "m"):
            advanced = True
    if n_ell > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if consumed > ndim:
        raise IndexError(
            f"too many indices for array: array is {ndim}-dimensional, but {consumed} were indexed"
        )
    return consumed, n_ell, advanced


def _resolve(k: Key, parsed: list, consumed: int) -> tuple:
    """Resolve every item against its axis: sets ``k.items``, ``k.src`` (the item acting
    on each axis) and ``k.distributed``; returns (positions of advanced items, their
    index shapes)."""
    shape = k.shape
    ndim = len(shape)
    advanced = k.advanced
    items: list = []
    src: list = [None] * ndim
    adv_pos: list[int] = []
    shapes: list = []
    dim = 0

    def put(it: tuple, axes: int = 1) -> None:
        nonlocal dim
        items.append(it)
        for j in range(axes):
            src[dim + j] = it
        dim += axes

    def add_slice(sl: slice) -> None:
        start, stop, step = sl.indices(shape[dim])
        n = len(range(start, stop, step))
        if n == 0:
            # one form for every empty slice: `indices` may give start -1 (a negative step
            # starting before the first element), which `emit` would hand numpy as "the last"
            start = stop = 0
        put(("s", dim, start, stop, step, n))

    for pos, (kind, p) in enumerate(parsed):
        if kind == "n":
            items.append(("n",))
        elif kind == "e":
            cnt = ndim - consumed
            items.append(("e", cnt))
            for _ in range(cnt):
                add_slice(slice(None))
        elif kind == "s":
            if p.step is not None and operator.index(p.step) == 0:
                raise ValueError("slice step cannot be zero")
            add_slice(p)
        elif kind == "i":
            n = shape[dim]
            if not -n <= p < n:
                raise _oob(p, dim, n)
            p = p + n if p < 0 else p
            if advanced:
                adv_pos.append(pos)
                shapes.append(())
                put(("a", dim, np.intp(p)))
            else:
                put(("i", dim, p))
        elif kind == "arr":
            arr = normalize_index_array(p, dim, shape[dim])
            adv_pos.append(pos)
            shapes.append(arr.shape)
            put(("a", dim, arr))
        elif kind == "mask":
            _check_mask(p.shape, shape, dim)
            for arr in np.nonzero(p):
                shapes.append(arr.shape)
                put(("a", dim, arr.astype(np.intp, copy=False)))
            adv_pos.append(pos)
        elif kind == "b0":
            it = ("z", np.zeros(int(p), dtype=np.intp), np.bool_(p))
            items.append(it)
            adv_pos.append(pos)
            shapes.append(it[1].shape)
        elif kind == "d":
            k.distributed = True
            adv_pos.append(pos)
            shapes.append(p.shape)
            put(("d", dim, p))
        elif kind == "m":
            k.distributed = True
            _check_mask(p.shape, shape, dim)
            adv_pos.append(pos)
            shapes.append(None)  # length unknown until counted
            put(("m", tuple(range(dim, dim + p.ndim)), p), p.ndim)
    while dim < ndim:
        add_slice(slice(None))
    k.items = items
    k.src = src
    return adv_pos, shapes


def _out_axes(parsed: list, items: list, advanced: bool, adv_pos: list, adjacent: bool) -> tuple:
    """The result's axes in order (('s', axis), ('n',), and one ('B',) placeholder for
    the broadcast index axes: where the advanced items stand when they are adjacent,
    else first, as numpy does); returns (axes, position of the placeholder)."""
    out: list = []
    bpos = 0
    b_done = False
    first_adv = adv_pos[0] if adv_pos else -1
    # items and parsed differ in length (masks, Ellipsis); walk parsed positions
    it_iter = iter(items)
    for pos, (kind, p) in enumerate(parsed):
        if advanced and pos == first_adv and adjacent:
            bpos = len(out)
            out.append(("B",))
            b_done = True
        if kind == "n":
            next(it_iter)
            out.append(("n",))
        elif kind == "e":
            e = next(it_iter)
            for _ in range(e[1]):
                out.append(("s", next(it_iter)[1]))
        elif kind == "s":
            out.append(("s", next(it_iter)[1]))
        elif kind == "mask":
            for _ in range(p.ndim):
                next(it_iter)
        else:  # i, arr, b0, d, m
            next(it_iter)
    for it in it_iter:  # trailing implicit slices
        out.append(("s", it[1]))
    if advanced and not b_done:
        bpos = 0
        out.insert(0, ("B",))
    return out, bpos


def _finish(k: Key) -> None:
    """Expand the ('B',) placeholder into the axes of ``k.bshape``; set out_shape."""
    out: list = []
    for o in k.out:
        if o[0] == "B":
            out.extend(("b", j) for j in range(len(k.bshape)))
        else:
            out.append(o)
    k.out = out
    shape = []
    out_of = [None] * len(k.shape)
    for a, o in enumerate(out):
        if o[0] == "s":
            shape.append(k.src[o[1]][5])
            out_of[o[1]] = a
        elif o[0] == "n":
            shape.append(1)
        else:
            shape.append(k.bshape[o[1]])
    k.out_shape = tuple(shape)
    k.out_of = out_of


def set_bshape(k: Key, bshape: tuple) -> None:
    k.bshape = tuple(bshape)
    _finish(k)


def jrange(start: int, step: int, n: int, lo: int, hi: int) -> tuple[int, int]:
    """Positions ``[j0, j1)`` of ``range(start, start+n*step, step)`` that fall in ``[lo, hi)``."""
    if n == 0 or hi <= lo:
        return 0, 0
    if step > 0:
        j0 = max(0, -((start - lo) // step))
        j1 = min(n, -((start - hi) // step))
    else:
        s = -step
        j0 = max(0, (start - hi) // s + 1)
        j1 = min(n, (start - lo) // s + 1)
    return (j0, j1) if j1 > j0 else (0, 0)


def localize_slice(start: int, step: int, j0: int, j1: int, lo: int) -> slice:
    """The slice of a local piece starting at global ``lo`` that picks positions ``j0:j1``."""
    if j1 <= j0:
        return slice(0, 0)
    first = start + step * j0 - lo
    stop = first + step * (j1 - j0)
    return slice(first, None if stop < 0 else stop, step)


def emit(k: Key, replace: dict | None = None, adv: dict | None = None) -> tuple:
    """A numpy key equivalent to ``k``; ``replace`` maps a source dim to a new item,
    ``adv`` maps an item's position in ``k.items`` to a replacement index array."""
    out: list = []
    replace = replace or {}
    adv = adv or {}
    for i, it in enumerate(k.items):
        kind = it[0]
        if kind == "e":
            if it[1] == 0:
                out.append(Ellipsis)
            continue
        if kind == "n":
            out.append(None)
        elif kind == "s":
            d = it[1]
            if d in replace:
                out.append(replace[d])
            else:
                stop = it[3]
                out.append(slice(it[2], None if stop < 0 else stop, it[4]))
        elif kind == "i":
            out.append(replace.get(it[1], it[2]))
        elif kind == "a":
            out.append(adv.get(i, it[2]))
        elif kind == "z":
            out.append(it[2])
        else:  # pragma: no cover - distributed items are resolved by the caller
            raise TypeError("unresolved distributed key")
    return tuple(out)


def coords_for(k: Key, box: tuple, advs: dict) -> list:
    """Per source dim, the global coordinates (broadcastable to the box's shape) of
    the elements of the output ``box``; ``advs`` maps a source dim to its advanced
    index array restricted to the box's B-range (shape: the box's B part)."""
    nd = len(k.out_shape)
    bshape_box = tuple(b - a for a, b in box[k.bpos : k.bpos + len(k.bshape)])
    coords = []
    for d, it in enumerate(k.src):
        kind = it[0]
        if kind == "s":
            o = k.out_of[d]
            lo, hi = box[o]
            c = it[2] + it[4] * np.arange(lo, hi, dtype=np.intp)
            coords.append(c.reshape((1,) * o + (-1,) + (1,) * (nd - o - 1)))
        elif kind == "i":
            coords.append(np.intp(it[2]))
        else:
            a = np.broadcast_to(advs[d], bshape_box)
            coords.append(
                a.reshape((1,) * k.bpos + bshape_box + (1,) * (nd - k.bpos - len(bshape_box)))
            )
    return coords
