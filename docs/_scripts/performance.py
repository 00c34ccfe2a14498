"""The performance page's tables and plots, from the benchmarks' output files, and its check.

Usage::

    python docs/_scripts/performance.py [OUTDIR]   # make docs runs it (OUTDIR: docs/_generated)
    python docs/_scripts/performance.py --check    # the check alone, nothing drawn

Every benchmark run plainly (``python benchmarks/bench_NAME.py``; ``make bench`` runs them
all) writes its results, with the machine's facts, the date and the commit, to
``docs/_data/bench/NAME.json`` (``record`` in ``benchmarks/_harness.py``).  This script
renders each file into ``OUTDIR/perf/NAME.md`` (markdown tables) and, for some,
``OUTDIR/perf/NAME.png`` (matplotlib), and ``OUTDIR/perf/machine.md`` (which benchmark ran
where, when, under what load).  ``docs/performance.md`` includes them and holds only prose.

It exits with status 1, which fails ``make docs``, when:

* a data file that the page shows is missing or unreadable, or does not name the benchmark
  script that wrote it, or that script does not exist or does not declare ``RECORD = NAME``
  (the page's figures come from the benchmarks' own output, nothing else), or a data file
  in ``docs/_data/bench/`` is not shown on the page;
* ``docs/performance.md`` includes or shows a file other than the generated ones, or holds a
  table with a number in it, or a measured figure typed into its prose: a number with a unit
  of time or rate, a percentage or a speed-up (so that no figure can drift from what the
  benchmarks print).
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "docs" / "_data" / "bench"
PAGE = ROOT / "docs" / "performance.md"
SUB = "perf"  # the generated files' folder under OUTDIR

# -- reading and checking the data files -----------------------------------------------------


class PageError(Exception):
    """A violation of the page's rules (the message says which and where)."""


def declared_record(script: Path) -> str | None:
    """The string a benchmark script assigns to ``RECORD`` at module level, if any."""
    tree = ast.parse(script.read_text(), filename=str(script))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "RECORD" for t in node.targets
        ):
            if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
                return node.value.value
    return None


def load(name: str, data: Path = DATA) -> dict:
    """The data file ``NAME.json``, checked: it exists, is JSON with results, and names the
    benchmark script that wrote it, a script of this repository that declares
    ``RECORD = NAME``."""
    path = data / f"{name}.json"
    shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    if not path.is_file():
        raise PageError(f"{shown} is missing: run `make bench` (or its benchmark) to write it")
    try:
        doc = json.loads(path.read_text())
    except ValueError as exc:
        raise PageError(f"{shown} is not JSON: {exc}") from None
    for key in ("benchmark", "record", "date", "processes", "machine", "results"):
        if key not in doc:
            raise PageError(f"{shown} has no {key!r}: not written by benchmarks/_harness.record")
    if doc["record"] != name:
        raise PageError(f"{shown} says it is the output {doc['record']!r}, not {name!r}")
    script = ROOT / doc["benchmark"]
    if not (doc["benchmark"].startswith("benchmarks/") and script.is_file()):
        raise PageError(f"{shown} names {doc['benchmark']!r}, which is no benchmark script here")
    declared = declared_record(script)
    if declared != name:
        raise PageError(
            f"{shown} names {doc['benchmark']}, which declares RECORD = {declared!r}, not {name!r}"
        )
    return doc


# -- the rules of the hand-written page ----------------------------------------------------

#: a measured figure in prose: a number with a unit of time or rate, a percentage, a speed-up
FIGURE = re.compile(
    r"(?<![\w^.])\d+(?:[.,]\d+)?(?:"
    r"\s*(?:µs|us|ns|ms|s|min|GB/s|MB/s|GiB/s|MiB/s)(?![\w/])"
    r"|\s*%"
    r"|[x×](?!\w)"
    r")"
)
GENERATED = re.compile(r"_generated/" + SUB + r"/([\w-]+)\.(md|png)")


def page_references(text: str) -> list[tuple[str, str]]:
    """The generated files (name, md or png) that the page includes or shows, in order."""
    return [(m.group(1), m.group(2)) for m in GENERATED.finditer(text)]


def check_page(text: str, where: str = "docs/performance.md") -> list[str]:
    """The rule violations of the hand-written page ``text`` (empty when it keeps them)."""
    errors = []
    lines = text.splitlines()
    fence = None  # the fence of the code block or directive we are in, if any
    directive = False
    for no, line in enumerate(lines, 1):
        stripped = line.strip()
        m = re.match(r"(`{3,}|~{3,}|:{3,})(.*)", stripped)
        if m:
            if fence is None:
                fence, directive = m.group(1), m.group(2).startswith("{")
                if directive:
                    target = m.group(2).split("}", 1)[1].strip() if "}" in m.group(2) else ""
                    kind = m.group(2).split("}", 1)[0] + "}"
                    if kind in ("{include}", "{literalinclude}", "{image}", "{figure}") and not (
                        GENERATED.fullmatch(target)
                    ):
                        errors.append(
                            f"{where}:{no}: {kind} of {target!r}: the page may include only "
                            f"the generated files _generated/{SUB}/NAME.md"
                        )
                continue
            if stripped == fence:
                fence = None
                continue
        if fence is not None and not directive:
            continue  # the inside of a code block: commands, not figures
        for img in re.finditer(r"!\[[^\]]*\]\(([^)]*)\)", line):
            if not GENERATED.fullmatch(img.group(1)):
                errors.append(
                    f"{where}:{no}: picture {img.group(1)!r}: the page may show only the "
                    f"generated plots _generated/{SUB}/NAME.png"
                )
        if stripped.startswith("|") and re.search(r"\d", stripped):
            errors.append(
                f"{where}:{no}: a table with numbers typed into the page; tables of figures "
                f"come from the data files (_generated/{SUB}/NAME.md)"
            )
            continue
        prose = re.sub(r"`[^`]*`", "", line)  # inline code: commands and names
        for fig in FIGURE.finditer(prose):
            errors.append(
                f"{where}:{no}: {fig.group(0)!r} looks like a measured figure typed into the "
                "page; every figure comes from a benchmark output file"
            )
    return errors


# -- formatting ------------------------------------------------------------------------------


def num(v: float | None, digits: int = 3) -> str:
    """``v`` with ``digits`` significant digits (no exponent for ordinary figures)."""
    if v is None:
        return "n/a"
    if v == 0:
        return "0"
    mag = abs(v)
    if mag >= 10 ** (digits - 1):
        return f"{v:,.0f}".replace(",", " ")
    decimals = digits
    while mag >= 1 and decimals > 0:
        mag /= 10
        decimals -= 1
    if abs(v) < 1:
        s = f"{v:.{digits}g}"
        return s if "e" not in s else f"{v:.2e}"
    return f"{v:.{decimals}f}"


def times(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.2f}×"


def pct(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.0f} %"


def ms(seconds: float | None) -> str:
    return "n/a" if seconds is None else num(seconds * 1e3)


def us(seconds: float | None) -> str:
    return "n/a" if seconds is None else num(seconds * 1e6)


def nbytes(n: float) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n:.0f} B"


def duration(t: float) -> str:
    if t == 0:
        return "0"
    if t < 1e-3:
        return f"{t * 1e6:.0f} µs"
    if t < 1:
        return f"{t * 1e3:.1f} ms"
    return f"{t:.1f} s"


