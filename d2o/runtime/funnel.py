"""The funnel: one table of d2o's public operations, and the wrappers put around them on demand.

Every public operation (a method of `distributed_data_object`, a function of
``d2o``, ``d2o.fft`` or ``d2o.io``) is registered here once (`d2o/__init__.py`
registers them all).  While a trace is active (`d2o.core.trace`) or the option
``check_args`` is on, `activate` replaces each registered operation, wherever
d2o's modules expose it, by a wrapper around its outermost call that

* verifies that the call's global arguments are equal on every rank
  (``check_args``: one allreduce of a 64-bit hash; a ValueError naming the
  argument on every rank otherwise), and
* opens a `Record` for it in the active traces, and
* once arrays on process meshes exist (`d2o.layouts.mesh`), runs operations that
  have no mesh algorithm yet on the slab equivalents of their mesh operands
  (one exchange each; results written back where the operation writes).

`deactivate` puts the plain functions back.  So the default path carries no
per-call cost at all, and a new operation only has to be registered.

A reference to an operation taken before a trace started (``f = d2o.fft.fftn``)
bypasses the wrapper: its MPI calls are still counted, under the record
"(outside a public operation)".
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any

from ..api.operators import BINARY, UNARY
from ..array.slabs import on_slabs as _on_slabs
from ..core import config as _config
from ..core import hooks, registry
from ..core import trace as _trace
from ..core.comm import pending_check
from ..core.registry import register, register_functions  # noqa: F401 - the controller's
from .checked import LOCAL_OPS, start_check

__all__ = ["register", "register_functions", "activate", "deactivate", "start_check"]

_OPS = registry.OPS
#: While active: (namespace, attribute, original) for every replacement made.
_PATCHED: list[tuple] = []


def _on_registered() -> None:
    """Operations were declared after the wrappers went in: wrap them too."""
    if _PATCHED:
        _uninstall()
        activate()


#: 1 while a registered operation runs (its inner calls are not wrapped again).
_depth = hooks.depth


#: While controller mode runs on rank 0 (`d2o.runtime.controller`): the function that sends each
#: outermost call to the other ranks and runs it here:
#: ``call(key, name, namer, fn, body, args, kwargs)``.
controller: list = [None]


def _wrap(fn: Callable, name: str, namer: Callable | None, key: tuple = ()) -> Callable:
    current = _trace.current
    Record = _trace.Record
    options = _config._OPTIONS
    native = _is_native(name)

    @functools.wraps(fn)
    def funnel(*args: Any, **kwargs: Any) -> Any:
        if _depth[0]:
            return fn(*args, **kwargs)  # an inner call: no record, no check
        if controller[0] is not None:
            return controller[0](key, name, namer, fn, body, args, kwargs)
        return body(args, kwargs)

    def body(args: tuple, kwargs: dict) -> Any:
        _depth[0] = 1
        try:
            # first, so that the argument check counts under it (controller mode may have
            # opened it already, to count the command it sent ahead)
            if _trace.active and current[0] is None:
                rec = Record(name if namer is None else namer(args))
                for t in _trace.active:
                    t.records.append(rec)
                current[0] = rec
            check = None
            if options["check_args"] and name not in LOCAL_OPS:
                check = start_check(fn, name, args, kwargs)
            try:
                if mesh_in_use[0]:
                    if not native:
                        return _on_slabs(fn, name, args, kwargs)
                    if held_in_use[0] and name not in _HELD_LOCAL and name not in _HELD_NATIVE:
                        return _on_slabs(fn, name, args, kwargs, held_only=True)
                return fn(*args, **kwargs)
            finally:
                if check is not None and pending_check[0] is check:
                    check.flush()  # no agreement took it: a collective of its own
        finally:
            _depth[0] = 0
            current[0] = None

    funnel.__d2o_original__ = fn  # type: ignore[attr-defined]
    return funnel


# -- the fallback for mesh layouts -------------------------------------------------------

#: True once a mesh layout was built in this process (then the wrappers stay installed).
mesh_in_use = hooks.mesh_in_use
#: Operations that handle mesh layouts themselves (local work, layout changes, ufuncs).
_MESH_NATIVE = {
    "distributed_data_object", "copy", "copy_empty", "astype", "get_full_data", "gather",
    "allgather", "get_local_data", "set_local_data", "apply_generator", "apply_scalar_function",
    "nan_to_num", "isreal", "iscomplex", "isnan", "isinf", "isfinite", "conj", "conjugate",
    "__array_ufunc__", "__repr__", "__str__", "__len__", "__copy__", "__deepcopy__",
    "__reduce__", "__array__", "show", "enumerate", "transpose", "swapaxes", "sum", "prod", "nansum",
    "max", "min", "amax", "amin", "nanmax", "nanmin", "any", "all", "mean", "var", "std", "argmax", "argmin",
    "dot", "matmul", "numpy.matmul", "numpy.dot", "__matmul__", "__rmatmul__", "update_halos",
    # views numpy returns as views (transposes, reversals: views on every layout)
    "numpy.transpose", "numpy.permute_dims", "numpy.matrix_transpose", "numpy.swapaxes",
    "numpy.moveaxis", "numpy.rollaxis", "numpy.flip", "numpy.fliplr", "numpy.flipud",
    "numpy.rot90", "numpy.real", "numpy.imag",
    # element-wise with their operands aligned to the result's layout (local when one layout)
    "where", "numpy.where", "clip", "numpy.clip", "numpy.astype",
}  # fmt: skip
#: Special methods that run on slab equivalents (the other ones are operators).
_DUNDERS_ON_SLABS = {"__iter__", "__bool__", "__float__", "__int__", "__complex__"}  # fmt: skip


#: True once a 0-d view (`HeldScalar`) was made: every operation is then wrapped, and
#: those with a 0-d view operand run on its replicated copy.
held_in_use = hooks.held_in_use
_HELD_LOCAL = {
    "get_local_data", "set_local_data", "distributed_data_object", "__array_function__",
    "__del__",
}  # fmt: skip
#: Operations that take 0-d views themselves (`d2o.ops.ufuncs` runs the fallback for the
#: calls that have one): the operators and numpy's ufuncs, so that ``x + y`` stays
#: unwrapped (and its temporaries reused) once a 0-d view exists.
_HELD_NATIVE = {
    *(f"__{p}{n}__" for n, (_, _, inplace) in BINARY.items() for p in ("", "r", "i")
      if p == "" or inplace is not None),
    *(f"__{n}__" for n in UNARY),
    "__array_ufunc__",
}  # fmt: skip


def _is_native(name: str) -> bool:
    """True for operations that handle mesh layouts themselves (operators reach the
    ufunc path, which does)."""
    return (
        name in _MESH_NATIVE
        or name.startswith("fft.")
        or (name.startswith("__") and name.endswith("__") and name not in _DUNDERS_ON_SLABS)
    )


def _on_mesh() -> None:
    """The first mesh layout was built (`d2o.core.hooks.use_mesh`): keep the wrappers of
    the operations without a mesh algorithm installed (the native ones stay plain)."""
    activate()


def _on_modes() -> None:
    """A trace started or ended, or ``check_args`` changed: install or remove wrappers."""
    if _installed[0] < _level():
        activate()
    else:
        deactivate()


def _d2o_modules() -> list:
    return [m for k, m in list(sys.modules.items()) if (k == "d2o" or k.startswith("d2o.")) and m]


#: True while the installed wrappers cover every operation (a trace or check_args needs
#: them all); False while only the mesh fallback needs them (native operations stay plain).
_full = [False]


#: True in controller mode (on every rank): every operation is wrapped, so that rank 0
#: sends each outermost call and the other ranks run it through the same wrapper.
controlled = hooks.controlled


def _level() -> int:
    """How much must be wrapped now: 3 everything (a trace, ``check_args``, controller
    mode), 2 the mesh fallback and the operations that leave 0-d views to the wrapper,
    1 the mesh fallback only, 0 nothing."""
    if _trace.active or _config._OPTIONS["check_args"] or controlled[0]:
        return 3
    return 2 if held_in_use[0] else 1 if mesh_in_use[0] else 0


def _wanted(name: str, level: int) -> bool:
    """Whether operation ``name`` is wrapped at ``level``."""
    if level == 3:
        return True
    if level >= 1 and not _is_native(name):
        return True
    return level == 2 and name not in _HELD_NATIVE and name not in _HELD_LOCAL


#: The level the installed wrappers were made for.
_installed = [0]


def activate() -> None:
    """Install the wrappers the current `_level` wants (idempotent; a higher level
    replaces a lower one's)."""
    level = _level()
    if _PATCHED:
        if _installed[0] >= level:
            return
        _uninstall()
    _installed[0] = level
    if level == 0:
        return
    where: dict = {}  # id of a function -> every (module, name) it is bound to
    for m in _d2o_modules():
        for key, val in list(vars(m).items()):
            if callable(val):
                where.setdefault(id(val), []).append((m, key))
    for owner, attr, name, namer in _OPS:
        if not _wanted(name, level):
            continue
        if isinstance(owner, str):
            mod = sys.modules.get(owner)
            if mod is None or not hasattr(mod, attr):
                continue
            orig = getattr(mod, attr)
            wrapped = _wrap(orig, name, namer, ("f", owner, attr))
            for m, key in where.get(id(orig), ()):
                _PATCHED.append((m, key, orig))
                setattr(m, key, wrapped)
            continue
        # the class of owner's MRO that defines attr (the public class or a mixin of it)
        owner = next((c for c in owner.__mro__ if attr in c.__dict__), owner)
        orig = owner.__dict__.get(attr)
        if orig is None:
            continue
        key = ("c", owner.__module__, owner.__qualname__, attr)
        if isinstance(orig, property):
            fget = _wrap(orig.fget, name, namer, key)
            wrapped = property(fget, orig.fset, orig.fdel, orig.__doc__)
        elif isinstance(orig, (classmethod, staticmethod)):
            continue
        else:
            wrapped = _wrap(orig, name, namer, key)
        _PATCHED.append((owner, attr, orig))
        setattr(owner, attr, wrapped)


def _uninstall() -> None:
    for owner, attr, orig in reversed(_PATCHED):
        setattr(owner, attr, orig)
    _PATCHED.clear()


def deactivate() -> None:
    """Go down to the wrappers the current `_level` wants once a trace ended or
    ``check_args`` went off (keeping the mesh and 0-d view fallbacks where needed)."""
    if not _PATCHED or _installed[0] == _level():
        return
    _uninstall()
    _installed[0] = 0
    activate()


hooks.subscribe("modes", _on_modes)
hooks.subscribe("mesh", _on_mesh)
hooks.subscribe("held", _on_mesh)
hooks.subscribe("registered", _on_registered)
