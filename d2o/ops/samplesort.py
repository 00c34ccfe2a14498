"""Distributed sorting and order statistics: the machinery of ``sort``, ``argsort``,
``lexsort``, ``unique``, ``searchsorted``, the set operations and the quantiles.

The sort of a 1-d array split into slabs (every rank's piece a run of global indices in
rank order) is a sort-first sample sort with exact splitters:

1. every rank sorts its piece (numpy, the requested ``kind``);
2. the splitters are the exact order statistics at the boundaries of the 'equal' slabs
   of the result: a radix selection over order-preserving 64-bit keys of the sorted
   pieces, one byte per round (counts found by ``searchsorted`` on the sorted piece, one
   ``Allreduce`` of 256 counts per boundary per round; bytes that all candidates share
   are skipped after one ``Allreduce`` of the candidates' extremes), then one
   ``Allgather`` of the equal-key run lengths, so that ties split in rank order (stable);
3. one ``Alltoallv`` moves every element at most once, to the rank whose result slab
   holds it;
4. every rank merges the sorted runs it received (numpy's stable sort, which finds runs).

The result has the 'equal' layout exactly, whatever the skew or the duplicates.  Bytes
sent: at most the array's bytes (plus, for ``argsort``, 8 per element of global indices),
plus ``(9 * words) * (P - 1) * 2 KiB`` of counts.

Order statistics without sorting (``median``, ``quantile`` with ``axis=None``) use the
same keys with a radix selection over the unsorted pieces (`order_statistics`).
NaNs order last and complex numbers lexicographically, as numpy sorts them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..core.comm import Comm
from ..layouts.distributors import get_distributor, slab_distributor
from ..move.p2p import route_pieces

__all__ = [
    "sortable",
    "keys",
    "sort_pieces",
    "sort_values",
    "order_statistics",
    "runs_index",
]

_SIGN = np.uint64(1 << 63)
_LOW63 = np.int64(0x7FFFFFFFFFFFFFFF)
_MAX = np.uint64(0xFFFFFFFFFFFFFFFF)
_BYTES = np.arange(1, 256, dtype=np.uint64)
KINDS = ("quicksort", "mergesort", "heapsort", "stable", None)


def sortable(dtype: np.dtype) -> bool:
    """True for the dtypes the distributed sort orders by keys (bool, integers, floats up
    to 64 bits, complex up to 128); others take the bounded fallback."""
    k = dtype.kind
    return k in "biu" or (k == "f" and dtype.itemsize <= 8) or (k == "c" and dtype.itemsize <= 16)


def check_kind(kind: Any) -> None:
    """numpy's ValueError for an unknown sort ``kind``."""
    if kind not in KINDS and not (isinstance(kind, str) and kind[:1].lower() in "qmhs"):
        raise ValueError(f"sort kind must be one of 'quick', 'heap', or 'stable' (got {kind!r})")


def _float_keys(v: np.ndarray, presorted: bool = False) -> np.ndarray:
    """Order-preserving uint64 keys of real floats: -0.0 equals 0.0, every NaN is one key
    above +inf (numpy sorts NaNs last).  ``presorted``: ``v`` is in numpy's sort order,
    so negatives, zeros and NaNs are runs found by bisection instead of masks."""
    v = np.ascontiguousarray(v, dtype=np.float64)
    k = v.view(np.uint64).copy()
    if presorted:
        neg = int(np.searchsorted(v, 0.0, side="left"))
        zero_end = int(np.searchsorted(v, 0.0, side="right"))
        nan_start = int(np.searchsorted(v, np.nan, side="left"))
        np.invert(k[:neg], out=k[:neg])  # negative: all bits flipped
        k[neg:] ^= _SIGN  # non-negative: the sign bit set
        k[neg:zero_end] = _SIGN
        k[nan_start:] = _MAX
        return k
    neg = (v.view(np.int64) >> 63).view(np.uint64)  # all ones for a set sign bit
    k ^= neg | _SIGN
    zero = v == 0
    if zero.any():
        k[zero] = _SIGN
    nan = np.isnan(v)
    if nan.any():
        k[nan] = _MAX
    return k


