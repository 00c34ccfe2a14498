"""Helpers shared by the file formats: layouts, selections, temporary names, commits.

Nothing here gathers data.  Functions that communicate say so.
"""

from __future__ import annotations

import errno
import os
import secrets
import shutil
from collections.abc import Callable
from typing import Any

import numpy as np

from ..array.base import from_local as _from_local
from ..core.comm import Comm
from ..core.errors import agree, agree_gather, agreed
from ..layouts.distributors import STRATEGIES, Distributor, get_distributor, normalize_axis
from ..layouts.mesh import Layout, slab_equivalent
from ..move.halo import slab_rows
from ..move.redistribution import redistribute

__all__ = [
    "BUFFER_BYTES",
    "layout",
    "check_storable",
    "check_path",
    "check_readable",
    "check_writable",
    "same_path",
    "Selection",
    "temp_name",
    "commit",
    "row_blocks",
    "row_layout",
]

#: Upper bound (bytes) of the staging buffers that readers and writers allocate
#: on top of the local share.  Tests lower it to check bounded memory.
BUFFER_BYTES = 32 << 20


def layout(strategy: Any, shape: tuple, comm: Comm, axis: int = 0) -> Distributor:
    """The distributor a loaded array of ``shape`` is read into; no communication.

    'freeform' has no rule of its own here: it gets the 'equal' lengths,
    labelled 'freeform'.  A `d2o.layout` gives its distributor, except that a
    block-cyclic one is read as its slab equivalent (see `loaded`).
    """
    if isinstance(strategy, Layout):
        if strategy.comm is not comm:
            raise ValueError("the layout belongs to another communicator")
        d = strategy.distributor(tuple(int(n) for n in shape))
        return slab_equivalent(d) if getattr(d, "cyclic", False) else d
    if strategy not in STRATEGIES:
        raise ValueError(
            f"unknown distribution_strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}"
        )
    shape = tuple(int(n) for n in shape)
    if not shape:
        return get_distributor("not", shape, comm, 0)
    ax = normalize_axis(axis, len(shape))
    if strategy == "freeform":
        d = get_distributor("equal", shape, comm, ax)
        return d.slabs_like(shape, ax, "freeform")
    return get_distributor(strategy, shape, comm, ax)


def row_layout(obj: Any) -> Distributor:
    """The layout whose pieces are whole rows of ``obj``, so that the ranks' pieces are
    consecutive runs of its C-order bytes in rank order: its own when it is cut along its
    first axis only (or replicated), else row slabs of 'equal' lengths; no communication."""
    d = obj.distributor
    if d.replicated or d.comm.size == 1 or (slab_rows(d) and d.axis == 0):
        return d
    return get_distributor("equal", obj.shape, d.comm, 0)


def check_storable(dtype: np.dtype, fmt: str) -> None:
    """Raise TypeError for dtypes that cannot go to a file (Python objects)."""
    if dtype.hasobject:
        raise TypeError(f"cannot store an array of dtype {dtype} (Python objects) in {fmt}")


def check_path(path: Any) -> str:
    """``path`` as a str (accepts str and os.PathLike)."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"expected a file name (str or os.PathLike), got {type(path).__name__}")
    return os.fspath(path)


def check_readable(path: str) -> None:
    """Python's exception when ``path`` is not a readable file on this rank (local)."""
    if not os.path.exists(path):
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
    if os.path.isdir(path):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
    if not os.access(path, os.R_OK):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), path)


def check_writable(path: str, is_dir: bool = False) -> None:
    """Python's exception when ``path`` cannot be created on this rank (local): its
    directory must exist, be a directory and be writable."""
    head = os.path.dirname(os.path.abspath(path))
    if not os.path.exists(head):
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), head)
    if not os.path.isdir(head):
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), head)
    if not os.access(head, os.W_OK | os.X_OK):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), head)
    if not is_dir and os.path.isdir(path):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)


def same_path(comm: Comm, error: BaseException | None, path: str | None) -> None:
    """Collective: agree on errors and require ``path`` to name one file on every rank.

    One allgather of the absolute paths carries the error agreement too.
    """
    paths = agree_gather(comm, error, None if path is None else os.path.abspath(path))
    if len(set(paths)) > 1:
        raise ValueError(
            f"the file name differs between ranks ({paths}); it must be the same on every rank"
        )


def temp_name(path: str) -> str:
    """A fresh hidden name in ``path``'s directory (call on one rank, then bcast)."""
    head, tail = os.path.split(os.path.abspath(path))
    while True:
        cand = os.path.join(head, f".{tail}.{secrets.token_hex(6)}.d2o-tmp")
        if not os.path.lexists(cand):
            return cand


def remove(path: str) -> None:
    """Remove a file or directory tree if it exists."""
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    elif os.path.lexists(path):
        os.remove(path)


def commit(
    comm: Comm,
    error: BaseException | None,
    cleanup: Callable[[], None],
    finish: Callable[[], None],
) -> None:
    """Collective end of a write: all ranks agree; then rank 0 finishes or cleans up.

    ``error`` is this rank's failure (None if its part was written).  If any
    rank failed, rank 0 calls ``cleanup`` and every rank raises; otherwise
    rank 0 calls ``finish`` (the rename) and every rank returns after it.
    Two tiny collectives.
    """
    try:
        agree(comm, error)
    except BaseException:
        if comm.rank == 0:
            try:
                cleanup()
            except Exception:  # pragma: no cover - best effort
                pass
        raise
    with agreed(comm):
        if comm.rank == 0:
            try:
                finish()
            except BaseException:
                try:
                    cleanup()
                except Exception:  # pragma: no cover - best effort
                    pass
                raise


