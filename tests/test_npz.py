"""savez / savez_compressed written in parallel (every rank its bytes of each member, CRC-32s
combined, one deflate stream) against numpy's own archives (issue 31)."""

from __future__ import annotations

import os
import pathlib
import zipfile
import zlib

import numpy as np
import pytest
from _helpers import layouts, make

import d2o
import d2o.numpy as dnp
from d2o import distributed_data_object as D2O
from d2o.io import _npz
from d2o.testing import assert_raises_everywhere, collective_assert


@pytest.fixture(autouse=True)
def _unchecked():
    """Exact byte counts: without check_args' extra allreduce per call."""
    with d2o.options(check_args=False):
        yield


def _data(shape, dtype, seed=3):
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.random(shape) < 0.5
    v = rng.standard_normal(shape) * 100
    if np.dtype(dtype).kind == "c":
        v = v + 1j * rng.standard_normal(shape)
    return v.astype(dtype)


def _loaded_same(path, want: dict) -> str | None:
    """None when ``np.load(path)`` holds exactly ``want`` and the zip tests clean."""
    with zipfile.ZipFile(path) as z:
        bad = z.testzip()
        if bad is not None:
            return f"bad CRC in {bad}"
    with np.load(path) as z:
        if sorted(z.files) != sorted(want):
            return f"members {sorted(z.files)}"
        for k, w in want.items():
            g = z[k]
            if g.dtype != w.dtype or g.shape != w.shape or not np.array_equal(g, w):
                return f"{k}: {g.dtype}{g.shape} vs {w.dtype}{w.shape}"
    return None


def _check(comm, path, want, what):
    msg = _loaded_same(path, want) if comm.rank == 0 else None
    msg = comm.bcast(msg, 0)
    collective_assert(msg is None, f"{what}: {msg}")


# -- crc32_combine ------------------------------------------------------------------------
def test_crc32_combine_matches_zlib():
    rng = np.random.default_rng(0)
    for n1, n2 in [(0, 0), (0, 5), (5, 0), (1, 1), (3, 17), (100, 1000), (4096, 65537)]:
        a = rng.integers(0, 256, n1, dtype=np.uint8).tobytes()
        b = rng.integers(0, 256, n2, dtype=np.uint8).tobytes()
        got = _npz.crc32_combine(zlib.crc32(a), zlib.crc32(b), len(b))
        assert got == zlib.crc32(a + b), (n1, n2)
    parts = [rng.integers(0, 256, int(n), dtype=np.uint8).tobytes() for n in (7, 0, 300, 1)]
    crc = 0
    for p in parts:
        crc = _npz.crc32_combine(crc, zlib.crc32(p), len(p))
    assert crc == zlib.crc32(b"".join(parts))


# -- every layout, dtypes, shapes ---------------------------------------------------------
@pytest.mark.parametrize("compressed", [False, True])
@pytest.mark.parametrize("dtype", ["bool", "int32", "float64", "complex128"])
def test_savez_layouts(shared_dir, comm, compressed, dtype):
    name = "savez_compressed" if compressed else "savez"
    path = os.path.join(shared_dir, "d.npz")
    for shape in [(5, 3), (1, 2), (0, 3)]:
        a = _data(shape, dtype)
        for strategy, axis in layouts(2):
            x = make(a, strategy, axis)
            getattr(dnp, name)(path, x)
            _check(comm, path, {"arr_0": a}, f"{name} {dtype}{shape} {strategy}/{axis}")


