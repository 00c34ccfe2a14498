"""Element-wise arithmetic: Python operators and numpy ufuncs on distributed objects.

Everything goes through one path, `apply_ufunc`.  The operators are
generated from tables.  Fast path: operands that are scalars or arrays of the
very same layout cost one numpy call on the local pieces plus the wrapping.
Otherwise every operand is aligned to the result's layout: numpy arrays are
cut locally (no communication), distributed operands of another layout are
redistributed (never gathered, unless broadcasting along the distributed axis
really needs every element on every rank).

Layout rule for mixed operands: ``out``'s layout when given; otherwise the
first distributed operand whose distributed axis survives broadcasting;
replicated operands are cut locally; all-replicated inputs give a replicated
result.
"""

from __future__ import annotations

import dis
import itertools
import sys
from collections.abc import Callable
from sys import getrefcount
from typing import Any

import numpy as np

from ..array.align import (
    SCALAR_TYPES,
    SCALARS,
    align,
    align_out,
    align_parts,
    result_layout,
    shape_of,
)
from ..array.base import Array as D2O
from ..array.base import from_local as _from_local
from ..array.slabs import on_slabs as _on_slabs
from ..core.errors import agreed, defer
from ..core.hooks import NEVER, depth, held_in_use
from ..core.hooks import defer_from as _FROM
from ..core.registry import RUN as _RUN
from ..layouts.distributors import Distributor, HeldScalar, get_distributor
from ..move.halo import Parts
from . import reductions as _reductions
from . import scans as _scans
from .linalg import matmul

__all__ = ["apply_ufunc", "align", "result_layout"]

_SCALARS = SCALARS


def _wrap(result: Any, dist: Distributor) -> Any:
    if isinstance(result, tuple):
        return tuple(_from_local(r, dist) for r in result)
    return _from_local(result, dist)


def apply_ufunc(ufunc: np.ufunc, method: str, inputs: tuple, kwargs: dict) -> Any:
    """Apply a numpy ufunc (method ``'__call__'``, ``'reduce'``, ``'accumulate'``)."""
    if method in ("reduce", "accumulate"):
        fn = _reductions.ufunc_reduce if method == "reduce" else _scans.ufunc_accumulate
        # no mesh algorithm yet: mesh operands run on their slab equivalents
        return _on_slabs(fn, method, (ufunc, *inputs), kwargs)
    if method != "__call__":
        return NotImplemented
    out = kwargs.pop("out", None)
    outs = out if isinstance(out, tuple) else (out,) if out is not None else ()
    shapes = [shape_of(x) for x in inputs]
    first = next((x for x in inputs + outs if isinstance(x, D2O)), None)
    with agreed(first.distributor.comm):
        shape = np.broadcast_shapes(*shapes)
        for o in outs:
            if o is not None and not isinstance(o, D2O):
                raise TypeError("out= must be a distributed_data_object for distributed inputs")
            if o is not None and o.shape != shape:
                raise ValueError(
                    f"non-broadcastable output operand with shape {o.shape} doesn't match "
                    f"the broadcast shape {shape}"
                )
        if outs and outs[0] is not None:
            target = outs[0].distributor
        else:
            target = result_layout(list(inputs), shape)
    where = kwargs.get("where", True)
    # shifted slab operands come as Parts (boundary rows only); others aligned whole
    local_in = [align_parts(x, target) if where is True else None for x in inputs]
    local_in = [align(x, target) if p is None else p for x, p in zip(inputs, local_in)]
    if where is not True:
        kwargs["where"] = align(where, target)
    local_out = tuple(None if o is None else align_out(o, target) for o in outs)
    try:
        if any(isinstance(x, Parts) for x in local_in):
            result = _segmented(ufunc, local_in, shapes, local_out, kwargs, target)
        else:
            if outs:
                kwargs["out"] = local_out
            result = ufunc(*local_in, **kwargs)
    except Exception as exc:  # data-dependent: only some ranks may see it (see _failed)
        firsts = [x.pieces[0][1] if isinstance(x, Parts) else x for x in local_in]
        result = _failed(exc, target, ufunc, firsts)
    if outs:
        wrapped = tuple(
            o if o is not None else _from_local(r, target)
            for o, r in zip(outs, result if isinstance(result, tuple) else (result,))
        )
        return wrapped if len(wrapped) > 1 else wrapped[0]
    return _wrap(result, target)