def keys(v: np.ndarray, presorted: bool = False) -> list:
    """The uint64 key words of ``v`` (lexicographic order of the words = numpy's sort
    order; equal words = equal in numpy's sort).  ``presorted``: ``v`` is sorted."""
    k = v.dtype.kind
    if k == "b":
        return [v.astype(np.uint64)]
    if k == "u":
        return [v.astype(np.uint64)]
    if k == "i":
        return [v.astype(np.int64).view(np.uint64) ^ _SIGN]
    if k == "f":
        return [_float_keys(v, presorted)]
    re, im = np.isnan(v.real), np.isnan(v.imag)
    # numpy: R+Rj, then R+nanj, then nan+Rj, then nan+nanj; a NaN part compares equal
    cls = re.astype(np.uint64) * np.uint64(2) + im.astype(np.uint64)
    return [cls, _float_keys(np.where(re, 0.0, v.real)), _float_keys(np.where(im, 0.0, v.imag))]


def _from_key(word: int, kind: str) -> Any:
    """The value of one key word (the inverse of `keys` for a real dtype kind)."""
    w = np.array([word], dtype=np.uint64)
    if kind in "bu":
        return w[0]
    if kind == "i":
        return (w ^ _SIGN).view(np.int64)[0]
    if w[0] == _MAX:
        return np.nan
    w ^= _SIGN
    bits = w.view(np.int64)
    bits ^= (bits >> 63) & _LOW63
    return bits.view(np.float64)[0]


def value_of(words: tuple, dtype: np.dtype) -> Any:
    """The element of ``dtype`` whose key words are ``words``."""
    if dtype.kind == "c":
        cls, re, im = words
        r = np.nan if cls >= 2 else _from_key(re, "f")
        i = np.nan if cls in (1, 3) else _from_key(im, "f")
        return dtype.type(complex(r, i))
    return dtype.type(_from_key(words[0], dtype.kind))


def _start_shift(diff: int, digit: int = 8) -> int:
    """The shift of the most significant ``digit``-bit digit in which two keys differ
    (``-digit``: none)."""
    return (int(diff).bit_length() - 1) // digit * digit if diff else -digit


def _select_sorted(words: list, targets: list, comm: Comm) -> tuple:
    """Collective: for every global position ``t`` in ``targets`` (0 <= t < n), the local
    run ``[lo, hi)`` of keys equal to the ``t``-th smallest key and ``t``'s rank inside
    the global run of that key.  ``words``: the key words of the sorted local piece."""
    K = len(targets)
    m = len(words[0]) if words else 0
    lo = np.zeros(K, dtype=np.int64)
    hi = np.full(K, m, dtype=np.int64)
    rem = np.asarray(targets, dtype=np.int64).copy()
    for kw in words:
        ext = np.zeros(2 * K, dtype=np.uint64)
        for k in range(K):
            if hi[k] > lo[k]:
                ext[k] = kw[hi[k] - 1]
                ext[K + k] = ~kw[lo[k]]
        g = comm.Allreduce(ext, "max")
        gmax, gmin = g[:K], ~g[K:]
        start = [_start_shift(int(a) ^ int(b)) for a, b in zip(gmin, gmax)]
        prefix = [
            int(gmin[k]) & ~((1 << (start[k] + 8)) - 1) if start[k] >= 0 else int(gmin[k])
            for k in range(K)
        ]
        for shift in range(56, -8, -8):
            active = [k for k in range(K) if start[k] >= shift]
            if not active:
                continue
            counts = np.zeros((len(active), 256), dtype=np.int64)
            firsts = []
            for j, k in enumerate(active):
                sub = kw[lo[k] : hi[k]]
                bounds = np.uint64(prefix[k]) | (_BYTES << np.uint64(shift))
                pos = np.concatenate(([0], np.searchsorted(sub, bounds), [len(sub)]))
                counts[j] = np.diff(pos)
                firsts.append(pos)
            total = comm.Allreduce(counts, "sum")
            for j, k in enumerate(active):
                cum = np.cumsum(total[j])
                b = int(np.searchsorted(cum, rem[k], side="right"))
                rem[k] -= int(cum[b - 1]) if b else 0
                pos = firsts[j]
                lo[k], hi[k] = lo[k] + pos[b], lo[k] + pos[b + 1]
                prefix[k] |= b << shift
    return lo, hi - lo, rem


