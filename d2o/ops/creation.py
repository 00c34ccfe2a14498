"""Creation functions of `d2o.numpy` (``zeros``, ``arange``, ``eye``, ``fromfunction``, ...).

Every rank computes only its own piece, from the global indices of the box its layout
gives it (`fill`): nothing is communicated, and no rank ever holds the whole array.
``dist=`` chooses the layout (`distributor_for`):

* omitted (None): the default layout, the 'equal' slabs of ``D2O_STRATEGY`` along the
  first axis, or replicated for arrays below the ``replicate_below`` option;
* True: the default distributed layout whatever the size; False: replicated ('not');
* a strategy name ('equal', 'fftw', 'not', ...), a `d2o.layout(...)`, or another
  array whose layout is taken (same shape).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from ..array.base import Array as D2O
from ..array.base import from_local as _from_local
from ..core import config as _config
from ..core.comm import as_comm
from ..layouts.distributors import STRATEGIES, Distributor, entry_indices, get_distributor
from ..layouts.mesh import Layout
from ..move.redistribution import redistribute

__all__ = [
    "distributor_for", "fill", "empty", "zeros", "ones", "full", "empty_like", "zeros_like",
    "ones_like", "full_like", "arange", "linspace", "logspace", "geomspace", "eye",
    "identity", "tri", "fromfunction", "indices", "meshgrid", "asarray", "array",
    "ascontiguousarray", "asanyarray",
]  # fmt: skip


def shape_tuple(shape: Any) -> tuple:
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    try:
        out = tuple(operator.index(n) for n in shape)
    except TypeError:
        raise TypeError(
            f"expected a sequence of integers or a single integer, got {shape!r}"
        ) from None
    if any(n < 0 for n in out):
        raise ValueError("negative dimensions are not allowed")
    return out


def distributor_for(
    dist: Any, shape: tuple, dtype: Any = np.float64, comm: Any = None
) -> Distributor:
    """The layout of a new array of ``shape`` for a ``dist=`` argument (module notes).

    Local: every rank computes the same layout from the same arguments.
    """
    shape = shape_tuple(shape)
    c = as_comm(comm)
    if isinstance(dist, D2O):
        d = dist.distributor
        if d.global_shape == shape:
            return d
        dist = dist.layout if isinstance(dist.layout, Layout) else dist.distribution_strategy
    if isinstance(dist, Layout):
        return dist.distributor(shape)
    if dist is None:
        nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
        small = nbytes < _config.get_option("replicate_below")
        return get_distributor("not" if small else _config.default_strategy(), shape, c)
    if dist is True:
        return get_distributor(_config.default_strategy(), shape, c)
    if dist is False:
        return get_distributor("not", shape, c)
    if isinstance(dist, str) and dist in STRATEGIES:
        return get_distributor(dist, shape, c)
    raise ValueError(
        f"dist= takes None, True, False, a strategy ({', '.join(STRATEGIES)}), a d2o.layout "
        f"or a distributed array; got {dist!r}"
    )


def fill(d: Distributor, dtype: Any, values: Callable) -> D2O:
    """A new array of layout ``d`` whose piece is ``values(*index)``: ``index`` holds, per
    axis, this rank's global indices along it, shaped to broadcast (an open mesh).
    Local."""
    box = d.region(d.comm.rank)
    ndim = len(box)
    idx = [entry_indices(e).reshape((-1,) + (1,) * (ndim - a - 1)) for a, e in enumerate(box)]
    piece = np.asarray(values(*idx))
    piece = np.broadcast_to(piece, d.local_shape).astype(dtype, copy=True)
    return _from_local(piece, d)


def _filled(shape: Any, dtype: Any, value: Any, dist: Any, comm: Any = None) -> D2O:
    dt = np.dtype(dtype)
    d = distributor_for(dist, shape, dt, comm)
    data = np.empty(d.local_shape, dtype=dt) if value is None else np.full(d.local_shape, value, dt)
    return _from_local(data, d)


def empty(
    shape: Any, dtype: Any = float, order: str = "C", *, dist: Any = None, device=None, like=None
):
    """numpy's ``empty``; every rank allocates only its piece."""
    return _filled(shape, dtype, None, dist)


