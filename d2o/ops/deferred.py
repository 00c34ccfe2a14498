"""Deferred element-wise work (the ``lazy`` option): expressions recorded, evaluated fused.

The ``lazy`` option is on by default (``d2o.set_options(lazy=False)`` or ``D2O_LAZY=0``
turns it off): the runtime (`d2o.runtime.funnel`) hands the outermost operator and ufunc
calls to `record`, which returns a *deferred array* where the result has at least
``lazy_min`` elements (global; smaller calls run at once, where recording costs more
than fusion saves): a `d2o.distributed_data_object` whose ``data`` slot is unset and
whose ``_expr`` is a `Node` of the expression (operands: other nodes, this rank's
pieces of the leaf arrays, scalars).  Its ``dtype`` and ``local_shape`` are known
without evaluating it.  Nothing is computed and nothing moves where the d2o operands
share one layout.  Operands of other shapes (broadcasting: a row against a matrix,
``x[np.newaxis, :] - x[:, np.newaxis]``) are aligned to the result's layout when the
operation is recorded, as the eager call aligns them (`d2o.array.align.align`: a
gather of a distributed row, for instance).  Shifted views on several ranks (slabs
along one axis cut differently, as in a stencil) are recorded too: the expression
takes the layout of the operands' mean bounds (`_shifted_layout`: the centre view's,
which is the target of ``u[1:-1, 1:-1] = ...``), each other operand's boundary rows
come from its neighbours when the operation is recorded (point to point,
`d2o.move.halo.rows_for`), and the fused kernel runs segment by segment (interior,
then boundary rows; `d2o.ops.fused`).

Forcing.  The first read of a deferred array's ``data`` (its class's ``__getattr__``,
`d2o.api.deferred`: the one choke point through which every operation reaches a piece)
evaluates its tree with `d2o.ops.fused.run`: one fused kernel, locally.  While anything
is pending the runtime flags every operation, and before any that may write into an
array's memory it evaluates every pending array (`flush`): such an operation can
therefore never change what a pending expression reads.  Reductions without ``out=``
and the ``@`` operator only read: before them nothing is evaluated, and a sum of a
deferred expression runs fused with it, the expression never stored
(`d2o.ops.fused.reduce_sum`: ``((a - b) ** 2).sum()``, Monte Carlo pi's count, Jacobi's
``add.reduce(A * h, 1)`` in one pass each); the ravel of a temporary stays deferred
(`flattened`) and a dot of two deferred vectors sums their products in one pass
(`d2o.ops.linalg`: Laplace's ``dot(v, v)`` of ``v = (u - u_old).ravel()``).  A costly node (a power, a library
function) that several expressions read is evaluated once and kept (`Node.shared`).
Assignments write the expression straight into the target (`assign`, `inplace`), after
evaluating only the pending arrays that read the target's memory.  A temporary right
side (nothing but the statement holds it) that reads the target itself, as in
``u[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + ...)``, is written in one pass where a
compiled loop can hold the rows still to be read (`d2o.ops.loops`); an expression whose
leaves overlap the target otherwise is computed into a temporary first (numpy's
semantics: ``a[1:] = a[:-1] + 1``, ``a += a[::-1]``).  A tree grows to `LIMIT` nodes at
most (its operands are evaluated first); ``d2o.evaluate`` forces explicitly; turning
``lazy`` off evaluates everything pending.

Not deferred (they run eagerly, as with ``lazy`` off): results below ``lazy_min``
elements, ``out=``, ``where=`` and other keywords, ufunc methods (``reduce``, ...),
operands that are not d2o arrays or scalars, broadcast operands on process meshes or
that would arrive as boundary rows (shifted slabs of another shape), d2o operands whose
layouts differ otherwise than shifted slabs (whole arrays, none a view, cut
differently: the first operand's layout, as eager operations give), 0-d views,
operations on process meshes without a mesh algorithm, and inner calls of other
operations.  In controller mode every rank records the same calls (the decisions
depend on global facts; whether an assignment's right side or a raveled array is a
temporary comes from rank 0's count: `d2o.core.hooks.temporary`).  Known limit: a numpy array obtained earlier with
``get_local_data(copy=False)`` (or ``x.data``) and written into by numpy while an
expression reading it is pending is not seen; a deferred copy (`copied`) is safe from
it: it is made only where nothing holds the piece, and ``x.data`` read outside d2o
evaluates it first (`release`).
"""

