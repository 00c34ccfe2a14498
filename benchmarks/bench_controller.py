"""Controller mode against SPMD: the seed programs and the cost of one command (not a test).

Controller mode (`d2o.runtime.controller`, started by ``mpiexec -n P python -m d2o.run
script.py``) runs the script on rank 0 alone and sends every d2o operation to the other
ranks as a command; SPMD (``mpiexec -n P python script.py``) runs the script on every
rank.  This benchmark runs the same measuring code both ways, on 2 processes:

* the seed programs (examples/programs/: DistNumPy's Monte Carlo pi, Jacobi solver and
  N-body simulation and GAiN's laplace.py), each timed as a whole program
  (``run(d2o.numpy, n, iterations)``, building the inputs included) at the medium
  sizes of bench_programs.py; goal: controller mode within 1.25x of SPMD;
* the round trip of an unbatched command: ``K`` times ``float(x.sum())`` on a 16-element
  array (every operation ends in a reduction, so each command is sent alone and waited
  for); per operation;
* a batched chain: ``K`` times ``y = y + 1.0`` on a 1000-element array, then one
  ``float(y.sum())`` (the element-wise operations queue up and travel in batches);
  per operation.

The per-operation figures of controller mode less those of SPMD are what a command
costs on top of the operation itself.  Three ways to run it:

* ``python benchmarks/bench_controller.py`` (no mpiexec): launches the two forms below
  (``--child``, results passed back through JSON files), SPMD and controller mode in
  turn ``--rounds`` times (3), so that a change in the machine's load falls on both,
  prints one table of the best figures of each mode and writes them to
  ``docs/_data/bench/controller.json`` (``make bench``; the performance page shows it);
* ``mpiexec -n 2 python benchmarks/bench_controller.py --child --mode spmd --json PATH``:
  SPMD; each figure starts with a barrier and counts the slowest rank's time; rank 0
  alone prints and writes the JSON;
* ``mpiexec -n 2 python -m d2o.run benchmarks/bench_controller.py --child --mode
  controller --json PATH``: controller mode; rank 0 (the only one running this script)
  times alone, without collective calls: every measured piece of code ends in a
  reduction that every rank takes part in, which synchronises.

A program's figure is the best of ``REPEAT`` runs (the per-operation figures: of
``REPEAT`` loops of ``K`` operations, after a warm-up).  Both modes must compute the
same results; the table says whether they did.  The direct forms also work without
``--child``, ``--json`` and ``--mode`` (the mode is detected) and print their own
figures.  ``--quick`` uses small sizes (a smoke test, seconds).  The children get
``OMP_NUM_THREADS=OPENBLAS_NUM_THREADS=1``; set it yourself for the direct forms.  All
times are wall-clock; other load on the machine shows in every figure (the 1-minute
load average is printed before and after): run it idle.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import tempfile
import time

from _harness import (  # (importing it puts the repository on sys.path)
    REPO,
    _mpiexec_command,
    cores,
    launch_children,
    measure_and_report,
    measures_here,
    record,
    run_label,
)

#: name: (module, n, iterations, what n is): the medium sizes of bench_programs.py (numpy
#: takes about 0.5-2 s on one core), so that the two benchmarks' figures compare
from bench_programs import PROGRAMS  # noqa: E402, I001

import d2o  # noqa: E402
import d2o.numpy as dnp  # noqa: E402
from d2o.runtime import controller as _controller  # noqa: E402

RECORD = "controller"  # docs/_data/bench/controller.json
NPROCS = 2
REPEAT = 3
ROUNDS = 3  # launches of each mode, alternating
GOAL = 1.25  # controller / SPMD at medium sizes


#: --quick: the same programs at small sizes
QUICK = {
    "monte_carlo_pi": (100_000, 2),
    "jacobi": (200, 5),
    "nbody": (100, 2),
    "nbody_dot": (100, 2),
    "laplace": (100, 10),
}
K = 2000  # operations per loop of the per-operation figures
K_QUICK = 200
TINY = 16  # elements of the round trip's array
SMALL = 1000  # elements of the chain's array


def _sizes(quick: bool) -> dict:
    """name: (module, n, iterations, what n is) for this run."""
    if not quick:
        return PROGRAMS
    return {name: (m, *QUICK[name], what) for name, (m, _, _, what) in PROGRAMS.items()}


def _floats(result) -> list:
    """A program's result (a float or a tuple of them) as a list of floats, for JSON."""
    if isinstance(result, tuple | list):
        return [float(v) for v in result]
    return [float(result)]


