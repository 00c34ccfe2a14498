"""Controller mode's constants and the state both roles share (`d2o.runtime.controller`).

A `Session` is controller mode on one rank: the commands' own communicator and the
handles of the d2o objects that commands name.  Rank 0's session is a
`d2o.runtime.controller_calls.Controller` (the queue of commands, sequence numbers,
reports, Ctrl-C handling), the other ranks' a `d2o.runtime.controller_worker.Worker`
(the objects by handle, the operations by number).  Each holds its own state as
attributes; nothing is kept at module level but the constants and the role cell
(`d2o.core.hooks.role`, which `d2o.core.trace` reads).
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

from ..core import hooks
from ..core import trace as _tr
from ..core.comm import MPI

__all__ = [
    "ControllerError",
    "is_controller",
    "role",
    "Session",
    "needs_handle",
    "HEADER",
    "LENGTH",
    "ERR_TAG",
    "PIECE_TAG",
    "SCATTER_BYTES",
    "SCATTERING",
    "MAX_QUEUED",
    "MAX_BYTES",
    "AHEAD_BYTES",
    "NONE",
]


class ControllerError(RuntimeError):
    """A call that cannot work in controller mode (the message names the alternative)."""


HEADER = 2048  # bytes of the fixed broadcast buffer (length + batches up to 2040 bytes)
LENGTH = struct.Struct("<q")  # the header's first 8 bytes: the batch's length
ERR_TAG = 7001  # worker -> rank 0: an exception in a worker's part of an operation
PIECE_TAG = 7002  # rank 0 -> worker: its part of a large numpy argument (`Piece`)
#: numpy arguments of creation functions from this many bytes on are scattered: each
#: worker receives only the part it keeps, not the whole array inside the command
SCATTER_BYTES = 1 << 20
SCATTERING = frozenset(
    ("numpy.asarray", "numpy.array", "numpy.asanyarray", "numpy.ascontiguousarray")
)
MAX_QUEUED = 64  # commands queued before a batch is sent anyway
MAX_BYTES = 1 << 20  # bytes queued before a batch is sent anyway
#: Operations on a local piece of this many bytes are sent before rank 0 runs its part,
#: so that every rank computes at once; smaller ones wait in the queue (latency hiding).
AHEAD_BYTES = 1 << 18
#: "no command failed" in the agreement (`Session.agree`): the largest int64
NONE = int(np.iinfo(np.int64).max)
#: "controller" on rank 0, "worker" on the other ranks, None outside controller mode
role = hooks.role  # the same cell, read by d2o.core.trace


def is_controller() -> bool:
    """True on rank 0 of a program run in controller mode."""
    return role[0] == "controller"


def needs_handle(obj: Any) -> bool:
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
    elif needs_handle(res):
        out.append(res)
    return out


#: Result types that never need a handle (the common scalar results, checked first).
_PLAIN_RESULTS = frozenset((type(None), bool, int, float, complex, np.float64, np.int64,
                            np.bool_, np.ndarray))  # fmt: skip


class Session:
    """Controller mode on one rank: what both roles hold and do alike.

    Parameters
    ----------
    comm : mpi4py.MPI.Comm
        The commands' own communicator (a duplicate of ``COMM_WORLD``), so that commands
        never match a message of d2o's operations.

    Attributes
    ----------
    comm : mpi4py.MPI.Comm
        The commands' communicator.
    size : int
        Its number of ranks.
    handles : dict
        ``id(object) -> handle`` of the d2o objects that commands name; a handle is
        ``(command, position)``: the command that made the object, and its place among
        that command's results.
    objects : dict
        ``handle -> object`` (filled on the workers only; rank 0 keeps weak references).
    """

    def __init__(self, comm: Any) -> None:
        self.comm = comm
        self.size = comm.Get_size()
        self.handles: dict = {}
        self.objects: dict = {}

    def register(self, obj: Any, handle: tuple) -> None:
        """Name ``obj`` by ``handle`` (each role keeps it its own way)."""
        raise NotImplementedError

    def name_results(self, res: Any, seq: int, pos: int) -> None:
        """Name the d2o objects among command ``seq``'s results ``res``, from ``pos`` on
        (both sides walk them in the same order and skip those named already)."""
        if type(res) in _PLAIN_RESULTS:
            return
        handles = self.handles
        for obj in _results(res, []):
            if id(obj) not in handles:
                self.register(obj, (seq, pos))
                pos += 1

    def agree(self, first_failed: int) -> int:
        """Every rank: the first command of the batch that failed on some rank (or `NONE`).

        The one collective both roles make: an Allreduce (MIN) of one int64 on the
        commands' communicator.
        """
        buf = np.array([first_failed], dtype=np.int64)
        out = np.empty_like(buf)
        self.comm.Allreduce([buf, MPI.INT64_T], [out, MPI.INT64_T], op=MPI.MIN)
        if _tr.active:
            _tr.note("command", 8, 8, self.size)
        return int(out[0])