from __future__ import annotations

import atexit
import math
import sys
import weakref
from typing import Any

import numpy as np

from ..array.align import SCALARS, align, result_layout, shifted_rows
from ..array.base import Array as D2O
from ..array.base import ArrayBase, deferred, settle, unwatch, watch
from ..core import buffers, hooks
from ..core.config import OPTIONS
from ..core.errors import defer, user_site
from ..core.registry import operation
from ..layouts.distributors import HeldScalar, SlabDistributor, get_distributor, slab_distributor
from ..move.halo import Parts, rows_for, slab_rows
from . import fused
from .indexing import getitem
from .reductions import agreed_max, flat_layout

__all__ = [
    "Node",
    "record",
    "inplace",
    "assign",
    "flattened",
    "copied",
    "flush",
    "evaluate",
    "pending",
    "LIMIT",
]

#: The most nodes one expression holds; a larger one evaluates its operands first.
LIMIT = 32
#: ``sys.getrefcount`` of a temporary right side inside `assign` (the caller's stack, the
#: argument tuples of the runtime's frames and `assign`'s own name): a right side held
#: by a name or a container counts more and is evaluated on its own (tests/test_fusion.py
#: checks both)
TEMPORARY_REFS = 5
#: The same for the array `flattened` is given (``(u - u_old).ravel()``; a named one counts 5).
RAVEL_REFS = 4
#: ``sys.getrefcount`` of an array's piece in `copied` when nothing but the array holds it
#: (its slot, the name and the argument): more, and a view or a local array may write it
#: while the copy is pending, so the copy is made at once.
PIECE_REFS = 3
#: True where `_hand_over`'s reference counts hold (CPython before 3.14, which borrows
#: references on its stack and counts fewer: an outside holder could hide there).
COUNTED = sys.version_info < (3, 14)
#: The ufunc of a deferred copy's node (``u.copy()``: numpy's positive is an exact copy of
#: every numeric dtype).
COPY = np.positive
#: id(array) -> weak reference, for every deferred array not evaluated yet.
PENDING: dict[int, Any] = {}
#: id(deferred copy) -> weak reference to the array it copies (watched while it waits:
#: `copied`, `release`).
SOURCES: dict[int, Any] = {}
_DATA = ArrayBase.__dict__["data"]  # the slot itself: reading it never evaluates