def _cuts(words: list, m: int, n: int, bounds: tuple, comm: Comm) -> list:
    """Collective: how many of this rank's sorted elements go before each inner boundary
    of ``bounds`` (the result's slab table), ties split in rank order."""
    inner = list(bounds[1:-1])
    sel = [i for i, t in enumerate(inner) if 0 < t < n]
    cuts = [0 if t <= 0 else m for t in inner]
    if sel:
        lo, eq, rem = _select_sorted(words, [inner[i] for i in sel], comm)
        eqs = comm.Allgather(eq)
        before = eqs[: comm.rank].sum(axis=0)
        take = np.clip(rem - before, 0, eq)
        for j, i in enumerate(sel):
            cuts[i] = int(lo[j] + take[j])
    return cuts


def runs_index(cols: list, stable: bool = True) -> np.ndarray:
    """numpy's stable order of records given as columns (first column primary)."""
    if len(cols) == 1:
        return np.argsort(cols[0], kind="stable" if stable else None)
    return np.lexsort(cols[::-1])


def sort_pieces(cols: list, offset: int, n: int, comm: Comm, index: bool = False,
                kind: Any = None) -> tuple:  # fmt: skip
    """Collective: sort the records whose columns' local pieces are ``cols`` (1-d, the
    elements ``offset:offset+len`` of a global length ``n``, first column primary).

    Returns ``(sorted columns, global indices or None, layout)``: the pieces of the
    sorted records on the 'equal' slabs of ``(n,)``; ``index`` adds the records'
    global positions (a stable argsort).  See the module notes for what moves.
    """
    values_only = len(cols) == 1 and not index
    if values_only:
        s = [np.sort(cols[0], kind=kind)]
        perm = None
    else:
        perm = runs_index(cols)
        s = [c[perm] for c in cols]
    out = get_distributor("equal", (n,), comm, 0)
    if comm.size == 1:
        return s, (perm + offset if index else None), out
    words = [w for c in s for w in keys(c, presorted=len(s) == 1)]
    m = len(s[0])
    cuts = _cuts(words, m, n, out.bounds(), comm)
    del words
    sendcounts = np.diff([0, *cuts, m]).tolist()
    payload = s + ([perm + offset] if index else [])
    del perm
    recv, _ = route_pieces(payload, sendcounts, comm)
    del payload, s
    if values_only:
        return [np.sort(recv[0], kind="stable")], None, out
    order = runs_index(recv[: len(cols)])
    res = [r[order] for r in recv]
    return res[: len(cols)], (res[-1] if index else None), out


