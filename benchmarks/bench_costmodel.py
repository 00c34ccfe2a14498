"""The LogGP cost model (`d2o.core.costmodel`) calibrated on this machine and checked
against runs at 2, 4, 16 and 64 processes (not a test: ``tests/test_costmodel.py`` asserts
the counts at 1-4 ranks).

Run plainly (``python benchmarks/bench_costmodel.py``) it launches itself under
``mpiexec -n P`` for P = 2, 4, 16 and 64 (``--counts 2,4`` for others; more ranks than
cores are oversubscribed: 64 take a few minutes on 2 cores) and writes ``docs/_data/bench/costmodel.json`` (the performance
page and docs/scaling-model.md show it).  At every P:

* **counts**: each collective's schedule (MPICH's algorithm at that size and P) runs with
  point-to-point messages (`costmodel.replay`); the messages and bytes the busiest rank
  sends, counted by d2o's trace at that level and checked on arrival, beside the model's
  closed forms;
* **calibration** (ranks 0 and 1): a ping-pong of 8 B ... 4 MiB (the fastest of many round
  trips: load on the machine only adds time) gives ``L + 2 o`` (the one-way time of 8
  bytes), ``G`` (the slope between 2 and 4 MiB) and, with an exchange (``Sendrecv``, both
  ranks at once) at the same sizes, PLogP's measured curves the model reads its message
  times from (`costmodel.Network.curve`, ``swap_curve``); posting a small send, at the fastest,
  gives ``o``, and a stream of 800 of them the time per message ``g``; ``gamma``: MPI's
  own ``SUM`` per byte (``MPI_Reduce_local``: the reductions' arithmetic); ``entry``: each
  collective called on ``COMM_SELF`` (the software cost of entering it, no message);
* **time**: MPICH's own collectives (mpi4py buffer calls: Allreduce, Bcast, Allgather,
  Alltoall), each call timed alone, the fastest run, beside the calibrated model, where
  the cores are not oversubscribed (2 ranks here; the model aims at 2x).  The 2-rank run
  is launched `LAUNCHES` times and each call taken from its fastest launch, with that
  launch's own calibration: on this machine MPICH's intranode ``Allgather`` and
  ``Allreduce`` of 64 KiB and more run, for a whole launch, either at the speed of the
  same exchange by ``MPI_Sendrecv`` or 2-4x slower (measured: a 1 MiB ``Allgather`` on 2
  ranks 185 us or 800 us by launch, ``Sendrecv`` of 1 MiB 150 us in both).  Every
  launch's rows are kept in the JSON (``launches``).
"""

from __future__ import annotations

import argparse
import math
import sys
import time

import numpy as np
from _harness import (  # noqa: E402  (also puts the repo on sys.path)
    cores,
    launch_children,
    record,
    run_or_launch,
    under_mpiexec,
)

from d2o import trace  # noqa: E402
from d2o.core import costmodel as cm  # noqa: E402
from d2o.core.comm import default_comm  # noqa: E402

RECORD = "costmodel"  # docs/_data/bench/costmodel.json
#: launches of the 2-rank run (each timed call: its fastest launch; see the notes)
LAUNCHES = 3
#: the message sizes of the calibration: ping-pong and exchange (PLogP's curves)
PING = [8, 64, 512, 2048, 4096, 16384, 32768, 65536, 131072, 262144, 524288, 1 << 20,
        2 << 20, 4 << 20]  # fmt: skip
COUNTS = (2, 4, 16, 64)
KINDS = ("Barrier", "Bcast", "Allreduce", "Allgather", "Allgatherv", "Alltoallv")
TIMED = (
    ("Allreduce", (8, 96, 2048, 65536, 1 << 20, 4 << 20)),
    ("Bcast", (96, 65536, 1 << 20)),
    ("Allgather", (96, 65536, 1 << 20)),
    ("Alltoall", (96, 65536, 1 << 20)),
)


