"""The communication layer: the only module of d2o that imports mpi4py.

`Comm` wraps an mpi4py communicator, or stands in for one of size 1 when
mpi4py is missing or switched off with ``D2O_MPI=0``.  Array data always
travels through buffer-based calls (uppercase mpi4py methods); only small
metadata (counts, error messages) is pickled.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np

from . import records as _tr

try:  # pragma: no cover - depends on the environment
    if os.environ.get("D2O_MPI", "1").strip().lower() in ("0", "false", "no", "off"):
        raise ImportError("disabled by D2O_MPI=0")
    from mpi4py import MPI
except ImportError:  # pragma: no cover
    MPI = None

__all__ = [
    "Comm",
    "default_comm",
    "as_comm",
    "MPI",
    "have_mpi",
    "os_error",
    "wait_points",
    "pending_check",
    "base_type",
    "region_type",
    "free_types",
    "datatypes",
    "mpi_type",
]


def have_mpi() -> bool:
    """True when d2o runs on mpi4py (not the serial stand-in)."""
    return MPI is not None


def _pickled(value: Any) -> int:
    """Bytes of a pickled metadata value (computed only while a trace is active)."""
    import pickle

    try:
        return len(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
    except Exception:  # pragma: no cover - unpicklable values fail in MPI anyway
        return 0


class Comm:
    """A communicator: mpi4py's, or a serial stand-in of size 1 (``mpi is None``).

    Instances are cached per underlying communicator, so identity comparison
    tells whether two arrays live on the same communicator.
    """

    __slots__ = ("mpi", "rank", "size", "calls", "__weakref__")

    def __init__(self, mpi_comm: Any = None) -> None:
        self.mpi = mpi_comm
        #: MPI calls made on this communicator (the watchdog's sign of progress)
        self.calls = 0
        if mpi_comm is None:
            self.rank, self.size = 0, 1
        else:
            self.rank, self.size = mpi_comm.Get_rank(), mpi_comm.Get_size()

    def __repr__(self) -> str:
        kind = "serial" if self.mpi is None else "mpi"
        return f"<d2o.Comm {kind} rank={self.rank} size={self.size}>"

    # -- small, pickled metadata ------------------------------------------
    def allreduce(self, value: Any, op: str = "sum") -> Any:
        """Reduce a small Python value over all ranks; every rank gets the result."""
        if before_call[0] is not None:  # controller mode on rank 0
            before_call[0]()
        if self.size == 1:
            return value
        if pending_check[0] is not None:
            pending_check[0].flush()
        self.calls += 1
        out = self.mpi.allreduce(value, op=_MPI_OPS[op])
        if _tr.active:
            _tr.note("allreduce", _pickled(value), _pickled(out), self.size)
        return out

    def any_flag(self, flag: bool) -> bool:
        """True on every rank when ``flag`` is true on any rank (a one-byte buffer Allreduce)."""
        if before_call[0] is not None:  # controller mode on rank 0
            before_call[0]()
        if self.size == 1:
            return bool(flag)
        send = _FLAG_SEND
        send[0] = 1 if flag else 0
        if pending_check[0] is not None:
            pending_check[0].flush()
        self.calls += 1
        self.mpi.Allreduce(send, _FLAG_RECV, op=MPI.MAX)
        if _tr.active:
            _tr.note("Allreduce", 1, 1, self.size, -1, 1)
        return bool(_FLAG_RECV[0])

    def allgather(self, value: Any) -> list:
        """Gather one small picklable value from every rank, on every rank."""
        if before_call[0] is not None:  # controller mode on rank 0
            before_call[0]()
        if self.size == 1:
            return [value]
        if pending_check[0] is not None:
            pending_check[0].flush()
        self.calls += 1
        out = self.mpi.allgather(value)
        if _tr.active:
            sizes = [_pickled(v) for v in out]
            _tr.note("allgather", sizes[self.rank], sum(sizes) - sizes[self.rank], self.size)
        return out

    def bcast(self, value: Any, root: int = 0) -> Any:
        """Broadcast a small picklable value from ``root``."""
        if before_call[0] is not None:  # controller mode on rank 0
            before_call[0]()
        if self.size == 1:
            return value
        if pending_check[0] is not None:
            pending_check[0].flush()
        self.calls += 1
        out = self.mpi.bcast(value, root=root)
        if _tr.active:
            n = _pickled(out)
            _tr.note(
                "bcast", n if self.rank == root else 0, 0 if self.rank == root else n, self.size
            )
        return out

    def barrier(self) -> None:
        """Wait for every rank."""
        if before_call[0] is not None:  # controller mode on rank 0
            before_call[0]()
        if self.size > 1:
            if pending_check[0] is not None:
                pending_check[0].flush()
            self.calls += 1
            self.mpi.Barrier()
            if _tr.active:
                _tr.note("Barrier", 0, 0, self.size)

    # -- numpy buffers ------------------------------------------------------
    def Allgather(self, send: np.ndarray) -> np.ndarray:
        """Gather equal-shaped arrays from all ranks; returns shape (size,)+send.shape."""
        if before_call[0] is not None:  # controller mode on rank 0
            before_call[0]()
        send = np.ascontiguousarray(send)
        out = np.empty((self.size,) + send.shape, dtype=send.dtype)
        if self.size == 1:
            out[0] = send
        elif send.nbytes:
            if pending_check[0] is not None:
                pending_check[0].flush()
            self.calls += 1
            self.mpi.Allgather([send, MPI.BYTE], [out, MPI.BYTE])
            if _tr.active:
                _tr.note("Allgather", send.nbytes, send.nbytes * (self.size - 1), self.size)
        return out

    def Allgatherv(self, send: np.ndarray, counts: list[int]) -> np.ndarray:
        """Concatenate 1-D arrays of ``counts[r]`` elements from every rank."""
        if before_call[0] is not None:  # controller mode on rank 0
            before_call[0]()
        send = np.ascontiguousarray(send).reshape(-1)
        out = np.empty(sum(counts), dtype=send.dtype)
        if self.size == 1:
            out[...] = send
            return out
        item = send.dtype.itemsize
        bcounts = [c * item for c in counts]
        displs = np.concatenate(([0], np.cumsum(bcounts)[:-1])).tolist()
        if pending_check[0] is not None:
            pending_check[0].flush()
        self.calls += 1
        self.mpi.Allgatherv([send, MPI.BYTE], [out, (bcounts, displs), MPI.BYTE])
        if _tr.active:
            mine = bcounts[self.rank]
            _tr.note("Allgatherv", mine, sum(bcounts) - mine, self.size)
        return out

    def Allreduce(
        self, send: np.ndarray, op: str | np.ufunc | Callable, rows: Callable | None = None
    ) -> np.ndarray:
        """Element-wise reduction of equal-shaped arrays; ``op`` is a name ("sum", "max",
        ...) or a numpy ufunc (MPI's built-in op where it combines alike, else one that
        calls the ufunc, made once per ufunc and dtype).

        Any other callable is the fold of fixed-size records: ``send`` is one record (a
        1-D uint64 array) per rank and ``op(a, b)`` folds record ``a`` (of lower ranks)
        into record ``b`` in place.  It runs as a non-commutative MPI user op (rank order,
        so every rank gets the same bits), made once per function, over a datatype of
        the whole record, so it always sees whole records; up to `RECORD_GATHER_MAX` ranks
        the records are gathered and folded locally in the same order instead (cheaper
        than a Python op there; ``rows(gathered)``, if given, folds them all at once).
        Either way one collective: O(log P) messages of
        ``send.nbytes`` per rank above that, O(P) bytes received below.
        """
        if self.size == 1:
            return send.copy()
        if rows is not None and self.size <= RECORD_GATHER_MAX[0]:  # the commonest call
            return rows(self.Allgather(send))  # the fold's own form for all rows at once
        if not isinstance(op, (str, np.ufunc)) and self.size <= RECORD_GATHER_MAX[0]:
            # few ranks: their rows, folded here in rank order (the same bits everywhere),
            # cost less than MPI calling a Python op at every step of its tree
            gathered = self.Allgather(send)
            out = gathered[0].copy()
            for row in gathered[1:]:
                op(out, row)
                out = row
            return out.copy()
        if before_call[0] is not None:  # controller mode on rank 0
            before_call[0]()
        send = np.ascontiguousarray(send)
        out = np.empty_like(send)
        if isinstance(op, str):
            mpi_op, spec = _MPI_OPS[op], _mpi_type(send.dtype)
        elif isinstance(op, np.ufunc):
            mpi_op, spec = _ufunc_op(op, send.dtype), _mpi_type(send.dtype)
        else:
            mpi_op, spec = _record_op(op, send.size), (1, _record_type(send.size))
        if pending_check[0] is not None:
            pending_check[0].flush()
        self.calls += 1
        if type(spec) is tuple:
            self.mpi.Allreduce([send, *spec], [out, *spec], mpi_op)
        else:
            self.mpi.Allreduce([send, spec], [out, spec], mpi_op)
        if _tr.active:  # MPICH picks its algorithm by the op (built-in or not) and the count
            count = send.size if mpi_op.is_predefined else 0
            _tr.note("Allreduce", send.nbytes, out.nbytes, self.size, -1, count)
        return out

    def Bcast(self, buf: np.ndarray, root: int = 0) -> np.ndarray:
        """Broadcast a contiguous array in place from ``root``."""
        if before_call[0] is not None:  # controller mode on rank 0
            before_call[0]()
        if self.size > 1 and buf.nbytes:
            if pending_check[0] is not None:
                pending_check[0].flush()
            self.calls += 1
            self.mpi.Bcast([buf, MPI.BYTE], root=root)
            if _tr.active:
                mine = self.rank == root
                _tr.note("Bcast", buf.nbytes if mine else 0, 0 if mine else buf.nbytes, self.size)
        return buf

    def Ibcast(self, buf: np.ndarray, root: int = 0) -> Any:
        """Start broadcasting a contiguous array in place from ``root`` (non-blocking: every
        rank must start it, in the same order as its other collectives here, and complete
        it with the request's ``Wait``/``Test``); returns the request, or None where
        nothing moves (one rank, an empty buffer)."""
        if before_call[0] is not None:  # controller mode on rank 0
            before_call[0]()
        if self.size == 1 or not buf.nbytes:
            return None
        if pending_check[0] is not None:
            pending_check[0].flush()
        self.calls += 1
        req = self.mpi.Ibcast([buf, MPI.BYTE], root=root)
        if _tr.active:
            mine = self.rank == root
            _tr.note("Bcast", buf.nbytes if mine else 0, 0 if mine else buf.nbytes, self.size)
        return req

    def wait(self, req: Any) -> None:
        """Complete a request this communicator's `Ibcast` started (None: nothing to do);
        a wait point of the watchdog, like the blocking calls."""
        if req is not None:
            req.Wait()

    def Alltoallw(
        self,
        send: np.ndarray,
        sendtypes: list,
        recv: np.ndarray,
        recvtypes: list,
        sdispls: list | None = None,
        rdispls: list | None = None,
    ):
        """All-to-all with one (count, datatype) pair per peer (see redistribution), at
        byte displacements ``sdispls``/``rdispls`` (default: all 0)."""
        if before_call[0] is not None:  # controller mode on rank 0
            before_call[0]()
        zeros = [0] * self.size
        if pending_check[0] is not None:
            pending_check[0].flush()
        self.calls += 1
        self.mpi.Alltoallw(
            [send, ([c for c, _ in sendtypes], sdispls or zeros), [t for _, t in sendtypes]],
            [recv, ([c for c, _ in recvtypes], rdispls or zeros), [t for _, t in recvtypes]],
        )
        if _tr.active:
            me = self.rank
            sent = sum(c * t.Get_size() for r, (c, t) in enumerate(sendtypes) if r != me)
            got = sum(c * t.Get_size() for r, (c, t) in enumerate(recvtypes) if r != me)
            peers = sum(1 for r, (c, t) in enumerate(sendtypes) if r != me and c * t.Get_size())
            _tr.note("Alltoallw", sent, got, self.size, peers)
            _tr.note_temp(recv.nbytes)

    def Alltoallv(self, send: np.ndarray, sc: list, recv: np.ndarray, rc: list, datatype) -> None:
        """All-to-all of 1-D buffers grouped by peer: ``sc[r]``/``rc[r]`` elements of ``datatype``."""
        if before_call[0] is not None:  # controller mode on rank 0
            before_call[0]()
        sd = [0] * self.size
        rd = [0] * self.size
        for r in range(1, self.size):
            sd[r] = sd[r - 1] + sc[r - 1]
            rd[r] = rd[r - 1] + rc[r - 1]
        if pending_check[0] is not None:
            pending_check[0].flush()
        self.calls += 1
        self.mpi.Alltoallv([send, (sc, sd), datatype], [recv, (rc, rd), datatype])
        if _tr.active:
            me, item = self.rank, datatype.Get_size()
            peers = sum(1 for r, c in enumerate(sc) if r != me and c)
            _tr.note(
                "Alltoallv", (sum(sc) - sc[me]) * item, (sum(rc) - rc[me]) * item, self.size, peers
            )
            _tr.note_temp(recv.nbytes)

    def Sendrecv_many(self, sends: list, recvs: list) -> None:
        """Point-to-point: send each ``(peer, contiguous array)`` of ``sends`` and receive
        into each ``(peer, contiguous array)`` of ``recvs`` (non-blocking, then wait for
        all).  Only the ranks named talk; every pair must name each other alike."""
        if before_call[0] is not None:  # controller mode on rank 0
            before_call[0]()
        tag = _P2P_TAG
        if pending_check[0] is not None:
            pending_check[0].flush()
        self.calls += 1
        reqs = [self.mpi.Irecv([buf, MPI.BYTE], source=p, tag=tag) for p, buf in recvs]
        reqs += [self.mpi.Isend([buf, MPI.BYTE], dest=p, tag=tag) for p, buf in sends]
        MPI.Request.Waitall(reqs)
        if _tr.active:
            sent = sum(buf.nbytes for _, buf in sends)
            _tr.note("Sendrecv", sent, sum(buf.nbytes for _, buf in recvs), 2, len(sends))

    def Sendrecv_start(self, sends: list, recvs: list) -> list:
        """Point-to-point, non-blocking: post what `Sendrecv_many` sends and receives and
        return its requests, for `Sendrecv_wait` (the caller computes meanwhile).  Every
        pair must name each other alike, and each rank post its exchanges in one order."""
        if before_call[0] is not None:  # controller mode on rank 0
            before_call[0]()
        if pending_check[0] is not None:
            pending_check[0].flush()
        self.calls += 1
        tag = _P2P_TAG
        reqs = [self.mpi.Irecv([buf, MPI.BYTE], source=p, tag=tag) for p, buf in recvs]
        reqs += [self.mpi.Isend([buf, MPI.BYTE], dest=p, tag=tag) for p, buf in sends]
        if _tr.active:
            sent = sum(buf.nbytes for _, buf in sends)
            _tr.note("Sendrecv", sent, sum(buf.nbytes for _, buf in recvs), 2, len(sends))
        return reqs

    def Sendrecv_wait(self, reqs: list) -> None:
        """Wait for the requests `Sendrecv_start` returned (local: only the peers named
        there take part).  Nothing once MPI is finalised (a request dropped at exit)."""
        if not MPI.Is_finalized():
            MPI.Request.Waitall(reqs)

    def send(self, value: Any, dest: int, tag: int = 0) -> None:
        """Point-to-point send of a small picklable value."""
        if before_call[0] is not None:  # controller mode on rank 0
            before_call[0]()
        if pending_check[0] is not None:
            pending_check[0].flush()
        self.calls += 1
        self.mpi.send(value, dest=dest, tag=tag)
        if _tr.active:
            _tr.note("send", _pickled(value), 0, 2)

    def recv(self, source: int, tag: int = 0) -> Any:
        """Point-to-point receive of a small picklable value."""
        if before_call[0] is not None:  # controller mode on rank 0
            before_call[0]()
        if pending_check[0] is not None:
            pending_check[0].flush()
        self.calls += 1
        value = self.mpi.recv(source=source, tag=tag)
        if _tr.active:
            _tr.note("recv", 0, _pickled(value), 2)
        return value

    def Split(self, color: int, key: int) -> Comm:
        """Collective: the communicator of the ranks passing the same ``color``, ordered by
        ``key`` (MPI_Comm_split); not cached here."""
        if before_call[0] is not None:  # controller mode on rank 0
            before_call[0]()
        if pending_check[0] is not None:
            pending_check[0].flush()
        self.calls += 1
        sub = Comm(self.mpi.Split(color, key))
        if _tr.active:
            _tr.note("Comm_split", 0, 0, self.size)
        return sub

    def note_call(self) -> None:
        """Count a collective call made on ``self.mpi`` outside this class (MPI-IO)."""
        if _tr.active and self.size > 1:
            _tr.note("MPI-IO", 0, 0, self.size)


if MPI is not None:
    _MPI_OPS = {
        "sum": MPI.SUM,
        "prod": MPI.PROD,
        "max": MPI.MAX,
        "min": MPI.MIN,
        "land": MPI.LAND,
        "lor": MPI.LOR,
        "bor": MPI.BOR,
    }
else:  # pragma: no cover
    _MPI_OPS = {}


#: Controller mode on rank 0 (`d2o.runtime.controller`): called before every MPI call of
#: `Comm` (the workers must join it: rank 0 sends the queued commands first).
before_call: list = [None]
#: Checked mode (`d2o.runtime.funnel`): the argument check of the running public operation while
#: it waits to ride on the operation's first agreement (`d2o.core.errors`); any other MPI call
#: on the way runs it on its own first (``flush()``).
pending_check: list = [None]

#: The code of every `Comm` method that waits in MPI: a thread whose innermost frame runs
#: one of them is inside an MPI call (read by the watchdog, `d2o.core.watchdog`).
wait_points = frozenset(
    getattr(Comm, name).__code__
    for name in (
        "allreduce", "any_flag", "allgather", "bcast", "barrier", "Allgather", "Allgatherv",
        "Allreduce", "Bcast", "wait", "Alltoallw", "Alltoallv", "Sendrecv_many", "Sendrecv_wait",
        "send", "recv", "Split",
    )
)  # fmt: skip

_TYPE_CACHE: dict = {}
#: ufunc -> (the dtype kinds on which MPI's built-in op combines as the ufunc does, its name)
_BUILTIN_OPS: dict[Any, tuple[str, str]] = {
    np.add: ("iufc", "sum"),
    np.multiply: ("iufc", "prod"),
    np.maximum: ("iu", "max"),
    np.minimum: ("iu", "min"),
    np.logical_and: ("b", "land"),
    np.logical_or: ("b", "lor"),
}
#: (ufunc, dtype) -> the MPI op that calls the ufunc (floats' max/min: numpy's NaN rules)
_UFUNC_OPS: dict = {}
#: the tag of `Comm.Sendrecv_many` (apart from the pickled ``send``/``recv``'s default 0)
_P2P_TAG = 7301
_FLAG_SEND = np.zeros(1, dtype=np.int8)
_FLAG_RECV = np.zeros(1, dtype=np.int8)


def _ufunc_op(ufunc: np.ufunc, dtype: np.dtype):
    """The MPI op combining like ``ufunc`` on ``dtype``: built-in where it matches numpy,
    else a user op calling the ufunc (made once, kept for the process)."""
    kinds, name = _BUILTIN_OPS.get(ufunc, ("", ""))
    if dtype.kind in kinds:
        return _MPI_OPS[name]
    op = _UFUNC_OPS.get((ufunc, dtype))
    if op is None:
        op = _UFUNC_OPS[ufunc, dtype] = MPI.Op.Create(_Combine(ufunc, dtype), commute=True)
    return op


class _Combine:
    """An MPI user op's function: ``inoutbuf = ufunc(inbuf, inoutbuf)`` on ``dtype``."""

    __slots__ = ("ufunc", "dtype")

    def __init__(self, ufunc: np.ufunc, dtype: np.dtype) -> None:
        self.ufunc, self.dtype = ufunc, dtype

    def __call__(self, inbuf: Any, inoutbuf: Any, datatype: Any) -> None:
        a = np.frombuffer(inbuf, dtype=self.dtype)
        b = np.frombuffer(inoutbuf, dtype=self.dtype)
        self.ufunc(a, b, out=b)


#: Up to this many ranks, `Comm.Allreduce` of records gathers the rows and folds them
#: locally (one Allgather of P records: at 2 ranks about 4 us against 8 for the Allreduce
#: with a Python op); above it, O(log P) messages of one record.
RECORD_GATHER_MAX = [8]
#: (fold function, words) of a record `Comm.Allreduce` -> its MPI user op (made once, kept for the process)
_RECORD_OPS: dict = {}
#: words per record -> the committed contiguous datatype of one record
_RECORD_TYPES: dict = {}


def _record_op(fold: Callable, words: int):
    """The non-commutative MPI user op applying ``fold`` to records of ``words`` uint64."""
    op = _RECORD_OPS.get((fold, words))
    if op is None:
        op = _RECORD_OPS[fold, words] = MPI.Op.Create(_Fold(fold, words), commute=False)
    return op


def _record_type(words: int):
    """The datatype of one record of ``words`` uint64 (kept for the process)."""
    t = _RECORD_TYPES.get(words)
    if t is None:
        t = _RECORD_TYPES[words] = MPI.UINT64_T.Create_contiguous(words).Commit()
    return t


class _Fold:
    """An MPI user op's function over records of ``words`` uint64: ``fold(in, inout)``
    for each record of the buffers."""

    __slots__ = ("fold", "words")

    def __init__(self, fold: Any, words: int) -> None:
        self.fold, self.words = fold, words

    def __call__(self, inbuf: Any, inoutbuf: Any, datatype: Any) -> None:
        a = np.frombuffer(inbuf, dtype=np.uint64)
        b = np.frombuffer(inoutbuf, dtype=np.uint64)
        w = self.words
        for i in range(0, b.size, w):
            self.fold(a[i : i + w], b[i : i + w])


def _mpi_type(dtype: np.dtype):
    """The MPI datatype matching a numpy dtype (bool, ints, floats, complex)."""
    t = _TYPE_CACHE.get(dtype)
    if t is None:
        # The predefined type (built-in ops are defined on it), not dtlib's duplicate.
        t = MPI._typedict.get(dtype.char) if dtype.isnative else None
        if t is None:
            from mpi4py.util import dtlib

            t = dtlib.from_numpy_dtype(dtype)
        _TYPE_CACHE[dtype] = t
    return t


def mpi_type(dtype: np.dtype) -> Any:
    """The predefined MPI datatype of a numpy dtype (for reductions and accumulates)."""
    return _mpi_type(np.dtype(dtype))


#: Derived MPI datatypes made by `base_type` and `region_type` and given back by
#: `free_types` in this process (the serial stand-in makes none).  The tests read it to
#: see that exchange plans (`d2o.move.redistribution`) build their datatypes once.
datatypes = {"created": 0, "freed": 0}

_BASE_TYPES: dict = {}


def base_type(itemsize: int):
    """An MPI datatype of ``itemsize`` bytes, used for raw copies only (kept for the
    process's life, one per size).

    Named types of the right size are preferred: MPICH packs subarrays of
    them about twice as fast as subarrays of a contiguous-bytes type.
    """
    t = _BASE_TYPES.get(itemsize)
    if t is None:
        named = {1: MPI.BYTE, 2: MPI.INT16_T, 4: MPI.INT32_T, 8: MPI.DOUBLE}
        named[16] = MPI.C_DOUBLE_COMPLEX
        t = named.get(itemsize)
        if t is None:
            t = MPI.BYTE.Create_contiguous(itemsize).Commit()
            datatypes["created"] += 1
        _BASE_TYPES[itemsize] = t
    return t


def region_type(base: Any, sizes: list, blocks: list) -> list:
    """The committed datatype that selects, in a C-ordered array of ``sizes`` elements of
    ``base``, per axis the (position, length) ``blocks`` of that axis: an MPI subarray when
    every axis has one block, nested hindexed types otherwise.  Returns every datatype it
    made, the committed one last; give them all back with `free_types`."""
    if all(len(b) == 1 for b in blocks):
        subsizes = [b[0][1] for b in blocks]
        starts = [b[0][0] for b in blocks]
        t = base.Create_subarray(sizes, subsizes, starts, order=MPI.ORDER_C).Commit()
        datatypes["created"] += 1
        return [t]
    made: list = []
    try:
        stride = base.Get_extent()[1]
        inner = base
        for k in range(len(sizes) - 1, -1, -1):  # innermost axis first
            lens = [n for _, n in blocks[k]]
            disps = [p * stride for p, _ in blocks[k]]
            t = inner.Create_hindexed(lens, disps)
            made.append(t)
            stride *= sizes[k]
            if k:
                t = t.Create_resized(0, stride)
                made.append(t)
            inner = t
        inner.Commit()
    except BaseException:
        datatypes["created"] += len(made)
        free_types(made)
        raise
    datatypes["created"] += len(made)
    return made


def free_types(types: list) -> None:
    """Give back datatypes made by `region_type` (nothing to do once MPI has finalized)."""
    if types and MPI is not None and not MPI.Is_finalized():
        for t in types:
            t.Free()
    datatypes["freed"] += len(types)


_COMMS: list[Comm] = []
SERIAL = Comm(None)


def as_comm(comm: Any = None) -> Comm:
    """Return the cached `Comm` for ``comm`` (an mpi4py communicator, a `Comm` or None)."""
    if comm is None:
        return default_comm()
    if isinstance(comm, Comm):
        return comm
    if MPI is None:
        return SERIAL
    for c in _COMMS:
        if c.mpi is comm or (c.mpi == comm):
            return c
    wrapped = Comm(comm)
    _COMMS.append(wrapped)
    return wrapped


_DEFAULT: list[Comm] = []


def default_comm() -> Comm:
    """The communicator used when none is given: COMM_WORLD, or the serial stand-in."""
    if _DEFAULT:
        return _DEFAULT[0]
    _DEFAULT.append(SERIAL if MPI is None else as_comm(MPI.COMM_WORLD))
    return _DEFAULT[0]


#: Controller mode on rank 0: what the script gets for a communicator (`d2o.default_comm`,
#: ``x.comm`` outside d2o's operations), a stand-in whose calls refuse; None otherwise.
script_comm: list = [None]


def user_default_comm() -> Any:
    """The communicator used when none is given: COMM_WORLD, or the serial stand-in (in
    controller mode, on rank 0, the script's stand-in communicator)."""
    s = script_comm[0]
    return default_comm() if s is None else s


def os_error(exc: BaseException, path: str) -> BaseException:
    """Python's exception for a failed MPI-IO call (``MPI.Exception``), as a serial program
    would get it: FileNotFoundError, PermissionError, FileExistsError, or OSError."""
    import errno

    if MPI is None or not isinstance(exc, MPI.Exception):
        return exc
    cls = exc.Get_error_class()
    table = {
        MPI.ERR_NO_SUCH_FILE: (FileNotFoundError, errno.ENOENT),
        MPI.ERR_ACCESS: (PermissionError, errno.EACCES),
        MPI.ERR_READ_ONLY: (PermissionError, errno.EROFS),
        MPI.ERR_FILE_EXISTS: (FileExistsError, errno.EEXIST),
        MPI.ERR_NO_SPACE: (OSError, errno.ENOSPC),
        MPI.ERR_QUOTA: (OSError, errno.EDQUOT),
    }
    kind, code = table.get(cls, (OSError, errno.EIO))
    return kind(code, f"{os.strerror(code)} (MPI-IO: {exc.Get_error_string()})", path)
