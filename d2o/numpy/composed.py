"""`d2o.numpy` functions composed of distributed building blocks (slices, element-wise
operations, concatenation, reshapes, reductions), so that none of them gathers:
``diff``/``ediff1d`` of an array's only axis, ``convolve``/``correlate`` with a short
kernel, ``kron``, ``tile``, ``resize``, ``trim_zeros``, ``histogramdd``/``histogram2d``.
What moves is what the building blocks move; each docstring says which.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from ..array.align import align
from ..array.base import Array as D2O
from ..core.errors import agreed
from ..layouts.mesh import is_mesh
from ..move.halo import slab_rows
from ..ops.axislocal import elementwise, fallback, whole_along
from ..ops.creation import zeros
from ..ops.joining import concatenate

__all__ = [
    "diff_along",
    "gradient_along",
    "ediff1d",
    "convolve",
    "correlate",
    "kron",
    "tile",
    "resize",
    "trim_zeros",
    "histogramdd",
    "histogram2d",
]


def _concat(parts: list) -> Any:
    return concatenate(parts)


def split_axis(a: Any, axis: Any) -> int | None:
    """The axis ``axis`` names when it is a split axis of ``a``'s slab layout or process
    mesh (so that shifted views along it move boundary slices only: one per block
    boundary, `d2o.move.halo`), else None.  Local."""
    if not isinstance(a, D2O) or isinstance(axis, tuple):
        return None
    d = a.distributor
    if not slab_rows(d) and not is_mesh(d):
        return None
    try:
        ax = np.lib.array_utils.normalize_axis_index(operator.index(axis), a.ndim)
    except Exception:
        return None  # the general path raises numpy's error on every rank
    return ax if ax == d.axis or (is_mesh(d) and ax in d.split_axes()) else None


def _along(ax: int, ndim: int, sl: slice) -> tuple:
    return (slice(None),) * ax + (sl,) + (slice(None),) * (ndim - ax - 1)


def diff_along(along: Callable) -> Callable:
    """numpy's ``diff``; along the only axis of a distributed 1-d array, or a split axis
    of a slab layout or process mesh, it is ``x[1:] - x[:-1]`` of shifted views (each order
    moves one boundary slice per block boundary: on block-cyclic axes one per block),
    else ``along`` (the axis-local path)."""

    def diff(a, n=1, axis=-1, prepend=np._NoValue, append=np._NoValue):
        ax = split_axis(a, axis)
        plain = prepend is np._NoValue and append is np._NoValue
        if ax is not None and a.ndim > 1 and plain and operator.index(n) >= 0:
            x = a
            op = np.not_equal if x.dtype == bool else np.subtract
            for _ in range(n):
                x = op(
                    x[_along(ax, a.ndim, slice(1, None))], x[_along(ax, a.ndim, slice(None, -1))]
                )
            return x
        if not isinstance(a, D2O) or a.ndim != 1 or a.distributor.replicated:
            kw = {
                k: v for k, v in (("prepend", prepend), ("append", append)) if v is not np._NoValue
            }
            return along(a, n=n, axis=axis, **kw)
        with agreed(a.distributor.comm):
            np.lib.array_utils.normalize_axis_index(axis, 1)
            if n < 0:
                raise ValueError(f"order must be non-negative but got {n!r}")
        parts = [a]
        if prepend is not np._NoValue:
            parts.insert(0, np.broadcast_to(prepend, (1,)) if np.ndim(prepend) == 0 else prepend)
        if append is not np._NoValue:
            parts.append(np.broadcast_to(append, (1,)) if np.ndim(append) == 0 else append)
        x = _concat(parts) if len(parts) > 1 else a
        op = np.not_equal if x.dtype == bool else np.subtract
        for _ in range(n):
            x = op(x[1:], x[:-1])
        return x

    return diff


def ediff1d(ary, to_end=None, to_begin=None):
    """numpy's ``ediff1d``: the flattened array's differences (`diff_along`'s shifted
    views), with ``to_begin``/``to_end`` joined on."""
    if not isinstance(ary, D2O):
        return np.ediff1d(ary, to_end=to_end, to_begin=to_begin)
    flat = ary.ravel()
    with agreed(flat.distributor.comm):
        for v in (to_begin, to_end):
            if v is not None and not np.can_cast(np.asarray(v), flat.dtype, casting="same_kind"):
                raise TypeError("dtype of `to_begin` or `to_end` must be compatible with input")
    d = flat[1:] - flat[:-1] if flat.dtype != bool else np.not_equal(flat[1:], flat[:-1])
    parts = [d]
    if to_begin is not None:
        parts.insert(0, np.asarray(to_begin, dtype=d.dtype).ravel())
    if to_end is not None:
        parts.append(np.asarray(to_end, dtype=d.dtype).ravel())
    return _concat(parts) if len(parts) > 1 else d


def _short(v: Any) -> np.ndarray | None:
    """``v`` as a numpy array when it is small enough to hold on every rank (numpy data or
    a replicated distributed array): the kernel of a convolution."""
    if isinstance(v, D2O):
        return v.data if v.distributor.replicated else None
    return np.asarray(v)


def convolve(a, v, mode="full"):
    """numpy's ``convolve`` of a distributed 1-d ``a`` with a kernel held on every rank:
    the sum of ``len(v)`` shifted views of the zero-padded ``a``, each scaled by one kernel
    element (one exchange per misaligned view).  A distributed kernel takes the bounded
    fallback."""
    k = _short(v)
    if not isinstance(a, D2O) or a.ndim != 1 or k is None or k.ndim != 1 or k.size > a.size:
        if not isinstance(a, D2O) and not isinstance(v, D2O):
            return np.convolve(a, v, mode)
        return fallback("convolve", np.convolve, (a, v), {"mode": mode})
    with agreed(a.distributor.comm):
        if mode not in ("full", "same", "valid"):
            raise ValueError(f"mode must be one of 'full', 'same', or 'valid' (got {mode!r})")
        if k.size == 0:
            raise ValueError("v cannot be empty")
        if a.size == 0:
            raise ValueError("a cannot be empty")
    n, m = a.size, k.size
    dt = np.result_type(a.dtype, k.dtype)
    pad = np.zeros(m - 1, dtype=dt)
    ap = _concat([pad, a.astype(dt), pad]) if m > 1 else a.astype(dt)
    length = n + m - 1
    start, stop = {"full": (0, length), "same": ((m - 1) // 2, (m - 1) // 2 + n),
                   "valid": (m - 1, n)}[mode]  # fmt: skip
    out = None
    for j in range(m):
        lo = m - 1 - j + start
        term = ap[lo : lo + (stop - start)] * k[j]
        out = term if out is None else out + term
    return out


def correlate(a, v, mode="valid"):
    """numpy's ``correlate``: `convolve` with the reversed, conjugated kernel."""
    k = _short(v)
    if not isinstance(a, D2O) or k is None or k.ndim != 1:
        if not isinstance(a, D2O) and not isinstance(v, D2O):
            return np.correlate(a, v, mode)
        return fallback("correlate", np.correlate, (a, v), {"mode": mode})
    return convolve(a, np.conj(k[::-1]) if k.dtype.kind == "c" else k[::-1], mode)