def zeros(
    shape: Any, dtype: Any = float, order: str = "C", *, dist: Any = None, device=None, like=None
):
    """numpy's ``zeros``; every rank allocates only its piece."""
    return _filled(shape, dtype, 0, dist)


def ones(
    shape: Any, dtype: Any = None, order: str = "C", *, dist: Any = None, device=None, like=None
):
    """numpy's ``ones``; every rank allocates only its piece."""
    return _filled(shape, float if dtype is None else dtype, 1, dist)


def full(
    shape: Any,
    fill_value: Any,
    dtype: Any = None,
    order: str = "C",
    *,
    dist=None,
    device=None,
    like=None,
):
    """numpy's ``full``; every rank allocates only its piece."""
    if isinstance(fill_value, D2O):
        fill_value = fill_value.get_full_data()
    dt = np.asarray(fill_value).dtype if dtype is None else np.dtype(dtype)
    fv = np.asarray(fill_value)
    if fv.ndim:  # an array fill value broadcasts against the shape: each rank cuts its part
        d = distributor_for(dist, shape, dt)
        whole = np.broadcast_to(fv, d.global_shape)
        return fill(d, dt, lambda *idx: whole[idx])
    return _filled(shape, dt, fill_value, dist)


def _like(a: Any, dtype: Any, shape: Any, dist: Any) -> tuple:
    shape = np.shape(a) if shape is None else shape_tuple(shape)
    dt = (
        np.asarray(a).dtype
        if not isinstance(a, D2O) and dtype is None
        else (a.dtype if dtype is None else np.dtype(dtype))
    )
    if dist is None and isinstance(a, D2O):
        dist = a
    return distributor_for(dist, shape, dt), dt


def empty_like(a: Any, dtype=None, order="K", subok=True, shape=None, *, dist=None, device=None):
    """numpy's ``empty_like``: a distributed prototype's layout when the shape is its own."""
    d, dt = _like(a, dtype, shape, dist)
    return _from_local(np.empty(d.local_shape, dtype=dt), d)


def zeros_like(a: Any, dtype=None, order="K", subok=True, shape=None, *, dist=None, device=None):
    """numpy's ``zeros_like``: a distributed prototype's layout when the shape is its own."""
    d, dt = _like(a, dtype, shape, dist)
    return _from_local(np.zeros(d.local_shape, dtype=dt), d)


def ones_like(a: Any, dtype=None, order="K", subok=True, shape=None, *, dist=None, device=None):
    """numpy's ``ones_like``: a distributed prototype's layout when the shape is its own."""
    d, dt = _like(a, dtype, shape, dist)
    return _from_local(np.ones(d.local_shape, dtype=dt), d)


def full_like(a: Any, fill_value, dtype=None, order="K", subok=True, shape=None, *, dist=None,
              device=None):  # fmt: skip
    """numpy's ``full_like``: a distributed prototype's layout when the shape is its own."""
    d, dt = _like(a, dtype, shape, dist)
    return _from_local(np.full(d.local_shape, fill_value, dtype=dt), d)


def arange(start: Any, stop: Any = None, step: Any = None, dtype: Any = None, *, dist=None,
           device=None, like=None):  # fmt: skip
    """numpy's ``arange``: each rank computes its values ``start + i*delta`` (numpy's rule)."""
    if stop is None:
        start, stop = 0, start
    if step is None:
        step = 1
    if step == 0:
        raise ZeroDivisionError("step must not be zero")
    dt = np.result_type(start, stop, step) if dtype is None else np.dtype(dtype)
    first = np.arange(start, start + 2 * step, step, dtype=dt)[:2]  # numpy's first values
    n = max(0, int(np.ceil((stop - start) / step)))
    d = distributor_for(dist, (n,), dt)
    if n == 0 or first.size < 2:
        return fill(d, dt, lambda i: first[:1] if n else np.zeros(0, dt))
    delta = first[1] - first[0]
    return fill(d, dt, lambda i: first[0] + i * delta if dt.kind in "iub" else
                first[0] + i.astype(dt) * delta)  # fmt: skip