def _segmented(
    ufunc: np.ufunc, ins: list, shapes: list, outs: tuple, kwargs: dict, target: Distributor
) -> Any:
    """``ufunc`` on this rank's piece of ``target`` where some operands are `Parts`: one
    call per box of the grid the pieces' boundaries draw along the split axes (each box
    inside one piece of every operand), written into the result; no operand is copied
    whole.  ``shapes``: the operands' global shapes (extent 1 broadcasts).  Local."""
    parts = [x for x in ins if isinstance(x, Parts)]
    if any(o is not None and p.shares_memory(o) for o in outs for p in parts):
        # an output overlapping a shifted input: numpy's semantics need whole copies
        ins = [x.assemble() if isinstance(x, Parts) else x for x in ins]
        return ufunc(*ins, out=outs, **kwargs) if outs else ufunc(*ins, **kwargs)
    axes, nd = target.split_axes(), target.ndim

    def cut(x: Any, shape: tuple, box: dict) -> Any:
        shift = nd - len(shape)
        if isinstance(x, Parts):  # whole along the axes it broadcasts over
            return x.segment({a - shift: r for a, r in box.items() if a >= shift})
        if not isinstance(x, np.ndarray):
            return x
        return x[
            tuple(
                slice(*box[a + shift]) if a + shift in box and n != 1 else slice(None)
                for a, n in enumerate(shape)
            )
        ]

    def call(box: dict, out: tuple | None) -> Any:
        args = [cut(x, sh, box) for x, sh in zip(ins, shapes)]
        if out is None:
            return ufunc(*args, **kwargs)
        sub = tuple(slice(*box[a]) if a in box else slice(None) for a in range(nd))
        return ufunc(*args, out=tuple(o[sub] for o in out), **kwargs)

    # one call on an empty box first, on every rank (even one holding nothing): numpy's
    # result dtypes, and its type and casting errors raised everywhere alike
    empty = {a: (0, 0) for a in axes}
    if outs and all(o is not None for o in outs):
        call(empty, outs)
    else:
        probe = call(empty, None)
        probe = probe if isinstance(probe, tuple) else (probe,)
        given = outs or (None,) * len(probe)
        outs = tuple(
            np.empty(target.local_shape, dtype=r.dtype) if o is None else o
            for o, r in zip(given, probe)
        )
    shifted = [(x, nd - len(sh)) for x, sh in zip(ins, shapes) if isinstance(x, Parts)]
    grids = []
    for a in axes:
        cuts = [p.cuts(a - k) for p, k in shifted if a >= k]
        edges = sorted(set().union(*cuts) | {0, target.local_shape[a]})
        grids.append([(lo, hi) for lo, hi in zip(edges, edges[1:]) if hi > lo])
    for cell in itertools.product(*grids):
        call(dict(zip(axes, cell)), outs)
    return outs if len(outs) > 1 else outs[0]


