"""One-sided access: an MPI window over memory that MPI allocates, in a passive-target
epoch.  With `d2o.core.comm` and `d2o.core.mpiio` the only place of d2o that calls MPI
(`d2o.move.rma` builds the windows of distributed arrays on it).

Why MPI's memory (``MPI_Win_allocate``), not the array's own: passive-target operations
on memory the program allocated may not progress while the target computes outside MPI.
Measured with MPICH 5.0 on one node, 2 processes, the target in a 1 s numpy loop: an
8-byte get took 0.92 s from a window made with ``MPI_Win_create`` on a numpy array and
73 us from one made with ``MPI_Win_allocate`` (inside a node MPICH maps that memory
into every process, and the origin copies itself).

Direct access inside a node: ``MPI_Win_shared_query`` (MPI 4 allows it on any window)
gives this process the memory of every rank that MPI placed in shared memory (the ranks
of its node; none on other nodes).  With ``shared=True`` (the default) a get or put to
such a rank is a numpy copy between that memory and the origin's array, with no MPI call
but ``MPI_Win_sync`` (the unified memory model's barrier: before a load, so that it sees
what others completed; in `flush`, so that others see this rank's stores); a one-element
get is a load.  Targets on other nodes, and every get and put with ``shared=False``, are
``MPI_Get``/``MPI_Put`` calls.  Accumulates, fetch-and-op and compare-and-swap are
always MPI calls, to any target: MPI makes them atomic only among its own accumulate
operations.  Measured at 2 processes on one node (`benchmarks/bench_rma.py`): an
8-byte get from a shared peer costs a few microseconds of Python, where ``MPI_Get`` and
``MPI_Win_flush`` took 30-40 us; a 1 MiB get is a ``memcpy``.

Without MPI (``comm.mpi is None``) the window is a numpy buffer and every operation a
numpy copy: the same results on one process.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from . import comm as _comm
from . import records as _tr
from .comm import MPI, Comm, base_type, free_types, mpi_type, region_type

__all__ = ["RawWindow", "RMA_OPS"]

#: The accumulate operations: name -> the numpy ufunc it matches (None: replace).
RMA_OPS: dict[str, Any] = {
    "sum": np.add,
    "prod": np.multiply,
    "min": np.minimum,
    "max": np.maximum,
    "replace": None,
}

if MPI is not None:
    _MPI_RMA = {
        "sum": MPI.SUM,
        "prod": MPI.PROD,
        "min": MPI.MIN,
        "max": MPI.MAX,
        "replace": MPI.REPLACE,
        "no_op": MPI.NO_OP,
    }
else:  # pragma: no cover
    _MPI_RMA = {}

#: compare-and-swap compares bits: the integer type of each element size
_CAS_TYPES = {1: "INT8_T", 2: "INT16_T", 4: "INT32_T", 8: "INT64_T"}


def _axis_index(b: list) -> Any:
    """One axis's (position, length) blocks as a numpy index: a slice where they are one
    block or evenly spaced single elements, else the positions."""
    if len(b) == 1:
        return slice(b[0][0], b[0][0] + b[0][1])
    if all(n == 1 for _, n in b):
        step = b[1][0] - b[0][0]
        if step > 0 and all(b[i + 1][0] - b[i][0] == step for i in range(len(b) - 1)):
            return slice(b[0][0], b[-1][0] + 1, step)
    return np.concatenate([np.arange(p, p + n) for p, n in b])


def _region(arr: np.ndarray, blocks: list) -> tuple:
    """The numpy index of ``blocks`` in ``arr`` (basic slices where it can be)."""
    ix = [_axis_index(b) for b in blocks]
    if all(isinstance(i, slice) for i in ix):
        return tuple(ix)
    return np.ix_(*[np.arange(i.start, i.stop, i.step) if isinstance(i, slice) else i
                    for i in ix])  # fmt: skip


class RawWindow:
    """Collective over ``comm``: ``nbytes`` of window memory on this rank (elements of
    ``dtype``; displacements count elements), opened for passive-target access by every
    rank at once (``MPI_Win_lock_all``) after `start`.

    The operations name a target rank, the C-ordered shape ``sizes`` of the target's
    piece and per axis the ``(position, length)`` blocks of it to move (an MPI subarray
    or indexed datatype at the target, or a numpy index of its shared memory); the
    origin side is one array (contiguous for MPI calls).  They are complete at the
    target after `flush`.  ``shared``: read and write the ranks whose memory this
    process can map with numpy copies (see the module); False: MPI calls only.
    """

    __slots__ = ("comm", "dtype", "memory", "_win", "_open", "_peers", "_shared", "_pending")

    def __init__(self, comm: Comm, nbytes: int, dtype: np.dtype, shared: bool = True) -> None:
        self.comm, self.dtype = comm, np.dtype(dtype)
        self._win: Any = None
        self._open = False
        #: rank -> its window memory as a flat array of ``dtype`` (None: MPI calls only),
        #: filled as ranks are first accessed
        self._peers: dict[int, Any] = {}
        self._shared = False
        #: origin buffers of puts and accumulates not yet flushed (MPI may read them late)
        self._pending: list = []
        if comm.mpi is None:
            self.memory = np.zeros(nbytes, dtype=np.uint8)
            return
        if _comm.before_call[0] is not None:  # controller mode on rank 0
            _comm.before_call[0]()
        if _comm.pending_check[0] is not None:  # checked mode: the arguments agree first
            _comm.pending_check[0].flush()
        comm.calls += 1
        self._win = MPI.Win.Allocate(nbytes, self.dtype.itemsize, comm=comm.mpi)
        if _tr.active:
            _tr.note("Win_allocate", 0, 0, comm.size)
        # direct loads and stores need the unified memory model
        self._shared = bool(shared) and self._win.model == MPI.WIN_UNIFIED
        if nbytes:
            self.memory = np.frombuffer(self._win.tomemory(), dtype=np.uint8)[:nbytes]
        else:
            self.memory = np.zeros(0, dtype=np.uint8)

    def start(self) -> None:
        """Collective: open the passive-target epoch to every rank (after this rank's
        memory holds its data: every rank waits for all)."""
        if self._win is not None:
            self._win.Lock_all()
            self._win.Sync()  # this rank's stores are seen ...
            self.comm.barrier()
            self._win.Sync()  # ... and it sees everyone's
        self._open = True

    def close(self) -> None:
        """Collective: end the epoch and free the memory (views of `memory` die with it)."""
        self._open = False
        self._peers.clear()
        if self._win is not None:
            self._win.Unlock_all()
            self._pending.clear()
            self.comm.calls += 1
            self._win.Free()
            self._win = None
            if _tr.active:
                _tr.note("Win_free", 0, 0, self.comm.size)

    def peer(self, rank: int) -> Any:
        """``rank``'s window memory as a flat array of ``dtype`` where this process can
        load and store it directly (shared memory; see the module), else None."""
        try:
            return self._peers[rank]
        except KeyError:
            pass
        view = None
        if self._shared:
            try:
                buf, _unit = self._win.Shared_query(rank)
            except MPI.Exception:  # an MPI without shared_query on this window
                buf = None
            if buf is not None and len(buf):
                view = np.frombuffer(buf, dtype=self.dtype)
        self._peers[rank] = view
        return view

    def sync(self) -> None:
        """``MPI_Win_sync``: this process's loads see what others completed and stores
        it made are seen (no-op without MPI)."""
        if self._win is not None:
            self._win.Sync()

    # -- regions ------------------------------------------------------------
    def _local(self, sizes: list, blocks: list) -> tuple:
        """The numpy index of ``blocks`` in this rank's memory (the serial stand-in)."""
        arr = self.memory.view(self.dtype).reshape(sizes)
        return arr, (_region(arr, blocks) if blocks else ())

    def _target(self, base: Any, sizes: list, blocks: list) -> tuple[list, tuple]:
        """(datatypes to free, the target triple) for ``blocks`` of a piece of ``sizes``."""
        if not sizes:  # a 0-d piece: its one element
            return [], (0, 1, base)
        if all(len(b) == 1 for b in blocks):
            # one C-contiguous stretch (ones, then any length, then whole axes): no datatype
            lens = [b[0][1] for b in blocks]
            k = next((i for i, n in enumerate(lens) if n != 1), len(lens))
            if all(lens[i] == sizes[i] for i in range(k + 1, len(sizes))):
                disp = int(np.ravel_multi_index([b[0][0] for b in blocks], sizes))
                return [], (disp, int(np.prod(lens)), base)
        made = region_type(base, sizes, blocks)
        return made, (0, 1, made[-1])

    def _note(self, kind: str, rank: int, sent: int, received: int) -> None:
        self.comm.calls += 1
        if _tr.active and rank != self.comm.rank:
            _tr.note(kind, sent, received, 2)

    def _shaped(self, view: np.ndarray, sizes: list, blocks: list) -> tuple:
        """A target's shared memory as its piece's shape, and the index of ``blocks``."""
        arr = view[: math.prod(sizes)].reshape(sizes)
        return arr, (_region(arr, blocks) if blocks else ())

    def get(self, out: np.ndarray, rank: int, sizes: list, blocks: list) -> None:
        """Read ``blocks`` of ``rank``'s piece into ``out`` (contiguous, unless `peer`
        gives ``rank``'s memory)."""
        if self._win is None:
            arr, ix = self._local(sizes, blocks)
            out[...] = arr[ix]
            return
        view = self.peer(rank)
        if view is not None:
            arr, ix = self._shaped(view, sizes, blocks)
            self._win.Sync()  # see what others completed there
            out[...] = arr[ix]
            self._note("Get (load)", rank, 0, out.nbytes)
            return
        base = base_type(self.dtype.itemsize)
        made, target = self._target(base, sizes, blocks)
        try:
            self._win.Get([out, out.size, base], rank, target)
        finally:
            free_types(made)
        self._note("Get", rank, 0, out.nbytes)

    def put(self, values: np.ndarray, rank: int, sizes: list, blocks: list) -> None:
        """Write the contiguous ``values`` into ``blocks`` of ``rank``'s piece."""
        if self._win is None:
            arr, ix = self._local(sizes, blocks)
            arr[ix] = values.reshape(np.shape(arr[ix]))
            return
        view = self.peer(rank)
        if view is not None:
            arr, ix = self._shaped(view, sizes, blocks)
            arr[ix] = values.reshape([sum(n for _, n in b) for b in blocks])
            self._note("Put (store)", rank, values.nbytes, 0)
            return
        base = base_type(self.dtype.itemsize)
        made, target = self._target(base, sizes, blocks)
        try:
            self._win.Put([values, values.size, base], rank, target)
        finally:
            free_types(made)
        self._pending.append(values)
        self._note("Put", rank, values.nbytes, 0)

    def load(self, rank: int, disp: int) -> Any:
        """Element ``disp`` of ``rank``'s piece, as a numpy scalar (complete at return)."""
        if self._win is None:
            return self.memory.view(self.dtype)[disp]
        view = self.peer(rank)
        if view is not None:
            self._win.Sync()
            self.comm.calls += 1
            if _tr.active and rank != self.comm.rank:
                _tr.note("Get (load)", 0, self.dtype.itemsize, 2)
            return view[disp]
        out = np.empty(1, dtype=self.dtype)
        base = base_type(self.dtype.itemsize)
        self._win.Get([out, 1, base], rank, (disp, 1, base))
        self._win.Flush(rank)
        self._note("Get", rank, 0, out.nbytes)
        return out[0]

    def store(self, value: np.ndarray, rank: int, disp: int) -> None:
        """Write the one element of ``value`` (an array of ``dtype``) at element ``disp``
        of ``rank``'s piece; complete at the target after `flush`."""
        if self._win is None:
            self.memory.view(self.dtype)[disp] = value[0]
            return
        view = self.peer(rank)
        if view is not None:
            view[disp] = value[0]
            self.comm.calls += 1
            if _tr.active and rank != self.comm.rank:
                _tr.note("Put (store)", self.dtype.itemsize, 0, 2)
            return
        base = base_type(self.dtype.itemsize)
        self._win.Put([value, 1, base], rank, (disp, 1, base))
        self._pending.append(value)
        self._note("Put", rank, value.nbytes, 0)

    def accumulate(self, values: np.ndarray, rank: int, sizes: list, blocks: list, op: str) -> None:
        """Combine the contiguous ``values`` into ``blocks`` of ``rank``'s piece with ``op``
        (a name of `RMA_OPS`); atomic per element."""
        if self._win is None:
            arr, ix = self._local(sizes, blocks)
            ufunc, values = RMA_OPS[op], values.reshape(np.shape(arr[ix]))
            arr[ix] = values if ufunc is None else ufunc(arr[ix], values)
            return
        base = mpi_type(self.dtype)
        made, target = self._target(base, sizes, blocks)
        try:
            self._win.Accumulate([values, values.size, base], rank, target, _MPI_RMA[op])
        finally:
            free_types(made)
        self._pending.append(values)
        self._note("Accumulate", rank, values.nbytes, 0)

    def fetch_and_op(self, value: np.ndarray, rank: int, disp: int, op: str) -> np.ndarray:
        """Atomic: combine the one element ``value`` into element ``disp`` of ``rank``'s
        piece with ``op``; returns the element before (flushed: complete at return)."""
        result = np.empty(1, dtype=self.dtype)
        if self._win is None:
            flat = self.memory.view(self.dtype)
            result[0] = flat[disp]
            ufunc = RMA_OPS[op]
            flat[disp] = value[0] if ufunc is None else ufunc(flat[disp], value[0])
            return result
        t = mpi_type(self.dtype)
        self._win.Fetch_and_op([value, 1, t], [result, 1, t], rank, disp, _MPI_RMA[op])
        self._win.Flush(rank)
        self._note("Fetch_and_op", rank, value.nbytes, result.nbytes)
        return result

    def compare_and_swap(
        self, value: np.ndarray, compare: np.ndarray, rank: int, disp: int
    ) -> np.ndarray:
        """Atomic: element ``disp`` of ``rank``'s piece becomes ``value`` where its bits
        equal ``compare``'s; returns the element before (flushed: complete at return)."""
        result = np.empty(1, dtype=self.dtype)
        if self._win is None:
            flat = self.memory.view(self.dtype)
            result[0] = flat[disp]
            if flat[disp : disp + 1].tobytes() == compare.tobytes():
                flat[disp] = value[0]
            return result
        name = _CAS_TYPES.get(self.dtype.itemsize)
        if name is None:
            raise TypeError(f"compare_and_swap: no {self.dtype.itemsize}-byte elements")
        t = getattr(MPI, name)
        self._win.Compare_and_swap([value, 1, t], [compare, 1, t], [result, 1, t], rank, disp)
        self._win.Flush(rank)
        self._note("Compare_and_swap", rank, 2 * value.nbytes, result.nbytes)
        return result

    def flush(self, rank: int | None = None) -> None:
        """Complete this rank's operations at ``rank`` (None: at every rank), and make this
        rank's memory agree with what others wrote into it (``MPI_Win_sync``, which also
        makes this rank's direct stores into shared memory visible)."""
        if self._win is None:
            return
        if rank is None:
            self._win.Flush_all()
            self._pending.clear()
        else:
            self._win.Flush(rank)
        self._win.Sync()
