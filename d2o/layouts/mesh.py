"""Layouts on process meshes: ``d2o.layout(mesh, split, block)``.

A layout arranges the communicator's ranks as a grid (the *mesh*, C order:
rank ``r`` sits at ``np.unravel_index(r, mesh)``) and says, per mesh axis,
which array axis it splits (``split``; None: the ranks along that mesh axis
hold replicas).  Each split axis is cut into blocks as even as possible, the
first ranks taking the extra (the 'equal' rule), so every rank holds one box
of the global array.

* A one-axis mesh that splits one array axis is the paper's slab layout: the
  same cached `SlabDistributor` as ``distribution_strategy='equal'``.
* No split axis at all is the replicated ('not') layout.
* Anything else is a `MeshDistributor`: a region per rank (a box, or along a
  block-cyclic axis a tuple of runs), plus `source`, the part of its region a
  rank is responsible for sending (the replica with coordinate 0 along every
  replica mesh axis sends), so that every element moved by
  `d2o.move.redistribution.exchange` comes from exactly one rank.

Layout questions for the feature modules: `region`/`source` per rank,
`global_indices(axis)`, `split_axes()`, `subcomm(d, mesh_axes)` (the ranks
that differ only along some mesh axes), `reduced_layout`, `moved` and
`permuted` (the layout of a reduction, broadcast or transpose result),
`one_mesh_axis`/`exchange_along` (a change along one mesh axis runs in that
axis's sub-communicator).  Operations without an algorithm for mesh layouts yet
run on the equivalent slab layout (`as_slab`: one exchange), never on a
gathered array.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core import hooks
from ..core.cache import BoundedCache
from ..core.comm import SERIAL, Comm, as_comm
from ..core.keys import jrange
from ..core.registry import operation
from .distributors import (
    Box,
    Distributor,
    HeldScalar,
    as_runs,
    entry_indices,
    equal_lengths,
    get_distributor,
    index_of,
    is_runs,
    run_length,
)
from .ghost import check_width, halo_distributor

__all__ = [
    "Layout", "layout", "MeshDistributor", "dims_create", "is_mesh", "moved",
    "permuted",
]  # fmt: skip


def dims_create(size: int, ndims: int) -> tuple:
    """A balanced grid of ``ndims`` axes with ``size`` cells, largest first (as
    ``MPI_Dims_create``): the prime factors of ``size`` dealt to the smallest axis."""
    if ndims <= 0:
        return ()
    dims = [1] * ndims
    n, p, factors = size, 2, []
    while p * p <= n:
        while n % p == 0:
            factors.append(p)
            n //= p
        p += 1
    if n > 1:
        factors.append(n)
    for f in sorted(factors, reverse=True):
        i = dims.index(min(dims))
        dims[i] *= f
    return tuple(sorted(dims, reverse=True))


def _check_int(v: Any, what: str) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"{what} must be an integer, got {v!r}")
    return int(v)


class Layout:
    """How arrays are spread over a process mesh (see `layout`); immutable and cached,
    compared by identity.  ``layout.distributor(shape)`` gives the (cached) distributor
    of an array of that shape; no communication."""

    __slots__ = ("mesh", "split", "block", "comm", "halo", "_dists", "__weakref__")

    def __init__(self, mesh: tuple, split: tuple, block: tuple, comm: Comm, halo: int = 0) -> None:
        self.mesh = mesh
        self.split = split
        self.block = block
        self.comm = comm
        self.halo = halo
        self._dists = BoundedCache(256)

    def __repr__(self) -> str:
        block = "" if all(b is None for b in self.block) else f", block={self.block}"
        halo = f", halo={self.halo}" if self.halo else ""
        return f"layout(mesh={self.mesh}, split={self.split}{block}{halo})"

    def __reduce__(self):
        raise TypeError("layouts cannot be pickled; build them with d2o.layout on every rank")

    def distributor(self, global_shape: Sequence[int]) -> Distributor:
        """The distributor of an array of ``global_shape`` in this layout (cached; local).

        Raises numpy's AxisError when a split axis is out of range for the shape.
        """
        shape = tuple(int(n) for n in global_shape)
        d = self._dists.get(shape)
        if d is not None:
            return d
        ndim = len(shape)
        split = []
        for s in self.split:
            if s is not None and not -ndim <= s < ndim:
                raise np.exceptions.AxisError(
                    f"split axis {s} is out of bounds for array of dimension {ndim}"
                )
            split.append(None if s is None else s % ndim)
        if len({s for s in split if s is not None}) < sum(s is not None for s in split):
            raise ValueError(f"split {self.split} names one array axis twice for {ndim}-d arrays")
        used = [(m, s) for m, s in enumerate(split) if s is not None]
        cyclic = any(self.block[m] is not None for m, _ in used)
        if not used or not shape:
            d = get_distributor("not", shape, self.comm)
        elif len(used) == 1 and math.prod(self.mesh) == self.mesh[used[0][0]] and not cyclic:
            d = get_distributor("equal", shape, self.comm, used[0][1])  # the paper's slabs
        else:
            d = MeshDistributor(shape, self.comm, self, tuple(split))
        if self.halo:  # ghost cells (d2o.move.ghost): a width of the layout's own distributors
            d = halo_distributor(d, self.halo)
        if type(d) is MeshDistributor or self.halo:
            self._dists.put(shape, d)  # plain slab and replicated ones: get_distributor's cache
        return d


_LAYOUTS: dict = {}


@operation(traced=False)
def layout(
    mesh: Sequence[int] | None = None,
    split: Sequence[int | None] = (0,),
    block: int | Sequence[int | None] | None = None,
    comm: Any = None,
    halo: int = 0,
) -> Layout:
    """How to spread arrays: ranks on a ``mesh``, array axes ``split`` over its axes.

    Parameters
    ----------
    mesh : tuple of int, optional
        The ranks as a grid (C order); the product must equal the communicator's
        size.  None: a balanced grid with one axis per ``split`` entry.
    split : tuple
        Per mesh axis, the array axis it splits, or None where the ranks along
        that mesh axis hold replicas.  ``()`` is the replicated layout.  Shorter
        than the mesh: the remaining mesh axes hold replicas.
    block : None, int or tuple
        None for block partitions ('equal' rule); an integer (or one entry per
        mesh axis) for block-cyclic partitions: blocks of that many indices
        dealt round-robin over the mesh axis, stored compactly (in global
        order) in each rank's local array, as ScaLAPACK does.
    comm : optional
        The communicator (default: d2o's default).
    halo : int
        Ghost cells: each rank's piece of an array in this layout sits inside ``halo``
        more cells on both sides of every split axis, filled by ``x.update_halos()`` and
        read with ``x.get_local_data(copy=False, halos=True)`` (for local kernels in C,
        Cython or Numba).  Block partitions only; no wider than the smallest piece.

    Local: no communication.  Accepted wherever ``distribution_strategy=`` is.

    Examples
    --------
    >>> import numpy as np, d2o
    >>> lay = d2o.layout(split=(0, 1))  # rows and columns cut over a balanced mesh
    >>> x = d2o.distributed_data_object(np.arange(24.0).reshape(4, 6), distribution_strategy=lay)
    >>> x.distribution_strategy, x.sum(axis=0).shape
    ('block', (6,))
    >>> y = x.copy(distribution_strategy="equal")  # one exchange of what changes owner
    >>> bool((x == y).all())
    True
    """
    c = as_comm(comm)
    split_t = tuple(split) if split is not None else ()
    split_t = tuple(None if s is None else _check_int(s, "split axis") for s in split_t)
    if mesh is None:
        mesh_t = dims_create(c.size, max(1, len(split_t)))
    else:
        mesh_t = tuple(_check_int(n, "mesh extent") for n in mesh)
        if any(n <= 0 for n in mesh_t):
            raise ValueError(f"mesh extents must be positive, got {mesh_t}")
        if math.prod(mesh_t) != c.size:
            raise ValueError(
                f"mesh {mesh_t} has {math.prod(mesh_t)} cells for a communicator of {c.size} ranks"
            )
    if len(split_t) > len(mesh_t):
        raise ValueError(f"split {split_t} has more entries than the mesh {mesh_t} has axes")
    split_t = split_t + (None,) * (len(mesh_t) - len(split_t))
    named = [s for s in split_t if s is not None]
    if len(set(named)) < len(named):
        raise ValueError(f"split {split_t} names one array axis twice")
    if block is None or isinstance(block, (int, np.integer)):
        block_t = (block,) * len(mesh_t)
    else:
        block_t = tuple(block)
        if len(block_t) != len(mesh_t):
            raise ValueError(f"block {block_t} needs one entry per mesh axis {mesh_t}")
    for b in block_t:
        if b is not None and _check_int(b, "block size") <= 0:
            raise ValueError(f"block sizes must be positive, got {block_t}")
    w = check_width(halo)
    if w and all(s is None for s in split_t):
        raise ValueError("ghost cells (halo=) need a split axis")
    if w and any(b is not None for b in block_t):
        raise ValueError("ghost cells (halo=) need block partitions, not block-cyclic ones")
    key = (mesh_t, split_t, block_t, c, w)
    lay = _LAYOUTS.get(key)
    if lay is None:
        lay = _LAYOUTS[key] = Layout(mesh_t, split_t, block_t, c, w)
    return lay


def _cyclic_runs(n: int, p: int, b: int, c: int) -> tuple:
    """The (start, stop) runs of ``range(n)`` that mesh coordinate ``c`` of ``p`` holds when
    blocks of ``b`` are dealt round-robin (ScaLAPACK's block-cyclic rule)."""
    return tuple((k * b, min(k * b + b, n)) for k in range(c, -(-n // b), p))


def _common(a: tuple, b: tuple) -> tuple:
    """The indices two entries of a region share (a pair if both are pairs)."""
    if not (is_runs(a) or is_runs(b)):
        lo, hi = max(a[0], b[0]), min(a[1], b[1])
        return (lo, max(lo, hi))
    return tuple(
        (max(x0, y0), min(x1, y1))
        for x0, x1 in as_runs(a)
        for y0, y1 in as_runs(b)
        if max(x0, y0) < min(x1, y1)
    )


class MeshDistributor(Distributor):
    """Blocks or block-cyclic pieces on a process mesh (see the module notes).

    ``region(rank)`` has, per array axis, a (start, stop) pair, or for an axis split
    block-cyclically the tuple of (start, stop) runs the rank holds; they are stored
    compactly, in global order, in the local array (ScaLAPACK's local storage).
    """

    __slots__ = (
        "layout", "split", "coords", "runs", "cyclic", "explicit", "_regions", "_sources",
    )  # fmt: skip

    def __init__(
        self, global_shape: tuple, comm: Comm, lay: Layout, split: tuple, runs: tuple = None
    ) -> None:
        hooks.use_mesh()
        self.global_shape = global_shape
        self.comm = comm
        self.layout = lay
        self.split = split
        self.strategy = "block"
        self.axis = None
        self.replicated = False
        self.ndim = len(global_shape)
        self.size = int(np.prod(global_shape, dtype=np.int64))
        self.explicit = runs is not None  # pieces given (a sliced layout), not by the rule
        if runs is None:
            runs = self._rule_runs(global_shape, lay, split)
        self.runs = tuple(runs)  # per mesh axis, per coordinate: a pair, or a tuple of runs
        self.cyclic = any(s is not None and lay.block[m] is not None for m, s in enumerate(split))
        self._regions: list = [None] * comm.size
        self._sources: list = [None] * comm.size
        self.coords = self.coords_of(comm.rank)
        box = self.region(comm.rank)
        self.local_shape = tuple(run_length(e) for e in box)
        self.local_slice = index_of(box)

    @staticmethod
    def _rule_runs(global_shape: tuple, lay: Layout, split: tuple) -> list:
        runs: list = []
        for m, s in enumerate(split):
            if s is None:
                runs.append(None)
            elif lay.block[m] is None:
                o = np.concatenate(([0], np.cumsum(equal_lengths(global_shape[s], lay.mesh[m]))))
                runs.append(tuple((int(o[c]), int(o[c + 1])) for c in range(lay.mesh[m])))
            else:
                n, p, b = global_shape[s], lay.mesh[m], lay.block[m]
                runs.append(tuple(_cyclic_runs(n, p, b, c) for c in range(p)))
        return runs

    def global_indices(self, axis: int) -> np.ndarray:
        """The global indices along ``axis`` of this rank's piece, in local order."""
        return entry_indices(self.region(self.comm.rank)[axis])

    def coords_of(self, rank: int) -> tuple:
        """The mesh coordinates of ``rank`` (C order)."""
        return tuple(int(i) for i in np.unravel_index(rank, self.layout.mesh))

    def region(self, rank: int) -> Box:
        box = self._regions[rank]
        if box is None:
            c = self.coords_of(rank)
            b = [(0, n) for n in self.global_shape]
            for m, s in enumerate(self.split):
                if s is not None:
                    r = self.runs[m][c[m]]
                    if self.explicit and b[s] != (0, self.global_shape[s]):
                        # given pieces may cut one axis by two mesh axes: the intersection
                        r = _common(b[s], r)
                    b[s] = r
            box = self._regions[rank] = tuple(b)
        return box

    def source(self, rank: int) -> Box | None:
        """The part of ``rank``'s box it sends in an exchange: all of it on the replica
        with coordinate 0 along every replica mesh axis, nothing on the others."""
        c = self.coords_of(rank)
        if any(s is None and c[m] for m, s in enumerate(self.split)):
            return None
        return self.region(rank)

    def split_axes(self) -> tuple:
        """The array axes cut by some mesh axis."""
        return tuple(s for s in self.split if s is not None)

    def __repr__(self) -> str:
        return (
            f"<MeshDistributor {self.layout!r} shape={self.global_shape} "
            f"local_shape={self.local_shape}>"
        )


_EXPLICIT = BoundedCache(1024)


def locate(entry: tuple, i: int) -> int | None:
    """The local position of global index ``i`` in one coordinate's piece of an axis (a
    (start, stop) pair or a tuple of runs, stored compactly in order), None if not held."""
    pos = 0
    for lo, hi in as_runs(entry):
        if lo <= i < hi:
            return pos + i - lo
        pos += hi - lo
    return None


def slice_runs(entry: tuple, start: int, step: int, n: int) -> tuple | None:
    """One coordinate's piece of an axis sliced by ``range(start, start + n*step, step)``:
    ``(view entry, local slice)`` where the view's entry has the same form as ``entry`` (a
    pair, or a tuple of runs in the view's order), or None when the picked elements are
    not evenly strided in the local storage (a step that does not divide the block of a
    block-cyclic axis).  Local."""
    runs = entry if is_runs(entry) else (entry,)
    picks, pos = [], 0  # (j0, j1, local position of j0) per run holding picks
    for lo, hi in runs:
        j0, j1 = jrange(start, step, n, lo, hi)
        if j1 > j0:
            picks.append((j0, j1, pos + start + step * j0 - lo))
        pos += hi - lo
    picks.sort()
    count = sum(j1 - j0 for j0, j1, _ in picks)
    if not picks:
        return ((0, 0) if not is_runs(entry) else ()), slice(0, 0)
    stride = step
    if count > 1 and all(j1 - j0 == 1 for j0, j1, _ in picks):
        stride = picks[1][2] - picks[0][2]
    for (a0, a1, pa), (_, _, pb) in zip(picks, picks[1:]):
        if pb - (pa + stride * (a1 - 1 - a0)) != stride:
            return None
    first = picks[0][2]
    stop = first + stride * count
    sl = slice(first, None if stop < 0 else stop, stride)
    if not is_runs(entry):
        return (picks[0][0], picks[0][1]), sl
    merged: list = []
    for j0, j1, _ in picks:
        if merged and merged[-1][1] == j0:
            merged[-1] = (merged[-1][0], j1)
        else:
            merged.append((j0, j1))
    return tuple(merged), sl


def explicit(lay: Layout, shape: tuple, split: tuple, runs: tuple) -> MeshDistributor:
    """The (cached) mesh layout of ``shape`` whose pieces are given: ``runs`` per mesh
    axis, per coordinate, the (start, stop) that coordinate holds of its split axis (any
    order: slicing with a negative step gives descending ones).  Local."""
    key = (lay, tuple(shape), tuple(split), tuple(runs))
    d = _EXPLICIT.get(key)
    if d is None:
        d = _EXPLICIT.put(key, MeshDistributor(tuple(shape), lay.comm, lay, tuple(split), runs))
    return d


def _same_rule(d: MeshDistributor, shape: tuple, split: tuple) -> Distributor:
    """``d``'s mesh and pieces on another shape whose split axes are ``split``."""
    lay = d.layout
    if d.explicit:
        runs = tuple(None if s is None else r for s, r in zip(split, d.runs))
        if all(s is None for s in split):
            return get_distributor("not", shape, lay.comm)
        return explicit(lay, shape, split, runs)
    return layout(lay.mesh, split, lay.block, lay.comm).distributor(shape)


def moved(d: MeshDistributor, shape: tuple, shift: int) -> Distributor:
    """``d``'s layout for an array of ``shape`` whose axis ``a + shift`` is ``d``'s axis
    ``a`` (a broadcast result); local."""
    split = tuple(None if s is None else s + shift for s in d.split)  # blocks stay per mesh axis
    return _same_rule(d, shape, split)


def permuted(d: MeshDistributor, axes: tuple) -> Distributor:
    """``d``'s layout after the array's axes are permuted by ``axes``; local."""
    split = tuple(None if s is None else axes.index(s) for s in d.split)
    shape = tuple(d.global_shape[a] for a in axes)
    return _same_rule(d, shape, split)


def reduced_layout(d: MeshDistributor, axes: tuple, keepdims: bool, shape: tuple) -> Distributor:
    """``d``'s layout for the result of reducing ``axes`` (result ``shape``): the mesh
    axes that split a reduced axis hold replicas of the result; local."""
    lay = d.layout
    split = tuple(
        None if s is None or s in axes else s if keepdims else s - sum(a < s for a in axes)
        for s in d.split
    )
    if d.explicit:
        return _same_rule(d, shape, split)
    return layout(lay.mesh, split, lay.block, lay.comm).distributor(shape)


def sources(d: Distributor) -> list:
    """The ranks that send their piece when data moves (one per set of replicas)."""
    return [r for r in range(d.comm.size) if d.source(r) is not None]


_SUBCOMMS: dict = {}


def subcomm(d: MeshDistributor, mesh_axes: tuple) -> Comm:
    """The communicator of the ranks that differ from this one only along ``mesh_axes``
    (cached per mesh; its creation is collective over ``d.comm``)."""
    lay = d.layout
    key = (lay.comm, lay.mesh, tuple(mesh_axes))
    sub = _SUBCOMMS.get(key)
    if sub is None:
        size = math.prod(lay.mesh[m] for m in mesh_axes)
        if size == lay.comm.size:
            sub = lay.comm
        elif size == 1 or lay.comm.mpi is None:
            sub = SERIAL
        else:
            coords = d.coords
            color = int(np.ravel_multi_index(
                [c for m, c in enumerate(coords) if m not in mesh_axes] or [0],
                [n for m, n in enumerate(lay.mesh) if m not in mesh_axes] or [1],
            ))  # fmt: skip
            key_in = int(np.ravel_multi_index(
                [coords[m] for m in mesh_axes], [lay.mesh[m] for m in mesh_axes]
            ))  # fmt: skip
            sub = lay.comm.Split(color, key_in)
        _SUBCOMMS[key] = sub
    return sub


def one_mesh_axis(src: Distributor, dst: Distributor) -> int | None:
    """The mesh axis along which two mesh layouts of one array differ, when they differ
    along exactly one (then data moves only inside that axis's sub-communicators)."""
    if type(src) is not MeshDistributor or type(dst) is not MeshDistributor:
        return None
    if src.layout.mesh != dst.layout.mesh or src.comm is not dst.comm or src.cyclic or dst.cyclic:
        return None
    if src.explicit or dst.explicit:
        return None
    diff = [m for m, (a, b) in enumerate(zip(src.split, dst.split)) if a != b]
    return diff[0] if len(diff) == 1 and src.global_shape == dst.global_shape else None


def is_mesh(d: Distributor) -> bool:
    """True for layouts that only the mesh-aware code paths understand."""
    return type(d) is MeshDistributor


def slab_equivalent(d: Distributor) -> Distributor:
    """The slab layout an operation without a mesh algorithm runs on: 'equal' along the
    first split array axis."""
    if type(d) is HeldScalar:
        return get_distributor("not", (), d.comm)
    if not is_mesh(d):
        return d
    return get_distributor("equal", d.global_shape, d.comm, d.split_axes()[0])
