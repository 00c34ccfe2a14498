"""Controller mode's wire format: handles, commands, scattered pieces (`d2o.runtime.controller`).

A command is a pickle of (number, operation code, arguments, init) in which every d2o
object is a handle ``(command, position)``; a large numpy argument of a creation function
travels as a `_Piece` (each worker receives its box, point to point, `_send_pieces`).
`_agree` is the one collective both sides make: an Allreduce of one int64.
"""

from __future__ import annotations

import functools
import io
import pickle
import types
import weakref
from typing import Any

import numpy as np

from ..core import config as _config
from ..core import trace as _tr
from ..core.comm import MPI, Comm, default_comm
from ..layouts.distributors import get_distributor
from ..ops.creation import distributor_for
from .controller_state import (
    _PICKLER,
    _PIECE_TAG,
    _SCATTER_BYTES,
    _SCATTERING,
    _SCRIPT_COMM,
    ControllerError,
    _comm,
    _freed,
    _handles,
    _objects,
    _outgoing,
    _poisoned,
    _queue,
    _refs,
    role,
)

__all__: list = []


# -- handles ---------------------------------------------------------------------------


def _needs_handle(obj: Any) -> bool:
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
    elif _needs_handle(res):
        out.append(res)
    return out


#: Result types that never need a handle (the common scalar results, checked first).
_PLAIN_RESULTS = frozenset((type(None), bool, int, float, complex, np.float64, np.int64,
                            np.bool_, np.ndarray))  # fmt: skip


def _name_results(res: Any, seq: int, pos: int) -> None:
    if type(res) in _PLAIN_RESULTS:
        return
    for obj in _results(res, []):
        if id(obj) not in _handles:
            _register(obj, (seq, pos))
            pos += 1


def _register(obj: Any, handle: tuple) -> None:
    oid = id(obj)
    _handles[oid] = handle
    if role[0] == "worker":
        _objects[handle] = obj
        return
    try:
        _refs[handle] = weakref.ref(obj, functools.partial(_gone, oid, handle))
    except TypeError:  # not weakly referable: kept for the whole run
        pass


def _gone(oid: int, handle: tuple, ref: Any = None) -> None:
    if _handles.get(oid) == handle:
        del _handles[oid]
    _refs.pop(handle, None)
    _freed.append((handle, len(_queue)))


def _drop(handle: tuple) -> None:
    obj = _objects.pop(handle, None)
    if obj is not None:
        _handles.pop(id(obj), None)


# -- pickling commands --------------------------------------------------------------------


def _by_value(obj: Any) -> bool:
    """Functions and classes the workers cannot import (the script's own, lambdas)."""
    if isinstance(obj, (types.FunctionType, type)):
        return obj.__module__ == "__main__" or "<" in obj.__qualname__
    return False


_PLAIN = frozenset((int, float, str, bool, type(None), tuple, list, dict, bytes, slice, complex))


class _Piece:
    """A large numpy argument of a creation function, as a command carries it: rank 0
    sends each worker its box of the array (point to point, after the batch), and the
    worker's copy is an ``empty`` array of the whole shape with only that box filled
    (memory is touched, and so taken, only there)."""

    __slots__ = ("array", "boxes")

    def __init__(self, array: np.ndarray, boxes: list) -> None:
        self.array, self.boxes = array, boxes


