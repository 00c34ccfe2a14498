"""Reductions, declared once in a table and computed through one path.

Each rank reduces its piece with numpy; when the distributed axis is among
the reduced axes the per-rank partials are combined across ranks:

* reductions to a scalar (``axis=None``): one Allreduce of a fixed 96-byte
  record carrying the error agreement and the partial
  (`d2o.core.errors.allreduce_agreed`; the partials combined by the numpy ufunc,
  in an order that gives every rank bit-identical values);
* array results: one Allreduce (MPI's built-in op where it matches numpy's
  semantics, else a user-defined op running the numpy ufunc); only dtypes MPI
  cannot reduce (datetimes) gather the partials.

Ranks holding no elements contribute the reduction's identity (for max/min:
the dtype's lowest/highest value).  numpy's own errors and result dtypes come
from running the numpy function on a "probe": an array of the global shape
with every nonzero length replaced by 1.

A reduction to a scalar returns a numpy scalar identical on every rank; over
undistributed axes the result stays distributed; over the distributed axis it
is replicated ('not').
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from ..array.align import align
from ..array.base import Array as D2O
from ..array.base import deferred_type as _DEFERRED_TYPE
from ..array.base import expression
from ..array.base import from_local as _from_local
from ..core import config as _config
from ..core.errors import (
    HEADER_WORDS,
    RECORD_WORDS,
    VALUE,
    agreed,
    allreduce_agreed,
    combiner,
    get_value,
    new_record,
    payload,
    put_value,
)
from ..layouts.distributors import (
    Distributor,
    get_distributor,
    like,
    slab_distributor,
)
from ..layouts.mesh import is_mesh, reduced_layout, subcomm
from ..move.redistribution import redistribute
from . import fused as _fused

__all__ = ["ufunc_reduce", "reduce", "ravel", "ASSOCIATIVE", "agreed_max", "agreed_total"]


def _lowest(dt: np.dtype) -> Any:
    if dt.kind in "fc":
        return -np.inf
    if dt.kind in "iu":
        return np.iinfo(dt).min
    return False


def _highest(dt: np.dtype) -> Any:
    if dt.kind in "fc":
        return np.inf
    if dt.kind in "iu":
        return np.iinfo(dt).max
    return True


def _nan_or(fallback: Callable) -> Callable:
    return lambda dt: np.nan if dt.kind in "fc" else fallback(dt)


# name: (numpy function, ufunc combining partials, fill for empty pieces or None, takes dtype=)
REDUCTIONS: dict[str, tuple] = {
    "sum": (np.sum, np.add, None, True),
    "prod": (np.prod, np.multiply, None, True),
    "nansum": (np.nansum, np.add, None, True),
    "max": (np.max, np.maximum, _lowest, False),
    "min": (np.min, np.minimum, _highest, False),
    "nanmax": (np.nanmax, np.fmax, _nan_or(_lowest), False),
    "nanmin": (np.nanmin, np.fmin, _nan_or(_highest), False),
    "all": (np.all, np.logical_and, None, False),
    "any": (np.any, np.logical_or, None, False),
}
REDUCTIONS["amax"] = REDUCTIONS["max"]
REDUCTIONS["amin"] = REDUCTIONS["min"]
# reductions whose numpy function is exactly ``ufunc.reduce`` for a plain ndarray
_SIMPLE = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum}
_SIMPLE["amax"], _SIMPLE["amin"] = _SIMPLE["max"], _SIMPLE["min"]


def combine_partials(
    partial: np.ndarray, ufunc: np.ufunc, dist: Distributor | None, comm: Any = None
) -> np.ndarray:
    """Collective over ``comm`` (default ``dist.comm``): combine per-rank ``partial`` arrays
    with ``ufunc``; identical on every rank.

    One Allreduce of ``partial`` (O(log P) messages of its size).  Dtypes MPI cannot
    reduce (datetimes, timedeltas) gather the partials instead while they are small
    (``size * ranks <= D2O_SMALL_REDUCE``), else raise TypeError.
    """
    comm = dist.comm if comm is None else comm
    if comm.size == 1:
        return partial
    if partial.dtype.kind in "biufc":
        return comm.Allreduce(partial, ufunc)
    if partial.size * comm.size <= _config.small_reduce():
        stacked = comm.Allgather(partial)
        return ufunc.reduce(stacked, axis=0, dtype=partial.dtype)
    raise TypeError(f"cannot reduce dtype {partial.dtype} across ranks")


_INT = np.dtype(np.int64)


def agreed_max(comm: Any, error: BaseException | None, value: int) -> int:
    """Collective: the largest ``value`` over the ranks, and the error agreement, in one
    Allreduce of a 96-byte record; raises on every rank where any rank has ``error``."""
    return int(agreed_total(comm, error, value, _INT, np.maximum))


def probe(obj: D2O) -> np.ndarray:
    """A tiny array with the global array's zero-length pattern and dtype."""
    return np.zeros(tuple(min(n, 1) for n in obj.shape), dtype=obj.dtype)


