"""d2o's public operations: each declared once, where it is defined, with its facts.

Every public operation (a method of `d2o.distributed_data_object`, a function of
``d2o``, ``d2o.fft``, ``d2o.io``, ``d2o.numpy`` and of controller mode's extra
namespaces) is an `Operation`: its record name, its kind, whether it communicates,
whether it handles process meshes and 0-d views itself, whether a trace records it.
The defining module declares it with `operation` (a function) or `operations` (the
methods of a class body, at class definition), which put in its place a trampoline
with the function's own signature: when no mode needs it, the trampoline costs one
flag test and one call; when a trace, checked mode, controller mode or the mesh
fallback needs the operation (`d2o.runtime.funnel` sets each operation's flag when a
mode changes), it hands the call to the runtime.  Nothing is patched at run time and
no mode is a one-way switch: ending a trace clears the flags it set.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from typing import Any, cast

from . import hooks

__all__ = ["Operation", "OPS", "RUN", "operation", "operations", "declare", "declare_op", "marked",
           "operation_of", "flagged", "cell", "run_flagged"]  # fmt: skip

#: Every operation declared so far, in declaration order.
OPS: list[Operation] = []
#: The flag cells, one per combination of the facts that decide whether a mode needs an
#: operation's calls: (traced, mesh, held) -> [flag].  Operations share them, so that a
#: mode change sets a dozen cells, not one per operation.
CELLS: dict[tuple, list] = {}
#: The runtime's entry for flagged calls (`d2o.runtime.funnel.run`): ``run(op, args, kwargs)``.
RUN: list = [None]

#: Kinds of operation (for the docs' tables and the trace).
KINDS = ("elementwise", "reduction", "axis-local", "neighbour", "joining", "sort", "creation",
         "indexing", "view", "shape", "linalg", "fft", "random", "io", "meta", "composed",
         "fallback", "local", "other")  # fmt: skip


class Operation:
    """One public operation and its facts.

    Attributes
    ----------
    name : str
        Its name in traces and errors (``'sum'``, ``'numpy.mean'``, ``'fft.fftn'``).
    kind : str
        One of `KINDS`.
    communicates : bool
        False for operations that never communicate (their arguments may differ
        between ranks: checked mode leaves them alone).
    mesh : bool
        True where the operation handles process meshes itself; the others run on
        slab equivalents once a mesh layout exists (`d2o.array.slabs.on_slabs`).
    held : str or None
        ``'native'``: takes 0-d views itself; ``'local'``: never meets one; None: runs
        on the replicated copy of its 0-d view operands once a 0-d view exists.
    defers : bool
        True for the element-wise calls the ``lazy`` option records (operators,
        ``__array_ufunc__``, ``__setitem__``): flagged while ``lazy`` is on even when
        nothing is pending.
    traced : bool
        False for operations only controller mode needs to see (properties that make
        arrays, random numbers, layouts, options); a trace records their inner calls.
    namer : callable or None
        ``namer(args)``: the record name computed from the call (``__array_ufunc__``).
    fn : callable
        The plain function.
    key : tuple
        Where the operation lives, for controller mode's workers:
        ``('f', module, attribute)`` or ``('c', module, class qualname, attribute)``.
    on : list
        One cell: True while a mode needs this operation's calls (set by the runtime; shared
        by the operations of the same facts, `CELLS`).
    """

    __slots__ = ("name", "kind", "communicates", "mesh", "held", "traced", "defers", "namer",
                 "fn", "key", "on")  # fmt: skip

    def __init__(self, name: str, fn: Callable, key: tuple, *, kind: str = "other",
                 communicates: bool = True, mesh: bool = False, held: str | None = None,
                 traced: bool = True, defers: bool = False,
                 namer: Callable | None = None) -> None:  # fmt: skip
        if kind not in KINDS:
            raise ValueError(f"unknown kind of operation {kind!r}")
        self.name, self.fn, self.key, self.kind = name, fn, key, kind
        self.communicates, self.mesh, self.held, self.traced = communicates, mesh, held, traced
        self.defers = defers
        self.namer = namer
        self.on = CELLS.setdefault((traced, mesh, held, defers), [False])

    def __repr__(self) -> str:
        return f"<d2o operation {self.name} ({self.kind})>"


def _source(params: list, consts: int = 0) -> tuple[str, list[str], list[str], dict]:
    """The trampoline's parameter list, its slow path's lines and its call of the plain
    function.  The slow path passes the call as a caller would have written it: the
    parameters without a default (and those before ``*args``) by position, the others by
    keyword where they differ from their default (so that the runtime sees ``comm=``,
    ``local_keys=`` and the like as keywords, as the caller gave them).  A ``**kwargs``
    left empty is not passed on (a call with ``**`` costs a dict)."""
    P = inspect.Parameter
    head: list[str] = []
    calls: list[str] = []
    pos: list[str] = []
    lines: list[str] = []
    defaults: dict = {}
    var_kw = ""
    star = any(p.kind is P.VAR_POSITIONAL for p in params)
    before_star = True
    for i, p in enumerate(params):
        n = p.name
        if p.kind is P.VAR_POSITIONAL:
            head.append("*" + n)
            calls.append("*" + n)
            pos.append("*" + n)
            before_star = False
        elif p.kind is P.VAR_KEYWORD:
            head.append("**" + n)
            var_kw = n
            lines.insert(0, f"        _t_k = dict({n})")
        else:
            if p.kind is P.KEYWORD_ONLY and not any(h.startswith("*") for h in head):
                head.append("*")
            head.append(n)
            keyword = p.kind is P.KEYWORD_ONLY
            calls.append(f"{n}={n}" if keyword else n)
            if not keyword and (p.default is P.empty or (star and before_star)):
                pos.append(n)
            elif p.default is P.empty:
                lines.append(f"        _t_k[{n!r}] = {n}")
            else:
                defaults[f"_t_d{i}"] = p.default
                lines.append(f"        if {n} is not _t_d{i}:\n            _t_k[{n!r}] = {n}")
    if not any(line.startswith("        _t_k = ") for line in lines):
        lines.insert(0, "        _t_k = {}")
    last = max((i for i, p in enumerate(params) if p.kind is P.POSITIONAL_ONLY), default=-1)
    if last >= 0:
        head.insert(last + 1, "/")
    lines.append(f"        return _t_run[0](_t_op, ({''.join(a + ', ' for a in pos)}), _t_k)")
    # the fast path's callee: the plain function, or (`calls`) the function it passes its
    # arguments on to, with ``consts`` constants after the first argument
    args = calls[:1] + [f"_t_c{i}" for i in range(consts)] + calls[1:]
    call = ", ".join(args)
    if not var_kw:
        return ", ".join(head), lines, [f"    return _t_fast({call})"], defaults
    full = ", ".join([*args, "**" + var_kw])
    fast = [f"    if {var_kw}:", f"        return _t_fast({full})", f"    return _t_fast({call})"]
    return ", ".join(head), lines, fast, defaults


def _passes_on(params: list, target: Callable, consts: int) -> None:
    """TypeError unless ``target`` takes a call of the parameters ``params`` as the
    trampoline passes it on (`_source`): the first by position, ``consts`` constants by
    position, then the others as they are (positional ones by position, keyword-only
    ones by name, ``*args`` and ``**kwargs`` spread)."""
    P = inspect.Parameter
    positional = (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD)
    theirs = list(inspect.signature(target).parameters.values())
    ok = len(theirs) == len(params) + consts and all(
        p.kind in positional for p in theirs[: 1 + consts]
    )
    for mine, their in zip(params[1:], theirs[1 + consts :]):
        same = mine.kind == their.kind or (mine.kind in positional and their.kind in positional)
        ok = ok and same and (mine.kind is not P.KEYWORD_ONLY or mine.name == their.name)
    if not ok:
        raise TypeError(f"{target.__qualname__} does not take the arguments of the method "
                        "that passes them on (calls=)")  # fmt: skip


def _trampoline(op: Operation, calls: tuple = ()) -> Callable:
    """A function with ``op.fn``'s signature that calls ``op.fn``, or ``RUN[0]`` while
    ``op.on`` is set.  Built from source so that the fast path passes the arguments on
    as they came (no packing into a tuple and a dict: about 50 ns instead of 160).

    ``calls``: ``(target, *constants)`` for a method whose body only passes its arguments
    on, ``target(self, *constants, ...)``: the fast path calls ``target`` itself (one
    call, not two); the runtime's path still calls the method."""
    fn = op.fn
    params, code = [], None
    # builtins, numpy's dispatchers and functions showing another signature: the generic form
    if inspect.isfunction(fn) and "__signature__" not in fn.__dict__:
        params, code = (
            list(inspect.signature(fn, follow_wrapped=False).parameters.values()),
            fn.__code__,
        )
    # the module's name: tracebacks, warnings and the hang watchdog see a d2o frame
    ns: dict = {"__name__": getattr(fn, "__module__", None) or __name__, "_t_on": op.on,
                "_t_run": RUN, "_t_op": op, "_t_fn": fn, "_t_fast": fn}  # fmt: skip
    if code is None or any(p.name.startswith("_t_") for p in params):
        if calls:
            raise TypeError(f"calls= needs a plain Python function ({op.name})")
        head = "*args, **kwargs"
        lines = ["        return _t_run[0](_t_op, args, kwargs)"]
        fast = ["    return _t_fn(*args, **kwargs)"]
    else:
        if calls:
            _passes_on(params, calls[0], len(calls) - 1)
            ns["_t_fast"] = calls[0]
            ns.update({f"_t_c{i}": c for i, c in enumerate(calls[1:])})
        head, lines, fast, defaults = _source(params, len(calls) - 1 if calls else 0)
        ns.update(defaults)
    src = "\n".join([f"def _t_trampoline({head}):", "    if _t_on[0]:", *lines, *fast, ""])
    exec(compile(src, f"<d2o operation {op.name}>", "exec"), ns)  # noqa: S102 - our own source
    t = ns["_t_trampoline"]
    if code is not None:
        t.__defaults__, t.__kwdefaults__ = fn.__defaults__, fn.__kwdefaults__
        named = t.__code__.replace(co_name=code.co_name)
        if hasattr(code, "co_qualname"):  # Python >= 3.11
            named = named.replace(co_qualname=code.co_qualname)
        t.__code__ = named
    t.__module__ = getattr(fn, "__module__", None)
    t.__name__ = getattr(fn, "__name__", op.name)
    t.__qualname__ = getattr(fn, "__qualname__", op.name)
    t.__doc__ = getattr(fn, "__doc__", None)
    t.__annotations__ = getattr(fn, "__annotations__", {})
    t.__dict__.update(getattr(fn, "__dict__", {}))
    t.__wrapped__ = fn
    t.__d2o_operation__ = op
    if calls:
        t.__d2o_calls__ = calls  # (a test checks that the method's body is that call)
    return t


