"""``.npy`` files through MPI-IO: every rank writes and reads only its own part.

The file is an ordinary ``.npy`` file (numpy's format), so ``numpy.load``
reads what `save` writes and `load` reads what ``numpy.save`` writes: C or
Fortran order, any non-object dtype, either byte order.  Rank 0 writes the
header; every rank sets a file view (an MPI subarray type of its box at the
data offset) and the ranks write or read in collective calls
(``Write_at_all``/``Read_at_all``) in blocks of at most ~BUFFER_BYTES, so no
rank ever holds more than its share plus one block.  Without MPI the same
functions work serially with plain file I/O and ``numpy.memmap``.
"""

from __future__ import annotations

import io
import os
from typing import Any

import numpy as np

from ..array.base import Array as D2O
from ..core.comm import Comm, as_comm
from ..core.errors import agreed
from ..core.mpiio import ArrayFile
from ..core.registry import operation
from ..layouts.distributors import Distributor
from ..layouts.mesh import Layout
from . import _common
from ._common import (
    check_path,
    check_readable,
    check_storable,
    check_writable,
    commit,
    layout,
    loaded,
    remove,
    replace_path,
    same_path,
    temp_name,
)

__all__ = ["save", "load"]

_fmt = np.lib.format


def header_bytes(shape: tuple, dtype: np.dtype) -> bytes:
    """The ``.npy`` header numpy.save would write for a C-ordered array."""
    d = {"descr": _fmt.dtype_to_descr(dtype), "fortran_order": False, "shape": tuple(shape)}
    buf = io.BytesIO()
    write = getattr(_fmt, "_write_array_header", None)
    if write is not None:
        write(buf, d, None)
    else:  # pragma: no cover - older/newer numpy
        try:
            _fmt.write_array_header_1_0(buf, d)
        except ValueError:
            buf = io.BytesIO()
            _fmt.write_array_header_2_0(buf, d)
    return buf.getvalue()


def _read_header(path: str) -> tuple:
    """(shape, fortran_order, dtype descr, data offset) of a ``.npy`` file."""
    with open(path, "rb") as f:
        version = _fmt.read_magic(f)
        if version == (1, 0):
            shape, fortran, dtype = _fmt.read_array_header_1_0(f, max_header_size=1 << 30)
        elif version == (2, 0):
            shape, fortran, dtype = _fmt.read_array_header_2_0(f, max_header_size=1 << 30)
        else:
            shape, fortran, dtype = _fmt._read_array_header(f, version, max_header_size=1 << 30)
        offset = f.tell()
    if dtype.hasobject:
        raise ValueError(f"{path} holds Python objects (dtype {dtype}); d2o cannot load it")
    return tuple(shape), bool(fortran), _fmt.dtype_to_descr(dtype), offset


def _npy_path(path: Any) -> str:
    path = check_path(path)
    return path if path.endswith(".npy") else path + ".npy"


def _box_of(dist: Distributor, rank: int) -> tuple:
    if dist.replicated:  # rank 0 writes the whole array, the others nothing
        return dist.region(rank) if rank == 0 else None
    return dist.region(rank)


def _count(box) -> int:
    return 0 if box is None else int(np.prod([b - a for a, b in box], dtype=np.int64))


