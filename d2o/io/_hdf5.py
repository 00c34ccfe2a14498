"""HDF5 through h5py: every rank reads its own hyperslab; parallel or turn-taking writes.

Reading needs nothing special: each rank opens the file read-only and reads
its box of the (optionally sliced) dataset in blocks of ~BUFFER_BYTES.

Writing uses h5py's 'mpio' driver when h5py was built with MPI (all ranks
write their hyperslabs collectively).  Otherwise the ranks take turns: rank 0
creates the dataset and writes its part, then passes a token to rank 1, and
so on; a one-time warning says so.  Either way the data goes to a temporary
file (or, inside an existing file, a temporary dataset) that rank 0 renames
once every rank has succeeded.
"""

from __future__ import annotations

import os
import secrets
import warnings
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
    check_readable,
    check_storable,
    check_writable,
    commit,
    layout,
    loaded,
    read_boxes,
    remove,
    row_blocks,
    same_path,
    temp_name,
)

__all__ = ["from_hdf5", "to_hdf5"]

_TOKEN_TAG = 7317
_notice_given = [False]


def _h5py():
    try:
        import h5py
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("HDF5 support needs h5py: pip install 'd2o[io]'") from exc
    return h5py


def parallel_hdf5(comm) -> bool:
    """True when writes can use h5py's 'mpio' driver on ``comm``."""
    h5py = _h5py()
    return bool(h5py.get_config().mpi) and comm.mpi is not None and comm.size > 1


# -- read ---------------------------------------------------------------------
@operation(kind="io")
def from_hdf5(
    path_or_group: Any,
    dataset: str,
    sel: Any = None,
    distribution_strategy: str = "equal",
    axis: int = 0,
    comm: Any = None,
) -> D2O:
    """Collective: read an HDF5 dataset (or a selection of it), each rank its own hyperslab.

    Parameters
    ----------
    path_or_group : str, os.PathLike, h5py.File or h5py.Group
        The file (opened read-only on every rank) or an open group.
    dataset : str
        Path of the dataset inside the file/group.
    sel : tuple, optional
        A numpy basic selection: integers, slices (any step) and Ellipsis.
    distribution_strategy : {'equal', 'fftw', 'freeform', 'not'}
        Layout of the result ('freeform' gets the 'equal' lengths).
    axis : int
        The distributed axis of the result.
    comm : mpi4py communicator, optional

    Notes
    -----
    Communication: two tiny error agreements; the data is read
    independently by every rank, never sent between ranks.
    """
    h5py = _h5py()
    c = as_comm(comm)
    f, path, error = None, None, None
    try:
        try:
            if isinstance(path_or_group, h5py.Group):
                grp = path_or_group
            else:
                path = check_path(path_or_group)
                check_readable(path)
                f = grp = h5py.File(path, "r")
            if dataset not in grp:
                raise KeyError(f"no dataset {dataset!r} in {grp.file.filename}")
            ds = grp[dataset]
            if not isinstance(ds, h5py.Dataset):
                raise TypeError(f"{dataset!r} is a {type(ds).__name__}, not a dataset")
            check_storable(ds.dtype, "a distributed array")
            selection = Selection(sel, ds.shape)
            dist = layout(distribution_strategy, selection.shape, c, axis)
        except Exception as exc:
            error = exc
        same_path(c, error, path)
        with agreed(c):
            local = read_boxes(ds.__getitem__, selection, dist, ds.dtype)
    finally:
        if f is not None:
            f.close()
    return loaded(local, dist, distribution_strategy)


