"""Matrix products: ``a @ b``, ``np.matmul``, ``np.dot`` for 1-d and 2-d operands.

Layout rules (A is ``m x k``, B is ``k x n``, P ranks):

* A distributed by rows: each rank computes its rows of the result.  B's row
  blocks travel round the ranks (P exchanges of one block each, by
  `_redistribution.exchange`), so no rank ever holds more of B than one
  block: the result is distributed like A's rows.
* A distributed by columns: A's columns meet the matching rows of B (B is
  redistributed to A's column offsets), every rank forms a partial product
  and the partials are summed: the result is replicated ('not').
* A replicated: B's distribution carries over (columns stay local; rows give
  partial products that are summed).
* Vectors are 1 x k or k x 1 matrices in these rules, except that a vector
  B meeting A's distributed rows is replicated (it is one row of A long).

Either operand on a 2-D process mesh: SUMMA, or a matrix-vector product that never
gathers the matrix (`d2o._summa`).  Batched (>2-d) products are not implemented and
raise TypeError.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._d2o import distributed_data_object as D2O
from ._distributors import get_distributor
from ._errors import agreed
from ._layout import as_slab
from ._redistribution import exchange, redistribute
from ._reductions import combine_partials
from ._summa import matvec, on_mesh, summa, vecmat

__all__ = ["matmul", "dot"]

_from_local = D2O._from_local


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


def _rows_times(a: D2O, b: D2O, out_dtype: np.dtype) -> np.ndarray:
    """This rank's rows of ``a @ b`` for ``a`` distributed along axis 0; B's blocks circulate."""
    da, db = a.distributor, b.distributor
    comm = da.comm
    if db.replicated or comm.size == 1 or b.ndim == 1:
        return np.matmul(a.data, _replicated(b)).astype(out_dtype, copy=False)
    if db.axis != 0:  # B by columns: bring it to rows first (one exchange)
        b = b.copy(distribution_strategy="equal", axis=0)
        db = b.distributor
    out = np.zeros(a.data.shape[:1] + b.shape[1:], dtype=out_dtype)
    bounds = db.bounds()
    for step in range(comm.size):
        src = (comm.rank + step) % comm.size
        want = lambda r, s=step: db.region((r + s) % comm.size)  # noqa: E731
        block = (
            exchange(comm, b.data, db.region, want, key=("rotate", db, step)) if step else b.data
        )
        lo, hi = bounds[src], bounds[src + 1]
        if hi > lo:
            out += np.matmul(a.data[:, lo:hi], block)
    return out


def matmul(a: Any, b: Any) -> Any:
    """Collective: the matrix product of 1-d/2-d operands (numpy's ``matmul`` semantics)."""
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
    lay = on_mesh(a, b)
    if lay is not None:  # a 2-d process mesh: SUMMA, or a product with a vector
        if na == 2 and nb == 2:
            return summa(a, b, lay, dtype)
        if na == 2:
            return matvec(a, b, lay, dtype)
        if nb == 2:
            return vecmat(a, b, lay, dtype)
    a, b = as_slab(_as_d2o(a, lead)), as_slab(_as_d2o(b, lead))  # other meshes: as slabs
    da = a.distributor
    a2 = a if a.ndim == 2 else _from_local(a.data[None, :] if da.replicated else a.data[None, :],
                                           _row_vector_layout(a))  # fmt: skip
    res_shape = a2.shape[:1] + b.shape[1:]
    d2 = a2.distributor
    if d2.replicated:
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


def dot(a: Any, b: Any) -> Any:
    """Collective: numpy's ``dot`` for 1-d and 2-d operands (``matmul``; scalars multiply)."""
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        return a * b
    return matmul(a, b)
