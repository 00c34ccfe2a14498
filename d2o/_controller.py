"""Controller mode (DistNumPy's model): rank 0 runs the program, the other ranks serve.

``mpiexec -n P python -m d2o.run script.py`` (see `d2o.run`) starts P processes; rank 0
executes the script, ranks > 0 execute the d2o operations rank 0 sends them.  The
script is sequential: it prints once, opens files once, needs no ``if rank == 0``.

How it works.  Every public operation already passes the funnel (`d2o._funnel`).  In
controller mode the funnel hands each outermost call on rank 0 to `_call`, which

* pickles a *command* (the operation's number, its arguments with every d2o object
  replaced by a handle) and queues it;
* sends it at once when the operation has a large operand (`_ahead`), none (creation),
  or communicated the last time it ran, so that the workers compute while rank 0 does;
  otherwise the queue travels as one batch on rank 0's next MPI call (a chain of small
  element-wise operations costs one message), at 64 commands, or when the program ends;
* runs the operation on rank 0 as usual (rank 0 holds and computes its own piece);
* numbers the d2o objects the operation returns: handles ``(command, position)``,
  which the workers assign to their own results in the same order.

Only this metadata travels from rank 0 (recorded in a trace as ``command`` calls);
array data moves only as the operations themselves move it, except that a large numpy
array made distributed by a creation function is scattered (`_Piece`: each worker
receives its box).  Handles freed on rank 0 (garbage collection) are freed on the
workers with the next batch, before the commands queued after their death.

Errors: an operation that fails on rank 0 before anything was sent is dropped from
the queue (the workers never see it); one that fails later is failed on every rank by
d2o's agreed errors, and its results are discarded everywhere.  Before a command that
communicates, the ranks agree on the queued ones (one Allreduce, only when some were
queued): a failure on a worker is raised in the script then, the command skipped
everywhere, so nothing waits in a collective alone.  Ctrl-C (SIGINT) on rank 0 is
held back while a sent operation runs and raised as KeyboardInterrupt when it has
finished, so the workers stay in step.
"""

from __future__ import annotations

import _signal
import collections
import functools
import importlib
import io
import os
import pickle
import signal
import struct
import sys
import threading
import time
import types
import warnings
import weakref
from typing import Any

import numpy as np

from . import _funnel, _watchdog
from . import _trace as _tr
from ._comm import MPI, Comm, default_comm

__all__ = ["ControllerError", "start_controller", "serve", "flush", "stop", "is_controller"]


class ControllerError(RuntimeError):
    """A call that cannot work in controller mode (the message names the alternative)."""


_HEADER = 2048  # bytes of the fixed broadcast buffer (length + batches up to 2040 bytes)
_ERR_TAG = 7001  # worker -> rank 0: an exception in a worker's part of an operation
_PIECE_TAG = 7002  # rank 0 -> worker: its part of a large numpy argument (`_Piece`)
#: numpy arguments of creation functions from this many bytes on are scattered: each
#: worker receives only the part it keeps, not the whole array inside the command
_SCATTER_BYTES = 1 << 20
_SCATTERING = {"numpy.asarray", "numpy.array", "numpy.asanyarray", "numpy.ascontiguousarray"}
_MAX_QUEUED = 64  # commands queued before a batch is sent anyway
_MAX_BYTES = 1 << 20  # bytes queued before a batch is sent anyway
#: Operations on a local piece of this many bytes are sent before rank 0 runs its part,
#: so that every rank computes at once; smaller ones wait in the queue (latency hiding).
_AHEAD_BYTES = 1 << 18

#: "controller" on rank 0, "worker" on the other ranks, None outside controller mode
role: list = [None]
_comm: list = [None]  # the commands' own communicator (a duplicate of COMM_WORLD)
_seq = [0]  # commands issued so far
_queue: list = []  # pickled commands not sent yet
_queued_bytes = [0]
#: (handle, commands queued then) of the objects that died on rank 0, not sent yet: a
#: worker drops each before running the commands queued after its death, so that its
#: memory follows rank 0's (a temporary freed before the next one is made)
_freed: list = []
_discard: list = []  # commands that failed on rank 0 after they were sent
_failed: collections.deque = collections.deque(
    maxlen=4096
)  # those commands (worker reports on them are moot)
_reports: list = []  # worker exceptions to raise in the script
_poisoned: dict = {}  # commands whose results some worker could not compute -> why
#: Commands sent ahead of a later one, whose success the ranks have not agreed on yet:
#: they agree (one Allreduce) before the next operation that communicates.
_unagreed: list = []
_NONE = np.iinfo(np.int64).max
_handles: dict = {}  # rank 0: id(object) -> handle; workers: id(object) -> handle
_objects: dict = {}  # workers: handle -> object
_refs: dict = {}  # rank 0: handle -> weak reference (its callback frees the handle)
_flushed = [False]  # the running operation's command was sent
#: [a sent operation is running, an interrupt came meanwhile, the handler put aside]
_sigint: list = [False, False, None]
_headers = (bytearray(_HEADER), bytearray(_HEADER))  # length (int64) + a small batch
_requests: list = [None, None]
_LENGTH = struct.Struct("<q")
_turn = [0]
_CODES: dict = {}  # rank 0: operation key -> its number in commands
#: Rank 0: operations that communicated when last called; they are sent before rank 0
#: runs its part (so the workers start at once), the others wait in the queue.
_talks: set = set()
_talked = [False]
_new_codes: dict = {}  # rank 0: numbers not sent yet
_KEYS: dict = {}  # workers: number -> operation key


