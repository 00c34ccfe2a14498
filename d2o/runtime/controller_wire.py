"""Controller mode's wire format: commands, scattered pieces (`d2o.runtime.controller`).

A command is a pickle of (number, operation code, arguments, init) in which every d2o
object is a handle ``(command, position)`` (`CommandPickler` on rank 0,
`CommandUnpickler` on the workers); a large numpy argument of a creation function
travels as a `Piece` (each worker receives its box, point to point: `send_pieces`,
`receive_piece`).
"""

from __future__ import annotations

import pickle
import types
from typing import Any

import numpy as np

from ..core import config as _config
from ..core import trace as _tr
from ..core.comm import MPI, Comm, default_comm
from ..layouts.distributors import get_distributor
from ..ops.creation import distributor_for
from .controller_state import (
    PIECE_TAG,
    SCATTER_BYTES,
    SCATTERING,
    ControllerError,
    Session,
    needs_handle,
)

__all__ = [
    "Piece",
    "scattered",
    "scattered_init",
    "send_pieces",
    "receive_piece",
    "CommandPickler",
    "CommandUnpickler",
    "unpickler_for",
]


# -- pickling commands --------------------------------------------------------------------


def _by_value(obj: Any) -> bool:
    """Functions and classes the workers cannot import (the script's own, lambdas)."""
    if isinstance(obj, (types.FunctionType, type)):
        return obj.__module__ == "__main__" or "<" in obj.__qualname__
    return False


_PLAIN = frozenset((int, float, str, bool, type(None), tuple, list, dict, bytes, slice, complex))


class Piece:
    """A large numpy argument of a creation function, as a command carries it: rank 0
    sends each worker its box of the array (point to point, after the batch), and the
    worker's copy is an ``empty`` array of the whole shape with only that box filled
    (memory is touched, and so taken, only there)."""

    __slots__ = ("array", "boxes")

    def __init__(self, array: np.ndarray, boxes: list) -> None:
        self.array, self.boxes = array, boxes


def scattered(name: str, args: tuple, kwargs: dict, size: int) -> tuple:
    """``args`` with a large numpy first argument of a creation function replaced by a
    `Piece` when the result is cut into slabs over ``size`` ranks (else ``args`` itself)."""
    a = args[0] if args else None
    if (
        name not in SCATTERING
        or type(a) is not np.ndarray
        or a.nbytes < SCATTER_BYTES
        or a.dtype.hasobject
        or kwargs.get("ndmin")
        or size == 1
    ):
        return args

    dtype = args[1] if len(args) > 1 else kwargs.get("dtype")
    try:
        d = distributor_for(kwargs.get("dist"), a.shape, a.dtype if dtype is None else dtype)
        d.bounds()  # slabs only
    except Exception:  # the operation itself reports bad arguments
        return args
    if d.replicated:
        return args
    return (Piece(a, [d.region(r) for r in range(d.comm.size)]), *args[1:])


_INIT_ARGS = ("global_data", "global_shape", "dtype", "local_data", "local_shape",
              "distribution_strategy", "comm", "copy", "axis")  # fmt: skip


def scattered_init(args: tuple, kwargs: dict, size: int) -> tuple:
    """``(args, kwargs)`` of ``distributed_data_object(global_data=a, ...)`` (``args``
    without ``self``), a large numpy ``a`` replaced by a `Piece` when the strategy is
    'equal' or 'fftw' (the layout every rank computes alike) and ``size`` > 1."""
    named = dict(zip(_INIT_ARGS, args))
    a = named.get("global_data", kwargs.get("global_data"))
    if type(a) is not np.ndarray or a.nbytes < SCATTER_BYTES or a.dtype.hasobject:
        return args, kwargs

    get = {**kwargs, **named}.get
    strategy = get("distribution_strategy") or _config.default_strategy()
    axis = get("axis", 0)
    if (
        strategy not in ("equal", "fftw")
        or get("global_shape") is not None
        or type(axis) is not int
        or not 0 <= axis < a.ndim
        or size == 1
    ):
        return args, kwargs
    d = get_distributor(strategy, a.shape, default_comm(), axis)
    piece = Piece(a, [d.region(r) for r in range(d.comm.size)])
    if "global_data" in named:
        return (piece, *args[1:]), kwargs
    return args, {**kwargs, "global_data": piece}