_PROBE_DTYPES: dict = {}


def probe_dtype(fn: Callable, obj: D2O, **kwargs: Any) -> np.dtype:
    """The result dtype of ``fn`` on ``obj`` (numpy's errors, from the probe); cached, so a
    repeated call costs a dict lookup."""
    try:
        key = (fn, obj.dtype, obj.distributor.global_shape, tuple(kwargs.items()))
        hit = _PROBE_DTYPES.get(key)
    except TypeError:  # unhashable arguments
        key, hit = None, None
    if hit is None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            hit = np.asarray(fn(probe(obj), **kwargs)).dtype
        if key is not None and len(_PROBE_DTYPES) < 4096:
            _PROBE_DTYPES[key] = hit
    return hit


def norm_axes(axis: Any, ndim: int) -> tuple:
    if axis is None:
        return tuple(range(ndim))
    axes = axis if isinstance(axis, tuple) else (axis,)
    return tuple(sorted(int(a) % ndim for a in axes)) if ndim else ()


def kept_layout(d: Distributor, shape: tuple, axes: tuple, keepdims: bool) -> Distributor:
    """Layout of a result where the distributed axis was not reduced."""
    if d.replicated:
        return get_distributor("not", shape, d.comm)
    if is_mesh(d):
        return reduced_layout(d, axes, keepdims, shape)
    ax = d.axis if keepdims else d.axis - sum(a < d.axis for a in axes)
    return like(d, shape, axis=ax)


def wrap_result(res: Any, d: Distributor) -> Any:
    if np.ndim(res) == 0:
        return np.asarray(res)[()]
    return _from_local(res, d)


def store(res: Any, out: Any) -> Any:
    """numpy's ``out=``: ``res`` written into the distributed array ``out`` (its layout kept,
    one redistribution if the layouts differ); returns ``out`` (``res`` when out is None).

    numpy's rules: ``out`` must have the result's shape, and the result must cast to
    its dtype under ``'same_kind'``; the errors are raised before anything is written.
    """
    if out is None:
        return res
    if isinstance(out, tuple) and len(out) == 1:
        out = out[0]
    if not isinstance(out, D2O):
        raise TypeError(f"out must be a distributed_data_object, not {type(out).__name__}")
    shape, dtype = (
        (res.shape, res.dtype) if isinstance(res, D2O) else (np.shape(res), np.asarray(res).dtype)
    )
    if out.shape != shape:
        raise ValueError(f"output parameter has shape {out.shape}, the result has {shape}")
    np.copyto(np.empty((), out.dtype), np.zeros((), dtype), casting="same_kind")
    if isinstance(res, D2O):
        out.data[...] = redistribute(res.data, res.distributor, out.distributor)
    else:
        out[...] = res
    return out


