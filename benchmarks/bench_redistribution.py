"""Redistributing a 32 MiB float64 array from axis 0 to axis 1, against a plain memcpy.

Run plainly (``python benchmarks/bench_redistribution.py``) it launches itself
under ``mpiexec -n 1`` and ``-n 2``; under mpiexec it measures on that many
ranks.  Prints the median time of ``obj.redistribute(1)`` (each repetition
starts with a barrier; the time is the slowest rank's), its throughput
(global bytes / time), and ``np.copyto`` of the same 32 MiB on one process.
Peer figure measured on this machine: Heat, about 8.6 ms on 2 processes.
This is a benchmark, not a test: it asserts nothing.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

from d2o import distributed_data_object as D2O  # noqa: E402
from d2o._comm import default_comm  # noqa: E402

SHAPE = (2048, 2048)  # 32 MiB of float64
REPEAT = 15


def timed(fn, comm, repeat=REPEAT) -> float:
    times = []
    for _ in range(repeat):
        comm.barrier()
        t0 = time.perf_counter()
        fn()
        times.append(comm.allreduce(time.perf_counter() - t0, op="max"))
    return float(np.median(times))


def measure() -> None:
    comm = default_comm()
    x = D2O(global_shape=SHAPE, dtype=np.float64)
    x.local_array[...] = comm.rank
    t = timed(lambda: x.redistribute(1), comm)
    nbytes = x.nbytes
    if comm.rank == 0:
        src = np.ones(SHAPE)
        dst = np.empty_like(src)
        tm = timed(lambda: np.copyto(dst, src), default_comm().__class__(None))
        print(
            f"{comm.size} proc(s): redistribute axis 0 -> 1 of {nbytes >> 20} MiB: "
            f"{t * 1e3:7.2f} ms = {nbytes / t / 1e9:5.2f} GB/s; "
            f"np.copyto of the same bytes: {tm * 1e3:6.2f} ms = {nbytes / tm / 1e9:5.2f} GB/s; "
            f"ratio {t / tm:5.1f}x memcpy",
            flush=True,
        )


def launch(counts=(1, 2)) -> None:
    here = os.path.abspath(__file__)
    mpiexec = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    for n in counts:
        subprocess.run(
            [mpiexec, "-n", str(n), sys.executable, here, "--child"], env=env, check=True
        )


if __name__ == "__main__":
    if "--child" in sys.argv or default_comm().size > 1:
        measure()
    else:
        launch()
