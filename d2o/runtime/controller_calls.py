"""Controller mode on rank 0: the call path of every operation (`d2o.runtime.controller`).

The funnel hands each outermost call to `_call`, which queues its command, sends the
queue (one broadcast: `_send`) when the operation communicates or has a large operand,
runs the operation on rank 0, and names its results.  Before a command that
communicates, the ranks agree on the queued ones (`_agree`, one Allreduce).  Ctrl-C is
held back while a sent operation runs.
"""

from __future__ import annotations

import _signal
import pickle
import signal
import threading
from typing import Any

import numpy as np

from ..core import trace as _tr
from ..core.comm import MPI
from ..core.config import iter_chunk
from ..core.registry import Operation
from . import funnel as _funnel
from .controller_state import (
    _AHEAD_BYTES,
    _CODES,
    _ERR_TAG,
    _HEADER,
    _LENGTH,
    _MAX_BYTES,
    _MAX_QUEUED,
    _NONE,
    _SCRIPT_COMM,
    ControllerError,
    _comm,
    _discard,
    _failed,
    _flushed,
    _freed,
    _handles,
    _headers,
    _new_codes,
    _outgoing,
    _poisoned,
    _queue,
    _queued_bytes,
    _reports,
    _requests,
    _seq,
    _sigint,
    _talked,
    _talks,
    _turn,
    _unagreed,
    role,
)
from .controller_wire import (
    _agree,
    _dumps,
    _name_results,
    _register,
    _scattered,
    _scattered_init,
    _send_pieces,
)

__all__ = ["flush", "install_sigint"]


#: Access to one rank's own piece: from a script that only rank 0 runs it would touch
#: rank 0's piece alone (SPMD code filling ``local_array`` would leave the others'
#: pieces empty), so it is refused.
_LOCAL = {"get_local_data", "set_local_data", "enumerate", "local_array"}


def _call(op: Operation, args: tuple, kwargs: dict) -> Any:
    """Rank 0: queue the command of an outermost operation, run it here, name its results."""
    key, name, namer, fn = op.key, op.name, op.namer, op.fn
    if name in _LOCAL:
        raise ControllerError(
            f"x.{name} is one rank's own piece, but a controller-mode script runs on rank 0 "
            "only, so the other ranks' pieces would not be touched: read with "
            "get_full_data() or indexing, write with d2o operations (x[...] = ..., "
            "apply_generator), or run the script SPMD: mpiexec -n P python script.py"
        )
    if getattr(fn, "__d2o_numpy_only__", _never)(args, kwargs):
        return _funnel.body(op, args, kwargs)
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
        res = _funnel.body(op, args, kwargs)
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
