"""Deferred execution and fused kernels (the ``lazy`` option) against numpy (not a test).

``python benchmarks/bench_fusion.py`` launches ``mpiexec -n 1`` and ``mpiexec -n 2``
children (``--child``; ``D2O_MPI=0`` measures in this process alone), prints both
tables and records them.  In each, numpy and numexpr run on rank 0 alone (one core),
the d2o columns on every rank:

* the 4096 x 4096 Jacobi stencil ``new[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1]
  + u[1:-1, :-2] + u[1:-1, 2:])`` (then ``u, new = new, u``);
* the seed programs of ``examples/programs`` (GAiN's Laplace, DistNumPy's Jacobi,
  N-body and Monte Carlo pi) as whole programs, ``run(np, n, iterations)``.

Columns: numpy's time; numexpr alone (the stencil written as one ``numexpr.evaluate``
into the target); d2o.numpy eager (``lazy=False``), lazy with the numexpr engine alone
(``D2O_FUSION_ENGINE=numexpr``) and lazy with the default engine (numba loops for
pieces of 65536 elements or more, `d2o.ops.loops`); speed-ups against numpy; and the
bound each program cannot go below, measured in the same run:

* the stencil and Laplace: the STREAM bound, the bytes each step must touch (the
  stencil reads ``u`` and writes ``new``: 16 bytes per point) divided by the triad
  bandwidth (``a = b + s * c``, 24 bytes per element, a compiled loop) of the cores in
  use: one rank alone, or every rank at once;
* Jacobi, N-body and Monte Carlo pi: the floor, the work fusion cannot remove, at
  numpy's own speed on one core divided by the process count: the setup's ``cos`` of
  n x n values (Jacobi), the three n x n matrix-vector products per step (N-body: its
  ``r2 ** -1.5`` is now computed from a square root, `d2o.ops.loops.HALF_POWERS`, and
  fused), the random numbers (Monte Carlo).

Each time is the best of 5 runs (2 with ``--quick``; a floor's of 3), numpy's as d2o's,
the columns measured in turn, round by round (`interleaved`): on this two-core virtual
machine the cores' speed varies by up to 1.8x from one second to the next (a
pure-Python loop, measured), so that a slow spell falls on every column alike; over two
processes the slower core sets the time.  numexpr runs ``D2O_FUSION_THREADS`` threads (default here 1: one core per
process; the figures compare one core with one core).  The machine may be shared: the
load average is printed with the table.  Also printed: the first lazy stencil step's
time (numba's import and the kernel's compilation, or its load from numba's on-disk
cache) against a later step's.

    python benchmarks/bench_fusion.py [--quick]
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
from _harness import (  # noqa: E402  (puts the repository on sys.path)
    REPO,
    launch_children,
    measure_and_report,
    measures_here,
    record,
)

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


@numba.njit(nogil=True)
def _triad(a, b, c, s):  # pragma: no cover - compiled
    for i in range(a.shape[0]):
        a[i] = b[i] + s * c[i]


def triad_bandwidth(n: int = 1 << 24, together: bool = False) -> float:
    """Bytes per second of ``a = b + s * c`` (a compiled loop, one thread): on rank 0
    alone, or (``together``) on every rank at once, summed."""
    b, c, a = np.ones(n), np.full(n, 2.0), np.empty(n)
    _triad(a, b, c, 3.0)
    if not together:
        t = min(_timed(lambda: _triad(a, b, c, 3.0)) for _ in range(5))
        return 24 * n / t
    t = best(lambda: _triad(a, b, c, 3.0), 5)
    return 24 * n * COMM.size / t


def _timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def _idle_bcast(t: float) -> float:
    """Rank 0's ``t`` on every rank, the others sleeping meanwhile (not spinning in MPI, as
    a blocking collective's wait does: a spinning rank takes a share of the core or the
    memory that rank 0's timing is using)."""
    req = COMM.mpi.Ibarrier()
    if RANK:
        while not req.Test():
            time.sleep(0.0005)
    else:
        req.Wait()
    return COMM.bcast(t, root=0)


