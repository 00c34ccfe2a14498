"""d2o.numpy's sort, unique and median of a whole 1-d array against numpy's (not a test).

For float64 and int64 arrays of 2**24 elements (``--n`` to choose, ``--quick`` for 2**20):
numpy's ``np.sort(a)``, ``np.unique(a)`` and ``np.median(a)`` on one process, and
d2o.numpy's ``dnp.sort(x)``, ``dnp.unique(x)`` and ``dnp.median(x)`` of the same values on
the default ('equal') distribution.  Every rank builds the global array from the same seed
(``numpy.random.default_rng(SEED)``: float64 standard normal; int64 uniform in [-n, n),
so some values repeat), makes ``x = dnp.asarray(a)`` and drops its global copy; rank 0
keeps its copy for numpy's calls.  Three ways to run it:

* ``D2O_MPI=0 python benchmarks/bench_sort.py``: one process without MPI;
* ``mpiexec -n N python benchmarks/bench_sort.py``: d2o.numpy on N ranks;
* ``python benchmarks/bench_sort.py`` (no mpiexec, no ``D2O_MPI``): launches the
  second form with N = 1 and 2 (``--child``, results passed back through a JSON
  file), prints one table of both and writes them to ``docs/_data/bench/sort.json``
  (``make bench``; the performance page shows it).

numpy is measured in the same run: rank 0 times the numpy call alone while the other
ranks sleep (polling a non-blocking barrier every 2 ms, so that they take no core from
it); then all ranks time the d2o.numpy call, from a barrier to the slowest rank's end
(only the call: the input exists before, the result is dropped after).  numpy and d2o
alternate, ``REPEAT`` times each; a figure is the best of them (numpy's calls stop
repeating once they have taken ``BUDGET`` seconds in all: numpy's int64 unique, below).
``OMP_NUM_THREADS=OPENBLAS_NUM_THREADS=1`` (set for the children; set it yourself for
the direct forms).  All times are wall-clock.  Once per dtype and function, outside the
timing, rank 0 checks d2o's result against numpy's (the "same" column).

Columns: speed-up = numpy's time / d2o's time.  Ceiling (on N > 1 ranks): every rank also
runs numpy's call on the whole array at the same time; N x numpy's time alone / that
time is the speed-up the machine itself allows (shared memory bandwidth, shared or busy
cores) before any communication.  Goals: on 2 processes, ``dnp.sort`` at least 1.5x
numpy's ``np.sort``, and ``dnp.median`` faster than ``dnp.sort`` (a selection, not a
sort).  Other load on the machine shows in every figure: run it idle.  (numpy >= 2.3
takes a hash table for ``np.unique`` of integers, slow when most values differ, as in
the int64 array here: that row compares with numpy's hashing, not with its sort.)
"""

from __future__ import annotations

import argparse
import gc
import time

import numpy as np
from _harness import (  # (importing it puts the repository on sys.path)
    cores,
    launch_children,
    measure_and_report,
    measures_here,
    on_rank0,
    record,
    run_label,
)

import d2o.numpy as dnp  # noqa: E402
from d2o import default_comm  # noqa: E402

RECORD = "sort"  # docs/_data/bench/sort.json
REPEAT = 5
BUDGET = 10.0  # seconds: a numpy call is timed again only while its runs took less
COUNTS = (1, 2)
SEED = 20240601
N_DEFAULT = 1 << 24
N_QUICK = 1 << 20
DTYPES = ("float64", "int64")
#: name: (numpy's call, d2o.numpy's call)
FUNCS = {
    "sort": (np.sort, dnp.sort),
    "unique": (np.unique, dnp.unique),
    "median": (np.median, dnp.median),
}
SORT_GOAL = 1.5  # dnp.sort on 2 processes against np.sort


def _global(dtype: str, n: int) -> np.ndarray:
    """The global array, the same on every rank (built from ``SEED``)."""
    rng = np.random.default_rng(SEED)
    if dtype == "float64":
        return rng.standard_normal(n)
    return rng.integers(-n, n, size=n, dtype=np.int64)