class Node:
    """One recorded element-wise operation: ``ufunc(*args)`` on this rank's pieces.

    ``args``: nodes, numpy arrays (pieces of leaf arrays, aligned to the result's
    layout) and scalars.  ``value``: the result once evaluated (then ``args`` is
    dropped, so that the leaves' memory is not held).  ``err``: ``np.geterr()`` when
    it was recorded (divide, over, under, invalid)."""

    __slots__ = ("ufunc", "call", "args", "dtype", "shape", "size", "ndim", "count", "err",
                 "comm", "value", "uses", "owner", "site")  # fmt: skip

    def __init__(self, ufunc: np.ufunc, args: tuple, dtype: np.dtype, shape: tuple,
                 err: tuple, comm: Any) -> None:  # fmt: skip
        self.ufunc, self.args, self.dtype, self.err, self.comm = ufunc, args, dtype, err, comm
        self.call: Any = ufunc  # what numpy runs: the Python operator for an operator's node
        self.shape, self.ndim = shape, len(shape)
        self.size = math.prod(shape)
        self.uses: int = 0  # how many recorded nodes read this one
        self.owner: Any = None  # a weak reference to the deferred array it is the piece of
        self.site: str | None = None  # the user's ``file:line`` that recorded it
        count = 1
        for a in args:
            if type(a) is Node:
                count += a.count
                a.uses += 1
        self.count: int = count
        self.value: np.ndarray | None = None

    def derived(self, args: tuple, shape: tuple) -> Node:
        """This operation over ``args`` (rows of its operands, or its operands flattened:
        `d2o.ops.fused`) of ``shape``; every other slot as here.  Not recorded."""
        c = Node.__new__(Node)
        c.ufunc, c.call, c.args, c.dtype, c.err = self.ufunc, self.call, args, self.dtype, self.err
        c.comm, c.uses, c.owner, c.count = self.comm, self.uses, self.owner, self.count
        c.site = self.site
        c.shape, c.ndim, c.size, c.value = shape, len(shape), math.prod(shape), None
        return c

    def shared(self) -> bool:
        """True when this node's value may be read more than once: by several recorded
        nodes, or by one while the array it belongs to is still held (a name may read it
        again later).  Its evaluation is worth keeping where it is costly
        (`d2o.ops.fused`)."""
        return self.uses > 1 or (self.owner is not None and self.owner() is not None)

    def evaluate(self) -> np.ndarray:
        """The value (evaluated now, once: one fused kernel; local)."""
        if self.value is None:
            self.value, error = fused.run(self)
            self.args = ()
            self.count = 0
            if error is not None:  # raised once (at once on one process), then zeros
                defer(self.comm, error)
        return self.value

    def force(self, array: Any) -> np.ndarray:
        """Evaluate and make it ``array``'s piece (the first read of ``array.data``)."""
        value = self.evaluate()
        settle(array, value)
        _forget(id(array))
        return value

    def leaves(self) -> list:
        """The numpy arrays this expression reads."""
        if self.value is not None:
            return [self.value]
        out: list = []
        for a in self.args:
            if isinstance(a, Node):
                out.extend(a.leaves())
            elif isinstance(a, np.ndarray):
                out.append(a)
            elif isinstance(a, Parts):
                out.extend(arr for _, arr in a.pieces)
        return out


class _Ref(weakref.ref):
    """A weak reference to a pending array that knows its key in `PENDING`."""

    __slots__ = ("key",)
    key: int


def _gone(ref: Any) -> None:  # a pending array was dropped unevaluated
    if PENDING.get(ref.key) is ref:
        _forget(ref.key)


def pending(x: Any) -> bool:
    """True when ``x`` is a deferred array not evaluated yet."""
    return id(x) in PENDING and PENDING[id(x)]() is x


def _force(x: Any) -> None:
    try:
        _DATA.__get__(x, type(x))  # a piece set meanwhile (set_local_data): keep it
    except AttributeError:
        settle(x, x._expr.evaluate())
    else:
        settle(x)
    _forget(id(x))


def flush(target: np.ndarray | None = None, keep: Any = None) -> None:
    """Evaluate every pending array (with ``target``, about to be written: those reading
    its memory only, and of those only the ones whose operands there are no smaller
    than they: the others read copies of those operands instead, `_snapshot`;
    ``keep``: one not to evaluate).  Local."""
    for ref in list(PENDING.values()):
        x = ref()
        if x is None or x is keep or not pending(x):
            continue
        if target is None:
            _force(x)
            continue
        read = [v for v in x._expr.leaves() if np.may_share_memory(v, target)]
        if read and not (sum(v.size for v in read) < x._expr.size and _snapshot(x._expr, target)):
            _force(x)


def _snapshot(node: Node, target: np.ndarray, copies: dict | None = None) -> bool:
    """Make ``node``'s expression read copies of its array operands that share memory
    with ``target`` (N-body's ``x[None, :] - x[:, None]`` before ``x += ...``: copying
    ``x`` costs n elements, evaluating the difference n^2).  False where it cannot (an
    evaluated node or halo parts reading ``target``): the caller evaluates instead."""
    copies = {} if copies is None else copies
    if node.value is not None:
        return not np.may_share_memory(node.value, target)
    args = []
    for a in node.args:
        if type(a) is Node:
            if not _snapshot(a, target, copies):
                return False
        elif isinstance(a, np.ndarray) and np.may_share_memory(a, target):
            if id(a) not in copies:  # (an operand read twice: one copy)
                copies[id(a)] = a.copy()
            a = copies[id(a)]
        elif isinstance(a, Parts) and any(np.may_share_memory(v, target) for _, v in a.pieces):
            return False
        args.append(a)
    node.args = tuple(args)
    return True


