"""`d2o.numpy`'s element-wise and creation functions: their table entries.

Ufuncs run on the pieces; the other element-wise functions align their operands to the
result's layout first (`d2o.ops.axislocal.elementwise`: a misaligned operand moves once).
Creation functions compute each rank's piece where it stays; nothing moves.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..array.base import Array as D2O
from ..ops import creation as _creation
from ..ops.axislocal import elementwise, fallback
from .factories import ew, handled, register

__all__ = ["fill", "asarray_chkfinite"]


def asarray_chkfinite(a, dtype=None, order=None, *, dist=None):
    """numpy's ``asarray_chkfinite``: ValueError unless every element is finite."""
    x = _creation.asarray(a, dtype=dtype, dist=dist)
    if x.dtype.kind in "fc" and not bool(elementwise(np.isfinite, [x]).all()):
        raise ValueError("array must not contain infs or NaNs")
    return x


def _tri_mask(m: D2O, k: int, lower: bool) -> D2O:
    if m.ndim < 2:
        return fallback("tril" if lower else "triu", np.tril if lower else np.triu, (m,), {"k": k})
    n, mm = m.shape[-2:]
    mask = _creation.tri(n, mm, k if lower else k - 1, dtype=bool, dist=m if m.ndim == 2 else True)
    return elementwise(
        lambda p, t: np.where(t if lower else ~t, p, np.zeros(1, p.dtype)), [m, mask]
    )


class _Unset:
    """An argument not given (numpy's own defaults apply)."""

    def __repr__(self) -> str:
        return "<no value>"


_UNSET = _Unset()


def clip_entry(inner: Callable) -> Callable:
    """``clip`` with the array API's signature, ``clip(x, /, min, max)``, that keeps
    numpy's: positional bounds are numpy's ``a_min``/``a_max``, and the keywords
    ``a_min``, ``a_max``, ``min``, ``max`` and ``out`` go to numpy's ``clip`` as given
    (numpy's checks apply).  Local, as numpy's."""

    def clip(a, min=_UNSET, max=_UNSET, out=None, *, a_min=_UNSET, a_max=_UNSET, **kwargs):
        given = {"a_min": a_min, "a_max": a_max, "min": min, "max": max}
        kw = {k: v for k, v in given.items() if v is not _UNSET}
        if out is not None:
            kw["out"] = out
        return inner(a, **kw, **kwargs)

    return clip


#: Functions whose errors depend on dtypes and data alone: with scalars and operands of
#: one layout they communicate nothing (`d2o.ops.axislocal.local_elementwise`).
_LOCAL = {"clip", "astype"}


def fill(table: dict) -> None:
    """Enter the ufuncs, the creation functions, the element-wise functions `ew` makes
    and the triangles (``tril``, ``triu``)."""
    for n in dir(np):
        f = getattr(np, n)
        if isinstance(f, np.ufunc):
            gufunc = f.signature is not None  # core dimensions: not element-wise
            table[n] = ("fallback", None, "generalized ufunc") if gufunc else ("ufunc", f, "")
    for n in _creation.__all__:
        if hasattr(np, n):
            table[n] = ("create", getattr(_creation, n), "")
    register(table, "create", "asfortranarray require", _creation.asarray)
    table["copy"] = (
        "create",
        lambda a, order="K", subok=False: a.copy() if isinstance(a, D2O) else _creation.array(a),
        "",
    )
    table["asarray_chkfinite"] = ("create", asarray_chkfinite, "")
    handled(table, "local", "where isreal iscomplex nan_to_num")
    for n, arrays in {
        "clip": ("a", "a_min", "a_max", "min", "max"),
        "isclose": ("a", "b"),
        "angle": ("z",),
        "around": ("a",),
        "round": ("a",),
        "fix": ("x",),
        "sinc": ("x",),
        "i0": ("x",),
        "isneginf": ("x",),
        "isposinf": ("x",),
        "interp": ("x",),
        "digitize": ("x",),
        "ravel_multi_index": (),
        "heaviside": ("x1", "x2"),
        "real_if_close": (),
        "astype": ("x",),
        "isnat": ("x",),
    }.items():
        if hasattr(np, n) and arrays and n not in table:  # not the ufuncs entered above
            table[n] = ("local", ew(getattr(np, n), arrays, local=n in _LOCAL), "")
    table["clip"] = ("local", clip_entry(table["clip"][1]), "")
    table["datetime_as_string"] = ("local", ew(np.datetime_as_string, ("arr",)), "")
    table["tril"] = ("local", lambda m, k=0: _tri_mask(m, k, lower=True), "")
    table["triu"] = ("local", lambda m, k=0: _tri_mask(m, k, lower=False), "")
