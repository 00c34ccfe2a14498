"""The README as a landing page, and the performance page's rule: every figure on it comes
from a benchmark output file (docs/_scripts/performance.py, run by ``make docs``).

Files only: no d2o call, no MPI; the same on every rank.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
README_LIMIT = 12_000  # bytes: what d2o is, install, the two commands, one example, links


def _performance():
    spec = importlib.util.spec_from_file_location(
        "docs_performance", ROOT / "docs" / "_scripts" / "performance.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


perf = _performance()


def test_readme_is_short():
    size = README.stat().st_size
    assert size < README_LIMIT, f"README.md is {size} bytes; keep it under {README_LIMIT}"


def test_readme_links_exist():
    text = README.read_text()
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    local = [link for link in links if "://" not in link]
    assert local, "the README links to the documentation pages"
    missing = [link for link in local if not (ROOT / link).exists()]
    assert not missing, f"README.md links to missing files: {missing}"
    for page in ("getting-started", "concepts", "from-numpy", "performance", "internals",
                 "paper-api", "development"):  # fmt: skip
        assert f"docs/{page}.md" in local, f"README.md does not link to docs/{page}.md"


def test_no_page_includes_the_readme():
    for page in (ROOT / "docs").glob("*.md"):
        assert "../README.md" not in page.read_text(), f"{page.name} includes the README"


def test_performance_page_and_data_pass_the_check(tmp_path):
    """The committed page and docs/_data/bench/ keep the rule; the tables are generated."""
    perf.build(tmp_path, plots=False)
    refs = perf.page_references(perf.PAGE.read_text())
    tables = [name for name, kind in refs if kind == "md"]
    assert "machine" in tables and "programs" in tables and "core" in tables
    for name in tables:
        text = (tmp_path / perf.SUB / f"{name}.md").read_text()
        assert re.search(r"\d", text), f"{name}.md has no figure"
    # the figures are the data file's: numpy's time of the first program, as rendered
    doc = perf.load("programs")
    first = next(iter(doc["results"]["1"].values()))
    assert perf.num(first["numpy"]) in (tmp_path / perf.SUB / "programs.md").read_text()


@pytest.mark.parametrize(
    "line",
    [
        "| op | 2^0 |\n|---|---:|\n| sum | 84 |",  # a table of numbers typed by hand
        "The sort took 0.25 s on one process.",
        "Per call, 3 µs more than numpy.",
        "It reaches 1.73× numpy's speed.",
        "It reaches 1.7x numpy's speed.",
        "Efficiency: 87 %.",
        "Throughput 5.9 GB/s.",
        '```{include} ../README.md\n:start-after: "## Performance\\n"\n```',
        "```{include} _data/safety.md\n```",
        "![old plot](_generated/table3.png)",
    ],
)
def test_check_rejects_hand_typed_figures(line):
    assert perf.check_page(f"# Performance\n\nSome prose.\n\n{line}\n")


def test_check_accepts_prose_commands_and_generated_files():
    text = """# Performance

On 2 processes, 256 x 512 float64 per rank, sizes up to 2^22; `mpiexec -n 2` and
`--size-mib 64` are commands, and so is this block:

```bash
python benchmarks/bench_io.py --size-mib 64   # 1.5 s, 30 %
```

```{include} _generated/perf/programs.md
```

![the programs](_generated/perf/programs.png)
"""
    assert perf.check_page(text) == []


def _data_dir(tmp_path: Path, **changes) -> Path:
    """A copy of docs/_data/bench/ with programs.json changed as given."""
    data = tmp_path / "bench"
    shutil.copytree(perf.DATA, data)
    path = data / "programs.json"
    doc = json.loads(path.read_text())
    doc.update(changes)
    path.write_text(json.dumps(doc))
    return data


def test_load_checks_where_a_file_comes_from(tmp_path):
    assert perf.load("programs")["benchmark"] == "benchmarks/bench_programs.py"
    with pytest.raises(perf.PageError, match="missing"):
        perf.load("nonexistent", tmp_path)
    cases = {
        "no benchmark script": {"benchmark": "benchmarks/bench_nothing.py"},
        "declares RECORD": {"benchmark": "benchmarks/bench_sort.py"},  # RECORD = "sort"
        "not 'programs'": {"record": "sort"},
    }
    for message, changes in cases.items():
        with pytest.raises(perf.PageError, match=message):
            perf.load("programs", _data_dir(tmp_path / message.replace(" ", "_"), **changes))


def test_every_data_file_is_shown(tmp_path):
    data = _data_dir(tmp_path)
    (data / "stray.json").write_text("{}")
    with pytest.raises(perf.PageError, match="does not show it"):
        perf.build(None, data=data)


def test_every_benchmark_declares_its_output_file():
    for script in sorted((ROOT / "benchmarks").glob("bench_*.py")):
        name = script.stem.removeprefix("bench_")
        assert perf.declared_record(script) == name, f"{script.name}: RECORD = {name!r}"
        assert (perf.DATA / f"{name}.json").is_file(), f"docs/_data/bench/{name}.json"