def _time_numpy(fn, a) -> float:
    gc.collect()
    t0 = time.perf_counter()
    r = fn(a)
    t = time.perf_counter() - t0
    del r
    return t


def _time_d2o(fn, x, comm) -> float:
    gc.collect()
    comm.barrier()
    t0 = time.perf_counter()
    r = fn(x)
    t = comm.allreduce(time.perf_counter() - t0, op="max")
    del r
    return t


def _same(name: str, a, x, comm) -> bool:
    """d2o's result equals numpy's (rank 0 compares; every rank gets the answer)."""
    np_fn, d2o_fn = FUNCS[name]
    r = d2o_fn(x)
    full = r.gather(0) if hasattr(r, "gather") else r
    ok = None
    if comm.rank == 0:
        ok = bool(np.array_equal(np.asarray(full), np_fn(a)))
    del r, full
    return comm.bcast(ok, root=0)


def measure(n: int, repeat: int) -> dict:
    """Best-of-``repeat`` seconds of numpy (rank 0 alone) and d2o.numpy (all ranks) per
    dtype and function; on several ranks also the ceiling (numpy on every rank at once)."""
    comm = default_comm()
    out: dict = {}
    for dtype in DTYPES:
        g = _global(dtype, n)
        x = dnp.asarray(g)
        ref = g if comm.rank == 0 else None  # only rank 0 keeps the global copy (for numpy)
        del g
        gc.collect()
        res = {}
        for name, (np_fn, d2o_fn) in FUNCS.items():
            d2o_fn(x)  # warm-up (first-call imports and caches)
            t_np = t_d2o = float("inf")
            spent = 0.0  # numpy's seconds so far (the same on every rank: broadcast)
            for _ in range(repeat):
                if spent < BUDGET:
                    t = on_rank0(lambda f=np_fn, r=ref: _time_numpy(f, r), comm)
                    t_np, spent = min(t_np, t), spent + t
                t_d2o = min(t_d2o, _time_d2o(d2o_fn, x, comm))
            same = _same(name, ref, x, comm)
            res[name] = {"numpy": t_np, "d2o": t_d2o, "ceiling": 1.0, "same": same}
            if comm.rank == 0:
                print(
                    f"  {dtype} {name}: numpy {t_np:.4f} s, d2o.numpy on {comm.size} "
                    f"{t_d2o:.4f} s ({t_np / t_d2o:.2f}x; same result: {same})",
                    flush=True,
                )
        del x
        if comm.size > 1:  # every rank runs numpy on the whole array at once
            ref = ref if ref is not None else _global(dtype, n)
            for name, (np_fn, _) in FUNCS.items():
                t_all, spent = float("inf"), 0.0
                for _ in range(repeat):
                    if spent >= BUDGET:
                        break
                    comm.barrier()
                    t = comm.allreduce(_time_numpy(np_fn, ref), op="max")
                    t_all, spent = min(t_all, t), spent + t
                res[name]["ceiling"] = comm.size * res[name]["numpy"] / t_all
        del ref
        gc.collect()
        out[dtype] = res
    return out


def _goals(res: dict, nprocs: int) -> list[str]:
    """The goal verdicts of one run's results of one dtype."""
    s = res["sort"]["numpy"] / res["sort"]["d2o"]
    tm, ts = res["median"]["d2o"], res["sort"]["d2o"]
    ok1 = "met" if s >= SORT_GOAL else "missed"
    ok2 = "met" if tm < ts else "missed"
    return [
        f"sort on {nprocs}p >= {SORT_GOAL}x numpy: {ok1} ({s:.2f}x)",
        f"median faster than sort on {nprocs}p: {ok2} (median {tm:.4f} s, sort {ts:.4f} s)",
    ]


