"""The original D2O methods that NIFTy code calls beyond the paper's listings.

``apply_scalar_function``, ``argmax_nonflat``/``argmin_nonflat``, ``isreal``,
``iscomplex``, ``nan_to_num``, ``median`` and the ``hermitian`` flag.  All are
built from d2o's own mechanisms: element-wise work on the local pieces,
reductions, and (for ``median``) a distributed radix selection that never
gathers the array.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from ..array.base import Array as D2O
from ..array.base import from_local as _from_local
from ..core import config as _config
from ..core.errors import agreed
from ..core.registry import operation
from ..layouts.distributors import get_distributor, like, normalize_axis
from ..move.redistribution import exchange, redistribute
from . import reductions as _reductions  # noqa: F401  (installs ravel; flatten below replaces its alias)
from .reductions import store
from .samplesort import order_statistics

__all__ = ["median"]


def apply_scalar_function(
    self: D2O, function: Callable, inplace: bool = False, dtype: Any = None
) -> D2O:
    """``function`` applied to every element; local (no communication).

    ``function`` gets the local piece (a numpy array); when it cannot take an
    array it is applied element by element (``np.vectorize``).  With
    ``inplace`` the result is written into this array (in its dtype).  The
    result is hermitian only if this array is and ``function`` is ``np.exp`` or
    ``np.log`` (the original D2O rule).
    """
    data = self.data
    if data.size:
        try:
            res = np.asarray(function(data))
            if res.shape != data.shape:
                raise ValueError("not element-wise")
        except Exception:
            res = np.vectorize(function)(data) if data.size else data
    else:
        res = data
    if inplace:
        data[...] = res
        out = self
    else:
        out = _from_local(
            np.array(res, dtype=dtype if dtype is not None else res.dtype), self.distributor
        )
    out.hermitian = bool(self.hermitian) and function in (np.exp, np.log)
    return out


def nonflat(self: D2O, name: str, axis: Any = None) -> tuple:
    """``argmax_nonflat``/``argmin_nonflat``: the index tuple of ``name()`` (numpy's
    ``unravel_index``); collective, identical on every rank."""
    if axis is not None and self.size == 0:
        raise ValueError(f"attempt to get {name} of an empty sequence")
    if axis is not None:
        raise NotImplementedError(
            f"{name}_nonflat over an axis is not defined; use {name}(axis=...)"
        )
    flat = getattr(self, name)()
    return tuple(int(i) for i in np.unravel_index(flat, self.shape))


def isreal(self: D2O) -> D2O:
    """Element-wise ``np.isreal``; local."""
    return _from_local(np.isreal(self.data), self.distributor)


def iscomplex(self: D2O) -> D2O:
    """Element-wise ``np.iscomplex``; local."""
    return _from_local(np.iscomplex(self.data), self.distributor)


def nan_to_num(self: D2O, copy: bool = True, nan: float = 0.0, posinf=None, neginf=None) -> D2O:
    """``np.nan_to_num`` of every element; local.  ``copy=False`` works in place."""
    res = np.nan_to_num(self.data, copy=copy, nan=nan, posinf=posinf, neginf=neginf)
    if not copy:
        return self
    return _from_local(res, self.distributor)


# -- median: a distributed radix selection --------------------------------------------


def _median_all(obj: D2O) -> Any:
    """Collective: the median of every element, without gathering.

    Complex values order lexicographically (real, then imaginary part) with NaNs
    last, as numpy sorts them; with a NaN present the median is the last element
    in that order, as numpy's partition-based median returns it.
    """
    d = obj.distributor
    comm = d.comm
    data = obj.data.reshape(-1)
    kind = obj.dtype.kind
    n = obj.size
    rdt = np.median(np.zeros(1, dtype=obj.dtype)).dtype
    if n == 0:  # numpy's NaN and "Mean of empty slice" warning
        warnings.warn("Mean of empty slice.", RuntimeWarning, stacklevel=3)
        return rdt.type(complex(np.nan, np.nan) if rdt.kind == "c" else np.nan)  # numpy's
    if d.replicated or comm.size == 1:
        return rdt.type(np.median(data))
    ks = [n - 1] if kind in "fc" and bool(np.isnan(obj).any()) else sorted({(n - 1) // 2, n // 2})
    vals = np.array(order_statistics(data, ks, comm, n), dtype=obj.dtype)
    return rdt.type(vals[0] if len(vals) == 1 else np.mean(vals))


@operation(kind="reduction")
def median(a: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False,
           keepdims: bool = False) -> Any:  # fmt: skip
    """Collective: numpy's ``median``, never gathering the array.

    ``axis=None``: the radix selection of the middle element(s)
    (`d2o.ops.samplesort.order_statistics`, a few Allreduces of counts), a numpy scalar
    identical on every rank.  Along an axis that is whole on every
    rank: numpy on the local piece.  Along the split axis: one redistribution
    so that the axis is whole, then numpy (the result keeps a split axis).
    Complex values order as numpy sorts them.  ``out`` (a distributed array)
    receives the result as reductions' ``out=`` does (`d2o.ops.reductions.store`).
    """
    return store(_median(a, axis, out, keepdims), out)


def _median(a: Any, axis: Any, out: Any, keepdims: bool) -> Any:
    """The median (see `median`); ``out`` only validated here."""
    obj = a
    d = obj.distributor
    with agreed(d.comm):
        if out is not None and not isinstance(out, D2O):
            raise TypeError("out= of a distributed median must be a distributed_data_object")
        if obj.dtype.kind not in "biufc":
            raise TypeError(f"median of dtype {obj.dtype} is not supported for distributed arrays")
        if axis is None:
            axes = tuple(range(obj.ndim))
        else:
            raw = axis if isinstance(axis, tuple) else (axis,)
            axes = tuple(sorted({normalize_axis(x, obj.ndim) for x in raw}))
            if len(axes) != len(raw):
                raise ValueError("duplicate value in 'axis'")
    if len(axes) == obj.ndim:  # every axis: one order statistic of all elements
        res = _median_all(obj)
        if keepdims:
            full = np.full((1,) * obj.ndim, res)
            return _from_local(full, get_distributor("not", full.shape, d.comm))
        return res
    data, lay = obj.data, d
    if not d.replicated and d.axis in axes and d.comm.size > 1:
        # make the reduced axes whole on every rank: split a kept axis instead (one exchange)
        other = next(i for i in range(obj.ndim) if i not in axes)
        lay = get_distributor("equal", obj.shape, d.comm, other)
        data = redistribute(obj.data, d, lay)
    if any(n == 0 for i, n in enumerate(data.shape) if i not in axes):
        # an empty local result (numpy cannot reshape such a piece): just its shape and dtype
        rdt = np.median(np.zeros((1,) * obj.ndim, dtype=obj.dtype), axis=axes).dtype
        res = np.empty(_reduced(data.shape, axes, keepdims), dtype=rdt)
    else:
        res = np.median(data, axis=axes, keepdims=keepdims)
    shape = _reduced(obj.shape, axes, keepdims)
    if lay.replicated:
        return _from_local(res, get_distributor("not", shape, d.comm))
    if lay.axis in axes:  # one rank: the split axis was reduced in place
        return _from_local(res, get_distributor("equal", shape, d.comm, 0))
    ax = lay.axis if keepdims else lay.axis - sum(a < lay.axis for a in axes)

    return _from_local(res, like(lay, shape, axis=ax))


def _reduced(shape: tuple, axes: tuple, keepdims: bool) -> tuple:
    if keepdims:
        return tuple(1 if i in axes else n for i, n in enumerate(shape))
    return tuple(n for i, n in enumerate(shape) if i not in axes)


def apply_generator(self: D2O, generator: Callable, copy: bool = False) -> None:
    """Fill this rank's piece with ``generator(local_shape)``; local (the original D2O's
    way to draw random fields piece by piece)."""
    self.set_local_data(generator(self.data.shape), copy=copy)


def equal(self: D2O, other: Any) -> bool:
    """Collective: True when ``other`` has this shape and every element is equal (the
    original D2O's ``equal``); identical on every rank."""
    if not isinstance(other, D2O) and np.shape(other) != self.shape:
        return False
    if isinstance(other, D2O) and other.shape != self.shape:
        return False
    return bool((self == other).all())


def flatten(self: D2O, inplace: bool = False) -> D2O:
    """The flattened array (C order): a copy, or with ``inplace`` the original D2O's
    copy-free flattening (numpy's ``ravel``: the result shares this array's memory where
    the layout allows it, so writes to it show here; this array keeps its shape).

    Local when the array is split along axis 0 or replicated; otherwise one
    redistribution (and then the result is a copy whatever ``inplace``).
    """
    flat = self.ravel()
    if inplace:
        return flat
    if np.may_share_memory(flat.data, self.data):  # a local decision: no new object
        flat.data = flat.data.copy()
    flat.base = None
    return flat


def iterate(self: D2O) -> Iterator:
    """Collective: iterate over the first axis, moving data in large chunks.

    Every rank receives the same elements; all ranks must consume the iterator in
    lockstep.  At most one local share (or ``iter_chunk`` bytes) is held at a time: one
    exchange per chunk of rows.
    """
    d = self.distributor
    if not d.ndim:
        raise TypeError("iteration over a 0-d array")
    if d.replicated or d.comm.size == 1:
        yield from self.data
        return
    n0 = d.global_shape[0]
    row = max(1, int(np.prod(d.global_shape[1:], dtype=np.int64)))
    # The same on every rank: from global quantities only (about one local share).
    share = -(-d.size // d.comm.size)
    chunk = max(1, max(share, _config.iter_chunk()) // row)
    have = d.region
    for start in range(0, n0, chunk):
        stop = min(n0, start + chunk)
        box = ((start, stop),) + tuple((0, n) for n in d.global_shape[1:])
        yield from exchange(d.comm, self.data, have, _every_rank_wants(box))


def _every_rank_wants(box: tuple) -> Callable[[int], tuple]:
    """The ``want`` of an exchange in which every rank wants ``box``."""
    return lambda rank: box
