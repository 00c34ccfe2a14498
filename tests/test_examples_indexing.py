"""The paper's indexing listings (examples/) run and print what the paper prints.

Each example runs in-process on COMM_WORLD when the process count matches its
listing (4 for get_set_data.py and librarian.py, 2 for local_keys.py); on a
single process without MPI-run tests they run under ``mpiexec`` as
subprocesses.  examples/indexing.py runs on any number of processes.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import runpy
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from d2o.testing import collective_assert

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
MPIEXEC = shutil.which("mpiexec", path=str(Path(sys.executable).parent))


def _run_inprocess(name: str) -> str:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        runpy.run_path(str(EXAMPLES / name), run_name="__main__")
    return buf.getvalue()


_WRAPPER = (
    "import os, runpy, sys; r = os.environ.get('PMI_RANK', '0'); "
    "sys.stdout = open(os.path.join(sys.argv[2], 'out' + r), 'w'); "
    "runpy.run_path(sys.argv[1], run_name='__main__')"
)


def _run_mpiexec(name: str, n: int, tmp: Path) -> str:
    """Run on n processes; every rank's output goes to its own file (no interleaving)."""
    env = {k: v for k, v in os.environ.items() if k != "D2O_MPI"}
    env["PYTHONPATH"] = str(ROOT)
    cmd = [MPIEXEC, "-n", str(n), sys.executable, "-c", _WRAPPER, str(EXAMPLES / name), str(tmp)]
    subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env, check=True)
    return "".join((tmp / f"out{r}").read_text() for r in range(n))


def _output(comm, name: str, n: int, tmp: Path) -> list[str] | None:
    """Output lines of the example on n processes (every rank's lines when run
    in-process, gathered), or None when it cannot run here."""
    if comm.size == n:
        return [
            line for lines in comm.allgather(_run_inprocess(name)) for line in lines.splitlines()
        ]
    if comm.size == 1 and MPIEXEC is not None and os.environ.get("D2O_MPI") == "0":
        return _run_mpiexec(name, n, tmp).splitlines()
    return None


def _by_rank(lines: list[str]) -> dict[int, list[str]]:
    """Join continuation lines to their 'rank value' line; group by rank."""
    out: dict[int, list[str]] = {}
    current = None
    for line in lines:
        m = re.match(r"^(\d+) (.*)$", line)
        if m and not line.startswith(" "):
            current = [m.group(2)]
            out.setdefault(int(m.group(1)), []).append(current)
        elif current is not None and not line.startswith("Index"):
            current.append(line)
    return {r: [" ".join(x) for x in v] for r, v in out.items()}


def _nums(text: str) -> list[int]:
    return [int(x) for x in re.findall(r"-?\d+", text)]


def test_get_set_data(comm, tmp_path):
    lines = _output(comm, "get_set_data.py", 4, tmp_path)
    if lines is None:
        pytest.skip("needs 4 processes (or mpiexec from a serial run)")
    got = _by_rank(lines)
    expected = {
        0: [
            [0, 1, 2, 3],
            [1, 2],
            [0, 1, 2, 3],
            [0, 1, 2, 3, 4, 5, 6, 7, 8, 0, -1, 11, 12, -2, -3, 15],
        ],
        1: [[4, 5, 6, 7], [], [4, 5, 6, 7]],
        2: [[8, 9, 10, 11], [9, 10], [8, 0, -1, 11]],
        3: [[12, 13, 14, 15], [], [12, -2, -3, 15]],
    }
    ok = all([_nums(t) for t in got.get(r, [])] == v for r, v in expected.items())
    collective_assert(ok, f"get_set_data.py printed {got}")


def test_librarian(comm, tmp_path):
    lines = _output(comm, "librarian.py", 4, tmp_path)
    if lines is None:
        pytest.skip("needs 4 processes (or mpiexec from a serial run)")
    got = _by_rank(lines)
    n_index = sum(1 for line in lines if line.startswith("Index: "))
    ok = n_index == 4
    for r in range(4):
        rows = [_nums(t) for t in got.get(r, [])]
        ok = ok and rows == [[k * (4 * r + 2), k * (4 * r + 3)] for k in range(1, 5)]
    collective_assert(ok, f"librarian.py printed {lines}")


def test_local_keys(comm, tmp_path):
    lines = _output(comm, "local_keys.py", 2, tmp_path)
    if lines is None:
        pytest.skip("needs 2 processes (or mpiexec from a serial run)")
    got = _by_rank(lines)
    expected = {
        0: [list(range(0, 16, 2)), [0, 4, 8, 12], list(range(0, 32, 4)), [2, 6, 10, 14]],
        1: [list(range(16, 32, 2)), [16, 20, 24, 28], [0, 6, 12, 18, 24, 30], [4, 8, 12, 16]],
    }
    ok = all([_nums(t) for t in got.get(r, [])] == v for r, v in expected.items())
    collective_assert(ok, f"local_keys.py printed {got}")


def test_indexing_example(comm):
    out = _run_inprocess("indexing.py")
    if comm.rank == 0:
        text = out
        blocks = {
            "obj[1]  # extract a row": [4, 5, 6, 7],
            "obj[1, -2]  # extract single entry": [6],
            "obj[::2, 1::2]  # slicing notation": [1, 3, 9, 11],
            "obj[2, 1]  # simple indexing": [9],
            "obj[index_tuple]  # advanced indexing": list(range(6, 12)),
            "obj[:, ::-2]  # slicing": [3, 1, 7, 5, 11, 9],
            "obj[obj > 5]  # boolean extraction": list(range(6, 12)),
        }
        ok = True
        for label, values in blocks.items():
            after = text.split(label + "\n", 1)[1].split("\nobj", 1)[0]
            ok = ok and _nums(after) == values
        final = text.rsplit("= [11, 22, 33, 44, 55, 66]\n", 1)[1]
        ok = ok and _nums(final) == [0, 1, 2, 3, 4, 5, 11, 22, 33, 44, 55, 66]
        set_block = text.split("obj[::2, 1::2]  # slicing notation\n", 1)[1].split("obj\n", 1)[1]
        ok = ok and _nums(set_block.split("obj\n", 1)[0]) == [
            0,
            111,
            2,
            222,
            4,
            5,
            6,
            7,
            8,
            333,
            10,
            444,
        ]
    else:
        ok = out == ""
    collective_assert(ok, f"indexing.py printed:\n{out}")
