"""One-sided access (`x.window()`, `d2o.move.rma`) beside point-to-point messages, at 2
processes: the bandwidth of a get and a put of a 1 MiB patch held by the other rank, the
latency of an 8-byte get and of ``fetch_and_add``, and ``Send``/``Recv`` of the same bytes
(one way; the latency is half a ping-pong), all in one run.  Also the time of an 8-byte
get while the target computes in numpy for 1 s outside MPI (the window's memory comes from
``MPI_Win_allocate``, so inside a node the origin copies it itself), and the get, put and
8-byte get again through MPI calls (``x.window(shared=False)``, the way to ranks on other
nodes) where the default window loads and stores the target's memory.

Run plainly (``python benchmarks/bench_rma.py``) it launches itself under ``mpiexec -n 2``
and writes ``docs/_data/bench/rma.json``; ``mpiexec -n 2 python benchmarks/bench_rma.py``
only prints.  A benchmark, not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _harness import run_or_launch

import d2o

RECORD = "rma"
MIB = 1 << 20


def _median(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def measure() -> dict:
    comm = d2o.default_comm()
    me = comm.rank
    rows = MIB // (256 * 8)  # each rank's piece: rows x 256 float64 = 1 MiB
    x = d2o.distributed_data_object(
        global_shape=(2 * rows, 256), dtype=np.float64, distribution_strategy="equal"
    )
    x.set_local_data(float(me))
    theirs = slice(rows, 2 * rows)  # rank 1's piece, read and written by rank 0
    out: dict = {"patch_bytes": MIB}
    with x.window() as w:
        comm.barrier()
        if me == 0:
            out["get_1mib_s"] = _median(lambda: w.get(theirs), 20)
            out["put_1mib_s"] = _median(lambda: (w.put(theirs, 2.0), w.flush()), 20)
            out["get_8b_s"] = _median(lambda: w.get((rows, 0)), 2000)
            out["fetch_and_add_s"] = _median(lambda: w.fetch_and_add((rows, 1), 1.0), 2000)
        comm.barrier()
        # an 8-byte get while the target computes outside MPI for 1 s
        if me == 1:
            t0 = time.perf_counter()
            while time.perf_counter() - t0 < 1.0:
                np.sum(np.ones(1000))
        else:
            time.sleep(0.1)
            t0 = time.perf_counter()
            w.get((rows, 2))
            out["get_8b_busy_target_s"] = time.perf_counter() - t0
        comm.barrier()
    # the same through MPI_Get / MPI_Put (what a rank on another node gets)
    with x.window(shared=False) as w:
        comm.barrier()
        if me == 0:
            out["get_1mib_mpi_s"] = _median(lambda: w.get(theirs), 20)
            out["put_1mib_mpi_s"] = _median(lambda: (w.put(theirs, 2.0), w.flush()), 20)
            out["get_8b_mpi_s"] = _median(lambda: w.get((rows, 0)), 2000)
        comm.barrier()
    # Send/Recv of the same bytes: one way (1 MiB), ping-pong (8 bytes)
    big, small = np.zeros(MIB // 8), np.zeros(1)

    def one_way() -> None:
        if me == 1:
            comm.Sendrecv_many([(0, big)], [])
        else:
            comm.Sendrecv_many([], [(1, big)])

    def ping_pong() -> None:
        if me == 0:
            comm.Sendrecv_many([(1, small)], [])
            comm.Sendrecv_many([], [(1, small)])
        else:
            comm.Sendrecv_many([], [(0, small)])
            comm.Sendrecv_many([(0, small)], [])

    comm.barrier()
    send_1mib = _median(one_way, 20)
    pp = _median(ping_pong, 2000)
    if me == 0:
        out["sendrecv_1mib_s"] = send_1mib
        out["sendrecv_8b_latency_s"] = pp / 2
        gbs = lambda s: MIB / s / 1e9  # noqa: E731
        print(
            f"1 MiB patch: get {gbs(out['get_1mib_s']):.2f} GB/s, "
            f"put {gbs(out['put_1mib_s']):.2f} GB/s, Send/Recv {gbs(send_1mib):.2f} GB/s"
        )
        print(
            f"8 bytes: get {out['get_8b_s'] * 1e6:.1f} us, fetch_and_add "
            f"{out['fetch_and_add_s'] * 1e6:.1f} us, Send/Recv latency {pp / 2 * 1e6:.1f} us"
        )
        print(
            f"MPI calls (shared=False): get {gbs(out['get_1mib_mpi_s']):.2f} GB/s, "
            f"put {gbs(out['put_1mib_mpi_s']):.2f} GB/s, 8-byte get "
            f"{out['get_8b_mpi_s'] * 1e6:.1f} us"
        )
        print(
            f"8-byte get while the target computes for 1 s: "
            f"{out['get_8b_busy_target_s'] * 1e3:.2f} ms",
            flush=True,
        )
    return out if me == 0 else {}


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--json", default=None, help=argparse.SUPPRESS)
    ap.parse_args()  # --help prints and exits; nothing else to choose
    run_or_launch(__file__, measure, counts=(2,), name=RECORD)
