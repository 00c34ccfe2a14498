"""LU factorisation with partial pivoting on 2-D block-cyclic process meshes, and the
triangular solves on top of it (ScaLAPACK's right-looking ``pdgetrf`` and ``pdgetrs``).

Layout.  The matrix is held on a ``pr x pc`` mesh, rows split by mesh axis 0 and columns
by mesh axis 1 (``d2o.layout(mesh, split=(0, 1), block=(mb, nb))``, any mesh shape and
block sizes, square or not); a 1-axis mesh splitting rows block-cyclically counts as
``P x 1``.  Any other layout (slabs, replicated, plain block meshes, views) is first
redistributed ONCE to the default (`default_layout`: the balanced mesh of
``dims_create(P, 2)``, ``pr <= pc``, square blocks of ``min(64, ceil(n / (2 pc)))``); the
trace shows that redistribution as one exchange (``Alltoallw``) of the operand.

Algorithm, per panel (the columns of one column block, ``w <= nb`` wide; at most 64 wide
where the columns are not split):

1. the mesh column owning the panel factors it: per column, a local vectorised pivot
   search and ONE ``Allgather`` in that column's sub-communicator (``pr`` ranks) of each
   rank's candidate (magnitude, row, row values) and of row ``c`` itself: every rank of
   the column then swaps and updates its rows alike (NaN wins the search, as in LAPACK;
   a zero pivot is kept, not divided by: LAPACK's ``info > 0``);
2. the factored panel and its pivots are broadcast along the mesh rows (``pc`` ranks);
3. the panel's row swaps, composed into one permutation, are applied to every other
   column by one ``Alltoallv`` per mesh column (`d2o.move.p2p.route_pieces`);
4. the panel's rows of the trailing columns are gathered along each mesh column
   (``Allgatherv``) and solved with the unit lower triangle (U's block row);
5. the trailing matrix is updated by local GEMMs (numpy ``@``, in row chunks), the next
   panel's columns first: its mesh column factors and broadcasts it (look-ahead of one
   panel) before updating the rest, so the other columns do not wait for it.

Communication model (bytes received, summed over ranks, ``s`` the itemsize, ``N`` the
columns, ``N = n + k`` with ``k`` right-hand sides): L panels along mesh rows
``(pc - 1) n (n + nb) / 2``; U's block rows along mesh columns at most ``(pr - 1) n N``;
row swaps at most ``2 n N (pr - 1) / pr``; pivots ``O(n pr nb)``: `model_bytes`,
``O(n^2 sqrt(P))`` on a square mesh, ``O(n^2 / sqrt(P))`` per rank.  No rank ever holds
more than its piece, two panels (``n / pr x nb``: this one and the look-ahead's), one
block row (``nb x N / pc``), the rows a panel swaps (``2 nb x N / pc``, sent and
received) and a chunk of the GEMM (a quarter of its piece).

Triangular solves (`solve`): the right-hand sides join the matrix as extra columns (HPL's
``[A | b]``), so step 5 applies ``L^-1 P`` to them; back substitution then runs the panels
in reverse: U's panel broadcast along mesh rows, the panel's rows of the right-hand
sides gathered along mesh columns and solved, and a local GEMM updates the rows above.
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

__all__ = [
    "DEFAULT_BLOCK", "Factors", "default_layout", "lu_layout", "factor", "lu_factor",
    "solve", "inverse", "sign_logdet", "model_bytes",
]  # fmt: skip

#: the widest panel and the default block size
DEFAULT_BLOCK = 64
#: elements of the largest temporary of the trailing update (16 MiB of float64; at most a
#: quarter of the rank's piece)
_CHUNK = 1 << 21


def default_layout(comm: Any, n: int) -> Any:
    """The block-cyclic mesh LU redistributes other layouts to: ``dims_create(P, 2)`` ranks
    with the shorter side along the rows (``pr <= pc``, as HPL advises: the pivot search,
    one collective per column among ``pr`` ranks, is on the critical path), square blocks
    of ``min(64, ceil(n / (2 pc)))`` (at least 1); local."""
    pc, pr = dims_create(comm.size, 2)
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
        for c, entry in enumerate(d.runs[1]):
            for s, e in as_runs(entry):
                for p in range(s, min(e, n), DEFAULT_BLOCK):
                    panels.append((p, min(p + DEFAULT_BLOCK, e, n), c))
        self.panels = sorted(panels)

    def block_rows(self, c0: int, c1: int, width: int) -> tuple:
        """``(counts, order)`` of an ``Allgatherv`` of rows ``c0:c1`` along a mesh column:
        elements from each mesh row, and where each gathered row goes."""
        own = self.row_owner[c0:c1]
        counts = np.bincount(own, minlength=self.col_comm.size) * width
        return counts.tolist(), np.argsort(own, kind="stable")


def _panel(P: np.ndarray, rows: np.ndarray, c0: int, g: _Grid, wide: np.dtype) -> np.ndarray:
    """Factor the panel ``P`` (this rank's rows ``rows`` >= ``c0``) inside its mesh column:
    one ``Allgather`` per column.  Returns the pivots and U's diagonal (``2w`` values)."""
    w = P.shape[1]
    comm, ro, me = g.col_comm, g.row_owner, g.me_row
    cplx = P.dtype.kind == "c"
    buf = np.empty(2 + 2 * w, dtype=wide)
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
            buf[2 : 2 + w] = P[s + i]
        else:
            buf[0] = -1.0
        if own:
            buf[2 + w :] = P[s]
        every = comm.Allgather(buf)
        mags = every[:, 0].real
        nan = np.isnan(mags)
        pick = np.flatnonzero(nan) if nan.any() else np.flatnonzero(mags == mags.max())
        win = pick[np.argmin(every[pick, 1].real)]  # ties: the lowest row, as LAPACK
        p = int(every[win, 1].real)
        prow = every[win, 2 : 2 + w].astype(P.dtype)
        if p != c:
            if own:
                P[s] = prow
            if ro[p] == me:
                P[int(np.searchsorted(rows, p))] = every[ro[c], 2 + w :]
        meta[j], meta[w + j] = p, prow[j]
        t = s + 1 if own else s
        if t < nr:
            if prow[j] != 0:
                P[t:, j] /= prow[j]
            if j + 1 < w:
                P[t:, j + 1 :] -= np.outer(P[t:, j], prow[j + 1 :])
        s = t
    return meta


def _rgetrf(A: np.ndarray, j0: int, j1: int, piv: np.ndarray) -> None:
    """Recursive LU with partial pivoting of columns ``j0:j1`` of a panel held whole on
    this rank (``A``'s row ``j`` is the panel's column ``j``'s diagonal row); swaps span
    the panel's width.  Halves meet in GEMMs; columns of 8 or fewer go one by one."""
    if j1 - j0 <= 8:
        cplx = A.dtype.kind == "c"
        for j in range(j0, j1):
            col = A[j:, j]
            mag = np.abs(col.real) + np.abs(col.imag) if cplx else np.abs(col)
            i = j + int(np.argmax(mag))
            piv[j] = i
            if i != j:
                A[[j, i]] = A[[i, j]]
            if A[j, j] != 0:
                A[j + 1 :, j] /= A[j, j]
            if j + 1 < j1:
                A[j + 1 :, j + 1 : j1] -= np.outer(A[j + 1 :, j], A[j, j + 1 : j1])
        return
    h = (j0 + j1) // 2
    _rgetrf(A, j0, h, piv)
    A[j0:h, h:j1] = _unit_lower_inverse(A[j0:h, j0:h]) @ A[j0:h, h:j1]
    A[h:, h:j1] -= A[h:, j0:h] @ A[j0:h, h:j1]
    _rgetrf(A, h, j1, piv)


def _local_panel(P: np.ndarray, c0: int, wide: np.dtype) -> np.ndarray:
    """`_panel` for a mesh column of one rank (``pr == 1``): no communication at all."""
    w = P.shape[1]
    piv = np.empty(w, dtype=np.intp)
    _rgetrf(P, 0, w, piv)
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


def _unit_lower_inverse(L: np.ndarray) -> np.ndarray:
    """The inverse of the unit lower triangle of ``L`` (w x w, by substitution)."""
    w = L.shape[0]
    X = np.eye(w, dtype=L.dtype)
    for i in range(1, w):
        X[i, :i] -= L[i, :i] @ X[:i, :i]
    return X


def _upper_solve(U: np.ndarray, Y: np.ndarray) -> None:
    """``Y <- triu(U)^-1 Y`` in place (w x w, back substitution; a zero gives inf/NaN)."""
    w = U.shape[0]
    for i in range(w - 1, -1, -1):
        if i + 1 < w:
            Y[i] -= U[i, i + 1 :] @ Y[i + 1 :]
        Y[i] /= U[i, i]


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
    return np.ascontiguousarray(P), meta  # as the other ranks receive it


def _update(work: np.ndarray, L: np.ndarray, U: np.ndarray, rows: tuple, q1: int, cols: tuple):
    """The trailing update of local columns ``cols`` (a range; U's columns start at ``q1``)
    below the panel's rows ``rows = (r0, i1)``, in row chunks (local GEMMs)."""
    (r0, i1), (j0, j1) = rows, cols
    if j1 <= j0:
        return
    step = max(1, min(_CHUNK, work.size // 4) // (j1 - j0))  # the product: <= 1/4 of the piece
    Uc = U[:, j0 - q1 : j1 - q1]
    for s in range(i1, work.shape[0], step):
        work[s : s + step, j0:j1] -= L[s - r0 : s - r0 + step] @ Uc


def _step(work: np.ndarray, g: _Grid, k: int, pre: tuple | None, out: tuple) -> tuple | None:
    """Panel ``k`` of the factorisation (see the module notes); ``pre``: the panel already
    factored and broadcast by the look-ahead.  Returns the next panel, factored and
    broadcast, where this rank's mesh column owns it (its columns updated first, the rest
    of the trailing matrix after: the broadcasts along each mesh row stay in order)."""
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
            P = np.empty((len(gr) - r0, w), dtype=work.dtype)
            meta = np.empty(2 * w, dtype=wide)
        g.row_comm.Bcast(P, root=owner)
        g.row_comm.Bcast(meta, root=owner)
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
    part = np.empty((i1 - r0, w + nt), dtype=work.dtype)
    part[:, :w] = P[: i1 - r0]
    part[:, w:] = work[r0:i1, q1:]
    counts, order = g.block_rows(c0, c1, w + nt)
    G = np.empty((w, w + nt), dtype=work.dtype)
    G[order] = g.col_comm.Allgatherv(part, counts).reshape(w, w + nt)
    U = _unit_lower_inverse(G[:, :w]) @ G[:, w:]
    work[r0:i1, q1:] = U[gr[r0:i1] - c0]
    nxt = g.panels[k + 1] if k + 1 < len(g.panels) else None
    if nxt is None or g.me_col != nxt[2]:
        _update(work, P, U, (r0, i1), q1, (q1, len(gc)))
        return None
    a0 = int(np.searchsorted(gc, nxt[0]))
    a1 = a0 + nxt[1] - nxt[0]
    _update(work, P, U, (r0, i1), q1, (a0, a1))  # look-ahead: the next panel first
    ahead = _factor_panel(work, g, nxt[0], nxt[1], wide)
    g.row_comm.Bcast(ahead[0], root=nxt[2])  # sent now: the mesh row's next step starts
    g.row_comm.Bcast(ahead[1], root=nxt[2])  # while this rank finishes its update
    _update(work, P, U, (r0, i1), q1, (q1, a0))
    _update(work, P, U, (r0, i1), q1, (a1, len(gc)))
    return ahead


def factor(work: np.ndarray, d: Any, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Collective: LU with partial pivoting, in place, of the first ``n`` columns of the
    ``n x N`` matrix whose piece in the 2-D mesh layout ``d`` is ``work``; the other
    columns get ``L^-1 P`` applied.  Returns ``(ipiv, diag)`` on every rank: row ``c`` was
    swapped with ``ipiv[c]`` at step ``c`` (LAPACK's, from 0), ``diag`` is U's diagonal.
    Look-ahead of one panel: the next panel's mesh column updates, factors and broadcasts
    it before the rest of its trailing update, so the other columns wait less for it."""
    g = _Grid(d, n)
    ipiv = np.arange(n, dtype=np.intp)
    diag = np.ones(n, dtype=_wide(work.dtype))
    pre = None
    with np.errstate(all="ignore"):
        for k in range(len(g.panels)):
            pre = _step(work, g, k, pre, (ipiv, diag))
    return ipiv, diag


def _back(work: np.ndarray, d: Any, n: int) -> None:
    """Collective: back substitution ``U X = Y`` for the columns after the first ``n``."""
    g = _Grid(d, n)
    gr, gc = g.gr, g.gc
    na = int(np.searchsorted(gc, n))
    Y = work[:, na:]
    kb = Y.shape[1]
    with np.errstate(all="ignore"):
        for c0, c1, owner in reversed(g.panels):
            w = c1 - c0
            i0, i1 = int(np.searchsorted(gr, c0)), int(np.searchsorted(gr, c1))
            if g.me_col == owner:
                lc0 = int(np.searchsorted(gc, c0))
                U = np.ascontiguousarray(work[:i1, lc0 : lc0 + w])
            else:
                U = np.empty((i1, w), dtype=work.dtype)
            g.row_comm.Bcast(U, root=owner)
            if kb == 0:  # alike in the whole mesh column
                continue
            part = np.concatenate([U[i0:i1], Y[i0:i1]], axis=1)
            counts, order = g.block_rows(c0, c1, w + kb)
            G = np.empty((w, w + kb), dtype=work.dtype)
            G[order] = g.col_comm.Allgatherv(part, counts).reshape(w, w + kb)
            X = G[:, w:]
            _upper_solve(G[:, :w], X)
            Y[i0:i1] = X[gr[i0:i1] - c0]
            if i0:
                Y[:i0] -= U[:i0] @ X


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


def _work(a: D2O, lay: Any, k: int, dtype: np.dtype) -> tuple:
    """``(work, dist, aug)``: a fresh piece of ``[a | k columns]`` in ``lay``; the matrix
    redistributed once (nothing moves when ``a`` is in ``lay`` already)."""
    n = a.shape[0]
    dist = lay.distributor((n, n))
    aug = lay.distributor((n, n + k)) if k else dist
    piece = redistribute(a.data, a.distributor, dist)
    if not k:
        return np.array(piece, dtype=dtype, order="C"), dist, aug
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


def solve(a: D2O, b: Any, dtype: np.dtype, singular: type) -> D2O:
    """Collective: ``x`` with ``a @ x = b`` for a square distributed ``a`` and ``b`` of shape
    ``(n,)`` or ``(n, k)`` (distributed or not); ``singular`` is raised on every rank
    when U has a zero pivot.  ``x`` is on ``a``'s LU mesh: split like ``a``'s rows (a
    vector: replicated along mesh rows), columns like ``a``'s."""
    n = a.shape[0]
    lay = lu_layout(a.distributor, n)
    vec = np.ndim(b) == 1
    k = 1 if vec else np.shape(b)[1]
    work, dist, aug = _work(a, lay, k, dtype)
    na = dist.local_shape[1]
    bd = _rhs_dist(aug, n, k)
    if vec:
        rows = layout(lay.mesh, (0, None), (lay.block[0], None), lay.comm).distributor((n,))
        if isinstance(b, D2O):
            piece = redistribute(b.data, b.distributor, rows)
        else:
            piece = np.asarray(b)[rows.local_slice]
        if bd.local_shape[1]:
            work[:, na] = piece
    elif isinstance(b, D2O):
        work[:, na:] = redistribute(b.data, b.distributor, bd)
    else:
        work[:, na:] = np.asarray(b)[bd.local_slice]
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
    and give the solution its layout (one redistribution of ``B``'s columns)."""
    n = dist.global_shape[0]
    k = bd.global_shape[1]
    _, diag = factor(work, aug, n)
    if (diag == 0).any():  # every rank holds the pivots: all raise alike
        raise singular("Singular matrix")
    _back(work, aug, n)
    x = np.ascontiguousarray(work[:, dist.local_shape[1] :])
    lay = dist.layout
    if vec:
        rows = layout(lay.mesh, (0, None), (lay.block[0], None), lay.comm)
        x = redistribute(x, bd, rows.distributor((n, 1)))
        return _from_local(np.ascontiguousarray(x[:, 0]), rows.distributor((n,)))
    out = lay.distributor((n, k))
    return _from_local(redistribute(x, bd, out), out)


def model_bytes(n: int, ncols: int, mesh: tuple, itemsize: int, nb: int = DEFAULT_BLOCK) -> int:
    """The bytes an LU of ``n x ncols`` (``ncols - n`` right-hand sides) in blocks of ``nb``
    may receive, summed over the ranks of a ``pr x pc`` mesh (see the module notes): L
    panels, U's block rows, row swaps, and the pivot search's 16-byte words."""
    pr, pc = mesh
    data = (pc - 1) * n * (n + nb) / 2 + (pr - 1) * n * ncols + 2 * n * ncols * (pr - 1) / pr
    pivots = n * 16 * (pr * (pr - 1) * (2 + 2 * nb) + 2 * pr * (pc - 1))
    return int(itemsize * data + pivots)
