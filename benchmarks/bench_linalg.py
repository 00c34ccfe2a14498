"""Distributed LU (`d2o.ops.lu`): ``d2o.numpy.linalg.solve`` at the run's process count
against ``numpy.linalg.solve`` on one process, with BLAS threads pinned to 1 (not a test).

Per run, all in one, in this order:

1. the memory pass, first, so that nothing else has raised the processes' peak RSS yet:
   each rank's RSS before anything (the interpreter with d2o, numpy and MPI: the
   baseline), an ``n x n`` matrix made on the default block-cyclic mesh (each rank draws
   its own share; no rank ever holds the whole), then ``solve(a, b, overwrite_a=True)``
   (d2o's extension: the LU in the share's own memory).  Per rank: peak RSS, the RSS
   with the share made, and tracemalloc's peak of numpy's allocations during the solve;
2. numpy's ``linalg.solve`` of an ``n x n`` system on rank 0 alone (the other ranks
   sleep), the one-core DGEMM rate (``a @ b`` of ``min(n, 2048)`` square matrices on rank
   0 alone) and the concurrent rate (every rank at once: the machine's real limit where
   cores share caches and memory bandwidth);
3. d2o's ``solve`` of an ``n x n`` system on the default mesh (`d2o.ops.lu.default_layout`:
   made there, so nothing is redistributed; numpy's semantics, a working copy) and
   ``det`` (the LU alone).

Times: d2o's the median of ``--repeat`` calls (default 3), numpy's the best of as many:
a first call pays for memory the machine has not touched yet (on this VM about 4 ms
per MiB, the host backing it), which neither side should be measured by.

4. ``cholesky`` and ``eigh`` beside numpy's (`bench_linalg_sym`'s figures, this run).

Printed: solve's speed-up over numpy; the LU's rate (2/3 n^3 flops over the time of
``det``) over P x the one-core DGEMM rate (HPL's efficiency) and over the concurrent
rate; the bytes moved per LU (summed over ranks, from ``d2o.trace``) beside
`d2o.ops.lu.model_bytes`; HPL's scaled residual of the solution; the memory figures.
Goals (issue 34): at 2 processes and n = 8192 solve >= 1.7x numpy, efficiency >= 70 %,
peak memory per rank < 0.75 x the matrix.

Run plainly (``python benchmarks/bench_linalg.py [--n N | --quick]``) it launches itself
under ``mpiexec -n 2`` (``--procs`` for others) and writes ``docs/_data/bench/linalg.json``;
``mpiexec -n P python benchmarks/bench_linalg.py`` only prints.  ``--quick``: n = 1024.
Other load on the machine shows in every figure: the load average is printed.
"""

from __future__ import annotations

import argparse
import os
import resource
import time
import tracemalloc

import bench_linalg_sym  # noqa: E402  (cholesky and eigh, measured in the same run)
import numpy as np
from _harness import on_rank0, run_or_launch, timed

import d2o  # noqa: E402
import d2o.numpy as dnp  # noqa: E402
from d2o.ops import lu  # noqa: E402

RECORD = "linalg"
N = 8192
GOALS = {"speedup": 1.7, "efficiency": 0.70, "memory": 0.75}
MiB = 2**20


def _options() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=N, help="the matrix side (default 8192)")
    ap.add_argument("--quick", action="store_true", help="n = 1024")
    ap.add_argument("--repeat", type=int, default=3, help="timed calls of each (median)")
    ap.add_argument("--procs", type=int, nargs="*", default=[2], help="process counts")
    ap.add_argument("--child", action="store_true")
    ap.add_argument("--json", default=None)
    opts = ap.parse_args()
    if opts.quick:
        opts.n = 1024
    return opts