def is_controller() -> bool:
    """True on rank 0 of a program run in controller mode."""
    return role[0] == "controller"


# -- handles ---------------------------------------------------------------------------


def _needs_handle(obj: Any) -> bool:
    """Objects that must be named on the workers: d2o's own (arrays, generators, layouts)."""
    mod = getattr(type(obj), "__module__", "") or ""
    return mod.startswith("d2o.") and not isinstance(obj, BaseException)


def _results(res: Any, out: list) -> list:
    """The objects of ``res`` that need handles, in a fixed order (both sides walk alike)."""
    if isinstance(res, (tuple, list)):
        for v in res:
            _results(v, out)
    elif type(res) is dict:
        for v in res.values():
            _results(v, out)
    elif _needs_handle(res):
        out.append(res)
    return out


#: Result types that never need a handle (the common scalar results, checked first).
_PLAIN_RESULTS = frozenset((type(None), bool, int, float, complex, np.float64, np.int64,
                            np.bool_, np.ndarray))  # fmt: skip


def _name_results(res: Any, seq: int, pos: int) -> None:
    if type(res) in _PLAIN_RESULTS:
        return
    for obj in _results(res, []):
        if id(obj) not in _handles:
            _register(obj, (seq, pos))
            pos += 1


def _register(obj: Any, handle: tuple) -> None:
    oid = id(obj)
    _handles[oid] = handle
    if role[0] == "worker":
        _objects[handle] = obj
        return
    try:
        _refs[handle] = weakref.ref(obj, functools.partial(_gone, oid, handle))
    except TypeError:  # not weakly referable: kept for the whole run
        pass


def _gone(oid: int, handle: tuple, ref: Any = None) -> None:
    if _handles.get(oid) == handle:
        del _handles[oid]
    _refs.pop(handle, None)
    _freed.append((handle, len(_queue)))


def _drop(handle: tuple) -> None:
    obj = _objects.pop(handle, None)
    if obj is not None:
        _handles.pop(id(obj), None)


# -- pickling commands --------------------------------------------------------------------


def _by_value(obj: Any) -> bool:
    """Functions and classes the workers cannot import (the script's own, lambdas)."""
    if isinstance(obj, (types.FunctionType, type)):
        return obj.__module__ == "__main__" or "<" in obj.__qualname__
    return False


_PLAIN = frozenset((int, float, str, bool, type(None), tuple, list, dict, bytes, slice, complex))


class _Piece:
    """A large numpy argument of a creation function, as a command carries it: rank 0
    sends each worker its box of the array (point to point, after the batch), and the
    worker's copy is an ``empty`` array of the whole shape with only that box filled
    (memory is touched, and so taken, only there)."""

    __slots__ = ("array", "boxes")

    def __init__(self, array: np.ndarray, boxes: list) -> None:
        self.array, self.boxes = array, boxes


_outgoing: list = []  # rank 0: the `_Piece`s of the commands queued, sent with their batch


def _scattered(name: str, args: tuple, kwargs: dict) -> tuple:
    """``args`` with a large numpy first argument of a creation function replaced by a
    `_Piece` when the result is cut into slabs (else ``args`` itself)."""
    a = args[0] if args else None
    if (
        name not in _SCATTERING
        or type(a) is not np.ndarray
        or a.nbytes < _SCATTER_BYTES
        or a.dtype.hasobject
        or kwargs.get("ndmin")
        or _comm[0].Get_size() == 1
    ):
        return args
    from ._creation import distributor_for

    dtype = args[1] if len(args) > 1 else kwargs.get("dtype")
    try:
        d = distributor_for(kwargs.get("dist"), a.shape, a.dtype if dtype is None else dtype)
        d.bounds()  # slabs only
    except Exception:  # the operation itself reports bad arguments
        return args
    if d.replicated:
        return args
    return (_Piece(a, [d.region(r) for r in range(d.comm.size)]), *args[1:])


