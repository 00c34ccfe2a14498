"""Shared pieces of the benchmark scripts: timing collective calls, relaunching under mpiexec,
and writing each benchmark's output file (:func:`record`).

Run plainly (``python benchmarks/bench_NAME.py``, as ``make bench`` does), a benchmark
measures on the process counts it shows (children under ``mpiexec -n N``), prints its tables
and writes its results with the machine's facts to ``docs/_data/bench/NAME.json`` (the
script's ``RECORD``); the documentation's performance page is generated from those files.
The direct forms (``mpiexec -n N python benchmarks/bench_NAME.py``, ``--child``, ``D2O_MPI=0``)
only print.  ``D2O_BENCH_DIR=DIR`` writes the output files to DIR instead;
``D2O_MPIEXEC=PATH`` launches the children with that mpiexec (where MPI was installed
elsewhere than beside this Python), and ``D2O_COMMIT`` is the commit recorded where git
cannot tell (a copy of the sources without their repository).
"""

from __future__ import annotations

import datetime
import importlib.metadata
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:  # run from anywhere without installing d2o
    sys.path.insert(0, REPO)

#: Where :func:`record` writes the output files (the performance page reads them there).
DATA_DIR = os.path.join(REPO, "docs", "_data", "bench")
#: Wall-clock time and 1-minute load average when this benchmark started.
STARTED = (time.time(), os.getloadavg()[0])


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


def run_or_launch(
    script: str, measure: Callable[[], object], counts=(1, 2), name: str | None = None
) -> None:
    """Measure when under mpiexec (or with ``--child``): every rank runs ``measure()``, which
    prints, and rank 0 writes what it returns to ``--json PATH`` when given.  Otherwise
    relaunch ``script`` under ``mpiexec -n N`` for each N in ``counts`` (with this command
    line's arguments) and :func:`record` ``{str(N): results}`` as ``name``."""
    from d2o.core.comm import default_comm

    comm = default_comm()
    if "--child" in sys.argv or comm.size > 1:
        results = measure()
        path = json_argument()
        if path and comm.rank == 0:
            with open(path, "w") as f:
                json.dump(results, f, default=_plain)
        return
    by_count = launch_children(script, sys.argv[1:], counts)
    if name is not None:
        record(name, by_count, processes=counts, quick="--quick" in sys.argv)


def json_argument() -> str | None:
    """The PATH of ``--json PATH`` (or ``--json=PATH``) on the command line, if any."""
    argv = sys.argv[1:]
    for i, arg in enumerate(argv):
        if arg == "--json" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--json="):
            return arg.split("=", 1)[1]
    return None


def _mpiexec_command(script: str, n: int) -> list[str]:
    """``mpiexec -n n python script`` (the mpiexec beside this Python, or ``$D2O_MPIEXEC``
    where MPI was installed elsewhere, e.g. with ``pip install --target``)."""
    mpiexec = os.environ.get("D2O_MPIEXEC") or os.path.join(
        os.path.dirname(sys.executable), "mpiexec"
    )
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
                json.dump(results, f, default=_plain)


# -- the benchmarks' output files ------------------------------------------------------------


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _memory_gib() -> float | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return None


def _commit() -> str | None:
    """The repository's commit, with ``+`` when the measured code (d2o/, benchmarks/,
    examples/) differs from it in the work tree; ``$D2O_COMMIT`` (or None) where git cannot
    tell (a copy of the work tree without its repository)."""
    try:
        head = subprocess.run(
            ["git", "-C", REPO, "rev-parse", "--short=12", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", REPO, "status", "--porcelain", "--", "d2o", "benchmarks", "examples"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return os.environ.get("D2O_COMMIT")
    return head + ("+" if dirty else "")


def machine() -> dict:
    """The facts of this machine and software that a figure depends on (no MPI call)."""
    threads = {v: os.environ.get(v) for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")}
    return {
        "cores": cores(),
        "cpu": _cpu_model(),
        "memory_gib": _memory_gib(),
        "system": f"{platform.system()} {platform.release()} {platform.machine()}",
        "python": platform.python_version(),
        "numpy": np.__version__,
        "mpi4py": _version("mpi4py"),
        "mpi": f"MPICH {_version('mpich')} (the mpich wheel)" if _version("mpich") else None,
        "scipy": _version("scipy"),
        "h5py": _version("h5py"),
        "zarr": _version("zarr"),
        "threads": threads,
    }


def _plain(value):
    """JSON for numpy scalars and the like."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, tuple | set):
        return list(value)
    raise TypeError(f"not JSON serialisable: {value!r}")


def _rounded(value, digits: int = 6):
    """``value`` with every float rounded to ``digits`` significant digits (readable diffs),
    except under keys starting with ``result`` (a program's computed result, compared with
    numpy's: kept whole); infinities and NaN become None (JSON has neither)."""
    if isinstance(value, dict):
        return {
            str(k): _rounded(v, 17 if str(k).startswith("result") else digits)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [_rounded(v, digits) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        return float(f"{value:.{digits}g}")
    return value


def _dumps(value, indent: str = "") -> str:
    """JSON with one entry per line, except lists of plain values (kept on one line)."""
    inner = indent + "  "
    if isinstance(value, dict) and value:
        items = [f"{inner}{json.dumps(k)}: {_dumps(v, inner)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + indent + "}"
    if isinstance(value, list) and any(isinstance(v, dict | list) for v in value):
        items = [inner + _dumps(v, inner) for v in value]
        return "[\n" + ",\n".join(items) + "\n" + indent + "]"
    return json.dumps(value, ensure_ascii=False)


def record(name: str, results, *, processes, quick: bool = False, options=None) -> str:
    """Write ``results`` to ``docs/_data/bench/NAME.json`` (``$D2O_BENCH_DIR/NAME.json``)
    with what produced them: the script (which must declare ``RECORD = NAME``), its command
    line, the date, the process counts, whether it was a reduced (``quick``) run, the
    script's ``options``, the machine's facts, the load average before and after, and the
    commit; returns the path.  The documentation's performance page is generated from these
    files, and its build checks that each one names the script that wrote it."""
    script = os.path.relpath(os.path.abspath(sys.argv[0]), REPO).replace(os.sep, "/")
    started, load = STARTED
    now = time.time()
    doc = {
        "benchmark": script,
        "record": name,
        "command": " ".join(["python", script, *sys.argv[1:]]),
        "date": datetime.datetime.fromtimestamp(now, datetime.timezone.utc).isoformat(
            timespec="seconds"
        ),
        "duration_s": round(now - started, 1),
        "processes": [int(n) for n in processes],
        "quick": bool(quick),
        "options": options or {},
        "machine": machine(),
        "load_average": {"before": round(load, 2), "after": round(os.getloadavg()[0], 2)},
        "commit": _commit(),
        "results": results,
    }
    out = os.environ.get("D2O_BENCH_DIR") or DATA_DIR
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, f"{name}.json")
    with open(path, "w") as f:
        f.write(_dumps(_rounded(json.loads(json.dumps(doc, default=_plain)))) + "\n")
    shown = os.path.relpath(path, REPO) if path.startswith(REPO) else path
    print(f"\nwrote {shown}", flush=True)
    return path
