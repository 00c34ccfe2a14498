"""The d2o Jupyter kernel (d2o/kernel.py, ``python -m d2o.run --kernel``).

The kernelspec is installed under a temporary prefix (never the user's home) and
started through the real Jupyter machinery at 2 processes: nbclient executes
examples/notebooks/monte_carlo_pi.ipynb, and jupyter_client's KernelManager drives a
kernel directly to check errors, interrupts and shutdown (``mpiexec`` exits with status
0, no process is left).  These tests launch their own mpiexec, so they run in the
serial stage only (``D2O_MPI=0``, one process) and skip under the MPI runner.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import d2o

pytest.importorskip("ipykernel")
pytest.importorskip("jupyter_client")
nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

from jupyter_client.manager import KernelManager  # noqa: E402
from traitlets.config import Config  # noqa: E402

from d2o import kernel  # noqa: E402

ROOT = Path(d2o.__file__).resolve().parent.parent
NOTEBOOK = ROOT / "examples" / "notebooks" / "monte_carlo_pi.ipynb"
MPIEXEC = shutil.which("mpiexec", path=str(Path(sys.executable).parent)) or shutil.which("mpiexec")
NAME = "d2o-test-2"

pytestmark = [
    pytest.mark.skipif(
        MPIEXEC is None or os.environ.get("D2O_MPI") != "0" or d2o.default_comm().size > 1,
        reason="launches its own mpiexec: runs in the serial stage (D2O_MPI=0) only",
    ),
    pytest.mark.timeout(240),
]


@pytest.fixture
def jupyter_env(tmp_path, monkeypatch):
    """Jupyter's and IPython's directories under ``tmp_path``; the kernel imports this
    source tree with MPI on.  Returns the prefix the kernelspecs are installed under."""
    prefix = tmp_path / "prefix"
    monkeypatch.setenv("JUPYTER_PATH", str(prefix / "share" / "jupyter"))
    for var, sub in [("JUPYTER_CONFIG_DIR", "config"), ("JUPYTER_DATA_DIR", "data"),
                     ("JUPYTER_RUNTIME_DIR", "runtime"), ("IPYTHONDIR", "ipython")]:  # fmt: skip
        monkeypatch.setenv(var, str(tmp_path / sub))
    monkeypatch.delenv("D2O_MPI", raising=False)
    monkeypatch.delenv("D2O_CHECK_ARGS", raising=False)
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    return prefix


@pytest.fixture
def installed(jupyter_env):
    """The 2-process kernelspec, installed under the temporary prefix: its name."""
    kernel.install(2, name=NAME, prefix=str(jupyter_env))
    return NAME


def _kernel_processes(tag: str) -> list[str]:
    """The processes (mpiexec and its ranks) whose command line names ``tag`` (the
    kernel's connection file)."""
    out = subprocess.run(["ps", "-ww", "-eo", "pid,args"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if "d2o.run --kernel" in line and tag in line]


def _assert_gone(tag: str, wait: float = 10.0) -> None:
    deadline = time.monotonic() + wait
    while _kernel_processes(tag) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _kernel_processes(tag) == []


# -- the kernelspec ---------------------------------------------------------------------


def test_install_and_remove_from_the_command_line(jupyter_env, capsys):
    assert kernel.main(["install", "--processes", "3", "--prefix", str(jupyter_env)]) == 0
    path = Path(capsys.readouterr().out.strip().rsplit(" in ", 1)[1])
    assert path == jupyter_env / "share" / "jupyter" / "kernels" / "d2o-3"
    spec = json.loads((path / "kernel.json").read_text())
    assert spec["display_name"] == "d2o, 3 processes"
    assert spec["interrupt_mode"] == "message"
    assert spec["language"] == "python"
    mpiexec, *rest = spec["argv"]
    assert os.path.isabs(mpiexec) and os.access(mpiexec, os.X_OK)
    assert rest == ["-n", "3", sys.executable, "-m", "d2o.run", "--kernel", "-f",
                    "{connection_file}"]  # fmt: skip
    assert kernel.main(["remove", "d2o-3"]) == 0
    assert not path.exists()
    assert kernel.main(["remove", "d2o-3"]) == 1
    with pytest.raises(ValueError, match="at least 1"):
        kernel.install(0, prefix=str(jupyter_env))


# -- the notebook, through nbclient -----------------------------------------------------


def _ipc(directory: Path) -> dict:
    """The kernel's channels as Unix sockets under ``directory``: TCP ports chosen by
    jupyter_client are free when chosen, not when the kernel binds them, and other work on
    the machine (make test's other lane) may take one in between."""
    return {"transport": "ipc", "ip": str(directory / "ipc")}


def _stdout(cell) -> str:
    return "".join(o.text for o in cell.outputs if o.output_type == "stream" and o.name == "stdout")


def test_notebook_runs_on_two_processes(installed, tmp_path):
    nb = nbformat.read(NOTEBOOK, as_version=4)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code")  # committed clean
    connection_file = str(tmp_path / "kernel-nb.json")  # names the kernel's processes
    client = nbclient.NotebookClient(
        nb,
        config=Config({"KernelManager": {"connection_file": connection_file, **_ipc(tmp_path)}}),
        kernel_name=installed,
        timeout=120,
        startup_timeout=120,
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()
    setup, estimate, plot = (c for c in nb.cells if c.cell_type == "code")
    assert _stdout(setup) == "running on 2 processes\n"

    # d2o's generator draws the same global samples on any number of processes: this
    # process (one, without MPI) computes the value the kernel's 2 processes printed
    import d2o.numpy as dnp

    n = 200_000
    rng = dnp.random.default_rng(42)
    x, y = rng.random(n), rng.random(n)
    pi = 4 * int((x**2 + y**2 < 1).sum()) / n
    assert abs(pi - math.pi) < 0.02
    assert _stdout(estimate) == (
        f"pi ~ {pi:.5f} ({n} samples)\n"  # printed once: only rank 0 runs the cell
        f"x is split 'equal': rank 0 holds {n // 2} of {n} samples\n"
    )
    images = [o for o in plot.outputs if "image/png" in o.get("data", {})]
    assert len(images) == 1
    assert not [o for c in nb.cells for o in c.get("outputs", []) if o.output_type == "error"]
    _assert_gone(connection_file)  # nbclient shut the kernel down: no rank is left


# -- errors, interrupts and shutdown, through jupyter_client ----------------------------


class _Kernel:
    """A started d2o kernel and its blocking client; `run` executes one cell."""

    def __init__(self, name: str, connection_file: str) -> None:
        self.connection_file = connection_file
        self.km = KernelManager(
            kernel_name=name, connection_file=connection_file, **_ipc(Path(connection_file).parent)
        )
        self.km.start_kernel()
        self.process = self.km.provisioner.process  # mpiexec
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=120)

    def run(self, code: str, timeout: float = 120) -> tuple[dict, str, list]:
        """Execute ``code``: the reply's content, its stdout, and its error outputs."""
        out: list = []
        errors: list = []

        def hook(msg: dict) -> None:
            if msg["msg_type"] == "stream" and msg["content"]["name"] == "stdout":
                out.append(msg["content"]["text"])
            elif msg["msg_type"] == "error":
                errors.append(msg["content"])

        for _ in range(50):
            reply = self.kc.execute_interactive(code, output_hook=hook, timeout=timeout)
            # ipykernel (7.x) aborts, unexecuted, the requests that reach it just after
            # a cell failed, until its own "stop aborting" message has passed: send again
            if reply["content"]["status"] != "aborted":
                break
            time.sleep(0.1)
        return reply["content"], "".join(out), errors

    def shutdown(self, now: bool = False) -> None:
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=now)


@pytest.fixture
def started(installed, tmp_path):
    k = _Kernel(installed, str(tmp_path / "kernel.json"))
    try:
        assert len(_kernel_processes(k.connection_file)) == 3  # mpiexec and its 2 ranks
        yield k
    finally:
        if k.km.has_kernel:
            k.shutdown()
        _assert_gone(k.connection_file)


def test_cells_print_once_errors_show_in_their_cell_and_shutdown_is_clean(started):
    content, out, _ = started.run("import d2o\nimport d2o.numpy as np\nprint('hello')")
    assert (content["status"], out) == ("ok", "hello\n")  # once, not once per rank
    content, out, errors = started.run("np.ones(3) + np.ones(4)")
    assert content["status"] == "error" and content["ename"] == "ValueError"
    assert [e["ename"] for e in errors] == ["ValueError"]
    content, out, _ = started.run(
        "x = np.arange(10.0)\n"
        "print(int(x.sum()), float(np.sort(x[::-1])[3]), d2o.default_comm().size)"
    )
    assert (content["status"], out) == ("ok", "45 3.0 2\n")
    # a function defined in a cell reaches the workers (by value, with cloudpickle)
    content, out, _ = started.run(
        "def f(v):\n    return 2 * v + OFFSET\n"
        "OFFSET = 1\n"
        "print(np.arange(6).apply_scalar_function(f).get_full_data())"
    )
    assert (content["status"], out) == ("ok", "[ 1  3  5  7  9 11]\n")
    # a clean shutdown: the kernel's shutdown request ends rank 0's kernel, which tells
    # the workers to exit, so mpiexec exits by itself with status 0 (not killed)
    started.shutdown()
    assert started.process.returncode == 0
    _assert_gone(started.connection_file, wait=5)


def test_interrupt_raises_keyboard_interrupt_and_the_ranks_stay_in_step(started):
    started.run("import d2o.numpy as np\ny = np.zeros(1000)")
    msg_id = started.kc.execute(
        "print('started', flush=True)\n"
        "for i in range(10**7):\n"
        "    y = y + 1\n"
        "    s = float(y.sum())\n"  # these communicate: the interrupt may come during them
        "    z = np.sort(y[::-1])\n"
    )
    deadline = time.monotonic() + 120
    while True:  # wait until the loop runs
        msg = started.kc.get_iopub_msg(timeout=max(1, deadline - time.monotonic()))
        if msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "stream":
            break
    time.sleep(0.5)
    started.km.interrupt_kernel()
    reply = started.kc.get_shell_msg(timeout=60)
    assert reply["parent_header"]["msg_id"] == msg_id
    assert reply["content"]["status"] == "error"
    assert reply["content"]["ename"] == "KeyboardInterrupt"
    # every rank stopped after the same operation: y is consistent, and the next cell
    # computes correctly on both ranks (an interrupt raised on rank 0 in the middle of
    # an operation, e.g. between two collectives of the sort, would hang it)
    content, out, _ = started.run(
        "print(bool((y == y[0]).all()), float(y[0]) >= 1, float(y.sum()) == 1000 * float(y[999]))\n"
        "print(int(np.arange(7).sum()), float(np.sort(np.arange(6.0)[::-1])[2]))",
        timeout=30,
    )
    assert content["status"] == "ok", content
    assert out == "True True True\n21 2.0\n"
