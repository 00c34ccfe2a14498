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

from typing import Any

import numpy as np

from ._align import SCALARS, _shape_of, align, align_out, result_layout
from ._d2o import distributed_data_object as D2O
from ._distributors import Distributor, get_distributor
from ._errors import agreed, defer

__all__ = ["apply_ufunc", "align", "result_layout"]

_from_local = D2O._from_local
_SCALARS = SCALARS


def _wrap(result: Any, dist: Distributor) -> Any:
    if isinstance(result, tuple):
        return tuple(_from_local(r, dist) for r in result)
    return _from_local(result, dist)


def apply_ufunc(ufunc: np.ufunc, method: str, inputs: tuple, kwargs: dict) -> Any:
    """Apply a numpy ufunc (method ``'__call__'``, ``'reduce'``, ``'accumulate'``)."""
    if method in ("reduce", "accumulate"):
        from . import _reductions
        from ._funnel import _on_slabs

        fn = _reductions.ufunc_reduce if method == "reduce" else _reductions.ufunc_accumulate
        # no mesh algorithm yet: mesh operands run on their slab equivalents
        return _on_slabs(fn, method, (ufunc, *inputs), kwargs)
    if method != "__call__":
        return NotImplemented
    out = kwargs.pop("out", None)
    outs = out if isinstance(out, tuple) else (out,) if out is not None else ()
    shapes = [_shape_of(x) for x in inputs]
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
    local_in = [align(x, target) for x in inputs]
    where = kwargs.get("where", True)
    if where is not True:
        kwargs["where"] = align(where, target)
    if outs:
        kwargs["out"] = tuple(None if o is None else align_out(o, target) for o in outs)
    result = ufunc(*local_in, **kwargs)
    if outs:
        wrapped = tuple(
            o if o is not None else _from_local(r, target)
            for o, r in zip(outs, result if isinstance(result, tuple) else (result,))
        )
        return wrapped if len(wrapped) > 1 else wrapped[0]
    return _wrap(result, target)


def array_ufunc(self: D2O, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
    if ufunc.signature is not None:
        # Generalized ufuncs (matmul, vecdot, ...) are not element-wise: applying them to
        # the local pieces would be wrong.  matmul has a distributed implementation.
        if ufunc is np.matmul and method == "__call__" and not kwargs:
            from ._funnel import _on_slabs
            from ._linalg import matmul

            return _on_slabs(matmul, "matmul", inputs, {})
        return NotImplemented
    if method == "__call__" and not kwargs:
        # Fast path (np.sqrt(obj), np.add(obj, 1)): Python scalars, numpy scalars and
        # operands of self's very layout need no alignment and no agreement (their
        # shapes match on every rank by construction); the layout is result_layout's.
        d = self.distributor
        if not d.replicated or d is get_distributor("not", d.global_shape, d.comm):
            local = []
            for x in inputs:
                if isinstance(x, D2O):
                    if x.distributor is not d:
                        break
                    local.append(x.data)
                elif isinstance(x, _SCALARS):
                    local.append(x)
                else:
                    break
            else:
                try:
                    return _wrap(ufunc(*local), d)
                except Exception as exc:  # data-dependent: only some ranks may see it
                    return _wrap(_failed(exc, d, ufunc, local), d)
    for x in inputs + kwargs.get("out", ()):
        if hasattr(x, "__array_ufunc__") and not isinstance(x, (D2O, np.ndarray, np.generic)):
            return NotImplemented
    return apply_ufunc(ufunc, method, inputs, kwargs)


def _failed(exc: Exception, d: Distributor, ufunc: np.ufunc, local: list) -> Any:
    """A numpy error of purely local work: raised at once on one process, else deferred to
    the next collective (`d2o._errors.defer`); returns a placeholder of zeros.

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


def binary(self: D2O, other: Any, ufunc: np.ufunc, pyop: Any) -> Any:
    """``self <op> other``."""
    try:
        if isinstance(other, _SCALARS):
            return _from_local(pyop(self.data, other), self.distributor)
        if isinstance(other, D2O):
            if other.distributor is self.distributor:
                return _from_local(pyop(self.data, other.data), self.distributor)
        elif hasattr(other, "__array_ufunc__") and not isinstance(other, np.ndarray):
            return NotImplemented
    except Exception as exc:
        local = [self.data, other.data if isinstance(other, D2O) else other]
        return _from_local(_failed(exc, self.distributor, ufunc, local), self.distributor)
    return apply_ufunc(ufunc, "__call__", (self, other), {})


def reflected(self: D2O, other: Any, ufunc: np.ufunc, pyop: Any) -> Any:
    """``other <op> self`` (``__radd__``, ...)."""
    if isinstance(other, _SCALARS):
        try:
            return _from_local(pyop(other, self.data), self.distributor)
        except Exception as exc:
            failed = _failed(exc, self.distributor, ufunc, [other, self.data])
            return _from_local(failed, self.distributor)
    return apply_ufunc(ufunc, "__call__", (other, self), {})


def inplace(self: D2O, other: Any, ufunc: np.ufunc, pyop: Any) -> D2O:
    """``self <op>= other`` (``__iadd__``, ...): in self's layout."""
    try:
        if isinstance(other, _SCALARS):
            self.data = pyop(self.data, other)
            return self
        if isinstance(other, D2O) and other.distributor is self.distributor:
            self.data = pyop(self.data, other.data)
            return self
    except (ValueError, ArithmeticError) as exc:  # data-dependent: see _failed
        defer(self.distributor.comm, exc)
        return self
    apply_ufunc(ufunc, "__call__", (self, other), {"out": (self,)})
    return self


def unary(self: D2O, ufunc: np.ufunc) -> D2O:
    """``-self``, ``abs(self)``, ...: local."""
    try:
        return _from_local(ufunc(self.data), self.distributor)
    except Exception as exc:
        return _from_local(_failed(exc, self.distributor, ufunc, [self.data]), self.distributor)


def conjugate(self: D2O) -> D2O:
    """The complex conjugate; local."""
    return _from_local(np.conjugate(self.data), self.distributor)