class _Clock:
    """Seconds of a piece of code run on every rank (SPMD: from a barrier to the slowest
    rank's end) or sent from rank 0 (controller mode: rank 0's own time; the code must
    end in a reduction, which waits for the workers)."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        if mode == "spmd":
            from d2o.core.comm import default_comm  # the internal Comm: barrier, allreduce

            self.comm = default_comm()
        else:
            self.comm = d2o.default_comm()  # the stand-in: rank 0 of P, calls refused

    def __call__(self, fn):
        """``(seconds, fn())``."""
        gc.collect()
        if self.mode == "spmd":
            self.comm.barrier()
        t0 = time.perf_counter()
        result = fn()
        t = time.perf_counter() - t0
        if self.mode == "spmd":
            t = self.comm.allreduce(t, op="max")
        return t, result


def _round_trip(k: int) -> float:
    """``k`` unbatched commands: a reduction of a tiny array each, its value fetched."""
    x = dnp.ones(TINY)
    total = 0.0
    for _ in range(k):
        total += float(x.sum())
    return total


def _chain(k: int) -> float:
    """``k`` element-wise operations in a chain, then one reduction."""
    y = dnp.ones(SMALL)
    for _ in range(k):
        y = y + 1.0
    return float(y.sum())


def measure(mode: str, quick: bool) -> dict:
    """Best-of-REPEAT seconds of each program, and per-operation seconds of the round
    trip and the chain, in ``mode``; with the results computed."""
    clock = _Clock(mode)
    rank0 = clock.comm.rank == 0
    out: dict = {"mode": mode, "nprocs": clock.comm.size, "programs": {}}
    for name, (module, n, iterations, _) in _sizes(quick).items():
        best = float("inf")
        for _ in range(REPEAT):
            t, result = clock(lambda m=module, a=(n, iterations): m.run(dnp, *a))
            best = min(best, t)
        out["programs"][name] = {"seconds": best, "result": _floats(result)}
        if rank0:
            print(f"  {name}: {best:.3f} s (result {_floats(result)})", flush=True)
    k = K_QUICK if quick else K
    for what, fn, expect in (
        ("round_trip", _round_trip, float(k * TINY)),
        ("chain", _chain, float(SMALL * (k + 1))),
    ):
        fn(k // 10)  # warm-up
        best = float("inf")
        for _ in range(REPEAT):
            t, result = clock(lambda f=fn: f(k))
            best = min(best, t)
        if result != expect:
            raise AssertionError(f"{what}: got {result}, expected {expect}")
        out[what] = {"per_op": best / k, "k": k}
        if rank0:
            print(f"  {what}: {best / k * 1e6:.1f} us per operation ({k} operations)", flush=True)
    return out


def print_one(results: dict) -> None:
    """The figures of one mode."""
    print(f"\n## {results['mode']} on {results['nprocs']} process(es)\n")
    for name, r in results["programs"].items():
        print(f"  {name}: {r['seconds']:.3f} s")
    for what in ("round_trip", "chain"):
        print(f"  {what}: {results[what]['per_op'] * 1e6:.1f} us per operation")


def _size_label(name: str, quick: bool) -> str:
    _, n, iterations, what = _sizes(quick)[name]
    return f"n = {n} {what}, {iterations} iterations"


def print_combined(spmd: dict, ctrl: dict, quick: bool) -> None:
    """One table of both modes, their results, and the per-operation costs."""
    nprocs = spmd["nprocs"]
    print(
        f"\n## Controller mode against SPMD on {nprocs} processes ({run_label(nprocs)})"
        f"{' (--quick sizes)' if quick else ''}\n"
    )
    print("| program | size | SPMD s | controller s | controller/SPMD | results |")
    print("|---|---|---:|---:|---:|---|")
    verdicts = []
    for name, s in spmd["programs"].items():
        c = ctrl["programs"][name]
        ratio = c["seconds"] / s["seconds"]
        same = "same" if s["result"] == c["result"] else f"DIFFER: {s['result']} / {c['result']}"
        print(
            f"| {name} | {_size_label(name, quick)} | {s['seconds']:.3f} | {c['seconds']:.3f} "
            f"| {ratio:.2f}x | {same} |"
        )
        verdicts.append(f"{name}: {'met' if ratio <= GOAL else 'missed'} ({ratio:.2f}x)")
    print("\nResults (SPMD; controller):")
    for name, s in spmd["programs"].items():
        print(f"  {name}: {s['result']}; {ctrl['programs'][name]['result']}")
    note = "; it is set for the medium sizes, not these" if quick else ""
    print(f"\nGoal (controller mode within {GOAL}x of SPMD{note}):")
    for v in verdicts:
        print(f"  {v}")
    print("\nPer operation (us), best of loops:")
    labels = {
        "round_trip": f"unbatched float(x.sum()), {TINY} elements",
        "chain": f"batched chain y = y + 1.0, {SMALL} elements (then one sum)",
    }
    for what, label in labels.items():
        s, c = spmd[what]["per_op"] * 1e6, ctrl[what]["per_op"] * 1e6
        print(
            f"  {label}, {spmd[what]['k']} ops: SPMD {s:.1f}, controller {c:.1f}, "
            f"difference {c - s:+.1f}"
        )
    extra = (ctrl["round_trip"]["per_op"] - spmd["round_trip"]["per_op"]) * 1e6
    print(f"\nRound-trip cost of an unbatched command (controller - SPMD): {extra:.1f} us")


def _launch_controller(argv: list[str]) -> dict:
    """``mpiexec -n NPROCS python -m d2o.run THIS --child --json PATH *argv`` (the
    environment of `launch_children`); the JSON rank 0 wrote."""
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    env.pop("D2O_MPI", None)
    cmd = _mpiexec_command(__file__, NPROCS)
    script = cmd.pop()  # mpiexec -n N python [-m d2o.run] script
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "controller.json")
        cmd += ["-m", "d2o.run", script, "--child", "--json", path, *argv]
        subprocess.run(cmd, env=env, cwd=REPO, check=True)
        with open(path) as f:
            return json.load(f)


def _best(runs: list[dict]) -> dict:
    """The runs of one mode merged: each figure the best (least) of them."""
    out = runs[0]
    for r in runs[1:]:
        for name, p in r["programs"].items():
            if p["result"] != out["programs"][name]["result"]:
                raise AssertionError(f"{name}: results differ between runs of one mode")
            out["programs"][name]["seconds"] = min(out["programs"][name]["seconds"], p["seconds"])
        for what in ("round_trip", "chain"):
            out[what]["per_op"] = min(out[what]["per_op"], r[what]["per_op"])
    return out


def launch(quick: bool, rounds: int) -> None:
    """Run the children, SPMD and controller mode in turn ``rounds`` times (so that
    changing load on the machine falls on both), and print the best of each together."""
    load = os.getloadavg()[0]
    extra = ["--quick"] if quick else []
    spmd, ctrl = [], []
    for _ in range(rounds):
        spmd.append(launch_children(__file__, ["--mode", "spmd", *extra], (NPROCS,))[str(NPROCS)])
        ctrl.append(_launch_controller(["--mode", "controller", *extra]))
    best = {"spmd": _best(spmd), "controller": _best(ctrl)}
    print_combined(best["spmd"], best["controller"], quick)
    after = os.getloadavg()[0]
    print(f"\n1-minute load average: {load:.2f} before, {after:.2f} after ({cores()} cores)")
    programs = {
        name: {"n": n, "iterations": it, "what": what}
        for name, (_, n, it, what) in _sizes(quick).items()
    }
    options = {
        "rounds": rounds,
        "repeat": REPEAT,
        "goal": GOAL,
        "programs": programs,
        "round_trip_elements": TINY,
        "chain_elements": SMALL,
    }
    record(RECORD, best, processes=(NPROCS,), quick=quick, options=options)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", action="store_true", help="measure here (under mpiexec)")
    parser.add_argument("--json", help="where rank 0 writes the results (with --child)")
    parser.add_argument(
        "--mode",
        choices=("spmd", "controller"),
        help="how this process was started (default: as detected)",
    )
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke test)")
    parser.add_argument(
        "--rounds", type=int, default=ROUNDS, help=f"children per mode, in turn ({ROUNDS})"
    )
    args = parser.parse_args()
    detected = "controller" if _controller.is_controller() else "spmd"
    mode = args.mode or detected
    if mode != detected:
        parser.error(
            f"--mode {mode}, but this process runs {detected}: controller mode is "
            "mpiexec -n P python -m d2o.run bench_controller.py --mode controller"
        )
    if mode == "spmd":
        from d2o.core.comm import default_comm

        comm = default_comm()
        if not measures_here(args.child, comm):
            launch(args.quick, args.rounds)
            return
    else:
        comm = d2o.default_comm()  # rank 0 (the only rank running this script)
    measure_and_report(
        comm,
        lambda: f"# {mode} on {comm.size} process(es): measuring",
        lambda: measure(mode, args.quick),
        (lambda r: None) if args.json else print_one,  # the launcher prints the table
        args.json,
    )


if __name__ == "__main__":
    main()
