"""The distributed_data_object: one global array, its pieces on the ranks of a communicator.

This module holds the object's state, construction, whole-array data access
and copies.  Arithmetic, reductions, indexing and iteration live in their
own feature modules, which attach their methods to the class from tables.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NamedTuple

import numpy as np

from .. import io as _io
from ..array.base import ArrayBase, as_shape
from ..array.base import from_local as _from_local
from ..core import config as _config
from ..core.comm import as_comm
from ..core.comm import script_comm as _script_comm
from ..core.errors import agree_gather, agree_same, agreed
from ..core.hooks import defer_from as _FROM
from ..core.hooks import depth as _depth
from ..core.librarian import d2o_librarian
from ..core.registry import cell, marked, operations, run_flagged
from ..layouts.distributors import (
    STRATEGIES,
    Distributor,
    freeform_distributor,
    get_distributor,
    normalize_axis,
)
from ..layouts.ghost import width as _halo_width
from ..layouts.mesh import Layout
from ..move import ghost as _ghost
from ..move.redistribution import gather, redistribute
from ..ops import indexing as _indexing
from ..ops import original as _original
from ..ops import ufuncs as _ufuncs
from . import dispatch as _dispatch
from . import freeform as _freeform
from .methods import NumpyMethods
from .operators import Operators

__all__ = ["distributed_data_object"]

_next_index = d2o_librarian.next_index
#: The flag cells the hottest methods test themselves (`d2o.core.registry.marked`'s
#: ``inline``): the class's facts, and the constructor's (it never meets a 0-d view).
_ON = cell(mesh=True)
_ON_INIT = cell(mesh=True, held="local")
#: ``__array_ufunc__``'s and ``copy``'s: calls the ``lazy`` option records (``defers``)
_ON_UFUNC = cell(mesh=True, held="native", defers=True)
_ON_COPY = cell(mesh=True, defers=True)
_FLOAT64 = np.dtype(np.float64)
_empty = np.empty
_FLOAT64_STR = _FLOAT64.str


@operations(
    mesh=True,
    # properties that make arrays: controller mode sends them (a trace records their calls)
    properties={"T": {"traced": False}, "mT": {"traced": False}, "real": {"traced": False},
                "imag": {"traced": False}},
    rename={"__init__": "distributed_data_object"},
    namers={
        "__array_ufunc__": lambda a: a[1].__name__ + ("" if a[2] == "__call__" else f".{a[2]}"),
        "__array_function__": lambda a: a[1].__name__,
    },
    # never communicate, or give the array API's namespace and device: not operations
    skip={"__reduce__", "__len__", "__array_namespace__", "to_device", "__dlpack__",
          "__dlpack_device__"},
)  # fmt: skip
class distributed_data_object(ArrayBase, Operators, NumpyMethods):  # noqa: N801 - the paper's public name
    """A numpy-like array whose data is spread over the ranks of an MPI communicator.

    Parameters
    ----------
    global_data : array_like or distributed_data_object, optional
        The whole array (the same on every rank); each rank keeps its part.
    global_shape : tuple of int, optional
        Shape of an uninitialised array when no data is given.
    dtype : dtype, optional
        Takes precedence over the data's dtype; default float64.
    local_data : array_like, optional
        This rank's piece, for the local-type strategy 'freeform'.
    local_shape : tuple of int, optional
        This rank's piece's shape ('freeform', uninitialised).
    distribution_strategy : {'equal', 'fftw', 'freeform', 'not'}, optional
        Default 'equal' (or 'freeform' when only local data/shape is given).
    comm : mpi4py communicator, optional
        Default ``MPI.COMM_WORLD`` (or the serial stand-in without MPI).
    copy : bool
        Copy the given data (default) or use it where possible.
    axis : int
        The distributed axis (default 0).
    skip_parsing : bool
        Skip the consistency checks that need communication (trusted input).
    hermitian : bool
        The original D2O's flag marking the array as hermitian-symmetric (kept by
        `copy`; d2o itself does not use it).

    Notes
    -----
    Construction is collective.  Precedence: ``dtype`` over the data's dtype,
    data over shapes.  ``repr``/``str`` show only the local piece and never
    communicate.
    """

    __slots__ = ()  # the state is ArrayBase's (d2o.array.base)

    @marked(held="local", inline=_ON_INIT)
    def __init__(
        self,
        global_data: Any = None,
        global_shape: Any = None,
        dtype: Any = None,
        local_data: Any = None,
        local_shape: Any = None,
        distribution_strategy: str | None = None,
        comm: Any = None,
        copy: bool = True,
        axis: int = 0,
        skip_parsing: bool = False,
        hermitian: bool = False,
        **kwargs: Any,
    ) -> None:
        if _ON_INIT[0] and not _depth[0]:  # a mode needs this call (d2o.core.registry)
            given = {k: v for k, v in locals().items() if k not in ("self", "kwargs")}
            return run_flagged(distributed_data_object.__init__, (self,), {**given, **kwargs})
        if "alias" in kwargs:  # the original D2O: read HDF5 dataset ``alias`` of file ``path``
            self._from_file(kwargs, distribution_strategy, axis, comm, dtype, hermitian)
            return
        c = as_comm(comm)
        error, meta, piece, lay = None, None, None, None
        strategy = distribution_strategy
        if isinstance(strategy, Layout):
            lay, strategy = strategy, repr(strategy)
        try:
            if kwargs:
                raise TypeError(f"unexpected keyword arguments: {', '.join(kwargs)}")
            if lay is not None:
                if local_data is not None or local_shape is not None:
                    raise ValueError("a d2o.layout takes global_data or global_shape")
                if lay.comm is not c and comm is not None:
                    raise ValueError("the layout belongs to another communicator")
                c = lay.comm
                meta = self._parse_global(global_data, global_shape, dtype, strategy)
                lay_dist = lay.distributor(meta[0])
            else:
                if strategy is None:
                    local_type = (
                        global_data is None
                        and global_shape is None
                        and (local_data is not None or local_shape is not None)
                    )
                    strategy = "freeform" if local_type else _config.default_strategy()
                if strategy not in STRATEGIES:
                    raise ValueError(
                        f"unknown distribution_strategy {strategy!r}; "
                        f"choose one of {', '.join(STRATEGIES)} or a d2o.layout(...)"
                    )
                if strategy != "freeform":
                    meta = self._parse_global(global_data, global_shape, dtype, strategy)
                    meta = meta[:3] + (_axis_or_zero(axis, len(meta[0])),)
                elif isinstance(global_data, distributed_data_object):
                    # the original D2O: a d2o's own pieces win over local_data/local_shape
                    piece, meta = _freeform.from_distributed(global_data, dtype, axis, copy)
                else:
                    piece, meta = _freeform.from_local(
                        local_data, local_shape, global_data, dtype, copy
                    )
        except Exception as exc:  # agreed below, together with the metadata check
            error = exc
        # one 96-byte record: the errors, a digest of the metadata (gathered: freeform, a mismatch)
        metas = None
        if c.size > 1 and (not skip_parsing or strategy == "freeform"):
            same, free = agree_same(c, error, meta, strategy == "freeform")
            metas = agree_gather(c, None, meta) if free or not same else None
        elif error is not None:
            raise error
        if piece is not None:
            dist = freeform_distributor(c, piece, meta, axis, metas)
            self.data = piece
        else:
            if metas is not None and any(m != meta for m in metas):
                raise ValueError(
                    "global_data/global_shape, dtype, strategy and axis must be the same on "
                    f"every rank; got (shape, dtype, strategy, axis) {metas}"
                )
            shape, dt, _, ax = meta
            dist = lay_dist if lay is not None else get_distributor(strategy, shape, c, ax)
            self.data = self._local_piece(global_data, shape, np.dtype(dt), dist, copy)
        self.distributor = dist
        self.hermitian = bool(hermitian)
        self.base = None
        self.index = _next_index()
        if lay is not None and lay.halo:
            _ghost.padded(self)  # the ghost cells from the start: local_data stays put

    # -- construction helpers ------------------------------------------------
    @marked(mesh=False, kind="io")
    def save(
        self,
        alias: Any,
        path: Any = None,
        overwrite: bool | None = None,
        overwriting: bool | None = None,
        overwriteQ: bool | None = None,  # noqa: N803 - the original D2O's name
    ) -> None:
        """Collective: write to the ``.npy`` file ``alias`` (see `d2o.save`; existing files
        are kept unless ``overwrite``), or, as the original D2O did, as HDF5 dataset
        ``alias`` of the file ``path`` (replaced unless ``overwriteQ=False``, then an
        existing dataset is a ValueError)."""
        flags = [f for f in (overwrite, overwriting, overwriteQ) if f is not None]
        if path is None:
            return _io.save(alias, self, overwrite=any(flags))
        try:
            return _io.to_hdf5(self, path, alias, overwrite=all(flags))
        except FileExistsError as exc:  # agreed on every rank; the original API's type
            raise ValueError(str(exc)) from None

    @marked(mesh=False, kind="io")
    def to_hdf5(self, path: Any, dataset: str, **kwargs: Any) -> None:
        """Collective: write as an HDF5 dataset (see `d2o.to_hdf5`)."""
        return _io.to_hdf5(self, path, dataset, **kwargs)

    @marked(mesh=False, kind="io")
    def to_zarr(self, path: Any, **kwargs: Any) -> None:
        """Collective: write as a Zarr v3 array (see `d2o.to_zarr`)."""
        return _io.to_zarr(self, path, **kwargs)

    def _from_file(self, kwargs, strategy, axis, comm, dtype, hermitian) -> None:
        alias = kwargs.pop("alias")
        path = kwargs.pop("path", None)
        if kwargs:
            raise TypeError(f"unexpected keyword arguments: {', '.join(kwargs)}")
        src = _io.from_hdf5(
            alias if path is None else path,
            alias,
            distribution_strategy=strategy or _config.default_strategy(),
            axis=axis,
            comm=comm,
        )
        self.data = src.data if dtype is None else src.data.astype(dtype)
        self.distributor = src.distributor
        self.hermitian = bool(hermitian)
        self.base = None
        self.index = _next_index()

    @staticmethod
    def _parse_global(global_data, global_shape, dtype, strategy) -> tuple:
        if global_data is not None:
            if isinstance(global_data, distributed_data_object):
                shape, dt = global_data.shape, global_data.dtype
            else:
                arr = np.asarray(global_data)
                shape, dt = arr.shape, arr.dtype
                if arr.ndim == 0 and global_shape is not None:
                    shape = as_shape(global_shape)  # a scalar fills the whole array
        elif global_shape is not None:
            shape, dt = as_shape(global_shape), _FLOAT64
        else:
            raise ValueError("give global_data or global_shape (or local_data for 'freeform')")
        if dtype is not None:
            dt = np.dtype(dtype)
        code = _FLOAT64_STR if dt is _FLOAT64 else dt.str if dt.fields is None else dt.descr
        return (tuple(shape), code, strategy, None)

    @staticmethod
    def _local_piece(global_data, shape, dtype, dist, copy) -> np.ndarray:
        if global_data is None:
            return np.empty(dist.local_shape, dtype=dtype)
        if isinstance(global_data, distributed_data_object):
            src = global_data
            piece = redistribute(
                src.data, src.distributor, _retarget(src.distributor, dist), explicit=True
            )
            return piece.astype(dtype, copy=copy or piece is src.data)
        arr = np.asarray(global_data)
        if arr.ndim == 0 and shape:
            return np.full(dist.local_shape, arr, dtype=dtype)
        piece = arr[dist.local_slice] if arr.ndim else arr
        return np.array(piece, dtype=dtype, copy=True if copy else None)

    # -- attributes ----------------------------------------------------------
    @property
    def shape(self) -> tuple:
        """The global shape."""
        return self.distributor.global_shape

    @property
    def global_shape(self) -> tuple:
        """The global shape (caput's name)."""
        return self.distributor.global_shape

    @property
    def dtype(self) -> np.dtype:
        return self.data.dtype

    @property
    def ndim(self) -> int:
        return self.distributor.ndim

    @property
    def size(self) -> int:
        """The number of elements of the global array."""
        return self.distributor.size

    @property
    def local_shape(self) -> tuple:
        """The shape of this rank's piece."""
        return self.data.shape

    @property
    def local_offset(self) -> tuple:
        """Global index of this rank's first element, per dimension (caput's name)."""
        d = self.distributor
        return tuple(a for a, _ in d.region(d.comm.rank))

    @property
    def distribution_strategy(self) -> str:
        """The paper's strategy name ('not', 'equal', 'fftw', 'freeform'); 'block' for
        layouts on multi-axis process meshes (see `layout`)."""
        return self.distributor.strategy

    @property
    def layout(self) -> Any:
        """The full layout: mesh, split axes, partitions and global shape (local)."""
        return self.distributor

    @property
    def axis(self) -> int | None:
        """The distributed axis; None when every rank holds the whole array."""
        return self.distributor.axis

    @property
    def comm(self) -> Any:
        """The communicator (mpi4py's, or the serial stand-in; in controller mode, for the
        script on rank 0, a stand-in whose calls refuse)."""
        if _script_comm[0] is not None and not _depth[0]:
            return _script_comm[0]
        c = self.distributor.comm
        return c if c.mpi is None else c.mpi

    @property
    def nbytes(self) -> int:
        return self.size * self.data.dtype.itemsize

    @property
    def itemsize(self) -> int:
        return self.data.dtype.itemsize

    def __len__(self) -> int:
        if not self.distributor.ndim:
            raise TypeError("len() of unsized object")
        return self.distributor.global_shape[0]

    @marked(kind="local", communicates=False)
    def __repr__(self) -> str:
        return "<distributed_data_object>\n" + repr(self.data)

    __str__ = __repr__

    @marked(mesh=False)
    def __bool__(self) -> bool:
        if self.size != 1:
            raise ValueError(
                "The truth value of an array with more than one element is ambiguous. "
                "Use a.any() or a.all()"
            )
        return bool(self.get_full_data().reshape(()))

    @property
    def device(self) -> str:
        """The array API's device: "cpu" (pieces are numpy arrays in host memory)."""
        return "cpu"

    def to_device(self, device: Any, /, *, stream: Any = None) -> distributed_data_object:
        """The array itself (one device); ValueError for another."""
        if device != "cpu":
            raise ValueError(f"unsupported device {device!r}")
        return self

    @property
    def mT(self) -> distributed_data_object:  # noqa: N802 - the array API's name
        """The matrix transpose of the last two axes (a view)."""
        return self.swapaxes(-1, -2)

    def __dlpack__(self, *, stream: Any = None, max_version: Any = None, dl_device: Any = None,
                   copy: Any = None) -> Any:  # fmt: skip
        """DLPack export of an array held whole by this rank (replicated, or one process);
        BufferError for a distributed array (use ``get_local_data()`` for the piece)."""
        if not (self.distributor.replicated or self.distributor.comm.size == 1):
            raise BufferError("a distributed array has no single buffer; export its piece")
        kw = {} if max_version is None else {"max_version": max_version}
        return self.data.__dlpack__(stream=stream, **kw)

    def __dlpack_device__(self) -> tuple:
        """(kDLCPU, 0): pieces live in host memory."""
        return (1, 0)

    def __array_namespace__(self, *, api_version: str | None = None) -> Any:
        """``d2o.numpy``, the namespace of the array API standard for these arrays."""
        import d2o.numpy

        return d2o.numpy

    @marked(mesh=False)
    def __float__(self) -> float:
        return float(self._element("float"))

    @marked(mesh=False)
    def __int__(self) -> int:
        return int(self._element("int"))

    @marked(mesh=False)
    def __complex__(self) -> complex:
        return complex(self._element("complex"))

    def __index__(self) -> int:
        if self.ndim or self.dtype.kind not in "iub":
            raise TypeError("only integer scalar arrays can be converted to a scalar index")
        return int(self._element("int"))

    def _element(self, what: str) -> Any:
        """The one element of a size-1 array (collective: a broadcast of one element)."""
        if self.size != 1:
            raise TypeError(f"only length-1 arrays can be converted to Python scalars ({what})")
        return self.get_full_data().reshape(())[()]

    def __copy__(self) -> distributed_data_object:
        return self.copy()

    def __deepcopy__(self, memo: Any) -> distributed_data_object:
        return self.copy()

    def __reduce__(self):
        raise TypeError("distributed_data_object cannot be pickled; use get_full_data()")

    # -- local data ----------------------------------------------------------
    @marked(held="local", traced=False, kind="local", communicates=False)
    def get_local_data(self, copy: bool = True, halos: bool = False) -> np.ndarray:
        """This rank's piece (a copy, or the array itself with ``copy=False``). Local.

        ``halos=True``: the piece inside its ghost cells, on a layout made with
        ``d2o.layout(..., halo=w)`` (``w`` more cells on both sides of every split axis;
        see ``update_halos``)."""
        if halos:
            buf = _ghost.padded_or_raise(self)
            return buf.copy() if copy else buf
        return self.data.copy() if copy else self.data

    @marked(held="local", traced=False, kind="local", communicates=False)
    def set_local_data(self, data: Any, copy: bool = False) -> None:
        """Replace this rank's piece; it must broadcast to ``local_shape``. Local.

        On a view, and on an array with ghost cells, the values are written into the
        piece (so they reach the base, or stay inside the ghost cells)."""
        arr = np.asarray(data)
        if self.base is not None or getattr(self, "_padded", None) is not None:
            self.data[...] = arr
            return
        if arr.shape != self.data.shape:
            arr = np.broadcast_to(arr, self.data.shape)
            copy = True
        self.data = np.array(arr, dtype=self.data.dtype, copy=True if copy else None)

    @property
    def halo(self) -> int:
        """The width of the ghost cells around each rank's piece (0: none); see
        ``update_halos``."""
        return _halo_width(self.distributor)

    def update_halos(self) -> None:
        """Collective: fill the ghost cells around this rank's piece with its neighbours'
        boundary cells (a layout made with ``d2o.layout(..., halo=w)``).

        Read them with ``get_local_data(copy=False, halos=True)``.  Each rank sends the
        cells of its piece that lie in a neighbour's ghost layers to that neighbour,
        point to point (on meshes the diagonal neighbours too, for the corners).  Cells
        beyond the array's edge are left as they are."""
        _ghost.update_halos(self)

    # -- whole-array data ----------------------------------------------------
    def get_full_data(self, target_rank: str | int = "all") -> np.ndarray | None:
        """Collective: the whole array on every rank, or on ``target_rank`` only (None elsewhere).

        Communicates the whole array: an explicit gather.
        """
        c = self.distributor.comm
        with agreed(c):
            if target_rank != "all" and not (
                isinstance(target_rank, (int, np.integer)) and 0 <= target_rank < c.size
            ):
                raise ValueError(
                    f"target_rank must be 'all' or a rank in [0, {c.size}), got {target_rank!r}"
                )
        return gather(self.data, self.distributor, None if target_rank == "all" else target_rank)

    def gather(self, rank: int = 0) -> np.ndarray | None:
        """Collective: the whole array on ``rank``, None elsewhere (caput's name)."""
        return self.get_full_data(target_rank=rank)

    def allgather(self) -> np.ndarray:
        """Collective: the whole array on every rank (caput's name)."""
        return self.get_full_data()

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        """Collective: gathers the whole array onto every rank (for numpy functions)."""
        full = self.get_full_data()
        return full if dtype is None else full.astype(dtype, copy=False)

    @marked(mesh=False)
    def set_full_data(self, data: Any) -> None:
        """Replace the whole array by ``data`` (the same on every rank); each rank keeps its part.

        Local: no communication.  ``data`` must broadcast to the global shape.  On a view,
        and on an array with ghost cells, the values are written into the piece (as
        `set_local_data` does).
        """
        arr = np.asarray(data)
        if arr.shape != self.shape:
            arr = np.broadcast_to(arr, self.shape)
        if self.base is not None or getattr(self, "_padded", None) is not None:
            self.data[...] = arr[self.distributor.local_slice]
            return
        self.data = np.array(arr[self.distributor.local_slice], dtype=self.dtype, copy=True)

    # -- copies --------------------------------------------------------------
    @marked(inline=_ON_COPY, defers=True)
    def copy(
        self, dtype: Any = None, distribution_strategy: str | None = None, axis: int | None = None
    ) -> distributed_data_object:
        """A copy, optionally with another dtype, strategy or distributed axis.

        Local when the layout is unchanged; otherwise one all-to-all exchange
        of exactly the data that must move.  With the ``lazy`` option a plain copy
        of a large array is deferred (`d2o.ops.deferred.copied`).
        """  # (a mode needs this call, d2o.core.registry; ``lazy`` alone: a large one)
        if _ON_COPY[0] and not _depth[0] and (_ON[0] or self.distributor.size >= _FROM[0]):
            return run_flagged(distributed_data_object.copy, (self,), dict(
                dtype=dtype, distribution_strategy=distribution_strategy, axis=axis))  # fmt: skip
        if dtype is None and distribution_strategy is None and axis is None and not self.hermitian:
            return _from_local(self.data.copy(), self.distributor)  # (the commonest case)
        if distribution_strategy is None and axis is None:
            data = self.data.copy() if dtype is None else self.data.astype(dtype)
            out = _from_local(data, self.distributor)
        else:
            target = self._target(distribution_strategy, axis)
            data = redistribute(self.data, self.distributor, target, copy=True, explicit=True)
            if dtype is not None:
                data = data.astype(dtype, copy=False)
            out = _from_local(data, target)
        if self.hermitian:
            out.hermitian = True
        return out

    def _target(self, distribution_strategy: str | None, axis: int | None) -> Distributor:
        d = self.distributor
        if isinstance(distribution_strategy, Layout):  # global arguments: fail on every rank
            if distribution_strategy.comm is not d.comm:
                raise ValueError("the layout belongs to another communicator")
            return distribution_strategy.distributor(d.global_shape)
        strategy = d.strategy if distribution_strategy is None else distribution_strategy
        if strategy == "block":  # a mesh layout's label: keep the layout
            return d
        ax = (d.axis or 0) if axis is None else axis
        with agreed(d.comm):
            ax = _axis_or_zero(ax, d.ndim)
            if strategy == "freeform" and not d.replicated and ax == d.axis:
                # the same pieces, labelled 'freeform'
                return d.slabs_like(d.global_shape, ax, "freeform")
            return get_distributor(strategy, d.global_shape, d.comm, ax)

    @marked(mesh=False)
    def redistribute(self, axis: int) -> distributed_data_object:
        """A copy distributed along ``axis`` (caput's name); a global transpose if it changes.

        'equal' and 'fftw' keep their strategy; replicated and 'freeform'
        arrays (unless already along ``axis``) become 'equal'.
        """
        d = self.distributor
        if d.strategy == "freeform" and isinstance(axis, (int, np.integer)):
            if -d.ndim <= axis < d.ndim and axis % d.ndim == d.axis:
                return self.copy()
        keep = d.strategy in ("equal", "fftw")
        return self.copy(distribution_strategy=None if keep else "equal", axis=axis)

    @marked(inline=_ON)
    def copy_empty(
        self,
        global_shape: Any = None,
        local_shape: Any = None,
        dtype: Any = None,
        distribution_strategy: str | None = None,
        **kwargs: Any,
    ) -> distributed_data_object:
        """An uninitialised array like this one, optionally of other shape/dtype/strategy.

        No communication when only the dtype changes.
        """
        if _ON[0] and not _depth[0]:  # a mode needs this call (d2o.core.registry)
            given = {k: v for k, v in locals().items() if k not in ("self", "kwargs")}
            return run_flagged(distributed_data_object.copy_empty, (self,), {**given, **kwargs})
        data = self.data
        if (
            global_shape is None
            and local_shape is None
            and distribution_strategy is None
            and not kwargs
        ):  # (the dtype by position, no local names: fewer instructions)
            return _from_local(
                _empty(data.shape, data.dtype if dtype is None else dtype), self.distributor
            )
        dt = data.dtype if dtype is None else dtype
        d = self.distributor
        strategy = d.strategy if distribution_strategy is None else distribution_strategy
        if strategy == "block":  # a mesh layout's label: the same layout for the new shape
            strategy = d.layout
        if strategy == "freeform" and local_shape is None and global_shape is None:
            if not d.replicated:  # keep the pieces
                target = d.slabs_like(d.global_shape, d.axis, "freeform")
                return _from_local(np.empty(d.local_shape, dtype=dt), target)
        kwargs.setdefault("comm", d.comm)
        if d.axis is not None:
            kwargs.setdefault("axis", d.axis)
        if strategy == "freeform" and local_shape is None:
            return self._freeform_empty(global_shape, dt, kwargs)
        if strategy == "freeform":
            return distributed_data_object(
                local_shape=local_shape, dtype=dt, distribution_strategy="freeform", **kwargs
            )
        return distributed_data_object(
            global_shape=self.shape if global_shape is None else global_shape,
            dtype=dt,
            distribution_strategy=strategy,
            **kwargs,
        )

    def _freeform_empty(self, global_shape: Any, dtype: Any, kwargs: dict) -> Any:
        """`copy_empty` to 'freeform' from a global shape: equal lengths (see
        `d2o.api.freeform`); no communication but the agreement on errors."""
        kw = dict(kwargs)
        c, axis, hermitian = kw.pop("comm"), kw.pop("axis", 0), kw.pop("hermitian", False)
        with agreed(self.distributor.comm):
            if kw:
                raise TypeError(f"unexpected keyword arguments: {', '.join(kw)}")
            shape = self.shape if global_shape is None else global_shape
            out = _freeform.empty(shape, dtype, as_comm(c), axis)
        out.hermitian = bool(hermitian)
        return out

    @marked(inline=_ON)
    def astype(self, dtype: Any, copy: bool = True) -> distributed_data_object:
        """The array cast to ``dtype``; local."""
        if _ON[0] and not _depth[0]:  # a mode needs this call (d2o.core.registry)
            return run_flagged(distributed_data_object.astype, (self, dtype), {"copy": copy})
        src = self.data
        data = src.astype(dtype, copy=copy)
        if data is src:
            return self
        return _from_local(data, self.distributor)

    @property
    def flags(self) -> Any:
        """numpy-style flags of this array: ``owndata`` (False for a view) and
        ``writeable`` (of this rank's piece); local."""
        return _Flags(self.base is None, bool(self.data.flags.writeable))

    @property
    def real(self) -> distributed_data_object:
        """The real part; a view (writes change this array), as in numpy."""
        return self._view(self.data.real, self.distributor)

    @real.setter
    def real(self, value: Any) -> None:
        self.real[...] = value

    @property
    def imag(self) -> distributed_data_object:
        """The imaginary part; a view for complex arrays, as in numpy."""
        if not np.iscomplexobj(self.data):  # numpy: a new read-only array of zeros
            return _from_local(self.data.imag, self.distributor)
        return self._view(self.data.imag, self.distributor)

    @imag.setter
    def imag(self, value: Any) -> None:
        if not np.iscomplexobj(self.data):
            raise TypeError("array does not have imaginary part to set")
        self.imag[...] = value

    @property
    def T(self) -> distributed_data_object:  # noqa: N802
        return self.transpose()

    # == The API implemented by the feature modules: one line each, so the whole public
    # == face of the class reads here.  The modules are bound at the end of this file.

    __hash__ = None  # type: ignore[assignment]  # mutable, like ndarray

    #: numpy ufuncs on distributed operands (d2o.ops.ufuncs); local on one layout.  The
    #: function tests its flag itself (the runtime's test and the fast path in one call).
    __array_ufunc__ = marked(held="native", defers=True, inline=_ON_UFUNC)(_ufuncs.ufunc_method)

    @marked(held="local")
    def __array_function__(self, func: Any, types: tuple, args: tuple, kwargs: dict) -> Any:
        """numpy functions d2o implements (d2o.ops.special.HANDLED); TypeError for others."""
        return _dispatch.array_function(self, func, types, args, kwargs)

    def conjugate(self) -> distributed_data_object:
        """The complex conjugate; local."""
        return _ufuncs.conjugate(self)

    conj = conjugate

    def isnan(self) -> distributed_data_object:
        """Element-wise ``np.isnan``; local."""
        return _ufuncs.unary(self, np.isnan)

    def isinf(self) -> distributed_data_object:
        """Element-wise ``np.isinf``; local."""
        return _ufuncs.unary(self, np.isinf)

    def isfinite(self) -> distributed_data_object:
        """Element-wise ``np.isfinite``; local."""
        return _ufuncs.unary(self, np.isfinite)

    def isreal(self) -> distributed_data_object:
        """Element-wise ``np.isreal``; local."""
        return _original.isreal(self)

    def iscomplex(self) -> distributed_data_object:
        """Element-wise ``np.iscomplex``; local."""
        return _original.iscomplex(self)

    def nan_to_num(
        self, copy: bool = True, nan: float = 0.0, posinf: Any = None, neginf: Any = None
    ) -> distributed_data_object:
        """``np.nan_to_num`` of every element; local (``copy=False`` works in place)."""
        return _original.nan_to_num(self, copy, nan, posinf, neginf)

    def apply_scalar_function(
        self, function: Any, inplace: bool = False, dtype: Any = None
    ) -> distributed_data_object:
        """``function`` applied to every element; local."""
        return _original.apply_scalar_function(self, function, inplace, dtype)

    def apply_generator(self, generator: Any, copy: bool = False) -> None:
        """Fill this rank's piece with ``generator(local_shape)``; local."""
        return _original.apply_generator(self, generator, copy)

    # -- indexing (d2o.ops.indexing): see its module notes for what communicates ------------
    @marked(kind="indexing", calls=_indexing.getitem)
    def __getitem__(self, key: Any) -> Any:
        return _indexing.getitem(self, key)

    @marked(kind="indexing", calls=_indexing.setitem)
    def __setitem__(self, key: Any, value: Any) -> None:
        _indexing.setitem(self, key, value)

    @marked(mesh=False, kind="indexing")
    def get_data(self, key: Any, local_keys: bool = False, copy: bool = True, **kwargs: Any) -> Any:
        """Collective: ``self[key]``, or with ``local_keys`` each rank's own key (paper's API)."""
        return _indexing.get_data(self, key, local_keys=local_keys, copy=copy, **kwargs)

    @marked(mesh=False, kind="indexing")
    def set_data(
        self, data: Any, to_key: Any, from_key: Any = None, local_keys: bool = False,
        **kwargs: Any,
    ) -> None:  # fmt: skip
        """Collective: ``self[to_key] = data[from_key]``, or per-rank keys (paper's API)."""
        _indexing.set_data(self, data, to_key, from_key, local_keys, **kwargs)

    # -- iteration -----------------------------------------------------------
    @marked(mesh=False, calls=_original.iterate)
    def __iter__(self) -> Iterator:
        """Collective: iterate over the first axis, moving data in large chunks (all ranks
        consume the iterator in lockstep; d2o.ops.original.iterate)."""
        return _original.iterate(self)


class _Flags(NamedTuple):
    owndata: bool
    writeable: bool


def _axis_or_zero(axis: int, ndim: int) -> int:
    if ndim == 0:
        return 0
    if type(axis) is int and 0 <= axis < ndim:  # the common case, without the checks
        return axis
    return normalize_axis(axis, ndim)


def _retarget(src: Distributor, dst: Distributor) -> Distributor:
    """``dst`` as a layout of ``src``'s comm (they must match)."""
    if src.comm is not dst.comm:
        raise ValueError("the data lives on another communicator")
    return dst
