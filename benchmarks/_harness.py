"""Shared pieces of the benchmark scripts: timing collective calls, relaunching under mpiexec."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:  # run from anywhere without installing d2o
    sys.path.insert(0, REPO)


def timed(fn: Callable, comm, repeat: int) -> float:
    """Median seconds of ``fn()`` over ``repeat`` runs; each starts with a barrier and counts
    the slowest rank's time."""
    times = []
    for _ in range(repeat):
        comm.barrier()
        t0 = time.perf_counter()
        fn()
        times.append(comm.allreduce(time.perf_counter() - t0, op="max"))
    return float(np.median(times))


def run_or_launch(script: str, measure: Callable, counts=(1, 2)) -> None:
    """Measure when under mpiexec (or with ``--child``); otherwise relaunch ``script`` under
    ``mpiexec -n N`` for each N in ``counts``."""
    from d2o._comm import default_comm

    if "--child" in sys.argv or default_comm().size > 1:
        measure()
        return
    mpiexec = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    for n in counts:
        cmd = [mpiexec, "-n", str(n), sys.executable, os.path.abspath(script), "--child"]
        subprocess.run(cmd, env=env, check=True)
