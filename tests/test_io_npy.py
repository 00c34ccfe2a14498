"""``.npy`` through MPI-IO: d2o.save / d2o.load against numpy.save / numpy.load."""

from __future__ import annotations

import os

import numpy as np
import pytest
from _helpers import make, traced_peak

import d2o
from d2o.io import _common, _npy
from d2o.testing import assert_equal_to_numpy, assert_raises_everywhere, collective_assert

STRATEGIES = ["not", "equal", "fftw", "freeform"]
DTYPES = ["bool", "int32", "int64", "uint64", "float32", "float64", "complex128", ">f8"]


def sample(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 100, size=shape) * (-1 if np.dtype(dtype).kind in "fci" else 1)
    a = a.astype(dtype)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.integers(0, 9, size=shape)
    return a.astype(dtype)


def listing(path):
    return sorted(os.listdir(path))


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_round_trip_strategies_axes(shared_dir, comm, strategy, axis):
    a = sample((7, 5, 3), "float64")
    obj = make(a, strategy, axis)
    path = os.path.join(shared_dir, "a.npy")
    d2o.save(path, obj)
    assert_equal_to_numpy(np.load(path), a)  # numpy reads what d2o wrote
    back = d2o.load(path, distribution_strategy=strategy, axis=axis)
    assert_equal_to_numpy(back, a)
    collective_assert(back.distribution_strategy == strategy, back.distribution_strategy)
    collective_assert(back.axis == (None if strategy == "not" else axis % 3), str(back.axis))


@pytest.mark.parametrize("dtype", DTYPES)
def test_round_trip_dtypes(shared_dir, comm, dtype):
    a = sample((6, 4), dtype)
    obj = make(a, "equal", 1)
    path = os.path.join(shared_dir, "a.npy")
    obj.save(path)
    assert_equal_to_numpy(np.load(path), a)
    back = d2o.load(path, axis=1)
    assert_equal_to_numpy(back, a)  # dtype (byte order included) is kept


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("axis", [0, 1, 2])
def test_load_numpy_written(shared_dir, comm, order, axis):
    path = os.path.join(shared_dir, "np.npy")
    out = os.path.join(shared_dir, "again.npy")
    for k, dtype in enumerate(["int32", "complex128", ">f8", "<u8", "bool"]):
        a = np.asarray(sample((5, 4, 3), dtype, seed=k), order=order)
        if comm.rank == 0:
            np.save(path, a)
        comm.barrier()
        back = d2o.load(path, distribution_strategy=STRATEGIES[k % 4], axis=axis)
        assert_equal_to_numpy(back, a)
        # a Fortran-order file gives Fortran-ordered pieces (as numpy.load does)
        collective_assert(order == "C" or back.data.flags.f_contiguous, "piece not F-ordered")
        back.save(out, overwrite=True)
        assert_equal_to_numpy(np.load(out), a)


@pytest.mark.parametrize("strategy", ["not", "equal", "fftw", "freeform"])
def test_empty_and_tiny(shared_dir, comm, strategy):
    path = os.path.join(shared_dir, "t.npy")
    for shape in [(0,), (0, 3), (3, 0), (1,), (1, 1), ()]:
        a = sample(shape, "int64")
        d2o.save(path, make(a, strategy, 0), overwrite=True)
        assert_equal_to_numpy(np.load(path), a)
        for ax in range(max(1, len(shape))):
            assert_equal_to_numpy(d2o.load(path, distribution_strategy=strategy, axis=ax), a)


def test_noncontiguous_piece_and_suffix(shared_dir, comm):
    a = sample((6, 8), "float32")
    obj = d2o.distributed_data_object(global_data=a, axis=1)
    obj.data = np.asfortranarray(obj.data)  # same values, a non-C-contiguous piece
    base = os.path.join(shared_dir, "nosuffix")
    d2o.save(base, obj)  # '.npy' is appended, like numpy.save
    assert_equal_to_numpy(np.load(base + ".npy"), a)


