"""What the main operations communicate per rank, beside the minimum they must move,
and a cost model for planning large runs.

Run plainly (``python benchmarks/bench_communication.py``) it launches itself
under ``mpiexec -n 2`` and writes the results to ``docs/_data/bench/communication.json``
(``make bench``; the performance page shows it); under ``mpiexec -n P`` it measures on
P ranks.  For
every operation it prints, from ``d2o.trace()``: the MPI calls and the bytes
each rank sent (the maximum over ranks), beside the model value (what the
operation must move at minimum, from the layouts alone).

The cost model extrapolates to 64, 1,024 and 16,384 ranks under weak scaling
(every rank keeps the share it has here: the arrays grow along their split
axis with P).  Per operation::

    T(P) = steps(P) * alpha + bytes(P) / beta

``steps(P)``: message latencies on the critical path (``log2 P`` for a small
collective, a tree; ``P - 1`` for an all-to-all exchange, one message per
peer; 1 for a message to one neighbour), ``bytes(P)``: the model's bytes per
rank at P.  ``alpha`` (latency of one
small collective step) and ``beta`` (bytes per second a rank exchanges) are
measured in the same run on this machine and printed.  It is a planning aid,
not a prediction: real networks have contention and topology.
This is a benchmark, not a test: it asserts nothing.
"""

from __future__ import annotations

import math
import os
import tempfile

import numpy as np  # noqa: E402
from _harness import run_or_launch, timed  # noqa: E402  (also puts the repo on sys.path)

import d2o  # noqa: E402
from d2o import distributed_data_object as D2O  # noqa: E402
from d2o.core.comm import default_comm  # noqa: E402

RECORD = "communication"  # docs/_data/bench/communication.json
ROWS_PER_RANK = 256
COLS = 512
TARGETS = (64, 1024, 16384)


def _cases(comm, tmp: str):
    """(name, callable, model bytes per rank at P, latency steps at P) per operation."""
    P = comm.size
    n0, n1 = ROWS_PER_RANK * P, COLS
    shape = (n0, n1)
    rng = np.random.default_rng(0)
    x = D2O(global_shape=shape, dtype=np.float64)
    x.local_array[...] = rng.standard_normal(x.local_shape)
    y = x.copy()
    z = x.copy(axis=1)
    c = x.astype(np.complex128)
    b = D2O(global_shape=(n1, n1), dtype=np.float64)
    b.local_array[...] = 1.0
    idx = rng.integers(0, n0, 1000)
    item = 8
    share = ROWS_PER_RANK * COLS * item  # bytes of this rank's piece (weak scaling: constant)

    def moving(p):  # a piece whose every element changes owner except 1/p of it
        return share * (p - 1) / p

    def log(p):
        return math.log2(p)

    def a2a(p):
        return p - 1

    path = os.path.join(tmp, "x.npy")
    # name, operation, model bytes per rank at p, latency steps at p (alpha each)
    return [
        ("x + y (same layout)", lambda: x + y, lambda p: 0, lambda p: 0),
        ("x + z (z split along axis 1)", lambda: x + z, moving, lambda p: log(p) + a2a(p)),
        ("x.sum()", lambda: x.sum(), lambda p: 96, log),
        ("x.var()", lambda: x.var(), lambda p: 96, log),
        ("x.argmax()", lambda: x.argmax(), lambda p: 96, log),
        ("x.sum(axis=0) (split axis)", lambda: x.sum(axis=0), lambda p: COLS * item,
         lambda p: 2 * log(p)),
        ("x.sum(axis=1) (local axis)", lambda: x.sum(axis=1), lambda p: 0, log),
        ("x[10:-10]", lambda: x[10:-10], lambda p: 0, lambda p: 0),
        ("x.get_data(slice(None, None, -1)) (a copy, to the mirror rank)",
         lambda: x.get_data(slice(None, None, -1)), lambda p: share, lambda p: log(p) + 1),
        ("x[::-1] (a view: ranks keep their rows)", lambda: x[::-1], lambda p: 0, lambda p: 0),
        ("x[2:9] = 1.0", lambda: x.__setitem__(slice(2, 9), 1.0), lambda p: 0, lambda p: 0),
        ("x[idx] (1000 random rows)", lambda: x[idx],
         lambda p: 1000 / p * (p - 1) / p * COLS * item, lambda p: log(p) + a2a(p)),
        ("x.copy(axis=1)", lambda: x.copy(axis=1), moving, lambda p: log(p) + a2a(p)),
        ("fft.fftn(c) (2-D complex, two transposes)", lambda: d2o.fft.fftn(c),
         lambda p: 4 * moving(p), lambda p: log(p) + 2 * a2a(p)),
        ("x @ b (b's row blocks circulate)", lambda: x @ b,
         lambda p: (p - 1) * COLS * COLS * item / p, lambda p: log(p) + a2a(p)),
        ("d2o.save (.npy, MPI-IO)", lambda: d2o.save(path, x, overwrite=True), lambda p: 0,
         lambda p: 5 * log(p)),
    ]  # fmt: skip


