"""One-sided access: an MPI window over memory that MPI allocates, in a passive-target
epoch.  With `d2o.core.comm` and `d2o.core.mpiio` the only place of d2o that calls MPI
(`d2o.move.rma` builds the windows of distributed arrays on it).

Why MPI's memory (``MPI_Win_allocate``), not the array's own: passive-target operations
on memory the program allocated may not progress while the target computes outside MPI.
Measured with MPICH 5.0 on one node, 2 processes, the target in a 1 s numpy loop: an
8-byte get took 0.92 s from a window made with ``MPI_Win_create`` on a numpy array and
73 us from one made with ``MPI_Win_allocate`` (inside a node MPICH maps that memory
into every process, and the origin copies itself).

Without MPI (``comm.mpi is None``) the window is a numpy buffer and every operation a
numpy copy: the same results on one process.
"""

from __future__ import annotations

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


class RawWindow:
    """Collective over ``comm``: ``nbytes`` of window memory on this rank (elements of
    ``dtype``; displacements count elements), opened for passive-target access by every
    rank at once (``MPI_Win_lock_all``) after `start`.

    The operations name a target rank, the C-ordered shape ``sizes`` of the target's
    piece and per axis the ``(position, length)`` blocks of it to move (an MPI subarray
    or indexed datatype at the target); the origin side is one contiguous array.  They
    are complete at the target after `flush`.
    """

    __slots__ = ("comm", "dtype", "memory", "_win", "_open")

    def __init__(self, comm: Comm, nbytes: int, dtype: np.dtype) -> None:
        self.comm, self.dtype = comm, np.dtype(dtype)
        self._win: Any = None
        self._open = False
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
        if nbytes:
            self.memory = np.frombuffer(self._win.tomemory(), dtype=np.uint8)[:nbytes]
        else:
            self.memory = np.zeros(0, dtype=np.uint8)

    def start(self) -> None:
        """Collective: open the passive-target epoch to every rank (after this rank's
        memory holds its data: every rank waits for all)."""
        if self._win is not None:
            self._win.Lock_all()
            self.comm.barrier()
        self._open = True

    def close(self) -> None:
        """Collective: end the epoch and free the memory (views of `memory` die with it)."""
        self._open = False
        if self._win is not None:
            self._win.Unlock_all()
            self.comm.calls += 1
            self._win.Free()
            self._win = None
            if _tr.active:
                _tr.note("Win_free", 0, 0, self.comm.size)

    # -- regions ------------------------------------------------------------
    def _local(self, sizes: list, blocks: list) -> tuple:
        """The numpy index of ``blocks`` in this rank's memory (the serial stand-in)."""
        arr = self.memory.view(self.dtype).reshape(sizes)
        ix = [np.concatenate([np.arange(p, p + n) for p, n in b]) for b in blocks]
        return arr, (np.ix_(*ix) if ix else ())

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

    def get(self, out: np.ndarray, rank: int, sizes: list, blocks: list) -> None:
        """Read ``blocks`` of ``rank``'s piece into the contiguous ``out``."""
        if self._win is None:
            arr, ix = self._local(sizes, blocks)
            out[...] = arr[ix]
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
        base = base_type(self.dtype.itemsize)
        made, target = self._target(base, sizes, blocks)
        try:
            self._win.Put([values, values.size, base], rank, target)
        finally:
            free_types(made)
        self._note("Put", rank, values.nbytes, 0)

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
        rank's memory agree with what others wrote into it (``MPI_Win_sync``)."""
        if self._win is None:
            return
        if rank is None:
            self._win.Flush_all()
        else:
            self._win.Flush(rank)
        self._win.Sync()
