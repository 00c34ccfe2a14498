"""Halo exchange between slab layouts: an operand's rows for another piece, in place.

On slab layouts along the same axis, what rank ``q`` needs from rank ``p`` is one
contiguous range of rows: ``p``'s slab met with ``q``'s wanted range.  A shifted view
(``u[2:]`` against ``u[:-2]``) therefore needs only the few boundary rows that cross a
rank boundary, from its neighbours.  `rows_for` sends each such range point to point
(`Comm.Sendrecv_many`) and returns this rank's wanted rows as `Parts`: the ranges
received and a numpy view of the rows it holds itself, in order.  The consumers compute
segment by segment (`d2o._ufuncs`) or write the parts into place (`d2o._indexing`), so
the operand is never copied whole.

Communication: each rank sends only the rows another rank wants, to that rank alone,
and receives only the rows it lacks; nothing at all where the pieces already line up.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ._distributors import Distributor, SlabDistributor

__all__ = ["Parts", "rows_for", "slab_rows"]


class Parts:
    """A rank's wanted range along ``axis``, as consecutive pieces ``(lo, hi, array)``
    in local coordinates (from 0 to ``length``); own rows are views of the operand."""

    __slots__ = ("axis", "pieces", "length", "own")

    def __init__(self, axis: int, pieces: list, length: int, own: int) -> None:
        self.axis = axis
        self.pieces = pieces
        self.length = length
        self.own = own  # the index of the piece held here (a view), -1 for none

    def cuts(self) -> set:
        """The piece boundaries."""
        return {b for lo, hi, _ in self.pieces for b in (lo, hi)}

    def segment(self, lo: int, hi: int) -> np.ndarray:
        """Rows ``lo:hi`` (inside one piece) as a view."""
        for a, b, arr in self.pieces:
            if a <= lo and hi <= b:
                return arr[(slice(None),) * self.axis + (slice(lo - a, hi - a),)]
        raise ValueError(f"rows {lo}:{hi} cross a piece boundary")  # pragma: no cover

    def assemble(self) -> np.ndarray:
        """All rows as one new array."""
        return np.concatenate([arr for _, _, arr in self.pieces], axis=self.axis)

    def shares_memory(self, other: np.ndarray) -> bool:
        return any(np.may_share_memory(arr, other) for _, _, arr in self.pieces)


def slab_rows(d: Distributor) -> bool:
    """True for a layout `rows_for` understands: 1-d slabs on more than one rank."""
    return type(d) is SlabDistributor and d.comm.size > 1


def rows_for(data: np.ndarray, d: Distributor, want: Sequence[tuple[int, int]]) -> Parts:
    """Collective over ``d.comm``: rows ``want[rank]`` of ``d``'s split axis for every
    rank, from the pieces ``data`` of slab layout ``d``; this rank's rows as `Parts`.

    Sends rank ``q`` only the rows of this rank's slab inside ``want[q]``."""
    comm, k, hb = d.comm, d.axis, d.bounds()
    assert k is not None
    me = comm.rank
    mine = hb[me]
    w0, w1 = want[me]
    lead = (slice(None),) * k
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
            pieces.append((a - w0, b - w0, arr))
        if p != me:
            q0, q1 = want[p]
            a, b = max(q0, mine), min(q1, hb[me + 1])  # rows of this slab that p wants
            if b > a:
                sends.append((p, np.ascontiguousarray(data[lead + (slice(a - mine, b - mine),)])))
    if not pieces:  # nothing wanted here: one empty piece keeps the dtype and shape
        shape = list(data.shape)
        shape[k] = 0
        pieces.append((0, 0, np.empty(shape, dtype=data.dtype)))
    if sends or recvs:
        comm.Sendrecv_many(sends, recvs)
    return Parts(k, pieces, max(w1 - w0, 0), own)
