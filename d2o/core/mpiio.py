"""MPI-IO for arrays in files: one open file, the file view of a rank's box, collective
reads and writes.  With `d2o.core.comm` the only place of d2o that calls MPI (the
``.npy`` format, `d2o.io._npy`, builds on it)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .comm import MPI, Comm, os_error

__all__ = ["ArrayFile"]


class ArrayFile:
    """Collective: ``path`` opened on every rank of ``comm`` for MPI-IO (``mode`` 'r', or
    'w' to create or overwrite), as a context manager; the datatypes it makes are freed
    when it closes.  Opening raises Python's exception for the failure (FileNotFoundError,
    PermissionError, ...), not MPI's."""

    def __init__(self, comm: Comm, path: str, mode: str) -> None:
        amode = MPI.MODE_RDONLY if mode == "r" else MPI.MODE_WRONLY | MPI.MODE_CREATE
        self.comm = comm
        self._types: list = []
        self._base: Any = None
        try:
            self._fh = MPI.File.Open(comm.mpi, path, amode)
        except MPI.Exception as exc:
            raise os_error(exc, path) from None

    def __enter__(self) -> ArrayFile:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Collective: close the file and free the datatypes."""
        self._fh.Close()
        for t in self._types:
            t.Free()
        self._types.clear()

    def write_header(self, data: bytes) -> None:
        """Write ``data`` at the start of the file (this rank alone; call it on one)."""
        self._fh.Write_at(0, data)

    def view(self, disp: int, itemsize: int, shape: tuple, box: Any, fortran: bool) -> None:
        """Collective: from byte ``disp`` on, the file holds an array of ``shape`` and
        ``itemsize``-byte elements in C (or Fortran) order; this rank sees its ``box``
        (``((start, stop), ...)``; None or empty: nothing)."""
        base = MPI.BYTE.Create_contiguous(itemsize).Commit()
        self._types.append(base)
        self._base = base
        if box is None or not shape or int(np.prod([b - a for a, b in box])) == 0:
            self._fh.Set_view(disp, base, base)
            return
        order = MPI.ORDER_FORTRAN if fortran else MPI.ORDER_C
        subsizes = [b - a for a, b in box]
        starts = [a for a, _ in box]
        ft = base.Create_subarray(list(shape), subsizes, starts, order=order).Commit()
        self._types.append(ft)
        self._fh.Set_view(disp, base, ft)

    def write_all(self, offset: int, block: np.ndarray) -> None:
        """Collective: write ``block`` at element ``offset`` of this rank's view."""
        self._fh.Write_at_all(offset, [block, block.size, self._base])
        self.comm.note_call()

    def read_all(self, offset: int, block: np.ndarray) -> None:
        """Collective: read ``block`` from element ``offset`` of this rank's view."""
        self._fh.Read_at_all(offset, [block, block.size, self._base])
        self.comm.note_call()