def table(header: list[str], rows: list[list[str]], align: str | None = None) -> str:
    """A markdown table; ``align``: one letter per column, ``l`` or ``r`` (default: the
    first column left, the others right)."""
    align = align or "l" + "r" * (len(header) - 1)
    sep = ["---" if a == "l" else "---:" for a in align]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(sep) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def quick_note(doc: dict) -> str:
    if not doc.get("quick"):
        return ""
    return (
        f"\n*A reduced run* (`{doc['command']}`): smaller sizes or fewer repetitions "
        "than the benchmark's defaults.\n"
    )


def by_count(doc: dict) -> dict:
    return doc["results"]


PROGRAM_NAMES = {
    "monte_carlo_pi": "Monte Carlo π",
    "jacobi": "Jacobi",
    "nbody": "N-body",
    "laplace": "Laplace",
}


def _same(a, b, rtol: float = 1e-12) -> bool:
    """Whether two results (numbers or lists of them) agree to ``rtol`` (a sum over several
    processes adds in another order, so its last bits may differ from numpy's)."""
    a, b = (v if isinstance(v, list) else [v] for v in (a, b))
    return len(a) == len(b) and all(
        x == y or abs(x - y) <= rtol * max(abs(x), abs(y)) for x, y in zip(a, b)
    )


def _program_size(p: dict) -> str:
    return f"{p['n']} {p['what']}, {p['iterations']} iterations"


# -- the tables ------------------------------------------------------------------------------


def render_programs(doc: dict) -> str:
    one, two = by_count(doc)["1"], by_count(doc)["2"]
    progs = doc["options"]["programs"]
    goal1, goal2 = doc["options"]["goals"]["1p"], doc["options"]["goals"]["2p"]
    rows, met1, met2 = [], [], []
    for name in one:
        n1, t1, n2, t2 = one[name]["numpy"], one[name]["d2o"], two[name]["numpy"], two[name]["d2o"]
        s2 = n2 / t2
        rows.append(
            [
                PROGRAM_NAMES.get(name, name),
                _program_size(progs[name]),
                num(n1),
                f"{num(t1)} ({t1 / n1:.2f})",
                num(n2),
                num(t2),
                times(s2),
                pct(s2 / 2 * 100),
                times(two[name]["ceiling"]),
                "yes"
                if all(_same(r[name]["result_numpy"], r[name]["result_d2o"]) for r in (one, two))
                else "**NO**",
                progs[name]["paper"],
            ]
        )
        (met1 if t1 <= goal1 * n1 else []).append(PROGRAM_NAMES.get(name, name))
        (met2 if s2 >= goal2 else []).append(PROGRAM_NAMES.get(name, name))
    head = [
        "program",
        "size",
        "numpy s",
        "d2o 1 process s (÷ numpy)",
        "numpy s (2-process run)",
        "d2o 2 processes s",
        "speed-up",
        "efficiency",
        "ceiling",
        "same result",
        "paper",
    ]
    out = table(head, rows, "ll" + "r" * 7 + "ll")
    out += (
        f"\nGoals: d2o on 1 process within {goal1:.2f}× numpy's time, met by "
        f"{len(met1)} of {len(rows)} ({', '.join(met1) or 'none'}); at least {goal2}× numpy's "
        f"speed on 2 processes, met by {len(met2)} of {len(rows)} "
        f"({', '.join(met2) or 'none'}).\n"
    )
    return out + quick_note(doc)


def _bold(v: float | None) -> str:
    if v is None:
        return "n/a"
    s = f"{v:.1f}" if v < 10 else f"{v:.0f}"
    return f"**{s}**" if v >= 90 else s


def render_core(doc: dict) -> str:
    out = []
    for n, r in by_count(doc).items():
        sizes = r["sizes_log2"]
        label = "1 process" if n == "1" else f"{n} processes"
        out.append(f"**{label}** ({r['mpi']}; best of {r['repeats']}, {r['clock']} clock):\n")
        rows = [[name, *map(_bold, vals)] for name, vals in r["percent"].items()]
        out.append(table(["operation", *(f"2^{k}" for k in sizes)], rows))
    first = by_count(doc)["1"]
    k0 = first["sizes_log2"][0]
    rows = []
    for name, (t_np, t_d) in first["per_call_s"].items():
        over = None if t_d is None else t_d - t_np
        rows.append([name, us(t_np), us(t_d), us(over)])
    out.append(f"Per-call cost at n = 2^{k0}, 1 process (µs; d2o − numpy is d2o's overhead):\n")
    out.append(table(["operation", "numpy µs", "d2o µs", "overhead µs"], rows))
    return "\n".join(out) + quick_note(doc)


def _layout(label: str, layout: str) -> str:
    return f"{label}: {layout}"


def render_kernels(doc: dict) -> str:
    one, two = by_count(doc)["1"], by_count(doc)["2"]
    goals = doc["options"]["goals"]
    rows = []
    for name in two:
        n1, n2 = one[name]["numpy"], two[name]["numpy"]
        for label, v2 in two[name]["variants"].items():
            t1, t2 = one[name]["variants"][label]["d2o"], v2["d2o"]
            s2 = n2 / t2
            rows.append(
                [
                    name,
                    two[name]["size"],
                    _layout(label, v2["layout"]),
                    num(n1),
                    f"{num(t1)} ({t1 / n1:.2f})",
                    num(n2),
                    num(t2),
                    times(s2),
                    times(two[name]["ceiling"]),
                    nbytes(v2["moved"]),
                    f"{goals[name]}× {'met' if s2 >= goals[name] else 'missed'}",
                ]
            )
    head = [
        "kernel",
        "size",
        "d2o layout (2 processes)",
        "numpy s",
        "d2o 1 process s (÷ numpy)",
        "numpy s (2-process run)",
        "d2o 2 processes s",
        "speed-up",
        "ceiling",
        "moved",
        "goal",
    ]
    notes = "".join(f"\n{n}." for n in doc["options"].get("notes", []))
    return table(head, rows, "lll" + "r" * 7 + "l") + notes + "\n" + quick_note(doc)


def render_sort(doc: dict) -> str:
    one, two = by_count(doc)["1"], by_count(doc)["2"]
    rows = []
    for dtype in one:
        for name, r1 in one[dtype].items():
            r2 = two[dtype][name]
            same = "yes" if r1["same"] and r2["same"] else "**NO**"
            rows.append(
                [
                    dtype,
                    name,
                    num(r1["numpy"]),
                    num(r1["d2o"]),
                    num(r2["numpy"]),
                    num(r2["d2o"]),
                    times(r2["numpy"] / r2["d2o"]),
                    times(r2["ceiling"]),
                    same,
                ]
            )
    head = [
        "dtype",
        "function",
        "numpy s",
        "d2o 1 process s",
        "numpy s (2-process run)",
        "d2o 2 processes s",
        "speed-up 2 processes",
        "ceiling",
        "same result",
    ]
    n = doc["options"]["n"]
    goal = doc["options"]["goals"]["sort_2p"]
    verdict = []
    for dtype in two:
        s = two[dtype]["sort"]["numpy"] / two[dtype]["sort"]["d2o"]
        faster = two[dtype]["median"]["d2o"] < two[dtype]["sort"]["d2o"]
        verdict.append(
            f"{dtype}: sort {'met' if s >= goal else 'missed'}, median "
            f"{'faster' if faster else 'not faster'} than sort"
        )
    out = f"n = {n} elements.\n\n" + table(head, rows, "ll" + "r" * 6 + "l")
    out += f"\nGoals on 2 processes (sort at least {goal}× numpy; d2o's median faster than "
    out += f"its sort): {'; '.join(verdict)}.\n"
    return out + quick_note(doc)


