"""The dispatch table of `d2o.numpy`: every numpy function, its class, its implementation.

Classes (``KINDS``): element-wise on the pieces, reduction, axis-local, view, joining,
creation, linear algebra, no array data (numpy's own function on dtypes and shapes), and
the bounded fallback (`d2o.ops.axislocal.fallback`) for the rest.  Implementations are built
from numpy's own functions by a few factories (`d2o.numpy.factories`: `_ew`, `_axis`,
`_meta`), so breadth comes from the table, not from hand-written functions.  The families
fill it in turn (``_FAMILIES``: `d2o.numpy.elementwise`, `.shapes`, `.reductions`, `.axes`,
`.products`, `.polynomial`, `.misc`, `.indexing`, `.sorting`, `.assembled`, `.printing`); a
later family refines some entries of an earlier one.  ``docs/coverage.md`` is generated
from it (``tools/numpy_coverage.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..ops.axislocal import fallback
from . import (
    assembled,
    axes,
    elementwise,
    indexing,
    misc,
    polynomial,
    printing,
    products,
    reductions,
    shapes,
    sorting,
)

__all__ = ["TABLE", "KINDS", "DISTRIBUTED", "implementation", "numpy_functions"]

KINDS = {
    "ufunc": "element-wise ufunc (local on the pieces)",
    "local": "element-wise (operands aligned to the result's layout, then local)",
    "reduce": "reduction (local partials, one small combination)",
    "axis": "axis-local (local when the axes it acts along are whole, else one exchange)",
    "view": "view (nothing moves)",
    "join": "joining (local, or one exchange per input)",
    "create": "creation (each rank computes its piece)",
    "linalg": "linear algebra (local products, one reduction)",
    "meta": "no array data (dtypes, shapes, settings: numpy's own)",
    "index": "indexing (owners send what is asked for)",
    "sort": "sort machinery (distributed sort or selection: one all-to-all, no gather)",
    "composed": "composed of distributed building blocks (views, element-wise, joins)",
    "fallback": "bounded fallback (gathers operands up to the fallback limit)",
}
#: The classes that count as a distributed algorithm in the coverage table.
DISTRIBUTED = {
    "ufunc", "local", "reduce", "axis", "view", "join", "create", "linalg", "meta", "index",
    "sort", "composed",
}  # fmt: skip

#: name -> (kind, implementation or None for numpy's own / the fallback, note)
TABLE: dict[str, tuple[str, Callable | None, str]] = {}

#: The families in the order they fill `TABLE`: ``matmul`` and ``vecdot`` (products)
#: replace their generalized-ufunc entries, ``unravel_index`` (indexing) numpy's own
#: (misc), and the sort machinery wraps the axis-local and reduction entries.
_FAMILIES = (
    elementwise.fill,
    shapes.fill,
    reductions.fill,
    axes.fill,
    products.fill,
    polynomial.fill,
    misc.fill,
    indexing.fill,
    sorting.fill,
    assembled.fill,
    printing.fill,
)


def numpy_functions() -> list:
    """numpy's public callable main-namespace names that are functions (not classes)."""
    out = []
    for n in dir(np):
        if n.startswith("_"):
            continue
        f = getattr(np, n)
        if callable(f) and not isinstance(f, type):
            out.append(n)
    return out


def implementation(name: str) -> tuple[str, Callable]:
    """(kind, callable) for ``d2o.numpy.<name>``: the table's entry, or the bounded
    fallback around numpy's own function."""
    kind, impl, _ = TABLE.get(name, ("fallback", None, ""))
    if kind == "fallback" and impl is not None:
        return kind, impl
    if impl is None:
        np_func = getattr(np, name)

        def impl(*args: Any, **kwargs: Any) -> Any:
            return fallback(name, np_func, args, kwargs)

    return kind, impl


for _fill in _FAMILIES:
    _fill(TABLE)
