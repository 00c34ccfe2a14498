"""`d2o.numpy.array2string`: numpy's text of a distributed array from the elements it shows.

numpy prints a large array (more than ``threshold`` elements) summarized: the first and
last ``edgeitems`` along each axis longer than ``2 * edgeitems``, with ``...`` between.
Only those elements are fetched from their owners (one small gather of a view per
corner: a few hundred bytes for a 2-d array whatever its size and layout); numpy's own formatter then prints
a stand-in holding them with one placeholder row in the middle of every summarized axis,
which it elides exactly where it elides the middle of the real array.  Arrays of at most
``threshold`` elements are gathered whole, as numpy prints them whole (at most
``threshold`` elements travel; a larger threshold takes the bounded fallback).
"""

from __future__ import annotations

import inspect
import itertools
from typing import Any

import numpy as np

from ..array.base import Array as D2O
from ..ops.axislocal import fallback
from .indexing import take

__all__ = ["fill", "array2string"]

_SIGNATURE = inspect.signature(np.array2string)
#: Arrays of more elements than this are not gathered whole even if ``threshold`` says so.
_WHOLE_MAX = 1 << 16
#: Up to this many summarized axes, the corners are gathered one by one (2**axes views).
_MAX_CORNER_AXES = 6


def array2string(a: Any, *args: Any, **kwargs: Any) -> str:
    """numpy's ``array2string``; of a distributed array, only the elements shown travel
    (the summarized form), or the whole array when numpy prints it whole (up to
    ``threshold`` elements).  Collective for a distributed ``a``."""
    if not isinstance(a, D2O):
        return np.array2string(a, *args, **kwargs)
    bound = _SIGNATURE.bind(a, *args, **kwargs)
    opts = np.get_printoptions()
    threshold = bound.arguments.get("threshold")
    edgeitems = bound.arguments.get("edgeitems")
    threshold = opts["threshold"] if threshold is None else threshold
    edgeitems = opts["edgeitems"] if edgeitems is None else edgeitems
    if a.size <= threshold:
        if a.size > _WHOLE_MAX:
            return fallback("array2string", np.array2string, (a, *args), kwargs)
        return np.array2string(a.get_full_data(), *args, **kwargs)
    summarized = [n > 2 * edgeitems for n in a.shape]
    local = _corners(a, summarized, edgeitems)
    for axis, cut in enumerate(summarized):
        if cut:  # a placeholder in the middle: numpy elides it as the real middle
            middle = np.take(local, [edgeitems - 1], axis=axis)
            local = np.concatenate(
                [np.take(local, range(edgeitems), axis=axis), middle,
                 np.take(local, range(edgeitems, 2 * edgeitems), axis=axis)], axis=axis,
            )  # fmt: skip
    bound.arguments["a"] = local
    bound.arguments["threshold"] = 0  # summarize (the real array has more than threshold)
    bound.arguments["edgeitems"] = edgeitems
    return np.array2string(*bound.args, **bound.kwargs)


def _corners(a: D2O, summarized: list, e: int) -> np.ndarray:
    """The first and last ``e`` indices of every summarized axis of ``a`` (whole along the
    others) as a numpy array on every rank: one small gather of a view per corner (views
    move nothing on any layout; each gather moves only the corner's elements)."""
    cut = [axis for axis, s in enumerate(summarized) if s]
    if len(cut) > _MAX_CORNER_AXES:  # 2**len(cut) corners: fancy gets along each axis instead
        shown: Any = a
        for axis in cut:
            shown = take(shown, np.r_[0:e, a.shape[axis] - e : a.shape[axis]], axis=axis)
        return shown.get_full_data()
    shape = tuple(2 * e if s else n for n, s in zip(a.shape, summarized))
    out = np.empty(shape, dtype=a.dtype)
    for corner in itertools.product((0, 1), repeat=len(cut)):
        src, dst = [slice(None)] * a.ndim, [slice(None)] * a.ndim
        for axis, high in zip(cut, corner):
            n = a.shape[axis]
            src[axis] = slice(n - e, n) if high else slice(0, e)
            dst[axis] = slice(e, 2 * e) if high else slice(0, e)
        out[tuple(dst)] = a[tuple(src)].get_full_data()
    return out


def fill(table: dict) -> None:
    """Enter ``array2string``."""
    table["array2string"] = (
        "index",
        array2string,
        "only the elements shown travel (summarized), or up to `threshold` elements",
    )
