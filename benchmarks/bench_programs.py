"""The seed papers' programs (examples/programs/) on d2o.numpy against numpy (not a test).

DistNumPy's Monte Carlo pi, Jacobi solver and N-body simulation (in the broadcasting form,
``nbody``, and in the paper's form with outer products by ``dot``, ``nbody_dot``) and
GAiN's laplace.py, each timed as a whole program (``run(np, n, iterations)``: building the
inputs included) at a size where numpy takes about 0.5-2 s on one core.  Three ways to run it:

* ``D2O_MPI=0 python benchmarks/bench_programs.py``: one process without MPI;
* ``mpiexec -n N python benchmarks/bench_programs.py``: d2o.numpy on N ranks;
* ``python benchmarks/bench_programs.py`` (no mpiexec, no ``D2O_MPI``): launches the
  second form with N = 1 and 2 (``--child``, results passed back through a JSON
  file), prints one table of both, beside the papers' figures, and writes them to
  ``docs/_data/bench/programs.json`` (``make bench``; the performance page shows it).

numpy is measured in the same run: rank 0 times ``run(numpy, ...)`` alone while the
other ranks sleep (polling a non-blocking barrier every 2 ms, so that they take no
core from it); then all ranks time ``run(d2o.numpy, ...)``, from a barrier to the
slowest rank's end.  numpy and d2o alternate, ``REPEAT`` times each; a figure is the best
of them.  ``OMP_NUM_THREADS=OPENBLAS_NUM_THREADS=1`` (set for the children; set it
yourself for the direct forms).  All times are wall-clock.

Columns: speed-up = numpy's time / d2o's time; efficiency = speed-up / processes (what
DistNumPy calls CPU utilisation: against sequential numpy, not against d2o on one
process).  Ceiling (on N > 1 ranks): every rank also runs numpy's whole program at the
same time; N x numpy's time alone / that time is the speed-up the machine itself allows
(shared memory bandwidth, shared or busy cores) before any communication.  Goals on a
2-core machine: d2o on 1 process within 10 % of numpy's time; at least 1.7x numpy's
speed on 2 processes.  Other load on the machine shows in every figure: run it idle.

``--profile NAME`` instead prints a cProfile of one d2o run of program NAME on every
rank (rank 0 prints its own, then rank 1's), for finding where the time goes.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import os
import pstats
import sys
import time

import numpy as np
from _harness import (  # (importing it puts the repository on sys.path)
    REPO,
    cores,
    launch_children,
    measure_and_report,
    measures_here,
    on_rank0,
    record,
    run_label,
)

sys.path.insert(0, os.path.join(REPO, "examples", "programs"))

import jacobi  # noqa: E402
import laplace  # noqa: E402
import monte_carlo_pi  # noqa: E402
import nbody  # noqa: E402
import nbody_dot  # noqa: E402

import d2o.numpy as dnp  # noqa: E402
from d2o import default_comm  # noqa: E402

RECORD = "programs"  # docs/_data/bench/programs.json
REPEAT = 5
COUNTS = (1, 2)
#: d2o on 1 process within this factor of numpy's time; on 2 processes at least this speed-up
GOAL_1P, GOAL_2P = 1.10, 1.7

#: name: (module, n, iterations, what n is)
PROGRAMS = {
    "monte_carlo_pi": (monte_carlo_pi, 10_000_000, 3, "samples per iteration"),
    "jacobi": (jacobi, 4000, 20, "unknowns (dense A)"),
    "nbody": (nbody, 2000, 5, "bodies"),
    "nbody_dot": (nbody_dot, 2000, 5, "bodies"),
    "laplace": (laplace, 1200, 100, "grid points per side"),
}

#: the papers' figures (DistNumPy: Kristensen & Vinter 2010; GAiN: Daily & Lewis 2011)
PAPER = {
    "monte_carlo_pi": "DistNumPy: 88 % on 64 cores (Nehalem), 68 % on 32 (Core 2)",
    "jacobi": "DistNumPy: 85 % on 16 cores, 50 % on 64",
    "nbody": "DistNumPy: 91 % on 16 cores, 63 % on 64",
    "nbody_dot": "DistNumPy: 91 % on 16 cores, 63 % on 64",
    "laplace": "GAiN: scales to 2K cores (Fig. 8; no efficiency given)",
}


def _time_numpy(module, n, iterations) -> tuple[float, object]:
    gc.collect()
    t0 = time.perf_counter()
    result = module.run(np, n, iterations)
    return time.perf_counter() - t0, result


def _time_d2o(module, n, iterations, comm) -> tuple[float, object]:
    gc.collect()
    comm.barrier()
    t0 = time.perf_counter()
    result = module.run(dnp, n, iterations)
    return comm.allreduce(time.perf_counter() - t0, op="max"), result


def measure(names) -> dict:
    """Best-of-REPEAT seconds of numpy (rank 0 alone) and d2o.numpy (all ranks) per program;
    on several ranks also of numpy run by every rank at once (the whole problem each): the
    machine's own limit, ``ceiling`` = P x numpy alone / numpy on all P at once."""
    comm = default_comm()
    out = {}
    for name in names:
        module, n, iterations, _ = PROGRAMS[name]
        t_np = t_d2o = t_all = float("inf")
        for _ in range(REPEAT):
            t, r_np = on_rank0(lambda a=(module, n, iterations): _time_numpy(*a), comm)
            t_np = min(t_np, t)
            t, r_d2o = _time_d2o(module, n, iterations, comm)
            t_d2o = min(t_d2o, t)
            if comm.size > 1:
                comm.barrier()
                t, _ = _time_numpy(module, n, iterations)
                t_all = min(t_all, comm.allreduce(t, op="max"))
        ceiling = comm.size * t_np / t_all if comm.size > 1 else 1.0
        out[name] = {
            "numpy": t_np,
            "d2o": t_d2o,
            "ceiling": ceiling,
            "result_numpy": r_np,
            "result_d2o": r_d2o,
        }
        if comm.rank == 0:
            print(
                f"  {name}: numpy {t_np:.3f} s, d2o.numpy on {comm.size} {t_d2o:.3f} s "
                f"(results: numpy {r_np}, d2o {r_d2o})",
                flush=True,
            )
    return out


