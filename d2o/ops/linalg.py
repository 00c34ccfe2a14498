"""Matrix products: ``a @ b``, ``np.matmul``, ``np.dot`` for 1-d and 2-d operands.

The product is picked by the operands' shapes first, then by their layouts.  A is
``m x k``, B is ``k x n`` (a 1-d operand is a 1 x k row or a k x 1 column), P ranks.

* A contraction of length 1 (``k == 1``, both 2-d: an outer product, e.g.
  ``dot(OnesCol, x.T)``): a broadcast multiply of the pieces, no sum.  The result is
  split like A's rows, else like B's columns (the other operand, a vector, is gathered:
  n or m elements; nothing when it is replicated); with both operands replicated it is
  replicated; an operand split only along its length-1 axis sits on one rank, so the
  result is then cut into equal slabs along its longer axis (rows: A's column moves to
  them and B is gathered; columns: the other way round).  numpy's dtype and bits: the
  product of one pair is ``multiply`` for bool and numbers, a zero real product +0.0 as
  matmul's sum makes it (other dtypes take the rules below; complex products may differ
  from BLAS's in the last bit).
* A distributed by rows: each rank computes its rows of the result, which is
  distributed like A's rows.  B no larger than A's largest piece (a matrix times a
  vector or a few columns, e.g. ``dot(F, OnesCol)``) is gathered whole (k x n elements)
  and each rank makes one local product.  A larger B is never gathered: its row blocks
  travel round the ranks (P exchanges of one block each, by
  `_redistribution.exchange`) and each rank adds up the products with its columns of A.
* A distributed by columns: A's columns meet the matching rows of B (B is
  redistributed to A's column offsets), every rank forms a partial product
  and the partials are summed: the result is replicated ('not').
* A replicated: B's distribution carries over (columns stay local; rows give
  partial products that are summed).
* Vectors are 1 x k or k x 1 matrices in these rules, except that a vector
  B meeting A's distributed rows is replicated (it is one row of A long).

A 2-D process mesh: a matrix on the mesh times a vector (1-d, or a k x 1 column) never
gathers the matrix (`d2o.ops.summa.matvec`; a row or 1-d vector times a matrix on the mesh:
`vecmat`); any other product with an operand on a mesh is SUMMA (`d2o.ops.summa.summa`,
which for ``k == 1`` moves only the two vectors).  A vector product whose matrix is not
on a mesh takes the rules above (the vector moves to a slab layout, not the matrix to
the mesh).  Batched (>2-d) products are not implemented and raise TypeError.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..array.base import Array as D2O
from ..array.base import expression
from ..array.base import from_local as _from_local
from ..array.slabs import as_slab
from ..core.errors import agreed
from ..core.registry import operation
from ..layouts.distributors import get_distributor
from ..layouts.mesh import is_mesh
from ..move.redistribution import exchange, redistribute, same_pieces
from . import fused as _fused
from .reductions import agreed_total, combine_partials
from .summa import matvec, on_mesh, summa, vecmat

__all__ = ["matmul", "dot"]


#: dtype kinds whose product of length 1 is their ``multiply`` (bool: and; numbers)
_MULTIPLY_KINDS = "biufc"


def _as_d2o(x: Any, like: D2O) -> D2O:
    if isinstance(x, D2O):
        return x
    arr = np.asarray(x)
    return _from_local(arr, get_distributor("not", arr.shape, like.distributor.comm))


def _replicated(x: D2O) -> np.ndarray:
    d = x.distributor
    if d.replicated:
        return x.data
    return redistribute(x.data, d, get_distributor("not", x.shape, d.comm))


def _outer(a: D2O, b: D2O, dtype: np.dtype) -> D2O:
    """``a @ b`` for an m x 1 ``a`` and a 1 x n ``b`` (slab or replicated): a broadcast
    multiply of the pieces (see the module notes for the layout).  Collective; moves at
    most the vector a rank lacks (n elements of ``b``, or m of ``a``)."""
    da, db = a.distributor, b.distributor
    comm = da.comm
    shape = (a.shape[0], b.shape[1])
    if da.axis == 0:  # A's rows are split: they stay, every rank needs all of b
        col, row, res = a.data, _replicated(b), da.slabs_like(shape, 0)
    elif db.axis == 1:  # B's columns are split
        col, row, res = _replicated(a), b.data, db.slabs_like(shape, 1)
    elif da.replicated and db.replicated:
        col, row, res = a.data, b.data, get_distributor("not", shape, comm)
    elif shape[0] >= shape[1]:  # a vector held by one rank: equal slabs share the work
        res = get_distributor("equal", shape, comm, 0)
        col, row = redistribute(a.data, da, res.slabs_like(a.shape, 0)), _replicated(b)
    else:
        res = get_distributor("equal", shape, comm, 1)
        col, row = _replicated(a), redistribute(b.data, db, res.slabs_like(b.shape, 1))
    return _from_local(_times(col, row, dtype), res)


def _times(col: np.ndarray, row: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``col * row`` (m x 1 times 1 x n) bit for bit as numpy's ``matmul`` has it.  Real
    floats: matmul adds the product to 0, so a zero product is +0.0; only the rows (or
    columns) where one can occur are touched again: a zero ``a_i b_j`` implies a zero
    ``|a_i| min|b|`` (rounding is monotonic)."""
    out = np.multiply(col, row, dtype=dtype)
    if dtype.kind == "f" and out.size:
        c = np.abs(col.astype(dtype, copy=False))[:, 0]
        r = np.abs(row.astype(dtype, copy=False))[0]
        with np.errstate(all="ignore"):
            rows = np.flatnonzero(c * np.fmin.reduce(r) == 0)
            cols = np.flatnonzero(np.fmin.reduce(c) * r == 0)
        if rows.size * out.shape[1] <= cols.size * out.shape[0]:
            out[rows] += 0
        else:
            out[:, cols] += 0
    return out