def _register(node: Node, d: Any) -> Any:
    x = deferred(node, d)
    ref = PENDING[id(x)] = _Ref(x, _gone)
    ref.key = id(x)
    node.owner = ref
    if not hooks.pending[0]:  # the first pending expression: every call flagged
        hooks.pending[0] = True
        hooks.fire("pending")
    return x


def _forget(key: int) -> None:
    """Drop ``key`` from `PENDING`; after the last one, the runtime flags the element-wise
    calls alone again (`d2o.core.hooks` event "pending").  A copy's source no other
    pending copy reads is an ordinary array again (`copied`)."""
    PENDING.pop(key, None)
    if SOURCES:
        ref = SOURCES.pop(key, None)
        src = ref() if ref is not None else None
        if src is not None and not any(r() is src for r in SOURCES.values()):
            unwatch(src)
    if not PENDING and hooks.pending[0]:
        hooks.pending[0] = False
        hooks.fire("pending")


def _operand(x: Any) -> Any:
    if pending(x):
        node = x._expr
        return node.value if node.value is not None else node
    return x.data


def record(ufunc: np.ufunc, inputs: tuple, call: Any = None) -> Any:
    """``ufunc(*inputs)`` as a deferred array, or None where it is not deferred (see the
    module notes: the caller runs it eagerly).  ``call``: the Python operator an
    operator runs instead (numpy's operators have special cases: ``a ** 2`` is
    ``square``).  Local: the d2o operands share one layout."""
    call = ufunc if call is None else call
    if ufunc.nout != 1 or ufunc.signature is not None:
        return None
    arrays = []
    for x in inputs:
        if isinstance(x, D2O):
            arrays.append(x)
        elif not isinstance(x, SCALARS):
            return None
    if not arrays:
        return None
    first = arrays[0]
    shape, comm = first.shape, first.distributor.comm
    for x in arrays:
        d = x.distributor
        if d.comm is not comm or type(d) is HeldScalar:
            return None
    target = first.distributor
    broadcast = any(x.shape != shape for x in arrays)
    shifted = not broadcast and any(x.distributor is not target for x in arrays)
    if broadcast:
        try:
            shape = np.broadcast_shapes(*(x.shape for x in arrays))
        except ValueError:
            return None  # (the eager call raises numpy's error on every rank)
    if math.prod(shape) < OPTIONS["lazy_min"]:
        return None  # small: at once (the global size: every rank decides alike)
    if broadcast:
        target = result_layout(arrays, shape)
        if not all(_whole(x, target) for x in arrays):
            return None
    elif shifted:
        # shifted views on several ranks: their boundary rows come from the neighbours
        # now (`d2o.move.halo.rows_for`), each operand as Parts, evaluated segment by
        # segment later; other layouts run eagerly
        target = _shifted_layout(arrays)
        if target is None:
            return None
    if target.replicated and target is not get_distributor("not", shape, comm):
        return None
    # numpy's dtype and type errors (casting, Python ints out of bounds): a probe on
    # empty operands, which depends on global dtypes and scalars alone, so that its
    # error is raised here, when the expression is built, on every rank alike
    # (empty operands: no floating-point warnings)
    probe = call(*[np.empty(0, x._expr.dtype if pending(x) else x.dtype)
                   if isinstance(x, D2O) else x for x in inputs])  # fmt: skip
    if probe.dtype not in fused.FUSABLE or any(x.dtype not in fused.FUSABLE for x in arrays):
        return None  # (complex numbers and the like: no kernel fuses them, numpy runs them)
    if shifted:
        args = tuple(_aligned(x, target) if isinstance(x, D2O) else x for x in inputs)
    elif broadcast:  # operands of other layouts aligned now, as the eager call would
        args = tuple(x if not isinstance(x, D2O) else _operand(x) if x.distributor is target
                     else align(x, target) for x in inputs)  # fmt: skip
    else:
        args = tuple(_operand(x) if isinstance(x, D2O) else x for x in inputs)
    if 1 + sum(a.count for a in args if type(a) is Node) > LIMIT:
        args = tuple(a.evaluate() if type(a) is Node else a for a in args)
    err = np.geterr()
    node = Node(ufunc, args, probe.dtype, target.local_shape,
                (err["divide"], err["over"], err["under"], err["invalid"]), comm)  # fmt: skip
    node.call = call
    node.site = user_site()  # (named by an error at evaluation: `d2o.ops.fused`)
    return _register(node, target)


