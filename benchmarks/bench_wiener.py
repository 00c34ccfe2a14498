"""The Wiener filter demo (examples/wiener_filter.py) at two sizes on 1 and 2 processes.

Run plainly it launches itself under ``mpiexec -n 1`` and ``-n 2`` and writes the results
to ``docs/_data/bench/wiener.json`` (``make bench``; the performance page shows it).  Prints
the wall time of problem set-up plus the conjugate-gradient solve (tol 1e-5),
the iteration count, and the time per iteration.
This is a benchmark, not a test: it asserts nothing.
"""

from __future__ import annotations

import importlib.util
import os
import time

from _harness import REPO as ROOT  # noqa: E402  (also puts the repo on sys.path)
from _harness import run_or_launch  # noqa: E402

from d2o.core.comm import default_comm  # noqa: E402

RECORD = "wiener"  # docs/_data/bench/wiener.json
SIZES = (256, 1024)
TOL = 1e-5


def measure() -> dict:
    spec = importlib.util.spec_from_file_location(
        "wiener_filter", os.path.join(ROOT, "examples", "wiener_filter.py")
    )
    wf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(wf)
    comm = default_comm()
    results = {"tol": TOL, "sizes": {}}
    for n in SIZES:
        comm.barrier()
        t0 = time.perf_counter()
        out = wf.wiener_filter(n, seed=42, tol=TOL, maxiter=1000)
        t = comm.allreduce(time.perf_counter() - t0, op="max")
        if comm.rank == 0:
            it = out["iterations"]
            print(
                f"{comm.size} proc(s) {n}x{n}: {t:7.2f} s, {it} CG iterations, "
                f"{t / max(it, 1) * 1e3:7.1f} ms per iteration",
                flush=True,
            )
        results["sizes"][str(n)] = {"seconds": t, "iterations": int(out["iterations"])}
    return results


if __name__ == "__main__":
    run_or_launch(__file__, measure, name=RECORD)
