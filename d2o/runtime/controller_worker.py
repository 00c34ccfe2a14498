"""Controller mode on ranks > 0: the loop that runs rank 0's commands (`d2o.runtime.controller`).

`serve` waits for each batch (a broadcast from rank 0, polled so that an idle worker
uses no CPU), runs its commands in order, frees the handles rank 0 freed, and reports
a failing command's exception to rank 0 (point to point).
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

from ..core.comm import MPI
from .controller_state import (
    _ERR_TAG,
    _FNS,
    _HEADER,
    _KEYS,
    _LENGTH,
    _NONE,
    _comm,
    _objects,
    _pending_reports,
)
from .controller_wire import _agree, _drop, _name_results, _register, _Unpickler

__all__ = ["serve"]


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
    """The operation (as the funnel wrapped it) of a command's key."""
    if key[0] == "f":
        return getattr(importlib.import_module(key[1]), key[2])
    fn = vars(_class(key))[key[3]]
    return fn.fget if isinstance(fn, property) else fn


def _execute(blob: bytes) -> int | None:
    """Run one command; its number if it failed (the exception is reported to rank 0)."""
    seq, name = 0, "?"
    try:
        seq, code, args, kwargs, init = _Unpickler(io.BytesIO(blob)).load()
        key = _KEYS[code]
        name = key[-1]
        fn = _FNS.get(code)
        if fn is None:  # (a wrapper the funnel installs again later still works alike)
            fn = _FNS[code] = _resolve(key)
        if init:
            cls = _class(key)
            obj = cls.__new__(cls)
            fn(obj, *args, **kwargs)
            _register(obj, (seq, 0))
        else:
            _name_results(fn(*args, **kwargs), seq, 0)
    except Exception as exc:
        _report(seq, name, exc)
        return seq
    return None


def _report(seq: int, name: str, exc: BaseException) -> None:
    text = f"{type(exc).__name__}: {exc}"
    try:
        pickle.dumps(exc)
        sent: Any = exc
    except Exception:
        sent = None
    msg = (seq, _comm[0].Get_rank(), name, sent, text)
    _pending_reports.append(_comm[0].isend(msg, dest=0, tag=_ERR_TAG))


def _position(freed: tuple) -> int:
    return freed[1]


def serve() -> int:
    """Ranks > 0: run the commands rank 0 sends until it says the program ended.

    Returns the program's exit status (the script's, sent by rank 0).
    """
    comm = _comm[0]
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is rank 0's to handle
    warnings.simplefilter("ignore")  # rank 0 shows the warnings of its own part
    head = bytearray(_HEADER)
    first, unagreed = _NONE, False
    while True:
        _wait(comm.Ibcast([head, MPI.BYTE], root=0))
        n = _LENGTH.unpack_from(head, 0)[0]
        if n <= _HEADER - 8:
            payload: Any = bytes(head[8 : 8 + n])
        else:
            payload = np.empty(n, dtype=np.uint8)
            comm.Bcast([payload, MPI.BYTE], root=0)
        cmds, codes, freed, discard, exit_code, current = pickle.loads(payload)
        if codes:
            _KEYS.update(codes)
        if len(freed) > 1:
            freed.sort(key=_position)
        deferred = cmds[:-1] if current else cmds
        k = 0
        for i, blob in enumerate(deferred):  # after a failure, later ones wait for agreement
            while k < len(freed) and freed[k][1] <= i:
                _drop(freed[k][0])
                k += 1
            if first == _NONE:
                first = _execute(blob) or _NONE
        unagreed = unagreed or bool(deferred)
        if current:
            while k < len(freed) and freed[k][1] < len(cmds):
                _drop(freed[k][0])
                k += 1
            if unagreed:
                first, unagreed = _agree(first), False
            if first == _NONE:
                _execute(cmds[-1])
            first = _NONE
        for h, _ in freed[k:]:
            _drop(h)
        for s in discard:
            for h in [h for h in _objects if h[0] == s]:
                _drop(h)
        if _pending_reports:
            _pending_reports[:] = [r for r in _pending_reports if not r.Test()]
        if exit_code is not None:
            return int(exit_code)
