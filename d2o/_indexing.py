"""Getting and setting data: ``obj[key]``, ``obj[key] = value``, get_data, set_data.

Every key numpy accepts works on any layout; numpy is the oracle for results
and errors.  Keys are canonicalised once (`d2o._keys`); then the path depends
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
  (`d2o._p2p`: request counts, then two Alltoallv sized by the data moved).
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

import operator
from itertools import accumulate
from math import prod
from typing import Any

import numpy as np

from ._align import align, align_parts, result_layout
from ._comm import Comm
from ._d2o import distributed_data_object as D2O
from ._distributors import Distributor, HeldScalar, get_distributor, slab_distributor
from ._errors import (
    RECORD_BYTES,
    RECORD_HEADER,
    agree,
    agreed,
    allgather_agreed,
    check_gather,
    new_record,
)
from ._fancy import get_rows, row_key, set_rows
from ._funnel import _on_slabs
from ._halo import Parts, rows_for, slab_rows
from ._keys import (
    Key,
    broadcast_index_shapes,
    canonical,
    coords_for,
    emit,
    jrange,
    localize_slice,
    normalize_index_array,
    set_bshape,
)
from ._layout import explicit, is_mesh, layout, locate, slice_runs
from ._librarian import d2o_librarian
from ._p2p import alltoallv, count_matrix, fetch, scatter
from ._redistribution import describe, exchange, redistribute

__all__: list[str] = []

_from_local = D2O._from_local
_NUMERIC = (int, float, complex, bool, np.number, np.bool_)


# -- layouts --------------------------------------------------------------------


def _offsets(lengths) -> list[int]:
    if isinstance(lengths, np.ndarray):
        lengths = lengths.tolist()
    return [0, *accumulate(int(n) for n in lengths)]


def _slab(shape: tuple, comm: Comm, axis: int, lengths, strategy: str = "freeform"):
    return slab_distributor(tuple(shape), comm, axis, _offsets(lengths), strategy)


def _spread(shape: tuple, comm: Comm) -> Distributor:
    """'equal' along the longest axis (a result produced away from its owners)."""
    if not shape:
        return get_distributor("not", (), comm)
    return get_distributor("equal", tuple(shape), comm, int(np.argmax(shape)))


def _owner_lin(d: Distributor, coords: list, shape: tuple) -> tuple[np.ndarray, np.ndarray]:
    """Owner rank and flat position in the owner's piece of each element (C order)."""
    g = d.global_shape
    n = len(g)
    if d.replicated:
        lin = np.zeros((), dtype=np.intp)
        for k in range(n):
            lin = lin * g[k] + coords[k]
        lin = np.broadcast_to(lin, shape).ravel()
        return np.full(lin.size, d.comm.rank, dtype=np.intp), lin
    ax = d.axis
    offs = d.bounds_array()
    c_ax = np.broadcast_to(coords[ax], shape)
    owner = np.searchsorted(offs, c_ax, side="right") - 1
    lin = c_ax - offs[owner]
    for k in range(ax + 1, n):
        lin = lin * g[k] + coords[k]
    if ax > 0:
        inner = int(np.prod(g[ax + 1 :], dtype=np.int64))
        pre = np.zeros((), dtype=np.intp)
        for k in range(ax):
            pre = pre * g[k] + coords[k]
        lin = lin + pre * ((offs[owner + 1] - offs[owner]) * inner)
    return owner.ravel(), np.broadcast_to(lin, shape).ravel()


def _full_box(shape: tuple) -> tuple:
    return tuple((0, n) for n in shape)


def _box_along(shape: tuple, axis: int, a: int, b: int) -> tuple:
    box = list(_full_box(shape))
    box[axis] = (a, b)
    return tuple(box)


def _shape_of(box: tuple) -> tuple:
    return tuple(b - a for a, b in box)


# -- keys -----------------------------------------------------------------------


def _resolve_replicated(key: Any, comm: Comm) -> Any:
    """Replace distributed objects that every rank holds whole by their numpy data."""
    if isinstance(key, D2O):
        d = key.distributor
        return key.data if (d.replicated or d.comm.size == 1) else key
    if type(key) is tuple and any(isinstance(x, D2O) for x in key):
        return tuple(_resolve_replicated(x, comm) for x in key)
    return key


def _canonical(obj: D2O, key: Any) -> Key:
    return canonical(
        _resolve_replicated(key, obj.distributor.comm), obj.distributor.global_shape, D2O
    )


def _adv_items(k: Key):
    return [(i, it) for i, it in enumerate(k.items) if it[0] == "a"]


# -- getting --------------------------------------------------------------------


def _plain(key: Any) -> bool:
    if type(key) is tuple:
        return not any(isinstance(x, D2O) for x in key)
    return not isinstance(key, D2O)


