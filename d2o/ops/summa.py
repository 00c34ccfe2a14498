"""Matrix products on 2-D process meshes: SUMMA, and matrix-vector products that never
gather the matrix.

For ``C = A @ B`` with ``A`` (m x k) and ``B`` (k x n) on a ``pr x pc`` mesh (array axis 0
split by mesh axis 0, axis 1 by mesh axis 1; operands in any other layout are first
redistributed to this one, block-cyclic and slabs included), ``k`` is cut into panels at
every boundary of A's column pieces and B's row pieces.  For each panel, the ranks holding
A's columns of it broadcast them along their mesh row (a sub-communicator of ``pc``
ranks), the ranks holding B's rows broadcast along their mesh column (``pr`` ranks), and
every rank adds the product of the two panels to its block of C.

Communication model (the textbook SUMMA): every element of A is broadcast once to the
``pc - 1`` other ranks of its mesh row, every element of B once to the ``pr - 1`` others of
its mesh column: ``(pc - 1) |A| + (pr - 1) |B|`` bytes in all, ``(sqrt(P) - 1)(|A| + |B|)``
on a square mesh; one broadcast per panel per operand, in groups of ``pc`` or ``pr``.
Memory: one panel of each operand besides the operands' pieces and C's.

Matrix times vector (1-d, or a k x 1 column) on a mesh: the vector's piece for each mesh
column (replicated down the column: one redistribution of the vector), a local product,
and one ``Allreduce`` of the partial results along each mesh row; the result is split by
mesh axis 0.  A contraction of length 1 (an outer product) is one panel: only the two
vectors are broadcast, and the first panel's product is C's block (no zero-filled
accumulator).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..array.base import Array as D2O
from ..array.base import from_local as _from_local
from ..layouts.mesh import is_mesh, layout, subcomm
from ..move.redistribution import redistribute

__all__ = ["on_mesh", "summa", "matvec", "vecmat"]


def on_mesh(*ops: Any) -> Any:
    """The 2-D process mesh layout of the first operand on one, or None."""
    for x in ops:
        d: Any = x.distributor if isinstance(x, D2O) else None
        if d is not None and is_mesh(d):
            lay = d.layout
            if len(lay.mesh) == 2:
                return lay
    return None


def _piece(x: Any, target: Any, dtype: np.dtype) -> np.ndarray:
    """This rank's piece of ``x`` (distributed or not) in layout ``target``, as ``dtype``."""
    if isinstance(x, D2O):
        data = redistribute(x.data, x.distributor, target)
    else:
        data = np.asarray(x)[target.local_slice]
    return np.ascontiguousarray(data, dtype=dtype)


def _cuts(d: Any, axis: int, mesh_axis: int) -> list:
    """The (start, stop) of ``axis`` held by each coordinate along ``mesh_axis``."""
    lay = d.layout
    out = []
    for c in range(lay.mesh[mesh_axis]):
        coords = [0, 0]
        coords[mesh_axis] = c
        out.append(d.region(int(np.ravel_multi_index(coords, lay.mesh)))[axis])
    return out


def summa(a: Any, b: Any, lay: Any, dtype: np.dtype) -> D2O:
    """Collective: ``a @ b`` of 2-d operands by SUMMA on the 2-D mesh of ``lay`` (see the
    module notes); the result is split like ``a`` on the mesh (rows by mesh axis 0,
    columns by mesh axis 1)."""
    comm = lay.comm
    grid = layout(lay.mesh, (0, 1), None, comm)
    (m, k), n = np.shape(a), np.shape(b)[1]
    da: Any = grid.distributor((m, k))
    db, dc = grid.distributor((k, n)), grid.distributor((m, n))
    A, B = _piece(a, da, dtype), _piece(b, db, dtype)
    acols, brows = _cuts(da, 1, 1), _cuts(db, 0, 0)
    edges = sorted({e for pair in acols + brows for e in pair})
    row_comm, col_comm = subcomm(da, (1,)), subcomm(da, (0,))
    i, j = da.coords
    C = None  # the first panel's product starts the sum (no zero-filled accumulator)
    for k0, k1 in zip(edges[:-1], edges[1:]):
        ja = next(c for c, (s, e) in enumerate(acols) if s <= k0 < e)
        ib = next(r for r, (s, e) in enumerate(brows) if s <= k0 < e)
        if j == ja:
            s = acols[ja][0]
            Ap = np.ascontiguousarray(A[:, k0 - s : k1 - s])
        else:
            Ap = np.empty((A.shape[0], k1 - k0), dtype=dtype)
        if i == ib:
            s = brows[ib][0]
            Bp = np.ascontiguousarray(B[k0 - s : k1 - s, :])
        else:
            Bp = np.empty((k1 - k0, B.shape[1]), dtype=dtype)
        row_comm.Bcast(Ap, root=ja)
        col_comm.Bcast(Bp, root=ib)
        if Ap.size and Bp.size:
            if C is None:
                C = Ap @ Bp
            else:
                C += Ap @ Bp
    if C is None:  # k == 0, or an empty block of C
        C = np.zeros(dc.local_shape, dtype=dtype)
    return _from_local(C, dc)


def matvec(a: Any, x: Any, lay: Any, dtype: np.dtype) -> D2O:
    """Collective: ``a @ x`` for a 2-d ``a`` on the mesh and a vector ``x`` (1-d, or a k x 1
    column): ``x``'s piece for each mesh column, a local product, one ``Allreduce`` along
    each mesh row; the matrix never moves unless it must first reach the block grid."""
    comm = lay.comm
    grid = layout(lay.mesh, (0, 1), None, comm)
    m, k = np.shape(a)
    xs = np.shape(x)
    da: Any = grid.distributor((m, k))
    A = _piece(a, da, dtype)
    xp = _piece(x, layout(lay.mesh, (None, 0), None, comm).distributor(xs), dtype)
    part = A @ xp
    y = subcomm(da, (1,)).Allreduce(part, "sum")
    return _from_local(y, layout(lay.mesh, (0, None), None, comm).distributor((m,) + xs[1:]))


def vecmat(x: Any, b: Any, lay: Any, dtype: np.dtype) -> D2O:
    """Collective: ``x @ b`` for a vector ``x`` (1-d, or a 1 x k row) and a 2-d ``b`` on the
    mesh (`matvec` transposed: one ``Allreduce`` along each mesh column)."""
    comm = lay.comm
    grid = layout(lay.mesh, (0, 1), None, comm)
    k, n = np.shape(b)
    xs = np.shape(x)
    kax = len(xs) - 1  # x's contracted axis
    db: Any = grid.distributor((k, n))
    B = _piece(b, db, dtype)
    xp = _piece(x, layout(lay.mesh, (kax, None), None, comm).distributor(xs), dtype)
    part = xp @ B
    y = subcomm(db, (0,)).Allreduce(part, "sum")
    return _from_local(y, layout(lay.mesh, (None, kax), None, comm).distributor(xs[:-1] + (n,)))
