"""The slab-equivalent fallback: operations without a mesh algorithm run on slab copies.

`on_slabs` runs an operation with its mesh operands (process meshes, block-cyclic
layouts, 0-d views) replaced by their slab equivalents (one exchange each) and writes
the results back for operations that write into their first argument (`MUTATING`).
The runtime (`d2o.runtime.funnel`) calls it for the operations that have no mesh
algorithm; indexing and a few operations call it themselves.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..core import trace as _trace
from ..core.errors import agree
from ..layouts.distributors import HeldScalar
from ..layouts.mesh import MeshDistributor, slab_equivalent
from ..move.redistribution import redistribute
from .base import Array as D2O
from .base import from_local as _from_local
from .walk import find_arrays, substitute

__all__ = ["on_slabs", "as_slab", "MUTATING"]

#: Operations that write into their first argument.
MUTATING = {
    "__setitem__", "set_data", "set_full_data", "flatten", "__iadd__", "__isub__", "__imul__",
    "__itruediv__", "__ifloordiv__", "__imod__", "__ipow__", "__iand__", "__ior__", "__ixor__",
    "__ilshift__", "__irshift__", "__imatmul__", "numpy.copyto", "numpy.putmask", "numpy.place",
    "numpy.put", "numpy.fill_diagonal", "numpy.put_along_axis", "sort", "fill",
    "inplace",  # d2o.ops.ufuncs's in-place operators with a 0-d view operand
}  # fmt: skip


_MESH = (MeshDistributor, HeldScalar)
_HELD = (HeldScalar,)


def on_slabs(fn: Callable, name: str, args: tuple, kwargs: dict, held_only: bool = False) -> Any:
    """Run ``fn`` with mesh operands (only 0-d views with ``held_only``) replaced by their
    slab equivalents (one exchange each); results written back for mutating operations.
    Without such operands: ``fn`` itself, after one scan of the arguments."""
    kinds = _HELD if held_only else _MESH
    found = [a for a in find_arrays((args, kwargs)) if type(a.distributor) in kinds]
    if not found:
        return fn(*args, **kwargs)
    table: dict = {}
    swapped: list = []  # (original, slab copy), each array once
    for a in found:
        if id(a) not in table:
            table[id(a)] = as_slab(a)
            swapped.append((a, table[id(a)]))
    new_args = substitute(args, table)
    new_kwargs = substitute(kwargs, table)
    written = set()
    if name in MUTATING and swapped and swapped[0][0] is args[0]:
        written.add(id(args[0]))
    out = kwargs.get("out")
    for o in out if isinstance(out, tuple) else (out,):
        written.add(id(o))
    # The exchanges made the call collective: a rank on which ``fn`` failed without
    # communicating (a key or value bad there only, on a slab a local error) must not
    # return alone or leave the others waiting in the write-back; one agreement (a
    # one-byte allreduce beside two whole exchanges), and nothing is written anywhere.
    error = None
    try:
        res = fn(*new_args, **new_kwargs)
    except Exception as exc:
        error = exc
    agree(swapped[0][0].distributor.comm, error)
    for orig, s in swapped:
        if id(orig) in written:
            if s.shape == orig.shape:
                orig.data[...] = redistribute(s.data, s.distributor, orig.distributor)
            else:  # flatten(inplace=True): the array took another shape
                orig.data, orig.distributor = s.data, s.distributor
        if res is s:
            res = orig
        elif getattr(res, "base", None) is s:
            # a view of the temporary: of orig when the exchange moved nothing, else a copy
            res.base = orig if s.data is orig.data else None
    return res


def as_slab(x: Any) -> Any:
    """``x`` itself, or for an array of a mesh layout a copy on `slab_equivalent` (one
    exchange, counted by the trace; the operation's record counts it in ``via_slab``)."""
    if isinstance(x, D2O) and type(x.distributor) in (MeshDistributor, HeldScalar):
        d = x.distributor
        target = slab_equivalent(d)
        rec = _trace.current[0]
        if rec is not None:  # the trace says that this operation went the slab way
            rec.via_slab += 1
        return _from_local(redistribute(x.data, d, target), target)
    return x