_INIT_ARGS = ("global_data", "global_shape", "dtype", "local_data", "local_shape",
              "distribution_strategy", "comm", "copy", "axis")  # fmt: skip


def _scattered_init(args: tuple, kwargs: dict) -> tuple:
    """``(args, kwargs)`` of ``distributed_data_object(global_data=a, ...)`` (``args``
    without ``self``), a large numpy ``a`` replaced by a `_Piece` when the strategy is
    'equal' or 'fftw' (the layout every rank computes alike)."""
    named = dict(zip(_INIT_ARGS, args))
    a = named.get("global_data", kwargs.get("global_data"))
    if type(a) is not np.ndarray or a.nbytes < _SCATTER_BYTES or a.dtype.hasobject:
        return args, kwargs
    from . import _config
    from ._distributors import get_distributor

    get = {**kwargs, **named}.get
    strategy = get("distribution_strategy") or _config.default_strategy()
    axis = get("axis", 0)
    if (
        strategy not in ("equal", "fftw")
        or get("global_shape") is not None
        or type(axis) is not int
        or not 0 <= axis < a.ndim
        or _comm[0].Get_size() == 1
    ):
        return args, kwargs
    d = get_distributor(strategy, a.shape, default_comm(), axis)
    piece = _Piece(a, [d.region(r) for r in range(d.comm.size)])
    if "global_data" in named:
        return (piece, *args[1:]), kwargs
    return args, {**kwargs, "global_data": piece}


def _send_pieces(pieces: list) -> None:
    """Rank 0: every worker's box of each `_Piece` of the batch just sent."""
    comm = _comm[0]
    requests, sent = [], 0
    for p in pieces:
        for r in range(1, comm.Get_size()):
            box = p.boxes[r]
            if box and all(b > a for a, b in box):
                part = np.ascontiguousarray(p.array[tuple(slice(a, b) for a, b in box)])
                requests.append(comm.Isend([part, MPI.BYTE], dest=r, tag=_PIECE_TAG))
                sent += part.nbytes
    MPI.Request.Waitall(requests)
    if _tr.active:
        _tr.note("scatter", sent, 0, comm.Get_size())


def _receive_piece(shape: tuple, dtype: Any, boxes: list) -> np.ndarray:
    """A worker: the whole-shaped array of a `_Piece`, this rank's box received."""
    out = np.empty(shape, dtype=dtype)
    box = boxes[_comm[0].Get_rank()]
    if box and all(b > a for a, b in box):
        part = np.empty(tuple(b - a for a, b in box), dtype=dtype)
        _comm[0].Recv([part, MPI.BYTE], source=0, tag=_PIECE_TAG)
        out[tuple(slice(a, b) for a, b in box)] = part
    return out


class _Pickler(pickle.Pickler):
    def persistent_id(self, obj: Any) -> Any:
        if type(obj) in _PLAIN:
            return None
        if type(obj) is _Piece:
            _outgoing.append(obj)
            return ("piece", obj.array.shape, obj.array.dtype, obj.boxes)
        h = _handles.get(id(obj))
        if h is not None:
            if h[0] in _poisoned:
                raise ControllerError(
                    f"this array could not be computed on every rank ({_poisoned[h[0]]}); "
                    "compute it again"
                )
            return h
        if _needs_handle(obj) and hasattr(obj, "distributor") and hasattr(obj, "data"):
            raise ControllerError(
                "this distributed array was not made by a d2o operation on rank 0, so the "
                "other ranks do not have it"
            )
        if obj is _SCRIPT_COMM[0]:
            return "world"
        if isinstance(obj, Comm) or (MPI is not None and isinstance(obj, MPI.Comm)):
            if obj is default_comm() or obj is getattr(default_comm(), "mpi", None):
                return "world"
            raise ControllerError(
                "controller mode runs on COMM_WORLD only; omit comm= (or run the script "
                "SPMD: mpiexec -n P python script.py)"
            )
        return None

    def reducer_override(self, obj: Any) -> Any:
        if _by_value(obj):
            try:
                import cloudpickle
            except ImportError:  # pragma: no cover - cloudpickle is in d2o[mpi]
                raise ControllerError(
                    f"{obj.__qualname__} is defined in the script: controller mode needs the "
                    "package cloudpickle to send it to the other ranks (pip install cloudpickle)"
                ) from None
            return pickle.loads, (cloudpickle.dumps(obj),)
        return NotImplemented