def test_errors_on_every_rank(shared_dir, comm):
    a = sample((4, 3), "float64")
    obj = make(a, "equal", 0)
    path = os.path.join(shared_dir, "e.npy")
    assert_raises_everywhere(FileNotFoundError, d2o.load, os.path.join(shared_dir, "nope.npy"))
    assert_raises_everywhere(
        FileNotFoundError, d2o.save, os.path.join(shared_dir, "no", "dir.npy"), obj
    )
    d2o.save(path, obj)
    assert_raises_everywhere(FileExistsError, d2o.save, path, obj * 2)
    assert_equal_to_numpy(np.load(path), a)  # untouched
    d2o.save(path, obj * 2, overwrite=True)
    assert_equal_to_numpy(np.load(path), a * 2)
    objs = d2o.distributed_data_object(global_data=np.array([1, "x", None], dtype=object))
    assert_raises_everywhere(TypeError, d2o.save, os.path.join(shared_dir, "o.npy"), objs)
    assert_raises_everywhere(np.exceptions.AxisError, d2o.load, path, axis=2)
    assert_raises_everywhere(ValueError, d2o.load, path, distribution_strategy="bogus")
    bad = os.path.join(shared_dir, "bad.npy")
    if comm.rank == 0:
        with open(bad, "wb") as f:
            f.write(b"not a npy file")
    assert_raises_everywhere(ValueError, d2o.load, bad)
    collective_assert(listing(shared_dir) == ["bad.npy", "e.npy"], str(listing(shared_dir)))


def test_failed_write_leaves_nothing(shared_dir, comm, monkeypatch):
    a = sample((40, 3), "float64")
    obj = make(a, "equal", 0)
    monkeypatch.setattr(_common, "BUFFER_BYTES", 64)  # several blocks per rank
    real = _npy._flat_blocks

    def failing(*args):  # every rank fails after its first block
        gen = real(*args)
        yield next(gen)
        raise OSError("disk full (simulated)")

    monkeypatch.setattr(_npy, "_flat_blocks", failing)
    path = os.path.join(shared_dir, "f.npy")
    assert_raises_everywhere(OSError, d2o.save, path, obj)
    collective_assert(listing(shared_dir) == [], str(listing(shared_dir)))
    # with an old file in place, a failed overwrite keeps the old file
    monkeypatch.setattr(_npy, "_flat_blocks", real)
    d2o.save(path, obj)
    monkeypatch.setattr(_npy, "_flat_blocks", failing)
    assert_raises_everywhere(OSError, d2o.save, path, obj * 3, overwrite=True)
    collective_assert(listing(shared_dir) == ["f.npy"], str(listing(shared_dir)))
    assert_equal_to_numpy(np.load(path), a)


def test_bounded_memory(shared_dir, comm, monkeypatch):
    """Writing holds no more than a block; reading no more than the local share plus a block."""
    buf = 256 << 10
    monkeypatch.setattr(_common, "BUFFER_BYTES", buf)
    per_rank = 4 << 20
    n = per_rank // 8 // 64 * comm.size
    obj = d2o.distributed_data_object(global_shape=(n, 64), dtype=np.float64, axis=0)
    obj.data[...] = obj.local_offset[0]
    obj.data = np.asfortranarray(obj.data)  # also the copying path for non-C pieces
    path = os.path.join(shared_dir, "m.npy")
    slack = 2 * buf  # one block, plus the copying path's staging buffers
    _, peak = traced_peak(lambda i: d2o.save(f"{path}.{i}.npy", obj))
    collective_assert(peak <= slack, f"save peak {peak} > {slack}")
    back, peak = traced_peak(lambda i: d2o.load(f"{path}.0.npy", axis=1))
    collective_assert(peak <= back.data.nbytes + slack, f"load peak {peak} > share + {slack}")
    o = obj.distributor.offsets
    expected = 64.0 * sum(o[r] * (o[r + 1] - o[r]) for r in range(comm.size))
    assert_equal_to_numpy(back.sum(), np.float64(expected))
