"""Moving data between two layouts: the one mechanism behind every layout change.

Every rank describes what it holds (a box of the global array) and what it
wants (another box).  `exchange` sends each rank exactly the intersection of
the two, in one ``Alltoallw`` whose per-peer datatypes are MPI subarrays.
MPI reads straight out of the local piece and writes straight into the
result, so no staging copies are made (memory: old share + new share), and
since every peer gets one element of a derived datatype, messages larger
than 2**31 elements need no special path.

A change of strategy, of offsets, of distributed axis (a global transpose),
a gather onto one or all ranks and a slab of rows sent to everybody are all
the same call with different boxes.

What an exchange means on this rank (its parts and their datatypes) is an
`ExchangePlan`, built at the first call and kept in a small LRU cache (64
plans) keyed by the layouts and the item size, so repeating a redistribution
builds no datatypes (mpi4py-fft's ``Transfer``).
"""

from __future__ import annotations

import atexit
import math
from bisect import bisect_right
from collections.abc import Callable
from typing import Any

import numpy as np

from ..core.cache import BoundedCache
from ..core.comm import Comm, base_type, free_types, region_type
from ..core.errors import check_gather
from ..layouts.distributors import Distributor, as_runs, is_runs, run_length
from ..layouts.mesh import MeshDistributor, one_mesh_axis, subcomm

__all__ = ["exchange", "redistribute", "gather"]

Box = tuple
BoxFn = Callable[[int], Box | None]


def _intersect(a: Box | None, b: Box | None) -> Box | None:
    """The common part of two regions (per axis a (start, stop) pair or a tuple of runs)."""
    if a is None or b is None:
        return None
    out = []
    for ea, eb in zip(a, b):
        if is_runs(ea) or is_runs(eb):
            runs = _intersect_runs(as_runs(ea), as_runs(eb))
            if not runs:
                return None
            out.append(runs)
            continue
        lo, hi = max(ea[0], eb[0]), min(ea[1], eb[1])
        if hi <= lo:
            return None
        out.append((lo, hi))
    return tuple(out)


def _intersect_runs(a: tuple, b: tuple) -> tuple:
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if lo < hi:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return tuple(out)


def _shape(box: Box | None, ndim: int) -> tuple:
    return tuple(0 for _ in range(ndim)) if box is None else tuple(run_length(e) for e in box)


def _blocks(full: tuple, part: tuple) -> list:
    """(local position, length) of ``part``'s runs inside the compact storage of ``full``'s
    runs (one axis), adjacent blocks merged."""
    full_runs, part_runs = as_runs(full), as_runs(part)
    starts = [a for a, _ in full_runs]
    before, acc = [], 0
    for a, b in full_runs:
        before.append(acc)
        acc += b - a
    out: list = []
    for a, b in part_runs:
        k = bisect_right(starts, a) - 1
        pos = before[k] + a - full_runs[k][0]
        if out and out[-1][0] + out[-1][1] == pos:
            out[-1] = (out[-1][0], out[-1][1] + b - a)
        else:
            out.append((pos, b - a))
    return out


def _local_index(full: Box, part: Box) -> tuple:
    """A numpy index selecting ``part`` from the local array that holds ``full``."""
    per_axis = [_blocks(f, p) for f, p in zip(full, part)]
    if all(len(b) == 1 for b in per_axis):
        return tuple(slice(b[0][0], b[0][0] + b[0][1]) for b in per_axis)
    return np.ix_(*[np.concatenate([np.arange(p, p + n) for p, n in b]) for b in per_axis])


def _region_types(base: Any, full: Box, part: Box) -> tuple:
    """``(1, datatype)`` selecting ``part`` inside a C-ordered array holding ``full``, and
    the datatypes made for it (to be freed with the plan)."""
    if not full:  # 0-d: the one element
        return (1, base), []
    made = region_type(
        base, [run_length(f) for f in full], [_blocks(f, p) for f, p in zip(full, part)]
    )
    return (1, made[-1]), made


