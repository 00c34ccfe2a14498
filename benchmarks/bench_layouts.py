"""Layouts on process meshes: per-call overhead, elementwise speed, mesh <-> slab
redistribution, and block against block-cyclic partitions, each against numpy.

Run plainly (``python benchmarks/bench_layouts.py``) it first measures, in one
process without MPI (``D2O_MPI=0``), the per-call cost of ``x + x`` on 1,000
float64 elements on a (1, 1) mesh layout and on the default slab layout
against numpy's ``a + a`` (timeit-style: many calls per timing, best of 7,
numpy and d2o alternating).  Then it launches itself under ``mpiexec -n 1``,
``-n 2`` and ``-n 4``, and at the end writes all results to
``docs/_data/bench/layouts.json`` (``make bench``; the performance page shows it);
under mpiexec (``mpiexec -n N python
benchmarks/bench_layouts.py --child``) it measures on that many ranks:

* ``x + x`` on a 256 x 256 float64 array on the balanced mesh layout
  ``d2o.layout(split=(0, 1))``, against numpy's ``a + a`` of the whole array
  on rank 0 alone ("fraction of numpy" = numpy's time / d2o's time);
* from 2 ranks on: ``x.copy(distribution_strategy='equal')`` of a 2048 x 2048
  float64 array (32 MiB) from the mesh layout ``(2, P//2)`` split ``(0, 1)``
  to the slab along axis 0, and back; on 2 ranks also from the ``(1, 2)``
  mesh, since a ``(2, 1)`` mesh has the slab's pieces and moves nothing.
  Against ``np.copyto`` of the same 32 MiB on rank 0 alone;
* ``x * 2.0 + x`` on a 1024 x 1024 array on the block mesh layout and on the
  block-cyclic layouts ``block=2`` and ``block=64`` (printed as not
  available where d2o raises NotImplementedError for them), with numpy's
  ``a * 2.0 + a`` on rank 0 alone for reference.

d2o's times are the slowest rank's (each timing starts with a barrier); the
elementwise figures are the best of 7 timing blocks of many calls each, the
variants' blocks alternating; the redistributions are the median of 15 calls
(the harness's ``timed``).  While rank 0 times numpy the other ranks sleep,
so they take no CPU from it.  All times are wall-clock.  4 processes on a machine with fewer cores are
oversubscribed; the output says so.
This is a benchmark, not a test: it asserts nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import timeit

import numpy as np  # noqa: E402
from _harness import (  # noqa: E402  (also puts the repo on sys.path)
    cores,
    json_argument,
    launch_children,
    on_rank0,
    record,
    timed,
)

import d2o  # noqa: E402
from d2o import distributed_data_object as D2O  # noqa: E402
from d2o.core.comm import Comm, default_comm  # noqa: E402

RECORD = "layouts"  # docs/_data/bench/layouts.json
COUNTS = (1, 2, 4)
SMALL = (25, 40)  # 1,000 elements: the per-call overhead
MEDIUM = (256, 256)  # 2^16 elements
LARGE = (2048, 2048)  # 32 MiB of float64
CYCLIC = (1024, 1024)  # 2^20 elements
BLOCKS = (2, 64)
REPEAT = 7  # best of, for the timeit-style figures
REPEAT_REDIST = 15  # median of, for the redistributions
MIN_BLOCK = 0.05  # seconds per timing block at least


def _autorange(block) -> int:
    """Calls per timing block so that a block lasts at least MIN_BLOCK (1, 2, 5, 10, ...)."""
    number = 1
    while True:
        for k in (1, 2, 5):
            if block(number * k) >= MIN_BLOCK:
                return number * k
        number *= 10


def _serial_block(fn):
    def block(number: int) -> float:
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        return time.perf_counter() - t0

    return block


def _collective_block(fn, comm):
    """A timing block on every rank: barrier, ``number`` calls, the slowest rank's time."""

    def block(number: int) -> float:
        comm.barrier()
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        return comm.allreduce(time.perf_counter() - t0, op="max")

    return block


def _best_per_call(entries: dict, comm) -> dict:
    """Best-of-REPEAT seconds per call of each ``name: (fn, numpy)`` entry: numpy entries on
    rank 0 alone, the others on all ranks (the slowest rank's time); the entries' timing
    blocks alternate, so that all see the same machine load (and the same state of the
    allocator: timed one after the other, the first can pay page faults the others don't)."""
    blocks = {
        name: _serial_block(fn) if numpy else _collective_block(fn, comm)
        for name, (fn, numpy) in entries.items()
    }
    numbers = {}
    for name, block in blocks.items():
        if entries[name][1]:
            numbers[name] = on_rank0(lambda block=block: _autorange(block), comm)
        else:
            numbers[name] = _autorange(block)
    best = dict.fromkeys(entries, float("inf"))
    for _ in range(REPEAT):
        for name, block in blocks.items():
            n = numbers[name]
            if entries[name][1]:
                t = on_rank0(lambda block=block, n=n: block(n), comm)
            else:
                t = block(n)
            best[name] = min(best[name], t / n)
    return best


