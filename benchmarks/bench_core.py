"""d2o's speed relative to numpy, per array size (the D2O paper's Table 3).

Prints a markdown table: for each operation and array size, d2o's speed as a
percentage of numpy's (``time_numpy / time_d2o * 100``; 100 % = as fast as
numpy), then the raw per-call times for the smallest size (the per-call
overhead).

Strong scaling: on N MPI ranks d2o works on the global array of n elements
spread over the N ranks, and is compared with numpy on ONE process doing the
whole array.  d2o's time per call is the maximum over the ranks (each
measurement block starts with a Barrier), reported by rank 0.

Run::

    python benchmarks/bench_core.py                  # 1 and 2 ranks (mpiexec), both recorded
    D2O_MPI=0 python benchmarks/bench_core.py        # one process without MPI, printed only
    mpiexec -n 2 python benchmarks/bench_core.py     # 2 ranks, printed only
    python benchmarks/bench_core.py --quick          # a fast, rough run
    python benchmarks/bench_core.py --max-log2 20

Run plainly (no mpiexec, no ``D2O_MPI``, as ``make bench`` does) it launches itself under
``mpiexec -n 1`` and ``-n 2`` (``--child``), prints both tables and writes them to
``docs/_data/bench/core.json``, which the performance page shows.

This is a benchmark, not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402
from _harness import launch_children, measures_here, record  # noqa: E402

import d2o  # noqa: E402
from d2o import distributed_data_object as D2O  # noqa: E402

RECORD = "core"  # docs/_data/bench/core.json
COUNTS = (1, 2)

# name, numpy statement, d2o statement; ``a``/``ai`` are numpy arrays, ``o``/``oi`` d2o
# objects, ``x`` a fresh reference to ``a``/``o`` for in-place operations.
OPS = [
    ("initialization", "np.empty(n)", "D2O(global_shape=(n,))"),
    ("copy_empty", "np.empty_like(a)", "o.copy_empty()"),
    ("max", "a.max()", "o.max()"),
    ("sum", "a.sum()", "o.sum()"),
    # numpy returns a view; d2o returns a new distributed array, so compare with a copy
    ("obj[::-2]", "a[::-2].copy()", "o[::-2]"),
    ("copy", "a.copy()", "o.copy()"),
    ("obj+0", "a + 0", "o + 0"),
    ("obj+obj", "a + a", "o + o"),
    ("obj+=obj", "x += x", "x += x"),
    ("sqrt", "np.sqrt(a)", "np.sqrt(o)"),
    ("bincount", "np.bincount(ai)", "oi.bincount()"),
]


def _compile(stmt: str, inplace_of: str):
    """A function running ``stmt`` ``number`` times (timeit's trick, without timeit's setup)."""
    src = (
        "def inner(number, g):\n"
        f"    np, n, D2O = g['np'], g['n'], g['D2O']\n"
        f"    a, ai, o, oi = g['a'], g['ai'], g['o'], g['oi']\n"
        f"    x = g['{inplace_of}']\n"
        "    for _ in range(number):\n"
        f"        {stmt}\n"
    )
    ns: dict = {}
    exec(src, ns)
    return ns["inner"]


class Timer:
    """Autorange + best-of-repeats timing, lock-stepped over all ranks of ``comm``."""

    def __init__(self, comm, min_time: float, repeats: int, clock) -> None:
        self.comm, self.min_time, self.repeats, self.clock = comm, min_time, repeats, clock

    def block(self, fn, number: int, g: dict, collective: bool) -> float:
        comm = self.comm
        if collective:
            comm.barrier()
        clock = self.clock
        t0 = clock()
        fn(number, g)
        dt = clock() - t0
        # every rank needs the same figure to take the same decisions
        return comm.allreduce(dt, op="max") if collective else dt

    def autorange(self, fn, g: dict, collective: bool) -> int:
        """Calls per block so that a block lasts at least ``min_time`` (1, 2, 5, 10, 20, ...)."""
        number = 1
        while True:
            for k in (1, 2, 5):
                if self.block(fn, number * k, g, collective) >= self.min_time:
                    return number * k
            number *= 10

    def per_call(self, fn, number: int, g: dict, collective: bool) -> float:
        return self.block(fn, number, g, collective) / number


def run(max_log2: int, quick: bool, clock: str = "cpu") -> dict | None:
    """Measure, print the tables on rank 0 and return what they show (rank 0; None on the
    others)."""
    comm = d2o.default_comm()
    rank, size = comm.rank, comm.size
    np.seterr(all="ignore")  # obj += obj overflows to inf after ~1000 calls; harmless
    sizes = sorted({*range(0, max_log2 + 1, 2), *(k for k in (16, 20) if k <= max_log2)})
    if quick:
        sizes = [k for k in sizes if k % 4 == 0 or k in (16, 20)]
    timer = Timer(
        comm,
        0.02 if quick else 0.05,
        5 if quick else 7,
        time.process_time if clock == "cpu" else time.perf_counter,
    )
    pct: dict = {name: {} for name, _, _ in OPS}
    raw: dict = {}
    rng = np.random.default_rng(42)
    for k in sizes:
        n = 2**k
        a = rng.random(n)
        ai = rng.integers(0, 100, n)
        g = {"np": np, "n": n, "D2O": D2O, "a": a, "ai": ai, "o": None, "oi": None}
        g["o"] = D2O(global_data=a)
        g["oi"] = D2O(global_data=ai)
        for name, np_stmt, d2o_stmt in OPS:
            g["a"] = a.copy()
            g["o"] = D2O(global_data=a)
            np_fn, d2o_fn = _compile(np_stmt, "a"), _compile(d2o_stmt, "o")
            # an operation d2o does not (yet) have is 'n/a'
            err = None
            try:
                d2o_fn(1, g)
            except Exception as exc:
                err = exc
            failed = comm.allreduce(err is not None, op="lor")
            # numpy: ONE process does the whole array while the others wait (rank 0 decides);
            # numpy and d2o blocks alternate so that both see the same machine load
            n_np = timer.autorange(np_fn, g, False) if rank == 0 else None
            n_np = comm.bcast(n_np, root=0)
            n_d2o = None if failed else timer.autorange(d2o_fn, g, True)
            t_np = t_d2o = float("inf")
            for _ in range(timer.repeats):
                comm.barrier()
                if rank == 0:
                    t_np = min(t_np, timer.per_call(np_fn, n_np, g, False))
                if not failed:
                    t_d2o = min(t_d2o, timer.per_call(d2o_fn, n_d2o, g, True))
            t_np = comm.bcast(t_np, root=0)
            pct[name][k] = None if failed else t_np / t_d2o * 100.0
            if k == sizes[0]:
                raw[name] = (t_np, None if failed else t_d2o)
        if rank == 0:
            print(f"  [2^{k} done]", file=sys.stderr, flush=True)
    if rank != 0:
        return None
    _report(pct, raw, sizes, size, quick, clock)
    return {
        "processes": size,
        "mpi": "mpi4py" if d2o.core.comm.have_mpi() else "no MPI (serial stand-in)",
        "clock": clock,
        "repeats": timer.repeats,
        "sizes_log2": sizes,
        "percent": {name: [pct[name].get(k) for k in sizes] for name, _, _ in OPS},
        "per_call_s": {name: list(raw.get(name, (None, None))) for name, _, _ in OPS},
    }


def _fmt(v: float | None) -> str:
    if v is None:
        return "n/a"
    if v >= 90:
        return f"**{v:.0f}**"
    return f"{v:.1f}" if v < 10 else f"{v:.0f}"


def _report(pct: dict, raw: dict, sizes: list, nprocs: int, quick: bool, clock: str) -> None:
    mpi = "mpi4py" if d2o.core.comm.have_mpi() else "no MPI (serial stand-in)"
    print(
        f"### d2o vs numpy, {nprocs} process{'es' if nprocs > 1 else ''} ({mpi})"
        + (" — quick run" if quick else "")
    )
    print()
    print(
        "d2o's speed as a percentage of numpy's (time_numpy / time_d2o x 100; 100 % = as fast "
        "as numpy; bold: >= 90 %)."
    )
    if nprocs > 1:
        print(
            f"Strong scaling: d2o spreads n elements over {nprocs} ranks and is compared with "
            "numpy on ONE process doing the whole array; d2o's time is the slowest rank's."
        )
    print(
        f"numpy {np.__version__}, Python {platform.python_version()}, {platform.machine()}, "
        f"best of {5 if quick else 7} timeit-style blocks, numpy and d2o alternating, "
        f"{'CPU time of the process' if clock == 'cpu' else 'wall-clock time'}."
    )
    print()
    print("| operation | " + " | ".join(f"2^{k}" for k in sizes) + " |")
    print("|---|" + "---:|" * len(sizes))
    for name, _, _ in OPS:
        print(f"| {name} | " + " | ".join(_fmt(pct[name].get(k)) for k in sizes) + " |")
    print()
    print(f"Per-call time at n = 2^{sizes[0]} (µs; d2o - numpy = d2o's overhead per call):")
    print()
    print("| operation | numpy µs | d2o µs | overhead µs |")
    print("|---|---:|---:|---:|")
    for name, _, _ in OPS:
        t_np, t_d = raw.get(name, (None, None))
        if t_d is None:
            print(f"| {name} | {t_np * 1e6:.2f} | n/a | n/a |")
        else:
            print(f"| {name} | {t_np * 1e6:.2f} | {t_d * 1e6:.2f} | {(t_d - t_np) * 1e6:.2f} |")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--max-log2", type=int, default=22, help="largest size 2^k (default 22)")
    p.add_argument("--quick", action="store_true", help="fewer sizes, shorter timings")
    p.add_argument(
        "--clock",
        choices=("cpu", "wall"),
        default="cpu",
        help="cpu: process CPU time (robust on a shared machine; MPI waits spin, so they "
        "count); wall: perf_counter",
    )
    p.add_argument("--child", action="store_true", help="measure here (under mpiexec)")
    p.add_argument("--json", help="where rank 0 writes the results (with --child)")
    args = p.parse_args(argv)
    if not measures_here(args.child, d2o.default_comm()):
        forward = [f"--max-log2={args.max_log2}", f"--clock={args.clock}"]
        forward += ["--quick"] if args.quick else []
        by_count = launch_children(__file__, forward, COUNTS)
        options = {"max_log2": args.max_log2, "clock": args.clock}
        record(
            RECORD,
            by_count,
            processes=COUNTS,
            quick=args.quick or args.max_log2 < 22,
            options=options,
        )
        return
    results = run(args.max_log2, args.quick, args.clock)
    if args.json and results is not None:
        with open(args.json, "w") as f:
            json.dump(results, f)


if __name__ == "__main__":
    main()
