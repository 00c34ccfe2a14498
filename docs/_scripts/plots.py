"""Draw the performance page's plots from the recorded benchmark figures in docs/_data/.

Usage::

    python docs/_scripts/plots.py [OUTDIR]        # draw (make docs does, into docs/_generated)
    python benchmarks/bench_core.py > one.md      # re-measure Table 3 on 1 process ...
    python docs/_scripts/plots.py --table3 one.md --processes 1   # ... and record it

``docs/_data/table3.csv`` holds the output of ``benchmarks/bench_core.py`` (d2o's
speed as a percentage of numpy's per operation and array size, at 1 and 2
processes) and ``docs/_data/programs.csv`` that of ``benchmarks/bench_programs.py``;
both name the machine they were measured on.  ``--table3 FILE`` replaces the rows of
one process count with the first table of bench_core's markdown output in FILE.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "docs" / "_data"
MACHINE = "2 cores, 24 GiB, numpy 2.4, MPICH 5.0"

# Operations drawn (the others are in the table on the page).
TABLE3_OPS = ["sum", "obj+obj", "sqrt", "copy", "obj[::-2]", "bincount"]


def read_csv(path: Path) -> tuple[list[str], list[str], list[list[str]]]:
    """(comment lines, header, rows) of a recorded-figures file."""
    lines = path.read_text().splitlines()
    comments = [line for line in lines if line.startswith("#")]
    rows = list(csv.reader(line for line in lines if line and not line.startswith("#")))
    return comments, rows[0], rows[1:]


def record_table3(bench_output: Path, processes: int) -> None:
    """Replace the rows of ``processes`` in table3.csv with bench_core.py's first table."""
    path = DATA / "table3.csv"
    comments, header, rows = read_csv(path)
    table = [ln for ln in bench_output.read_text().splitlines() if ln.startswith("|")]
    cols = [c.strip() for c in table[0].strip("|").split("|")]
    if cols[1:] != header[2:]:
        raise SystemExit(f"bench_core.py's sizes {cols[1:]} differ from table3.csv's {header[2:]}")
    new = []
    for line in table[2:]:
        cells = [c.strip().strip("*") for c in line.strip("|").split("|")]
        if len(cells) != len(cols):
            break  # the end of the first table
        new.append([cells[0], str(processes), *cells[1:]])
    rows = [r for r in rows if r[1] != str(processes)] + new
    rows.sort(key=lambda r: int(r[1]))
    with path.open("w", newline="") as f:
        f.write("\n".join(comments) + "\n")
        csv.writer(f, lineterminator="\n").writerows([header, *rows])
    print(f"recorded {len(new)} rows for {processes} process(es) in {path.relative_to(ROOT)}")


def table3_plot(path: Path) -> None:
    import matplotlib.pyplot as plt

    _, header, rows = read_csv(DATA / "table3.csv")
    sizes = [int(h.split("^")[1]) for h in header[2:]]
    counts = sorted({int(r[1]) for r in rows})
    fig, axes = plt.subplots(1, len(counts), figsize=(5.2 * len(counts), 3.8), sharey=True)
    for ax, n in zip(axes, counts):
        for r in rows:
            if int(r[1]) == n and r[0] in TABLE3_OPS:
                ax.plot(sizes, [float(v) for v in r[2:]], marker="o", ms=3, label=r[0])
        ax.axhline(100, color="black", lw=0.8, ls="--")
        ax.set_yscale("log")
        ax.set_xticks(sizes, [f"$2^{{{k}}}$" for k in sizes], fontsize=8)
        ax.set_xlabel("array size (elements)")
        where = "1 process, no MPI" if n == 1 else f"{n} processes (mpiexec)"
        ax.set_title(f"{where}: d2o against numpy on 1 process", fontsize=9)
        ax.grid(alpha=0.3, which="both")
    axes[0].set_ylabel("d2o speed, % of numpy's")
    axes[-1].legend(fontsize=8, loc="upper left")
    fig.suptitle(f"The paper's Table 3 rows, benchmarks/bench_core.py ({MACHINE})", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def programs_plot(path: Path) -> None:
    import matplotlib.pyplot as plt
    import numpy as np

    _, _, rows = read_csv(DATA / "programs.csv")
    names = [r[0] for r in rows]
    times = np.array([[float(v) for v in r[2:5]] for r in rows])
    x = np.arange(len(rows))
    fig, ax = plt.subplots(figsize=(7, 3.6))
    labels = ["numpy", "d2o.numpy, 1 process", "d2o.numpy, 2 processes"]
    for k, label in enumerate(labels):
        ax.bar(x + (k - 1) * 0.27, times[:, k], width=0.27, label=label)
    ax.set_xticks(x, names)
    ax.set_ylabel("seconds per run (lower is better)")
    ax.legend(fontsize=8)
    ax.set_title(f"Seed programs, benchmarks/bench_programs.py ({MACHINE}; best of 5)", fontsize=9)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("outdir", nargs="?", default=str(ROOT / "docs" / "_generated"))
    p.add_argument("--table3", type=Path, help="bench_core.py's output to record")
    p.add_argument("--processes", type=int, default=1, help="its process count (with --table3)")
    args = p.parse_args(argv)
    if args.table3:
        record_table3(args.table3, args.processes)
        return
    import matplotlib

    matplotlib.use("Agg")
    out = Path(args.outdir)
    out.mkdir(parents=True, exist_ok=True)
    table3_plot(out / "table3.png")
    programs_plot(out / "programs.png")


if __name__ == "__main__":
    main(sys.argv[1:])
