"""Fused local kernels: one deferred expression evaluated over this rank's piece.

`d2o.ops.deferred` records element-wise work as a tree of `Node` s; `run` evaluates one
tree on the local pieces, purely locally (no communication).  Two engines, both loaded
at the first fused evaluation, never at ``import d2o``:

* numba (`d2o.ops.loops`), for pieces of at least `NUMBA_MIN` elements (``auto``; the
  environment variable ``D2O_FUSION_ENGINE=numba`` or ``numexpr`` forces one): the
  largest subtrees a plain loop computes exactly as numpy does become one compiled
  loop nest each, written straight into the target (through a ring buffer of rows
  where the target overlaps its operands: one read and one write of a stencil's
  array).  Measured on this machine (benchmarks/bench_fusion.py): numexpr over the
  strided, shifted views of a stencil is slower than numpy; a numba loop runs at the
  memory bound.  Its cost is compile time: numba's import and first kernel take 2-5
  s in a process, each new expression about 0.4 s, or about 25 ms when numba's
  on-disk cache has it (`d2o.ops.loops.cache_dir`).
* numexpr below that size (blockwise, no full-size temporaries, compiled in about a
  millisecond): the largest subtrees it evaluates exactly as numpy does become one
  numexpr kernel each, compiled once per expression and operand dtypes (`_KERNELS`).

Every other node runs numpy's ufunc on its evaluated operands (numpy's own result,
warnings and errors).

A node goes to numexpr only when numexpr computes numpy's values in numpy's dtype:

* its loop dtypes (numpy's own resolution, NEP 50: Python scalars are weak) are all
  float32 or float64 (arithmetic, ``sqrt``, ``abs``, ``floor``, ``ceil``), float or
  integer for comparisons (result bool), bool for ``&``, ``|``, ``^``, ``~``; each array operand already has its loop dtype (scalars are
  cast to it, as numpy casts them); integer arithmetic (wrapping, division, powers),
  ``//``, ``%`` and complex numbers always run on numpy;
* ``np.errstate`` is 'ignore' or 'warn' for every floating-point error: a kernel
  (numexpr's or numba's) reports no flags itself; `_watched` reads this thread's
  flags after it and warns as numpy does (`d2o.core.fpstatus`; numexpr's worker
  threads, where it runs several, keep theirs); under 'raise', 'call', 'print' or
  'log' every node runs on numpy, which warns, calls or raises exactly as numpy does.

``+ - * /``, ``sqrt``, comparisons, ``abs``, ``floor`` and ``ceil`` are correctly
rounded in both engines, and ``**`` with a scalar exponent 2 is ``x*x`` in both: a
fused result is numpy's bit for bit.  Other powers and the transcendental functions
(``exp``, ``log``, ``sin``, ...) run on numpy (its SIMD loops are faster than
numexpr's C-library calls on one thread, and give numpy's own bits).
"""

from __future__ import annotations

import os
import warnings
from typing import Any

import numpy as np

from ..core import buffers, fpstatus
from ..core.comm import default_comm
from ..core.records import Record, active
from ..move.halo import Parts
from . import loops
from .loops import quiet

__all__ = ["run", "reduce_sum", "kernels", "parts_of", "FUSABLE"]

_NE: list = [None]  # numexpr, loaded at the first fused evaluation (False: not installed)

#: numpy ufunc -> numexpr binary operator
_BINARY: dict[Any, str] = {np.add: "+", np.subtract: "-", np.multiply: "*", np.true_divide: "/",
           np.power: "**"}  # fmt: skip
_COMPARE = {np.less: "<", np.less_equal: "<=", np.greater: ">", np.greater_equal: ">=",
            np.equal: "==", np.not_equal: "!="}  # fmt: skip
_LOGICAL = {np.bitwise_and: "&", np.bitwise_or: "|", np.bitwise_xor: "^", np.logical_and: "&",
            np.logical_or: "|", np.logical_xor: "^"}  # fmt: skip
#: numpy ufunc -> numexpr function (float arguments and result).  Only correctly rounded
#: ones: numpy's transcendental functions (exp, log, sin, ...) are SIMD loops, faster
#: than numexpr's C-library calls on one thread and not bit-equal to them, so they run
#: on numpy (their operands and consumers still fuse around them).
_FUNCS: dict[Any, str] = {np.sqrt: "sqrt", np.floor: "floor", np.ceil: "ceil",
                          np.absolute: "abs"}  # fmt: skip
