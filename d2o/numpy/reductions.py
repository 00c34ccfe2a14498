"""`d2o.numpy`'s reductions and statistics: their table entries.

A reduction combines local partials in one small collective (an Allreduce of the
result's size); the functions here are composed of d2o's reductions and element-wise
operations (``nanmean``, ``average``, ``histogram``, ``cov``, ...), so none gathers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..array.base import Array as D2O
from ..core.errors import agreed
from ..ops import joining as _joining
from ..ops import scans as _scans
from ..ops.axislocal import elementwise, fallback
from .axes import diagonal
from .factories import (
    agreed_axes,
    ew,
    finish,
    from_handled,
    handled,
    normalize_axis_index,
    normalize_axis_tuple,
)

__all__ = [
    "fill",
    "nancumsum",
    "nancumprod",
    "cumulative_sum",
    "cumulative_prod",
    "nanprod",
    "nanmean",
    "nanvar",
    "nanstd",
    "count_nonzero",
    "ptp",
    "average",
    "allclose",
    "array_equal",
    "array_equiv",
    "trace",
    "real_if_close",
    "trapezoid",
    "histogram_bin_edges",
    "histogram",
    "cov",
    "corrcoef",
]


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
    return finish(_as_numpy_dtype(res, np.nanmean(np.zeros(1, a.dtype), dtype=dtype).dtype), out)


def _as_numpy_dtype(res: Any, dt: np.dtype) -> Any:
    """``res`` in numpy's result dtype ``dt`` (a sum over a count is float64 otherwise)."""
    if isinstance(res, D2O):
        return res if res.dtype == dt else res.astype(dt)
    return dt.type(res)


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
    return finish(_as_numpy_dtype(res, np.nanvar(np.zeros(1, a.dtype), dtype=dtype).dtype), out)


def nanstd(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None,
           mean=None, correction=None):  # fmt: skip
    """numpy's ``nanstd``."""
    return finish(np.sqrt(nanvar(a, axis, dtype, None, ddof, keepdims, correction=correction)), out)


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
        return finish(res, out)

    f.__doc__ = f"numpy's ``nan{which}``: NaNs ignored (ValueError for all-NaN slices)."
    return f


def count_nonzero(a, axis=None, *, keepdims=False):
    """numpy's ``count_nonzero``."""
    res = elementwise(lambda p: p != 0, [a]).sum(axis=axis, keepdims=keepdims, dtype=np.intp)
    return int(res) if axis is None and not keepdims else res


def ptp(a, axis=None, out=None, keepdims=False):
    """numpy's ``ptp``: max minus min (two reductions)."""
    return finish(a.max(axis=axis, keepdims=keepdims) - a.min(axis=axis, keepdims=keepdims), out)


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
    return bool(ew(np.isclose, ("a", "b"))(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan).all())


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


def trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    """numpy's ``trace``: the diagonal's sum."""
    return finish(diagonal(a, offset, axis1, axis2).sum(axis=-1, dtype=dtype), out)


def real_if_close(a, tol=100):
    """numpy's ``real_if_close``: one reduction decides for every rank."""
    if a.dtype.kind != "c":
        return a
    t = tol * np.finfo(a.dtype).eps if tol > 1 else tol
    return a.real.copy() if bool(elementwise(lambda p: np.abs(p.imag) < t, [a]).all()) else a


def trapezoid(y, x=None, dx=1.0, axis=-1):
    """numpy's ``trapezoid``: two shifted views added (neighbours move once) and summed."""
    (ax,) = agreed_axes(y, axis)
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
            from numpy.lib._histograms_impl import _get_bin_edges  # type: ignore[attr-defined]
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


def nancumsum(a, axis=None, dtype=None, out=None):
    """numpy's ``nancumsum``: NaNs as zeros (local), then the distributed scan
    (`d2o.ops.scans.cumulative`: local scans, one Allgather of each rank's last slice)."""
    if not isinstance(a, D2O):
        return np.nancumsum(a, axis=axis, dtype=dtype, out=out)
    return _scans.cumulative(_nan_to(a, 0), "cumsum", axis, dtype, out)


def nancumprod(a, axis=None, dtype=None, out=None):
    """numpy's ``nancumprod``: NaNs as ones (local), then the distributed scan."""
    if not isinstance(a, D2O):
        return np.nancumprod(a, axis=axis, dtype=dtype, out=out)
    return _scans.cumulative(_nan_to(a, 1), "cumprod", axis, dtype, out)


def _cumulative(name: str, x: Any, axis: Any, dtype: Any, out: Any, include_initial: bool) -> Any:
    """numpy 2's ``cumulative_sum``/``cumulative_prod``: ``axis`` may be None for 1-d
    input only (0-d counts as 1-d); the identity first when ``include_initial``."""
    np_name = "cumulative_sum" if name == "cumsum" else "cumulative_prod"
    kw = {"axis": axis, "dtype": dtype, "out": out, "include_initial": include_initial}
    if not isinstance(x, D2O) or x.ndim == 0:
        return fallback(np_name, getattr(np, np_name), (x,), kw)
    if axis is None and x.ndim > 1:
        raise ValueError(
            "For arrays which have more than one dimension ``axis`` argument is required."
        )
    return _scans.cumulative(x, name, axis, dtype, out, include_initial=bool(include_initial))


def cumulative_sum(x, /, *, axis=None, dtype=None, out=None, include_initial=False):
    """numpy's ``cumulative_sum``: the distributed scan (`d2o.ops.scans.cumulative`)."""
    return _cumulative("cumsum", x, axis, dtype, out, include_initial)


def cumulative_prod(x, /, *, axis=None, dtype=None, out=None, include_initial=False):
    """numpy's ``cumulative_prod``: the distributed scan (`d2o.ops.scans.cumulative`)."""
    return _cumulative("cumprod", x, axis, dtype, out, include_initial)


def fill(table: dict) -> None:
    """Enter the reductions and the statistics."""
    for n in ("sum prod max min amax amin mean var std all any argmax argmin nansum nanmax "
              "nanmin cumsum cumprod median").split():  # fmt: skip
        table[n] = ("reduce", from_handled(n), "")
    for n in ("var", "std"):
        table[n] = ("reduce", _with_correction(from_handled(n)), "")
    for f in (nanprod, nanmean, nanvar, nanstd, count_nonzero, ptp, average, allclose,
              array_equal, array_equiv, trace):  # fmt: skip
        table[f.__name__] = ("reduce", f, "")
    table["nanargmax"] = ("reduce", _nanarg("argmax"), "")
    table["nanargmin"] = ("reduce", _nanarg("argmin"), "")
    handled(table, "reduce", "nonzero bincount unique")
    table["real_if_close"] = ("reduce", real_if_close, "")
    table["trapezoid"] = ("reduce", trapezoid, "")
    table["histogram"] = ("reduce", histogram, "string bins take the fallback")
    table["histogram_bin_edges"] = ("reduce", histogram_bin_edges, "string bins take the fallback")
    scan = "local scans plus an exclusive prefix across ranks (axis=None: the flattened array)"
    for scanner in (nancumsum, nancumprod, cumulative_sum, cumulative_prod):
        if hasattr(np, scanner.__name__):
            table[scanner.__name__] = ("reduce", scanner, scan)
    table["cov"] = ("linalg", cov, "")
    table["corrcoef"] = ("linalg", corrcoef, "")