def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0, *,
             dist=None, device=None):  # fmt: skip
    """numpy's ``linspace`` (array ends broadcast); each rank computes its piece."""
    num = operator.index(num)
    if num < 0:
        raise ValueError(f"Number of samples, {num}, must be non-negative.")
    div = (num - 1) if endpoint else num
    start_a, stop_a = np.asanyarray(start) * 1.0, np.asanyarray(stop) * 1.0
    dt = np.result_type(start_a, stop_a, float(num)) if dtype is None else np.dtype(dtype)
    delta = stop_a - start_a
    step = delta / div if div > 0 else np.nan * delta
    base = np.broadcast(start_a, stop_a).shape
    ax = axis + len(base) + 1 if axis < 0 else axis
    if not 0 <= ax <= len(base):
        raise np.exceptions.AxisError(axis, len(base) + 1)
    shape = base[:ax] + (num,) + base[ax:]
    d = distributor_for(dist, shape, dt)

    def values(*idx):
        j = idx[ax]
        sel = tuple(np.zeros_like(i) if a == ax else i for a, i in enumerate(idx))

        def cut(v):
            return np.expand_dims(np.broadcast_to(v, base), ax)[sel]

        s0, st, dl = cut(start_a), cut(step), cut(delta)
        if div > 0:
            y = j * st + s0 if np.all(st != 0) else (j / div) * dl + s0
        else:
            y = j * dl + s0
        if endpoint and num > 1:
            y = np.where(j == num - 1, cut(stop_a), y)
        return y

    out = fill(d, dt, values)
    return (out, step) if retstep else out


def logspace(start, stop, num=50, endpoint=True, base=10.0, dtype=None, axis=0, *, dist=None):
    """numpy's ``logspace``: ``base ** linspace(...)``, local."""
    y = linspace(start, stop, num=num, endpoint=endpoint, axis=axis, dist=dist)
    out = np.power(base, y)
    return out if dtype is None else out.astype(dtype, copy=False)


def geomspace(start, stop, num=50, endpoint=True, dtype=None, axis=0, *, dist=None):
    """numpy's ``geomspace`` for positive real ends: ``exp(linspace(log ...))``, local."""
    if np.any(np.asarray(start) == 0) or np.any(np.asarray(stop) == 0):
        raise ValueError("Geometric sequence cannot include zero")
    y = linspace(np.log(start), np.log(stop), num=num, endpoint=endpoint, axis=axis, dist=dist)
    out = np.exp(y)
    return out if dtype is None else out.astype(dtype, copy=False)


def eye(N, M=None, k=0, dtype=float, order="C", *, dist=None, device=None, like=None):
    """numpy's ``eye``; each rank sets the ones of its piece."""
    M = N if M is None else M
    d = distributor_for(dist, (N, M), dtype)
    piece = np.zeros(d.local_shape, dtype=dtype)
    box = d.region(d.comm.rank)
    rows, cols = entry_indices(box[0]), entry_indices(box[1])
    # the ones of this piece: rows i whose column i + k it holds (positions by searchsorted,
    # the global indices of a piece ascend)
    want = rows + k
    at = np.searchsorted(cols, want)
    ok = (
        (at < cols.size) & (cols[np.minimum(at, max(cols.size - 1, 0))] == want)
        if cols.size
        else at < 0
    )
    piece[np.nonzero(ok)[0], at[ok]] = 1
    return _from_local(piece, d)


def identity(n, dtype=None, *, dist=None, like=None):
    """numpy's ``identity``."""
    return eye(n, dtype=float if dtype is None else dtype, dist=dist)


def tri(N, M=None, k=0, dtype=float, *, dist=None, like=None):
    """numpy's ``tri``; local."""
    M = N if M is None else M
    d = distributor_for(dist, (N, M), dtype)
    return fill(d, dtype, lambda i, j: j - i <= k)


def fromfunction(function: Callable, shape, *, dtype=float, dist=None, like=None, **kwargs):
    """numpy's ``fromfunction``: ``function`` gets this rank's global index grids (of
    ``dtype``) and returns its piece; nothing moves."""
    d = distributor_for(dist, shape, dtype)
    box = d.region(d.comm.rank)
    grids = np.meshgrid(*[entry_indices(e).astype(dtype) for e in box], indexing="ij")
    piece = np.asarray(function(*grids, **kwargs))
    return _from_local(np.broadcast_to(piece, d.local_shape).copy(), d)


