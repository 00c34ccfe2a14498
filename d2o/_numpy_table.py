"""The dispatch table of `d2o.numpy`: every numpy function, its class, its implementation.

Classes (``KINDS``): element-wise on the pieces, reduction, axis-local, view, joining,
creation, linear algebra, no array data (numpy's own function on dtypes and shapes), and
the bounded fallback (`d2o._axislocal.fallback`) for the rest.  Implementations are built
from numpy's own functions by a few factories (`_ew`, `_axis`, `_meta`), so breadth
comes from the table, not from hand-written functions.  ``docs/coverage.md`` is
generated from it (``python -m d2o._numpy_table``).
"""

from __future__ import annotations

import functools
import inspect
import operator
from collections.abc import Callable
from typing import Any

import numpy as np

try:
    from numpy.lib.array_utils import normalize_axis_index, normalize_axis_tuple
except ImportError:  # numpy < 2
    from numpy.core.multiarray import normalize_axis_index
    from numpy.core.numeric import normalize_axis_tuple

from . import _creation, _joining, _ndarray
from ._axislocal import axis_local, elementwise, fallback
from ._d2o import distributed_data_object as D2O
from ._errors import agreed
from ._halo import rows_for, slab_rows
from ._special import HANDLED

__all__ = ["TABLE", "KINDS", "DISTRIBUTED", "implementation", "numpy_functions"]

KINDS = {
    "ufunc": "element-wise ufunc (local on the pieces)",
    "local": "element-wise (operands aligned to the result's layout, then local)",
    "reduce": "reduction (local partials, one small combination)",
    "axis": "axis-local (local when the axes it acts along are whole, else one exchange)",
    "view": "view (nothing moves)",
    "join": "joining (local, or one exchange per input)",
    "create": "creation (each rank computes its piece)",
    "linalg": "linear algebra (local products, one reduction)",
    "meta": "no array data (dtypes, shapes, settings: numpy's own)",
    "index": "indexing (owners send what is asked for)",
    "sort": "sort machinery (distributed sort or selection: one all-to-all, no gather)",
    "composed": "composed of distributed building blocks (views, element-wise, joins)",
    "fallback": "bounded fallback (gathers operands up to the fallback limit)",
}
#: The classes that count as a distributed algorithm in the coverage table.
DISTRIBUTED = {
    "ufunc", "local", "reduce", "axis", "view", "join", "create", "linalg", "meta", "index",
    "sort", "composed",
}  # fmt: skip

#: name -> (kind, implementation or None for numpy's own / the fallback, note)
TABLE: dict[str, tuple[str, Callable | None, str]] = {}


def _sig(f: Callable) -> inspect.Signature:
    return inspect.signature(f)


def _agreed_axes(x: D2O, axis: Any, allow_duplicate: bool = False) -> tuple:
    """``x``'s axes ``axis`` normalized; an error on any rank raised on every rank (one
    one-byte allreduce) before anything moves."""
    with agreed(x.distributor.comm):
        return normalize_axis_tuple(axis, x.ndim, allow_duplicate=allow_duplicate)


def _ew(np_func: Callable, arrays: tuple = ("a",)) -> Callable:
    """An element-wise numpy function of the parameters ``arrays`` (broadcast together)."""
    sig = _sig(np_func)

    def impl(*args: Any, **kwargs: Any) -> Any:
        b = sig.bind(*args, **kwargs)  # only what the caller passed: numpy's own defaults
        out = b.arguments.pop("out", None) if "out" in b.arguments else None
        names = [n for n in arrays if n in b.arguments and b.arguments[n] is not None]
        ops = [b.arguments[n] for n in names]

        def f(*pieces: Any) -> Any:
            b.arguments.update(zip(names, pieces))
            return np_func(*b.args, **b.kwargs)

        res = elementwise(f, ops)
        if out is not None:
            out[...] = res
            return out
        return res

    return impl


def _out_axis_drop(core: tuple, ndim: int, keepdims: bool) -> Callable:
    """Where a kept input axis lands when ``core`` axes are reduced (extra leading result
    axes, as ``percentile``'s q axes, counted from the result's rank)."""
    kept = ndim if keepdims else ndim - len(core)

    def out_axis(a: int, res_ndim: int) -> int:
        extra = res_ndim - kept
        return extra + (a if keepdims else a - sum(c < a for c in core))

    return out_axis


def _axis(np_func: Callable, name: str, drop: bool = False, axis_param: str = "axis",
          default: Any = "numpy") -> Callable:  # fmt: skip
    """A numpy function acting along ``axis`` (its core axes) independently elsewhere;
    ``drop``: the core axes leave the result (``median``, ``percentile``).  ``axis=None``
    (the flattened array) takes the bounded fallback."""
    sig = _sig(np_func)
    first = next(iter(sig.parameters))

    def impl(*args: Any, **kwargs: Any) -> Any:
        b = sig.bind(*args, **kwargs)
        x = b.arguments[first]
        out = b.arguments.pop("out", None)
        axis = b.arguments.get(axis_param, sig.parameters[axis_param].default)
        if not isinstance(x, D2O) or x.ndim == 0 or axis is None:
            if out is not None:
                b.arguments["out"] = out
            return fallback(name, np_func, b.args, b.kwargs)
        if axis is inspect.Parameter.empty:
            raise TypeError(f"{name}() missing required argument {axis_param!r}")
        core = _agreed_axes(x, axis)
        keepdims = bool(b.arguments.get("keepdims", False))

        def f(piece: np.ndarray) -> Any:
            b.arguments[first] = piece
            return np_func(*b.args, **b.kwargs)

        oa = _out_axis_drop(core, x.ndim, keepdims) if drop else None
        res = axis_local(name, f, x, core, out_axis=oa)
        if out is not None:
            out[...] = res
            return out
        return res

    return impl


def _meta(np_func: Callable) -> Callable:
    """numpy's own function with distributed arrays replaced by empty arrays of their dtype
    (``result_type``, ``can_cast``, ...): nothing moves."""

    def conv(v: Any) -> Any:
        if isinstance(v, D2O):  # its shape and dtype, no memory
            return np.broadcast_to(np.zeros((), dtype=v.dtype), v.shape)
        if type(v) in (list, tuple):
            return type(v)(conv(e) for e in v)
        return v

    @functools.wraps(np_func)
    def impl(*args: Any, **kwargs: Any) -> Any:
        return np_func(*conv(args), **{k: conv(v) for k, v in kwargs.items()})

    return impl


# -- reductions composed from the distributed ones ---------------------------------------


