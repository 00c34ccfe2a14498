"""Distributed FFTs: slab transposes plus local FFTs (scipy.fft when installed, else numpy.fft).

All transforms are collective and match ``numpy.fft`` (same normalisations,
``s``/``n`` cropping and zero-padding, result dtypes of the local backend).
No rank ever holds the whole array.

How an axis is transformed
--------------------------
* Axes that are not distributed are transformed locally, all at once.
* The distributed axis is moved away by one all-to-all (a global transpose,
  `d2o.move.redistribution.redistribute`) to the longest other axis with at least
  as many entries as there are processes, transformed locally, and left there
  until the end.
* When no such axis exists (1-D arrays, or only short other axes), the
  distributed axis is transformed in place by the four-step algorithm: view
  ``n = n1 * n2`` as an ``(n2, n1)`` array, FFT the columns, multiply by
  twiddle factors, FFT the rows, and reorder, with three all-to-alls.  Lengths
  without a split with ``n1 >= processes`` (primes, tiny ``n``) use Bluestein's
  chirp-z algorithm on a power-of-two length ``M >= 2n - 1`` (three four-step
  FFTs of length ``M``: about four times the memory of the input's share).

Output layout
-------------
The result has the input's strategy and distributed axis (a 'freeform' input
whose distributed length changes comes back 'equal'), unless ``dist_axis``
asks for another distributed axis: passing the axis the transform ends on
saves the transpose back (e.g. ``rfftn(x, dist_axis=1)`` for a 2-D ``x``
distributed along axis 0 costs one all-to-all instead of two).  Replicated
('not') inputs are transformed locally on every rank.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..array.base import Array as D2O
from ..array.base import from_local as _from_local
from ..array.slabs import as_slab
from ..core.comm import as_comm
from ..core.errors import agreed
from ..core.registry import operation
from ..layouts.distributors import (
    Distributor,
    get_distributor,
    like,
    normalize_axis,
    slab_distributor,
)
from ..layouts.mesh import is_mesh, layout
from ..move.redistribution import exchange, redistribute

_BACKEND: list = []


def backend():
    """The local FFT module: scipy.fft when installed, else numpy.fft (imported on first use,
    so that ``import d2o`` does not pay for scipy)."""
    if not _BACKEND:
        try:  # pragma: no cover - depends on the environment
            import scipy.fft as mod

            _BACKEND[:] = [mod, "scipy.fft", {"overwrite_x": True}]
        except ImportError:  # pragma: no cover
            _BACKEND[:] = [np.fft, "numpy.fft", {}]
    return _BACKEND[0]


def __getattr__(name: str) -> Any:
    if name == "BACKEND":  # the backend's name, e.g. 'scipy.fft'
        backend()
        return _BACKEND[1]
    raise AttributeError(f"module 'd2o.fft' has no attribute {name!r}")


__all__ = [
    "fft",
    "ifft",
    "fft2",
    "ifft2",
    "fftn",
    "ifftn",
    "rfft",
    "irfft",
    "rfftn",
    "irfftn",
    "fftfreq",
    "rfftfreq",
]

_NORMS = (None, "backward", "ortho", "forward")
_TWIDDLE_CHUNK = 1 << 14  # elements of twiddle factors computed at a time


# -- local transforms -------------------------------------------------------------


def _local(kind: str, data: np.ndarray, ops: list, norm: Any) -> np.ndarray:
    """One local transform of ``kind`` over the (axis, n) pairs in ``ops``."""
    if kind in ("c", "ic"):
        fn = backend().fftn if kind == "c" else backend().ifftn
        return fn(data, s=[n for _, n in ops], axes=[a for a, _ in ops], norm=norm)
    ((axis, n),) = ops
    fn = backend().rfft if kind == "r" else backend().irfft
    return fn(data, n=n, axis=axis, norm=norm)


def _shape_after(shape: tuple, kind: str, ops: list) -> tuple:
    """The global shape after transform ``kind`` over ``ops``."""
    out = list(shape)
    for axis, n in ops:
        out[axis] = n // 2 + 1 if kind == "r" else n
    return tuple(out)


# -- helpers on layouts distributed along axis 0 ------------------------------------


def _equal0(shape: tuple, comm: Any) -> Distributor:
    return get_distributor("equal", shape, comm, 0)


def _crop_pad(data: np.ndarray, cur: Distributor, target: Distributor) -> np.ndarray:
    """Collective: ``cur``'s array cropped/zero-padded along axis 0 to ``target``'s layout."""
    n_old = cur.global_shape[0]

    def want(r: int):
        box = target.region(r)
        lo, hi = box[0]
        hi = min(hi, n_old)
        return None if hi <= lo else ((lo, hi),) + box[1:]

    got = exchange(cur.comm, data, cur.region, want, key=("crop_pad", cur, target))
    if got.shape == target.local_shape:
        return got
    out = np.zeros(target.local_shape, dtype=data.dtype)
    if want(cur.comm.rank) is not None:
        out[: got.shape[0]] = got
    return out


def _split(n: int) -> tuple[int, int]:
    """n = n1 * n2 with n1 the largest divisor <= sqrt(n)."""
    n1 = int(np.sqrt(n))
    while n1 > 1 and n % n1:
        n1 -= 1
    return max(n1, 1), n // max(n1, 1)


def _twiddle(block: np.ndarray, k2: np.ndarray, j1: np.ndarray, n: int, sign: int) -> None:
    """``block[k2, j1, ...] *= exp(sign 2 pi i k2 j1 / n)`` in place, in bounded chunks."""
    if not block.size:
        return
    extra = (None,) * (block.ndim - 2)
    rows = max(1, _TWIDDLE_CHUNK // max(1, len(j1)))
    for s in range(0, len(k2), rows):
        kk = k2[s : s + rows, None]
        phase = (kk * j1[None, :]) % n
        w = np.exp((sign * 2j * np.pi / n) * phase).astype(block.dtype, copy=False)
        block[s : s + rows] *= w[(slice(None), slice(None)) + extra]


def _four_step(
    data: np.ndarray, cur: Distributor, n1: int, n2: int, inverse: bool, norm: Any
) -> tuple[np.ndarray, Distributor]:
    """Collective: the DFT along distributed axis 0 (length n1*n2); batch axes follow.

    Returns the piece and its layout (slabs along axis 0 of multiples of n2).
    """
    comm = cur.comm
    n = n1 * n2
    batch = cur.global_shape[1:]
    fn = backend().ifft if inverse else backend().fft
    overwrite = _BACKEND[2]
    # 1. whole rows of A[j2, j1] = x[j2 * n1 + j1]
    rows = _equal0((n2, n1) + batch, comm)
    flat_rows = slab_distributor((n,) + batch, comm, 0, [o * n1 for o in rows.bounds()])
    data = redistribute(data, cur, flat_rows).reshape(rows.local_shape)
    # 2. whole columns; FFT over j2 and twiddle
    cols = get_distributor("equal", (n2, n1) + batch, comm, 1)
    data = exchange(comm, data, rows.region, cols.region)
    data = fn(data, axis=0, norm=norm, **overwrite)
    c0, c1 = cols.span()
    _twiddle(data, np.arange(n2), np.arange(c0, c1), n, 1 if inverse else -1)
    # 3. whole rows again; FFT over j1: C[k2, k1]
    data = exchange(comm, data, cols.region, rows.region)
    data = fn(data, axis=1, norm=norm, **overwrite)
    # 4. X[k2 + n2 k1] = C[k2, k1]: fetch whole columns k1, transpose locally
    data = exchange(comm, data, rows.region, cols.region)
    data = np.ascontiguousarray(np.swapaxes(data, 0, 1)).reshape((-1,) + batch)
    out = slab_distributor((n,) + batch, comm, 0, [o * n2 for o in cols.bounds()])
    return data, out


def _chirp(idx: np.ndarray, n: int, sign: int) -> np.ndarray:
    return np.exp((sign * 1j * np.pi / n) * ((idx * idx) % (2 * n)))


def _bluestein(
    data: np.ndarray, cur: Distributor, inverse: bool, norm: Any
) -> tuple[np.ndarray, Distributor]:
    """Collective: the DFT along distributed axis 0 of any length via a chirp-z convolution."""
    comm = cur.comm
    n = cur.global_shape[0]
    batch = cur.global_shape[1:]
    sign = 1 if inverse else -1
    m = 1
    while m < max(2 * n - 1, 4 * comm.size * comm.size):
        m *= 2
    extra = (slice(None),) + (None,) * len(batch)
    # a = x * chirp, zero-padded to m
    lo = cur.span()[0]
    a = data * _chirp(np.arange(lo, lo + data.shape[0]), n, sign)[extra]
    lay_m = _equal0((m,) + batch, comm)
    a = _crop_pad(a, cur, lay_m)
    # b: the conjugate chirp, wrapped around, computed where it lives
    lay_b = _equal0((m,), comm)
    idx = np.arange(*lay_b.span())
    dist = np.minimum(idx, m - idx)
    b = np.where(dist < n, _chirp(dist, n, -sign), 0).astype(a.dtype)
    n1, n2 = _split(m)
    fa, lay_f = _four_step(a, lay_m, n1, n2, False, None)
    fb, _ = _four_step(b, lay_b, n1, n2, False, None)
    fa *= fb[extra]
    del fb
    conv, lay_c = _four_step(fa, lay_f, n1, n2, True, None)
    del fa
    target = _equal0((n,) + batch, comm)
    out = _crop_pad(conv, lay_c, target)
    lo = target.span()[0]
    out *= _chirp(np.arange(lo, lo + out.shape[0]), n, sign)[extra]
    scale = {"ortho": 1 / np.sqrt(n), "forward": 1.0 if inverse else 1.0 / n}.get(
        norm, 1.0 / n if inverse else 1.0
    )
    if scale != 1.0:
        out *= scale
    # computed in double precision (the chirps are complex128); numpy keeps single
    return out.astype(np.result_type(data.dtype, np.complex64), copy=False), target


def _dft0(
    data: np.ndarray, cur: Distributor, inverse: bool, norm: Any
) -> tuple[np.ndarray, Distributor]:
    n = cur.global_shape[0]
    n1, n2 = _split(n)
    if n1 >= cur.comm.size:
        return _four_step(data, cur, n1, n2, inverse, norm)
    return _bluestein(data, cur, inverse, norm)


def _hermitian_full(data: np.ndarray, cur: Distributor, n: int) -> tuple[np.ndarray, Distributor]:
    """Collective: the length-n spectrum whose first n//2+1 entries are ``data`` (axis 0)."""
    comm = cur.comm
    h = n // 2 + 1
    batch = cur.global_shape[1:]
    half = _equal0((h,) + batch, comm)
    if cur.global_shape[0] != h:
        data = _crop_pad(data, cur, half)
        cur = half
    target = _equal0((n,) + batch, comm)

    def direct(r: int):
        lo, hi = target.region(r)[0]
        hi = min(hi, h)
        return None if hi <= lo else ((lo, hi),) + tuple((0, s) for s in batch)

    def mirrored(r: int):
        lo, hi = target.region(r)[0]
        lo = max(lo, h)
        if hi <= lo:
            return None
        return ((n - hi + 1, n - lo + 1),) + tuple((0, s) for s in batch)

    first = exchange(comm, data, cur.region, direct, key=("irfft direct", cur, target, h))
    second = exchange(comm, data, cur.region, mirrored, key=("irfft mirrored", cur, target, h))
    out = np.empty(target.local_shape, dtype=np.result_type(data.dtype, np.complex64))
    k = first.shape[0] if direct(comm.rank) is not None else 0
    if k:
        out[:k] = first
    if mirrored(comm.rank) is not None:
        out[k:] = np.conj(second[::-1])
    return out, target