def _rows_times(a: D2O, b: D2O, out_dtype: np.dtype) -> np.ndarray:
    """This rank's rows of ``a @ b`` for ``a`` distributed along axis 0: ``b`` gathered
    when it is no larger than ``a``'s largest piece, else its row blocks circulate."""
    da, db = a.distributor, b.distributor
    comm = da.comm
    widest = int(np.diff(da.bounds_array()).max()) * a.shape[1]  # A's largest piece
    if db.replicated or comm.size == 1 or b.ndim == 1 or b.size <= widest:
        return np.matmul(a.data, _replicated(b)).astype(out_dtype, copy=False)
    if db.axis != 0:  # B by columns: bring it to rows first (one exchange)
        b = b.copy(distribution_strategy="equal", axis=0)
        db = b.distributor
    out = None
    bounds = db.bounds()
    for step in range(comm.size):
        src = (comm.rank + step) % comm.size
        want = lambda r, s=step: db.region((r + s) % comm.size)  # noqa: E731
        block = (
            exchange(comm, b.data, db.region, want, key=("rotate", db, step)) if step else b.data
        )
        lo, hi = bounds[src], bounds[src + 1]
        if hi > lo:
            part = np.matmul(a.data[:, lo:hi], block)
            if out is None:  # the first product is the accumulator (no zero-filled one)
                out = part.astype(out_dtype, copy=False)
            else:
                out += part
    if out is None:  # k == 0
        out = np.zeros(a.data.shape[:1] + b.shape[1:], dtype=out_dtype)
    return out


def _mesh_matrix(x: Any) -> Any:
    """The 2-D mesh layout of ``x`` when it is a matrix on one, else None."""
    return on_mesh(x) if np.ndim(x) == 2 else None


@operation(kind="linalg", mesh=True)
def matmul(a: Any, b: Any) -> Any:
    """Collective: the matrix product of 1-d/2-d operands (numpy's ``matmul`` semantics);
    the algorithm follows the shapes and layouts (module notes)."""
    if _vectors(a, b):  # a vector times a vector (numpy's dot): nothing to agree on
        return _dot_vectors(a, b)
    lead = a if isinstance(a, D2O) else b
    comm = lead.distributor.comm
    with agreed(comm):
        na, nb = np.ndim(a), np.ndim(b)
        if na == 0 or nb == 0:
            raise ValueError("matmul: Input operand does not have enough dimensions")
        if na > 2 or nb > 2:
            raise TypeError("batched matmul (more than 2 dimensions) is not implemented for "
                            "distributed arrays")  # fmt: skip
        sa, sb = np.shape(a), np.shape(b)
        ka = sa[-1]
        kb = sb[0] if nb == 1 else sb[-2]
        if ka != kb:
            raise ValueError(
                f"matmul: Input operand 1 has a mismatch in its core dimension 0, with gufunc "
                f"signature (n?,k),(k,m?)->(n?,m?) (size {kb} is different from {ka})"
            )
        dtype = np.result_type(*(x.dtype if isinstance(x, D2O) else np.asarray(x) for x in (a, b)))
    column = nb == 1 or sb[1] == 1  # b is a vector: k or k x 1
    row = na == 1 or sa[0] == 1  # a is a vector: k or 1 x k
    lay = _mesh_matrix(a)
    if lay is not None and column:  # matrix on a mesh times a vector: the vector moves
        return matvec(a, b, lay, dtype)
    lay = _mesh_matrix(b)
    if lay is not None and row:
        return vecmat(a, b, lay, dtype)
    lay = on_mesh(a, b)
    if lay is not None and na == 2 and nb == 2 and (ka == 1 or not (column or row)):
        return summa(a, b, lay, dtype)  # (k == 1: an outer product, only the vectors move)
    a, b = as_slab(_as_d2o(a, lead)), as_slab(_as_d2o(b, lead))  # other meshes: as slabs
    a2 = a if a.ndim == 2 else _from_local(a.data[None, :], _row_vector_layout(a))
    res_shape = a2.shape[:1] + b.shape[1:]
    d2 = a2.distributor
    if ka == 1 and b.ndim == 2 and dtype.kind in _MULTIPLY_KINDS:  # an outer product
        res = _outer(a2, b, dtype)
    elif d2.replicated:
        db = b.distributor
        if db.replicated or comm.size == 1:
            local = np.matmul(a2.data, b.data).astype(dtype, copy=False)
            res = _from_local(local, get_distributor("not", res_shape, comm))
        elif b.ndim == 2 and db.axis == 1:
            local = np.matmul(a2.data, b.data).astype(dtype, copy=False)
            res = _from_local(local, db.slabs_like(res_shape, 1))
        else:  # B by rows: partial products over k, summed
            part = np.matmul(a2.data[:, slice(*db.span())], b.data)
            total = combine_partials(part.astype(dtype, copy=False), np.add, db)
            res = _from_local(total, get_distributor("not", res_shape, comm))
    elif d2.axis == 0:
        local = _rows_times(a2, b, dtype)
        res = _from_local(local, d2.slabs_like(res_shape, 0))
    else:  # A by columns: B's matching rows, partial products summed
        want = d2.slabs_like(b.shape, 0)
        b_rows = redistribute(b.data, b.distributor, want)
        part = np.matmul(a2.data, b_rows).astype(dtype, copy=False)
        total = combine_partials(part, np.add, d2)
        res = _from_local(total, get_distributor("not", res_shape, comm))
    if a.ndim == 1:
        return _squeeze_first(res)
    return res if res.ndim else res.data[()]