def _nan_to(x: D2O, value: Any) -> D2O:
    return (
        elementwise(lambda p: np.where(np.isnan(p), value, p), [x]) if x.dtype.kind in "fc" else x
    )


def nanprod(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    """numpy's ``nanprod``: NaNs count as one."""
    return _nan_to(a, 1).prod(axis=axis, dtype=dtype, out=out, keepdims=keepdims)


def _count(a: D2O, axis: Any, keepdims: bool) -> Any:
    ok = elementwise(lambda p: ~np.isnan(p), [a]) if a.dtype.kind in "fc" else None
    if ok is None:
        n = (
            a.size
            if axis is None
            else int(np.prod([a.shape[i] for i in normalize_axis_tuple(axis, a.ndim)]))
        )
        return n
    return ok.sum(axis=axis, keepdims=keepdims, dtype=np.intp)


def nanmean(a, axis=None, dtype=None, out=None, keepdims=False, *, where=None):
    """numpy's ``nanmean``: the sum of the non-NaN elements over their count."""
    if a.dtype.kind not in "fc":
        return a.mean(axis=axis, dtype=dtype, keepdims=keepdims)
    s = _nan_to(a, 0).sum(axis=axis, dtype=dtype, keepdims=keepdims)
    n = _count(a, axis, keepdims)
    with np.errstate(invalid="ignore", divide="ignore"):
        res = s / n
    return _finish(res, out)


def nanvar(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None,
           mean=None, correction=None):  # fmt: skip
    """numpy's ``nanvar``."""
    if correction is not None:
        ddof = correction
    if a.dtype.kind not in "fc":
        return a.var(axis=axis, dtype=dtype, ddof=ddof, keepdims=keepdims)
    m = nanmean(a, axis=axis, keepdims=True)
    dev = elementwise(lambda p, q: np.where(np.isnan(p), 0, np.abs(p - q) ** 2), [a, m])
    s = dev.sum(axis=axis, dtype=dtype, keepdims=keepdims)
    n = _count(a, axis, keepdims)
    with np.errstate(invalid="ignore", divide="ignore"):
        res = s / np.maximum(n - ddof, 0) if not isinstance(n, D2O) else s / elementwise(
            lambda c: np.maximum(c - ddof, 0), [n])  # fmt: skip
    return _finish(res, out)


def nanstd(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None,
           mean=None, correction=None):  # fmt: skip
    """numpy's ``nanstd``."""
    return _finish(
        np.sqrt(nanvar(a, axis, dtype, None, ddof, keepdims, correction=correction)), out
    )


def _nanarg(which: str) -> Callable:
    def f(a, axis=None, out=None, *, keepdims=False):
        if a.dtype.kind in "fc":
            allnan = elementwise(np.isnan, [a]).all(axis=axis)
            if bool(np.any(allnan if not isinstance(allnan, D2O) else allnan.any())):
                raise ValueError("All-NaN slice encountered")
            a = _nan_to(a, -np.inf if which == "argmax" else np.inf)
        res = getattr(a, which)(axis=axis)
        if keepdims and axis is not None and isinstance(res, D2O):
            res = _joining.expand_dims(res, axis)
        return _finish(res, out)

    f.__doc__ = f"numpy's ``nan{which}``: NaNs ignored (ValueError for all-NaN slices)."
    return f


def count_nonzero(a, axis=None, *, keepdims=False):
    """numpy's ``count_nonzero``."""
    res = elementwise(lambda p: p != 0, [a]).sum(axis=axis, keepdims=keepdims, dtype=np.intp)
    return int(res) if axis is None and not keepdims else res


def ptp(a, axis=None, out=None, keepdims=False):
    """numpy's ``ptp``: max minus min (two reductions)."""
    return _finish(a.max(axis=axis, keepdims=keepdims) - a.min(axis=axis, keepdims=keepdims), out)


def average(a, axis=None, weights=None, returned=False, *, keepdims=False):
    """numpy's ``average``: sums of ``a * w`` and ``w`` (distributed reductions)."""
    if weights is None:
        avg = a.mean(axis=axis, keepdims=keepdims)
        scl = a.size / (np.size(avg) if np.ndim(avg) else 1)
    else:
        w = weights
        if np.ndim(w) != a.ndim:
            if axis is None:
                raise TypeError("Axis must be specified when shapes of a and weights differ.")
            if np.ndim(w) != 1 or np.shape(w)[0] != a.shape[axis]:
                raise ValueError(
                    "Shape of weights must be consistent with shape of a along specified axis."
                )
            shape = [1] * a.ndim
            shape[normalize_axis_index(axis, a.ndim)] = -1
            w = w.reshape(shape) if isinstance(w, D2O) else np.reshape(w, shape)
        scl = elementwise(lambda p, q: np.broadcast_to(q, p.shape).astype(np.result_type(p, q, 1.0)), [a, w]).sum(
            axis=axis, keepdims=keepdims)  # fmt: skip
        if bool((scl == 0).any()) if isinstance(scl, D2O) else np.any(scl == 0):
            raise ZeroDivisionError("Weights sum to zero, can't be normalized")
        avg = elementwise(lambda p, q: p * q, [a, w]).sum(axis=axis, keepdims=keepdims) / scl
    return (avg, scl) if returned else avg


def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """numpy's ``allclose``: ``isclose`` then ``all`` (one small combination)."""
    return bool(_ew(np.isclose, ("a", "b"))(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan).all())


def array_equal(a1, a2, equal_nan=False):
    """numpy's ``array_equal``."""
    if np.shape(a1) != np.shape(a2):
        return False
    if equal_nan:
        return bool(elementwise(lambda p, q: (p == q) | (np.isnan(p) & np.isnan(q)) if np.result_type(p, q).kind in "fc" else p == q, [a1, a2]).all())  # fmt: skip
    return bool(elementwise(np.equal, [a1, a2]).all())


def array_equiv(a1, a2):
    """numpy's ``array_equiv``: equal after broadcasting."""
    try:
        np.broadcast_shapes(np.shape(a1), np.shape(a2))
    except ValueError:
        return False
    return bool(elementwise(np.equal, [a1, a2]).all())


def _finish(res: Any, out: Any) -> Any:
    if out is not None:
        out[...] = res
        return out
    return res


# -- axis-local and views ----------------------------------------------------------------


def flip(m, axis=None):
    """numpy's ``flip``: a view."""
    axes = range(m.ndim) if axis is None else normalize_axis_tuple(axis, m.ndim)
    return m[tuple(slice(None, None, -1) if i in axes else slice(None) for i in range(m.ndim))]


def fliplr(m):
    """numpy's ``fliplr``: a view."""
    if m.ndim < 2:
        raise ValueError("Input must be >= 2-d.")
    return m[:, ::-1]


def flipud(m):
    """numpy's ``flipud``: a view."""
    if m.ndim < 1:
        raise ValueError("Input must be >= 1-d.")
    return m[::-1]


def rot90(m, k=1, axes=(0, 1)):
    """numpy's ``rot90``: flips and a transpose (views)."""
    axes = tuple(axes)
    if len(axes) != 2:
        raise ValueError("len(axes) must be 2.")
    if axes[0] == axes[1] or abs(axes[0] - axes[1]) == m.ndim:
        raise ValueError("Axes must be different.")
    a0, a1 = normalize_axis_index(axes[0], m.ndim), normalize_axis_index(axes[1], m.ndim)
    k %= 4
    if k == 0:
        return m[...]
    if k == 2:
        return flip(flip(m, a0), a1)
    perm = list(range(m.ndim))
    perm[a0], perm[a1] = perm[a1], perm[a0]
    if k == 1:
        return flip(m, a1).transpose(perm)
    return flip(m.transpose(perm), a1)


def roll(a, shift, axis=None):
    """numpy's ``roll`` along given axes: along a slab's split axis the rows that cross a
    rank boundary move point to point (`_roll_split`), along other axes it is local
    (axis-local).  ``axis=None`` rolls the flattened array: for 1-d input that is
    ``axis=0``; for slabs split along axis 0 the flattened pieces are the pieces' own
    memory, so it is a roll of ``a.ravel()`` along its split axis, reshaped back; other
    layouts take the fallback."""
    if axis is None and isinstance(a, D2O):
        if a.ndim == 1:
            axis = 0
        elif a.ndim > 1 and slab_rows(a.distributor) and a.distributor.axis == 0:
            return roll(a.ravel(), shift, 0).reshape(a.shape)
    if axis is None or not isinstance(a, D2O):
        return fallback("roll", np.roll, (a, shift), {"axis": axis})
    core = _agreed_axes(a, axis, allow_duplicate=True)
    d = a.distributor
    if slab_rows(d) and d.axis in core:
        with agreed(d.comm):
            net = dict.fromkeys(core, 0)
            for sh, ax in np.broadcast(shift, axis):
                net[int(ax) % a.ndim] += operator.index(sh)
        rolled = _roll_split(a, net.pop(d.axis))
        rest = [(ax, sh) for ax, sh in net.items() if sh]
        if not rest:
            return rolled
        piece = np.roll(rolled.data, [sh for _, sh in rest], axis=[ax for ax, _ in rest])
        return D2O._from_local(piece, d)
    return axis_local("roll", lambda p: np.roll(p, shift, axis=axis), a, core)


def _roll_split(a, s: int):
    """``np.roll(a, s, axis)`` along the split axis of a slab layout: each rank takes
    its new rows from old rows ``s`` before them (wrapping around), its own in place and
    the others point to point (two rounds: before and after the wrap).  Collective."""
    d = a.distributor
    ax, n, b = d.axis, a.shape[d.axis], d.bounds()
    s = s % n if n else 0
    ranks = range(d.comm.size)
    # new rows [0, s) are old rows [n - s, n); new rows [s, n) are old rows [0, n - s)
    wrapped = [(min(b[r], s) + n - s, min(b[r + 1], s) + n - s) for r in ranks]
    straight = [(max(b[r], s) - s, max(b[r + 1], s) - s) for r in ranks]
    pieces = [arr for want in (wrapped, straight) for _, arr in rows_for(a.data, d, want).pieces]
    return D2O._from_local(np.concatenate(pieces, axis=ax), d)


def apply_along_axis(func1d, axis, arr, *args, **kwargs):
    """numpy's ``apply_along_axis`` (axis-local: rows of the other axes stay in place)."""
    (ax,) = _agreed_axes(arr, operator.index(axis))

    def out_axis(a: int, res_ndim: int) -> int:
        return a if a < ax else a + res_ndim - arr.ndim

    return axis_local("apply_along_axis",
                      lambda p: np.apply_along_axis(func1d, ax, p, *args, **kwargs),
                      arr, (ax,), out_axis=out_axis)  # fmt: skip


def gradient(f, *varargs, axis=None, edge_order=1):
    """numpy's ``gradient`` with scalar spacings: one axis-local call per axis."""
    axes = tuple(range(f.ndim)) if axis is None else _agreed_axes(f, axis)
    if len(varargs) == 0:
        spacing = [1.0] * len(axes)
    elif len(varargs) == 1 and np.ndim(varargs[0]) == 0:
        spacing = list(varargs) * len(axes)
    elif len(varargs) == len(axes) and all(np.ndim(v) == 0 for v in varargs):
        spacing = list(varargs)
    else:
        return fallback(
            "gradient", np.gradient, (f,) + varargs, {"axis": axis, "edge_order": edge_order}
        )
    out = [_gradient_one(f, k, h, edge_order) for k, h in zip(axes, spacing)]
    return out[0] if len(out) == 1 else tuple(out)


def _gradient_one(f, k: int, h: Any, edge_order: Any):
    """One axis of ``gradient``: shifted views along a slab's split axis (halo rows only;
    `d2o._composed.gradient_along`), else axis-local."""
    from . import _composed

    if (
        _composed._split_slab_axis(f, k) is not None
        and edge_order in (1, 2)
        and f.shape[k] >= edge_order + 1
        and f.dtype.kind in "iufc"
    ):
        return _composed.gradient_along(f, k, h, edge_order)
    return axis_local(
        "gradient", lambda p: np.gradient(p, h, axis=k, edge_order=edge_order), f, (k,)
    )


def diagonal(a, offset=0, axis1=0, axis2=1):
    """numpy's ``diagonal`` (a copy here): 2-d slabs take the diagonal of their rows or
    columns locally; other arrays act axis-locally over the two axes."""
    a1, a2 = _agreed_axes(a, (axis1, axis2), allow_duplicate=True)
    if a1 == a2:
        raise ValueError("axis1 and axis2 cannot be the same")
    from ._layout import as_slab

    a = as_slab(a)
    d = a.distributor
    if (
        a.ndim == 2
        and not d.replicated
        and d.axis is not None
        and d.comm.size > 1
        and (a1, a2) in ((0, 1), (1, 0))
    ):
        return _slab_diagonal(a, offset if (a1, a2) == (0, 1) else -offset)
    oa = _out_axis_drop((a1, a2), a.ndim, False)
    return axis_local("diagonal", lambda p: np.diagonal(p, offset, a1, a2), a, (a1, a2),
                      out_axis=lambda x, n: oa(x, n - 1))  # fmt: skip


def _slab_diagonal(a: D2O, k: int) -> D2O:
    from ._distributors import slab_distributor

    d = a.distributor
    n, m = a.shape
    bounds = d.bounds()

    def count(
        lo: int, hi: int
    ) -> int:  # diagonal elements (i, i + k) with i (or i + k) in [lo, hi)
        if d.axis == 0:
            s, e = max(lo, -k, 0), min(hi, m - k, n)
        else:
            s, e = max(lo - k, 0, -k), min(hi - k, n, m - k)
        return max(0, e - s)

    lengths = [count(bounds[r], bounds[r + 1]) for r in range(d.comm.size)]
    lo = bounds[d.comm.rank]
    piece = np.diagonal(a.data, k + lo if d.axis == 0 else k - lo).copy()
    offs = tuple(np.concatenate(([0], np.cumsum(lengths))).tolist())
    return D2O._from_local(piece, slab_distributor((offs[-1],), d.comm, 0, offs, "freeform"))


def trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    """numpy's ``trace``: the diagonal's sum."""
    return _finish(diagonal(a, offset, axis1, axis2).sum(axis=-1, dtype=dtype), out)


def take_along_axis(arr, indices, axis=-1):
    """numpy's ``take_along_axis`` (axis-local: both operands cut along another axis)."""
    if axis is None or not isinstance(arr, D2O) or arr.ndim < 2:
        return fallback("take_along_axis", np.take_along_axis, (arr, indices), {"axis": axis})
    from ._axislocal import _whole_along
    from ._distributors import get_distributor
    from ._layout import as_slab
    from ._redistribution import redistribute

    arr = as_slab(arr)
    (ax,) = _agreed_axes(arr, axis)
    idx = indices if isinstance(indices, D2O) else _creation.asarray(indices, dist=False)
    if idx.ndim != arr.ndim:
        raise ValueError("`indices` and `arr` must have the same number of dimensions")
    data, d = _whole_along(arr, (ax,))
    if d.replicated:
        it = get_distributor("not", idx.shape, d.comm)
    else:
        if idx.shape[d.axis] != arr.shape[d.axis]:
            return fallback("take_along_axis", np.take_along_axis, (arr, indices), {"axis": axis})
        it = d.slabs_like(idx.shape, d.axis)
    idx = as_slab(idx)
    piece = redistribute(idx.data, idx.distributor, it)
    with agreed(d.comm):
        res = np.take_along_axis(data, piece, axis=ax)
    if d.replicated:
        return D2O._from_local(res, get_distributor("not", res.shape, d.comm))
    return D2O._from_local(
        res,
        d.slabs_like(res.shape[: d.axis] + (arr.shape[d.axis],) + res.shape[d.axis + 1 :], d.axis),
    )


# -- the table ---------------------------------------------------------------------------


def _register(kind: str, names: str, impl: Callable | None = None, note: str = "") -> None:
    for n in names.split():
        TABLE[n] = (kind, impl, note)


def _from_handled(name: str) -> Callable:
    return HANDLED[getattr(np, name)]


def _build() -> None:
    for n in dir(np):
        f = getattr(np, n)
        if isinstance(f, np.ufunc):
            gufunc = f.signature is not None  # core dimensions: not element-wise
            TABLE[n] = ("fallback", None, "generalized ufunc") if gufunc else ("ufunc", f, "")
    for n in _creation.__all__:
        if hasattr(np, n):
            TABLE[n] = ("create", getattr(_creation, n), "")
    _register("create", "asfortranarray require", _creation.asarray)
    TABLE["copy"] = (
        "create",
        lambda a, order="K", subok=False: a.copy() if isinstance(a, D2O) else _creation.array(a),
        "",
    )
    for n in _joining.__all__:
        kind = (
            "join"
            if n in ("concatenate", "stack", "hstack", "vstack", "dstack", "column_stack", "append")
            else "view"
        )
        TABLE[n] = (kind, getattr(_joining, n), "")
    TABLE["concat"] = ("join", _joining.concatenate, "")
    TABLE["row_stack"] = ("join", _joining.vstack, "deprecated alias")
    for n in ("sum prod max min amax amin mean var std all any argmax argmin nansum nanmax "
              "nanmin cumsum cumprod median").split():  # fmt: skip
        TABLE[n] = ("reduce", _from_handled(n), "")
    for n in ("var", "std"):
        TABLE[n] = ("reduce", _with_correction(_from_handled(n)), "")
    for f in (nanprod, nanmean, nanvar, nanstd, count_nonzero, ptp, average, allclose,
              array_equal, array_equiv, trace):  # fmt: skip
        TABLE[f.__name__] = ("reduce", f, "")
    TABLE["nanargmax"] = ("reduce", _nanarg("argmax"), "")
    TABLE["nanargmin"] = ("reduce", _nanarg("argmin"), "")
    for n in ("where nonzero bincount unique vdot dot shares_memory may_share_memory shape "
              "ndim size isrealobj iscomplexobj real imag transpose swapaxes moveaxis copy "
              "isreal iscomplex nan_to_num ravel").split():  # fmt: skip
        f = HANDLED.get(getattr(np, n))
        kind = {"where": "local", "nonzero": "reduce", "bincount": "reduce", "unique": "reduce",
                "vdot": "linalg", "dot": "linalg", "isreal": "local", "iscomplex": "local",
                "nan_to_num": "local"}.get(n, "view" if n in ("real", "imag", "transpose", "swapaxes", "moveaxis") else "meta")  # fmt: skip
        if n == "ravel":
            kind = "view"
        if f is not None and n not in TABLE:
            TABLE[n] = (kind, f, "")
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
        if hasattr(np, n) and arrays and n not in TABLE:
            TABLE[n] = ("local", _ew(getattr(np, n), arrays), "")
    for n in ("partition argpartition diff unwrap nancumsum nancumprod "
              "cumulative_sum cumulative_prod").split():  # fmt: skip
        if hasattr(np, n):
            TABLE[n] = ("axis", _axis(getattr(np, n), n), "along the axis; axis=None (the "
                        "flattened array) takes the fallback until the sort issue")  # fmt: skip
    for n in ("percentile quantile nanmedian nanpercentile nanquantile").split():
        note = "over given axes (axis=None: fallback until the sort issue)"
        TABLE[n] = ("axis", _axis(getattr(np, n), n, drop=True), note)
    TABLE["sort"] = ("axis", _descending(_axis(np.sort, "sort"), False), "axis=None: fallback")
    TABLE["argsort"] = (
        "axis",
        _descending(_axis(np.argsort, "argsort"), True),
        "axis=None: fallback",
    )
    TABLE["sort_complex"] = (
        "axis",
        lambda a: TABLE["sort"][1](a.astype(np.result_type(a.dtype, np.complex64)), axis=-1),
        "1-d: fallback until the sort issue",
    )
    for f in (roll, apply_along_axis, gradient, diagonal, take_along_axis):
        TABLE[f.__name__] = ("axis", f, "")
    for f in (flip, fliplr, flipud, rot90):
        TABLE[f.__name__] = ("view", f, "")
    TABLE["reshape"] = (
        "view",
        lambda a, shape=None, order="C", *, newshape=None, copy=None: a.reshape(
            shape if shape is not None else newshape, order=order
        ),
        "",
    )
    TABLE["permute_dims"] = ("view", lambda a, axes=None: a.transpose(axes), "")
    TABLE["matrix_transpose"] = ("view", lambda x: x.swapaxes(-1, -2), "")
    TABLE["rollaxis"] = (
        "view",
        lambda a, axis, start=0: (
            np.rollaxis(a, axis, start)
            if not isinstance(a, D2O)
            else a.transpose(_rollaxis_order(a.ndim, axis, start))
        ),
        "",
    )
    TABLE["matmul"] = ("linalg", matmul, "stacks of matrices (more than 2-d) take the fallback")
    TABLE["vecdot"] = ("linalg", vecdot, "")
    from ._einsum import einsum, tensordot

    TABLE["einsum"] = ("linalg", einsum, "`...` and the interleaved form take the fallback")
    TABLE["tensordot"] = ("linalg", tensordot, "")
    TABLE["einsum_path"] = ("meta", _meta(np.einsum_path), "")
    TABLE["outer"] = ("linalg", outer, "")
    TABLE["inner"] = ("linalg", inner, "")
    for n in ("result_type can_cast promote_types min_scalar_type common_type mintypecode "
              "isdtype issubdtype iterable isscalar typename broadcast_shapes get_printoptions "
              "set_printoptions printoptions geterr seterr geterrcall seterrcall getbufsize "
              "setbufsize format_float_positional format_float_scientific base_repr "
              "binary_repr show_config show_runtime get_include info frompyfunc "
              "tril_indices triu_indices diag_indices mask_indices ix_ isfortran "
              "datetime_data busday_count busday_offset is_busday unravel_index").split():  # fmt: skip
        if hasattr(np, n) and n not in TABLE:
            TABLE[n] = ("meta", _meta(getattr(np, n)), "")
    TABLE["array_repr"] = ("meta", lambda arr, *a, **k: repr(arr), "")
    TABLE["array_str"] = ("meta", lambda a, *x, **k: str(a), "")
    TABLE["broadcast_to"] = ("local", broadcast_to, "")
    TABLE["broadcast_arrays"] = ("local", broadcast_arrays, "")
    TABLE["tril"] = ("local", lambda m, k=0: _tri_mask(m, k, lower=True), "")
    TABLE["triu"] = ("local", lambda m, k=0: _tri_mask(m, k, lower=False), "")


def _more() -> None:
    """Entries built on indexing, joining, matmul and the mechanisms above."""
    for n in "bartlett blackman hamming hanning kaiser".split():
        TABLE[n] = ("meta", getattr(np, n), "a window of scalars: numpy's own array")
    for n in ("poly polyadd polyder polydiv polyint polymul polysub roots").split():
        TABLE[n] = ("fallback", None, "coefficient arrays are small")
    for n in ("loadtxt genfromtxt fromfile frombuffer fromstring fromiter fromregex "
              "from_dlpack").split():  # fmt: skip
        TABLE[n] = ("create", _read_with(getattr(np, n)), "every rank reads, keeps its piece")
    TABLE["load"] = ("create", load, ".npy: every rank reads only its part (d2o.io)")
    TABLE["save"] = ("create", save, ".npy: every rank writes its part (d2o.io)")
    TABLE["asarray_chkfinite"] = ("create", asarray_chkfinite, "")
    TABLE["take"] = ("index", take, "")
    TABLE["compress"] = ("index", compress, "")
    TABLE["extract"] = ("index", lambda condition, arr: arr.ravel()[_ravel(condition) != 0], "")
    TABLE["flatnonzero"] = ("index", lambda a: HANDLED[np.nonzero](a.ravel())[0], "")
    TABLE["argwhere"] = ("index", argwhere, "")
    TABLE["copyto"] = ("local", copyto, "")
    TABLE["putmask"] = ("index", putmask, "")
    TABLE["choose"] = (
        "local",
        lambda a, choices, out=None, mode="raise": _finish(
            elementwise(lambda p, *c: np.choose(p, c, mode=mode), [a, *choices]), out
        ),
        "",
    )
    TABLE["select"] = ("local", select, "")
    TABLE["piecewise"] = (
        "local",
        lambda x, condlist, funclist, *args, **kw: elementwise(
            lambda p, *c: np.piecewise(p, list(c), funclist, *args, **kw), [x, *_conds(condlist, x)]
        ),
        "",
    )
    TABLE["polyval"] = ("local", _ew(np.polyval, ("x",)), "")
    TABLE["vander"] = ("local", vander, "")
    TABLE["ravel_multi_index"] = (
        "local",
        lambda multi_index, dims, mode="raise", order="C": elementwise(
            lambda *p: np.ravel_multi_index(p, dims, mode=mode, order=order), list(multi_index)
        ),
        "",
    )
    TABLE["unravel_index"] = (
        "local",
        lambda indices, shape, order="C": elementwise(
            lambda p: np.unravel_index(p, shape, order=order), [indices]
        ),
        "",
    )
    TABLE["datetime_as_string"] = ("local", _ew(np.datetime_as_string, ("arr",)), "")
    TABLE["real_if_close"] = ("reduce", real_if_close, "")
    TABLE["cross"] = ("local", cross, "the vector axis must not be split (else fallback)")
    TABLE["repeat"] = ("axis", repeat, "")
    TABLE["pad"] = ("axis", pad, "padded axes whole on every rank (one exchange)")
    for n in ("packbits", "unpackbits"):
        TABLE[n] = ("axis", _axis(getattr(np, n), n), "axis=None takes the fallback")
    TABLE["trapezoid"] = ("reduce", trapezoid, "")
    TABLE["histogram"] = ("reduce", histogram, "string bins take the fallback")
    TABLE["histogram_bin_edges"] = ("reduce", histogram_bin_edges, "string bins take the fallback")
    TABLE["cov"] = ("linalg", cov, "")
    TABLE["corrcoef"] = ("linalg", corrcoef, "")
    TABLE["diag"] = (
        "axis",
        lambda v, k=0: (
            diagonal(v, k) if np.ndim(v) == 2 else fallback("diag", np.diag, (v,), {"k": k})
        ),
        "1-d input (building a matrix) takes the fallback",
    )
    for n in ("fill_diagonal place put_along_axis").split():
        TABLE[n] = ("fallback", _inplace_fallback(n), "writes into its first argument")
    TABLE["put"] = ("index", put, "numpy indices: every rank writes its own elements")
    for n in ("diag_indices_from tril_indices_from triu_indices_from").split():
        TABLE[n] = ("meta", _meta(getattr(np, n)), "")


def put(a, ind, v, mode="raise"):
    """numpy's ``put`` into a distributed ``a``: ``a.flat[ind] = v`` (`d2o._ndarray.put`);
    a numpy ``a`` takes the fallback."""
    if not isinstance(a, D2O):
        return fallback("put", np.put, (a, ind, v), {"mode": mode}, inplace=True)
    return _ndarray.put(a, ind, v, mode)


def _inplace_fallback(name: str) -> Callable:
    np_func = getattr(np, name)

    def f(*args: Any, **kwargs: Any) -> Any:
        return fallback(name, np_func, args, kwargs, inplace=True)

    return f


def _ravel(x: Any) -> Any:
    return x.ravel() if isinstance(x, D2O) else np.ravel(x)


def _conds(condlist: Any, x: Any) -> list:
    if isinstance(condlist, D2O) or (
        isinstance(condlist, np.ndarray) and condlist.ndim == np.ndim(x)
    ):
        return [condlist]
    return list(condlist)


def _read_with(reader: Callable) -> Callable:
    def f(*args: Any, dist: Any = None, **kwargs: Any) -> Any:
        return _creation.asarray(reader(*args, **kwargs), dist=dist)

    f.__doc__ = f"numpy's ``{reader.__name__}``, distributed after reading."
    return f


def load(file: Any, mmap_mode=None, allow_pickle=False, fix_imports=True, encoding="ASCII", *,
         max_header_size=10000, dist: Any = None):  # fmt: skip
    """numpy's ``load`` of a ``.npy`` file, each rank reading its part (d2o.io.load)."""
    from .io import load as _load

    return _load(file)


def save(file: Any, arr: Any, allow_pickle=True, fix_imports=True):
    """numpy's ``save``: a distributed array writes its parts (d2o.io.save)."""
    from .io import save as _save

    if isinstance(arr, D2O):
        return _save(file, arr, overwrite=True)
    return np.save(file, arr, allow_pickle=allow_pickle)


def asarray_chkfinite(a, dtype=None, order=None, *, dist=None):
    """numpy's ``asarray_chkfinite``: ValueError unless every element is finite."""
    x = _creation.asarray(a, dtype=dtype, dist=dist)
    if x.dtype.kind in "fc" and not bool(elementwise(np.isfinite, [x]).all()):
        raise ValueError("array must not contain infs or NaNs")
    return x


def take(a, indices, axis=None, out=None, mode="raise"):
    """numpy's ``take``: distributed fancy indexing."""
    if mode != "raise":
        return fallback("take", np.take, (a, indices), {"axis": axis, "mode": mode})
    if axis is None:
        return _finish(a.ravel()[indices], out)
    ax = normalize_axis_index(axis, a.ndim)
    return _finish(a[(slice(None),) * ax + (indices,)], out)


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
    return _finish(a[(slice(None),) * ax + (c,)], out)


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


def vander(x, N=None, increasing=False):
    """numpy's ``vander``: rows stay with the ranks holding ``x``'s elements."""
    n = x.shape[0] if N is None else N
    powers = np.arange(n) if increasing else np.arange(n - 1, -1, -1)
    from ._distributors import get_distributor
    from ._layout import as_slab

    x = as_slab(x)
    d = x.distributor
    shape = (x.shape[0], powers.size)
    target = get_distributor("not", shape, d.comm) if d.replicated else d.slabs_like(shape, 0)
    with agreed(d.comm):
        piece = np.asarray(x.data)[:, None] ** powers
    return D2O._from_local(piece.astype(np.result_type(x.dtype, powers.dtype)), target)


def real_if_close(a, tol=100):
    """numpy's ``real_if_close``: one reduction decides for every rank."""
    if a.dtype.kind != "c":
        return a
    t = tol * np.finfo(a.dtype).eps if tol > 1 else tol
    return a.real.copy() if bool(elementwise(lambda p: np.abs(p.imag) < t, [a]).all()) else a


def cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    """numpy's ``cross``: element-wise over the other axes."""
    if axis is not None:
        axisa = axisb = axisc = axis
    x = a if isinstance(a, D2O) else b
    va = normalize_axis_index(axisa, np.ndim(a)) if np.ndim(a) else 0
    split = () if x.distributor.replicated else x.distributor.split_axes()
    if (
        x is a
        and va in split
        or x is b
        and normalize_axis_index(axisb, np.ndim(b)) in split
        or np.ndim(a) != np.ndim(b)
    ):
        return fallback("cross", np.cross, (a, b), {"axisa": axisa, "axisb": axisb, "axisc": axisc})
    return elementwise(lambda p, q: np.cross(p, q, axisa, axisb, axisc), [a, b])


def repeat(a, repeats, axis=None):
    """numpy's ``repeat`` along an axis (axis-local); ``axis=None`` repeats the
    flattened array along its only axis (the fallback)."""
    if axis is None or np.ndim(repeats) or not isinstance(a, D2O):
        return fallback("repeat", np.repeat, (a, repeats), {"axis": axis})
    (ax,) = _agreed_axes(a, axis)
    return axis_local("repeat", lambda p: np.repeat(p, repeats, axis=ax), a, (ax,))


def pad(array, pad_width, mode="constant", **kwargs):
    """numpy's ``pad``: the padded axes whole on every rank (axis-local)."""
    widths = np.broadcast_to(np.asarray(pad_width, dtype=np.intp).reshape(-1, 2) if np.ndim(pad_width) else np.full((1, 2), pad_width), (array.ndim, 2))  # fmt: skip
    core = tuple(i for i in range(array.ndim) if widths[i].any())
    if not core:
        return array.copy()
    return axis_local("pad", lambda p: np.pad(p, pad_width, mode, **kwargs), array, core)


def trapezoid(y, x=None, dx=1.0, axis=-1):
    """numpy's ``trapezoid``: two shifted views added (neighbours move once) and summed."""
    (ax,) = _agreed_axes(y, axis)
    hi = (slice(None),) * ax + (slice(1, None),)
    lo = (slice(None),) * ax + (slice(None, -1),)
    if x is None:
        return ((y[hi] + y[lo]) * (dx / 2.0)).sum(axis=ax)
    if np.ndim(x) == 1:
        shape = [1] * y.ndim
        shape[ax] = -1
        d = (
            np.diff(x if not isinstance(x, D2O) else x.get_full_data()).reshape(shape)
            if not isinstance(x, D2O) or x.size * x.itemsize <= 1 << 20
            else None
        )
        if d is None:
            return fallback("trapezoid", np.trapezoid, (y,), {"x": x, "axis": axis})
        return ((y[hi] + y[lo]) * (d / 2.0)).sum(axis=ax)
    return fallback("trapezoid", np.trapezoid, (y,), {"x": x, "dx": dx, "axis": axis})


def _edges(a: D2O, bins: Any, range: Any, weights: Any) -> Any:
    if isinstance(bins, str):
        # numpy's own rule for named estimators, fed the distributed array: its min, max,
        # std and percentiles are d2o's reductions and selections (no gather)
        try:
            from numpy.lib._histograms_impl import _get_bin_edges
        except ImportError:  # pragma: no cover - another numpy's layout
            return None
        with agreed(a.distributor.comm):
            if bins not in ("auto", "fd", "doane", "scott", "stone", "rice", "sturges", "sqrt"):
                raise ValueError(f"{bins!r} is not a valid estimator for `bins`")
            if weights is not None:
                raise TypeError("Automated estimation of the number of bins is not supported "
                                "for weighted data")  # fmt: skip
        return _get_bin_edges(a.ravel(), bins, range, None)[0]
    if np.ndim(bins) == 1:
        return np.asarray(bins)
    if range is None:
        range = (float(a.min()), float(a.max())) if a.size else (0.0, 1.0)
    return np.histogram_bin_edges(np.zeros(0, a.dtype), bins, range=range)


def histogram_bin_edges(a, bins=10, range=None, weights=None):
    """numpy's ``histogram_bin_edges`` for a count or explicit edges (two reductions)."""
    e = _edges(a, bins, range, weights)
    if e is None:
        return fallback(
            "histogram_bin_edges",
            np.histogram_bin_edges,
            (a,),
            {"bins": bins, "range": range, "weights": weights},
        )
    return e


def histogram(a, bins=10, range=None, density=None, weights=None):
    """numpy's ``histogram``: every rank counts its piece, one sum of the counts."""
    e = _edges(a, bins, range, weights)
    if e is None:
        return fallback(
            "histogram",
            np.histogram,
            (a,),
            {"bins": bins, "range": range, "density": density, "weights": weights},
        )

    x = a.ravel() if a.ndim != 1 else a
    w = (
        None
        if weights is None
        else (weights.ravel() if isinstance(weights, D2O) else np.ravel(weights))
    )
    wp = None if w is None else elementwise(lambda p, q: q, [x, w]).data
    d = x.distributor
    piece = x.data if not d.replicated or d.comm.rank == 0 else x.data[:0]
    if d.replicated and wp is not None:
        wp = wp if d.comm.rank == 0 else wp[:0]
    with agreed(d.comm):
        counts, _ = np.histogram(piece, e, weights=wp)
    total = d.comm.Allreduce(counts, "sum") if d.comm.size > 1 else counts
    if density:
        db = np.diff(e)
        total = total / db / total.sum()
    return total, e


def cov(m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None, *,
        dtype=None):  # fmt: skip
    """numpy's ``cov`` without weights: centred data times its transpose (matmul)."""
    if y is not None or fweights is not None or aweights is not None or m.ndim != 2:
        return fallback("cov", np.cov, (m,), {"y": y, "rowvar": rowvar, "bias": bias, "ddof": ddof,
                                           "fweights": fweights, "aweights": aweights, "dtype": dtype})  # fmt: skip
    x = m if rowvar else m.T
    if dtype is not None or x.dtype.kind not in "fc":
        x = x.astype(np.result_type(x.dtype, np.float64) if dtype is None else dtype)
    n = x.shape[1]
    dd = (0 if bias else 1) if ddof is None else ddof
    xm = x - x.mean(axis=1, keepdims=True)
    c = xm @ xm.T.conj()
    return c * (1.0 / max(n - dd, 0)) if n - dd > 0 else c * np.inf


def corrcoef(x, y=None, rowvar=True, bias=None, ddof=None, *, dtype=None):
    """numpy's ``corrcoef`` from `cov`."""
    c = cov(x, y, rowvar, dtype=dtype)
    # only the diagonal (one number per variable) is gathered, never the matrix
    dgl = (
        np.sqrt(np.real(diagonal(c).get_full_data()))
        if isinstance(c, D2O)
        else np.sqrt(np.diag(c).real)
    )
    out = c / dgl[:, None] / dgl[None, :]
    return elementwise(lambda p: np.clip(p.real, -1, 1) if p.dtype.kind != "c" else p, [out])


def _with_correction(f: Callable) -> Callable:
    """var/std taking the array API's ``correction`` as numpy's ``ddof``."""

    def g(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None, mean=None,
          correction=None):  # fmt: skip
        kw = {"dtype": dtype, "out": out, "keepdims": keepdims}
        kw = {k: v for k, v in kw.items() if v is not None}
        return f(a, axis=axis, ddof=ddof if correction is None else correction, **kw)

    return g


def _descending(f: Callable, indices: bool) -> Callable:
    """sort/argsort with the array API's ``descending`` (stable: equal keys keep their
    order, from a stable ascending sort of the reversed axis)."""

    def g(a, axis=-1, kind=None, order=None, *, stable=None, descending=False):
        kw = {} if stable is None else {"stable": stable}
        if not descending:
            return f(a, axis=axis, kind=kind, order=order, **kw)
        if axis is None:
            a, axis = (a.ravel() if isinstance(a, D2O) else np.ravel(a)), 0
        ax = normalize_axis_index(axis, np.ndim(a))
        rev = flip(a, ax) if isinstance(a, D2O) else np.flip(a, ax)
        res = flip(f(rev, axis=ax, kind="stable", order=order), ax)
        return (a.shape[ax] - 1) - res if indices else res

    return g


def matmul(a, b, /, out=None, **kw):
    """numpy's ``matmul``: the distributed product for 1-d and 2-d operands (``d2o.dot``);
    stacks of matrices take the fallback."""
    if np.ndim(a) > 2 or np.ndim(b) > 2 or kw:
        return fallback("matmul", np.matmul, (a, b), dict(kw, out=out))
    res = a @ b if isinstance(a, D2O) else b.__rmatmul__(a)
    return _finish(res, out)


def vecdot(x1, x2, /, *, axis=-1, out=None, **kw):
    """numpy's ``vecdot``: ``sum(conj(x1) * x2, axis)`` (element-wise, then a reduction)."""
    n1, n2 = np.ndim(x1), np.ndim(x2)
    if not n1 or not n2 or np.shape(x1)[axis % n1] != np.shape(x2)[axis % n2]:
        raise ValueError("vecdot: the contracted axes must have the same length")
    prod = elementwise(lambda p, q: np.conj(p) * q, [x1, x2])
    return _finish(prod.sum(axis=axis, dtype=prod.dtype), out)  # numpy keeps the dtype


def _rollaxis_order(n: int, axis: int, start: int) -> list:
    axis = normalize_axis_index(axis, n)
    if start < 0:
        start += n
    if not 0 <= start < n + 1:
        raise np.exceptions.AxisError(
            f"'start' arg requires {-n} <= start < {n + 1}, but {start} was passed in"
        )
    order = list(range(n))
    order.remove(axis)
    order.insert(start - 1 if axis < start else start, axis)
    return order


def outer(a, b, out=None):
    """numpy's ``outer``: ``a`` keeps its layout along the rows; every rank needs all of
    ``b`` (the second vector moves once)."""
    a1 = a.ravel() if isinstance(a, D2O) else np.ravel(a)
    b1 = b.ravel() if isinstance(b, D2O) else np.ravel(b)
    return _finish(elementwise(np.multiply, [a1[:, None], b1[None, :]]), out)


def inner(a, b):
    """numpy's ``inner`` of 1-d arrays (a dot product); others take the fallback."""
    if np.ndim(a) == 1 and np.ndim(b) == 1:
        return HANDLED[np.dot](a, b)
    return fallback("inner", np.inner, (a, b), {})


def broadcast_to(array, shape, subok=False):
    """numpy's ``broadcast_to`` (a new array here; numpy gives a read-only view)."""
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    zeros = _creation.zeros(shape, dtype=bool, dist=array if array.shape == shape else True)
    return elementwise(lambda p, z: np.broadcast_to(p, z.shape).copy(), [array, zeros])


def broadcast_arrays(*args, subok=False):
    """numpy's ``broadcast_arrays``."""
    shape = np.broadcast_shapes(*[np.shape(a) for a in args])
    return [  # a list, as the array API asks (numpy gives a tuple)
        broadcast_to(a, shape) if isinstance(a, D2O) else np.broadcast_to(a, shape) for a in args
    ]


def _tri_mask(m: D2O, k: int, lower: bool) -> D2O:
    if m.ndim < 2:
        return fallback("tril" if lower else "triu", np.tril if lower else np.triu, (m,), {"k": k})
    n, mm = m.shape[-2:]
    mask = _creation.tri(n, mm, k if lower else k - 1, dtype=bool, dist=m if m.ndim == 2 else True)
    return elementwise(
        lambda p, t: np.where(t if lower else ~t, p, np.zeros(1, p.dtype)), [m, mask]
    )


def numpy_functions() -> list:
    """numpy's public callable main-namespace names that are functions (not classes)."""
    out = []
    for n in dir(np):
        if n.startswith("_"):
            continue
        f = getattr(np, n)
        if callable(f) and not isinstance(f, type):
            out.append(n)
    return out


def implementation(name: str) -> tuple[str, Callable]:
    """(kind, callable) for ``d2o.numpy.<name>``: the table's entry, or the bounded
    fallback around numpy's own function."""
    kind, impl, _ = TABLE.get(name, ("fallback", None, ""))
    if kind == "fallback" and impl is not None:
        return kind, impl
    if impl is None:
        np_func = getattr(np, name)

        def impl(*args: Any, **kwargs: Any) -> Any:
            return fallback(name, np_func, args, kwargs)

    return kind, impl


def _sorting() -> None:
    """The functions of the sort machinery (`d2o._sorted`): where the sorted axis is whole
    on every rank they keep the axis-local entries built above."""
    from . import _sorted

    TABLE["sort"] = ("sort", _descending(_sorted.sorter(_axis(np.sort, "sort"), "sort", False),
                                         False), "")  # fmt: skip
    TABLE["argsort"] = ("sort", _descending(_sorted.sorter(_axis(np.argsort, "argsort"),
                                                           "argsort", True), True), "")  # fmt: skip
    for n, idx in (("partition", False), ("argpartition", True)):
        TABLE[n] = ("sort", _sorted.partitioner(_axis(getattr(np, n), n), n, idx), "")
    for n in ("median percentile quantile nanmedian nanpercentile nanquantile").split():
        TABLE[n] = ("sort", _sorted.quantiler(TABLE[n][1], n), "")
    for f in (_sorted.lexsort, _sorted.searchsorted, _sorted.isin, _sorted.unique,
              _sorted.unique_values, _sorted.unique_counts, _sorted.unique_inverse,
              _sorted.unique_all, _sorted.union1d, _sorted.intersect1d, _sorted.setdiff1d,
              _sorted.setxor1d):  # fmt: skip
        TABLE[f.__name__] = ("sort", f, "")
    if hasattr(np, "in1d"):
        TABLE["in1d"] = ("sort", _sorted.in1d, "deprecated alias")
    TABLE["lexsort"] = ("sort", _sorted.lexsort, "keys of more than one dimension: fallback")
    from . import _composed

    TABLE["diff"] = ("axis", _composed.diff_along(TABLE["diff"][1]), "")
    for f in (_composed.ediff1d, _composed.convolve, _composed.correlate, _composed.kron,
              _composed.tile, _composed.resize, _composed.trim_zeros, _composed.histogramdd,
              _composed.histogram2d):  # fmt: skip
        TABLE[f.__name__] = ("composed", f, "")
    TABLE["unique"] = ("sort", _sorted.unique, "axis given: fallback")


_build()
_more()
_sorting()
