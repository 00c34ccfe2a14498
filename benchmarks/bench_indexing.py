"""Indexing benchmark: d2o against numpy in the same run (not a test).

Run as ``python benchmarks/bench_indexing.py``: it launches itself under ``mpiexec -n 1``
and ``-n 2`` and writes the results to ``docs/_data/bench/indexing.json`` (``make bench``;
the performance page shows it).  ``mpiexec -n 2 python benchmarks/bench_indexing.py`` (or
``D2O_MPI=0 python ...``) measures on those processes and prints only.  numpy works on the
whole array in one process; d2o on the distributed array.  Each figure is the best of
several repetitions (µs per call); rank 0 prints the table.
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np
from _harness import json_argument, launch_children, measures_here, record

from d2o import default_comm, distributed_data_object

RECORD = "indexing"  # docs/_data/bench/indexing.json
COUNTS = (1, 2)
comm = default_comm()


def best(fn, number: int, repeat: int = 5) -> float:
    """Best time per call in µs; ranks start each repetition together."""
    times = []
    for _ in range(repeat):
        comm.barrier()
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        t = (time.perf_counter() - t0) / number
        times.append(comm.allreduce(t, op="max"))
    return min(times) * 1e6


def measure() -> list | None:
    rng = np.random.default_rng(42)
    n = 2**22
    a = np.arange(n, dtype=np.float64)
    obj = distributed_data_object(a)
    idx = rng.integers(0, n, 10**5)
    mask = rng.random(n) < 0.5
    dmask = distributed_data_object(mask)
    small = np.arange(1000, dtype=np.float64)
    sobj = distributed_data_object(small)
    three = [5, 700, 3]

    def setitem_np():
        small[5] = 1

    def setitem_d2o():
        sobj[5] = 1

    rows = [
        ("10^5 random integer indices of a 2^22 array", lambda: a[idx], lambda: obj[idx], 20),
        ("boolean mask (numpy) selecting half of 2^22", lambda: a[mask], lambda: obj[mask], 5),
        ("boolean mask (distributed) selecting half", lambda: a[mask], lambda: obj[dmask], 5),
        (
            "obj[::-2] of 2^22 (d2o: a view; numpy: a[::-2].copy())",
            lambda: a[::-2].copy(),
            lambda: obj[::-2],
            10,
        ),
        ("obj[5] (1000 elements)", lambda: small[5], lambda: sobj[5], 20000),
        ("obj[5] = 1 (1000 elements)", setitem_np, setitem_d2o, 20000),
        ("3-element fancy index obj[[5, 700, 3]]", lambda: small[three], lambda: sobj[three], 5000),
        ("obj[10:500], a view (1000 elements)", lambda: small[10:500], lambda: sobj[10:500], 5000),
    ]
    out = []
    for label, f_np, f_d2o, number in rows:
        t_np = best(f_np, number)
        t_d2o = best(f_d2o, number)
        out.append((label, t_np, t_d2o))
    if comm.rank != 0:
        return None
    print(f"d2o indexing benchmark on {comm.size} process(es)")
    print(f"{'operation':56s} {'numpy µs':>12s} {'d2o µs':>12s} {'ratio':>8s}")
    for label, t_np, t_d2o in out:
        print(f"{label:56s} {t_np:12.2f} {t_d2o:12.2f} {t_d2o / t_np:8.2f}")
    return [{"operation": label, "numpy_us": t_np, "d2o_us": t_d2o} for label, t_np, t_d2o in out]


def main() -> None:
    if measures_here("--child" in sys.argv, comm):
        results = measure()
        path = json_argument()
        if path and results is not None:
            with open(path, "w") as f:
                json.dump(results, f)
        return
    record(RECORD, launch_children(__file__, [], COUNTS), processes=COUNTS)


if __name__ == "__main__":
    main()
