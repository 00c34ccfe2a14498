"""Scaling predictions to 16,384 ranks: the seed programs, the Wiener filter and the scaling
kernels, from their traces at small P, priced by the LogGP model (`d2o.core.costmodel`).

    mpiexec -n P python tools/scaling_model.py record     # P = 1, 2, 4: docs/_data/scaling_model.json
    python tools/scaling_model.py render OUTDIR           # tables and plots (the docs build runs it)

``record`` runs every program once (warm) and then under ``d2o.trace()`` on P ranks, keeps
the MPI calls of its busiest rank (the one the model prices slowest) and the wall time (the
slowest rank's), and merges them into the data file under ``str(P)`` (recorded at P = 1,
2, 4 and 8).  ``render`` predicts, for P = 1, 2, 4, ..., 16,384 on each published network of
`costmodel.NETWORKS`::

    T(P) = compute(P) + sum over the calls recorded at P0 = 4 of cost(call scaled to P)

* compute: strong scaling takes the recorded problem `GROW` (4,096) times larger: its
  one-process time ``GROW T1`` (``T1`` recorded at P = 1) over P; weak scaling keeps each
  rank's share as at P0: ``T1 / P0`` at every P.
* each call over all ranks is priced over P; calls inside sub-groups and point-to-point
  exchanges (halos) keep their group, bytes and peers.  Its bytes per rank follow the one
  of `FORMS` that matches the same call recorded at 2 ranks (constant: reductions, agreement
  records; a share, 1/P; a transposition, (P - 1)/P^2; a replication, (P - 1)/P), times
  `GROW` in strong scaling and times P/P0 in weak scaling unless constant; an exchange that
  reached every peer at 2 and 4 ranks reaches every peer at P.

The fitted rules are checked against a run they were not fitted on: the calls at 4 ranks,
scaled to 8, against the calls recorded at 8 (the "rule check" table, oversubscribed).  What
the model leaves out: contention, topology, noise, compute that does not shrink as 1/P, and
halos that grow with the size; the figures are a model, not a measurement.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
for sub in ("", "benchmarks", "examples", "examples/programs"):
    if str(ROOT / sub) not in sys.path:
        sys.path.insert(0, str(ROOT / sub))

import d2o  # noqa: E402
import d2o.numpy as dnp  # noqa: E402
from d2o.core import costmodel as cm  # noqa: E402
from d2o.core.comm import RECORD_GATHER_MAX  # noqa: E402
from d2o.core.errors import RECORD_WORDS  # noqa: E402

DATA = ROOT / "docs" / "_data" / "scaling_model.json"
TARGETS = [2**k for k in range(15)]  # 1 ... 16,384
P0 = 4  # the recording the curves scale from
GROW = 4096  # strong scaling: the recorded problem this many times larger
#: bytes of an agreement record: gathered on few ranks, one Allreduce above (as d2o runs it)
RECORD_BYTES = 8 * RECORD_WORDS


def programs() -> dict[str, tuple[str, Callable]]:
    """name -> (what it is, a function of no arguments running it on d2o.numpy)."""
    import bench_scaling as bs  # noqa: PLC0415  (tools import the benchmarks only here)
    import jacobi  # noqa: PLC0415
    import laplace  # noqa: PLC0415
    import monte_carlo_pi  # noqa: PLC0415
    import nbody  # noqa: PLC0415
    import wiener_filter  # noqa: PLC0415

    comm = d2o.default_comm()

    def kernel(name: str, elements: int) -> Callable:
        k = bs.KERNELS[name]
        if name == "laplace":
            n = bs._side(elements)
            return lambda: k.d2o(n)
        args = [bs.d2o_input(k.shape(elements, elements), k.dtype, comm) for _ in range(k.inputs)]
        return lambda: k.d2o(*args)

    return {
        "monte_carlo_pi": ("Monte Carlo pi, 10^6 samples", lambda: monte_carlo_pi.run(dnp, 10**6)),
        "jacobi": ("Jacobi, n = 800, 20 iterations", lambda: jacobi.run(dnp, 800, 20)),
        "laplace": ("Laplace, 400 x 400, 20 sweeps", lambda: laplace.run(dnp, 400, 20)),
        "nbody": ("N-body, 600 bodies, 5 steps", lambda: nbody.run(dnp, 600, 5)),
        "wiener": ("Wiener filter, 128 x 128, 30 CG steps",
                   lambda: wiener_filter.wiener_filter(128, maxiter=30, tol=1e-30)),
        "k:elementwise": ("kernel elementwise, 2^20", kernel("elementwise", 1 << 20)),
        "k:sum": ("kernel sum, 2^20", kernel("sum", 1 << 20)),
        "k:redistribute": ("kernel redistribute, 2^20", kernel("redistribute", 1 << 20)),
        "k:fft": ("kernel fft, 2^18", kernel("fft", 1 << 18)),
        "k:laplace": ("kernel laplace, 2^18", kernel("laplace", 1 << 18)),
    }  # fmt: skip


# -- recording ------------------------------------------------------------------------------


def record() -> None:
    """Collective: trace every program on this run's ranks and merge into the data file."""
    comm = d2o.default_comm()
    p = comm.size
    net = cm.NETWORKS["InfiniBand HDR"]
    out = {}
    for name, (what, fn) in programs().items():
        fn()  # warm: plans, caches
        comm.barrier()
        t0 = time.perf_counter()
        with d2o.trace() as t:
            fn()
        wall = comm.allreduce(time.perf_counter() - t0, "max")
        calls = [list(c[1:]) + [peers] for c, peers in zip(t.calls, t.peers)]
        mine = cm.predict(t.calls, net, peers=t.peers).time
        busiest = comm.allreduce((mine, comm.rank), "max")[1]
        calls = comm.bcast(calls, root=busiest)
        out[name] = {"what": what, "wall_s": wall, "calls": calls}
        if comm.rank == 0:
            print(f"{p} ranks  {name:16} {wall:8.3f} s  {len(calls)} calls")
    if comm.rank == 0:
        doc = json.loads(DATA.read_text()) if DATA.is_file() else {}
        doc.setdefault("recorded", {})[str(p)] = out
        doc["recorded_with"] = "mpiexec -n P python tools/scaling_model.py record"
        DATA.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")


