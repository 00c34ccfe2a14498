"""The scaling kernels of issue 15 (stencil, matmul, 3-D FFT) on d2o against numpy (not a test).

Three kernels, each timed alone (its inputs built beforehand), numpy on one process
against d2o on every rank, in one run:

* ``jacobi``: 10 Jacobi/Laplace sweeps of a 4096 x 4096 float64 grid,
  ``u[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])``,
  the same code on numpy and on d2o.numpy (default layout: rows);
* ``matmul``: ``a @ b`` of two 2048 x 2048 float64 matrices, numpy's (one BLAS thread)
  against d2o's on a balanced 2-D process mesh (``d2o.layout(None, (0, 1))``, (2, 1) on 2
  ranks: SUMMA) and on the default row layout;
* ``fft``: 3-D complex FFT of 256^3 complex128, ``scipy.fft.fftn(a, workers=1)``
  against ``d2o.fft.fftn`` on the default slab layout and on a balanced 2-D mesh
  (pencils).  mpi4py-fft, the reference pencil code, is not compared (the run says
  whether it is installed).

``--quick`` uses 1024^2 (jacobi), 512^2 (matmul) and 64^3 (fft).  Three ways to run it:

* ``D2O_MPI=0 python benchmarks/bench_kernels.py``: one process without MPI;
* ``mpiexec -n N python benchmarks/bench_kernels.py``: d2o on N ranks (any N; the mesh
  layouts take the balanced mesh of N ranks);
* ``python benchmarks/bench_kernels.py`` (no mpiexec, no ``D2O_MPI``): launches the
  second form with N = 1 and 2 (``--child``, results passed back through a JSON file),
  prints one table of both, with the goals, and writes them to
  ``docs/_data/bench/kernels.json`` (``make bench``; the performance page shows it).

As in bench_programs.py: numpy is measured in the same run, on rank 0 alone while the
other ranks sleep (polling a non-blocking barrier every 2 ms); d2o is timed on all ranks
from a barrier to the slowest rank's end; numpy and d2o alternate, ``REPEAT`` times each,
and a figure is the best of them.  Ceiling (N > 1): every rank runs the numpy kernel at
once; N x numpy's time alone / that time is the speed-up the machine allows before any
communication.  Before the timing, each d2o variant runs once under ``d2o.trace()`` and
its result is gathered and compared with numpy's ("same": max |d2o - numpy| / max
|numpy| at most 1e-10; "moved": MPI bytes received, summed over ranks, so that a
broadcast counts once per receiving rank).  BLAS/OpenMP threads are pinned to 1
(``OMP_NUM_THREADS``, ``OPENBLAS_NUM_THREADS``, ``MKL_NUM_THREADS`` default to 1 here
unless set).  Goals at 2 processes (issue 15): jacobi >= 1.8x numpy, matmul >= 1.6x,
fft >= 1.7x.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # before numpy loads its BLAS

import argparse  # noqa: E402
import gc  # noqa: E402
import importlib.util  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from dataclasses import dataclass  # noqa: E402

import numpy as np  # noqa: E402
from _harness import (  # noqa: E402  (importing it puts the repository on sys.path)
    cores,
    launch_children,
    measure_and_report,
    measures_here,
    on_rank0,
    record,
    run_label,
)

import d2o  # noqa: E402
import d2o.fft as dfft  # noqa: E402
import d2o.numpy as dnp  # noqa: E402
import d2o.ops.fft as fft_impl  # noqa: E402 - the local FFT backend d2o uses
from d2o import default_comm  # noqa: E402

RECORD = "kernels"  # docs/_data/bench/kernels.json
REPEAT = 5
REPEAT_QUICK = 3
COUNTS = (1, 2)
SWEEPS = 10
TOLERANCE = 1e-10
#: kernel: (default size, --quick size)
SIZES = {"jacobi": (4096, 1024), "matmul": (2048, 512), "fft": (256, 64)}
#: speed-up over numpy wanted at 2 processes (issue 15)
GOALS = {"jacobi": 1.8, "matmul": 1.6, "fft": 1.7}
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def sweeps(u, count: int = SWEEPS):
    """``count`` Jacobi sweeps of ``u`` in place (plain numpy code, for numpy and d2o.numpy)."""
    for _ in range(count):
        u[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])
    return u


def grid(n: int) -> tuple:
    """An n x n grid, 0 inside, ``x^2 - y^2`` on the edges (GAiN's laplace.py)."""
    u = np.zeros((n, n))
    t = np.linspace(0.0, 1.0, n)
    u[0, :], u[-1, :] = -(t**2), 1.0 - t**2
    u[:, 0], u[:, -1] = t**2, t**2 - 1.0
    return (u,)


def matrices(n: int) -> tuple:
    rng = np.random.default_rng(1)
    return rng.standard_normal((n, n)), rng.standard_normal((n, n))


def cube(n: int) -> tuple:
    # complex128 straight from the generator: no real/imaginary temporaries
    return (np.random.default_rng(2).standard_normal((n, n, 2 * n)).view(np.complex128),)


def scipy_fftn(a):
    be = fft_impl.backend()  # scipy.fft when installed, else numpy.fft
    return be.fftn(a, workers=1) if fft_impl.BACKEND == "scipy.fft" else be.fftn(a)


def _rows(comm):
    return None  # d2o.numpy's default: 'equal' along axis 0


def _mesh(comm):
    return d2o.layout(None, (0, 1), comm=comm)  # balanced mesh, rows and columns cut


@dataclass
class Kernel:
    """One kernel: numpy inputs (the same on every rank), numpy's and d2o's code, and the
    d2o layouts to time (label: dist for ``d2o.numpy.array``, given the communicator)."""

    inputs: Callable
    numpy: Callable
    d2o: Callable
    variants: dict
    what: str
    in_place: bool = False


KERNELS = {
    "jacobi": Kernel(
        grid, sweeps, sweeps, {"rows": _rows}, f"{{n}}^2 float64, {SWEEPS} sweeps", True
    ),
    "matmul": Kernel(
        matrices,
        lambda a, b: a @ b,
        lambda a, b: a @ b,
        {"mesh (SUMMA)": _mesh, "rows": _rows},
        "{n}^2 float64",
    ),
    "fft": Kernel(
        cube, scipy_fftn, dfft.fftn, {"slab": _rows, "mesh (pencils)": _mesh}, "{n}^3 complex128"
    ),
}


def _alone(fn, comm) -> float:
    """Seconds of ``fn()`` on rank 0 alone (the result is dropped), on every rank; the
    others sleep meanwhile, polling a non-blocking barrier."""

    def run() -> float:
        gc.collect()
        t0 = time.perf_counter()
        fn()
        return time.perf_counter() - t0

    return on_rank0(run, comm)


def _everywhere(fn, comm) -> float:
    """Seconds of ``fn()`` on every rank, from a barrier to the slowest rank's end."""
    gc.collect()
    comm.barrier()
    t0 = time.perf_counter()
    fn()
    return comm.allreduce(time.perf_counter() - t0, op="max")


def _layout_label(x) -> str:
    lay = getattr(x.distributor, "layout", None)
    if x.distribution_strategy == "block" and lay is not None:
        return f"mesh {lay.mesh}, split {lay.split}"
    return f"'{x.distribution_strategy}' along axis {getattr(x.distributor, 'axis', 0)}"


def measure_kernel(name: str, n: int, repeat: int, comm) -> dict:
    k = KERNELS[name]
    arrays = k.inputs(n)  # on every rank: the ceiling runs numpy everywhere
    out = {"size": k.what.format(n=n), "variants": {}}

    # the check, once, outside the timing: numpy on rank 0, each d2o layout gathered there
    ref = None
    if comm.rank == 0:
        ref = k.numpy(*[a.copy() for a in arrays] if k.in_place else arrays)
    comm.barrier()
    states = {}
    for label, dist in k.variants.items():
        xs = [dnp.array(a, dist=dist(comm)) for a in arrays]
        with d2o.trace() as tr:
            r = k.d2o(*xs)
        moved = comm.allreduce(tr.bytes_received, op="sum")
        full = r.get_full_data(target_rank=0)
        err = None
        if comm.rank == 0:
            err = float(np.abs(full - ref).max() / max(np.abs(ref).max(), 1e-300))
        err = comm.bcast(err, root=0)
        out["variants"][label] = {
            "layout": _layout_label(xs[0]),
            "moved": moved,
            "err": err,
            "d2o": float("inf"),
        }
        del r, full
        # inputs for the timing: fresh (the check's sweeps changed them)
        states[label] = [dnp.array(a, dist=dist(comm)) for a in arrays] if k.in_place else xs
    del ref

    t_np = t_all = float("inf")
    for _ in range(repeat):
        t_np = min(t_np, _alone(lambda: k.numpy(*arrays), comm))
        for label, xs in states.items():
            t = _everywhere(lambda xs=xs: k.d2o(*xs), comm)
            v = out["variants"][label]
            v["d2o"] = min(v["d2o"], t)
        if comm.size > 1:
            t_all = min(t_all, _everywhere(lambda: k.numpy(*arrays), comm))
    out["numpy"] = t_np
    out["ceiling"] = comm.size * t_np / t_all if comm.size > 1 else 1.0
    if comm.rank == 0:
        times = ", ".join(f"{lb} {v['d2o']:.3f} s" for lb, v in out["variants"].items())
        print(
            f"  {name} ({out['size']}): numpy {t_np:.3f} s; d2o on {comm.size}: {times}", flush=True
        )
    return out


def measure(names, quick: bool) -> dict:
    comm = default_comm()
    repeat = REPEAT_QUICK if quick else REPEAT
    return {nm: measure_kernel(nm, SIZES[nm][1 if quick else 0], repeat, comm) for nm in names}


def _mib(b: float) -> str:
    return f"{b / 2**20:.1f} MiB"


def _same(err: float) -> str:
    return f"yes ({err:.0e})" if err <= TOLERANCE else f"**NO** ({err:.1e})"


def _notes() -> list:
    threads = ", ".join(f"{v}={os.environ.get(v, 'unset')}" for v in THREAD_VARS)
    have = importlib.util.find_spec("mpi4py_fft") is not None
    fft = "installed, not compared here" if have else "not installed: no comparison"
    return [
        f"threads: {threads}; local FFTs: {dfft.BACKEND} (workers=1)",
        f"mpi4py-fft: {fft}",
    ]


def print_one(results: dict, nprocs: int) -> None:
    """The table of one run (one process count)."""
    print(f"\n## d2o on {nprocs} process(es) ({run_label(nprocs)}) against numpy on 1\n")
    print(
        "| kernel | size | d2o layout | numpy s | d2o s | speed-up | efficiency | ceiling "
        "| moved | same |"
    )
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---|")
    for name, r in results.items():
        for label, v in r["variants"].items():
            s = r["numpy"] / v["d2o"]
            print(
                f"| {name} | {r['size']} | {label}: {v['layout']} | {r['numpy']:.3f} "
                f"| {v['d2o']:.3f} | {s:.2f}x | {s / nprocs * 100:.0f} % | {r['ceiling']:.2f}x "
                f"| {_mib(v['moved'])} | {_same(v['err'])} |"
            )
    print()
    for note in _notes():
        print(note)
    if nprocs > 1:
        print(
            f"ceiling: {nprocs} x numpy's time alone / its time when all {nprocs} ranks run "
            "the numpy kernel at once"
        )


def print_combined(by_count: dict) -> None:
    """One table of the N = 1 and N = 2 runs; each d2o time against the numpy time of the
    same run."""
    one, two = by_count["1"], by_count["2"]
    print(f"\n## Scaling kernels: numpy (1 process) against d2o on 1 and 2 ({cores()} cores)\n")
    print(
        "| kernel | size | d2o layout (2p) | numpy s (1p run) | d2o 1p s | d2o 1p / numpy "
        "| numpy s (2p run) | d2o 2p s | speed-up 2p | efficiency 2p | ceiling 2p "
        "| d2o 1p / 2p | moved 2p | same (1p, 2p) |"
    )
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    verdicts = []
    for name in two:
        n1, n2 = one[name]["numpy"], two[name]["numpy"]
        for label, v2 in two[name]["variants"].items():
            v1 = one[name]["variants"][label]
            t1, t2 = v1["d2o"], v2["d2o"]
            s2 = n2 / t2
            print(
                f"| {name} | {two[name]['size']} | {label}: {v2['layout']} | {n1:.3f} "
                f"| {t1:.3f} | {t1 / n1:.2f} | {n2:.3f} | {t2:.3f} | {s2:.2f}x "
                f"| {s2 / 2 * 100:.0f} % | {two[name]['ceiling']:.2f}x | {t1 / t2:.2f}x "
                f"| {_mib(v2['moved'])} | {_same(v1['err'])}, {_same(v2['err'])} |"
            )
            ok = "met" if s2 >= GOALS[name] else "missed"
            verdicts.append(f"{name}, {label}: {s2:.2f}x, goal >= {GOALS[name]}x {ok}")
    print()
    for note in _notes():
        print(note)
    print("\nGoals (d2o on 2 processes against numpy on 1, issue 15):")
    for v in verdicts:
        print(f"  {v}")


def launch(names, quick: bool) -> None:
    """Run the N = 1 and N = 2 measurements under mpiexec and print them together."""
    argv = [*(["--quick"] if quick else []), *names]
    by_count = launch_children(__file__, argv, COUNTS, THREAD_VARS)
    print_combined(by_count)
    options = {
        "repeat": REPEAT_QUICK if quick else REPEAT,
        "sizes": {nm: SIZES[nm][1 if quick else 0] for nm in names},
        "goals": {nm: GOALS[nm] for nm in names},
        "notes": _notes(),
    }
    record(RECORD, by_count, processes=COUNTS, quick=quick, options=options)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kernels", nargs="*", help=f"some of {', '.join(KERNELS)} (all)")
    parser.add_argument("--quick", action="store_true", help="small sizes (1024^2, 512^2, 64^3)")
    parser.add_argument("--child", action="store_true", help="measure here (under mpiexec)")
    parser.add_argument("--json", help="where rank 0 writes the results (with --child)")
    args = parser.parse_args()
    names = args.kernels or list(KERNELS)
    unknown = [n for n in names if n not in KERNELS]
    if unknown:
        parser.error(f"unknown kernel(s) {unknown}; choose from {list(KERNELS)}")
    comm = default_comm()
    if not measures_here(args.child, comm):
        launch(names, args.quick)
        return

    def header() -> str:
        mesh = d2o.layout(None, (0, 1), comm=comm).mesh
        return f"# {comm.size} process(es), balanced mesh {mesh}: {', '.join(names)}"

    measure_and_report(
        comm,
        header,
        lambda: measure(names, args.quick),
        lambda results: print_one(results, comm.size),
        args.json,
    )


if __name__ == "__main__":
    main()
