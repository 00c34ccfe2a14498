"""Getting data: ``obj[key]`` on every layout (see `d2o.ops.indexing` for what moves)."""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from ..array.align import align, result_layout
from ..array.base import Array as D2O
from ..array.base import from_local as _from_local
from ..core.errors import PAYLOAD_BYTES, allreduce_agreed, get_value, new_record, put_value
from ..core.keys import (
    Key,
    broadcast_index_shapes,
    coords_for,
    emit,
    jrange,
    localize_slice,
    normalize_index_array,
    set_bshape,
)
from ..layouts.distributors import Distributor, HeldScalar, get_distributor
from ..layouts.mesh import explicit, layout, locate
from ..move.p2p import alltoallv, count_matrix, fetch
from ..move.redistribution import exchange, redistribute
from .fancy import get_rows, row_key
from .keyplan import (
    adv_items,
    box_along,
    canonical_key,
    freeform_slab,
    full_box,
    offsets,
    owner_lin,
    shape_of,
    spread,
)

__all__: list[str] = []

_NUMERIC = (int, float, complex, bool, np.number, np.bool_)


# -- getting --------------------------------------------------------------------


def plain_key(key: Any) -> bool:
    if type(key) is tuple:
        return not any(isinstance(x, D2O) for x in key)
    return not isinstance(key, D2O)


#: (layout, the key's slices as (start, stop, step)) -> (the numpy key of this rank's
#: piece, the view's layout): the plans of views by slices on slabs (`_get_slice_axis`),
#: so that a stencil's shifted views cost a lookup, not the key machinery.  Local facts
#: of the layout and the key alone; at most `_PLANS_MAX` (then emptied).
_PLANS: dict = {}
_PLANS_MAX = 512


def _slices(key: Any) -> tuple | None:
    """``key``'s slices as (start, stop, step) triples of ints or None, or None where it
    holds anything else (the plan cache's key)."""
    items = key if type(key) is tuple else (key,)
    sig = []
    for s in items:
        if type(s) is not slice:
            return None
        a, b, c = s.start, s.stop, s.step
        if (a is not None and type(a) is not int) or (b is not None and type(b) is not int):
            return None
        if c is not None and type(c) is not int:
            return None
        sig.append((a, b, c))
    return tuple(sig)


def get_items(obj: D2O, key: Any, copy: bool = True) -> Any:
    d = obj.distributor
    sig = None
    if not copy and d.comm.size > 1:
        sig = _slices(key)
        if sig is not None:
            plan = _PLANS.get((d, sig))
            if plan is not None:
                return obj._view(obj.data[plan[0]], plan[1])
    if d.comm.size == 1 and plain_key(key):
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
        k = canonical_key(obj, key)
    else:  # validation errors are agreed before anything moves
        k, rows, error = None, None, None
        try:
            rows = row_key(obj, key) if kind == "moves" else None  # the fancy fast path's key
            if rows is None:
                k = canonical_key(obj, key)
        except Exception as exc:
            error = exc
        if kind == "scalar":  # the value rides on the agreement's collective
            return _owner_scalar(obj, k, error)
        allreduce_agreed(d.comm, error, new_record())
        if rows is not None:
            res = get_rows(obj, key, rows)
            if res is not NotImplemented:
                return res
            k = canonical_key(obj, key)
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
        return _get_slice_axis(obj, k, e, copy, sig)
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


def packable(dt: np.dtype) -> bool:
    return dt.itemsize <= PAYLOAD_BYTES and not dt.hasobject


def from_owner(obj: D2O, owner: int, local_index: Any, error: BaseException | None) -> Any:
    """Collective: element ``local_index`` of rank ``owner``'s piece, on every rank.

    One Allreduce of a fixed 96-byte record carries both the error agreement and the
    owner's value (the others send zeros; `_errors.allreduce_agreed`): O(log P)
    messages, the same bytes at any P; a numpy scalar identical everywhere.
    """
    dt = obj.dtype
    rec = new_record()
    if error is None and obj.distributor.comm.rank == owner:
        put_value(rec, obj.data[local_index], dt)
    return get_value(allreduce_agreed(obj.distributor.comm, error, rec), dt)


def _owner_scalar(obj: D2O, k: Key | None, error: BaseException | None) -> Any:
    """Collective: the element selected by the all-integer key ``k``, from its owner."""
    d = obj.distributor
    if error is None and not packable(obj.dtype):  # pragma: no cover - object or wide dtypes
        allreduce_agreed(d.comm, None, new_record())
        return _get_int_axis(obj, k, k.src[d.axis])
    if error is not None:
        return from_owner(obj, 0, None, error)  # raises on every rank
    idx = [it[2] for it in k.items]
    owner = d.owner(idx[d.axis])
    idx[d.axis] -= d.span()[0]
    return from_owner(obj, owner, tuple(idx), None)


