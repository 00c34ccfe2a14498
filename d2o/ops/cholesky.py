"""Cholesky factors and triangular solves on 2-D block-cyclic process meshes.

The matrix lives on a ``pr x pc`` mesh whose axes split its rows and its columns (any
block sizes, block-cyclic or not, square or rectangular blocks; `mesh_grid`).  Other
layouts are redistributed once to the default mesh (`default_layout`: the balanced
``dims_create(P, 2)`` mesh, rows and columns block-cyclic with blocks of
``min(64, ceil(n / (2 max(pr, pc))))``); the trace shows that exchange in the operation's
record.

Cholesky (right-looking, ScaLAPACK's ``pxpotrf`` pattern), per panel ``[k0, k1)`` (the
panels are cut at every block boundary of the rows and of the columns, so one rank owns
the diagonal block and one mesh column the panel):

1. the owner of the diagonal block factors it and broadcasts the factor down its mesh
   column (``b^2`` elements);
2. that mesh column solves its rows of the panel below the diagonal (``P L_kk^{-H}``);
3. the panel is broadcast along each mesh row (each rank gets the panel rows of its own
   rows), then, inside each mesh column, one ``Allgatherv`` gives every rank the panel
   rows whose indices are its own columns (the transposed panel);
4. every rank updates its block of the trailing lower triangle with local GEMMs
   (column chunks above the diagonal are skipped).

Communication model: per panel a rank receives about ``n_k b / pr`` elements along its
mesh row and ``n_k b / pc`` along its mesh column (``n_k`` rows below the panel), so the
whole factorisation moves ``~ n^2 / 2 (1/pr + 1/pc)`` elements into each rank, ``n^2 (pr
+ pc) / 2`` in all: ``n^2 sqrt(P)`` on a square mesh (`bytes_model`).  Nothing is
gathered whole; each rank holds its piece, one panel and the transposed panel.

A non-positive-definite matrix sets a flag on the rank that owns the failing diagonal
block; the factorisation goes on with NaN (same collectives everywhere) and one agreement
at the end raises ``LinAlgError`` on every rank.

Triangular solves (`solve_triangular`, right-looking ``pxtrsm``): for each panel the mesh
row holding the right-hand side's panel rows gets the diagonal block along its mesh row,
solves, and broadcasts the solution down the mesh columns; the mesh column holding the
matrix's panel broadcasts it along the mesh rows and every rank updates its rows of the
right-hand side.  ``T^H`` is first redistributed once (one exchange of the matrix).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..array.base import Array as D2O
from ..array.base import from_local
from ..core.comm import Comm
from ..core.errors import agree
from ..layouts.distributors import as_runs, entry_indices
from ..layouts.mesh import dims_create, is_mesh, layout, permuted, subcomm
from ..move.redistribution import redistribute

__all__ = [
    "mesh_grid", "default_layout", "on_grid", "cholesky", "solve_triangular", "cho_solve",
    "bytes_model", "work_dtype",
]  # fmt: skip

#: The largest block of the default mesh (ScaLAPACK's usual choice).
DEFAULT_BLOCK = 64
#: Local columns updated per GEMM of the trailing update (chunks above the diagonal skipped).
CHUNK = 128


def work_dtype(dtype: np.dtype) -> np.dtype | None:
    """numpy.linalg's working dtype for ``dtype`` (None: not one d2o computes natively)."""
    dt = np.dtype(dtype)
    if dt.kind in "biu":
        return np.dtype(np.float64)
    if dt in (np.float32, np.float64, np.complex64, np.complex128):
        return dt
    return None


def mesh_grid(d: Any) -> tuple | None:
    """``(mr, mc)``: the mesh axes splitting the rows and the columns of a matrix in a 2-D
    mesh layout that splits both (None for any other layout)."""
    if not is_mesh(d) or d.explicit or len(d.layout.mesh) != 2 or d.ndim != 2:
        return None
    if sorted(s for s in d.split if s is not None) != [0, 1]:
        return None
    return d.split.index(0), d.split.index(1)


