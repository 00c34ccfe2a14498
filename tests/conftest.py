"""Shared pytest setup for d2o: works serially (D2O_MPI=0) and under mpiexec.

Under MPI every rank runs the whole suite; assertions must be collective
(see :mod:`d2o.testing`) so all ranks pass or fail each test together.
"""

from __future__ import annotations

import shutil
import tempfile

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