def render_controller(doc: dict) -> str:
    spmd, ctrl = by_count(doc)["spmd"], by_count(doc)["controller"]
    progs = doc["options"]["programs"]
    goal = doc["options"]["goal"]
    rows = []
    for name, s in spmd["programs"].items():
        c = ctrl["programs"][name]
        ratio = c["seconds"] / s["seconds"]
        rows.append(
            [
                PROGRAM_NAMES.get(name, name),
                _program_size(progs[name]),
                num(s["seconds"]),
                num(c["seconds"]),
                f"{ratio:.2f}× ({'met' if ratio <= goal else 'missed'})",
                "yes" if s["result"] == c["result"] else "**NO**",
            ]
        )
    out = table(
        ["program", "size", "SPMD s", "controller s", f"controller/SPMD (goal {goal}×)", "same"],
        rows,
        "llrrrl",
    )
    labels = {
        "round_trip": f"`float(x.sum())` of {doc['options']['round_trip_elements']} elements, "
        "each command sent alone and waited for",
        "chain": f"`y = y + 1.0` of {doc['options']['chain_elements']} elements, queued and "
        "sent in batches",
    }
    rows = []
    for what, label in labels.items():
        s, c = spmd[what]["per_op"], ctrl[what]["per_op"]
        rows.append([label, us(s), us(c), us(c - s)])
    out += "\nPer operation, the best of loops of many:\n\n"
    out += table(["operation", "SPMD µs", "controller µs", "difference µs"], rows)
    return out + quick_note(doc)


def render_communication(doc: dict) -> str:
    (n, r), *_ = by_count(doc).items()
    targets = r["targets"]
    rows = []
    for op in r["operations"]:
        rows.append(
            [
                op["name"],
                str(op["calls"]),
                nbytes(op["bytes_sent"]),
                nbytes(op["model_bytes"]),
                *(duration(op["estimate_s"][str(p)]) for p in targets),
            ]
        )
    head = ["operation", "MPI calls/rank", "bytes sent/rank", "model bytes/rank"]
    head += [f"est. P={p}" for p in targets]
    out = (
        f"{n} ranks, {r['rows_per_rank']} × {r['cols']} float64 per rank; measured in the same "
        f"run: α = {r['alpha_s'] * 1e6:.1f} µs per small-collective step, "
        f"β = {r['beta_bytes_per_s'] / 1e9:.2f} GB/s per rank.\n\n"
    )
    return out + table(head, rows) + quick_note(doc)


def render_costmodel(doc: dict) -> str:
    """The LogGP model's counts against the replayed schedules at every P, and its times
    against MPICH's collectives where the cores were not oversubscribed."""
    rows, timed = [], []
    for n, r in by_count(doc).items():
        over = " (oversubscribed)" if r["oversubscribed"] else ""
        for c in r["counts"]:
            rows.append([f"{n}{over}", c["kind"], nbytes(c["bytes"]), c["algorithm"],
                         f"{c['messages']} / {c['model_messages']}",
                         f"{nbytes(c['sent'])} / {nbytes(c['model_sent'])}",
                         "yes" if c["match"] and c["delivered"] and c["traced"] else "NO"])  # fmt: skip
        for t in r["timing"]:
            timed.append([n, t["kind"], nbytes(t["bytes"]), us(t["measured_s"]),
                          us(t["model_s"]), f"{t['ratio']:.2f}"])  # fmt: skip
    out = table(["processes", "call", "payload", "MPICH's algorithm", "messages: run / model",
                 "bytes: run / model", "equal"], rows)  # fmt: skip
    for n, r in by_count(doc).items():
        net = r["network"]
        if not r["oversubscribed"] and net["G"]:
            out += (f"\n\nCalibrated at {n} ranks: L = {net['L'] * 1e6:.2f} µs, o = "
                    f"{net['o'] * 1e6:.2f} µs, g = {net['g'] * 1e6:.2f} µs, G = "
                    f"{net['G'] * 1e9:.3f} ns/B, γ = {net['gamma'] * 1e9:.3f} ns/B"
                    + "".join(f"; entry of {k} {v * 1e6:.2f} µs"
                              for k, v in net.get("entry", {}).items())
                    + ".\n\n")  # fmt: skip
            if net.get("curve"):  # PLogP: the measured times the model reads
                swap = dict((int(k), t) for k, t in net.get("swap_curve", []))
                out += ("The measured message times (PLogP's curves) the model reads:\n\n"
                        + table(["bytes", "one way (µs)", "exchange, both ways at once (µs)"],
                                [[nbytes(k), us(t), us(swap[int(k)]) if int(k) in swap else ""]
                                 for k, t in net["curve"]])
                        + "\n\n")  # fmt: skip
    if timed:
        out += table(["processes", "MPICH call", "bytes", "measured (µs)", "model (µs)",
                      "model / measured"], timed)  # fmt: skip
        within = sum(1 for t in timed if 0.5 <= float(t[-1]) <= 2)
        load = doc.get("load_average", {})
        out += (f"\n\nWithin 2x: {within} of {len(timed)} calls, with the machine's load "
                f"average at {load.get('before')} before the run and {load.get('after')} "
                "after it (on 2 cores).")  # fmt: skip
        for n, r in by_count(doc).items():
            runs = r.get("launches")
            if runs:  # each call from its fastest launch: every launch counted here too
                each = [sum(1 for t in rows if 0.5 <= t["ratio"] <= 2) for rows in runs]
                out += (f" Each call is the fastest of {len(runs)} launches at {n} ranks (with "
                        f"that launch's calibration); launch by launch, "
                        + ", ".join(str(e) for e in each)
                        + f" of {len(runs[0])} calls were within 2x.")  # fmt: skip
        out += "\n"
    return out + quick_note(doc)


def render_wire(doc: dict) -> str:
    res = doc["results"]
    rows = []
    for r in res["rows"]:
        rows.append([str(r["processes"]), r["kind"], nbytes(r["bytes"]), r["algorithm"],
                     f"{sum(r['messages'])} / {sum(r['model_messages'])}",
                     f"{nbytes(sum(r['sent']))} / {nbytes(sum(r['model_sent']))}",
                     "yes" if r["match"] else "NO"])  # fmt: skip
    out = table(["processes", "call", "bytes a rank", "the model's algorithm",
                 "messages: MPICH / model", "bytes: MPICH / model",
                 "every rank equal"], rows)  # fmt: skip
    return out + (f"\n\nEvery rank's messages and bytes per call equal the model's in "
                  f"{res['equal']} of {len(res['rows'])} calls ({res['reps']} calls counted "
                  "per row; the sums above are over the ranks).\n") + quick_note(doc)  # fmt: skip


