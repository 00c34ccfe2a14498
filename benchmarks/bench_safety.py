"""What the safety nets cost per call: checked mode (``check_args``) and the hang watchdog.

For each operation, the per-call time with ``check_args`` off and on, and the difference
(microseconds), on 1 and 2 processes: operations that communicate anyway (the argument
check rides on their first agreement) and operations that communicate nothing by design
(the check is a collective of its own).  Then the watchdog's per-collective cost: a
one-byte agreement with the watchdog thread running and stopped, in the same run.

Run::

    python benchmarks/bench_safety.py          # launches mpiexec -n 1 and -n 2, writes
                                               # docs/_data/bench/safety.json (make bench)
    mpiexec -n 2 python benchmarks/bench_safety.py --child

This is a benchmark, not a test: it asserts nothing.
"""

from __future__ import annotations

import sys
import time

import numpy as np
from _harness import run_or_launch

import d2o
from d2o import distributed_data_object as D2O
from d2o.core import watchdog as _watchdog
from d2o.core.comm import default_comm

RECORD = "safety"  # docs/_data/bench/safety.json
COMM = default_comm()
N = 1000
CALLS = 3000 if "--quick" not in sys.argv else 500

# name, statement (x, y: 1000-element float64 arrays split over the ranks), communicates
OPS = [
    ("x.sum()", lambda x, y: x.sum(), True),
    ("x[5]", lambda x, y: x[5], True),
    ("x.get_data([1, 7, 3])", lambda x, y: x.get_data([1, 7, 3]), True),
    ("x.mean(axis=0)", lambda x, y: x.mean(axis=0), True),
    (
        "x.copy(distribution_strategy='fftw')",
        lambda x, y: x.copy(distribution_strategy="fftw"),
        True,
    ),
    ("x + y", lambda x, y: x + y, False),
    ("x[5] = 1.0", lambda x, y: x.__setitem__(5, 1.0), False),
]


def per_call(fn, x, y) -> float:
    """Microseconds per call: the best of 5 blocks of CALLS calls, slowest rank's time."""
    best = float("inf")
    for _ in range(5):
        COMM.barrier()
        t0 = time.perf_counter()
        for _ in range(CALLS):
            fn(x, y)
        dt = COMM.allreduce(time.perf_counter() - t0, op="max")
        best = min(best, dt / CALLS * 1e6)
    return best


def measure() -> dict | None:
    x = D2O(np.arange(N, dtype=np.float64))
    y = D2O(np.ones(N))
    rows = []
    for name, fn, communicates in OPS:
        with d2o.options(check_args=False):
            off = per_call(fn, x, y)
        with d2o.options(check_args=True):
            on = per_call(fn, x, y)
        rows.append((name, communicates, off, on))
    flag = COMM.any_flag
    watch = []
    for running in (True, False):
        if not running:
            _watchdog.stop()
        best = float("inf")
        for _ in range(5):
            COMM.barrier()
            t0 = time.perf_counter()
            for _ in range(CALLS):
                flag(False)
            best = min(best, COMM.allreduce(time.perf_counter() - t0, op="max") / CALLS * 1e6)
        watch.append(best)
    if COMM.rank:
        return None
    label = f"{COMM.size} process{'es' if COMM.size > 1 else ''}"
    print(f"\n**{label}** ({CALLS} calls per block, best of 5; microseconds per call):\n")
    print("| operation | communicates | check_args off | on | extra |")
    print("|---|---|---:|---:|---:|")
    for name, comm, off, on in rows:
        print(f"| `{name}` | {'yes' if comm else 'no'} | {off:.1f} | {on:.1f} | {on - off:+.1f} |")
    if COMM.size > 1:
        print(
            f"\nOne-byte agreement (`Comm.any_flag`): {watch[0]:.2f} us with the watchdog "
            f"thread running, {watch[1]:.2f} us with it stopped ({watch[0] - watch[1]:+.2f} us)."
        )
    counter = _counter_cost()
    print(f"\nThe watchdog's bookkeeping per MPI call (`Comm.calls += 1`): {counter * 1e3:.0f} ns.")
    return {
        "calls_per_block": CALLS,
        "operations": [
            {"name": name, "communicates": comm, "off_us": off, "on_us": on}
            for name, comm, off, on in rows
        ],
        "agreement_us": {"watchdog_running": watch[0], "watchdog_stopped": watch[1]},
        "counter_us": counter,
    }


def _counter_cost() -> float:
    """Microseconds of the one increment every MPI call of `Comm` makes."""
    c = COMM
    n = 1_000_000
    t0 = time.perf_counter()
    for _ in range(n):
        c.calls += 1
    t1 = time.perf_counter()
    for _ in range(n):
        pass
    t2 = time.perf_counter()
    return ((t1 - t0) - (t2 - t1)) / n * 1e6


if __name__ == "__main__":
    run_or_launch(__file__, measure, name=RECORD)
