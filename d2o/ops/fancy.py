"""Fast paths for the commonest advanced key: one 1-d integer array (or list) of
global indices along axis 0 of an array split along axis 0 over several ranks.

Results, layouts and errors are those of the general path in `d2o.ops.indexing`
(which handles every other key):

* get: when the owners of the selected rows are in rank order every rank keeps
  what it owns ('freeform', no communication); otherwise the result is 'equal'
  along axis 0 (only when that is its longest axis, else the general path
  decides).  The key is global, so every rank knows every row's owner and
  destination: the owners send the rows straight to where they belong in one
  ``Alltoallv``; no requests travel and no counts are gathered.
* set with a numpy value (or scalar): every rank writes the rows it owns; no
  communication.

The functions return ``NotImplemented`` when the key is not of that kind; they
are called only when the communicator has more than one rank.
"""

from __future__ import annotations

from itertools import accumulate
from math import prod
from typing import Any

import numpy as np

from ..array.base import Array as D2O
from ..array.base import from_local as _from_local
from ..core.comm import base_type
from ..core.keys import normalize_index_array
from ..layouts.distributors import Distributor, get_distributor, slab_distributor

__all__: list[str] = []


def row_key(obj: D2O, key: Any) -> np.ndarray | None:
    """The normalised 1-d integer key when ``key`` is one for axis 0 of ``obj``."""
    if obj.distributor.axis != 0:
        return None
    t = type(key)
    if t is np.ndarray:
        arr = key
    elif t is list:
        try:
            arr = np.asarray(key)
        except (ValueError, TypeError):
            return None
    else:
        return None
    if arr.ndim != 1 or arr.dtype.kind not in "iu" or not arr.size:
        return None
    return normalize_index_array(arr, 0, obj.distributor.global_shape[0])


def _alltoallv(comm, send: np.ndarray, sc: list, rc: list, out: np.ndarray) -> None:
    comm.Alltoallv(send, sc, out, rc, base_type(send.dtype.itemsize))


_SCRATCH: dict = {}
_SCRATCH_MAX = 1 << 23  # bytes kept per scratch slot between calls (7 slots)


def _scratch(slot: str, shape: tuple, dtype) -> np.ndarray:
    """A temporary array reused across calls: fresh large allocations cost a page
    fault per 4 KiB, which dominated the fetch of 10^5 random rows."""
    dtype = np.dtype(dtype)
    if dtype.hasobject:
        return np.empty(shape, dtype=dtype)
    nbytes = prod(shape) * dtype.itemsize
    buf = _SCRATCH.get(slot)
    if buf is None or buf.size < nbytes:
        buf = np.empty(max(nbytes, 64), dtype=np.uint8)
        if nbytes <= _SCRATCH_MAX:
            _SCRATCH[slot] = buf
    return buf[:nbytes].view(dtype).reshape(shape)


def _owners(d: Distributor, A: np.ndarray) -> np.ndarray:
    """The rank owning each index of ``A`` (int8 for up to 32 ranks: a few
    comparisons are much faster than ``searchsorted`` on a long unsorted key)."""
    offs = d.bounds()
    P = len(offs) - 1
    if P > 32:
        return d.bounds_array().searchsorted(A, side="right") - 1
    if A.size < _LARGE:
        o = (A >= offs[1]).view(np.int8)
        for x in offs[2:-1]:
            o += A >= x
        return o
    o = np.greater_equal(A, offs[1], out=_scratch("owner", A.shape, np.bool_)).view(np.int8)
    if P > 2:
        ge = _scratch("ge", A.shape, np.bool_)
        for x in offs[2:-1]:
            o += np.greater_equal(A, x, out=ge).view(np.int8)
    return o


def _sorted(a: np.ndarray) -> bool:
    return a.size < 2 or bool((a[1:] >= a[:-1]).all())


def get_rows(obj: D2O, key: Any, A: np.ndarray | None = None) -> Any:
    """``obj[key]`` for a 1-d integer key along the distributed axis 0 (``A``: the key
    already normalised by `row_key`)."""
    if A is None:
        A = row_key(obj, key)
    if A is None:
        return NotImplemented
    d = obj.distributor
    comm = d.comm
    P, me = comm.size, comm.rank
    m = A.size
    rest = d.global_shape[1:]
    R = (m,) + rest
    owner = _owners(d, A)
    if _sorted(owner):
        # every rank keeps the selected rows it owns, in order: no communication
        bounds = [0, *accumulate(np.bincount(owner, minlength=P).tolist())]
        lo, hi = bounds[me], bounds[me + 1]
        piece = obj.data[A[lo:hi] - d.span()[0]]
        return _from_local(piece, slab_distributor(R, comm, 0, bounds, "freeform"))
    if rest and max(rest) > m:
        return NotImplemented  # the result is spread along another axis
    dst = get_distributor("equal", R, comm, 0)
    if m * max(1, prod(rest)) < _LARGE:
        return _from_local(_exchange_small(obj, A, owner, dst), dst)
    return _from_local(_exchange_large(obj, A, owner, dst), dst)