def reduce(
    obj: D2O,
    name: str,
    axis: Any = None,
    dtype: Any = None,
    out: Any = None,
    keepdims: bool = False,
    **kwargs: Any,
) -> Any:
    """Collective: the reduction ``name`` (a key of `REDUCTIONS`) of ``obj``."""
    if axis is None and dtype is None and out is None and not keepdims and not kwargs:
        # Fast path for obj.sum()/obj.max(): the ufunc's C reduce is what numpy's
        # np.sum/np.max call for an ndarray, minus their Python wrappers.
        uf = _SIMPLE.get(name)
        if uf is not None:
            d = obj.distributor
            if d.replicated or d.comm.size == 1:
                if type(obj) is _DEFERRED_TYPE[0] and expression(obj) is not None:
                    res = _piece(obj, name, uf.reduce, None, False, {})  # (fused)
                    return res if isinstance(res, np.generic) else np.asarray(res)[()]
                if type(obj.data) is np.ndarray:
                    res = uf.reduce(obj.data, axis=None)
                    return res if isinstance(res, np.generic) else np.asarray(res)[()]
            if not (d.replicated or d.comm.size == 1 or obj.dtype.hasobject):
                fn, combine, fill, _ = REDUCTIONS[name]
                return _full_reduce(obj, name, fn, combine, fill, kwargs, keepdims)
    if out is not None:
        return store(reduce(obj, name, axis, dtype, None, keepdims, **kwargs), out)
    fn, combine, fill, takes_dtype = REDUCTIONS[name]
    if takes_dtype and dtype is not None:
        kwargs["dtype"] = dtype
    d = obj.distributor
    if dtype is not None and not takes_dtype:
        raise TypeError(f"{name}() got an unexpected keyword argument 'dtype'")
    if d.replicated or d.comm.size == 1:
        res = _piece(obj, name, fn, axis, keepdims, kwargs)
        if np.ndim(res) == 0:
            return np.asarray(res)[()]
        axes = norm_axes(axis, d.ndim)
        return _from_local(
            res,
            kept_layout(d, res.shape, axes, keepdims)
            if d.axis not in axes
            else get_distributor("not", res.shape, d.comm),
        )
    if axis is None and not obj.dtype.hasobject:
        return _full_reduce(obj, name, fn, combine, fill, kwargs, keepdims)
    with agreed(d.comm):
        rdtype, axes = _validate(obj, name, fn, axis, kwargs)
    if is_mesh(d):
        return _mesh_reduce(obj, fn, combine, fill, rdtype, axes, keepdims, kwargs)
    if d.axis not in axes:
        res = _piece(obj, name, fn, axis, keepdims, kwargs)
        gshape = reduced_shape(d.global_shape, axes, keepdims)
        return _from_local(res, kept_layout(d, gshape, axes, keepdims))
    pshape = reduced_shape(obj.local_shape, axes, True)
    if obj.local_shape[d.axis] == 0 and fill is not None and "initial" not in kwargs:
        partial = np.full(pshape, fill(rdtype), dtype=rdtype)
    else:
        partial = np.asarray(_piece(obj, name, fn, axes, True, kwargs))
    total = combine_partials(partial, combine, d)
    if not keepdims:
        total = total.reshape(tuple(n for i, n in enumerate(pshape) if i not in axes))
    return wrap_result(total, get_distributor("not", total.shape, d.comm))


def _piece(obj: D2O, name: str, fn: Callable, axis: Any, keepdims: bool, kwargs: dict) -> Any:
    """``fn(obj.data, axis=axis, keepdims=keepdims, **kwargs)``: this rank's part of the
    reduction ``name``; a sum of a deferred expression (the ``lazy`` option) fused with
    it where it can (`d2o.ops.fused.reduce_sum`: one pass, the expression never
    stored).  Local."""
    expr = expression(obj)
    if expr is not None and name == "sum" and not kwargs:
        axes = norm_axes(axis, expr.ndim)
        res = _fused.reduce_sum(expr, axes)
        if res is not None:
            return res.reshape(reduced_shape(expr.shape, axes, True)) if keepdims else res
    return fn(obj.data, axis=axis, keepdims=keepdims, **kwargs)


