"""HDF5 through h5py: d2o.from_hdf5 / d2o.to_hdf5 against plain h5py."""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest
from _helpers import make, traced_peak

import d2o
from d2o.io import _common, _hdf5
from d2o.testing import assert_equal_to_numpy, assert_raises_everywhere, collective_assert

h5py = pytest.importorskip("h5py")

STRATEGIES = ["not", "equal", "fftw", "freeform"]
DTYPES = ["bool", "int32", "int64", "uint64", "float32", "float64", "complex128", ">f8"]


@pytest.fixture(autouse=True)
def _quiet_turn_taking():
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "h5py is not built with MPI")
        yield


def sample(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.integers(-50, 50, size=shape).astype(dtype)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.integers(0, 9, size=shape)
    return a.astype(dtype)


def h5read(path, name, sel=()):
    with h5py.File(path, "r") as f:
        return f[name][sel]


def write_with_h5py(comm, path, **datasets):
    if comm.rank == 0:
        with h5py.File(path, "w") as f:
            for k, v in datasets.items():
                f[k] = v
            f.create_group("grp")
    comm.barrier()


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_round_trip_strategies_axes(shared_dir, comm, strategy, axis):
    a = sample((7, 5, 3), "float64")
    path = os.path.join(shared_dir, "a.h5")
    make(a, strategy, axis).to_hdf5(path, "x")
    assert_equal_to_numpy(h5read(path, "x"), a)  # h5py reads what d2o wrote
    back = d2o.from_hdf5(path, "x", distribution_strategy=strategy, axis=axis)
    assert_equal_to_numpy(back, a)
    collective_assert(back.distribution_strategy == strategy, back.distribution_strategy)


@pytest.mark.parametrize("dtype", DTYPES)
def test_round_trip_dtypes(shared_dir, comm, dtype):
    a = sample((6, 4), dtype)
    path = os.path.join(shared_dir, "d.h5")
    d2o.to_hdf5(make(a, "fftw", 1), path, "grp/x")
    assert_equal_to_numpy(h5read(path, "grp/x"), a)
    assert_equal_to_numpy(d2o.from_hdf5(path, "grp/x", axis=1), a)


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
        (slice(9, 20),),
    ],
)
def test_read_selection_of_h5py_file(shared_dir, comm, sel):
    a = sample((6, 5, 7), ">i8")
    path = os.path.join(shared_dir, "s.h5")
    write_with_h5py(comm, path, x=a)
    expected = a if sel is None else np.asarray(a[sel], dtype=a.dtype)
    for axis in [0, -1] if expected.ndim else [0]:
        back = d2o.from_hdf5(path, "x", sel=sel, distribution_strategy="equal", axis=axis)
        assert_equal_to_numpy(back, expected)
    with h5py.File(path, "r") as f:  # an open file (or group) works too
        assert_equal_to_numpy(
            d2o.from_hdf5(f, "x", sel=sel, distribution_strategy="fftw"), expected
        )


@pytest.mark.parametrize("strategy", ["not", "equal", "freeform"])
def test_empty_and_tiny(shared_dir, comm, strategy):
    path = os.path.join(shared_dir, "t.h5")
    for shape in [(0,), (0, 3), (3, 0), (1,), (1, 1), ()]:
        a = sample(shape, "int32")
        make(a, strategy, 0).to_hdf5(path, "t", overwrite=True)
        assert_equal_to_numpy(h5read(path, "t"), a)
        assert_equal_to_numpy(d2o.from_hdf5(path, "t", distribution_strategy=strategy), a)


def test_attrs_chunks_compression_and_second_dataset(shared_dir, comm):
    a = sample((12, 4), "float32")
    path = os.path.join(shared_dir, "c.h5")
    obj = make(a, "equal", 0)
    obj.to_hdf5(path, "x", attrs={"units": "K", "n": 3}, chunks=(3, 4), compression="gzip")
    d2o.to_hdf5(obj * 2, path, "y")  # a second dataset joins the existing file
    with h5py.File(path, "r") as f:
        ds = f["x"]
        got = (dict(ds.attrs), ds.chunks, ds.compression, sorted(f))
    collective_assert(got == ({"units": "K", "n": 3}, (3, 4), "gzip", ["x", "y"]), f"got {got}")
    assert_equal_to_numpy(h5read(path, "y"), a * 2)
    assert_equal_to_numpy(d2o.from_hdf5(path, "x"), a)


