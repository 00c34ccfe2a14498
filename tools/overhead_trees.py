"""Per-call overhead of several d2o trees, measured alternately in one run (not a test).

    python tools/overhead_trees.py OLD_TREE NEW_TREE ...      # without MPI
    NP=2 python tools/overhead_trees.py OLD_TREE NEW_TREE ... # at 2 ranks (MPIEXEC=...)

Each tree is a directory holding a ``d2o`` package (``git worktree add`` or ``git archive``
of a commit).  Every round runs every tree once, in turn, in a fresh process; the figure
is the best per-call time over the rounds (``ROUNDS``, default 3) and the blocks of ``N``
calls: CPU time without MPI, wall time on rank 0 at 2 ranks.  Prints a markdown table.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys

CHILD = r"""
import sys, time, os
sys.path.insert(0, sys.argv[1])
import numpy as np
import d2o, d2o.numpy as dnp
try:
    from mpi4py import MPI
    rank = MPI.COMM_WORLD.rank
except Exception:
    rank = 0
clock = time.perf_counter if os.environ.get("D2O_MPI") != "0" else time.process_time
assert d2o.__file__.startswith(sys.argv[1]), d2o.__file__
D = d2o.distributed_data_object
x = D(np.arange(1000.0)); y = D(np.ones(1000)); a = np.arange(16.0); xi = D(np.arange(1000) % 7)
ops = {
    "D(a)": lambda: D(a),
    "D(global_shape=(n,))": lambda: D(global_shape=(1000,)),
    "x.copy_empty()": lambda: x.copy_empty(),
    "x + y": lambda: x + y,
    "x + 1": lambda: x + 1,
    "x.max()": lambda: x.max(),
    "x.sum()": lambda: x.sum(),
    "x.copy()": lambda: x.copy(),
    "np.sqrt(x)": lambda: np.sqrt(x),
    "x[::-2]": lambda: x[::-2],
    "x[5]": lambda: x[5],
    "x[5] = 1.0": lambda: x.__setitem__(5, 1.0),
    "x.get_full_data()": lambda: x.get_full_data(),
    "x.astype(f4)": lambda: x.astype(np.float32),
    "dnp.sum(x)": lambda: dnp.sum(x),
    "dnp.mean(x)": lambda: dnp.mean(x),
    "xi.bincount()": lambda: xi.bincount(),
}
N = int(sys.argv[2])
out = {}
for name, f in ops.items():
    best = 1e9
    for _ in range(5):
        t0 = clock()
        for _ in range(N):
            f()
        best = min(best, (clock() - t0) / N * 1e6)
    out[name] = best
if rank == 0:
    print("RESULT" + repr(out))
"""


def main(trees: list[str]) -> None:
    rounds = int(os.environ.get("ROUNDS", "3"))
    nprocs = int(os.environ.get("NP", "1"))
    env = dict(os.environ)
    if nprocs == 1:
        env["D2O_MPI"] = "0"
    pre = [os.environ.get("MPIEXEC", "mpiexec"), "-n", str(nprocs)] if nprocs > 1 else []
    best: dict = {t: {} for t in trees}
    for _ in range(rounds):
        for t in trees:
            cmd = [*pre, sys.executable, "-c", CHILD, t, os.environ.get("N", "3000")]
            out = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd="/tmp")
            line = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT")]
            if not line:
                sys.exit(out.stderr[-2000:])
            for k, v in ast.literal_eval(line[0][6:]).items():
                best[t][k] = min(best[t].get(k, 1e9), v)
    print("| operation | " + " | ".join(os.path.basename(t.rstrip("/")) for t in trees) + " |")
    print("|---|" + "---:|" * len(trees))
    for k in best[trees[0]]:
        print(
            f"| `{k}` | " + " | ".join(f"{best[t].get(k, float('nan')):.2f}" for t in trees) + " |"
        )
    print(json.dumps(best))


if __name__ == "__main__":
    main(sys.argv[1:])