def _full_reduce(
    obj: D2O, name: str, fn: Callable, combine: np.ufunc, fill: Any, kwargs: dict, keepdims: bool
) -> Any:
    """Collective: a reduction over every axis in one Allreduce of a 96-byte record.

    Each rank reduces its piece; its error flag and partial travel in one record,
    the partials combined by ``combine`` (`_ufunc_combiner`), so the scalar is
    bit-identical everywhere; O(log P) messages, the same bytes at any P.
    """
    d = obj.distributor
    error, rdtype = None, None
    rec = new_record()
    try:
        key = None if kwargs else (name, obj.dtype, obj.shape)
        hit = _FULL.get(key) if key else None
        if hit is None:
            rdtype, _ = _validate(obj, name, fn, None, kwargs)
            code = _ufunc_combiner(combine, rdtype)  # registered on every rank: all may fold
            if key is not None and len(_FULL) < 4096:
                _FULL[key] = (rdtype, code)
        else:
            rdtype, code = hit
        expr = expression(obj) if type(obj) is _DEFERRED_TYPE[0] else None  # (see `_piece`)
        data = obj.data if expr is None else None
        if (
            (data.size if expr is None else expr.size) == 0
            and fill is not None
            and ("initial" not in kwargs)
        ):
            val = fill(rdtype)
        elif expr is None and not kwargs and name in _SIMPLE:  # np.sum minus its wrappers
            val = _SIMPLE[name].reduce(data, axis=None)
        elif not kwargs and name in _SIMPLE:
            val = _piece(obj, name, _SIMPLE[name].reduce, None, False, kwargs)
        else:
            val = fn(obj.data, axis=None, **kwargs)
        # replicas of a mesh hold the same elements: only one of each set counts
        if not is_mesh(d) or d.source(d.comm.rank) is not None:
            put_value(rec, val, rdtype, code)
    except Exception as exc:
        error = exc
    total = get_value(allreduce_agreed(d.comm, error, rec, combine=True), rdtype)
    if keepdims:
        full = np.full((1,) * d.ndim, total, dtype=rdtype)
        return _from_local(full, get_distributor("not", full.shape, d.comm))
    return total


def agreed_total(
    comm: Any, error: BaseException | None, value: Any, dtype: np.dtype, combine: np.ufunc = np.add
) -> Any:
    """Collective: ``combine`` over the ranks of each one's scalar ``value`` (of ``dtype``)
    and their errors in one Allreduce of a 96-byte record (`allreduce_agreed`, as
    `_full_reduce`): raised on every rank where any rank has ``error``; folded in rank
    order (`_ufunc_combiner`), so the result is bit-identical everywhere.  O(log P)
    messages, the same bytes at any P."""
    rec = new_record()
    if error is None:
        put_value(rec, value, dtype, _ufunc_combiner(combine, dtype))
    return get_value(allreduce_agreed(comm, error, rec, combine=True), dtype)


#: (ufunc, dtype) -> the code of the record combiner applying the ufunc (`_ufunc_combiner`)
_UFUNC_CODES: dict = {}
#: (name, dtype, shape) -> (result dtype, combiner code) of a full reduction without
#: keywords (`_validate` and `_ufunc_combiner` in one lookup)
_FULL: dict = {}


def _float_add(a: Any, b: Any) -> Any:
    r = a + b
    return r if r - r == 0 else None  # inf or nan: numpy's call (its warnings)


def _float_mul(a: Any, b: Any) -> Any:
    r = a * b
    return r if r - r == 0 else None


def _ordered_max(a: Any, b: Any) -> Any:
    if a > b:
        return a
    if b > a:
        return b
    return a if a == b and a else None  # +-0 (numpy keeps one by position) or nan: numpy's


def _ordered_min(a: Any, b: Any) -> Any:
    if a < b:
        return a
    if b < a:
        return b
    return a if a == b and a else None


class _IntPair:
    """``op`` on Python ints, None where numpy's result would wrap (numpy's call then)."""

    __slots__ = ("op", "lo", "hi")

    def __init__(self, op: Callable, dtype: np.dtype) -> None:
        info = np.iinfo(dtype)
        self.op, self.lo, self.hi = op, int(info.min), int(info.max)

    def __call__(self, a: int, b: int) -> int | None:
        r = self.op(a, b)
        return r if self.lo <= r <= self.hi else None


