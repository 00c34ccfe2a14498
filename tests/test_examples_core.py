"""The paper's listings for the core (examples/*.py) run and print what the paper shows.

Each example runs in-process on the test's communicator; every rank's output
is compared with the text the same prints give for the numpy values the
paper shows.  Listings written for a given process count run at that count.
"""

from __future__ import annotations

import contextlib
import io
import runpy
from pathlib import Path

import numpy as np
import pytest

from d2o import default_comm
from d2o.testing import collective_assert

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
comm = default_comm()


def _run(name: str) -> str:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        runpy.run_path(str(EXAMPLES / name), run_name="__main__")
    return buf.getvalue()


def _text(*prints) -> str:
    buf = io.StringIO()
    for args in prints:
        print(*args, file=buf)
    return buf.getvalue()


@pytest.mark.skipif(comm.size != 3, reason="the listing is for 3 processes")
def test_distribution_schemes_on_three_processes():
    rank = comm.rank
    a = np.arange(16).reshape((4, 4))
    equal = {0: a[0:2], 1: a[2:3], 2: a[3:4]}  # the paper's (2, 1, 1)
    fftw = {0: a[0:2], 1: a[2:4], 2: a[4:4]}  # the paper's (2, 2, 0)
    prints = [((rank, a),)] if rank == 0 else []
    prints += [(rank, "not", a), (rank, "equal", equal[rank]), (rank, "fftw", fftw[rank])]
    prints += [(rank, "freeform", a + rank)]
    if rank == 0:
        full = np.concatenate([a + r for r in range(3)])  # global shape (12, 4)
        prints += [(rank, "freeform", full)]
    out = _run("distribution_schemes.py")
    collective_assert(out == _text(*prints), f"rank {rank} printed:\n{out}")


@pytest.mark.skipif(comm.size != 1, reason="prints one process's pieces")
def test_basic_usage_session():
    a = np.arange(12).reshape((3, 4))
    d = "<distributed_data_object>\n"
    expected = _text(
        (repr(a),),
        (d + repr(a),),
        (f"({d + repr(2 * a)}, {d + repr(a**3)}, {d + repr(a >= 5)})",),
        (d + repr(a + a),),
        (d + repr(a + a),),
        ("'equal'",),
    )
    out = _run("basic_usage.py")
    collective_assert(out == expected, out)


def test_copy_methods_session():
    expected = _text(
        ("('not', <distributed_data_object>\narray([0., 1., 2., 3.]))",),
        ((2, 2), "float64", "equal"),
    )
    out = _run("copy_methods.py")
    collective_assert(out == expected, out)


def test_initialization_session():
    expected = _text(
        ("complex128", (3, 4)), ("float64", (2, 3)), ("int64", (3 * comm.size, 4), "freeform")
    )
    out = _run("initialization.py")
    collective_assert(out == expected, out)


def test_iterators_session():
    out = _run("iterators.py").splitlines()
    collective_assert(out[-5:] == ["9", "8", "7", "6", "True"], out)
    collective_assert(out[0].startswith("not_using_iterators:") and "ms per loop" in out[1])