#: functions numpy and numexpr both compute correctly rounded (bit-for-bit equal)
EXACT = frozenset({np.add, np.subtract, np.multiply, np.true_divide, np.sqrt, np.absolute,
                   np.floor, np.ceil, np.negative, *_COMPARE, *_LOGICAL})  # fmt: skip
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
_ORDERED = (*_FLOATS, np.dtype(np.int32), np.dtype(np.int64))
_BOOL = np.dtype(bool)
#: numexpr's signature type of each dtype it takes
_SIG = {np.dtype(bool): bool, np.dtype(np.int32): np.int32, np.dtype(np.int64): np.int64,
        np.dtype(np.float32): float, np.dtype(np.float64): np.float64}  # fmt: skip
#: numpy's words for each raised flag ("... encountered in <ufunc>")
_WORDS = {"divide": "divide by zero", "over": "overflow", "under": "underflow",
          "invalid": "invalid value"}  # fmt: skip
#: the compiled operations that can raise each flag, in the order a warning names them
_RAISERS = {
    "divide": (np.true_divide, np.power),
    "over": (np.power, np.multiply, np.square, np.true_divide, np.add, np.subtract),
    "under": (np.power, np.multiply, np.square, np.true_divide),
    "invalid": (np.sqrt, np.power, np.true_divide, np.subtract, np.add, np.multiply),
}

#: the dtypes a kernel computes (`d2o.ops.deferred` records only calls of these: a call of
#: complex numbers, float16 or objects would run on numpy anyway, after the cost of
#: recording it)
FUSABLE = frozenset(np.dtype(c) for c in "?bhilqBHILQfd")
#: the smallest piece (elements) the ``auto`` engine compiles a numba loop for
NUMBA_MIN = 1 << 16
#: the largest boundary segment of a segmented kernel (elements) that numpy's calls
#: compute alone (`_replay`, each node under its recorded error state): at this size a
#: kernel's call costs more than numpy's loops (measured: 0.2 ms for one row of 1,200
#: elements through a kernel's path)
SMALL = 1 << 13
#: (expression, operand dtypes) -> compiled numexpr kernel
_KERNELS: dict = {}


def kernels() -> int:
    """How many fused kernels (numexpr and numba) are compiled and cached in this process."""
    return len(_KERNELS) + loops.kernels()


def _numexpr() -> Any:
    """numexpr, imported at the first fused evaluation (False where not installed).  Under
    MPI with several ranks it runs one thread per rank (``D2O_FUSION_THREADS`` sets it)."""
    if _NE[0] is None:
        try:
            import numexpr  # third-party, loaded lazily: import-time budget
        except ImportError:  # pragma: no cover - the fusion extra is not installed
            _NE[0] = False
            return False
        threads = os.environ.get("D2O_FUSION_THREADS")
        if threads:
            numexpr.set_num_threads(int(threads))
        elif default_comm().size > 1:
            numexpr.set_num_threads(1)
        _NE[0] = numexpr
    return _NE[0]


_loop = loops.loop_dtypes
_is_two = loops.is_two


def _engine_ok(node: Any) -> bool:
    """True when numexpr computes ``node`` exactly as numpy does (see the module notes)."""
    if node.value is not None or not quiet(node.err):
        return False
    f = node.ufunc
    loop = _loop(node)
    if loop is None or loop[-1] != node.dtype:
        return False
    ins, res = loop[:-1], loop[-1]
    if f is np.power and not _is_two(node.args[1]):
        return False  # numpy's powers have special cases (0.5 is sqrt, -1 reciprocal)
    if f in _BINARY or f in _FUNCS or f is np.negative:
        ok = res in _FLOATS and all(d == res for d in ins)
    elif f in _COMPARE:
        ok = res == _BOOL and ins[0] in _ORDERED and all(d == ins[0] for d in ins)
    elif f in _LOGICAL or f is np.invert or f is np.logical_not:
        ok = res == _BOOL and all(d == _BOOL for d in ins)
    else:
        return False
    if not ok:
        return False
    for a, d in zip(node.args, ins):
        if (isinstance(a, np.ndarray) or hasattr(a, "ufunc")) and a.dtype != d:
            return False
    return True