# -- the model ------------------------------------------------------------------------------


#: how a call's bytes per rank depend on P in strong scaling (the global size fixed)
FORMS: dict[str, Callable[[int], float]] = {
    "constant": lambda p: 1.0,  # reductions, records, halos of a 1-d split
    "share": lambda p: 1.0 / p,  # a rank's share
    "transpose": lambda p: (p - 1) / p**2,  # a share spread over the others
    "replicate": lambda p: (p - 1) / p,  # a share to every other rank (all-gather)
}


def form(b2: float, b4: float) -> str:
    """The `FORMS` entry whose ratio from 2 to 4 ranks is nearest to ``b4 / b2``."""
    if b2 <= 0 or b4 <= 0:
        return "constant"
    r = math.log(b4 / b2)
    return min(FORMS, key=lambda f: abs(math.log(FORMS[f](4) / FORMS[f](2)) - r))


def fitted(two: list, four: list) -> list[tuple]:
    """Per call recorded at 4 ranks: ``(call, form, peers grow)``, the form fitted on the
    same call at 2 ranks (calls aligned by order; all constant where the runs differ)."""
    same = len(two) == len(four) and all(a[0] == b[0] for a, b in zip(two, four))
    out = []
    for i, c in enumerate(four):
        kind, sent, received, group, peers = c
        if not same or group != 4 or kind in P2P:
            out.append((c, "constant", False))
            continue
        f = form(max(two[i][1], two[i][2]), max(sent, received))
        out.append((c, f, peers == 3 and two[i][4] == 1))
    return out


P2P = ("Sendrecv", "send", "recv", "Put", "Get", "Accumulate")


def scale(fit: tuple, p: int, weak: bool, grow: float = 1.0, p0: int = P0) -> tuple:
    """A fitted call recorded at ``p0`` ranks, at ``p``: strong scaling of the recorded
    problem ``grow`` times larger, or weak scaling with each rank's share as at ``p0``
    times ``grow``.  Returns ``(call, peers)`` for `costmodel.predict`."""
    (kind, sent, received, group, peers), f, every = fit
    if group != p0 or kind in P2P:  # sub-groups and neighbours stay as they were
        return ("op", kind, sent, received, group), peers
    if kind == "Allgather" and sent == RECORD_BYTES:  # an agreement record (d2o.core.errors)
        if p <= RECORD_GATHER_MAX[0]:  # gathered and folded locally on few ranks
            return ("op", kind, sent, sent * (p - 1), p), -1
        return ("op", "Allreduce", sent, sent, p), -1  # above: one Allreduce of the record
    h = FORMS[f]
    k = h(p) / h(p0)
    if f != "constant":
        k *= grow * (p / p0 if weak else 1.0)
    return ("op", kind, sent * k, received * k, p), (p - 1 if every else min(peers, p - 1))


def curve(fits: list, t1: float, net: cm.Network, weak: bool, grow: float) -> list[float]:
    """Predicted seconds at every P of `TARGETS`: compute ``grow T1 / P`` (strong) or
    ``grow T1 / P0`` (weak), plus the scaled calls priced on ``net``."""
    out = []
    for p in TARGETS:
        compute = t1 * grow / (P0 if weak else p)
        if p == 1:
            out.append(compute)
            continue
        scaled = [scale(f, p, weak, grow) for f in fits]
        comm_t = cm.predict([c for c, _ in scaled], net, peers=[k for _, k in scaled]).time
        out.append(compute + comm_t)
    return out