def render_indexing(doc: dict) -> str:
    one, two = by_count(doc)["1"], by_count(doc)["2"]
    rows = []
    for a, b in zip(one, two):
        rows.append(
            [
                a["operation"],
                num(a["numpy_us"]),
                num(a["d2o_us"]),
                f"{a['d2o_us'] / a['numpy_us']:.2f}",
                num(b["numpy_us"]),
                num(b["d2o_us"]),
                f"{b['d2o_us'] / b['numpy_us']:.2f}",
            ]
        )
    head = [
        "operation",
        "numpy µs",
        "d2o 1 process µs",
        "ratio",
        "numpy µs (2-process run)",
        "d2o 2 processes µs",
        "ratio",
    ]
    return table(head, rows) + quick_note(doc)


def render_redistribution(doc: dict) -> str:
    rows = []
    for n, r in by_count(doc).items():
        rows.append([n, ms(r["d2o_s"]), f"{r['bytes'] / r['d2o_s'] / 1e9:.1f}", ms(r["copyto_s"])])
    first = next(iter(by_count(doc).values()))
    out = f"{first['shape'][0]} × {first['shape'][1]} float64 ({nbytes(first['bytes'])}).\n\n"
    head = ["processes", "d2o ms", "throughput GB/s", "`np.copyto` ms (1 process)"]
    out += table(head, rows)
    plans = [
        [n, f"`{p['move']}`", p["size"], us(p["uncached_s"]), us(p["cached_s"]),
         f"{p['cached_s'] / p['uncached_s']:.2f}"]
        for n, r in by_count(doc).items()
        for p in r.get("plans", [])
    ]  # fmt: skip
    if plans:
        out += (
            "\nExchange plans (datatypes built once and reused) against building them per call:\n\n"
        )
        head = ["processes", "move", "size", "without plans", "with plans", "ratio"]
        out += table(head, plans, "llrrrr")
    return out + quick_note(doc)


def render_fft(doc: dict) -> str:
    rows = []
    backend = None
    for n, r in by_count(doc).items():
        backend = r["backend"]
        for size, v in r["sizes"].items():
            ref = v["reference_s"]
            rows.append(
                [
                    n,
                    f"{size}²",
                    ms(v["d2o_s"]),
                    ms(v["d2o_dist_axis1_s"]),
                    ms(ref),
                    f"{times(ref / v['d2o_s'])} ({times(ref / v['d2o_dist_axis1_s'])})",
                ]
            )
    head = [
        "processes",
        "size",
        "d2o `fftn` ms",
        "`dist_axis=1` ms",
        f"{backend}, 1 process ms",
        "speed-up (`dist_axis=1`)",
    ]
    return table(head, rows, "ll" + "r" * 4) + quick_note(doc)


def render_linalg_sym(doc: dict) -> str:
    return _sym_table(by_count(doc).items()) + quick_note(doc)


def _sym_table(runs) -> str:
    """cholesky and eigh against numpy (bench_linalg_sym's figures)."""
    rows = []
    for n, r in runs:
        for size, v in r["cholesky"].items():
            rows.append(["`cholesky`", n, size, ms(v["d2o_s"]), ms(v["numpy_s"]),
                         times(v["numpy_s"] / v["d2o_s"]),
                         f"{nbytes(v['bytes'])} ({nbytes(v['model'])})"])  # fmt: skip
        for size, v in r["eigh"].items():
            rows.append(["`eigh`", n, size, ms(v["d2o_s"]), ms(v["numpy_s"]),
                         times(v["numpy_s"] / v["d2o_s"]), f"{v['sweeps']} sweeps"])  # fmt: skip
    head = ["function", "processes", "n", "d2o ms", "numpy, 1 process ms", "speed-up",
            "moved (model)"]  # fmt: skip
    return table(head, rows, "lll" + "r" * 4)


def render_wiener(doc: dict) -> str:
    runs = by_count(doc)
    counts = list(runs)
    rows = []
    for size in runs[counts[0]]["sizes"]:
        its = runs[counts[0]]["sizes"][size]["iterations"]
        cells = [f"{size}² ({its} CG iterations)"]
        cells += [num(runs[n]["sizes"][size]["seconds"]) for n in counts]
        rows.append(cells)
    head = ["size", *(f"{n} process{'es' if n != '1' else ''} s" for n in counts)]
    tol = runs[counts[0]]["tol"]
    return f"Tolerance {tol:g}.\n\n" + table(head, rows) + quick_note(doc)


def render_layouts(doc: dict) -> str:
    res = by_count(doc)
    serial = res["serial"]
    per = serial["per_call_s"]
    t_np = next(v for k, v in per.items() if k.startswith("numpy"))
    rows = [[k, us(v), "" if k.startswith("numpy") else us(v - t_np)] for k, v in per.items()]
    shape = " × ".join(map(str, serial["shape"]))
    out = [
        f"Per-call cost of `x + x` on {serial['elements']} float64 elements ({shape}), one "
        f"process ({serial['mpi']}):\n",
        table(["", "µs per call", "d2o − numpy µs"], rows),
    ]
    counts = [n for n in res if n != "serial"]

    def procs(n: str) -> str:
        return f"{n} (oversubscribed)" if res[n]["oversubscribed"] else n

    e0 = res[counts[0]]["elementwise"]
    rows = []
    for n in counts:
        e = res[n]["elementwise"]
        rows.append(
            [
                procs(n),
                str(tuple(e["mesh"])),
                us(e["d2o_s"]),
                us(e["numpy_s"]),
                pct(e["numpy_s"] / e["d2o_s"] * 100),
            ]
        )
    shape = " × ".join(map(str, e0["shape"]))
    out += [
        f"`x + x` on {shape} float64 on `layout(split=(0, 1))`, against numpy's `a + a` of the "
        "whole array on one process:\n",
        table(["processes", "mesh", "d2o µs", "numpy µs", "fraction of numpy"], rows, "llrrr"),
    ]
    rows = []
    red = None
    for n in counts:
        red = res[n].get("redistribution") or red
        r = res[n].get("redistribution")
        if r is None:
            continue
        for case in r["cases"]:
            mesh = str(tuple(case["mesh"]))
            note = "" if case["moves"] else " (nothing moves)"
            for what, t in ((f"mesh {mesh} → slab", case["to_slab_s"]),
                            (f"slab → mesh {mesh}", case["to_mesh_s"])):  # fmt: skip
                rows.append(
                    [
                        procs(n),
                        what + note,
                        ms(t),
                        f"{r['bytes'] / t / 1e9:.1f}",
                        ms(r["copyto_s"]),
                        pct(r["copyto_s"] / t * 100),
                    ]
                )
    if red is not None:
        shape = " × ".join(map(str, red["shape"]))
        out += [
            f"`x.copy(distribution_strategy=...)` of {shape} float64 ({nbytes(red['bytes'])}) "
            "between a mesh layout split `(0, 1)` and `'equal'` (the slab along axis 0), "
            "against `np.copyto` of the same bytes on one process:\n",
            table(
                [
                    "processes",
                    "redistribution",
                    "d2o ms",
                    "GB/s",
                    "`np.copyto` ms",
                    "of its bandwidth",
                ],
                rows,
                "llrrrr",
            ),
        ]
    c0 = res[counts[0]]["cyclic"]
    blocks = doc["options"]["blocks"]
    rows = []
    for n in counts:
        t = res[n]["cyclic"]["times_s"]
        cells = [procs(n), ms(t["numpy"]), ms(t["block"])]
        for b in blocks:
            key = f"block-cyclic, block={b}"
            cells.append(f"{t[key] / t['block']:.2f}" if key in t else "n/a")
        rows.append(cells)
    shape = " × ".join(map(str, c0["shape"]))
    out += [
        f"`x * 2.0 + x` on {shape} float64, `layout(split=(0, 1), block=...)`; the last "
        "columns divide the block-cyclic layout's time by the block layout's:\n",
        table(
            [
                "processes",
                "numpy ms (1 process)",
                "block ms",
                *(f"block={b} / block" for b in blocks),
            ],
            rows,
            "l" + "r" * (2 + len(blocks)),
        ),
    ]
    return "\n".join(out) + quick_note(doc)


