"""Instructions per call of small d2o operations, counted by valgrind's callgrind (not a test).

    python tools/instructions.py TREE [TREE ...]       # lazy on (the default)
    LAZY=0 python tools/instructions.py TREE ...        # lazy off

Each tree is a directory holding a ``d2o`` package (``git archive`` of a commit).  Every
tree runs once under callgrind, without MPI; each operation runs ``N`` times (default
20,000) between a ``CALLGRIND_ZERO_STATS`` and a ``CALLGRIND_DUMP_STATS`` client request
(a two-function C library compiled here, against valgrind's ``callgrind.h``), after
``gc.collect(); gc.freeze()``.  OpenBLAS's threads are kept at one (idle, they spin and
are counted), the hash seed is fixed and address randomisation is off, so a figure
moves only with the code.  Prints a markdown table; the change subtracts the loop's own
cost (the ``none`` row).  Needs ``valgrind``, its headers and a C compiler.
"""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import tempfile

N = int(os.environ.get("N", "20000"))
LAZY = os.environ.get("LAZY", "1") != "0"

C_SOURCE = r"""
#include <valgrind/callgrind.h>
void cg_zero(void) { CALLGRIND_ZERO_STATS; }
void cg_dump(const char *s) { CALLGRIND_DUMP_STATS_AT(s); }
"""

CHILD = r"""
import ctypes, gc, sys
sys.path.insert(0, sys.argv[1])
import numpy as np
import d2o, d2o.numpy as dnp
assert d2o.__file__.startswith(sys.argv[1]), d2o.__file__
try:
    d2o.set_options(lazy=sys.argv[3] == "1")
except ValueError:  # a tree from before the option
    pass
cg = ctypes.CDLL(sys.argv[4])
D = d2o.distributed_data_object
x = D(np.arange(1000.0)); y = D(np.ones(1000)); a = np.arange(16.0)
xi = D(np.arange(1000) % 7); z = D(np.arange(1000.0)); w = D(np.arange(1000.0))
def iadd():
    global z
    z += 1.0
def iaddx():
    global w
    w += w
ops = {
    "none": lambda: None,
    "D(a)": lambda: D(a), "D(global_shape=(n,))": lambda: D(global_shape=(1000,)),
    "x.copy_empty()": lambda: x.copy_empty(), "x.copy()": lambda: x.copy(),
    "x.max()": lambda: x.max(), "x.sum()": lambda: x.sum(),
    "x[::-2]": lambda: x[::-2], "x[5]": lambda: x[5],
    "x.get_full_data()": lambda: x.get_full_data(),
    "x + y": lambda: x + y, "x + x": lambda: x + x, "x + 0": lambda: x + 0,
    "x + 1": lambda: x + 1, "x * 2.0": lambda: x * 2.0, "1 - x": lambda: 1 - x,
    "x += x": iaddx, "x += 1.0": iadd, "-x": lambda: -x,
    "np.sqrt(x)": lambda: np.sqrt(x), "np.add(x, y)": lambda: np.add(x, y),
    "xi.bincount()": lambda: xi.bincount(), "dnp.sum(x)": lambda: dnp.sum(x),
}
n = int(sys.argv[2])
for name, f in ops.items():
    for _ in range(50):
        f()
    gc.collect()
    gc.freeze()
    cg.cg_zero()
    for _ in range(n):
        f()
    cg.cg_dump(name.encode())
"""


_TRIGGER = "desc: Trigger: Client Request: "


def count(tree: str, lib: str, child: str, out: str) -> dict[str, int]:
    """Run ``child`` on ``tree`` under callgrind; operation -> instructions per call."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1",
               PYTHONHASHSEED="0", D2O_MPI="0")  # fmt: skip
    cmd = ["setarch", "-R", "valgrind", "--tool=callgrind", f"--callgrind-out-file={out}/o",
           sys.executable, child, tree, str(N), "1" if LAZY else "0", lib]  # fmt: skip
    subprocess.run(cmd, env=env, check=True, capture_output=True)
    per_call = {}
    for path in sorted(glob.glob(f"{out}/o.*"), key=lambda p: int(p.rsplit(".", 1)[1])):
        name = total = None
        with open(path) as fh:
            for line in fh:
                if line.startswith(_TRIGGER):
                    name = line[len(_TRIGGER) :].strip()
                elif line.startswith("summary:"):
                    total = int(line.split()[1])
        if name is not None and total is not None:
            per_call[name] = total // N
    return per_call


def main() -> None:
    trees = [os.path.abspath(t) for t in sys.argv[1:]]
    if not trees:
        sys.exit(__doc__)
    with tempfile.TemporaryDirectory() as tmp:
        src, lib, child = f"{tmp}/cg.c", f"{tmp}/libcg.so", f"{tmp}/child.py"
        with open(src, "w") as fh:
            fh.write(C_SOURCE)
        with open(child, "w") as fh:
            fh.write(CHILD)
        subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", lib, src], check=True)
        results = []
        for i, tree in enumerate(trees):
            os.makedirs(f"{tmp}/{i}")
            results.append(count(tree, lib, child, f"{tmp}/{i}"))
    base = results[0]
    names = [os.path.basename(t) for t in trees]
    print(f"instructions per call, {N} calls, lazy {'on' if LAZY else 'off'}, no MPI\n")
    print("| call | " + " | ".join(names) + " |")
    print("|---|" + "---:|" * len(trees))
    for op in base:
        if op == "none":
            continue
        cells = [f"{base[op]:,}"]
        for r in results[1:]:
            net0, net = base[op] - base["none"], r[op] - r["none"]
            cells.append(f"{r[op]:,} ({(net - net0) * 100 / net0:+.1f} %)")
        print(f"| `{op}` | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
