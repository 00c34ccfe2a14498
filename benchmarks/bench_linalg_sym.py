"""Cholesky and eigh of distributed matrices against numpy's on one process, in one run.

Run plainly it launches itself under ``mpiexec -n 2`` (BLAS threads pinned to 1), prints,
and writes ``docs/_data/bench/linalg_sym.json`` (the performance page shows it);
``mpiexec -n N python benchmarks/bench_linalg_sym.py [--n 1024,2048] [--eigh 256]``
measures at N processes and only prints.  Each line: ``d2o.numpy.linalg.cholesky`` of an n x n float64 SPD matrix on the
default 2-D block-cyclic mesh (blocks of 64), and ``eigh`` of a symmetric one (column
slabs, block Jacobi; its sweeps printed), against ``numpy.linalg.cholesky``/``eigh`` of the
whole matrix on rank 0 alone, measured in the same run; the ratio is numpy's time over
d2o's (above 1: d2o is faster).  Times are medians of the slowest rank.  The bytes each
Cholesky moved (all ranks) are printed beside `d2o.ops.cholesky.bytes_model`.  This is a
benchmark, not a test: it asserts nothing.
"""

from __future__ import annotations

import os
import sys

import numpy as np  # noqa: E402
from _harness import run_or_launch, timed  # noqa: E402  (also puts the repo on sys.path)

import d2o  # noqa: E402
import d2o.numpy as dnp  # noqa: E402
from d2o.core.comm import Comm, default_comm  # noqa: E402
from d2o.ops import cholesky as chol  # noqa: E402
from d2o.ops import eigh as jacobi  # noqa: E402

RECORD = "linalg_sym"  # docs/_data/bench/linalg_sym.json
SIZES = (1024, 2048)
EIGH_SIZES = (256, 512)
REPEAT = 3


def _sizes(flag: str, default: tuple) -> tuple:
    for i, arg in enumerate(sys.argv):
        if arg == flag and i + 1 < len(sys.argv):
            return tuple(int(v) for v in sys.argv[i + 1].split(","))
    return default


def _spd(n: int) -> np.ndarray:
    m = np.random.default_rng(0).standard_normal((n, n))
    return m @ m.T + n * np.eye(n)


def measure(sizes: tuple | None = None, eigh_sizes: tuple | None = None) -> dict:
    """Every rank: the figures (see the notes); sizes from the command line by default."""
    comm = default_comm()
    me = comm.rank
    out: dict = {"processes": comm.size, "load": os.getloadavg()[0], "cholesky": {}, "eigh": {}}
    for n in sizes or _sizes("--n", SIZES):
        a = _spd(n)
        lay = chol.default_layout(n, comm)
        x = d2o.distributed_data_object(a, distribution_strategy=lay)
        del a
        t = timed(lambda x=x: dnp.linalg.cholesky(x), comm, REPEAT)
        with d2o.trace() as tr:
            dnp.linalg.cholesky(x)
        moved = comm.allreduce(tr.bytes_received, "sum")
        model = chol.bytes_model(n, lay.mesh, lay.block[0], 8)
        del x
        ref = _reference(comm, lambda a: np.linalg.cholesky(a), _spd, n)
        if me == 0:
            print(
                f"{comm.size} proc(s) cholesky n={n} mesh {lay.mesh} block {lay.block[0]}: "
                f"d2o {t:7.3f} s, numpy (1 proc) {ref:7.3f} s, ratio {ref / t:5.2f}x; "
                f"moved {moved / 2**20:.1f} MiB (model {model / 2**20:.1f} MiB)",
                flush=True,
            )
        out["cholesky"][str(n)] = {"d2o_s": t, "numpy_s": ref, "bytes": moved, "model": model}
    for n in eigh_sizes or _sizes("--eigh", EIGH_SIZES):
        s = np.random.default_rng(1).standard_normal((n, n))
        x = d2o.distributed_data_object(s + s.T, distribution_strategy="equal", axis=1)
        del s
        t = timed(lambda x=x: dnp.linalg.eigh(x), comm, REPEAT)
        sweeps = jacobi.LAST["sweeps"]
        del x
        ref = _reference(comm, lambda a: np.linalg.eigh(a), _sym, n)
        if me == 0:
            print(
                f"{comm.size} proc(s) eigh n={n}: d2o {t:7.3f} s ({sweeps} Jacobi sweeps), "
                f"numpy (1 proc) {ref:7.3f} s, ratio {ref / t:5.2f}x",
                flush=True,
            )
        out["eigh"][str(n)] = {"d2o_s": t, "numpy_s": ref, "sweeps": sweeps}
    if me == 0:
        print(f"1-minute load average at the start: {out['load']:.2f} ({os.cpu_count()} cores)")
    return out


def _sym(n: int) -> np.ndarray:
    s = np.random.default_rng(1).standard_normal((n, n))
    return s + s.T


def _reference(comm, fn, build, n: int) -> float:
    """numpy's time on rank 0 alone (the other ranks wait), broadcast."""
    ref = 0.0
    if comm.rank == 0:
        a = build(n)
        ref = timed(lambda: fn(a), Comm(None), REPEAT)
    return comm.bcast(ref, root=0)


if __name__ == "__main__":
    run_or_launch(__file__, measure, counts=(2,), name=RECORD)
