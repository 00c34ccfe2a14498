"""Particle-in-cell charge deposit with one-sided accumulate (Global Arrays' ``acc``).

Each rank holds its own particles, anywhere in a periodic 2-D box; the charge grid is a
distributed array cut into slabs of rows.  Every rank adds its particles' charge into the
grid with cloud-in-cell weights (each particle spreads over the 4 cells around it),
without the ranks that own those cells taking part: ``w.scatter_acc`` combines repeated
cells and sends each owner its cells with one atomic MPI accumulate, so concurrent
deposits from all ranks into the same cells lose nothing.  The grid is then checked
against a serial numpy deposit of all particles::

    python examples/pic_deposit.py
    mpiexec -n 4 python examples/pic_deposit.py --cells 64 --particles 20000
"""

from __future__ import annotations

import argparse

import numpy as np

import d2o


def particles(rank: int, count: int, cells: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A rank's particles: positions in [0, cells) on both axes and charges."""
    rng = np.random.default_rng(1000 + rank)
    pos = rng.random((count, 2)) * cells
    return pos[:, 0], pos[:, 1], rng.choice([-1.0, 1.0], count)


def cic(x: np.ndarray, y: np.ndarray, q: np.ndarray, cells: int) -> tuple:
    """Cloud-in-cell: the 4 cells of each particle (periodic) and the charge each gets."""
    i, j = np.floor(x).astype(np.intp), np.floor(y).astype(np.intp)
    fx, fy = x - i, y - j
    rows = np.concatenate([i, i + 1, i, i + 1]) % cells
    cols = np.concatenate([j, j, j + 1, j + 1]) % cells
    w = np.concatenate([(1 - fx) * (1 - fy), fx * (1 - fy), (1 - fx) * fy, fx * fy])
    return rows, cols, w * np.tile(q, 4)


def main(cells: int = 32, count: int = 5000) -> float:
    comm = d2o.default_comm()
    grid = d2o.distributed_data_object(
        global_shape=(cells, cells), dtype=np.float64, distribution_strategy="equal"
    )
    grid.set_local_data(0.0)
    rows, cols, charge = cic(*particles(comm.rank, count, cells), cells)
    with grid.window() as w:  # collective; its exit completes every deposit
        w.scatter_acc((rows, cols), charge)
    # the serial result: every rank's particles deposited by numpy
    expected = np.zeros((cells, cells))
    for r in range(comm.size):
        rr, cc, qq = cic(*particles(r, count, cells), cells)
        np.add.at(expected, (rr, cc), qq)
    err = float(np.max(np.abs(grid.get_full_data() - expected)))
    if comm.rank == 0:
        print(
            f"{comm.size} ranks, {comm.size * count} particles on a {cells}x{cells} grid: "
            f"total charge {expected.sum():+.1f}, largest difference from numpy {err:.2e}"
        )
    assert err < 1e-9, err
    return err


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", type=int, default=32)
    ap.add_argument("--particles", type=int, default=5000, help="per rank")
    args = ap.parse_args()
    main(args.cells, args.particles)
