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

from collections.abc import Callable

import numpy as np

from ._comm import MPI, Comm
from ._distributors import Distributor
from ._errors import check_gather
from ._layout import exchange_along, one_mesh_axis

__all__ = ["exchange", "redistribute", "gather"]

Box = tuple
BoxFn = Callable[[int], Box | None]


def _intersect(a: Box | None, b: Box | None) -> Box | None:
    if a is None or b is None:
        return None
    out = []
    for (a0, a1), (b0, b1) in zip(a, b):
        lo, hi = max(a0, b0), min(a1, b1)
        if hi <= lo:
            return None
        out.append((lo, hi))
    return tuple(out)


def _shape(box: Box | None, ndim: int) -> tuple:
    return tuple(0 for _ in range(ndim)) if box is None else tuple(b - a for a, b in box)


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
    """A committed datatype selecting ``part`` inside a C-ordered array covering ``full``."""
    sizes = [b - a for a, b in full]
    subsizes = [b - a for a, b in part]
    starts = [p0 - f0 for (p0, _), (f0, _) in zip(part, full)]
    if not sizes:
        return (1, base)
    t = base.Create_subarray(sizes, subsizes, starts, order=MPI.ORDER_C).Commit()
    created.append(t)
    return (1, t)


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
            out[...] = data[tuple(slice(a - h0, b - h0) for (a, b), (h0, _) in zip(part, my_have))]
        return out
    buf = np.ascontiguousarray(data, dtype=dtype)
    base = _base_type(dtype.itemsize)
    created: list = []
    try:
        sendtypes, recvtypes = [], []
        for peer in range(comm.size):
            part = _intersect(source(me, peer), want(peer))
            sendtypes.append((0, base) if part is None else _subarray(base, my_have, part, created))
            part = _intersect(source(peer, me), my_want)
            recvtypes.append((0, base) if part is None else _subarray(base, my_want, part, created))
        comm.Alltoallw(buf, sendtypes, out, recvtypes)
    finally:
        for t in created:
            t.Free()
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
    if (
        dst.axis is not None and dst.axis == src.axis and dst.offsets == src.offsets  # type: ignore[attr-defined]
    ):
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
