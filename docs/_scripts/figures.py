"""Draw the concepts page's pictures of which rank holds which part of an array.

Run: ``python docs/_scripts/figures.py [OUTDIR]`` (default ``docs/_generated``);
``make docs`` runs it.  The ownership is not drawn by hand: it is computed by d2o's
own distributors (``'equal'``, ``'fftw'``, ``'freeform'``, ``'not'``) and mesh
layouts (`d2o.layout`, block and block-cyclic) for a communicator of 3 or 4 ranks.
No MPI is needed: the distributors only ask a communicator for its rank and size,
so a stand-in of that size is passed (nothing is communicated).  The text pictures
(``*.txt``) are `d2o.show`'s output for the same layouts.
"""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path
from types import SimpleNamespace

os.environ.setdefault("D2O_MPI", "0")
ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # run from a checkout without installing d2o
    sys.path.insert(0, str(ROOT))

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.colors import ListedColormap  # noqa: E402

import d2o  # noqa: E402
from d2o.core.comm import Comm  # noqa: E402
from d2o.layouts.distributors import get_distributor, index_of, slab_distributor  # noqa: E402

# One colour per rank (colour-blind safe), then grey for "every rank".
COLOURS = ["#4477AA", "#EE6677", "#228833", "#CCBB44", "#66CCEE", "#AA3377"]
EVERY = "#BBBBBB"


class _Size:
    """Answers a communicator's two local questions (rank, size); never communicates."""

    def __init__(self, size: int) -> None:
        self.size = size

    def Get_rank(self) -> int:
        return 0

    def Get_size(self) -> int:
        return self.size


def comm_of(size: int) -> Comm:
    """A d2o communicator of ``size`` ranks that only layouts are computed on."""
    return Comm(_Size(size))


def holders(dist) -> tuple[np.ndarray, np.ndarray]:
    """Per element of the global array: a colour index (the lowest rank holding it, or -1
    when every rank does) and a label (the ranks holding it), from ``dist.region``."""
    held = np.zeros((dist.comm.size, *dist.global_shape), dtype=bool)
    for r in range(dist.comm.size):
        held[r][index_of(dist.region(r))] = True
    assert held.any(axis=0).all(), "every element is held somewhere"
    colour = np.where(held.all(axis=0), -1, held.argmax(axis=0))
    labels = np.empty(dist.global_shape, dtype=object)
    for idx in np.ndindex(*dist.global_shape):
        ranks = np.flatnonzero(held[(slice(None), *idx)])
        labels[idx] = "all" if len(ranks) == dist.comm.size > 1 else ",".join(map(str, ranks))
    return colour, labels


def draw(ax, dist, title: str) -> None:
    """One panel: the array's cells coloured and labelled by the ranks holding them."""
    colour, labels = holders(dist)
    nranks = dist.comm.size
    cmap = ListedColormap([EVERY, *COLOURS[:nranks]])
    ax.imshow(colour + 1, cmap=cmap, vmin=0, vmax=nranks, aspect="equal")
    rows, cols = colour.shape
    for i in range(rows):
        for j in range(cols):
            ax.text(j, i, labels[i, j], ha="center", va="center", fontsize=8)
    ax.set_xticks(np.arange(cols))
    ax.set_yticks(np.arange(rows))
    ax.set_xticks(np.arange(-0.5, cols), minor=True)
    ax.set_yticks(np.arange(-0.5, rows), minor=True)
    ax.grid(which="minor", color="white", linewidth=1.5)
    ax.tick_params(which="both", length=0, labelsize=7)
    ax.set_title(title, fontsize=9)


def strategies_figure(path: Path) -> None:
    """The four strategies on 3 ranks, for a 4 x 4 array (the paper's example)."""
    comm = comm_of(3)
    shape = (4, 4)
    panels = [
        ("'equal' (axis 0)", get_distributor("equal", shape, comm, 0)),
        ("'fftw' (axis 0)", get_distributor("fftw", shape, comm, 0)),
        ("'freeform' (lengths 1, 0, 3)", slab_distributor(shape, comm, 0, (0, 1, 1, 4))),
        ("'equal' along axis 1", get_distributor("equal", shape, comm, 1)),
        ("'not' (replicated)", get_distributor("not", shape, comm)),
    ]
    fig, axes = plt.subplots(1, len(panels), figsize=(2.1 * len(panels), 2.6))
    for ax, (title, dist) in zip(axes, panels):
        draw(ax, dist, title)
    fig.suptitle("which rank holds which element: 4 x 4 array on 3 ranks", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def mesh_layouts(comm: Comm) -> list:
    return [
        ("layout(mesh=(2, 2), split=(0, 1))", d2o.layout(mesh=(2, 2), split=(0, 1), comm=comm)),
        (
            "layout(mesh=(2, 2), split=(0, None))",
            d2o.layout(mesh=(2, 2), split=(0, None), comm=comm),
        ),
        (
            "layout(mesh=(2, 2), split=(0, 1), block=2)",
            d2o.layout(mesh=(2, 2), split=(0, 1), block=2, comm=comm),
        ),
    ]


def mesh_figure(path: Path) -> None:
    """A 2 x 2 process mesh: block, with replicas, and block-cyclic, for an 8 x 8 array."""
    comm = comm_of(4)
    shape = (8, 8)
    layouts = mesh_layouts(comm)
    fig, axes = plt.subplots(1, len(layouts), figsize=(3.3 * len(layouts), 3.6))
    for ax, (title, lay) in zip(axes, layouts):
        draw(ax, lay.distributor(shape), title)
    fig.suptitle("8 x 8 array on a 2 x 2 mesh of ranks (rank = 2 * row + column)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def show_texts(outdir: Path) -> None:
    """d2o.show's pictures of the same layouts (text, as a program prints them)."""
    comm3, comm4 = comm_of(3), comm_of(4)
    cases = {
        "show_equal.txt": (get_distributor("equal", (6, 4), comm3, 1), "float64"),
        "show_fftw.txt": (get_distributor("fftw", (4, 4), comm3, 0), "int64"),
    }
    for i, (_, lay) in enumerate(mesh_layouts(comm4)):
        cases[f"show_mesh{i}.txt"] = (lay.distributor((8, 8)), "float64")
    for name, (dist, dtype) in cases.items():
        obj = SimpleNamespace(distributor=dist, dtype=np.dtype(dtype))
        (outdir / name).write_text(d2o.show(obj, file=io.StringIO()) + "\n")


def main(outdir: str | Path) -> None:
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    strategies_figure(outdir / "strategies.png")
    mesh_figure(outdir / "mesh.png")
    show_texts(outdir)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ROOT / "docs" / "_generated")
