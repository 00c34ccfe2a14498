"""Monte Carlo estimate of pi: DistNumPy's first benchmark (Kristensen & Vinter, PGAS 2010).

The program of the paper's Fig. 5 (a translation of SciMark 2.0's Monte Carlo kernel):
draw ``S`` points uniformly in the unit square, square their coordinates, count those
inside the quarter circle and multiply the fraction by 4.  ``iterations`` repeats the
simulation with fresh samples and pools the counts ("combining multiple simulations
will allow more samples").

The code is plain numpy; only the import differs::

    USE_NUMPY=1 python examples/programs/monte_carlo_pi.py 10000000   # numpy
    mpiexec -n 2 python examples/programs/monte_carlo_pi.py 10000000  # d2o.numpy

Random numbers: ``np.random.default_rng(seed).random(n)``.  d2o.numpy's generator draws
numpy's own stream for ``random`` (each rank jumps to the elements it holds), so both
backends print the same estimate, on any number of processes.  `pi_from_points` is the
part without random numbers: given identical samples (made by numpy and passed through
``np.asarray``) both backends count exactly the same points.
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


def count_inside(np, x, y):
    """How many of the points (x, y) lie inside the unit circle (Fig. 5, lines 5-7)."""
    x = np.square(x)
    y = np.square(y)
    z = (x + y) < 1
    return int(np.add.reduce(z))


def pi_from_points(np, x, y):
    """The estimate of pi from given samples ``x``, ``y`` in [0, 1)."""
    return count_inside(np, x, y) * 4.0 / x.size


def run(np, n, iterations=1, seed=0):
    """``iterations`` simulations of ``n`` samples each; the pooled estimate of pi."""
    rng = np.random.default_rng(seed)
    inside = 0
    for _ in range(iterations):
        x = rng.random(n)
        y = rng.random(n)
        inside += count_inside(np, x, y)
    return inside * 4.0 / (n * iterations)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("n", type=int, nargs="?", default=1_000_000, help="samples")
    parser.add_argument("--iterations", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    pi = run(np, args.n, args.iterations, args.seed)
    if RANK == 0:
        print(f"pi ~ {pi:.6f} ({args.n * args.iterations} samples, {np.__name__})")


if __name__ == "__main__":
    main()
