"""Setting data: ``obj[key] = value`` and per-rank (local) keys (see `d2o.ops.indexing`)."""

from __future__ import annotations

from math import prod
from typing import Any

import numpy as np

from ..array.align import align
from ..array.base import Array as D2O
from ..array.base import from_local as _from_local
from ..array.slabs import as_slab
from ..core.comm import Comm
from ..core.errors import (
    agree,
    agreed,
    check_gather,
)
from ..core.keys import (
    Key,
    canonical,
    coords_for,
    emit,
    jrange,
    localize_slice,
)
from ..core.librarian import d2o_librarian
from ..layouts.distributors import get_distributor
from ..layouts.mesh import is_mesh
from ..move.halo import Parts, rows_for, slab_rows
from ..move.p2p import count_matrix, fetch, scatter
from ..move.redistribution import describe, exchange, redistribute
from .fancy import set_rows
from .getting import distributed_plan, lone_mask, mask_rows, plain_key
from .keyplan import (
    adv_items,
    box_along,
    canonical_key,
    freeform_slab,
    full_box,
    owner_lin,
    shape_of,
    spread,
)

__all__: list[str] = []

_NUMERIC = (int, float, complex, bool, np.number, np.bool_)


# -- setting --------------------------------------------------------------------


def _as_value(obj: D2O, value: Any):
    """(numpy value cast to obj's dtype, None) or (None, distributed value)."""
    if isinstance(value, D2O):
        vd = value.distributor
        if vd.replicated or vd.comm.size == 1:
            return np.asarray(value.data, dtype=obj.dtype), None
        return None, value
    return np.asarray(value, dtype=obj.dtype), None


def check_mask_value(key: Any, value: Any, ndim: int) -> None:
    """numpy's rule for a key that is one boolean array of the array's ``ndim``: the
    value is 0-d or 1-d (a mask of fewer axes takes values of the selection's shape)."""
    if type(key) is tuple:
        if len(key) != 1:
            return
        key = key[0]
    if (
        isinstance(key, (np.ndarray, D2O))
        and key.dtype == bool
        and key.ndim == ndim
        and np.ndim(value) > 1
    ):
        raise TypeError(
            "NumPy boolean array indexing assignment requires a 0 or 1-dimensional input, "
            f"input has {np.ndim(value)} dimensions"
        )


def check_value(vshape: tuple, R: tuple) -> tuple:
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


def write_parts(dest: np.ndarray | None, parts: Parts) -> None:
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


def set_items(obj: D2O, key: Any, value: Any) -> None:
    d = obj.distributor
    comm = d.comm
    if comm.size == 1 and plain_key(key):
        obj.data[key] = value.data if isinstance(value, D2O) else value
        return None
    if set_rows(obj, key, value, check_value) is not NotImplemented:
        return None
    if isinstance(value, D2O) and is_mesh(value.distributor):
        value = as_slab(value)  # the value's slab equivalent (one exchange of the value)
    moves = not plain_key(key) or (
        isinstance(value, D2O) and not value.distributor.replicated and comm.size > 1
    )
    if moves:  # a distributed key or value: validation is agreed before anything moves
        error, k, val, dval = None, None, None, None
        try:
            k = canonical_key(obj, key)
            val, dval = _as_value(obj, value)
            check_mask_value(key, val if dval is None else dval, obj.ndim)
            if not k.distributed:
                check_value(val.shape if dval is None else dval.shape, k.out_shape)
        except Exception as exc:
            error = exc
        agree(comm, error)
    else:
        k = canonical_key(obj, key)
        val, dval = _as_value(obj, value)
        check_mask_value(key, val, obj.ndim)
    if k.distributed:
        return _set_distributed(obj, k, val, dval)
    R = k.out_shape
    check_value(val.shape if dval is None else dval.shape, R)
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
            write_parts(obj.data[idx] if j1 > j0 else None, parts)
            return None
        if dval is not None:
            part = _value_parts(dval, R, lambda r: box_along(R, o, *ranges[r]))
        else:
            part = _cut(val, R, o, j0, j1)
        if j1 > j0:
            obj.data[idx] = part
        return None
    if e[0] == "i":
        idx = e[2]
        owner = d.owner(idx)
        if dval is not None:
            full = full_box(R)
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
        for i, it in adv_items(k):
            a = np.broadcast_to(it[2], B).reshape(-1)[sel]
            adv[i] = a - lo if it[1] == ax else a
        vs = check_value(val.shape, R)
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
    dst = dval.distributor if R_is_value else spread(R, comm)
    box = dst.region(comm.rank)
    shape = shape_of(box)
    part = dval.data if R_is_value else np.broadcast_to(align(dval, dst), dst.local_shape)
    bsl = tuple(slice(a, b) for a, b in box[bpos : bpos + nb])
    advs = {it[1]: np.broadcast_to(it[2], B)[bsl] for _, it in adv_items(k)}
    owner, lin = owner_lin(d, coords_for(k, box, advs), shape)
    M, _ = count_matrix(comm, owner)
    scatter(comm, obj.data, owner, lin, np.broadcast_to(part, shape).ravel(), M)


def _set_distributed(obj: D2O, k: Key, val, dval) -> None:
    d = obj.distributor
    comm = d.comm
    mask = lone_mask(k, d.global_shape)
    if mask is not None and val is not None and val.ndim == 0:
        m = mask_rows(obj, mask)
        if m is not None:  # a scalar into the selected rows, in place
            obj.data[m] = val
            return
    dst, shape, owner, lin, error = distributed_plan(obj, k)
    try:
        R = k.out_shape
        if error is None:
            check_value(val.shape if dval is None else dval.shape, R)
    except Exception as exc:
        error = exc
    M, _ = count_matrix(comm, owner, error, agree=True)
    if dval is not None:
        part = align(dval, dst)
    else:
        vs = check_value(val.shape, k.out_shape)
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
    box = full_box(R)
    advs = {it[1]: np.broadcast_to(it[2], k.bshape) for _, it in adv_items(k)}
    owner, lin = owner_lin(d, coords_for(k, box, advs), R)
    return k, R, owner, lin


def get_local(obj: D2O, key: Any) -> Any:
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
    return _from_local(vals.reshape(R), freeform_slab(gshape, comm, 0, [s[0] for s in shapes]))


def set_local(obj: D2O, to_key: Any, data: Any, from_key: Any) -> None:
    d = obj.distributor
    comm = d.comm
    to_key = _reassemble(comm, to_key)
    # ``data`` is a per-rank argument: some ranks may pass a distributed object and others
    # not, so the ranks first agree on what was passed (one small allgather).
    mine = data.index if isinstance(data, D2O) else None
    passed = comm.allgather(mine) if comm.size > 1 else [mine]
    if from_key is not None and mine is not None and len(set(passed)) == 1:
        # every rank names the same distributed object: fetch just the selected elements
        data = get_local(data, from_key)
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
        vs = check_value(val.shape, R)
        vals = np.broadcast_to(val.reshape(vs), R).ravel()
    except Exception as exc:
        error = exc
    M, _ = count_matrix(comm, owner, error, agree=True)
    scatter(comm, obj.data, owner, lin, vals, M, replicated=d.replicated)
