"""Laplace equation on the unit square by Jacobi sweeps: GAiN's ``laplace.py`` benchmark.

GAiN (Daily & Lewis, SciPy 2011) ran the numpy solver of the "Performance Python"
(perfpy) suite unchanged but for its import.  Its time step, on an n x n grid holding
the boundary values ``u = x^2 - y^2`` on its edges and 0 inside at the start::

    u_old = u.copy()
    u[1:-1, 1:-1] = (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:]) * 0.25
    err = sqrt(dot(v, v)) with v = (u - u_old) flattened

(perfpy weights the two directions by dy^2 and dx^2; on a square grid that is the
factor 0.25 above).  The right-hand side is evaluated before the assignment, so this is
a Jacobi, not a Gauss-Seidel, sweep.  perfpy flattens with ``.flat``, which d2o's arrays
lack; ``.ravel()`` is numpy's equivalent here.  ``iterations`` sweeps are made (GAiN's
table counts 100), or fewer once ``err`` falls to ``eps``.

The problem is deterministic: numpy and d2o.numpy compute the same grid (``seed`` is
only there for the programs' common signature).

The code is plain numpy; only the import differs::

    USE_NUMPY=1 python examples/programs/laplace.py 1000   # numpy
    mpiexec -n 2 python examples/programs/laplace.py 1000  # d2o.numpy

Under d2o.numpy ``u`` is distributed by rows; the shifted slices ``u[:-2]`` and
``u[2:]`` need one boundary row from each neighbouring rank.
"""

from __future__ import annotations

import argparse
import os

if os.environ.get("USE_NUMPY"):
    import numpy as np

    RANK = 0
else:
    import d2o.numpy as np
    from d2o import default_comm

    RANK = default_comm().rank


def boundary(x, y):
    """perfpy's boundary condition."""
    return x**2 - y**2


def grid(np, n):
    """The n x n grid on [0, 1]^2: boundary values on the edges, 0 inside."""
    u = np.zeros((n, n))
    x = np.linspace(0.0, 1.0, n)
    y = np.linspace(0.0, 1.0, n)
    u[0, :] = boundary(0.0, y)
    u[-1, :] = boundary(1.0, y)
    u[:, 0] = boundary(x, 0.0)
    u[:, -1] = boundary(x, 1.0)
    return u


def time_step(np, u):
    """One Jacobi sweep in place; returns the 2-norm of the change."""
    u_old = u.copy()
    u[1:-1, 1:-1] = (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:]) * 0.25
    v = (u - u_old).ravel()
    return np.sqrt(np.dot(v, v))


def solve(np, n, iterations, eps=1e-16):
    """Sweep until the change is at most ``eps``, at most ``iterations`` times;
    returns ``(u, err)``."""
    u = grid(np, n)
    err = float("inf")
    for _ in range(iterations):
        err = float(time_step(np, u))
        if err <= eps:
            break
    return u, err


def run(np, n, iterations, seed=0):
    """Solve; returns ``(err, rms of u)``: the last sweep's change and the grid's
    root-mean-square value (its mean is 0 by symmetry)."""
    u, err = solve(np, n, iterations)
    return err, float(np.sqrt(np.mean(u**2)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("n", type=int, nargs="?", default=500, help="grid points per side")
    parser.add_argument("--iterations", type=int, default=100)
    args = parser.parse_args()
    err, rms = run(np, args.n, args.iterations)
    if RANK == 0:
        print(f"err = {err:.6g}, rms(u) = {rms:.12g} ({args.n}^2 grid, {np.__name__})")


if __name__ == "__main__":
    main()