def render_io(doc: dict) -> str:
    res = by_count(doc)
    counts = list(res)
    keys = list(res[counts[0]]["formats"])
    rows = []
    for key in keys:
        cells = [res[counts[0]]["formats"][key]["label"].rsplit(" (", 1)[0]]
        for n in counts:
            f = res[n]["formats"].get(key)
            b = res[n]["bytes"]
            cells += [f"{b / f['write_s'] / 1e9:.2f}", f"{b / f['read_s'] / 1e9:.2f}"]
        rows.append(cells)
    head = ["format"]
    for n in counts:
        label = "1 process" if n == "1" else f"{n} processes"
        head += [f"write GB/s, {label} run", f"read GB/s, {label} run"]
    size = nbytes(res[counts[0]]["bytes"])
    out = f"A {size} float64 array. numpy's row is numpy on one process, measured in each run.\n\n"
    return out + table(head, rows) + quick_note(doc)


def render_safety(doc: dict) -> str:
    out = []
    for n, r in by_count(doc).items():
        label = "1 process" if n == "1" else f"{n} processes"
        out.append(
            f"**{label}** ({r['calls_per_block']} calls per block, best of 5; µs per call):\n"
        )
        rows = [
            [
                f"`{op['name']}`",
                "yes" if op["communicates"] else "no",
                f"{op['off_us']:.1f}",
                f"{op['on_us']:.1f}",
                f"{op['on_us'] - op['off_us']:+.1f}",
            ]
            for op in r["operations"]
        ]
        out.append(
            table(["operation", "communicates", "check_args off", "on", "extra"], rows, "llrrr")
        )
        if n != "1":
            a = r["agreement_us"]
            run, stop = a["watchdog_running"], a["watchdog_stopped"]
            out.append(
                f"One-byte agreement (`Comm.any_flag`): {run:.2f} µs with the watchdog thread "
                f"running, {stop:.2f} µs with it stopped ({run - stop:+.2f} µs).\n"
            )
        out.append(
            f"The watchdog's bookkeeping per MPI call (`Comm.calls += 1`): "
            f"{r['counter_us'] * 1e3:.0f} ns.\n"
        )
    return "\n".join(out) + quick_note(doc)


def render_rma(doc: dict) -> str:
    r = by_count(doc)["2"]
    gbs = lambda s: f"{r['patch_bytes'] / s / 1e9:.2f}"  # noqa: E731
    rows = [
        ["1 MiB patch, GB/s", gbs(r["get_1mib_s"]), gbs(r["put_1mib_s"]), "",
         gbs(r["sendrecv_1mib_s"])],
        ["8 bytes, µs", f"{r['get_8b_s'] * 1e6:.1f}", "", f"{r['fetch_and_add_s'] * 1e6:.1f}",
         f"{r['sendrecv_8b_latency_s'] * 1e6:.1f}"],
    ]  # fmt: skip
    out = table(["2 processes", "get", "put", "fetch_and_add", "Send/Recv"], rows, "lrrrr")
    if "get_1mib_mpi_s" in r:  # recorded since the gets and puts inside a node are copies
        out += (
            f"\nThrough MPI calls (`x.window(shared=False)`, as to a rank on another node): "
            f"1 MiB get {gbs(r['get_1mib_mpi_s'])} GB/s, put {gbs(r['put_1mib_mpi_s'])} GB/s, "
            f"8-byte get {r['get_8b_mpi_s'] * 1e6:.1f} µs.\n"
        )
    out += (
        f"\nAn 8-byte get while the target computes in numpy for 1 s: "
        f"{r['get_8b_busy_target_s'] * 1e3:.2f} ms.\n"
    )
    return out + quick_note(doc)


def render_modes(doc: dict) -> str:
    out = []
    for n, r in by_count(doc).items():
        label = "1 process" if n == "1" else f"{n} processes"
        out.append(
            f"**{label}** ({r['calls_per_block']} calls per block, best of 5; µs per call):\n"
        )
        rows = [[f"`{op}`", *(f"{v:.2f}" for v in vals)] for op, vals in r["us_per_call"].items()]
        out.append(table(["operation", *r["states"]], rows, "l" + "r" * len(r["states"])))
        peak = r["chain_peak"]
        out.append(
            f"Extra memory at the peak of `0.5 * (((a + 1) * 2 + 3) - 4)` after both, in "
            f"pieces (one piece: the result alone): eagerly {peak['eager']:.2f} (the "
            f"temporaries are reused), lazily {peak['lazy']:.2f} (one fused kernel).\n"
        )
    return "\n".join(out) + quick_note(doc)


def render_random(doc: dict) -> str:
    r = by_count(doc)["1"]
    rows = [
        [f"`{x['call']}`", f"{x['n']:,}", ms(x["numpy_s"]), ms(x["d2o_s"]),
         f"{x['d2o_s'] / x['numpy_s']:.2f}", x["check"]]
        for x in r["rows"]
    ]  # fmt: skip
    head = ["call", "n", "numpy ms", "d2o ms", "d2o / numpy", "check"]
    return (
        f"One process, best of {r['repeat']}, numpy and d2o alternating:\n\n"
        + table(head, rows, "lrrrrl")
        + quick_note(doc)
    )


def render_linalg(doc: dict) -> str:
    rows = []
    for n, r in by_count(doc).items():
        conc = r.get("efficiency_concurrent")
        mem = r.get("memory")
        cpu = r.get("cpu")
        rows.append([
            f"{n} × {tuple(r['mesh'])}", f"{r['n']:,}", f"{r['numpy_solve_s']:.3f}",
            f"{r['d2o_solve_s']:.3f}", f"{r['speedup']:.2f}", f"{r['d2o_lu_s']:.3f}",
            f"{r['dgemm_one_core_flops'] / 1e9:.2f}", pct(100 * r["efficiency"]),
            "" if conc is None else pct(100 * conc),
            "" if cpu is None else f"{cpu['speedup']:.2f}, {pct(100 * cpu['efficiency'])}",
            nbytes(r["lu_bytes"]), nbytes(r["model_bytes"]), f"{r['hpl_residual']:.4f}",
            nbytes(max(r["peak_rss_bytes"])),
            "" if mem is None else f"{nbytes(max(mem['peak_rss']))} "
            f"({nbytes(max(mem['baseline_rss']))} interpreter)",
        ])  # fmt: skip
    head = ["processes × mesh", "n", "numpy solve s", "d2o solve s", "speed-up", "d2o LU s",
            "DGEMM GFlop/s (1 core)", "LU / (P × DGEMM)", "LU / concurrent DGEMM",
            "by CPU time: speed-up, LU / (P × DGEMM)", "bytes per LU", "model",
            "HPL residual", "peak RSS per rank", "overwrite_a pass: peak RSS per rank"]  # fmt: skip
    r0 = next(iter(by_count(doc).values()))
    load = f"load average {r0['load_before']:.2f} before, {r0['load_after']:.2f} after"
    sym = [(n, r["symmetric"]) for n, r in by_count(doc).items() if "symmetric" in r]
    return (
        f"BLAS threads pinned to 1, median of {r0['repeat']}; {load}:\n\n"
        + table(head, rows, "l" + "r" * (len(head) - 1))
        + ("\n\n`cholesky` and `eigh` in the same run:\n\n" + _sym_table(sym) if sym else "")
        + quick_note(doc)
    )


