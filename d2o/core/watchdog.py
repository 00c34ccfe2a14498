"""No job left hanging: a failed rank ends the job, a stalled collective says where every rank is.

Under MPI with more than one process in ``COMM_WORLD`` (and not in controller
mode, which has its own handling), importing d2o installs two guards:

* **Abort on an uncaught exception** (``sys.excepthook``, ``threading.excepthook``):
  the rank prints its traceback, every line prefixed with ``[rank R]``, and
  calls ``MPI_Abort``, so the job ends within seconds instead of leaving the
  other ranks waiting in their next collective.  Off with the option
  ``abort_on_error=False`` or ``D2O_ABORT_ON_ERROR=0``.
* **A watchdog thread** that wakes every quarter second and makes no MPI call
  until this rank is stalled.  Every MPI call of `d2o.core.comm.Comm` counts
  itself on its communicator (``Comm.calls``, one integer increment: the whole
  per-call cost).  When the main thread has sat in the same MPI call for
  ``hang_timeout`` seconds (the innermost frame is a `Comm` method and its
  count has not moved), the rank prints one line (its rank, the public d2o
  operation, the call site in the user's script and the MPI call), asks every
  other rank where it is (point-to-point messages on ``COMM_WORLD`` with d2o's
  reserved tags), names the ranks that never arrived, and aborts the job.
  Ranks answer (and print their own line) when they are stalled too (their
  watchdog asks and answers) or have finished their script (the main thread
  answers while it waits for the others at exit, in a non-blocking barrier);
  a rank computing outside MPI gives no answer.  (So the thread makes no MPI
  call while nothing is wrong: no second thread in MPI beside the main
  thread's collectives, whatever the MPI library's thread support is worth.)

The questions need ``MPI_THREAD_MULTIPLE`` (mpi4py's default); with a lower
thread level a stalled rank still prints its own line and aborts.
"""

from __future__ import annotations

import atexit
import fcntl
import os
import sys
import termios
import threading
import time
import traceback
from types import FrameType
from typing import Any

from . import config as _config
from . import trace as _trace
from .comm import MPI, Comm, default_comm, wait_points

__all__ = ["start", "stop", "describe", "install_excepthook"]

#: Point-to-point tags on COMM_WORLD: a stalled rank's question, and the answers.
_ASK_TAG = 7311
_ANSWER_TAG = 7312
#: How often the thread wakes (seconds): the reply latency and the timeout's resolution.
_TICK = 0.25
#: Where the reports go: stderr, or a descriptor that a test runner capturing stderr
#: (pytest does, per test) saved for them beforehand (``D2O_STDERR_FD``).
_STDERR_FD = int(os.environ.get("D2O_STDERR_FD", "2"))
#: How long a stalled rank waits for the others' answers before it aborts.
_ANSWER_WAIT = 1.5

#: The MPI call behind each `Comm` method (what a stalled rank waits in).
_MPI_NAMES = {
    "allreduce": "allreduce (pickled)",
    "any_flag": "Allreduce",
    "allgather": "allgather (pickled)",
    "bcast": "bcast (pickled)",
    "barrier": "Barrier",
    "Allgather": "Allgather",
    "Allgatherv": "Allgatherv",
    "Allreduce": "Allreduce",
    "Bcast": "Bcast",
    "Alltoallw": "Alltoallw",
    "Alltoallv": "Alltoallv",
    "Sendrecv_many": "Isend/Irecv + Waitall",
    "Sendrecv_wait": "Waitall",
    "send": "send",
    "recv": "recv",
    "Split": "Comm_split",
}


class _State:
    """The watchdog's state on this rank (one instance)."""

    __slots__ = ("thread", "stop", "finished", "main", "reported")

    def __init__(self) -> None:
        self.thread: threading.Thread | None = None
        self.stop = threading.Event()
        self.finished = False
        self.main = threading.main_thread().ident
        self.reported = False


_STATE = _State()


def _world() -> Any:
    return MPI.COMM_WORLD


def _is_d2o(frame: FrameType) -> bool:
    name = frame.f_globals.get("__name__") or ""
    return name == "d2o" or name.startswith("d2o.")


