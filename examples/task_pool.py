"""A dynamic task pool on a shared counter (one-sided ``fetch_and_add``).

The tasks have very uneven costs, so a static split would leave ranks idle.  Instead
each rank takes the next task number from a counter that lives in a distributed array
(on whichever rank owns that element), with an atomic one-sided ``fetch_and_add``, until
the numbers run out; the owner of the counter takes no part in handing them out.  Each
task's result goes into a distributed result array with a one-sided ``put``.  The
results are checked against a serial numpy run, and every task is done exactly once::

    python examples/task_pool.py
    mpiexec -n 4 python examples/task_pool.py --tasks 200
"""

from __future__ import annotations

import argparse

import numpy as np

import d2o


def work(task: int) -> float:
    """A task of uneven cost: the sum of a task-dependent number of terms."""
    n = 1 + (task * 7919) % 2000
    return float(np.sum(np.sin(np.arange(n) * (task + 1))))


def main(tasks: int = 60) -> list:
    comm = d2o.default_comm()
    counter = d2o.distributed_data_object(np.zeros(1, dtype=np.int64))
    results = d2o.distributed_data_object(
        global_shape=(tasks,), dtype=np.float64, distribution_strategy="equal"
    )
    results.set_local_data(np.nan)
    done = []
    with counter.window() as ticket, results.window() as out:
        while True:
            task = int(ticket.fetch_and_add(0, 1))
            if task >= tasks:
                break
            out.put(task, work(task))
            done.append(task)
    # every task done once, every result as numpy computes it
    everyone = sorted(t for part in comm.allgather(done) for t in part)
    assert everyone == list(range(tasks)), everyone
    expected = np.array([work(t) for t in range(tasks)])
    assert np.array_equal(results.get_full_data(), expected)
    counts = comm.allgather(len(done))
    if comm.rank == 0:
        print(f"{tasks} tasks on {comm.size} ranks, taken per rank: {counts}; results match numpy")
    return counts


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=60)
    main(ap.parse_args().tasks)
