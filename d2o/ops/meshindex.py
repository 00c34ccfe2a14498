"""Element and fancy keys on mesh layouts, native: only the selected elements move.

Part of `d2o.ops.indexing` (see its notes).  On process meshes, block-cyclic layouts
and the given pieces of sliced or reversed views (`d2o.layouts.mesh`), without the
slab equivalent (which would move half the array or more):

* ``x[i, j]`` (an integer per axis): the owner (`d2o.layouts.owners.element_owner`)
  puts its element into the one small collective that also agrees on the key's errors
  (`d2o.ops.getting.from_owner`); a numpy scalar, identical on every rank.
* ``x[i, j] = v`` with a value that is not distributed: every rank holding the element
  (the owner and its replicas) writes it; no communication.  Key and value errors are
  numpy's, raised on every rank alike (the key is global) before anything is written.
* integer-array (and boolean numpy mask) keys, ``x[[1, 5, 9]]``, ``x[[1, 5], [2, 3]]``:
  the errors agreed (one one-byte allreduce), then the result lands 'equal' along its
  longest axis and each element travels from its owner to its place through the router
  of `d2o.move.p2p`.  A small result is planned by every rank for all ranks (the key is
  global): one ``Alltoallv`` of the values, none when nothing changes rank; a large one
  asks the owners (`fetch`: counts, then requests and values).
* ``x[[1, 5, 9]] = v``: a value that is not distributed is written by every rank into
  the elements it holds, without communication; a distributed value is aligned to the
  'equal' layout of the selection and `scatter` sends each element to its holders.

The functions return ``NotImplemented`` (or False) for the keys they leave to the
slab equivalent: distributed keys, basic keys without a view, a view whose pieces
intersect the cuts of two mesh axes, dtypes too wide for the agreement's record.
"""

from __future__ import annotations

from itertools import product
from math import prod
from typing import Any, cast

import numpy as np

from ..array.align import align
from ..array.base import Array as D2O
from ..array.base import from_local as _from_local
from ..core.errors import agree
from ..core.keys import Key, coords_for
from ..layouts.mesh import MeshDistributor
from ..layouts.owners import element_here, element_owner, held_here, lookup_ok, owner_lin
from ..move.p2p import count_matrix, fetch, route_pieces, scatter
from .getting import from_owner, packable
from .keyplan import adv_items, canonical_key, full_box, shape_of, spread
from .setting import check_mask_value, check_value

__all__ = ["mesh_get", "mesh_set"]

_INT = (int, np.integer)
_SMALL = 1 << 16  # results this small are planned by every rank for all ranks


def _mesh(obj: D2O) -> MeshDistributor:
    return cast(MeshDistributor, obj.distributor)  # the callers test `is_mesh`


def _element_key(key: Any, ndim: int) -> bool:
    """True for one integer per axis (a key that selects one element)."""
    items = key if type(key) is tuple else (key,)
    return len(items) == ndim and all(
        isinstance(it, _INT) and not isinstance(it, (bool, np.bool_)) for it in items
    )


def _fancy_key(key: Any) -> bool:
    """True for a key with an array-like item and no distributed object in it."""
    items = key if type(key) is tuple else (key,)
    if any(isinstance(it, D2O) for it in items):
        return False
    return any(isinstance(it, (list, tuple, np.ndarray)) for it in items)


def mesh_get(obj: D2O, key: Any) -> Any:
    """Collective: ``obj[key]`` for an element or fancy key on a mesh layout (see the
    module notes), ``NotImplemented`` for the other keys (decided from the key's
    structure and the layout, the same on every rank)."""
    d = _mesh(obj)
    if not lookup_ok(d):
        return NotImplemented
    if _element_key(key, d.ndim):
        if not packable(obj.dtype):  # pragma: no cover - object or very wide dtypes
            return NotImplemented
        error, owner, idx = None, 0, None
        try:
            k = canonical_key(obj, key)
            owner, idx = element_owner(d, [it[2] for it in k.src])
        except Exception as exc:  # the key's IndexError: agreed in the value's collective
            error = exc
        return from_owner(obj, owner, idx, error)
    if _fancy_key(key):
        return _take(obj, key)
    return NotImplemented


def _plan(obj: D2O, key: Any) -> Key:
    """Collective: the canonical key, its errors agreed (one one-byte allreduce)."""
    error, k = None, None
    try:
        k = canonical_key(obj, key)
    except Exception as exc:
        error = exc
    agree(obj.distributor.comm, error)
    return k


def _advs(k: Key, box: tuple | None = None) -> dict:
    """Per source axis, the key's index array broadcast to ``k.bshape`` (restricted to the
    B part of ``box``)."""
    B = k.bshape
    if box is None:
        return {it[1]: np.broadcast_to(it[2], B) for _, it in adv_items(k)}
    bsl = tuple(slice(a, b) for a, b in box[k.bpos : k.bpos + len(B)])
    return {it[1]: np.broadcast_to(it[2], B)[bsl] for _, it in adv_items(k)}


def _pick(data: np.ndarray, lin: np.ndarray) -> np.ndarray:
    """The elements at flat (C order) positions ``lin`` of a local piece."""
    if data.flags.c_contiguous:
        return data.reshape(-1).take(lin)
    return data[np.unravel_index(lin, data.shape)]