def _matrix(n: int, comm) -> tuple:
    """A random system made on the default mesh (each rank draws its own piece)."""
    lay = lu.default_layout(comm, n)
    a = d2o.distributed_data_object(global_shape=(n, n), dtype=np.float64,
                                    distribution_strategy=lay)  # fmt: skip
    rng = np.random.default_rng(1000 + comm.rank)
    a.set_local_data(rng.standard_normal(a.distributor.local_shape))
    b = np.random.default_rng(7).standard_normal(n)
    return a, b, lay


def _numpy_solve(n: int, repeat: int) -> tuple:
    """``(wall, cpu)`` seconds of numpy's solve (the best of ``repeat``)."""
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((n, n)), rng.standard_normal(n)
    best, cpu = float("inf"), float("inf")
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        np.linalg.solve(a, b)
        best = min(best, time.perf_counter() - t0)
        cpu = min(cpu, time.process_time() - c0)
    return best, cpu


def _dgemm_rate(n: int) -> tuple:
    """``(wall, cpu)`` flop rates of one DGEMM of ``min(n, 2048)`` square matrices."""
    m = min(n, 2048)
    rng = np.random.default_rng(4)
    x, y = rng.standard_normal((m, m)), rng.standard_normal((m, m))
    x @ y
    t0, c0 = time.perf_counter(), time.process_time()
    x @ y
    return 2.0 * m**3 / (time.perf_counter() - t0), 2.0 * m**3 / (time.process_time() - c0)


def _cpu(fn, comm) -> float:
    """The CPU seconds of ``fn()`` on the busiest rank (MPI's waits poll, so they count:
    a rank's CPU time is its wall time less what other load took from it)."""
    comm.barrier()
    c0 = time.process_time()
    fn()
    return comm.allreduce(time.process_time() - c0, op="max")


