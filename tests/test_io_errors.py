"""File errors as a serial program gets them, agreed on every rank; atomic writes.

(Issue 9, item 3.)  Paths are checked on every rank, a path that differs between
ranks is refused, MPI-IO failures become Python's OSError family, and a writer
killed in the middle of a save leaves the previous file (or none), never a
half-written one under the final name.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import d2o
from d2o.core.comm import MPI, have_mpi, os_error
from d2o.io import _npy
from d2o.testing import assert_equal_to_numpy, assert_raises_everywhere, collective_assert


@pytest.fixture(autouse=True)
def _unchecked():
    """Per-rank paths on purpose: the file functions' own checks, not check_args'."""
    with d2o.options(check_args=False):
        yield


def _obj():
    return d2o.distributed_data_object(np.arange(12.0).reshape(4, 3))


def test_missing_directory_and_file(shared_dir):
    x = _obj()
    missing = os.path.join(shared_dir, "no-such-dir", "x.npy")
    assert_raises_everywhere(FileNotFoundError, d2o.save, missing, x)
    assert_raises_everywhere(FileNotFoundError, d2o.load, os.path.join(shared_dir, "none.npy"))


def test_directory_in_the_way(shared_dir, comm):
    x = _obj()
    folder = os.path.join(shared_dir, "d.npy")
    blocker = os.path.join(shared_dir, "plainfile")
    if comm.rank == 0:
        os.mkdir(folder)
        open(blocker, "w").close()
    comm.barrier()
    assert_raises_everywhere(IsADirectoryError, d2o.load, folder)
    assert_raises_everywhere(IsADirectoryError, d2o.save, folder, x, overwrite=True)
    assert_raises_everywhere(NotADirectoryError, d2o.save, os.path.join(blocker, "x.npy"), x)


def test_permission_denied(shared_dir, monkeypatch):
    x = _obj()
    path = os.path.join(shared_dir, "x.npy")
    d2o.save(path, x)
    monkeypatch.setattr(os, "access", lambda *a, **k: False)  # we may run as root
    assert_raises_everywhere(PermissionError, d2o.load, path)
    assert_raises_everywhere(PermissionError, d2o.save, path + "2", x)


def test_path_differs_between_ranks(shared_dir, comm):
    if comm.size == 1:
        pytest.skip("needs two ranks")
    x = _obj()
    path = os.path.join(shared_dir, f"x{comm.rank}.npy")
    err = assert_raises_everywhere(ValueError, d2o.save, path, x)
    collective_assert("differs between ranks" in str(err), str(err))
    collective_assert(os.listdir(shared_dir) == [])  # nothing was written
    d2o.save(os.path.join(shared_dir, "x0.npy"), x)
    if comm.rank == 0:
        for r in range(1, comm.size):
            shutil.copy(os.path.join(shared_dir, "x0.npy"), os.path.join(shared_dir, f"x{r}.npy"))
    comm.barrier()
    assert_raises_everywhere(ValueError, d2o.load, path)
    assert_equal_to_numpy(d2o.load(os.path.join(shared_dir, "x0.npy")), x.get_full_data())


def test_file_missing_on_one_rank_only(shared_dir, comm, monkeypatch):
    x = _obj()
    path = os.path.join(shared_dir, "x.npy")
    d2o.save(path, x)
    if comm.rank == comm.size - 1:  # as if this node did not see the file
        real = _npy.check_readable

        def missing(p):
            real(p + ".absent")

        monkeypatch.setattr(_npy, "check_readable", missing)
    err = assert_raises_everywhere(FileNotFoundError, d2o.load, path)
    collective_assert(err.filename is not None or "rank" in str(err), repr(err))
    monkeypatch.undo()
    assert_equal_to_numpy(d2o.load(path), x.get_full_data())  # in step afterwards


@pytest.mark.skipif(not have_mpi(), reason="MPI-IO errors need mpi4py")
def test_mpi_io_errors_become_python_errors():
    cases = {
        MPI.ERR_NO_SUCH_FILE: FileNotFoundError,
        MPI.ERR_ACCESS: PermissionError,
        MPI.ERR_FILE_EXISTS: FileExistsError,
        MPI.ERR_NO_SPACE: OSError,
        MPI.ERR_IO: OSError,
    }
    for cls, kind in cases.items():
        err = os_error(MPI.Exception(cls), "/some/file")
        collective_assert(type(err) is kind and err.filename == "/some/file", repr(err))


_KILLED = textwrap.dedent(
    """
    import os, signal, sys
    import numpy as np
    import d2o
    from d2o.io import _common, _npy, _zarr, _hdf5

    fmt, path = sys.argv[1], sys.argv[2]
    comm = d2o.default_comm()
    _common.BUFFER_BYTES = 4096  # many blocks, so the kill lands mid-write
    x = d2o.distributed_data_object(np.full((4096, 8), 2.0))
    calls = [0]

    def dies(orig):
        def wrapper(*args, **kwargs):
            calls[0] += 1
            if comm.rank == 1 and calls[0] == 3:
                os.kill(os.getpid(), signal.SIGKILL)
            return orig(*args, **kwargs)
        return wrapper

    if fmt == "npy":
        _npy._flat_blocks = (lambda orig: lambda *a: (dies(lambda b: b)(b) for b in orig(*a)))(
            _npy._flat_blocks)
        d2o.save(path, x, overwrite=True)
    elif fmt == "zarr":
        blocks = _zarr.row_blocks
        _zarr.row_blocks = lambda *a, **k: (dies(lambda b: b)(b) for b in blocks(*a, **k))
        x.to_zarr(path, overwrite=True, chunks=(64, 8))
    else:
        _hdf5._write_block = dies(_hdf5._write_block)
        x.to_hdf5(path, "x", overwrite=True)
    """
)


@pytest.mark.parametrize("fmt", ["npy", "zarr", "hdf5"])
def test_killed_writer_leaves_previous_file(shared_dir, comm, fmt):
    if have_mpi() or importlib.util.find_spec("mpi4py") is None:
        pytest.skip("spawns its own 2-process job: runs in the serial stage, with mpi4py installed")
    if fmt == "zarr":
        pytest.importorskip("zarr")
    if fmt == "hdf5":
        pytest.importorskip("h5py")
    mpiexec = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    if not os.path.exists(mpiexec):
        pytest.skip("no mpiexec next to this Python")
    name = {"npy": "x.npy", "zarr": "x.zarr", "hdf5": "x.h5"}[fmt]
    path = os.path.join(shared_dir, name)
    before = np.full((4096, 8), 1.0)
    x = d2o.distributed_data_object(before)
    {"npy": lambda: d2o.save(path, x), "zarr": lambda: x.to_zarr(path),
     "hdf5": lambda: x.to_hdf5(path, "x")}[fmt]()  # fmt: skip
    script = os.path.join(shared_dir, "killed.py")
    with open(script, "w") as f:
        f.write(_KILLED)
    env = dict(os.environ, D2O_MPI="1", D2O_CHECK_ARGS="0")
    run = subprocess.run(
        [mpiexec, "-n", "2", sys.executable, script, fmt, path],
        env=env,
        capture_output=True,
        timeout=120,
    )
    assert run.returncode != 0, run.stdout + run.stderr  # the job died
    reader = {"npy": lambda: d2o.load(path), "zarr": lambda: d2o.from_zarr(path),
              "hdf5": lambda: d2o.from_hdf5(path, "x")}[fmt]  # fmt: skip
    assert_equal_to_numpy(reader(), before)  # the previous file, whole
