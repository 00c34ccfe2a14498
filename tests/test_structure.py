"""The package's structure rules (docs/internals.md), checked on the source text.

- No function-level import of d2o's own modules, except the few lazy ones listed in
  `LAZY` with their reason (``import d2o`` must stay fast: the numpy namespace and the
  controller load on first use).
- Nothing of d2o is ``setattr``'d onto a module or class at run time, except the places in
  `PATCHES`: the registry's class decorator (at definition).
- No module of d2o/ over 800 lines.

The layers themselves (imports only downwards, no cycle) are import-linter's contracts in
pyproject.toml, run by ``make lint``; `test_layers_contract` runs them too where
import-linter is installed.  These tests read files only: they run without MPI alone
(under mpiexec they would read the same files again).
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import textwrap
from pathlib import Path

import pytest

import d2o
from d2o.core.comm import SERIAL, default_comm

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "d2o"

#: (module path, imported module) -> why the import waits until the function runs
LAZY = {
    ("d2o/api/array.py", "d2o.numpy"): "__array_namespace__: import d2o stays without d2o.numpy",
    ("d2o/api/dispatch.py", "d2o.numpy"): "numpy functions not in HANDLED: d2o.numpy on first use",
    ("d2o/api/ndarray.py", "d2o.numpy.table"): "ndarray methods through d2o.numpy's table",
    ("d2o/runtime/controller.py", "d2o.numpy"): "controller mode: every rank knows d2o.numpy",
}
#: module path -> why it still sets attributes onto modules or classes at run time
PATCHES = {
    "d2o/core/registry.py": "at class definition only: `operations` puts the trampolines of "
    "the methods into the class body it decorates",
}
MAX_LINES = 800

pytestmark = pytest.mark.skipif(default_comm() is not SERIAL, reason="without MPI only")


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _absolute(path: Path, node: ast.ImportFrom | ast.Import) -> list[str]:
    """The d2o modules an import statement names."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.split(".")[0] == "d2o"]
    if not node.level:
        return [node.module] if (node.module or "").split(".")[0] == "d2o" else []
    base = _name(path).split(".")
    if path.name != "__init__.py":
        base = base[:-1]
    base = base[: len(base) - node.level + 1]
    return [".".join(base + ([node.module] if node.module else []))]


def _type_checking(node: ast.If) -> bool:
    return isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"


def _function_imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import of a d2o module inside a function (not under
    ``if TYPE_CHECKING``)."""
    found = []
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(fn):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                found += [(node.lineno, m) for m in _absolute(path, node)]
    return found


def test_no_function_level_imports_of_d2o_modules():
    bad, used = [], set()
    for path in _modules():
        rel = str(path.relative_to(ROOT))
        for line, mod in _function_imports(path):
            if (rel, mod) in LAZY:
                used.add((rel, mod))
            else:
                bad.append(f"{rel}:{line} imports {mod} inside a function")
    assert not bad, "import d2o's modules at the top of the module:\n" + "\n".join(bad)
    assert used == set(LAZY), f"stale LAZY entries: {set(LAZY) - used}"


def _patches(path: Path) -> list[str]:
    """Lines that set attributes onto modules or classes: ``setattr(...)`` calls and
    assignments to an attribute of an imported module or of a class of the module."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    modules = set()  # names bound to d2o's own modules
    for n in ast.walk(tree):
        if isinstance(n, ast.Import):
            modules |= {a.asname or a.name for a in n.names if a.name.split(".")[0] == "d2o"}
        elif isinstance(n, ast.ImportFrom):
            for base in _absolute(path, n):
                for a in n.names:
                    dotted = f"{base}.{a.name}".split(".")
                    if (ROOT.joinpath(*dotted).with_suffix(".py")).exists() or (
                        ROOT.joinpath(*dotted) / "__init__.py"
                    ).exists():
                        modules.add(a.asname or a.name)
    classes = {n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
    out = []
    for n in ast.walk(tree):
        if (
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Name)
            and n.func.id == "setattr"
            and not (n.args and isinstance(n.args[0], ast.Name) and n.args[0].id == "self")
        ):
            out.append(f"{n.lineno}: setattr")
        targets = n.targets if isinstance(n, ast.Assign) else []
        for t in targets:
            if (
                isinstance(t, ast.Attribute)
                and isinstance(t.value, ast.Name)
                and (t.value.id in modules or t.value.id in classes)
                and isinstance(n.value, (ast.Lambda, ast.Name, ast.Call))
            ):
                out.append(f"{n.lineno}: {t.value.id}.{t.attr} = ...")
    return out


def _scan(finder, allowed: dict, what: str) -> None:
    """Every module's findings (``finder(path)``) are in ``allowed``, and every entry of
    ``allowed`` still finds something."""
    bad, used = [], set()
    for path in _modules():
        rel = str(path.relative_to(ROOT))
        found = finder(path)
        if found and rel in allowed:
            used.add(rel)
        elif found:
            bad += [f"{rel}:{line}" for line in found]
    assert not bad, f"{what}:\n" + "\n".join(bad)
    assert used == set(allowed), f"stale entries: {set(allowed) - used}"


