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
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Callable
from typing import Any

import numpy as np

from ..core.comm import MPI, Comm
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


_BASE_TYPES: dict = {}


def _base_type(itemsize: int):
    """An MPI datatype of ``itemsize`` bytes, used for raw copies only.

    Named types of the right size are preferred: MPICH packs subarrays of
    them about twice as fast as subarrays of a contiguous-bytes type.
    """
    t = _BASE_TYPES.get(itemsize)
    if t is None:
        named = {1: MPI.BYTE, 2: MPI.INT16_T, 4: MPI.INT32_T, 8: MPI.DOUBLE}
        named[16] = MPI.C_DOUBLE_COMPLEX
        t = named.get(itemsize)
        if t is None:
            t = MPI.BYTE.Create_contiguous(itemsize).Commit()
        _BASE_TYPES[itemsize] = t
    return t


def _subarray(base, full: Box, part: Box, created: list):
    """A committed datatype selecting ``part`` inside a C-ordered array holding ``full``:
    an MPI subarray for a box, nested indexed types when an axis has several runs."""
    if not full:
        return (1, base)
    per_axis = [_blocks(f, p) for f, p in zip(full, part)]
    sizes = [run_length(f) for f in full]
    if all(len(b) == 1 for b in per_axis):
        subsizes = [b[0][1] for b in per_axis]
        starts = [b[0][0] for b in per_axis]
        t = base.Create_subarray(sizes, subsizes, starts, order=MPI.ORDER_C).Commit()
        created.append(t)
        return (1, t)
    stride = base.Get_extent()[1]
    inner = base
    for k in range(len(sizes) - 1, -1, -1):  # innermost axis first
        lens = [n for _, n in per_axis[k]]
        disps = [p * stride for p, _ in per_axis[k]]
        t = inner.Create_hindexed(lens, disps)
        created.append(t)
        stride *= sizes[k]
        if k:
            t = t.Create_resized(0, stride)
            created.append(t)
        inner = t
    inner.Commit()
    return (1, inner)


def exchange(
    comm: Comm,
    data: np.ndarray,
    have: BoxFn,
    want: BoxFn,
    dtype: np.dtype | None = None,
    send: BoxFn | None = None,
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
    """
    if send is None:
        source = lambda s, q: have(s)  # noqa: E731
    else:

        def source(s: int, q: int) -> Box | None:
            hs = have(s)
            if hs is not None and hs == have(q):
                return hs if s == q else None  # q holds this box itself
            return send(s)

    dtype = data.dtype if dtype is None else np.dtype(dtype)
    me = comm.rank
    my_have, my_want = have(me), want(me)
    ndim = data.ndim
    out = np.empty(_shape(my_want, ndim), dtype=dtype)
    if comm.size == 1:
        part = _intersect(my_have, my_want)
        if part is not None:
            out[_local_index(my_want, part)] = data[_local_index(my_have, part)]
        return out
    # this rank's own part is a numpy copy (MPI's datatype engine copies it at half speed)
    own = _intersect(source(me, me), my_want)
    if own is not None:
        out[_local_index(my_want, own)] = data[_local_index(my_have, own)]
    base = _base_type(dtype.itemsize)
    if not (data.flags.c_contiguous and data.dtype == dtype):
        return _exchange_packed(comm, data, out, source, want, my_have, my_want, base)
    created: list = []
    try:
        sendtypes, recvtypes = [], []
        for peer in range(comm.size):
            part = None if peer == me else _intersect(source(me, peer), want(peer))
            sendtypes.append((0, base) if part is None else _subarray(base, my_have, part, created))
            part = None if peer == me else _intersect(source(peer, me), my_want)
            recvtypes.append((0, base) if part is None else _subarray(base, my_want, part, created))
        comm.Alltoallw(data, sendtypes, out, recvtypes)
    finally:
        for t in created:
            t.Free()
    return out


def _exchange_packed(comm: Comm, data: np.ndarray, out: np.ndarray, source: Any, want: BoxFn,
                     my_have: Box, my_want: Box, base: Any) -> np.ndarray:  # fmt: skip
    """`exchange` of a strided piece (a view): the parts for other ranks are packed by
    numpy into one buffer (only what leaves this rank is copied, not the whole piece),
    and the received parts are unpacked into ``out``."""
    me, item = comm.rank, out.dtype.itemsize
    sends, recvs = [], []
    for peer in range(comm.size):
        part = None if peer == me else _intersect(source(me, peer), want(peer))
        sends.append(None if part is None else data[_local_index(my_have, part)])
        part = None if peer == me else _intersect(source(peer, me), my_want)
        recvs.append(
            None if part is None else (_local_index(my_want, part), _shape(part, out.ndim))
        )
    scounts = [0 if a is None else a.size for a in sends]
    rcounts = [0 if r is None else math.prod(r[1]) for r in recvs]
    sbuf = np.empty(sum(scounts), dtype=out.dtype)
    rbuf = np.empty(sum(rcounts), dtype=out.dtype)
    sd = np.concatenate(([0], np.cumsum(scounts)[:-1])).astype(int)
    rd = np.concatenate(([0], np.cumsum(rcounts)[:-1])).astype(int)
    for a, o, c in zip(sends, sd, scounts):
        if c:
            sbuf[o : o + c].reshape(a.shape)[...] = a
    comm.Alltoallw(sbuf, [(c, base) for c in scounts], rbuf, [(c, base) for c in rcounts],
                   [int(o) * item for o in sd], [int(o) * item for o in rd])  # fmt: skip
    for r, o, c in zip(recvs, rd, rcounts):
        if c:
            out[r[0]] = rbuf[o : o + c].reshape(r[1])
    return out


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
        return exchange(src.comm, data, src.region, lambda r: full, send=src.source)
    out = exchange(
        src.comm, data, src.region, lambda r: full if r == target_rank else None, send=src.source
    )
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
    return exchange(sub, data, lambda j: src.region(rank_of(j)), lambda j: dst.region(rank_of(j)))
