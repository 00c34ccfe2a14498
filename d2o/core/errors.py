"""Collective error agreement: one helper so that no rank waits for a failed one.

Every public operation that communicates validates its input inside
``with agreed(comm):``.  If the block raises on any rank, every rank raises an
exception of the same type (the one from the lowest failing rank) before
anybody enters the communication that would never complete.  The cost is one
tiny allreduce per call on more than one process, none on one process; small
values (an element, a partial reduction) ride on the same allreduce in a fixed
record (`allreduce_agreed`), so no agreement gathers anything per rank.
"""

from __future__ import annotations

import hashlib
import pickle
import sys
import warnings
import zlib
from collections.abc import Callable
from typing import Any, Literal

import numpy as np

from . import config as _config
from . import trace as _trace
from .comm import Comm, pending_check
from .librarian import d2o_librarian

__all__ = [
    "agreed",
    "agree",
    "agree_gather",
    "agree_same",
    "allreduce_agreed",
    "new_record",
    "payload",
    "put_value",
    "get_value",
    "combiner",
    "digests_agree",
    "fold_records",
    "fold_rows",
    "DIGEST",
    "NOT_DIGEST",
    "CODE",
    "RECORD_WORDS",
    "HEADER_WORDS",
    "PAYLOAD_BYTES",
    "ERROR",
    "VALUE",
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
    allreduce when nobody failed (a record's, in checked mode); an allreduce and a
    broadcast more when somebody did.
    """
    if comm.size == 1:
        if error is not None:
            raise error
        return
    if error is None:
        error = _PENDING[0]
    if pending_check[0] is not None and pending_check[0].comm is comm:
        allreduce_agreed(comm, error, new_record())  # checked mode: the check rides along
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
    """Collective, once the ranks know that some rank failed: raise its exception everywhere.

    The lowest failing rank is found in one small allreduce, and its exception's type and
    message come from it in one broadcast (O(log P) messages; the error path only).
    """
    if pending_check[0] is not None:  # checked mode: the arguments first (not caught below)
        pending_check[0].flush()
    me = comm.rank
    rank = comm.allreduce(me if error is not None else comm.size, "min")
    if rank >= comm.size:  # pragma: no cover - called with nobody failed
        raise RuntimeError("d2o: an agreement reported an error that no rank holds")
    d2o_librarian.catch_up(comm)  # objects the ranks made before they failed: indices agree
    info = None
    if rank == me and error is not None:
        notes = [str(n) for n in getattr(error, "__notes__", ())]
        info = (type(error), str(error), notes)
        try:
            pickle.dumps(info, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:  # unpicklable exception type: fall back to its name
            info = (RuntimeError, f"{type(error).__name__}: {error}", notes)
    info = comm.bcast(info, root=rank)
    if rank == me and error is not None:
        raise error
    exc_type, message, notes = info
    exc = _rebuild(exc_type, message, rank)
    for note in notes if hasattr(exc, "add_note") else ():  # (the failing rank's notes)
        exc.add_note(note)
    raise exc


#: A record of `allreduce_agreed`: RECORD_WORDS uint64 words; a header of HEADER_WORDS
#: (the flags, checked mode's digest and its complement, the payload's combiner code),
#: then the payload (PAYLOAD_BYTES, aligned for any numpy scalar).
RECORD_WORDS = 12
HEADER_WORDS = 4
PAYLOAD_BYTES = 8 * (RECORD_WORDS - HEADER_WORDS)
#: Flag bits of word 0: this rank failed; this rank's payload holds a value.
ERROR, VALUE = np.uint64(1), np.uint64(2)
_VALUE = int(VALUE)
#: Header words: checked mode's digest and its complement (equal on every rank iff the
#: OR of the digests equals the complement of the OR of the complements); the code of
#: the payload's combiner (`combiner`; 0: the payloads are ORed).
DIGEST, NOT_DIGEST, CODE = 1, 2, 3

#: combiner code -> (name, function folding one payload into another, in place)
_COMBINERS: dict[int, tuple[str, Callable]] = {}
#: code -> ``many(rows, held)``: the payloads of the rows ``held`` (indices, in rank
#: order, at least two) of gathered records, combined at once into the payload of the
#: last of them, ``rows[held[-1]]`` (optional; see `fold_rows`)
_MANY: dict[int, Callable] = {}


def combiner(
    name: str, fn: Callable[[np.ndarray, np.ndarray], None], many: Callable | None = None
) -> int:
    """Register how `allreduce_agreed` combines two payloads; returns its code.

    ``fn(a, b)`` folds payload ``a`` into payload ``b`` in place (both uint64 arrays of
    RECORD_WORDS - HEADER_WORDS words), ``a`` from lower ranks than ``b``: the op is
    declared non-commutative, so MPI combines in rank order and every rank gets a
    bit-identical result.  The code is a crc32 of ``name``: equal on every process,
    whatever order the ranks registered in.  Register it on every rank before the
    Allreduce, holding a value or not: any rank may be the one that folds two payloads.
    """
    code = zlib.crc32(name.encode()) or 1
    known = _COMBINERS.get(code)
    if known is not None and known[0] != name:  # pragma: no cover - a crc32 collision
        raise ValueError(f"combiner {name!r} collides with {known[0]!r}")
    _COMBINERS[code] = (name, fn)
    if many is not None:
        _MANY[code] = many
    return code


def fold_records(a: np.ndarray, b: np.ndarray) -> None:
    """The op of every agreement record: header words ORed, payloads combined where both
    hold a value (by their combiner), else the one that holds it kept."""
    fa, fb = int(a[0]), int(b[0])
    if fa & VALUE:
        if not fb & VALUE:
            b[CODE:] = a[CODE:]  # its combiner's code and its payload
        else:
            entry = _COMBINERS.get(int(a[CODE]))
            if entry is None:
                np.bitwise_or(a[HEADER_WORDS:], b[HEADER_WORDS:], out=b[HEADER_WORDS:])
            else:
                entry[1](a[HEADER_WORDS:], b[HEADER_WORDS:])
    b[0] = fa | fb
    if a[DIGEST] or a[NOT_DIGEST]:  # checked mode's digest (absent: nothing to OR)
        np.bitwise_or(a[1:CODE], b[1:CODE], out=b[1:CODE])


#: the rows `fold_rows` combines on two ranks
_BOTH = [0, 1]


def fold_rows(rows: np.ndarray) -> np.ndarray:
    """`fold_records` over the gathered records of every rank, in rank order (the form of
    few ranks, `d2o.core.comm.RECORD_GATHER_MAX`): the same bits, the header in Python
    ints and the payloads in one call of their combiner's ``many`` (`combiner`) instead
    of one Python fold per rank."""
    head = rows[:, :HEADER_WORDS].tolist()  # HEADER_WORDS == 4
    if len(head) == 2:  # two ranks, the commonest case: the steps below, unrolled
        (f0, g0, n0, c0), (f1, g1, n1, c1) = head
        if not (g0 | n0 | g1 | n1):  # no digest
            if f0 & f1 & _VALUE:
                many = _MANY.get(c0) if c0 == c1 else None
                if many is not None:
                    many(rows, _BOTH)
                    if f0 & ~f1:
                        rows[1, 0] = f0 | f1
                    return rows[1]
            elif f0 & _VALUE:  # one value: that row, the flags ORed
                if f1 & ~f0:
                    rows[0, 0] = f0 | f1
                return rows[0]
            elif f1 & _VALUE:
                if f0 & ~f1:
                    rows[1, 0] = f0 | f1
                return rows[1]
    flags = digest = not_digest = 0
    held: list[int] = []
    code = 0
    mixed = False
    for i, (f, dg, nd, c) in enumerate(head):
        flags |= f
        digest |= dg
        not_digest |= nd
        if f & _VALUE:
            if held and c != code:
                mixed = True
            held.append(i)
            code = c
    if len(held) == 1:  # one value: its code and payload as they are (the rows are ours)
        out = rows[held[0]]
    elif not code:  # no combiner: the owners' values and the others' zeros, ORed
        out = rows[0] | rows[1] if len(rows) == 2 else np.bitwise_or.reduce(rows)
    else:
        many = None if mixed else _MANY.get(code)
        if many is None:
            out = rows[0].copy()
            for row in rows[1:]:
                fold_records(out, row)
                out = row
            return out.copy()
        many(rows, held)  # into the payload of the row held[-1]; the header below
        out = rows[held[-1]]
    if int(out[0]) != flags:
        out[0] = flags
    if digest or not_digest:
        out[DIGEST], out[NOT_DIGEST] = digest, not_digest
    return out


def new_record() -> np.ndarray:
    """A zeroed record for `allreduce_agreed` (RECORD_WORDS uint64)."""
    return np.zeros(RECORD_WORDS, dtype=np.uint64)


def payload(record: np.ndarray) -> np.ndarray:
    """The payload of ``record`` as PAYLOAD_BYTES bytes (a view; ``.view(dtype)`` for values)."""
    return record[HEADER_WORDS:].view(np.uint8)


#: dtype -> where the payload's first value sits in a record viewed as that dtype (None:
#: an item size that does not divide the header and the payload)
_SLOTS: dict = {}


def _slot(dtype: np.dtype) -> int | None:
    n = dtype.itemsize
    k = _SLOTS[dtype] = (
        8 * HEADER_WORDS // n if (8 * HEADER_WORDS) % n == 0 and PAYLOAD_BYTES % n == 0 else None
    )
    return k


def put_value(record: np.ndarray, value: Any, dtype: np.dtype, code: int = 0) -> None:
    """Write ``value`` as the payload of ``record`` (``dtype``; its combiner ``code``)."""
    k = _SLOTS.get(dtype, -1)
    if k == -1:
        k = _slot(dtype)
    if k is not None:  # every numpy number
        record.view(dtype)[k] = value
    else:  # pragma: no cover - odd item sizes
        payload(record)[: dtype.itemsize].view(dtype)[0] = value
    record[0] = int(record[0]) | _VALUE
    record[CODE] = code


def get_value(record: np.ndarray, dtype: np.dtype) -> Any:
    """The payload of a combined ``record`` as a numpy scalar of ``dtype``."""
    k = _SLOTS.get(dtype, -1)
    if k == -1:
        k = _slot(dtype)
    if k is not None:
        return record.view(dtype)[k]
    return payload(record)[: dtype.itemsize].view(dtype)[0]  # pragma: no cover


def allreduce_agreed(
    comm: Comm, error: BaseException | None, record: np.ndarray, combine: bool = False
) -> np.ndarray:
    """Collective: combine a fixed-size record over the ranks and agree on errors, in one call.

    ``record`` (from `new_record`) travels with its error flag in a single Allreduce of
    RECORD_WORDS * 8 bytes (O(log P) messages, no per-rank buffer); its payload is
    combined by its combiner where several ranks hold a value (ORed without one: the
    owner's value, the others' zeros).  Checked mode's digest rides in the header.
    Returns the combined record, identical on every rank; raises the lowest failing
    rank's exception on every rank if any rank has ``error`` (the message needs more
    calls, on that path only).

    Every record agreement uses the same MPI op (`fold_records`, non-commutative): ranks
    that reach different agreements (one failed, or checked mode's arguments differ)
    still enter the same collective algorithm.  ``combine`` says that the call site's
    payloads have combiners (kept for the reader; the op is the same).
    """
    if error is None and _PENDING[0] is not None:
        error = _PENDING[0]
    if error is not None:
        record[0] |= ERROR
        if comm.size == 1:
            raise error
    if comm.size == 1:
        return record
    check = pending_check[0]
    if check is not None and check.comm is comm:  # checked mode: the digest rides along
        pending_check[0] = None
        record[DIGEST] = check.word
        record[NOT_DIGEST] = ~check.word
        out = comm.Allreduce(record, fold_records, rows=fold_rows)
        check.verdict(out)  # a mismatch is reported first: it is the cause
    else:
        out = comm.Allreduce(record, fold_records, rows=fold_rows)
    if out[0] & ERROR:
        _PENDING[0] = None
        raise_agreed(comm, error)
    return out


def agree_same(comm: Comm, error: BaseException | None, value: Any, flag: bool = False) -> tuple:
    """Collective: whether ``value`` is the same on every rank, and whether any rank set
    ``flag``; raises on every rank if any rank has ``error``.

    One `allreduce_agreed` of a record (O(log P) messages, nothing per rank): its payload
    holds a 64-bit digest of ``repr(value)`` and its complement, ORed over the ranks
    (`digests_agree`, as checked mode's digest in the header), and the flags.  A mismatch of
    the digests is a mismatch of the values (`agree_gather` shows them, on that path only).
    Returns ``(same, flagged)``.
    """
    if comm.size == 1:
        if error is not None:
            raise error
        return True, flag
    record = new_record()
    if error is None:
        d = int.from_bytes(hashlib.blake2b(repr(value).encode(), digest_size=8).digest(), "little")
        record[HEADER_WORDS : HEADER_WORDS + 3] = (d, d ^ _ONES, int(flag))
        record[0] = _VALUE
    out = allreduce_agreed(comm, error, record)
    return digests_agree(out, HEADER_WORDS), bool(out[HEADER_WORDS + 2])


_ONES = (1 << 64) - 1


def digests_agree(record: np.ndarray, at: int = DIGEST) -> bool:
    """True when every rank that sent a digest in the combined ``record`` sent the same one
    (the digest at word ``at``, its complement at ``at + 1``, both ORed over the ranks)."""
    return bool(record[at] == ~record[at + 1])


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
            d2o_librarian.catch_up(comm)
            if rank == comm.rank and error is not None:
                raise error
            raise _rebuild(err[0], err[1], rank)
    return [v for _, v in gathered]


class GatherError(RuntimeError):
    """An implicit gather was refused (the option ``gather='raise'``)."""


class GatherWarning(UserWarning):
    """An operation gathered a whole distributed operand implicitly (``gather='warn'``)."""


def _user_frame() -> tuple:
    """The innermost frame outside the d2o package (the outermost one where all are d2o's)
    and its ``stacklevel`` for a warning raised by the caller of our caller."""
    level, f = 1, sys._getframe(2)
    while f.f_back is not None and (f.f_globals.get("__name__") or "").split(".")[0] == "d2o":
        f = f.f_back
        level += 1
    return f, level


def user_site() -> str:
    """``file:line`` of the innermost frame outside the d2o package (the user's call)."""
    f = _user_frame()[0]
    return f"{f.f_code.co_filename}:{f.f_lineno}"


def _user_stacklevel() -> int:
    """The ``stacklevel`` of the innermost frame outside the d2o package."""
    return _user_frame()[1]


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