def declare_op(fn: Callable, name: str, key: tuple, **facts: Any) -> Operation:
    """Declare ``fn`` the operation ``name`` living at ``key`` (for code that tests
    ``op.on`` itself, as the generated operators do); returns the `Operation`."""
    op = Operation(name, fn, key, **facts)
    OPS.append(op)
    hooks.fire("registered")
    return op


def declare(fn: Callable, name: str, key: tuple, calls: Any = (), **facts: Any) -> Callable:
    """Declare ``fn`` the operation ``name`` living at ``key``; returns its trampoline
    (``calls``: see `_trampoline`)."""
    return _trampoline(declare_op(fn, name, key, **facts),
                       calls if isinstance(calls, tuple) else (calls,))  # fmt: skip


def cell(*, traced: bool = True, mesh: bool = False, held: str | None = None,
         defers: bool = False) -> list:  # fmt: skip
    """The flag cell of the operations of these facts (`CELLS`): what a method that tests
    its flag itself (``marked(inline=...)``) tests."""
    return CELLS.setdefault((traced, mesh, held, defers), [False])


def run_flagged(method: Callable, args: tuple, kwargs: dict) -> Any:
    """The runtime's path of a method that tests its flag itself: ``kwargs`` passed on as
    keywords where they differ from the method's defaults, as the trampolines do."""
    op, fn = getattr(method, "__d2o_operation__"), cast(Any, method)  # noqa: B009
    defaults = dict(fn.__kwdefaults__ or {})
    if fn.__defaults__:
        names = fn.__code__.co_varnames[: fn.__code__.co_argcount]
        defaults.update(zip(names[-len(fn.__defaults__) :], fn.__defaults__))
    given = {k: v for k, v in kwargs.items() if k not in defaults or v is not defaults[k]}
    return RUN[0](op, args, given)