def render_fusion(doc: dict) -> str:
    parts = []
    for procs, results in by_count(doc).items():
        r = dict(results)
        bw, bw1 = r.pop("triad_bytes_per_s"), r.pop("triad_one_core_bytes_per_s")
        first, later = r.pop("first_step_s"), r.pop("later_step_s")
        rows = []
        for case, x in r.items():
            np_s, ne_s, ea_s, lq_s, la_s, b_s = (x[k] for k in (
                "numpy_s", "numexpr_s", "eager_s", "lazy_numexpr_s", "lazy_s", "bound_s"))  # fmt: skip
            rows.append([case, ms(np_s), ms(ne_s) if ne_s else "-", ms(ea_s), ms(lq_s), ms(la_s),
                         times(np_s / la_s), times(np_s / ea_s), f"{ms(b_s)} ({x['bound']})",
                         f"{la_s / b_s:.2f}"])  # fmt: skip
        head = ["case", "numpy ms", "numexpr ms", "eager ms", "lazy (numexpr) ms", "lazy ms",
                "lazy speed-up", "eager speed-up", "bound ms", "lazy / bound"]  # fmt: skip
        parts.append(
            f"**{_procs(procs)}** (numpy and numexpr on one core); triad bandwidth "
            f"{bw / 1e9:.2f} GB/s on {procs} core(s), {bw1 / 1e9:.2f} on one; the first lazy "
            f"stencil step {first:.2f} s (numba's import and compilation, or its on-disk "
            f"cache), a later one {later:.3f} s:\n\n" + table(head, rows, "l" + "r" * 9)
        )
    load = doc["load_average"]
    return (
        f"Load average {load['before']} before, {load['after']} after.\n\n"
        + "\n\n".join(parts)
        + quick_note(doc)
    )


def _where(doc: dict) -> str:
    """The machine a run names (``--machine``), or "" for the development machine."""
    return (doc.get("options") or {}).get("where") or ""


SCALING_NAMES = {
    "elementwise": "element-wise",
    "sum": "sum",
    "redistribute": "redistribute",
    "fft": "FFT",
    "laplace": "Laplace",
}


def _procs(n: str) -> str:
    return "1 process" if n == "1" else f"{n} processes"


def _scaling_size(r: dict) -> str:
    return " × ".join(f"{n:,}".replace(",", " ") for n in r["shape"])


def render_scaling(doc: dict) -> str:
    runs = by_count(doc)
    counts = list(runs)
    first = runs[counts[0]]
    m = doc["machine"]
    what = doc["options"].get("what", {})
    out = [
        f"Measured on the {_where(doc) or 'development machine'}: {m['cores']} cores "
        f"({m.get('cpu') or 'unknown CPU'}), {m.get('memory_gib')} GiB, {m.get('mpi') or 'no MPI'}; "
        f"{doc['date'][:10]}; best of {doc['options']['repeat']} per figure.\n"
    ]
    same = all(r["err"] <= 1e-10 for run in runs.values() for mode in ("strong", "weak")
               for r in run[mode].values())  # fmt: skip
    ops = [[SCALING_NAMES.get(n, n), what.get(n, n)] for n in first["strong"]]
    out.append(table(["operation", "what"], ops, "ll"))
    # strong scaling: seconds, then speed-ups
    rows = []
    for name, r1 in first["strong"].items():
        rows.append(
            [
                SCALING_NAMES.get(name, name),
                _scaling_size(r1),
                num(r1["numpy"]),
                *(num(runs[n]["strong"][name]["d2o"]) for n in counts),
            ]
        )
    head = ["operation", "global size", "numpy s", *(f"d2o {_procs(n)} s" for n in counts)]
    out.append("**Strong scaling** (the global size fixed), seconds:\n")
    out.append(table(head, rows, "ll" + "r" * (1 + len(counts))))
    rows = []
    for name, r1 in first["strong"].items():
        cells = [SCALING_NAMES.get(name, name)]
        for n in counts:
            r = runs[n]["strong"][name]
            cells.append(f"{times(r1['d2o'] / r['d2o'])} ({times(r['numpy'] / r['d2o'])})")
        rows.append(cells)
    out.append(
        "Speed-up over d2o on 1 process (in brackets: over numpy, measured in the same run):\n"
    )
    out.append(table(["operation", *(_procs(n) for n in counts)], rows))
    # weak scaling: seconds, then efficiency against the machine's ceiling
    rows = []
    for name, r1 in first["weak"].items():
        rows.append(
            [
                SCALING_NAMES.get(name, name),
                _scaling_size(r1),
                *(num(runs[n]["weak"][name]["d2o"]) for n in counts),
            ]
        )
    head = ["operation", "size per process", *(f"d2o {_procs(n)} s" for n in counts)]
    out.append("**Weak scaling** (the size per process fixed), seconds:\n")
    out.append(table(head, rows, "ll" + "r" * len(counts)))
    rows = []
    for name, r1 in first["weak"].items():
        cells = [SCALING_NAMES.get(name, name)]
        for n in counts[1:]:
            r = runs[n]["weak"][name]
            cells.append(
                f"{pct(r1['d2o'] / r['d2o'] * 100)} / {pct(r['ceiling'] * 100)} "
                f"({times(r['numpy'] / r['d2o'])})"
            )
        rows.append(cells)
    out.append(
        "Efficiency (d2o's time on 1 process over its time on P) / the machine's ceiling "
        "(numpy's efficiency when every process runs its share at once); in brackets: the "
        "speed-up over numpy on the whole problem, measured in the same run:\n"
    )
    out.append(table(["operation", *(_procs(n) for n in counts[1:])], rows))
    out.append(
        f"Every result compared with numpy's before the timing: "
        f"{'the same (to 1e-10) in every run' if same else '**some DIFFER**'}.\n"
    )
    return "\n".join(out) + quick_note(doc)


RENDERERS: dict[str, Callable[[dict], str]] = {
    "programs": render_programs,
    "core": render_core,
    "kernels": render_kernels,
    "sort": render_sort,
    "controller": render_controller,
    "communication": render_communication,
    "costmodel": render_costmodel,
    "wire": render_wire,
    "indexing": render_indexing,
    "redistribution": render_redistribution,
    "fft": render_fft,
    "wiener": render_wiener,
    "layouts": render_layouts,
    "io": render_io,
    "safety": render_safety,
    "rma": render_rma,
    "linalg_sym": render_linalg_sym,
    "modes": render_modes,
    "random": render_random,
    "linalg": render_linalg,
    "fusion": render_fusion,
    "scaling": render_scaling,
}


