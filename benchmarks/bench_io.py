"""Parallel file I/O throughput: .npy (MPI-IO), HDF5 and Zarr against numpy.save/load.

Writes and reads a float64 array (1 GiB by default) with every format and
prints GB/s (1 GB = 1e9 bytes).  In the same run rank 0 alone does
``numpy.save``/``numpy.load`` of the same array, the baseline.  A d2o time is
the wall time from a Barrier before the call to a Barrier after it (the
slowest rank).  Writes are not fsync'ed (neither are numpy's).  Before the
reads (untimed) ``os.sync()`` flushes the written data; a read is the best of
three, so numpy and d2o alike read from the page cache (the first read of a
freshly written file is several times slower for both, and noisy).  Zarr is written uncompressed (``compressors=None``) to compare like
with like; HDF5 without MPI in h5py writes rank after rank.

Run::

    python benchmarks/bench_io.py                    # 1 and 2 processes, recorded
    D2O_MPI=0 python benchmarks/bench_io.py          # 1 process without MPI, printed only
    mpiexec -n 2 python benchmarks/bench_io.py       # 2 processes, printed only
    python benchmarks/bench_io.py --size-mib 64      # a quick run

Run plainly (no mpiexec, no ``D2O_MPI``, as ``make bench`` does) it launches itself under
``mpiexec -n 1`` and ``-n 2`` (``--child``) and writes the results to
``docs/_data/bench/io.json``, which the performance page shows.

This is a benchmark, not a test: it asserts nothing.  Files go to a fresh
directory under ``--dir`` (default: the repository's ignored ``out/``) and
are removed afterwards.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402
from _harness import launch_children, measures_here, record  # noqa: E402

import d2o  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RECORD = "io"  # docs/_data/bench/io.json
COUNTS = (1, 2)
SIZE_MIB = 1024


def timed(comm, fn, *args):
    """Wall time of a collective call, slowest rank (Barrier before and after)."""
    comm.barrier()
    t0 = time.perf_counter()
    out = fn(*args)
    comm.barrier()
    return time.perf_counter() - t0, out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--size-mib", type=int, default=SIZE_MIB, help=f"array size in MiB ({SIZE_MIB})")
    p.add_argument("--dir", default=os.path.join(ROOT, "out"), help="where to put the files")
    p.add_argument("--formats", default="npy,hdf5,zarr")
    p.add_argument("--child", action="store_true", help="measure here (under mpiexec)")
    p.add_argument("--json", help="where rank 0 writes the results (with --child)")
    args = p.parse_args()
    if not measures_here(args.child, d2o.default_comm()):
        forward = [f"--size-mib={args.size_mib}", f"--dir={args.dir}", f"--formats={args.formats}"]
        by_count = launch_children(__file__, forward, COUNTS)
        options = {"size_mib": args.size_mib, "formats": args.formats.split(",")}
        record(RECORD, by_count, processes=COUNTS, quick=args.size_mib < SIZE_MIB, options=options)
        return
    results = measure(args)
    if args.json and results is not None:
        with open(args.json, "w") as f:
            json.dump(results, f)


def measure(args) -> dict | None:
    """Write and read with every format, print the table on rank 0 and return it (rank 0;
    None on the others)."""
    warnings.filterwarnings("ignore", "h5py is not built with MPI")

    comm = d2o.default_comm()
    cols = 1024
    rows = max(1, args.size_mib * (1 << 20) // 8 // cols)
    nbytes = rows * cols * 8
    gb = nbytes / 1e9

    tmp = None
    if comm.rank == 0:
        os.makedirs(args.dir, exist_ok=True)
        free = shutil.disk_usage(args.dir).free
        print(
            f"# {nbytes / 2**20:.0f} MiB float64 array ({rows} x {cols}), {comm.size} process(es)"
        )
        print(f"# free disk in {args.dir}: {free / 2**30:.1f} GiB")
        if free < 3 * nbytes:
            print("# not enough free disk (need 3x the array); stopping")
        else:
            tmp = tempfile.mkdtemp(prefix="bench_io-", dir=args.dir)
    tmp = comm.bcast(tmp, 0)
    if tmp is None:
        return None
    results = []
    try:
        # numpy baseline: rank 0 alone, the whole array
        if comm.rank == 0:
            a = np.random.default_rng(0).random((rows, cols))
            path = os.path.join(tmp, "numpy.npy")
            t0 = time.perf_counter()
            np.save(path, a)
            tw = time.perf_counter() - t0
            del a
            os.sync()
            tr = float("inf")
            for _ in range(3):
                t0 = time.perf_counter()
                b = np.load(path)
                tr = min(tr, time.perf_counter() - t0)
                del b
            os.remove(path)
            results.append(("numpy", "numpy.save/load (1 proc)", tw, tr))
        comm.barrier()

        obj = d2o.distributed_data_object(global_shape=(rows, cols), dtype=np.float64)
        obj.data[...] = np.random.default_rng(comm.rank).random(obj.data.shape)
        cases = {
            "npy": (
                "d2o.save/load (.npy, MPI-IO)",
                lambda path: obj.save(path),
                lambda path: d2o.load(path),
                "x.npy",
            ),
            "hdf5": (
                "d2o.to_hdf5/from_hdf5",
                lambda path: obj.to_hdf5(path, "x"),
                lambda path: d2o.from_hdf5(path, "x"),
                "x.h5",
            ),
            "zarr": (
                "d2o.to_zarr/from_zarr (uncompressed)",
                lambda path: obj.to_zarr(path, compressors=None),
                lambda path: d2o.from_zarr(path),
                "x.zarr",
            ),
        }
        for key in args.formats.split(","):
            label, write, read, name = cases[key]
            path = os.path.join(tmp, name)
            tw, _ = timed(comm, write, path)
            if comm.rank == 0:
                os.sync()
            tr = float("inf")
            for _ in range(3):
                t, back = timed(comm, read, path)
                tr = min(tr, t)
                del back
            if comm.rank == 0:
                shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)
            results.append((key, f"{label} ({comm.size} proc)", tw, tr))
    finally:
        comm.barrier()
        if comm.rank == 0:
            shutil.rmtree(tmp, ignore_errors=True)
    if comm.rank != 0:
        return None
    print(f"\n| {'format':<44} | write GB/s | read GB/s |")
    print(f"|{'-' * 46}|-----------:|----------:|")
    for _, label, tw, tr in results:
        print(f"| {label:<44} | {gb / tw:10.2f} | {gb / tr:9.2f} |")
    return {
        "bytes": nbytes,
        "formats": {
            key: {"label": label, "write_s": tw, "read_s": tr} for key, label, tw, tr in results
        },
    }


if __name__ == "__main__":
    main()
