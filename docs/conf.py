"""Sphinx configuration of d2o's documentation site; build it with ``make docs``.

The build never needs MPI: d2o runs on its serial stand-in (``D2O_MPI=0``), the
pictures are drawn by ``docs/_scripts/figures.py`` into ``docs/_generated/`` (not
committed), the performance page's tables and plots are rendered there by
``docs/_scripts/performance.py`` from the benchmarks' output files in
``docs/_data/bench/`` (written by ``make bench``; the script fails the build when a file
is missing or does not come from a benchmark, or when the page holds a figure typed by
hand), and the paper listings' outputs are read from ``docs/_listings/`` (recorded under
``mpiexec`` by ``docs/_scripts/listings.py``, checked by ``make test``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
os.environ.setdefault("D2O_MPI", "0")
sys.path.insert(0, str(ROOT))

import d2o  # noqa: E402

project = "d2o"
author = "the d2o developers"
copyright = "the d2o developers"
version = release = d2o.__version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "numpydoc",
]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build", "_scripts", "_data", "_generated", "_listings"]
root_doc = "index"

# Markdown pages (MyST): README-style anchors for headings, ::: fences for directives.
myst_enable_extensions = ["colon_fence"]
myst_heading_anchors = 3

# Single backticks in docstrings name Python objects (they link where documented).
default_role = "py:obj"
autodoc_default_options = {"member-order": "groupwise"}
autodoc_typehints = "none"  # numpydoc's Parameters sections give the types
autosummary_generate = False
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

# Every reference must resolve (warnings are errors), except those to the internal layers
# (named in docstrings for developers: docs/internals.md) and to numpy's own objects (no
# network at build time, so no intersphinx).
nitpicky = True
nitpick_ignore_regex = [
    ("py:.*", r"d2o\._.*"),
    ("py:.*", r"d2o\.(core|layouts|move|array|ops|api|runtime)(\..*)?"),
    (
        "py:.*",
        r"d2o\.numpy\.(table|composed|factories|elementwise|shapes|axes|reductions"
        r"|products|misc|indexing|sorting)(\..*)?",
    ),
    ("py:.*", r"(numpy\.)?(random\.)?SeedSequence(\..*)?"),
    ("py:.*", r"aligned_chunks"),
]

html_theme = "alabaster"
html_title = f"d2o {release}"
html_static_path: list[str] = []
html_theme_options = {
    "description": "numpy arrays distributed over MPI processes",
    "fixed_sidebar": True,
    "sidebar_collapse": True,
    "page_width": "1240px",
    "sidebar_width": "230px",
    "body_max_width": "none",
}
html_sidebars = {"**": ["about.html", "navigation.html", "searchbox.html"]}

#: Modules whose public names (``__all__``) must each have a reference entry.
REFERENCED_MODULES = ["d2o", "d2o.fft", "d2o.io", "d2o.testing"]


#: References that docstrings write by another name than the documented one.
ALIASES = {f"d2o.{n}": f"d2o.io.{n}" for n in d2o.io.__all__}
ALIASES["Record"] = "d2o.core.trace.Record"


def _resolve_alias(app, env, node, contnode):
    """Resolve ``d2o.save`` (documented as ``d2o.io.save``) and the like."""
    target = ALIASES.get(node.get("reftarget", ""))
    if node.get("refdomain") != "py" or target is None:
        return None
    py = env.get_domain("py")
    return py.resolve_xref(
        env, node["refdoc"], app.builder, node["reftype"], target, node, contnode
    )


def _generate(app) -> None:
    """Draw the pictures from d2o's own layout code, the performance page's tables and plots
    from the benchmarks' output files (a failed check there fails the build), and the
    scaling model's predictions from its recorded traces."""
    out = DOCS / "_generated"
    env = dict(os.environ, D2O_MPI="0", MPLBACKEND="Agg")
    for script in ("figures.py", "performance.py"):
        subprocess.run(
            [sys.executable, str(DOCS / "_scripts" / script), str(out)], check=True, env=env
        )
    # the scaling model's tables and plots, from docs/_data/scaling_model.json
    subprocess.run(
        [sys.executable, str(ROOT / "tools" / "scaling_model.py"), "render", str(out / "scaling")],
        check=True,
        env=env,
    )


def _check_reference(app, env) -> None:
    """Warn (an error under ``-W``) for a public name without a reference entry."""
    import importlib

    from sphinx.util import logging

    logger = logging.getLogger("d2o.docs")
    documented = set(env.get_domain("py").objects)
    for modname in REFERENCED_MODULES:
        mod = importlib.import_module(modname)
        for name in mod.__all__:
            obj = getattr(mod, name)
            full = f"{modname}.{name}"
            if full in documented:
                continue
            # a name re-exported from a documented module counts (d2o.save is d2o.io.save)
            if any(
                f"{other}.{name}" in documented
                and getattr(importlib.import_module(other), name, None) is obj
                for other in REFERENCED_MODULES
            ):
                continue
            logger.warning(f"public name {full} has no entry in the API reference (docs/api/)")


def setup(app) -> None:
    app.connect("builder-inited", _generate)
    app.connect("env-check-consistency", _check_reference)
    app.connect("missing-reference", _resolve_alias)
