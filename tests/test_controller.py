"""Controller mode: ``mpiexec -n P python -m d2o.run script.py`` (d2o/runtime/controller*.py, d2o/run.py).

Each test writes a small script, runs it under mpiexec at 2-4 processes in controller
mode and checks what the job printed and its exit status; the seed programs' results
are compared with numpy's (and with d2o on one process without MPI).  These tests
launch their own mpiexec, so they run in the serial stage only (``D2O_MPI=0``, one
process) and skip under the MPI runner.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import d2o

ROOT = Path(d2o.__file__).resolve().parent.parent
PROGRAMS = ROOT / "examples" / "programs"
MPIEXEC = shutil.which("mpiexec", path=str(Path(sys.executable).parent))

pytestmark = pytest.mark.skipif(
    MPIEXEC is None or os.environ.get("D2O_MPI") != "0" or d2o.default_comm().size > 1,
    reason="launches its own mpiexec: runs in the serial stage (D2O_MPI=0) only",
)


def _env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("D2O_MPI", "D2O_CHECK_ARGS")}
    env.update(PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", **extra)
    return env


def run_controller(script: Path, n: int, *args: str, timeout: float = 120, **env: str):
    """``mpiexec -n n python -m d2o.run script args``: the completed process (text)."""
    cmd = [MPIEXEC, "-n", str(n), sys.executable, "-m", "d2o.run", str(script), *args]
    return subprocess.run(
        cmd, capture_output=True, text=True, timeout=timeout, env=_env(**env), cwd=script.parent
    )


def _script(tmp_path: Path, body: str, name: str = "script.py") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return path


# -- the seed programs ------------------------------------------------------------------

CASES = {
    "monte_carlo_pi": ["30001", "--iterations", "2", "--seed", "5"],
    "jacobi": ["90", "--iterations", "15"],
    "nbody": ["37", "--iterations", "3"],
    "laplace": ["41", "--iterations", "12"],
}


def _serial(name: str, numpy: bool) -> str:
    """The program's output on one process: numpy's, or d2o.numpy's without MPI."""
    env = _env(USE_NUMPY="1") if numpy else _env(D2O_MPI="0")
    cmd = [sys.executable, str(PROGRAMS / f"{name}.py"), *CASES[name]]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env, check=True)
    return out.stdout


@pytest.mark.parametrize("name", list(CASES))
def test_seed_program_runs_in_controller_mode_like_numpy(name):
    n = 3 if name in ("jacobi", "laplace") else 2
    got = run_controller(PROGRAMS / f"{name}.py", n, *CASES[name])
    assert got.returncode == 0, got.stderr
    assert got.stdout.count("\n") == 1, got.stdout  # printed once, by the script
    assert got.stdout == _serial(name, numpy=False)  # the same global arrays on any P
    if name != "monte_carlo_pi":  # numpy's generator differs from d2o's; the rest agrees
        assert got.stdout.replace("d2o.numpy", "numpy") == _serial(name, numpy=True)


# -- a sequential script -------------------------------------------------------------------

