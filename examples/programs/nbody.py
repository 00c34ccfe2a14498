"""Newtonian N-body simulation: DistNumPy's third benchmark.

The paper (Kristensen & Vinter, PGAS 2010, section 4.3) computes all body-body
interactions with universal functions and matrix multiplications (a translation of a
MATLAB program it does not list).  This is that algorithm in numpy: each step forms the
n x n matrices of coordinate differences by broadcasting, the softened inverse cube of
the distances, and the accelerations as matrix-vector products with the masses::

    a_i = G sum_j m_j (r_j - r_i) / (|r_j - r_i|^2 + eps^2)^(3/2)

followed by a kick-drift step (symplectic Euler) of length ``dt``.  The softening
``eps`` makes the diagonal (i = j) contribute 0 without special-casing it.

The initial state (positions in [-1, 1]^3, a slow rotation about the z axis, masses
summing to about 1) comes from deterministic formulas, so numpy and d2o.numpy start
from bit-for-bit the same bodies; ``seed`` shifts the formulas' phases.

The code is plain numpy; only the import differs::

    USE_NUMPY=1 python examples/programs/nbody.py 1000   # numpy
    mpiexec -n 2 python examples/programs/nbody.py 1000  # d2o.numpy

Under d2o.numpy the n x n matrices are distributed by rows (body i's interactions),
so each rank computes the forces on its own bodies.
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
    """Positions, velocities and masses of ``n`` bodies: ``(x, y, z, vx, vy, vz, m)``."""
    i = np.arange(n, dtype=np.float64)
    x = np.sin(i * 1.1 + seed)
    y = np.sin(i * 2.3 + (seed + 1.0))
    z = np.sin(i * 3.7 + (seed + 2.0))
    vx = -0.5 * y
    vy = 0.5 * x
    vz = np.zeros(n)
    m = (1.0 + 0.5 * np.cos(i * 0.7)) / n
    return x, y, z, vx, vy, vz, m


def step(np, x, y, z, vx, vy, vz, m, dt=DT, eps=EPS):
    """One time step, in place."""
    dx = x[np.newaxis, :] - x[:, np.newaxis]  # dx[i, j] = x[j] - x[i]
    dy = y[np.newaxis, :] - y[:, np.newaxis]
    dz = z[np.newaxis, :] - z[:, np.newaxis]
    r2 = dx**2 + dy**2 + dz**2 + eps**2
    inv_r3 = r2**-1.5
    vx += G * dt * ((dx * inv_r3) @ m)
    vy += G * dt * ((dy * inv_r3) @ m)
    vz += G * dt * ((dz * inv_r3) @ m)
    x += vx * dt
    y += vy * dt
    z += vz * dt


def simulate(np, n, iterations, seed=0):
    """The state after ``iterations`` steps."""
    state = bodies(np, n, seed)
    for _ in range(iterations):
        step(np, *state)
    return state


def run(np, n, iterations, seed=0):
    """Simulate; returns ``(kinetic energy, rms distance from the origin)``."""
    x, y, z, vx, vy, vz, m = simulate(np, n, iterations, seed)
    ekin = 0.5 * np.sum(m * (vx**2 + vy**2 + vz**2))
    rms = np.sqrt(np.mean(x**2 + y**2 + z**2))
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