def _get(obj: D2O, key: Any, copy: bool = True) -> Any:
    d = obj.distributor
    if d.comm.size == 1 and _plain(key):
        # one process: numpy does it all (results, errors); the layout is 'not'
        # for replicated arrays, else a one-piece slab along axis 0
        res = obj.data[key]
        if not isinstance(res, np.ndarray):
            return res
        data = obj.data
        view = res.base is not None and (res.base is data or res.base is data.base)
        view = view or np.may_share_memory(res, data)
        if copy and view:
            res, view = res.copy(), False
        lay = get_distributor("not" if d.replicated or not res.ndim else "equal", res.shape, d.comm)
        return obj._view(res, lay) if view else _from_local(res, lay)
    kind = _key_class(key, d, copy)
    if kind == "local":  # no communication: numpy's errors where they arise
        k = _canonical(obj, key)
    else:  # validation errors are agreed before anything moves
        k, rows, error = None, None, None
        try:
            rows = row_key(obj, key) if kind == "moves" else None  # the fancy fast path's key
            if rows is None:
                k = _canonical(obj, key)
        except Exception as exc:
            error = exc
        if kind == "scalar":  # the value rides on the agreement's collective
            return _owner_scalar(obj, k, error)
        allgather_agreed(d.comm, error, new_record())
        if rows is not None:
            res = get_rows(obj, key, rows)
            if res is not NotImplemented:
                return res
            k = _canonical(obj, key)
    if k.distributed:
        return _get_distributed(obj, k)
    if d.replicated:
        res = obj.data[emit(k)]
        if k.scalar:
            return res
        lay = get_distributor("not", res.shape, d.comm)
        if k.advanced:
            return _from_local(res, lay)
        return _from_local(res.copy(), lay) if copy else obj._view(res, lay)
    e = k.src[d.axis]
    if e[0] == "s":
        return _get_slice_axis(obj, k, e, copy)
    if e[0] == "i":
        return _get_int_axis(obj, k, e, copy)
    return _get_adv_axis(obj, k)


def _key_class(key: Any, d: Distributor, copy: bool = True) -> str:
    """How a key treats the split axis, from its structure alone (values may be wrong):
    'local' (nothing moves), 'scalar' (one element from its owner) or 'moves'.

    Every rank classifies its own key; ranks whose keys differ only in their values
    (one of them out of range, say) get the same class, so they enter the same
    collective and agree there on the error.
    """
    if d.replicated or d.comm.size == 1:
        return "local"
    items = key if type(key) is tuple else (key,)
    kinds = []
    for it in items:
        if it is None or isinstance(it, (bool, np.bool_)):
            kinds.append(("n", 0, it))
        elif it is Ellipsis:
            kinds.append(("e", 0, it))
        elif isinstance(it, slice):
            kinds.append(("s", 1, it))
        elif isinstance(it, (int, np.integer)):
            kinds.append(("i", 1, it))
        elif isinstance(it, D2O):
            return "moves"
        elif not isinstance(it, (list, tuple, np.ndarray)) and np.ndim(it) == 0:
            # a float, a string, any other scalar: invalid, classed as the integer it
            # stands for, so that the rank meets the others in the agreement
            kinds.append(("i", 1, it))
        else:
            kinds.append(("a", _mask_ndim(it), it))
    total = sum(n for _, n, _ in kinds)
    pos, at = 0, None
    for kind, n, it in kinds:
        if kind == "e":
            n = max(d.ndim - total, 0)
        if pos <= d.axis < pos + n:
            at = (kind, it)
            break
        pos += n
    if at is None or at[0] == "e":
        return "local"
    if at[0] == "i":
        # (more integers than dimensions: classed as the full integer key, so that a rank
        # with one index too many meets the others in the agreement that reports it)
        plain = all(k in ("i",) for k, _, _ in kinds) and total >= d.ndim
        if plain:
            return "scalar"
        basic = all(k in "isne" for k, _, _ in kinds)
        return "local" if basic and not copy else "moves"  # a view held by the owner
    if at[0] == "s":
        try:
            step = 1 if at[1].step is None else operator.index(at[1].step)
        except TypeError:
            step = 1
        return "moves" if step < 0 and copy else "local"  # a view of a reversal: no move
    return "moves"


def _mask_ndim(item: Any) -> int:
    """The dimensions an array-like key item consumes: a boolean mask its ndim, else 1."""
    if isinstance(item, np.ndarray):
        return item.ndim if item.dtype == bool else 1
    depth, x = 0, item
    while isinstance(x, (list, tuple)) and x:
        depth, x = depth + 1, x[0]
    if isinstance(x, (bool, np.bool_)):
        return depth
    if depth == 0 and not isinstance(x, (list, tuple)):
        try:
            arr = np.asarray(item)
            return arr.ndim if arr.dtype == bool else 1
        except Exception:
            return 1
    return 1


def _packable(dt: np.dtype) -> bool:
    return dt.itemsize <= RECORD_BYTES - RECORD_HEADER and not dt.hasobject