def _get_slice_axis(obj: D2O, k: Key, e: tuple, copy: bool, sig: tuple | None = None) -> D2O:
    """Slice ``e`` of the split axis (``sig``: the key's slices, where a view's plan is
    kept in `_PLANS`)."""
    d = obj.distributor
    comm = d.comm
    ax, start, step, n = e[1], e[2], e[4], e[5]
    o = k.out_of[ax]
    R = k.out_shape
    offs = d.bounds()
    P = comm.size
    ranges = [jrange(start, step, n, offs[r], offs[r + 1]) for r in range(P)]
    j0, j1 = ranges[comm.rank]
    local = emit(k, {ax: localize_slice(start, step, j0, j1, offs[comm.rank])})
    piece = obj.data[local]
    view = not (copy or k.advanced)
    if copy and not k.advanced:
        piece = piece.copy()
    lengths = [b - a for a, b in ranges]
    if step > 0 or P == 1:
        whole = start == 0 and step == 1 and n == d.global_shape[ax]
        lay = freeform_slab(R, comm, o, lengths, d.strategy if whole else "freeform")
        if view and sig is not None:
            if len(_PLANS) >= _PLANS_MAX:
                _PLANS.clear()
            _PLANS[(d, sig)] = (local, lay)
        return obj._view(piece, lay) if view else _from_local(piece, lay)
    if view:  # the ranks hold their ranges in descending order: a layout with given pieces
        lay = explicit(layout(mesh=(P,), split=(o,), comm=comm), R, (o,), (tuple(ranges),))
        return obj._view(piece, lay)
    dst = freeform_slab(R, comm, o, lengths[::-1])
    out = exchange(comm, piece, lambda r: box_along(R, o, *ranges[r]), dst.region)
    return _from_local(out, dst)


def _get_int_axis(obj: D2O, k: Key, e: tuple, copy: bool = True) -> Any:
    d = obj.distributor
    comm = d.comm
    ax, idx = e[1], e[2]
    owner = d.owner(idx)
    R = k.out_shape
    mine = comm.rank == owner
    if not R and not copy and not k.advanced and not k.scalar:
        return held_view(obj, k)  # numpy: a 0-d view (a[3, 4, ...])
    piece = obj.data[emit(k, {ax: idx - d.span()[0]})] if mine else None
    if R and not copy and not k.advanced:
        # a view: the owner holds all of it (a slab along the result's axis 0), nothing moves
        if not mine:
            piece = np.empty((0,) + R[1:], dtype=obj.dtype)
        lengths = [R[0] if r == owner else 0 for r in range(comm.size)]
        return obj._view(piece, freeform_slab(R, comm, 0, lengths))
    if not R:
        buf = np.empty(1, dtype=obj.dtype)
        if mine:
            buf[0] = piece
        comm.Bcast(buf, owner)
        if k.scalar:
            return buf[0]
        return _from_local(buf.reshape(()), get_distributor("not", (), comm))
    dst = spread(R, comm)
    if not mine:
        piece = np.empty((0,) * len(R), dtype=obj.dtype)
    full = full_box(R)
    out = exchange(comm, piece, lambda r: full if r == owner else None, dst.region)
    return _from_local(out, dst)


def held_view(obj: D2O, k: Key) -> D2O:
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
        bo = offsets(counts)
        lo, hi = bo[comm.rank], bo[comm.rank + 1]
        adv = {}
        mine = d.span()[0]
        for i, it in adv_items(k):
            a = np.broadcast_to(it[2], B)[lo:hi]
            adv[i] = a - mine if it[1] == ax else a
        piece = obj.data[emit(k, adv=adv)]
        return _from_local(piece, freeform_slab(R, comm, k.bpos, counts))
    dst = spread(R, comm)
    box = dst.region(comm.rank)
    shape = shape_of(box)
    if int(np.prod(R, dtype=np.int64)) * max(1, len(R)) <= _SMALL:
        return _from_local(_get_small(obj, k, dst).reshape(shape), dst)
    bsl = tuple(slice(a, b) for a, b in box[k.bpos : k.bpos + len(B)])
    advs = {it[1]: np.broadcast_to(it[2], B)[bsl] for _, it in adv_items(k)}
    owner, lin = owner_lin(d, coords_for(k, box, advs), shape)
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
    advs = {it[1]: np.broadcast_to(it[2], B) for _, it in adv_items(k)}
    owner, lin = owner_lin(d, coords_for(k, full_box(R), advs), R)
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


def mask_rows(obj: D2O, mask: D2O) -> np.ndarray | None:
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
        lay = freeform_slab((total,), comm, 0, counts)
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


def distributed_plan(obj: D2O, k: Key):
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
    shape = shape_of(box)
    error, owner, lin = None, None, None
    local = {dim: align(x, WB) for pairs in per_item.values() for dim, x in pairs}
    try:
        advs = {}
        for dim, a in local.items():
            a = np.broadcast_to(a, WB.local_shape)
            advs[dim] = normalize_index_array(a, dim, d.global_shape[dim])
        owner, lin = owner_lin(d, coords_for(k, box, advs), shape)
    except Exception as exc:  # a bad index in this rank's part of the key
        error = exc
        owner = lin = np.zeros(0, dtype=np.intp)
    return dst, shape, owner, lin, error


def lone_mask(k: Key, shape: tuple) -> D2O | None:
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
    mask = lone_mask(k, d.global_shape)
    if mask is not None:
        m = mask_rows(obj, mask)
        if m is not None:  # rows where they are: no data moves
            piece = obj.data[m]
            counts = comm.Allgather(np.array([piece.shape[0]], dtype=np.int64)).ravel()
            R = (int(counts.sum()),) + piece.shape[1:]
            return _from_local(piece, freeform_slab(R, comm, 0, counts))
    dst, shape, owner, lin, error = distributed_plan(obj, k)
    M, _ = count_matrix(comm, owner, error, agree=True)
    return _from_local(fetch(comm, obj.data, owner, lin, M).reshape(shape), dst)