def _scattered(name: str, args: tuple, kwargs: dict) -> tuple:
    """``args`` with a large numpy first argument of a creation function replaced by a
    `_Piece` when the result is cut into slabs (else ``args`` itself)."""
    a = args[0] if args else None
    if (
        name not in _SCATTERING
        or type(a) is not np.ndarray
        or a.nbytes < _SCATTER_BYTES
        or a.dtype.hasobject
        or kwargs.get("ndmin")
        or _comm[0].Get_size() == 1
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
    return (_Piece(a, [d.region(r) for r in range(d.comm.size)]), *args[1:])


_INIT_ARGS = ("global_data", "global_shape", "dtype", "local_data", "local_shape",
              "distribution_strategy", "comm", "copy", "axis")  # fmt: skip


def _scattered_init(args: tuple, kwargs: dict) -> tuple:
    """``(args, kwargs)`` of ``distributed_data_object(global_data=a, ...)`` (``args``
    without ``self``), a large numpy ``a`` replaced by a `_Piece` when the strategy is
    'equal' or 'fftw' (the layout every rank computes alike)."""
    named = dict(zip(_INIT_ARGS, args))
    a = named.get("global_data", kwargs.get("global_data"))
    if type(a) is not np.ndarray or a.nbytes < _SCATTER_BYTES or a.dtype.hasobject:
        return args, kwargs

    get = {**kwargs, **named}.get
    strategy = get("distribution_strategy") or _config.default_strategy()
    axis = get("axis", 0)
    if (
        strategy not in ("equal", "fftw")
        or get("global_shape") is not None
        or type(axis) is not int
        or not 0 <= axis < a.ndim
        or _comm[0].Get_size() == 1
    ):
        return args, kwargs
    d = get_distributor(strategy, a.shape, default_comm(), axis)
    piece = _Piece(a, [d.region(r) for r in range(d.comm.size)])
    if "global_data" in named:
        return (piece, *args[1:]), kwargs
    return args, {**kwargs, "global_data": piece}


def _send_pieces(pieces: list) -> None:
    """Rank 0: every worker's box of each `_Piece` of the batch just sent."""
    comm = _comm[0]
    requests, sent = [], 0
    for p in pieces:
        for r in range(1, comm.Get_size()):
            box = p.boxes[r]
            if box and all(b > a for a, b in box):
                part = np.ascontiguousarray(p.array[tuple(slice(a, b) for a, b in box)])
                requests.append(comm.Isend([part, MPI.BYTE], dest=r, tag=_PIECE_TAG))
                sent += part.nbytes
    MPI.Request.Waitall(requests)
    if _tr.active:
        _tr.note("scatter", sent, 0, comm.Get_size())


def _receive_piece(shape: tuple, dtype: Any, boxes: list) -> np.ndarray:
    """A worker: the whole-shaped array of a `_Piece`, this rank's box received."""
    out = np.empty(shape, dtype=dtype)
    box = boxes[_comm[0].Get_rank()]
    if box and all(b > a for a, b in box):
        part = np.empty(tuple(b - a for a, b in box), dtype=dtype)
        _comm[0].Recv([part, MPI.BYTE], source=0, tag=_PIECE_TAG)
        out[tuple(slice(a, b) for a, b in box)] = part
    return out


class _Pickler(pickle.Pickler):
    def persistent_id(self, obj: Any) -> Any:
        if type(obj) in _PLAIN:
            return None
        if type(obj) is _Piece:
            _outgoing.append(obj)
            return ("piece", obj.array.shape, obj.array.dtype, obj.boxes)
        h = _handles.get(id(obj))
        if h is not None:
            if h[0] in _poisoned:
                raise ControllerError(
                    f"this array could not be computed on every rank ({_poisoned[h[0]]}); "
                    "compute it again"
                )
            return h
        if _needs_handle(obj) and hasattr(obj, "distributor") and hasattr(obj, "data"):
            raise ControllerError(
                "this distributed array was not made by a d2o operation on rank 0, so the "
                "other ranks do not have it"
            )
        if obj is _SCRIPT_COMM[0]:
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


class _Unpickler(pickle.Unpickler):
    def persistent_load(self, pid: Any) -> Any:
        if pid == "world":
            return default_comm()
        if pid[0] == "piece":
            return _receive_piece(*pid[1:])
        try:
            return _objects[pid]
        except KeyError:
            raise ControllerError(f"handle {pid} is unknown on this rank") from None


def _dumps(value: Any) -> bytes:
    if not _PICKLER:
        buf = io.BytesIO()
        _PICKLER.append((buf, _Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL)))
    buf, pickler = _PICKLER[0]
    buf.seek(0)
    buf.truncate()
    pickler.clear_memo()
    try:
        pickler.dump(value)
    except BaseException:
        _PICKLER.clear()  # a failed dump may leave the pickler in any state
        raise
    return buf.getvalue()


def _agree(first_failed: int) -> int:
    """Every rank: the first command of the batch that failed on some rank (or _NONE)."""
    buf = np.array([first_failed], dtype=np.int64)
    out = np.empty_like(buf)
    _comm[0].Allreduce([buf, MPI.INT64_T], [out, MPI.INT64_T], op=MPI.MIN)
    if _tr.active:
        _tr.note("command", 8, 8, _comm[0].size)
    return int(out[0])
