"""Controller mode on ranks > 0: the session that runs rank 0's commands (`d2o.runtime.controller`).

`Worker.serve` waits for each batch (a broadcast from rank 0, polled so that an idle
worker uses no CPU), runs its commands in order, frees the handles rank 0 freed, and
reports a failing command's exception to rank 0 (point to point).
"""

from __future__ import annotations

import importlib
import io
import os
import pickle
import signal
import time
import warnings
from typing import Any

import numpy as np

from ..core import hooks
from ..core.comm import MPI
from .controller_state import ERR_TAG, HEADER, LENGTH, NONE, Session
from .controller_wire import unpickler_for

__all__ = ["Worker"]


def _wait(req: Any) -> None:
    """Wait for a request: polling, yielding the core to other processes between polls,
    then (after 20 ms) sleeping ever longer, up to 10 ms (an idle worker uses no CPU)."""
    if req.Test():
        return
    t0 = time.perf_counter()
    pause = 0.0
    yield_core = getattr(os, "sched_yield", None) or (lambda: time.sleep(0))
    while not req.Test():
        if pause:
            time.sleep(pause)
            pause = min(pause * 1.5, 0.01)
        elif time.perf_counter() - t0 > 0.02:
            pause = 1e-4
        else:
            yield_core()


def _class(key: tuple) -> Any:
    cls: Any = importlib.import_module(key[1])
    for part in key[2].split("."):
        cls = getattr(cls, part)
    return cls


def _resolve(key: tuple) -> Any:
    """The operation (its trampoline) of a command's key."""
    if key[0] == "f":
        return getattr(importlib.import_module(key[1]), key[2])
    fn = vars(_class(key))[key[3]]
    return fn.fget if isinstance(fn, property) else fn


def _position(freed: tuple) -> int:
    return freed[1]


class Worker(Session):
    """A worker's session: the objects rank 0's commands made here, by handle.

    Parameters
    ----------
    comm : mpi4py.MPI.Comm
        The commands' own communicator (a duplicate of ``COMM_WORLD``).

    Notes
    -----
    Attributes besides `Session`'s: ``keys`` (operation number -> operation key, as
    rank 0 sent them), ``fns`` (operation number -> the operation, resolved once),
    ``pending_reports`` (requests of the error reports sent to rank 0), ``unpickler``
    (the commands' unpickler class, `unpickler_for` this session).
    """

    def __init__(self, comm: Any) -> None:
        super().__init__(comm)
        self.rank = comm.Get_rank()
        self.keys: dict = {}
        self.fns: dict = {}
        self.pending_reports: list = []
        self.unpickler = unpickler_for(self)

    def register(self, obj: Any, handle: tuple) -> None:
        """Keep ``obj`` under ``handle`` until rank 0 frees it."""
        self.handles[id(obj)] = handle
        self.objects[handle] = obj

    def _drop(self, handle: tuple) -> None:
        obj = self.objects.pop(handle, None)
        if obj is not None:
            self.handles.pop(id(obj), None)

    def _execute(self, blob: bytes) -> int | None:
        """Run one command; its number if it failed (the exception is reported to rank 0)."""
        seq, name = 0, "?"
        try:
            seq, code, args, kwargs, init, told = self.unpickler(io.BytesIO(blob)).load()
            key = self.keys[code]
            name = key[-1]
            fn = self.fns.get(code)
            if fn is None:
                fn = self.fns[code] = _resolve(key)
            if init:
                cls = _class(key)
                obj = cls.__new__(cls)
                fn(obj, *args, **kwargs)
                self.register(obj, (seq, 0))
            else:
                hooks.temporary[0] = told  # (rank 0's answer: `d2o.core.hooks.temporary`)
                try:
                    res = fn(*args, **kwargs)
                finally:
                    hooks.temporary[0] = None
                self.name_results(res, seq, 0)
        except Exception as exc:
            self._report(seq, name, exc)
            return seq
        return None

    def _report(self, seq: int, name: str, exc: BaseException) -> None:
        text = f"{type(exc).__name__}: {exc}"
        try:
            pickle.dumps(exc)
            sent: Any = exc
        except Exception:
            sent = None
        msg = (seq, self.rank, name, sent, text)
        self.pending_reports.append(self.comm.isend(msg, dest=0, tag=ERR_TAG))

    def serve(self) -> int:
        """Run the commands rank 0 sends until it says the program ended.

        Returns
        -------
        int
            The program's exit status (the script's, sent by rank 0).
        """
        comm, drop, execute = self.comm, self._drop, self._execute
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is rank 0's to handle
        warnings.simplefilter("ignore")  # rank 0 shows the warnings of its own part
        head = bytearray(HEADER)
        first, unagreed = NONE, False
        while True:
            _wait(comm.Ibcast([head, MPI.BYTE], root=0))
            n = LENGTH.unpack_from(head, 0)[0]
            if n <= HEADER - 8:
                payload: Any = bytes(head[8 : 8 + n])
            else:
                payload = np.empty(n, dtype=np.uint8)
                comm.Bcast([payload, MPI.BYTE], root=0)
            cmds, codes, freed, discard, exit_code, current = pickle.loads(payload)
            if codes:
                self.keys.update(codes)
            if len(freed) > 1:
                freed.sort(key=_position)
            deferred = cmds[:-1] if current else cmds
            k = 0
            for i, blob in enumerate(deferred):  # after a failure, later ones wait for agreement
                while k < len(freed) and freed[k][1] <= i:
                    drop(freed[k][0])
                    k += 1
                if first == NONE:
                    first = execute(blob) or NONE
            unagreed = unagreed or bool(deferred)
            if current:
                while k < len(freed) and freed[k][1] < len(cmds):
                    drop(freed[k][0])
                    k += 1
                if unagreed:
                    first, unagreed = self.agree(first), False
                if first == NONE:
                    execute(cmds[-1])
                first = NONE
            for h, _ in freed[k:]:
                drop(h)
            for s in discard:
                for h in [h for h in self.objects if h[0] == s]:
                    drop(h)
            if self.pending_reports:
                self.pending_reports[:] = [r for r in self.pending_reports if not r.Test()]
            if exit_code is not None:
                return int(exit_code)