def replace_path(tmp: str, path: str) -> None:
    """Move ``tmp`` to ``path``, replacing a file or directory there (rank 0 only)."""
    if os.path.isdir(path) and not os.path.islink(path):
        trash = temp_name(path)
        os.rename(path, trash)
        try:
            os.rename(tmp, path)
        except BaseException:  # pragma: no cover - put the old one back
            os.rename(trash, path)
            raise
        shutil.rmtree(trash, ignore_errors=True)
    else:
        os.replace(tmp, path)


def row_blocks(n: int, row_bytes: int, multiple: int = 1) -> list[tuple[int, int]]:
    """Split ``range(n)`` into blocks of at most ~BUFFER_BYTES (at least ``multiple`` rows).

    Block lengths are multiples of ``multiple`` (except the last one).
    """
    if n <= 0:
        return []
    rows = max(1, BUFFER_BYTES // max(1, row_bytes))
    rows = max(multiple, rows - rows % multiple)
    return [(i, min(n, i + rows)) for i in range(0, n, rows)]


class Selection:
    """A numpy basic selection (ints, slices with any step, Ellipsis) of a stored array.

    ``shape`` is the shape of the selected array; `source` turns a box of the
    selection into a selection of the stored array with positive steps only
    (what h5py and zarr accept) plus the axes to flip afterwards.
    """

    def __init__(self, sel: Any, shape: tuple) -> None:
        shape = tuple(int(n) for n in shape)
        if sel is None:
            sel = ()
        if not isinstance(sel, tuple):
            sel = (sel,)
        n_ell = sum(1 for s in sel if s is Ellipsis)
        if n_ell > 1:
            raise IndexError("an index can only have a single ellipsis ('...')")
        n_real = len(sel) - n_ell
        if n_real > len(shape):
            raise IndexError(
                f"too many indices for array: array is {len(shape)}-dimensional, "
                f"but {n_real} were indexed"
            )
        if n_ell:
            i = next(k for k, s in enumerate(sel) if s is Ellipsis)
            sel = sel[:i] + (slice(None),) * (len(shape) - n_real) + sel[i + 1 :]
        else:
            sel = sel + (slice(None),) * (len(shape) - n_real)
        self.dims: list = []  # per stored dim: int, or (start, step, count)
        out = []
        for axis, (s, n) in enumerate(zip(sel, shape)):
            if isinstance(s, (bool, np.bool_)):
                raise TypeError("boolean indices are not supported in a file selection")
            if isinstance(s, (int, np.integer)):
                i = int(s)
                if not -n <= i < n:
                    raise IndexError(f"index {i} is out of bounds for axis {axis} with size {n}")
                self.dims.append(i % n)
            elif isinstance(s, slice):
                start, stop, step = s.indices(n)  # ValueError for step 0, TypeError for junk
                count = len(range(start, stop, step))
                self.dims.append((start, step, count))
                out.append(count)
            else:
                raise TypeError(
                    "a file selection takes integers, slices and Ellipsis only, "
                    f"got {type(s).__name__}"
                )
        self.shape = tuple(out)

    def source(self, box: tuple) -> tuple[tuple, tuple]:
        """The stored-array selection of ``box`` (non-empty) and the output axes to flip."""
        src, flips, k = [], [], 0
        for d in self.dims:
            if isinstance(d, int):
                src.append(d)
                continue
            start, step, _ = d
            lo, hi = box[k]
            first, last = start + lo * step, start + (hi - 1) * step
            if step > 0:
                src.append(slice(first, last + 1, step))
            else:
                src.append(slice(last, first + 1, -step))
                flips.append(k)
            k += 1
        return tuple(src), tuple(flips)


def read_boxes(
    read: Callable[[tuple], np.ndarray],
    sel: Selection,
    dist: Distributor,
    dtype: np.dtype,
) -> np.ndarray:
    """This rank's piece of the selection, read in blocks of rows (local; no communication).

    ``read(source_selection)`` returns the stored data of a selection.  At
    most ~BUFFER_BYTES are staged at a time on top of the local piece.
    """
    box = dist.region(dist.comm.rank)
    local = np.empty(tuple(b - a for a, b in box), dtype=dtype)
    if local.size == 0:
        return local
    if local.ndim == 0:
        local[()] = read(sel.source(())[0])
        return local
    # budget by the stored rows a block touches (whole rows when axis 0 is not split)
    row_bytes = local.itemsize * int(np.prod(dist.global_shape[1:], dtype=np.int64))
    lo0 = box[0][0]
    for i0, i1 in row_blocks(local.shape[0], row_bytes):
        part = ((lo0 + i0, lo0 + i1),) + tuple(box[1:])
        src, flips = sel.source(part)
        block = np.asarray(read(src))
        if flips:
            block = np.flip(block, axis=flips)
        local[i0:i1] = block
        del block  # keep one block alive at a time
    return local


def loaded(local: np.ndarray, dist: Distributor, strategy: Any) -> Any:
    """The loaded array: ``local`` read into ``dist``, moved to the block-cyclic layout
    ``strategy`` names if it is one (one exchange)."""
    if isinstance(strategy, Layout):
        target = strategy.distributor(dist.global_shape)
        if target is not dist:
            return _from_local(redistribute(local, dist, target), target)
    return _from_local(local, dist)