def _is_library(frame: FrameType) -> bool:
    """Frames of d2o, numpy or the interpreter's own machinery (not the user's script)."""
    name = frame.f_globals.get("__name__") or ""
    return (
        _is_d2o(frame)
        or name == "numpy"
        or name.startswith("numpy.")
        or name.startswith("importlib")
        or name == "functools"
    )


def _operation(frame: FrameType) -> str:
    """The public operation whose outermost d2o frame is ``frame``."""
    code = frame.f_code
    name = getattr(code, "co_qualname", code.co_name)
    local = frame.f_locals
    if code.co_name == "__array_function__" and "func" in local:
        return f"numpy.{getattr(local['func'], '__name__', '?')}"
    if code.co_name == "__array_ufunc__" and "ufunc" in local:
        return f"numpy.{getattr(local['ufunc'], '__name__', '?')}"
    op = local.get("op") if code.co_name in ("run", "body") else None
    if isinstance(getattr(op, "name", None), str):
        return op.name  # the runtime's handling of a flagged call (checked mode, a trace)
    if frame.f_globals.get("__name__", "").startswith("d2o.api."):
        return name.rsplit(".", 1)[-1]  # a method of the public class or one of its mixins
    return name


def describe(frame: FrameType | None) -> dict:
    """Where a thread whose innermost frame is ``frame`` is: the MPI call it waits in (or
    None), the public d2o operation (or None) and the user's call site ``file:line``."""
    out: dict = {"mpi": None, "comm": None, "calls": None, "op": None, "site": "?"}
    if frame is None:
        return out
    if frame.f_code in wait_points:
        out["mpi"] = _MPI_NAMES.get(frame.f_code.co_name, frame.f_code.co_name)
        comm = frame.f_locals.get("self")
        if isinstance(comm, Comm):
            out["comm"] = comm
            out["calls"] = comm.calls
    outermost = None
    f: FrameType | None = frame
    while f is not None and _is_library(f):
        if _is_d2o(f):
            outermost = f
        f = f.f_back
    if outermost is not None:
        rec = _trace.current[0]
        out["op"] = rec.op if rec is not None else _operation(outermost)
    if f is not None:
        out["site"] = f"{f.f_code.co_filename}:{f.f_lineno}"
    return out


def _main_frame() -> FrameType | None:
    return sys._current_frames().get(_STATE.main)


def _say(text: str) -> None:
    """One line to stderr in a single write (lines of several ranks then do not mix)."""
    data = (text.rstrip("\n") + "\n").encode(errors="replace")
    try:
        sys.stderr.flush()
        os.write(_STDERR_FD, data)
    except OSError:  # pragma: no cover - stderr closed
        pass


def _head() -> str:
    world = _world()
    return f"d2o: rank {world.Get_rank()} of {world.Get_size()}"


def _where(info: dict, seconds: float | None = None) -> str:
    """What this rank is doing, as a phrase (no rank): ``waits ... in OP at FILE:LINE``."""
    if _STATE.finished and info["mpi"] is None:
        return "finished its script and waits at exit"
    if info["mpi"] is None:
        return f"is not in a d2o collective (running at {info['site']})"
    op = info["op"] or "?"
    comm = info["comm"]
    group = "" if comm is None else f" on {comm.size} rank{'s' if comm.size > 1 else ''}"
    waited = "" if seconds is None else f" for {seconds:.1f} s"
    return f"waits{waited} in {op} at {info['site']} (MPI {info['mpi']}{group})"


def _world_ranks(comm: Comm) -> tuple:
    """The COMM_WORLD ranks of ``comm``'s members, in its rank order."""
    try:
        group, world = comm.mpi.Get_group(), _world().Get_group()
        ranks = tuple(MPI.Group.Translate_ranks(group, list(range(comm.size)), world))
        group.Free()
        world.Free()
        return ranks
    except Exception:  # pragma: no cover - an inter-communicator, a freed one
        return ()


