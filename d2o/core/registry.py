"""The table of d2o's public operations, read by the runtime's wrappers.

Every public operation (a method of `d2o.distributed_data_object`, a function of
``d2o``, ``d2o.fft``, ``d2o.io`` or ``d2o.numpy``) is declared here once, by the module
that defines or exports it: ``(owner, attribute, record name, namer)``, where the owner
is a class or a module name (resolved when the wrappers are installed, so declaring
imports nothing).  `d2o.runtime.funnel` wraps them while a trace, the checked mode, a
mesh layout or controller mode needs it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import hooks

__all__ = ["OPS", "register", "register_functions"]

#: (owner, attribute, record name, namer) for every public operation.
OPS: list[tuple] = []


def register(owner: Any, attr: str, name: str | None = None, namer: Callable | None = None) -> None:
    """Declare ``owner.attr`` a public operation recorded as ``name`` (default: ``attr``).

    ``namer(args)`` may compute the name from the call's positional arguments
    (``__array_ufunc__`` is recorded as the ufunc's name).
    """
    OPS.append((owner, attr, name or attr, namer))


def register_functions(module_name: str, names: list, prefix: str = "") -> None:
    """Declare the functions ``names`` of module ``module_name`` public operations (the
    runtime wraps them at once if its wrappers are installed: a module imported later)."""
    for n in names:
        OPS.append((module_name, n, prefix + n, None))
    hooks.fire("registered")