def _take(obj: D2O, key: Any) -> Any:
    d = _mesh(obj)
    comm = d.comm
    k = _plan(obj, key)
    R = k.out_shape
    if not R:  # pragma: no cover - an advanced key always gives an axis
        return NotImplemented
    dst = spread(R, comm)
    if 0 in R:
        return _from_local(np.empty(dst.local_shape, dtype=obj.dtype), dst)
    if prod(R) * len(R) <= _SMALL:
        return _from_local(_take_small(obj, k, dst).reshape(dst.local_shape), dst)
    box = dst.region(comm.rank)
    shape = shape_of(box)
    owner, lin = owner_lin(d, coords_for(k, box, _advs(k, box)), shape)
    M, _ = count_matrix(comm, owner)
    return _from_local(fetch(comm, obj.data, owner, lin, M).reshape(shape), dst)


def _take_small(obj: D2O, k: Key, dst: Any) -> np.ndarray:
    """This rank's elements of a small result: every rank knows every element's owner and
    place (the key is global), so the owners send the values straight there, one
    ``Alltoallv`` (`route_pieces` with known counts); none when nothing changes rank."""
    d = _mesh(obj)
    comm = d.comm
    me, P = comm.rank, comm.size
    R = k.out_shape
    owner, lin = owner_lin(d, coords_for(k, full_box(R), _advs(k)), R)
    t = dst.axis
    along = np.searchsorted(dst.bounds_array(), np.arange(R[t]), side="right") - 1
    dest = np.broadcast_to(along.reshape((-1,) + (1,) * (len(R) - t - 1)), R).ravel()
    mine = np.flatnonzero(dest == me)
    if np.array_equal(owner, dest):
        return _pick(obj.data, lin[mine])
    sel = np.flatnonzero(owner == me)
    order = np.argsort(dest[sel], kind="stable")
    send = _pick(obj.data, lin[sel][order])
    src = owner[mine]
    sc = np.bincount(dest[sel], minlength=P)
    (got,), _ = route_pieces([send], sc, comm, recvcounts=np.bincount(src, minlength=P))
    out = np.empty(mine.size, dtype=obj.dtype)
    out[np.argsort(src, kind="stable")] = got  # they came grouped by owner
    return out


def mesh_set(obj: D2O, key: Any, value: Any) -> bool:
    """``obj[key] = value`` for an element or fancy key on a mesh layout (see the module
    notes); False, having done nothing, for the keys left to the slab equivalent.

    Communicates nothing unless ``value`` is distributed (then one agreement and the
    router's exchange of the selected elements)."""
    d = _mesh(obj)
    if not lookup_ok(d):
        return False
    if isinstance(value, D2O):
        return _fancy_key(key) and _put_routed(obj, key, value)
    if _element_key(key, d.ndim):
        k = canonical_key(obj, key)  # a global key: numpy's IndexError on every rank alike
        cell = np.empty((), dtype=obj.dtype)
        cell[()] = value  # numpy's conversion and its errors, on every rank alike
        idx = element_here(d, [it[2] for it in k.src])
        if idx is not None:
            obj.data[idx] = cell
        return True
    if not _fancy_key(key):
        return False
    k = canonical_key(obj, key)
    val = np.asarray(value, dtype=obj.dtype)
    check_mask_value(key, val, obj.ndim)
    R = k.out_shape
    vs = check_value(val.shape, R)
    if 0 in R:
        return True
    held, pos = held_here(d, coords_for(k, full_box(R), _advs(k)), R)
    if pos[0].size:
        obj.data[pos] = np.broadcast_to(val.reshape(vs), R)[held]
    return True


def _replica_offsets(d: MeshDistributor) -> np.ndarray:
    """The rank offsets from an owner to each of its replicas (0 first)."""
    mesh = d.layout.mesh
    strides = [prod(mesh[m + 1 :]) for m in range(len(mesh))]
    axes = [range(n) if d.split[m] is None else range(1) for m, n in enumerate(mesh)]
    return np.array(
        [sum(c * s for c, s in zip(cs, strides)) for cs in product(*axes)], dtype=np.intp
    )


def _put_routed(obj: D2O, key: Any, value: D2O) -> bool:
    """``obj[key] = value`` with a distributed value: aligned to the selection's 'equal'
    layout, then `scatter` sends every element to its holders."""
    d = _mesh(obj)
    comm = d.comm
    error, k, vs = None, None, None
    try:
        k = canonical_key(obj, key)
        check_mask_value(key, value, obj.ndim)
        vs = check_value(value.shape, k.out_shape)
    except Exception as exc:
        error = exc
    agree(comm, error)
    R = k.out_shape
    if 0 in R:
        return True
    if vs != value.shape:
        return False  # surplus leading ones: the slab equivalent reshapes the value
    dst = spread(R, comm)
    part = np.broadcast_to(align(value, dst), dst.local_shape)
    box = dst.region(comm.rank)
    shape = shape_of(box)
    owner, lin = owner_lin(d, coords_for(k, box, _advs(k, box)), shape)
    vals = part.reshape(-1)
    offs = _replica_offsets(d)
    if offs.size > 1:  # every replica writes
        owner = (owner[None, :] + offs[:, None]).ravel()
        lin, vals = np.tile(lin, offs.size), np.tile(vals, offs.size)
    M, _ = count_matrix(comm, owner)
    scatter(comm, obj.data, owner, lin, vals, M)
    return True
