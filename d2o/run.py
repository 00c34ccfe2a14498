"""Run a sequential program on P processes: ``mpiexec -n P python -m d2o.run script.py [args]``.

Controller mode (see `d2o.runtime.controller`): rank 0 executes ``script.py`` as ``__main__``
with ``sys.argv = ["script.py", *args]``; ranks > 0 execute the d2o operations rank 0
sends them.  Every d2o array of the script is distributed over all P processes, but the
script itself is an ordinary sequential program: it prints once and needs no
``if rank == 0``.  The job's exit status is the script's.

``python -m d2o.run --kernel -f CONNECTION_FILE`` runs an IPython kernel on rank 0
instead of a script (what the kernelspec of `d2o.kernel` starts).
"""

from __future__ import annotations

import os
import runpy
import sys
import threading
import time
import traceback
from typing import Any

from .runtime import controller as _controller

__all__ = ["main"]

_USAGE = "usage: mpiexec -n P python -m d2o.run script.py [args ...]\n"


def _exit_status(exc: SystemExit) -> int:
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _print_exception(exc: BaseException, path: str = "") -> None:
    """Python's report of an uncaught exception, from the script's first frame on."""
    tb = exc.__traceback__
    first = tb
    while tb is not None and tb.tb_frame.f_code.co_filename != path:
        tb = tb.tb_next
    traceback.print_exception(type(exc), exc, tb or first)


def _compile(path: str) -> Any:
    """The script's code, or Python's own error for a missing file or a syntax error."""
    try:
        with open(path, "rb") as f:
            source = f.read()
    except OSError as exc:
        print(
            f"{os.path.basename(sys.executable)}: can't open file {path!r}: "
            f"[Errno {exc.errno}] {exc.strerror}",
            file=sys.stderr,
        )
        return 2
    try:
        return compile(source, path, "exec")
    except SyntaxError as exc:
        traceback.print_exception(type(exc), exc, None)
        return 1


def _run_script(argv: list[str]) -> int:
    path = argv[0]
    code = _compile(path)
    if isinstance(code, int):
        return code
    sys.argv = list(argv)
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit as exc:
        return _exit_status(exc)
    except KeyboardInterrupt:
        _print_exception(KeyboardInterrupt())
        return 130
    except BaseException as exc:  # the script's own error: Python's report, status 1
        _print_exception(exc, path)
        return 1
    return 0


def _watch_parent(pid: int) -> None:
    """Rank 0 of a kernel: end the job when the frontend that started it has gone.

    ipykernel's own parent poller compares ``os.getppid()`` with the frontend's pid, but
    under mpiexec rank 0's parent is MPI's process manager, so it is disabled there.
    Exiting rank 0 with status 1 makes mpiexec end the workers too.
    """
    while True:
        time.sleep(1.0)
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            os._exit(1)
        except OSError:  # exists, owned by someone else
            pass


def _run_kernel(argv: list[str]) -> int:
    """Rank 0: an IPython kernel (``argv``: IPKernelApp's, e.g. ``-f CONNECTION_FILE``).

    Each cell runs in controller mode: its d2o operations are sent to the workers, and
    what it left queued is sent when it ends.  The kernel's shutdown request returns
    from ``app.start()``, so `main` then tells the workers to exit.
    """
    from ipykernel.kernelapp import IPKernelApp

    app = IPKernelApp.instance()
    app.initialize(argv)
    events = app.shell.events
    # ipykernel sets its own SIGINT handler before it handles each message (and ignores
    # SIGINT between messages): put controller mode's in front of it for every cell, so
    # an interrupt waits until the sent operation has finished on every rank.
    events.register("pre_run_cell", lambda *a: _controller.install_sigint())
    # What a cell queued (and the handles it freed) reaches the workers when it ends.
    events.register("post_run_cell", lambda *a: _controller.flush())
    parent = int(os.environ.get("JPY_PARENT_PID") or 0)
    if parent > 1 and parent != os.getppid():
        threading.Thread(target=_watch_parent, args=(parent,), daemon=True).start()
    try:
        app.start()
    except SystemExit as exc:
        return _exit_status(exc)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Start controller mode on every rank; rank 0 runs the program, the others serve.
    Returns the program's exit status on every rank."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        sys.stdout.write(_USAGE if args else "")
        sys.stderr.write("" if args else _USAGE)
        return 0 if args else 2

    if not _controller.start_controller():
        return _controller.serve()
    status = 1
    try:
        if args[0] == "--kernel":
            status = _run_kernel(args[1:])
        else:
            status = _run_script(args)
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            _controller.stop(status)
    return status


if __name__ == "__main__":
    sys.exit(main())