def operation(name: str | None = None, **facts: Any) -> Callable[[Callable], Callable]:
    """Decorator: declare a module-level function a public operation (see `Operation`
    for ``facts``); the module binds the trampoline under the function's name."""

    def decorate(fn: Callable) -> Callable:
        return declare(fn, name or fn.__name__, ("f", fn.__module__, fn.__name__), **facts)

    return decorate


#: attribute of a function carrying its per-method facts (`marked`)
_FACTS = "__d2o_facts__"


def marked(**facts: Any) -> Callable[[Callable], Callable]:
    """Decorator inside a class body that `operations` declares: this method's own facts
    (``local=True``: not an operation at all, left plain; ``calls=(target, *constants)``:
    the method only returns ``target(self, *constants, <its other arguments>)``, and its
    trampoline calls ``target`` directly, checked when the class is defined;
    ``inline=cell(...)``: a hot method that tests its flag cell itself, first thing, and
    hands a flagged call to `run_flagged`: no trampoline, one test, as the generated
    operators do; the cell is checked against the method's facts when the class is
    defined)."""

    def mark(fn: Any) -> Any:
        fn.__d2o_facts__ = facts
        return fn

    return mark


def _methods(cls: type, skip: Iterable[str], properties: dict) -> list[tuple[str, Any]]:
    out = []
    for attr, val in list(vars(cls).items()):
        if attr in skip or (attr.startswith("_") and not attr.endswith("__")):
            continue
        if attr in ("__init_subclass__", "__class_getitem__", "__getattr__", "__new__"):
            continue
        if inspect.isfunction(val) or (isinstance(val, property) and attr in properties):
            out.append((attr, val))
    return out