def _constants(comm) -> tuple[float, float]:
    """alpha: seconds of one small collective step; beta: bytes/s a rank exchanges."""
    P = comm.size
    if P == 1:
        return 0.0, float("inf")
    t_small = timed(lambda: comm.any_flag(False), comm, 200)
    alpha = t_small / max(1.0, math.log2(P))
    big = D2O(global_shape=(1024 * P, 1024), dtype=np.float64)
    big.local_array[...] = 1.0
    t_big = timed(lambda: big.copy(axis=1), comm, 10)
    sent = big.local_array.nbytes * (P - 1) / P
    return alpha, sent / max(t_big - alpha * (P - 1), 1e-9)


def _fmt_bytes(n: float) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n:.0f} B"


def _fmt_time(t: float) -> str:
    if t == 0:
        return "0"
    if t < 1e-3:
        return f"{t * 1e6:.0f} µs"
    if t < 1:
        return f"{t * 1e3:.1f} ms"
    return f"{t:.1f} s"


def measure() -> dict:
    comm = default_comm()
    P = comm.size
    alpha, beta = _constants(comm)
    tmp = comm.bcast(tempfile.mkdtemp(prefix="d2o-bench-") if comm.rank == 0 else None)
    rows = []
    for name, fn, model, steps in _cases(comm, tmp):
        fn()  # warm-up (caches, first-call costs)
        with d2o.trace() as t:
            fn()
        calls = comm.allreduce(t.collectives, op="max")
        sent = comm.allreduce(t.bytes_sent, op="max")
        est = [steps(p) * alpha + model(p) / beta for p in TARGETS]
        rows.append((name, calls, sent, model(P), est))
    if comm.rank == 0:
        print(f"\n{P} rank(s); alpha = {alpha * 1e6:.1f} µs per small-collective step, "
              f"beta = {beta / 1e9:.2f} GB/s per rank (measured here); weak scaling, "
              f"{ROWS_PER_RANK} x {COLS} float64 per rank")  # fmt: skip
        head = "| operation | MPI calls/rank | bytes sent/rank | model bytes/rank |"
        head += "".join(f" est. P={p} |" for p in TARGETS)
        print(head)
        print("|---|---:|---:|---:|" + "---:|" * len(TARGETS))
        for name, calls, sent, model_b, est in rows:
            cells = [name, str(calls), _fmt_bytes(sent), _fmt_bytes(model_b)]
            cells += [_fmt_time(e) for e in est]
            print("| " + " | ".join(cells) + " |")
    comm.barrier()
    if comm.rank == 0:
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    return {
        "alpha_s": alpha,
        "beta_bytes_per_s": beta,
        "rows_per_rank": ROWS_PER_RANK,
        "cols": COLS,
        "targets": list(TARGETS),
        "operations": [
            {"name": name, "calls": calls, "bytes_sent": sent, "model_bytes": model_b,
             "estimate_s": dict(zip(map(str, TARGETS), est))}
            for name, calls, sent, model_b, est in rows
        ],
    }  # fmt: skip


if __name__ == "__main__":
    run_or_launch(__file__, measure, counts=(2,), name=RECORD)
