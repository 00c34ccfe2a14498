"""Redistributing a 32 MiB float64 array from axis 0 to axis 1, against a plain memcpy;
then the same move and a block-cyclic -> slab move at three sizes, with exchange plans
cached (the default) and without (every exchange builds and frees its datatypes).

Run plainly (``python benchmarks/bench_redistribution.py``) it launches itself
under ``mpiexec -n 1`` and ``-n 2`` and writes the results to
``docs/_data/bench/redistribution.json`` (``make bench``; the performance page shows
it); under mpiexec it measures on that many ranks.  Prints the median time of ``obj.redistribute(1)`` (each repetition
starts with a barrier; the time is the slowest rank's), its throughput
(global bytes / time), and ``np.copyto`` of the same 32 MiB on one process.
Peer figure measured on this machine: Heat, about 8.6 ms on 2 processes.

The table measures with and without the plan cache in the same run, alternating
repetition by repetition (the median of each is printed).  Small moves are timed in batches of
calls, so that the figure is per call.  On one process nothing moves between ranks
(a local copy), so both columns time the same code.
This is a benchmark, not a test: it asserts nothing.
"""

from __future__ import annotations

import time

import numpy as np  # noqa: E402
from _harness import run_or_launch, timed  # noqa: E402  (also puts the repo on sys.path)

import d2o  # noqa: E402
from d2o import distributed_data_object as D2O  # noqa: E402
from d2o.core.comm import Comm, default_comm  # noqa: E402
from d2o.move import redistribution as rd  # noqa: E402

RECORD = "redistribution"  # docs/_data/bench/redistribution.json
SHAPE = (2048, 2048)  # 32 MiB of float64
REPEAT = 15
#: (label, global shape, calls per timed repetition)
SIZES = [("32 MiB", SHAPE, 1), ("512 KiB", (256, 256), 10), ("8 KiB", (32, 32), 200)]
COMPARE_REPEAT = 21  # repetitions of the comparison, alternating uncached / cached


def _compare(fn, comm, batch: int) -> tuple:
    """Median seconds per call of ``fn()`` without and with the plan cache, the two
    alternating repetition by repetition (so that both see the same machine); each
    repetition times ``batch`` calls after one untimed call (which builds the plan)."""
    times: dict = {0: [], 64: []}
    for i in range(COMPARE_REPEAT):
        for cache in (0, 64) if i % 2 else (64, 0):  # either first, in turn
            old = rd.plan_cache_size(cache)
            fn()
            comm.barrier()
            t0 = time.perf_counter()
            for _ in range(batch):
                fn()
            times[cache].append(comm.allreduce(time.perf_counter() - t0, op="max") / batch)
            rd.plan_cache_size(old)
    return float(np.median(times[0])), float(np.median(times[64]))


def measure() -> dict | None:
    comm = default_comm()
    x = D2O(global_shape=SHAPE, dtype=np.float64)
    x.local_array[...] = comm.rank
    t = timed(lambda: x.redistribute(1), comm, REPEAT)
    nbytes = x.nbytes
    base: dict = {}
    if comm.rank == 0:
        src = np.ones(SHAPE)
        dst = np.empty_like(src)
        tm = timed(lambda: np.copyto(dst, src), Comm(None), REPEAT)
        print(
            f"{comm.size} proc(s): redistribute axis 0 -> 1 of {nbytes >> 20} MiB: "
            f"{t * 1e3:7.2f} ms = {nbytes / t / 1e9:5.2f} GB/s; "
            f"np.copyto of the same bytes: {tm * 1e3:6.2f} ms = {nbytes / tm / 1e9:5.2f} GB/s; "
            f"ratio {t / tm:5.1f}x memcpy",
            flush=True,
        )
        base = {"shape": list(SHAPE), "bytes": nbytes, "d2o_s": t, "copyto_s": tm}
    cyclic = d2o.layout(mesh=(comm.size,), block=(4,), comm=comm)
    rows = []
    for label, shape, batch in SIZES:
        a = D2O(global_shape=shape, dtype=np.float64)
        a.local_array[...] = comm.rank
        b = D2O(a, distribution_strategy=cyclic)
        moves = [
            ("axis 0 -> 1", lambda a=a: a.redistribute(1)),
            ("block-cyclic -> slab", lambda b=b: b.copy(distribution_strategy="equal", axis=0)),
        ]
        for name, fn in moves:
            rows.append((label, name, *_compare(fn, comm, batch)))
    if comm.rank != 0:
        return None
    print(f"\n{comm.size} proc(s), per call: without plans | with plans (ratio)")
    for label, name, off, on in rows:
        print(
            f"  {label:>8} {name:<22} {off * 1e6:10.1f} us | {on * 1e6:10.1f} us ({on / off:4.2f})",
            flush=True,
        )
    base["plans"] = [
        {"size": label, "move": name, "uncached_s": off, "cached_s": on}
        for label, name, off, on in rows
    ]
    return base


if __name__ == "__main__":
    run_or_launch(__file__, measure, name=RECORD)