def render_machine(docs: dict[str, dict]) -> str:
    """Where and when: the machine's facts, and one row per output file."""
    lines = []
    # a run elsewhere names its machine (the options' "where"); the others ran on the
    # development machine, whose dates are given over all of them
    home = [d for d in docs.values() if not _where(d)]
    groups: dict[tuple, list[dict]] = {}
    for d in docs.values():
        groups.setdefault((_where(d), json.dumps(d["machine"], sort_keys=True)), []).append(d)
    for (where, fact), group in sorted(groups.items(), key=lambda kv: (kv[0][0] != "", kv[0])):
        m = json.loads(fact)
        sw = ", ".join(
            f"{k} {m[k]}"
            for k in ("python", "numpy", "mpi4py", "scipy", "h5py", "zarr")
            if m.get(k)
        )
        dates = sorted(d["date"] for d in (group if where else home))
        when = (
            f"on **{dates[0][:10]}**"
            if dates[0][:10] == dates[-1][:10]
            else f"from **{dates[0][:10]}** to **{dates[-1][:10]}**"
        )
        names = ", ".join(f"`{d['record']}.json`" for d in group)
        lines.append(
            f"Measured on {'the ' + where if where else 'the project' + chr(39) + 's development machine'}"
            f"{f' ({names})' if where else ''}: **{m['cores']} cores** "
            f"({m.get('cpu') or 'unknown CPU'}), {m.get('memory_gib')} GiB, {m['system']}; "
            f"{sw}; {m.get('mpi') or 'no MPI'}; BLAS threads "
            f"{m['threads'].get('OPENBLAS_NUM_THREADS') or 'unset'}; {when}."
        )
    rows = []
    for name, d in docs.items():
        load = d.get("load_average", {})
        rows.append(
            [
                f"`{d['benchmark']}`",
                f"`{name}.json`",
                d["date"].replace("T", " ").replace("+00:00", " UTC"),
                ", ".join(map(str, d["processes"])),
                "**reduced** (`" + d["command"] + "`)" if d.get("quick") else "full",
                f"{load.get('before', 'n/a')} → {load.get('after', 'n/a')}",
                f"`{d.get('commit') or 'n/a'}`",
            ]
        )
    head = ["benchmark", "output file", "date", "processes", "run", "load average", "commit"]
    lines.append("")
    lines.append(table(head, rows, "lllllrl"))
    return "\n".join(lines)


# -- the plots -------------------------------------------------------------------------------


def _title(doc: dict, what: str) -> str:
    m = doc["machine"]
    return f"{what} ({doc['benchmark']}; {m['cores']} cores, {doc['date'][:10]})"


def _speedup_panel(ax, labels, speedups, ceilings, goal=None, log=False) -> None:
    import numpy as np

    x = np.arange(len(labels))
    ax.bar(x - 0.2, speedups, width=0.4, label="d2o on 2 processes / numpy")
    ax.bar(x + 0.2, ceilings, width=0.4, label="ceiling (numpy on both cores at once)", alpha=0.6)
    ax.axhline(1.0, color="black", lw=0.8)
    if goal is not None:
        ax.axhline(goal, color="tab:red", lw=0.8, ls="--", label=f"goal {goal}×")
    ax.set_xticks(x, labels, fontsize=8, rotation=15)
    ax.set_ylabel("speed-up over numpy (higher is better)")
    if log:
        ax.set_yscale("log")
    ax.legend(fontsize=7)
    ax.grid(axis="y", alpha=0.3)


def _seconds_panel(ax, labels, series: dict, log=False) -> None:
    import numpy as np

    x = np.arange(len(labels))
    w = 0.8 / len(series)
    colors = ["#9ecae1", "tab:orange", "tab:blue", "tab:green"]  # numpy light, d2o, numpy, d2o
    for k, (label, values) in enumerate(series.items()):
        pos = x + (k - (len(series) - 1) / 2) * w
        ax.bar(pos, values, width=w, label=label, color=colors[k % len(colors)])
    ax.set_xticks(x, labels, fontsize=8, rotation=15)
    ax.set_ylabel("seconds (lower is better)")
    if log:
        ax.set_yscale("log")
    ax.legend(fontsize=7)
    ax.grid(axis="y", alpha=0.3)