class _Unpickler(pickle.Unpickler):
    def persistent_load(self, pid: Any) -> Any:
        if pid == "world":
            return default_comm()
        if pid[0] == "piece":
            return _receive_piece(*pid[1:])
        try:
            return _objects[pid]
        except KeyError:
            raise ControllerError(f"handle {pid} is unknown on this rank") from None


_PICKLER: list = []


def _dumps(value: Any) -> bytes:
    if not _PICKLER:
        buf = io.BytesIO()
        _PICKLER.append((buf, _Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL)))
    buf, pickler = _PICKLER[0]
    buf.seek(0)
    buf.truncate()
    pickler.clear_memo()
    try:
        pickler.dump(value)
    except BaseException:
        _PICKLER.clear()  # a failed dump may leave the pickler in any state
        raise
    return buf.getvalue()


# -- rank 0 ------------------------------------------------------------------------------

#: Access to one rank's own piece: from a script that only rank 0 runs it would touch
#: rank 0's piece alone (SPMD code filling ``local_array`` would leave the others'
#: pieces empty), so it is refused.
_LOCAL = {"get_local_data", "set_local_data", "enumerate", "local_array"}


def _call(key: tuple, name: str, namer: Any, fn: Any, body: Any, args: tuple, kwargs: dict) -> Any:
    """Rank 0: queue the command of an outermost operation, run it here, name its results."""
    if name in _LOCAL:
        raise ControllerError(
            f"x.{name} is one rank's own piece, but a controller-mode script runs on rank 0 "
            "only, so the other ranks' pieces would not be touched: read with "
            "get_full_data() or indexing, write with d2o operations (x[...] = ..., "
            "apply_generator), or run the script SPMD: mpiexec -n P python script.py"
        )
    if getattr(fn, "__d2o_numpy_only__", _never)(args, kwargs):
        return body(args, kwargs)
    special = _SPECIAL.get(name)
    if special is not None:
        return special(args, kwargs)
    if _reports:
        _raise_report()
    if kwargs.get("local_keys"):
        raise ControllerError(
            f"{name}(..., local_keys=True) takes each rank's own key, but a controller-mode "
            "script runs on rank 0 only: use a global key"
        )
    init = key[-1] == "__init__"
    if init and (kwargs.get("local_data") is not None or kwargs.get("local_shape") is not None):
        raise ControllerError(
            "local_data/local_shape give each rank its own piece, but a controller-mode "
            "script runs on rank 0 only: pass global_data (or global_shape) instead"
        )
    if kwargs.get("comm") is _SCRIPT_COMM[0] is not None:
        kwargs = {**kwargs, "comm": None}  # the default communicator: COMM_WORLD
    _seq[0] += 1
    seq = _seq[0]
    code = _CODES.get(key)
    if code is None:
        code = _CODES[key] = len(_CODES)
        _new_codes[code] = key
    if init:
        sent_args, sent_kwargs = _scattered_init(args[1:], kwargs)
    else:
        sent_args, sent_kwargs = _scattered(name, args, kwargs), kwargs
    n_out = len(_outgoing)
    try:
        blob = _dumps((seq, code, sent_args, sent_kwargs, init))
    except ControllerError:
        del _outgoing[n_out:]
        raise
    except Exception as exc:
        del _outgoing[n_out:]
        raise ControllerError(
            f"controller mode cannot send the arguments of {name!r} to the other ranks "
            f"({type(exc).__name__}: {exc}); pass arrays, numbers, strings or functions "
            "defined at the top level of the script"
        ) from None
    if init:
        _register(args[0], (seq, 0))
    entry = (seq, blob)
    _queue.append(entry)
    _queued_bytes[0] += len(blob)
    _flushed[0] = False
    try:
        if code in _talks or _ahead(args, kwargs) or key[1].startswith("d2o.io"):
            if _tr.active:  # the operation's record, so that the command counts under it
                rec = _tr.Record(name if namer is None else namer(args))
                for t in _tr.active:
                    t.records.append(rec)
                _tr.current[0] = rec
            _send(current=True)
        res = body(args, kwargs)
    except BaseException as exc:
        _tr.current[0] = None
        if _queue and _queue[-1] is entry:  # never sent: the workers never see it
            _queue.pop()
            _queued_bytes[0] -= len(blob)
            del _outgoing[n_out:]
            if init:
                _handles.pop(id(args[0]), None)
        else:
            _discard.append(seq)
            _failed.append(seq)
        _end_op(raising=True)
        if isinstance(exc, _Abort):
            raise exc.error from None
        raise
    if _talked[0]:
        _talked[0] = False
        _talks.add(code)
    _name_results(res, seq, 1 if init else 0)
    _end_op()
    if len(_queue) >= _MAX_QUEUED or _queued_bytes[0] >= _MAX_BYTES:
        flush()
    return res