def ufunc_method(self: D2O, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
    """The class's ``__array_ufunc__``: the runtime's test (`_FROM`, as the operators'),
    the fast path and the rest (`array_ufunc`) in one Python call.  Operands of several
    shapes may broadcast to a larger result: tested once the fast path (operands of one
    layout) is ruled out.  The runtime calls it again with `depth` raised, which skips
    the tests."""
    d = self.distributor
    if d.size >= _FROM[0] and not depth[0]:
        op = ufunc_method.__d2o_operation__  # type: ignore[attr-defined]
        return _RUN[0](op, (self, ufunc, method, *inputs), kwargs)  # (`_inner`'s frames)
    if method == "__call__" and not kwargs and not held_in_use[0]:
        result = _fast(d, ufunc, inputs)
        if result is not None:
            return result
    if len(inputs) > 1 and not depth[0] and any(_broadcasts(d, x) for x in inputs):
        op = ufunc_method.__d2o_operation__  # type: ignore[attr-defined]
        return _RUN[0](op, (self, ufunc, method, *inputs), kwargs)  # (`_inner`'s frames)
    return array_ufunc(self, ufunc, method, *inputs, **kwargs)


def _fast(d: Distributor, ufunc: np.ufunc, inputs: tuple) -> Any:
    """``ufunc(*inputs)`` where every operand is a scalar or an array of layout ``d`` (not
    a 0-d view): one numpy call on the local pieces, no alignment, no agreement (the
    shapes match on every rank by construction); else None."""
    if ufunc.signature is not None or d.replicated and d is not _replicated(d):
        return None
    local: list = []
    for x in inputs:
        if isinstance(x, D2O):
            if x.distributor is not d:
                return None
            local.append(x.data)
        elif isinstance(x, _SCALARS):
            local.append(x)
        else:
            return None
    try:
        result = ufunc(*local)
    except Exception as exc:  # data-dependent: only some ranks may see it
        result = _failed(exc, d, ufunc, local)
    return _from_local(result, d) if ufunc.nout == 1 else _wrap(result, d)


def _replicated(d: Distributor) -> Distributor:
    """The replicated layout of ``d``'s shape (a result's layout when every distributed
    operand is replicated: `result_layout`)."""
    return get_distributor("not", d.global_shape, d.comm)


def array_ufunc(self: D2O, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
    """numpy's ufunc ``method`` on distributed operands: 0-d views on replicated copies,
    generalized ufuncs (only ``matmul``), the fast path (`_fast`), else `apply_ufunc`."""
    if held_in_use[0] and (_held(inputs) or _held(_outs(kwargs))):
        # (outputs in ``out=`` are written back; the name is not an in-place one)
        args = (self, ufunc, method, *inputs)
        return _on_slabs(array_ufunc, ufunc.__name__, args, kwargs, held_only=True)
    if ufunc.signature is not None:
        # Generalized ufuncs (matmul, vecdot, ...) are not element-wise: applying them to
        # the local pieces would be wrong.  matmul has a distributed implementation.
        if ufunc is np.matmul and method == "__call__" and not kwargs:
            return _on_slabs(matmul, "matmul", inputs, {})
        return NotImplemented
    if method == "__call__" and not kwargs:
        result = _fast(self.distributor, ufunc, inputs)
        if result is not None:
            return result
    for x in inputs + kwargs.get("out", ()):
        if hasattr(x, "__array_ufunc__") and not isinstance(x, (D2O, np.ndarray, np.generic)):
            return NotImplemented
    return apply_ufunc(ufunc, method, inputs, kwargs)


def _failed(exc: Exception, d: Distributor, ufunc: np.ufunc, local: list) -> Any:
    """A numpy error of purely local work: raised at once on one process, else deferred to
    the next collective (`d2o.core.errors.defer`); returns a placeholder of zeros.

    Only value errors depend on the data (integer ``**`` negative, ``np.errstate``'s
    FloatingPointError); type errors (casting rules) are the same on every rank and
    raised at once.
    """
    if not isinstance(exc, (ValueError, ArithmeticError)):
        raise exc
    defer(d.comm, exc)
    try:
        dtypes = ufunc.resolve_dtypes(
            tuple(np.asarray(x).dtype for x in local) + (None,) * ufunc.nout
        )
        outs = dtypes[ufunc.nin :]
    except Exception:
        outs = (np.result_type(*local),) * ufunc.nout
    zeros = tuple(np.zeros(d.local_shape, dtype=dt) for dt in outs)
    return zeros if ufunc.nout > 1 else zeros[0]


# The operators' fast paths (scalars, operands of the very same layout) apply Python's
# operator to the local ndarray, so numpy's operator special cases (``a ** 2`` is
# ``square``) hold too; everything else is `apply_ufunc`.
#
# Temporaries are reused, as numpy does for its own: in ``0.25 * (a + b + c)`` the
# result of ``a + b`` is referenced by the interpreter's stack alone, so ``+ c`` and
# ``0.25 *`` may write into its piece instead of allocating (and first touching) a new
# one.  An operand is such a temporary when its reference count inside the operator's
# method is the count `_calibrate` measured for one, its piece is large, owns its
# memory and is referenced by nothing else (no view, no local_data handed out), and the
# result has its dtype and shape, and the calling frame is executing a binary operator
# (an explicit ``x.__add__(y)`` of a named ``x`` shows the same count; numpy inspects its C
# stack for the same reason).  Any wrapper in between (the trace, controller mode) raises
# the count or hides the operator, which only switches the reuse off.

_ELIDE_BYTES = 256 * 1024  # numpy's threshold for its own temporaries


class _Probe:
    def __add__(self, other: Any) -> int:
        return getrefcount(self)

    __radd__ = __add__


def _calibrate() -> int | None:
    """The reference count of a temporary operand inside an operator's method,
    or None where a named operand shows no more (then nothing is reused)."""
    named = _Probe()
    in_named, in_temp = named + 0, _Probe() + 0
    r_named, r_temp = 0 + named, 0 + _Probe()
    if in_temp == r_temp and in_named > in_temp and r_named > r_temp:
        return in_temp
    return None  # pragma: no cover - an interpreter that borrows stack references


# 3.10's frames count differently; not measured there, so nothing is reused
_TEMP = _calibrate() if sys.version_info >= (3, 11) else None


_OPERATOR_CODES = frozenset(
    code for name, code in dis.opmap.items() if name.startswith(("BINARY_", "INPLACE_"))
) - {dis.opmap.get("BINARY_SUBSCR")}


def _reuse(self: D2O, other: Any, ufunc: np.ufunc, swap: bool) -> bool:
    """Compute ``self <op> other`` (``other <op> self`` with ``swap``) into self's piece
    when self is a temporary that can hold the result (see above); False otherwise."""
    data = self.data
    if data.nbytes < _ELIDE_BYTES or ufunc is np.power or getrefcount(data) != 3:
        return False  # 3: self.data, `data`, getrefcount's argument
    if data.base is not None or not data.flags.writeable:
        return False
    caller = sys._getframe(2)  # _reuse <- __add__ <- the caller
    if caller.f_code.co_code[caller.f_lasti] not in _OPERATOR_CODES:
        return False
    if isinstance(other, D2O):
        kind: Any = other.dtype
        shape = other.shape
    elif isinstance(other, (int, float, complex)) and not isinstance(other, np.generic):
        kind, shape = type(other), ()
    elif isinstance(other, (np.ndarray, np.generic)):
        kind, shape = other.dtype, other.shape
    else:
        return False
    try:
        ins = (kind, data.dtype) if swap else (data.dtype, kind)
        if ufunc.resolve_dtypes((*ins, None))[-1] != data.dtype:
            return False
        if np.broadcast_shapes(self.shape, shape) != self.shape:
            return False
    except Exception:
        return False
    if isinstance(other, D2O) and other.distributor is not self.distributor:
        if self.distributor.replicated:  # the result lies on other's layout, not self's
            return False
        apply_ufunc(ufunc, "__call__", (other, self) if swap else (self, other), {"out": (self,)})
        return True
    local = other.data if isinstance(other, D2O) else other
    if isinstance(other, np.ndarray) and not self.distributor.replicated:
        local = align(other, self.distributor)
    ufunc(*((local, data) if swap else (data, local)), out=data)
    return True


def _held(values: Any) -> bool:
    """True when one of ``values`` is a 0-d view (`HeldScalar`): its piece is scratch on
    the ranks that do not hold the element, so the call runs on replicated copies
    (`d2o.array.slabs.on_slabs`).  Costs one flag test while no 0-d view is alive."""
    return held_in_use[0] > 0 and any(
        isinstance(v, D2O) and type(v.distributor) is HeldScalar for v in values
    )


def _broadcasts(d: Distributor, other: Any) -> bool:
    """Whether an element-wise call with operand ``other`` goes to the runtime (`_FROM` is
    not `NEVER`) because ``other`` is a distributed array of another shape than ``d``'s:
    the result of broadcasting may be larger than ``self`` (``lazy`` records the call)."""
    return (
        _FROM[0] != NEVER
        and isinstance(other, D2O)
        and other.distributor.global_shape != d.global_shape
    )


def _outs(kwargs: dict) -> tuple:
    out = kwargs.get("out")
    return out if isinstance(out, tuple) else () if out is None else (out,)


def _call(ufunc: np.ufunc, *inputs: Any) -> Any:
    return apply_ufunc(ufunc, "__call__", inputs, {})


def _call_into(self: D2O, other: Any, ufunc: np.ufunc) -> D2O:
    apply_ufunc(ufunc, "__call__", (self, other), {"out": (self,)})
    return self


# The operators' methods, made for one ufunc by `binary_operator`, `reflected_operator`
# and `inplace_operator`: in one Python call, the runtime's test (`_FROM`: every call
# while a mode needs them; with only ``lazy`` on, calls of ``lazy_min`` elements or more,
# or that broadcast; none while no mode is on), the 0-d view test, the fast paths and the
# general path.
# ``declare(method)`` makes the method's `Operation` (`d2o.core.registry`); the runtime
# calls the method again with `depth` raised, which skips the runtime's test (as
# ``__array_ufunc__``, `ufunc_method`; a keyword flag would cost each call a lookup of
# the function's keyword defaults).


def _declare(method: Callable, declare: Callable) -> Any:
    """``method``'s `Operation`, made by ``declare``."""
    op = declare(method)
    method.__d2o_operation__ = op  # type: ignore[attr-defined]
    return op


def binary_operator(ufunc: np.ufunc, pyop: Any, declare: Callable, into: bool = False) -> Callable:
    """The method ``self <op> other``, or with ``into`` ``self <op>= other`` (``__iadd__``,
    ...: in self's layout)."""

    def method(self: D2O, other: Any) -> Any:
        d = self.distributor
        if type(other) in SCALAR_TYPES:  # the commonest case first, in fewest steps
            if (d.size < _FROM[0] or depth[0]) and not held_in_use[0]:
                try:
                    if into:
                        self.data = pyop(self.data, other)
                        return self
                    if getrefcount(self) == _TEMP and _reuse(self, other, ufunc, False):
                        return self
                    return _from_local(pyop(self.data, other), d)
                except Exception as exc:
                    return _scalar_failed(exc, self, other, ufunc, into)
            scalar = same = True
        elif isinstance(other, D2O):
            scalar, same = False, other.distributor is d
        else:
            scalar = same = isinstance(other, _SCALARS)
        if (d.size >= _FROM[0] or not same and _broadcasts(d, other)) and not depth[0]:
            return _RUN[0](op, (self, other), {})
        if held_in_use[0] and (  # (`_held` of the two operands, inlined: no call, no tuple)
            type(d) is HeldScalar
            or (not same and isinstance(other, D2O) and type(other.distributor) is HeldScalar)
        ):
            if into:
                return _on_slabs(_call_into, "inplace", (self, other, ufunc), {}, held_only=True)
            return _on_slabs(_call, ufunc.__name__, (ufunc, self, other), {}, held_only=True)
        if into:
            try:
                if scalar:
                    self.data = pyop(self.data, other)
                    return self
                if same:
                    self.data = pyop(self.data, other.data)
                    return self
            except (ValueError, ArithmeticError) as exc:  # data-dependent: see _failed
                defer(d.comm, exc)
                return self
            apply_ufunc(ufunc, "__call__", (self, other), {"out": (self,)})
            return self
        try:
            if getrefcount(self) == _TEMP and _reuse(self, other, ufunc, False):
                return self
            if scalar:
                return _from_local(pyop(self.data, other), d)
            if same:
                return _from_local(pyop(self.data, other.data), d)
            if (
                not isinstance(other, D2O)
                and hasattr(other, "__array_ufunc__")
                and not isinstance(other, np.ndarray)
            ):
                return NotImplemented
        except Exception as exc:
            local = [self.data, other.data if isinstance(other, D2O) else other]
            return _from_local(_failed(exc, d, ufunc, local), d)
        return apply_ufunc(ufunc, "__call__", (self, other), {})

    op = _declare(method, declare)
    return method


def _scalar_failed(exc: Exception, self: D2O, other: Any, ufunc: np.ufunc, into: bool) -> Any:
    """An operator's numpy error with a scalar ``other`` (see `_failed`): in place, a data
    error is deferred to the next collective and self returned unchanged."""
    d = self.distributor
    if into:
        if not isinstance(exc, (ValueError, ArithmeticError)):
            raise exc
        defer(d.comm, exc)
        return self
    return _from_local(_failed(exc, d, ufunc, [self.data, other]), d)


def reflected_operator(ufunc: np.ufunc, pyop: Any, declare: Callable) -> Callable:
    """The method ``other <op> self`` (``__radd__``, ...)."""

    def method(self: D2O, other: Any) -> Any:
        d = self.distributor
        scalar = type(other) in SCALAR_TYPES or isinstance(other, _SCALARS)
        if (d.size >= _FROM[0] or not scalar and _broadcasts(d, other)) and not depth[0]:
            return _RUN[0](op, (self, other), {})
        if held_in_use[0] and (  # (`_held` of the two operands, inlined: no call, no tuple)
            type(d) is HeldScalar
            or (not scalar and isinstance(other, D2O) and type(other.distributor) is HeldScalar)
        ):
            return _on_slabs(_call, ufunc.__name__, (ufunc, other, self), {}, held_only=True)
        if scalar:
            try:
                if getrefcount(self) == _TEMP and _reuse(self, other, ufunc, True):
                    return self
                return _from_local(pyop(other, self.data), d)
            except Exception as exc:
                return _from_local(_failed(exc, d, ufunc, [other, self.data]), d)
        return apply_ufunc(ufunc, "__call__", (other, self), {})

    op = _declare(method, declare)
    return method


def inplace_operator(ufunc: np.ufunc, pyop: Any, declare: Callable) -> Callable:
    """The method ``self <op>= other`` (``__iadd__``, ...): in self's layout."""
    return binary_operator(ufunc, pyop, declare, into=True)


def unary_operator(ufunc: np.ufunc, declare: Callable) -> Callable:
    """The method ``-self``, ``abs(self)``, ...: local (the runtime's test, as the binary
    operators')."""

    def method(self: D2O) -> Any:
        d = self.distributor
        if d.size >= _FROM[0] and not depth[0]:
            return _RUN[0](op, (self,), {})
        if held_in_use[0] and type(d) is HeldScalar:
            return _on_slabs(_call, ufunc.__name__, (ufunc, self), {}, held_only=True)
        try:
            return _from_local(ufunc(self.data), d)
        except Exception as exc:
            return _from_local(_failed(exc, d, ufunc, [self.data]), d)

    op = _declare(method, declare)
    return method


def unary(self: D2O, ufunc: np.ufunc) -> D2O:
    """``-self``, ``abs(self)``, ...: local."""
    if held_in_use[0] and type(self.distributor) is HeldScalar:
        return _on_slabs(_call, ufunc.__name__, (ufunc, self), {}, held_only=True)
    try:
        return _from_local(ufunc(self.data), self.distributor)
    except Exception as exc:
        return _from_local(_failed(exc, self.distributor, ufunc, [self.data]), self.distributor)


def conjugate(self: D2O) -> D2O:
    """The complex conjugate; local."""
    return _from_local(np.conjugate(self.data), self.distributor)