def indices(dimensions, dtype=int, sparse=False, *, dist=None):
    """numpy's ``indices`` (dense): the grid's first axis enumerates the dimensions."""
    if sparse:
        return tuple(
            arange(n, dtype=dtype, dist=dist).reshape(
                (1,) * a + (n,) + (1,) * (len(dimensions) - a - 1)
            )
            for a, n in enumerate(dimensions)
        )
    dims = shape_tuple(dimensions)
    d = distributor_for(dist, (len(dims),) + dims, dtype)

    def values(c, *idx):
        grid = np.broadcast_shapes(*[i.shape for i in idx])
        return np.stack([np.broadcast_to(i, grid) for i in idx])[c.reshape(-1)]

    return fill(d, dtype, values) if dims else _from_local(np.zeros(d.local_shape, dtype), d)


def meshgrid(*xi, copy=True, sparse=False, indexing="xy", dist=None):
    """numpy's ``meshgrid`` of 1-d coordinate vectors (numpy or distributed); every rank
    computes its piece of each grid from the vectors (distributed ones are gathered: they
    are 1-d, the grids hold the product of their lengths)."""
    if indexing not in ("xy", "ij"):
        raise ValueError("Valid values for `indexing` are 'xy' and 'ij'.")
    vecs = [np.ravel(x.get_full_data() if isinstance(x, D2O) else np.asarray(x)) for x in xi]
    n = len(vecs)
    shape = tuple(v.size for v in vecs)
    if indexing == "xy" and n > 1:
        shape = (shape[1], shape[0]) + shape[2:]
    out = []
    for k, v in enumerate(vecs):
        ax = k
        if indexing == "xy" and n > 1 and k < 2:
            ax = 1 - k
        if sparse:
            s = [1] * n
            s[ax] = v.size
            out.append(asarray(v.reshape(s), dist=dist))
            continue
        d = distributor_for(dist, shape, v.dtype)
        out.append(fill(d, v.dtype, lambda *idx, v=v, ax=ax: v[idx[ax]]))
    return out  # a list, as the array API asks (numpy gives a tuple)


def asarray(a: Any, dtype: Any = None, order: Any = None, *, copy: Any = None, dist: Any = None,
            device=None, like=None, comm: Any = None):  # fmt: skip
    """numpy's ``asarray``: a distributed array itself (a copy only where ``dtype`` or
    ``dist`` ask for another one); other input is cut by every rank (it must hold the
    same values on every rank, as any global argument)."""
    if isinstance(a, D2O):
        d = a.distributor
        target = d if dist is None else distributor_for(dist, a.shape, a.dtype)
        same_dtype = dtype is None or np.dtype(dtype) == a.dtype
        if target is d and same_dtype and copy is not True:
            return a
        if copy is False:
            raise ValueError("Unable to avoid copy while creating an array as requested.")
        out = a.astype(a.dtype if dtype is None else dtype)
        if target is not d:
            return _from_local(redistribute(out.data, d, target, explicit=True), target)
        return out
    g = np.asarray(a, dtype=dtype)
    d = distributor_for(dist, g.shape, g.dtype, comm)
    return _from_local(np.array(g[d.local_slice] if g.ndim else g, copy=True), d)


def array(obj: Any, dtype: Any = None, *, copy: bool = True, order="K", subok=False, ndmin=0,
          dist: Any = None, like=None):  # fmt: skip
    """numpy's ``array``: a copy (unless ``copy=False`` and nothing needs to change)."""
    if isinstance(obj, D2O):
        out = asarray(obj, dtype=dtype, copy=None if copy is False else True, dist=dist)
    else:
        out = asarray(np.array(obj, dtype=dtype, copy=copy, ndmin=ndmin), dist=dist)
    if ndmin and out.ndim < ndmin:
        out = out.reshape((1,) * (ndmin - out.ndim) + out.shape)
    return out


def ascontiguousarray(a: Any, dtype: Any = None, *, dist=None, like=None):
    """numpy's ``ascontiguousarray`` (pieces are always contiguous once copied)."""
    return asarray(a, dtype=dtype, dist=dist)


asanyarray = asarray