class _Builder:
    """One numexpr expression: its text, its variables (deduplicated by identity), and
    the operations it holds (for the trace)."""

    def __init__(self, ops: list) -> None:
        self.names: dict[int, str] = {}
        self.values: list = []
        self.ops = ops

    def var(self, value: Any) -> str:
        name = self.names.get(id(value))
        if name is None:
            name = self.names[id(value)] = f"v{len(self.values)}"
            self.values.append(value)
        return name

    def text(self, node: Any) -> str:
        loop = _loop(node)
        assert loop is not None
        f = node.ufunc
        args = node.args
        if f is np.power and _is_two(args[1]):  # numpy's square: x*x in both engines
            args = args[:1]
        parts = []
        for a, d in zip(args, loop):
            if hasattr(a, "ufunc"):  # a node: inline where numexpr takes it too
                if a.value is None and loops.costly(a) and a.shared():
                    a.evaluate()  # computed once, read by each expression holding it
                if a.value is None and _engine_ok(a):
                    parts.append(self.text(a))
                else:
                    parts.append(self.var(_evaluate(a, self.ops)))
            elif isinstance(a, np.ndarray):
                parts.append(self.var(a))
            else:  # a scalar, cast to its loop dtype as numpy casts it
                parts.append(self.var(np.asarray(a).astype(d)))
        self.ops.append(f.__name__)
        if len(args) < len(node.args):
            return f"({parts[0]} * {parts[0]})"
        if f in _BINARY:
            return f"({parts[0]} {_BINARY[f]} {parts[1]})"
        if f in _COMPARE:
            return f"({parts[0]} {_COMPARE[f]} {parts[1]})"
        if f in _LOGICAL:
            return f"({parts[0]} {_LOGICAL[f]} {parts[1]})"
        if f is np.negative:
            return f"(-{parts[0]})"
        if f is np.invert or f is np.logical_not:
            return f"(~{parts[0]})"
        return f"{_FUNCS[f]}({', '.join(parts)})"


def _numpy(node: Any, ops: list, out: np.ndarray | None = None) -> np.ndarray:
    """``node`` by numpy's ufunc on its evaluated operands, under its recorded errstate."""
    for a in node.args:
        if hasattr(a, "ufunc") and a.value is None and loops.costly(a) and a.shared():
            a.evaluate()  # computed once, read by each expression holding it
    fresh = [hasattr(a, "ufunc") and a.value is None for a in node.args]
    args = [_evaluate(a, ops) if hasattr(a, "ufunc") else a for a in node.args]
    ops.append("copy" if node.call is np.copy else node.ufunc.__name__)
    try:
        return _numpy_call(node, args, fresh, out)
    except (ValueError, ArithmeticError) as exc:
        _named(exc, node)
        raise


def _numpy_call(node: Any, args: list, fresh: list, out: np.ndarray | None) -> np.ndarray:
    """`_numpy`'s call of the node's ufunc on its evaluated operands ``args`` (``fresh``:
    those this kernel computed), under the recorded error state."""
    err = dict(zip(("divide", "over", "under", "invalid"), node.err))
    with np.errstate(**err):
        if out is not None and out.dtype == node.dtype and _as_ufunc(node):
            return node.ufunc(*args, out=out)
        if out is None and _as_ufunc(node):
            # an operand this kernel computed (a temporary nobody else holds) of the
            # result's shape and dtype takes the result: one allocation (and its first
            # touch of every page) less than numpy's
            for v, f in zip(args, fresh):
                if (
                    f
                    and isinstance(v, np.ndarray)
                    and v.shape == node.shape
                    and v.dtype == node.dtype
                ):
                    return node.ufunc(*args, out=v)
            return node.ufunc(*args, out=buffers.empty(node.shape, node.dtype))
        res = node.call(*args)
        if out is not None:
            out[...] = res
        return res


def _same(v: np.ndarray, out: np.ndarray) -> bool:
    """True when ``v`` is ``out``'s very elements (address, shape, strides): a loop reading
    ``v[i]`` before writing ``out[i]`` is numpy's in-place result, without a ring buffer."""
    return (v.__array_interface__["data"][0] == out.__array_interface__["data"][0]
            and v.shape == out.shape and v.strides == out.strides)  # fmt: skip


