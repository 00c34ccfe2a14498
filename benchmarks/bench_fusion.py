"""Deferred execution and fused kernels (the ``lazy`` option) against numpy (not a test).

Each figure is measured in one run, on one process (``D2O_MPI=0`` or ``mpiexec -n 1``;
``mpiexec -n 2`` runs the d2o columns on two ranks, numpy and numexpr on rank 0 alone):

* the 4096 x 4096 Jacobi stencil ``new[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1]
  + u[1:-1, :-2] + u[1:-1, 2:])`` (then ``u, new = new, u``);
* the seed programs of ``examples/programs`` (GAiN's Laplace, DistNumPy's Jacobi,
  N-body and Monte Carlo pi) as whole programs, ``run(np, n, iterations)``.

Columns: numpy's time; numexpr alone (the stencil written as one ``numexpr.evaluate``
into the target); d2o.numpy eager (``lazy=False``), lazy with the numexpr engine alone
(``D2O_FUSION_ENGINE=numexpr``: the first version's figures) and lazy with the default
engine (numba loops for pieces of 65536 elements or more, `d2o.ops.loops`); speed-ups
against numpy; and the STREAM bound: the bytes each step must touch (the
stencil reads ``u`` and writes ``new``: 16 bytes per point) divided by the triad
bandwidth (``a = b + s * c``, 24 bytes per element, one thread, measured in the same
run).  numexpr runs ``D2O_FUSION_THREADS`` threads (default here 1: one core per
process; the figures compare one core with one core).  The machine may be shared:
the load average is printed with the table.  Also printed: the first lazy stencil
step's time (numba's import and the kernel's compilation, or its load from numba's
on-disk cache, included) against a later step's.

    D2O_MPI=0 python benchmarks/bench_fusion.py [--quick]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time

os.environ.setdefault("D2O_FUSION_THREADS", "1")

import numba  # noqa: E402
import numexpr as ne  # noqa: E402
import numpy as np  # noqa: E402
from _harness import REPO, record  # noqa: E402  (puts the repository on sys.path)

sys.path.insert(0, os.path.join(REPO, "examples", "programs"))

import jacobi  # noqa: E402
import laplace  # noqa: E402
import monte_carlo_pi  # noqa: E402
import nbody  # noqa: E402

import d2o  # noqa: E402
import d2o.numpy as dnp  # noqa: E402

ne.set_num_threads(int(os.environ["D2O_FUSION_THREADS"]))
RECORD = "fusion"  # docs/_data/bench/fusion.json (full runs; $D2O_BENCH_DIR moves it)
COMM = d2o.default_comm()
RANK = COMM.rank


def best(fn, repeat: int, sync: bool = True) -> float:
    """The best wall-clock time of ``repeat`` calls (``sync``: all ranks, from a barrier;
    else this rank alone)."""
    times = []
    for _ in range(repeat):
        if sync:
            COMM.barrier()
        t = time.perf_counter()
        fn()
        if sync:
            COMM.barrier()
        times.append(time.perf_counter() - t)
    return min(times)


def triad_bandwidth(n: int = 1 << 24) -> float:
    """Bytes per second of ``a = b + s * c`` (one pass, numexpr, one thread)."""
    b, c, a = np.ones(n), np.full(n, 2.0), np.empty(n)
    s = 3.0
    threads = ne.set_num_threads(1)
    env = {"b": b, "c": c, "s": s}
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        ne.evaluate("b + s * c", local_dict=env, out=a)
        times.append(time.perf_counter() - t0)
    t = min(times)
    ne.set_num_threads(threads)
    return 24 * n / t


def stencil_numpy(u, new, steps):
    for _ in range(steps):
        new[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])
        u, new = new, u
    return u


def stencil_numexpr(u, new, steps):
    for _ in range(steps):
        env = {"a": u[:-2, 1:-1], "b": u[2:, 1:-1], "c": u[1:-1, :-2], "d": u[1:-1, 2:]}
        ne.evaluate("0.25 * (a + b + c + d)", local_dict=env, out=new[1:-1, 1:-1])
        u, new = new, u
    return u


def stencil_d2o(u, new, steps):
    for _ in range(steps):
        new[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])
        u, new = new, u
    d2o.evaluate()
    return u


@contextlib.contextmanager
def engine(mode: str):
    """``D2O_FUSION_ENGINE=numexpr`` for the mode "numexpr", the default otherwise."""
    old = os.environ.pop("D2O_FUSION_ENGINE", None)
    if mode == "numexpr":
        os.environ["D2O_FUSION_ENGINE"] = "numexpr"
    try:
        yield
    finally:
        os.environ.pop("D2O_FUSION_ENGINE", None)
        if old is not None:
            os.environ["D2O_FUSION_ENGINE"] = old


def on_rank0(fn):
    """``fn()`` timed on rank 0 alone (numpy, numexpr); the others wait."""
    t = fn() if RANK == 0 else 0.0
    return COMM.bcast(t, root=0) if COMM.size > 1 else t


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke test)")
    args = parser.parse_args()
    quick = args.quick
    n, steps, repeat = (512, 3, 2) if quick else (4096, 10, 3)
    bw = on_rank0(lambda: triad_bandwidth(1 << (20 if quick else 24)))
    rows = []

    # -- the 4096^2 stencil ----------------------------------------------------------
    a = np.random.default_rng(0).random((n, n))
    u0, new0 = a.copy(), a.copy()  # (allocated and touched outside the timings)
    t_np = on_rank0(lambda: best(lambda: stencil_numpy(u0, new0, steps), repeat, False))
    t_ne = on_rank0(lambda: best(lambda: stencil_numexpr(u0, new0, steps), repeat, False))
    times = {}
    first = later = 0.0
    for mode in ("eager", "numexpr", "lazy"):
        with d2o.options(lazy=mode != "eager"), engine(mode):
            u, new = dnp.asarray(a.copy()), dnp.asarray(a.copy())
            if mode == "lazy":
                first = best(lambda u=u, new=new: stencil_d2o(u, new, 1), 1)
                later = best(lambda u=u, new=new: stencil_d2o(u, new, 1), 1)
            times[mode] = best(lambda u=u, new=new: stencil_d2o(u, new, steps), repeat)
    bound = steps * 16 * n * n / bw / COMM.size
    rows.append((f"stencil {n}^2 x{steps}", t_np, t_ne, *times.values(), bound))

    # -- the seed programs -------------------------------------------------------------
    programs = {
        "laplace": (laplace, 300 if quick else 1200, 5 if quick else 30),
        "jacobi": (jacobi, 500 if quick else 2000, 3 if quick else 10),
        "nbody": (nbody, 300 if quick else 1000, 2 if quick else 5),
        "monte_carlo_pi": (monte_carlo_pi, 100_000 if quick else 5_000_000, 2),
    }
    for name, (mod, size, iters) in programs.items():
        t_np = on_rank0(lambda mod=mod, size=size, iters=iters: best(
            lambda: mod.run(np, size, iters), repeat, False))  # fmt: skip
        times = {}
        for mode in ("eager", "numexpr", "lazy"):
            with d2o.options(lazy=mode != "eager"), engine(mode):
                times[mode] = best(lambda mod=mod, size=size, iters=iters: mod.run(
                    dnp, size, iters), repeat)  # fmt: skip
        b = None
        if name == "laplace":  # per sweep: read u, write u, copy u_old, u - u_old, dot
            b = iters * 8 * size * size * 6 / bw / COMM.size
        rows.append((f"{name} n={size} x{iters}", t_np, None, *times.values(), b))

    if RANK == 0:
        load = os.getloadavg()
        print(f"d2o fusion benchmark: {COMM.size} process(es), numexpr {ne.__version__} "
              f"({ne.get_num_threads()} thread), numba {numba.__version__}, "
              f"triad {bw / 1e9:.2f} GB/s (one core), "
              f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")  # fmt: skip
        print(f"first lazy stencil step {first:.3f} s (compile or cache load included), "
              f"a later one {later:.3f} s")  # fmt: skip
        print(f"{'case':<26}{'numpy':>9}{'numexpr':>9}{'eager':>9}{'lazy-ne':>9}{'lazy':>9}"
              f"{'lazy/np':>9}{'eager/np':>9}{'bound':>9}{'lazy/bound':>11}")  # fmt: skip
        for case, tn, tx, te, tq, tl, tb in rows:
            nx = f"{tx:9.3f}" if tx is not None else f"{'-':>9}"
            bd = f"{tb:9.3f}" if tb is not None else f"{'-':>9}"
            rb = f"{tl / tb:11.2f}" if tb is not None else f"{'-':>11}"
            print(f"{case:<26}{tn:9.3f}{nx}{te:9.3f}{tq:9.3f}{tl:9.3f}{tn / tl:9.2f}x"
                  f"{tn / te:8.2f}x{bd}{rb}")  # fmt: skip
        keys = ("numpy_s", "numexpr_s", "eager_s", "lazy_numexpr_s", "lazy_s", "bound_s")
        results = {case: dict(zip(keys, r)) for case, *r in rows}
        results["triad_bytes_per_s"] = bw  # type: ignore[assignment]
        results["first_step_s"] = first  # type: ignore[assignment]
        if not quick:
            record(RECORD, results, processes=[COMM.size])


if __name__ == "__main__":
    main()
