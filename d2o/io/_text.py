"""Text files: numpy's ``savetxt`` of a distributed array, every rank writing its rows.

Every rank formats its own rows with numpy's ``savetxt`` (so the text is numpy's, row for
row), the ranks learn where their text starts from one allgather of their byte counts (an
exclusive prefix; rank 0's text starts with the header, the last rank's ends with the
footer), and each writes its bytes at that offset of one file (collective MPI-IO writes in
blocks of at most ~BUFFER_BYTES; plain file I/O without MPI).  An array not cut along its
rows alone is first redistributed to row slabs (each element moves at most once).
"""

from __future__ import annotations

import io
import locale
from typing import Any

import numpy as np

from ..array.align import align
from ..array.base import Array as D2O
from ..core.comm import Comm
from ..core.mpiio import ArrayFile
from . import _common
from ._common import (
    check_path,
    check_writable,
    commit,
    remove,
    replace_path,
    row_layout,
    same_path,
    temp_name,
)

__all__ = ["savetxt"]


def savetxt(fname: Any, X: D2O, fmt: Any = "%.18e", delimiter: str = " ", newline: str = "\n",
            header: str = "", footer: str = "", comments: str = "# ",
            encoding: Any = None) -> None:  # fmt: skip
    """Collective: numpy's ``savetxt`` of the distributed array ``X`` to the file
    ``fname`` (a path), its rows in global order, no gather.

    Notes
    -----
    Communication: ``X`` redistributed to row slabs when it is cut along its columns
    (or on a process mesh); error agreements and one allgather of the per-rank byte
    counts; collective MPI-IO writes of every rank's own text; a final agreement before
    rank 0 renames the temporary file to ``fname``.  Memory: the text of the rank's rows.
    A failed write leaves no file behind (numpy leaves a partial one).
    """
    c = X.distributor.comm
    if X.ndim == 0 or X.ndim > 2:
        raise ValueError("Expected 1D or 2D array, got %dD array instead" % X.ndim)
    rows = row_layout(X)
    local = np.asarray(align(X, rows)) if rows is not X.distributor else X.data
    if rows.replicated and c.rank:
        local = local[:0]
    enc = encoding or locale.getpreferredencoding(False)
    text, tmp, path, error = b"", None, None, None
    try:
        path = check_path(fname)
        check_writable(path)
        buf = io.StringIO()
        np.savetxt(buf, local, fmt, delimiter, newline, "", "", comments)
        text = buf.getvalue().encode(enc)
        if c.rank == 0 and header:
            text = (comments + header.replace("\n", "\n" + comments) + newline).encode(enc) + text
        if c.rank == c.size - 1 and footer:
            text += (comments + footer.replace("\n", "\n" + comments) + newline).encode(enc)
        if c.rank == 0:
            tmp = temp_name(path)
    except Exception as exc:
        error = exc
    same_path(c, error, None if error else path)
    assert path is not None
    tmp = c.bcast(tmp, 0)
    counts = c.allgather(len(text))
    error = None
    try:
        _write_bytes(tmp, text, counts, c)
    except Exception as exc:
        error = exc
    commit(c, error, lambda: remove(tmp), lambda: replace_path(tmp, path))


def _write_bytes(tmp: str, text: bytes, counts: list, c: Comm) -> None:
    """Every rank's ``text`` at the exclusive prefix sum of ``counts``: one file."""
    start = sum(counts[: c.rank])
    total = sum(counts)
    data = np.frombuffer(text, dtype=np.uint8)
    if c.mpi is None:
        with open(tmp, "wb") as f:
            f.write(text)
        return
    block = max(1, _common.BUFFER_BYTES)
    rounds = max(-(-n // block) for n in counts) if counts else 0
    with ArrayFile(c, tmp, "w") as f:
        box = ((start, start + len(text)),) if text else None
        f.view(0, 1, (total,), box, fortran=False)
        for i in range(rounds):
            lo, hi = min(len(data), i * block), min(len(data), (i + 1) * block)
            f.write_all(lo, data[lo:hi])
