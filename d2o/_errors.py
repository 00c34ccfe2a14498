"""Collective error agreement: one helper so that no rank waits for a failed one.

Every public operation that communicates validates its input inside
``with agreed(comm):``.  If the block raises on any rank, every rank raises an
exception of the same type (the one from the lowest failing rank) before
anybody enters the communication that would never complete.  The cost is one
tiny allreduce per call on more than one process, none on one process.
"""

from __future__ import annotations

from typing import Any

from ._comm import Comm

__all__ = ["agreed", "agree", "agree_gather"]


def _rebuild(exc_type: type, message: str, rank: int) -> BaseException:
    text = f"{message} (raised on rank {rank})"
    try:
        return exc_type(text)
    except Exception:  # an exception type with an unusual constructor
        return RuntimeError(f"{exc_type.__name__}: {text}")


def agree(comm: Comm, error: BaseException | None) -> None:
    """Collective: raise on every rank when ``error`` is set on any rank.

    The local exception is re-raised where it happened; the other ranks raise
    one of the same type carrying the first failing rank's message.
    """
    if comm.size == 1:
        if error is not None:
            raise error
        return
    if not comm.any_flag(error is not None):
        return
    info = None if error is None else (type(error), str(error))
    try:
        gathered = comm.allgather(info)
    except Exception:  # unpicklable exception type: fall back to its name
        info = None if error is None else (RuntimeError, f"{type(error).__name__}: {error}")
        gathered = comm.allgather(info)
    if error is not None:
        raise error
    rank = next(r for r, item in enumerate(gathered) if item is not None)
    exc_type, message = gathered[rank]
    raise _rebuild(exc_type, message, rank)


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

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc is not None and not isinstance(exc, Exception):
            return False  # KeyboardInterrupt and friends: not agreed, just propagate
        agree(self.comm, exc)
        return False


def agree_gather(comm: Comm, error: BaseException | None, value: Any) -> list:
    """Collective: allgather small ``value``s, raising on every rank if any rank has ``error``.

    One collective does both the agreement and the gather (used where a
    metadata exchange is needed anyway, e.g. construction).
    """
    info = None if error is None else (type(error), str(error))
    gathered = comm.allgather((info, value))
    if error is not None:
        raise error
    for rank, (err, _) in enumerate(gathered):
        if err is not None:
            raise _rebuild(err[0], err[1], rank)
    return [v for _, v in gathered]
