"""The funnel: one table of d2o's public operations, and the wrappers put around them on demand.

Every public operation (a method of `distributed_data_object`, a function of
``d2o``, ``d2o.fft`` or ``d2o.io``) is registered here once, by the module
that defines it.  While a trace is active (`d2o._trace`), `activate` replaces
each registered operation, wherever d2o's modules expose it, by a wrapper
that opens a `Record` for the outermost call; `deactivate` puts the plain
functions back.  So the default path carries no per-call cost at all, and a
new operation only has to be registered to be traced.

A reference to an operation taken before a trace started (``f = d2o.fft.fftn``)
bypasses the wrapper: its MPI calls are still counted, under the record
"(outside a public operation)".
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any

from . import _trace

__all__ = ["register", "register_functions", "activate", "deactivate", "operations"]

# (owner, attribute, record name, namer) for every public operation; owner is a class or
# a module name (resolved when activating, so registering never imports anything).
_OPS: list[tuple] = []
# While active: (namespace, attribute, original) for every replacement made.
_PATCHED: list[tuple] = []


def register(owner: Any, attr: str, name: str | None = None, namer: Callable | None = None) -> None:
    """Declare ``owner.attr`` a public operation recorded as ``name`` (default: ``attr``).

    ``namer(args)`` may compute the name from the call's positional arguments
    (``__array_ufunc__`` is recorded as the ufunc's name).
    """
    _OPS.append((owner, attr, name or attr, namer))


def register_functions(module_name: str, names: list, prefix: str = "") -> None:
    """Declare the functions ``names`` of module ``module_name`` public operations."""
    for n in names:
        _OPS.append((module_name, n, prefix + n, None))


def operations() -> list[str]:
    """The names of all registered public operations."""
    return sorted({name for _, _, name, _ in _OPS})


def _wrap(fn: Callable, name: str, namer: Callable | None) -> Callable:
    current = _trace.current
    Record = _trace.Record

    @functools.wraps(fn)
    def traced(*args: Any, **kwargs: Any) -> Any:
        if current[0] is not None or not _trace.active:
            return fn(*args, **kwargs)  # an inner call, or no trace: no record
        rec = Record(name if namer is None else namer(args))
        for t in _trace.active:
            t.records.append(rec)
        current[0] = rec
        try:
            return fn(*args, **kwargs)
        finally:
            current[0] = None

    traced.__d2o_original__ = fn  # type: ignore[attr-defined]
    return traced


def _d2o_modules() -> list:
    return [m for k, m in list(sys.modules.items()) if (k == "d2o" or k.startswith("d2o.")) and m]


def activate() -> None:
    """Install the tracing wrappers (idempotent)."""
    if _PATCHED:
        return
    modules = _d2o_modules()
    for owner, attr, name, namer in _OPS:
        if isinstance(owner, str):
            mod = sys.modules.get(owner)
            if mod is None or not hasattr(mod, attr):
                continue
            orig = getattr(mod, attr)
            wrapped = _wrap(orig, name, namer)
            for m in modules:
                for key, val in list(vars(m).items()):
                    if val is orig:
                        _PATCHED.append((m, key, orig))
                        setattr(m, key, wrapped)
            continue
        orig = owner.__dict__.get(attr)
        if orig is None:
            continue
        if isinstance(orig, property):
            wrapped = property(_wrap(orig.fget, name, namer), orig.fset, orig.fdel, orig.__doc__)
        elif isinstance(orig, (classmethod, staticmethod)):
            continue
        else:
            wrapped = _wrap(orig, name, namer)
        _PATCHED.append((owner, attr, orig))
        setattr(owner, attr, wrapped)


def deactivate() -> None:
    """Remove the wrappers once no trace is active."""
    if _trace.active or not _PATCHED:
        return
    for owner, attr, orig in reversed(_PATCHED):
        setattr(owner, attr, orig)
    _PATCHED.clear()