def _answer(asker: int, question: tuple) -> None:
    """Tell ``asker`` where this rank is, after printing it here."""
    group, _ = question
    info = describe(_main_frame())
    _say(f"{_head()} {_where(info)} (asked by rank {asker})")
    comm = info["comm"]
    same = comm is not None and _world_ranks(comm) == group
    reply = (
        "finished" if _STATE.finished and info["mpi"] is None else "waiting" if same else "other",
        info["calls"] if same else None,
        _where(info),
    )
    _world().send(reply, dest=asker, tag=_ANSWER_TAG)


def _serve() -> None:
    """Answer every question waiting for this rank."""
    world = _world()
    status = MPI.Status()
    while world.iprobe(source=MPI.ANY_SOURCE, tag=_ASK_TAG, status=status):
        src = status.Get_source()
        question = world.recv(source=src, tag=_ASK_TAG)
        _answer(src, question)


def _stalled(info: dict, seconds: float, timeout: float) -> None:
    """This rank has waited ``seconds`` in one MPI call: report, ask, name the absent, abort."""
    world = _world()
    rank, size = world.Get_rank(), world.Get_size()
    _say(f"{_head()} {_where(info, seconds)}")
    comm = info["comm"]
    group = _world_ranks(comm) if comm is not None else ()
    absent: dict[int, str] = {}
    answers: dict[int, tuple] = {}
    if MPI.Query_thread() >= MPI.THREAD_MULTIPLE:
        for r in range(size):
            if r != rank:
                world.send((group, info["calls"]), dest=r, tag=_ASK_TAG)
        deadline = time.monotonic() + _ANSWER_WAIT
        status = MPI.Status()
        while len(answers) < size - 1 and time.monotonic() < deadline:
            _serve()  # another stalled rank may be asking us at the same time
            if world.iprobe(source=MPI.ANY_SOURCE, tag=_ANSWER_TAG, status=status):
                src = status.Get_source()
                answers[src] = world.recv(source=src, tag=_ANSWER_TAG)
            else:
                time.sleep(0.01)
        for r in group:
            if r == rank:
                continue
            kind, calls, text = answers.get(r, ("silent", None, ""))
            if kind != "waiting" or calls != info["calls"]:
                absent[r] = text or "gave no answer"
    if absent:
        names = ", ".join(str(r) for r in absent)
        why = "; ".join(f"rank {r} {text}" for r, text in absent.items())
        verdict = f"rank{'s' if len(absent) > 1 else ''} {names} never arrived ({why})"
    elif group:
        others = "; ".join(f"rank {r} {answers[r][2]}" for r in group if r in answers)
        verdict = f"every rank of the group arrived, in different calls? ({others})"
    else:
        verdict = "the other ranks could not be asked"
    _say(
        f"d2o: rank {rank}: {info['op'] or 'a collective'} stalled for {seconds:.1f} s "
        f"(hang_timeout={timeout:g}); {verdict}; aborting the job"
    )
    time.sleep(0.2)  # let the other ranks' lines reach mpiexec before the abort
    _abort()


def _waiting() -> tuple | None:
    """(communicator id, its call count) while the main thread waits in an MPI call of
    `Comm`, else None.  Returns numbers only: the frame (and through it the user's
    arrays) is not kept alive between two looks."""
    frame = _main_frame()
    if frame is None or frame.f_code not in wait_points:
        return None
    comm = frame.f_locals.get("self")  # (a Comm method's locals: its buffers, briefly)
    return (id(comm), getattr(comm, "calls", None))


def _run() -> None:
    """The thread: answer questions; watch the main thread's MPI calls."""
    seen: tuple | None = None
    since = 0.0
    while not _STATE.stop.wait(_TICK):
        if MPI.Is_finalized():
            return
        timeout = _config.OPTIONS["hang_timeout"]
        key = None if timeout is None else _waiting()
        now = time.monotonic()
        if key is None or key != seen:
            seen, since = key, now
        elif now - since >= timeout and not _STATE.reported:
            _STATE.reported = True
            _stalled(describe(_main_frame()), now - since, timeout)


