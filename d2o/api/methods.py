"""numpy's ndarray methods of `d2o.distributed_data_object`: reductions, the methods
d2o.numpy implements (``clip``, ``sort``, ``take``, ...), ``flat`` and the other
ndarray attributes, matrix products and shapes.

One line each: the work, and what it communicates, is in the operation each calls
(`d2o.ops.reductions`, d2o.numpy's table, `d2o.api.ndarray`, `d2o.ops.flat`,
`d2o.ops.linalg`, `d2o.ops.shape`).  A mixin of the public class.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.registry import marked, operations
from ..move import rma as _rma
from ..ops import argreduce as _argreduce
from ..ops import flat as _flat
from ..ops import linalg as _linalg
from ..ops import original as _original
from ..ops import reductions as _reductions
from ..ops import scans as _scans
from ..ops import shape as _shape_ops
from ..ops import special as _special
from . import ndarray as _ndarray
from .ndarray import numpy_impl

if TYPE_CHECKING:
    from .array import distributed_data_object

__all__ = ["NumpyMethods"]


# Methods that work on the array itself (views of its pieces, writes into it, its shape
# changed in place) are no operations: the mesh fallback must not run them on a slab
# copy; the public operations they call are recorded and checked.
@operations(properties={"local_array": {"traced": False}}, skip={"view", "getfield", "setfield", "setflags", "byteswap", "resize", "put",
                  "partition"})  # fmt: skip
class NumpyMethods:
    """numpy's ndarray methods on distributed arrays (a mixin of the public class)."""

    __slots__ = ()

    # -- reductions (d2o.ops.reductions): partials combined among the ranks that split an axis
    @marked(mesh=True, kind="reduction", calls=(_reductions.reduce, "sum"))
    def sum(self, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False,
            **kwargs: Any) -> Any:  # fmt: skip
        """Collective: numpy's ``sum`` over the global array."""
        return _reductions.reduce(self, "sum", axis, dtype, out, keepdims, **kwargs)

    @marked(mesh=True, kind="reduction", calls=(_reductions.reduce, "prod"))
    def prod(self, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False,
            **kwargs: Any) -> Any:  # fmt: skip
        """Collective: numpy's ``prod`` over the global array."""
        return _reductions.reduce(self, "prod", axis, dtype, out, keepdims, **kwargs)

    @marked(mesh=True, kind="reduction", calls=(_reductions.reduce, "nansum"))
    def nansum(self, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False,
            **kwargs: Any) -> Any:  # fmt: skip
        """Collective: numpy's ``nansum`` over the global array."""
        return _reductions.reduce(self, "nansum", axis, dtype, out, keepdims, **kwargs)

    @marked(mesh=True, kind="reduction", calls=(_reductions.reduce, "max"))
    def max(self, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False,
            **kwargs: Any) -> Any:  # fmt: skip
        """Collective: numpy's ``max`` over the global array."""
        return _reductions.reduce(self, "max", axis, dtype, out, keepdims, **kwargs)

    @marked(mesh=True, kind="reduction", calls=(_reductions.reduce, "min"))
    def min(self, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False,
            **kwargs: Any) -> Any:  # fmt: skip
        """Collective: numpy's ``min`` over the global array."""
        return _reductions.reduce(self, "min", axis, dtype, out, keepdims, **kwargs)

    @marked(mesh=True, kind="reduction", calls=(_reductions.reduce, "nanmax"))
    def nanmax(self, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False,
            **kwargs: Any) -> Any:  # fmt: skip
        """Collective: numpy's ``nanmax`` over the global array."""
        return _reductions.reduce(self, "nanmax", axis, dtype, out, keepdims, **kwargs)

    @marked(mesh=True, kind="reduction", calls=(_reductions.reduce, "nanmin"))
    def nanmin(self, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False,
            **kwargs: Any) -> Any:  # fmt: skip
        """Collective: numpy's ``nanmin`` over the global array."""
        return _reductions.reduce(self, "nanmin", axis, dtype, out, keepdims, **kwargs)

    @marked(mesh=True, kind="reduction", calls=(_reductions.reduce, "any"))
    def any(self, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False,
            **kwargs: Any) -> Any:  # fmt: skip
        """Collective: numpy's ``any`` over the global array."""
        return _reductions.reduce(self, "any", axis, dtype, out, keepdims, **kwargs)

    @marked(mesh=True, kind="reduction", calls=(_reductions.reduce, "all"))
    def all(self, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False,
            **kwargs: Any) -> Any:  # fmt: skip
        """Collective: numpy's ``all`` over the global array."""
        return _reductions.reduce(self, "all", axis, dtype, out, keepdims, **kwargs)

    amax = max
    amin = min

    @marked(mesh=True, kind="reduction")
    def mean(self, axis: Any = None, dtype: Any = None, out: Any = None,
             keepdims: bool = False) -> Any:  # fmt: skip
        """Collective: the arithmetic mean (numpy's dtypes)."""
        return _reductions.mean(self, axis, dtype, out, keepdims)

    @marked(mesh=True, kind="reduction")
    def var(self, axis: Any = None, dtype: Any = None, out: Any = None, ddof: int = 0,
            keepdims: bool = False) -> Any:  # fmt: skip
        """Collective: the variance."""
        return _reductions.var(self, axis, dtype, out, ddof, keepdims)

    @marked(mesh=True, kind="reduction")
    def std(self, axis: Any = None, dtype: Any = None, out: Any = None, ddof: int = 0,
            keepdims: bool = False) -> Any:  # fmt: skip
        """Collective: the standard deviation."""
        return _reductions.std(self, axis, dtype, out, ddof, keepdims)

    @marked(mesh=True, kind="reduction")
    def argmax(self, axis: Any = None, out: Any = None, keepdims: bool = False) -> Any:
        """Collective: numpy's ``argmax`` (flat index without ``axis``)."""
        return _argreduce.arg(self, "argmax", axis, out, keepdims)

    @marked(mesh=True, kind="reduction")
    def argmin(self, axis: Any = None, out: Any = None, keepdims: bool = False) -> Any:
        """Collective: numpy's ``argmin`` (flat index without ``axis``)."""
        return _argreduce.arg(self, "argmin", axis, out, keepdims)

    def argmax_nonflat(self, axis: Any = None) -> tuple:
        """Collective: the index tuple of the maximum; identical on every rank."""
        return _original.nonflat(self, "argmax", axis)

    def argmin_nonflat(self, axis: Any = None) -> tuple:
        """Collective: the index tuple of the minimum; identical on every rank."""
        return _original.nonflat(self, "argmin", axis)

    @marked(mesh=True, kind="axis-local")
    def cumsum(self, axis: Any = None, dtype: Any = None, out: Any = None) -> Any:
        """Collective: cumulative sum (one exclusive scan of the ranks' totals)."""
        return _scans.cumulative(self, "cumsum", axis, dtype, out)

    @marked(mesh=True, kind="axis-local")
    def cumprod(self, axis: Any = None, dtype: Any = None, out: Any = None) -> Any:
        """Collective: cumulative product (one exclusive scan of the ranks' totals)."""
        return _scans.cumulative(self, "cumprod", axis, dtype, out)

    def median(self, axis: Any = None, out: Any = None, keepdims: bool = False) -> Any:
        """Collective: numpy's ``median``, never gathering the array."""
        return _original.median(self, axis, out, keepdims=keepdims)

    # -- numpy's other ndarray methods: d2o.numpy's functions (its dispatch table) --------

    @marked(mesh=True)
    def clip(self, min: Any = None, max: Any = None, out: Any = None) -> Any:  # noqa: A002
        """numpy's ``clip`` (element-wise, local)."""
        return numpy_impl("clip")(self, min, max, out=out)

    def round(self, decimals: int = 0, out: Any = None) -> Any:
        """numpy's ``round`` (element-wise, local)."""
        return numpy_impl("round")(self, decimals=decimals, out=out)

    def sort(self, axis: int = -1, kind: Any = None, order: Any = None) -> None:
        """numpy's in-place ``sort`` along an axis (axis-local; see d2o.numpy.sort)."""
        self[...] = numpy_impl("sort")(self, axis=axis, kind=kind, order=order)

    def argsort(self, axis: int = -1, kind: Any = None, order: Any = None, *,
                stable: Any = None) -> Any:  # fmt: skip
        """numpy's ``argsort`` along an axis (axis-local; see d2o.numpy.argsort)."""
        return numpy_impl("argsort")(self, axis=axis, kind=kind, order=order, stable=stable)

    def squeeze(self, axis: Any = None) -> distributed_data_object:
        """numpy's ``squeeze``: a view."""
        return numpy_impl("squeeze")(self, axis=axis)

    def diagonal(self, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Any:
        """numpy's ``diagonal`` (a copy; local for 2-d slabs)."""
        return numpy_impl("diagonal")(self, offset=offset, axis1=axis1, axis2=axis2)

    def trace(self, offset: int = 0, axis1: int = 0, axis2: int = 1, dtype: Any = None,
              out: Any = None) -> Any:  # fmt: skip
        """numpy's ``trace``: the diagonal's sum."""
        return numpy_impl("trace")(
            self, offset=offset, axis1=axis1, axis2=axis2, dtype=dtype, out=out
        )

    def take(self, indices: Any, axis: Any = None, out: Any = None, mode: str = "raise") -> Any:
        """numpy's ``take`` (distributed fancy indexing)."""
        return numpy_impl("take")(self, indices, axis=axis, out=out, mode=mode)

    def repeat(self, repeats: Any, axis: Any = None) -> Any:
        """numpy's ``repeat`` along an axis (axis-local)."""
        return numpy_impl("repeat")(self, repeats, axis=axis)

    @marked(communicates=False)
    def fill(self, value: Any) -> None:
        """numpy's ``fill``: every rank fills its piece; local."""
        self.data[...] = value

    def item(self, *args: Any) -> Any:
        """numpy's ``item``: one element as a Python scalar (a broadcast from its owner)."""
        v = self._element("item") if not args else self[args if len(args) > 1 else args[0]]
        return np.asarray(v).item()

    def tolist(self) -> Any:
        """numpy's ``tolist``: an explicit gather of the whole array."""
        return self.get_full_data().tolist()

    def equal(self, other: Any) -> bool:
        """Collective: True when ``other`` has this shape and equal elements (original D2O)."""
        return _original.equal(self, other)

    @marked(mesh=True, kind="reduction", calls=_special.bincount)
    def bincount(self, weights: Any = None, minlength: int = 0) -> distributed_data_object:
        """Collective: numpy's ``bincount``; the result is replicated."""
        return _special.bincount(self, weights, minlength)

    def unique(self) -> distributed_data_object:
        """Collective: the sorted unique values (numpy's ``unique``), through the distributed
        sort; the result is distributed as the runs start, never gathered."""
        return _special.unique(self)

    def nonzero(self) -> tuple:
        """Collective: the indices of the nonzero elements, distributed by rank."""
        return _special.nonzero(self)

    def where(self, x: Any = None, y: Any = None) -> Any:
        """numpy's ``where`` with this array as the condition."""
        return _special.where(self, x, y)

    def vdot(self, b: Any) -> Any:
        """Collective: ``sum(conj(self.ravel()) * b.ravel())``."""
        return _special.vdot(self, b)

    def put(self, indices: Any, values: Any, mode: str = "raise") -> None:
        """numpy's ``put``: ``self.flat[indices] = values`` (see d2o.numpy.put; numpy
        indices write without moving anything)."""
        numpy_impl("put")(self, indices, values, mode=mode)

    def searchsorted(self, v: Any, side: str = "left", sorter: Any = None) -> Any:
        """numpy's ``searchsorted`` into this sorted 1-d array (see d2o.numpy.searchsorted)."""
        return numpy_impl("searchsorted")(self, v, side=side, sorter=sorter)

    def partition(self, kth: Any, axis: int = -1, kind: str = "introselect",
                  order: Any = None) -> None:  # fmt: skip
        """numpy's in-place ``partition`` (see d2o.numpy.partition; the result written back)."""
        _ndarray.partition(self, kth, axis, kind, order)

    def argpartition(self, kth: Any, axis: Any = -1, kind: str = "introselect",
                     order: Any = None) -> Any:  # fmt: skip
        """numpy's ``argpartition`` (see d2o.numpy.argpartition)."""
        return numpy_impl("argpartition")(self, kth, axis=axis, kind=kind, order=order)

    def compress(self, condition: Any, axis: Any = None, out: Any = None) -> Any:
        """numpy's ``compress``: a boolean index (see d2o.numpy.compress)."""
        return numpy_impl("compress")(condition, self, axis=axis, out=out)

    def choose(self, choices: Any, out: Any = None, mode: str = "raise") -> Any:
        """numpy's ``choose`` with this array as the index (element-wise, operands aligned)."""
        return numpy_impl("choose")(self, choices, out=out, mode=mode)

    # -- numpy's ndarray methods of d2o.ops.ndarray: flat, views, resize, exports, the piece's
    @property
    def flat(self) -> Any:
        """numpy's flat iterator over the global array in C order (``x.flat[key]``,
        ``x.flat[key] = v``; collective, see d2o.ops.ndarray.flatiter)."""
        return _flat.flatiter(self)

    @flat.setter
    def flat(self, value: Any) -> None:
        _flat.set_flat(self, value)

    def view(self, dtype: Any = None, type: Any = None) -> distributed_data_object:  # noqa: A002
        """numpy's ``view``: local, every piece reinterpreted; another item size needs the
        last axis whole on every rank (else ValueError on every rank)."""
        return _ndarray.view(self, dtype, type)

    def resize(self, *new_shape: Any, refcheck: bool = True) -> None:
        """numpy's in-place ``resize`` (collective; see d2o.ops.ndarray.resize for refcheck)."""
        _ndarray.resize(self, new_shape, refcheck)

    def tobytes(self, order: str = "C") -> bytes:
        """numpy's ``tobytes`` of the whole array on every rank: an explicit gather."""
        return _ndarray.tobytes(self, order)

    def dumps(self) -> bytes:
        """numpy's ``dumps`` (a pickled numpy array) on every rank: an explicit gather."""
        return _ndarray.dumps(self)

    def dump(self, file: Any) -> None:
        """numpy's ``dump``: rank 0 pickles the whole array (a gather to rank 0)."""
        _ndarray.dump(self, file)

    def tofile(self, fid: Any, sep: str = "", format: str = "%s") -> None:  # noqa: A002
        """numpy's ``tofile``: binary to a file name is a parallel write, else a gather to
        rank 0 (collective)."""
        _ndarray.tofile(self, fid, sep, format)

    def byteswap(self, inplace: bool = False) -> distributed_data_object:
        """numpy's ``byteswap`` of every piece; local."""
        return _ndarray.byteswap(self, inplace)

    def getfield(self, dtype: Any, offset: int = 0) -> distributed_data_object:
        """numpy's ``getfield``: a view of every piece; local."""
        return _ndarray.getfield(self, dtype, offset)

    def setfield(self, val: Any, dtype: Any, offset: int = 0) -> None:
        """numpy's ``setfield`` on every piece (a distributed ``val`` is aligned first)."""
        _ndarray.setfield(self, val, dtype, offset)

    def setflags(self, write: Any = None, align: Any = None, uic: Any = None) -> None:
        """numpy's ``setflags`` on this rank's piece, refusals agreed (one allreduce)."""
        _ndarray.setflags(self, write, align, uic)

    @property
    def strides(self) -> tuple:
        """The strides of this rank's piece (local; the global array has none)."""
        return self.data.strides

    @property
    def ctypes(self) -> Any:
        """numpy's ``ctypes`` interface of this rank's piece (local)."""
        return self.data.ctypes

    # -- matrix products (d2o.ops.linalg) ----------------------------------------------------
    @marked(mesh=True, kind="linalg")
    def __matmul__(self, other: Any) -> Any:
        return _linalg.matmul(self, other)

    @marked(mesh=True, kind="linalg")
    def __rmatmul__(self, other: Any) -> Any:
        return _linalg.matmul(other, self)

    @marked(mesh=True, kind="linalg")
    def dot(self, other: Any) -> Any:
        """Collective: numpy's ``dot`` for 1-d and 2-d operands."""
        return _linalg.dot(self, other)

    # -- one-sided access (d2o.move.rma) ------------------------------------------------------
    @marked(mesh=True, held="native", calls=(_rma.window,))
    def window(self, shared: bool = True) -> _rma.Window:
        """Collective: a window for one-sided ``get``, ``put``, ``accumulate``,
        ``fetch_and_add`` and ``compare_and_swap`` on any region by any rank (a context
        manager; its exit closes it, collectively, and writes its contents into this
        array).  Creating it copies each piece into MPI window memory (no data moves
        between ranks).  Gets and puts to ranks on the same node are numpy copies on
        their memory; ``shared=False`` makes them MPI calls too; see `d2o.move.rma`."""
        return _rma.window(self, shared)

    # -- shapes (d2o.ops.shape, d2o.ops.reductions.ravel) -----------------------------------
    @marked(mesh=True, kind="view")
    def transpose(self, *axes: Any) -> distributed_data_object:
        """The array with permuted axes (local: the layout is permuted with it)."""
        return _shape_ops.transpose(self, *axes)

    @marked(mesh=True, kind="view")
    def swapaxes(self, axis1: int, axis2: int) -> distributed_data_object:
        """The array with two axes interchanged; local."""
        return _shape_ops.swapaxes(self, axis1, axis2)

    def reshape(self, *shape: Any, order: str = "C") -> distributed_data_object:
        """numpy's ``reshape``: local when every piece stays a slab, else one exchange."""
        return _shape_ops.reshape(self, *shape, order=order)

    def ravel(self) -> distributed_data_object:
        """Collective: the flattened (C-order) array, distributed along its only axis."""
        return _reductions.ravel(self)

    def flatten(self, inplace: bool = False) -> distributed_data_object:
        """The flattened array (C order), a copy; ``inplace`` reshapes this array instead."""
        return _original.flatten(self, inplace)

    @classmethod
    def wrap(cls, local_array: Any, axis: int = 0, comm: Any = None) -> distributed_data_object:
        """Collective: one distributed array from every rank's piece, stacked along ``axis``."""
        return _shape_ops.wrap(local_array, axis=axis, comm=comm)

    @property
    def global_slice(self) -> Any:
        """Index with global indices without communicating (caput's ``global_slice``)."""
        return _shape_ops.global_slice(self)

    @property
    def local_array(self) -> np.ndarray:
        """This rank's piece itself (caput's ``local_array``; no copy)."""
        return self.data

    @marked(mesh=True, kind="local", communicates=False)
    def enumerate(self, axis: int) -> Iterator[tuple[int, int]]:
        """Pairs (local index, global index) along ``axis`` for this rank's piece; local."""
        return _shape_ops.enumerate_local(self, axis)
