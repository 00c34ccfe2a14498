"""Distributors: immutable descriptions of how a global array is spread over ranks.

A distributor knows the global shape, the communicator, the strategy name, the
distributed axis and the extent every rank holds along it (the offsets
table).  It knows nothing about dtypes or data.  Equal layouts share one
distributor object (a cache keyed by its parameters), so "same layout?" is an
identity check and building an array of a known layout communicates nothing.

Strategies
----------
``'not'``       every rank holds the whole array (replicated).
``'equal'``     slabs along ``axis`` as even as possible, first ranks take extras.
``'fftw'``      FFTW-MPI's block rule: ``ceil(n/P)`` rows per rank, the tail empty.
``'freeform'``  slabs whose lengths each rank chooses (the global length is the sum).

A new layout (block-cyclic, ghost cells) is a new subclass of `Distributor`
implementing `region`; the object, redistribution and the feature modules only
talk to this interface.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Sequence

import numpy as np

from ..core import hooks
from ..core.cache import BoundedCache
from ..core.comm import Comm

__all__ = [
    "Distributor",
    "ReplicatedDistributor",
    "SlabDistributor",
    "STRATEGIES",
    "get_distributor",
    "slab_distributor",
    "freeform_distributor",
    "equal_lengths",
    "like",
    "fftw_lengths",
]

Box = tuple  # tuple of (start, stop) per dimension


def equal_lengths(n: int, size: int) -> list[int]:
    """Lengths for 'equal': as even as possible, the first ranks take the extra rows."""
    base, extra = divmod(n, size)
    return [base + 1 if r < extra else base for r in range(size)]


def fftw_lengths(n: int, size: int) -> list[int]:
    """Lengths for 'fftw': FFTW-MPI's block rule, ``ceil(n/size)`` rows per rank."""
    block = -(-n // size) if n else 0
    return [max(0, min(block, n - r * block)) for r in range(size)]


# -- regions: per axis a (start, stop) pair, or a tuple of runs (block-cyclic axes) ----


def is_runs(entry: tuple) -> bool:
    """True for a tuple of (start, stop) runs, False for one (start, stop) pair."""
    return not entry or isinstance(entry[0], tuple)


def as_runs(entry: tuple) -> tuple:
    """One axis of a region as a tuple of non-empty runs."""
    runs = entry if is_runs(entry) else (entry,)
    return tuple(r for r in runs if r[1] > r[0])


def run_length(entry: tuple) -> int:
    """The number of indices in one axis of a region: a (start, stop) pair or a tuple of runs."""
    if is_runs(entry):
        return sum(b - a for a, b in entry)
    return entry[1] - entry[0]


def index_of(box: tuple) -> tuple:
    """A numpy index selecting ``box`` (runs allowed) from a global array: slices for a
    plain box, an open mesh of index arrays (``np.ix_``) when some axis has several runs."""
    if not any(is_runs(e) for e in box):
        return tuple(slice(a, b) for a, b in box)
    return np.ix_(*[entry_indices(e) for e in box])


def entry_indices(entry: tuple) -> np.ndarray:
    if not is_runs(entry):
        return np.arange(entry[0], entry[1], dtype=np.intp)
    if not entry:
        return np.zeros(0, dtype=np.intp)
    return np.concatenate([np.arange(a, b, dtype=np.intp) for a, b in entry])


class Distributor:
    """Base class of all layouts.

    Attributes
    ----------
    global_shape : tuple of int
    comm : Comm
    strategy : str
        The strategy name reported as ``obj.distribution_strategy``.
    axis : int or None
        The distributed axis (None when every rank holds everything).
    replicated : bool
        True when every rank holds the whole array.
    local_shape : tuple of int
        The shape of this rank's piece.
    """

    __slots__ = (
        "global_shape",
        "comm",
        "strategy",
        "axis",
        "replicated",
        "local_shape",
        "ndim",
        "size",
        "local_slice",
        "__weakref__",
    )
    # declared for type checkers (the subclasses set them in __init__)
    global_shape: tuple[int, ...]
    comm: Comm
    strategy: str
    axis: int | None
    replicated: bool
    local_shape: tuple[int, ...]
    ndim: int
    size: int
    local_slice: tuple  # slices, or index arrays where a rank holds several runs

    def region(self, rank: int) -> Box:  # pragma: no cover - abstract
        """The box ((start, stop) per dimension) of the global array that ``rank`` holds."""
        raise NotImplementedError

    def source(self, rank: int) -> Box | None:
        """The part of ``rank``'s box that it sends when data moves (layouts holding
        replicas send each element from one rank only); here all of it."""
        return self.region(rank)

    def global_indices(self, axis: int) -> np.ndarray:
        """The global indices along ``axis`` of this rank's piece, in local order."""
        start = (self.local_slice[axis].start or 0) if axis < len(self.local_slice) else 0
        return np.arange(start, start + self.local_shape[axis], dtype=np.intp)

    # -- layout questions for the feature modules (they never read a subclass's fields) --

    def span(self, axis: int | None = None) -> tuple[int, int]:
        """This rank's contiguous (start, stop) along ``axis`` (default: the split axis).

        ValueError where the rank holds several runs along that axis (block-cyclic)."""
        ax = self.axis if axis is None else axis
        if ax is None:
            raise ValueError(f"{self!r} has no split axis")
        entry = self.region(self.comm.rank)[ax]
        if is_runs(entry):
            runs = as_runs(entry)
            if len(runs) > 1:
                raise ValueError(f"{self!r} holds several runs along axis {ax}")
            return runs[0] if runs else (0, 0)
        return entry

    def bounds(self) -> tuple:
        """The boundary table of a slab layout: rank ``r`` holds ``bounds[r]:bounds[r+1]``
        of the split axis (and all of every other axis).  ValueError for other layouts."""
        raise ValueError(f"{self!r} is not a slab layout")

    def bounds_array(self) -> np.ndarray:
        """`bounds` as a read-only intp array (for searchsorted)."""
        raise ValueError(f"{self!r} is not a slab layout")

    def slabs_like(self, shape: tuple, axis: int, strategy: str | None = None) -> Distributor:
        """The slab layout of ``shape`` whose pieces along ``axis`` are this slab layout's
        pieces along its split axis (strategy label: this one's unless given)."""
        return slab_distributor(
            tuple(shape), self.comm, axis, self.bounds(), strategy or self.strategy
        )

    def piece_sizes(self) -> list:
        """The number of elements each rank holds."""
        return [math.prod(run_length(e) for e in self.region(r)) for r in range(self.comm.size)]

    def split_axes(self) -> tuple:
        """The array axes that are cut between ranks (none when replicated)."""
        return () if self.axis is None else (self.axis,)

    def __repr__(self) -> str:
        return (
            f"<{type(self).__name__} {self.strategy!r} shape={self.global_shape} "
            f"axis={self.axis} local_shape={self.local_shape}>"
        )

    def __reduce__(self):  # distributors are per-process objects
        raise TypeError("distributors cannot be pickled")


class ReplicatedDistributor(Distributor):
    """'not': a full copy of the array on every rank."""

    __slots__ = ()

    def __init__(self, global_shape: tuple, comm: Comm, strategy: str = "not") -> None:
        self.global_shape = global_shape
        self.comm = comm
        self.strategy = strategy
        self.axis = None
        self.replicated = True
        self.local_shape = global_shape
        self.ndim = len(global_shape)
        self.size = int(np.prod(global_shape, dtype=np.int64))
        self.local_slice = (slice(None),) * self.ndim

    def region(self, rank: int) -> Box:
        return tuple((0, n) for n in self.global_shape)

    def source(self, rank: int) -> Box | None:
        return self.region(rank) if rank == 0 else None

    def lengths(self) -> list[int]:
        return [self.size] * self.comm.size


class HeldScalar(Distributor):
    """A 0-d view of one element of a distributed array: the ranks in ``holders`` hold it
    (their piece is a numpy view of the base's element), ``sender`` sends it; the other
    ranks hold nothing (their 0-d piece is scratch).  Every operation but the local ones
    runs on a replicated copy (one broadcast), writes going back to the holders."""

    __slots__ = ("holders", "sender")

    def __init__(self, comm: Comm, holders: frozenset, sender: int) -> None:
        hooks.use_held()
        self.global_shape = ()
        self.comm = comm
        self.strategy = "not"
        self.axis = None
        self.replicated = False
        self.local_shape = ()
        self.ndim = 0
        self.size = 1
        self.local_slice = ()
        self.holders = holders
        self.sender = sender

    def __del__(self) -> None:
        try:
            hooks.drop_held()
        except Exception:  # pragma: no cover - interpreter shutdown
            pass

    def region(self, rank: int) -> Box | None:
        return () if rank in self.holders else None

    def source(self, rank: int) -> Box | None:
        return () if rank == self.sender else None


class SlabDistributor(Distributor):
    """Slabs along one axis: rank ``r`` holds ``offsets[r]:offsets[r+1]`` of ``axis``."""

    __slots__ = ("offsets", "offsets_array", "local_start", "local_stop")

    def __init__(
        self, global_shape: tuple, comm: Comm, strategy: str, axis: int, offsets: tuple
    ) -> None:
        self.global_shape = global_shape
        self.comm = comm
        self.strategy = strategy
        self.axis = axis
        self.replicated = False
        self.offsets = offsets
        arr = np.asarray(offsets, dtype=np.intp)
        arr.flags.writeable = False
        self.offsets_array = arr  # the same table as a numpy array (for searchsorted)
        self.local_start = offsets[comm.rank]
        self.local_stop = offsets[comm.rank + 1]
        ls = list(global_shape)
        ls[axis] = self.local_stop - self.local_start
        self.local_shape = tuple(ls)
        self.ndim = len(global_shape)
        self.size = int(np.prod(global_shape, dtype=np.int64))
        self.local_slice = (slice(None),) * axis + (slice(self.local_start, self.local_stop),)

    def region(self, rank: int) -> Box:
        box = [(0, n) for n in self.global_shape]
        box[self.axis] = (self.offsets[rank], self.offsets[rank + 1])
        return tuple(box)

    def span(self, axis: int | None = None) -> tuple[int, int]:
        if axis is None or axis == self.axis:
            return self.local_start, self.local_stop
        return 0, self.global_shape[axis]

    def bounds(self) -> tuple:
        return self.offsets

    def bounds_array(self) -> np.ndarray:
        return self.offsets_array

    def lengths(self) -> list[int]:
        """Every rank's extent along the distributed axis."""
        o = self.offsets
        return [o[r + 1] - o[r] for r in range(len(o) - 1)]

    def owner(self, index: int) -> int:
        """The rank holding global position ``index`` along the distributed axis."""
        return bisect_right(self.offsets, index) - 1


STRATEGIES = ("not", "equal", "fftw", "freeform")
_LENGTH_RULES = {"equal": equal_lengths, "fftw": fftw_lengths}
# Equal layouts share one distributor.  The cache is bounded: when it is full it
# starts afresh.  Arrays keep their distributors; a layout built again afterwards is
# an equal but distinct object, and every "same layout" test falls back to comparing
# offsets, so correctness never rests on identity.
_CACHE = BoundedCache(4096)
#: ``_CACHE.get``, bound once: a dict subclass's method call is not specialized by the
#: interpreter (about 50 instructions more in every constructor)
_cached = _CACHE.get


def normalize_axis(axis: int, ndim: int) -> int:
    if not isinstance(axis, (int, np.integer)) or isinstance(axis, bool):
        raise TypeError(f"axis must be an integer, got {axis!r}")
    if not -ndim <= axis < ndim:
        raise np.exceptions.AxisError(f"axis {axis} is out of bounds for array of dimension {ndim}")
    return int(axis) % ndim


def slab_distributor(
    global_shape: tuple, comm: Comm, axis: int, offsets: Sequence[int], strategy: str = "freeform"
) -> Distributor:
    """The (cached) slab layout with an explicit offsets table; no communication."""
    offsets = tuple(int(o) for o in offsets)
    key = ("slab", global_shape, comm, axis, offsets, strategy)
    d = _cached(key)
    if d is None:
        d = _CACHE.put(key, SlabDistributor(global_shape, comm, strategy, axis, offsets))
    return d


def get_distributor(
    strategy: str, global_shape: Sequence[int], comm: Comm, axis: int = 0
) -> Distributor:
    """The (cached) distributor of a global-type strategy ('not', 'equal', 'fftw').

    No communication.  A 0-d array is replicated whatever the strategy.
    """
    if type(global_shape) is not tuple:
        global_shape = tuple(global_shape)
    key = (strategy, global_shape, comm, axis)
    d = _cached(key)
    if d is not None:
        return d
    global_shape = tuple(int(n) for n in global_shape)
    if strategy not in STRATEGIES:
        raise ValueError(
            f"unknown distribution_strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}"
        )
    if any(n < 0 for n in global_shape):
        raise ValueError(f"negative dimensions are not allowed: {global_shape}")
    if strategy == "not" or not global_shape:
        d = ReplicatedDistributor(global_shape, comm, strategy)
    else:
        # 'freeform' without local pieces (global data, another layout) takes the 'equal'
        # lengths, labelled 'freeform' (the original D2O's behaviour)
        ax = normalize_axis(axis, len(global_shape))
        rule = _LENGTH_RULES["equal" if strategy == "freeform" else strategy]
        lengths = rule(global_shape[ax], comm.size)
        offsets = tuple(np.concatenate(([0], np.cumsum(lengths))).tolist())
        d = slab_distributor(global_shape, comm, ax, offsets, strategy)
    return _CACHE.put(key, d)


def like(dist: Distributor, global_shape: tuple, axis: int | None = None) -> Distributor:
    """A layout of ``dist``'s strategy for another global shape; no communication.

    'not' stays replicated; 'equal'/'fftw' apply their rule along ``axis``
    (default: ``dist``'s axis); explicit offsets are kept when the distributed
    length is unchanged, else the result falls back to 'equal'.
    """
    global_shape = tuple(global_shape)
    ax = (dist.axis or 0) if axis is None else axis
    s = dist.strategy
    if s == "block":  # a mesh layout: the slab rule (d2o.layouts.mesh.moved keeps the mesh)
        s = "equal" if global_shape else "not"
    if s == "not" or not global_shape:
        return get_distributor(s, global_shape, dist.comm, 0)
    if s in _LENGTH_RULES:
        return get_distributor(s, global_shape, dist.comm, ax)
    if not dist.replicated and global_shape[ax] == dist.global_shape[dist.axis]:
        return dist.slabs_like(global_shape, ax, s)
    return get_distributor("equal", global_shape, dist.comm, ax)


def freeform_distributor(c: Comm, piece: np.ndarray, meta, axis, metas) -> Distributor:
    """The 'freeform' slab layout of local pieces ``piece`` (``meta``: its (shape, dtype);
    ``metas``: every rank's, or None to allgather them here: one small allgather)."""
    ax = normalize_axis(axis, piece.ndim)
    if metas is None:
        metas = c.allgather(meta) if c.size > 1 else [meta]
    shapes = [m[0] for m in metas]
    dtypes = {m[1] for m in metas}
    others = {s[:ax] + s[ax + 1 :] for s in shapes}
    if len(others) != 1 or len({len(s) for s in shapes}) != 1 or len(dtypes) != 1:
        raise ValueError(
            f"'freeform' local pieces must agree in dtype and in every dimension but axis {ax}; "
            f"got shapes {shapes} and dtypes {sorted(dtypes)}"
        )
    lengths = [s[ax] for s in shapes]
    offsets = np.concatenate(([0], np.cumsum(lengths))).tolist()
    gshape = list(piece.shape)
    gshape[ax] = offsets[-1]
    return slab_distributor(tuple(gshape), c, ax, offsets, "freeform")