def _from_owner(obj: D2O, owner: int, local_index: Any, error: BaseException | None) -> Any:
    """Collective: element ``local_index`` of rank ``owner``'s piece, on every rank.

    One Allgather of a small record per rank carries both the error agreement and
    the owner's value (`_errors.allgather_agreed`); a numpy scalar identical everywhere.
    """
    dt = obj.dtype
    rec = new_record()
    if error is None and obj.distributor.comm.rank == owner:
        rec[RECORD_HEADER : RECORD_HEADER + dt.itemsize].view(dt)[0] = obj.data[local_index]
    rows = allgather_agreed(obj.distributor.comm, error, rec)
    return rows[owner, RECORD_HEADER : RECORD_HEADER + dt.itemsize].view(dt)[0]


def _owner_scalar(obj: D2O, k: Key | None, error: BaseException | None) -> Any:
    """Collective: the element selected by the all-integer key ``k``, from its owner."""
    d = obj.distributor
    if error is None and not _packable(obj.dtype):  # pragma: no cover - object or wide dtypes
        allgather_agreed(d.comm, None, new_record())
        return _get_int_axis(obj, k, k.src[d.axis])
    if error is not None:
        return _from_owner(obj, 0, None, error)  # raises on every rank
    idx = [it[2] for it in k.items]
    owner = d.owner(idx[d.axis])
    idx[d.axis] -= d.span()[0]
    return _from_owner(obj, owner, tuple(idx), None)


def _get_slice_axis(obj: D2O, k: Key, e: tuple, copy: bool) -> D2O:
    d = obj.distributor
    comm = d.comm
    ax, start, step, n = e[1], e[2], e[4], e[5]
    o = k.out_of[ax]
    R = k.out_shape
    offs = d.bounds()
    P = comm.size
    ranges = [jrange(start, step, n, offs[r], offs[r + 1]) for r in range(P)]
    j0, j1 = ranges[comm.rank]
    piece = obj.data[emit(k, {ax: localize_slice(start, step, j0, j1, offs[comm.rank])})]
    view = not (copy or k.advanced)
    if copy and not k.advanced:
        piece = piece.copy()
    lengths = [b - a for a, b in ranges]
    if step > 0 or P == 1:
        whole = start == 0 and step == 1 and n == d.global_shape[ax]
        lay = _slab(R, comm, o, lengths, d.strategy if whole else "freeform")
        return obj._view(piece, lay) if view else _from_local(piece, lay)
    if view:  # the ranks hold their ranges in descending order: a layout with given pieces
        lay = explicit(layout(mesh=(P,), split=(o,), comm=comm), R, (o,), (tuple(ranges),))
        return obj._view(piece, lay)
    dst = _slab(R, comm, o, lengths[::-1])
    out = exchange(comm, piece, lambda r: _box_along(R, o, *ranges[r]), dst.region)
    return _from_local(out, dst)


def _get_int_axis(obj: D2O, k: Key, e: tuple, copy: bool = True) -> Any:
    d = obj.distributor
    comm = d.comm
    ax, idx = e[1], e[2]
    owner = d.owner(idx)
    R = k.out_shape
    mine = comm.rank == owner
    if not R and not copy and not k.advanced and not k.scalar:
        return _held_view(obj, k)  # numpy: a 0-d view (a[3, 4, ...])
    piece = obj.data[emit(k, {ax: idx - d.span()[0]})] if mine else None
    if R and not copy and not k.advanced:
        # a view: the owner holds all of it (a slab along the result's axis 0), nothing moves
        if not mine:
            piece = np.empty((0,) + R[1:], dtype=obj.dtype)
        lengths = [R[0] if r == owner else 0 for r in range(comm.size)]
        return obj._view(piece, _slab(R, comm, 0, lengths))
    if not R:
        buf = np.empty(1, dtype=obj.dtype)
        if mine:
            buf[0] = piece
        comm.Bcast(buf, owner)
        if k.scalar:
            return buf[0]
        return _from_local(buf.reshape(()), get_distributor("not", (), comm))
    dst = _spread(R, comm)
    if not mine:
        piece = np.empty((0,) * len(R), dtype=obj.dtype)
    full = _full_box(R)
    out = exchange(comm, piece, lambda r: full if r == owner else None, dst.region)
    return _from_local(out, dst)


def _held_view(obj: D2O, k: Key) -> D2O:
    """The 0-d view of one element (``a[3, 4, ...]``): held by the ranks whose piece has
    it, sent by one of them (`HeldScalar`); local."""
    d = obj.distributor
    point = [e[2] for e in k.src]

    def has(box: tuple | None) -> bool:
        return box is not None and all(locate(e, i) is not None for e, i in zip(box, point))

    P = d.comm.size
    holders = frozenset(r for r in range(P) if has(d.region(r)))
    sender = next(r for r in range(P) if r in holders and has(d.source(r)))
    if d.comm.rank in holders:
        box = d.region(d.comm.rank)
        piece = obj.data[tuple(locate(e, i) for e, i in zip(box, point)) + (Ellipsis,)]
    else:
        piece = np.empty((), dtype=obj.dtype)  # scratch: this rank holds nothing
    return obj._view(piece, HeldScalar(d.comm, holders, sender))


