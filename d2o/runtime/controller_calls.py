"""Controller mode on rank 0: the session and the call path of every operation.

`Controller` is rank 0's `Session`.  The funnel hands each outermost call to its `call`
method, which queues the call's command, sends the queue (one broadcast: `send`) when
the operation communicates or has a large operand, runs the operation on rank 0, and
names its results.  Before a command that communicates, the ranks agree on the queued
ones (`Session.agree`, one Allreduce).  Ctrl-C is held back while a sent operation runs.
"""

from __future__ import annotations

import _signal
import functools
import io
import pickle
import signal
import sys
import threading
import weakref
from collections import deque
from typing import Any

import numpy as np

from ..array.base import expression
from ..core import hooks
from ..core import trace as _tr
from ..core.comm import MPI
from ..core.config import OPTIONS, iter_chunk
from ..core.registry import Operation
from . import funnel
from .controller_state import (
    AHEAD_BYTES,
    ERR_TAG,
    HEADER,
    LENGTH,
    MAX_BYTES,
    MAX_QUEUED,
    NONE,
    ControllerError,
    Session,
)
from .controller_wire import CommandPickler, scattered, scattered_init, send_pieces

__all__ = ["Controller"]


#: Access to one rank's own piece: from a script that only rank 0 runs it would touch
#: rank 0's piece alone (SPMD code filling ``local_array`` would leave the others'
#: pieces empty), so it is refused.
_LOCAL = frozenset(("get_local_data", "set_local_data", "enumerate", "local_array"))

#: 1 while a public operation runs (the funnel's call depth)
_depth = hooks.depth


class _Abort(BaseException):
    """Raised on rank 0 at its first MPI call of an operation whose batch failed on a
    worker: a BaseException, so that no ``except Exception`` of d2o goes on to the
    operation's collectives alone; `Controller.call` raises the worker's exception instead."""

    def __init__(self, error: BaseException) -> None:
        self.error = error


#: The operations whose ``lazy`` path asks whether an argument is a temporary of the
#: script (`d2o.core.hooks.temporary`): name -> (its position, the most references
#: `Controller.call` counts for a temporary: the statement's, the call's argument
#: tuples and ``getrefcount``'s own; tests/test_controller.py checks both answers).
_TEMPORARY = {"__setitem__": (2, 4), "ravel": (0, 3)}


def _view(op: Operation, args: tuple) -> bool:
    """``x[key]`` with a key of slices: a view, made locally at no cost (queued)."""
    if op.name != "__getitem__" or len(args) != 2:
        return False
    keys = args[1] if type(args[1]) is tuple else (args[1],)
    return all(type(k) is slice or k is Ellipsis for k in keys)


def _never(args: tuple, kwargs: dict) -> bool:
    return False


def _ahead(args: tuple, kwargs: dict) -> bool:
    """Send now: a large operand or a deferred one (``lazy``: evaluated there, not read
    here), or none at all (creation: the result may be large)."""
    found = False
    for v in (*args, *kwargs.values()):
        for a in v if type(v) in (list, tuple) else (v,):
            if expression(a) is not None:  # (its ``data`` would evaluate it here)
                return True
            data = getattr(a, "data", None)
            if type(data) is np.ndarray and hasattr(a, "distributor"):
                if data.nbytes >= AHEAD_BYTES:
                    return True
                found = True
    return not found


