"""Smoke test of an installed d2o wheel (``make test-wheel`` runs it under ``mpiexec -n 2``).

Run from outside the source tree, with the interpreter of the virtual environment the
wheel was installed into.  Rank 0 prints one line per rank; the Makefile compares them.
"""

from __future__ import annotations

import importlib.metadata
import importlib.resources
import os
import sys

import numpy as np

import d2o
from d2o import distributed_data_object

# the installed wheel, not the source tree
here = os.path.realpath(d2o.__file__)
assert here.startswith(os.path.realpath(sys.prefix) + os.sep), (here, sys.prefix)
assert importlib.metadata.version("d2o") == d2o.__version__, d2o.__version__
assert importlib.resources.files("d2o").joinpath("py.typed").is_file(), "py.typed not shipped"

a = np.arange(16.0).reshape(4, 4)
obj = distributed_data_object(a)  # the README's first example
y = np.sqrt(obj) * 2 + obj[::-1]
expected = np.sqrt(a) * 2 + a[::-1]

comm = obj.distributor.comm
assert comm.mpi is not None, "d2o fell back to its serial stand-in (no mpi4py?)"
rows = y.distributor.local_slice[0]
np.testing.assert_allclose(y.get_local_data(copy=False), expected[rows])
total = float(y.sum())
np.testing.assert_allclose(total, expected.sum())
np.testing.assert_allclose(y.mean(axis=0).get_full_data(), expected.mean(axis=0))
line = f"rank {comm.rank} of {comm.size}: rows {rows.start}:{rows.stop}, sum {total:.4f}"
lines = comm.allgather(line)  # printed by rank 0 alone: mpiexec may interleave ranks' output
if comm.rank == 0:
    print("\n".join(lines), flush=True)