def send_pieces(comm: Any, pieces: list) -> None:
    """Rank 0: every worker's box of each `Piece` of the batch just sent (Isend on the
    commands' communicator ``comm``)."""
    requests, sent = [], 0
    for p in pieces:
        for r in range(1, comm.Get_size()):
            box = p.boxes[r]
            if box and all(b > a for a, b in box):
                part = np.ascontiguousarray(p.array[tuple(slice(a, b) for a, b in box)])
                requests.append(comm.Isend([part, MPI.BYTE], dest=r, tag=PIECE_TAG))
                sent += part.nbytes
    MPI.Request.Waitall(requests)
    if _tr.active:
        _tr.note("scatter", sent, 0, comm.Get_size())


def receive_piece(comm: Any, shape: tuple, dtype: Any, boxes: list) -> np.ndarray:
    """A worker: the whole-shaped array of a `Piece`, this rank's box received (Recv on
    the commands' communicator ``comm``)."""
    out = np.empty(shape, dtype=dtype)
    box = boxes[comm.Get_rank()]
    if box and all(b > a for a, b in box):
        part = np.empty(tuple(b - a for a, b in box), dtype=dtype)
        comm.Recv([part, MPI.BYTE], source=0, tag=PIECE_TAG)
        out[tuple(slice(a, b) for a, b in box)] = part
    return out


class CommandPickler(pickle.Pickler):
    """Rank 0: pickles a command, naming d2o objects by their handles.

    Parameters
    ----------
    file : file object
        Where the pickle goes.
    session : Controller
        Rank 0's session: its ``handles``, ``poisoned`` (commands whose results some
        worker could not compute), ``outgoing`` (the `Piece` objects of the queued commands,
        appended to here) and ``script_comm`` (the communicator the script sees).
    """

    def __init__(self, file: Any, session: Any) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        # the session's containers, never rebound: read without its attribute lookups
        self.handles, self.poisoned = session.handles, session.poisoned
        self.outgoing, self.script_comm = session.outgoing, session.script_comm

    def persistent_id(self, obj: Any) -> Any:
        if type(obj) in _PLAIN:
            return None
        if type(obj) is Piece:
            self.outgoing.append(obj)
            return ("piece", obj.array.shape, obj.array.dtype, obj.boxes)
        h = self.handles.get(id(obj))
        if h is not None:
            if h[0] in self.poisoned:
                raise ControllerError(
                    f"this array could not be computed on every rank ({self.poisoned[h[0]]}); "
                    "compute it again"
                )
            return h
        if needs_handle(obj) and hasattr(obj, "distributor") and hasattr(obj, "data"):
            raise ControllerError(
                "this distributed array was not made by a d2o operation on rank 0, so the "
                "other ranks do not have it"
            )
        if obj is self.script_comm:
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


class CommandUnpickler(pickle.Unpickler):
    """A worker: unpickles a command, handles replaced by its own objects and pieces
    received.  Use the subclass `unpickler_for` makes for the worker's session."""

    objects: dict  # handle -> object (the worker session's)
    comm: Any  # the commands' communicator

    def persistent_load(self, pid: Any) -> Any:
        if pid == "world":
            return default_comm()
        if pid[0] == "piece":
            return receive_piece(self.comm, *pid[1:])
        try:
            return self.objects[pid]
        except KeyError:
            raise ControllerError(f"handle {pid} is unknown on this rank") from None


def unpickler_for(session: Session) -> type[CommandUnpickler]:
    """The `CommandUnpickler` of a worker's ``session`` (its objects and communicator as
    class attributes: each command's unpickler is then made by pickle's own constructor,
    with no Python ``__init__`` on the workers' path)."""

    class SessionUnpickler(CommandUnpickler):
        objects = session.objects
        comm = session.comm

    return SessionUnpickler
