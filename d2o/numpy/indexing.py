"""`d2o.numpy`'s indexing and selection functions: their table entries.

Distributed indexing: the owners of the elements asked for send them (`d2o.array`'s
fancy indexing); ``put`` writes each rank's own elements.  Selections (``choose``,
``select``, ``piecewise``, ``copyto``) are element-wise on aligned operands.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..array.base import Array as D2O
from ..ops import creation as _creation
from ..ops import edits as _edits
from ..ops import flat as _ndarray
from ..ops import joining as _joining
from ..ops import writes as _writes
from ..ops.axislocal import elementwise, fallback
from ..ops.special import HANDLED
from .factories import finish, meta_entry, normalize_axis_index

__all__ = ["fill", "put", "take", "compress", "argwhere", "copyto", "putmask", "select"]


def put(a, ind, v, mode="raise"):
    """numpy's ``put`` into a distributed ``a``: ``a.flat[ind] = v`` (`d2o.ops.ndarray.put`);
    a numpy ``a`` takes the fallback."""
    if not isinstance(a, D2O):
        return fallback("put", np.put, (a, ind, v), {"mode": mode}, inplace=True)
    return _ndarray.put(a, ind, v, mode)


def _distributed_first(name: str, impl: Callable, inplace: bool = False) -> Callable:
    """``impl`` when the first argument is distributed; numpy's own function (through
    the fallback, for distributed other arguments) when it is not."""
    np_func = getattr(np, name)

    def f(a: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(a, D2O):
            return impl(a, *args, **kwargs)
        return fallback(name, np_func, (a, *args), kwargs, inplace=inplace)

    return f


def _ravel(x: Any) -> Any:
    return x.ravel() if isinstance(x, D2O) else np.ravel(x)


def _conds(condlist: Any, x: Any) -> list:
    if isinstance(condlist, D2O) or (
        isinstance(condlist, np.ndarray) and condlist.ndim == np.ndim(x)
    ):
        return [condlist]
    return list(condlist)


def take(a, indices, axis=None, out=None, mode="raise"):
    """numpy's ``take``: distributed fancy indexing."""
    if mode != "raise":
        return fallback("take", np.take, (a, indices), {"axis": axis, "mode": mode})
    if axis is None:
        return finish(a.ravel()[indices], out)
    ax = normalize_axis_index(axis, a.ndim)
    return finish(a[(slice(None),) * ax + (indices,)], out)


def compress(condition, a, axis=None, out=None):
    """numpy's ``compress``: a boolean index."""
    c = _ravel(condition)
    c = c.astype(bool) if isinstance(c, D2O) else np.asarray(c, dtype=bool)
    if axis is None:
        a, ax = a.ravel(), 0
    else:
        ax = normalize_axis_index(axis, a.ndim)
    n = a.shape[ax]
    if c.shape[0] > n:
        raise IndexError(f"index {c.shape[0] - 1} is out of bounds for axis {ax} with size {n}")
    if c.shape[0] < n:
        c = (
            np.concatenate([np.asarray(c), np.zeros(n - c.shape[0], bool)])
            if not isinstance(c, D2O)
            else _joining.concatenate([c, np.zeros(n - c.shape[0], bool)])
        )
    return finish(a[(slice(None),) * ax + (c,)], out)


def argwhere(a):
    """numpy's ``argwhere``: the nonzero coordinates stacked as columns."""
    if np.ndim(a) == 0:
        return _creation.asarray(np.argwhere(bool(a)))
    nz = HANDLED[np.nonzero](a)
    return _joining.stack(list(nz), axis=1)


def copyto(dst, src, casting="same_kind", where=True):
    """numpy's ``copyto``: the chosen elements of ``dst`` take ``src``'s (aligned)."""
    srcd = src.dtype if isinstance(src, D2O) else np.asarray(src).dtype
    if not np.can_cast(srcd, dst.dtype, casting=casting):
        raise TypeError(
            f"Cannot cast array data from {srcd!r} to {dst.dtype!r} according to the rule {casting!r}"
        )
    dst[...] = elementwise(lambda d, s, w: np.where(w, s, d).astype(d.dtype), [dst, src, where])


def putmask(a, mask, values):
    """numpy's ``putmask`` with a scalar value or values of ``a``'s shape."""
    if np.ndim(values) == 0 or np.shape(values) == a.shape:
        a[...] = elementwise(lambda p, m, v: np.where(m, v, p).astype(p.dtype), [a, mask, values])
        return None
    return fallback("putmask", np.putmask, (a, mask, values), {}, inplace=True)


def select(condlist, choicelist, default=0):
    """numpy's ``select``: element-wise over the conditions and choices."""
    if len(condlist) != len(choicelist):
        raise ValueError("list of cases must be same length as list of conditions")
    k = len(condlist)
    return elementwise(lambda *p: np.select(list(p[:k]), list(p[k:2 * k]), p[-1]),
                       [*condlist, *choicelist, default])  # fmt: skip


def fill(table: dict) -> None:
    """Enter the indexing and selection functions (after the functions of no array data:
    ``unravel_index`` replaces numpy's own)."""
    table["take"] = ("index", take, "")
    table["compress"] = ("index", compress, "")
    table["extract"] = ("index", lambda condition, arr: arr.ravel()[_ravel(condition) != 0], "")
    table["flatnonzero"] = ("index", lambda a: HANDLED[np.nonzero](a.ravel())[0], "")
    table["argwhere"] = ("index", argwhere, "")
    table["copyto"] = ("local", copyto, "")
    table["putmask"] = ("index", putmask, "")
    table["choose"] = (
        "local",
        lambda a, choices, out=None, mode="raise": finish(
            elementwise(lambda p, *c: np.choose(p, c, mode=mode), [a, *choices]), out
        ),
        "",
    )
    table["select"] = ("local", select, "")
    table["piecewise"] = (
        "local",
        lambda x, condlist, funclist, *args, **kw: elementwise(
            lambda p, *c: np.piecewise(p, list(c), funclist, *args, **kw), [x, *_conds(condlist, x)]
        ),
        "",
    )
    table["ravel_multi_index"] = (
        "local",
        lambda multi_index, dims, mode="raise", order="C": elementwise(
            lambda *p: np.ravel_multi_index(p, dims, mode=mode, order=order), list(multi_index)
        ),
        "",
    )
    table["unravel_index"] = (
        "local",
        lambda indices, shape, order="C": elementwise(
            lambda p: np.unravel_index(p, shape, order=order), [indices]
        ),
        "",
    )
    table["insert"] = (
        "join",
        _distributed_first("insert", _edits.insert),
        "one exchange of the source elements that change rank; values cut locally",
    )
    table["delete"] = (
        "join",
        _distributed_first("delete", _edits.delete),
        "one exchange of the surviving elements that change rank",
    )
    table["place"] = (
        "index",
        _distributed_first("place", _writes.place, True),
        "numpy mask: local writes; distributed mask: True positions routed to owners",
    )
    table["put_along_axis"] = (
        "index",
        _distributed_first("put_along_axis", _writes.put_along_axis, True),
        "numpy indices: local writes; distributed ones: targets routed to owners",
    )
    table["fill_diagonal"] = (
        "index",
        _distributed_first("fill_diagonal", _writes.fill_diagonal, True),
        "local: each rank writes the diagonal elements of its piece",
    )
    table["put"] = ("index", put, "numpy indices: every rank writes its own elements")
    for n in ("diag_indices_from tril_indices_from triu_indices_from").split():
        table[n] = ("meta", meta_entry(getattr(np, n)), "")
