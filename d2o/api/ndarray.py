"""numpy's remaining ``ndarray`` methods (``flat`` and ``put``: `d2o.ops.flat`): ``partition``,
``view``, ``resize``, the whole-array exports (``tobytes``, ``dumps``, ``dump``,
``tofile``) and the methods acting on this rank's piece alone (``byteswap``,
``getfield``, ``setfield``, ``setflags``; ``strides`` and ``ctypes`` are the piece's).

``partition`` sorts through d2o.numpy's table; ``view``/``resize`` are local unless the
item size or the shape changes a split axis; the exports gather (documented), ``tofile``
writes in parallel.
"""

from __future__ import annotations

import builtins
import operator
import os
import sys
from typing import Any

import numpy as np

from ..array.align import align as _aligned
from ..array.base import Array as D2O
from ..array.base import as_shape as _as_shape
from ..array.base import from_local as _from_local
from ..array.slabs import as_slab
from ..core import buffers as _buffers
from ..core.errors import agreed
from ..io._npy import write_raw
from ..layouts.distributors import Distributor, get_distributor, like
from ..layouts.mesh import MeshDistributor, is_mesh, moved
from ..ops.flat import local_flat

__all__: list[str] = []


_BAD_INDEX = (
    "only integers, slices (`:`), ellipsis (`...`) and integer or boolean arrays are valid indices"
)


def partition(x: D2O, kth: Any, axis: Any, kind: str, order: Any) -> None:
    """numpy's in-place ``partition``: d2o.numpy's ``partition`` (of the slab equivalent
    of a mesh layout), written back into ``x``."""
    src = as_slab(x) if is_mesh(x.distributor) else x
    x[...] = numpy_impl("partition")(src, kth, axis=operator.index(axis), kind=kind, order=order)


# -- view, resize ---------------------------------------------------------------------


