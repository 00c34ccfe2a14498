"""Jacobi solver for a dense linear system: DistNumPy's second benchmark.

The loop of the paper's Fig. 6 (Kristensen & Vinter, PGAS 2010): with ``A = D + R``
(``D`` the diagonal), iterate ``h <- (b - R h) / D``, written as
``h + (b - add.reduce(A * h, 1)) / D``, until the largest relative change ``dmax``
is at most ``tol``.  The dominant operation is the element-wise product ``A * h``
(n^2 multiplications per iteration, memory-bound).  ``iterations`` caps the loop; the
default ``tol=0`` runs all of them unless the iteration stops changing ``h``.

The system (the paper does not give its inputs) comes from deterministic formulas, so
numpy and d2o.numpy build bit-for-bit the same ``A`` and ``b``::

    A[i, j] = cos(4 (i - j) / n) + n [i == j]      (diagonally dominant)
    b[i]    = 1.5 + sin(i / 2 + seed)              (positive: the first step has h != 0)

The code is plain numpy; only the import differs::

    USE_NUMPY=1 python examples/programs/jacobi.py 2000   # numpy
    mpiexec -n 2 python examples/programs/jacobi.py 2000  # d2o.numpy

Under d2o.numpy ``A`` is distributed by rows, so ``add.reduce(A * h, 1)`` sums locally;
``h`` (distributed too) is gathered for the broadcast ``A * h``.
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


def system(np, n, seed=0):
    """The matrix ``A`` (n x n) and right-hand side ``b`` (n) described above."""
    i = np.arange(n, dtype=np.float64)
    A = np.cos((i[:, np.newaxis] - i) * (4.0 / n))
    A += n * np.eye(n)
    b = 1.5 + np.sin(i * 0.5 + seed)
    return A, b


def solve(np, A, b, iterations, tol=0.0):
    """Fig. 6: Jacobi iterations from ``h = 0``; returns ``(h, dmax, iterations done)``."""
    h = np.zeros(np.shape(b), float)
    dmax = 1.0
    AD = np.diagonal(A)  # the paper's A.diagonal(): d2o's arrays have no such method
    k = 0
    # The first step divides by h = 0: dmax is inf, as in the paper.
    with np.errstate(divide="ignore", invalid="ignore"):
        while dmax > tol and k < iterations:
            hnew = h + (b - np.add.reduce(A * h, 1)) / AD
            tmp = np.absolute((h - hnew) / h)
            dmax = np.maximum.reduce(tmp)
            h = hnew
            k += 1
    return h, float(dmax), k


def run(np, n, iterations, seed=0, tol=0.0):
    """Solve the n x n system; returns ``(|h|, dmax)``: the solution's 2-norm and the last
    largest relative change."""
    A, b = system(np, n, seed)
    h, dmax, _ = solve(np, A, b, iterations, tol)
    return float(np.sqrt(np.dot(h, h))), dmax


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("n", type=int, nargs="?", default=1000, help="unknowns")
    parser.add_argument("--iterations", type=int, default=100)
    parser.add_argument("--tol", type=float, default=1e-12)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    norm, dmax = run(np, args.n, args.iterations, args.seed, args.tol)
    if RANK == 0:
        print(f"|h| = {norm:.12g}, dmax = {dmax:.3g} (n = {args.n}, {np.__name__})")


if __name__ == "__main__":
    main()