def sizes(kind: str, p: int) -> list[int]:
    """Payloads reaching each of ``kind``'s algorithms, in whole blocks at ``p`` ranks."""
    unit = 8 * p * cm._pof2(p)
    return {
        "Barrier": [0],
        "Bcast": [96, (12288 // unit + 1) * unit, (1 << 19) // unit * unit + unit],
        "Allreduce": [96, 2048, (1 << 17) // unit * unit],
        "Allgather": [96, 8192, 1 << 17],
        "Allgatherv": [p * 800, p * 8 * 20000],
        "Alltoallv": [8 * (p - 1) * 100],
    }[kind]


def counts(comm) -> list[dict]:
    """The replayed schedules' traffic beside the model's, per collective and size."""
    p, rows = comm.size, []
    for kind in KINDS:
        for n in sizes(kind, p):
            with trace() as t:
                messages, sent, got = cm.replay(comm, kind, n)
            traced = (sum(t.peers), t.bytes_sent, t.bytes_received) == (messages, sent, got)
            c = cm.cost(
                kind, n, p, cm.NETWORKS["InfiniBand HDR"], (p - 1) if kind == "Alltoallv" else -1
            )
            most = (comm.allreduce(messages, "max"), comm.allreduce(sent, "max"))
            rows.append(dict(kind=kind, bytes=n, algorithm=c.algorithm, messages=most[0],
                             sent=most[1], model_messages=c.messages, model_sent=c.bytes,
                             delivered=comm.allreduce(sent) == comm.allreduce(got),
                             traced=comm.allreduce(traced, "min"),
                             match=most == (c.messages, c.bytes)))  # fmt: skip
    return rows


def calibrate(comm, name: str = "this machine") -> cm.Network:
    """LogGP parameters between ranks 0 and 1 (the others wait), broadcast from rank 0."""
    mpi = comm.mpi
    times, swaps, o, g = [], [], 0.0, 0.0
    if comm.rank < 2:
        peer = 1 - comm.rank
        for n in PING:
            buf, other = np.zeros(n, np.uint8), np.zeros(n, np.uint8)
            best = swap = math.inf  # the fastest: a loaded machine only adds time
            for _ in range(400 if n < 65536 else 40):
                t0 = time.perf_counter()
                if comm.rank == 0:
                    mpi.Send(buf, dest=peer, tag=7)
                    mpi.Recv(buf, source=peer, tag=7)
                else:
                    mpi.Recv(buf, source=peer, tag=7)
                    mpi.Send(buf, dest=peer, tag=7)
                best = min(best, (time.perf_counter() - t0) / 2)
            for _ in range(400 if n < 65536 else 40):  # both ways at once: an exchange
                t0 = time.perf_counter()
                mpi.Sendrecv(buf, dest=peer, sendtag=6, recvbuf=other, source=peer, recvtag=6)
                swap = min(swap, time.perf_counter() - t0)
            times.append(best)
            swaps.append(swap)
        small, reps = np.zeros(8, np.uint8), 800
        if comm.rank == 0:
            reqs, o = [], math.inf
            t0 = time.perf_counter()
            for _ in range(reps):
                t1 = time.perf_counter()
                reqs.append(mpi.Isend(small, dest=peer, tag=8))
                o = min(o, time.perf_counter() - t1)
            mpi.Recv(small, source=peer, tag=9)
            g = (time.perf_counter() - t0) / reps
            type(reqs[0]).Waitall(reqs)
        else:
            for _ in range(reps):
                mpi.Recv(small, source=peer, tag=8)
            mpi.Send(small, dest=peer, tag=9)
    fit = None
    if comm.rank == 0:  # L + 2 o: the smallest message; G: the slope between the largest two
        fit = (times[0], (times[-1] - times[-2]) / (PING[-1] - PING[-2]), o, g, _gamma(),
               _entries(), tuple(zip(PING, times)), tuple(zip(PING, swaps)))  # fmt: skip
    base, G, o, g, gamma, entry, curve, swap_curve = comm.bcast(fit)
    o = min(o, base / 2)
    return cm.Network(name, L=base - 2 * o, o=o, g=max(g, o), G=max(G, 1e-13), gamma=gamma,
                      entry=entry, curve=curve, swap_curve=swap_curve,
                      source="benchmarks/bench_costmodel.py")  # fmt: skip


def _fastest(fn, reps: int) -> float:
    best = math.inf
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _gamma() -> float:
    """Seconds per byte of MPI's own ``SUM`` on float64 (``MPI_Reduce_local``, 1 MiB): the
    arithmetic a reduction's every step does."""
    from mpi4py import MPI  # the launching process never initialises MPI

    a, b = np.ones(1 << 17), np.ones(1 << 17)
    return _fastest(lambda: MPI.SUM.Reduce_local(a, b), 50) / a.nbytes


def _entries() -> tuple:
    """The software cost of entering each timed collective once: the call on a one-rank
    communicator (``COMM_SELF``, 8 bytes; no message, the local copy of the rank's own
    block included), the fastest of many."""
    from mpi4py import MPI

    me = MPI.COMM_SELF
    a, b = np.ones(8, np.uint8), np.empty(8, np.uint8)
    calls = {
        "Allreduce": lambda: me.Allreduce(a, b),
        "Bcast": lambda: me.Bcast(a, root=0),
        "Allgather": lambda: me.Allgather(a, b),
        "Alltoall": lambda: me.Alltoall(a, b),
        "Barrier": lambda: me.Barrier(),
    }
    return tuple((k, _fastest(f, 400)) for k, f in calls.items())


def _native(comm, kind: str, n: int):
    """The mpi4py buffer call of ``kind`` with ``n`` bytes per rank (per peer: Alltoall)."""
    mpi, p = comm.mpi, comm.size
    if kind == "Allreduce":
        a, b = np.ones(n // 8), np.empty(n // 8)
        return lambda: mpi.Allreduce(a, b)
    if kind == "Bcast":
        a = np.ones(n, np.uint8)
        return lambda: mpi.Bcast(a, root=0)
    if kind == "Allgather":
        a, b = np.ones(n, np.uint8), np.empty(n * p, np.uint8)
        return lambda: mpi.Allgather(a, b)
    a, b = np.ones(n * p, np.uint8), np.empty(n * p, np.uint8)
    return lambda: mpi.Alltoall(a, b)


def timing(comm, net: cm.Network) -> list[dict]:
    """MPICH's collectives, each call timed alone after a barrier (the fastest of many runs
    on each rank, the slowest rank's), beside the model."""
    rows = []
    for kind, ns in TIMED:
        for n in ns:
            fn = _native(comm, kind, n)
            best = math.inf  # each call timed alone; its fastest run on each rank
            for _ in range(200 if n <= 65536 else 30):
                comm.mpi.Barrier()
                t0 = time.perf_counter()
                fn()
                best = min(best, time.perf_counter() - t0)
            best = comm.allreduce(best, "max")
            model = "Alltoallv" if kind == "Alltoall" else kind
            pay = n * (comm.size - 1) if kind == "Alltoall" else n
            pred = cm.cost(model, pay, comm.size, net).time
            rows.append(dict(kind=kind, bytes=n, measured_s=best, model_s=pred,
                             ratio=pred / best if best else None))  # fmt: skip
    return rows


def measure() -> dict:
    comm = default_comm()
    p = comm.size
    rows = counts(comm)
    over = p > cores()
    net = calibrate(comm) if not over else cm.Network("not measured", 0.0, 0.0, 0.0, 0.0)
    times = timing(comm, net) if not over else []  # oversubscribed: counts only
    if comm.rank == 0:
        print(f"\n{p} ranks{' (oversubscribed)' if over else ''}: L = {net.L * 1e6:.2f} us, "
              f"o = {net.o * 1e6:.2f} us, g = {net.g * 1e6:.2f} us, "
              f"G = {net.G * 1e9:.3f} ns/B, gamma = {net.gamma * 1e9:.3f} ns/B; entry "
              + ", ".join(f"{k} {v * 1e6:.2f} us" for k, v in net.entry))  # fmt: skip
        for r in rows:
            print(f"  {r['kind']:10} {r['bytes']:>8} B  {r['algorithm']:28} messages "
                  f"{r['messages']} (model {r['model_messages']}), bytes {r['sent']} "
                  f"(model {r['model_sent']:.0f}) {'ok' if r['match'] else 'DIFFERENT'}")  # fmt: skip
        for r in times:
            print(f"  {r['kind']:10} {r['bytes']:>8} B  measured {r['measured_s'] * 1e6:9.1f} us"
                  f"  model {r['model_s'] * 1e6:9.1f} us  model/measured {r['ratio']:.2f}")  # fmt: skip
    return {
        "network": {
            **{k: getattr(net, k) for k in ("L", "o", "g", "G", "gamma")},
            "entry": dict(net.entry),
            "curve": [list(pt) for pt in net.curve],
            "swap_curve": [list(pt) for pt in net.swap_curve],
        },
        "oversubscribed": over,
        "counts": rows,
        "timing": times,
    }


def _counts_argument() -> tuple:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--counts", default=",".join(map(str, COUNTS)),
                    help="process counts, comma-separated (default 2,4,16,64)")  # fmt: skip
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--json", default=None, help=argparse.SUPPRESS)
    return tuple(int(c) for c in ap.parse_args().counts.split(","))


def _fastest_launch(runs: list[dict]) -> dict:
    """The 2-rank results of several launches as one: the counts and calibration of the
    first; each timed call from the launch where it ran fastest, with that launch's own
    model figure (``launch``: which); every launch's timed rows kept (``launches``)."""
    out = dict(runs[0])
    rows = []
    for i in range(len(runs[0]["timing"])):
        tried = [r["timing"][i] for r in runs]
        k = int(np.argmin([t["measured_s"] for t in tried]))
        rows.append(dict(tried[k], launch=k))
    out["timing"] = rows
    out["launches"] = [r["timing"] for r in runs]
    out["networks"] = [r["network"] for r in runs]
    return out


def main() -> None:
    """Measure here (under mpiexec), or launch every count, the 2-rank one `LAUNCHES` times."""
    counts = _counts_argument()
    if "--child" in sys.argv or under_mpiexec():
        run_or_launch(__file__, measure, counts=counts, name=RECORD)
        return
    by_count = launch_children(__file__, sys.argv[1:], counts)
    two = by_count.get("2")
    if two is not None and not two["oversubscribed"]:
        more = [launch_children(__file__, sys.argv[1:], (2,))["2"] for _ in range(LAUNCHES - 1)]
        by_count["2"] = _fastest_launch([two, *more])
    record(RECORD, by_count, processes=counts)


if __name__ == "__main__":
    main()
