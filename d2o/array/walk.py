"""The one walker over call arguments: the distributed arrays among them, and the
arguments with some arrays replaced.

Lists, tuples and dicts are searched (numpy's functions take operands in sequences, and
keyword arguments arrive as a dict).  Used by the slab fallback (`d2o.array.slabs`), the
axis-local mechanism and the bounded fallback (`d2o.ops.axislocal`), d2o.numpy's
dispatch and the checked mode.  Nothing here communicates.

The recursions are module-level functions on purpose: a nested function that calls
itself is a reference cycle, and everything it closes over (the arrays found, gathered
copies) would then live until the garbage collector ran, not until return.
"""

from __future__ import annotations

from typing import Any

from .base import ArrayBase

__all__ = ["find_arrays", "any_array", "substitute"]


def find_arrays(values: Any) -> list:
    """The distributed arrays among ``values`` (searching lists, tuples and dicts), in the
    order they are met."""
    out: list = []
    _collect(values, out)
    return out


def any_array(args: tuple, kwargs: dict) -> bool:
    """Whether a call's arguments hold a distributed array (the first one met ends the
    search; a distributed first argument costs one type test)."""
    for v in args:
        if isinstance(v, ArrayBase) or (type(v) in _CONTAINERS and find_arrays(v)):
            return True
    for v in kwargs.values():
        if isinstance(v, ArrayBase) or (type(v) in _CONTAINERS and find_arrays(v)):
            return True
    return False


_CONTAINERS = (list, tuple, dict)


def _collect(v: Any, out: list) -> None:
    if isinstance(v, ArrayBase):
        out.append(v)
    elif type(v) in (list, tuple):
        for e in v:
            _collect(e, out)
    elif type(v) is dict:
        for e in v.values():
            _collect(e, out)


def substitute(v: Any, table: dict) -> Any:
    """``v`` with every distributed array ``a`` whose ``id`` is in ``table`` replaced by
    ``table[id(a)]`` (the containers rebuilt only where something inside changed)."""
    if isinstance(v, ArrayBase):
        return table.get(id(v), v)
    if type(v) in (list, tuple):
        new = [substitute(e, table) for e in v]
        return v if all(a is b for a, b in zip(new, v)) else type(v)(new)
    if type(v) is dict:
        return {k: substitute(e, table) for k, e in v.items()}
    return v