def _python_pair(ufunc: np.ufunc, dtype: np.dtype) -> Callable | None:
    """A function of two Python numbers (``.item()`` of two payloads) giving exactly the
    bits of ``ufunc`` on them in ``dtype``, or None where it cannot tell (numpy's call
    then): IEEE arithmetic of Python floats is float64's and complex128's, Python ints
    are exact.  A call of it costs a tenth of numpy's ufunc on two scalars, which is most
    of a reduction's combining step on few ranks."""
    if dtype.kind == "f" and dtype.itemsize == 8 or dtype.kind == "c" and dtype.itemsize == 16:
        if ufunc is np.add:
            return _float_add
        if ufunc is np.multiply and dtype.kind == "f":  # complex: numpy may fuse multiply-adds
            return _float_mul
        if ufunc is np.maximum and dtype.kind == "f":
            return _ordered_max
        if ufunc is np.minimum and dtype.kind == "f":
            return _ordered_min
    elif dtype.kind in "iu":
        if ufunc is np.maximum:
            return max
        if ufunc is np.minimum:
            return min
        if ufunc is np.add or ufunc is np.multiply:
            return _IntPair(int.__add__ if ufunc is np.add else int.__mul__, dtype)
    return None


class _UfuncFold:
    """The combiner of payloads holding one ``dtype`` value, combined with ``ufunc``:
    ``fold(a, b)`` (two records' payloads, in place) and ``many(rows, held)`` (gathered
    records, into ``rows[held[-1]]``; see `d2o.core.errors.combiner`)."""

    __slots__ = ("ufunc", "dtype", "n", "k", "pair")

    def __init__(self, ufunc: np.ufunc, dtype: np.dtype) -> None:
        self.ufunc, self.dtype, self.n = ufunc, dtype, dtype.itemsize
        n = dtype.itemsize
        # the payload's first value in the record viewed as ``dtype`` (header and records
        # whole numbers of values: every numpy number)
        self.k = (
            HEADER_WORDS * 8 // n if (HEADER_WORDS * 8) % n == (RECORD_WORDS * 8) % n == 0 else None
        )
        self.pair = _python_pair(ufunc, dtype) if self.k is not None else None

    def fold(self, a: np.ndarray, b: np.ndarray) -> None:
        if 64 % self.n == 0:  # every numpy number: one view of the payload words
            y = b.view(self.dtype)[:1]
            self.ufunc(a.view(self.dtype)[:1], y, out=y)
        else:  # pragma: no cover - odd item sizes
            y = b.view(np.uint8)[: self.n].view(self.dtype)
            self.ufunc(a.view(np.uint8)[: self.n].view(self.dtype), y, out=y)

    def many(self, rows: np.ndarray, held: list) -> None:
        ufunc, dtype, k, last = self.ufunc, self.dtype, self.k, held[-1]
        if k is None:  # pragma: no cover - odd item sizes
            values = rows[:, HEADER_WORDS:].view(np.uint8)[:, : self.n].view(dtype)[held, 0]
            into = rows[last, HEADER_WORDS:].view(np.uint8)[: self.n].view(dtype)
            into[0] = ufunc.accumulate(values, dtype=dtype)[-1]
            return
        v = rows.view(dtype)  # every record as values: the payload's first is at k
        pair = self.pair
        if pair is not None and len(held) == 2:  # two values, on Python numbers
            acc = pair(v.item(held[0], k), v.item(last, k))
            if acc is not None:
                v[last, k] = acc
                return
        elif pair is not None:  # in rank order, on Python numbers
            acc = v.item(held[0], k)
            for i in held[1:]:
                acc = pair(acc, v.item(i, k))
                if acc is None:
                    break
            else:
                v[last, k] = acc
                return
        if len(held) == 2:  # the ufunc on the two scalars: cheaper than on arrays
            v[last, k] = ufunc(v[held[0], k], v[last, k])
        else:  # in rank order, not upcast (a reduce may pair the values otherwise)
            values = v[held, k] if len(held) < len(v) else v[:, k]
            v[last, k] = ufunc.accumulate(values, dtype=dtype)[-1]