def _monotonic(owners: np.ndarray) -> bool:
    return owners.size < 2 or bool(np.all(owners[1:] >= owners[:-1]))


def _get_adv_axis(obj: D2O, k: Key) -> D2O:
    d = obj.distributor
    comm = d.comm
    ax = d.axis
    R, B = k.out_shape, k.bshape
    A = np.broadcast_to(k.src[ax][2], B)
    offs = d.bounds_array()
    owners = np.searchsorted(offs, A, side="right") - 1
    if len(B) == 1 and _monotonic(owners):
        # every rank keeps the selected rows it owns, in order: no communication
        counts = np.bincount(owners, minlength=comm.size)
        bo = _offsets(counts)
        lo, hi = bo[comm.rank], bo[comm.rank + 1]
        adv = {}
        mine = d.span()[0]
        for i, it in _adv_items(k):
            a = np.broadcast_to(it[2], B)[lo:hi]
            adv[i] = a - mine if it[1] == ax else a
        piece = obj.data[emit(k, adv=adv)]
        return _from_local(piece, _slab(R, comm, k.bpos, counts))
    dst = _spread(R, comm)
    box = dst.region(comm.rank)
    shape = _shape_of(box)
    if int(np.prod(R, dtype=np.int64)) * max(1, len(R)) <= _SMALL:
        return _from_local(_get_small(obj, k, dst).reshape(shape), dst)
    bsl = tuple(slice(a, b) for a, b in box[k.bpos : k.bpos + len(B)])
    advs = {it[1]: np.broadcast_to(it[2], B)[bsl] for _, it in _adv_items(k)}
    owner, lin = _owner_lin(d, coords_for(k, box, advs), shape)
    M, _ = count_matrix(comm, owner)
    return _from_local(fetch(comm, obj.data, owner, lin, M).reshape(shape), dst)


_SMALL = 1 << 16  # results this small are planned by every rank for all ranks


def _get_small(obj: D2O, k: Key, dst: Distributor) -> np.ndarray:
    """A small result of a global key: every rank knows every element's owner and
    destination, so one Alltoallv of values does it (none when nothing moves)."""
    d = obj.distributor
    comm = d.comm
    me = comm.rank
    R, B = k.out_shape, k.bshape
    advs = {it[1]: np.broadcast_to(it[2], B) for _, it in _adv_items(k)}
    owner, lin = _owner_lin(d, coords_for(k, _full_box(R), advs), R)
    t = dst.axis
    pos = np.arange(R[t], dtype=np.intp).reshape((-1,) + (1,) * (len(R) - t - 1))
    dest = np.searchsorted(dst.bounds_array(), np.broadcast_to(pos, R), side="right") - 1
    dest = dest.ravel()
    mine = np.flatnonzero(dest == me)
    if np.array_equal(owner, dest):
        return np.take(obj.data.reshape(-1), lin[mine])
    sel = np.flatnonzero(owner == me)
    order = np.argsort(dest[sel], kind="stable")
    send = np.take(obj.data.reshape(-1), lin[sel][order])
    src = owner[mine]
    back = np.argsort(src, kind="stable")
    P = comm.size
    got = alltoallv(comm, send, np.bincount(dest[sel], minlength=P), np.bincount(src, minlength=P))
    out = np.empty(mine.size, dtype=obj.dtype)
    out[back] = got
    return out


def _mask_rows(obj: D2O, mask: D2O) -> np.ndarray | None:
    """The mask's part for this rank's rows when obj is split along axis 0, else None."""
    d = obj.distributor
    if d.replicated or d.axis != 0:
        return None
    md = mask.distributor
    want = d.slabs_like(mask.shape, 0, "freeform")
    if not md.replicated and md.axis == 0 and md.bounds() == d.bounds():
        return mask.data
    return redistribute(mask.data, md, want)


def _mask_coords(mask: D2O) -> tuple[list[D2O], int]:
    """A distributed mask as 1-D distributed integer keys (one per mask dimension),
    in numpy's order; returns the keys and the number of selected elements."""
    md = mask.distributor
    comm = md.comm
    m = mask.data
    if md.replicated:
        lo = 0
    elif md.axis != 0:
        eq = get_distributor("equal", mask.shape, comm, 0)
        m = redistribute(mask.data, md, eq)
        md = eq
        lo = md.span()[0]
    else:
        lo = md.span()[0]
    nz = list(np.nonzero(m))
    if nz:
        nz[0] = nz[0] + lo
    counts = comm.Allgather(np.array([nz[0].size if nz else 0], dtype=np.int64)).ravel()
    total = int(counts.sum())
    if md.replicated:
        lay = get_distributor("not", (total,), comm)
    else:
        lay = _slab((total,), comm, 0, counts)
    return [_from_local(c.astype(np.intp, copy=False), lay) for c in nz], total


