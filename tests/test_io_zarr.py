"""Zarr v3: d2o.from_zarr / d2o.to_zarr against plain zarr."""

from __future__ import annotations

import os

import numpy as np
import pytest
from _helpers import make, traced_peak

import d2o
from d2o.io import _common, _zarr
from d2o.testing import assert_equal_to_numpy, assert_raises_everywhere, collective_assert

zarr = pytest.importorskip("zarr", minversion="3")

STRATEGIES = ["not", "equal", "fftw", "freeform"]
DTYPES = ["bool", "int32", "int64", "uint64", "float32", "float64", "complex128", ">f8"]


def sample(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.integers(-50, 50, size=shape).astype(dtype)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.integers(0, 9, size=shape)
    return a.astype(dtype)


def native(a):
    """Zarr v3 stores byte order in a codec: arrays read back in native order."""
    return a.astype(a.dtype.newbyteorder("="))


def zread(path, sel=()):
    return zarr.open_array(path, mode="r")[sel]


def write_with_zarr(comm, path, a, chunks=None):
    if comm.rank == 0:
        z = zarr.create_array(store=path, shape=a.shape, dtype=a.dtype, chunks=chunks or "auto")
        z[...] = a
    comm.barrier()


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_round_trip_strategies_axes(shared_dir, comm, strategy, axis):
    a = sample((7, 5, 3), "float64")
    path = os.path.join(shared_dir, "a.zarr")
    obj = make(a, strategy, axis)
    obj.to_zarr(path)
    assert_equal_to_numpy(zread(path), a)  # zarr reads what d2o wrote
    back = d2o.from_zarr(path, distribution_strategy=strategy, axis=axis)
    assert_equal_to_numpy(back, a)
    collective_assert(back.distribution_strategy == strategy, back.distribution_strategy)
    # chunk boundaries along the distributed axis fall on the ranks' offsets
    k = zarr.open_array(path, mode="r").chunks[obj.axis or 0]
    offsets = [] if obj.axis is None else obj.distributor.offsets
    collective_assert(all(o % k == 0 or o == a.shape[obj.axis] for o in offsets), f"{k}")


@pytest.mark.parametrize("dtype", DTYPES)
def test_round_trip_dtypes(shared_dir, comm, dtype):
    a = sample((6, 4), dtype)
    path = os.path.join(shared_dir, "d.zarr")
    d2o.to_zarr(make(a, "fftw", 1), path, attrs={"kind": dtype})
    assert_equal_to_numpy(zread(path), native(a))
    attrs = zarr.open_array(path, mode="r").attrs.asdict()
    collective_assert(attrs == {"kind": dtype}, str(attrs))
    assert_equal_to_numpy(d2o.from_zarr(path, axis=1), native(a))


@pytest.mark.parametrize(
    "sel",
    [
        None,
        (slice(1, 6, 2),),
        (slice(None, None, -1), slice(1, None, 3)),
        (Ellipsis, slice(5, 0, -2)),
        (2,),
        (slice(None), -1, slice(None, None, 2)),
        (1, 2, 3),
    ],
)
def test_read_selection_of_zarr_array(shared_dir, comm, sel):
    a = sample((6, 5, 7), "int16")
    path = os.path.join(shared_dir, "s.zarr")
    write_with_zarr(comm, path, a, chunks=(4, 2, 3))
    expected = a if sel is None else np.asarray(a[sel], dtype=a.dtype)
    for axis in [0, -1] if expected.ndim else [0]:
        back = d2o.from_zarr(path, sel=sel, distribution_strategy="fftw", axis=axis)
        assert_equal_to_numpy(back, expected)
    arr = zarr.open_array(path, mode="r")  # an open array works too
    assert_equal_to_numpy(d2o.from_zarr(arr, sel=sel, distribution_strategy="not"), expected)


@pytest.mark.parametrize("strategy", ["not", "equal", "freeform"])
def test_empty_and_tiny(shared_dir, comm, strategy):
    path = os.path.join(shared_dir, "t.zarr")
    for shape in [(0,), (0, 3), (3, 0), (1,), (1, 1), ()]:
        a = sample(shape, "int32")
        make(a, strategy, 0).to_zarr(path, overwrite=True)
        assert_equal_to_numpy(zread(path), a)
        assert_equal_to_numpy(d2o.from_zarr(path, distribution_strategy=strategy), a)


def test_aligned_chunks(comm):
    from d2o.layouts.distributors import get_distributor, slab_distributor

    d = slab_distributor((10, 4), comm, 0, [0, 4, 8, 10][: comm.size] + [10], "freeform")
    ks = _zarr.aligned_chunks(d, 8)
    interior = [o for o in d.offsets if 0 < o < 10]
    collective_assert(all(o % ks[0] == 0 for o in interior) and ks[1] == 4, str(ks))
    f = get_distributor("fftw", (10, 3), comm, 1)
    ks = _zarr.aligned_chunks(f, 8)
    collective_assert(ks == (10, -(-3 // comm.size)), str(ks))
    if comm.size > 1:
        assert_raises_everywhere(ValueError, _zarr.aligned_chunks, d, 8, (3, 4))


def test_errors_on_every_rank(shared_dir, comm):
    a = sample((4, 3), "float64")
    path = os.path.join(shared_dir, "e.zarr")
    write_with_zarr(comm, path, a)
    missing = os.path.join(shared_dir, "nope.zarr")
    assert_raises_everywhere(FileNotFoundError, d2o.from_zarr, missing)
    assert_raises_everywhere(IndexError, d2o.from_zarr, path, sel=(slice(None), 3))
    assert_raises_everywhere(TypeError, d2o.from_zarr, path, sel=([0, 1],))
    obj = make(a * 5, "equal", 0)
    assert_raises_everywhere(FileExistsError, obj.to_zarr, path)
    assert_equal_to_numpy(zread(path), a)  # untouched
    obj.to_zarr(path, overwrite=True)
    assert_equal_to_numpy(zread(path), a * 5)
    objs = d2o.distributed_data_object(global_data=np.array([1, "x", None], dtype=object))
    assert_raises_everywhere(TypeError, d2o.to_zarr, objs, os.path.join(shared_dir, "o.zarr"))
    if comm.size > 1:  # a chunk straddling two ranks' pieces
        big = make(sample((8 * comm.size + 1, 2), "int8"), "equal", 0)
        p = os.path.join(shared_dir, "c.zarr")
        assert_raises_everywhere(ValueError, big.to_zarr, p, chunks=(2, 2))
    collective_assert(sorted(os.listdir(shared_dir)) == ["e.zarr"], str(os.listdir(shared_dir)))


def test_failed_write_on_one_rank_leaves_nothing(shared_dir, comm, monkeypatch):
    a = sample((9, 2), "int64")
    obj = make(a, "equal", 0)
    real = _zarr._write_region

    def failing(*args, **kwargs):
        if comm.rank == comm.size - 1:
            raise OSError("disk full (simulated)")
        return real(*args, **kwargs)

    monkeypatch.setattr(_zarr, "_write_region", failing)
    path = os.path.join(shared_dir, "f.zarr")
    assert_raises_everywhere(OSError, obj.to_zarr, path)
    collective_assert(os.listdir(shared_dir) == [], str(os.listdir(shared_dir)))
    monkeypatch.setattr(_zarr, "_write_region", real)
    obj.to_zarr(path)
    monkeypatch.setattr(_zarr, "_write_region", failing)
    assert_raises_everywhere(OSError, (obj * 2).to_zarr, path, overwrite=True)
    collective_assert(os.listdir(shared_dir) == ["f.zarr"], str(os.listdir(shared_dir)))
    assert_equal_to_numpy(zread(path), a)


def test_bounded_memory(shared_dir, comm, monkeypatch):
    """Writing holds a bounded number of chunks; reading the local share plus a block."""
    buf = 128 << 10
    monkeypatch.setattr(_common, "BUFFER_BYTES", buf)
    monkeypatch.setattr(_zarr, "CHUNK_BYTES", 32 << 10)
    n = (1 << 20) // 8 // 32 * comm.size  # 1 MiB per rank
    obj = d2o.distributed_data_object(global_shape=(n, 32), dtype=np.float64)
    obj.data[...] = np.arange(obj.data.size).reshape(obj.data.shape) % 7  # not the fill value
    path = os.path.join(shared_dir, "m.zarr")
    slack = 4 * buf
    # warm-up (zarr imports codecs and fills caches lazily; that is not our memory)
    obj.to_zarr(os.path.join(shared_dir, "warm.zarr"))
    d2o.from_zarr(os.path.join(shared_dir, "warm.zarr"), axis=1)
    _, peak = traced_peak(lambda i: obj.to_zarr(f"{path}{i}"))
    collective_assert(peak <= slack, f"write peak {peak} > {slack}")
    back, peak = traced_peak(lambda i: d2o.from_zarr(f"{path}0", axis=1))
    collective_assert(peak <= back.data.nbytes + slack, f"read peak {peak} > share + {slack}")
    assert_equal_to_numpy(back.sum(), obj.sum())