@pytest.mark.parametrize("compressed", [False, True])
def test_savez_shapes_and_mixed(shared_dir, comm, compressed):
    name = "savez_compressed" if compressed else "savez"
    path = os.path.join(shared_dir, "m")  # .npz appended, as numpy does
    arrays = [_data((7,), "float64"), _data((2, 3, 4), "int32"), np.zeros((0,)), np.float64(3)]
    for strategy, axis in layouts(1)[:3]:
        xs = [make(a, strategy, axis) if np.ndim(a) else D2O(np.asarray(a)) for a in arrays]
        plain = np.arange(4, dtype=np.int16)
        getattr(dnp, name)(path, xs[0], plain, big=xs[1], empty=xs[2], zero=xs[3], s=2.5)
        want = {"arr_0": arrays[0], "arr_1": plain, "big": arrays[1], "empty": arrays[2],
                "zero": np.asarray(arrays[3]), "s": np.asarray(2.5)}  # fmt: skip
        _check(comm, path + ".npz", want, f"{name} mixed {strategy}/{axis}")
    for strategy, axis in layouts(3):
        a = _data((3, 2, 4), "complex128")
        getattr(dnp, name)(path, make(a, strategy, axis), w=make(a[:1], strategy, axis))
        _check(comm, path + ".npz", {"arr_0": a, "w": a[:1]}, f"{name} 3-d {strategy}/{axis}")


def test_savez_zip64(shared_dir, comm, monkeypatch):
    """The ZIP64 fields (sizes, offsets, end record) round-trip: threshold lowered."""
    monkeypatch.setattr(_npz, "ZIP64_LIMIT", 10)
    monkeypatch.setattr(_npz, "ZIP_MAX_MEMBERS", 1)
    path = os.path.join(shared_dir, "z.npz")
    a, b = _data((9, 2), "float64"), _data((4,), "int32")
    for name in ("savez", "savez_compressed"):
        getattr(dnp, name)(path, D2O(a), b=D2O(b, distribution_strategy="not"))
        _check(comm, path, {"arr_0": a, "b": b}, f"{name} zip64")
        raw = pathlib.Path(path).read_bytes() if comm.rank == 0 else b""
        marks = comm.bcast(b"PK\x06\x06" in raw and b"PK\x06\x07" in raw, 0)
        collective_assert(marks, f"{name}: no ZIP64 end of central directory")


# -- no gather ----------------------------------------------------------------------------
@pytest.mark.parametrize("compressed", [False, True])
def test_savez_moves_no_array(shared_dir, comm, compressed):
    name = "savez_compressed" if compressed else "savez"
    path = os.path.join(shared_dir, "t.npz")
    a = _data((400, 10), "float64")  # 32 kB
    x, y = D2O(a), D2O(a[:, :3])
    with d2o.trace() as t:
        getattr(dnp, name)(path, x, y=y)
    # two members: an allgather of (size, crc, size, flag) each, plus error agreements,
    # the temporary name and the rename: ~150 bytes per rank at 2-4 ranks, never the data
    sent = sum(r.bytes_sent for r in t.records)
    gathers = sum(r.gathers for r in t.records)
    collective_assert(sent <= 400 and gathers == 0, f"{name}: sent {sent}, {gathers} gathers")
    _check(comm, path, {"arr_0": a, "y": a[:, :3]}, name)


# -- errors -------------------------------------------------------------------------------
def test_savez_errors(shared_dir, comm):
    x = D2O(np.arange(6.0))
    bad = os.path.join(shared_dir, "no", "a.npz")
    for name in ("savez", "savez_compressed"):
        assert_raises_everywhere(FileNotFoundError, getattr(dnp, name), bad, x)
    path = os.path.join(shared_dir, "e.npz")
    assert_raises_everywhere(ValueError, dnp.savez, path, x, arr_0=x)
    obj = np.array([1, None], dtype=object)
    assert_raises_everywhere(ValueError, dnp.savez, path, x, o=obj, allow_pickle=False)
    collective_assert(not os.path.exists(path), "a failed savez left a file")
    dnp.savez(path, x, o=obj)  # pickled by rank 0, as numpy does
    ok = None
    if comm.rank == 0:
        with np.load(path, allow_pickle=True) as z:
            ok = np.array_equal(z["arr_0"], np.arange(6.0)) and list(z["o"]) == [1, None]
    collective_assert(comm.bcast(ok, 0), "savez with an object array")