_LARGE = 1 << 12  # elements; larger results use scratch buffers (no page faults)


def _exchange_small(obj: D2O, A: np.ndarray, owner: np.ndarray, dst: Distributor) -> np.ndarray:
    """My rows of the result: the owners send the rows straight to their
    destinations in one Alltoallv (few numpy calls)."""
    comm = dst.comm
    P, me = comm.size, comm.rank
    rest = dst.global_shape[1:]
    inner = prod(rest)
    sel = (owner == me).nonzero()[0]  # increasing, hence grouped by destination
    cum = sel.searchsorted(dst.bounds_array()).tolist()
    sc = [(cum[q + 1] - cum[q]) * inner for q in range(P)]
    idx = A[sel]
    idx -= obj.distributor.span()[0]
    send = obj.data.take(idx, axis=0)
    src = owner[slice(*dst.span())]
    rc = [c * inner for c in np.bincount(src, minlength=P).tolist()]
    got = np.empty((src.size,) + rest, dtype=obj.dtype)
    _alltoallv(comm, send, sc, rc, got)
    if _sorted(src):
        return got
    out = np.empty_like(got)  # rows arrived grouped by source rank
    out[np.argsort(src, kind="stable")] = got
    return out


def _exchange_large(obj: D2O, A: np.ndarray, owner: np.ndarray, dst: Distributor) -> np.ndarray:
    """As `_exchange_small`, with temporaries in reused scratch buffers and
    without sorting."""
    comm = dst.comm
    P, me = comm.size, comm.rank
    rest = dst.global_shape[1:]
    inner = prod(rest)
    dtype = obj.dtype
    doffs = dst.bounds()
    m = A.size
    mine = np.equal(owner, me, out=_scratch("mine", (m,), np.bool_))
    cnt = [np.count_nonzero(mine[doffs[q] : doffs[q + 1]]) for q in range(P)]
    idx = A.take(mine.nonzero()[0], out=_scratch("idx", (sum(cnt),), np.intp), mode="clip")
    idx -= obj.distributor.span()[0]
    send = obj.data.take(idx, axis=0, out=_scratch("send", idx.shape + rest, dtype), mode="clip")
    sc = [c * inner for c in cnt]
    src = owner[doffs[me] : doffs[me + 1]]
    n = src.size
    shape = (n,) + rest
    if _sorted(src):
        rc = np.searchsorted(src, np.arange(P + 1)).tolist()
        got = np.empty(shape, dtype=dtype)
        _alltoallv(comm, send, sc, [(rc[r + 1] - rc[r]) * inner for r in range(P)], got)
        return got
    got = _scratch("got", shape, dtype)
    out = np.empty(shape, dtype=dtype)
    if P > 16:
        rc = [c * inner for c in np.bincount(src, minlength=P).tolist()]
        _alltoallv(comm, send, sc, rc, got)
        out[np.argsort(src, kind="stable")] = got
        return out
    masks = _scratch("from", (P, n), np.bool_)
    for r in range(P):
        np.equal(src, r, out=masks[r])
    cnt = [int(c) for c in np.count_nonzero(masks, axis=1)]
    _alltoallv(comm, send, sc, [c * inner for c in cnt], got)
    start = 0
    for r in range(P):
        if cnt[r]:
            out[masks[r].nonzero()[0]] = got[start : start + cnt[r]]
            start += cnt[r]
    return out


def set_rows(obj: D2O, key: Any, value: Any, check_value) -> Any:
    """``obj[key] = value`` for a 1-d integer key along the distributed axis 0 and
    a value that is not distributed: every rank writes the rows it owns."""
    if isinstance(value, D2O):
        return NotImplemented
    A = row_key(obj, key)
    if A is None:
        return NotImplemented
    d = obj.distributor
    R = (A.size,) + d.global_shape[1:]
    val = np.asarray(value, dtype=obj.dtype)
    vs = check_value(val.shape, R)
    lo, hi = d.span()
    sel = np.flatnonzero((A >= lo) & (A < hi))
    if sel.size == 0:
        return None
    vv = val.reshape((1,) * (len(R) - len(vs)) + vs)
    obj.data[A[sel] - lo] = vv if vv.shape[0] == 1 else vv[sel]
    return None