def kron(a, b):
    """numpy's ``kron``: the broadcast product of ``a`` and ``b`` with their axes
    interleaved, reshaped (element-wise work, then the reshape's exchange if any)."""
    if not isinstance(a, D2O) and not isinstance(b, D2O):
        return np.kron(a, b)
    nd = max(np.ndim(a), np.ndim(b))
    sa = (1,) * (nd - np.ndim(a)) + tuple(np.shape(a))
    sb = (1,) * (nd - np.ndim(b)) + tuple(np.shape(b))
    ia = tuple(x for s in sa for x in (s, 1))
    ib = tuple(x for s in sb for x in (1, s))
    out_shape = tuple(x * y for x, y in zip(sa, sb))
    ra = a.reshape(ia) if isinstance(a, D2O) else np.reshape(a, ia)
    rb = b.reshape(ib) if isinstance(b, D2O) else np.reshape(b, ib)
    return (ra * rb).reshape(out_shape)


def tile(A, reps):
    """numpy's ``tile``: ``A`` broadcast along new interleaved axes, then reshaped."""
    if not isinstance(A, D2O):
        return np.tile(A, reps)
    tup = tuple(reps) if np.iterable(reps) else (reps,)
    nd = max(len(tup), A.ndim)
    tup = (1,) * (nd - len(tup)) + tuple(int(t) for t in tup)
    shape = (1,) * (nd - A.ndim) + A.shape
    if all(t == 1 for t in tup):
        return A.reshape(shape).copy()
    inter = tuple(x for s in shape for x in (1, s))
    target = tuple(x for t, s in zip(tup, shape) for x in (t, s))
    b = broadcast_to(A.reshape(inter), target)
    return b.reshape(tuple(t * s for t, s in zip(tup, shape)))


