"""Settings read once from the environment.

``D2O_MPI=0``            use the serial stand-in even when mpi4py is installed (read by _comm).
``D2O_STRATEGY``         the default distribution strategy (default 'equal').
``D2O_ITER_CHUNK``       minimum number of elements moved per chunk while iterating.
``D2O_SMALL_REDUCE``     result size (elements x ranks) up to which reductions combine
                         gathered partials in rank order instead of an Allreduce.
"""

from __future__ import annotations

import os

_STRATEGY = os.environ.get("D2O_STRATEGY", "equal")
_ITER_CHUNK = int(os.environ.get("D2O_ITER_CHUNK", 1 << 16))
_SMALL_REDUCE = int(os.environ.get("D2O_SMALL_REDUCE", 1 << 16))


def default_strategy() -> str:
    return _STRATEGY


def iter_chunk() -> int:
    return _ITER_CHUNK


def small_reduce() -> int:
    return _SMALL_REDUCE
