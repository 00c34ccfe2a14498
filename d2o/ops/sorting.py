"""The sort-based functions of `d2o.numpy`: ``sort``/``argsort`` of the flattened array
and of 1-d arrays, ``lexsort``, ``partition``/``argpartition``, ``searchsorted``,
``unique`` (and the array API's ``unique_*``), ``isin``, the set operations and the
quantiles of the flattened array.  The machinery is `d2o.ops.samplesort`; what each function moves
is in its docstring.  Arrays whose sorted axis is whole on every rank never get here: the
table's axis-local path calls numpy on the pieces.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from ..array.align import align
from ..array.base import Array as D2O
from ..array.base import from_local as _from_local
from ..array.slabs import as_slab
from ..core.errors import agreed
from ..layouts.distributors import get_distributor, slab_distributor
from ..move.p2p import ask, route, route_pieces
from .axislocal import elementwise, fallback, wrap_result
from .creation import asarray
from .joining import concatenate
from .samplesort import check_kind, order_statistics, sort_pieces, sort_values, sortable

# -- shared helpers --------------------------------------------------------------------


def flat(x: D2O) -> D2O:
    """``x`` flattened (C order) on a slab layout or replicated (one exchange where the
    array is not split along its first axis, or is on a mesh)."""
    f = x if x.ndim == 1 else x.ravel()
    return as_slab(f)


def _split(x: D2O) -> bool:
    d = x.distributor
    return not d.replicated


def _offset(d: Any) -> int:
    return 0 if d.replicated else d.span()[0]


def _freeform(counts: Any, comm: Any) -> Any:
    """The 1-d slab layout whose rank ``r`` holds ``counts[r]`` elements."""
    offsets = tuple(int(v) for v in np.concatenate(([0], np.cumsum(counts))))
    return slab_distributor((offsets[-1],), comm, 0, offsets, "freeform")


def _scatter(gidx: np.ndarray, values: np.ndarray, d: Any) -> np.ndarray:
    """Collective: this rank's piece of the 1-d slab layout ``d`` whose element ``gidx[i]``
    is ``values[i]`` (every position of the array sent by exactly one rank)."""
    comm = d.comm
    owner = np.searchsorted(d.bounds_array(), gidx, side="right") - 1
    _, _, (g, v), _ = route(owner, [gidx, values], comm)
    out = np.empty(d.local_shape[0], dtype=values.dtype)
    out[g - _offset(d)] = v
    return out


def _ends(piece: np.ndarray, comm: Any) -> tuple:
    """Collective: the ranks with a non-empty piece and their last elements (a sorted
    distributed array's rank boundaries; one ``Allgather``)."""
    last = piece[-1:] if len(piece) else np.zeros(1, piece.dtype)
    lasts = comm.Allgather(last)[:, 0]
    lens = comm.Allgather(np.array([len(piece)], dtype=np.int64))[:, 0]
    ne = np.flatnonzero(lens)
    return ne, lasts[ne]


# -- sort, argsort, lexsort -------------------------------------------------------------


def sorted_flat(x: D2O, kind: Any = None, index: bool = False) -> tuple:
    """Collective: the sorted flattened ``x`` (and, with ``index``, the stable argsort's
    global flat indices), both on the 'equal' slabs (`d2o.ops.samplesort.sort_pieces`)."""
    f = flat(x)
    d = f.distributor
    if d.replicated:
        v = np.sort(f.data, kind=kind) if not index else None
        i = np.argsort(f.data, kind=kind) if index else None
        if index:
            v = f.data[i]
        lay = get_distributor("not", (f.size,), d.comm)
        return _from_local(v, lay), (_from_local(i, lay) if index else None)
    exchange_first = (
        not index
        and f.dtype.kind in "biuf"
        and d.comm.size > 1
        and (f.dtype.kind in "biu" or kind not in ("stable", "mergesort"))
    )
    if exchange_first:  # no merge: equal values are indistinguishable here
        v, lay = sort_values(f.data, f.size, d.comm, kind)
        return _from_local(v, lay), None
    (v,), i, lay = sort_pieces([f.data], _offset(d), f.size, d.comm, index=index, kind=kind)
    return _from_local(v, lay), (_from_local(i.astype(np.intp, copy=False), lay) if index else None)


def _use_sort(a: Any, axis: Any, order: Any) -> bool:
    """True where the distributed sort applies: a distributed array of a sortable dtype
    sorted as a whole (``axis=None``) or along the split axis of a 1-d array."""
    if not isinstance(a, D2O) or order is not None or not sortable(a.dtype):
        return False
    if axis is None:
        return True
    return a.ndim == 1 and _split(a)


def sorter(along: Callable, name: str, index: bool) -> Callable:
    """numpy's ``sort`` (``index=False``) or ``argsort``: the distributed sort where it
    applies, else ``along`` (the axis-local path, numpy on the pieces)."""
    np_func = np.argsort if index else np.sort

    def impl(a, axis=-1, kind=None, order=None, *, stable=None):
        if stable is not None and kind is not None:
            raise ValueError("`kind` and `stable` parameters can't be provided at the same time.")
        kw = {} if stable is None else {"stable": stable}
        if not _use_sort(a, axis, order):
            if isinstance(a, D2O) and axis is None and order is None:
                return fallback(name, np_func, (a,), {"axis": None, "kind": kind, **kw})
            return along(a, axis=axis, kind=kind, order=order, **kw)
        with agreed(a.distributor.comm):
            check_kind(kind)
            if axis is not None and a.ndim:
                np.lib.array_utils.normalize_axis_index(axis, a.ndim)
        if stable:
            kind = "stable"
        v, i = sorted_flat(a, kind, index)
        return i if index else v

    impl.__name__ = name
    return impl


def lexsort(keys, axis=-1):
    """numpy's ``lexsort`` of 1-d keys (the last key primary): the distributed sort of
    records, one ``Alltoallv`` of the keys and their global indices.  Keys of more
    dimensions take the bounded fallback."""
    seq = list(keys) if not isinstance(keys, D2O) or keys.ndim > 1 else [keys]
    if isinstance(keys, D2O) and keys.ndim == 2:
        seq = [keys[i] for i in range(keys.shape[0])]
    arrays = [k for k in seq if isinstance(k, D2O)]
    ok = (
        arrays
        and all(np.ndim(k) == 1 for k in seq)
        and len({np.shape(k) for k in seq}) == 1
        and all(sortable(np.asarray(k).dtype if not isinstance(k, D2O) else k.dtype) for k in seq)
        and np.lib.array_utils.normalize_axis_index(axis, 1) == 0
        and _split(arrays[0])
    )
    if not ok:
        return fallback("lexsort", np.lexsort, (keys,), {"axis": axis})
    first = as_slab(arrays[0])
    d = first.distributor

    cols = [align(k, d) for k in seq][::-1]
    _, i, lay = sort_pieces(cols, _offset(d), first.size, d.comm, index=True)
    return _from_local(i.astype(np.intp, copy=False), lay)


# -- partition: selection, then one move --------------------------------------------------


def partitioner(along: Callable, name: str, index: bool) -> Callable:
    """numpy's ``partition``/``argpartition``: for the flattened or a split 1-d array, the
    ``kth`` order statistics by radix selection (`d2o.ops.samplesort.order_statistics`), then one
    ``Alltoallv`` placing every element in its class (below, equal to, or between the
    selected values) with its global position: no full sort."""
    np_func = np.argpartition if index else np.partition

    def impl(a, kth, axis=-1, kind="introselect", order=None):
        if not _use_sort(a, axis, order) or isinstance(kth, D2O):
            if isinstance(a, D2O) and axis is None and order is None:
                return fallback(name, np_func, (a, kth), {"axis": None, "kind": kind})
            return along(a, kth, axis=axis, kind=kind, order=order)
        f = flat(a)
        n = f.size
        with agreed(f.distributor.comm):
            if kind != "introselect":
                raise ValueError(f"select kind must be 'introselect' (got {kind!r})")
            ks = np.asarray(kth)
            if ks.dtype.kind not in "iub":
                raise TypeError("Partition index must be integer")
            ks = ks.reshape(-1).astype(np.int64)
            if ((ks < -n) | (ks >= n)).any():
                bad = int(ks[(ks < -n) | (ks >= n)][0])
                raise ValueError(f"kth(={bad}) out of bounds ({n})")
        ks = np.unique(np.where(ks < 0, ks + n, ks))
        return _place(f, ks, index)

    impl.__name__ = name
    return impl


def _place(f: D2O, ks: np.ndarray, index: bool) -> D2O:
    d = f.distributor
    comm = d.comm
    piece = f.data
    if d.replicated:
        res = np.argpartition(piece, ks) if index else np.partition(piece, ks)
        return _from_local(res, get_distributor("not", res.shape, comm))
    vals = np.array(order_statistics(piece, list(ks), comm, f.size), dtype=f.dtype)
    lo = np.searchsorted(vals, piece, side="left")
    hi = np.searchsorted(vals, piece, side="right")
    cls = 2 * lo + (hi > lo)  # below v0, equal v0, between v0 and v1, equal v1, ...
    ncls = 2 * len(vals) + 1
    order = np.argsort(cls, kind="stable")
    counts = np.bincount(cls, minlength=ncls)
    table = comm.Allgather(counts.astype(np.int64))  # (P, classes)
    start = np.concatenate(([0], np.cumsum(table.sum(axis=0))[:-1]))
    mine = start + table[: comm.rank].sum(axis=0)
    within = np.arange(len(piece)) - np.repeat(np.cumsum(counts) - counts, counts)
    dest = np.repeat(mine, counts) + within  # global positions, ascending
    out = get_distributor("equal", (f.size,), comm, 0)
    sendcounts = np.diff(np.searchsorted(dest, out.bounds_array()))
    payload = [dest, (order + _offset(d)) if index else piece[order]]
    (pos, v), _ = route_pieces(payload, sendcounts, comm)
    res = np.empty(out.local_shape[0], dtype=v.dtype)
    res[pos - _offset(out)] = v
    return _from_local(res.astype(np.intp, copy=False) if index else res, out)


# -- searchsorted, isin ----------------------------------------------------------------


def searchsorted(a, v, side="left", sorter=None):
    """numpy's ``searchsorted`` into a distributed sorted 1-d ``a``.  Replicated queries:
    every rank counts in its piece, one ``Allreduce`` of the counts.  Distributed queries:
    each goes to the one rank whose piece decides it (one ``Allgather`` of the pieces'
    last elements, two ``Alltoallv`` of the queries and answers); the result has the
    queries' layout."""
    if side not in ("left", "right"):
        raise ValueError(f"side must be 'left' or 'right' (got {side!r})")
    if isinstance(a, D2O) and sorter is not None:
        a = a[sorter]
        sorter = None
    if not isinstance(a, D2O) or a.ndim != 1 or not sortable(a.dtype) or sorter is not None:
        if not isinstance(a, D2O) and isinstance(v, D2O):
            return elementwise(lambda p: np.searchsorted(a, p, side, sorter), [v])
        return fallback("searchsorted", np.searchsorted, (a, v), {"side": side, "sorter": sorter})
    a = as_slab(a)
    d = a.distributor
    comm = d.comm
    if d.replicated:
        if isinstance(v, D2O):
            return elementwise(lambda p: np.searchsorted(a.data, p, side), [v])
        return np.searchsorted(a.data, v, side)
    piece = a.data
    if isinstance(v, D2O) and not v.distributor.replicated:
        q = v.data.reshape(-1)
        ne, lasts = _ends(piece, comm)
        j = np.searchsorted(lasts, q, side=side)
        res = np.full(q.shape, a.size, dtype=np.intp)
        inside = j < len(ne)
        off = _offset(d)
        (ans,) = ask(
            ne[j[inside]], [q[inside]], comm, lambda qq: [off + np.searchsorted(piece, qq, side)]
        )
        res[inside] = ans
        return _from_local(res.reshape(v.data.shape), v.distributor)
    vv = v.data if isinstance(v, D2O) else np.asarray(v)
    local = np.searchsorted(piece, vv, side).astype(np.int64).reshape(-1)
    total = comm.Allreduce(local, "sum").astype(np.intp).reshape(np.shape(vv))
    if isinstance(v, D2O):
        return _from_local(total, v.distributor)
    return total[()] if total.ndim == 0 else total


def isin(element, test_elements, assume_unique=False, invert=False, *, kind=None):
    """numpy's ``isin``.  Replicated ``test_elements``: numpy on ``element``'s pieces.
    Distributed ones: sorted once (`sorted_flat`), then every element asks the one rank
    whose sorted piece can hold it (`searchsorted`'s routing) whether it is there."""
    kw = {"assume_unique": assume_unique, "invert": invert, "kind": kind}
    t = test_elements
    if not isinstance(t, D2O) or t.distributor.replicated or t.distributor.comm.size == 1:
        tv = t.get_full_data() if isinstance(t, D2O) else t  # replicated: no communication
        if isinstance(element, D2O):
            return elementwise(lambda p: np.isin(p, tv, **kw), [element])
        return np.isin(element, tv, **kw)
    el_dt = element.dtype if isinstance(element, D2O) else np.asarray(element).dtype
    if not sortable(t.dtype) or not sortable(el_dt):
        return fallback("isin", np.isin, (element, t), kw)
    ts, _ = sorted_flat(t)
    piece = ts.data
    comm = ts.distributor.comm
    if isinstance(element, D2O) and not element.distributor.replicated:
        q = element.data.reshape(-1)
        ne, lasts = _ends(piece, comm)
        j = np.searchsorted(lasts, q, side="left")
        found = np.zeros(q.shape, dtype=bool)
        inside = j < len(ne)

        def there(qq: np.ndarray) -> list:
            pos = np.searchsorted(piece, qq, side="left")
            return [piece[np.minimum(pos, len(piece) - 1)] == qq]

        (ans,) = ask(ne[j[inside]], [q[inside]], comm, there)
        found[inside] = ans
        found = found.reshape(element.data.shape)
        return _from_local(~found if invert else found, element.distributor)
    ev = element.data if isinstance(element, D2O) else np.asarray(element)
    local = np.isin(ev, piece).astype(np.int8).reshape(-1)
    hit = comm.Allreduce(local, "max").astype(bool).reshape(np.shape(ev))
    hit = ~hit if invert else hit
    if isinstance(element, D2O):
        return _from_local(hit, element.distributor)
    return hit


def in1d(ar1, ar2, assume_unique=False, invert=False, *, kind=None):
    """numpy's deprecated ``in1d``: `isin` of the flattened ``ar1``."""
    x = ar1.ravel() if isinstance(ar1, D2O) else np.ravel(ar1)
    return isin(x, ar2, assume_unique=assume_unique, invert=invert, kind=kind)


# -- unique ---------------------------------------------------------------------------------


def _same(a: np.ndarray, b: np.ndarray, equal_nan: bool) -> np.ndarray:
    eq = a == b
    if equal_nan and a.dtype.kind in "fc":
        eq |= np.isnan(a) & np.isnan(b)
    return eq


def unique(ar, return_index=False, return_inverse=False, return_counts=False, axis=None, *,
           equal_nan=True, sorted=True):  # fmt: skip
    """numpy's ``unique`` of the flattened array: the distributed sort (stable, with the
    global indices when ``return_index``/``return_inverse`` ask for them), then each rank
    marks the first element of each run (one ``Allgather`` of the pieces' last elements).
    Values, indices and counts are distributed as the runs start (no gather); the
    inverse goes back to the input's positions in one ``Alltoallv``.  ``axis`` given takes
    the bounded fallback."""
    kw = {"return_index": return_index, "return_inverse": return_inverse,
          "return_counts": return_counts, "axis": axis, "equal_nan": equal_nan}  # fmt: skip
    if not isinstance(ar, D2O) or axis is not None or not sortable(ar.dtype):
        return fallback("unique", np.unique, (ar,), kw)
    f = flat(ar)
    d = f.distributor
    comm = d.comm
    if d.replicated:
        return _replicated_unique(ar, f, kw)
    need = return_index or return_inverse
    (s,), g, out = sort_pieces([f.data], _offset(d), f.size, comm, index=need)
    ne, lasts = _ends(s, comm)
    prev = ne[ne < comm.rank]
    flag = np.ones(len(s), dtype=bool)
    if len(s):
        flag[1:] = ~_same(s[1:], s[:-1], equal_nan)
        if len(prev):
            flag[0] = not _same(s[:1], lasts[len(prev) - 1 : len(prev)], equal_nan)[0]
    nu = comm.Allgather(np.array([int(flag.sum())], dtype=np.int64))[:, 0]
    ulay = _freeform(nu, comm)
    res: list = [_from_local(s[flag], ulay)]
    if return_index:
        res.append(_from_local(g[flag].astype(np.intp), ulay))
    if return_inverse:
        ids = (int(nu[: comm.rank].sum()) + np.cumsum(flag) - 1).astype(np.intp)
        inv = _from_local(_scatter(g, ids, d), d)
        res.append(inv.reshape(ar.shape) if ar.ndim != 1 else inv)
    if return_counts:
        starts = np.flatnonzero(flag) + _offset(out)
        first = np.array([starts[0] if len(starts) else -1], dtype=np.int64)
        firsts = comm.Allgather(first)[:, 0]
        later = firsts[comm.rank + 1 :]
        later = later[later >= 0]
        nxt = int(later[0]) if len(later) else f.size
        ends = np.concatenate((starts[1:], [nxt])) if len(starts) else starts
        res.append(_from_local((ends - starts).astype(np.intp), ulay))
    return res[0] if len(res) == 1 else tuple(res)


def _replicated_unique(ar: D2O, f: D2O, kw: dict) -> Any:
    """numpy's unique on a replicated array (every rank computes it; no communication)."""
    with agreed(f.distributor.comm):
        res = np.unique(f.data, **kw)
    if kw["return_inverse"]:
        res = list(res)
        i = 1 + bool(kw["return_index"])
        res[i] = res[i].reshape(ar.shape)
        res = tuple(res)
    return wrap_result(res, ar)


_RESULTS = {
    "all": type(np.unique_all(np.zeros(1))),
    "counts": type(np.unique_counts(np.zeros(1))),
    "inverse": type(np.unique_inverse(np.zeros(1))),
}


def unique_values(x):
    """The array API's ``unique_values`` (numpy's: sorted, NaNs distinct)."""
    return unique(x, equal_nan=False)


def unique_counts(x):
    """The array API's ``unique_counts`` as numpy's named tuple."""
    return _RESULTS["counts"](*unique(x, return_counts=True, equal_nan=False))


def unique_inverse(x):
    """The array API's ``unique_inverse`` as numpy's named tuple."""
    return _RESULTS["inverse"](*unique(x, return_inverse=True, equal_nan=False))


def unique_all(x):
    """The array API's ``unique_all`` as numpy's named tuple."""
    u = unique(x, return_index=True, return_inverse=True, return_counts=True, equal_nan=False)
    return _RESULTS["all"](*u)


# -- set operations ---------------------------------------------------------------------


def _ravel(x: Any) -> Any:
    return x.ravel() if isinstance(x, D2O) else np.ravel(x)


def _either(name: str, np_func: Callable) -> Callable:
    """Set operations apply numpy when neither operand is distributed."""

    def deco(f: Callable) -> Callable:
        def impl(ar1, ar2, *args, **kwargs):
            if not isinstance(ar1, D2O) and not isinstance(ar2, D2O):
                return np_func(ar1, ar2, *args, **kwargs)
            return f(ar1, ar2, *args, **kwargs)

        impl.__name__ = name
        impl.__doc__ = f.__doc__
        return impl

    return deco


def _concat(a: Any, b: Any) -> D2O:
    return concatenate((_ravel(a), _ravel(b)))


@_either("union1d", np.union1d)
def union1d(ar1, ar2):
    """numpy's ``union1d``: `unique` of both, concatenated (one sort)."""
    return unique(_concat(ar1, ar2))


@_either("intersect1d", np.intersect1d)
def intersect1d(ar1, ar2, assume_unique=False, return_indices=False):
    """numpy's ``intersect1d``: the unique values of each (a sort each), kept where `isin`
    finds them in the other."""
    if return_indices:
        ua, ia = unique(_as_d2o(ar1, ar2), return_index=True)
        ub, ib = unique(_as_d2o(ar2, ar1), return_index=True)
        ma, mb = isin(ua, ub), isin(ub, ua)
        return ua[ma], ia[ma], ib[mb]
    ua = _ravel(_as_d2o(ar1, ar2)) if assume_unique else unique(_as_d2o(ar1, ar2))
    ub = _ravel(_as_d2o(ar2, ar1)) if assume_unique else unique(_as_d2o(ar2, ar1))
    both = ua[isin(ua, ub)]
    return sorted_flat(both)[0] if assume_unique else both


@_either("setdiff1d", np.setdiff1d)
def setdiff1d(ar1, ar2, assume_unique=False):
    """numpy's ``setdiff1d``: the unique values of ``ar1`` that `isin` does not find."""
    ua = _ravel(_as_d2o(ar1, ar2)) if assume_unique else unique(_as_d2o(ar1, ar2))
    return ua[isin(ua, ar2, invert=True)]


@_either("setxor1d", np.setxor1d)
def setxor1d(ar1, ar2, assume_unique=False):
    """numpy's ``setxor1d``: the values in exactly one of the two (a sort of both unique
    sets, then the runs of length one)."""
    ua = _ravel(_as_d2o(ar1, ar2)) if assume_unique else unique(_as_d2o(ar1, ar2))
    ub = _ravel(_as_d2o(ar2, ar1)) if assume_unique else unique(_as_d2o(ar2, ar1))
    u, c = unique(_concat(ua, ub), return_counts=True, equal_nan=False)
    return u[c == 1]


def _as_d2o(x: Any, like: Any) -> D2O:
    """``x`` as a distributed array (replicated on ``like``'s communicator if it is not one)."""
    if isinstance(x, D2O):
        return x

    return asarray(np.asarray(x), dist=False, comm=like.distributor.comm)


# -- quantiles of the flattened array -----------------------------------------------------


def quantiler(along: Callable, name: str) -> Callable:
    """numpy's ``quantile``/``percentile``/``median`` and their ``nan`` forms: of the
    flattened array, the needed order statistics by radix selection (no sort, no gather);
    over given axes, ``along`` (the axis-local path)."""
    pct = "percentile" in name
    nan = name.startswith("nan")
    med = name.endswith("median")

    def impl(a, *args, **kwargs):
        if med:
            q, rest = 0.5, dict(zip(("axis", "out", "overwrite_input", "keepdims"), args))
        else:
            q, rest = (args[0], dict(zip(("axis", "out", "overwrite_input", "method",
                                          "keepdims"), args[1:])))  # fmt: skip
        rest.update(kwargs)
        axis = rest.get("axis")
        simple = (
            isinstance(a, D2O)
            and not isinstance(q, D2O)
            and axis is None
            and rest.get("weights") is None
            and rest.get("interpolation") is None
            and _split(a)
            and a.dtype.kind in "biuf"
            and sortable(a.dtype)
            and a.size
        )
        if not simple:
            return along(a, *args, **kwargs)
        method = "linear" if med else rest.get("method", "linear")
        weak = type(q) in (int, float)
        with agreed(a.distributor.comm):
            qa = np.true_divide(q, 100) if pct else q
            qa = np.asanyarray(qa)
            if qa.dtype.kind not in "biuf" or (qa.size and not ((qa >= 0) & (qa <= 1)).all()):
                what = "Percentiles must be in the range [0, 100]" if pct else (
                    "Quantiles must be in the range [0, 1]")  # fmt: skip
                raise ValueError(what)
            _methods()[method] if method in _methods() else _bad_method(method)
        res = _flat_quantile(flat(a), qa, method, nan, weak, med)
        if rest.get("keepdims"):
            res = np.reshape(res, np.shape(res) + (1,) * a.ndim)
        out = rest.get("out")
        if out is not None:
            out[...] = res
            return out
        return res

    impl.__name__ = name
    return impl


def _methods() -> dict:
    from numpy.lib import _function_base_impl as fb

    return fb._QuantileMethods


def _bad_method(method: Any) -> None:
    raise ValueError(f"{method!r} is not a valid method. Use one of: {_methods().keys()}")


def _flat_quantile(f: D2O, q: np.ndarray, method: str, nan: bool, weak: bool, med: bool) -> Any:
    """numpy's quantile of every element of ``f`` from the order statistics numpy's
    ``_quantile`` reads (numpy's own index and weight rules)."""
    from numpy.lib import _function_base_impl as fb

    comm = f.distributor.comm
    piece = f.data
    inexact = f.dtype.kind == "f"
    nnan = comm.Allreduce(np.array([np.isnan(piece).sum() if inexact else 0]), "sum")[0]
    n = f.size - (int(nnan) if nan else 0)
    if n == 0 or (nnan and not nan):
        if n == 0 and nan:
            warnings.warn("All-NaN slice encountered", RuntimeWarning, stacklevel=3)
        rdt = np.quantile(np.zeros(1, f.dtype), q).dtype
        return (np.full(q.shape, np.nan, dtype=rdt))[()] if not weak else rdt.type(np.nan)
    if med:
        ks = sorted({(n - 1) // 2, n // 2})
        vals = order_statistics(piece, ks, comm, f.size)
        return np.mean(np.array(vals, dtype=f.dtype)) if len(vals) == 2 else (
            np.mean(np.array(vals[:1], dtype=f.dtype)))  # fmt: skip
    props = fb._QuantileMethods[method]
    vi = np.asanyarray(props["get_virtual_index"](n, q))
    integer = props["fix_gamma"] is None or (
        method == "linear" and np.issubdtype(vi.dtype, np.integer)
    )
    if integer:
        idx = np.where(vi < 0, vi + n, vi).astype(np.int64)
        uniq = np.unique(idx)
        vals = np.array(order_statistics(piece, list(uniq), comm, f.size), dtype=f.dtype)
        res = vals[np.searchsorted(uniq, idx)]
        return res[()] if res.ndim == 0 else res
    prev, nxt = fb._get_indexes(np.zeros(0, f.dtype), vi, n)
    prev = np.where(prev < 0, prev + n, prev)
    nxt = np.where(nxt < 0, nxt + n, nxt)
    uniq = np.unique(np.concatenate((prev.ravel(), nxt.ravel())))
    vals = np.array(order_statistics(piece, list(uniq), comm, f.size), dtype=f.dtype)
    previous = vals[np.searchsorted(uniq, prev)]
    following = vals[np.searchsorted(uniq, nxt)]
    gamma = fb._get_gamma(vi, prev, props)
    if weak:
        gamma = float(gamma)
    return fb._lerp(previous, following, gamma)