def _resolve_distributed(k: Key) -> tuple[list, dict]:
    """Expand distributed masks; returns the advanced operands in item order and
    a map item position -> list of (source dim, operand)."""
    operands = []
    per_item: dict = {}
    shapes = []
    for i, it in enumerate(k.items):
        kind = it[0]
        if kind == "a":
            per_item[i] = [(it[1], it[2])]
            operands.append(it[2])
            shapes.append(np.shape(it[2]))
        elif kind == "z":
            shapes.append(it[1].shape)
        elif kind == "d":
            per_item[i] = [(it[1], it[2])]
            operands.append(it[2])
            shapes.append(it[2].shape)
        elif kind == "m":
            keys, total = _mask_coords(it[2])
            per_item[i] = list(zip(it[1], keys))
            operands.extend(keys)
            shapes.append((total,))
    set_bshape(k, broadcast_index_shapes(shapes))
    return operands, per_item


def _distributed_plan(obj: D2O, k: Key):
    """Layout of the result and this rank's element requests for a distributed key."""
    d = obj.distributor
    comm = d.comm
    operands, per_item = _resolve_distributed(k)
    B, R = k.bshape, k.out_shape
    WB = result_layout(operands, B)
    if WB.replicated:
        dst = get_distributor("not", R, comm)
    else:
        dst = WB.slabs_like(R, k.bpos + WB.axis)
    box = dst.region(comm.rank)
    shape = _shape_of(box)
    error, owner, lin = None, None, None
    local = {dim: align(x, WB) for pairs in per_item.values() for dim, x in pairs}
    try:
        advs = {}
        for dim, a in local.items():
            a = np.broadcast_to(a, WB.local_shape)
            advs[dim] = normalize_index_array(a, dim, d.global_shape[dim])
        owner, lin = _owner_lin(d, coords_for(k, box, advs), shape)
    except Exception as exc:  # a bad index in this rank's part of the key
        error = exc
        owner = lin = np.zeros(0, dtype=np.intp)
    return dst, shape, owner, lin, error


def _lone_mask(k: Key, shape: tuple) -> D2O | None:
    """The distributed mask when the key is just a mask followed by whole axes."""
    if not k.items or k.items[0][0] != "m":
        return None
    for it in k.items[1:]:
        if it[0] == "e":
            continue
        if it[0] != "s" or it[4] != 1 or it[5] != shape[it[1]] or it[2] != 0:
            return None
    return k.items[0][2]


def _get_distributed(obj: D2O, k: Key) -> D2O:
    d = obj.distributor
    comm = d.comm
    mask = _lone_mask(k, d.global_shape)
    if mask is not None:
        m = _mask_rows(obj, mask)
        if m is not None:  # rows where they are: no data moves
            piece = obj.data[m]
            counts = comm.Allgather(np.array([piece.shape[0]], dtype=np.int64)).ravel()
            R = (int(counts.sum()),) + piece.shape[1:]
            return _from_local(piece, _slab(R, comm, 0, counts))
    dst, shape, owner, lin, error = _distributed_plan(obj, k)
    M, _ = count_matrix(comm, owner, error, agree=True)
    return _from_local(fetch(comm, obj.data, owner, lin, M).reshape(shape), dst)


# -- setting --------------------------------------------------------------------


def _as_value(obj: D2O, value: Any):
    """(numpy value cast to obj's dtype, None) or (None, distributed value)."""
    if isinstance(value, D2O):
        vd = value.distributor
        if vd.replicated or vd.comm.size == 1:
            return np.asarray(value.data, dtype=obj.dtype), None
        return None, value
    return np.asarray(value, dtype=obj.dtype), None


def _check_mask_value(key: Any, value: Any) -> None:
    """numpy's rule for a key that is one boolean array: the value is 0-d or 1-d."""
    if type(key) is tuple:
        if len(key) != 1:
            return
        key = key[0]
    if isinstance(key, (np.ndarray, D2O)) and key.dtype == bool and np.ndim(value) > 1:
        raise TypeError(
            "NumPy boolean array indexing assignment requires a 0 or 1-dimensional input, "
            f"input has {np.ndim(value)} dimensions"
        )


def _check_value(vshape: tuple, R: tuple) -> tuple:
    """numpy's broadcasting check of a value against the selection; the value's
    shape with surplus leading ones dropped."""
    s = tuple(vshape)
    while len(s) > len(R) and s[0] == 1:
        s = s[1:]
    ok = len(s) <= len(R) and all(v == 1 or v == r for v, r in zip(s[::-1], R[::-1], strict=False))
    if not ok:
        raise ValueError(
            f"could not broadcast input array from shape {tuple(vshape)} into shape {tuple(R)}"
        )
    return s