def interleaved(columns: dict, repeat: int) -> dict:
    """The best time of each column over ``repeat`` rounds, each round running every
    column once in turn, so that a change in the machine's speed falls on all of them
    alike.  ``columns``: name -> (fn, together): ``together`` times every rank from a
    barrier, else rank 0 alone while the others wait (sleeping: `_idle_bcast`)."""
    out = dict.fromkeys(columns, float("inf"))
    for _ in range(repeat):
        for name, (fn, together) in columns.items():
            if together:
                t = best(fn, 1)
            else:
                t = _timed(fn) if RANK == 0 else 0.0
                t = _idle_bcast(t) if COMM.size > 1 else t
            out[name] = min(out[name], t)
    return out


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


#: the d2o columns: eager (``lazy=False``), lazy with numexpr alone, lazy (the default)
MODES = ("eager", "numexpr", "lazy")


def in_mode(mode: str, fn, *args):
    """``fn(*args)`` in one of `MODES`, its pending work evaluated before it returns."""
    with d2o.options(lazy=mode != "eager"), engine(mode):
        res = fn(*args)
        d2o.evaluate()
    return res


def on_rank0(fn):
    """``fn()`` timed on rank 0 alone (numpy, numexpr); the others wait (sleeping)."""
    t = fn() if RANK == 0 else 0.0
    return _idle_bcast(t) if COMM.size > 1 else t


def _floors(quick: bool, programs: dict) -> dict:
    """Per program, the time of the work fusion cannot remove (module notes), numpy on
    rank 0 alone, divided by the process count."""
    out: dict = {}
    n = programs["jacobi"][1]
    i = np.arange(n, dtype=np.float64)
    b = (i[:, np.newaxis] - i) * (4.0 / n)
    out["jacobi"] = on_rank0(lambda: best(lambda: np.cos(b), 3, False))
    n, steps = programs["nbody"][1:]
    a, v = np.random.default_rng(1).random((n, n)), np.ones(n)
    out["nbody"] = 3 * steps * on_rank0(lambda: best(lambda: a @ v, 3, False))
    n, iters = programs["monte_carlo_pi"][1:]
    rng = np.random.default_rng(0)
    out["monte_carlo_pi"] = iters * on_rank0(
        lambda: best(lambda: (rng.random(n), rng.random(n)), 3, False)
    )
    return {k: v / COMM.size for k, v in out.items()}


def measure(quick: bool) -> dict:
    """Every case's figures on this run's ranks (see the module notes)."""
    n, steps, repeat = (512, 3, 2) if quick else (4096, 10, 5)
    size = 1 << (20 if quick else 24)
    bw1 = on_rank0(lambda: triad_bandwidth(size))
    bw = triad_bandwidth(size, together=True) if COMM.size > 1 else bw1
    rows = {}

    # -- the 4096^2 stencil ----------------------------------------------------------
    a = np.random.default_rng(0).random((n, n))
    u0, new0 = a.copy(), a.copy()  # (allocated and touched outside the timings)
    arrays = {mode: (dnp.asarray(a.copy()), dnp.asarray(a.copy())) for mode in MODES}
    lazy = arrays["lazy"]  # the first step (compile or cache load) and a later one
    first = best(lambda: in_mode("lazy", stencil_d2o, *lazy, 1), 1)
    later = best(lambda: in_mode("lazy", stencil_d2o, *lazy, 1), 1)
    columns = {
        "numpy": (lambda: stencil_numpy(u0, new0, steps), False),
        "numexpr": (lambda: stencil_numexpr(u0, new0, steps), False),
        **{f"d2o {mode}": (lambda mode=mode, pair=arrays[mode]: in_mode(mode, stencil_d2o, *pair, steps),
                  True) for mode in MODES},
    }  # fmt: skip
    del arrays
    times = interleaved(columns, repeat)
    del columns
    bound = steps * 16 * n * n / bw
    rows[f"stencil {n}^2 x{steps}"] = (*times.values(), bound, "STREAM")

    # -- the seed programs -------------------------------------------------------------
    programs = {
        "laplace": (laplace, 300 if quick else 1200, 5 if quick else 30),
        "jacobi": (jacobi, 500 if quick else 2000, 3 if quick else 10),
        "nbody": (nbody, 300 if quick else 1000, 2 if quick else 5),
        "monte_carlo_pi": (monte_carlo_pi, 100_000 if quick else 5_000_000, 2),
    }
    floors = _floors(quick, programs)
    for name, (mod, size, iters) in programs.items():
        columns = {
            "numpy": (lambda mod=mod, size=size, iters=iters: mod.run(np, size, iters), False),
            **{f"d2o {mode}": (lambda mode=mode, mod=mod, size=size, iters=iters: in_mode(
                mode, mod.run, dnp, size, iters), True) for mode in MODES},
        }  # fmt: skip
        times = interleaved(columns, repeat)
        if name == "laplace":  # per sweep: read u, write u, copy u_old, u - u_old, dot
            bound, kind = iters * 8 * size * size * 6 / bw, "STREAM"
        else:
            bound, kind = floors[name], "floor"
        t_np, *t_d2o = times.values()
        rows[f"{name} n={size} x{iters}"] = (t_np, None, *t_d2o, bound, kind)
    keys = ("numpy_s", "numexpr_s", "eager_s", "lazy_numexpr_s", "lazy_s", "bound_s", "bound")
    results: dict = {case: dict(zip(keys, r)) for case, r in rows.items()}
    results["triad_bytes_per_s"] = bw
    results["triad_one_core_bytes_per_s"] = bw1
    results["first_step_s"] = first
    results["later_step_s"] = later
    return results


