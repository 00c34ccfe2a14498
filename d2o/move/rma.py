"""One-sided access to a distributed array, as in Global Arrays: get, put, accumulate and
atomic element updates on any region, by any rank, without the owners taking part.

``w = x.window()`` (collective) copies every rank's piece of ``x`` into window memory
that MPI allocates (`d2o.core.window`; why MPI's memory: see there) and opens a
passive-target epoch to all ranks.  Gets and puts to ranks whose memory MPI shares with
this process (those of its node) are numpy copies on that memory, a one-element get a
load; to other ranks, and with ``x.window(shared=False)``, MPI calls.  Until it closes,
any subset of ranks may call, at any time and independently:

- ``w.get(key)``: the numpy array ``x[key]`` would give, read from its owners;
- ``w.put(key, values)``: ``x[key] = values`` (values broadcast as numpy does);
- ``w.accumulate(key, values, op)``: combine into ``x[key]`` with ``op`` ('sum',
  'prod', 'min', 'max', 'replace'), atomic per element (MPI's rule: concurrent
  accumulates of the same op into the same element never lose an update);
- ``w.fetch_and_add(index, value)`` and ``w.compare_and_swap(index, compare, value)``
  on one element (atomic; they return the element's previous value);
- ``w.gather(indices)``, ``w.scatter(indices, values)``, ``w.scatter_acc(indices,
  values, op)``: the same for element lists (one integer array per axis, as numpy's
  ``x[indices]``; Global Arrays' gather, scatter and scatter_acc);
- ``w.flush()``: every operation this rank issued is complete at its targets.

Keys: integers, slices (any step), Ellipsis, and one 1-D integer array among slices
(as numpy).  Each key is split by the layout's own regions (``region(rank)``: slabs,
process meshes, block-cyclic runs), so each owner is read or written once per call,
with one copy or one MPI call that moves exactly the selected elements (a numpy index
of the target's memory, or a subarray or indexed datatype at the target).  A key of one
integer per axis skips the split: the window remembers, per cell between the layout's
run bounds, which rank holds it and at what offset.  Elements held by several ranks
(replicated layouts, replica mesh axes) are read and written at one holder, the one
that sends them when data moves (``source``); the other holders get the final values
when the window closes.

Visibility: an operation is complete at its target once the origin has called
``w.flush()`` (get, fetch_and_add and compare_and_swap are complete when they return).
Another rank sees it in its own later get after it has learnt, by any synchronisation
(a message, a barrier), that the origin flushed.  ``x`` itself is not changed while the
window is open: ``w.close()`` (collective; also at the end of a ``with`` block) writes
the window's final contents into ``x`` on every rank.  ``w.local`` is this rank's piece
in window memory, for direct loads and stores (valid until the window closes).

Bad input (a key out of bounds, values that do not broadcast, an unknown op) raises on
the calling rank only, before anything moves; a closed window raises ValueError.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from typing import Any

import numpy as np

from ..core.keys import normalize_index_array
from ..core.window import RMA_OPS, RawWindow
from ..layouts.distributors import as_runs, entry_indices, run_length

__all__ = ["Window", "window"]


def window(obj: Any, shared: bool = True) -> Window:
    """Collective: a window over ``obj``'s pieces for one-sided access (see the module;
    ``shared=False``: every get and put an MPI call, even inside a node)."""
    return Window(obj, shared)


#: cells of one-element keys remembered per window (`Window._point`)
_CELLS = 4096


def _runs(entry: tuple) -> list:
    """One axis of a region as rows (start, stop, local position of the start)."""
    rows, pos = [], 0
    for lo, hi in as_runs(entry):
        rows.append((int(lo), int(hi), pos))
        pos += int(hi - lo)
    return rows


def _blocks(loc: np.ndarray) -> list:
    """Ascending local positions as (position, length) runs of consecutive ones."""
    if loc.size == 0:
        return []
    cut = np.flatnonzero(np.diff(loc) != 1) + 1
    starts = np.concatenate(([0], cut))
    stops = np.concatenate((cut, [loc.size]))
    return [(int(loc[a]), int(b - a)) for a, b in zip(starts, stops)]


class _Plan:
    """A key resolved against the layout: per axis the sorted unique global indices,
    where each index of the key sits among them (None: in place), and whether they are
    consecutive; the result's shape."""

    __slots__ = ("uniq", "inverse", "step1", "ranges", "shape", "plain")

    def __init__(self, axes: list, shape: tuple) -> None:
        self.uniq, self.inverse, self.step1, self.ranges = [], [], [], []
        for idx in axes:
            if isinstance(idx, slice):  # (the indices of a slice, resolved): no sorting
                ix = np.arange(idx.start, idx.stop, idx.step, dtype=np.intp)
                u = ix if idx.step > 0 else ix[::-1]
                # ascending (first, step, count): positions found by arithmetic
                self.ranges.append((int(u[0]), abs(idx.step), ix.size) if ix.size else None)
                inv = None if idx.step > 0 or ix.size < 2 else np.arange(ix.size)[::-1]
                self.step1.append(abs(idx.step) == 1 or ix.size < 2)
            else:
                u, inv = np.unique(idx, return_inverse=True)
                inv = inv.reshape(-1)
                self.ranges.append(None)
                if u.size == idx.size and np.array_equal(u, idx):
                    inv = None
                self.step1.append(u.size < 2 or bool(u[-1] - u[0] == u.size - 1))
            self.uniq.append(u)
            self.inverse.append(inv)
        self.plain = all(i is None for i in self.inverse)  # the block is the result
        self.shape = shape

    @property
    def block_shape(self) -> tuple:
        return tuple(u.size for u in self.uniq)

    def outer(self) -> tuple:
        """The open mesh that spreads the block over the key's result."""
        return np.ix_(*[np.arange(u.size) if i is None else i
                        for u, i in zip(self.uniq, self.inverse)])  # fmt: skip

    def spread(self, block: np.ndarray) -> np.ndarray:
        """The key's result from the block of unique indices."""
        if self.plain:
            return block.reshape(self.shape)
        return block[self.outer()].reshape(self.shape)