def _cut(val: np.ndarray, R: tuple, o: int, a: int, b: int) -> np.ndarray:
    vo = o - (len(R) - val.ndim)
    if vo >= 0 and val.shape[vo] != 1:
        return val[(slice(None),) * vo + (slice(a, b),)]
    return val


def _value_parts(value: D2O, R: tuple, box_of) -> np.ndarray:
    """Collective: this rank's part (box ``box_of(rank)`` of the selection) of a
    distributed value broadcast to ``R``."""
    vd = value.distributor
    V = value.shape
    while len(V) > len(R) and V[0] == 1:
        V = V[1:]
    off = len(R) - len(V)
    drop = value.ndim - len(V)
    data = value.data
    if drop:
        lead = data.shape[:drop]
        data = data.reshape(data.shape[drop:]) if all(lead) else np.empty((0,) * len(V), data.dtype)

    def have(r):
        reg = vd.region(r)
        if any(b <= a for a, b in reg[:drop]):
            return None
        return reg[drop:]

    def want(r):
        box = box_of(r)
        if box is None or any(b <= a for a, b in box):
            return None
        return tuple((0, 1) if V[i] == 1 else box[off + i] for i in range(len(V)))

    return exchange(vd.comm, data, have, want)


def _write_parts(dest: np.ndarray | None, parts: Parts) -> None:
    """Write `Parts` into ``dest``: the rows held here first (numpy copes with overlap
    between the value and ``dest``), then the received ones."""
    if dest is None:
        return
    pieces = list(parts.pieces)
    if parts.own > 0:
        pieces.insert(0, pieces.pop(parts.own))
    for box, arr in pieces:
        if arr.size:
            dest[tuple(slice(lo, hi) for lo, hi in box)] = arr


def _set(obj: D2O, key: Any, value: Any) -> None:
    d = obj.distributor
    comm = d.comm
    if comm.size == 1 and _plain(key):
        obj.data[key] = value.data if isinstance(value, D2O) else value
        return None
    if set_rows(obj, key, value, _check_value) is not NotImplemented:
        return None
    moves = not _plain(key) or (
        isinstance(value, D2O) and not value.distributor.replicated and comm.size > 1
    )
    if moves:  # a distributed key or value: validation is agreed before anything moves
        error, k, val, dval = None, None, None, None
        try:
            k = _canonical(obj, key)
            val, dval = _as_value(obj, value)
            _check_mask_value(key, val if dval is None else dval)
            if not k.distributed:
                _check_value(val.shape if dval is None else dval.shape, k.out_shape)
        except Exception as exc:
            error = exc
        agree(comm, error)
    else:
        k = _canonical(obj, key)
        val, dval = _as_value(obj, value)
        _check_mask_value(key, val)
    if k.distributed:
        return _set_distributed(obj, k, val, dval)
    R = k.out_shape
    _check_value(val.shape if dval is None else dval.shape, R)
    if 0 in R:  # an empty selection: nothing to write (R is global: every rank returns here)
        return None
    if d.replicated:
        if dval is not None:
            vd = dval.distributor
            val = redistribute(dval.data, vd, get_distributor("not", dval.shape, vd.comm))
        obj.data[emit(k)] = val
        return None
    ax = d.axis
    e = k.src[ax]
    if e[0] == "s":
        start, step, n = e[2], e[4], e[5]
        o = k.out_of[ax]
        offs = d.bounds()
        ranges = [jrange(start, step, n, offs[r], offs[r + 1]) for r in range(comm.size)]
        j0, j1 = ranges[comm.rank]
        idx = emit(k, {ax: localize_slice(start, step, j0, j1, offs[comm.rank])})
        if (
            dval is not None
            and dval.shape == R
            and dval.distributor.axis == o
            and slab_rows(dval.distributor)
            and not k.advanced
        ):  # a shifted slab value (a stencil's result): boundary rows only, written in place
            parts = rows_for(dval.data, dval.distributor, ranges)
            _write_parts(obj.data[idx] if j1 > j0 else None, parts)
            return None
        if dval is not None:
            part = _value_parts(dval, R, lambda r: _box_along(R, o, *ranges[r]))
        else:
            part = _cut(val, R, o, j0, j1)
        if j1 > j0:
            obj.data[idx] = part
        return None
    if e[0] == "i":
        idx = e[2]
        owner = d.owner(idx)
        if dval is not None:
            full = _full_box(R)
            val = _value_parts(dval, R, lambda r: full if r == owner else None)
        if comm.rank == owner:
            obj.data[emit(k, {ax: idx - d.span()[0]})] = val
        return None
    return _set_adv_axis(obj, k, val, dval)


