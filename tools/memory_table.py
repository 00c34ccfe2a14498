"""Peak memory per rank of the four seed programs at 1, 2 and 4 processes, the global size
fixed (issue 30, item 5).

    mpiexec -n P python tools/memory_table.py       # P = 1, 2, 4: docs/_data/memory_table.json
    python tools/memory_table.py render             # docs/_data/memory_table.md from it

Each program (examples/programs/: DistNumPy's Monte Carlo pi, Jacobi solver and N-body
simulation, GAiN's Laplace sweeps) runs once to warm up and then under ``tracemalloc`` on
every rank; the figure is the most any rank's traced memory rose above its start while the
program ran (numpy's buffers are traced), in units of N/P: N is the program's largest array
(the samples vector, the matrix, the grid, one n x n matrix of pair distances), P the
processes.  numpy's own peak for the same program on one process, in units of N, is beside
it: the temporaries of the program's expressions, which d2o holds per rank too.

`tests/test_memory_table.py` asserts at 1-4 processes and without MPI, on small sizes, that
each program's peak per rank stays within `BOUND` x N/P + `SLACK` (documented on
docs/communication.md).
"""

from __future__ import annotations

import gc
import json
import sys
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import numpy

ROOT = Path(__file__).resolve().parents[1]
for sub in ("", "examples/programs"):
    if str(ROOT / sub) not in sys.path:
        sys.path.insert(0, str(ROOT / sub))

import jacobi  # noqa: E402
import laplace  # noqa: E402
import monte_carlo_pi  # noqa: E402
import nbody  # noqa: E402

import d2o  # noqa: E402
import d2o.numpy as dnp  # noqa: E402

DATA = ROOT / "docs" / "_data" / "memory_table.json"
TABLE = ROOT / "docs" / "_data" / "memory_table.md"
#: the test's bound: peak per rank <= BOUND[program] x N/P + SLACK bytes (one N/P above
#: numpy's own peak on one process, in units of N)
BOUND = {"monte_carlo_pi": 6.0, "jacobi": 3.0, "laplace": 4.0, "nbody": 7.0}
SLACK = 512 * 1024

#: name -> (size -> (what, N bytes, run(np)))
PROGRAMS: dict[str, Callable[[int], tuple[str, int, Callable]]] = {
    "monte_carlo_pi": lambda n: (
        f"Monte Carlo pi, {n:,} samples",
        8 * n,
        lambda np: monte_carlo_pi.run(np, n),
    ),
    "jacobi": lambda n: (f"Jacobi, {n} x {n}, 3 iterations", 8 * n * n, lambda np: jacobi.run(np, n, 3)),
    "laplace": lambda n: (f"Laplace, {n} x {n}, 3 sweeps", 8 * n * n, lambda np: laplace.run(np, n, 3)),
    "nbody": lambda n: (f"N-body, {n} bodies, 2 steps", 8 * n * n, lambda np: nbody.run(np, n, 2)),
}  # fmt: skip
#: the table's sizes, and the test's
SIZES = {"monte_carlo_pi": 4_000_000, "jacobi": 2000, "laplace": 2000, "nbody": 1000}
SMALL = {"monte_carlo_pi": 240_000, "jacobi": 360, "laplace": 360, "nbody": 240}


def peak(fn: Callable[[], object]) -> int:
    """Bytes this rank's traced memory rose above its start while ``fn()`` ran."""
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        fn()
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


def measure(name: str, n: int, comm: object = None) -> dict:
    """Collective: program ``name`` at size ``n``: the largest peak of any rank, and N."""
    comm = d2o.default_comm() if comm is None else comm
    what, nbytes, run = PROGRAMS[name](n)
    run(dnp)  # warm: plans and caches made once
    mine = peak(lambda: run(dnp))
    return {"what": what, "N": nbytes, "peak": comm.allreduce(mine, "max"), "P": comm.size}


def numpy_peak(name: str, n: int) -> int:
    """numpy's peak for the same program on this process alone."""
    _, _, run = PROGRAMS[name](n)
    run(numpy)
    return peak(lambda: run(numpy))


def record() -> None:
    """Collective: every program at its table size on this run's ranks, into the data file."""
    comm = d2o.default_comm()
    rows = {name: measure(name, SIZES[name], comm) for name in PROGRAMS}
    if comm.size == 1:
        for name, row in rows.items():
            row["numpy_peak"] = numpy_peak(name, SIZES[name])
    if comm.rank == 0:
        doc = json.loads(DATA.read_text()) if DATA.is_file() else {}
        doc[str(comm.size)] = rows
        DATA.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
        for name, r in rows.items():
            print(f"{comm.size} ranks  {name:15} peak {r['peak'] / (r['N'] / comm.size):.2f} N/P")


def render() -> str:
    """The markdown table of the data file (written to `TABLE`)."""
    doc = json.loads(DATA.read_text())
    counts = sorted(doc, key=int)
    head = ["program (global size fixed)", "N", "numpy, 1 process (x N)"]
    head += [f"d2o, {p} process{'es' if p != '1' else ''} (x N/P)" for p in counts]
    head += ["test bound (x N/P)"]
    lines = [
        "| " + " | ".join(head) + " |",
        "|---|---:|---:|" + "---:|" * len(counts) + "---:|",
    ]
    for name in PROGRAMS:
        one = doc["1"][name]
        cells = [one["what"], f"{one['N'] / 2**20:.1f} MiB", f"{one['numpy_peak'] / one['N']:.2f}"]
        for p in counts:
            r = doc[p][name]
            cells.append(f"{r['peak'] / (r['N'] / int(p)):.2f}")
        cells.append(f"{BOUND[name]:g}")
        lines.append("| " + " | ".join(cells) + " |")
    text = (
        "Peak memory per rank (the most any rank's traced memory rose while the program ran, "
        "tracemalloc) in units of N/P, N the program's largest array; numpy's peak for the "
        "same program on one process in units of N.  Generated by "
        "`mpiexec -n P python tools/memory_table.py` for P = 1, 2, 4 and "
        "`python tools/memory_table.py render`.\n\n"
    )
    return text + "\n".join(lines) + "\n"


if __name__ == "__main__":
    if sys.argv[1:] == ["render"]:
        TABLE.write_text(render())
        print(TABLE.read_text())
    else:
        record()
