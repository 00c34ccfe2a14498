"""Halo exchange between slab layouts: an operand's rows for another piece, in place.

On slab layouts along the same axis, what rank ``q`` needs from rank ``p`` is one
contiguous range of rows: ``p``'s slab met with ``q``'s wanted range.  A shifted view
(``u[2:]`` against ``u[:-2]``) therefore needs only the few boundary rows that cross a
rank boundary, from its neighbours.  `rows_for` sends each such range point to point
(`Comm.Sendrecv_many`) and returns this rank's wanted rows as `Parts`: the ranges
received and a numpy view of the rows it holds itself, in order.  The consumers compute
segment by segment (`d2o.ops.ufuncs`) or write the parts into place (`d2o.ops.indexing`), so
the operand is never copied whole.

Communication: each rank sends only the rows another rank wants, to that rank alone,
and receives only the rows it lacks; nothing at all where the pieces already line up.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..layouts.distributors import Distributor, SlabDistributor

__all__ = ["Parts", "boxes_for", "rows_for", "slab_rows"]


class Parts:
    """A rank's wanted box of an operand as pieces ``(box, array)`` that tile it: ``box``
    holds a ``(lo, hi)`` pair per axis in the wanted box's coordinates (from 0 to
    ``shape``); the piece held here is a view of the operand, the others were received."""

    __slots__ = ("pieces", "shape", "own", "requests", "comm", "sent")

    def __init__(self, pieces: list, shape: tuple, own: int) -> None:
        self.pieces = pieces
        self.shape = shape
        self.own = own  # the index of the piece held here (a view), -1 for none
        self.requests: list | None = None  # received pieces still arriving (`rows_for`)
        self.comm: Any = None
        self.sent: list = []

    def wait(self) -> None:
        """Complete the exchange of pieces still arriving (`rows_for` with ``start``);
        local (the neighbours named there take part)."""
        if self.requests:
            reqs, self.requests = self.requests, None
            self.comm.Sendrecv_wait(reqs)
            self.sent = []

    def held(self, ranges: dict) -> bool:
        """True when ``{axis: (lo, hi)}`` lies inside the piece held here (readable before
        `wait`)."""
        if self.own < 0:
            return False
        box = self.pieces[self.own][0]
        return all(box[a][0] <= lo and hi <= box[a][1] for a, (lo, hi) in ranges.items())

    def __del__(self) -> None:  # an exchange nobody read still completes (MPI's rules)
        if self.requests:
            self.wait()

    def cuts(self, axis: int) -> set:
        """The piece boundaries along ``axis``."""
        return {b for box, _ in self.pieces for b in box[axis]}

    def segment(self, ranges: dict) -> np.ndarray:
        """The view of ``{axis: (lo, hi)}`` (whole along the other axes), which must lie
        inside one piece."""
        for box, arr in self.pieces:
            if all(box[a][0] <= lo and hi <= box[a][1] for a, (lo, hi) in ranges.items()):
                return arr[
                    tuple(
                        slice(ranges[a][0] - b0, ranges[a][1] - b0) if a in ranges else slice(None)
                        for a, (b0, _) in enumerate(box)
                    )
                ]
        raise ValueError(f"{ranges} crosses a piece boundary")  # pragma: no cover

    def assemble(self) -> np.ndarray:
        """The whole box as one new array."""
        out = np.empty(self.shape, dtype=self.pieces[0][1].dtype)
        for box, arr in self.pieces:
            out[tuple(slice(lo, hi) for lo, hi in box)] = arr
        return out

    def shares_memory(self, other: np.ndarray) -> bool:
        return any(np.may_share_memory(arr, other) for _, arr in self.pieces)


def slab_rows(d: Distributor) -> bool:
    """True for a layout `rows_for` understands: 1-d slabs on more than one rank."""
    return type(d) is SlabDistributor and d.comm.size > 1


def rows_for(data: np.ndarray, d: Distributor, want: Sequence[tuple[int, int]],
             start: bool = False) -> Parts:  # fmt: skip
    """Collective over ``d.comm``: rows ``want[rank]`` of ``d``'s split axis for every
    rank, from the pieces ``data`` of slab layout ``d``; this rank's rows as `Parts`.

    Sends rank ``q`` only the rows of this rank's slab inside ``want[q]``.  ``start``:
    the exchange is only posted (non-blocking); the received pieces are readable after
    ``Parts.wait``, the piece held here at once (a fused kernel computes the interior
    meanwhile, `d2o.ops.fused`)."""
    comm, k, hb = d.comm, d.axis, d.bounds()
    assert k is not None
    me = comm.rank
    mine = hb[me]
    w0, w1 = want[me]
    lead = (slice(None),) * k
    full = [(0, n) for n in data.shape]
    pieces: list = []
    own = -1
    sends: list = []
    recvs: list = []
    for p in range(comm.size):
        a, b = max(w0, hb[p]), min(w1, hb[p + 1])  # rows of p's slab this rank wants
        if b > a:
            if p == me:
                arr = data[lead + (slice(a - mine, b - mine),)]
                own = len(pieces)
            else:
                shape = list(data.shape)
                shape[k] = b - a
                arr = np.empty(shape, dtype=data.dtype)
                recvs.append((p, arr))
            pieces.append((tuple(full[:k] + [(a - w0, b - w0)] + full[k + 1 :]), arr))
        if p != me:
            q0, q1 = want[p]
            a, b = max(q0, mine), min(q1, hb[me + 1])  # rows of this slab that p wants
            if b > a:
                sends.append((p, np.ascontiguousarray(data[lead + (slice(a - mine, b - mine),)])))
    shape = list(data.shape)
    shape[k] = max(w1 - w0, 0)
    if not pieces:  # nothing wanted here: one empty piece keeps the dtype and shape
        pieces.append((tuple((0, n) for n in shape), np.empty(shape, dtype=data.dtype)))
    parts = Parts(pieces, tuple(shape), own)
    if (sends or recvs) and start:
        parts.requests, parts.comm = comm.Sendrecv_start(sends, recvs), comm
        parts.sent = sends  # (the sent copies live until the wait)
    elif sends or recvs:
        comm.Sendrecv_many(sends, recvs)
    return parts


def _meet(a: tuple | None, b: tuple | None) -> tuple | None:
    if a is None or b is None:
        return None
    box = tuple((max(p0, q0), min(p1, q1)) for (p0, p1), (q0, q1) in zip(a, b))
    return None if any(hi <= lo for lo, hi in box) else box


def _inside(box: tuple, origin: tuple) -> tuple:
    return tuple(slice(lo - o, hi - o) for (lo, hi), (o, _) in zip(box, origin))


def boxes_for(data: np.ndarray, d: Distributor, want: Callable) -> Parts:
    """Collective over ``d.comm``: the box ``want(rank)`` of an operand of block layout
    ``d`` (slabs or a mesh, boxes per rank) for every rank, from the pieces ``data``;
    this rank's box as `Parts`.

    Sends rank ``q`` only the part of this rank's piece inside ``want[q]`` (one sender
    per box where ranks hold replicas: ``d.source``), point to point."""
    comm = d.comm
    me = comm.rank
    own_box = d.region(me)
    wme = want(me) or tuple((0, 0) for _ in data.shape)
    pieces: list = []
    own = -1
    sends: list = []
    recvs: list = []
    for p in range(comm.size):
        if p == me:
            box = _meet(own_box, wme)
            if box is not None:
                own = len(pieces)
                pieces.append((box, data[_inside(box, own_box)]))
            continue
        if d.region(p) == own_box:  # a replica of this piece: held here
            continue
        box = _meet(d.source(p), wme)
        if box is not None:
            arr = np.empty([hi - lo for lo, hi in box], dtype=data.dtype)
            recvs.append((p, arr))
            pieces.append((box, arr))
        box = _meet(d.source(me), want(p))
        if box is not None:
            sends.append((p, np.ascontiguousarray(data[_inside(box, own_box)])))
    shape = tuple(max(hi - lo, 0) for lo, hi in wme)
    pieces = [(tuple((lo - o, hi - o) for (lo, hi), (o, _) in zip(b, wme)), a) for b, a in pieces]
    if not pieces:
        pieces.append((tuple((0, n) for n in shape), np.empty(shape, dtype=data.dtype)))
    if sends or recvs:
        comm.Sendrecv_many(sends, recvs)
    return Parts(pieces, shape, own)