def _rss() -> int:
    """This process's peak RSS so far, in bytes."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _memory(n: int, comm) -> dict:
    """The memory pass (see the notes): per rank, bytes."""
    base = _rss()
    a, b, _ = _matrix(n, comm)
    made = _rss()
    comm.barrier()
    tracemalloc.start()
    dnp.linalg.solve(a, b, overwrite_a=True)
    traced = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    share = a.data.nbytes
    del a
    return {"baseline_rss": comm.allgather(base), "rss_with_share": comm.allgather(made),
            "peak_rss": comm.allgather(_rss()), "traced_peak": comm.allgather(traced),
            "share": comm.allgather(share)}  # fmt: skip


def measure() -> dict:
    opts = _options()
    comm = d2o.default_comm()
    n, P = opts.n, comm.size
    load0 = os.getloadavg()[0]
    mem = _memory(n, comm)
    t_np, c_np = on_rank0(lambda: _numpy_solve(n, opts.repeat), comm)
    rate1, crate1 = on_rank0(lambda: _dgemm_rate(n), comm)
    comm.barrier()
    concurrent = sum(comm.allgather(_dgemm_rate(n)[0]))  # every rank at once
    a, b, lay = _matrix(n, comm)
    out: dict = {}
    t_solve = timed(lambda: out.__setitem__("x", dnp.linalg.solve(a, b)), comm, opts.repeat)
    t_lu = timed(lambda: dnp.linalg.det(a), comm, opts.repeat)
    c_solve = _cpu(lambda: dnp.linalg.solve(a, b), comm)
    c_lu = _cpu(lambda: dnp.linalg.det(a), comm)
    with d2o.options(check_args=False), d2o.trace() as t:
        dnp.linalg.det(a)
    moved = comm.allreduce(t.bytes_received)
    model = lu.model_bytes(n, n, lay.mesh, 8, lay.block[1])
    x = out["x"]
    resid = float(
        abs(
            a @ x - d2o.distributed_data_object(b, distribution_strategy=x.distributor.layout)
        ).max()
    )
    norm_a = float(abs(a).sum(axis=1).max())
    norm_x = float(abs(x).max())
    hpl = resid / (norm_a * norm_x * n * np.finfo(float).eps)
    rss = comm.allgather(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
    flops = 2.0 / 3.0 * n**3
    res = {
        "n": n, "processes": P, "mesh": list(lay.mesh), "block": lay.block[1],
        "numpy_solve_s": t_np, "d2o_solve_s": t_solve, "d2o_lu_s": t_lu,
        "dgemm_one_core_flops": rate1, "lu_flops": flops / t_lu,
        "efficiency": flops / t_lu / (P * rate1), "speedup": t_np / t_solve,
        "dgemm_concurrent_flops": concurrent, "efficiency_concurrent": flops / t_lu / concurrent,
        "memory": mem, "cpu": {"numpy_solve_s": c_np, "d2o_solve_s": c_solve, "d2o_lu_s": c_lu,
                               "dgemm_one_core_flops": crate1, "speedup": c_np / c_solve,
                               "efficiency": flops / c_lu / (P * crate1)},
        "lu_bytes": moved, "model_bytes": model, "hpl_residual": hpl,
        "peak_rss_bytes": rss, "matrix_bytes": 8 * n * n, "repeat": opts.repeat,
        "load_before": load0, "load_after": os.getloadavg()[0],
    }  # fmt: skip
    if comm.rank == 0:
        print(f"linalg.solve, n = {n}, {P} processes on a {lay.mesh} mesh, blocks "
              f"{lay.block[1]}; BLAS threads {os.environ.get('OPENBLAS_NUM_THREADS', '?')}; "
              f"load average {load0:.2f}")  # fmt: skip
        print(f"numpy.linalg.solve on 1 process: {t_np:.3f} s; d2o solve: {t_solve:.3f} s "
              f"(speed-up {res['speedup']:.2f}, goal {GOALS['speedup']})")  # fmt: skip
        print(f"LU (det): {t_lu:.3f} s, {res['lu_flops'] / 1e9:.2f} GFlop/s over {P} x "
              f"{rate1 / 1e9:.2f} GFlop/s one-core DGEMM: {100 * res['efficiency']:.1f} % "
              f"(goal {100 * GOALS['efficiency']:.0f} %)")  # fmt: skip
        print(f"  over the concurrent DGEMM rate of {P} ranks at once ({concurrent / 1e9:.2f} "
              f"GFlop/s): {100 * res['efficiency_concurrent']:.1f} %")  # fmt: skip
        print(f"by CPU time (what other load on the machine took away does not count): numpy "
              f"{c_np:.3f} s, d2o solve {c_solve:.3f} s (speed-up {c_np / c_solve:.2f}); LU "
              f"{c_lu:.3f} s over {P} x {crate1 / 1e9:.2f} GFlop/s: "
              f"{100 * flops / c_lu / (P * crate1):.1f} %")  # fmt: skip
        print(f"bytes per LU (summed over ranks): {moved:,}; model {model:,} "
              f"({moved / max(model, 1):.2f} of it)")  # fmt: skip
        print(f"HPL scaled residual: {hpl:.4f} (< 16); load average {res['load_after']:.2f}")
        mib = lambda xs: "/".join(f"{x / MiB:.0f}" for x in xs)  # noqa: E731
        print(f"memory pass (solve with overwrite_a=True), per rank in MiB: peak RSS "
              f"{mib(mem['peak_rss'])} (goal < {GOALS['memory'] * 8 * n * n / MiB:.0f}); "
              f"interpreter (import d2o, MPI) {mib(mem['baseline_rss'])}; with the share made "
              f"{mib(mem['rss_with_share'])} (share {mib(mem['share'])}); numpy's traced "
              f"peak during the solve {mib(mem['traced_peak'])}; matrix {8 * n * n / MiB:.0f}",
              flush=True)  # fmt: skip
    small = (256,) if opts.quick else None
    res["symmetric"] = bench_linalg_sym.measure(small, small)  # cholesky, eigh: same run
    return res if comm.rank == 0 else {}


if __name__ == "__main__":
    counts = tuple(_options().procs)
    run_or_launch(__file__, measure, counts=counts, name=RECORD)