FEATURES = """
    import sys
    import numpy
    import d2o
    import d2o.numpy as np
    from d2o.runtime import controller as _controller

    print("argv", sys.argv[1:])
    comm = d2o.default_comm()
    print("ranks", comm.size, "rank", comm.rank)
    x = np.arange(20.0)
    y = (x * 2 + 1) ** 2
    print("sum", float(y.sum()), float(((numpy.arange(20.0) * 2 + 1) ** 2).sum()))
    print("strategy", x.distribution_strategy, "local", x.local_shape)

    # an error raised by every rank reaches the script; the next operation works
    try:
        x + np.ones(3)
    except ValueError as exc:
        print("ValueError:", exc)
    print("after", float(x.sum()))

    # an error in one worker's part only: raised in the script at the next operation
    def fails_high(v):
        if v >= 15:
            raise ZeroDivisionError("too high")
        return v

    try:
        z = x.apply_scalar_function(fails_high)
        print("never", float(z.sum()))
    except ZeroDivisionError as exc:
        print("ZeroDivisionError:", exc, "|", exc.__notes__[0])
    try:
        z.sum()
    except RuntimeError as exc:
        print("z refused:", "could not be computed on every rank" in str(exc))
    print("after", float((x + 1).sum()))

    # communicator calls are refused, naming the alternative
    try:
        comm.allreduce(1)
    except RuntimeError as exc:
        print(type(exc).__name__, "SPMD" in str(exc))
    try:
        x.get_data(slice(0, 2), local_keys=True)
    except RuntimeError as exc:
        print("local_keys:", type(exc).__name__)
    try:
        x.local_array[:] = 0  # SPMD code filling each rank's piece: refused here
    except RuntimeError as exc:
        print("local piece:", type(exc).__name__, float(x.sum()))

    # what travels: the operations' own bytes, plus small commands
    with d2o.trace() as t:
        s = (x * 3 - 1).sum()
    sent = [c for c in t.calls if c[1] == "command"]
    print("command bytes", sum(c[2] for c in sent) <= 4096, len(sent) <= 2)
    print("data calls", [c[:2] for c in t.calls if c[1] != "command"])

    # temporaries freed on rank 0 are freed on the workers
    for i in range(500):
        w = x * i
    del w
    sizes = np.arange(float(comm.size), dist="equal").apply_scalar_function(
        lambda v: float(len(_controller.session().objects))
    )
    print("worker handles bounded", float(sizes.max()) < 40)
    print("iterate", [float(v) for v in np.arange(5.0)])

    # options are set, and restored, on every rank
    def limits():
        each = np.arange(float(comm.size), dist="equal")
        return each.apply_scalar_function(lambda v: float(d2o.get_option("fallback_limit")))

    with d2o.options(fallback_limit=123):
        inside = limits().get_full_data().tolist()
    print("options", inside == [123.0] * comm.size, float(limits().min()) == 16 << 20)
    print("lambda", np.arange(4).apply_scalar_function(lambda v: v * 10).get_full_data())

    # a large numpy array made distributed: each worker receives only its own part
    big = numpy.arange(300_000.0).reshape(1000, 300)
    with d2o.trace() as t:
        xb = np.asarray(big)
    moved = {c[1]: c[2] for c in t.calls}
    mine = xb.local_shape[0] * 300 * 8
    print("scatter", float(xb.sum()) == float(big.sum()), moved["command"] < 4096,
          moved["scatter"] == big.nbytes - mine, xb.get_full_data().tolist() == big.tolist())
    with d2o.trace() as t:
        xd = d2o.distributed_data_object(big, distribution_strategy="fftw")
    moved = {c[1]: c[2] for c in t.calls}
    mine = xd.local_shape[0] * 300 * 8
    print("scatter", moved["command"] < 4096, moved["scatter"] == big.nbytes - mine,
          xd.get_full_data().tolist() == big.tolist())
    sys.exit(4)
"""


@pytest.mark.parametrize("n", [2, 4])
def test_script_prints_once_errors_reach_it_and_status_is_its_own(tmp_path, n):
    got = run_controller(_script(tmp_path, FEATURES), n, "a", "b c")
    lines = got.stdout.splitlines()
    assert got.returncode == 4, got.stderr
    total = float(((__import__("numpy").arange(20.0) * 2 + 1) ** 2).sum())
    expected = [
        "argv ['a', 'b c']",
        f"ranks {n} rank 0",
        f"sum {total} {total}",
    ]
    assert lines[:3] == expected, got.stdout
    assert lines[3].startswith("strategy equal local (")
    assert lines[4].startswith("ValueError: ")
    assert lines[5] == "after 190.0"
    assert lines[6] == (
        "ZeroDivisionError: too high | (raised on rank "
        f"{n - 1} in the d2o operation 'apply_scalar_function')"
    ), got.stdout
    assert lines[7:14] == [
        "z refused: True",
        "after 210.0",
        "ControllerError True",
        "local_keys: ControllerError",
        "local piece: ControllerError 190.0",
        "command bytes True True",
        "data calls [('sum', 'Allgather')]",
    ], got.stdout
    assert lines[14:] == [
        "worker handles bounded True",
        "iterate [0.0, 1.0, 2.0, 3.0, 4.0]",
        "options True True",
        "lambda [ 0 10 20 30]",
        "scatter True True True True",
        "scatter True True True",
    ], got.stdout
    assert "Traceback" not in got.stderr, got.stderr


# -- lazy: one batch per fused kernel -------------------------------------------------------

