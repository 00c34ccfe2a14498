"""Run pytest on every MPI rank; not a test module.

Usage (see the Makefile)::

    mpiexec -n 4 python -m mpi4py tests/_mpi_runner.py -x -q -p no:cacheprovider \
        --timeout=300 --timeout-method=thread [pytest args ...]

Rank 0 writes to the terminal; ranks > 0 write to ``.mpi-logs/rank<R>.log``
(redirected at the file-descriptor level, so C-level output goes there too).
All ranks agree on the exit status (the maximum of the ranks' pytest codes);
when a rank > 0 fails differently from rank 0, rank 0 prints the tail of
its log.  If the job is
killed instead (pytest-timeout, ``timeout``), ``.mpi-logs/reported`` is
missing and the Makefile prints the logs' tails itself.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from mpi4py import MPI

ROOT = Path(__file__).resolve().parent.parent
# Concurrent runs in one tree should each set their own D2O_MPI_LOGDIR.
LOG_DIR = Path(os.environ.get("D2O_MPI_LOGDIR", ROOT / ".mpi-logs")).resolve()
TAIL_LINES = 60
REPORTED = "reported"


def _redirect_to_log(rank: int) -> Path:
    LOG_DIR.mkdir(exist_ok=True)
    path = LOG_DIR / f"rank{rank}.log"
    sys.stdout.flush()
    sys.stderr.flush()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    # Line buffering keeps the log useful if the job is killed.
    sys.stdout = open(1, "w", buffering=1, closefd=False)
    sys.stderr = open(2, "w", buffering=1, closefd=False)
    return path


def _tail(path: Path, n: int = TAIL_LINES) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError as exc:
        return f"(could not read {path}: {exc})"
    return "\n".join(lines[-n:])


class _FailureRecorder:
    """pytest plugin noting which tests failed on this rank."""

    def __init__(self) -> None:
        self.failed: list[str] = []

    def pytest_runtest_logreport(self, report) -> None:
        if report.failed:
            self.failed.append(f"{report.nodeid} ({report.when})")

    def pytest_collectreport(self, report) -> None:
        if report.failed:
            self.failed.append(f"{report.nodeid} (collection)")


def main(argv: list[str]) -> int:
    import pytest

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    if rank == 0:
        # Drop logs of an earlier run (maybe with more ranks) and the marker.
        LOG_DIR.mkdir(exist_ok=True)
        for old in [*LOG_DIR.glob("rank*.log"), LOG_DIR / REPORTED]:
            old.unlink(missing_ok=True)
    comm.Barrier()
    if rank > 0:
        _redirect_to_log(rank)
    else:
        print(f"[mpi runner] {size} rank(s); logs of ranks > 0 in {LOG_DIR}", flush=True)

    # d2o's watchdog and abort reports bypass pytest's capture of fd 2 (per test)
    os.environ["D2O_STDERR_FD"] = str(os.dup(2))
    recorder = _FailureRecorder()
    code = int(pytest.main(argv, plugins=[recorder]))
    sys.stdout.flush()
    sys.stderr.flush()

    comm.Barrier()
    codes = comm.allgather(code)
    failures = comm.allgather(recorder.failed)
    worst = max(codes)
    if rank == 0 and worst != 0:
        # Rank 0's report already covers ranks that failed the same way
        # (collective assertions); show the logs of ranks that differ.
        for r, c in enumerate(codes):
            if r > 0 and c != 0 and (c != codes[0] or failures[r] != failures[0]):
                print(f"\n===== rank {r} exited with {c}; tail of {LOG_DIR / f'rank{r}.log'} =====")
                print(_tail(LOG_DIR / f"rank{r}.log"))
        print(f"\n[mpi runner] exit codes per rank: {codes}", flush=True)
    if rank == 0:
        # Tells the Makefile that the logs were reported (absent if killed).
        (LOG_DIR / REPORTED).touch()
    comm.Barrier()
    return worst


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
