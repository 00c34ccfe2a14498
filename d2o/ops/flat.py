"""numpy's flat view of a distributed array: ``x.flat`` (a distributed flat iterator)
and ``put``.

Flat indices count the elements of the global array in C order, as numpy's do.  Writes
through ``flat`` and `put` with numpy keys are owner-computes: every rank finds the
selected elements of its own piece from their global flat indices and takes their values
from the (cycled) value, so a numpy value moves nothing and a distributed value is
fetched from its owners (one point-to-point exchange); distributed keys go through the
global indexing of the array (`d2o.ops.indexing`), coordinates from ``unravel_index``.
Reads use the global indexing of the array (a scalar: a broadcast from its owner) or of
its ravelled form (slices and masks).
"""

from __future__ import annotations

import operator
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..array.base import Array as D2O
from ..array.base import from_local as _from_local
from ..core import hooks
from ..core.errors import agreed
from ..layouts.distributors import Distributor

__all__ = ["flatiter", "put"]


_BAD_INDEX = (
    "only integers, slices (`:`), ellipsis (`...`) and integer or boolean arrays are valid indices"
)


# -- flat indices ---------------------------------------------------------------------


def local_flat(d: Distributor) -> np.ndarray:
    """The global C-order flat index of every element of this rank's piece (local)."""
    shape = d.global_shape
    out = np.zeros(d.local_shape, dtype=np.intp)
    stride = 1
    for a in range(len(shape) - 1, -1, -1):
        idx = np.asarray(d.global_indices(a), dtype=np.intp) * stride
        out += idx.reshape((-1,) + (1,) * (len(shape) - 1 - a))
        stride *= shape[a]
    return out


def _flat_key(key: Any, n: int) -> tuple:
    """numpy's flatiter key as ``(kind, value)``: ('int', i >= 0), ('slice', range),
    ('array', non-negative intp array), ('mask', 1-d bool array) or ('d2o', key).
    numpy's IndexError otherwise (the same on every rank: the key is global)."""
    if isinstance(key, tuple):
        if len(key) != 1:
            raise IndexError(
                "too many indices for flat iterator: flat iterator is 1-dimensional, "
                f"but {len(key)} were indexed"
            )
        key = key[0]
    if isinstance(key, D2O):
        if key.dtype.kind == "b":
            if key.shape != (n,) and key.size != n:
                raise IndexError(_mask_message(n, key.size))
            return "d2o", key
        if key.dtype.kind not in "iu":
            raise IndexError("arrays used as indices must be of integer (or boolean) type")
        return "d2o", key
    if key is Ellipsis:
        key = slice(None)
    if isinstance(key, slice):
        return "slice", range(*key.indices(n))
    if isinstance(key, (bool, np.bool_)) or key is None or isinstance(key, (str, bytes)):
        raise IndexError(_BAD_INDEX)
    if isinstance(key, (int, np.integer)):
        i = operator.index(key)
        if not -n <= i < n:
            raise IndexError(f"index {i} is out of bounds for size {n}")
        return "int", i % n
    if isinstance(key, (list, np.ndarray)):
        arr = np.asarray(key)
        if arr.size == 0 and arr.dtype.kind not in "b":
            arr = arr.astype(np.intp)
        if arr.dtype.kind == "b":
            if arr.size != n:
                raise IndexError(_mask_message(n, arr.size))
            return "mask", arr.reshape(-1)
        if arr.dtype.kind not in "iu":
            raise IndexError("arrays used as indices must be of integer (or boolean) type")
        if arr.ndim == 0:
            return _flat_key(int(arr), n)
        return "array", _in_bounds(arr.astype(np.intp, copy=False), n)
    raise IndexError(_BAD_INDEX)


def _mask_message(n: int, m: int) -> str:
    return (
        "boolean index did not match indexed flat iterator along axis 0; size of axis is "
        f"{n} but size of corresponding boolean axis is {m}"
    )


def _in_bounds(idx: np.ndarray, n: int) -> np.ndarray:
    bad = (idx < -n) | (idx >= n)
    if bad.any():
        raise IndexError(f"index {int(idx[bad][0])} is out of bounds for size {n}")
    return np.where(idx < 0, idx + n, idx)


def _coords(idx: Any, shape: tuple) -> tuple:
    """The multi-index of flat indices ``idx`` (a distributed ``idx`` keeps its layout)."""
    if isinstance(idx, D2O):
        return tuple(_from_local(c, idx.distributor) for c in np.unravel_index(idx.data, shape))
    return np.unravel_index(idx, shape)


