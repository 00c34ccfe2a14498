"""`d2o.numpy`'s linear algebra and polynomials: their table entries.

Products are local products and one reduction (`d2o.ops.einsum`, ``d2o.dot``); ``outer``
moves its second vector once.  The polynomials are `d2o.numpy.polynomial`'s.
"""

from __future__ import annotations

import numpy as np

from ..array.base import Array as D2O
from ..array.base import from_local as _from_local
from ..array.slabs import as_slab
from ..core.errors import agreed
from ..layouts.distributors import get_distributor
from ..ops.axislocal import elementwise, fallback
from ..ops.einsum import einsum, tensordot
from ..ops.special import HANDLED
from .factories import finish, handled, meta_entry, normalize_axis_index

__all__ = ["fill", "matmul", "vecdot", "outer", "inner", "vander", "cross"]


def matmul(a, b, /, out=None, **kw):
    """numpy's ``matmul``: the distributed product for 1-d and 2-d operands (``d2o.dot``);
    stacks of matrices take the fallback."""
    if np.ndim(a) > 2 or np.ndim(b) > 2 or kw:
        return fallback("matmul", np.matmul, (a, b), dict(kw, out=out))
    res = a @ b if isinstance(a, D2O) else b.__rmatmul__(a)
    return finish(res, out)


def vecdot(x1, x2, /, *, axis=-1, out=None, **kw):
    """numpy's ``vecdot``: ``sum(conj(x1) * x2, axis)`` (element-wise, then a reduction)."""
    n1, n2 = np.ndim(x1), np.ndim(x2)
    if not n1 or not n2 or np.shape(x1)[axis % n1] != np.shape(x2)[axis % n2]:
        raise ValueError("vecdot: the contracted axes must have the same length")
    prod = elementwise(lambda p, q: np.conj(p) * q, [x1, x2])
    return finish(prod.sum(axis=axis, dtype=prod.dtype), out)  # numpy keeps the dtype


def outer(a, b, out=None):
    """numpy's ``outer``: ``a`` keeps its layout along the rows; every rank needs all of
    ``b`` (the second vector moves once)."""
    a1 = a.ravel() if isinstance(a, D2O) else np.ravel(a)
    b1 = b.ravel() if isinstance(b, D2O) else np.ravel(b)
    return finish(elementwise(np.multiply, [a1[:, None], b1[None, :]]), out)


def inner(a, b):
    """numpy's ``inner`` of 1-d arrays (a dot product); others take the fallback."""
    if np.ndim(a) == 1 and np.ndim(b) == 1:
        return HANDLED[np.dot](a, b)
    return fallback("inner", np.inner, (a, b), {})


def vander(x, N=None, increasing=False):
    """numpy's ``vander``: rows stay with the ranks holding ``x``'s elements."""
    n = x.shape[0] if N is None else N
    powers = np.arange(n) if increasing else np.arange(n - 1, -1, -1)

    x = as_slab(x)
    d = x.distributor
    shape = (x.shape[0], powers.size)
    target = get_distributor("not", shape, d.comm) if d.replicated else d.slabs_like(shape, 0)
    with agreed(d.comm):
        piece = np.asarray(x.data)[:, None] ** powers
    return _from_local(piece.astype(np.result_type(x.dtype, powers.dtype)), target)


def cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    """numpy's ``cross``: element-wise over the other axes."""
    if axis is not None:
        axisa = axisb = axisc = axis
    x = a if isinstance(a, D2O) else b
    va = normalize_axis_index(axisa, np.ndim(a)) if np.ndim(a) else 0
    split = () if x.distributor.replicated else x.distributor.split_axes()
    if (
        x is a
        and va in split
        or x is b
        and normalize_axis_index(axisb, np.ndim(b)) in split
        or np.ndim(a) != np.ndim(b)
    ):
        return fallback("cross", np.cross, (a, b), {"axisa": axisa, "axisb": axisb, "axisc": axisc})
    return elementwise(lambda p, q: np.cross(p, q, axisa, axisb, axisc), [a, b])


def fill(table: dict) -> None:
    """Enter the products (after the ufuncs: ``matmul`` and
    ``vecdot`` replace their generalized-ufunc entries)."""
    handled(table, "linalg", "vdot dot")
    table["matmul"] = ("linalg", matmul, "stacks of matrices (more than 2-d) take the fallback")
    table["vecdot"] = ("linalg", vecdot, "")
    table["einsum"] = ("linalg", einsum, "`...` and the interleaved form take the fallback")
    table["tensordot"] = ("linalg", tensordot, "")
    table["einsum_path"] = ("meta", meta_entry(np.einsum_path), "")
    table["outer"] = ("linalg", outer, "")
    table["inner"] = ("linalg", inner, "")
    table["vander"] = ("local", vander, "")
    table["cross"] = ("local", cross, "the vector axis must not be split (else fallback)")