def rule_check(doc: dict) -> list[list[str]]:
    """The calls recorded at 4 ranks, fitted with 2, scaled to 8, against those recorded at
    8 (the model's messages and bytes on both)."""
    net = cm.NETWORKS["InfiniBand HDR"]
    rec = doc["recorded"]
    rows = []
    for name in rec.get("8", {}):
        fits = fitted(rec["2"][name]["calls"], rec["4"][name]["calls"])
        scaled = [scale(f, 8, False) for f in fits]
        a = cm.predict([c for c, _ in scaled], net, peers=[k for _, k in scaled])
        eight = rec["8"][name]["calls"]
        b = cm.predict([("op", *c[:4]) for c in eight], net, peers=[c[4] for c in eight])
        rows.append([name, f"{len(scaled)} / {len(eight)}", f"{a.messages} / {b.messages}",
                     f"{a.bytes / 1024:.1f} / {b.bytes / 1024:.1f}",
                     f"{a.time * 1e3:.3f} / {b.time * 1e3:.3f}"])  # fmt: skip
    return rows


def _table(head: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def dominant(fits: list, net: cm.Network, p: int, weak: bool, grow: float) -> str:
    """The call kind that takes the most of the predicted communication time at ``p``."""
    by: dict = {}
    for f in fits:
        c, peers = scale(f, p, weak, grow)
        t = cm.predict([c], net, peers=[peers]).time
        by[c[1]] = by.get(c[1], 0.0) + t
    if not by or max(by.values()) == 0:
        return "-"
    kind = max(by, key=by.__getitem__)
    return f"{kind} ({by[kind] / sum(by.values()):.0%})"


def render(outdir: Path) -> None:
    """Tables (``scaling_model.md``, ``scaling_rules.md``) and one plot per network."""
    doc = json.loads(DATA.read_text())
    rec = doc["recorded"]
    base, one = rec[str(P0)], rec["1"]
    outdir.mkdir(parents=True, exist_ok=True)
    shown = [1, 16, 256, 1024, 16384]
    rows = []
    curves: dict = {}
    for netname, net in cm.NETWORKS.items():
        for name, entry in base.items():
            t1 = one[name]["wall_s"]
            fits = fitted(rec["2"][name]["calls"], entry["calls"])
            curves[netname, name, False] = curve(fits, t1, net, False, GROW)
            curves[netname, name, True] = curve(fits, t1, net, True, 1.0)
            s, w = curves[netname, name, False], curves[netname, name, True]
            rows.append([netname, entry["what"]]
                        + [f"{s[TARGETS.index(p)]:.3g} s" for p in shown]
                        + [f"{w[0] / w[-1]:.2f}", dominant(fits, net, TARGETS[-1], True, 1.0)])  # fmt: skip
    head = ["network", "program (recorded size)"] + [f"strong, P = {p}" for p in shown]
    head += ["weak efficiency, P = 16384", "weak, P = 16384: most time in"]
    text = (f"Strong scaling: seconds predicted for the recorded problem {GROW} times larger. "
            f"Weak scaling: T(1) / T(P), every process keeping its share of the recorded "
            f"problem at {P0} ranks.  From the traces at 2 and {P0} ranks and the one-process "
            f"time; `python tools/scaling_model.py render`.\n\n")  # fmt: skip
    (outdir / "scaling_model.md").write_text(text + _table(head, rows))
    rule_head = ["program", "calls: model / run", "messages: model / run", "KiB: model / run",
                 "ms on InfiniBand HDR: model / run"]  # fmt: skip
    (outdir / "scaling_rules.md").write_text(_table(rule_head, rule_check(doc)))
    _plot(curves, base, outdir)


def _plot(curves: dict, base: dict, outdir: Path) -> None:
    import matplotlib  # noqa: PLC0415  (only rendering draws)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    for netname in cm.NETWORKS:
        fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4.8))
        for name in base:
            style = "--" if name.startswith("k:") else "-"
            s = curves[netname, name, False]
            w = curves[netname, name, True]
            a.plot(TARGETS, s, style, marker=".", label=name)
            b.plot(TARGETS, [w[0] / x for x in w], style, marker=".", label=name)
        a.set(xscale="log", yscale="log", xlabel="processes", ylabel="seconds",
              title=f"strong scaling (global size fixed), {netname}")  # fmt: skip
        b.set(xscale="log", xlabel="processes", ylabel="T(1) / T(P)", ylim=(0, 1.05),
              title=f"weak scaling (share per process fixed), {netname}")  # fmt: skip
        a.set_xscale("log", base=2)
        b.set_xscale("log", base=2)
        b.legend(fontsize=7, loc="lower left")
        a.grid(alpha=0.3)
        b.grid(alpha=0.3)
        fig.tight_layout()
        slug = netname.lower().replace(" ", "-")
        fig.savefig(outdir / f"scaling-{slug}.png", dpi=90)
        plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=("record", "render"))
    ap.add_argument("outdir", nargs="?", default=str(ROOT / "docs" / "_generated" / "scaling"))
    args = ap.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    if args.what == "record":
        record()
    else:
        render(Path(args.outdir))


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
