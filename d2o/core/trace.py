"""What d2o communicates: a per-rank trace of MPI calls and bytes, per public operation.

``with d2o.trace() as t:`` records, on every rank, each MPI call that d2o's
communication layer (`d2o.core.comm`, the only module that talks to MPI) makes,
and groups them by the outermost public operation that made them
(``t.records``).  Operations that move nothing still get a record, with zeros.

Cost: without an active trace every MPI call pays one module-attribute check
(``_trace.active``) and nothing else: the per-operation records come from
wrappers that `d2o.runtime.funnel` installs only while a trace is active.

Bytes are payload bytes exchanged with *other* ranks: for a collective, what
this rank contributes (``bytes_sent``) and what it gets from the others
(``bytes_received``).  A rank's copy to itself is not communication.  Calls
on a communicator of one rank (and the serial stand-in) make no MPI call and
are not counted.
"""

from __future__ import annotations

from typing import Any, Literal

from . import hooks
from .comm import SERIAL, as_comm
from .costmodel import NETWORKS, Network, Prediction, predict
from .records import OUTSIDE, Record, active, current, note, note_temp  # noqa: F401

__all__ = ["trace", "Trace", "Record", "note", "note_temp", "active"]


class Trace:
    """The communication of the code inside ``with d2o.trace() as t:`` on this rank.

    Attributes
    ----------
    collectives, bytes_sent, bytes_received : int
        Totals of this rank (see `Record`).
    records : list of Record
        One per public operation called (outermost calls only), in order.
    calls : list of tuple
        One per MPI call: ``(op, call, bytes_sent, bytes_received, group)``,
        e.g. ``('copy', 'Alltoallw', 4096, 4096, 4)``.
    peers : list of int
        Per call, the ranks this rank sent to where the call names them (exchanges,
        point-to-point), else -1 (the MPI library's collective algorithm decides).
    counts : list of int or None
        Per call, an Allreduce's elements when its op is one of MPI's built-in ones, 0 when
        it is user-defined (agreement records), else None: MPICH picks its algorithm by them.
    """

    def __init__(self) -> None:
        self.collectives = 0
        self.bytes_sent = 0
        self.bytes_received = 0
        self.records: list[Record] = []
        self.calls: list[tuple] = []
        self.peers: list[int] = []
        self.counts: list[int | None] = []

    def __enter__(self) -> Trace:
        active.append(self)
        hooks.fire("modes")  # the runtime wraps the public operations
        return self

    def __exit__(self, *exc: Any) -> Literal[False]:
        if self in active:
            active.remove(self)
        hooks.fire("modes")
        return False

    def by_op(self) -> dict:
        """Totals per operation name: ``{op: [calls, collectives, sent, received, group, temp]}``."""
        out: dict = {}
        for r in self.records:
            row = out.setdefault(r.op, [0, 0, 0, 0, 0, 0])
            row[0] += 1
            row[1] += r.collectives
            row[2] += r.bytes_sent
            row[3] += r.bytes_received
            row[4] = max(row[4], r.max_group)
            row[5] = max(row[5], r.temp_bytes)
        return out

    def predict(
        self, network: Network | str = "InfiniBand HDR", p: int | None = None
    ) -> Prediction:
        """Local: what the traced calls cost on this rank's critical path under MPICH's
        collective algorithms: point-to-point messages, bytes and seconds.

        ``network`` is a LogGP parameter set of ``d2o.core.costmodel`` or the name of a
        published one (``"InfiniBand HDR"``, ``"Cray Aries"``); ``p``, if given, prices the
        calls over all ranks at ``p`` ranks.  Figures per call are the largest over the ranks
        (docs/scaling-model.md).
        """
        net = NETWORKS[network] if isinstance(network, str) else network
        return predict(self.calls, net, p, self.peers, self.counts)

    def report(self, comm: Any = None, file: Any = None) -> str | None:
        """Collective: print a table of the operations with totals over all ranks (rank 0).

        Call it on every rank (it gathers each rank's small per-operation
        summary, one allgather; never array data).  Ranks that traced
        different operations are fine: the table is the union.  Returns the
        table on rank 0, None elsewhere.  In controller mode (`d2o.run`) only rank 0
        traces: the table is rank 0's.
        """
        import sys

        c = SERIAL if hooks.role[0] == "controller" else as_comm(comm)
        saved = active[:]
        del active[:]  # the report's own allgather is not part of the trace
        try:
            mine = self.by_op()
            every = c.allgather(mine) if c.size > 1 else [mine]
        finally:
            active[:] = saved
        if c.rank != 0:
            return None
        ops: dict = {}
        for per_rank in every:
            for op, row in per_rank.items():
                tot = ops.setdefault(op, [0, 0, 0, 0, 0, 0])
                tot[0] = max(tot[0], row[0])
                for i in (1, 2, 3):
                    tot[i] += row[i]
                tot[4] = max(tot[4], row[4])
                tot[5] = max(tot[5], row[5])
        head = ("operation", "calls", "MPI calls", "bytes sent", "bytes received", "group", "temp")
        rows = [head] + [
            (op, str(t[0]), str(t[1]), _nbytes(t[2]), _nbytes(t[3]), str(t[4]), _nbytes(t[5]))
            for op, t in ops.items()
        ]
        total = [sum(t[i] for t in ops.values()) for i in (1, 2, 3)]
        rows.append(("total", "", str(total[0]), _nbytes(total[1]), _nbytes(total[2]), "", ""))
        widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
        lines = [f"d2o trace: {c.size} rank(s); MPI calls and bytes summed over ranks"]
        for k, r in enumerate(rows):
            cells = [r[0].ljust(widths[0])] + [r[i].rjust(widths[i]) for i in range(1, len(r))]
            lines.append("  ".join(cells))
            if k == 0 or k == len(rows) - 2:
                lines.append("  ".join("-" * w for w in widths))
        text = "\n".join(lines)
        print(text, file=sys.stdout if file is None else file)
        return text

    def __repr__(self) -> str:
        return (
            f"<d2o.Trace collectives={self.collectives} bytes_sent={self.bytes_sent} "
            f"bytes_received={self.bytes_received} records={len(self.records)}>"
        )


def _nbytes(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def trace() -> Trace:
    """A context manager recording what d2o communicates on this rank.

    Examples
    --------
    >>> import numpy as np, d2o
    >>> x = d2o.distributed_data_object(np.arange(8.0))
    >>> with d2o.trace() as t:
    ...     y = x + x
    >>> (t.collectives, t.bytes_sent, [r.op for r in t.records])
    (0, 0, ['__add__'])

    Local: entering and leaving communicate nothing.  Traces nest (an inner
    trace's calls count in the outer one too).
    """
    return Trace()