def _as_ufunc(node: Any) -> bool:
    """True when numpy's ufunc with ``out=`` computes what ``node.call`` computes: the ufunc
    itself, or an operator other than ``**`` (whose special exponents, 0.5 or -1, numpy
    computes otherwise) or ``**`` with another exponent."""
    if node.call is node.ufunc:
        return True
    if node.ufunc is not np.power:
        return True
    e = node.args[1]
    return (
        not hasattr(e, "ufunc") and not isinstance(e, np.ndarray) and e not in loops.FAST_EXPONENTS
    )


def _overlaps(values: list, out: np.ndarray) -> bool:
    """True when an operand shares memory with ``out`` other than element for element
    (`_same`: only such operands are safe for numexpr's blocks and a loop's elements)."""
    for v in values:
        if isinstance(v, np.ndarray) and v.ndim and np.may_share_memory(v, out):
            if not _same(v, out):
                return True
    return False


def _engine(node: Any) -> str:
    """The engine for ``node``: ``D2O_FUSION_ENGINE`` (``numba``, ``numexpr``; default
    ``auto``: numba for pieces of at least `NUMBA_MIN` elements, where its compile
    time (about 0.4 s per new expression, 2-5 s for the first one in a process, numba's
    import included) pays, numexpr below)."""
    if not node.size or not node.ndim:
        return "numpy"
    choice = os.environ.get("D2O_FUSION_ENGINE", "auto")
    if choice == "auto":
        choice = "numba" if node.size >= NUMBA_MIN else "numexpr"
    if choice == "numba" and not loops.available():  # pragma: no cover - no numba
        choice = "numexpr"
    return choice


def _compiled(node: Any, ops: list, out: np.ndarray | None) -> np.ndarray:
    """``node`` by one compiled loop (`d2o.ops.loops`), straight into ``out`` where its
    dtype is the node's: through a ring buffer where operands overlap ``out`` by whole
    rows, through a temporary where they overlap otherwise."""
    b = loops.Builder(ops, _evaluate, node.shape)
    text = b.text(node)
    depth = None
    target = out
    if out is None or out.dtype != node.dtype:
        target = buffers.empty(node.shape, node.dtype)
    elif _overlaps(b.values, out):  # (an operand that is ``out`` itself: ``x += a * p``)
        depth = loops.ring_depth(b.values, out)
        if depth is None:
            target = np.empty(node.shape, node.dtype)
    if depth is not None:  # named in the trace: "fused(add, ..., in place: 2 rows held)"
        ops.append(f"in place: {depth + 1} row{'s' if depth else ''} held")
    kernel = loops.compile_kernel(b, text, node.ndim, depth)
    buf = target if depth is None else np.empty((depth + 1, *target.shape[1:]), target.dtype)
    ct = loops.c_typed
    args = [ct(v) for v in b.values]
    intact = depth is None and _intact(b.values, target)
    _watched(node, lambda: kernel(ct(target), ct(buf), target.shape, *args), intact)
    if out is not None and target is not out:
        out[...] = target
        return out
    return target


def _evaluate(node: Any, ops: list, out: np.ndarray | None = None) -> np.ndarray:
    """``node``'s value (written into ``out`` when given); materialised nodes give theirs."""
    if node.value is not None:
        if out is not None:
            out[...] = node.value
            return out
        return node.value
    if node.count == 1:  # one operation: numpy's own loop (SIMD; nothing to fuse)
        return _numpy(node, ops, out)
    engine = _engine(node)
    if engine == "numba" and loops.exact(node):
        return _compiled(node, ops, out)
    ne: Any = _numexpr() if node.size and node.ndim else False
    if not ne or not _engine_ok(node):
        return _numpy(node, ops, out)
    b = _Builder(ops)
    text = b.text(node)
    key = (text, tuple(v.dtype for v in b.values))
    kernel = _KERNELS.get(key)
    if kernel is None:
        sig = [(f"v{i}", _SIG[v.dtype]) for i, v in enumerate(b.values)]
        try:
            kernel = ne.NumExpr(text, signature=sig)
        except Exception:  # pragma: no cover - an expression numexpr refuses: numpy's
            kernel = False
        _KERNELS[key] = kernel
    if kernel is False:  # pragma: no cover
        return _numpy(node, ops, out)
    direct = out is not None and out.dtype == node.dtype and not _overlaps(b.values, out)
    res = _watched(node, lambda: kernel(*b.values, out=out if direct else None, order="K",
                                        casting="safe", ex_uses_vml=False),
                   not direct or _intact(b.values, out))  # fmt: skip
    if res.dtype != node.dtype:  # pragma: no cover - excluded by _engine_ok
        res = res.astype(node.dtype)
    if out is not None and not direct:
        out[...] = res
        return out
    return res


