"""Redistributing a 32 MiB float64 array from axis 0 to axis 1, against a plain memcpy.

Run plainly (``python benchmarks/bench_redistribution.py``) it launches itself
under ``mpiexec -n 1`` and ``-n 2`` and writes the results to
``docs/_data/bench/redistribution.json`` (``make bench``; the performance page shows
it); under mpiexec it measures on that many ranks.  Prints the median time of ``obj.redistribute(1)`` (each repetition
starts with a barrier; the time is the slowest rank's), its throughput
(global bytes / time), and ``np.copyto`` of the same 32 MiB on one process.
Peer figure measured on this machine: Heat, about 8.6 ms on 2 processes.
This is a benchmark, not a test: it asserts nothing.
"""

from __future__ import annotations

import numpy as np  # noqa: E402
from _harness import run_or_launch, timed  # noqa: E402  (also puts the repo on sys.path)

from d2o import distributed_data_object as D2O  # noqa: E402
from d2o.core.comm import Comm, default_comm  # noqa: E402

RECORD = "redistribution"  # docs/_data/bench/redistribution.json
SHAPE = (2048, 2048)  # 32 MiB of float64
REPEAT = 15


def measure() -> dict | None:
    comm = default_comm()
    x = D2O(global_shape=SHAPE, dtype=np.float64)
    x.local_array[...] = comm.rank
    t = timed(lambda: x.redistribute(1), comm, REPEAT)
    nbytes = x.nbytes
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
        return {"shape": list(SHAPE), "bytes": nbytes, "d2o_s": t, "copyto_s": tm}
    return None


if __name__ == "__main__":
    run_or_launch(__file__, measure, name=RECORD)