def _never(args: tuple, kwargs: dict) -> bool:
    return False


def _ahead(args: tuple, kwargs: dict) -> bool:
    """Send now: a large operand, or none at all (creation: the result may be large)."""
    found = False
    for v in (*args, *kwargs.values()):
        for a in v if type(v) in (list, tuple) else (v,):
            data = getattr(a, "data", None)
            if type(data) is np.ndarray and hasattr(a, "distributor"):
                if data.nbytes >= _AHEAD_BYTES:
                    return True
                found = True
    return not found


def _end_op(raising: bool = False) -> None:
    if _flushed[0]:
        _flushed[0] = False
        _collect_reports()
        _release_sigint(raising)
    if _reports and not raising:
        _raise_report()


class _Abort(BaseException):
    """Raised on rank 0 at its first MPI call of an operation whose batch failed on a
    worker: a BaseException, so that no ``except Exception`` of d2o goes on to the
    operation's collectives alone; `_call` raises the worker's exception instead."""

    def __init__(self, error: BaseException) -> None:
        self.error = error


def _send(exit_code: int | None = None, current: bool = False) -> None:
    """Send the queued commands, freed handles and discarded commands as one batch.

    ``current``: the last command is the running operation's.  When the batch holds
    commands queued before (run by the workers now, rank 0 ran them already), every rank
    agrees on their success (one Allreduce); if one failed on a worker, its exception
    is raised here and the current command is skipped everywhere.
    """
    n_cmd, n_free, n_disc = len(_queue), len(_freed), len(_discard)
    if not (n_cmd or n_free or n_disc) and exit_code is None:
        return
    _hold_sigint()
    seqs = [q[0] for q in _queue[:n_cmd]]
    codes = dict(_new_codes)
    _new_codes.clear()
    batch = ([q[1] for q in _queue[:n_cmd]], codes, _freed[:n_free], _discard[:n_disc],
             exit_code, current)  # fmt: skip
    del _queue[:n_cmd], _freed[:n_free], _discard[:n_disc]
    _queued_bytes[0] = 0
    payload = pickle.dumps(batch, protocol=pickle.HIGHEST_PROTOCOL)
    n = len(payload)
    comm = _comm[0]
    # two header buffers in turn: a broadcast completes at the latest when its buffer
    # is needed again, so rank 0 does not wait for the workers to take a batch
    k = _turn[0] = 1 - _turn[0]
    head = _headers[k]
    if _requests[k] is not None:
        _requests[k].Wait()
    _LENGTH.pack_into(head, 0, n)
    if n <= _HEADER - 8:
        head[8 : 8 + n] = payload
        _requests[k] = comm.Ibcast([head, MPI.BYTE], root=0)
    else:
        comm.Ibcast([head, MPI.BYTE], root=0).Wait()
        _requests[k] = None
        comm.Bcast([np.frombuffer(payload, dtype=np.uint8), MPI.BYTE], root=0)
    _flushed[0] = True
    if _tr.active:
        _tr.note("command", min(n + 8, _HEADER) + (n if n > _HEADER - 8 else 0), 0, comm.size)
    pieces = _outgoing[:]
    del _outgoing[:]
    _unagreed.extend(seqs[:-1] if current else seqs)
    if current and _unagreed:
        deferred = _unagreed[:]
        del _unagreed[:]
        first = _agree(_NONE)
        if first != _NONE:  # the workers skip the current command: keep its pieces
            raise _Abort(_failure(first, deferred))
    if pieces:  # after the agreement: the workers take them in the current command
        _send_pieces(pieces)


def _agree(first_failed: int) -> int:
    """Every rank: the first command of the batch that failed on some rank (or _NONE)."""
    buf = np.array([first_failed], dtype=np.int64)
    out = np.empty_like(buf)
    _comm[0].Allreduce([buf, MPI.INT64_T], [out, MPI.INT64_T], op=MPI.MIN)
    if _tr.active:
        _tr.note("command", 8, 8, _comm[0].size)
    return int(out[0])


def _failure(first: int, seqs: list) -> BaseException:
    """Rank 0: the exception of command ``first`` (reported by the worker it failed on);
    the results of it and of the batch's later commands are marked unusable."""
    comm = _comm[0]
    while True:
        seq, rank, name, exc, text = comm.recv(source=MPI.ANY_SOURCE, tag=_ERR_TAG)
        if seq == first:
            break
        if seq not in _failed:
            _reports.append((rank, name, exc, text))
    for s in seqs:
        if s >= first:
            _poisoned[s] = f"{text}, on rank {rank}"
            _failed.append(s)
    if not isinstance(exc, BaseException):
        exc = RuntimeError(text)
    if hasattr(exc, "add_note"):
        exc.add_note(f"(raised on rank {rank} in the d2o operation {name!r})")
    return exc