def resize(a, new_shape):
    """numpy's ``resize``: the flattened array repeated (concatenation) and cut."""
    if not isinstance(a, D2O):
        return np.resize(a, new_shape)
    shape = (new_shape,) if isinstance(new_shape, (int, np.integer)) else tuple(new_shape)
    with agreed(a.distributor.comm):
        if any(s < 0 for s in shape):
            raise ValueError("all elements of `new_shape` must be non-negative")
    size = math.prod(shape)
    flat = a.ravel()
    if flat.size == 0 or size == 0:
        return zeros(shape, dtype=a.dtype, comm=a.distributor.comm)
    reps = -(-size // flat.size)
    full = _concat([flat] * reps) if reps > 1 else flat
    return full[:size].reshape(shape)


def trim_zeros(filt, trim="fb", axis=None):
    """numpy's ``trim_zeros`` of a 1-d array: the first and last nonzero positions (two
    reductions), then a slice (a view)."""
    if not isinstance(filt, D2O) or filt.ndim != 1:
        if not isinstance(filt, D2O):
            return np.trim_zeros(filt, trim) if axis is None else np.trim_zeros(filt, trim, axis)
        return fallback("trim_zeros", np.trim_zeros, (filt, trim), {"axis": axis})
    with agreed(filt.distributor.comm):
        t = trim.lower()
        if not set(t) <= {"f", "b"}:
            raise ValueError(f"unexpected character(s) in `trim`: {trim!r}")
    nz = filt != 0
    n = filt.size
    if not bool(nz.any()):
        return filt[:0]
    start = int(nz.argmax()) if "f" in t else 0
    stop = n - int(nz[::-1].argmax()) if "b" in t else n
    return filt[start:stop]


def _sample_piece(sample: Any) -> tuple:
    """This rank's rows of an (N, D) sample (a distributed 2-d array, or a sequence of D
    distributed 1-d arrays) with every row on exactly one rank, and the communicator."""
    if isinstance(sample, D2O):
        x = sample if sample.ndim == 2 else sample.reshape(-1, 1)
        data, d = whole_along(x, (1,))
        if d.replicated and d.comm.rank:
            data = data[:0]
        return data, d
    first = next(s for s in sample if isinstance(s, D2O))
    data, d = whole_along(first, ())
    cols = [align(s, d) if isinstance(s, D2O) else np.asarray(s)[d.local_slice] for s in sample]
    piece = np.stack(cols, axis=-1) if cols else np.zeros((0, 0))
    if d.replicated and d.comm.rank:
        piece = piece[:0]
    return piece, d


def histogramdd(sample, bins=10, range=None, density=None, weights=None):
    """numpy's ``histogramdd`` of distributed samples: the global extremes (two
    reductions) fix the edges, every rank counts its rows, one ``Allreduce`` sums the
    counts."""
    arrays = [sample] if isinstance(sample, D2O) else [s for s in sample if isinstance(s, D2O)]
    if not arrays or (not isinstance(sample, D2O) and any(np.ndim(s) != 1 for s in sample)):
        return fallback("histogramdd", np.histogramdd, (sample,),
                        {"bins": bins, "range": range, "density": density, "weights": weights})  # fmt: skip
    piece, d = _sample_piece(sample)
    comm = d.comm
    D = piece.shape[1]
    w = None
    if weights is not None:
        rows = d if d.ndim == 1 or d.replicated else d.slabs_like((d.global_shape[0],), 0)
        if isinstance(weights, D2O):
            w = align(weights, rows) if not d.replicated else weights.get_full_data()
        else:
            w = np.asarray(weights)[d.local_slice[:1]] if not d.replicated else np.asarray(weights)
        if d.replicated and comm.rank:
            w = w[:0]
    with agreed(comm):
        spec = list(bins) if np.iterable(bins) and not isinstance(bins, str) else [bins] * D
        if len(spec) != D:
            raise ValueError(
                "The dimension of bins must be equal to the dimension of the sample x."
            )
        lo = piece.min(axis=0) if len(piece) else np.full(D, np.inf)
        hi = piece.max(axis=0) if len(piece) else np.full(D, -np.inf)
    glo = comm.Allreduce(np.asarray(lo, dtype=np.float64), "min")
    ghi = comm.Allreduce(np.asarray(hi, dtype=np.float64), "max")
    rng = list(range) if range is not None else [None] * D
    for i in np.arange(D):
        if rng[i] is None and np.ndim(spec[i]) == 0:
            rng[i] = (glo[i], ghi[i]) if glo[i] <= ghi[i] else (0.0, 1.0)
    with agreed(comm):
        edges = np.histogramdd(np.zeros((0, D)), spec, range=rng)[1]
        counts, _ = np.histogramdd(piece, edges, weights=w)
    hist = comm.Allreduce(counts, "sum") if comm.size > 1 else counts
    if density:
        s = hist.sum()
        for i in np.arange(D):
            shape = [1] * D
            shape[i] = -1
            hist = hist / np.diff(edges[i]).reshape(shape)
        hist = hist / s
    return hist, edges


def histogram2d(x, y, bins=10, range=None, density=None, weights=None):
    """numpy's ``histogram2d``: `histogramdd` of the pair."""
    try:
        nb = len(bins)
    except TypeError:
        nb = 1
    if nb != 1 and nb != 2:
        bins = [np.asarray(bins), np.asarray(bins)]
    hist, edges = histogramdd([x, y], bins, range, density, weights)
    return hist, edges[0], edges[1]


def gradient_along(f: D2O, ax: int, h: float, edge_order: int) -> D2O:
    """numpy's ``gradient`` of ``f`` along the split axis ``ax`` of its slab layout, with
    spacing ``h``: central differences of shifted views in the interior and numpy's
    one-sided formulas at the two edges, written into a result of ``f``'s layout (the
    interior moves one boundary row per neighbour, the edges a few rows to their
    owners)."""
    nd = f.ndim
    if f.dtype.kind in "iu":  # numpy: integers are differenced as float64
        f = f.astype(np.float64)
    out = f.copy_empty()
    at = lambda sl: f[_along(ax, nd, sl)]  # noqa: E731
    first, last = _along(ax, nd, slice(0, 1)), _along(ax, nd, slice(-1, None))
    out[_along(ax, nd, slice(1, -1))] = (at(slice(2, None)) - at(slice(None, -2))) / (2.0 * h)
    if edge_order == 1:
        out[first] = (at(slice(1, 2)) - at(slice(0, 1))) / h
        out[last] = (at(slice(-1, None)) - at(slice(-2, -1))) / h
    else:  # numpy's coefficients, in numpy's order of operations
        a, b, c = -1.5 / h, 2.0 / h, -0.5 / h
        out[first] = a * at(slice(0, 1)) + b * at(slice(1, 2)) + c * at(slice(2, 3))
        a, b, c = 0.5 / h, -2.0 / h, 1.5 / h
        out[last] = a * at(slice(-3, -2)) + b * at(slice(-2, -1)) + c * at(slice(-1, None))
    return out


def broadcast_to(array, shape, subok=False):
    """numpy's ``broadcast_to`` (a new array here; numpy gives a read-only view)."""
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    z = zeros(shape, dtype=bool, dist=array if array.shape == shape else True)
    return elementwise(lambda p, q: np.broadcast_to(p, q.shape).copy(), [array, z])
