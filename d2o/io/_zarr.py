"""Zarr (v3) arrays: every rank reads and writes its own region, chunks never shared.

On write, the chunk length along the distributed axis divides every rank's
start offset, so each chunk lies inside one rank's piece and no two ranks
ever write the same chunk (no locks needed).  Rank 0 creates the array in a
temporary directory; after an agreement every rank writes its region in
chunk-aligned blocks; rank 0 renames the directory into place on success.
"""

from __future__ import annotations

import errno
import math
import os
from typing import Any

import numpy as np

from ..array.base import Array as D2O
from ..core.comm import as_comm
from ..core.errors import agreed
from ..core.registry import operation
from ..layouts.distributors import Distributor
from ._common import (
    Selection,
    check_path,
    check_storable,
    check_writable,
    commit,
    layout,
    loaded,
    read_boxes,
    remove,
    replace_path,
    row_blocks,
    same_path,
    temp_name,
)

__all__ = ["from_zarr", "to_zarr", "aligned_chunks"]

#: Target size of one chunk when d2o chooses the chunks.
CHUNK_BYTES = 8 << 20


def _zarr():
    try:
        import zarr
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("Zarr support needs zarr>=3: pip install 'd2o[io]'") from exc
    return zarr


def aligned_chunks(dist: Distributor, itemsize: int, chunks: Any = None) -> tuple:
    """Chunk shape whose boundaries along the distributed axis fall on the ranks' offsets.

    With ``chunks`` given, it is checked (ValueError if a chunk would straddle
    two ranks' pieces).  Otherwise the distributed axis gets the largest
    divisor of the gcd of the interior offsets that keeps a chunk near
    CHUNK_BYTES, the other axes their full length.  Local; no communication.
    """
    shape = dist.global_shape
    if not shape:
        return ()
    ax = 0 if dist.replicated else dist.axis
    n = shape[ax]
    interior = [] if dist.replicated else [o for o in dist.bounds() if 0 < o < n]
    if chunks is not None:
        chunks = (chunks,) * len(shape) if isinstance(chunks, int) else tuple(chunks)
        if len(chunks) != len(shape) or any(int(k) < 1 for k in chunks):
            raise ValueError(f"chunks {chunks} do not fit an array of shape {shape}")
        bad = [o for o in interior if o % int(chunks[ax])]
        if bad:
            raise ValueError(
                f"chunk length {chunks[ax]} along the distributed axis {ax} does not divide "
                f"the ranks' offsets {list(dist.bounds())}: two ranks would write one chunk"
            )
        return tuple(int(k) for k in chunks)
    rest = [max(1, m) for i, m in enumerate(shape) if i != ax]
    row = itemsize * math.prod(rest)
    want = max(1, CHUNK_BYTES // row)
    if interior:
        g = math.gcd(*interior)
        # the largest divisor of g not above want (divisors keep the alignment)
        best = 1
        for d in range(1, math.isqrt(g) + 1):
            if g % d == 0:
                for cand in (d, g // d):
                    if cand <= want and cand > best:
                        best = cand
        k = best
    else:
        k = min(max(1, n), want)
    out = list(max(1, m) for m in shape)
    out[ax] = k
    return tuple(out)


# -- write --------------------------------------------------------------------
@operation(kind="io")
def to_zarr(
    obj: D2O,
    path: Any,
    overwrite: bool = False,
    chunks: Any = None,
    compressors: Any = "auto",
    attrs: dict | None = None,
    **create_kwargs: Any,
) -> None:
    """Collective: write ``obj`` as a Zarr v3 array (a directory store at ``path``).

    Parameters
    ----------
    obj : distributed_data_object
    path : str or os.PathLike
        The store directory.
    overwrite : bool
        Replace an existing ``path`` (default: raise FileExistsError).
    chunks : int or tuple, optional
        Chunk shape; its length along the distributed axis must divide every
        rank's offset.  Default: see `aligned_chunks`.
    compressors, attrs, **create_kwargs
        Passed to ``zarr.create_array`` (``attrs`` as ``attributes``).

    Notes
    -----
    Communication: tiny collectives (error agreement, the temporary name,
    agreement after rank 0 created the array and after the writes).  Every
    rank writes only whole chunks of its own piece; nothing is gathered.
    """
    zarr = _zarr()
    if not isinstance(obj, D2O):
        raise TypeError(f"to_zarr expects a distributed_data_object, got {type(obj).__name__}")
    dist = obj.distributor
    c = dist.comm
    tmp, error, chunk_shape = None, None, None
    try:
        path = check_path(path)
        check_storable(obj.dtype, "Zarr")
        chunk_shape = aligned_chunks(dist, obj.itemsize, chunks)
        check_writable(path, is_dir=True)  # on every rank: each writes its own chunks
        if c.rank == 0:
            if os.path.lexists(path) and not overwrite:
                raise FileExistsError(f"{path} exists; pass overwrite=True to replace it")
            tmp = temp_name(path)
    except Exception as exc:
        error = exc
    same_path(c, error, None if error else path)
    tmp = c.bcast(tmp, 0)
    try:
        with agreed(c):
            if c.rank == 0:
                zarr.create_array(
                    store=tmp,
                    shape=dist.global_shape,
                    dtype=obj.dtype,
                    chunks=chunk_shape if dist.global_shape else "auto",
                    compressors=compressors,
                    attributes=attrs or {},
                    zarr_format=3,
                    **create_kwargs,
                )
    except BaseException:
        if c.rank == 0:
            remove(tmp)
        raise
    error = None
    try:
        _write_region(zarr.open_array(tmp, mode="r+"), obj.data, dist, chunk_shape)
    except Exception as exc:
        error = exc
    commit(c, error, lambda: remove(tmp), lambda: replace_path(tmp, path))


def _write_region(arr, data: np.ndarray, dist: Distributor, chunk_shape: tuple) -> None:
    """Write this rank's piece in blocks of whole chunks along the distributed axis."""
    c = dist.comm
    if dist.replicated and c.rank != 0:
        return
    if data.ndim == 0:
        arr[()] = data
        return
    if data.size == 0:
        return
    box = dist.region(c.rank)
    ax = 0 if dist.replicated else dist.axis
    row = data.nbytes // data.shape[ax]
    lo = box[ax][0]
    for i0, i1 in row_blocks(data.shape[ax], row, multiple=chunk_shape[ax]):
        dst = [slice(a, b) for a, b in box]
        dst[ax] = slice(lo + i0, lo + i1)
        src = [slice(None)] * data.ndim
        src[ax] = slice(i0, i1)
        arr[tuple(dst)] = data[tuple(src)]


# -- read ---------------------------------------------------------------------
@operation(kind="io")
def from_zarr(
    path_or_array: Any,
    sel: Any = None,
    distribution_strategy: str = "equal",
    axis: int = 0,
    comm: Any = None,
) -> D2O:
    """Collective: read a Zarr array (or a selection of it), each rank its own region.

    Parameters
    ----------
    path_or_array : str, os.PathLike or zarr.Array
        The array's store directory, or an open array.
    sel : tuple, optional
        A numpy basic selection: integers, slices (any step) and Ellipsis.
    distribution_strategy : {'equal', 'fftw', 'freeform', 'not'}
    axis : int
        The distributed axis of the result.
    comm : mpi4py communicator, optional

    Notes
    -----
    Communication: two tiny error agreements; each rank reads its own
    region from the store in blocks of ~BUFFER_BYTES.
    """
    zarr = _zarr()
    c = as_comm(comm)
    error, path = None, None
    try:
        if isinstance(path_or_array, zarr.Array):
            arr = path_or_array
        else:
            path = check_path(path_or_array)
            if not os.path.exists(path):
                raise FileNotFoundError(errno.ENOENT, "no such Zarr store", path)
            arr = zarr.open_array(path, mode="r")
        dtype = np.dtype(arr.dtype)
        check_storable(dtype, "a distributed array")
        selection = Selection(sel, arr.shape)
        dist = layout(distribution_strategy, selection.shape, c, axis)
    except Exception as exc:
        error = exc
    same_path(c, error, path)
    with agreed(c):
        local = read_boxes(arr.__getitem__, selection, dist, dtype)
    return loaded(local, dist, distribution_strategy)