def _ufunc_combiner(ufunc: np.ufunc, dtype: np.dtype) -> int:
    """The code of a record combiner (`d2o.core.errors.combiner`) that combines two
    payloads holding one ``dtype`` value with ``ufunc`` (registered once per pair)."""
    code = _UFUNC_CODES.get((ufunc, dtype))
    if code is None:
        f = _UfuncFold(ufunc, dtype)
        name = f"ufunc:{ufunc.__name__}:{dtype.str}"
        code = _UFUNC_CODES[ufunc, dtype] = combiner(name, f.fold, f.many)
    return code


def _mesh_reduce(
    obj: D2O,
    fn: Callable,
    combine: np.ufunc,
    fill: Any,
    rdtype: np.dtype,
    axes: tuple,
    keepdims: bool,
    kwargs: dict,
) -> Any:
    """Collective in the sub-communicator of the mesh axes that split a reduced axis: local
    partials combined there (local when no split axis is reduced); the result keeps the
    mesh, those mesh axes now holding replicas."""
    d = obj.distributor
    gshape = reduced_shape(d.global_shape, axes, keepdims)
    target = reduced_layout(d, axes, keepdims, gshape)
    mesh_axes = tuple(m for m, s in enumerate(d.split) if s is not None and s in axes)
    if not mesh_axes:
        return _from_local(fn(obj.data, axis=axes, keepdims=keepdims, **kwargs), target)
    pshape = reduced_shape(obj.data.shape, axes, True)
    empty = any(obj.data.shape[d.split[m]] == 0 for m in mesh_axes)
    if empty and fill is not None and "initial" not in kwargs:
        partial = np.full(pshape, fill(rdtype), dtype=rdtype)
    else:
        partial = np.asarray(fn(obj.data, axis=axes, keepdims=True, **kwargs))
    total = combine_partials(partial, combine, None, subcomm(d, mesh_axes))
    if not keepdims:
        total = total.reshape(tuple(n for i, n in enumerate(pshape) if i not in axes))
    return wrap_result(total, target)


_PROBES: dict = {}


def _validate(obj: D2O, name: str, fn: Callable, axis: Any, kwargs: dict) -> tuple:
    """numpy's errors, result dtype and the normalised axes of a reduction (local).

    Runs ``fn`` on the probe; successful signatures are cached, so repeated
    calls cost a dict lookup.
    """
    try:
        key = (name, obj.dtype, obj.shape, axis, tuple(kwargs.items()))
        hit = _PROBES.get(key)
    except TypeError:  # an unhashable argument (a list axis, a where= array)
        key, hit = None, None
    if hit is None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            tried = fn(probe(obj), axis=axis, keepdims=True, **kwargs)
        hit = (tried.dtype, norm_axes(axis, obj.ndim))
        if key is not None and len(_PROBES) < 4096:
            _PROBES[key] = hit
    return hit


def reduced_shape(shape: tuple, axes: tuple, keepdims: bool) -> tuple:
    if keepdims:
        return tuple(1 if i in axes else n for i, n in enumerate(shape))
    return tuple(n for i, n in enumerate(shape) if i not in axes)


def _count(obj: D2O, axis: Any) -> int:
    shape = obj.distributor.global_shape
    if axis is None:
        return obj.distributor.size
    return math.prod(shape[a] for a in norm_axes(axis, len(shape)))


def mean(
    obj: D2O, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False
) -> Any:
    """Collective: the arithmetic mean (numpy's dtypes: float64 for integer input)."""
    if out is not None:
        return store(mean(obj, axis, dtype, None, keepdims), out)
    sdt = dtype if dtype is not None else (np.float64 if obj.dtype.kind in "biu" else None)
    total = reduce(obj, "sum", axis=axis, dtype=sdt, out=out, keepdims=keepdims)
    rdt = probe_dtype(np.mean, obj, axis=axis, dtype=dtype)  # after the agreed sum: valid
    n = _count(obj, axis)
    if n:
        res = total / n
    else:
        warnings.warn("Mean of empty slice.", RuntimeWarning, stacklevel=2)
        with np.errstate(invalid="ignore", divide="ignore"):
            res = total / n
    return res.astype(rdt, copy=False) if isinstance(res, D2O) else rdt.type(res)