def _set_adv_axis(obj: D2O, k: Key, val, dval) -> None:
    d = obj.distributor
    comm = d.comm
    ax = d.axis
    R, B = k.out_shape, k.bshape
    nb, bpos = len(B), k.bpos
    if dval is None:  # every rank writes what it owns: no communication
        A = np.broadcast_to(k.src[ax][2], B).reshape(-1)
        offs = d.bounds_array()
        sel = np.flatnonzero((A >= offs[comm.rank]) & (A < offs[comm.rank + 1]))
        if sel.size == 0:
            return
        adv = {}
        lo = offs[comm.rank]
        for i, it in _adv_items(k):
            a = np.broadcast_to(it[2], B).reshape(-1)[sel]
            adv[i] = a - lo if it[1] == ax else a
        vs = _check_value(val.shape, R)
        vv = val.reshape((1,) * (len(R) - len(vs)) + vs)
        head, tail = vv.shape[:bpos], vv.shape[bpos + nb :]
        if all(b == 1 for b in vv.shape[bpos : bpos + nb]):
            vsel = vv.reshape(head + (1,) + tail)
        else:
            vb = np.broadcast_to(vv, head + B + tail).reshape(head + (prod(B),) + tail)
            vsel = np.take(vb, sel, axis=bpos)
        obj.data[emit(k, adv=adv)] = vsel
        return
    R_is_value = dval.shape == R
    dst = dval.distributor if R_is_value else _spread(R, comm)
    box = dst.region(comm.rank)
    shape = _shape_of(box)
    part = dval.data if R_is_value else np.broadcast_to(align(dval, dst), dst.local_shape)
    bsl = tuple(slice(a, b) for a, b in box[bpos : bpos + nb])
    advs = {it[1]: np.broadcast_to(it[2], B)[bsl] for _, it in _adv_items(k)}
    owner, lin = _owner_lin(d, coords_for(k, box, advs), shape)
    M, _ = count_matrix(comm, owner)
    scatter(comm, obj.data, owner, lin, np.broadcast_to(part, shape).ravel(), M)


def _set_distributed(obj: D2O, k: Key, val, dval) -> None:
    d = obj.distributor
    comm = d.comm
    mask = _lone_mask(k, d.global_shape)
    if mask is not None and val is not None and val.ndim == 0:
        m = _mask_rows(obj, mask)
        if m is not None:  # a scalar into the selected rows, in place
            obj.data[m] = val
            return
    dst, shape, owner, lin, error = _distributed_plan(obj, k)
    try:
        R = k.out_shape
        if error is None:
            _check_value(val.shape if dval is None else dval.shape, R)
    except Exception as exc:
        error = exc
    M, _ = count_matrix(comm, owner, error, agree=True)
    if dval is not None:
        part = align(dval, dst)
    else:
        vs = _check_value(val.shape, k.out_shape)
        part = align(val.reshape(vs), dst)
    vals = np.broadcast_to(part, shape).ravel()
    scatter(comm, obj.data, owner, lin, vals, M, replicated=d.replicated)


# -- local keys -----------------------------------------------------------------


def _reassemble(comm: Comm, key: Any) -> Any:
    """Collective: replace each rank's local instances of distributed objects in its
    key by the whole object, assembled on that rank (through the librarian)."""
    single = type(key) is not tuple
    items = [key] if single else list(key)
    mine = [i for i, x in enumerate(items) if isinstance(x, D2O)]
    if comm.size == 1:
        for i in mine:
            items[i] = items[i].get_full_data()
        return items[0] if single else tuple(items)
    lists = comm.allgather([items[i].index for i in mine])
    for r, idxs in enumerate(lists):
        for j, index in enumerate(idxs):
            err, o = None, None
            try:
                o = d2o_librarian[index]
            except KeyError as exc:
                err = exc
            agree(comm, err)
            if not o.distributor.replicated:
                check_gather(comm, describe(o.distributor), f"rank {r} (its local key)")
            full = o.get_full_data(target_rank=r)
            if r == comm.rank:
                items[mine[j]] = full
    return items[0] if single else tuple(items)


def _local_plan(obj: D2O, key: Any):
    d = obj.distributor
    k = canonical(key, d.global_shape)
    R = k.out_shape
    box = _full_box(R)
    advs = {it[1]: np.broadcast_to(it[2], k.bshape) for _, it in _adv_items(k)}
    owner, lin = _owner_lin(d, coords_for(k, box, advs), R)
    return k, R, owner, lin


def _get_local(obj: D2O, key: Any) -> Any:
    d = obj.distributor
    comm = d.comm
    key = _reassemble(comm, key)
    error, R, scalar = None, None, False
    owner = lin = np.zeros(0, dtype=np.intp)
    try:
        k, R, owner, lin = _local_plan(obj, key)
        scalar = k.scalar
    except Exception as exc:
        error = exc
    M, metas = count_matrix(comm, owner, error, (R, scalar), agree=True)
    shapes = [m[0] for m in metas]
    if not all(m[1] for m in metas):
        with agreed(comm):
            if any(
                len(s) == 0 or s[1:] != shapes[0][1:] or len(s) != len(shapes[0]) for s in shapes
            ):
                raise ValueError(
                    "with local_keys the results of all ranks must agree in every dimension "
                    f"but the first; got shapes {shapes}"
                )
    vals = fetch(comm, obj.data, owner, lin, M)
    if all(m[1] for m in metas):
        return vals[0]
    gshape = (sum(s[0] for s in shapes),) + tuple(R[1:])
    return _from_local(vals.reshape(R), _slab(gshape, comm, 0, [s[0] for s in shapes]))