def flat_get(x: D2O, key: Any) -> Any:
    """Collective: ``x.flat[key]`` (numpy's flatiter semantics, C order).

    An integer: the element, a broadcast from its owner.  Integer arrays: the global
    fancy indexing of ``x`` at their coordinates (the result has the key's shape, and a
    distributed key's layout).  Slices and masks: the ravelled array indexed (one
    exchange where ravelling moves data), always a copy."""
    n = x.size
    kind, k = _flat_key(key, n)
    if kind == "int":
        return x[np.unravel_index(k, x.shape)] if x.ndim else x[()]
    if kind == "d2o" and k.dtype.kind == "b":
        return x.ravel()[k.ravel()]
    if kind in ("array", "d2o") and x.ndim > 1:
        if isinstance(k, D2O):
            with agreed(x.distributor.comm):
                k = _from_local(_in_bounds(k.data.astype(np.intp, copy=False), n), k.distributor)
        return x[_coords(k, x.shape)]
    r = x.ravel()
    res = r[slice(k.start, k.stop if k.stop >= 0 else None, k.step) if kind == "slice" else k]
    return res.copy() if getattr(res, "base", None) is not None else res


def flat_set(x: D2O, key: Any, value: Any) -> None:
    """Collective: ``x.flat[key] = value``; the value is flattened and repeated as needed
    (numpy's flatiter and ``put``), the last of repeated indices wins.

    numpy keys: each rank writes the selected elements of its own piece; a numpy value
    moves nothing, a distributed one sends each rank the values it needs (one
    point-to-point exchange).  Distributed keys: the global fancy assignment of ``x``."""
    n = x.size
    kind, k = _flat_key(key, n)
    if kind == "d2o":
        _set_by_d2o(x, k, value)
        return
    g0 = local_flat(x.distributor)
    g = g0.reshape(-1)
    if kind == "int":
        sel = g == k
        pos = np.zeros(int(sel.sum()), dtype=np.intp)
    elif kind == "slice":
        q = g - k.start
        step = k.step
        sel = (q % step == 0) & (q // step >= 0) & (q // step < len(k))
        pos = (q[sel] // step).astype(np.intp)
    elif kind == "mask":
        sel = k[g]
        pos = (np.cumsum(k) - 1)[g[sel]]
    else:  # an index array: the last occurrence of each index wins, as in numpy
        idx = k.reshape(-1)
        order = np.argsort(idx, kind="stable")
        srt = idx[order]
        at = np.searchsorted(srt, g, side="right") - 1
        sel = at >= 0
        sel[sel] = srt[at[sel]] == g[sel]
        pos = order[at[sel]]
    vals = _values(x, value, pos)
    if vals is not None:
        x.data[sel.reshape(g0.shape)] = vals


def _values(x: D2O, value: Any, pos: np.ndarray) -> np.ndarray | None:
    """The values for flat selection positions ``pos`` (cycled through the flattened
    ``value``); None for an empty value (nothing is written, as in numpy)."""
    if isinstance(value, D2O):
        m = value.size
        if m == 0:
            return None
        if m == 1:
            return np.asarray(value.get_full_data()).reshape(-1)[pos % 1]  # a broadcast
        got = value.get_data(np.unravel_index(pos % m, value.shape), local_keys=True)
        return np.asarray(got.data if isinstance(got, D2O) else got).reshape(-1)
    v = np.asarray(value).reshape(-1)
    if v.size == 0:
        return None
    if v.dtype != x.dtype:
        v = v.astype(x.dtype) if v.dtype.kind != "c" or x.dtype.kind == "c" else _real(v, x)
    return v[pos % v.size]


def _real(v: np.ndarray, x: D2O) -> np.ndarray:
    out = np.empty(v.shape, x.dtype)
    out[...] = v  # numpy's ComplexWarning, as an assignment gives it
    return out


def _set_by_d2o(x: D2O, k: D2O, value: Any) -> None:
    """``x.flat[k] = value`` for a distributed key: a mask becomes the flat indices of its
    True elements (``nonzero``), then every element of the key takes the value at its
    position in the key (cycled), written by the global fancy assignment."""
    n = x.size
    if k.dtype.kind == "b":
        k = k.ravel().nonzero()[0]
    with agreed(x.distributor.comm):
        idx = _in_bounds(k.data.astype(np.intp, copy=False), n)
    vals = _values(x, value, local_flat(k.distributor))
    if vals is None or k.size == 0:
        return
    dvals = _from_local(vals.reshape(k.data.shape).astype(x.dtype), k.distributor)
    kk = _from_local(idx, k.distributor)
    if x.ndim:
        x[_coords(kk, x.shape)] = dvals
    else:
        x[()] = dvals.ravel()[-1]


class flatiter:  # noqa: N801 - numpy's name
    """numpy's ``flatiter`` of a distributed array: ``x.flat``.

    ``x.flat[key]`` reads and ``x.flat[key] = value`` writes the global array in C
    order (see `flat_get`, `flat_set`; both collective).  ``len`` is the global size.
    Iterating is collective: every rank receives every element, in chunks, and all
    ranks must consume the iterator in lockstep.  numpy and d2o.numpy functions take it
    as the ravelled array (``np.dot(x.flat, x.flat)``).  ``index`` and ``coords`` (the
    position of a running iteration) are not provided.
    """

    __slots__ = ("base",)
    __array_priority__ = 20.0

    def __init__(self, base: D2O) -> None:
        if hooks.controlled[0]:
            raise NotImplementedError(
                "x.flat is not available in controller mode (python -m d2o.run); "
                "use x.ravel() instead"
            )
        self.base = base

    def __len__(self) -> int:
        return self.base.size

    def __repr__(self) -> str:
        return f"<d2o flatiter of a distributed array of shape {self.base.shape}>"

    def __getitem__(self, key: Any) -> Any:
        return flat_get(self.base, key)

    def __setitem__(self, key: Any, value: Any) -> None:
        flat_set(self.base, key, value)

    def __iter__(self) -> Iterator:
        """Collective: the elements in C order (chunks of about one local share)."""
        return iter(self.base.ravel())

    def copy(self) -> D2O:
        """Collective: the flattened array, a copy (numpy's ``flatiter.copy``)."""
        return self.base.flatten()

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        """Collective: an explicit gather of the flattened array onto every rank."""
        return self.base.__array__(dtype).reshape(-1)

    def __array_function__(self, func: Any, types: tuple, args: tuple, kwargs: dict) -> Any:
        return func(*_unflat(args), **_unflat(kwargs))

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        return getattr(ufunc, method)(*_unflat(inputs), **_unflat(kwargs))


def _unflat(v: Any) -> Any:
    """``v`` with every flatiter replaced by its base ravelled (lists, tuples, dicts)."""
    if isinstance(v, flatiter):
        return v.base.ravel()
    if type(v) in (list, tuple):
        return type(v)(_unflat(e) for e in v)
    if type(v) is dict:
        return {k: _unflat(e) for k, e in v.items()}
    return v


def set_flat(x: D2O, value: Any) -> None:
    """Collective: ``x.flat = value``, numpy's ``x.flat[...] = value``."""
    flat_set(x, slice(None), value)


# -- put ------------------------------------------------------------------------------


def put(a: Any, ind: Any, v: Any, mode: str = "raise") -> None:
    """numpy's ``put``: ``a.flat[ind] = v`` after ``mode`` ('raise': numpy's IndexError
    out of bounds, negative indices count from the end; 'wrap'; 'clip').  A numpy
    ``ind`` moves nothing for a numpy ``v`` (every rank writes its own elements); see
    `flat_set`."""
    if mode not in ("raise", "wrap", "clip"):
        raise ValueError(f"clipmode must be one of 'clip', 'raise', or 'wrap' (got {mode!r})")
    n = a.size
    if isinstance(ind, D2O):
        with agreed(ind.distributor.comm):
            idx = _put_indices(ind.data, n, mode, ind.size)
        flat_set(a, _from_local(idx, ind.distributor), v)
        return
    flat_set(a, _put_indices(np.asarray(ind), n, mode, np.size(ind)), v)


def _put_indices(ind: np.ndarray, n: int, mode: str, total: int) -> np.ndarray:
    if ind.dtype.kind not in "iu" and not (ind.size == 0 and ind.dtype.kind == "f"):
        raise TypeError(
            f"Cannot cast array data from {ind.dtype!r} to dtype('int64') according to the "
            "rule 'safe'"
        )
    idx = ind.astype(np.intp).reshape(-1)
    if n == 0 and total:
        raise IndexError("cannot replace elements of an empty array")
    if mode == "wrap":
        return idx % max(n, 1)
    if mode == "clip":
        return np.clip(idx, 0, max(n - 1, 0))
    bad = (idx < -n) | (idx >= n)
    if bad.any():
        raise IndexError(f"index {int(idx[bad][0])} is out of bounds for axis 0 with size {n}")
    return np.where(idx < 0, idx + n, idx)
