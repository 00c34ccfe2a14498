"""Collective error agreement: one helper so that no rank waits for a failed one.

Every public operation that communicates validates its input inside
``with agreed(comm):``.  If the block raises on any rank, every rank raises an
exception of the same type (the one from the lowest failing rank) before
anybody enters the communication that would never complete.  The cost is one
tiny allreduce per call on more than one process, none on one process.
"""

from __future__ import annotations

import sys
import warnings
from typing import Any, Literal

import numpy as np

from . import config as _config
from . import trace as _trace
from .comm import Comm, pending_check

__all__ = [
    "agreed",
    "agree",
    "agree_gather",
    "allgather_agreed",
    "new_record",
    "RECORD_HEADER",
    "RECORD_BYTES",
    "DIGEST",
    "raise_agreed",
    "GatherError",
    "GatherWarning",
    "check_gather",
    "defer",
]


def _rebuild(exc_type: type, message: str, rank: int) -> BaseException:
    """An exception of ``exc_type`` carrying ``message``; for types with an unusual
    constructor (numpy's UFuncTypeError family), the nearest base class that takes a
    message, so that ``except TypeError`` still catches it on every rank."""
    text = f"{message} (raised on rank {rank})"
    for cls in exc_type.__mro__:
        if not issubclass(cls, BaseException):
            continue
        try:
            exc = cls(text if cls is exc_type else f"{exc_type.__name__}: {text}")
            str(exc)
            return exc
        except Exception:
            continue
    return RuntimeError(f"{exc_type.__name__}: {text}")  # pragma: no cover


def agree(comm: Comm, error: BaseException | None) -> None:
    """Collective: raise on every rank when ``error`` is set on any rank.

    Every rank raises the lowest failing rank's exception: that rank re-raises
    its own, the others one of the same type and message.  One one-byte
    allreduce when nobody failed; one more allgather when somebody did.
    """
    if comm.size == 1:
        if error is not None:
            raise error
        return
    if error is None:
        error = _PENDING[0]
    if pending_check[0] is not None and pending_check[0].comm is comm:
        allgather_agreed(comm, error, new_record())  # checked mode: the check rides along
        return
    if comm.any_flag(error is not None):
        _PENDING[0] = None
        raise_agreed(comm, error)


#: A data-dependent error of local numpy work on this rank, raised at the next agreement.
_PENDING: list = [None]


def defer(comm: Comm, error: BaseException) -> None:
    """A data-dependent numpy error in local work (integer ``**`` negative, ``errstate``).

    On one process it is raised at once.  On several, only the ranks holding the
    offending elements see it, and operations that move nothing have no
    collective to agree in: the error is kept and raised on every rank at the
    next agreement (the next operation that communicates), so no rank goes on
    alone.  The local result until then is a placeholder of zeros.
    """
    if comm.size == 1:
        raise error
    if _PENDING[0] is None:
        try:
            error.add_note(
                "d2o: raised by element-wise work on one rank and reported by the next "
                "collective call, on every rank"
            )
        except AttributeError:  # pragma: no cover - Python < 3.11
            pass
        _PENDING[0] = error


def raise_agreed(comm: Comm, error: BaseException | None) -> None:
    """Collective, once the ranks know that some rank failed: raise its exception everywhere."""
    info = None if error is None else (type(error), str(error))
    if pending_check[0] is not None:  # checked mode: the arguments first (not caught below)
        pending_check[0].flush()
    try:
        gathered = comm.allgather(info)
    except Exception:  # unpicklable exception type: fall back to its name
        info = None if error is None else (RuntimeError, f"{type(error).__name__}: {error}")
        gathered = comm.allgather(info)
    rank = next(r for r, item in enumerate(gathered) if item is not None)
    if rank == comm.rank and error is not None:
        raise error
    exc_type, message = gathered[rank]
    raise _rebuild(exc_type, message, rank)


#: A record of `allgather_agreed`: a header whose byte 0 is the error flag and whose bytes
#: 8-15 carry checked mode's digest of the arguments (`DIGEST`), then the payload.
RECORD_HEADER = 32
RECORD_BYTES = 96
DIGEST = slice(8, 16)


def new_record() -> np.ndarray:
    """A zeroed record for `allgather_agreed`; write the payload into ``record[RECORD_HEADER:]``."""
    return np.zeros(RECORD_BYTES, dtype=np.uint8)