def _intact(values: list, written: np.ndarray) -> bool:
    """True when no operand in ``values`` shares memory with ``written`` (a kernel
    writing it leaves its operands as they were: `_watched` may compute them again)."""
    return not any(isinstance(v, np.ndarray) and np.may_share_memory(v, written) for v in values)


def _watched(node: Any, kernel: Any, replay: bool = True, axes: tuple | None = None) -> Any:
    """``kernel()`` (a compiled kernel computing ``node``; with ``axes``, its sum over
    them) with numpy's floating-point warnings: the flags it raised, where ``np.errstate``
    said "warn" when ``node`` was recorded, are warned of as numpy would.  With ``replay``
    (the operands are intact: nothing was written in place) numpy's own loops compute the
    expression again, for their warnings alone, exactly numpy's (a comparison of NaN in a
    vectorised loop raises "invalid" where numpy's does not); else one warning per flag
    names the first operation (innermost first) that can raise it."""
    fpstatus.clear()
    res = kernel()
    raised = fpstatus.raised()
    if raised:
        states = [dict(zip(fpstatus.NAMES, n.err)) for n in _nodes(node, [])]
        warn = [f for f in raised if any(s[f] == "warn" for s in states)]
        if warn and replay and not _parts(node, []):
            value = _replay(node)
            if axes is not None:
                with np.errstate(**dict(zip(fpstatus.NAMES, node.err))):
                    np.add.reduce(value, axis=axes)
        else:
            order = _nodes(node, [])[::-1]  # (innermost first)
            for f in warn:
                ufunc = next((n.ufunc for r in _RAISERS[f] for n in order if n.ufunc is r),
                             node.ufunc)  # fmt: skip
                warnings.warn(f"{_WORDS[f]} encountered in {ufunc.__name__}", RuntimeWarning,
                              stacklevel=2)  # fmt: skip
    return res


def _nodes(node: Any, out: list) -> list:
    """``node`` and the nodes below it not evaluated yet."""
    out.append(node)
    for a in node.args:
        if hasattr(a, "ufunc") and a.value is None:
            _nodes(a, out)
    return out


def _replay(node: Any) -> Any:
    """``node`` computed by numpy (each operation under its recorded error state): again,
    stored nowhere, for numpy's warnings (`_watched`), or a small segment's value
    (`_segmented`)."""
    args = [(a.value if a.value is not None else _replay(a)) if hasattr(a, "ufunc") else a
            for a in node.args]  # fmt: skip
    try:
        with np.errstate(**dict(zip(fpstatus.NAMES, node.err))):
            return node.call(*args)
    except (ValueError, ArithmeticError) as exc:
        _named(exc, node)
        raise


#: The note's start that names a deferred operation in its error (`_named`).
NAMED = "d2o: raised in the deferred "


def _named(exc: BaseException, node: Any) -> None:
    """Note on ``exc`` (once: the innermost operation) which deferred operation raised
    it and the user's line that recorded it (the ``lazy`` option evaluates it later,
    where the traceback points)."""
    if node.site is None or not hasattr(exc, "add_note"):  # (Python 3.10: no notes)
        return
    if any(str(n).startswith(NAMED) for n in getattr(exc, "__notes__", ())):
        return
    exc.add_note(f"{NAMED}{node.ufunc.__name__} recorded at {node.site}")


def parts_of(node: Any) -> list:
    """The `Parts` operands (shifted views on several ranks) in ``node``'s tree."""
    return _parts(node, [])


def _parts(node: Any, found: list) -> list:
    """The `Parts` operands (shifted views on several ranks) in ``node``'s tree."""
    if node.value is None:
        for a in node.args:
            if isinstance(a, Parts):
                found.append(a)
            elif hasattr(a, "ufunc"):
                _parts(a, found)
    return found