class ExchangePlan:
    """One exchange as seen by this rank, worked out once: the part it keeps, the part it
    sends to and receives from every peer, and (built at first use, kept until the plan is
    evicted or the process exits) the MPI datatypes and displacements that move them.

    A plan holds boxes, index tuples and datatypes only, never array data: the pieces
    are passed to `run` on every call.  It is valid for every piece of the ``have`` box
    and an item size of ``itemsize`` bytes, whatever its dtype and memory layout:
    C-contiguous pieces go through the subarray datatypes, strided ones (views, or a
    dtype conversion) are packed by numpy using the cached indices.
    """

    __slots__ = ("itemsize", "have", "want", "own", "sends", "recvs", "typed", "packed", "made")

    def __init__(self, comm: Comm, have: BoxFn, want: BoxFn, send: BoxFn | None, itemsize: int):
        if send is None:
            source = lambda s, q: have(s)  # noqa: E731
        else:

            def source(s: int, q: int) -> Box | None:
                hs = have(s)
                if hs is not None and hs == have(q):
                    return hs if s == q else None  # q holds this box itself
                return send(s)

        me = comm.rank
        self.itemsize = itemsize
        self.have, self.want = have(me), want(me)
        own = _intersect(source(me, me), self.want)
        self.own = (
            None if own is None else (_local_index(self.want, own), _local_index(self.have, own))
        )
        self.sends = [
            None if p == me else _intersect(source(me, p), want(p)) for p in range(comm.size)
        ]
        self.recvs = [
            None if p == me else _intersect(source(p, me), self.want) for p in range(comm.size)
        ]
        self.typed: tuple | None = None  # (sendtypes, recvtypes) for Alltoallw
        self.packed: tuple | None = None  # what `_run_packed` needs
        self.made: list = []  # every datatype made for this plan

    def run(self, comm: Comm, data: np.ndarray, dtype: np.dtype) -> np.ndarray:
        """Collective: this rank's wanted box, assembled from ``data`` (its ``have`` box)
        and the other ranks' pieces."""
        out = np.empty(_shape(self.want, data.ndim), dtype=dtype)
        # this rank's own part is a numpy copy (MPI's datatype engine copies it at half speed)
        if self.own is not None:
            out[self.own[0]] = data[self.own[1]]
        if not (data.flags.c_contiguous and data.dtype == dtype):
            return self._run_packed(comm, data, out)
        if self.typed is None:
            self._make_types()
        sendtypes, recvtypes = self.typed  # type: ignore[misc]
        comm.Alltoallw(data, sendtypes, out, recvtypes)
        return out

    def _make_types(self) -> None:
        base = base_type(self.itemsize)
        try:
            sendtypes: list = []
            recvtypes: list = []
            for parts, full, types in ((self.sends, self.have, sendtypes),
                                       (self.recvs, self.want, recvtypes)):  # fmt: skip
                for part in parts:
                    if part is None:
                        types.append((0, base))
                    else:
                        t, made = _region_types(base, full, part)
                        self.made += made
                        types.append(t)
        except BaseException:
            self.free()
            raise
        self.typed = (sendtypes, recvtypes)

    def _run_packed(self, comm: Comm, data: np.ndarray, out: np.ndarray) -> np.ndarray:
        """The exchange of a strided piece (a view) or with a dtype conversion: the parts
        for other ranks are packed by numpy into one buffer (only what leaves this rank is
        copied, not the whole piece), and the received parts are unpacked into ``out``."""
        if self.packed is None:
            self.packed = self._packing(comm)
        sends, recvs, scounts, rcounts, sd, rd, stypes, rtypes = self.packed
        sbuf = np.empty(sum(scounts), dtype=out.dtype)
        rbuf = np.empty(sum(rcounts), dtype=out.dtype)
        for idx, o, c in zip(sends, sd, scounts):
            if c:
                a = data[idx]
                sbuf[o : o + c].reshape(a.shape)[...] = a
        item = self.itemsize
        comm.Alltoallw(sbuf, stypes, rbuf, rtypes,
                       [int(o) * item for o in sd], [int(o) * item for o in rd])  # fmt: skip
        for r, o, c in zip(recvs, rd, rcounts):
            if c:
                out[r[0]] = rbuf[o : o + c].reshape(r[1])
        return out

    def _packing(self, comm: Comm) -> tuple:
        base = base_type(self.itemsize)
        sends = [None if part is None else _local_index(self.have, part) for part in self.sends]
        recvs = [
            None if part is None else (_local_index(self.want, part), _shape(part, 0))
            for part in self.recvs
        ]
        scounts = [0 if p is None else math.prod(_shape(p, 0)) for p in self.sends]
        rcounts = [0 if r is None else math.prod(r[1]) for r in recvs]
        sd = np.concatenate(([0], np.cumsum(scounts)[:-1])).astype(int)
        rd = np.concatenate(([0], np.cumsum(rcounts)[:-1])).astype(int)
        stypes = [(c, base) for c in scounts]
        rtypes = [(c, base) for c in rcounts]
        return sends, recvs, scounts, rcounts, sd.tolist(), rd.tolist(), stypes, rtypes

    def free(self) -> None:
        """Give back the plan's datatypes (it builds them again if it runs once more)."""
        made, self.made, self.typed = self.made, [], None
        free_types(made)


