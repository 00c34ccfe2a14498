"""Record, or check, the output of the D2O paper's listings shown on the docs' paper page.

Usage::

    python docs/_scripts/listings.py --record   # run every listing, write docs/_listings/
    python docs/_scripts/listings.py --check    # run them again, compare (make test does)

Each listing runs as the paper ran it: the one-process sessions as ``python
examples/NAME.py`` without MPI (``D2O_MPI=0``), the others under ``mpiexec -n N``
with N as in the paper.  Every rank writes its output to its own file and the
recorded text is rank 0's output, then rank 1's, and so on (what a sorted
``mpiexec`` output shows).  The docs build only reads the recorded files, so
building the docs never needs ``mpiexec``; ``--check`` keeps them true (timings,
which change from run to run, are compared as ``X ms``).
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
OUTDIR = ROOT / "docs" / "_listings"

#: (file in examples/, processes) in the order of the paper page
LISTINGS = [
    ("basic_usage.py", 1),
    ("indexing.py", 1),
    ("get_set_data.py", 4),
    ("distribution_schemes.py", 3),
    ("initialization.py", 1),
    ("local_keys.py", 2),
    ("librarian.py", 4),
    ("copy_methods.py", 1),
    ("iterators.py", 1),
]

# Each listing's stdout goes to DIR/<listing>.<rank> (hydra's PMI_RANK; 0 without mpiexec).
# The one-process listings run one after the other in one interpreter (as the tests do).
_WRAPPER = """
import os, runpy, sys
rank = os.environ.get("PMI_RANK", "0")
for path in sys.argv[2:]:
    with open(os.path.join(sys.argv[1], os.path.basename(path) + "." + rank), "w") as out:
        sys.stdout = out
        runpy.run_path(path, run_name="__main__")
        sys.stdout = sys.__stdout__
"""


def run(names: list[str], nprocs: int) -> dict[str, str]:
    """Each listing's output on ``nprocs`` processes: rank 0's, then rank 1's, ..."""
    env = {k: v for k, v in os.environ.items() if k != "D2O_MPI"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["OMP_NUM_THREADS"] = "1"
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-c", _WRAPPER, tmp, *(str(EXAMPLES / n) for n in names)]
        if nprocs == 1:
            env["D2O_MPI"] = "0"
        else:
            mpiexec = Path(sys.executable).parent / "mpiexec"
            cmd = [str(mpiexec if mpiexec.exists() else "mpiexec"), "-n", str(nprocs), *cmd]
        subprocess.run(cmd, env=env, cwd=ROOT, check=True, timeout=120)
        return {
            n: "".join((Path(tmp) / f"{n}.{r}").read_text() for r in range(nprocs)) for n in names
        }


def normalized(text: str) -> str:
    """The text with timings replaced, for comparing runs."""
    return re.sub(r"\d+(\.\d+)? ms", "X ms", text)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--record", action="store_true", help="write docs/_listings/*.txt")
    mode.add_argument("--check", action="store_true", help="compare with docs/_listings/*.txt")
    args = p.parse_args()
    OUTDIR.mkdir(exist_ok=True)
    failed = []
    outputs = run([n for n, p in LISTINGS if p == 1], 1)
    for name, nprocs in LISTINGS:
        if nprocs > 1:
            outputs.update(run([name], nprocs))
    for name, nprocs in LISTINGS:
        out = outputs[name]
        path = OUTDIR / (Path(name).stem + ".txt")
        if args.record:
            path.write_text(out)
            print(f"recorded {path.relative_to(ROOT)} ({nprocs} process(es))")
            continue
        old = path.read_text() if path.exists() else ""
        if normalized(old) != normalized(out):
            failed.append(name)
            diff = difflib.unified_diff(
                old.splitlines(), out.splitlines(), str(path.relative_to(ROOT)), "now", lineterm=""
            )
            print("\n".join(diff))
    if failed:
        print(
            f"listing output changed: {', '.join(failed)}; if that is intended, run "
            "`python docs/_scripts/listings.py --record` and check the paper page"
        )
        return 1
    if args.check:
        print(f"the {len(LISTINGS)} recorded listing outputs of docs/paper-api.md are current")
    return 0


if __name__ == "__main__":
    sys.exit(main())