def _ix(sel: list) -> tuple:
    """An index of the block from per-axis selections (slices or position arrays)."""
    if all(isinstance(s, slice) for s in sel):
        return tuple(sel)
    return np.ix_(*[np.arange(s.start, s.stop) if isinstance(s, slice) else s for s in sel])


def _size(s: Any) -> int:
    return s.stop - s.start if isinstance(s, slice) else s.size


class Window:
    """One-sided access to a distributed array's pieces (see the module); made by
    ``x.window()``."""

    __slots__ = ("_obj", "_dist", "_raw", "_dtype", "_targets", "_mine", "_closed", "local",
                 "_shape", "_cuts", "_cells")  # fmt: skip

    def __init__(self, obj: Any, shared: bool = True) -> None:
        d = obj.distributor
        c = d.comm
        self._obj, self._dist, self._dtype = obj, d, np.dtype(obj.dtype)
        self._closed = True
        # the holders read and written: per rank its piece's shape and per-axis runs
        self._targets = []
        for r in range(c.size):
            box = d.source(r)
            if box is None:
                continue
            sizes = [run_length(e) for e in box]
            if math.prod(sizes) == 0 and box:
                continue
            self._targets.append((r, sizes, [_runs(e) for e in box]))
        # one-element keys: per axis the sorted run bounds of every holder; between two
        # bounds of every axis (a cell) one holder holds every element, at a fixed
        # offset from its flat position (`_point` caches that per cell as it meets it)
        self._shape = tuple(d.global_shape)
        cuts: list = [set() for _ in self._shape]
        for _r, _sizes, runs in self._targets:
            for bounds, rows in zip(cuts, runs):
                for lo, hi, _pos in rows:
                    bounds.update((lo, hi))
        self._cuts = [sorted(c) for c in cuts]
        self._cells: dict = {}
        self._mine = d.source(c.rank) is not None
        n = obj.data.size if self._mine else 0
        self._raw = RawWindow(c, n * self._dtype.itemsize, self._dtype, shared)
        self.local = self._raw.memory.view(self._dtype)
        if self._mine:
            self.local = self.local.reshape(obj.data.shape)
            self.local[...] = obj.data
        self._raw.start()
        self._closed = False

    def __enter__(self) -> Window:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<d2o.Window {state} shape={self._dist.global_shape} dtype={self._dtype}>"

    @property
    def closed(self) -> bool:
        """True once the window is closed."""
        return self._closed

    def close(self) -> None:
        """Collective: complete every operation, write the final contents into the array
        on every rank (holders of replicas read theirs from the rank that was written),
        and free the window memory.  Closing a closed window does nothing."""
        if self._closed:
            return
        raw, obj, d = self._raw, self._obj, self._dist
        raw.flush()
        d.comm.barrier()  # every rank's operations are complete everywhere
        raw.sync()  # this rank's loads see them
        if self._mine:
            obj.data[...] = self.local
        elif obj.data.size:
            axes = [entry_indices(e) for e in d.region(d.comm.rank)]  # ascending: in place
            obj.data[...] = self._fetch(_Plan(axes, obj.data.shape))
        d.comm.barrier()  # the replicas have read theirs
        self._closed = True
        self.local = np.zeros((0,), dtype=self._dtype)
        raw.close()

    # -- keys -----------------------------------------------------------------
    def _check(self) -> None:
        if self._closed:
            raise ValueError("operation on a closed window")

    def _point(self, key: Any) -> tuple[int, int] | None:
        """(holder rank, flat position in its piece) where ``key`` is one integer per axis
        within bounds; None for any other key (`_plan` resolves it, or raises)."""
        shape = self._shape
        if type(key) is not tuple:
            if len(shape) != 1 or type(key) is not int:
                return None
            key = (key,)
        if len(key) != len(shape):
            return None
        idx = []
        for k, n in zip(key, shape):
            if type(k) is not int:
                if not isinstance(k, np.integer):
                    return None
                k = int(k)
            if k < 0:
                k += n
            if not 0 <= k < n:
                return None
            idx.append(k)
        cell = tuple([bisect_right(c, k) for c, k in zip(self._cuts, idx)])
        hit = self._cells.get(cell)
        if hit is None:
            hit = self._cell(idx, cell)
        r, flat, strides = hit
        for k, s in zip(idx, strides):
            flat += k * s
        return r, flat

    def _cell(self, idx: list, cell: tuple) -> tuple:
        """(holder, offset, strides) of the cell of the element ``idx``: its flat position
        in the holder's piece is offset + the dot product of ``idx`` and strides."""
        for r, sizes, runs in self._targets:
            shift = []
            for k, rows in zip(idx, runs):
                found = [pos - lo for lo, hi, pos in rows if lo <= k < hi]
                if not found:
                    break
                shift.append(found[0])
            else:
                strides = [math.prod(sizes[a + 1 :]) for a in range(len(sizes))]
                hit = (r, sum(a * b for a, b in zip(shift, strides)), strides)
                if len(self._cells) >= _CELLS:
                    self._cells.clear()
                self._cells[cell] = hit
                return hit
        raise IndexError("element not held by any rank")  # pragma: no cover

    def _plan(self, key: Any) -> _Plan:
        """Resolve ``key`` (numpy's IndexError for a bad one)."""
        self._check()
        shape = self._dist.global_shape
        items = list(key) if isinstance(key, tuple) else [key]
        n_ell = sum(1 for k in items if k is Ellipsis)
        if n_ell > 1:
            raise IndexError("an index can only have a single ellipsis ('...')")
        if n_ell:
            i = items.index(Ellipsis)
            rest = len(items) - 1
            items[i : i + 1] = [slice(None)] * max(len(shape) - rest, 0)
        if len(items) > len(shape):
            raise IndexError(
                f"too many indices for array: array is {len(shape)}-dimensional, "
                f"but {len(items)} were indexed"
            )
        items += [slice(None)] * (len(shape) - len(items))
        arrays = [k for k in items if not isinstance(k, (slice, int, np.integer))]
        ints = [k for k in items if isinstance(k, (int, np.integer))]
        if len(arrays) > 1 or (arrays and ints):
            raise IndexError("window keys take one integer array, among slices only")
        axes: list = []
        out: list = []
        for a, (k, n) in enumerate(zip(items, shape)):
            if isinstance(k, slice):
                start, stop, step = k.indices(n)
                cnt = len(range(start, stop, step))
                idx = slice(start, start + cnt * step, step)
                out.append(cnt)
            elif isinstance(k, (int, np.integer)) and not isinstance(k, bool):
                i = int(k)
                if not -n <= i < n:
                    raise IndexError(f"index {i} is out of bounds for axis {a} with size {n}")
                idx = slice(i % n, i % n + 1, 1)
            else:
                arr = np.asarray(k)
                if arr.dtype.kind not in "iu" or arr.ndim != 1:
                    raise IndexError("window keys take 1-D integer arrays only")
                found = normalize_index_array(arr.astype(np.intp), a, n)
                out.append(found.size)
                axes.append(found)
                continue
            axes.append(idx)
        return _Plan(axes, tuple(out))

    def _pieces(self, plan: _Plan) -> list:
        """Per holder the part of the block it holds: (rank, its piece's shape, per axis
        the (position, length) blocks in its piece, per axis the positions in the block:
        a slice, or an array where the holder has several runs)."""
        parts = []
        for r, sizes, runs in self._targets:
            sel: list = []
            blocks: list = []
            for u, step1, rng, rows in zip(plan.uniq, plan.step1, plan.ranges, runs):
                if len(rows) == 1:  # one run: one range of the block
                    lo, hi, pos = rows[0]
                    if rng is not None:  # u = first + step * arange(count)
                        first, step, count = rng
                        j0 = min(max(-((first - lo) // step), 0), count)
                        j1 = min(max(-((first - hi) // step), 0), count)
                    else:
                        j0, j1 = (int(j) for j in np.searchsorted(u, (lo, hi)))
                    if j1 <= j0:
                        break
                    sel.append(slice(j0, j1))
                    if step1:
                        g0 = rng[0] + j0 * rng[1] if rng is not None else int(u[j0])
                        blocks.append([(pos + g0 - lo, j1 - j0)])
                    else:
                        blocks.append(_blocks(pos + u[j0:j1] - lo))
                    continue
                js, ls = [], []
                for lo, hi, pos in rows:
                    j0, j1 = np.searchsorted(u, (lo, hi))
                    if j1 > j0:
                        js.append(np.arange(j0, j1))
                        ls.append(pos + u[j0:j1] - lo)
                if not js:
                    break
                sel.append(np.concatenate(js))
                blocks.append(_blocks(np.concatenate(ls)))
            else:
                parts.append((r, sizes, blocks, sel))
        return parts

    @staticmethod
    def _whole(sel: list, shape: tuple) -> bool:
        return all(_size(s) == n for s, n in zip(sel, shape))

    def _fetch(self, plan: _Plan) -> np.ndarray:
        shape = plan.block_shape
        block = np.empty(shape, dtype=self._dtype)
        for r, sizes, blocks, sel in self._pieces(plan):
            if self._whole(sel, shape):
                self._raw.get(block, r, sizes, blocks)
                continue
            if self._raw.peer(r) is not None and all(isinstance(s, slice) for s in sel):
                self._raw.get(block[tuple(sel)], r, sizes, blocks)  # straight into place
                continue
            buf = np.empty(tuple(_size(s) for s in sel), dtype=self._dtype)
            self._raw.get(buf, r, sizes, blocks)
            block[_ix(sel)] = buf
        self._raw.flush()
        return plan.spread(block)

    def _values(self, plan: _Plan, values: Any) -> np.ndarray:
        """``values`` as the key's result shape (numpy's ValueError when they do not fit)."""
        v = np.asarray(values)
        try:
            v = np.broadcast_to(v, plan.shape)
        except ValueError:
            raise ValueError(
                f"could not broadcast input array from shape {v.shape} into shape {plan.shape}"
            ) from None
        return v.astype(self._dtype, copy=False)

    def _block(self, plan: _Plan, v: np.ndarray, ufunc: Any) -> np.ndarray:
        """The block of unique indices from the key's values (repeated indices: the last
        value, or the values combined with ``ufunc``)."""
        if plan.plain:  # (`_send` makes it contiguous where an MPI call sends it)
            return v.reshape(plan.block_shape)
        ix = plan.outer()
        vv = v.reshape(tuple(u.size if i is None else i.size
                             for u, i in zip(plan.uniq, plan.inverse)))  # fmt: skip
        if ufunc is None:
            block = np.empty(plan.block_shape, dtype=self._dtype)
            block[ix] = vv
            return block
        ident = {np.add: 0, np.multiply: 1}
        if ufunc in ident:
            block = np.full(plan.block_shape, ident[ufunc], dtype=self._dtype)
            ufunc.at(block, ix, vv)
            return block
        # min / max of repeated indices: the first value seeds the block
        block = np.empty(plan.block_shape, dtype=self._dtype)
        block[tuple(i[(slice(None, None, -1),) * i.ndim] for i in ix)] = vv[
            (slice(None, None, -1),) * vv.ndim
        ]
        ufunc.at(block, ix, vv)
        return block

    def _send(self, plan: _Plan, block: np.ndarray, op: str | None) -> None:
        shape = plan.block_shape
        for r, sizes, blocks, sel in self._pieces(plan):
            buf = block if self._whole(sel, shape) else block[_ix(sel)]
            if op is not None or self._raw.peer(r) is None:  # an MPI call sends it
                buf = np.ascontiguousarray(buf)
            if op is None:
                self._raw.put(buf, r, sizes, blocks)
            else:
                self._raw.accumulate(buf, r, sizes, blocks, op)

    # -- the operations ---------------------------------------------------------
    def get(self, key: Any = ()) -> np.ndarray:
        """One-sided: ``x[key]`` as a numpy array, read from its owners (complete at return)."""
        if self._closed:
            raise ValueError("operation on a closed window")
        hit = self._point(key)
        if hit is not None:  # one element: a load or one MPI_Get
            return self._raw.load(hit[0], hit[1])
        plan = self._plan(key)
        out = self._fetch(plan)
        return out[()] if out.ndim == 0 else out

    def put(self, key: Any, values: Any) -> None:
        """One-sided: ``x[key] = values``; complete at the owners after `flush`."""
        if self._closed:
            raise ValueError("operation on a closed window")
        hit = self._point(key)
        if hit is not None:
            v = np.asarray(values)
            if v.ndim == 0:  # one element: a store or one MPI_Put
                self._raw.store(v.astype(self._dtype, copy=False).reshape(1), hit[0], hit[1])
                return
        plan = self._plan(key)
        v = self._values(plan, values)
        self._send(plan, self._block(plan, v, None), None)

    def accumulate(self, key: Any, values: Any, op: str = "sum") -> None:
        """One-sided: combine ``values`` into ``x[key]`` with ``op`` ('sum', 'prod', 'min',
        'max', 'replace'), atomic per element; complete at the owners after `flush`.
        Repeated indices of an integer-array key combine all their values."""
        self._op_ok(op)
        plan = self._plan(key)
        v = self._values(plan, values)
        self._send(plan, self._block(plan, v, RMA_OPS[op]), op)

    def _op_ok(self, op: str) -> None:
        """ValueError for an unknown op, TypeError for one the dtype lacks."""
        if op not in RMA_OPS:
            raise ValueError(f"unknown accumulate op {op!r}; expected one of {list(RMA_OPS)}")
        if op in ("min", "max") and self._dtype.kind == "c":
            raise TypeError(f"accumulate op {op!r} is not defined for complex arrays")
        if self._dtype.kind == "b" and op != "replace":
            raise TypeError(f"accumulate op {op!r} is not defined for boolean arrays")

    def _element(self, index: Any) -> tuple[int, int]:
        """(holder rank, flat position in its piece) of the element at ``index``."""
        self._check()
        hit = self._point(index)
        if hit is not None:
            return hit
        plan = self._plan(index)
        if plan.shape:
            raise IndexError("an element index needs one integer per axis")
        for r, sizes, blocks, _ in self._pieces(plan):
            pos = [b[0][0] for b in blocks]
            return r, int(np.ravel_multi_index(pos, sizes)) if sizes else 0
        raise IndexError("element not held by any rank")  # pragma: no cover

    def fetch_and_add(self, index: Any, value: Any) -> Any:
        """One-sided, atomic: add ``value`` to the element at ``index``; returns the element
        before the addition (complete at return)."""
        r, disp = self._element(index)
        v = np.asarray(value).astype(self._dtype, copy=False).reshape(1)
        if self._dtype.kind == "b":
            raise TypeError("fetch_and_add is not defined for boolean arrays")
        return self._raw.fetch_and_op(np.ascontiguousarray(v), r, disp, "sum")[0]

    def compare_and_swap(self, index: Any, compare: Any, value: Any) -> Any:
        """One-sided, atomic: the element at ``index`` becomes ``value`` where it equals
        ``compare`` (bit for bit); returns the element before (complete at return)."""
        r, disp = self._element(index)
        v = np.array(value, dtype=self._dtype).reshape(1)
        c = np.array(compare, dtype=self._dtype).reshape(1)
        return self._raw.compare_and_swap(v, c, r, disp)[0]

    # -- element lists (Global Arrays' gather, scatter and scatter_acc) ---------------------
    def _elements(self, indices: Any) -> tuple[tuple, list]:
        """The shape of the broadcast ``indices`` (one integer array per axis) and per
        holder: (rank, its piece's size, the sorted unique flat positions there, where each
        element of the list sits among them, the elements' positions in the list)."""
        self._check()
        shape = self._dist.global_shape
        idx = list(indices) if isinstance(indices, (tuple, list)) else [indices]
        if len(idx) != len(shape):
            raise IndexError(f"element lists need one index array per axis ({len(shape)})")
        arrs = [np.asarray(i) for i in idx]
        if any(a.dtype.kind not in "iu" for a in arrs):
            raise IndexError("element lists take integer index arrays")
        try:
            arrs = list(np.broadcast_arrays(*arrs))
        except ValueError:
            raise IndexError("shape mismatch: indexing arrays could not be broadcast") from None
        out = arrs[0].shape if arrs else ()
        coords = [normalize_index_array(a.reshape(-1), k, n) for k, (a, n) in
                  enumerate(zip(arrs, shape))]  # fmt: skip
        count = int(np.prod(out, dtype=np.int64))
        parts = []
        for r, sizes, runs in self._targets:
            held = np.ones(count, dtype=bool)
            flat = np.zeros(count, dtype=np.intp)
            for c, axis_runs, n in zip(coords, runs, sizes):
                rows = np.array(axis_runs, dtype=np.intp).reshape(-1, 3)
                j = np.searchsorted(rows[:, 0], c, side="right") - 1
                j = np.maximum(j, 0)
                inside = (c < rows[j, 1]) & (c >= rows[j, 0])
                held &= inside
                flat = flat * n + np.where(inside, rows[j, 2] + c - rows[j, 0], 0)
            where = np.flatnonzero(held)
            if where.size:
                u, inv = np.unique(flat[where], return_inverse=True)
                parts.append((r, math.prod(sizes), u, inv.reshape(-1), where))
        return out, parts

    def gather(self, indices: Any) -> np.ndarray:
        """One-sided: the elements at ``indices`` (one integer array per axis, broadcast
        together, as ``x[indices]``), read from their owners (complete at return)."""
        out, parts = self._elements(indices)
        res = np.empty(int(np.prod(out, dtype=np.int64)), dtype=self._dtype)
        for r, size, u, inv, where in parts:
            buf = np.empty(u.size, dtype=self._dtype)
            self._raw.get(buf, r, [size], [_blocks(u)])
            res[where] = buf[inv]
        self._raw.flush()
        return res.reshape(out)

    def _scatter(self, indices: Any, values: Any, op: str | None) -> None:
        out, parts = self._elements(indices)
        v = np.asarray(values)
        try:
            v = np.broadcast_to(v, out).astype(self._dtype, copy=False).reshape(-1)
        except ValueError:
            raise ValueError(
                f"could not broadcast input array from shape {v.shape} into shape {out}"
            ) from None
        ufunc = None if op is None else RMA_OPS[op]
        for r, size, u, inv, where in parts:
            if ufunc in (np.add, np.multiply):
                buf = np.full(u.size, 0 if ufunc is np.add else 1, dtype=self._dtype)
                ufunc.at(buf, inv, v[where])
            else:  # put, replace: the last value; min, max: seeded by the first
                buf = np.empty(u.size, dtype=self._dtype)
                buf[inv[::-1]] = v[where][::-1]
                if ufunc is None or op == "replace":
                    buf[inv] = v[where]
                else:
                    ufunc.at(buf, inv, v[where])
            if op is None:
                self._raw.put(buf, r, [size], [_blocks(u)])
            else:
                self._raw.accumulate(buf, r, [size], [_blocks(u)], op)

    def scatter(self, indices: Any, values: Any) -> None:
        """One-sided: ``x[indices] = values`` for an element list (one integer array per
        axis); complete at the owners after `flush`."""
        self._scatter(indices, values, None)

    def scatter_acc(self, indices: Any, values: Any, op: str = "sum") -> None:
        """One-sided: combine ``values`` into the elements at ``indices`` with ``op`` (as
        `accumulate`; repeated elements combine all their values: a particle deposit);
        complete at the owners after `flush`."""
        self._op_ok(op)
        self._scatter(indices, values, op)

    def flush(self) -> None:
        """One-sided: complete at their targets every operation this rank issued, and let
        `local` see what others completed in this rank's piece."""
        self._check()
        self._raw.flush()