def flush() -> None:
    """Rank 0 of controller mode: send what is queued now (no-op elsewhere)."""
    if role[0] != "controller":
        return
    _send()
    if _flushed[0] and not _funnel._depth[0]:
        _flushed[0] = False
        _collect_reports()
        _release_sigint(False)
        if _reports:
            _raise_report()


def _before_comm() -> None:
    """Rank 0, before any MPI call of d2o: the workers must join it, so send the batch."""
    if _funnel._depth[0] == 0:
        raise ControllerError(
            "a collective call was made outside a d2o operation; in controller mode only "
            "rank 0 runs the script, so it would wait forever: use d2o operations, or run "
            "the script SPMD (mpiexec -n P python script.py)"
        )
    if _queue or _freed or _discard:
        current = bool(_queue) and _flushed[0] is False and _funnel._depth[0] == 1
        _talked[0] = current
        _send(current=current)


def install_sigint() -> None:
    """Rank 0: hold Ctrl-C back while the workers run a sent operation (`_on_sigint`).
    Called at start, and by the kernel before each cell (IPython sets its own handler)."""
    if threading.current_thread() is threading.main_thread():
        previous = signal.getsignal(signal.SIGINT)
        if previous is not _on_sigint:
            _sigint[2] = previous
            signal.signal(signal.SIGINT, _on_sigint)


def _on_sigint(signum: int, frame: Any) -> None:
    if _sigint[0]:
        _sigint[1] = True  # raised when the operation has finished on rank 0
        return
    previous = _sigint[2]
    if callable(previous):
        previous(signum, frame)
    elif previous != signal.SIG_IGN:
        raise KeyboardInterrupt


def _hold_sigint() -> None:
    if not _sigint[0]:
        _sigint[0] = True
        # (the C function: signal.getsignal's enum conversion costs microseconds)
        if _signal.getsignal(signal.SIGINT) is not _on_sigint:  # IPython set its own
            install_sigint()


def _release_sigint(raising: bool) -> None:
    _sigint[0] = False
    if _sigint[1]:
        _sigint[1] = False
        if not raising:
            raise KeyboardInterrupt


def _collect_reports() -> None:
    comm = _comm[0]
    while comm.iprobe(source=MPI.ANY_SOURCE, tag=_ERR_TAG):
        seq, rank, name, exc, text = comm.recv(source=MPI.ANY_SOURCE, tag=_ERR_TAG)
        if seq not in _failed:
            _reports.append((rank, name, exc, text))


def _raise_report() -> None:
    rank, name, exc, text = _reports.pop(0)
    del _reports[:]
    if not isinstance(exc, BaseException):
        exc = RuntimeError(text)
    if hasattr(exc, "add_note"):
        exc.add_note(f"(raised on rank {rank} in the d2o operation {name!r})")
    raise exc