def sort_values(piece: np.ndarray, n: int, comm: Comm, kind: Any = None) -> tuple:
    """Collective: the sorted values of a real 1-d array whose pieces are ``piece``
    (routed first: no merge).  Returns ``(sorted piece, layout)``.

    Splitters from a sample (every rank draws up to 1024 of its elements; one
    ``Allgather``); each rank counts its elements below and equal to each splitter (one
    ``Allgather`` of the counts), so that ties split exactly in rank order and the cut
    misses the 'equal' boundary only by the sample's error; ``np.partition`` groups the
    piece by destination; one ``Alltoallv`` moves every element at most once; each rank
    sorts what it received.  The result's slabs ('freeform') are balanced to the
    sample's accuracy (within a few per cent of the mean; all-equal and two-valued
    inputs exactly).
    """
    m = len(piece)
    P = comm.size
    bounds = [n * r // P for r in range(P + 1)]  # the 'equal' targets
    rng = np.random.default_rng(comm.rank)
    s = min(m, 1024)
    sample = piece[rng.integers(0, m, s)] if s else piece[:0]
    counts = comm.Allgather(np.array([s], dtype=np.int64))[:, 0].tolist()
    allv = np.sort(comm.Allgatherv(sample, counts))
    S = len(allv)
    splitters = allv[[min(S - 1, S * k // P) for k in range(1, P)]] if S else allv
    less = np.zeros(P - 1, dtype=np.int64)
    eq = np.zeros(P - 1, dtype=np.int64)
    nan = np.isnan(piece) if piece.dtype.kind == "f" else None
    nnan = int(nan.sum()) if nan is not None else 0
    for k, v in enumerate(splitters):
        if nan is not None and np.isnan(v):
            less[k], eq[k] = m - nnan, nnan
        else:
            lt = np.count_nonzero(piece < v)
            less[k], eq[k] = lt, np.count_nonzero(piece <= v) - lt
    table = comm.Allgather(np.concatenate((less, eq, [m])))  # (P, 2(P-1) + 1)
    lt, et = table[:, : P - 1], table[:, P - 1 : -1]
    L, E = lt.sum(axis=0), et.sum(axis=0)
    before = np.cumsum(et, axis=0) - et  # ties held by the ranks before each rank
    target = np.clip(np.asarray(bounds[1:-1]), L, L + E)
    allcuts = np.maximum.accumulate(lt + np.clip(target - L - before, 0, et), axis=1)
    edges = np.concatenate((np.zeros((P, 1), np.int64), allcuts, table[:, -1:]), axis=1)
    sizes = np.diff(edges, axis=1).sum(axis=0)  # what each rank receives
    cuts = allcuts[comm.rank]
    kth = sorted({int(c) for c in cuts if 0 < c < m})
    grouped = np.partition(piece, kth) if kth else np.array(piece)
    sendcounts = np.diff([0, *cuts.tolist(), m]).tolist()
    (recv,), _ = route_pieces([grouped], sendcounts, comm)
    del grouped
    recv.sort(kind=kind)
    offsets = tuple(int(v) for v in np.concatenate(([0], np.cumsum(sizes))))
    return recv, slab_distributor((n,), comm, 0, offsets, "freeform")


def order_statistics(piece: np.ndarray, ks: list, comm: Comm, total: int = 0) -> list:
    """Collective: the ``k``-th smallest elements (0-based, numpy's sort order) of the
    union of every rank's ``piece``, for every ``k`` in ``ks`` (identical on every rank).

    A radix selection over the unsorted pieces, one digit per round (16 bits for a
    ``total`` of 2**22 elements or more, else 8): per key word one ``Allreduce`` of the
    candidates' extremes (digits are taken of the offset from the minimum, so the span's
    leading zero digits are skipped), then per round one
    ``Allreduce`` of 2**digit counts per group of targets that still share their
    candidates; each round keeps only the candidates with the chosen digit.
    """
    if comm.size == 1:
        flat = piece.reshape(-1)
        part = np.partition(flat, list(ks)) if len(ks) else flat
        return [part[k] for k in ks]
    if piece.dtype.kind in "biuf" and total >= 1 << 16 and len(ks):
        return _bracketed(piece.reshape(-1), ks, comm, total)
    words = keys(piece.reshape(-1))
    K = len(ks)
    bits = 16 if total >= 1 << 22 else 8
    mask = np.uint64((1 << bits) - 1)
    cand: list = [np.stack(words, axis=1) if len(words) > 1 else words[0][:, None]] * K
    rem = [int(k) for k in ks]
    chosen: list = [[] for _ in range(K)]
    for w in range(len(words)):
        ext = np.zeros(2 * K, dtype=np.uint64)
        for k in range(K):
            col = cand[k][:, w]
            if col.size:
                ext[k] = col.max()
                ext[K + k] = ~col.min()
        g = comm.Allreduce(ext, "max")
        gmax, gmin = g[:K], ~g[K:]
        # digits of the offset from the candidates' minimum: the leading zero digits of
        # the span (keys of values near zero, small integers) cost no round
        start = [_start_shift(int(b) - int(a), bits) for a, b in zip(gmin, gmax)]
        prefix = [0] * K
        for shift in range(64 - bits, -1, -bits):
            active = [k for k in range(K) if start[k] >= shift]
            if not active:
                continue
            groups: dict = {}  # targets sharing one candidate array count it once
            for k in active:
                groups.setdefault(id(cand[k]), []).append(k)
            s = np.uint64(shift)
            digits, counts = [], np.zeros((len(groups), 1 << bits), dtype=np.int64)
            for j, members in enumerate(groups.values()):
                col = (cand[members[0]][:, w] - gmin[members[0]]) >> s
                d = (col & mask if shift < 64 - bits else col).astype(np.intp)
                counts[j] = np.bincount(d, minlength=1 << bits)
                digits.append(d)
            total = comm.Allreduce(counts, "sum")
            for j, members in enumerate(groups.values()):
                cum = np.cumsum(total[j])
                kept: dict = {}
                for k in members:
                    b = int(np.searchsorted(cum, rem[k], side="right"))
                    rem[k] -= int(cum[b - 1]) if b else 0
                    if b not in kept:
                        kept[b] = cand[k][digits[j] == b]
                    cand[k] = kept[b]
                    prefix[k] |= b << shift
        for k in range(K):
            chosen[k].append(int(gmin[k]) + prefix[k])
    return [value_of(tuple(c), piece.dtype) for c in chosen]


def _bracketed(x: np.ndarray, ks: list, comm: Comm, n: int) -> list:
    """`order_statistics` of real values through brackets from a sample: every rank draws
    up to 8192 of its elements (one ``Allgatherv``); around each target's place in the
    sorted sample a bracket of about 3 standard errors is counted (comparisons, one
    ``Allreduce``), and only the elements inside it (a few per cent) go on to the radix
    selection.  A target outside its bracket (bad luck, or NaNs) takes the radix selection
    of the whole piece."""
    m = len(x)
    rng = np.random.default_rng(4099 + comm.rank)
    s = min(m, 8192)
    sample = x[rng.integers(0, m, s)] if s else x[:0]
    counts = comm.Allgather(np.array([s], dtype=np.int64))[:, 0].tolist()
    allv = np.sort(comm.Allgatherv(sample, counts))
    S = len(allv)
    real = int(np.searchsorted(allv, np.nan, side="left")) if allv.dtype.kind == "f" else S
    delta = int(3 * np.sqrt(S)) + 1
    brackets: dict = {}
    for k in ks:
        p = int(k * S // max(n, 1))
        lo = allv[p - delta] if 0 <= p - delta < real else None
        hi = allv[p + delta] if p + delta < real else None
        brackets.setdefault((lo, hi), []).append(k)
    stats, masks = [], []
    for lo, hi in brackets:
        below = np.count_nonzero(x < lo) if lo is not None else 0
        inside = np.ones(m, dtype=bool) if lo is None else x >= lo
        if hi is not None:
            inside &= x <= hi
        elif x.dtype.kind == "f":
            inside &= ~np.isnan(x)
        masks.append(inside)
        stats.extend([below, np.count_nonzero(inside)])
    tot = comm.Allreduce(np.asarray(stats, dtype=np.int64), "sum")
    found: dict = {}
    for j, members in enumerate(brackets.values()):
        below, inside = int(tot[2 * j]), int(tot[2 * j + 1])
        ok = [k for k in members if below <= k < below + inside]
        if ok:
            vals = order_statistics(x[masks[j]], [k - below for k in ok], comm, 0)
            found.update(zip(ok, vals))
        rest = [k for k in members if k not in found]
        if rest:
            found.update(zip(rest, order_statistics(x, rest, comm, 0)))
    return [found[k] for k in ks]
