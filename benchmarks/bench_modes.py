"""What a mesh layout or a 0-d view made earlier in the process costs later calls.

``x + y`` (and ``x.sum()``, ``x.copy()``) on 1000-element float64 slab arrays, per call,
in one process: first with nothing else made, then after a mesh layout was built, then
after a 0-d view (``m[1, 2, ...]``, held by one rank where P > 1) was made, then after
it was freed.  The operators take 0-d views themselves, so ``x + y`` should cost the
same in every state; operations that leave 0-d views to the runtime (``copy``) pay the
runtime's check while a 0-d view is alive, and no more once none is.  Then the
peak extra memory of ``0.5 * (((a + 1) * 2 + 3) - 4)`` on 8 MiB pieces in the last state:
one piece when temporaries are reused (eagerly) and when the chain runs as one fused
kernel (the ``lazy`` option).

Run::

    python benchmarks/bench_modes.py           # launches mpiexec -n 1 and -n 2
    mpiexec -n 2 python benchmarks/bench_modes.py --child

This is a benchmark, not a test: it asserts nothing.  Best of 5 blocks of ``CALLS`` calls,
the slowest rank's time.
"""

from __future__ import annotations

import sys
import time
import tracemalloc

import numpy as np
from _harness import run_or_launch

import d2o
from d2o import distributed_data_object as D2O
from d2o.core.comm import default_comm

RECORD = "modes"  # docs/_data/bench/modes.json
COMM = default_comm()
CALLS = 3000 if "--quick" not in sys.argv else 300
OPS = [
    ("x + y", lambda x, y: x + y),
    ("x.sum()", lambda x, y: x.sum()),
    ("x.copy()", lambda x, y: x.copy()),
]


def per_call(fn, x, y) -> float:
    """Microseconds per call: best of 5 blocks, the slowest rank's."""
    best = np.inf
    for _ in range(5):
        COMM.barrier()
        t0 = time.perf_counter()
        for _ in range(CALLS):
            fn(x, y)
        best = min(best, COMM.allreduce(time.perf_counter() - t0, op="max"))
    return best / CALLS * 1e6


def chain_peak(lazy: bool) -> float:
    """Extra bytes at the peak of a four-operator chain, in units of one piece: eagerly
    (each operator reuses the temporary before it) or with the ``lazy`` option (one
    fused kernel writes the result)."""
    a = D2O(np.arange(2**20 * COMM.size, dtype=np.float64))
    piece = a.get_local_data(copy=False).nbytes
    with d2o.options(lazy=lazy):  # (once untraced: compiling the kernel is not the chain's)
        d2o.evaluate(0.5 * (((a + 1) * 2 + 3) - 4))
    tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    with d2o.options(lazy=lazy):
        r = 0.5 * (((a + 1) * 2 + 3) - 4)
        d2o.evaluate(r)
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    del r
    return COMM.allreduce(peak, op="max") / piece


def measure() -> dict | None:
    x = D2O(np.arange(1000.0))
    y = D2O(np.ones(1000))
    rows = {name: [] for name, _ in OPS}
    states = ["fresh", "after a mesh layout", "after a 0-d view", "once it was freed"]
    for state in range(4):
        if state == 1:
            m = D2O(np.arange(24.0).reshape(4, 6), distribution_strategy=d2o.layout(split=(0, 1)))
        if state == 2:
            v = m[1, 2, ...]  # the 0-d view is what changes the process
        if state == 3:
            del v
        for name, fn in OPS:
            rows[name].append(per_call(fn, x, y))
    peak = {"eager": chain_peak(False), "lazy": chain_peak(True)}
    if COMM.rank:
        return None
    print(f"\nP = {COMM.size}: microseconds per call ({CALLS} calls, best of 5)")
    print("| operation | " + " | ".join(states) + " |")
    print("|---|" + "---:|" * len(states))
    for name, vals in rows.items():
        print(f"| `{name}` | " + " | ".join(f"{v:.2f}" for v in vals) + " |")
    print(
        "peak of the four-operator chain after both, in pieces (1.0: the result alone):"
        f" eager {peak['eager']:.2f} (temporaries reused), lazy {peak['lazy']:.2f} (fused)"
    )
    return {"calls_per_block": CALLS, "states": states, "us_per_call": rows, "chain_peak": peak}


if __name__ == "__main__":
    run_or_launch(__file__, measure, name=RECORD)