def _iterate(args: tuple, kwargs: dict) -> Any:
    """``iter(x)`` on rank 0: blocks of rows, each gathered by two commands."""
    x = args[0]
    if x.ndim == 0:
        raise TypeError("iteration over a 0-d array")
    from ._config import iter_chunk

    n0 = x.shape[0]
    row = max(1, int(np.prod(x.shape[1:], dtype=np.int64)))
    chunk = max(1, iter_chunk() // row)

    def rows() -> Any:
        for start in range(0, n0, chunk):
            yield from x[start : min(n0, start + chunk)].get_full_data()

    return rows()


def _show(args: tuple, kwargs: dict) -> str:
    """``repr(x)``/``str(x)`` on rank 0: the whole array (gathered) up to numpy's print
    threshold, else its description and first elements (the script sees one array, not
    rank 0's piece)."""
    x = args[0]
    head = (
        f"<distributed_data_object: shape {x.shape}, {x.dtype}, "
        f"{x.distribution_strategy!r} over {_comm[0].Get_size()} processes>"
    )
    if x.size <= np.get_printoptions()["threshold"]:
        return head + "\n" + repr(x.get_full_data())
    corner = x[tuple(slice(0, 3) for _ in range(x.ndim))].get_full_data()
    return head + "\nfirst elements: " + repr(corner)


_SPECIAL = {"__iter__": _iterate, "__repr__": _show, "__str__": _show}


# -- the workers ---------------------------------------------------------------------------


def _wait(req: Any) -> None:
    """Wait for a request: polling, yielding the core to other processes between polls,
    then (after 20 ms) sleeping ever longer, up to 10 ms (an idle worker uses no CPU)."""
    if req.Test():
        return
    t0 = time.perf_counter()
    pause = 0.0
    yield_core = getattr(os, "sched_yield", None) or (lambda: time.sleep(0))
    while not req.Test():
        if pause:
            time.sleep(pause)
            pause = min(pause * 1.5, 0.01)
        elif time.perf_counter() - t0 > 0.02:
            pause = 1e-4
        else:
            yield_core()


def _class(key: tuple) -> Any:
    cls: Any = importlib.import_module(key[1])
    for part in key[2].split("."):
        cls = getattr(cls, part)
    return cls


def _resolve(key: tuple) -> Any:
    """The operation (as the funnel wrapped it) of a command's key."""
    if key[0] == "f":
        return getattr(importlib.import_module(key[1]), key[2])
    fn = vars(_class(key))[key[3]]
    return fn.fget if isinstance(fn, property) else fn


def _execute(blob: bytes) -> int | None:
    """Run one command; its number if it failed (the exception is reported to rank 0)."""
    seq, name = 0, "?"
    try:
        seq, code, args, kwargs, init = _Unpickler(io.BytesIO(blob)).load()
        key = _KEYS[code]
        name = key[-1]
        fn = _FNS.get(code)
        if fn is None:  # (a wrapper the funnel installs again later still works alike)
            fn = _FNS[code] = _resolve(key)
        if init:
            cls = _class(key)
            obj = cls.__new__(cls)
            fn(obj, *args, **kwargs)
            _register(obj, (seq, 0))
        else:
            _name_results(fn(*args, **kwargs), seq, 0)
    except Exception as exc:
        _report(seq, name, exc)
        return seq
    return None


_FNS: dict = {}  # workers: operation number -> the operation (resolved once)
_pending_reports: list = []


def _report(seq: int, name: str, exc: BaseException) -> None:
    text = f"{type(exc).__name__}: {exc}"
    try:
        pickle.dumps(exc)
        sent: Any = exc
    except Exception:
        sent = None
    msg = (seq, _comm[0].Get_rank(), name, sent, text)
    _pending_reports.append(_comm[0].isend(msg, dest=0, tag=_ERR_TAG))


def _position(freed: tuple) -> int:
    return freed[1]


def serve() -> int:
    """Ranks > 0: run the commands rank 0 sends until it says the program ended.

    Returns the program's exit status (the script's, sent by rank 0).
    """
    comm = _comm[0]
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is rank 0's to handle
    warnings.simplefilter("ignore")  # rank 0 shows the warnings of its own part
    head = bytearray(_HEADER)
    first, unagreed = _NONE, False
    while True:
        _wait(comm.Ibcast([head, MPI.BYTE], root=0))
        n = _LENGTH.unpack_from(head, 0)[0]
        if n <= _HEADER - 8:
            payload: Any = bytes(head[8 : 8 + n])
        else:
            payload = np.empty(n, dtype=np.uint8)
            comm.Bcast([payload, MPI.BYTE], root=0)
        cmds, codes, freed, discard, exit_code, current = pickle.loads(payload)
        if codes:
            _KEYS.update(codes)
        if len(freed) > 1:
            freed.sort(key=_position)
        deferred = cmds[:-1] if current else cmds
        k = 0
        for i, blob in enumerate(deferred):  # after a failure, later ones wait for agreement
            while k < len(freed) and freed[k][1] <= i:
                _drop(freed[k][0])
                k += 1
            if first == _NONE:
                first = _execute(blob) or _NONE
        unagreed = unagreed or bool(deferred)
        if current:
            while k < len(freed) and freed[k][1] < len(cmds):
                _drop(freed[k][0])
                k += 1
            if unagreed:
                first, unagreed = _agree(first), False
            if first == _NONE:
                _execute(cmds[-1])
            first = _NONE
        for h, _ in freed[k:]:
            _drop(h)
        for s in discard:
            for h in [h for h in _objects if h[0] == s]:
                _drop(h)
        if _pending_reports:
            _pending_reports[:] = [r for r in _pending_reports if not r.Test()]
        if exit_code is not None:
            return int(exit_code)


# -- starting and stopping ----------------------------------------------------------------

#: Operations the funnel does not record but controller mode must send: properties that
#: make arrays, random numbers, layouts, options, and the d2o.numpy submodules' own.
_EXTRA: tuple = (
    (
        "d2o._d2o",
        "distributed_data_object",
        ("T", "mT", "real", "imag", "get_local_data", "set_local_data", "local_array"),
    ),
    ("d2o._random", "Generator", None),
)
_EXTRA_FUNCTIONS: tuple = (
    ("d2o._random", None),
    ("d2o._layout", ("layout",)),
    ("d2o._config", ("set_options",)),
    ("d2o.numpy.linalg", None),
    ("d2o.numpy.fft", None),
)


def _register_extra() -> None:
    for mod_name, cls_name, attrs in _EXTRA:
        cls = getattr(importlib.import_module(mod_name), cls_name)
        names = attrs or [
            a
            for a, v in vars(cls).items()
            if isinstance(v, types.FunctionType) and (not a.startswith("_") or a == "__init__")
        ]
        for a in names:
            _funnel.register(cls, a, a)
    for mod_name, names in _EXTRA_FUNCTIONS:
        mod = importlib.import_module(mod_name)
        if names is None:
            names = [
                n
                for n, v in vars(mod).items()
                if isinstance(v, types.FunctionType)
                and v.__module__ == mod_name
                and not n.startswith("_")
            ]
        _funnel.register_functions(mod_name, list(names))


def _refuse(what: str) -> Any:
    raise ControllerError(
        f"{what} is not available in controller mode: only rank 0 runs the script, so a "
        "communicator call would wait for ranks that never make it.  Use d2o operations "
        "(they run on every rank), or run the script SPMD: mpiexec -n P python script.py"
    )


class _ScriptComm:
    """What the script gets for a communicator in controller mode: ``rank`` (0) and
    ``size`` (P) work, any call refuses with `ControllerError`; ``comm=`` takes it."""

    def __init__(self, size: int) -> None:
        self.rank, self.size = 0, size

    def Get_rank(self) -> int:  # noqa: N802 - mpi4py's names
        return 0

    def Get_size(self) -> int:  # noqa: N802
        return self.size

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _refuse(f"the communicator's {name}")

    def __repr__(self) -> str:
        return f"<d2o controller-mode communicator: rank 0 of {self.size}; calls refused>"


_SCRIPT_COMM: list = [None]


def _script_comm() -> Any:
    return _SCRIPT_COMM[0]


def _script_comm_of(fget: Any) -> property:
    """``x.comm``: `_ScriptComm` for the script on rank 0, else ``fget``'s (d2o's own)."""

    def comm(self: Any) -> Any:
        if role[0] == "controller" and not _funnel._depth[0]:
            return _SCRIPT_COMM[0]
        return fget(self)

    return property(comm, doc=fget.__doc__)


_COMM_METHODS = (
    "allreduce", "any_flag", "allgather", "bcast", "barrier", "Allgather", "Allgatherv",
    "Allreduce", "Bcast", "Alltoallw", "Alltoallv", "Sendrecv_many", "send", "recv", "Split",
)  # fmt: skip


def _guard(method: Any) -> Any:
    def guarded(self: Any, *args: Any, **kwargs: Any) -> Any:
        _before_comm()
        return method(self, *args, **kwargs)

    guarded.__name__ = method.__name__
    guarded.__doc__ = method.__doc__
    return guarded


def _start(rank: int) -> None:
    if MPI is None:
        raise ControllerError("controller mode needs MPI (mpi4py); D2O_MPI=0 switches it off")
    world = default_comm()
    _watchdog.stop()  # controller mode has its own handling of failures
    _watchdog.uninstall_excepthook()
    _comm[0] = world.mpi.Dup()
    import d2o
    import d2o.numpy  # noqa: F401 - every rank knows every operation from the start

    _register_extra()
    _funnel.controlled[0] = True
    _funnel._uninstall()
    _funnel.activate()
    D = d2o.distributed_data_object
    D.comm = _script_comm_of(D.__dict__["comm"].fget)  # type: ignore[method-assign,assignment]
    if rank == 0:
        role[0] = "controller"
        for m in _COMM_METHODS:
            setattr(Comm, m, _guard(getattr(Comm, m)))
        _funnel.controller[0] = _call
        install_sigint()
        _SCRIPT_COMM[0] = _ScriptComm(world.size)
        d2o.default_comm = _script_comm  # type: ignore[assignment]
    else:
        role[0] = "worker"


def start_controller() -> bool:
    """Enter controller mode on every rank of COMM_WORLD (collective).  Returns True on
    rank 0, which goes on to run the program; the other ranks should call `serve`."""
    rank = default_comm().rank
    _start(rank)
    return rank == 0


def stop(exit_code: int = 0) -> None:
    """Rank 0: send what is queued and tell the workers to exit with ``exit_code``."""
    if role[0] != "controller":
        return
    _funnel.controller[0] = None
    _send(exit_code=int(exit_code))
    for r in _requests:
        if r is not None:
            r.Wait()
    _release_sigint(raising=True)
    role[0] = None
    sys.stdout.flush()