def _oversubscribed(nprocs: int) -> str:
    n = cores()
    return f" (oversubscribed: {nprocs} ranks on {n} cores)" if nprocs > n else ""


# -- 1. per-call overhead, one process, no MPI ------------------------------------------------


def serial() -> dict:
    a = np.random.default_rng(0).random(SMALL)
    x_mesh = D2O(a, distribution_strategy=d2o.layout(mesh=(1, 1), split=(0, 1)))
    x_slab = D2O(a)
    timers = {
        "numpy a + a": timeit.Timer("a + a", globals={"a": a}),
        "d2o x + x, (1, 1) mesh layout": timeit.Timer("x + x", globals={"x": x_mesh}),
        "d2o x + x, default layout": timeit.Timer("x + x", globals={"x": x_slab}),
    }
    numbers = {k: t.autorange()[0] for k, t in timers.items()}  # >= 0.2 s per timing
    best = dict.fromkeys(timers, float("inf"))
    for _ in range(REPEAT):
        for k, t in timers.items():
            best[k] = min(best[k], t.timeit(numbers[k]) / numbers[k])
    mpi = "mpi4py" if d2o.core.comm.have_mpi() else "no MPI"
    print(f"## 1. per-call cost, {a.size} float64 elements {SMALL}, one process ({mpi})")
    t_np = best["numpy a + a"]
    for k, t in best.items():
        extra = "" if k.startswith("numpy") else f"; d2o - numpy = {(t - t_np) * 1e6:5.2f} µs"
        print(f"  {k:32s} {t * 1e6:6.2f} µs per call{extra}")
    print("  (target: d2o - numpy <= 2 µs)", flush=True)
    return {"elements": a.size, "shape": list(SMALL), "mpi": mpi, "per_call_s": best}


# -- 2.-4. on the ranks of an mpiexec run ---------------------------------------------------


def _elementwise(comm) -> dict:
    lay = d2o.layout(split=(0, 1))
    a = np.random.default_rng(0).random(MEDIUM)
    x = D2O(a, distribution_strategy=lay)
    best = _best_per_call({"numpy": (lambda: a + a, True), "d2o": (lambda: x + x, False)}, comm)
    t_np, t_d2o = best["numpy"], best["d2o"]
    if comm.rank == 0:
        print(
            f"  obj+obj, {MEDIUM} = 2^16 float64, mesh {lay.mesh} split (0, 1): "
            f"d2o {t_d2o * 1e6:7.1f} µs; numpy (whole array, 1 proc) {t_np * 1e6:7.1f} µs; "
            f"fraction of numpy {t_np / t_d2o * 100:5.0f} %  (target >= 90 %)",
            flush=True,
        )
    return {"shape": list(MEDIUM), "mesh": list(lay.mesh), "numpy_s": t_np, "d2o_s": t_d2o}


def _memcpy_times() -> tuple[float, float]:
    """Median seconds of ``np.copyto`` and of ``a.copy()`` of LARGE float64, one process."""
    src = np.ones(LARGE)
    dst = np.empty_like(src)
    serial = Comm(None)
    t_copyto = timed(lambda: np.copyto(dst, src), serial, REPEAT_REDIST)
    return t_copyto, timed(src.copy, serial, REPEAT_REDIST)