def _size_label(name: str) -> str:
    _, n, iterations, what = PROGRAMS[name]
    return f"n = {n} {what}, {iterations} iterations"


def print_one(results: dict, nprocs: int) -> None:
    """The table of one run (one process count)."""
    print(f"\n## d2o.numpy on {nprocs} process(es) ({run_label(nprocs)}) against numpy on 1\n")
    print("| program | size | numpy s | d2o.numpy s | speed-up | efficiency | ceiling | paper |")
    print("|---|---|---:|---:|---:|---:|---:|---|")
    for name, r in results.items():
        s = r["numpy"] / r["d2o"]
        print(
            f"| {name} | {_size_label(name)} | {r['numpy']:.3f} | {r['d2o']:.3f} | "
            f"{s:.2f}x | {s / nprocs * 100:.0f} % | {r['ceiling']:.2f}x | {PAPER[name]} |"
        )
    if nprocs > 1:
        print(
            f"\nceiling: {nprocs} x numpy's time alone / its time when all {nprocs} ranks run "
            "numpy's program at once: the speed-up this machine allows without any "
            "communication"
        )


def print_combined(by_count: dict) -> None:
    """One table of the N = 1 and N = 2 runs; each d2o time is set against the numpy time
    measured in the same run (interleaved with it, so under the same machine load)."""
    one, two = by_count["1"], by_count["2"]
    print(f"\n## The programs: numpy (1 process) against d2o.numpy on 1 and 2 ({cores()} cores)\n")
    print(
        "| program | size | numpy s (1p run) | d2o 1p s | d2o 1p / numpy | numpy s (2p run) "
        "| d2o 2p s | speed-up 2p | efficiency 2p | ceiling 2p | d2o 1p / 2p | paper |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    verdicts = []
    for name in one:
        n1, t1 = one[name]["numpy"], one[name]["d2o"]
        n2, t2 = two[name]["numpy"], two[name]["d2o"]
        s2 = n2 / t2
        print(
            f"| {name} | {_size_label(name)} | {n1:.3f} | {t1:.3f} | {t1 / n1:.2f} | {n2:.3f} "
            f"| {t2:.3f} | {s2:.2f}x | {s2 / 2 * 100:.0f} % | {two[name]['ceiling']:.2f}x "
            f"| {t1 / t2:.2f}x | {PAPER[name]} |"
        )
        ok1 = "met" if t1 <= GOAL_1P * n1 else "missed"
        ok2 = "met" if s2 >= GOAL_2P else "missed"
        verdicts.append(f"{name}: 1p within 10 % of numpy {ok1}; 2p >= 1.7x numpy {ok2}")
    print("\nGoals (d2o 1p within 10 % of numpy; d2o 2p >= 1.7x numpy):")
    for v in verdicts:
        print(f"  {v}")


def profile(name: str) -> None:
    """cProfile of one d2o run of ``name`` on every rank; rank 0 prints ranks 0 and 1."""
    comm = default_comm()
    module, n, iterations, _ = PROGRAMS[name]
    module.run(dnp, n, 1)  # warm-up
    prof = cProfile.Profile()
    comm.barrier()
    t0 = time.perf_counter()
    prof.enable()
    module.run(dnp, n, iterations)
    prof.disable()
    t = comm.allreduce(time.perf_counter() - t0, op="max")
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(18)
    texts = comm.allgather(text.getvalue())
    if comm.rank == 0:
        print(f"## cProfile of {name} ({_size_label(name)}) on {comm.size} process(es): {t:.3f} s")
        for r, s in enumerate(texts[:2]):
            print(f"\n### rank {r}\n{s}")


def launch(names) -> None:
    """Run the N = 1 and N = 2 measurements under mpiexec, print them together and record
    them (``RECORD``)."""
    by_count = launch_children(__file__, list(names), COUNTS)
    print_combined(by_count)
    programs = {
        name: {"n": n, "iterations": it, "what": what, "paper": PAPER[name]}
        for name, (_, n, it, what) in PROGRAMS.items()
        if name in names
    }
    options = {"repeat": REPEAT, "programs": programs, "goals": {"1p": GOAL_1P, "2p": GOAL_2P}}
    record(RECORD, by_count, processes=COUNTS, options=options)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("programs", nargs="*", help=f"some of {', '.join(PROGRAMS)} (all)")
    parser.add_argument("--child", action="store_true", help="measure here (under mpiexec)")
    parser.add_argument("--json", help="where rank 0 writes the results (with --child)")
    parser.add_argument("--profile", choices=list(PROGRAMS), help="profile one d2o run")
    args = parser.parse_args()
    names = args.programs or list(PROGRAMS)
    unknown = [n for n in names if n not in PROGRAMS]
    if unknown:
        parser.error(f"unknown program(s) {unknown}; choose from {list(PROGRAMS)}")
    comm = default_comm()
    if args.profile:
        profile(args.profile)
        return
    if not measures_here(args.child, comm):
        launch(names)
        return
    measure_and_report(
        comm,
        lambda: f"# {comm.size} process(es): measuring {', '.join(names)}",
        lambda: measure(names),
        lambda results: print_one(results, comm.size),
        args.json,
    )


if __name__ == "__main__":
    main()