# -- write --------------------------------------------------------------------
@operation(kind="io")
def to_hdf5(
    obj: D2O,
    path: Any,
    dataset: str,
    overwrite: bool = False,
    attrs: dict | None = None,
    chunks: Any = None,
    compression: Any = None,
    compression_opts: Any = None,
    **create_kwargs: Any,
) -> None:
    """Collective: write ``obj`` as ``dataset`` of the HDF5 file ``path``, no gathering.

    Parameters
    ----------
    obj : distributed_data_object
    path : str or os.PathLike
        The file; created if missing, else the dataset is added to it.
    dataset : str
        Dataset path inside the file (intermediate groups are created).
    overwrite : bool
        Replace an existing dataset (default: raise FileExistsError).
    attrs : dict, optional
        Attributes of the dataset.
    chunks, compression, compression_opts, **create_kwargs
        Passed to ``h5py.Group.create_dataset``.

    Notes
    -----
    Communication: tiny collectives (error agreement, the temporary name);
    with an MPI-enabled h5py, collective hyperslab writes through the 'mpio'
    driver; otherwise the ranks write one after the other, passing a token
    (point-to-point), so at most one process has the file open for writing.
    Nothing is gathered.  A failed write leaves neither a file nor a
    dataset behind.
    """
    h5py = _h5py()
    if not isinstance(obj, D2O):
        raise TypeError(f"to_hdf5 expects a distributed_data_object, got {type(obj).__name__}")
    dist = obj.distributor
    c = dist.comm
    plan, error = None, None
    try:
        path = check_path(path)
        if not isinstance(dataset, str) or not dataset.strip("/"):
            raise ValueError(f"dataset must be a non-empty name, got {dataset!r}")
        check_storable(obj.dtype, "HDF5")
        h5py.h5t.py_create(obj.dtype)  # TypeError: no HDF5 type for this dtype
        check_writable(path)  # on every rank: each writes its own part
        if c.rank == 0:
            plan = _plan(h5py, path, dataset, overwrite)
    except Exception as exc:
        error = exc
    same_path(c, error, None if error else path)
    mode, target, tmp_ds = c.bcast(plan, 0)
    parallel = parallel_hdf5(c)
    if not parallel and c.size > 1 and not _notice_given[0]:
        _notice_given[0] = True
        if c.rank == 0:
            warnings.warn(
                "h5py is not built with MPI: d2o writes HDF5 files by letting the ranks "
                "take turns (correct, but not parallel)",
                stacklevel=2,
            )
    create = dict(create_kwargs, chunks=chunks, compression=compression)
    if compression_opts is not None:
        create["compression_opts"] = compression_opts
    ctx = (h5py, mode, target, tmp_ds, create, attrs or {})
    error = None
    try:
        if parallel:
            _write_parallel(ctx, obj.data, dist)
        else:
            error = _write_in_turns(ctx, obj.data, dist)
    except Exception as exc:
        error = exc

    # Every rank has closed the file: rank 0 alone renames or cleans up.
    commit(
        c,
        error,
        lambda: _finish(ctx, path, dataset, ok=False),
        lambda: _finish(ctx, path, dataset, ok=True),
    )


def _plan(h5py, path: str, dataset: str, overwrite: bool) -> tuple:
    """Rank 0: where to write.  ('new', temp file, name) or ('existing', path, temp dataset)."""
    if not os.path.isdir(os.path.dirname(os.path.abspath(path))):
        raise FileNotFoundError(f"no such directory: {os.path.dirname(path)!r}")
    if os.path.lexists(path):
        if not h5py.is_hdf5(path):
            if not overwrite:
                raise FileExistsError(f"{path} exists and is not an HDF5 file")
            return ("new", temp_name(path), dataset)
        with h5py.File(path, "r") as f:
            if dataset in f and not overwrite:
                raise FileExistsError(
                    f"dataset {dataset!r} exists in {path}; pass overwrite=True to replace it"
                )
        return ("existing", path, f"{dataset.rstrip('/')}.{secrets.token_hex(6)}.d2o-tmp")
    return ("new", temp_name(path), dataset)


def _boxes(dist: Distributor, rank: int):
    """The box ``rank`` writes (None: nothing); rank 0 writes replicated arrays."""
    if dist.replicated:
        return dist.region(rank) if rank == 0 else None
    box = dist.region(rank)
    return None if any(b <= a for a, b in box) else box


def _blocks(box, itemsize: int) -> list:
    """The global sub-boxes (blocks of rows) in which a box is written."""
    if box is None:
        return []
    if not box:
        return [()]
    row = itemsize * int(np.prod([b - a for a, b in box[1:]], dtype=np.int64))
    lo = box[0][0]
    return [((lo + i0, lo + i1),) + tuple(box[1:]) for i0, i1 in row_blocks(box[0][1] - lo, row)]


