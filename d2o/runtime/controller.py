"""Controller mode (DistNumPy's model): rank 0 runs the program, the other ranks serve.

``mpiexec -n P python -m d2o.run script.py`` (see `d2o.run`) starts P processes; rank 0
executes the script, ranks > 0 execute the d2o operations rank 0 sends them.  The
script is sequential: it prints once, opens files once, needs no ``if rank == 0``.

How it works.  Every public operation already passes the funnel (`d2o.runtime.funnel`).  In
controller mode the funnel hands each outermost call on rank 0 to the `call` method of
rank 0's session (`d2o.runtime.controller_calls.Controller`), which

* pickles a *command* (the operation's number, its arguments with every d2o object
  replaced by a handle) and queues it;
* sends it at once when the operation has a large operand (``_ahead``), none (creation),
  or communicated the last time it ran, so that the workers compute while rank 0 does;
  otherwise the queue travels as one batch on rank 0's next MPI call (a chain of small
  element-wise operations costs one message), at 64 commands, or when the program ends;
* runs the operation on rank 0 as usual (rank 0 holds and computes its own piece);
* numbers the d2o objects the operation returns: handles ``(command, position)``,
  which the workers assign to their own results in the same order.

Only this metadata travels from rank 0 (recorded in a trace as ``command`` calls);
array data moves only as the operations themselves move it, except that a large numpy
array made distributed by a creation function is scattered (`Piece`: each worker
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

The modules: `d2o.runtime.controller_state` (the constants, `Session`: the state both
roles share), `.controller_wire` (the pickled commands, `Piece`), `.controller_calls`
(`Controller`, rank 0's session: the call path, `send`, `flush`, Ctrl-C),
`.controller_worker` (`Worker`, the other ranks' session: `serve`), and this one:
starting and stopping the mode, the script's communicator, and the public functions,
which act on this process's session (`session`).
"""

from __future__ import annotations

import sys
from typing import Any

from ..core import comm as comm_module
from ..core import watchdog
from ..core.comm import MPI, default_comm
from . import funnel
from .controller_calls import Controller
from .controller_state import ControllerError, Session, is_controller, role
from .controller_worker import Worker

__all__ = [
    "ControllerError",
    "start_controller",
    "serve",
    "flush",
    "stop",
    "is_controller",
    "install_sigint",
    "session",
]

#: This process's session: a `Controller` on rank 0, a `Worker` on the others, None
#: before `start_controller`.
_session: Session | None = None


def session() -> Session | None:
    """This process's controller-mode session (None before `start_controller`): rank 0's
    `Controller` or a worker's `Worker`, which hold the mode's state."""
    return _session


# -- starting and stopping ----------------------------------------------------------------


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


def _start(rank: int) -> None:
    global _session
    if MPI is None:
        raise ControllerError("controller mode needs MPI (mpi4py); D2O_MPI=0 switches it off")
    world = default_comm()
    watchdog.stop()  # controller mode has its own handling of failures
    watchdog.uninstall_excepthook()
    comm = world.mpi.Dup()  # the commands' own communicator

    import d2o.numpy  # noqa: F401 - every rank knows every operation from the start

    funnel.controlled[0] = True
    funnel.refresh()
    if rank == 0:
        script = _ScriptComm(world.size)
        ctl = Controller(comm, script)
        _session = ctl
        role[0] = "controller"
        comm_module.script_comm[0] = script  # x.comm and d2o.default_comm() for the script
        comm_module.before_call[0] = ctl.before_comm  # every MPI call: the batch first
        funnel.controller[0] = ctl.call
        ctl.install_sigint()
    else:
        _session = Worker(comm)
        role[0] = "worker"


def start_controller() -> bool:
    """Enter controller mode on every rank of COMM_WORLD (collective).  Returns True on
    rank 0, which goes on to run the program; the other ranks should call `serve`."""
    rank = default_comm().rank
    _start(rank)
    return rank == 0


def serve() -> int:
    """Ranks > 0: run the commands rank 0 sends until it says the program ended.

    Returns the program's exit status (the script's, sent by rank 0).
    """
    worker = _session
    if not isinstance(worker, Worker):
        raise ControllerError("serve() runs on ranks > 0, after start_controller()")
    return worker.serve()


def flush() -> None:
    """Rank 0 of controller mode: send what is queued now (no-op elsewhere)."""
    ctl = _session
    if role[0] == "controller" and isinstance(ctl, Controller):
        ctl.flush()


def install_sigint() -> None:
    """Rank 0 of controller mode: hold Ctrl-C back while the workers run a sent operation
    (the kernel calls it before each cell: IPython sets its own handler); no-op elsewhere."""
    ctl = _session
    if isinstance(ctl, Controller):
        ctl.install_sigint()


def stop(exit_code: int = 0) -> None:
    """Rank 0: send what is queued and tell the workers to exit with ``exit_code``."""
    ctl = _session
    if role[0] != "controller" or not isinstance(ctl, Controller):
        return
    funnel.controller[0] = None
    ctl.finish(int(exit_code))
    role[0] = None
    sys.stdout.flush()