def _along_dist(
    kind: str, data: np.ndarray, cur: Distributor, n: int, norm: Any
) -> tuple[np.ndarray, Distributor]:
    """Collective: transform ``kind`` along the distributed axis, which stays distributed."""
    a = cur.axis
    perm = (a,) + tuple(i for i in range(cur.ndim) if i != a)
    inv = tuple(np.argsort(perm))
    data = data.transpose(perm)
    shape = tuple(cur.global_shape[i] for i in perm)
    cur = cur.slabs_like(shape, 0)
    if kind == "ir":
        data, cur = _hermitian_full(data, cur, n)
    else:
        if kind == "r":
            data = data.astype(np.result_type(data.dtype, np.complex64))
        if shape[0] != n:
            target = _equal0((n,) + shape[1:], cur.comm)
            data, cur = _crop_pad(data, cur, target), target
    data, cur = _dft0(data, cur, kind in ("ic", "ir"), norm)
    if kind == "r":
        target = _equal0((n // 2 + 1,) + shape[1:], cur.comm)
        data, cur = _crop_pad(data, cur, target), target
    elif kind == "ir":
        data = np.ascontiguousarray(data.real)
    back = tuple(cur.global_shape[i] for i in inv)
    return data.transpose(inv), cur.slabs_like(back, inv.index(0))


# -- the driver --------------------------------------------------------------------


def _pick_axis(cur: Distributor, future: set, preferred: int | None) -> int | None:
    """The axis to move the distribution to, or None (transform along it in place)."""
    size = cur.comm.size
    cands = [i for i in range(cur.ndim) if i != cur.axis and cur.global_shape[i] >= size]
    if not cands:
        return None
    if preferred in cands and preferred not in future:
        return preferred
    free = [i for i in cands if i not in future] or cands
    return max(free, key=lambda i: cur.global_shape[i])


def _pencils_apply(d: Any, dist_axis: Any) -> bool:
    """True for a mesh layout the pencil transform handles: block pieces by the rule, at
    least one array axis whole, the result in the input's layout."""
    split = [s for s in d.split if s is not None]
    return dist_axis is None and not d.cyclic and not d.explicit and len(split) < d.ndim


def _pencil(x: Any, steps: list, norm: Any) -> Any:
    """Collective: the transform ``steps`` of ``x`` on a process mesh by pencils.

    A transform along an axis that a mesh axis splits first moves that mesh axis to
    another array axis (preferably one already transformed): an all-to-all inside the
    sub-communicators of that one mesh axis (`d2o.layouts.mesh.exchange_along`).  Then numpy
    transforms the local pencils.  At the end the mesh axes return to the input's array
    axes, one mesh axis at a time.  Model: each such transpose moves at most the array's
    bytes times ``(q - 1) / q`` in groups of ``q`` ranks (``q`` the mesh axis' extent); a
    3-d transform on a 2-d mesh makes at most four of them.
    """
    d = x.distributor
    lay, comm = d.layout, d.comm
    split = list(d.split)
    shape = x.shape
    data = x.data

    def dist(sp: list, sh: tuple) -> Distributor:
        return layout(lay.mesh, tuple(sp), None, comm).distributor(sh)

    mesh = lay.mesh

    def cut(sp: list) -> set:  # the array axes really divided (mesh extent above 1)
        return {a for m, a in enumerate(sp) if a is not None and mesh[m] > 1}

    cur = d
    for i, (kind, ops) in enumerate(steps):
        future = {a for _, later in steps[i + 1 :] for a, _ in later}
        ops = sorted(ops, key=lambda op: op[0] in cut(split))  # whole axes first: no move
        j = 0
        while j < len(ops):
            axis = ops[j][0]
            if axis in cut(split):
                later = future | {a for a, _ in ops[j + 1 :]}
                free = [b for b in range(len(shape)) if b not in split]
                b = max(free, key=lambda c: (c not in later, shape[c]))
                split[split.index(axis)] = b
                target = dist(split, shape)
                data, cur = redistribute(data, cur, target), target
            group = [ops[j]]  # with the following whole axes: one local call
            j += 1
            while j < len(ops) and ops[j][0] not in cut(split):
                group.append(ops[j])
                j += 1
            data = _local(kind, data, group, norm)
            shape = _shape_after(shape, kind, group)
            cur = dist(split, shape)
    orig = list(d.split)
    while split != orig:
        moved = False
        for m in range(len(split)):
            if split[m] != orig[m] and (orig[m] is None or orig[m] not in split):
                split[m] = orig[m]
                target = dist(split, shape)
                data, cur, moved = redistribute(data, cur, target), target, True
        if not moved:  # a cycle of mesh axes: one of them steps aside to a whole axis
            m = next(m for m in range(len(split)) if split[m] != orig[m])
            split[m] = next(b for b in range(len(shape)) if b not in split and b not in orig)
            target = dist(split, shape)
            data, cur = redistribute(data, cur, target), target
    return _from_local(data, cur)


def _run(x: Any, steps: list, norm: Any, dist_axis: Any) -> Any:
    """Collective: apply the transform ``steps`` (groups of (kind, [(axis, n)])) to ``x``."""
    d = x.distributor
    comm = d.comm
    data = x.data
    if is_mesh(d) and _pencils_apply(d, dist_axis):
        return _pencil(x, steps, norm)
    if is_mesh(d):  # cyclic or sliced meshes: on the slab equivalent, back to the mesh
        res = _run(as_slab(x), steps, norm, dist_axis)
        if dist_axis is not None:
            return res
        final = d.layout.distributor(res.shape)  # type: ignore[attr-defined]
        return _from_local(redistribute(res.data, res.distributor, final), final)
    if d.replicated or comm.size == 1:
        for kind, ops in steps:
            data = _local(kind, data, ops, norm)
        if d.replicated:
            return _from_local(data, get_distributor(d.strategy, data.shape, comm))
        ax = d.axis if dist_axis is None else dist_axis
        return _from_local(data, like(d, data.shape, axis=ax))
    cur = d
    for i, (kind, ops) in enumerate(steps):
        future = {a for _, later in steps[i + 1 :] for a, _ in later}
        here = [op for op in ops if op[0] != cur.axis]
        there = [op for op in ops if op[0] == cur.axis]
        if here:
            data = _local(kind, data, here, norm)
            cur = like(cur, _shape_after(cur.global_shape, kind, here), axis=cur.axis)
        if not there:
            continue
        ((axis, n),) = there
        b = _pick_axis(cur, future, dist_axis)
        if b is not None:
            target = get_distributor("equal", cur.global_shape, comm, b)
            data = redistribute(data, cur, target)
            data = _local(kind, data, there, norm)
            cur = like(target, _shape_after(cur.global_shape, kind, there), axis=b)
        else:
            data, cur = _along_dist(kind, data, cur, n, norm)
    shape = cur.global_shape
    if dist_axis is None:
        final = like(d, shape, axis=d.axis)
    else:
        strategy = "equal" if d.strategy == "freeform" else d.strategy
        final = get_distributor(strategy, shape, comm, dist_axis)
    if final is not cur:
        data = redistribute(data, cur, final)
    return _from_local(data, final)


def _prepare(x: Any, s: Any, axes: Any, norm: Any, dist_axis: Any, kind: str) -> tuple:
    """Validate (inside ``agreed``) and return (axes, lengths, dist_axis)."""
    if not isinstance(x, D2O):
        raise TypeError("d2o.fft functions take a distributed_data_object")
    ndim = x.ndim
    if norm not in _NORMS:
        raise ValueError(f'Invalid norm value {norm}; should be "backward", "ortho" or "forward".')
    if axes is None:
        axes = list(range(ndim)) if s is None else list(range(ndim - len(s), ndim))
    axes = [normalize_axis(a, ndim) for a in axes]
    if len(set(axes)) != len(axes):
        raise ValueError("repeated axes are not supported by distributed FFTs")
    if s is None:
        s = [x.shape[a] for a in axes]
        if kind == "ir" and axes:
            s[-1] = 2 * (x.shape[axes[-1]] - 1)
    else:
        s = list(s)
        if len(s) != len(axes):
            raise ValueError("Shape and axes have different lengths.")
        s = [x.shape[a] if (n == -1 and kind != "ir") else n for n, a in zip(s, axes)]
        if kind == "ir" and s and s[-1] == -1:
            s[-1] = 2 * (x.shape[axes[-1]] - 1)
    for n in s:
        if int(n) < 1:
            raise ValueError(f"Invalid number of FFT data points ({n}) specified.")
    if dist_axis is not None:
        dist_axis = normalize_axis(dist_axis, ndim)
    if not axes:
        raise ValueError("no axes to transform")
    return axes, [int(n) for n in s], dist_axis


def _comm_of(x: Any):
    return x.distributor.comm if isinstance(x, D2O) else None


def _checked(x: Any, s: Any, axes: Any, norm: Any, dist_axis: Any, kind: str) -> tuple:
    comm = _comm_of(x)
    if comm is None:
        raise TypeError("d2o.fft functions take a distributed_data_object")
    with agreed(comm):
        return _prepare(x, s, axes, norm, dist_axis, kind)


@operation("fft.fftn", kind="fft", mesh=True)
def fftn(a: D2O, s: Any = None, axes: Any = None, norm: Any = None, dist_axis: Any = None) -> D2O:
    """Collective: N-d FFT as ``numpy.fft.fftn``; all-to-alls only where an axis is distributed.

    Examples
    --------
    >>> import numpy as np, d2o, d2o.fft
    >>> a = np.random.default_rng(0).standard_normal((8, 8))
    >>> k = d2o.fft.fftn(d2o.distributed_data_object(a))  # slab transposes, never a gather
    >>> k.shape, k.dtype, k.distribution_strategy
    ((8, 8), dtype('complex128'), 'equal')
    >>> bool(np.allclose(k.get_full_data(), np.fft.fftn(a)))
    True
    """
    axes, s, dist_axis = _checked(a, s, axes, norm, dist_axis, "c")
    return _run(a, [("c", list(zip(axes, s)))], norm, dist_axis)


@operation("fft.ifftn", kind="fft", mesh=True)
def ifftn(a: D2O, s: Any = None, axes: Any = None, norm: Any = None, dist_axis: Any = None) -> D2O:
    """Collective: N-d inverse FFT as ``numpy.fft.ifftn``."""
    axes, s, dist_axis = _checked(a, s, axes, norm, dist_axis, "ic")
    return _run(a, [("ic", list(zip(axes, s)))], norm, dist_axis)


@operation("fft.rfftn", kind="fft", mesh=True)
def rfftn(a: D2O, s: Any = None, axes: Any = None, norm: Any = None, dist_axis: Any = None) -> D2O:
    """Collective: N-d FFT of real input as ``numpy.fft.rfftn`` (last axis halved)."""
    axes, s, dist_axis = _checked(a, s, axes, norm, dist_axis, "r")
    steps = [("r", [(axes[-1], s[-1])])]
    if len(axes) > 1:
        steps.append(("c", list(zip(axes[:-1], s[:-1]))))
    return _run(a, steps, norm, dist_axis)


@operation("fft.irfftn", kind="fft", mesh=True)
def irfftn(a: D2O, s: Any = None, axes: Any = None, norm: Any = None, dist_axis: Any = None) -> D2O:
    """Collective: inverse of `rfftn` as ``numpy.fft.irfftn`` (real output)."""
    axes, s, dist_axis = _checked(a, s, axes, norm, dist_axis, "ir")
    steps = []
    if len(axes) > 1:
        steps.append(("ic", list(zip(axes[:-1], s[:-1]))))
    steps.append(("ir", [(axes[-1], s[-1])]))
    return _run(a, steps, norm, dist_axis)


def _one(kind: str, a: D2O, n: Any, axis: int, norm: Any, dist_axis: Any) -> D2O:
    s = None if n is None else [n]
    axes, s, dist_axis = _checked(a, s, [axis], norm, dist_axis, kind)
    return _run(a, [(kind, [(axes[0], s[0])])], norm, dist_axis)


@operation("fft.fft", kind="fft", mesh=True)
def fft(a: D2O, n: Any = None, axis: int = -1, norm: Any = None, dist_axis: Any = None) -> D2O:
    """Collective: 1-D FFT along ``axis`` as ``numpy.fft.fft`` (four-step when distributed)."""
    return _one("c", a, n, axis, norm, dist_axis)


@operation("fft.ifft", kind="fft", mesh=True)
def ifft(a: D2O, n: Any = None, axis: int = -1, norm: Any = None, dist_axis: Any = None) -> D2O:
    """Collective: 1-D inverse FFT as ``numpy.fft.ifft``."""
    return _one("ic", a, n, axis, norm, dist_axis)


@operation("fft.rfft", kind="fft", mesh=True)
def rfft(a: D2O, n: Any = None, axis: int = -1, norm: Any = None, dist_axis: Any = None) -> D2O:
    """Collective: 1-D FFT of real input as ``numpy.fft.rfft``."""
    return _one("r", a, n, axis, norm, dist_axis)


@operation("fft.irfft", kind="fft", mesh=True)
def irfft(a: D2O, n: Any = None, axis: int = -1, norm: Any = None, dist_axis: Any = None) -> D2O:
    """Collective: inverse of `rfft` as ``numpy.fft.irfft``."""
    return _one("ir", a, n, axis, norm, dist_axis)


@operation("fft.fft2", kind="fft", mesh=True)
def fft2(a: D2O, s: Any = None, axes: Any = (-2, -1), norm: Any = None, dist_axis: Any = None):
    """Collective: 2-D FFT (`fftn` over the last two axes)."""
    return fftn(a, s=s, axes=axes, norm=norm, dist_axis=dist_axis)


@operation("fft.ifft2", kind="fft", mesh=True)
def ifft2(a: D2O, s: Any = None, axes: Any = (-2, -1), norm: Any = None, dist_axis: Any = None):
    """Collective: 2-D inverse FFT (`ifftn` over the last two axes)."""
    return ifftn(a, s=s, axes=axes, norm=norm, dist_axis=dist_axis)


# -- frequencies -------------------------------------------------------------------


def _freq_array(values_of, n: int, distribution_strategy: str, comm: Any) -> D2O:

    c = as_comm(comm)
    with agreed(c):
        dist = get_distributor(distribution_strategy, (n,), c, 0)
    if dist.replicated:
        idx = np.arange(n)
    else:
        idx = np.arange(*dist.span())
    return _from_local(values_of(idx), dist)


@operation("fft.fftfreq", kind="fft", mesh=True)
def fftfreq(n: int, d: float = 1.0, distribution_strategy: str = "equal", comm: Any = None) -> D2O:
    """The sample frequencies of ``numpy.fft.fftfreq`` as a 1-D array; no communication.

    Each rank computes its own part ('not': every rank the whole array).
    """
    n = int(n)
    return _freq_array(
        lambda i: np.where(i < (n + 1) // 2, i, i - n) / (n * d), n, distribution_strategy, comm
    )


@operation("fft.rfftfreq", kind="fft", mesh=True)
def rfftfreq(n: int, d: float = 1.0, distribution_strategy: str = "equal", comm: Any = None) -> D2O:
    """The sample frequencies of ``numpy.fft.rfftfreq`` as a 1-D array; no communication."""
    n = int(n)
    return _freq_array(lambda i: i / (n * d), n // 2 + 1, distribution_strategy, comm)
