"""The funnel: what d2o's public operations do while a mode needs them.

Every public operation is declared once where it is defined (`d2o.core.registry`), and
its trampoline tests one flag per call.  This module sets the flags whenever a mode
changes (a trace starts or ends, ``check_args`` changes, controller mode starts, the
first mesh layout or 0-d view is made: `d2o.core.hooks` events), and `run` is what a
flagged call does:

* verify that the call's global arguments are equal on every rank (``check_args``:
  `d2o.runtime.checked`), and
* open a `Record` for it in the active traces, and
* once arrays on process meshes exist (`d2o.layouts.mesh`), run operations that have no
  mesh algorithm on the slab equivalents of their mesh operands (one exchange each;
  results written back where the operation writes), and
* in controller mode, send the call to the other ranks first, and
* with the ``lazy`` option on, record element-wise calls instead of running them
  (`d2o.ops.deferred`): every flag is set, so that any other outermost call first
  evaluates the pending expressions (`_lazy`).

Only the outermost public call does this; its inner calls run plain (`_depth`).
Nothing is patched: with no mode on, no flag is set and a call costs one test.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as _np

from ..api import deferred as _deferred_class  # noqa: F401 - registers the class
from ..api.array import distributed_data_object as _Array
from ..api.operators import BINARY, UNARY, Operators
from ..array.slabs import on_slabs as _on_slabs
from ..core import config as _config
from ..core import hooks, registry
from ..core import trace as _trace
from ..core.comm import pending_check
from ..core.registry import Operation, operation_of
from ..ops import deferred as _deferred
from .checked import start_check

__all__ = ["run", "body", "perform", "defers", "refresh", "start_check"]

#: 1 while a public operation runs (its inner calls run plain).
_depth = hooks.depth


#: While controller mode runs on rank 0 (`d2o.runtime.controller`): the function that
#: sends each outermost call to the other ranks and runs it here: ``call(op, args, kwargs)``.
controller: list = [None]


def run(op: Operation, args: tuple, kwargs: dict) -> Any:
    """A flagged call of ``op`` (`d2o.core.registry`): the modes' work around it."""
    if _depth[0]:
        return op.fn(*args, **kwargs)  # an inner call: no record, no check
    if controller[0] is not None:
        return controller[0](op, args, kwargs)
    if _config.OPTIONS["lazy"]:
        if controlled[0]:  # a worker of controller mode: rank 0's command
            return perform(op, args, kwargs)
        res = _lazy(op, args, kwargs)
        if res is not _EAGER:
            return res
    return body(op, args, kwargs)


_EAGER = object()


def perform(op: Operation, args: tuple, kwargs: dict) -> Any:
    """Controller mode, on every rank: one command's operation (an outermost call: no
    frame test), recorded where ``lazy`` defers it (`_lazy`), else run (`body`).  The
    decision depends on global facts alone, so every rank takes it alike; what it
    records and what it runs at once stays on this rank's pieces but for the boundary
    rows of shifted operands (posted only) and the operations' own collectives."""
    if not _config.OPTIONS["lazy"]:
        return body(op, args, kwargs)
    _depth[0] = 1  # (its inner calls, properties included, run plain)
    try:
        res = _lazy(op, args, kwargs, True)
    finally:
        _depth[0] = 0
    return body(op, args, kwargs) if res is _EAGER else res


def defers(op: Operation) -> bool:
    """True, with ``lazy`` on, for the operations it may record (element-wise calls, item
    assignment, ``ravel``, ``copy``): controller mode queues their commands rather than
    sending them ahead, so that one batch carries an expression and the call that
    evaluates it."""
    return bool(_config.OPTIONS["lazy"]) and op in _ROLES


def _lazy(op: Operation, args: tuple, kwargs: dict, outermost: bool = False) -> Any:
    """An outermost call with ``lazy`` on: an element-wise one recorded (`d2o.ops.deferred`);
    before any other, or one that cannot be deferred, the pending expressions evaluated.
    Returns ``_EAGER`` where the call is to run as usual.  ``outermost``: known to be
    the program's own call (controller mode), the frame test skipped."""
    role = _ROLES.get(op)
    if op.defers and not pending[0] and not outermost:
        # (an unflagged operation's inner call: run as with no mode on; ``copy`` calls
        # `run` through `d2o.core.registry.run_flagged`: one frame more)
        if _inner(5 if role is _COPY else 4):
            return body(op, args, kwargs)
    # (a ravel defers only slabs and replicated arrays: `d2o.ops.deferred.flattened`)
    if role is not None and (op.mesh or not mesh_in_use[0] or role[0] == "ravel"):
        rec = res = None
        if _trace.active and _trace.current[0] is None:  # counts an operand's alignment
            rec = _trace.current[0] = _trace.Record(op.name)
        try:
            res = _deferred_call(role, args, kwargs)
        finally:
            if rec is not None:
                _trace.current[0] = None
                if rec.collectives and res is not None:  # recorded where it moved something
                    for t in _trace.active:
                        t.records.append(rec)
        if res is not None:
            return res
    # views, getitem, evaluate, reductions and element-wise calls without ``out=`` only
    # read (or write new arrays): what is pending stays so (a sum fuses with its producer,
    # `d2o.ops.reductions`); an in-place operator or an item assignment writes into its
    # target alone: only what reads the target's memory is evaluated first
    kind = role[0] if role is not None else None
    if kind in ("inplace", "setitem") and not kwargs:
        _deferred.flush(args[0].data)
    elif kind in ("binary", "reflected", "unary", "copy") or (
        kind == "ufunc" and "out" not in kwargs
    ):
        pass
    elif op.kind != "view" and op not in _READ and not _reads(op, args, kwargs):
        _deferred.flush()
    if not op.traced:  # flagged only for the flush: runs as with no mode on
        return op.fn(*args, **kwargs)
    return _EAGER