def _rounds(counts: list[int], per_block: int) -> int:
    return max(-(-c // per_block) for c in counts) if counts else 0


# -- save ---------------------------------------------------------------------
@operation(kind="io")
def save(path: Any, obj: D2O, overwrite: bool = False) -> None:
    """Collective: write ``obj`` to the ``.npy`` file ``path`` (C order), no gathering.

    Parameters
    ----------
    path : str or os.PathLike
        Target file; ``.npy`` is appended when missing (as ``numpy.save`` does).
    obj : distributed_data_object
        The array; a replicated ('not') array is written by rank 0 alone.
    overwrite : bool
        Replace an existing file (default: raise FileExistsError).

    Notes
    -----
    Communication: a few tiny collectives (error agreement, the temporary
    name), collective MPI-IO writes of every rank's own part, and a final
    agreement before rank 0 renames the temporary file to ``path``.
    A failed write leaves no file behind.
    """
    if not isinstance(obj, D2O):
        raise TypeError(f"save expects a distributed_data_object, got {type(obj).__name__}")
    _write(path, obj, overwrite, _npy_path, ".npy", True)


def write_raw(path: Any, obj: D2O) -> None:
    """Collective: write the elements of ``obj`` (a slab or replicated layout) to the file
    ``path`` as raw bytes in C order, replacing it (numpy's ``tofile`` with ``sep=''``);
    every rank writes its own part, as `save` does, without a header."""
    _write(path, obj, True, check_path, "a raw file", False)


def _write(path: Any, obj: D2O, overwrite: bool, name: Any, fmt: str, with_header: bool) -> None:
    dist = obj.distributor
    c = dist.comm
    tmp, error = None, None
    try:
        path = name(path)
        check_storable(obj.dtype, fmt)
        check_writable(path)  # on every rank: each writes its own part
        if c.rank == 0:
            if os.path.lexists(path) and not overwrite:
                raise FileExistsError(f"{path} exists; pass overwrite=True to replace it")
            tmp = temp_name(path)
    except Exception as exc:
        error = exc
    same_path(c, error, None if error else path)
    tmp = c.bcast(tmp, 0)
    header = header_bytes(dist.global_shape, obj.dtype) if with_header else b""
    error = None
    try:
        if c.mpi is None:
            _save_serial(tmp, header, obj.data)
        else:
            _save_mpi(tmp, header, obj.data, dist, c)
    except Exception as exc:
        error = exc
    commit(c, error, lambda: remove(tmp), lambda: replace_path(tmp, path))


def _flat_blocks(data: np.ndarray, per_block: int, rounds: int):
    """Yield ``rounds`` (offset, C-ordered 1-D block) pairs; empty blocks pad the end.

    A C-contiguous piece yields views; any other piece is copied block by
    block into one staging buffer (reused: consume each block before the next).
    """
    n = data.size
    if data.flags.c_contiguous:
        flat = data.reshape(-1)
        for i in range(rounds):
            lo, hi = min(n, i * per_block), min(n, (i + 1) * per_block)
            yield lo, flat[lo:hi]
        return
    stage = np.empty(min(per_block, n), dtype=data.dtype)
    done = fill = 0
    it = np.nditer(
        data,
        flags=["external_loop", "buffered", "zerosize_ok", "refs_ok"],
        order="C",
        buffersize=max(1, per_block // 8),
    )
    for chunk in it:
        while chunk.size:
            k = min(chunk.size, stage.size - fill)
            stage[fill : fill + k] = chunk[:k]
            fill, chunk = fill + k, chunk[k:]
            if fill == stage.size:
                yield done, stage
                done, fill, rounds = done + fill, 0, rounds - 1
    if fill:
        yield done, stage[:fill]
        done, rounds = done + fill, rounds - 1
    for _ in range(rounds):
        yield done, stage[:0]


def _save_serial(tmp: str, header: bytes, data: np.ndarray) -> None:
    per_block = max(1, _common.BUFFER_BYTES // max(1, data.itemsize))
    with open(tmp, "wb") as f:
        f.write(header)
        for _, block in _flat_blocks(data, per_block, _rounds([data.size], per_block)):
            f.write(memoryview(block).cast("B"))


def _save_mpi(tmp: str, header: bytes, data: np.ndarray, dist: Distributor, c: Comm) -> None:
    with ArrayFile(c, tmp, "w") as f:
        if c.rank == 0:
            f.write_header(header)
        box = _box_of(dist, c.rank)
        f.view(len(header), data.itemsize, dist.global_shape, box, fortran=False)
        per_block = max(1, _common.BUFFER_BYTES // max(1, data.itemsize))
        rounds = _rounds([_count(_box_of(dist, r)) for r in range(c.size)], per_block)
        mine = data if _count(box) else data.reshape(-1)[:0]
        for lo, block in _flat_blocks(mine, per_block, rounds):
            f.write_all(lo, block)


# -- load ---------------------------------------------------------------------
@operation(kind="io")
def load(path: Any, distribution_strategy: str = "equal", axis: int = 0, comm: Any = None) -> D2O:
    """Collective: read a ``.npy`` file, every rank reading only its own part.

    Parameters
    ----------
    path : str or os.PathLike
        A ``.npy`` file (C or Fortran order, any non-object dtype, either byte order).
    distribution_strategy : {'equal', 'fftw', 'freeform', 'not'}
        Layout of the result ('freeform' gets the 'equal' lengths; 'not'
        makes every rank read the whole file).
    axis : int
        The distributed axis.
    comm : mpi4py communicator, optional
        Default: COMM_WORLD (or the serial stand-in).

    Returns
    -------
    distributed_data_object
        With the file's dtype (byte order included); the local pieces of a
        Fortran-order file are Fortran-ordered, like ``numpy.load``'s result.

    Notes
    -----
    Communication: rank 0 reads the header and broadcasts it (with error
    agreement), then collective MPI-IO reads of every rank's own box.
    """
    c = as_comm(comm)
    meta, error = None, None
    try:
        path = check_path(path)
        if not isinstance(distribution_strategy, Layout) and distribution_strategy not in (
            "not",
            "equal",
            "fftw",
            "freeform",
        ):
            layout(distribution_strategy, (1,), c)  # raises the standard message
        check_readable(path)  # on every rank: each reads its own part
        if c.rank == 0:
            meta = _read_header(path)
    except Exception as exc:
        error = exc
    same_path(c, error, None if error else path)
    shape, fortran, descr, offset = c.bcast(meta, 0)
    dtype = _fmt.descr_to_dtype(descr)
    with agreed(c):
        dist = layout(distribution_strategy, shape, c, axis)
    box = dist.region(c.rank)
    local_shape = tuple(b - a for a, b in box)
    order = "F" if fortran else "C"
    spans = [_span(dist.region(r), shape, fortran) for r in range(c.size)]
    local = np.empty(local_shape, dtype=dtype, order=order)
    error = None
    try:
        if all(sp is not None for sp in spans):
            # every rank's part is one contiguous run of the file: a plain read each,
            # no MPI-IO (independent reads, as fast as numpy.load)
            _read_span(path, local, offset + spans[c.rank] * dtype.itemsize)
        elif c.mpi is None:
            local = _load_serial(path, shape, dtype, offset, order, dist)
        else:
            _load_mpi(path, local, dist, offset, fortran, c)
    except Exception as exc:
        error = exc
    with agreed(c):
        if error is not None:
            raise error
    return loaded(local, dist, distribution_strategy)


def _span(box: tuple, shape: tuple, fortran: bool) -> int | None:
    """The flat element offset of ``box`` in the file when it is one contiguous run, else None."""
    axes = range(len(shape)) if fortran else range(len(shape) - 1, -1, -1)
    partial = False
    start, stride = 0, 1
    for ax in axes:
        lo, hi = box[ax]
        if partial and hi - lo > 1:
            return None
        if hi - lo != shape[ax]:
            partial = True
        start += lo * stride
        stride *= shape[ax]
    return start


def _read_span(path: str, local: np.ndarray, byte_offset: int) -> None:
    """Read ``local.nbytes`` bytes at ``byte_offset`` straight into ``local`` (contiguous)."""
    if local.nbytes == 0:
        return
    view = memoryview(local.reshape(-1, order="A")).cast("B")
    with open(path, "rb", buffering=0) as f:
        f.seek(byte_offset)
        done = 0
        while done < view.nbytes:
            n = f.readinto(view[done:])
            if not n:
                raise ValueError(f"{path} is shorter than its header says")
            done += n


def _load_serial(path, shape, dtype, offset, order, dist) -> np.ndarray:
    if dist.size == 0:
        return np.empty(dist.local_shape, dtype=dtype, order=order)
    mm = np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=shape, order=order)
    try:
        return np.array(mm[dist.local_slice], order="K", subok=False)
    finally:
        del mm


def _load_mpi(path: str, local: np.ndarray, dist: Distributor, offset: int, fortran: bool, c):
    with ArrayFile(c, path, "r") as f:
        f.view(offset, local.itemsize, dist.global_shape, dist.region(c.rank), fortran)
        # ``local`` is contiguous in the file's order: its flat view is the view's order.
        flat = local.ravel(order="A")
        per_block = max(1, _common.BUFFER_BYTES // max(1, local.itemsize))
        counts = [_count(dist.region(r)) for r in range(c.size)]
        n = flat.size
        for i in range(_rounds(counts, per_block)):
            lo, hi = min(n, i * per_block), min(n, (i + 1) * per_block)
            f.read_all(lo, flat[lo:hi])