def _set_local(obj: D2O, to_key: Any, data: Any, from_key: Any) -> None:
    d = obj.distributor
    comm = d.comm
    to_key = _reassemble(comm, to_key)
    # ``data`` is a per-rank argument: some ranks may pass a distributed object and others
    # not, so the ranks first agree on what was passed (one small allgather).
    mine = data.index if isinstance(data, D2O) else None
    passed = comm.allgather(mine) if comm.size > 1 else [mine]
    if from_key is not None and mine is not None and len(set(passed)) == 1:
        # every rank names the same distributed object: fetch just the selected elements
        data = _get_local(data, from_key)
        data = data.data if isinstance(data, D2O) else data
        from_key = None
    elif any(p is not None for p in passed):
        data = _reassemble(comm, data)
    error = None
    owner = lin = np.zeros(0, dtype=np.intp)
    vals = np.zeros(0, dtype=obj.dtype)
    try:
        if from_key is not None:
            data = np.asarray(data)[from_key]
        val = np.asarray(data, dtype=obj.dtype)
        k, R, owner, lin = _local_plan(obj, to_key)
        vs = _check_value(val.shape, R)
        vals = np.broadcast_to(val.reshape(vs), R).ravel()
    except Exception as exc:
        error = exc
    M, _ = count_matrix(comm, owner, error, agree=True)
    scatter(comm, obj.data, owner, lin, vals, M, replicated=d.replicated)


# -- public methods -------------------------------------------------------------


def get_data(self: D2O, key: Any, local_keys: bool = False, copy: bool = True, **kwargs: Any):
    """Collective: ``self[key]``; with ``local_keys`` each rank's own key.

    The result stays distributed (see the module doc for where it lives); a key
    selecting one element gives a numpy scalar, identical on every rank.
    """
    if kwargs:
        raise TypeError(f"unexpected keyword arguments: {', '.join(kwargs)}")
    if local_keys:
        return _get_local(self, key)
    return _get(self, key, copy)


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
        return _set_local(self, to_key, data, from_key)
    if from_key is not None:
        if isinstance(data, D2O):
            data = _get(data, from_key, copy=False)
        else:
            data = np.asarray(data)[from_key]
    _set(self, to_key, data)


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
    k = _canonical(obj, key)
    R = k.out_shape
    if not R:
        return _held_view(obj, k)
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
    if is_mesh(self.distributor):
        v = _mesh_view(self, key)
        if v is not None:
            return v
        # no view algorithm for this key on this layout: a copy via the slab equivalent
        return _on_slabs(_get, "__getitem__", (self, key), {})
    if type(key) is int:
        d = self.distributor
        if d.ndim == 1:
            n = d.global_shape[0]
            if not -n <= key < n:  # agreed like any bad key (the others wait in the Allgather)
                return _get(self, key)
            if key < 0:
                key += n
            comm = d.comm
            if d.replicated or comm.size == 1:
                return self.data[key]
            if _packable(self.data.dtype):  # the value rides on the error agreement
                owner = d.owner(key)
                return _from_owner(self, owner, key - d.span()[0], None)
    return _get(self, key, copy=False)  # numpy: basic keys give views


def _mesh_set(obj: D2O, key: Any, value: Any) -> bool:
    """``obj[key] = value`` on a mesh layout through the view `_mesh_view` (the value
    aligned to the view's layout: cut locally, or one exchange for a distributed value);
    False where the key gives no view."""
    if not _basic_structure(key, obj.ndim):
        return False
    if isinstance(value, D2O):  # the value moves: key and shape errors agreed first
        with agreed(obj.distributor.comm):
            v = _mesh_view(obj, key)
            s = None if v is None else _check_value(value.shape, v.shape)
        if v is None:
            return False
    else:
        v = _mesh_view(obj, key)
        if v is None:
            return False
        value = np.asarray(value)
        s = _check_value(value.shape, v.shape)
    if s != value.shape:
        value = value.reshape(s)
    parts = align_parts(value, v.distributor)  # a shifted view: boundary cells only
    if parts is not None:
        _write_parts(v.data, parts)
    else:
        v.data[...] = align(value, v.distributor)
    return True


def setitem(self: D2O, key: Any, value: Any) -> None:
    if is_mesh(self.distributor):
        if not _mesh_set(self, key, value):  # no view for this key: via the slab equivalent
            _on_slabs(_set, "__setitem__", (self, key, value), {})
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
    _set(self, key, value)