def operations(*, skip: Iterable[str] = (), rename: dict | None = None,
               namers: dict | None = None, properties: dict | None = None,
               **facts: Any) -> Callable[[type], type]:  # fmt: skip
    """Class decorator: declare every public method of the class body an operation, and the
    properties named in ``properties`` (name -> their own facts); ``facts`` are the
    default facts, a method's `marked` facts override them.  The trampolines are put in
    place when the class is defined."""
    rename, namers, properties = rename or {}, namers or {}, properties or {}

    def decorate(cls: type) -> type:
        key0 = ("c", cls.__module__, cls.__qualname__)
        for attr, val in _methods(cls, skip, properties):
            fn = val.fget if isinstance(val, property) else val
            own = {**facts, **getattr(fn, _FACTS, {}), **properties.get(attr, {})}
            if own.pop("local", False):
                continue
            name = rename.get(attr, attr)
            inline = own.pop("inline", None)
            if inline is not None:  # the method tests its flag itself: no trampoline
                op = declare_op(fn, name, (*key0, attr), namer=namers.get(attr), **own)
                if inline is not op.on:
                    raise TypeError(f"{attr} tests the flag of other facts than its own")
                cast(Any, fn).__d2o_operation__ = op
                continue
            t: Any = declare(fn, name, (*key0, attr), namer=namers.get(attr), **own)
            if isinstance(val, property):
                t = property(t, val.fset, val.fdel, val.__doc__)
            setattr(cls, attr, t)  # (the class is being defined: its own body's methods)
        return cls

    return decorate


def operation_of(obj: Any) -> Operation | None:
    """The `Operation` behind a public function, method or property (None for others)."""
    if isinstance(obj, property):
        obj = obj.fget
    return getattr(obj, "__d2o_operation__", None)


def flagged(obj: Any) -> bool:
    """True while a mode sends the calls of operation ``obj`` through the runtime."""
    op = operation_of(obj)
    return op is not None and op.on[0]