def default_layout(n: int, comm: Comm) -> Any:
    """The mesh a matrix of order ``n`` in another layout is moved to (module notes)."""
    mesh = dims_create(comm.size, 2)
    block = max(1, min(DEFAULT_BLOCK, -(-n // (2 * max(mesh)))))
    return layout(mesh, (0, 1), block, comm)


def on_grid(x: D2O, dtype: np.dtype) -> tuple:
    """``(local copy as dtype, distributor)`` of a square matrix on a 2-D mesh: its own
    layout when that is one, else the default mesh (one redistribution)."""
    d = x.distributor
    if mesh_grid(d) is not None:
        return np.array(x.data, dtype=dtype), d
    dst = default_layout(x.shape[0], d.comm).distributor(x.shape)
    data = redistribute(x.data, d, dst)
    return np.array(data, dtype=dtype), dst


class _Grid:
    """One side's view of a matrix on the mesh: local row and column indices, who owns
    each row and column, the row and column communicators and the panels."""

    def __init__(self, d: Any, swap: bool = False) -> None:
        mr, mc = mesh_grid(d)
        ar, ac = 0, 1
        if swap:  # the conjugate transpose's view of the same pieces
            mr, mc, ar, ac = mc, mr, 1, 0
        n = d.global_shape[ar]
        self.n = n
        self.me_r, self.me_c = d.coords[mr], d.coords[mc]
        me = d.region(d.comm.rank)
        self.gr, self.gc = entry_indices(me[ar]), entry_indices(me[ac])
        self.row_owner = _owners(d.runs[mr], n)
        self.col_owner = _owners(d.runs[mc], d.global_shape[ac])
        self.pr, self.pc = d.layout.mesh[mr], d.layout.mesh[mc]
        self.row_comm = subcomm(d, (mc,))  # same rows: along my mesh row
        self.col_comm = subcomm(d, (mr,))  # same columns: down my mesh column
        edges = {0, n}
        for runs in (d.runs[mr], d.runs[mc]):
            for entry in runs:
                for a, b in as_runs(entry):
                    edges.update((a, b))
        e = sorted(x for x in edges if 0 <= x <= n)
        self.panels = list(zip(e[:-1], e[1:]))


def _owners(runs: tuple, n: int) -> np.ndarray:
    """The mesh coordinate holding each index of an axis of length ``n``."""
    own = np.zeros(n, dtype=np.intp)
    for c, entry in enumerate(runs):
        for a, b in as_runs(entry):
            own[a:b] = c
    return own


def _solve_right(lkk: np.ndarray, p: np.ndarray) -> np.ndarray:
    """``p @ inv(lkk)^H`` (NaN where ``lkk`` is singular: a failed factor)."""
    if not p.size:
        return p
    try:
        return np.linalg.solve(lkk, p.conj().T).conj().T
    except np.linalg.LinAlgError:
        return np.full_like(p, np.nan)


def _factor(a: np.ndarray, g: _Grid) -> bool:
    """Overwrite the local piece ``a`` with its piece of the lower Cholesky factor (upper
    triangle left as it was); True when this rank found the matrix not positive definite."""
    failed = False
    gr, gc, dt = g.gr, g.gc, a.dtype
    for k0, k1 in g.panels:
        b = k1 - k0
        ir, jc = g.row_owner[k0], g.col_owner[k0]
        r0, r1 = np.searchsorted(gr, (k0, k1))
        c0, c1 = np.searchsorted(gc, (k0, k1))
        if g.me_c == jc:
            lkk = np.empty((b, b), dtype=dt)
            if g.me_r == ir:
                try:
                    lkk[...] = np.linalg.cholesky(a[r0:r1, c0:c1])
                except np.linalg.LinAlgError:
                    failed = True
                    lkk[...] = np.nan
                a[r0:r1, c0:c1] = lkk
            g.col_comm.Bcast(lkk, root=ir)
            panel = np.ascontiguousarray(_solve_right(lkk, a[r1:, c0:c1]))
            a[r1:, c0:c1] = panel
        else:
            panel = np.empty((len(gr) - r1, b), dtype=dt)
        g.row_comm.Bcast(panel, root=jc)
        # the transposed panel: the rows whose indices are my columns, from my mesh column
        cc1 = int(np.searchsorted(gc, k1))
        want = gc[cc1:]
        if not want.size:  # the same on the whole mesh column: nothing left to update
            continue
        owner = g.row_owner[want]
        counts = np.bincount(owner, minlength=g.pr) * b
        mine = g.col_owner[gr[r1:]] == g.me_c
        got = g.col_comm.Allgatherv(panel[mine], counts.tolist()).reshape(-1, b)
        pcol = np.empty_like(got)
        pcol[np.argsort(owner, kind="stable")] = got
        _update(a, panel, pcol, gr, gc, int(r1), cc1)
    return failed


def _update(a: np.ndarray, panel: np.ndarray, pcol: np.ndarray, gr, gc, r1: int, cc1: int):
    """``a[r1:, cc1:] -= panel @ pcol^H`` on the lower triangle (chunks of columns, each
    from its first row on or below the diagonal)."""
    ph = pcol.conj().T
    for q0 in range(cc1, len(gc), CHUNK):
        q1 = min(q0 + CHUNK, len(gc))
        rs = max(r1, int(np.searchsorted(gr, gc[q0])))
        if rs < len(gr):
            a[rs:, q0:q1] -= panel[rs - r1 :] @ ph[:, q0 - cc1 : q1 - cc1]


def _lower_only(a: np.ndarray, gr: np.ndarray, gc: np.ndarray) -> None:
    """Zero the strict upper triangle of a local piece."""
    a[gr[:, None] < gc[None, :]] = 0


def cholesky(x: D2O, dtype: np.dtype, upper: bool = False) -> D2O:
    """Collective: numpy's ``linalg.cholesky`` of a square matrix (module notes); the
    factor is in the mesh layout the matrix was factored on."""
    loc, d = on_grid(x, dtype)
    comm = d.comm
    g = _Grid(d, swap=upper)
    a = np.ascontiguousarray(loc.conj().T) if upper else loc
    failed = _factor(a, g)
    agree(comm, np.linalg.LinAlgError("Matrix is not positive definite") if failed else None)
    _lower_only(a, g.gr, g.gc)
    out = np.ascontiguousarray(a.conj().T) if upper else a
    return from_local(out, d)


def bytes_model(n: int, mesh: tuple, block: int, itemsize: int) -> int:
    """The bytes a Cholesky of order ``n`` with panels of at most ``block`` moves into all
    ranks together (an upper bound): per panel of ``b`` columns with ``n_k`` rows below it,
    ``(pc - 1) n_k b`` along the mesh rows, at most ``pr n_k b`` down the mesh columns and
    ``(pr - 1) b^2`` for the diagonal block; ``sum n_k b <= n^2 / 2``."""
    pr, pc = mesh
    return int(itemsize * ((pr + pc - 1) * n * n / 2 + (pr - 1) * n * block))


# -- triangular solves --------------------------------------------------------------------


def _rhs_layout(d: Any, ndim: int) -> Any:
    """The layout of the right-hand side: rows like the matrix's rows, columns along the
    mesh axis of the matrix's columns (a vector: replicated along it)."""
    mr, mc = mesh_grid(d)
    lay = d.layout
    split: list[int | None] = [None, None]
    split[mr] = 0
    if ndim == 2:
        split[mc] = 1
    return layout(lay.mesh, tuple(split), lay.block, lay.comm)


def _trsm(t: np.ndarray, bl: np.ndarray, g: _Grid, lower: bool) -> bool:
    """Overwrite ``bl`` (this rank's rows of the right-hand side, its own columns) with the
    solution of ``T X = B``; True when a diagonal block here was singular."""
    failed = False
    gr, gc, dt = g.gr, g.gc, bl.dtype
    m = bl.shape[1]
    for k0, k1 in g.panels if lower else g.panels[::-1]:
        b = k1 - k0
        ir, jc = g.row_owner[k0], g.col_owner[k0]
        r0, r1 = np.searchsorted(gr, (k0, k1))
        c0, c1 = np.searchsorted(gc, (k0, k1))
        if g.me_r == ir:
            tkk = np.ascontiguousarray(t[r0:r1, c0:c1]) if g.me_c == jc else np.empty((b, b), dt)
            g.row_comm.Bcast(tkk, root=jc)
            tkk = np.tril(tkk) if lower else np.triu(tkk)
            try:
                xk = np.ascontiguousarray(np.linalg.solve(tkk, bl[r0:r1]))
            except np.linalg.LinAlgError:
                failed = True
                xk = np.full((b, m), np.nan, dtype=dt)
            bl[r0:r1] = xk
        else:
            xk = np.empty((b, m), dtype=dt)
        g.col_comm.Bcast(xk, root=ir)
        rows = slice(r1, None) if lower else slice(0, r0)
        nrow = len(gr) - r1 if lower else r0
        if g.me_c == jc:
            tp = np.ascontiguousarray(t[rows, c0:c1])
        else:
            tp = np.empty((nrow, b), dtype=dt)
        g.row_comm.Bcast(tp, root=jc)
        if tp.size and m:
            bl[rows] -= tp @ xk
    return failed


def solve_triangular(t: D2O, b: Any, lower: bool = True, trans: bool = False) -> D2O:
    """Collective: ``X`` with ``T X = B`` (``T^H X = B`` if ``trans``) for a triangular
    ``T`` (only its ``lower`` or upper triangle is read) and ``B`` of 1 or 2 dimensions
    (module notes).  ``X`` has ``B``'s rows like ``T``'s rows on ``T``'s mesh, its columns
    along the other mesh axis (a vector: replicated along it).  A singular ``T`` raises
    ``LinAlgError`` on every rank."""
    dt = np.result_type(t.dtype, getattr(b, "dtype", np.float64), np.float32)
    dt = work_dtype(dt) or np.dtype(np.complex128 if dt.kind == "c" else np.float64)
    loc, d = on_grid(t, dt)
    if trans:  # T^H on the same mesh: one exchange of the matrix
        loc = redistribute(loc.conj().T, permuted(d, (1, 0)), d)
        lower = not lower
    g = _Grid(d)
    bd = _rhs_layout(d, np.ndim(b)).distributor(np.shape(b))
    if isinstance(b, D2O):
        bl = np.array(redistribute(b.data, b.distributor, bd), dtype=dt)
    else:
        bl = np.array(np.asarray(b)[bd.local_slice], dtype=dt)
    work = bl if bl.ndim == 2 else bl[:, None]
    failed = _trsm(np.asarray(loc), work, g, lower)
    agree(d.comm, np.linalg.LinAlgError("Singular matrix") if failed else None)
    return from_local(bl, bd)


def cho_solve(lfac: D2O, b: Any) -> D2O:
    """Collective: ``x`` with ``A x = b`` from the lower Cholesky factor ``L`` of ``A``:
    ``L y = b``, then ``L^H x = y`` (two `solve_triangular`)."""
    y = solve_triangular(lfac, b, lower=True)
    return solve_triangular(lfac, y, lower=True, trans=True)