def _two_panels(
    path: Path, doc, what, labels, series, speedups, ceilings, goal=None, log=False
) -> None:
    """Seconds per variant (numpy and d2o of each run side by side) and the 2-process
    speed-up beside the machine's ceiling; ``log``: logarithmic axes (figures of
    different magnitudes)."""
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 3.9))
    _seconds_panel(a, labels, series, log)
    _speedup_panel(b, labels, speedups, ceilings, goal, log)
    fig.suptitle(_title(doc, what), fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_programs(doc: dict, path: Path) -> None:
    one, two = by_count(doc)["1"], by_count(doc)["2"]
    labels = [PROGRAM_NAMES.get(n, n) for n in one]
    series = {
        "numpy (1-process run)": [one[n]["numpy"] for n in one],
        "d2o.numpy, 1 process": [one[n]["d2o"] for n in one],
        "numpy (2-process run)": [two[n]["numpy"] for n in one],
        "d2o.numpy, 2 processes": [two[n]["d2o"] for n in one],
    }
    speedups = [two[n]["numpy"] / two[n]["d2o"] for n in one]
    ceilings = [two[n]["ceiling"] for n in one]
    goal = doc["options"]["goals"]["2p"]
    _two_panels(path, doc, "Seed programs against numpy", labels, series, speedups, ceilings, goal)


def plot_kernels(doc: dict, path: Path) -> None:
    one, two = by_count(doc)["1"], by_count(doc)["2"]
    labels, n1, d1, n2, d2, speedups, ceilings = [], [], [], [], [], [], []
    for name in two:
        for label, v in two[name]["variants"].items():
            labels.append(f"{name}, {label}")
            n1.append(one[name]["numpy"])
            d1.append(one[name]["variants"][label]["d2o"])
            n2.append(two[name]["numpy"])
            d2.append(v["d2o"])
            speedups.append(two[name]["numpy"] / v["d2o"])
            ceilings.append(two[name]["ceiling"])
    series = {
        "numpy (1-process run)": n1,
        "d2o, 1 process": d1,
        "numpy (2-process run)": n2,
        "d2o, 2 processes": d2,
    }
    _two_panels(path, doc, "Scaling kernels against numpy", labels, series, speedups, ceilings)


def plot_sort(doc: dict, path: Path) -> None:
    one, two = by_count(doc)["1"], by_count(doc)["2"]
    labels, n1, d1, n2, d2, speedups, ceilings = [], [], [], [], [], [], []
    for dtype in two:
        for name, r2 in two[dtype].items():
            labels.append(f"{dtype} {name}")
            n1.append(one[dtype][name]["numpy"])
            d1.append(one[dtype][name]["d2o"])
            n2.append(r2["numpy"])
            d2.append(r2["d2o"])
            speedups.append(r2["numpy"] / r2["d2o"])
            ceilings.append(r2["ceiling"])
    series = {
        "numpy (1-process run)": n1,
        "d2o.numpy, 1 process": d1,
        "numpy (2-process run)": n2,
        "d2o.numpy, 2 processes": d2,
    }
    _two_panels(path, doc, "Sorting against numpy", labels, series, speedups, ceilings, log=True)


def _styles() -> list[tuple]:
    """(colour, line style) pairs telling up to 20 lines apart."""
    import matplotlib.pyplot as plt

    return [(c, ls) for ls in ("-", "--") for c in plt.get_cmap("tab10").colors]


def plot_core(doc: dict, path: Path) -> None:
    import matplotlib.pyplot as plt

    runs = by_count(doc)
    fig, axes = plt.subplots(1, len(runs), figsize=(5.4 * len(runs), 3.9), sharey=True)
    axes = list(axes) if len(runs) > 1 else [axes]
    for ax, (n, r) in zip(axes, runs.items()):
        sizes = r["sizes_log2"]
        for (name, vals), (color, ls) in zip(r["percent"].items(), _styles()):
            pts = [(k, v) for k, v in zip(sizes, vals) if v]
            xs, ys = [k for k, _ in pts], [v for _, v in pts]
            ax.plot(xs, ys, marker="o", ms=3, color=color, ls=ls, label=name)
        ax.axhline(100, color="black", lw=0.8, ls="--")
        ax.set_yscale("log")
        ax.set_xticks(sizes, [f"$2^{{{k}}}$" for k in sizes], fontsize=7)
        ax.set_xlabel("array size (elements)")
        where = "1 process" if n == "1" else f"{n} processes (strong scaling)"
        ax.set_title(f"{where}: d2o against numpy on 1 process", fontsize=9)
        ax.grid(alpha=0.3, which="both")
    axes[0].set_ylabel("d2o's speed, % of numpy's")
    axes[-1].legend(fontsize=7, loc="upper left", ncol=2)
    fig.suptitle(_title(doc, "The paper's Table 3 rows"), fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_communication(doc: dict, path: Path) -> None:
    import matplotlib.pyplot as plt

    (_, r), *_ = by_count(doc).items()
    targets = r["targets"]
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    drawn = [op for op in r["operations"] if max(op["estimate_s"].values()) > 0]
    for op, (color, ls) in zip(drawn, _styles()):
        est = [op["estimate_s"][str(p)] for p in targets]
        ax.plot(targets, est, marker="o", ms=3, color=color, ls=ls, label=op["name"].split(" (")[0])
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("processes P (weak scaling)")
    ax.set_ylabel("modelled seconds per call")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=6, ncol=2)
    ax.set_title(_title(doc, "Cost model: T(P) = steps(P)·α + bytes(P)/β"), fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_scaling(doc: dict, path: Path) -> None:
    """Strong scaling's speed-up over numpy against the processes (the ideal line beside),
    and weak scaling's efficiency beside the machine's ceiling."""
    import matplotlib.pyplot as plt

    runs = by_count(doc)
    counts = [int(n) for n in runs]
    first = runs[str(counts[0])]
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.2))
    a.plot(counts, counts, color="black", lw=0.8, ls=":", label="ideal")
    for name, (color, _) in zip(first["strong"], _styles()):
        ys = [runs[str(n)]["strong"][name] for n in counts]
        a.plot(counts, [r["numpy"] / r["d2o"] for r in ys], marker="o", ms=4, color=color,
               label=SCALING_NAMES.get(name, name))  # fmt: skip
    a.set_xscale("log", base=2)
    a.set_yscale("log", base=2)
    a.set_xticks(counts, [str(n) for n in counts])
    a.set_yticks(counts, [str(n) for n in counts])
    a.set_xlabel("processes")
    a.set_ylabel("speed-up over numpy on 1 core")
    a.set_title("strong scaling (global size fixed)", fontsize=9)
    a.grid(alpha=0.3, which="both")
    a.legend(fontsize=7)
    for name, (color, _) in zip(first["weak"], _styles()):
        t1 = first["weak"][name]["d2o"]
        ys = [runs[str(n)]["weak"][name] for n in counts]
        b.plot(counts, [t1 / r["d2o"] * 100 for r in ys], marker="o", ms=4, color=color,
               label=SCALING_NAMES.get(name, name))  # fmt: skip
        b.plot(counts, [r.get("ceiling", 1.0) * 100 for r in ys], color=color, ls="--", lw=0.8)
    b.plot([], [], color="grey", ls="--", lw=0.8, label="ceiling (numpy on every core at once)")
    b.axhline(100, color="black", lw=0.8, ls=":")
    b.set_xscale("log", base=2)
    b.set_xticks(counts, [str(n) for n in counts])
    b.set_ylim(0, 110)
    b.set_xlabel("processes")
    b.set_ylabel("efficiency, % (d2o 1 process / d2o P)")
    b.set_title("weak scaling (size per process fixed)", fontsize=9)
    b.grid(alpha=0.3)
    b.legend(fontsize=7)
    fig.suptitle(_title(doc, "d2o on 1 to 16 processes"), fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


PLOTS: dict[str, Callable[[dict, Path], None]] = {
    "programs": plot_programs,
    "core": plot_core,
    "kernels": plot_kernels,
    "sort": plot_sort,
    "communication": plot_communication,
    "scaling": plot_scaling,
}


# -- the whole page --------------------------------------------------------------------------


def build(outdir: Path | None, page: Path = PAGE, data: Path = DATA, plots: bool = True) -> None:
    """Check the page and its data files, then (``outdir`` given) write the generated files
    it references; raises PageError naming every violation."""
    text = page.read_text()
    errors = check_page(text, str(page.relative_to(ROOT) if page.is_relative_to(ROOT) else page))
    refs = page_references(text)
    docs: dict[str, dict] = {}
    for name, kind in refs:
        if name == "machine":
            continue
        known = RENDERERS if kind == "md" else PLOTS
        if name not in known:
            errors.append(
                f"the page references _generated/{SUB}/{name}.{kind}, which nothing makes"
            )
            continue
        if name not in docs:
            try:
                docs[name] = load(name, data)
            except PageError as exc:
                errors.append(str(exc))
    shown = {name for name, _ in refs}
    for path in sorted(data.glob("*.json")):
        if path.stem not in shown:
            errors.append(
                f"{path.name} is in {data.name}/ but the page does not show it: show it "
                "(_generated/" + SUB + f"/{path.stem}.md) or delete it"
            )
    if errors:
        raise PageError("\n".join(dict.fromkeys(errors)))
    if outdir is None:
        return
    out = outdir / SUB
    out.mkdir(parents=True, exist_ok=True)
    for name, kind in dict.fromkeys(refs):
        target = out / f"{name}.{kind}"
        if name == "machine":
            target.write_text(render_machine(docs))
        elif kind == "md":
            target.write_text(RENDERERS[name](docs[name]))
        elif plots:
            PLOTS[name](docs[name], target)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("outdir", nargs="?", default=str(ROOT / "docs" / "_generated"))
    p.add_argument("--check", action="store_true", help="check the page and its data only")
    args = p.parse_args(argv)
    if not args.check:
        import matplotlib

        matplotlib.use("Agg")
    try:
        build(None if args.check else Path(args.outdir))
    except PageError as exc:
        print(f"docs/performance.md:\n{exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
