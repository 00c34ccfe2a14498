"""Newtonian N-body simulation in DistNumPy's original form: outer products by ``dot``.

The same physics as ``nbody.py`` (softened gravity, a kick-drift step of length ``dt``)
written the way the paper's program, a translation of a MATLAB assignment (Kristensen &
Vinter, PGAS 2010, section 4.3), writes it: every quantity is a column vector (n x 1),
the n x n matrices of coordinate differences are outer products with a column and a row
of ones, and the net force on each body is the matrix of pair forces times a column of
ones::

    Rx = dot(OnesCol, Px.T) - dot(Px, OnesRow)       # Rx[i, j] = x[j] - x[i]
    F  = G dot(M, M.T) / (|R|^2 + eps^2)^(3/2)        # pair forces over distance
    Vx += dot(Rx * F, OnesCol) * dt / M               # net force / mass

Every ``dot`` here is a product of a special shape: a contraction of length 1 (an outer
product) or a matrix times a column.  Under d2o.numpy the n x n matrices are distributed
by rows, like the columns they come from; the row vectors (``Px.T``, ``OnesRow``) are
needed whole by every rank (n elements each), and the row sums are local.

The initial state is ``nbody.py``'s (the same formulas, as columns), so both programs
simulate the same bodies; ``seed`` shifts the formulas' phases.  The code is plain
numpy; only the import differs::

    USE_NUMPY=1 python examples/programs/nbody_dot.py 1000   # numpy
    mpiexec -n 2 python examples/programs/nbody_dot.py 1000  # d2o.numpy
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

G = 1.0
DT = 1e-3
EPS = 0.05


def bodies(np, n, seed=0):
    """Positions, velocities and masses of ``n`` bodies as n x 1 columns:
    ``(Px, Py, Pz, Vx, Vy, Vz, M)``."""
    i = np.arange(n, dtype=np.float64).reshape(n, 1)
    Px = np.sin(i * 1.1 + seed)
    Py = np.sin(i * 2.3 + (seed + 1.0))
    Pz = np.sin(i * 3.7 + (seed + 2.0))
    Vx = -0.5 * Py
    Vy = 0.5 * Px
    Vz = np.zeros((n, 1))
    M = (1.0 + 0.5 * np.cos(i * 0.7)) / n
    return Px, Py, Pz, Vx, Vy, Vz, M


def step(np, Px, Py, Pz, Vx, Vy, Vz, M, OnesCol, OnesRow, dt=DT, eps=EPS):
    """One time step, in place."""
    # distance between all pairs of bodies
    Rx = np.dot(OnesCol, Px.T) - np.dot(Px, OnesRow)
    Ry = np.dot(OnesCol, Py.T) - np.dot(Py, OnesRow)
    Rz = np.dot(OnesCol, Pz.T) - np.dot(Pz, OnesRow)
    Dsq = Rx**2 + Ry**2 + Rz**2 + eps**2
    # mutual forces between all pairs, over their distance
    F = G * np.dot(M, M.T) * Dsq**-1.5
    # net force on each body; change in velocity, then in position
    Vx += np.dot(Rx * F, OnesCol) * dt / M
    Vy += np.dot(Ry * F, OnesCol) * dt / M
    Vz += np.dot(Rz * F, OnesCol) * dt / M
    Px += Vx * dt
    Py += Vy * dt
    Pz += Vz * dt


def simulate(np, n, iterations, seed=0):
    """The state after ``iterations`` steps."""
    state = bodies(np, n, seed)
    OnesCol = np.ones((n, 1))
    OnesRow = np.ones((1, n))
    for _ in range(iterations):
        step(np, *state, OnesCol, OnesRow)
    return state


def run(np, n, iterations, seed=0):
    """Simulate; returns ``(kinetic energy, rms distance from the origin)``."""
    Px, Py, Pz, Vx, Vy, Vz, M = simulate(np, n, iterations, seed)
    ekin = 0.5 * np.sum(M * (Vx**2 + Vy**2 + Vz**2))
    rms = np.sqrt(np.mean(Px**2 + Py**2 + Pz**2))
    return float(ekin), float(rms)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("n", type=int, nargs="?", default=1000, help="bodies")
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    ekin, rms = run(np, args.n, args.iterations, args.seed)
    if RANK == 0:
        print(f"E_kin = {ekin:.12g}, rms radius = {rms:.12g} ({args.n} bodies, {np.__name__})")


if __name__ == "__main__":
    main()