def _shifted_layout(arrays: list) -> Any:
    """The layout a fused expression over slabs cut differently along one axis (shifted
    views of one array on several ranks) is computed in: the slabs whose bounds are the
    operands' mean (for a symmetric stencil, the centre view's: the target of
    ``u[1:-1, 1:-1] = ...``, so that only halo rows move; a pending operand of another
    layout is evaluated and shifted like a view).  None where the operands are not such
    slabs, or where none of them is a view (whole arrays cut differently take the first
    one's layout, as eager operations do: d2o's rule).  Depends on the layouts and views
    alone, not on what is pending (which may differ between ranks): every rank agrees;
    no communication."""
    ds = [x.distributor for x in arrays]
    if not all(slab_rows(d) and d.axis == ds[0].axis for d in ds):
        return None
    if all(x.base is None for x in arrays):
        return None
    d0 = ds[0]
    bounds = [d.bounds() for d in ds]
    n = len(bounds)
    mean = [(sum(b[r] for b in bounds) + n // 2) // n for r in range(len(bounds[0]))]
    strategy = d0.strategy if all(d.strategy == d0.strategy for d in ds) else "freeform"
    return slab_distributor(d0.global_shape, d0.comm, d0.axis, mean, strategy)


def _whole(x: Any, target: Any) -> bool:
    """True when operand ``x`` of a broadcast comes to ``target``'s pieces whole, as one
    numpy array (`d2o.array.align.align`): ``target`` is slabs or replicated, and ``x``
    is of ``target``'s layout, replicated, or slabs `align_parts` would not cut into
    boundary rows.  Depends on the layouts alone: every rank agrees."""
    if type(target) is not SlabDistributor and not target.replicated:
        return False
    d = x.distributor
    if d is target or d.replicated:
        return True
    if type(d) is not SlabDistributor:
        return False
    return target.replicated or not shifted_rows(x, target)


def _aligned(x: Any, target: Any) -> Any:
    """Operand ``x`` for a fused expression of layout ``target``: its node or piece where
    its layout is ``target``, else its rows for this rank's piece of ``target`` as
    `Parts` (boundary rows from the neighbours; a pending ``x`` is evaluated first).
    Collective (point to point) in the second case; the case depends on layouts alone."""
    d = x.distributor
    if d is target:
        return _operand(x)
    tb = target.bounds()
    # posted only: the kernel computes the interior while the boundary rows arrive
    return rows_for(x.data, d, [(tb[r], tb[r + 1]) for r in range(d.comm.size)], start=True)


def _write(out: np.ndarray, value: Any, keep: Any = None) -> None:
    """Write deferred array ``value`` into ``out`` (numpy's assignment casting): the
    pending arrays reading ``out``'s memory are evaluated first (``value`` among them
    unless it is ``keep``, then copied); otherwise one kernel straight into ``out``."""
    flush(out, keep)
    if pending(value):
        _, error = fused.run(value._expr, out)
        if error is not None:
            defer(value._expr.comm, error)
    else:
        out[...] = value.data


def inplace(self: Any, other: Any, ufunc: np.ufunc, call: Any = None) -> Any:
    """``self <op>= other`` deferred or fused into self's piece; None where it runs eagerly
    (another dtype or layout: numpy's casting rules and errors)."""
    if not isinstance(self, D2O):
        return None
    res = record(ufunc, (self, other), call)
    if res is None or res._expr.dtype != (self._expr.dtype if pending(self) else self.dtype):
        return _drop(res)
    if res.distributor is not self.distributor:
        return _drop(res)
    if pending(self):  # a fresh array nobody views: its expression grows
        self._expr = res._expr
        res._expr.owner = PENDING[id(self)]
        _drop(res)
        return self
    _write(self.data, res, keep=res)  # (res is dropped: it may read self's memory)
    _drop(res)
    return self


def _drop(x: Any) -> None:
    if x is not None and pending(x):
        del x._expr
        _forget(id(x))
    return None


def _basic(key: Any) -> bool:
    keys = key if isinstance(key, tuple) else (key,)
    return all(isinstance(k, slice) or k is Ellipsis for k in keys)


def assign(self: Any, key: Any, value: Any) -> bool:
    """``self[key] = value`` for a d2o ``value`` of the view's very layout and a key of
    slices: a deferred ``value`` is evaluated straight into the view's piece (after the
    pending arrays reading it), an evaluated one copied.  False where the key or the
    layouts differ (the caller assigns eagerly).  Over several ranks one 96-byte record
    agrees on the decision, as the eager assignment agrees on its shapes: a key that
    differs between ranks (bad on some) sends every rank the eager way, where it raises
    everywhere, instead of leaving some ranks waiting (`d2o.ops.reductions.agreed_max`).
    Whether ``value`` is still pending may differ between ranks: each writes its own.
    Whether it is a temporary: its reference count, or rank 0's answer in controller
    mode (`d2o.core.hooks.temporary`)."""
    if not (isinstance(self, D2O) and isinstance(value, D2O) and _basic(key)):
        return False
    if type(self.distributor) is HeldScalar or type(value.distributor) is HeldScalar:
        return False
    view = getitem(self, key)  # a basic key: a view, made locally
    ok = isinstance(view, D2O) and view.base is not None and view.distributor is value.distributor
    comm = self.distributor.comm
    if comm.size > 1 and agreed_max(comm, None, int(not ok)):
        return False
    if not ok:
        return False
    told = hooks.temporary[0]
    if pending(value) and (sys.getrefcount(value) <= TEMPORARY_REFS if told is None else told):
        # a temporary nobody else holds (``u[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + ...)``):
        # its expression is written straight into the target, even where it reads the
        # target's memory (`d2o.ops.fused.run` keeps numpy's semantics: a ring buffer or
        # a temporary), then it is the target's piece
        out = view.data
        moved = _hand_over(self, out, value)
        if moved is not None:
            out = moved
            _, error = fused.run(value._expr, out)
            if error is not None:
                defer(value._expr.comm, error)
        else:
            _write(out, value, keep=value)
        settle(value, out)
        _forget(id(value))
        return True
    _write(view.data, value)
    return True


def _hand_over(self: Any, out: np.ndarray, value: Any) -> np.ndarray | None:
    """Copy elision for ``self[key] = value`` (``out``: the target, a view of ``self``'s
    piece; ``value``: a temporary): where the one other pending array is a copy of that
    piece (`copied`: ``u_old = u.copy()`` before ``u[1:-1, 1:-1] = ...``), the copy takes
    the piece itself and ``self`` a new one, whose cells outside the target are copied
    from the old; returns the target's place in the new piece, which the caller writes
    from the old (one read and one write: no copy of the piece, no ring buffer).  None
    where it does not apply (the caller writes in place): other pending arrays, a piece
    that is not ``self``'s own C-ordered memory, a target with steps, or anything else
    that can reach the piece (a view, a local array handed out, an operand held by a
    name): their reference counts tell (`_views_in`).  Local."""
    base = self.data
    if not COUNTED or len(PENDING) != 2 or self.base is not None or not out.size:
        return None
    owner = _owner(base)
    if owner is None or out.base is not owner:
        return None
    if out.strides != base.strides or not base.flags.c_contiguous:
        return None
    copy = None
    for ref in PENDING.values():
        x = ref()
        if x is value:
            continue
        if x is None or not pending(x):
            return None
        node = x._expr
        if node.value is not None or node.ufunc is not COPY or node.args[0] is not base:
            return None
        if node.dtype != base.dtype:
            return None
        copy = x
    if copy is None or not base.flags.writeable:
        return None
    views: dict = {}
    direct = _views_in(value._expr, base, owner, views)
    if direct < 0:
        return None
    for obj, n in views.values():  # a leaf view held elsewhere (a named view of ``self``)
        if n and sys.getrefcount(obj) != n + 3:  # (+ the list, the name, the argument)
            return None
    obj = None
    # the piece's holders: ``self``, the copy's node, the references in the expression,
    # ``base`` and the argument; the owner's: the pool, the piece, the target, the views
    # found, ``owner`` and the argument; nothing else (the piece its own owner: both)
    if owner is base:
        if sys.getrefcount(base) != 6 + direct + len(views):
            return None
    elif sys.getrefcount(base) != 4 + direct or sys.getrefcount(owner) != 5 + len(views):
        return None
    owner = None
    new = buffers.empty(base.shape, base.dtype)
    start, rest = [], out.__array_interface__["data"][0] - base.__array_interface__["data"][0]
    for k in range(base.ndim):
        start.append(rest // base.strides[k])
        rest %= base.strides[k]
    box = [slice(s, s + n) for s, n in zip(start, out.shape)]
    for k in range(base.ndim):  # the cells outside the target, axis by axis
        for side in (slice(0, box[k].start), slice(box[k].stop, base.shape[k])):
            if side.stop > side.start:
                where = (*box[:k], side)
                new[where] = base[where]
    node = copy._expr
    node.value, node.args, node.count = base, (), 0
    settle(copy, base)
    _forget(id(copy))
    self.data = new
    target: tuple = (*box, Ellipsis)  # (a view also where the piece is 0-d)
    return new[target]


def _views_in(node: Node, base: np.ndarray, owner: np.ndarray, views: dict) -> int:
    """Collect in ``views`` (id -> [view, references in the tree]) the views of piece
    ``base`` (whose memory ``owner`` owns: their ``base``) that the tree of ``node``
    holds (its array operands; for the rows of a halo exchange (`Parts`), its own piece
    and what it sends: reference count 0, not checked); returns how many times the tree
    holds ``base`` itself, or -1 where another array shares its memory (an evaluated
    node's value, an array not viewing it through ``owner``)."""
    direct = 0
    for a in node.args:
        if type(a) is Node:
            if a.value is not None:
                if np.may_share_memory(a.value, base):
                    return -1
                continue
            n = _views_in(a, base, owner, views)
            if n < 0:
                return -1
            direct += n
        elif isinstance(a, np.ndarray):
            if a is base:
                direct += 1
            elif a.base is owner:
                views.setdefault(id(a), [a, 0])[1] += 1
            elif np.may_share_memory(a, base):
                return -1
        elif isinstance(a, Parts):
            for arr in [arr for _, arr in a.pieces] + [arr for _, arr in a.sent]:
                if arr is base:
                    return -1
                if arr.base is owner:
                    views.setdefault(id(arr), [arr, 0])
                elif np.may_share_memory(arr, base):
                    return -1
    return direct


def flattened(x: Any, refs: int) -> Any:
    """``x.ravel()`` of a pending temporary ``x`` (nothing but the statement holds it:
    ``refs``, its reference count where the runtime calls this, at most `RAVEL_REFS`)
    as a deferred array: the expression over its operands flattened
    (`d2o.ops.fused.flat`), so that Laplace's ``dot(v, v)`` of ``v = (u - u_old).ravel()``
    fuses (`d2o.ops.linalg.dot`).  numpy's ravel would return a view of ``x``; nobody
    else can reach ``x``, so none can tell.  None where it is not deferred (the caller
    ravels as usual, locally where this could have deferred it): ``x`` held elsewhere,
    evaluated, or of a layout `ravel` moves.  Local."""
    told = hooks.temporary[0]
    if not pending(x) or not (refs <= RAVEL_REFS if told is None else told):
        return None
    if x._expr.value is not None:
        return None
    d = x.distributor
    lay = flat_layout(d) if type(d) is SlabDistributor or d.replicated else None
    node = fused.flat(x._expr) if lay is not None else None
    if node is None:
        return None
    return _register(node, lay)


def copied(x: Any) -> Any:
    """``x.copy()`` as a deferred array (its node: `COPY` of ``x``'s piece), so that an
    assignment into ``x`` while it is pending may hand ``x``'s piece over to the copy
    instead of copying it (`assign`: ``u_old = u.copy()`` then ``u[1:-1, 1:-1] = ...``).
    None where the copy is made at once (the caller's eager copy): ``x`` pending, a view,
    hermitian or of ghost cells, a 0-d view, bools or a dtype no kernel fuses, below
    ``lazy_min`` elements, or a piece that is not ``x``'s own memory or that something
    else holds (a view, a local array handed out: numpy could write it while the copy
    is pending).  Local."""
    if not isinstance(x, D2O) or pending(x) or x.base is not None or x.hermitian:
        return None
    d = x.distributor
    if type(d) is HeldScalar or getattr(x, "_padded", None) is not None:
        return None
    if math.prod(d.global_shape) < OPTIONS["lazy_min"]:
        return None
    data = x.data
    if data.dtype not in fused.FUSABLE or data.dtype == np.bool_:
        return None
    owner = _owner(data)
    # a kept buffer's holders: the pool and the piece besides ``owner`` and the argument
    if owner is None or (owner is not data and sys.getrefcount(owner) > PIECE_REFS + 1):
        return None
    owner = None  # (so that the piece's count below is its own holders')
    if sys.getrefcount(data) > PIECE_REFS or not watch(x):
        return None  # (held elsewhere, or a subclass of the public class: copied now)
    err = np.geterr()
    node = Node(COPY, (data,), data.dtype, data.shape,
                (err["divide"], err["over"], err["under"], err["invalid"]), d.comm)  # fmt: skip
    node.call = np.copy  # (the same values; names it ``copy`` in a trace, `d2o.ops.fused`)
    c = _register(node, d)
    SOURCES[id(c)] = weakref.ref(x)  # ``x``'s data read from outside d2o: `release`
    return c


def release(x: Any) -> None:
    """``x``'s piece is about to reach code outside d2o (its ``data`` read there), which
    may write it: the pending arrays reading it (a deferred copy) are evaluated first,
    and ``x`` is an ordinary array again.  Local."""
    unwatch(x)
    flush(_DATA.__get__(x, type(x)))


def _owner(piece: np.ndarray) -> np.ndarray | None:
    """The array owning the memory of ``piece`` where that memory is ``piece``'s alone: the
    piece itself, or a kept buffer it views whole (`d2o.core.buffers`: the pool holds
    it too, and every view of the piece has the buffer as its ``base``); else None."""
    owner = piece.base
    if owner is None:
        return piece
    if type(owner) is not np.ndarray or owner.nbytes != piece.nbytes or not buffers.kept(owner):
        return None
    at = owner.__array_interface__["data"][0]
    return owner if at == piece.__array_interface__["data"][0] else None


def _complete_exchanges() -> None:
    """At exit (before MPI is finalised): complete the boundary-row exchanges that pending
    expressions posted and nobody evaluated (MPI's rules: no request left open).  Local
    (the neighbours named in each exchange take part)."""
    for ref in list(PENDING.values()):
        x = ref()
        if x is not None and pending(x) and x._expr.value is None:
            for p in fused.parts_of(x._expr):
                p.wait()


atexit.register(_complete_exchanges)


@operation(kind="local", communicates=False, mesh=True, held="local")
def evaluate(*arrays: Any) -> None:
    """Evaluate deferred arrays now (the ``lazy`` option): each one fused kernel over its
    local piece.  Without arguments, every pending array.  Local: nothing moves.

    Examples
    --------
    >>> import d2o
    >>> import d2o.numpy as dnp
    >>> a = dnp.arange(4)
    >>> with d2o.options(lazy=True):
    ...     b = 2 * a + 1
    ...     d2o.evaluate(b)
    >>> b.get_full_data()
    array([1, 3, 5, 7])
    """
    if not arrays:
        flush()
    for x in arrays:
        if isinstance(x, D2O) and pending(x):
            _force(x)