def test_errors_on_every_rank(shared_dir, comm):
    a = sample((4, 3), "float64")
    path = os.path.join(shared_dir, "e.h5")
    write_with_h5py(comm, path, x=a)
    missing = os.path.join(shared_dir, "nope.h5")
    assert_raises_everywhere(FileNotFoundError, d2o.from_hdf5, missing, "x")
    assert_raises_everywhere(KeyError, d2o.from_hdf5, path, "nope")
    assert_raises_everywhere(TypeError, d2o.from_hdf5, path, "grp")
    assert_raises_everywhere(IndexError, d2o.from_hdf5, path, "x", sel=(4,))
    assert_raises_everywhere(IndexError, d2o.from_hdf5, path, "x", sel=(0, 0, 0))
    assert_raises_everywhere(ValueError, d2o.from_hdf5, path, "x", sel=(slice(0, 4, 0),))
    obj = make(a * 5, "equal", 0)
    assert_raises_everywhere(FileExistsError, obj.to_hdf5, path, "x")
    assert_equal_to_numpy(h5read(path, "x"), a)  # untouched
    obj.to_hdf5(path, "x", overwrite=True)
    assert_equal_to_numpy(h5read(path, "x"), a * 5)
    objs = d2o.distributed_data_object(global_data=np.array([1, "x", None], dtype=object))
    assert_raises_everywhere(TypeError, d2o.to_hdf5, objs, os.path.join(shared_dir, "o.h5"), "o")
    bad_dir = os.path.join(shared_dir, "no", "f.h5")
    assert_raises_everywhere(FileNotFoundError, d2o.to_hdf5, obj, bad_dir, "x")
    with h5py.File(path, "r") as f:
        names = sorted(f)
    collective_assert(names == ["grp", "x"], str(names))
    collective_assert(sorted(os.listdir(shared_dir)) == ["e.h5"], str(os.listdir(shared_dir)))


def test_failed_write_on_one_rank_leaves_nothing(shared_dir, comm, monkeypatch):
    a = sample((9, 2), "int64")
    obj = make(a, "equal", 0)
    real = _hdf5._write_block

    def failing(*args, **kwargs):
        if comm.rank == comm.size - 1:
            raise OSError("disk full (simulated)")
        return real(*args, **kwargs)

    monkeypatch.setattr(_hdf5, "_write_block", failing)
    path = os.path.join(shared_dir, "f.h5")
    assert_raises_everywhere(OSError, obj.to_hdf5, path, "x")
    collective_assert(os.listdir(shared_dir) == [], str(os.listdir(shared_dir)))
    # inside an existing file: neither the new nor a temporary dataset remains
    monkeypatch.setattr(_hdf5, "_write_block", real)
    obj.to_hdf5(path, "x")
    monkeypatch.setattr(_hdf5, "_write_block", failing)
    assert_raises_everywhere(OSError, obj.to_hdf5, path, "y")
    assert_raises_everywhere(OSError, (obj * 2).to_hdf5, path, "x", overwrite=True)
    with h5py.File(path, "r") as f:
        names = sorted(f)
    collective_assert(names == ["x"], str(names))
    assert_equal_to_numpy(h5read(path, "x"), a)


def test_turn_taking_notice_once(shared_dir, comm, monkeypatch):
    if comm.size == 1 or _hdf5.parallel_hdf5(comm):
        pytest.skip("needs several ranks and an h5py without MPI")
    monkeypatch.setattr(_hdf5, "_notice_given", [False])
    obj = make(sample((5,), "int32"), "equal", 0)
    with warnings.catch_warnings(record=True) as first:
        warnings.simplefilter("always")
        obj.to_hdf5(os.path.join(shared_dir, "w.h5"), "a")
    with warnings.catch_warnings(record=True) as second:
        warnings.simplefilter("always")
        obj.to_hdf5(os.path.join(shared_dir, "w.h5"), "b")
    n1 = sum("take turns" in str(w.message) for w in first)
    n2 = sum("take turns" in str(w.message) for w in second)
    collective_assert((n1, n2) == ((1, 0) if comm.rank == 0 else (0, 0)), f"{n1}, {n2}")


def test_bounded_memory(shared_dir, comm, monkeypatch):
    """Writing holds at most a block; reading at most the local share plus a block."""
    buf = 256 << 10
    monkeypatch.setattr(_common, "BUFFER_BYTES", buf)
    n = (2 << 20) // 8 // 32 * comm.size  # 2 MiB per rank
    obj = d2o.distributed_data_object(global_shape=(n, 32), dtype=np.float64)
    obj.data[...] = 1.0
    obj.data = np.asfortranarray(obj.data)
    path = os.path.join(shared_dir, "m.h5")
    slack = 2 * buf
    _, peak = traced_peak(lambda i: obj.to_hdf5(path, f"m{i}"))
    collective_assert(peak <= slack, f"write peak {peak} > {slack}")
    back, peak = traced_peak(lambda i: d2o.from_hdf5(path, "m0", axis=1))
    collective_assert(peak <= back.data.nbytes + slack, f"read peak {peak} > share + {slack}")
    assert_equal_to_numpy(back.sum(), np.float64(n * 32))
