"""A LogGP-style cost model of what a trace's MPI calls become on the wire.

`d2o.trace` records what d2o asks MPI for: "an Allreduce of 96 bytes over 16 ranks".  This
module turns each such call into the point-to-point messages that MPICH's collective
algorithms make of it, and prices them with LogGP parameters (`Network`)::

    one message of k bytes:   L + 2 o + (k - 1) G
    m messages in one round:  L + 2 o + (k - 1) G + (m - 1) max(g, o + (k - 1) G)
    a reduction's arithmetic: gamma per byte combined (Thakur et al.'s gamma)
    a collective's entry:     a fixed software cost per call and kind (``entry``)

Where a `Network` is calibrated on a machine, the one-way time of a message is instead
read off the times measured at several sizes (``curve``; Kielmann et al.'s parameterised
LogP, PLogP: protocol switches, caches and copies are in it), and a round in which every
rank sends and receives at once (recursive doubling, halving, rings, all-to-all,
``Sendrecv``) off the times of such exchanges (``swap_curve``): where the two directions
share a link or a core they are slower than one way.  The published networks
(`NETWORKS`) have neither: a full-duplex link, LogGP as above.

The algorithms are those of Thakur, Rabenseifner and Gropp ("Optimization of collective
communication operations in MPICH", IJHPCA 19(1), 2005); which one runs at which size is
MPICH 5.0.2's collective selection (the JSON tables compiled into the library; `THRESHOLDS`),
checked against the messages MPICH itself sends (``benchmarks/bench_wire.py``):

* ``Bcast``: binomial tree up to 12,288 bytes or below 8 ranks; above, a binomial scatter
  and an allgather (recursive doubling up to 524,288 bytes on a power of two, else a ring);
* ``Allreduce``: with an MPI built-in op on more than 8 bytes and at least as many elements
  as the largest power of two <= P, Rabenseifner's reduce-scatter (recursive halving) and
  allgather (recursive doubling); otherwise, and always with a user-defined op (d2o's
  agreement records, mpi4py's pickled reductions), recursive doubling; a rank count that is
  not a power of two folds the extra ranks in first and out last (one message each way);
* ``Allgather``/``Allgatherv`` (total size N): recursive doubling below 524,288 bytes on a
  power of two, Bruck's algorithm below 81,920 bytes otherwise, else a ring;
* ``Alltoallv``/``Alltoallw``: MPICH's scattered algorithm, one message to every peer with a
  non-empty block (the trace's ``peers``; every peer where unknown);
* ``Barrier``: dissemination, ceil(log2 P) rounds of empty messages;
* ``Sendrecv`` (d2o's point-to-point exchanges) and ``send``/``recv``: the messages themselves.

The pickled metadata calls (``allreduce``, ``bcast``, ``allgather``) are mpi4py's: modelled as
the buffer collective of their pickled size plus, for ``bcast`` and ``allgather``, the 4-byte
count that precedes it.  They and ``Comm_split`` are `Cost.exact` False: an estimate.
MPI-IO and one-sided calls are not modelled (zero).

Figures per call are the largest over the ranks (messages and bytes a rank sends; the time
of the critical path).  `schedule` lists one rank's messages of an algorithm, step by step:
the tests run it with MPI point-to-point calls and count what arrives.

Local: nothing here communicates except `replay`, which is collective
(``benchmarks/bench_costmodel.py`` calibrates a `Network` on this machine and checks the
model against runs).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = [
    "Network",
    "Cost",
    "Prediction",
    "NETWORKS",
    "THRESHOLDS",
    "algorithm",
    "cost",
    "schedule",
    "predict",
    "replay",
]

#: MPICH's collective switch points (bytes; ranks for BCAST_MIN_PROCS): those of MPICH
#: 5.0.2's collective selection (the JSON tables it compiles in, ``MPIR_*`` algorithms;
#: its control variables of the same names hold the same Bcast and Allgather figures).
#: An Allreduce of a built-in op above ALLREDUCE_SMALL bytes whose element count is at
#: least the largest power of two <= P is Rabenseifner's; every other one (user-defined
#: ops included), recursive doubling.
THRESHOLDS = {
    "BCAST_SHORT_MSG_SIZE": 12288,
    "BCAST_LONG_MSG_SIZE": 524288,
    "BCAST_MIN_PROCS": 8,
    "ALLREDUCE_SMALL": 8,
    "ALLGATHER_SHORT_MSG_SIZE": 81920,
    "ALLGATHER_LONG_MSG_SIZE": 524288,
}


@dataclass(frozen=True)
class Network:
    """LogGP parameters, in seconds: latency ``L``, overhead ``o`` per message and end, gap
    ``g`` between messages a rank injects, ``G`` per byte; ``gamma`` per byte a reduction
    combines (0: not counted); ``entry``: ``(kind, seconds)`` pairs, the software cost of
    entering a collective of that kind once (argument checks, algorithm choice, the local
    copy of a rank's own block), which LogGP's per-message ``o`` does not hold (empty: not
    counted); ``curve`` and ``swap_curve``: ``(bytes, seconds)`` pairs, ascending, of one
    message one way and of an exchange (both ranks send and receive at once), measured
    (PLogP; empty: LogGP's line); ``source`` says where from."""

    name: str
    L: float
    o: float
    g: float
    G: float
    source: str = ""
    gamma: float = 0.0
    entry: tuple = ()
    curve: tuple = ()
    swap_curve: tuple = ()

    def message(self, k: float, m: int = 1) -> float:
        """Seconds of one round in which a rank sends ``m`` messages of ``k`` bytes each
        (the one-way time of one: ``curve`` where measured, else ``L + 2 o + (k - 1) G``)."""
        return self._round(self.curve, k, m)

    def swap(self, k: float, m: int = 1) -> float:
        """Seconds of one round in which a rank sends ``m`` messages of ``k`` bytes each and
        receives as many at the same time (``swap_curve`` where measured, else `message`:
        a full-duplex link)."""
        return self._round(self.swap_curve or self.curve, k, m)

    def _round(self, points: tuple, k: float, m: int) -> float:
        if m <= 0:
            return 0.0
        base = self.L + 2 * self.o
        one = _interpolate(points, k) if points else base + max(k - 1.0, 0.0) * self.G
        wire = max(one - base, 0.0)
        return one + (m - 1) * max(self.g, self.o + wire)


def _interpolate(points: tuple, k: float) -> float:
    """The time at ``k`` bytes of measured ``(bytes, seconds)`` points (ascending): linear
    between neighbours, the first point's below them, the last segment's slope above."""
    if k <= points[0][0]:
        return points[0][1]
    for (k0, t0), (k1, t1) in zip(points, points[1:]):
        if k <= k1:
            return t0 + (t1 - t0) * (k - k0) / (k1 - k0)
    (k0, t0), (k1, t1) = points[-2], points[-1]
    return t1 + (t1 - t0) * (k - k1) / (k1 - k0)


#: Two published interconnects (rounded headline figures; docs/scaling-model.md cites them).
NETWORKS = {
    "InfiniBand HDR": Network(
        "InfiniBand HDR",
        L=1.0e-6,
        o=0.3e-6,
        g=0.3e-6,
        G=1 / 25e9,
        source="NVIDIA ConnectX-6 (HDR, 200 Gb/s: 25 GB/s a direction); about 1 us MPI "
        "latency (OSU micro-benchmarks on HDR)",
    ),
    "Cray Aries": Network(
        "Cray Aries",
        L=1.3e-6,
        o=0.4e-6,
        g=0.4e-6,
        G=1 / 10e9,
        source="Alverson et al., Cray XC Series Network, Cray white paper WP-Aries01-1112 "
        "(2012): about 1.3 us MPI latency, about 10 GB/s injection a direction",
    ),
}


@dataclass
class Cost:
    """One call's messages, bytes (the most any rank sends) and seconds (critical path)."""

    messages: int = 0
    bytes: float = 0
    time: float = 0.0
    rounds: int = 0
    algorithm: str = ""
    exact: bool = True


@dataclass
class Prediction:
    """A trace's calls priced: totals and one `Cost` per call (``per_call``)."""

    messages: int = 0
    bytes: float = 0
    time: float = 0.0
    exact: bool = True
    per_call: list = field(default_factory=list)


def _lg(p: int) -> int:
    return max(p - 1, 0).bit_length()  # ceil(log2 p)


def _pof2(p: int) -> int:
    return 1 << (p.bit_length() - 1) if p > 0 else 0


def algorithm(kind: str, nbytes: float, p: int, count: int | None = None) -> str:
    """MPICH's algorithm for a call ``kind`` of ``nbytes`` (per rank; the total for the
    allgathers) on ``p`` ranks; ``count``, for an Allreduce: the elements it reduces with
    an MPI built-in op, 0 for a user-defined op (None: built-in, 8-byte elements)."""
    pof2 = p == _pof2(p)
    if kind in ("Bcast", "bcast"):
        if nbytes <= THRESHOLDS["BCAST_SHORT_MSG_SIZE"] or p < THRESHOLDS["BCAST_MIN_PROCS"]:
            return "binomial"
        if nbytes <= THRESHOLDS["BCAST_LONG_MSG_SIZE"] and pof2:
            return "scatter + recursive doubling"
        return "scatter + ring"
    if kind == "allreduce":  # mpi4py's pickled reduction: a user-defined op
        count = 0
    if kind in ("Allreduce", "allreduce"):
        count = int(nbytes) // 8 if count is None else count
        if nbytes > THRESHOLDS["ALLREDUCE_SMALL"] and count >= _pof2(p):
            return "Rabenseifner"
        return "recursive doubling"
    if kind in ("Allgather", "Allgatherv", "allgather"):
        if nbytes < THRESHOLDS["ALLGATHER_LONG_MSG_SIZE"] and pof2:
            return "recursive doubling"
        if nbytes < THRESHOLDS["ALLGATHER_SHORT_MSG_SIZE"]:
            return "Bruck"
        return "ring"
    if kind in ("Alltoallv", "Alltoallw"):
        return "scattered"
    if kind == "Barrier":
        return "dissemination"
    return "point-to-point"


def cost(
    kind: str, nbytes: float, p: int, net: Network, peers: int = -1, count: int | None = None
) -> Cost:
    """The `Cost` of one call: ``nbytes`` is the payload a rank contributes (Allreduce,
    Bcast, Allgather), the total gathered (Allgatherv), or the bytes a rank sends to the
    others (Alltoallv/w, Sendrecv); ``peers``: the ranks it sends to, where known;
    ``count``: an Allreduce's elements (`algorithm`)."""
    c = _wire(kind, nbytes, p, net, peers, count)
    if p > 1 and net.entry and kind not in _P2P:
        base = kind.capitalize()  # mpi4py's pickling calls enter the buffer collective
        c.time += dict(net.entry).get(base.rstrip("vw") if base[-1] in "vw" else base, 0.0)
    return c


def _wire(
    kind: str, nbytes: float, p: int, net: Network, peers: int, count: int | None = None
) -> Cost:
    """`cost` without the collective's entry."""
    if p <= 1:
        return Cost(algorithm="local")
    lg, pof2 = _lg(p), _pof2(p)
    alg = algorithm(kind, nbytes, p, count)
    n = float(nbytes)
    if kind == "Barrier":
        return Cost(lg, 0, lg * net.swap(0), lg, alg)
    if kind in ("Bcast", "bcast"):
        extra = kind == "bcast"  # mpi4py broadcasts the pickle's length first
        if alg == "binomial":
            c = Cost(lg, lg * n, lg * net.message(n), lg, alg)
        else:
            chunk = n / p
            steps = lg if alg.endswith("doubling") else p - 1
            ag = lg * net.swap(chunk * p / 2) if steps == lg else steps * net.swap(chunk)
            c = Cost(lg + steps, 2 * n * (p - 1) / p, lg * net.message(n / 2) + ag, lg + steps, alg)
        if extra:
            c.messages, c.bytes, c.time = (
                2 * c.messages,
                c.bytes + lg * 4,
                c.time + lg * net.message(4),
            )
            c.rounds, c.exact = 2 * c.rounds, False
        return c
    if kind in ("Allreduce", "allreduce"):
        fold = 1 if p != pof2 else 0
        k = _lg(pof2)
        if alg == "recursive doubling":
            t = k * net.swap(n) + 2 * fold * net.message(n) + (k + fold) * n * net.gamma
            c = Cost(k + fold, (k + fold) * n, t, k + 2 * fold, alg)
        else:
            half = 2 * n * (pof2 - 1) / pof2
            t = sum(net.swap(n / 2 ** (i + 1)) for i in range(k)) * 2 + 2 * fold * net.message(n)
            t += (half / 2 + fold * n) * net.gamma
            busiest = half + fold * n
            items = int(n) // 8 if count is None else count
            if items % pof2:  # MPICH's first blocks are larger: the busiest rank, exactly
                busiest = _rabenseifner_busiest(int(n), p, max(int(n) // max(items, 1), 1))
            c = Cost(2 * k + fold, busiest, t, 2 * k + 2 * fold, alg)
        c.exact = kind == "Allreduce"
        return c
    if kind in ("Allgather", "Allgatherv", "allgather"):
        total = n * p if kind != "Allgatherv" else n
        if kind == "allgather":
            total = n * p
        alg = algorithm(kind, total, p)
        block = total / p
        if alg == "ring":
            c = Cost(p - 1, (p - 1) * block, (p - 1) * net.swap(block), p - 1, alg)
        else:
            t = sum(net.swap(block * min(2**i, p - 2**i)) for i in range(lg))
            c = Cost(lg, (p - 1) * block, t, lg, alg)
        if kind == "allgather":  # the pickles' lengths first: an Allgather of 4 bytes each
            pre = _wire("Allgather", 4, p, net, -1)
            c.messages += pre.messages
            c.bytes += pre.bytes
            c.time += pre.time
            c.rounds += pre.rounds
            c.exact = False
        return c
    if kind in ("Alltoallv", "Alltoallw"):
        m = (p - 1 if n else 0) if peers < 0 else peers
        each = n / m if m else 0.0
        return Cost(m, n, net.swap(each, m) if m else 0.0, 1 if m else 0, alg, peers >= 0)
    if kind in _P2P:
        m = (1 if n else 0) if peers < 0 else peers
        if kind == "recv":
            return Cost(0, 0, net.message(0), 1, alg)
        each = n / m if m else 0.0
        t = (net.swap if kind == "Sendrecv" else net.message)(each, m) if m else 0.0
        return Cost(m, n, t, 1 if m else 0, alg, kind != "send")
    if kind == "Comm_split":  # MPICH: an Allgather of (color, key) and a context-id Allreduce
        a, b = _wire("Allgather", 8, p, net, -1), _wire("Allreduce", 256, p, net, -1)
        return Cost(a.messages + b.messages, a.bytes + b.bytes, a.time + b.time,
                    a.rounds + b.rounds, "allgather + allreduce", False)  # fmt: skip
    return Cost(algorithm="not modelled", exact=False)


#: calls between named ranks: their group stays two ranks at any scale
_P2P = ("Sendrecv", "send", "recv", "Put", "Get", "Accumulate")


def _payload(kind: str, sent: int, received: int) -> float:
    """The ``nbytes`` of `cost` from a trace call's bytes sent and received."""
    if kind in ("Bcast", "bcast"):
        return max(sent, received)
    if kind == "Allgatherv":
        return sent + received
    return sent


def predict(
    calls: Any,
    net: Network,
    p: int | None = None,
    peers: list | None = None,
    counts: list | None = None,
) -> Prediction:
    """Price a trace's calls (``Trace.calls`` tuples ``(op, call, sent, received, group)``,
    or a `Trace`) on ``net``; ``p``: price them on ``p`` ranks instead of their own groups
    (a group of all the ranks becomes ``p``, smaller groups stay); ``peers`` and
    ``counts``: per call, as `Trace.peers` and `Trace.counts` (absent: -1 and None)."""
    if hasattr(calls, "calls"):
        peers = getattr(calls, "peers", None) if peers is None else peers
        counts = getattr(calls, "counts", None) if counts is None else counts
        calls = calls.calls
    out = Prediction()
    world = max([c[4] for c in calls] or [0])
    for i, call in enumerate(calls):
        _, kind, sent, received, group = call[:5]
        scaled = p is not None and group == world and kind not in _P2P
        g = p if scaled else group
        known = peers[i] if peers is not None and i < len(peers) else -1
        count = counts[i] if counts is not None and i < len(counts) else None
        c = cost(kind, _payload(kind, sent, received), g, net, known, count)
        out.per_call.append(c)
        out.messages += c.messages
        out.bytes += c.bytes
        out.time += c.time
        out.exact = out.exact and c.exact
    return out


# -- one rank's messages, step by step (what the tests run with MPI point-to-point) ---------


def _chunks(n: int, p: int, item: int) -> list[int]:
    """MPICH's scatter chunks of ``n`` bytes over ``p`` ranks (whole items)."""
    c = -(-(n // item) // p) * item
    return [max(0, min(c, n - i * c)) for i in range(p)]


def schedule(
    kind: str, nbytes: int, p: int, rank: int, item: int = 8, count: int | None = None
) -> list[tuple]:
    """One rank's messages of a call `cost` prices (root 0, equal blocks), in order:
    ``(dest, send_bytes, recv_bytes, source)``, None where nothing goes that way.  Run in
    order with MPI point-to-point calls (a Sendrecv where both are given) it completes.
    ``count``: an Allreduce's elements (`algorithm`; None: built-in, ``item``-byte ones)."""
    if p <= 1:
        return []
    if count is None and kind == "Allreduce":
        count = nbytes // item
    alg = algorithm(kind, nbytes, p, count)
    if kind == "Barrier":
        return [((rank + 2**i) % p, 0, 0, (rank - 2**i) % p) for i in range(_lg(p))]
    if kind == "Bcast":
        if alg == "binomial":
            return _binomial(rank, p, [nbytes] + [0] * (p - 1), whole=True)
        sizes = _chunks(nbytes, p, item)
        ops = _binomial(rank, p, sizes, whole=False)
        return ops + (
            _doubling(rank, p, sizes) if alg.endswith("doubling") else _ring(rank, p, sizes)
        )
    if kind == "Allreduce":
        return _allreduce(rank, p, nbytes, item, alg)
    if kind in ("Allgather", "Allgatherv"):
        total = nbytes * p if kind == "Allgather" else nbytes
        alg = algorithm(kind, total, p)
        sizes = [total // p] * p
        if alg == "ring":
            return _ring(rank, p, sizes)
        if alg == "Bruck":
            return _bruck(rank, p, total // p)
        return _doubling(rank, p, sizes)
    if kind in ("Alltoallv", "Alltoallw"):
        block = nbytes // (p - 1)
        return [((rank + i) % p, block, block, (rank - i) % p) for i in range(1, p) if block]
    raise ValueError(f"no schedule for {kind!r}")


def _binomial(rank: int, p: int, sizes: list[int], whole: bool) -> list[tuple]:
    """A binomial tree from rank 0 carrying chunk ``i`` to rank ``i`` (``whole``: all of
    ``sizes[0]`` to everyone); empty messages are skipped, as MPICH does."""
    ops: list[tuple] = []
    mask = 1
    while mask < p:
        if rank & mask:
            n = sizes[0] if whole else sum(sizes[rank : min(rank + mask, p)])
            if n:
                ops.append((None, None, n, rank - mask))
            break
        mask <<= 1
    mask >>= 1
    while mask > 0:
        if rank + mask < p:
            n = sizes[0] if whole else sum(sizes[rank + mask : min(rank + 2 * mask, p)])
            if n:
                ops.append((rank + mask, n, None, None))
        mask >>= 1
    return ops


def _ring(rank: int, p: int, sizes: list[int]) -> list[tuple]:
    right, left = (rank + 1) % p, (rank - 1) % p
    return [(right, sizes[(rank - k) % p], sizes[(rank - k - 1) % p], left) for k in range(p - 1)]


def _doubling(rank: int, p: int, sizes: list[int]) -> list[tuple]:
    ops = []
    mask = 1
    while mask < p:
        partner = rank ^ mask
        mine, theirs = rank & ~(mask - 1), partner & ~(mask - 1)
        ops.append(
            (partner, sum(sizes[mine : mine + mask]), sum(sizes[theirs : theirs + mask]), partner)
        )
        mask <<= 1
    return ops


def _bruck(rank: int, p: int, block: int) -> list[tuple]:
    ops = []
    pof = 1
    while pof <= p // 2:
        ops.append(((rank - pof) % p, pof * block, pof * block, (rank + pof) % p))
        pof *= 2
    if p - pof:
        rem = (p - pof) * block
        ops.append(((rank - pof) % p, rem, rem, (rank + pof) % p))
    return ops


def _real(r: int, rem: int) -> int:
    """The rank of process ``r`` of the power-of-two group after the fold."""
    return r * 2 + 1 if r < rem else r + rem


def _allreduce(rank: int, p: int, n: int, item: int, alg: str) -> list[tuple]:
    """MPICH's allreduce: the fold of ``p - pof2`` ranks, recursive doubling or
    Rabenseifner's halving and doubling among ``pof2`` ranks, the unfold."""
    pof2 = _pof2(p)
    rem = p - pof2
    ops: list[tuple] = []
    new = rank - rem
    if rank < 2 * rem:
        new = -1 if rank % 2 == 0 else rank // 2
        ops.append((rank + 1, n, None, None) if rank % 2 == 0 else (None, None, n, rank - 1))
    if new != -1 and alg == "recursive doubling":
        mask = 1
        while mask < pof2:
            dst = _real(new ^ mask, rem)
            ops.append((dst, n, n, dst))
            mask <<= 1
    elif new != -1:
        ops += _halving_doubling(new, pof2, rem, n // item, item)
    if rank < 2 * rem:
        ops.append((rank - 1, n, None, None) if rank % 2 else (None, None, n, rank + 1))
    return ops


@functools.lru_cache(maxsize=1024)
def _rabenseifner_busiest(n: int, p: int, item: int) -> int:
    """The most bytes any rank sends in MPICH's Rabenseifner allreduce of ``n`` bytes on
    ``p`` ranks (its blocks uneven: every rank's schedule summed; O(P log P), cached)."""
    return max(
        sum(op[1] or 0 for op in _allreduce(r, p, n, item, "Rabenseifner")) for r in range(p)
    )


def _blocks(sizes: tuple, i: int, j: int) -> int:
    """The bytes of blocks ``i .. j - 1`` of ``sizes = (each, item, r)``: every block
    ``each`` bytes, the first ``r`` one ``item`` more (MPICH's split of the elements)."""
    each, item, r = sizes
    if j <= i:
        return 0
    return (j - i) * each + item * max(0, min(j, r) - i)


def _halving_doubling(new: int, pof2: int, rem: int, count: int, item: int) -> list[tuple]:
    """Rabenseifner: reduce-scatter by recursive halving, allgather by recursive doubling
    (MPICH's index arithmetic: ``count`` items in ``pof2`` blocks, the first ``count %
    pof2`` of them one item larger)."""
    sizes = ((count // pof2) * item, item, count % pof2)
    ops: list[tuple] = []
    send_idx = recv_idx = 0
    last_idx = pof2
    mask = 1
    while mask < pof2:
        dst = new ^ mask
        if new < dst:
            send_idx = recv_idx + pof2 // (mask * 2)
            s, r = _blocks(sizes, send_idx, last_idx), _blocks(sizes, recv_idx, send_idx)
        else:
            recv_idx = send_idx + pof2 // (mask * 2)
            s, r = _blocks(sizes, send_idx, recv_idx), _blocks(sizes, recv_idx, last_idx)
        real = _real(dst, rem)
        ops.append((real, s, r, real))
        send_idx = recv_idx
        mask <<= 1
        if mask < pof2:
            last_idx = recv_idx + pof2 // mask
    mask = pof2 >> 1
    while mask > 0:
        dst = new ^ mask
        if new < dst:
            if mask != pof2 >> 1:
                last_idx = last_idx + pof2 // (mask * 2)
            recv_idx = send_idx + pof2 // (mask * 2)
            s, r = _blocks(sizes, send_idx, recv_idx), _blocks(sizes, recv_idx, last_idx)
        else:
            recv_idx = send_idx - pof2 // (mask * 2)
            s, r = _blocks(sizes, send_idx, last_idx), _blocks(sizes, recv_idx, send_idx)
        real = _real(dst, rem)
        ops.append((real, s, r, real))
        if new > dst:
            send_idx = recv_idx
        mask >>= 1
    return ops


def replay(
    comm: Any, kind: str, nbytes: int, item: int = 8, count: int | None = None
) -> tuple[int, int, int]:
    """Collective over ``comm`` (a `d2o.core.comm.Comm`): run this rank's `schedule` with
    point-to-point messages (``Comm.Sendrecv_many``, one call per step) and return
    ``(messages, bytes sent, bytes received)``.  Every message carries a pattern of its
    sender and its number among the sender's messages to this rank, checked on arrival: a
    receive that got fewer bytes than scheduled, or another message, raises AssertionError
    (more bytes fail in MPI: truncation)."""
    sent = got = messages = 0
    to: dict = {}
    came: dict = {}
    for dst, s, r, src in schedule(kind, nbytes, comm.size, comm.rank, item, count):
        sends, recvs = [], []
        if s is not None:
            to[dst] = to.get(dst, -1) + 1
            sends.append((dst, _pattern(comm.rank, to[dst], s)))
        if r is not None:
            came[src] = came.get(src, -1) + 1
            recvs.append((src, np.zeros(r, np.uint8)))
        comm.Sendrecv_many(sends, recvs)
        if recvs and not np.array_equal(recvs[0][1], _pattern(src, came[src], r)):
            raise AssertionError(f"{kind}: message {came[src]} of {r} bytes from {src} is wrong")
        messages += len(sends)
        sent += 0 if s is None else s
        got += 0 if r is None else r
    return messages, sent, got


def _pattern(rank: int, k: int, n: int) -> np.ndarray:
    """The bytes of a rank's ``k``-th message to one peer: never zero, alike nowhere else."""
    return ((np.arange(n, dtype=np.int64) + 7 * rank + 13 * k) % 251 + 1).astype(np.uint8)
