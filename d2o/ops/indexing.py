"""Getting and setting data: ``obj[key]``, ``obj[key] = value``, get_data, set_data.

Every key numpy accepts works on any layout; numpy is the oracle for results
and errors.  Keys are canonicalised once (`d2o.core.keys`); then the path depends
on how the key treats the distributed axis ``ax``:

* a slice on ``ax`` (advanced indices elsewhere allowed): each rank indexes
  its own piece, nothing moves.  The result is a slab array whose pieces are
  what each rank held ('freeform'; the original strategy when ``ax`` is taken
  whole).  A negative step reverses the ranks' order, so each rank's piece
  goes to the mirror rank in one exchange.
* an integer on ``ax`` (basic key): the owner holds the whole result.  One
  element: broadcast, a numpy scalar identical on every rank.  Otherwise the
  result is spread 'equal' along its longest axis, sent straight from the
  owner (never replicated, never gathered).
* advanced indices on ``ax``: when the owners of the selected rows are in
  rank order (a sorted index, a mask over leading axes) every rank keeps what
  it owns ('freeform', no communication).  Otherwise the result is 'equal'
  along its longest axis and each rank fetches its elements from their owners
  (`d2o.move.p2p`: request counts, then two Alltoallv sized by the data moved).
* distributed keys (integer objects, boolean masks): the result follows the
  key's layout; every rank fetches the elements of its part of the key.

Setting uses the same selections: numpy values are cut locally (a global
numpy key with a numpy value writes without any communication), distributed
values are moved straight to the owners.  Validation (bounds, shapes, casts)
happens before any write; errors that depend on one rank's data are agreed.

``local_keys=True``: each rank passes its own key (and value); results land
on the asking rank as a 'freeform' array (numpy scalars when every rank asked
for one element).  A rank's local instance of a distributed object used as a
key or value is reassembled on that rank through ``d2o_librarian``.

Results are new arrays (copies), never views.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..array.align import align, align_parts
from ..array.base import Array as D2O
from ..array.slabs import on_slabs as _on_slabs
from ..core.errors import (
    agreed,
)
from ..core.keys import (
    emit,
)
from ..layouts.mesh import MeshDistributor, explicit, locate, slice_runs
from .getting import from_owner, get_items, held_view, packable
from .keyplan import canonical_key
from .meshindex import mesh_get, mesh_set
from .setting import check_value, get_local, set_items, set_local, write_parts

__all__: list[str] = []

_NUMERIC = (int, float, complex, bool, np.number, np.bool_)


# -- public methods -------------------------------------------------------------


def get_data(self: D2O, key: Any, local_keys: bool = False, copy: bool = True, **kwargs: Any):
    """Collective: ``self[key]``; with ``local_keys`` each rank's own key.

    The result stays distributed (see the module doc for where it lives); a key
    selecting one element gives a numpy scalar, identical on every rank.
    """
    if kwargs:
        raise TypeError(f"unexpected keyword arguments: {', '.join(kwargs)}")
    if local_keys:
        return get_local(self, key)
    return get_items(self, key, copy)


def set_data(
    self: D2O,
    data: Any,
    to_key: Any,
    from_key: Any = None,
    local_keys: bool = False,
    **kwargs: Any,
) -> None:
    """Collective: ``self[to_key] = data[from_key]`` (or ``data`` without from_key).

    ``data``: scalar, list, numpy array or distributed object (any layout).
    With ``local_keys`` every rank passes its own keys and data; writes of
    different ranks to one element are applied in rank order.
    """
    if kwargs:
        raise TypeError(f"unexpected keyword arguments: {', '.join(kwargs)}")
    if local_keys:
        return set_local(self, to_key, data, from_key)
    if from_key is not None:
        if isinstance(data, D2O):
            data = get_items(data, from_key, copy=False)
        else:
            data = np.asarray(data)[from_key]
    set_items(self, to_key, data)


def _basic_structure(key: Any, ndim: int) -> bool:
    """True when a key's structure alone (not its values) makes it basic with an array
    result: only slices, integers, None and Ellipsis, and fewer integers than axes, a
    None or an Ellipsis among them (``a[3, 4, ...]`` is a 0-d view)."""
    items = key if type(key) is tuple else (key,)
    ints, more = 0, False
    for it in items:
        if isinstance(it, (bool, np.bool_)):
            return False
        if isinstance(it, (int, np.integer)):
            ints += 1
        elif it is None or it is Ellipsis:
            more = True
        elif isinstance(it, (list, tuple, np.ndarray)) or np.ndim(it) != 0:
            return False
        elif not isinstance(it, slice):
            ints += 1  # a float, a string: invalid, classed as the integer it stands for
    return more or ints < ndim


def _mesh_view(obj: D2O, key: Any) -> Any:
    """A basic key on a block mesh layout (or a reversed view): a view in the sliced
    layout (every rank keeps its part of each slice; nothing moves), or None where the
    result is not a view of the pieces (block-cyclic axes, advanced or distributed keys,
    a 0-d result): decided from the key's structure, the same on every rank.

    An integer on a split axis removes that axis: its mesh axis then splits a free axis
    of the result, all of it on the coordinate that holds the index, none elsewhere."""
    d = obj.distributor
    if not _basic_structure(key, d.ndim):
        return None
    # From here the key's structure makes it a view on every rank, so a value that is
    # wrong on one rank only raises there, without a collective (as a slab's local keys).
    k = canonical_key(obj, key)
    R = k.out_shape
    if not R:
        return held_view(obj, k)
    replace, split, runs, owners = {}, [], [], {}
    for m, s in enumerate(d.split):
        if s is None:
            split.append(None)
            runs.append(None)
            continue
        e = k.src[s]
        mine = d.runs[m][d.coords[m]]
        if e[0] == "i":  # placed below, once every sliced axis has its result axis
            owners[m] = next(c for c, r in enumerate(d.runs[m]) if locate(r, e[2]) is not None)
            replace[s] = locate(mine, e[2]) if owners[m] == d.coords[m] else 0
            split.append(None)
            runs.append(None)
            continue
        cut = [slice_runs(r, e[2], e[4], e[5]) for r in d.runs[m]]
        if None in cut:  # a block-cyclic axis whose block the step does not divide
            return None
        replace[s] = cut[d.coords[m]][1]
        split.append(k.out_of[s])
        runs.append(tuple(c[0] for c in cut))
    # a free result axis if there is one, else one that another mesh axis splits too
    # (the pieces are then the intersections)
    free = [t for t in range(len(R)) if t not in split] + list(range(len(R)))
    for (m, c), t in zip(owners.items(), free):
        split[m] = t
        runs[m] = tuple((0, R[t]) if j == c else (0, 0) for j in range(d.layout.mesh[m]))
    lay = explicit(d.layout, R, tuple(split), tuple(runs))
    if any(d.coords[m] != c for m, c in owners.items()):
        return obj._view(np.empty(lay.local_shape, dtype=obj.dtype), lay)  # holds nothing
    return obj._view(obj.data[emit(k, replace)], lay)


def getitem(self: D2O, key: Any) -> Any:
    if type(self.distributor) is MeshDistributor:  # (`is_mesh`, inlined: a call less)
        v = _mesh_view(self, key)
        if v is not None:
            return v
        res = mesh_get(self, key)  # element and fancy keys: only what is asked for moves
        if res is not NotImplemented:
            return res
        # no mesh algorithm for this key on this layout: a copy via the slab equivalent
        return _on_slabs(get_items, "__getitem__", (self, key), {})
    if type(key) is int:
        d = self.distributor
        if d.ndim == 1:
            n = d.global_shape[0]
            if not -n <= key < n:  # agreed like any bad key (the others wait in the agreement)
                return get_items(self, key)
            if key < 0:
                key += n
            comm = d.comm
            if d.replicated or comm.size == 1:
                return self.data[key]
            if packable(self.data.dtype):  # the value rides on the error agreement
                owner = d.owner(key)
                return from_owner(self, owner, key - d.span()[0], None)
    return get_items(self, key, copy=False)  # numpy: basic keys give views


def _mesh_set(obj: D2O, key: Any, value: Any) -> bool:
    """``obj[key] = value`` on a mesh layout through the view `_mesh_view` (the value
    aligned to the view's layout: cut locally, or one exchange for a distributed value);
    False where the key gives no view."""
    if not _basic_structure(key, obj.ndim):
        return False
    if isinstance(value, D2O):  # the value moves: key and shape errors agreed first
        with agreed(obj.distributor.comm):
            v = _mesh_view(obj, key)
            s = None if v is None else check_value(value.shape, v.shape)
        if v is None:
            return False
    else:
        v = _mesh_view(obj, key)
        if v is None:
            return False
        value = np.asarray(value)
        s = check_value(value.shape, v.shape)
    if s != value.shape:
        value = value.reshape(s)
    parts = align_parts(value, v.distributor)  # a shifted view: boundary cells only
    if parts is not None:
        write_parts(v.data, parts)
    else:
        v.data[...] = align(value, v.distributor)
    return True


def setitem(self: D2O, key: Any, value: Any) -> None:
    if type(self.distributor) is MeshDistributor:  # (`is_mesh`, inlined)
        if not _mesh_set(self, key, value) and not mesh_set(self, key, value):
            _on_slabs(set_items, "__setitem__", (self, key, value), {})  # via the slab equivalent
        return
    if type(key) is int and isinstance(value, _NUMERIC):
        d = self.distributor
        dt = self.data.dtype
        if d.ndim == 1 and dt.kind in "biufc":
            n = d.global_shape[0]
            if not -n <= key < n:
                raise IndexError(f"index {key} is out of bounds for axis 0 with size {n}")
            if key < 0:
                key += n
            v = dt.type(value)
            if d.replicated:
                self.data[key] = v
            else:
                lo, hi = d.span()
                if lo <= key < hi:
                    self.data[key - lo] = v
            return
    set_items(self, key, value)
