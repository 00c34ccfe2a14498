"""The 3-D heat equation on a 2-D process mesh: explicit Euler with a 7-point stencil.

``du/dt = D laplace(u)`` on the unit cube, an n x n x n grid (default n = 64), starts from
a hot Gaussian blob off the centre and holds the six faces at 0 (cold walls); each step
is ``u += alpha * (sum of the 6 neighbours - 6 u)`` on the interior, written with shifted
slices (``alpha = D dt / dx^2``, stable for ``alpha <= 1/6``).  The code is plain numpy:
under d2o.numpy (the default) only the import and the layout given when the field is
created differ, ``d2o.layout(None, (0, 1))``, which cuts axes 0 and 1 over a balanced
mesh of the processes (2 x 2 on 4 ranks), so each rank holds a pencil of the cube and the
shifted slices exchange only the layers next to its mesh neighbours.  ``USE_NUMPY=1``
runs the same code on numpy and prints the same numbers.  Rank 0 prints the total heat
and the largest temperature before and after, and the time of the loop, and writes a PNG
of the mid-plane ``u[:, :, n // 2]`` (only that 2-D slice is gathered, onto rank 0)::

    USE_NUMPY=1 python examples/heat3d.py                     # numpy
    mpiexec -n 4 python examples/heat3d.py --png out/heat3d.png  # d2o.numpy on a 2 x 2 mesh
"""

from __future__ import annotations

import argparse
import os
import time

if os.environ.get("USE_NUMPY"):
    import numpy as np

    RANK, DIST, MESH = 0, {}, "numpy, 1 process"
else:
    import d2o
    import d2o.numpy as np

    RANK = d2o.default_comm().rank
    LAYOUT = d2o.layout(None, (0, 1))  # axes 0 and 1 cut over a balanced 2-D process mesh
    DIST = {"dist": LAYOUT}
    MESH = f"d2o.numpy on a {' x '.join(map(str, LAYOUT.mesh))} process mesh"


def initial(n, center=(0.35, 0.6, 0.5), width=0.1):
    """The starting field: a Gaussian blob of peak 1 at ``center``, the faces at 0."""
    h = 1.0 / (n - 1)

    def blob(i, j, k):
        r2 = (i * h - center[0]) ** 2 + (j * h - center[1]) ** 2 + (k * h - center[2]) ** 2
        return np.exp(-r2 / (2 * width**2))

    u = np.fromfunction(blob, (n, n, n), **DIST)
    for face in (np.s_[0], np.s_[-1], np.s_[:, 0], np.s_[:, -1], np.s_[..., 0], np.s_[..., -1]):
        u[face] = 0.0
    return u


def step(u, alpha):
    """One explicit Euler step in place (the faces stay as they are).

    The sum starts from the centre ``c`` and adds the shifted slices in place: no
    temporary per term, and under d2o each shifted slice moves only the layer that
    crosses a rank boundary into ``c``'s layout."""
    c = u[1:-1, 1:-1, 1:-1]
    lap = -6.0 * c
    lap += u[:-2, 1:-1, 1:-1]
    lap += u[2:, 1:-1, 1:-1]
    lap += u[1:-1, :-2, 1:-1]
    lap += u[1:-1, 2:, 1:-1]
    lap += u[1:-1, 1:-1, :-2]
    lap += u[1:-1, 1:-1, 2:]
    lap *= alpha
    c += lap


def summary(u, n):
    """(total heat, largest temperature): identical floats on every rank."""
    return float(u.sum()) / (n - 1) ** 3, float(u.max())


def plane_on_rank0(u, n):
    """The mid-plane ``u[:, :, n // 2]`` as a numpy array on rank 0 (None elsewhere)."""
    plane = u[:, :, n // 2]
    if hasattr(plane, "get_full_data"):  # d2o: gather the 2-D slice only
        return plane.get_full_data(target_rank=0)
    return plane


def save_png(plane, path, title):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.2, 4.4))
    im = ax.imshow(plane.T, origin="lower", extent=(0, 1, 0, 1), cmap="inferno")
    fig.colorbar(im, ax=ax, label="temperature")
    ax.set_xlabel("x")
    ax.set_ylabel("y")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=64, help="grid points per side")
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--alpha", type=float, default=0.15, help="D dt / dx^2 (<= 1/6)")
    parser.add_argument("--png", default="heat3d.png", help="picture of the mid-plane")
    args = parser.parse_args()
    n = args.n
    u = initial(n)
    heat0, max0 = summary(u, n)
    t0 = time.perf_counter()
    for _ in range(args.steps):
        step(u, args.alpha)
    heat, hottest = summary(u, n)
    elapsed = time.perf_counter() - t0
    plane = plane_on_rank0(u, n)
    if RANK == 0:
        print(f"{n}^3 grid, {args.steps} steps, alpha = {args.alpha} ({MESH})")
        print(f"total heat:      {heat0:.15e} -> {heat:.15e}")
        print(f"max temperature: {max0:.15e} -> {hottest:.15e}")
        print(f"time: {elapsed:.3f} s for {args.steps} steps")
        title = f"u[:, :, {n // 2}] after {args.steps} steps, {n}^3 grid ({MESH})"
        save_png(plane, args.png, title)
        print(f"mid-plane written to {args.png}")


if __name__ == "__main__":
    main()