def show(results: dict, procs: int) -> None:
    """Print one run's table."""
    r = dict(results)
    bw, bw1 = r.pop("triad_bytes_per_s"), r.pop("triad_one_core_bytes_per_s")
    first, later = r.pop("first_step_s"), r.pop("later_step_s")
    print(f"\n{procs} process(es): numexpr {ne.__version__} ({ne.get_num_threads()} thread), "
          f"numba {numba.__version__}, triad {bw / 1e9:.2f} GB/s on {procs} core(s) "
          f"({bw1 / 1e9:.2f} on one)")  # fmt: skip
    print(f"first lazy stencil step {first:.3f} s (compile or cache load included), "
          f"a later one {later:.3f} s")  # fmt: skip
    print(f"{'case':<28}{'numpy':>8}{'numexpr':>8}{'eager':>8}{'lazy-ne':>8}{'lazy':>8}"
          f"{'lazy/np':>9}{'eager/np':>9}{'bound':>8}{'':>8}{'lazy/bound':>11}")  # fmt: skip
    for case, x in r.items():
        tn, tx, te, tq, tl, tb = (x[k] for k in ("numpy_s", "numexpr_s", "eager_s",
                                                 "lazy_numexpr_s", "lazy_s", "bound_s"))  # fmt: skip
        nx = f"{tx:8.3f}" if tx is not None else f"{'-':>8}"
        print(f"{case:<28}{tn:8.3f}{nx}{te:8.3f}{tq:8.3f}{tl:8.3f}{tn / tl:8.2f}x"
              f"{tn / te:8.2f}x{tb:8.3f}{x['bound']:>8}{tl / tb:11.2f}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke test)")
    parser.add_argument("--child", action="store_true", help="measure here (under mpiexec)")
    parser.add_argument("--json", help="where rank 0 writes the results (with --child)")
    args = parser.parse_args()
    if not measures_here(args.child, COMM):
        by_count = launch_children(__file__, ["--quick"] if args.quick else [], (1, 2))
        for n, results in by_count.items():
            show(results, int(n))
        load = os.getloadavg()
        print(f"\nload average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
        if not args.quick:
            record(RECORD, by_count, processes=[1, 2])
        return
    measure_and_report(
        COMM,
        lambda: f"# {COMM.size} process(es): the stencil and the seed programs",
        lambda: measure(args.quick),
        lambda results: show(results, COMM.size),
        args.json,
    )


if __name__ == "__main__":
    main()
