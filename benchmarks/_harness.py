"""Shared pieces of the benchmark scripts: timing collective calls, relaunching under mpiexec."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
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
    from d2o.core.comm import default_comm

    if "--child" in sys.argv or default_comm().size > 1:
        measure()
        return
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    for n in counts:
        subprocess.run([*_mpiexec_command(script, n), "--child"], env=env, check=True)


def _mpiexec_command(script: str, n: int) -> list[str]:
    """``mpiexec -n n python script`` (the mpiexec beside this Python)."""
    mpiexec = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    return [mpiexec, "-n", str(n), sys.executable, os.path.abspath(script)]


def under_mpiexec() -> bool:
    """Whether this process was started by mpiexec (MPICH/Hydra, Open MPI or PMIx)."""
    return any(k in os.environ for k in ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK"))


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def run_label(nprocs: int) -> str:
    """``MPI`` or ``no MPI`` (``D2O_MPI=0``), and whether ``nprocs`` oversubscribe the cores."""
    mpi = "no MPI" if os.environ.get("D2O_MPI") == "0" else "MPI"
    over = f", oversubscribed ({cores()} cores)" if nprocs > cores() else ""
    return f"{mpi}{over}"


def on_rank0(fn: Callable, comm):
    """``fn()`` on rank 0 alone, its result on every rank; the other ranks sleep meanwhile,
    polling a non-blocking barrier every 2 ms (a busy-polling MPI wait would take a core
    from rank 0 on an oversubscribed machine)."""
    if comm.size == 1:
        return fn()
    out = None
    if comm.rank == 0:
        out = fn()
        comm.mpi.Ibarrier().Wait()
    else:
        req = comm.mpi.Ibarrier()
        while not req.Test():
            time.sleep(0.002)
    return comm.bcast(out, root=0)


def measures_here(child: bool, comm) -> bool:
    """Whether to measure in this process (``--child``, ``D2O_MPI=0``, under mpiexec or on
    several ranks) rather than launch the children with :func:`launch_children`."""
    return child or os.environ.get("D2O_MPI") == "0" or under_mpiexec() or comm.size > 1


def launch_children(
    script: str,
    argv: list[str],
    counts=(1, 2),
    thread_vars=("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"),
) -> dict:
    """Run ``mpiexec -n N python script --child --json PATH *argv`` for each N in ``counts``
    (``thread_vars`` set to 1, ``D2O_MPI`` unset) and return ``{str(N): the JSON rank 0
    wrote to PATH}``."""
    env = dict(os.environ, **dict.fromkeys(thread_vars, "1"))
    env.pop("D2O_MPI", None)
    by_count = {}
    with tempfile.TemporaryDirectory() as tmp:
        for n in counts:
            path = os.path.join(tmp, f"n{n}.json")
            cmd = [*_mpiexec_command(script, n), "--child", "--json", path, *argv]
            subprocess.run(cmd, env=env, check=True)
            with open(path) as f:
                by_count[str(n)] = json.load(f)
    return by_count


def measure_and_report(
    comm, header: Callable[[], str], measure: Callable[[], dict], report: Callable, json_path
) -> None:
    """Rank 0 prints ``header()`` and notes the 1-minute load average; every rank runs
    ``measure()``; rank 0 then calls ``report(results)``, prints the load average before
    and after, and writes the results to ``json_path`` as JSON (when given)."""
    if comm.rank == 0:
        print(header(), flush=True)
        load = os.getloadavg()[0]
    results = measure()
    if comm.rank == 0:
        report(results)
        # this run keeps about comm.size cores busy; more load is someone else's
        after = os.getloadavg()[0]
        print(f"\n1-minute load average: {load:.2f} before, {after:.2f} after ({cores()} cores)")
        if json_path:
            with open(json_path, "w") as f:
                json.dump(results, f)
