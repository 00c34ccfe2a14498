"""``.npz`` archives: numpy's ``savez``/``savez_compressed`` of distributed arrays.

An ``.npz`` file is a zip archive of ``.npy`` members, each with a CRC-32 of its whole
data in its local header and the central directory (and, compressed, one deflate stream),
so the members are not written in parallel: rank 0 writes the archive, and each
distributed array is gathered onto rank 0 alone, one at a time (no rank ever holds more
than one whole array).  These gathers are implicit: each is bounded by the
``fallback_limit`` option (NotImplementedError above it, before anything moves), recorded
in the trace (``gathers``, ``fallback``) and refused under ``gather='raise'``.
"""

from __future__ import annotations

import zipfile
from typing import Any

import numpy as np

from ..array.base import Array as D2O
from ..core import config as _config
from ..core import records as _records
from ..core.comm import Comm
from ..core.errors import check_gather
from ..move.redistribution import gather
from ._common import check_path, check_writable, commit, remove, replace_path, same_path, temp_name

__all__ = ["savez"]


def savez(comm: Comm, file: Any, args: tuple, kwds: dict, compress: bool,
          allow_pickle: bool = True) -> None:  # fmt: skip
    """Collective: numpy's ``savez`` (``compress``: ``savez_compressed``) of numpy and
    distributed arrays to the path ``file`` (``.npz`` appended when missing).

    Notes
    -----
    Communication: one agreement per distributed array that is cut between ranks (the
    ``gather`` option), then each such array gathered onto rank 0 in turn (its bytes,
    once); error agreements and the final rename by rank 0.  Memory on rank 0: one whole
    array at a time.
    """
    name = "savez_compressed" if compress else "savez"
    path = check_path(file)
    if not path.endswith(".npz"):
        path += ".npz"
    named = dict(kwds)
    for i, val in enumerate(args):
        key = "arr_%d" % i
        if key in named:
            raise ValueError(f"Cannot use un-named variables and keyword {key}")
        named[key] = val
    cut = [v for v in named.values() if isinstance(v, D2O) and not v.distributor.replicated]
    limit = _config.get_option("fallback_limit")
    big = [v.nbytes for v in cut if v.nbytes > limit and comm.size > 1]
    if big:
        raise NotImplementedError(
            f"d2o.numpy.{name} gathers each distributed array onto rank 0, and one "
            f"({big[0]} bytes) exceeds the fallback limit of {limit} bytes; raise it with "
            "d2o.options(fallback_limit=...), or write the arrays with d2o.save (.npy, parallel)"
        )
    if comm.size > 1:
        for v in cut:
            check_gather(comm, f"an operand of {name} ({v.nbytes} bytes)", onto="rank 0")
        rec = _records.current[0]
        if rec is not None and cut:
            rec.fallback = name
    tmp, error = None, None
    try:
        check_writable(path)
        if comm.rank == 0:
            tmp = temp_name(path)
    except Exception as exc:
        error = exc
    same_path(comm, error, None if error else path)
    tmp = comm.bcast(tmp, 0)
    error = None
    zipf = None
    try:
        if comm.rank == 0:
            method = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
            zipf = zipfile.ZipFile(tmp, mode="w", compression=method, allowZip64=True)
    except Exception as exc:
        error = exc
    for key, val in named.items():
        whole = _on_rank0(val)  # collective for distributed arrays: keep every rank going
        if comm.rank or error is not None:
            continue
        try:
            assert zipf is not None
            with zipf.open(key + ".npy", "w", force_zip64=True) as fid:
                np.lib.format.write_array(fid, np.asanyarray(whole), allow_pickle=allow_pickle)
        except Exception as exc:
            error = exc
        del whole
    if zipf is not None:
        try:
            zipf.close()
        except Exception as exc:
            error = error or exc
    commit(comm, error, lambda: remove(tmp), lambda: replace_path(tmp, path))


def _on_rank0(val: Any) -> Any:
    """``val`` whole on rank 0 (a distributed array gathered there; None elsewhere)."""
    if not isinstance(val, D2O):
        return val
    d = val.distributor
    if d.replicated:
        return val.data if d.comm.rank == 0 else None
    return gather(val.data, d, 0)
