"""Shared pytest setup for d2o: works serially (D2O_MPI=0) and under mpiexec.

Under MPI every rank runs the whole suite; assertions must be collective
(see :mod:`d2o.testing`) so all ranks pass or fail each test together.
"""

from __future__ import annotations

import gc
import os
import shutil
import tempfile

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

from d2o.core.comm import default_comm

# Every rank must draw the same examples: derandomize, no example database.
settings.register_profile(
    "d2o",
    derandomize=True,
    deadline=None,
    max_examples=40,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile("d2o")


def pytest_sessionstart(session: pytest.Session) -> None:
    # Warm-up collective: mpi4py lazily duplicates the communicator on the first
    # object-mode collective while holding the GIL, which would stop the
    # thread-based timeout from firing if a rank got stuck there.
    default_comm().allreduce(0)


#: The parameters that name a test's dtype (thinned at 3 and more ranks).
DTYPE_PARAMS = ("dtype", "dt")
#: From this many ranks on, a dtype sweep keeps two of its dtypes (see `thin_dtypes`).
THIN_FROM_RANKS = 3


def _dtype_param(item: pytest.Item) -> tuple[str, object] | None:
    callspec = getattr(item, "callspec", None)
    for name in DTYPE_PARAMS:
        if callspec is not None and name in callspec.params:
            return name, callspec.params[name]
    return None


def kept_dtypes(values: list) -> set[int]:
    """Indices of the dtypes a sweep keeps: the widest, and the narrowest floating one
    (whose rounding depends on how the ranks split a reduction; the narrowest of all when
    the sweep has no other floating dtype); the first of equals in the sweep's order.  A
    sweep of two dtypes, or of values that are not dtypes, is kept whole."""
    try:
        dts = [np.dtype(v) for v in values]
    except TypeError:
        return set(range(len(values)))
    if len(dts) <= 2:
        return set(range(len(dts)))
    sizes = [d.itemsize for d in dts]
    widest = sizes.index(max(sizes))
    others = [i for i in range(len(dts)) if i != widest]
    floats = [i for i in others if dts[i].kind in "fc"] or others
    return {widest, min(floats, key=lambda i: sizes[i])}


def thin_dtypes(items: list[pytest.Item]) -> tuple[list[pytest.Item], list[pytest.Item]]:
    """Split ``items`` into kept and deselected: of the tests that differ only in their
    dtype parameter, the widest and the narrowest dtype are kept (the rank count changes
    the layouts, which every kept test still sweeps, not what a dtype does)."""
    groups: dict = {}
    for item in items:
        found = _dtype_param(item)
        if found is None:
            continue
        name, value = found
        others = tuple(sorted((k, repr(v)) for k, v in item.callspec.params.items() if k != name))  # type: ignore[attr-defined]
        key = (item.path, getattr(item, "originalname", item.name), item.cls, others)
        groups.setdefault(key, []).append((item, value))
    dropped: set[int] = set()
    for members in groups.values():
        keep = kept_dtypes([v for _, v in members])
        dropped.update(id(it) for i, (it, _) in enumerate(members) if i not in keep)
    kept = [it for it in items if id(it) not in dropped]
    return kept, [it for it in items if id(it) in dropped]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # The full dtype sweeps run without MPI and on 1 and 2 ranks; from 3 ranks on (which
    # oversubscribe a 2-core machine) each sweep keeps its widest and narrowest dtype.
    # Same collection on every rank: the decision depends on the rank count only.
    # D2O_TESTS_ALL_DTYPES=1 runs the full sweeps at any rank count.
    if default_comm().size < THIN_FROM_RANKS or os.environ.get("D2O_TESTS_ALL_DTYPES") == "1":
        return
    kept, dropped = thin_dtypes(items)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


#: The test file whose first test froze the heap (`pytest_runtest_setup`).
_frozen_for: list = [None]


def pytest_runtest_setup(item: pytest.Item) -> None:
    # At the first test of each file: collect, then freeze what survives (gc.freeze).  A
    # full collection otherwise scans every object the earlier files left alive: late in a
    # run that made each tracemalloc test (which collects twice) 4x slower at 4 ranks.
    # Only live objects are frozen; the garbage of later tests is collected as usual.
    if item.path != _frozen_for[0]:
        _frozen_for[0] = item.path
        gc.collect()
        gc.freeze()


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    # Keep one rank's abort from cutting off another rank's summary.
    default_comm().barrier()


@pytest.fixture(scope="session")
def comm():
    """The default d2o communicator (COMM_WORLD, or the serial stand-in)."""
    return default_comm()


@pytest.fixture(scope="session")
def rank(comm) -> int:
    return comm.rank


@pytest.fixture(scope="session")
def size(comm) -> int:
    return comm.size


@pytest.fixture
def shared_dir(comm):
    """A temporary directory that every rank sees (rank 0 creates it and removes it)."""
    path = comm.bcast(tempfile.mkdtemp(prefix="d2o-test-") if comm.rank == 0 else None)
    yield path
    comm.barrier()
    if comm.rank == 0:
        shutil.rmtree(path, ignore_errors=True)