def _at_exit() -> None:
    """Keep answering until every rank has finished its script, then stop the thread."""
    thread = _STATE.thread
    if thread is None or MPI.Is_finalized():
        return
    _STATE.finished = True
    # Only where d2o worked on COMM_WORLD (so every rank runs d2o and reaches this point):
    # a rank that never imported d2o would never join the barrier.
    if MPI.Query_thread() >= MPI.THREAD_MULTIPLE and default_comm().calls:
        request = _world().Ibarrier()
        while not request.Test():
            _serve()  # (the main thread answers: it has nothing else to do)
            time.sleep(0.01)
    _STATE.stop.set()
    thread.join()
    _STATE.thread = None


def start() -> None:
    """Start the watchdog thread (under MPI with more than one process; idempotent)."""
    if MPI is None or _STATE.thread is not None or _world().Get_size() == 1:
        return
    _STATE.stop.clear()
    _STATE.finished = False
    thread = threading.Thread(target=_run, name="d2o-watchdog", daemon=True)
    _STATE.thread = thread
    thread.start()
    atexit.register(_at_exit)


def stop() -> None:
    """Stop the watchdog thread (controller mode has its own handling)."""
    thread = _STATE.thread
    if thread is None:
        return
    _STATE.stop.set()
    thread.join()
    _STATE.thread = None
    atexit.unregister(_at_exit)


# -- abort on an uncaught exception -----------------------------------------------------


def _drained(fd: int, wait: float = 2.0) -> None:
    """Wait (at most ``wait`` seconds) until the pipe behind ``fd`` has been read.

    mpiexec forwards a rank's output through a pipe; on ``MPI_Abort`` it may end
    before it has read what is still in that pipe, and the report is lost.  Not a
    pipe (a file, a terminal): returns at once.
    """
    end = time.monotonic() + wait
    while time.monotonic() < end:
        try:
            left = fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0")
        except OSError:
            return
        if int.from_bytes(left, sys.byteorder) == 0:
            return
        time.sleep(0.01)


def _abort() -> None:
    """End the whole job: MPI_Abort, and this process at once should that return."""
    try:
        for fd in (1, _STDERR_FD):
            _drained(fd)
        _world().Abort(1)
    finally:
        os._exit(1)


_PREVIOUS: dict = {}


def _abort_with(exc_type: type, exc: BaseException, tb: Any, where: str) -> None:
    rank = _world().Get_rank()
    lines = "".join(traceback.format_exception(exc_type, exc, tb)).splitlines()
    text = "\n".join(f"[rank {rank}] {line}" for line in lines)
    _say(
        f"{text}\n[rank {rank}] d2o: uncaught {exc_type.__name__} {where}; aborting the job "
        "(MPI_Abort; d2o.set_options(abort_on_error=False) or D2O_ABORT_ON_ERROR=0 to "
        "handle this yourself)"
    )
    _abort()


def _excepthook(exc_type: type, exc: BaseException, tb: Any) -> None:
    if _config.OPTIONS["abort_on_error"] and not MPI.Is_finalized():
        _abort_with(exc_type, exc, tb, "in the main thread")
    _PREVIOUS["sys"](exc_type, exc, tb)


def _thread_hook(args: Any) -> None:
    if (
        _config.OPTIONS["abort_on_error"]
        and args.exc_type is not SystemExit
        and not MPI.Is_finalized()
    ):
        name = getattr(args.thread, "name", "?")
        _abort_with(args.exc_type, args.exc_value, args.exc_traceback, f"in thread {name!r}")
    _PREVIOUS["thread"](args)


def install_excepthook() -> None:
    """Abort the job when an exception escapes the script on this rank (idempotent)."""
    if MPI is None or "sys" in _PREVIOUS or _world().Get_size() == 1:
        return
    _PREVIOUS["sys"] = sys.excepthook
    _PREVIOUS["thread"] = threading.excepthook
    sys.excepthook = _excepthook
    threading.excepthook = _thread_hook


def uninstall_excepthook() -> None:
    """Put the previous hooks back (controller mode)."""
    if "sys" in _PREVIOUS:
        sys.excepthook = _PREVIOUS.pop("sys")
        threading.excepthook = _PREVIOUS.pop("thread")