def _inner(depth: int) -> bool:
    """True when the element-wise call `_lazy` handles was made by d2o's own code (an
    operation's inner call): while nothing is pending only the element-wise operations
    are flagged, so an unflagged operation does not mark its inner calls (`_depth`);
    they must not be recorded.  The caller is the frame above the operator method or
    ``__array_ufunc__`` (`_inner`, `_lazy`, `run`, then that method: ``depth`` 4), both of
    which call `run` directly."""
    caller = sys._getframe(depth)
    name = caller.f_globals.get("__name__") or ""
    return name.startswith("d2o.") and not name.startswith("d2o.testing")


def _deferred_call(role: tuple, args: tuple, kwargs: dict) -> Any:
    kind, ufunc, pyop = role
    if kind == "binary":
        return _deferred.record(ufunc, args, pyop)
    if kind == "reflected":
        return _deferred.record(ufunc, (args[1], args[0]), pyop)
    if kind == "unary":
        return _deferred.record(ufunc, args)
    if kind == "inplace":
        return _deferred.inplace(args[0], args[1], ufunc, pyop)
    if kind == "ufunc":  # __array_ufunc__(self, ufunc, method, *inputs)
        if args[2] != "__call__" or kwargs or not isinstance(args[1], _np.ufunc):
            return None
        return _deferred.record(args[1], args[3:])
    if kind == "ravel":  # a temporary's ravel stays deferred (its reference count here)
        return _deferred.flattened(args[0], sys.getrefcount(args[0]))
    if kind == "copy":  # a plain copy (no dtype, strategy or axis)
        return None if kwargs else _deferred.copied(args[0])
    # __setitem__(self, key, value): the expression written into the target
    return True if not kwargs and _deferred.assign(*args) else None


def _reads(op: Operation, args: tuple, kwargs: dict) -> bool:
    """True for a reduction given no array but the one it reduces (a method or function
    of kind "reduction", a ufunc's ``reduce``) and for the ``@`` operator: they write
    into no array's memory (an array elsewhere among a reduction's arguments may be
    ``out``), so the pending expressions need not be evaluated before them."""
    if op in _PRODUCTS:
        return True
    if op.kind == "reduction":
        rest = args[1:]
    elif op.kind == "linalg" and op.name in _DOTS:  # dot(a, b, out=None)
        rest = args[2:]
    elif op is _UFUNC and len(args) > 3 and args[2] == "reduce":
        rest = args[4:]
    else:
        return False
    return not any(isinstance(a, (_Array, _np.ndarray)) for a in (*rest, *kwargs.values()))


def _roles() -> dict:
    """The operations `_lazy` defers: operation -> (role, ufunc or None)."""
    roles: dict = {}
    for name, (ufunc, pyop, iop) in BINARY.items():
        roles[operation_of(getattr(Operators, f"__{name}__"))] = ("binary", ufunc, pyop)
        if iop is not None:
            roles[operation_of(getattr(Operators, f"__r{name}__"))] = ("reflected", ufunc, pyop)
            roles[operation_of(getattr(Operators, f"__i{name}__"))] = ("inplace", ufunc, pyop)
    for name, ufunc in UNARY.items():
        roles[operation_of(getattr(Operators, f"__{name}__"))] = ("unary", ufunc, None)
    roles[operation_of(_Array.__array_ufunc__)] = ("ufunc", None, None)
    roles[operation_of(_Array.__setitem__)] = ("setitem", None, None)
    roles[operation_of(_Array.ravel)] = ("ravel", None, None)
    roles[operation_of(_Array.copy)] = ("copy", None, None)
    return roles