def _moments_full(obj: D2O, dtype: Any, ddof: Any, keepdims: bool, sqrt: bool) -> Any:
    """Collective: var (or std) over every axis in one Allreduce of a 96-byte record.

    Each rank's (count, mean, sum of squared deviations) is combined with Chan et al.'s
    pairwise update (`_fold_moments`), in rank order: bit-identical on every rank.
    """
    d = obj.distributor
    error, rdt = None, None
    rec = new_record()
    try:
        rdt = probe_dtype(np.var, obj, dtype=dtype, ddof=ddof)
        cplx = obj.dtype.kind == "c" or (dtype is not None and np.dtype(dtype).kind == "c")
        acc = np.complex128 if cplx else np.float64
        x = obj.data
        # replicas of a mesh hold the same elements: only one of each set counts
        if x.size and (not is_mesh(d) or d.source(d.comm.rank) is not None):
            m = x.mean(dtype=acc)
            dev = np.subtract(x, m, dtype=acc)
            moments = (x.size, m.real, m.imag, np.vdot(dev, dev).real)
            payload(rec)[:32].view(np.float64)[:] = moments
            rec[0] |= VALUE
            rec[3] = _MOMENTS
            del dev
    except Exception as exc:
        error = exc
    out = allreduce_agreed(d.comm, error, rec, combine=True)
    n, mean_re, mean_im, m2 = payload(out)[:32].view(np.float64).tolist()
    if not out[0] & VALUE:  # no elements anywhere
        n, m2 = 0.0, 0.0
    denom = max(n - ddof, 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        if denom == 0:
            warnings.warn("Degrees of freedom <= 0 for slice", RuntimeWarning, stacklevel=3)
        res = np.float64(m2) / np.float64(denom)
        if sqrt:
            res = np.sqrt(res)
    res = rdt.type(res)
    if keepdims:
        full = np.full((1,) * d.ndim, res, dtype=rdt)
        return _from_local(full, get_distributor("not", full.shape, d.comm))
    return res


def _fold_moments(a: np.ndarray, b: np.ndarray) -> None:
    """Record combiner: the (count, mean real, mean imag, M2) of ``a`` (lower ranks) and
    ``b`` merged into ``b`` (Chan et al.'s update)."""
    x, y = a[:4].view(np.float64), b[:4].view(np.float64)
    na, ra, ia, m2a = x.tolist()
    nb, rb, ib, m2b = y.tolist()
    tot = na + nb
    dr, di = rb - ra, ib - ia
    w = nb / tot
    y[:] = (tot, ra + dr * w, ia + di * w, m2a + m2b + (dr * dr + di * di) * (na * nb / tot))


_MOMENTS = combiner("moments", _fold_moments)


def var(
    obj: D2O,
    axis: Any = None,
    dtype: Any = None,
    out: Any = None,
    ddof: int = 0,
    keepdims: bool = False,
) -> Any:
    """Collective: the variance.

    Over every axis (``axis=None``): one collective; each rank sends its
    count, mean and sum of squared deviations, combined in rank order with
    Chan et al.'s pairwise update.  Over some axes: numpy's two passes (mean,
    then squared deviations).
    """
    if out is not None:
        return store(var(obj, axis, dtype, None, ddof, keepdims), out)
    d = obj.distributor
    if axis is None and not d.replicated and d.comm.size > 1 and obj.dtype.kind in "biufc":
        return _moments_full(obj, dtype, ddof, keepdims, sqrt=False)

    m = mean(obj, axis=axis, dtype=dtype, keepdims=True)
    local_m = align(m, obj.distributor) if isinstance(m, D2O) else m
    # np.asarray: a 0-d piece gives a numpy scalar, which cannot be an ``out``
    dev = np.asarray(np.subtract(obj.data, local_m, dtype=None if dtype is None else dtype))
    if dev.dtype.kind == "c":
        sq = np.asarray(np.abs(dev))
        del dev
        np.multiply(sq, sq, out=sq)
    else:
        sq = np.multiply(dev, dev, out=dev)
    s = reduce(_from_local(sq, obj.distributor), "sum", axis=axis, keepdims=keepdims)
    denom = max(_count(obj, axis) - ddof, 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        if denom == 0:
            warnings.warn("Degrees of freedom <= 0 for slice", RuntimeWarning, stacklevel=2)
        return s / denom


def std(
    obj: D2O,
    axis: Any = None,
    dtype: Any = None,
    out: Any = None,
    ddof: int = 0,
    keepdims: bool = False,
) -> Any:
    """Collective: the standard deviation, ``sqrt(var)`` (one collective for ``axis=None``)."""
    if out is not None:
        return store(std(obj, axis, dtype, None, ddof, keepdims), out)
    d = obj.distributor
    if axis is None and not d.replicated and d.comm.size > 1 and obj.dtype.kind in "biufc":
        return _moments_full(obj, dtype, ddof, keepdims, sqrt=True)
    return np.sqrt(var(obj, axis=axis, dtype=dtype, ddof=ddof, keepdims=keepdims))


# -- accumulations ----------------------------------------------------------------

ASSOCIATIVE = {
    np.add,
    np.multiply,
    np.maximum,
    np.minimum,
    np.fmax,
    np.fmin,
    np.logical_and,
    np.logical_or,
    np.logical_xor,
    np.bitwise_and,
    np.bitwise_or,
    np.bitwise_xor,
}


def ravel(obj: D2O) -> D2O:
    """Collective: the flattened (C-order) array, distributed along its only axis.

    Local when the array is distributed along axis 0; otherwise one
    redistribution to axis 0 first.
    """
    d = obj.distributor
    src = obj
    if not (d.replicated or d.comm.size == 1) and d.axis != 0:
        obj = obj.copy(distribution_strategy="equal", axis=0)
        d = obj.distributor
    return _view_if_shared(src, obj.data.reshape(-1), flat_layout(d))


def flat_layout(d: Any) -> Any:
    """The layout of `ravel`'s result for an array of layout ``d`` replicated, on one
    process or cut into slabs along axis 0 (each piece flattened in place); None for
    others (`ravel` redistributes them first).  Local."""
    if d.replicated:
        return get_distributor("not", (d.size,), d.comm)
    if d.comm.size == 1:
        return like(d, (d.size,), axis=0)
    if d.axis != 0:
        return None
    inner = int(np.prod(d.global_shape[1:], dtype=np.int64))
    offsets = [o * inner for o in d.bounds()]
    strategy = d.strategy if d.strategy in ("equal", "fftw") and inner == 1 else "freeform"
    return slab_distributor((d.size,), d.comm, 0, offsets, strategy)


def _view_if_shared(src: D2O, data: np.ndarray, lay: Any) -> D2O:
    """numpy's ravel/reshape rule: a view of ``src`` where its memory is reused."""
    if np.may_share_memory(data, src.data):
        return src._view(data, lay)
    return _from_local(data, lay)


def ufunc_reduce(
    ufunc: np.ufunc,
    obj: Any,
    axis: Any = 0,
    dtype: Any = None,
    out: Any = None,
    keepdims: bool = False,
    **kwargs: Any,
) -> Any:
    """``ufunc.reduce`` on a distributed object (numpy's default axis=0)."""
    for name, (_, combine, _, _) in REDUCTIONS.items():
        if combine is ufunc and name in ("sum", "prod", "max", "min", "all", "any"):
            if ufunc in (np.logical_and, np.logical_or) and obj.dtype.kind != "b":
                break
            return reduce(obj, name, axis=axis, dtype=dtype, out=out, keepdims=keepdims, **kwargs)
    if ufunc in ASSOCIATIVE:
        REDUCTIONS.setdefault(ufunc.__name__, (ufunc.reduce, ufunc, None, True))
        return reduce(
            obj, ufunc.__name__, axis=axis, dtype=dtype, out=out, keepdims=keepdims, **kwargs
        )
    return NotImplemented
