"""``d2o.numpy.random``: random numbers independent of the number of processes.

``default_rng(seed)`` gives a `Generator` whose draws are the same global array for
any number of processes and without MPI (see `d2o.ops.random`); each rank computes only
the blocks of the global index space it holds.  The module-level functions draw from
one default generator.
"""

from __future__ import annotations

from ..ops.random import (
    Generator,
    choice,
    default_rng,
    exponential,
    integers,
    normal,
    random,
    seed,
    standard_normal,
    uniform,
)

#: numpy's legacy name of `random` on the default generator
random_sample = random
rand = None  # numpy's legacy shape-as-arguments API is not offered: use random(size)

__all__ = [
    "Generator", "default_rng", "seed", "random", "random_sample", "standard_normal",
    "normal", "uniform", "integers", "exponential", "choice",
]  # fmt: skip
del rand
