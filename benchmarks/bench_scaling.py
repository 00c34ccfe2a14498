"""Strong and weak scaling of d2o on 1, 2, 4, 8 and 16 processes, against numpy on one core
(not a test).

Five operations, each timed alone (its inputs built beforehand):

* ``elementwise``: ``sqrt(a * a + b * b) + 0.5 * a`` of two 1-d float64 arrays (five
  element-wise passes, temporaries included);
* ``sum``: ``a.sum()`` of a 1-d float64 array (a full reduction to one number);
* ``redistribute``: ``x.redistribute(1)`` of a 2-d float64 array split by rows (a global
  transpose of the distribution: one all-to-all of nearly all the data), against numpy's
  ``np.copyto`` of the same bytes (numpy has no distribution to change: a memcpy is the
  least the move costs in one process);
* ``fft``: ``d2o.fft.fftn`` of a 2-d complex128 array (two slab transposes), against
  ``scipy.fft.fftn(a, workers=1)`` (numpy.fft without scipy);
* ``laplace``: the seed program ``examples/programs/laplace.py`` (GAiN's Jacobi sweeps),
  timed as a whole program, its grid built inside.

Strong scaling: the global size is fixed (64 Mi elements; 16 Mi for the FFT and the
Laplace grid, whose passes cost more), so that 16 ranks still hold 4 Mi or 1 Mi elements
each.  Weak scaling: the size per process is fixed (the strong size over 16), the global
size grows with P (2-d arrays along their rows; the Laplace grid's side by sqrt(P)).
``--quick`` divides every size by 64.

In every run numpy does the same global problem on one core (rank 0 alone, the other
ranks sleep polling a non-blocking barrier every 2 ms); d2o is timed on all ranks from a
barrier to the slowest rank's end; numpy and d2o alternate, ``REPEAT`` times each, and a
figure is the best of them.  Before the timing each d2o operation runs once and its result
is compared with numpy's (gathered to rank 0: max |d2o - numpy| / max |numpy|; the
program's two result numbers, relatively).  Weak scaling also measures the machine's own
limit: every rank runs numpy on its per-process share at once; numpy's time alone over
that time is the efficiency the shared memory and cores allow before any communication
("ceiling").  BLAS/OpenMP threads are pinned to 1.

Three ways to run it:

* ``mpiexec -n P python benchmarks/bench_scaling.py``: measures and prints on P ranks;
* ``python benchmarks/bench_scaling.py --max-procs 16`` (no mpiexec): launches the first
  form for P = 1, 2, 4, 8, 16 up to ``--max-procs`` (default: the cores this process may
  use, at most 16), prints the scaling tables and writes ``docs/_data/bench/scaling.json``
  (``make bench`` does this with the default);
* ``--machine TEXT`` names the machine in the output file, for the performance page.
  ``D2O_MPIEXEC`` names the mpiexec to launch with where it is not beside this Python.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # before numpy loads its BLAS

import argparse  # noqa: E402
import gc  # noqa: E402
import math  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from dataclasses import dataclass  # noqa: E402

import numpy as np  # noqa: E402
from _harness import (  # noqa: E402  (importing it puts the repository on sys.path)
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

import laplace  # noqa: E402

import d2o.fft as dfft  # noqa: E402
import d2o.numpy as dnp  # noqa: E402
import d2o.ops.fft as fft_impl  # noqa: E402  (its backend: scipy.fft or numpy.fft)
from d2o import default_comm  # noqa: E402
from d2o import distributed_data_object as D2O  # noqa: E402

RECORD = "scaling"  # docs/_data/bench/scaling.json
COUNTS = (1, 2, 4, 8, 16)
REPEAT = 3
QUICK_DIVISOR = 64
TOLERANCE = 1e-10
LAPLACE_ITERATIONS = 5
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
#: kernel: global elements of the strong-scaling runs; weak scaling: this over 16 per process
STRONG = {
    "elementwise": 1 << 26,
    "sum": 1 << 26,
    "redistribute": 1 << 26,
    "fft": 1 << 24,
    "laplace": 1 << 24,
}


# -- the inputs: the same values in numpy and in d2o, made without any communication --------


def values(first: int, count: int, shift: int = 0) -> np.ndarray:
    """Elements ``first .. first + count - 1`` of a fixed pseudo-random sequence in
    [-0.5, 0.5) (integer arithmetic, so that every rank makes the same numbers)."""
    k = np.arange(first + shift, first + shift + count, dtype=np.int64)
    k *= 7919
    k %= 10007
    return k * (1.0 / 10007) - 0.5


def _fill(shape: tuple, dtype, first: int, count: int) -> np.ndarray:
    out = values(first, count)
    if np.dtype(dtype).kind == "c":
        out = out + 1j * values(first, count, shift=777)
    return out.reshape(shape)


def numpy_input(shape: tuple, dtype) -> np.ndarray:
    """The whole array, in one process."""
    return _fill(shape, dtype, 0, math.prod(shape))


def d2o_input(shape: tuple, dtype, comm) -> D2O:
    """The same array distributed by rows ('equal' along axis 0): each rank fills its own
    rows, whose elements are consecutive in C order."""
    x = D2O(global_shape=shape, dtype=dtype, distribution_strategy="equal", comm=comm)
    row = math.prod(shape[1:])
    x.local_array[...] = _fill(x.local_shape, dtype, x.local_offset[0] * row, x.local_array.size)
    return x


# -- the operations ---------------------------------------------------------------------------


def elementwise(xp, a, b):
    return xp.sqrt(a * a + b * b) + 0.5 * a


def scipy_fftn(a):
    be = fft_impl.backend()  # scipy.fft when installed, else numpy.fft
    return be.fftn(a, workers=1) if fft_impl.BACKEND == "scipy.fft" else be.fftn(a)


def _side(elements: int) -> int:
    return math.isqrt(elements)


def _vector(elements: int, strong: int) -> tuple:
    return (elements,)


def _rows(elements: int, strong: int) -> tuple:
    """A 2-d shape of ``elements``: as many columns as the strong size's square has."""
    cols = _side(strong)
    return (max(1, elements // cols), cols)


def _grid(elements: int, strong: int) -> tuple:
    n = _side(elements)
    return (n, n)


@dataclass
class Kernel:
    """One operation: the shape for a number of elements (given the strong size), its dtype,
    how many inputs, numpy's and d2o's code, and what it is."""

    shape: Callable[[int, int], tuple]
    dtype: type
    inputs: int
    numpy: Callable
    d2o: Callable
    what: str


def _copyto(a):
    out = np.empty_like(a)
    np.copyto(out, a)
    return out


KERNELS = {
    "elementwise": Kernel(
        _vector,
        np.float64,
        2,
        lambda a, b: elementwise(np, a, b),
        lambda a, b: elementwise(dnp, a, b),
        "sqrt(a*a + b*b) + 0.5*a",
    ),
    "sum": Kernel(_vector, np.float64, 1, lambda a: a.sum(), lambda a: a.sum(), "a.sum()"),
    "redistribute": Kernel(
        _rows,
        np.float64,
        1,
        _copyto,
        lambda a: a.redistribute(1),
        "rows to columns (numpy: np.copyto)",
    ),
    "fft": Kernel(_rows, np.complex128, 1, scipy_fftn, dfft.fftn, "2-d fftn"),
    "laplace": Kernel(
        _grid,
        np.float64,
        0,
        lambda n: laplace.run(np, n, LAPLACE_ITERATIONS),
        lambda n: laplace.run(dnp, n, LAPLACE_ITERATIONS),
        f"examples/programs/laplace.py, {LAPLACE_ITERATIONS} sweeps",
    ),
}


# -- timing -----------------------------------------------------------------------------------


def _alone(fn, comm) -> float:
    """Seconds of ``fn()`` on rank 0 alone, on every rank; the others sleep meanwhile."""

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


def _error(name: str, ref, got) -> float:
    """max |got - ref| / max |ref| (arrays), or the larger relative error of the numbers."""
    if name == "laplace":
        return max(abs(g - r) / max(abs(r), 1e-300) for r, g in zip(ref, got))
    ref, got = np.asarray(ref), np.asarray(got)
    return float(np.abs(got - ref).max() / max(float(np.abs(ref).max()), 1e-300))


def _result(name: str, r):
    """A d2o result as rank 0 compares it (the whole array gathered there)."""
    if isinstance(r, D2O):
        return r.get_full_data(target_rank=0)
    return r


def measure_case(name: str, elements: int, strong: int, repeat: int, comm, ceiling_elems=None):
    """Time ``name`` on ``elements`` global elements: numpy (rank 0 alone) and d2o (all
    ranks); with ``ceiling_elems`` also numpy on that many elements alone and on every rank
    at once (the machine's weak-scaling limit)."""
    k = KERNELS[name]
    shape = k.shape(elements, strong)
    if k.inputs:
        xs = [d2o_input(shape, k.dtype, comm) for _ in range(k.inputs)]
        if k.inputs == 2:  # a second array with other values
            xs[1] *= 0.75
        arrays = None
        if comm.rank == 0:
            arrays = [numpy_input(shape, k.dtype) for _ in range(k.inputs)]
            if k.inputs == 2:
                arrays[1] *= 0.75
    else:  # the program makes its own grid from its side
        xs, arrays = [shape[0]], [shape[0]]

    # the check (and warm-up), once, outside the timing
    got = _result(name, k.d2o(*xs))
    err = None
    if comm.rank == 0:
        err = _error(name, k.numpy(*arrays), got)
    err = comm.bcast(err, root=0)
    del got

    t_np = t_d2o = float("inf")
    for _ in range(repeat):
        t_np = min(t_np, _alone(lambda: k.numpy(*arrays), comm))
        t_d2o = min(t_d2o, _everywhere(lambda: k.d2o(*xs), comm))
    out = {
        "shape": list(shape),
        "elements": math.prod(shape),
        "numpy": t_np,
        "d2o": t_d2o,
        "err": err,
    }
    xs = arrays = None  # free the inputs before the next case
    gc.collect()
    if ceiling_elems is not None:
        out["ceiling"] = _ceiling(k, k.shape(ceiling_elems, strong), repeat, comm)
    return out


def _ceiling(k: Kernel, shape: tuple, repeat: int, comm) -> float:
    """numpy's time on ``shape`` alone / its time when every rank runs it at once."""
    if comm.size == 1:
        return 1.0
    arrays = [numpy_input(shape, k.dtype) for _ in range(k.inputs)] if k.inputs else [shape[0]]
    alone = everywhere = float("inf")
    for _ in range(max(2, repeat - 1)):
        alone = min(alone, _alone(lambda: k.numpy(*arrays), comm))
        everywhere = min(everywhere, _everywhere(lambda: k.numpy(*arrays), comm))
    return alone / everywhere


def sizes(quick: bool) -> dict:
    """kernel: (strong global elements, weak elements per process)."""
    div = QUICK_DIVISOR if quick else 1
    return {nm: (s // div, s // div // COUNTS[-1]) for nm, s in STRONG.items()}


def measure(names, quick: bool) -> dict:
    comm = default_comm()
    P = comm.size
    out: dict = {"mpi": run_label(P), "strong": {}, "weak": {}}
    for name in names:
        strong, per_rank = sizes(quick)[name]
        for mode, elements in (("strong", strong), ("weak", per_rank * P)):
            ceiling = per_rank if mode == "weak" else None
            r = measure_case(name, elements, strong, REPEAT, comm, ceiling)
            out[mode][name] = r
            if comm.rank == 0:
                extra = f", ceiling {r['ceiling']:.2f}" if "ceiling" in r else ""
                print(
                    f"  {mode} {name} {tuple(r['shape'])}: numpy {r['numpy']:.4f} s, d2o on "
                    f"{P} {r['d2o']:.4f} s (err {r['err']:.1e}{extra})",
                    flush=True,
                )
    return out


# -- the tables -------------------------------------------------------------------------------


def _same(err: float) -> str:
    return "yes" if err <= TOLERANCE else f"**NO** ({err:.1e})"


def _shape(shape) -> str:
    return " x ".join(map(str, shape))


def print_one(results: dict, nprocs: int) -> None:
    """The table of one run (one process count)."""
    print(f"\n## d2o on {nprocs} process(es) ({results['mpi']}) against numpy on 1\n")
    print("| mode | operation | shape | numpy s | d2o s | speed-up | ceiling | same |")
    print("|---|---|---|---:|---:|---:|---:|---|")
    for mode in ("strong", "weak"):
        for name, r in results[mode].items():
            c = f"{r['ceiling']:.2f}" if "ceiling" in r else ""
            print(
                f"| {mode} | {name} | {_shape(r['shape'])} | {r['numpy']:.4f} | {r['d2o']:.4f} "
                f"| {r['numpy'] / r['d2o']:.2f}x | {c} | {_same(r['err'])} |"
            )


def print_combined(by_count: dict) -> None:
    """Strong scaling (speed-up over d2o on 1 process, and over numpy in the same run) and
    weak scaling (efficiency: d2o's time on 1 process over its time on P)."""
    counts = list(by_count)
    first = by_count[counts[0]]
    print(f"\n## Strong scaling, d2o on {', '.join(counts)} processes ({cores()} cores)\n")
    print("seconds; in brackets: speed-up over d2o on 1 process / over numpy in the same run\n")
    print("| operation | shape | numpy s | " + " | ".join(f"{n}p" for n in counts) + " |")
    print("|---|---|---:|" + "---:|" * len(counts))
    for name, r1 in first["strong"].items():
        cells = []
        for n in counts:
            r = by_count[n]["strong"][name]
            cells.append(
                f"{r['d2o']:.4f} ({r1['d2o'] / r['d2o']:.2f}x / {r['numpy'] / r['d2o']:.2f}x)"
            )
        print(f"| {name} | {_shape(r1['shape'])} | {r1['numpy']:.4f} | " + " | ".join(cells) + " |")
    print("\n## Weak scaling (size per process fixed)\n")
    print("seconds; in brackets: efficiency (d2o 1p / d2o Pp), ceiling; speed-up over numpy\n")
    print("| operation | per process | " + " | ".join(f"{n}p" for n in counts) + " |")
    print("|---|---|" + "---:|" * len(counts))
    for name, r1 in first["weak"].items():
        cells = []
        for n in counts:
            r = by_count[n]["weak"][name]
            cells.append(
                f"{r['d2o']:.4f} ({r1['d2o'] / r['d2o'] * 100:.0f} %, {r['ceiling'] * 100:.0f} %; "
                f"{r['numpy'] / r['d2o']:.2f}x)"
            )
        print(f"| {name} | {_shape(r1['shape'])} | " + " | ".join(cells) + " |")
    bad = [
        f"{n}p {mode} {name}"
        for n, res in by_count.items()
        for mode in ("strong", "weak")
        for name, r in res[mode].items()
        if r["err"] > TOLERANCE
    ]
    print(f"\nresults against numpy: {'all the same' if not bad else 'DIFFER: ' + ', '.join(bad)}")


#: the fewest processes a run must reach to replace the recorded curve
RECORD_MIN_PROCS = 8


def default_max_procs() -> int:
    return min(cores(), COUNTS[-1])


def launch(names, quick: bool, max_procs: int, where: str | None) -> None:
    """Measure on each process count in turn and record what was measured after each (an
    interrupted run keeps the counts it finished), then print the scaling tables."""
    counts = tuple(n for n in COUNTS if n <= max_procs)
    argv = [*(["--quick"] if quick else []), *names]
    options = {
        "repeat": REPEAT,
        "sizes": {
            nm: {"strong_elements": s, "weak_elements_per_process": w}
            for nm, (s, w) in sizes(quick).items()
            if nm in names
        },
        "what": {nm: KERNELS[nm].what for nm in names},
        "fft_backend": fft_impl.BACKEND,
        "where": where,
    }
    by_count: dict = {}
    # The record is a scaling curve: a machine of fewer than RECORD_MIN_PROCS cores prints
    # its figures but keeps the recorded curve (measured on a larger machine).
    keep = max(counts) < RECORD_MIN_PROCS
    for n in counts:
        by_count.update(launch_children(__file__, argv, (n,), THREAD_VARS))
        if not keep:
            record(
                RECORD, by_count, processes=counts[: len(by_count)], quick=quick, options=options
            )
    print_combined(by_count)
    if keep:
        print(f"(not recorded: {RECORD}.json keeps a curve to {RECORD_MIN_PROCS}+ processes)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kernels", nargs="*", help=f"some of {', '.join(KERNELS)} (all)")
    parser.add_argument("--quick", action="store_true", help=f"sizes / {QUICK_DIVISOR}")
    parser.add_argument(
        "--max-procs",
        type=int,
        default=default_max_procs(),
        help="launch P = 1, 2, 4, 8, 16 up to this (default: the cores here, at most 16)",
    )
    parser.add_argument("--machine", help="the machine's name for the output file")
    parser.add_argument("--child", action="store_true", help="measure here (under mpiexec)")
    parser.add_argument("--json", help="where rank 0 writes the results (with --child)")
    args = parser.parse_args()
    names = args.kernels or list(KERNELS)
    unknown = [n for n in names if n not in KERNELS]
    if unknown:
        parser.error(f"unknown kernel(s) {unknown}; choose from {list(KERNELS)}")
    comm = default_comm()
    if not measures_here(args.child, comm):
        launch(names, args.quick, args.max_procs, args.machine)
        return
    measure_and_report(
        comm,
        lambda: f"# {comm.size} process(es): {', '.join(names)}",
        lambda: measure(names, args.quick),
        lambda results: print_one(results, comm.size),
        args.json,
    )


if __name__ == "__main__":
    main()