def _cut(node: Any, axis: int, lo: int, hi: int | None) -> Any:
    """``node`` over rows ``lo:hi`` of its piece along ``axis`` (``hi`` None: the
    whole piece), every `Parts` operand the one numpy view that holds those rows."""
    sub = (slice(None),) * axis + (slice(lo, hi),)
    args = []
    for a in node.args:
        if hasattr(a, "ufunc"):
            args.append(a.value[sub] if a.value is not None else _cut(a, axis, lo, hi))
        elif isinstance(a, Parts):
            args.append(a.segment({axis: (lo, a.shape[axis] if hi is None else hi)}))
        elif isinstance(a, np.ndarray):
            args.append(a[sub])
        else:
            args.append(a)
    if hi is None:
        return node.derived(tuple(args), node.shape)
    shape = list(node.shape)
    shape[axis] = hi - lo
    return node.derived(tuple(args), tuple(shape))


def _segmented(node: Any, parts: list, ops: list, out: np.ndarray | None) -> np.ndarray:
    """``node`` whose operands include `Parts`: one kernel per segment of rows that lies
    inside one piece of every operand (the interior, then the few boundary rows, once
    they arrived: the exchange overlaps the interior's kernel).  Where the operands
    read ``out``, the boundary segments are computed first, aside, and the interior
    written in place after them (numpy's semantics).  Local (waits for the posted
    exchange with the neighbours)."""
    axis = next((a for p in parts for box, _ in p.pieces for a, (b0, b1) in enumerate(box)
                 if (b0, b1) != (0, p.shape[a])), None)  # fmt: skip
    if axis is None:  # every operand in one piece: one kernel
        for p in parts:
            p.wait()
        return _evaluate(_cut(node, 0, 0, None), ops, out)
    cuts = sorted({0, node.shape[axis], *(c for p in parts for c in p.cuts(axis))})
    segs = [(a, b) for a, b in zip(cuts, cuts[1:]) if b > a]
    res = np.empty(node.shape, node.dtype) if out is None else out
    big = max(segs, key=lambda s: s[1] - s[0])
    overlap = out is not None and any(
        isinstance(v, np.ndarray) and np.may_share_memory(v, out) for v in _leaves(node)
    )
    where = (slice(None),) * axis
    # the interior first where it reads only rows held here and writes no operand: the
    # boundary rows are still arriving (posted by `d2o.ops.deferred`), waited for before
    # the segments reading them; in place, the interior last (numpy's semantics)
    ahead = not overlap and all(p.held({axis: big}) for p in parts)
    order = (
        [big] + [s for s in segs if s != big] if ahead else [s for s in segs if s != big] + [big]
    )
    aside = []
    for lo, hi in order:
        for p in parts:
            if not p.held({axis: (lo, hi)}):
                p.wait()
        seg = _cut(node, axis, lo, hi)
        if (lo, hi) == big:
            _evaluate(seg, ops, res[where + (slice(lo, hi),)])
        elif overlap:
            aside.append((lo, hi, _replay(seg) if seg.size <= SMALL else _evaluate(seg, [])))
        elif seg.size <= SMALL:
            res[where + (slice(lo, hi),)] = _replay(seg)
        else:
            _evaluate(seg, [], res[where + (slice(lo, hi),)])
    for lo, hi, value in aside:
        res[where + (slice(lo, hi),)] = value
    return res


def _leaves(node: Any) -> list:
    out: list = []
    for a in node.args:
        if hasattr(a, "ufunc"):
            out.extend([a.value] if a.value is not None else _leaves(a))
        elif isinstance(a, Parts):
            out.extend(arr for _, arr in a.pieces)
        elif isinstance(a, np.ndarray):
            out.append(a)
    return out