def _row_vector_layout(a: D2O):
    """Layout of a 1-d array viewed as a 1 x k matrix (its axis becomes axis 1)."""
    d = a.distributor
    shape = (1,) + a.shape
    if d.replicated:
        return get_distributor("not", shape, d.comm)
    return d.slabs_like(shape, 1)


def _squeeze_first(res: D2O) -> Any:
    """Drop the leading length-1 axis of a (1, ...) result; scalars for 0-d."""
    d = res.distributor
    shape = res.shape[1:]
    if not shape:
        return res.data.reshape(())[()]
    if d.replicated:
        return _from_local(res.data[0], get_distributor("not", shape, d.comm))
    if d.axis == 0:  # the single row lives on one rank: replicate the (small) vector
        full = _replicated(res)[0]
        return _from_local(full, get_distributor("not", shape, d.comm))
    return _from_local(res.data[0], d.slabs_like(shape, d.axis - 1))


@operation(kind="linalg", mesh=True)
def dot(a: Any, b: Any) -> Any:
    """Collective: numpy's ``dot`` for 1-d and 2-d operands (``matmul``; scalars multiply)."""
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        return a * b
    return matmul(a, b)


def _vectors(a: Any, b: Any) -> bool:
    """True for two d2o vectors whose pieces are the same boxes (replicated or slabs; the
    same layout, or equal ones: `same_pieces`) and of one real floating dtype:
    `_dot_vectors` takes them.  Global facts: every rank decides alike."""
    if not (isinstance(a, D2O) and isinstance(b, D2O) and a.ndim == 1 == b.ndim):
        return False
    d, db = a.distributor, b.distributor
    return (a.dtype == b.dtype and a.dtype.kind == "f" and (d.replicated or d.axis == 0)
            and not is_mesh(d) and (db is d or same_pieces(d, db)))  # fmt: skip


def _dot_vectors(a: Any, b: Any) -> Any:
    """Collective: ``dot`` of two vectors of one layout (`_vectors`): each rank's partial
    dot and its error in one Allreduce of a 96-byte record (`agreed_total`: O(log P)
    messages; an error on one rank is raised on every rank); a numpy scalar, identical on
    every rank.  Replicated vectors: no communication.  Where both are deferred
    expressions (the ``lazy`` option) the partial is their fused sum of products
    (`d2o.ops.fused.reduce_dot`: one pass, nothing stored; numpy's ``sum(a * b)``, which
    may differ from a BLAS dot in the last bits); otherwise numpy's ``dot`` of the pieces."""
    d, dtype = a.distributor, a.dtype
    error = part = None
    try:
        ea, eb = expression(a), expression(b)
        part = _fused.reduce_dot(ea, eb) if ea is not None and eb is not None else None
        if part is None:
            part = np.dot(a.data, b.data)
    except Exception as exc:
        error = exc
    if d.replicated:  # every rank computed the same from the same data
        if error is not None:
            raise error
        return dtype.type(part)
    return agreed_total(d.comm, error, part, dtype)
