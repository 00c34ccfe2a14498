"""No job left hanging (d2o/core/watchdog.py): a failed rank ends the job, a stalled collective
says where every rank is.

What happens to a whole job can only be seen from outside it: each test writes a small
script, runs it under ``mpiexec -n P`` in a subprocess and checks the exit status, the
time it took and the output.  They launch their own mpiexec, so they run in the serial
stage only (``D2O_MPI=0``) and skip under the MPI runner; the option checks run everywhere.
"""

from __future__ import annotations

import gc
import os
import re
import shutil
import subprocess
import sys
import textwrap
import threading
import time
import weakref
from pathlib import Path

import numpy as np
import pytest

import d2o
from d2o.core import watchdog as _watchdog
from d2o.testing import assert_raises_everywhere, collective_assert

ROOT = Path(d2o.__file__).resolve().parent.parent
MPIEXEC = shutil.which("mpiexec", path=str(Path(sys.executable).parent))

launches = pytest.mark.skipif(
    MPIEXEC is None or os.environ.get("D2O_MPI") != "0" or d2o.default_comm().size > 1,
    reason="launches its own mpiexec: runs in the serial stage (D2O_MPI=0) only",
)


def _run(tmp_path: Path, body: str, n: int, timeout: float = 60, **env: str):
    """Run ``body`` as a script under ``mpiexec -n n``: (completed process, seconds)."""
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(body))
    full = {k: v for k, v in os.environ.items() if not k.startswith("D2O_")}
    full.update(PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", **env)
    t0 = time.monotonic()
    proc = subprocess.run(
        [MPIEXEC, "-n", str(n), sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full,
        cwd=tmp_path,
    )
    return proc, time.monotonic() - t0, script


RAISES = """
    import numpy as np
    import d2o
    x = d2o.distributed_data_object(np.arange(12.0))
    if x.comm.rank == {bad}:
        raise ValueError("bad on one rank")
    print("sum", x.sum(), flush=True)
"""


@launches
@pytest.mark.parametrize("n", [2, 3])
def test_an_uncaught_exception_on_one_rank_ends_the_job(tmp_path, n):
    bad = n - 1
    proc, seconds, script = _run(tmp_path, RAISES.format(bad=bad), n)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert seconds < 10, (seconds, out)
    assert f"[rank {bad}] Traceback (most recent call last):" in out, out
    assert f'[rank {bad}]   File "{script}", line 6' in out, out
    assert f"[rank {bad}] ValueError: bad on one rank" in out, out
    assert f"[rank {bad}] d2o: uncaught ValueError in the main thread; aborting the job" in out
    assert "sum" not in proc.stdout  # nobody went on alone


@launches
def test_an_uncaught_exception_in_a_thread_ends_the_job(tmp_path):
    body = """
        import threading, time
        import numpy as np
        import d2o
        x = d2o.distributed_data_object(np.arange(12.0))
        def work():
            raise KeyError("in a worker thread")
        if x.comm.rank == 0:
            t = threading.Thread(target=work, name="loader")
            t.start()
            t.join()
        time.sleep(30)
        x.sum()
    """
    proc, seconds, _ = _run(tmp_path, body, 2)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert seconds < 10, (seconds, out)
    assert "[rank 0] KeyError: 'in a worker thread'" in out, out
    assert "uncaught KeyError in thread 'loader'" in out, out


SKIPS = """
    import numpy as np
    import d2o
    d2o.set_options(hang_timeout=2)
    x = d2o.distributed_data_object(np.arange(12.0))
    if x.comm.rank != {skipper}:
        total = x.sum()
    print("finished", x.comm.rank, flush=True)
"""


@launches
@pytest.mark.parametrize("n", [2, 3])
def test_a_skipped_collective_says_where_every_rank_is(tmp_path, n):
    skipper = 1
    proc, seconds, script = _run(tmp_path, SKIPS.format(skipper=skipper), n)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert seconds < 10, (seconds, out)
    site = re.escape(f"{script}:7")
    for r in range(n):
        if r == skipper:
            continue
        # each waiting rank's own line: the operation, the user's file:line, the MPI call
        line = (
            rf"d2o: rank {r} of {n} waits (for [\d.]+ s )?in sum at {site} \(MPI \w+ on {n} ranks\)"
        )
        assert re.search(line, out), (r, out)
    assert re.search(rf"d2o: rank {skipper} of {n} finished its script and waits at exit", out)
    verdict = re.search(r"d2o: rank (\d+): sum stalled for [\d.]+ s \(hang_timeout=2\); (.*)", out)
    assert verdict, out
    assert verdict.group(2).startswith(f"rank {skipper} never arrived (rank {skipper} finished")


@launches
def test_the_abort_can_be_turned_off_and_the_timeout_still_names_the_absent(tmp_path):
    proc, seconds, _ = _run(
        tmp_path, RAISES.format(bad=1), 2, D2O_ABORT_ON_ERROR="0", D2O_HANG_TIMEOUT="2"
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert seconds < 10, (seconds, out)
    assert "[rank 1]" not in out  # the plain traceback of Python, not d2o's abort
    assert "ValueError: bad on one rank" in out
    assert re.search(r"d2o: rank 0: sum stalled .* rank 1 never arrived", out), out


@launches
def test_a_wait_shorter_than_the_timeout_is_not_a_hang(tmp_path):
    body = """
        import time
        import numpy as np
        import d2o
        d2o.set_options(hang_timeout=3)
        x = d2o.distributed_data_object(np.arange(12.0))
        if x.comm.rank == 1:
            time.sleep(1.5)   # one rank computes alone; the other waits in sum
        for _ in range(3):
            total = x.sum()
            if x.comm.rank == 0:  # (lines of several ranks may mix on one stdout)
                print("sum", total, flush=True)
    """
    proc, _, _ = _run(tmp_path, body, 2)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("sum 66.0") == 3
    assert "d2o:" not in proc.stderr


@pytest.mark.parametrize("bad", [0, -1, -0.5, "10", float("nan"), float("inf"), True, [2]])
def test_bad_hang_timeout_raises_value_error_on_every_rank(bad):
    before = d2o.get_option("hang_timeout")
    assert_raises_everywhere(ValueError, d2o.set_options, hang_timeout=bad)
    assert d2o.get_option("hang_timeout") == before


def test_hang_timeout_and_abort_on_error_are_options():
    with d2o.options(hang_timeout=5.5, abort_on_error=False):
        assert d2o.get_option("hang_timeout") == 5.5
        assert d2o.get_option("abort_on_error") is False
    with d2o.options(hang_timeout=None):
        assert d2o.get_option("hang_timeout") is None
    assert_raises_everywhere(TypeError, d2o.set_options, abort_on_error="yes")


def test_the_watchdog_runs_only_under_mpi_on_several_processes():
    running = _watchdog._STATE.thread is not None
    expected = d2o.default_comm().size > 1
    names = [t.name for t in threading.enumerate()]
    assert running == expected and ("d2o-watchdog" in names) == expected


def test_describe_names_the_operation_and_the_call_site():
    # describe() on this thread's own frame, as the watchdog reads the main thread's
    here = sys._getframe()
    info = _watchdog.describe(here)
    assert info["mpi"] is None and info["op"] is None
    assert info["site"] == f"{__file__}:{here.f_lineno - 2}"


def test_the_watchdog_keeps_no_array_alive():
    # the watchdog looks at the main thread's frames four times a second; a frame it kept
    # between two looks would keep the finished calls' frames, and their arrays, alive
    x = d2o.distributed_data_object(np.arange(100.0))
    ref = weakref.ref(x)
    comm = d2o.default_comm()
    end = time.monotonic() + 0.6
    done = False
    while not done:  # collectives long enough for the watchdog to look in
        for _ in range(50):
            x.sum()
        done = comm.any_flag(time.monotonic() >= end)  # (every rank stops together)
    del x
    gc.collect()
    alive = ref() is not None
    collective_assert(not alive, "an array outlived its last reference")