#: Exchange plans by (communicator, what identifies have/want/send, item size), least
#: recently used first.  An evicted plan frees its datatypes at once.
_PLANS = BoundedCache(64, evict=ExchangePlan.free, lru=True)


def plan_cache_size(n: int | None = None) -> int:
    """The number of exchange plans kept (default 64); with ``n``, set it (0: none, every
    exchange builds and frees its datatypes, as before plans), evicting the least
    recently used plans beyond it.  Returns the previous size.  Local."""
    old = _PLANS.maxsize
    if n is not None:
        _PLANS.maxsize = max(0, int(n))
        _PLANS.shrink(_PLANS.maxsize)
    return old


def free_plans() -> None:
    """Drop every cached exchange plan and free its datatypes (local; run at exit, before
    MPI finalizes)."""
    _PLANS.shrink(0)


atexit.register(free_plans)


def _fn_key(f: BoxFn | None) -> tuple | None:
    """What identifies ``f`` when it is a distributor's ``region`` or ``source`` (pure
    functions of the rank, as distributors are immutable), else None."""
    owner = getattr(f, "__self__", None)
    if isinstance(owner, Distributor) and getattr(f, "__name__", None) in ("region", "source"):
        return (owner, f.__name__)  # type: ignore[union-attr]
    return None


def exchange(
    comm: Comm,
    data: np.ndarray,
    have: BoxFn,
    want: BoxFn,
    dtype: np.dtype | None = None,
    send: BoxFn | None = None,
    key: Any = None,
) -> np.ndarray:
    """Collective: give every rank the box ``want(rank)``, assembled from ``have(r)`` of all ranks.

    ``data`` is this rank's piece, covering exactly ``have(comm.rank)``;
    boxes are tuples of (start, stop) per dimension, None for nothing.  The
    ``have`` boxes must not overlap where they are wanted (each wanted element
    comes from exactly one rank); where they overlap (layouts holding
    replicas), ``send(r)`` names the part of ``have(r)`` that rank ``r``
    sends, except to a rank that holds the same box: that rank takes its own
    copy, so only elements a rank does not hold reach it.  Returns this
    rank's wanted box as a new C-contiguous array.

    The exchange's plan (its parts and MPI datatypes) is cached when ``have``,
    ``want`` and ``send`` are distributors' ``region``/``source`` methods, or
    when ``key`` is given: a hashable value that, on ``comm``, determines all
    three functions (start it with a string naming the caller).  Otherwise it
    is built for this call and freed.
    """
    dtype = data.dtype if dtype is None else np.dtype(dtype)
    if comm.size == 1:
        me = comm.rank
        my_have, my_want = have(me), want(me)
        out = np.empty(_shape(my_want, data.ndim), dtype=dtype)
        part = _intersect(my_have, my_want)
        if part is not None:
            out[_local_index(my_want, part)] = data[_local_index(my_have, part)]
        return out
    if key is None:
        hk, wk = _fn_key(have), _fn_key(want)
        sk = None if send is None else _fn_key(send)
        if hk is not None and wk is not None and (send is None or sk is not None):
            key = (hk, wk, sk)
    if key is None or not _PLANS.maxsize:
        plan = ExchangePlan(comm, have, want, send, dtype.itemsize)
        try:
            return plan.run(comm, data, dtype)
        finally:
            plan.free()
    full_key = (comm, key, dtype.itemsize)
    plan = _PLANS.use(full_key)
    if plan is None:
        plan = _PLANS.put(full_key, ExchangePlan(comm, have, want, send, dtype.itemsize))
    return plan.run(comm, data, dtype)