def _redistribution(comm) -> dict:
    p = comm.size
    meshes = [(2, p // 2)]
    if (p // 2, 2) != meshes[0]:
        meshes.append((p // 2, 2))
    slab = "equal"
    nbytes = int(np.prod(LARGE)) * 8
    t_cp, t_alloc = on_rank0(_memcpy_times, comm)
    out = {"shape": list(LARGE), "bytes": nbytes, "copyto_s": t_cp, "copy_s": t_alloc}
    out["cases"] = []
    if comm.rank == 0:
        print(
            f"  np.copyto of {nbytes >> 20} MiB, 1 proc: {t_cp * 1e3:6.2f} ms = "
            f"{nbytes / t_cp / 1e9:5.2f} GB/s  (a.copy(), which allocates: "
            f"{t_alloc * 1e3:6.2f} ms = {nbytes / t_alloc / 1e9:5.2f} GB/s)",
            flush=True,
        )
    for mesh in meshes:
        lay = d2o.layout(mesh=mesh, split=(0, 1))
        x = D2O(global_shape=LARGE, dtype=np.float64, distribution_strategy=lay)
        x.local_array[...] = comm.rank
        y = x.copy(distribution_strategy=slab)
        t_to = timed(lambda x=x: x.copy(distribution_strategy=slab), comm, REPEAT_REDIST)
        t_back = timed(lambda y=y, lay=lay: y.copy(distribution_strategy=lay), comm, REPEAT_REDIST)
        del x, y
        moves = mesh[1] != 1
        out["cases"].append({"mesh": list(mesh), "to_slab_s": t_to, "to_mesh_s": t_back,
                             "moves": moves})  # fmt: skip
        if comm.rank == 0:
            note = " (the slab's pieces: nothing moves)" if mesh[1] == 1 else ""
            for what, t in ((f"mesh {mesh} -> slab", t_to), (f"slab -> mesh {mesh}", t_back)):
                print(
                    f"  {what:20s} {t * 1e3:7.2f} ms = {nbytes / t / 1e9:5.2f} GB/s = "
                    f"{t_cp / t * 100:4.0f} % of np.copyto's bandwidth{note}",
                    flush=True,
                )
    if comm.rank == 0:
        print("  (target: >= 80 % of np.copyto's bandwidth)", flush=True)
    return out


def _cyclic(comm) -> dict:
    a = np.random.default_rng(0).random(CYCLIC)
    entries = {"numpy": (lambda: a * 2.0 + a, True)}
    missing = []
    for block in (None, *BLOCKS):
        name = "block" if block is None else f"block-cyclic, block={block}"
        x, failed = None, False
        try:
            x = D2O(a, distribution_strategy=d2o.layout(split=(0, 1), block=block))
            _ = x * 2.0 + x
        except NotImplementedError:
            failed = True
        if comm.allreduce(failed, op="lor"):
            missing.append(name)
        else:
            entries[name] = (lambda x=x: x * 2.0 + x, False)
    best = _best_per_call(entries, comm)
    times = dict(best)  # the report below pops numpy's
    if comm.rank == 0:
        t_np, t_block = best.pop("numpy"), best["block"]
        print(f"  x * 2.0 + x, {CYCLIC} = 2^20 float64, layout(split=(0, 1), block=...):")
        print(f"    {'numpy (whole array, 1 proc)':28s} {t_np * 1e3:7.3f} ms", flush=True)
        for name, t in best.items():
            if name == "block":
                ratio = f" = {t_np / t * 100:4.0f} % of numpy's speed"
            else:
                ratio = f" = {t / t_block:5.2f}x the block layout's time"
            print(f"    {name:28s} {t * 1e3:7.3f} ms{ratio}", flush=True)
        for name in missing:
            print(f"    {name:28s} block-cyclic: not available", flush=True)
        print("  (target: block-cyclic <= 1.00x the block layout's time)", flush=True)
    return {"shape": list(CYCLIC), "times_s": times, "missing": missing}


def measure() -> dict:
    comm = default_comm()
    np.seterr(all="ignore")
    if comm.rank == 0:
        print(f"## {comm.size} process(es){_oversubscribed(comm.size)}", flush=True)
    out = {"oversubscribed": comm.size > cores(), "elementwise": _elementwise(comm)}
    if comm.size >= 2:
        out["redistribution"] = _redistribution(comm)
    out["cyclic"] = _cyclic(comm)
    return out


def _write_json(results) -> None:
    path = json_argument()
    if path:
        with open(path, "w") as f:
            json.dump(results, f)


def main() -> None:
    if "--serial" in sys.argv:
        _write_json(serial())
        return
    comm = default_comm()
    if "--child" in sys.argv or comm.size > 1:  # under mpiexec
        results = measure()
        if comm.rank == 0:
            _write_json(results)
        return
    # launched plainly: the serial part without MPI, then the mpiexec runs; one record
    env = dict(os.environ, D2O_MPI="0", OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "serial.json")
        cmd = [sys.executable, os.path.abspath(__file__), "--serial", "--json", path]
        subprocess.run(cmd, env=env, check=True)
        with open(path) as f:
            results = {"serial": json.load(f)}
    results.update(launch_children(__file__, [], COUNTS))
    options = {"repeat": REPEAT, "repeat_redistribution": REPEAT_REDIST, "blocks": list(BLOCKS)}
    record(RECORD, results, processes=COUNTS, options=options)


if __name__ == "__main__":
    main()