def allgather_agreed(comm: Comm, error: BaseException | None, record: np.ndarray) -> np.ndarray:
    """Collective: allgather a fixed-size record per rank and agree on errors, in one call.

    ``record`` (from `new_record`; its payload at ``RECORD_HEADER``, aligned for any
    numpy scalar) travels with its error flag in a single Allgather of
    RECORD_BYTES.  Returns the (size, RECORD_BYTES) uint8 array of every rank's
    record; raises the lowest failing rank's exception on every rank if any rank
    has ``error`` (the message needs one more call).
    """
    if error is None and _PENDING[0] is not None:
        error = _PENDING[0]
    if error is not None:
        record[0] = 1
        if comm.size == 1:
            raise error
    if comm.size == 1:
        return record[None]
    check = pending_check[0]
    if check is not None and check.comm is comm:  # checked mode: the digest rides along
        pending_check[0] = None
        record.data[DIGEST] = check.digest
        rows = comm.Allgather(record)
        check.verdict(rows)  # a mismatch is reported first: it is the cause
    else:
        rows = comm.Allgather(record)
    if np.count_nonzero(rows[:, 0]):
        _PENDING[0] = None
        raise_agreed(comm, error)
    return rows


class agreed:  # noqa: N801 - used like a function: ``with agreed(comm):``
    """Context manager form of `agree` for a block of (local) validation code.

    A class rather than a generator-based context manager: it sits on every
    collective call's path, so its cost matters.
    """

    __slots__ = ("comm",)

    def __init__(self, comm: Comm) -> None:
        self.comm = comm

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type, exc, tb) -> Literal[False]:
        if exc is not None and not isinstance(exc, Exception):
            return False  # KeyboardInterrupt and friends: not agreed, just propagate
        agree(self.comm, exc)
        return False


def agree_gather(comm: Comm, error: BaseException | None, value: Any) -> list:
    """Collective: allgather small ``value``s, raising on every rank if any rank has ``error``.

    One collective does both the agreement and the gather (used where a
    metadata exchange is needed anyway, e.g. construction).  Every rank
    raises the lowest failing rank's exception.
    """
    if error is None and comm.size > 1:
        error = _PENDING[0]
    info = None if error is None else (type(error), str(error))
    if pending_check[0] is not None:  # checked mode: the arguments first (not caught below)
        pending_check[0].flush()
    try:
        gathered = comm.allgather((info, value))
    except Exception:  # unpicklable exception type or value
        info = None if error is None else (RuntimeError, f"{type(error).__name__}: {error}")
        gathered = comm.allgather((info, None if info else value))
    for rank, (err, _) in enumerate(gathered):
        if err is not None:
            _PENDING[0] = None
            if rank == comm.rank and error is not None:
                raise error
            raise _rebuild(err[0], err[1], rank)
    return [v for _, v in gathered]


class GatherError(RuntimeError):
    """An implicit gather was refused (the option ``gather='raise'``)."""


class GatherWarning(UserWarning):
    """An operation gathered a whole distributed operand implicitly (``gather='warn'``)."""


def _user_stacklevel() -> int:
    """The ``stacklevel`` of the innermost frame outside the d2o package."""
    level, f = 1, sys._getframe(1)
    while f is not None and (f.f_globals.get("__name__") or "").split(".")[0] == "d2o":
        f = f.f_back
        level += 1
    return level


def check_gather(comm: Comm, what: str, onto: str = "every rank") -> None:
    """Collective: an implicit gather of ``what`` is about to happen; apply the ``gather`` option.

    Called before anything moves, on every rank (the decision rests on
    global layouts only).  The ranks agree first (one one-byte allreduce; the
    gather that follows moves a whole array anyway), so ranks whose options
    differ all raise together instead of leaving some waiting.
    """
    mode = _config.OPTIONS["gather"]
    error = None
    if mode == "raise":
        op = _trace.current[0]
        where = f" in {op.op!r}" if op is not None else ""
        error = GatherError(
            f"implicit gather refused{where}: {what} would be copied whole onto {onto} "
            "(d2o option gather='raise'). Redistribute the operand explicitly, e.g. "
            "x.copy(distribution_strategy='not'), or allow it with d2o.options(gather='allow')"
        )
    agree(comm, error)
    rec = _trace.current[0]
    if rec is not None:
        rec.gathers += 1
    if mode == "warn":
        warnings.warn(
            f"d2o: {what} is gathered whole onto {onto} (implicit gather)",
            GatherWarning,
            stacklevel=_user_stacklevel(),
        )