def describe(d: Distributor) -> str:
    """A short description of a layout, for messages."""
    if d.replicated:
        return f"an array of shape {d.global_shape} replicated on every rank"
    return f"the operand of shape {d.global_shape} ({d.strategy!r}, split along axis {d.axis})"


_SAME: dict = {}


def same_pieces(a: Distributor, b: Distributor) -> bool:
    """True when every rank holds the same box in both layouts (cached; local)."""
    key = (a, b)
    hit = _SAME.get(key)
    if hit is None:
        if len(_SAME) > 256:
            _SAME.clear()
        hit = _SAME[key] = a.global_shape == b.global_shape and all(
            a.region(r) == b.region(r) for r in range(a.comm.size)
        )
    return hit


def redistribute(
    data: np.ndarray,
    src: Distributor,
    dst: Distributor,
    copy: bool = False,
    explicit: bool = False,
) -> np.ndarray:
    """Collective: this rank's piece of layout ``dst``, from its piece ``data`` of layout ``src``.

    Moves only what must move.  From a replicated layout nothing is
    communicated (each rank cuts out its part); into one, it is an allgather:
    an implicit gather (see `d2o.set_options`) unless ``explicit`` says that
    the user asked for the replicated layout.  With ``copy=False`` the result
    may share memory with ``data``.
    """
    if src is dst or (src.comm.size == 1 and src.global_shape == dst.global_shape):
        return data.copy() if copy else data
    if src.global_shape != dst.global_shape:
        raise ValueError(f"cannot redistribute shape {src.global_shape} to {dst.global_shape}")
    if src.replicated:
        out = data[dst.local_slice]
        return out.copy() if copy else out
    if dst.replicated and not explicit and src.size > 1:
        check_gather(src.comm, describe(src))
    if dst.axis is not None and dst.axis == src.axis and dst.bounds() == src.bounds():
        return data.copy() if copy else data
    if same_pieces(src, dst):
        return data.copy() if copy else data
    m = one_mesh_axis(src, dst)
    if m is not None:
        return exchange_along(data, src, dst, m)  # type: ignore[arg-type]
    return exchange(src.comm, data, src.region, dst.region, send=src.source)


def gather(data: np.ndarray, src: Distributor, target_rank: int | None = None) -> np.ndarray | None:
    """Collective: the whole array on ``target_rank`` (None: on every rank); None elsewhere."""
    full = tuple((0, n) for n in src.global_shape)
    if src.replicated:
        if target_rank is None or target_rank == src.comm.rank:
            return data.copy()
        return None
    if target_rank is None:
        return exchange(
            src.comm, data, src.region, lambda r: full, send=src.source, key=("gather", src, None)
        )
    out = exchange(
        src.comm, data, src.region, lambda r: full if r == target_rank else None,
        send=src.source, key=("gather", src, target_rank),
    )  # fmt: skip
    return out if src.comm.rank == target_rank else None


def exchange_along(data: np.ndarray, src: MeshDistributor, dst: MeshDistributor, m: int):
    """Collective in the sub-communicator of mesh axis ``m``: this rank's piece of ``dst``
    from its piece ``data`` of ``src``, where the two differ along mesh axis ``m`` only."""
    me = src.comm.rank
    mine, want = src.region(me), dst.region(me)
    if src.split[m] is None:  # every member of the group holds what this rank wants
        cut = tuple(slice(a - h, b - h) for (a, b), (h, _) in zip(want, mine))
        return data[cut].copy()
    mesh = src.layout.mesh
    coords = list(src.coords)

    def rank_of(j: int) -> int:
        coords[m] = j
        return int(np.ravel_multi_index(coords, mesh))

    sub = subcomm(src, (m,))
    return exchange(
        sub, data, lambda j: src.region(rank_of(j)), lambda j: dst.region(rank_of(j)),
        key=("along", src, dst, m),  # rank_of depends on src's coordinates only
    )  # fmt: skip