def _write_block(h5py, ds, data: np.ndarray, box, block, dxpl=None) -> None:
    """Write the global sub-box ``block`` of ``box`` (held in ``data``); None: nothing."""
    fspace = ds.id.get_space()
    if block is None:
        fspace.select_none()
        mspace = h5py.h5s.create_simple((1,))
        mspace.select_none()
        ds.id.write(mspace, fspace, np.empty(1, dtype=ds.dtype), dxpl=dxpl)
        return
    if not block:  # 0-d
        arr = np.ascontiguousarray(data.reshape(()))
        ds.id.write(h5py.h5s.create(h5py.h5s.SCALAR), fspace, arr, dxpl=dxpl)
        return
    i0, i1 = (block[0][0] - box[0][0], block[0][1] - box[0][0])
    part = np.ascontiguousarray(data[i0:i1])
    fspace.select_hyperslab(tuple(a for a, _ in block), tuple(b - a for a, b in block))
    ds.id.write(h5py.h5s.create_simple(part.shape), fspace, part, dxpl=dxpl)


def _create(f, dist: Distributor, dtype, ctx) -> Any:
    h5py, mode, target, tmp_ds, create, attrs = ctx
    ds = f.create_dataset(tmp_ds, shape=dist.global_shape, dtype=dtype, **create)
    for k, v in attrs.items():
        ds.attrs[k] = v
    return ds


def _write_in_turns(ctx, data: np.ndarray, dist: Distributor) -> BaseException | None:
    """Ranks write one after the other (token passing); returns this rank's error."""
    h5py, mode, target, tmp_ds, create, attrs = ctx
    c = dist.comm
    ok = True
    if c.rank > 0:
        ok = c.recv(source=c.rank - 1, tag=_TOKEN_TAG)
    error = None
    box = _boxes(dist, c.rank)
    if ok and (c.rank == 0 or box is not None):
        try:
            fmode = "w-" if (mode == "new" and c.rank == 0) else "r+"
            with h5py.File(target, fmode) as f:
                ds = _create(f, dist, data.dtype, ctx) if c.rank == 0 else f[tmp_ds]
                if ds.shape != dist.global_shape:  # pragma: no cover - defensive
                    raise RuntimeError("dataset changed while writing")
                if box is not None:
                    for block in _blocks(box, data.itemsize):
                        _write_block(h5py, ds, data, box, block)
        except Exception as exc:
            error = exc
    if c.rank + 1 < c.size:
        c.send(ok and error is None, dest=c.rank + 1, tag=_TOKEN_TAG)
    return error


def _write_parallel(ctx, data, dist) -> None:  # pragma: no cover - needs MPI-enabled h5py
    """All ranks write their hyperslabs collectively through the 'mpio' driver."""
    h5py, mode, target, tmp_ds, create, attrs = ctx
    c = dist.comm
    fmode = "w-" if mode == "new" else "r+"
    with h5py.File(target, fmode, driver="mpio", comm=c.mpi) as f:
        ds = _create(f, dist, data.dtype, ctx)
        box = _boxes(dist, c.rank)
        mine = _blocks(box, data.itemsize)
        rounds = max(len(_blocks(_boxes(dist, r), data.itemsize)) for r in range(c.size))
        with ds.collective:
            for i in range(rounds):
                _write_block(h5py, ds, data, box, mine[i] if i < len(mine) else None, ds._dxpl)


def _finish(ctx, path: str, dataset: str, ok: bool) -> None:
    """Rank 0, all files closed: move the temporary file/dataset into place (ok) or remove it."""
    h5py, mode, target, tmp_ds, create, attrs = ctx
    if mode == "new":
        if ok:
            os.replace(target, path)
        else:
            remove(target)
        return
    with h5py.File(target, "r+") as f:
        if ok:
            if dataset in f:
                del f[dataset]
            f.move(tmp_ds, dataset)
        elif tmp_ds in f:
            del f[tmp_ds]