def test_nothing_is_patched_onto_modules_or_classes():
    _scan(_patches, PATCHES, "attributes set onto modules or classes at run time")


def test_checks_find_what_they_look_for(tmp_path):
    """The two scans above flag a function-level import and a patched method."""
    src = tmp_path / "d2o" / "ops" / "x.py"
    src.parent.mkdir(parents=True)
    src.write_text(
        "import d2o.core.hooks as hooks\n"
        "from ..core import y\n\n\n"
        "def f():\n    from ..core import comm\n    hooks.fire = f\n    setattr(y, 'g', f)\n"
    )
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        assert [m for _, m in _function_imports(src)] == ["d2o.core"]
        assert len(_patches(src)) == 2
    finally:
        ROOT = saved


def test_no_module_over_800_lines():
    long = {
        str(p.relative_to(ROOT)): n
        for p in _modules()
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert not long, f"split these modules along their seams: {long}"


@pytest.mark.skipif(importlib.util.find_spec("importlinter") is None, reason="import-linter")
def test_layers_contract():
    """import-linter's contracts of pyproject.toml: layers import downwards, no cycle."""
    from importlinter.cli import lint_imports

    assert lint_imports(config_filename=str(ROOT / "pyproject.toml")) == 0


def test_operations_page_is_current():
    """docs/operations.md is what tools/operations_table.py generates from the registry."""
    spec = importlib.util.spec_from_file_location(
        "operations_table", ROOT / "tools" / "operations_table.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.OUT.read_text() == mod.render(), "run python tools/operations_table.py"


#: module path -> why it still uses private names of other d2o modules (none left)
PRIVATE_IMPORTS: dict[str, str] = {}


def _private_imports(path: Path) -> list[str]:
    """``from d2o.x import _name`` and ``module._name`` of an imported d2o module (private
    modules of a package, like ``io._common``, are its own business)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    mods, out = set(), []
    for n in ast.walk(tree):
        if isinstance(n, ast.ImportFrom) and _absolute(path, n):
            for a in n.names:
                mods.add(a.asname or a.name)
                if a.name.startswith("_") and not a.name.startswith("__"):
                    dotted = f"{_absolute(path, n)[0]}.{a.name}".split(".")
                    if not (ROOT.joinpath(*dotted).with_suffix(".py")).exists():
                        out.append(f"{n.lineno}: from {n.module} import {a.name}")
        elif isinstance(n, ast.Import):
            mods |= {a.asname or a.name for a in n.names if a.name.split(".")[0] == "d2o"}
    for n in ast.walk(tree):
        if (
            isinstance(n, ast.Attribute)
            and isinstance(n.value, ast.Name)
            and n.value.id in mods
            and n.attr.startswith("_")
            and not n.attr.startswith("__")
        ):
            out.append(f"{n.lineno}: {n.value.id}.{n.attr}")
    return out


def test_no_module_uses_private_names_of_another():
    _scan(_private_imports, PRIVATE_IMPORTS, "private names of other modules used")


def _passes_on(fn, calls) -> str | None:
    """None when the body of ``fn`` (after its docstring) is exactly
    ``return calls[0](first, *calls[1:], <fn's other parameters as they came>)``."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    node = tree.body[0]
    body = node.body[1:] if ast.get_docstring(node) is not None else node.body
    if len(body) != 1 or not isinstance(body[0], (ast.Return, ast.Expr)):
        return "the body is not one call"
    call = body[0].value
    if not isinstance(call, ast.Call):
        return "the body is not one call"
    target = eval(compile(ast.Expression(call.func), "<calls>", "eval"), fn.__globals__)  # noqa: S307
    if target is not calls[0]:
        return f"calls {ast.unparse(call.func)}, not {calls[0].__qualname__}"
    a = node.args
    pos = [p.arg for p in a.posonlyargs + a.args]
    want = [pos[0], *map(repr, calls[1:]), *pos[1:]] + ([f"*{a.vararg.arg}"] if a.vararg else [])
    want_kw = [f"{k.arg}={k.arg}" for k in a.kwonlyargs]
    want_kw += [f"**{a.kwarg.arg}"] if a.kwarg else []
    got = [ast.unparse(x) for x in call.args]
    got_kw = [f"**{ast.unparse(k.value)}" if k.arg is None else f"{k.arg}={ast.unparse(k.value)}"
              for k in call.keywords]  # fmt: skip
    if got != want or got_kw != want_kw:
        return f"passes ({got}, {got_kw}), not ({want}, {want_kw})"
    return None


def test_methods_that_pass_their_arguments_on_do_exactly_that():
    """A method marked ``calls=`` (`d2o.core.registry.marked`) has a trampoline that calls the
    target directly: its body must be that very call, or the two paths would differ."""
    found = {}
    for cls in type.mro(d2o.distributed_data_object):
        for attr, val in vars(cls).items():
            calls = getattr(val, "__d2o_calls__", None)
            if calls is not None:
                found[attr] = _passes_on(val.__wrapped__, calls)
    assert len(found) >= 12, sorted(found)
    bad = {k: v for k, v in found.items() if v is not None}
    assert not bad, bad