def view(x: D2O, dtype: Any = None, type: Any = None) -> D2O:  # noqa: A002 - numpy's name
    """numpy's ``view``: a view of every piece (``.base`` is the array owning the memory).

    Another dtype of the same item size reinterprets each piece (local).  Another item
    size changes the last axis, so that axis must be whole on every rank: ValueError on
    every rank where it is split, and for numpy's own refusals (agreed: one allreduce).
    ndarray subclasses (``type=``) have no distributed form: TypeError."""
    if type is None and isinstance(dtype, builtins.type) and issubclass(dtype, (np.ndarray, D2O)):
        dtype, type = None, dtype
    if type is not None and not (isinstance(type, builtins.type) and issubclass(type, D2O)):
        raise TypeError(f"a distributed array has no view of type {type!r}")
    d = x.distributor
    if dtype is None:
        return x._view(x.data.view(), d)
    dt = np.dtype(dtype)
    if dt.itemsize == x.dtype.itemsize:
        return x._view(x.data.view(dt), d)
    with agreed(d.comm):
        if x.ndim == 0:
            raise ValueError(
                "Changing the dtype of a 0d array is only supported if the itemsize is unchanged"
            )
        last = x.ndim - 1
        if d.comm.size > 1 and last in d.split_axes():
            raise ValueError(
                "To change to a dtype of a different size, the last axis must not be split "
                "between the ranks of a distributed array"
            )
        piece = x.data.view(dt)
    nbytes = x.shape[-1] * x.dtype.itemsize
    shape = x.shape[:-1] + (nbytes // dt.itemsize,)
    return x._view(piece, _with_last(d, shape))


def _with_last(d: Distributor, shape: tuple) -> Distributor:
    """``d``'s layout for ``shape``, which differs from it in the last axis only (an axis
    whole on every rank).  Local."""
    if isinstance(d, MeshDistributor):
        return moved(d, shape, 0)
    if d.replicated:
        return get_distributor("not", shape, d.comm)
    if d.axis != len(shape) - 1:
        return d.slabs_like(shape, d.axis)
    return like(d, shape)


def resize(x: D2O, new_shape: tuple, refcheck: bool = True) -> None:
    """numpy's in-place ``resize``: the new array holds the old elements in C order,
    then zeros.  Collective: the new pieces fetch their elements from the owners (one
    point-to-point exchange).

    ValueError on every rank, as numpy raises it, for a view (it does not own its data)
    and, with ``refcheck``, where another array references this array's memory: d2o
    views of it or numpy views of a piece (the piece's reference count; pieces that do
    not own their memory are not checked).  The layout keeps its strategy ('freeform'
    becomes 'equal', a mesh layout its rule where the number of axes is kept)."""
    if not new_shape or new_shape == (None,):
        return  # numpy: no shape given, nothing changes
    if len(new_shape) == 1 and isinstance(new_shape[0], (tuple, list)):
        new_shape = tuple(new_shape[0])
    d = x.distributor
    with agreed(d.comm):
        shape = _as_shape(new_shape)
        if x.base is not None:
            raise ValueError("cannot resize this array: it does not own its data")
        if getattr(x, "_padded", None) is not None:
            raise ValueError("cannot resize an array with ghost cells")
        if refcheck and _referenced(x):
            raise ValueError(
                "cannot resize an array that references or is referenced\nby another array "
                "in this way.\nUse the np.resize function or refcheck=False"
            )
    target = _resized_layout(d, shape)
    new = _from_local(np.zeros(target.local_shape, dtype=x.dtype), target)
    keep = min(x.size, new.size)
    if keep:
        g = local_flat(target)
        sel = g < keep
        got = x.get_data(np.unravel_index(g[sel], x.shape), local_keys=True) if x.ndim else x[()]
        new.data[sel] = np.asarray(got.data if isinstance(got, D2O) else got).reshape(-1)
    x.data, x.distributor = new.data, new.distributor


def _referenced(x: D2O) -> bool:
    """Whether another array references ``x``'s piece: the piece's own references beyond
    ``x``'s, or those of its kept buffer (`d2o.core.buffers`) beyond the pool's and the
    piece's; a piece of other memory is not checked."""
    base = x.data.base
    if base is None:
        return sys.getrefcount(x.data) > 2
    if not _buffers.kept(base):
        return False
    # the buffer's: the pool, the piece's base, ``base`` here and getrefcount's argument
    return sys.getrefcount(x.data) > 2 or sys.getrefcount(base) > 4


def _resized_layout(d: Distributor, shape: tuple) -> Distributor:
    if isinstance(d, MeshDistributor):
        if len(shape) == d.ndim:
            return d.layout.distributor(shape)
        return get_distributor("equal", shape, d.comm, 0)
    if d.replicated:
        return get_distributor("not", shape, d.comm)
    strategy = "equal" if d.strategy == "freeform" else d.strategy
    ax = d.axis if d.axis is not None and d.axis < len(shape) else 0
    return get_distributor(strategy, shape, d.comm, ax)


# -- whole-array exports: explicit gathers, or a parallel write ---------------------------


def tobytes(x: D2O, order: Any = "C") -> bytes:
    """Collective: numpy's ``tobytes`` of the whole array, on every rank (an explicit
    gather)."""
    return x.get_full_data().tobytes(order)


def dumps(x: D2O) -> bytes:
    """Collective: the pickle of the whole array as a numpy array, on every rank (an
    explicit gather)."""
    return x.get_full_data().dumps()


def dump(x: D2O, file: Any) -> None:
    """Collective: rank 0 pickles the whole array (a numpy array) to ``file`` (a gather
    to rank 0); its errors are raised on every rank."""
    c = x.distributor.comm
    full = x.get_full_data(target_rank=0)
    with agreed(c):
        if c.rank == 0:
            full.dump(file)


def tofile(x: D2O, fid: Any, sep: str = "", format: str = "%s") -> None:  # noqa: A002
    """Collective: numpy's ``tofile``.  A file name with ``sep=''`` (raw binary, C order):
    every rank writes its own part (MPI-IO, as `d2o.io.save`), nothing gathered.  Text
    (``sep``) or an open file object: rank 0 writes the whole array (a gather to rank 0);
    errors on every rank."""
    if sep == "" and isinstance(fid, (str, os.PathLike)):
        write_raw(fid, as_slab(x) if is_mesh(x.distributor) else x)
        return
    c = x.distributor.comm
    full = x.get_full_data(target_rank=0)
    with agreed(c):
        if c.rank == 0:
            full.tofile(fid, sep=sep, format=format)


# -- the piece's own methods (local) ----------------------------------------------------


def byteswap(x: D2O, inplace: bool = False) -> D2O:
    """numpy's ``byteswap`` of every piece (local); ``inplace`` returns the array."""
    res = x.data.byteswap(inplace)
    return x if inplace else _from_local(res, x.distributor)


def getfield(x: D2O, dtype: Any, offset: int = 0) -> D2O:
    """numpy's ``getfield``: a view of every piece (local).  Subarray dtypes (which add
    axes) are not supported: NotImplementedError."""
    if np.dtype(dtype).shape:
        raise NotImplementedError("getfield with a subarray dtype on a distributed array")
    return x._view(x.data.getfield(dtype, offset), x.distributor)


def setfield(x: D2O, val: Any, dtype: Any, offset: int = 0) -> None:
    """numpy's ``setfield`` on every piece; a distributed ``val`` is aligned to this
    array's layout first (collective then), a numpy one is cut locally."""
    x.data.setfield(_aligned(val, x.distributor), dtype, offset)


def setflags(x: D2O, write: Any = None, align: Any = None, uic: Any = None) -> None:  # noqa: A002
    """numpy's ``setflags`` on every rank's piece; a refusal on any rank is raised on
    every rank (one allreduce), pieces that accepted the change keep it."""
    with agreed(x.distributor.comm):
        x.data.setflags(write=write, align=align, uic=uic)


def numpy_impl(name: str) -> Any:
    """d2o.numpy's implementation of ``name`` (its dispatch table, imported on first use)."""
    from ..numpy.table import implementation

    return implementation(name)[1]
