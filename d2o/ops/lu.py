"""LU factorisation with partial pivoting on 2-D block-cyclic process meshes, and the
triangular solves on top of it (ScaLAPACK's right-looking ``pdgetrf`` and ``pdgetrs``).

Layout.  The matrix is held on a ``pr x pc`` mesh, rows split by mesh axis 0 and columns
by mesh axis 1 (``d2o.layout(mesh, split=(0, 1), block=(mb, nb))``, any mesh shape and
block sizes, square or not); a 1-axis mesh splitting rows block-cyclically counts as
``P x 1``.  Any other layout (slabs, replicated, plain block meshes, views) is first
redistributed ONCE to the default (`default_layout`: the balanced mesh of
``dims_create(P, 2)``, ``pr <= pc``, square blocks of ``min(256, ceil(n / (8 pc)))``
where ``pr == 1``, else ``min(64, ceil(n / (2 pc)))``); the trace shows that redistribution as one exchange
(``Alltoallw``) of the operand.

Algorithm, per panel (the columns of one column block, ``w <= nb`` wide; at most 256 wide
where a mesh column is one rank, at most 64 where it is several):

1. the mesh column owning the panel factors it.  One rank (``pr == 1``): LAPACK
   ``getrf`` on a Fortran-ordered copy of the panel, no communication
   (`d2o.ops.blas.getrf`).  Several: per column, a local vectorised pivot search and
   ONE max-location reduction in that column's sub-communicator (``pr`` ranks) of each
   rank's candidate (magnitude, row, row values) carrying row ``c`` itself (`_Pick`; up
   to 8 ranks the records are gathered and folded locally, which costs less, else
   O(log pr) messages): every rank of the column then swaps and updates its rows alike
   (NaN wins the search; a zero pivot is kept, not divided by: LAPACK's ``info > 0``);
2. the factored panel and its pivots are broadcast along the mesh rows (``pc`` ranks);
3. the panel's row swaps, composed into one permutation, are applied to every other
   column by one ``Alltoallv`` per mesh column (`d2o.move.p2p.route_pieces`; in place,
   no communication, where the mesh column is one rank);
4. the panel's rows of the trailing columns are gathered along each mesh column
   (``Allgatherv``; in place where it is one rank) and solved with the unit lower
   triangle (BLAS ``trsm``: U's block row);
5. the trailing matrix is updated in place by BLAS ``gemm`` (``alpha = -1, beta = 1`` on
   the views, `d2o.ops.blas.gemm_sub`: no temporaries), the next panel's columns first:
   its mesh column factors it and STARTS its broadcast (``Ibcast``, look-ahead of one
   panel) before updating the rest in column chunks, testing the broadcast after each
   (MPI moves data only inside its calls), so the other columns receive it while this
   rank still computes.

Communication model (bytes received, summed over ranks, ``s`` the itemsize, ``N`` the
columns, ``N = n + k`` with ``k`` right-hand sides): L panels along mesh rows
``(pc - 1) n (n + nb) / 2``; U's block rows along mesh columns at most ``(pr - 1) n N``;
row swaps at most ``2 n N (pr - 1) / pr``; pivots ``O(n pr nb)``: `model_bytes`,
``O(n^2 sqrt(P))`` on a square mesh, ``O(n^2 / sqrt(P))`` per rank.  No rank ever holds
more than its piece, two panels (``n / pr x w``: this one and the look-ahead's), one
block row (``w x N / pc``, none where ``pr == 1``) and the rows a panel swaps
(``2 w x N / pc``, sent and received; small column chunks where ``pr == 1``).

Triangular solves (`solve`): by default the right-hand sides join a working copy of the
matrix as extra columns (HPL's ``[A | b]``), so step 5 applies ``L^-1 P`` to them; back
substitution then runs the panels in reverse: U's panel broadcast along mesh rows, the
panel's rows of the right-hand sides gathered along mesh columns and solved (``trsm``),
and a local GEMM updates the rows above.  With ``overwrite_a`` (scipy's convention) a
matrix already on its LU mesh is factored in its own memory (no copy: the piece plus
two panels per rank) and the right-hand sides are solved after: row swaps, then L's
panels forward and U's backward (`_substitute`: ``(pc - 1) n (n + nb) / 2`` more bytes).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..array.base import Array as D2O
from ..array.base import from_local as _from_local
from ..layouts.distributors import as_runs
from ..layouts.mesh import dims_create, explicit, is_mesh, layout, subcomm
from ..move.p2p import route_pieces
from ..move.redistribution import redistribute
from .blas import gemm_sub, getrf, trsm_left

__all__ = [
    "DEFAULT_BLOCK", "WIDEST_PANEL", "Factors", "default_layout", "lu_layout", "factor",
    "lu_factor", "in_place", "solve", "inverse", "sign_logdet", "model_bytes",
]  # fmt: skip

#: the widest panel and the default block size
DEFAULT_BLOCK = 64
#: the widest panel where a mesh column is one rank (LAPACK factors it whole)
WIDEST_PANEL = 256
#: the columns of one chunk of the trailing update while a broadcast is pending
_TEST_COLS = 256
#: elements of the largest temporary of a local row swap
_SWAP_CHUNK = 1 << 16


def default_layout(comm: Any, n: int) -> Any:
    """The block-cyclic mesh LU redistributes other layouts to: ``dims_create(P, 2)`` ranks
    with the shorter side along the rows (``pr <= pc``, as HPL advises: the pivot search,
    one collective per column among ``pr`` ranks, is on the critical path), square blocks
    of ``min(256, ceil(n / (8 pc)))`` where a mesh column is one rank (LAPACK factors the
    panel; GEMMs with a deeper ``k`` run faster; at least 4 blocks per rank balance the
    ranks' turns), else ``min(64, ceil(n / (2 pc)))`` (at least 1); local."""
    pc, pr = dims_create(comm.size, 2)
    if pr == 1:  # at least 4 blocks per rank: the ranks' turns balance
        b = max(1, min(WIDEST_PANEL, -(-n // (8 * pc))))
    else:
        b = max(1, min(DEFAULT_BLOCK, -(-n // (2 * max(pr, pc)))))
    return layout((pr, pc), (0, 1), b, comm)


def lu_layout(d: Any, n: int) -> Any:
    """The layout an LU of an ``n x n`` matrix of layout ``d`` runs on: ``d``'s own when it
    splits rows (block-cyclically) and columns over a 2-D mesh, or rows block-cyclically
    over a 1-axis mesh (as ``P x 1``); else `default_layout`.  Local."""
    if is_mesh(d) and not d.explicit:
        lay = d.layout
        ok = lay.halo == 0 and lay.block[0] is not None
        if ok and len(lay.mesh) == 2 and d.split == (0, 1):
            if lay.block[1] is not None or lay.mesh[1] == 1:
                return lay
        if ok and len(lay.mesh) == 1 and d.split == (0,):
            return layout((lay.mesh[0], 1), (0, 1), (lay.block[0], None), lay.comm)
    return default_layout(d.comm, n)


def _wide(dtype: np.dtype) -> np.dtype:
    """The buffer type of the pivot search: exact for indices and for ``dtype``'s values."""
    return np.dtype(np.complex128 if dtype.kind == "c" else np.float64)


class _Grid:
    """What every step needs to know about the mesh and this rank's piece (local)."""

    __slots__ = ("gr", "gc", "row_comm", "col_comm", "me_row", "me_col", "row_owner", "panels")

    def __init__(self, d: Any, n: int) -> None:
        self.gr = d.global_indices(0)
        self.gc = d.global_indices(1)
        self.row_comm = subcomm(d, (1,))  # the ranks of this mesh row
        self.col_comm = subcomm(d, (0,))  # the ranks of this mesh column
        self.me_row, self.me_col = d.coords
        owner = np.empty(n, dtype=np.intp)
        for c, entry in enumerate(d.runs[0]):
            for s, e in as_runs(entry):
                owner[s:e] = c
        self.row_owner = owner  # the mesh row (rank in a column) holding each row
        panels = []
        wmax = WIDEST_PANEL if self.col_comm.size == 1 else DEFAULT_BLOCK
        for c, entry in enumerate(d.runs[1]):
            for s, e in as_runs(entry):
                for p in range(s, min(e, n), wmax):
                    panels.append((p, min(p + wmax, e, n), c))
        self.panels = sorted(panels)

    def solve_block(self, part: np.ndarray, c0: int, c1: int, lower: bool) -> np.ndarray:
        """Collective along a mesh column: rows ``c0:c1`` of ``[T | B]`` gathered from the
        mesh rows holding them (``part``: this rank's, in order; one ``Allgatherv``), then
        ``T^-1 B`` with the diagonal block ``T``'s lower triangle (unit diagonal) or upper
        one (``lower`` False).  Returns the solved ``w x k`` block, the same on every
        rank of the column."""
        w, width = c1 - c0, part.shape[1]
        own = self.row_owner[c0:c1]
        counts = np.bincount(own, minlength=self.col_comm.size) * width
        order = np.argsort(own, kind="stable")  # where each gathered row goes
        G = np.empty((w, width), dtype=part.dtype)
        G[order] = self.col_comm.Allgatherv(part, counts.tolist()).reshape(w, width)
        X = G[:, w:]
        trsm_left(G[:, :w], X, lower, lower)
        return X


class _Pick:
    """The pivot search's max-location reduction (`d2o.core.comm.Comm.Allreduce` of records):
    each rank's record ``[magnitude, row, owns row c, that row's values (w), row c's
    values (w)]`` of ``wide`` values as uint64 words.  The candidate with the larger
    magnitude wins (NaN wins over any number; ties: the lower row, as LAPACK), and row
    ``c`` comes from the rank that owns it: one reduction carries both rows."""

    __slots__ = ("wide",)

    def __init__(self, wide: Any) -> None:
        self.wide = np.dtype(wide)

    def __call__(self, a: np.ndarray, b: np.ndarray) -> None:
        """Fold record ``a`` (of lower ranks) into ``b`` in place (MPI's user op)."""
        x, y = a.view(self.wide), b.view(self.wide)
        w = (len(x) - 3) // 2
        mx, my = x[0].real, y[0].real
        nx, ny = mx != mx, my != my
        if nx != ny:
            wins = nx
        elif nx or mx == my:
            wins = x[1].real < y[1].real
        else:
            wins = mx > my
        if wins:
            y[:2], y[3 : 3 + w] = x[:2], x[3 : 3 + w]
        if x[2].real:
            y[2], y[3 + w :] = x[2], x[3 + w :]

    def rows(self, gathered: np.ndarray) -> np.ndarray:
        """The fold of every rank's record at once (the gathered rows, few ranks)."""
        v = gathered.view(self.wide)
        w = (v.shape[1] - 3) // 2
        mags = v[:, 0].real
        nan = np.isnan(mags)
        pick = np.flatnonzero(nan) if nan.any() else np.flatnonzero(mags == mags.max())
        out = v[pick[np.argmin(v[pick, 1].real)]]  # the rows are ours: written in place
        owner = v[int(np.argmax(v[:, 2].real))]
        out[2], out[3 + w :] = owner[2], owner[3 + w :]
        return out.view(np.uint64)


_PICKS = {np.dtype(t): _Pick(t) for t in (np.float64, np.complex128)}


def _panel(P: np.ndarray, rows: np.ndarray, c0: int, g: _Grid, wide: np.dtype) -> np.ndarray:
    """Factor the panel ``P`` (this rank's rows ``rows`` >= ``c0``) inside its mesh column:
    per column, a local pivot search and one max-location reduction among the column's
    ranks (`_Pick`: the winning row and row ``c`` travel with it; with few ranks
    `d2o.core.comm.Comm.Allreduce` gathers the records and folds them locally, else O(log
    pr) messages).  Returns the pivots and U's diagonal (``2w`` values)."""
    w = P.shape[1]
    comm, ro, me = g.col_comm, g.row_owner, g.me_row
    cplx = P.dtype.kind == "c"
    pick = _PICKS[wide]
    buf = np.empty(3 + 2 * w, dtype=wide)
    meta = np.empty(2 * w, dtype=wide)
    nr = len(rows)
    s = int(np.searchsorted(rows, c0))
    for j in range(w):
        c = c0 + j
        own = s < nr and rows[s] == c
        buf[:] = 0
        if s < nr:
            col = P[s:, j]
            mag = np.abs(col.real) + np.abs(col.imag) if cplx else np.abs(col)
            i = int(np.argmax(mag))  # the first NaN, else the first largest
            buf[0], buf[1] = mag[i], rows[s + i]
            buf[3 : 3 + w] = P[s + i]
        else:
            buf[0] = -1.0
        if own:
            buf[2] = 1
            buf[3 + w :] = P[s]
        best = comm.Allreduce(buf.view(np.uint64), pick, pick.rows).view(wide)
        p = int(best[1].real)
        prow = best[3 : 3 + w].astype(P.dtype)
        if p != c:
            if own:
                P[s] = prow
            if ro[p] == me:
                P[int(np.searchsorted(rows, p))] = best[3 + w :]
        meta[j], meta[w + j] = p, prow[j]
        t = s + 1 if own else s
        if t < nr:
            if prow[j] != 0:
                P[t:, j] /= prow[j]
            if j + 1 < w:
                P[t:, j + 1 :] -= np.outer(P[t:, j], prow[j + 1 :])
        s = t
    return meta


def _local_panel(P: np.ndarray, c0: int, wide: np.dtype) -> np.ndarray:
    """`_panel` for a mesh column of one rank (``pr == 1``): LAPACK ``getrf`` on the
    Fortran-ordered panel (`d2o.ops.blas.getrf`), no communication at all."""
    w = P.shape[1]
    piv = getrf(P)
    meta = np.empty(2 * w, dtype=wide)
    meta[:w] = piv + c0
    meta[w:] = np.diagonal(P)[:w]
    return meta


def _swap(work: np.ndarray, g: _Grid, c0: int, piv: np.ndarray) -> None:
    """Apply a panel's row swaps to every local column: one ``Alltoallv`` in the mesh
    column of the rows changing rank (none when no row moves)."""
    src: dict = {}
    for j, p in enumerate(piv.tolist()):
        c = c0 + j
        if p != c:
            src[c], src[p] = src.get(p, p), src.get(c, c)
    moves = sorted((dst, s) for dst, s in src.items() if dst != s)
    lc = work.shape[1]
    if not moves or lc == 0:  # alike in the whole mesh column
        return
    comm, gr, ro, me = g.col_comm, g.gr, g.row_owner, g.me_row
    dst = np.array([m[0] for m in moves], dtype=np.intp)
    srow = np.array([m[1] for m in moves], dtype=np.intp)
    if comm.size == 1:  # every row here: moved in place, in column chunks (small temporaries)
        ld, ls = np.searchsorted(gr, dst), np.searchsorted(gr, srow)
        step = max(1, _SWAP_CHUNK // len(moves))
        for s in range(0, lc, step):
            work[ld, s : s + step] = work[ls, s : s + step]
        return
    od, os_ = ro[dst], ro[srow]
    sel = np.flatnonzero(os_ == me)
    sel = sel[np.argsort(od[sel], kind="stable")]
    out = work[np.searchsorted(gr, srow[sel])]
    got = np.flatnonzero(od == me)
    got = got[np.argsort(os_[got], kind="stable")]
    sc = np.bincount(od[sel], minlength=comm.size) * lc
    rc = np.bincount(os_[got], minlength=comm.size) * lc
    (recv,), _ = route_pieces([out], sc, comm, rc)
    work[np.searchsorted(gr, dst[got])] = recv.reshape(-1, lc)


def _factor_panel(work: np.ndarray, g: _Grid, c0: int, c1: int, wide: np.dtype) -> tuple:
    """``(P, meta)``: the panel of columns ``c0:c1`` factored by its mesh column (`_panel`,
    or `_local_panel` where the column is one rank), rows ``>= c0`` only."""
    w = c1 - c0
    r0 = int(np.searchsorted(g.gr, c0))
    lc0 = int(np.searchsorted(g.gc, c0))
    P = np.array(work[r0:, lc0 : lc0 + w], order="F")  # column work: contiguous columns
    if g.col_comm.size == 1:
        meta = _local_panel(P, c0, wide)
    else:
        meta = _panel(P, g.gr[r0:], c0, g, wide)
    return P, meta  # Fortran-ordered, as the other ranks receive it


def _progress(pending: list) -> None:
    """Let MPI move the broadcasts this rank started (``Test``; MPI progresses only inside
    its calls), dropping those done."""
    pending[:] = [r for r in pending if not r.Test()]


def _update(work: np.ndarray, L: np.ndarray, U: np.ndarray, rows: tuple, q1: int, cols: tuple,
            pending: list) -> None:  # fmt: skip
    """The trailing update ``work[i1:, cols] -= L[i1 - r0:] @ U[:, cols - q1]`` below the
    panel's rows ``rows = (r0, i1)``, in place by BLAS (`d2o.ops.blas.gemm_sub`); while
    broadcasts of this rank are ``pending``, in column chunks with a ``Test`` after each."""
    (r0, i1), (j0, j1) = rows, cols
    if j1 <= j0 or i1 >= work.shape[0]:
        return
    step = _TEST_COLS if pending else j1 - j0
    Lb = L[i1 - r0 :]
    for s in range(j0, j1, step):
        e = min(s + step, j1)
        gemm_sub(work[i1:, s:e], Lb, U[:, s - q1 : e - q1])
        if pending:
            _progress(pending)


def _receive(comm: Any, bufs: tuple, root: int) -> None:
    """Broadcasts of ``bufs`` from ``root`` along a mesh row, started and completed here (the
    root of a look-ahead started its own earlier: `_step`)."""
    for req in [comm.Ibcast(b, root=root) for b in bufs]:
        comm.wait(req)


def _step(work: np.ndarray, g: _Grid, k: int, pre: tuple | None, out: tuple,
          pending: list) -> tuple | None:  # fmt: skip
    """Panel ``k`` of the factorisation (see the module notes); ``pre``: the panel already
    factored and broadcast by the look-ahead.  Returns the next panel, factored and its
    broadcast started (its requests in ``pending``), where this rank's mesh column owns
    it (its columns updated first, the rest of the trailing matrix after, testing the
    broadcast between column chunks so that it moves while this rank computes)."""
    ipiv, diag = out
    c0, c1, owner = g.panels[k]
    w = c1 - c0
    gr, gc = g.gr, g.gc
    wide = diag.dtype
    r0 = int(np.searchsorted(gr, c0))
    i1 = int(np.searchsorted(gr, c1))
    mine = g.me_col == owner
    if mine and pre is not None:  # factored and broadcast by the look-ahead
        P, meta = pre
    else:
        if mine:
            P, meta = _factor_panel(work, g, c0, c1, wide)
        else:
            P = np.empty((len(gr) - r0, w), dtype=work.dtype, order="F")
            meta = np.empty(2 * w, dtype=wide)
        _receive(g.row_comm, (P, meta), owner)
    piv = meta[:w].real.astype(np.intp)
    ipiv[c0:c1], diag[c0:c1] = piv, meta[w:]
    _swap(work, g, c0, piv)
    if mine:
        lc0 = int(np.searchsorted(gc, c0))
        work[r0:, lc0 : lc0 + w] = P
    q1 = int(np.searchsorted(gc, c1))
    nt = len(gc) - q1
    if nt == 0:  # alike in the whole mesh column
        return None
    if g.col_comm.size == 1:  # the block row is here: solved in place
        U = work[r0:i1, q1:]
        trsm_left(P[:w], U, True, True)  # U's block row: L11^-1 A12
    else:
        part = np.empty((i1 - r0, w + nt), dtype=work.dtype)
        part[:, :w] = P[: i1 - r0]
        part[:, w:] = work[r0:i1, q1:]
        U = g.solve_block(part, c0, c1, True)
        del part  # not held through the update and the look-ahead's panel
        work[r0:i1, q1:] = U[gr[r0:i1] - c0]
    rows = (r0, i1)
    nxt = g.panels[k + 1] if k + 1 < len(g.panels) else None
    if nxt is None or g.me_col != nxt[2]:
        _update(work, P, U, rows, q1, (q1, len(gc)), pending)
        return None
    a0 = int(np.searchsorted(gc, nxt[0]))
    a1 = a0 + nxt[1] - nxt[0]
    _update(work, P, U, rows, q1, (a0, a1), pending)  # look-ahead: the next panel first
    ahead = _factor_panel(work, g, nxt[0], nxt[1], wide)
    for buf in ahead:  # started now: the mesh row's next step starts while this rank
        req = g.row_comm.Ibcast(buf, root=nxt[2])  # finishes its update
        if req is not None:
            pending.append(req)
    _update(work, P, U, rows, q1, (q1, a0), pending)
    _update(work, P, U, rows, q1, (a1, len(gc)), pending)
    return ahead


def factor(work: np.ndarray, d: Any, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Collective: LU with partial pivoting, in place, of the first ``n`` columns of the
    ``n x N`` matrix whose piece in the 2-D mesh layout ``d`` is ``work``; the other
    columns get ``L^-1 P`` applied.  Returns ``(ipiv, diag)`` on every rank: row ``c`` was
    swapped with ``ipiv[c]`` at step ``c`` (LAPACK's, from 0), ``diag`` is U's diagonal.
    Look-ahead of one panel: the next panel's mesh column updates, factors and starts
    broadcasting it (``Ibcast``) before the rest of its trailing update, so the other
    columns do not wait for it."""
    g = _Grid(d, n)
    ipiv = np.arange(n, dtype=np.intp)
    diag = np.ones(n, dtype=_wide(work.dtype))
    pre = None
    pending: list = []
    with np.errstate(all="ignore"):
        for k in range(len(g.panels)):
            pre = _step(work, g, k, pre, (ipiv, diag), pending)
    for req in pending:
        g.row_comm.wait(req)
    return ipiv, diag


def _substitute(A: np.ndarray, g: _Grid, Y: np.ndarray, lower: bool) -> None:
    """Collective: ``Y <- L^-1 Y`` (``lower``: L's unit lower triangle, panels in order) or
    ``Y <- U^-1 Y`` (U's upper triangle, panels in reverse) with the factors in ``A``, the
    first ``n`` columns of the mesh piece; ``Y``'s rows are ``A``'s (its columns: any on
    each mesh column).  Per panel: the panel's L (or U) part broadcast along mesh rows,
    its rows of ``Y`` gathered along mesh columns and solved (``trsm``), and a local GEMM
    updates the rows below (above)."""
    gr, gc = g.gr, g.gc
    kb = Y.shape[1]
    with np.errstate(all="ignore"):
        for c0, c1, owner in g.panels if lower else reversed(g.panels):
            w = c1 - c0
            i0, i1 = int(np.searchsorted(gr, c0)), int(np.searchsorted(gr, c1))
            rs = slice(i0, None) if lower else slice(0, i1)
            shape = (len(gr) - i0 if lower else i1, w)
            if g.me_col == owner:
                lc0 = int(np.searchsorted(gc, c0))
                T = np.ascontiguousarray(A[rs, lc0 : lc0 + w])
            else:
                T = np.empty(shape, dtype=A.dtype)
            g.row_comm.Bcast(T, root=owner)
            if kb == 0:  # alike in the whole mesh column
                continue
            d0, d1 = (0, i1 - i0) if lower else (i0, i1)  # the panel's rows in T
            part = np.concatenate([T[d0:d1], Y[i0:i1]], axis=1)
            X = g.solve_block(part, c0, c1, lower)
            Y[i0:i1] = X[gr[i0:i1] - c0]
            if lower:
                gemm_sub(Y[i1:], T[d1:], X)
            else:
                gemm_sub(Y[:i0], T[:i0], X)


def _fan_in(A: np.ndarray, g: _Grid, z: np.ndarray, lower: bool) -> np.ndarray:
    """Collective: ``x = L^-1 y`` (``lower``: L's unit lower triangle, panels in order) or
    ``x = U^-1 y`` (panels in reverse) for few right-hand sides, the factors in ``A``
    (the first ``n`` columns of the mesh piece); ScaLAPACK's fan-in ``pdtrsv``.

    ``z`` (this rank's rows x all ``k`` columns, overwritten): this rank's share of ``y``
    (every element on exactly one rank of its mesh row, zeros elsewhere).  Per panel:
    the mesh row holding its rows sums its ranks' ``z`` rows (``Allreduce`` of ``w x k``
    along the mesh row), the owning mesh column gathers them with the panel's diagonal
    block (``Allgatherv`` of ``w x (w + k)``) and solves (``trsm``), and each of its ranks
    updates the ``z`` rows below (above) with its own part of the panel (a local GEMM).
    U's (L's) panels never move: ``O(n k (pr + pc))`` bytes in all, the GEMMs spread over
    every rank.  Returns ``x``'s rows ``g.gc[:len(x)]`` (those of this mesh column's
    panels, alike on each rank of the mesh column)."""
    gr, gc = g.gr, g.gc
    k = z.shape[1]
    x = np.empty((int(np.searchsorted(gc, len(g.row_owner))), k), dtype=z.dtype)
    with np.errstate(all="ignore"):
        for c0, c1, owner in g.panels if lower else reversed(g.panels):
            w = c1 - c0
            i0, i1 = int(np.searchsorted(gr, c0)), int(np.searchsorted(gr, c1))
            r = g.row_comm.Allreduce(z[i0:i1], "sum") if i1 > i0 else z[i0:i1]
            if g.me_col != owner:
                continue
            lc0 = int(np.searchsorted(gc, c0))
            part = np.empty((i1 - i0, w + k), dtype=z.dtype)
            part[:, :w] = A[i0:i1, lc0 : lc0 + w]
            part[:, w:] = r
            X = g.solve_block(part, c0, c1, lower)
            x[lc0 : lc0 + w] = X
            if lower:
                gemm_sub(z[i1:], A[i1:, lc0 : lc0 + w], X)
            else:
                gemm_sub(z[:i0], A[:i0, lc0 : lc0 + w], X)
    return x


def _seed(x: np.ndarray, g: _Grid) -> np.ndarray:
    """`_fan_in`'s ``z`` from an earlier `_fan_in`'s ``x``: each row on the rank of its
    mesh row whose mesh column holds it (local)."""
    gc = g.gc[: len(x)]
    z = np.zeros((len(g.gr), x.shape[1]), dtype=x.dtype)
    common, ir, ic = np.intersect1d(g.gr, gc, assume_unique=True, return_indices=True)
    z[ir] = x[ic]
    return z


def _x_dist(dist: Any, k: int) -> Any:
    """The layout of `_fan_in`'s ``x`` (``k`` columns) for the factors in ``dist``: rows as
    the mesh columns hold the matrix's columns, whole along each mesh column (explicit)."""
    cols = tuple(tuple(as_runs(entry)) for entry in dist.runs[1])
    return explicit(dist.layout, (dist.global_shape[0], k), (None, 0), (None, cols))


def _back(A: np.ndarray, dist: Any, Y: np.ndarray, bd: Any, lower: bool) -> tuple:
    """``(x, its layout)``: `_fan_in` of the right-hand sides ``Y`` (this rank's piece in
    ``bd``, the columns of ``[A | B]`` or alike) with L (``lower``, then U) or U alone."""
    g = _Grid(dist, dist.global_shape[0])
    z = np.zeros((len(g.gr), bd.global_shape[1]), dtype=Y.dtype)
    z[:, bd.global_indices(1)] = Y
    x = _fan_in(A, g, z, lower)
    if lower:
        x = _fan_in(A, g, _seed(x, g), False)
    return x, _x_dist(dist, bd.global_shape[1])


class Factors:
    """The LU factors of a square matrix on a mesh: ``data`` (this rank's piece of L and U
    in ``dist``), ``ipiv`` and ``diag`` (U's diagonal), the same on every rank."""

    __slots__ = ("data", "dist", "ipiv", "diag")

    def __init__(self, data: np.ndarray, dist: Any, ipiv: np.ndarray, diag: np.ndarray) -> None:
        self.data, self.dist, self.ipiv, self.diag = data, dist, ipiv, diag

    @property
    def singular(self) -> bool:
        """True where U has an exact zero on its diagonal (alike on every rank)."""
        return bool((self.diag == 0).any())


def _fresh(piece: np.ndarray, a: D2O, dtype: np.dtype) -> np.ndarray:
    """``piece`` as a working copy: itself where the redistribution made it (a new C-ordered
    array of ``dtype``, sharing nothing with ``a``), else a copy."""
    if piece.dtype == dtype and piece.flags.c_contiguous and not np.shares_memory(piece, a.data):
        return piece
    return np.array(piece, dtype=dtype, order="C")


def _work(a: D2O, lay: Any, k: int, dtype: np.dtype) -> tuple:
    """``(work, dist, aug)``: a fresh piece of ``[a | k columns]`` in ``lay``; the matrix
    redistributed once (nothing moves when ``a`` is in ``lay`` already)."""
    n = a.shape[0]
    dist = lay.distributor((n, n))
    aug = lay.distributor((n, n + k)) if k else dist
    piece = redistribute(a.data, a.distributor, dist)
    if not k:
        return _fresh(piece, a, dtype), dist, aug
    work = np.empty(aug.local_shape, dtype=dtype)
    work[:, : dist.local_shape[1]] = piece
    return work, dist, aug


def lu_factor(a: D2O, dtype: np.dtype) -> Factors:
    """Collective: the LU factors of the square distributed matrix ``a`` as ``dtype`` (one
    redistribution when ``a`` is not on a block-cyclic mesh, see `lu_layout`)."""
    n = a.shape[0]
    work, dist, _ = _work(a, lu_layout(a.distributor, n), 0, dtype)
    ipiv, diag = factor(work, dist, n)
    return Factors(work, dist, ipiv, diag)


def sign_logdet(f: Factors) -> tuple:
    """``(sign, log|det|)`` from the factors (local: every rank holds the pivots)."""
    swaps = int((f.ipiv != np.arange(len(f.ipiv))).sum())
    d = f.diag
    with np.errstate(all="ignore"):
        mag = np.abs(d)
        sign = (-1.0) ** swaps * (np.prod(d / mag) if d.dtype.kind == "c" else np.prod(np.sign(d)))
        logdet = np.sum(np.log(mag))
    if f.singular:
        return sign * 0, -np.inf
    return sign, logdet


def _rhs_dist(aug: Any, n: int, k: int) -> Any:
    """The layout of the right-hand sides as the columns ``n:n+k`` of ``aug`` (explicit)."""
    cols = []
    for entry in aug.runs[1]:
        runs = tuple((max(s, n) - n, e - n) for s, e in as_runs(entry) if e > n)
        cols.append(runs)
    return explicit(aug.layout, (n, k), (0, 1), (aug.runs[0], tuple(cols)))


def _rhs(b: Any, lay: Any, bd: Any, vec: bool, out: np.ndarray) -> None:
    """Write this rank's piece of the right-hand sides ``b`` (in ``bd``: a vector lies on
    the mesh column holding column 0) into ``out`` (one redistribution of a distributed
    ``b``; a numpy ``b``'s piece is sliced out)."""
    n = bd.global_shape[0]
    if vec:
        rows = layout(lay.mesh, (0, None), (lay.block[0], None), lay.comm).distributor((n,))
        if isinstance(b, D2O):
            piece = redistribute(b.data, b.distributor, rows)
        else:
            piece = np.asarray(b)[rows.local_slice]
        if bd.local_shape[1]:
            out[:, 0] = piece
    elif isinstance(b, D2O):
        out[...] = redistribute(b.data, b.distributor, bd)
    else:
        out[...] = np.asarray(b)[bd.local_slice]


def in_place(a: D2O, dtype: np.dtype) -> bool:
    """True where `solve` may factor ``a``'s own piece (``overwrite_a``): ``a`` of ``dtype``
    on its LU layout (`lu_layout`), its piece C-ordered and writeable."""
    d = a.distributor
    return (
        a.dtype == dtype
        and lu_layout(d, a.shape[0]) is getattr(d, "layout", None)
        and getattr(d, "split", None) == (0, 1)
        and a.data.flags.c_contiguous
        and a.data.flags.writeable
    )


def solve(a: D2O, b: Any, dtype: np.dtype, singular: type, overwrite_a: bool = False) -> D2O:
    """Collective: ``x`` with ``a @ x = b`` for a square distributed ``a`` and ``b`` of shape
    ``(n,)`` or ``(n, k)`` (distributed or not); ``singular`` is raised on every rank
    when U has a zero pivot.  ``x`` is on ``a``'s LU mesh: split like ``a``'s rows (a
    vector: replicated along mesh rows), columns like ``a``'s.

    By default the LU runs on ``[a | b]`` (a working copy).  With ``overwrite_a`` and ``a``
    `in_place`, ``a``'s own piece is factored in place (no copy: its values become L and
    U) and ``b`` is solved after: pivots applied (one ``Alltoallv`` per mesh column),
    then L's and U's panels broadcast along mesh rows (`_substitute`)."""
    n = a.shape[0]
    lay = lu_layout(a.distributor, n)
    vec = np.ndim(b) == 1
    k = 1 if vec else np.shape(b)[1]
    if overwrite_a and in_place(a, dtype):
        dist = a.distributor
        bd = _rhs_dist(lay.distributor((n, n + k)), n, k)
        Y = np.empty(bd.local_shape, dtype=dtype)
        _rhs(b, lay, bd, vec, Y)
        ipiv, diag = factor(a.data, dist, n)
        if (diag == 0).any():  # every rank holds the pivots: all raise alike
            raise singular("Singular matrix")
        g = _Grid(dist, n)
        _swap(Y, g, 0, ipiv)
        if _few(k, dist):
            x, xd = _back(a.data, dist, Y, bd, True)
            return _result(x, xd, lay, vec)
        _substitute(a.data, g, Y, True)
        _substitute(a.data, g, Y, False)
        return _result(Y, bd, lay, vec)
    work, dist, aug = _work(a, lay, k, dtype)
    bd = _rhs_dist(aug, n, k)
    _rhs(b, lay, bd, vec, work[:, dist.local_shape[1] :])
    return _finish(work, dist, aug, bd, singular, vec)


def inverse(a: D2O, dtype: np.dtype, singular: type) -> D2O:
    """Collective: ``a``'s inverse, by `solve` with the identity built in place (no
    communication for it); the result is in ``a``'s LU layout."""
    n = a.shape[0]
    lay = lu_layout(a.distributor, n)
    work, dist, aug = _work(a, lay, n, dtype)
    bd = _rhs_dist(aug, n, n)
    na = dist.local_shape[1]
    work[:, na:] = bd.global_indices(0)[:, None] == bd.global_indices(1)[None, :]
    return _finish(work, dist, aug, bd, singular, False)


def _finish(work: np.ndarray, dist: Any, aug: Any, bd: Any, singular: type, vec: bool) -> D2O:
    """Factor ``[A | B]``, raise ``singular`` everywhere on a zero pivot, back-substitute
    and give the solution its layout (`_result`)."""
    n = dist.global_shape[0]
    na = dist.local_shape[1]
    _, diag = factor(work, aug, n)
    if (diag == 0).any():  # every rank holds the pivots: all raise alike
        raise singular("Singular matrix")
    Y = work[:, na:]
    if _few(bd.global_shape[1], dist):
        x, xd = _back(work[:, :na], dist, Y, bd, False)
        return _result(x, xd, dist.layout, vec)
    _substitute(work[:, :na], _Grid(dist, n), Y, False)
    return _result(np.ascontiguousarray(Y), bd, dist.layout, vec)


def _few(k: int, dist: Any) -> bool:
    """True (alike on every rank) where ``k`` right-hand sides take the fan-in solve
    (`_fan_in`: each rank then holds all ``k`` columns of its rows, about its share of
    the matrix at most), else the panels move (`_substitute`: each rank solves its own
    columns of the right-hand sides)."""
    return k <= DEFAULT_BLOCK or k * dist.layout.mesh[1] <= dist.global_shape[0]


def _result(x: np.ndarray, xd: Any, lay: Any, vec: bool) -> D2O:
    """The solution, this rank's piece ``x`` in ``xd``, on the LU mesh ``lay`` (one
    redistribution)."""
    n, k = xd.global_shape
    if vec:
        rows = layout(lay.mesh, (0, None), (lay.block[0], None), lay.comm)
        x = redistribute(x, xd, rows.distributor((n, 1)))
        return _from_local(np.ascontiguousarray(x[:, 0]), rows.distributor((n,)))
    out = lay.distributor((n, k))
    return _from_local(redistribute(x, xd, out), out)


def model_bytes(n: int, ncols: int, mesh: tuple, itemsize: int, nb: int = DEFAULT_BLOCK) -> int:
    """The bytes an LU of ``n x ncols`` (``ncols - n`` right-hand sides) in blocks of ``nb``
    may receive, summed over the ranks of a ``pr x pc`` mesh (see the module notes): L
    panels, U's block rows, row swaps, and the pivot search's 16-byte words."""
    pr, pc = mesh
    data = (pc - 1) * n * (n + nb) / 2 + (pr - 1) * n * ncols + 2 * n * ncols * (pr - 1) / pr
    pivots = n * 16 * (pr * (pr - 1) * (3 + 2 * nb) + 2 * pr * (pc - 1))
    return int(itemsize * data + pivots)