def print_one(results: dict, nprocs: int, n: int) -> None:
    """The table of one run (one process count)."""
    print(
        f"\n## sort, unique, median of n = {n} elements: d2o.numpy on {nprocs} process(es) "
        f"({run_label(nprocs)}) against numpy on 1\n"
    )
    print("| dtype | function | numpy s | d2o.numpy s | speed-up | efficiency | ceiling | same |")
    print("|---|---|---:|---:|---:|---:|---:|---|")
    for dtype, res in results.items():
        for name, r in res.items():
            s = r["numpy"] / r["d2o"]
            print(
                f"| {dtype} | {name} | {r['numpy']:.4f} | {r['d2o']:.4f} | {s:.2f}x | "
                f"{s / nprocs * 100:.0f} % | {r['ceiling']:.2f}x | {'yes' if r['same'] else 'NO'} |"
            )
    if nprocs > 1:
        print(
            f"\nceiling: {nprocs} x numpy's time alone / its time when all {nprocs} ranks run "
            "numpy's call on the whole array at once: the speed-up this machine allows "
            "without any communication"
        )
        print(
            f"\nGoals (stated for 2 processes: sort >= {SORT_GOAL}x numpy; d2o median faster "
            f"than d2o sort), here on {nprocs}:"
        )
        for dtype, res in results.items():
            for v in _goals(res, nprocs):
                print(f"  {dtype}: {v}")


def print_combined(by_count: dict, n: int) -> None:
    """One table of the N = 1 and N = 2 runs; each d2o time is set against the numpy time
    measured in the same run (interleaved with it, so under the same machine load)."""
    one, two = by_count["1"], by_count["2"]
    print(
        f"\n## sort, unique, median of n = {n} elements: numpy (1 process) against "
        f"d2o.numpy on 1 and 2 ({cores()} cores)\n"
    )
    print(
        "| dtype | function | numpy s (1p run) | d2o 1p s | numpy / d2o 1p | numpy s (2p run) "
        "| d2o 2p s | numpy / d2o 2p | ceiling 2p | d2o 1p / 2p | same |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for dtype in one:
        for name in one[dtype]:
            r1, r2 = one[dtype][name], two[dtype][name]
            n1, t1, n2, t2 = r1["numpy"], r1["d2o"], r2["numpy"], r2["d2o"]
            same = "yes" if r1["same"] and r2["same"] else "NO"
            print(
                f"| {dtype} | {name} | {n1:.4f} | {t1:.4f} | {n1 / t1:.2f}x | {n2:.4f} "
                f"| {t2:.4f} | {n2 / t2:.2f}x | {r2['ceiling']:.2f}x | {t1 / t2:.2f}x | {same} |"
            )
    print(f"\nGoals (on 2 processes: sort >= {SORT_GOAL}x numpy; d2o median faster than d2o sort):")
    for dtype in two:
        for v in _goals(two[dtype], 2):
            print(f"  {dtype}: {v}")


def launch(argv: list[str], n: int, repeat: int) -> None:
    """Run the N = 1 and N = 2 measurements under mpiexec, print them together and record
    them (``RECORD``)."""
    by_count = launch_children(__file__, argv, COUNTS)
    print_combined(by_count, n)
    options = {"n": n, "repeat": repeat, "budget_s": BUDGET, "goals": {"sort_2p": SORT_GOAL}}
    record(RECORD, by_count, processes=COUNTS, quick=n < N_DEFAULT, options=options)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, help=f"elements of the array ({N_DEFAULT})")
    parser.add_argument("--quick", action="store_true", help=f"n = {N_QUICK}")
    parser.add_argument("--repeat", type=int, default=REPEAT, help=f"best of ({REPEAT})")
    parser.add_argument("--child", action="store_true", help="measure here (under mpiexec)")
    parser.add_argument("--json", help="where rank 0 writes the results (with --child)")
    args = parser.parse_args()
    n = args.n if args.n is not None else (N_QUICK if args.quick else N_DEFAULT)
    if n < 1 or args.repeat < 1:
        parser.error("--n and --repeat must be positive")
    comm = default_comm()
    if not measures_here(args.child, comm):
        launch([f"--n={n}", f"--repeat={args.repeat}"], n, args.repeat)
        return
    measure_and_report(
        comm,
        lambda: f"# {comm.size} process(es): sort, unique, median of n = {n}",
        lambda: measure(n, args.repeat),
        lambda results: print_one(results, comm.size, n),
        args.json,
    )


if __name__ == "__main__":
    main()
