"""The trace's records: what `d2o.core.comm` counts on every MPI call while a trace is on.

`active` (the traces recording) and `current` (the record of the outermost public
operation running) are read on every MPI call; `note` counts a call, `note_temp` a
temporary buffer.  The user's side of the trace (`d2o.trace`, `Trace`) is
`d2o.core.trace`.
"""

from __future__ import annotations

__all__ = ["Record", "note", "note_temp", "active", "current", "OUTSIDE"]

#: Traces currently recording (innermost last).  Checked on every MPI call.
active: list = []
#: The record of the outermost public operation now running, or None.
current: list = [None]


class Record:
    """What one public operation communicated on this rank.

    Attributes
    ----------
    op : str
        The operation's name (``'sum'``, ``'__getitem__'``, ``'fft.fftn'``, ...).
    collectives : int
        MPI calls this rank entered.
    bytes_sent, bytes_received : int
        Payload bytes to and from other ranks.
    max_group : int
        The largest number of ranks that took part in one of its calls (0: none).
    temp_bytes : int
        The largest single temporary buffer it reported (receive buffers of
        exchanges, staging arrays), 0 where unknown.
    gathers : int
        Implicit gathers it made (see `d2o.set_options`).
    fallback : str or None
        The numpy function that ran on gathered operands (`d2o.numpy`'s bounded
        fallback), None when none did.
    via_slab : int
        Operands of process-mesh layouts it moved to their slab equivalents because it
        has no algorithm of its own for them (`d2o.array.slabs`); 0 when none.
    """

    __slots__ = (
        "op",
        "collectives",
        "bytes_sent",
        "bytes_received",
        "max_group",
        "temp_bytes",
        "gathers",
        "fallback",
        "via_slab",
    )

    def __init__(self, op: str) -> None:
        self.op = op
        self.collectives = 0
        self.bytes_sent = 0
        self.bytes_received = 0
        self.max_group = 0
        self.temp_bytes = 0
        self.gathers = 0
        self.fallback = None
        self.via_slab = 0

    def __repr__(self) -> str:
        return (
            f"Record(op={self.op!r}, collectives={self.collectives}, "
            f"bytes_sent={self.bytes_sent}, bytes_received={self.bytes_received}, "
            f"max_group={self.max_group}, temp_bytes={self.temp_bytes}, gathers={self.gathers}"
            + ("" if self.fallback is None else f", fallback={self.fallback!r}")
            + (f", via_slab={self.via_slab}" if self.via_slab else "")
            + ")"
        )


#: Name of the record collecting MPI calls made outside any public operation.
OUTSIDE = "(outside a public operation)"


def note(
    kind: str, sent: int, received: int, group: int, peers: int = -1, count: int | None = None
) -> None:
    """Count one MPI call of this rank (called by `d2o.core.comm` while a trace is active);
    ``peers``: the ranks it sent to, where the call names them (exchanges), else -1;
    ``count``: an Allreduce's elements with an MPI built-in op, 0 with a user-defined op
    (MPICH chooses its algorithm by them), else None."""
    r = current[0]
    op = r.op if r is not None else OUTSIDE
    for t in active:
        t.collectives += 1
        t.bytes_sent += sent
        t.bytes_received += received
        t.calls.append((op, kind, sent, received, group))
        t.peers.append(peers)
        t.counts.append(count)
    if r is None:  # one record per run of calls outside any public operation
        last = active[-1].records[-1] if active[-1].records else None
        if last is not None and last.op == OUTSIDE:
            r = last
        else:
            r = Record(OUTSIDE)
            for t in active:
                t.records.append(r)
    r.collectives += 1
    r.bytes_sent += sent
    r.bytes_received += received
    if group > r.max_group:
        r.max_group = group


def note_temp(nbytes: int) -> None:
    """Report a temporary buffer of ``nbytes`` (cheap; only recorded while tracing)."""
    r = current[0]
    if r is not None and nbytes > r.temp_bytes:
        r.temp_bytes = int(nbytes)