_ROLES = _roles()
_COPY = _ROLES[operation_of(_Array.copy)]
_READ = {operation_of(_Array.__getitem__), operation_of(_deferred.evaluate)}
_UFUNC = operation_of(_Array.__array_ufunc__)
_PRODUCTS = {operation_of(_Array.__matmul__), operation_of(_Array.__rmatmul__)}
#: The products that read their operands alone unless given ``out`` (the method and
#: ``d2o.numpy.dot``): pending operands stay so (`d2o.ops.linalg.dot` fuses them).
_DOTS = frozenset(("dot", "numpy.dot", "numpy.matmul"))


def body(op: Operation, args: tuple, kwargs: dict) -> Any:
    """The outermost call of ``op``: its record, its argument check, the mesh fallback."""
    fn, name = op.fn, op.name
    current = _trace.current
    _depth[0] = 1
    try:
        # first, so that the argument check counts under it (controller mode may have
        # opened it already, to count the command it sent ahead)
        if _trace.active and current[0] is None:
            rec = _trace.Record(name if op.namer is None else op.namer(args))
            for t in _trace.active:
                t.records.append(rec)
            current[0] = rec
        check = None
        if _config.OPTIONS["check_args"] and op.communicates:
            check = start_check(fn, name, args, kwargs)
        try:
            if mesh_in_use[0]:
                if not op.mesh:
                    return _on_slabs(fn, name, args, kwargs)
                if held_in_use[0] and op.held is None:
                    return _on_slabs(fn, name, args, kwargs, held_only=True)
            return fn(*args, **kwargs)
        finally:
            if check is not None and pending_check[0] is check:
                check.flush()  # no agreement took it: a collective of its own
    finally:
        _depth[0] = 0
        current[0] = None


#: True once a mesh layout was built in this process: operations that do not handle
#: meshes themselves (``Operation.mesh``) then run on slab equivalents.
mesh_in_use = hooks.mesh_in_use
#: True once a 0-d view (`HeldScalar`) was made: operations that do not take them
#: (``Operation.held`` None) then run on the replicated copy of their 0-d view operands.
held_in_use = hooks.held_in_use


#: True in controller mode (on every rank): every operation is flagged, so that rank 0
#: sends each outermost call and the other ranks run it through the same path.
controlled = hooks.controlled
#: True while a deferred expression is pending (`d2o.ops.deferred`).
pending = hooks.pending
#: The element count from which the element-wise calls go to `run` (`refresh`,
#: `d2o.core.hooks.defer_from`): a smaller call runs plain at once (the operators and
#: ``__array_ufunc__`` test it themselves, `d2o.ops.ufuncs`).
_from = hooks.defer_from
#: The operators' facts (traced, mesh, held, defers): `d2o.api.operators`' declarations.
_OPERATORS = (True, True, "native", True)


def _level() -> int:
    """How much must be flagged now: 3 everything traced (a trace, ``check_args``,
    controller mode), 2 the mesh fallback and the operations that leave 0-d views to the
    runtime, 1 the mesh fallback only, 0 nothing (the ``lazy`` option adds to it:
    `_lazy_level`)."""
    if _trace.active or _config.OPTIONS["check_args"] or controlled[0]:
        return 3
    return 2 if held_in_use[0] else 1 if mesh_in_use[0] else 0


def _lazy_level() -> int:
    """What the ``lazy`` option flags: 2 every operation (an expression is pending: each
    other call evaluates it first), 1 the element-wise calls it records (nothing
    pending), 0 nothing (off)."""
    if not _config.OPTIONS["lazy"]:
        return 0
    return 2 if pending[0] else 1


def _wanted(facts: tuple, level: int, lazy: int) -> bool:
    """Whether the calls of operations with ``facts`` = (traced, mesh, held, defers) need
    `run` at ``level`` and ``lazy`` level."""
    traced, mesh, held, defers = facts
    if controlled[0] or lazy == 2 or (lazy and defers):
        return True
    if not traced or level == 0:
        return False
    if level == 3 or not mesh:
        return True
    return level == 2 and held is None


def refresh() -> None:
    """Set the operations' flags for the modes now on (`d2o.core.hooks` events): one
    cell per combination of facts (`d2o.core.registry.CELLS`)."""
    level, lazy = _level(), _lazy_level()
    if not lazy:
        _deferred.flush()  # lazy off: nothing stays pending
    for facts, cell in registry.CELLS.items():
        cell[0] = _wanted(facts, level, lazy)
    if not _wanted(_OPERATORS, level, lazy):
        _from[0] = hooks.NEVER
    else:  # (only `lazy` records them: from lazy_min on; else every call)
        _from[0] = _config.OPTIONS["lazy_min"] if lazy == 1 and level < 3 else 0


registry.RUN[0] = run
for _event in ("modes", "mesh", "held", "pending"):
    hooks.subscribe(_event, refresh)
hooks.subscribe("registered", refresh)
refresh()
