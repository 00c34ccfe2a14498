"""The Wiener filter demo (examples/wiener_filter.py) at two sizes on 1 and 2 processes.

Run plainly it launches itself under ``mpiexec -n 1`` and ``-n 2``.  Prints
the wall time of problem set-up plus the conjugate-gradient solve (tol 1e-5),
the iteration count, and the time per iteration.
This is a benchmark, not a test: it asserts nothing.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from d2o._comm import default_comm  # noqa: E402

SIZES = (256, 1024)


def measure() -> None:
    spec = importlib.util.spec_from_file_location(
        "wiener_filter", os.path.join(ROOT, "examples", "wiener_filter.py")
    )
    wf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(wf)
    comm = default_comm()
    for n in SIZES:
        comm.barrier()
        t0 = time.perf_counter()
        out = wf.wiener_filter(n, seed=42, tol=1e-5, maxiter=1000)
        t = comm.allreduce(time.perf_counter() - t0, op="max")
        if comm.rank == 0:
            it = out["iterations"]
            print(
                f"{comm.size} proc(s) {n}x{n}: {t:7.2f} s, {it} CG iterations, "
                f"{t / max(it, 1) * 1e3:7.1f} ms per iteration",
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