LAZY = """
    import numpy
    import d2o
    import d2o.numpy as np

    n = 800  # (n * n above lazy_min: recorded)
    a = numpy.arange(n * n, dtype=float).reshape(n, n) / n
    x = np.asarray(a)

    def counts(t):
        fused = [r.op for r in t.records if r.op.startswith("fused(")]
        return len([c for c in t.calls if c[1] == "command"]), fused

    # an expression and its sum: queued, sent with the sum (a batch and its agreement)
    with d2o.trace() as t:
        s = float(((x * 3 - 1) ** 2).sum())
    print("sum", s == float(((a * 3 - 1) ** 2).sum()), *counts(t))

    # a stencil sweep: the views and operators ride with the halo exchange, the
    # assignment writes the expression into the target, the dot fuses
    u, w = np.asarray(a), a.copy()
    for _ in range(2):
        u_old, w_old = u.copy(), w.copy()
        with d2o.trace() as t:
            u[1:-1, 1:-1] = (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:]) * 0.25
            v = (u - u_old).ravel()
            e = float(numpy.sqrt(np.dot(v, v)))
        w[1:-1, 1:-1] = (w[:-2, 1:-1] + w[2:, 1:-1] + w[1:-1, :-2] + w[1:-1, 2:]) * 0.25
        vw = (w - w_old).ravel()
        print("sweep", numpy.array_equal(u.get_full_data(), w),
              abs(e - numpy.sqrt(numpy.dot(vw, vw))) <= 1e-12 * e, *counts(t))

    # named right sides and a named array raveled stay what numpy gives (rank 0 tells
    # the workers which arguments are temporaries)
    r = (u[:-2, 1:-1] + u[2:, 1:-1]) * 0.5
    rw = (w[:-2, 1:-1] + w[2:, 1:-1]) * 0.5
    u[1:-1, 1:-1] = r
    w[1:-1, 1:-1] = rw
    d = u - 1.0
    flat = d.ravel()
    u[...] = 7.0
    r2 = r * 2  # (recorded over r, which must still hold its own values)
    print("named", numpy.array_equal(r.get_full_data(), rw),
          numpy.array_equal(r2.get_full_data(), rw * 2),
          numpy.array_equal(d.get_full_data(), w - 1.0),
          numpy.array_equal(flat.get_full_data(), (w - 1.0).ravel()),
          float(u.sum()) == 7.0 * n * n)
"""


@pytest.mark.parametrize("n", [2, 3])
def test_lazy_sends_one_batch_per_fused_kernel(tmp_path, n):
    got = run_controller(_script(tmp_path, LAZY), n, D2O_LAZY="1")
    assert got.returncode == 0, got.stderr
    lines = got.stdout.splitlines()
    # a batch and its agreement (8 bytes): one command each
    assert lines[0] == "sum True 2 ['fused(multiply, subtract, power, sum)']", got.stdout
    for line in lines[1:3]:  # batches: the halo exchange's, the assignment's, the dot's
        assert line == (
            "sweep True True 6 ['fused(add, add, add, multiply)', 'fused(subtract, subtract, multiply, sum)']"
        ), got.stdout
    assert lines[3] == "named True True True True True", got.stdout
    eager = run_controller(_script(tmp_path, LAZY), n, D2O_LAZY="0")
    assert eager.returncode == 0, eager.stderr
    sweep = eager.stdout.splitlines()[1].split()
    assert sweep[:3] == ["sweep", "True", "True"] and int(sweep[3]) > 6, eager.stdout


def test_uncaught_exception_is_reported_once_with_status_1(tmp_path):
    body = """
        import d2o.numpy as np
        x = np.ones(6)
        print("total", float(x.sum()))
        raise KeyError("missing")
    """
    got = run_controller(_script(tmp_path, body), 2)
    assert got.returncode == 1
    assert got.stdout == "total 6.0\n"
    assert got.stderr.count("Traceback") == 1, got.stderr
    assert got.stderr.rstrip().endswith("KeyError: 'missing'")
    assert 'script.py", line 5, in <module>' in got.stderr


def test_missing_script_and_syntax_error_fail_like_python(tmp_path):
    t0 = time.monotonic()
    got = run_controller(tmp_path / "nope.py", 2)
    assert got.returncode == 2
    assert got.stderr.count("can't open file") == 1, got.stderr
    assert "No such file or directory" in got.stderr
    bad = _script(tmp_path, "x = (1,\nprint(x)\n", "bad.py")
    got = run_controller(bad, 2)
    assert got.returncode == 1
    assert got.stderr.count("SyntaxError") == 1, got.stderr
    assert time.monotonic() - t0 < 60


def test_keyboard_interrupt_leaves_the_workers_in_step(tmp_path):
    body = """
        import os, signal, threading
        import d2o.numpy as np
        big = np.ones(100_000)
        threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
        done = 0
        try:
            while True:
                big = big * 1.0
                float(big.sum())
                done += 1
        except KeyboardInterrupt:
            print("interrupted", done > 0)
        print("sum", float(big.sum()), float(np.arange(10.0).sum()))
    """
    got = run_controller(_script(tmp_path, body), 3)
    assert got.returncode == 0, got.stderr
    assert got.stdout == "interrupted True\nsum 100000.0 45.0\n"


def test_a_killed_worker_ends_the_job_with_an_error(tmp_path):
    body = """
        import os, signal, time
        import d2o.numpy as np
        x = np.arange(2.0, dist="equal")   # one element per rank
        pids = x.apply_scalar_function(lambda v: float(os.getpid())).get_full_data()
        os.kill(int(pids[1]), signal.SIGKILL)
        time.sleep(0.5)
        for i in range(10_000):
            float((x + i).sum())
        print("should not get here")
    """
    t0 = time.monotonic()
    got = run_controller(_script(tmp_path, body), 2, timeout=100)
    assert got.returncode != 0
    assert "should not get here" not in got.stdout
    assert time.monotonic() - t0 < 90
