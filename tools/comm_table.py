"""The communication table: what simple operations move on each layout, beside the model.

    mpiexec -n 4 python tools/comm_table.py            # 512 x 512: docs/_data/comm_table.md
    mpiexec -n 4 python tools/comm_table.py --n 64     # smaller, printed only

For each operation of issue 30's table and each layout (slabs; a process mesh; block-cyclic
on one mesh axis; block-cyclic on a mesh), ``d2o.trace`` counts the bytes every rank sends
(summed over the ranks), the MPI calls per rank and the largest group, and the model gives
the least an algorithm must move: the elements that change owner, and the 96-byte agreement
record of each rank where a value or an error must be agreed.  `tests/test_comm_table.py`
asserts every row within 1.1 x model + 1 KiB at 4 ranks (rows not yet native are listed in
``PENDING`` with their reason).
"""

from __future__ import annotations

import argparse
import gc
import sys
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import d2o  # noqa: E402
import d2o.numpy as dnp  # noqa: E402

OUT = ROOT / "docs" / "_data" / "comm_table.md"
#: bytes of one rank's agreement record (d2o.core.errors.RECORD_WORDS * 8)
RECORD = 96


def layouts(p: int, block: int) -> dict[str, Any]:
    """The layouts of the table at ``p`` ranks (the mesh ones need an even ``p`` >= 4)."""
    out: dict[str, Any] = {"slab": "equal"}
    if p >= 4 and p % 2 == 0:
        out["mesh"] = d2o.layout(mesh=(2, p // 2), split=(0, 1))
    out[f"cyclic {block}"] = d2o.layout(mesh=(p,), split=(0,), block=block)
    if p >= 4 and p % 2 == 0:
        out[f"mesh, block {block}"] = d2o.layout(mesh=(2, p // 2), split=(0, 1), block=block)
    return out


#: name -> the statement (x: a float64 array of the layout)
OPS: dict[str, Callable] = {
    "x[7, 9]": lambda x: x[7, 9],
    "x[7, 9] = 1": lambda x: x.__setitem__((7, 9), 1.0),
    "x[[1, 5, 9]]": lambda x: x[[1, 5, 9]],
    "np.where(x > 5, x, 0)": lambda x: dnp.where(x > 5, x, 0),
    "x[:-2] + x[2:]": lambda x: x[:-2] + x[2:],
    "np.mean(x, axis=1)": lambda x: dnp.mean(x, axis=1),
    "np.cumsum(x, axis=0)": lambda x: dnp.cumsum(x, axis=0),
    "np.roll(x, 1, axis=0)": lambda x: dnp.roll(x, 1, axis=0),
}

#: (operation, layout) -> why the row is above the model today (the test expects it to be)
PENDING: dict[tuple[str, str], str] = {}


def pending(op: str, lay: str, p: int, block: int) -> str | None:
    """Why row (``op``, ``lay``) at ``p`` ranks is not native today, or None."""
    if (op, lay) in PENDING:
        return PENDING[op, lay]
    extent = p if lay.startswith("cyclic") else 2  # ranks along the split of axis 0
    if op == "np.cumsum(x, axis=0)" and lay[-1].isdigit() and block < 2 * (extent - 1):
        return (
            "a block-cyclic scan needs blocks of at least 2 (extent - 1) rows (one "
            "Allgather of the block totals); smaller blocks run on the slab equivalent"
        )
    return None


#: (operation, layout kind) -> why its peak memory per rank is above 3 N/P today
PENDING_MEMORY: dict[tuple[str, str], str] = {
    ("np.roll(x, 1, axis=0)", "cyclic"): "the exchange's result and the local roll's copy are "
    "alive together: about 3.8 N/P",
    ("np.roll(x, 1, axis=0)", "mesh, block"): "the exchange's result and the local roll's copy "
    "are alive together: about 3.8 N/P",
}


def memory_pending(op: str, lay: str) -> str | None:
    """Why row (``op``, ``lay``) may use more than 3 N/P per rank today, or None."""
    kind = lay.rsplit(" ", 1)[0] if lay[-1].isdigit() else lay
    return PENDING_MEMORY.get((op, kind))


def model(op: str, x: Any) -> int:
    """The least bytes (all ranks together) ``op`` must send on ``x``'s layout."""
    d = x.distributor
    p, s = d.comm.size, x.dtype.itemsize
    n0, n1 = d.global_shape
    agree = p * RECORD if p > 1 else 0
    if op == "x[7, 9]":
        return agree  # the owner's element rides in the agreement record
    if op in ("x[7, 9] = 1", "np.where(x > 5, x, 0)"):
        return 0
    if op == "x[[1, 5, 9]]":
        return 3 * n1 * s + 2 * agree  # the rows to the result's owners; keys and errors
    cuts = _cuts(x, 0)
    if op == "x[:-2] + x[2:]":
        return cuts * 2 * n1 * s
    if op == "np.roll(x, 1, axis=0)":
        return (cuts + 1) * n1 * s
    if op == "np.cumsum(x, axis=0)":  # the running total of every piece along the axis
        return (cuts + 1) * n1 * s + agree
    if op == "np.mean(x, axis=1)":
        group = _group(x, 1)
        return 0 if group == 1 else p * _local_rows(x) * s  # one partial per row per rank
    raise KeyError(op)


def _cuts(x: Any, axis: int) -> int:
    """Places along ``axis`` where index i and i + 1 live on different ranks."""
    d = x.distributor
    n = d.global_shape[axis]
    split = getattr(d, "split", None)
    if split is None:  # slabs
        if d.replicated or d.axis != axis:
            return 0
        lengths = d.comm.allgather(x.data.shape[axis])
        return sum(1 for e in np.cumsum(lengths)[:-1] if 0 < e < n)
    if axis not in split:
        return 0
    m = split.index(axis)
    parts, block = d.layout.mesh[m], d.layout.block[m]
    if block is None:
        return parts - 1 if n >= parts else max(n - 1, 0)
    blocks = -(-n // block)
    return max(blocks - 1, 0) if parts > 1 else 0


def _group(x: Any, axis: int) -> int:
    d = x.distributor
    split = getattr(d, "split", None)
    if split is None:
        return d.comm.size if (not d.replicated and d.axis == axis) else 1
    return d.layout.mesh[split.index(axis)] if axis in split else 1


def _local_rows(x: Any) -> int:
    return int(x.data.shape[0])


def _peak(fn: Callable, x: Any, attempts: int = 2) -> int:
    """Bytes this rank's traced memory rises above its start while ``fn(x)`` runs (the
    least of ``attempts`` runs: a one-off interpreter allocation does not repeat)."""
    best = None
    for _ in range(attempts):
        gc.collect()
        tracemalloc.start()
        try:
            base = tracemalloc.get_traced_memory()[0]
            fn(x)
            peak = tracemalloc.get_traced_memory()[1] - base
        finally:
            tracemalloc.stop()
        best = peak if best is None else min(best, peak)
    return int(best)


def measure(n: int, comm: Any = None, block: int = 16, only: tuple | None = None) -> list[dict]:
    """Collective: the table's rows for an ``n`` x ``n`` float64 array on every layout
    (``only``: the one row ``(operation, layout)``)."""
    comm = d2o.default_comm() if comm is None else comm
    a = np.arange(n * n, dtype=np.float64).reshape(n, n) % 11
    rows = []
    with d2o.options(check_args=False):
        for lname, spec in layouts(comm.size, block).items():
            for op, fn in OPS.items():
                if only is not None and only != (op, lname):
                    continue
                x = d2o.distributed_data_object(a, distribution_strategy=spec)
                fn(x)  # warm: plans and caches made once
                with d2o.trace() as t:
                    fn(x)
                sent = comm.allreduce(t.bytes_sent)
                calls = comm.allreduce(t.collectives, op="max")
                group = comm.allreduce(max([r.max_group for r in t.records] or [0]), op="max")
                slab = comm.allreduce(sum(r.via_slab for r in t.records), op="max")
                peak = comm.allreduce(_peak(fn, x), op="max")
                rows.append(dict(op=op, layout=lname, sent=sent, calls=calls, group=group,
                                 via_slab=bool(slab), model=model(op, x), peak=peak,
                                 per_rank=comm.allreduce(x.data.nbytes, op="max")))  # fmt: skip
    return rows


def render(rows: list[dict], n: int, p: int) -> str:
    size = n * n * 8
    lines = [
        f"Bytes sent by all {p} ranks together for one call on a {n} x {n} float64 array "
        f"({size // 1024} KiB), beside the model's least; MPI calls per rank, the largest "
        "group, and the most any rank's traced memory rose during the call (tracemalloc), "
        "in units of N/P, the largest rank's share of the array.  Generated by "
        "`mpiexec -n 4 python tools/comm_table.py`.",
        "",
        "| operation | layout | bytes sent | model | ratio | calls per rank | group | via slab "
        "| peak memory per rank (x N/P) |",
        "|---|---|---:|---:|---:|---:|---:|---|---:|",
    ]
    for r in rows:
        ratio = "-" if r["model"] == 0 else f"{r['sent'] / r['model']:.2f}"
        lines.append(
            f"| `{r['op']}` | {r['layout']} | {r['sent']} | {r['model']} | {ratio} | "
            f"{r['calls']} | {r['group']} | {'yes' if r['via_slab'] else ''} | "
            f"{r['peak'] / r['per_rank']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=512)
    ap.add_argument("--block", type=int, default=16)
    args = ap.parse_args(argv)
    comm = d2o.default_comm()
    rows = measure(args.n, comm, args.block)
    if comm.rank == 0:
        text = render(rows, args.n, comm.size)
        print(text)
        if args.n == 512 and comm.size == 4:
            OUT.write_text(text)


if __name__ == "__main__":
    main()
