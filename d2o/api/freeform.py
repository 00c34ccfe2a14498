"""How the constructor builds a 'freeform' array: from local information only, as the
original D2O's class (the paper's local-type strategy).

Every rank gives its piece (``local_data``) or the shape of its piece (``local_shape``;
with a scalar ``local_data`` the piece is filled with it), or a distributed
``global_data`` whose local pieces are taken as they are (it wins over ``local_data`` and
``local_shape``).  A numpy ``global_data`` or a ``global_shape`` alone is a ValueError.
The copy methods (``copy``/``copy_empty`` with ``distribution_strategy='freeform'``) are
global-type and give equal lengths (`empty`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..array.base import ArrayBase, as_shape
from ..array.base import from_local as _from_local
from ..core.errors import check_gather
from ..layouts.distributors import SlabDistributor, get_distributor, normalize_axis
from ..move.redistribution import describe, redistribute

_NO_DIMS = "'freeform' needs local data with at least one dimension"


def from_distributed(src: Any, dtype: Any, axis: Any, copy: bool) -> tuple:
    """(piece, metadata) from a distributed ``global_data``: the source's local piece (a
    replicated source's whole array, so the result holds it once per rank; a slab split
    along ``axis`` its slab: no communication); other layouts are redistributed to equal
    lengths along ``axis`` (collective)."""
    d = src.distributor
    if not d.ndim:
        raise ValueError(_NO_DIMS)
    ax = normalize_axis(axis, d.ndim)
    if d.replicated or (isinstance(d, SlabDistributor) and d.axis == ax):
        piece = src.data
    else:
        dst = get_distributor("freeform", d.global_shape, d.comm, ax)
        piece = redistribute(src.data, d, dst, explicit=True)
    dt = src.dtype if dtype is None else np.dtype(dtype)
    piece = piece.astype(dt, copy=copy or piece is not src.data)
    return piece, (piece.shape, piece.dtype.str, "freeform", None)


def from_local(local_data: Any, local_shape: Any, global_data: Any, dtype: Any,
               copy: bool) -> tuple:  # fmt: skip
    """(piece, metadata) from this rank's ``local_data`` or ``local_shape``; a distributed
    ``local_data`` is gathered whole on every rank (collective)."""
    if local_data is None and (global_data is not None or local_shape is None):
        raise ValueError(
            "'freeform' is a local-type strategy: give local_data or local_shape "
            "(or a distributed global_data)"
        )
    if local_data is not None and local_shape is not None and np.ndim(local_data) == 0:
        dt = np.asarray(local_data).dtype if dtype is None else np.dtype(dtype)
        piece = np.full(as_shape(local_shape), local_data, dtype=dt)  # a scalar fills it
    elif isinstance(local_data, ArrayBase):
        ld = local_data.distributor
        if not ld.replicated:
            check_gather(ld.comm, describe(ld))
        whole: Any = local_data  # (a distributed_data_object: the api layer's class)
        piece = np.array(whole.get_full_data(), dtype=dtype, copy=True if copy else None)
    elif local_data is not None:
        piece = np.array(np.asarray(local_data), dtype=dtype, copy=True if copy else None)
    else:
        piece = np.empty(as_shape(local_shape), dtype=np.float64 if dtype is None else dtype)
    if piece.ndim == 0:
        raise ValueError(_NO_DIMS)
    return piece, (piece.shape, piece.dtype.str, "freeform", None)


def empty(shape: Any, dtype: Any, comm: Any, axis: Any) -> Any:
    """An uninitialised 'freeform' array of global ``shape`` with equal lengths along
    ``axis`` (the copy methods' target); no communication."""
    shape = as_shape(shape)
    ax = normalize_axis(axis, len(shape)) if shape else 0
    dist = get_distributor("freeform", shape, comm, ax)
    return _from_local(np.empty(dist.local_shape, np.dtype(dtype)), dist)