def _iterate(args: tuple, kwargs: dict) -> Any:
    """``iter(x)`` on rank 0: blocks of rows, each gathered by two commands."""
    x = args[0]
    if x.ndim == 0:
        raise TypeError("iteration over a 0-d array")

    n0 = x.shape[0]
    row = max(1, int(np.prod(x.shape[1:], dtype=np.int64)))
    chunk = max(1, iter_chunk() // row)

    def rows() -> Any:
        for start in range(0, n0, chunk):
            yield from x[start : min(n0, start + chunk)].get_full_data()

    return rows()


def _noted(rank: int, name: str, exc: Any, text: str) -> BaseException:
    """A worker's reported exception (``exc``, or ``text`` when it did not pickle),
    noted with where it was raised."""
    if not isinstance(exc, BaseException):
        exc = RuntimeError(text)
    if hasattr(exc, "add_note"):
        exc.add_note(f"(raised on rank {rank} in the d2o operation {name!r})")
    return exc


class Controller(Session):
    """Rank 0's session: the commands it queues and sends, and what comes back.

    Parameters
    ----------
    comm : mpi4py.MPI.Comm
        The commands' own communicator (a duplicate of ``COMM_WORLD``).
    script_comm : object
        What the script gets for a communicator (`d2o.runtime.controller`'s stand-in);
        a command names it as COMM_WORLD.

    Notes
    -----
    Its containers are changed in place, never rebound (the `CommandPickler` holds
    some of them).  The attributes: ``seq`` (commands issued so far), ``queue``
    (``(seq, pickled command)`` not sent yet) and ``queued_bytes``; ``freed`` (handle,
    commands queued then) of the objects that died on rank 0, not sent yet: a worker drops
    each before running the commands queued after its death, so that its memory follows
    rank 0's; ``discard`` (commands that failed on rank 0 after they were sent) and
    ``failed`` (those and the ones a worker failed: reports on them are moot);
    ``reports`` (worker exceptions to raise in the script); ``poisoned`` (commands whose
    results some worker could not compute -> why); ``unagreed`` (commands sent ahead of a
    later one, whose success the ranks agree on before the next operation that
    communicates); ``refs`` (handle -> weak reference: its callback frees the handle);
    ``flushed`` (the running operation's command was sent); ``codes`` (operation key ->
    its number in commands) and ``new_codes`` (numbers not sent yet); ``talks`` (the
    numbers of operations that communicated when last called: sent before rank 0 runs its
    part) and ``talked``; ``outgoing`` (the `Piece` objects of the queued commands);
    ``headers``, ``requests`` and ``turn`` (the two broadcast buffers used in turn);
    ``sigint_held``, ``sigint_pending``, ``sigint_previous`` (a sent operation is running,
    an interrupt came meanwhile, the handler put aside).
    """

    def __init__(self, comm: Any, script_comm: Any) -> None:
        super().__init__(comm)
        self.script_comm = script_comm
        self.seq = 0
        self.queue: list = []
        self.queued_bytes = 0
        self.freed: list = []
        self.discard: list = []
        self.failed: deque = deque(maxlen=4096)
        self.reports: list = []
        self.poisoned: dict = {}
        self.unagreed: list = []
        self.refs: dict = {}
        self.flushed = False
        self.codes: dict = {}
        self.new_codes: dict = {}
        self.talks: set = set()
        self.talked = False
        self.outgoing: list = []
        self.headers = (bytearray(HEADER), bytearray(HEADER))
        self.requests: list = [None, None]
        self.turn = 0
        self.sigint_held = False
        self.sigint_pending = False
        self.sigint_previous: Any = None
        self.handler = self._on_sigint  # one bound method: compared by identity
        self.pickling: tuple | None = None  # (buffer, pickler) reused by `_dumps`
        self.special = {"__iter__": _iterate, "__repr__": self._show, "__str__": self._show}

    # -- handles ----------------------------------------------------------------------------

    def register(self, obj: Any, handle: tuple) -> None:
        """Name ``obj`` by ``handle``; when it dies, the workers drop theirs (`_gone`)."""
        oid = id(obj)
        self.handles[oid] = handle
        try:
            self.refs[handle] = weakref.ref(obj, functools.partial(self._gone, oid, handle))
        except TypeError:  # not weakly referable: kept for the whole run
            pass

    def _gone(self, oid: int, handle: tuple, ref: Any = None) -> None:
        if self.handles.get(oid) == handle:
            del self.handles[oid]
        self.refs.pop(handle, None)
        self.freed.append((handle, len(self.queue)))

    # -- the call path ----------------------------------------------------------------------

    def call(self, op: Operation, args: tuple, kwargs: dict) -> Any:
        """Queue the command of an outermost operation, run it here, name its results."""
        key, name, namer, fn = op.key, op.name, op.namer, op.fn
        if name in _LOCAL:
            raise ControllerError(
                f"x.{name} is one rank's own piece, but a controller-mode script runs on "
                "rank 0 only, so the other ranks' pieces would not be touched: read with "
                "get_full_data() or indexing, write with d2o operations (x[...] = ..., "
                "apply_generator), or run the script SPMD: mpiexec -n P python script.py"
            )
        if getattr(fn, "__d2o_numpy_only__", _never)(args, kwargs):
            return funnel.body(op, args, kwargs)
        special = self.special.get(name)
        if special is not None:
            return special(args, kwargs)
        if self.reports:
            self._raise_report()
        if kwargs.get("local_keys"):
            raise ControllerError(
                f"{name}(..., local_keys=True) takes each rank's own key, but a "
                "controller-mode script runs on rank 0 only: use a global key"
            )
        init = key[-1] == "__init__"
        if init and (kwargs.get("local_data") is not None or kwargs.get("local_shape") is not None):
            raise ControllerError(
                "local_data/local_shape give each rank its own piece, but a controller-mode "
                "script runs on rank 0 only: pass global_data (or global_shape) instead"
            )
        if kwargs.get("comm") is self.script_comm is not None:
            kwargs = {**kwargs, "comm": None}  # the default communicator: COMM_WORLD
        self.seq = seq = self.seq + 1
        code = self.codes.get(key)
        if code is None:
            code = self.codes[key] = len(self.codes)
            self.new_codes[code] = key
        # an operation ``lazy`` may record is queued, not sent ahead: it costs little
        # here, and the batch goes with the call that evaluates it (or with its own
        # first collective: `before_comm`)
        recorded = funnel.defers(op)
        told = None
        counted = _TEMPORARY.get(name) if recorded else None
        if counted is not None and len(args) > counted[0]:
            told = sys.getrefcount(args[counted[0]]) <= counted[1]
        if init:
            sent_args, sent_kwargs = scattered_init(args[1:], kwargs, self.size)
        else:
            sent_args, sent_kwargs = scattered(name, args, kwargs, self.size), kwargs
        outgoing = self.outgoing
        n_out = len(outgoing)
        try:
            blob = self._dumps((seq, code, sent_args, sent_kwargs, init, told))
        except ControllerError:
            del outgoing[n_out:]
            raise
        except Exception as exc:
            del outgoing[n_out:]
            raise ControllerError(
                f"controller mode cannot send the arguments of {name!r} to the other ranks "
                f"({type(exc).__name__}: {exc}); pass arrays, numbers, strings or functions "
                "defined at the top level of the script"
            ) from None
        if init:
            self.register(args[0], (seq, 0))
        entry = (seq, blob)
        queue = self.queue
        queue.append(entry)
        self.queued_bytes += len(blob)
        self.flushed = False
        try:
            if recorded or (_view(op, args) and OPTIONS["lazy"]):
                pass
            elif code in self.talks or _ahead(args, kwargs) or key[1].startswith("d2o.io"):
                if _tr.active:  # the operation's record, so that the command counts under it
                    rec = _tr.Record(name if namer is None else namer(args))
                    for t in _tr.active:
                        t.records.append(rec)
                    _tr.current[0] = rec
                self.send(current=True)
            hooks.temporary[0] = told
            try:
                res = funnel.perform(op, args, kwargs)
            finally:
                hooks.temporary[0] = None
        except BaseException as exc:
            _tr.current[0] = None
            if queue and queue[-1] is entry:  # never sent: the workers never see it
                queue.pop()
                self.queued_bytes -= len(blob)
                del outgoing[n_out:]
                if init:
                    self.handles.pop(id(args[0]), None)
            else:
                self.discard.append(seq)
                self.failed.append(seq)
            self._end_op(raising=True)
            if isinstance(exc, _Abort):
                raise exc.error from None
            raise
        if self.talked:
            self.talked = False
            if not recorded:
                self.talks.add(code)
        self.name_results(res, seq, 1 if init else 0)
        self._end_op()
        if len(queue) >= MAX_QUEUED or self.queued_bytes >= MAX_BYTES:
            self.flush()
        return res

    def _dumps(self, value: Any) -> bytes:
        """The pickled command (one `CommandPickler`, reused while it works)."""
        if self.pickling is None:
            buf = io.BytesIO()
            self.pickling = (buf, CommandPickler(buf, self))
        buf, pickler = self.pickling
        buf.seek(0)
        buf.truncate()
        pickler.clear_memo()
        try:
            pickler.dump(value)
        except BaseException:
            self.pickling = None  # a failed dump may leave the pickler in any state
            raise
        return buf.getvalue()

    def _end_op(self, raising: bool = False) -> None:
        if self.flushed:
            self.flushed = False
            self._collect_reports()
            self.release_sigint(raising)
        if self.reports and not raising:
            self._raise_report()

    # -- sending ----------------------------------------------------------------------------

    def send(self, exit_code: int | None = None, current: bool = False) -> None:
        """Send the queued commands, freed handles and discarded commands as one batch.

        Parameters
        ----------
        exit_code : int, optional
            Tell the workers the program ended with this status (they return it).
        current : bool, optional
            The last command is the running operation's.  When the batch holds commands
            queued before (run by the workers now, rank 0 ran them already), every rank
            agrees on their success (one Allreduce); if one failed on a worker, its
            exception is raised here and the current command is skipped everywhere.
        """
        queue, freed, discard = self.queue, self.freed, self.discard
        n_cmd, n_free, n_disc = len(queue), len(freed), len(discard)
        if not (n_cmd or n_free or n_disc) and exit_code is None:
            return
        self._hold_sigint()
        seqs = [q[0] for q in queue[:n_cmd]]
        codes = dict(self.new_codes)
        self.new_codes.clear()
        batch = ([q[1] for q in queue[:n_cmd]], codes, freed[:n_free], discard[:n_disc],
                 exit_code, current)  # fmt: skip
        del queue[:n_cmd], freed[:n_free], discard[:n_disc]
        self.queued_bytes = 0
        payload = pickle.dumps(batch, protocol=pickle.HIGHEST_PROTOCOL)
        n = len(payload)
        comm = self.comm
        # two header buffers in turn: a broadcast completes at the latest when its buffer
        # is needed again, so rank 0 does not wait for the workers to take a batch
        k = self.turn = 1 - self.turn
        head = self.headers[k]
        requests = self.requests
        if requests[k] is not None:
            requests[k].Wait()
        LENGTH.pack_into(head, 0, n)
        if n <= HEADER - 8:
            head[8 : 8 + n] = payload
            requests[k] = comm.Ibcast([head, MPI.BYTE], root=0)
        else:
            comm.Ibcast([head, MPI.BYTE], root=0).Wait()
            requests[k] = None
            comm.Bcast([np.frombuffer(payload, dtype=np.uint8), MPI.BYTE], root=0)
        self.flushed = True
        if _tr.active:
            _tr.note("command", min(n + 8, HEADER) + (n if n > HEADER - 8 else 0), 0, self.size)
        pieces = self.outgoing[:]
        del self.outgoing[:]
        unagreed = self.unagreed
        unagreed.extend(seqs[:-1] if current else seqs)
        if current and unagreed:
            deferred = unagreed[:]
            del unagreed[:]
            first = self.agree(NONE)
            if first != NONE:  # the workers skip the current command: keep its pieces
                raise _Abort(self._failure(first, deferred))
        if pieces:  # after the agreement: the workers take them in the current command
            send_pieces(comm, pieces)

    def _failure(self, first: int, seqs: list) -> BaseException:
        """The exception of command ``first`` (reported by the worker it failed on); the
        results of it and of the batch's later commands are marked unusable."""
        comm = self.comm
        while True:
            seq, rank, name, exc, text = comm.recv(source=MPI.ANY_SOURCE, tag=ERR_TAG)
            if seq == first:
                break
            if seq not in self.failed:
                self.reports.append((rank, name, exc, text))
        for s in seqs:
            if s >= first:
                self.poisoned[s] = f"{text}, on rank {rank}"
                self.failed.append(s)
        return _noted(rank, name, exc, text)

    def flush(self) -> None:
        """Send what is queued now; raise a worker's error that came back meanwhile."""
        self.send()
        if self.flushed and not _depth[0]:
            self.flushed = False
            self._collect_reports()
            self.release_sigint(False)
            if self.reports:
                self._raise_report()

    def before_comm(self) -> None:
        """Before any MPI call of d2o on rank 0: the workers must join it, so send the batch."""
        if _depth[0] == 0:
            raise ControllerError(
                "a collective call was made outside a d2o operation; in controller mode only "
                "rank 0 runs the script, so it would wait forever: use d2o operations, or run "
                "the script SPMD (mpiexec -n P python script.py)"
            )
        if self.queue or self.freed or self.discard:
            current = bool(self.queue) and self.flushed is False and _depth[0] == 1
            self.talked = current
            self.send(current=current)

    def finish(self, exit_code: int) -> None:
        """Send what is queued and tell the workers to exit with ``exit_code``; wait until
        the broadcasts are done.  A Ctrl-C held back meanwhile is dropped."""
        self.send(exit_code=exit_code)
        for r in self.requests:
            if r is not None:
                r.Wait()
        self.release_sigint(raising=True)

    # -- Ctrl-C -----------------------------------------------------------------------------

    def install_sigint(self) -> None:
        """Hold Ctrl-C back while the workers run a sent operation (`_on_sigint`).
        Called at start, and by the kernel before each cell (IPython sets its own handler)."""
        if threading.current_thread() is threading.main_thread():
            previous = signal.getsignal(signal.SIGINT)
            if previous is not self.handler:
                self.sigint_previous = previous
                signal.signal(signal.SIGINT, self.handler)

    def _on_sigint(self, signum: int, frame: Any) -> None:
        if self.sigint_held:
            self.sigint_pending = True  # raised when the operation has finished on rank 0
            return
        previous = self.sigint_previous
        if callable(previous):
            previous(signum, frame)
        elif previous != signal.SIG_IGN:
            raise KeyboardInterrupt

    def _hold_sigint(self) -> None:
        if not self.sigint_held:
            self.sigint_held = True
            # (the C function: signal.getsignal's enum conversion costs microseconds)
            if _signal.getsignal(signal.SIGINT) is not self.handler:  # IPython set its own
                self.install_sigint()

    def release_sigint(self, raising: bool) -> None:
        """A sent operation has finished: raise the KeyboardInterrupt held back (unless
        another exception is on its way: ``raising``)."""
        self.sigint_held = False
        if self.sigint_pending:
            self.sigint_pending = False
            if not raising:
                raise KeyboardInterrupt

    # -- the workers' reports ---------------------------------------------------------------

    def _collect_reports(self) -> None:
        comm = self.comm
        while comm.iprobe(source=MPI.ANY_SOURCE, tag=ERR_TAG):
            seq, rank, name, exc, text = comm.recv(source=MPI.ANY_SOURCE, tag=ERR_TAG)
            if seq not in self.failed:
                self.reports.append((rank, name, exc, text))

    def _raise_report(self) -> None:
        report = self.reports.pop(0)
        del self.reports[:]
        raise _noted(*report)

    # -- operations that rank 0 does its own way --------------------------------------------

    def _show(self, args: tuple, kwargs: dict) -> str:
        """``repr(x)``/``str(x)`` on rank 0: the whole array (gathered) up to numpy's print
        threshold, else its description and first elements (the script sees one array, not
        rank 0's piece)."""
        x = args[0]
        head = (
            f"<distributed_data_object: shape {x.shape}, {x.dtype}, "
            f"{x.distribution_strategy!r} over {self.size} processes>"
        )
        if x.size <= np.get_printoptions()["threshold"]:
            return head + "\n" + repr(x.get_full_data())
        corner = x[tuple(slice(0, 3) for _ in range(x.ndim))].get_full_data()
        return head + "\nfirst elements: " + repr(corner)