def reduce_sum(node: Any, axes: tuple) -> np.ndarray | None:
    """The sum of deferred expression ``node`` over ``axes`` of its piece (all of them, or
    the last one alone) in one compiled loop, the expression never stored: numpy's
    ``add.reduce`` of the evaluated piece, bit for bit (floats: its pairwise order over
    the values in C order, `d2o.ops.loops.compile_sum`; integers and bools: exact);
    ``keepdims=False``'s shape.  None where it does not fuse (the caller evaluates
    ``node`` and reduces): an evaluated node, shifted operands, an expression whose
    root a loop does not compute exactly as numpy (`d2o.ops.loops.exact`), a piece
    below `NUMBA_MIN` elements (numba's compile time does not pay) or of no element,
    floating-point errors not 'ignore' or 'warn' now.  Recorded in the active traces as
    ``fused(<its operations>, sum)``.  Local."""
    ndim = node.ndim
    if node.value is not None or not node.size or axes not in (tuple(range(ndim)), (ndim - 1,)):
        return None
    if _engine(node) != "numba" or not loops.exact(node) or _parts(node, []):
        return None
    if not quiet(tuple(np.geterr().values())):
        return None
    acc = np.add.reduce(np.empty(0, node.dtype)).dtype
    ops: list[str] = []
    b = loops.Builder(ops, _evaluate, node.shape)
    b.text(node)  # (summed with its powers by ``pow``: `loops.HALF_POWERS` need two passes)
    kernel = loops.compile_sum(b.exact, len(b.values), ndim, acc)
    rows = node.size // node.shape[-1] if len(axes) == 1 else 1
    res = np.empty(rows, acc)
    ct = loops.c_typed
    args = [ct(v) for v in b.values]
    _watched(node, lambda: kernel(res, node.shape, node.size // rows, *args), True, axes)
    ops.append("sum")
    if active:
        rec = Record(f"fused({', '.join(ops)})")
        for t in active:
            t.records.append(rec)
    return res.reshape(node.shape[:-1]) if len(axes) == 1 else res.reshape(())


def flat(node: Any) -> Any:
    """``node`` over its piece flattened in C order (numpy's ``ravel``): the same operations
    over its operands reshaped to one axis; a new tree, ``node`` unchanged.  None where an
    operand is not a C-contiguous array of the piece's shape (a broadcast row, boundary
    rows from the neighbours).  Local; copies nothing."""
    n = (node.size,)
    args = []
    for a in node.args:
        if hasattr(a, "ufunc") and a.value is None:
            a = flat(a)
            if a is None:
                return None
        elif hasattr(a, "ufunc") or isinstance(a, np.ndarray):
            v = a.value if hasattr(a, "ufunc") else a
            if v.ndim and (v.shape != node.shape or not v.flags.c_contiguous):
                return None
            a = v.reshape(n) if v.ndim else v
        elif isinstance(a, Parts):
            return None
        args.append(a)
    c = node.derived(tuple(args), n)
    c.uses, c.owner = 0, None
    return c


def reduce_dot(a: Any, b: Any) -> Any:
    """``sum(a * b)`` of two deferred expressions of one 1-d shape and real floating dtype
    (``dot`` of two deferred vectors: Laplace's ``dot(v, v)``) in one compiled loop, the
    product and the operands never stored: numpy's ``add.reduce`` of ``a * b``, bit for
    bit (`reduce_sum`), which may differ from a BLAS ``dot`` in the last bits.  None
    where `reduce_sum` does not fuse.  Local."""
    if a.value is not None or b.value is not None:
        return None
    e = np.geterr()
    err = (e["divide"], e["over"], e["under"], e["invalid"])
    product = type(a)(np.multiply, (a, b), a.dtype, a.shape, err, a.comm)
    try:
        return reduce_sum(product, (0,))
    finally:
        a.uses -= 1
        b.uses -= 1


def run(node: Any, out: np.ndarray | None = None) -> tuple[np.ndarray, Exception | None]:
    """Evaluate the deferred expression ``node`` on this rank's pieces (into ``out`` when
    given): one fused kernel, recorded in the active traces as one entry
    ``fused(<its operations>)`` moving nothing.  Local.  Returns the value and the
    data-dependent numpy error it met (integer ``**`` negative, ``np.errstate(...=
    'raise')``), if any: then the value is zeros, and the caller defers the error
    (`d2o.core.errors.defer`)."""
    ops: list[str] = []
    error = None
    try:
        parts = _parts(node, [])
        res = _segmented(node, parts, ops, out) if parts else _evaluate(node, ops, out)
    except (ValueError, ArithmeticError) as exc:
        error = exc
        res = np.zeros(node.shape, dtype=node.dtype)
        if out is not None:
            out[...] = res
            res = out
    if active:
        rec = Record(f"fused({', '.join(ops)})")
        for t in active:
            t.records.append(rec)
    return res, error
