"""The LogGP cost model (`d2o.core.costmodel`) against runs.

* Without MPI (and on every rank alike): the closed forms of `cost` (messages and bytes the
  busiest rank sends) equal the step-by-step `schedule` of every rank, for 2-34 ranks, and
  every scheduled send has its receive.
* Under MPI at P ranks: each collective's schedule runs with point-to-point messages
  (`replay`); what d2o's trace counts at that level (messages: the peers of each
  ``Sendrecv``; bytes) and what arrives (checked by content) equals the model's prediction,
  exactly.  And a few d2o operations' traced calls are priced by ``Trace.predict``: its
  messages and bytes per call equal the replay of those calls.

MPICH itself is not measured here: MPICH 5.0.2 offers no MPI_T performance variables and
PMPI does not see inside its collectives (docs/scaling-model.md says what was measured).
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

import d2o
import d2o.numpy as dnp
from d2o import default_comm
from d2o.core import costmodel as cm
from d2o.testing import collective_assert

comm = default_comm()
P = comm.size
NET = cm.NETWORKS["InfiniBand HDR"]


def _sizes(kind: str, p: int) -> list[int]:
    """Payloads that reach every algorithm of ``kind`` (whole blocks at ``p`` ranks)."""
    unit = 8 * p * cm._pof2(p)
    return {
        "Barrier": [0],
        "Bcast": [
            8,
            96,
            12288 // unit * unit + unit,
            65536 // unit * unit,
            (1 << 19) // unit * unit,
        ],
        "Allreduce": [8, 96, 2048, 4096 // unit * unit + unit, 1 << 17],
        "Allgather": [8, 96, 8192, 40960, 1 << 17],
        "Allgatherv": [p * 8 * 100, p * 8 * 4000, p * 8 * 20000],
        "Alltoallv": [0, 8 * (p - 1) * 7],
    }[kind]


KINDS = ["Barrier", "Bcast", "Allreduce", "Allgather", "Allgatherv", "Alltoallv"]


@pytest.mark.parametrize("kind", KINDS)
def test_closed_forms_equal_the_schedules(kind):
    for p in range(2, 35):
        for n in _sizes(kind, p):
            every = [cm.schedule(kind, n, p, r) for r in range(p)]
            sends = Counter(
                (r, d, s) for r, ops in enumerate(every) for d, s, _, _ in ops if s is not None
            )
            recvs = Counter((src, r, b) for r, ops in enumerate(every) for _, _, b, src in ops if b is not None)  # fmt: skip
            assert sends == recvs, (kind, n, p)
            c = cm.cost(kind, n, p, NET, peers=(p - 1 if n else 0) if kind == "Alltoallv" else -1)
            assert c.messages == max(sum(op[1] is not None for op in ops) for ops in every)
            assert c.bytes == max(sum(op[1] or 0 for op in ops) for ops in every), (kind, n, p)
            assert c.exact and (c.time > 0 or kind == "Alltoallv" and n == 0)


def test_algorithms_follow_mpich_thresholds():
    assert cm.algorithm("Bcast", 96, 16) == "binomial"
    assert cm.algorithm("Bcast", 1 << 16, 4) == "binomial"  # fewer than 8 ranks
    assert cm.algorithm("Bcast", 1 << 16, 16) == "scatter + recursive doubling"
    assert cm.algorithm("Bcast", 1 << 16, 12) == "scatter + ring"
    assert cm.algorithm("Bcast", 1 << 20, 16) == "scatter + ring"
    # MPICH 5's selection: built-in ops on more than 8 bytes and at least pof2(P) elements
    # are Rabenseifner's; everything else (user-defined ops: count 0) recursive doubling
    assert cm.algorithm("Allreduce", 2048, 64) == "Rabenseifner"  # 256 doubles
    assert cm.algorithm("Allreduce", 96, 16) == "recursive doubling"  # 12 < 16 elements
    assert cm.algorithm("Allreduce", 96, 2) == "Rabenseifner"
    assert cm.algorithm("Allreduce", 8, 2) == "recursive doubling"  # 8 bytes
    assert cm.algorithm("Allreduce", 96, 2, count=0) == "recursive doubling"  # user op
    assert cm.algorithm("Allreduce", 1 << 20, 64, count=0) == "recursive doubling"
    assert cm.algorithm("Allreduce", 96, 4, count=96) == "Rabenseifner"  # 96 bytes of int8
    assert cm.algorithm("Allgather", 1 << 18, 16) == "recursive doubling"
    assert cm.algorithm("Allgather", 1 << 12, 12) == "Bruck"
    assert cm.algorithm("Allgather", 1 << 18, 12) == "ring"
    assert cm.algorithm("Alltoallw", 1 << 18, 12) == "scattered"


def test_figures_by_hand():
    # "an Allreduce of 96 bytes over 16 ranks": 4 rounds of recursive doubling, 96 B each
    c = cm.cost("Allreduce", 96, 16, NET)
    assert (c.messages, c.bytes, c.rounds) == (4, 384, 4)
    assert c.time == pytest.approx(4 * (NET.L + 2 * NET.o + 95 * NET.G))
    # 3 ranks: rank 1 takes rank 0's part, exchanges with rank 2 (with a built-in op, as
    # halves: reduce-scatter and allgather), sends the result back; MPICH's own messages
    # (benchmarks/bench_wire.py) are these
    c = cm.cost("Allreduce", 96, 3, NET)
    assert (c.messages, c.bytes) == (3, 192)
    c = cm.cost("Allreduce", 96, 3, NET, count=0)  # a user-defined op (agreement records)
    assert (c.messages, c.bytes) == (2, 192)
    # Rabenseifner on 4 ranks, 1 MiB: 2 (P - 1) / P of it in 4 messages
    c = cm.cost("Allreduce", 1 << 20, 4, NET)
    assert (c.messages, c.bytes) == (4, 1.5 * (1 << 20))
    # an exchange with the peers the trace names
    assert cm.cost("Alltoallv", 3000, 64, NET, peers=3).messages == 3
    assert cm.cost("Allreduce", 96, 1, NET).messages == 0  # one rank: no MPI call
    # a trace's calls, priced at 16,384 ranks: a world group grows, a neighbour pair stays
    calls = [("sum", "Allreduce", 96, 96, 4), ("roll", "Sendrecv", 4096, 4096, 2)]
    pred = cm.predict(calls, NET, p=16384, peers=[-1, 1])
    assert [c.messages for c in pred.per_call] == [14, 1]
    assert pred.bytes == 14 * 96 + 4096
    t = cm.predict(calls, NET).time
    assert pred.time > t > 0


def test_collective_entry_is_added_once_per_call():
    # a collective's software entry (calibrated on COMM_SELF) adds to its time once per call,
    # by kind (the v/w variants enter as their plain collective); messages carry none
    entry = (("Allreduce", 1e-6), ("Allgather", 2e-6), ("Alltoall", 3e-6))
    net = cm.Network("with entry", NET.L, NET.o, NET.g, NET.G, gamma=NET.gamma, entry=entry)
    for kind, nbytes, extra in [
        ("Allreduce", 96, 1e-6),
        ("allreduce", 96, 1e-6),
        ("Allgatherv", 800, 2e-6),
        ("Alltoallw", 800, 3e-6),
        ("Bcast", 96, 0.0),
        ("Sendrecv", 800, 0.0),
    ]:
        plain, timed = cm.cost(kind, nbytes, 4, NET), cm.cost(kind, nbytes, 4, net)
        assert (timed.messages, timed.bytes) == (plain.messages, plain.bytes)
        assert timed.time == pytest.approx(plain.time + extra), kind
    assert cm.cost("Allreduce", 96, 1, net).time == 0.0  # one rank: no call


def test_measured_curves_price_one_way_and_exchange_rounds():
    # PLogP: a calibrated network reads one message's time off its measured curve (linear
    # between points, the last slope beyond), exchange rounds off the exchange curve
    one = ((8, 2e-6), (1024, 4e-6), (4096, 10e-6))
    both = ((8, 3e-6), (1024, 6e-6), (4096, 20e-6))
    net = cm.Network("measured", 1e-6, 0.5e-6, 0.5e-6, 1e-9, curve=one, swap_curve=both)
    assert net.message(8) == pytest.approx(2e-6)
    assert net.message(0) == pytest.approx(2e-6)  # below the first point: its time
    assert net.message(2560) == pytest.approx(7e-6)  # halfway between 1024 and 4096
    assert net.message(8192) == pytest.approx(18e-6)  # the last slope, 2 ns a byte
    assert net.swap(1024) == pytest.approx(6e-6)
    assert net.message(1024, 3) == pytest.approx(4e-6 + 2 * (0.5e-6 + 2e-6))
    # a binomial broadcast is one-way; recursive doubling and Rabenseifner exchange
    assert cm.cost("Bcast", 1024, 2, net).time == pytest.approx(4e-6)
    assert cm.cost("Allgather", 1024, 2, net).time == pytest.approx(6e-6)
    assert cm.cost("Allreduce", 4096, 2, net).time == pytest.approx(2 * net.swap(2048))
    assert cm.cost("Sendrecv", 1024, 2, net).time == pytest.approx(6e-6)
    assert cm.cost("send", 1024, 2, net).time == pytest.approx(4e-6)
    # without an exchange curve an exchange costs a message (a full-duplex link); without
    # curves LogGP's line, as before
    half = cm.Network("one way only", 1e-6, 0.5e-6, 0.5e-6, 1e-9, curve=one)
    assert half.swap(2560) == half.message(2560)
    assert NET.swap(1000) == NET.message(1000) == pytest.approx(NET.L + 2 * NET.o + 999 * NET.G)


@pytest.mark.parametrize("kind", KINDS)
def test_model_equals_the_run(kind):
    """The replayed schedules' traffic, counted by d2o's trace and checked on arrival, is
    the model's, exactly (the busiest rank's messages and bytes)."""
    for n in _sizes(kind, P):
        with d2o.trace() as t:
            messages, sent, got = cm.replay(comm, kind, n)
        c = cm.cost(kind, n, P, NET, peers=(P - 1 if n else 0) if kind == "Alltoallv" else -1)
        traced = (sum(t.peers), t.bytes_sent, t.bytes_received)
        collective_assert(traced == (messages, sent, got), (kind, n, traced, messages, sent, got))
        most = (comm.allreduce(messages, "max"), comm.allreduce(sent, "max"))
        collective_assert(most == (c.messages, c.bytes), (kind, n, P, c.algorithm, most))
        collective_assert(comm.allreduce(sent) == comm.allreduce(got), (kind, n))


def test_trace_predict_equals_the_replay_of_its_calls():
    """d2o operations' traced collectives, priced by ``Trace.predict``, against the replay
    of the same calls; exchanges: one message per peer the call named."""
    x = d2o.distributed_data_object(np.arange(24.0 * 8).reshape(24, 8) % 7)
    ops = [lambda: x.sum(), lambda: x.copy(axis=1), lambda: dnp.roll(x, 1, axis=0),
           lambda: x[[1, 5, 9]], lambda: x.var(axis=0)]  # fmt: skip
    for fn in ops:
        fn()
        with d2o.trace() as t:
            fn()
        pred = t.predict(NET)
        assert len(pred.per_call) == len(t.calls)
        wrong = []  # exchanges: this rank's own calls (ranks may make different ones)
        for call, peers, c in zip(t.calls, t.peers, pred.per_call):
            if call[1] in ("Alltoallv", "Alltoallw", "Sendrecv"):
                if (c.messages, c.bytes) != (peers, call[2]):
                    wrong.append((call, peers, c))
        collective_assert(not wrong, wrong)
        for call, count, c in zip(t.calls, t.counts, pred.per_call):  # the same everywhere
            _, kind, sent, received, group = call
            if kind in ("Allreduce", "Bcast", "Allgather", "Barrier") and group == P:
                n = max(sent, received) if kind == "Bcast" else sent
                m, s, _ = cm.replay(comm, kind, n, count=count)
                most = (comm.allreduce(m, "max"), comm.allreduce(s, "max"))
                collective_assert(most == (c.messages, c.bytes), (call, c, most))
        if P == 1:
            collective_assert(pred.messages == 0 and pred.time == 0, pred)


def test_trace_predict_by_name_and_at_scale():
    x = d2o.distributed_data_object(np.arange(64.0))
    with d2o.trace() as t:
        x.sum()
    here, far = t.predict("Cray Aries"), t.predict("Cray Aries", p=16384)
    collective_assert(far.time >= here.time and far.messages >= here.messages, (here, far))
