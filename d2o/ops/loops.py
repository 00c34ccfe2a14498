"""Compiled loop kernels (numba) for fused element-wise expressions over local pieces.

`d2o.ops.fused` hands this module the largest subtrees of a deferred expression that a
plain loop computes exactly as numpy does; each becomes the source of one ``@njit``
loop nest over the output's index space (no ``fastmath``: IEEE operations, the same
ones in the same order per element as numpy, so the result is numpy's bit for bit),
compiled once per expression text (numba specialises it per operand types).  numba is
imported at the first such kernel, never at ``import d2o`` (import-time budget).

Exact per element, so fused here (the one exception: the float64 powers by ``-1.5``,
``1.5`` and ``-0.5``, computed from a square root within `HALF_ULPS` units in the last
place of numpy's ``pow``, `HALF_POWERS`):

* ``+ - *`` in float32, float64 and the integer types (integers computed wider and
  cast back: numpy's wrap-around), ``/`` in float32 and float64, ``x ** 2`` and
  ``square`` as ``x*x`` (numpy's ``square`` loop), ``-x`` (float and signed integers), ``abs``, ``sqrt``,
  ``floor``, ``ceil`` (floats);
* comparisons of floats or integers, ``& | ^ ~`` and the logical functions of bools.

Every operand is cast to its loop dtype as numpy resolves it (NEP 50: Python scalars
are weak, cast to the loop dtype), every result to the node's dtype.  Complex numbers
(numpy's complex division differs), other powers, integer division and remainders,
and the transcendental functions run on numpy (`d2o.ops.fused`).

Overlapping assignments (`ring_depth`): when the target is the leaves' own memory,
as in ``u[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + ...)``, numpy evaluates
the whole right side before assigning.  A kernel keeps the last ``k + 1`` computed
rows (along the first axis) in a ring buffer and writes row ``i - k`` back once no
later row reads it: one read and one write of the array, numpy's result.  ``k`` comes
from the byte offsets of the overlapping leaves (all with the target's strides).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from typing import Any

import numpy as np

from ..core import fpstatus

__all__ = ["loop_dtypes", "exact", "quiet", "Builder", "compile_kernel", "compile_sum", "c_typed",
           "ring_depth", "kernels", "half_power", "HALF_POWERS", "HALF_ULPS"]  # fmt: skip

_NB: list = [None]  # numba, loaded at the first compiled kernel (False: not installed)
_KERNELS: dict = {}  # (text, ndim, ring depth) -> numba dispatcher

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
_INTS = tuple(np.dtype(c) for c in "bhilqBHILQ")
_SIGNED = tuple(d for d in _INTS if d.kind == "i")
_BOOL = np.dtype(bool)
_ARITH = {np.add: "+", np.subtract: "-", np.multiply: "*"}
_COMPARE = {np.less: "<", np.less_equal: "<=", np.greater: ">", np.greater_equal: ">=",
            np.equal: "==", np.not_equal: "!="}  # fmt: skip
_BOOLOPS = {np.bitwise_and: "&", np.bitwise_or: "|", np.bitwise_xor: "^", np.logical_and: "&",
            np.logical_or: "|", np.logical_xor: "^"}  # fmt: skip
_FUNCS: dict[Any, str] = {np.sqrt: "np.sqrt", np.floor: "np.floor", np.ceil: "np.ceil",
                          np.absolute: "abs"}  # fmt: skip
#: the binary operations a loop writes as Python's operator (``**``: the C library's
#: ``pow``, as numpy's, `libm_pow`)
_INFIX: dict[Any, str] = {**_ARITH, np.true_divide: "/", **_COMPARE, **_BOOLOPS, np.power: "**"}
#: operations a loop computes at about the cost of reading their operands
_CHEAP = frozenset({*_ARITH, *_COMPARE, *_BOOLOPS, np.true_divide, np.square, np.negative,
                    np.invert, np.logical_not, np.absolute, np.floor, np.ceil, np.sqrt})  # fmt: skip
#: the most rows a ring buffer holds back (a deeper overlap takes a temporary)
MAX_DEPTH = 8


def kernels() -> int:
    """How many loop kernels are compiled and cached in this process."""
    return len(_KERNELS)


def _numba() -> Any:
    if _NB[0] is None:
        try:
            import numba  # third-party, loaded lazily: import-time budget
        except ImportError:  # pragma: no cover - the fusion extra is not installed
            _NB[0] = False
        else:
            _NB[0] = numba
    return _NB[0]


def available() -> bool:
    """True when numba can be imported (imports it)."""
    return bool(_numba())


def quiet(err: tuple) -> bool:
    """True when a compiled kernel may run under the error states ``err``: "ignore", or
    "warn" where this thread's flags can be read (`d2o.ops.fused._watched` warns as
    numpy does); under "raise", "call", "print" or "log" numpy computes."""
    ok = _QUIETS.get(err)
    if ok is None:
        ok = _QUIETS[err] = all(e == "ignore" or (e == "warn" and fpstatus.available())
                                for e in err)  # fmt: skip
    return ok


_QUIETS: dict = {}  # error states -> `quiet` (a few combinations in a process)


def _is_node(a: Any) -> bool:
    return hasattr(a, "ufunc")


#: float64 powers by a constant exponent that a loop computes from a square root
#: (vectorised, 1.2 against 20 ns an element for ``pow``), within `HALF_ULPS` of numpy's
#: ``pow`` for bases between `HALF_RANGE`; other bases (zeros, infinities, nan, negative,
#: subnormal or huge: the special cases) still call ``pow``, numpy's bit for bit
HALF_POWERS = {-1.5: "1.0 / ({b} * np.sqrt({b}))", 1.5: "{b} * np.sqrt({b})",
               -0.5: "1.0 / np.sqrt({b})"}  # fmt: skip
HALF_RANGE = (1e-150, 1e150)
#: the most units in the last place a `HALF_POWERS` result differs from numpy's (the
#: square root, product and quotient each round once; measured: 2 on 3 million bases)
HALF_ULPS = 3


def half_power(x: Any) -> float | None:
    """The exponent when the scalar operand ``x`` is one of `HALF_POWERS`, else None."""
    if _is_node(x) or isinstance(x, (np.ndarray, bool, np.bool_)):
        return None
    try:
        e = float(x)
    except (TypeError, ValueError):
        return None
    return e if e in HALF_POWERS else None


def is_two(x: Any) -> bool:
    """True for a scalar operand equal to 2 (numpy's ``x ** 2`` is ``square``)."""
    return not _is_node(x) and not isinstance(x, np.ndarray) and x == 2


def loop_dtypes(node: Any) -> tuple | None:
    """numpy's loop dtypes (inputs..., output) of ``node``, NEP 50 scalars weak; None where
    numpy resolves none (a type error numpy raises itself)."""
    types: list = []
    for a in node.args:
        if isinstance(a, (np.ndarray, np.generic)) or _is_node(a):
            types.append(a.dtype)
        elif isinstance(a, bool):
            types.append(_BOOL)
        else:
            types.append(type(a))
    key = (node.ufunc, *types)
    hit = _LOOPS.get(key, False)
    if hit is False:
        try:
            hit = tuple(node.ufunc.resolve_dtypes((*types, None)))
        except Exception:
            hit = None
        if len(_LOOPS) < 4096:
            _LOOPS[key] = hit
    return hit


#: (ufunc, operand types) -> numpy's loop dtypes or None (`loop_dtypes`: resolving them
#: costs microseconds, and every node asks twice)
_LOOPS: dict = {}


def exact(node: Any) -> bool:
    """True when a compiled loop computes ``node`` exactly as numpy does (module notes)."""
    if node.value is not None or not quiet(node.err):
        return False
    loop = loop_dtypes(node)
    if loop is None or loop[-1] != node.dtype:
        return False
    f, ins, res = node.ufunc, loop[:-1], loop[-1]
    if any(d != res for d in ins) and f not in _COMPARE:
        return False
    if f is np.power:
        if is_two(node.args[1]) and node.call is not f:
            return res in _FLOATS + _INTS
        e = node.args[1]
        fast = not _is_node(e) and not isinstance(e, np.ndarray) and e in FAST_EXPONENTS
        return res == _F64 and not (fast and node.call is not f) and libm_pow()
    if f in _ARITH or f is np.square:
        return res in _FLOATS or res in _INTS
    if f is np.true_divide or f in _FUNCS:
        return res in _FLOATS
    if f is np.negative:
        return res in _FLOATS or res in _SIGNED
    if f in _COMPARE:
        return ins[0] == ins[1] and (ins[0] in _FLOATS or ins[0] in _INTS)
    if f in _BOOLOPS or f is np.invert or f is np.logical_not:
        return res == _BOOL
    return False


_F64 = np.dtype(np.float64)
#: exponents numpy's ``ndarray ** scalar`` computes otherwise than by ``power``
FAST_EXPONENTS = (-1, 0, 0.5, 1, 2)
_POW: list = [None]  # libm_pow's answer, once per process


def libm_pow() -> bool:
    """True when numpy's float64 ``power`` gives the C library's ``pow`` (a build
    without SIMD powers), which a compiled loop calls: checked once per process on
    probe values (special values, signs, subnormals, large and fractional
    exponents), so that a fused power is numpy's bit for bit or not fused at all."""
    if _POW[0] is None:
        nb = _numba()
        if not nb:  # pragma: no cover - the fusion extra is not installed
            _POW[0] = False
            return False
        base = np.array([-3.0, -1.0, -0.5, -0.0, 0.0, 5e-324, 1e-310, 0.3, 0.5, 1.0, 2.0,
                         3.7, 1e300, np.inf, -np.inf, np.nan])  # fmt: skip
        expo = np.array([-1.5, -2.5, 0.3, 1 / 3, 3.7, 10.0, -0.5, 2.5, 1.5, -1.0, 0.0, 2.0, np.nan])
        rng = np.random.default_rng(0)
        x = np.concatenate([np.repeat(base, expo.size), rng.random(512) * 10])
        y = np.concatenate([np.tile(expo, base.size), rng.random(512) * 8 - 4])

        def probe(out, a, b):  # pragma: no cover - compiled
            for i in range(out.shape[0]):
                out[i] = a[i] ** b[i]

        got = np.empty_like(x)
        nb.njit(error_model="numpy")(probe)(got, x, y)
        with np.errstate(all="ignore"):
            want = np.power(x, y)
        _POW[0] = bool(np.array_equal(got, want, equal_nan=True))
    return _POW[0]


def costly(node: Any) -> bool:
    """True for a node whose operation costs more than a pass over memory (a power other
    than a square, a function numpy computes by a library call): evaluated once where
    several expressions read it (`Builder`), not recomputed in each."""
    f = node.ufunc
    if f is np.power:
        return not is_two(node.args[1])
    return f not in _CHEAP


def _cast(d: np.dtype) -> str:
    """The text casting to ``d`` (``np.float64``); cached: ``dtype.name`` is slow."""
    text = _CASTS.get(d)
    if text is None:
        text = _CASTS[d] = "np.bool_" if d == _BOOL else f"np.{d.name}"
    return text


_CASTS: dict = {}


class Builder:
    """One loop kernel's expression over the index space of ``shape``: its per-element
    text, its operands (arrays indexed per element, scalars cast to their loop dtype;
    deduplicated by identity) and the operations it holds (for the trace).
    ``evaluate(node, ops)`` evaluates a subtree the loop does not take (numexpr or
    numpy).  Operands of fewer axes or of extent 1 broadcast (numpy's rules): such an
    axis is dropped from the operand, which is indexed by the loop's other indices."""

    def __init__(self, ops: list, evaluate: Any, shape: tuple) -> None:
        #: the expression's text with its `HALF_POWERS` by ``pow`` (`text` returns it
        #: with them from square roots, their bases in locals ``h0, h1, ...``: the texts
        #: of `bases`) and the range tests of those
        self.exact = ""
        self.bases: list[str] = []
        self.ranges: list[str] = []
        self.names: dict[int, str] = {}
        self.values: list = []
        self.ops = ops
        self.evaluate = evaluate
        self.shape = shape
        self.axes: list = []  # per operand: the loop axes its axes follow
        self.held: list = []

    def var(self, value: Any) -> str:
        """The text reading ``value`` at the loop's indices (``i0, i1, ...``)."""
        name = self.names.get(id(value))
        if name is None:
            name = self.names[id(value)] = f"v{len(self.values)}"
            axes: list = []
            if isinstance(value, np.ndarray):
                self.held.append(value)  # (its id stays its own while the kernel is built)
                value, axes = self._dense(value)
            self.values.append(value)
            self.axes.append(axes)
        k = int(name[1:])
        if not isinstance(self.values[k], np.ndarray):
            return name
        return f"{name}[{', '.join(f'i{a}' for a in self.axes[k])}]"

    def _dense(self, value: np.ndarray) -> tuple:
        """``value`` without its broadcast axes (extent 1 where the loop's is not), and
        the loop axes its remaining ones follow; a 0-d result is a numpy scalar."""
        d = len(self.shape)
        shift = d - value.ndim
        keep = [j for j in range(value.ndim) if value.shape[j] != 1 or self.shape[shift + j] == 1]
        if not keep:
            return value.reshape(())[()], []
        if len(keep) < value.ndim:
            value = value.reshape([value.shape[j] for j in keep])
        return value, [shift + j for j in keep]

    def text(self, node: Any) -> str:
        """``node``'s per-element text (its `HALF_POWERS` from square roots; `exact`
        holds the text with ``pow``, `ranges` the tests of their bases)."""
        fast, self.exact = self._text(node)
        return fast

    def _text(self, node: Any) -> tuple[str, str]:
        loop = loop_dtypes(node)
        assert loop is not None
        f, args = node.ufunc, node.args
        square = f is np.square or (f is np.power and is_two(args[1]))
        if f is np.power and square:  # ``x ** 2`` is numpy's square: x*x
            args = args[:1]
        fparts, xparts = [], []  # (the operand texts of both forms)
        for a, d in zip(args, loop):
            if _is_node(a) and a.value is None and costly(a) and a.shared():
                a.evaluate()  # computed once, read by each expression holding it
            if _is_node(a) and a.value is None and exact(a):
                p, q = self._text(a)
                dt = a.dtype
            elif _is_node(a) or isinstance(a, np.ndarray):
                v = self.evaluate(a, self.ops) if _is_node(a) else a
                p, dt = self.var(v), v.dtype
                q = p
            else:  # a scalar, cast to its loop dtype as numpy casts it
                p, dt = self.var(np.asarray(a).astype(d)[()]), d
                q = p
            fparts.append(p if dt == d else f"{_cast(d)}({p})")
            xparts.append(q if dt == d else f"{_cast(d)}({q})")
        self.ops.append(f.__name__)
        e = half_power(args[1]) if f is np.power and not square else None
        if e is not None:  # (`HALF_POWERS`; the range test picks the bases ``pow`` takes)
            b, (lo, hi) = f"h{len(self.bases)}", HALF_RANGE
            self.bases.append(fparts[0])  # (a local: one evaluation, and the loop vectorises)
            self.ranges.append(f"({b} > {lo}) & ({b} < {hi})")
            body = HALF_POWERS[e].format(b=b)
        else:
            body = _body(f, fparts, square)
        return f"{_cast(node.dtype)}({body})", f"{_cast(node.dtype)}({_body(f, xparts, square)})"


def _body(f: np.ufunc, parts: list, square: bool) -> str:
    """The text of ufunc ``f`` of the operand texts ``parts``."""
    if square:
        return f"{parts[0]} * {parts[0]}"
    op = _INFIX.get(f)
    if op is not None:
        return f"{parts[0]} {op} {parts[1]}"
    if f is np.negative:
        return f"-{parts[0]}"
    if f is np.invert or f is np.logical_not:
        return f"not {parts[0]}"
    return f"{_FUNCS[f]}({parts[0]})"


def _source(text: str, nargs: int, ndim: int, depth: int | None, checked: tuple = ()) -> str:
    """The kernel's source: ``out[idx] = text`` over every index below ``shape``
    (``depth`` None), or through a ring buffer ``buf`` of ``depth + 1`` rows (module
    notes).  ``checked`` = (bases, range test, exact text): each run of the last axis
    is written by ``text`` (reading the bases as locals ``h0, h1, ...``) while the test
    is counted (both vectorise), and where it failed anywhere in the run, those
    elements again by the exact text (`HALF_POWERS`)."""
    args = ", ".join(f"v{i}" for i in range(nargs))
    idx = [f"i{k}" for k in range(ndim)]
    inner = ", ".join(idx[1:])

    def nest(lines: list, body: str, level: int, first: int) -> None:
        pad = "    " * level
        for k in range(first, ndim):
            lines.append(f"{pad}for i{k} in range(shape[{k}]):")
            pad += "    "
        lines.append(pad + body)

    lines = [f"def kernel(out, buf, shape, {args}):"]
    at = f"out[{', '.join(idx)}]"
    if depth is None and checked and ndim:
        bases, test, exact_text = checked
        pad = "    "
        for k in range(ndim - 1):
            lines.append(f"{pad}for i{k} in range(shape[{k}]):")
            pad += "    "
        lines.append(f"{pad}bad = False")
        last = f"for i{ndim - 1} in range(shape[{ndim - 1}]):"
        lets = [f"h{k} = {b}" for k, b in enumerate(bases)]
        lines += [f"{pad}{last}", *(f"{pad}    {t}" for t in lets), f"{pad}    {at} = {text}",
                  f"{pad}    bad |= not ({test})", f"{pad}if bad:", f"{pad}    {last}",
                  *(f"{pad}        {t}" for t in lets), f"{pad}        if not ({test}):",
                  f"{pad}            {at} = {exact_text}"]  # fmt: skip
        return "\n".join(lines) + "\n"
    if depth is None:
        nest(lines, f"{at} = {text}", 1, 0)
        return "\n".join(lines) + "\n"
    ring = depth + 1
    row = f"r, {inner}" if inner else "r"
    wrow = f"w, {inner}" if inner else "w"
    brow = f"w % {ring}, {inner}" if inner else f"w % {ring}"
    lines += ["    n0 = shape[0]", "    for i0 in range(n0):", f"        r = i0 % {ring}"]
    nest(lines, f"buf[{row}] = {text}", 2, 1)
    lines += [f"        w = i0 - {depth}", "        if w >= 0:"]
    nest(lines, f"out[{wrow}] = buf[{brow}]", 3, 1)
    lines += [f"    for w in range(max(n0 - {depth}, 0), n0):"]
    nest(lines, f"out[{wrow}] = buf[{brow}]", 2, 1)
    return "\n".join(lines) + "\n"


#: numpy's pairwise summation (``pairwise_sum`` of its float loops): ranges of at most
#: this many elements are summed with eight accumulators, longer ones split in two
PAIRWISE_BLOCK = 128


def _decode(lines: list, pad: str, ndim: int) -> None:
    """Lines setting ``i0 .. i{ndim-1}`` to the multi-index of flat index ``lo``."""
    if ndim == 1:
        lines.append(f"{pad}i0 = lo")
        return
    lines.append(f"{pad}rem = lo")
    for k in range(ndim - 1, 0, -1):
        lines.append(f"{pad}i{k} = rem % shape[{k}]")
        lines.append(f"{pad}rem = rem // shape[{k}]")
    lines.append(f"{pad}i0 = rem")


def _step(lines: list, pad: str, ndim: int) -> None:
    """Lines advancing ``i0 .. i{ndim-1}`` to the next flat index (C order)."""
    k = ndim - 1
    lines.append(f"{pad}i{k} += 1")
    for j in range(k, 0, -1):
        lines.append(f"{pad}if i{j} == shape[{j}]:")
        pad += "    "
        lines.append(f"{pad}i{j} = 0")
        lines.append(f"{pad}i{j - 1} += 1")


def _sum_source(text: str, nargs: int, ndim: int, acc: np.dtype) -> str:
    """The source of ``kernel(out, shape, length, v0, ...)``: ``out[r]`` the sum of the
    expression's values at flat indices ``r * length`` to ``(r + 1) * length - 1`` (C
    order), for every ``r`` below ``out.size``: the whole piece (one row) or its last
    axis.  Floats follow numpy's pairwise summation exactly (its ``pairwise_sum``:
    blocks of up to `PAIRWISE_BLOCK` elements with eight accumulators, longer ranges
    halved at a multiple of 8; the result added to 0), so the sum is numpy's bit for bit
    on the same values in C order; integers and bools are summed in order, in the
    accumulator dtype ``acc`` (numpy's wrap-around)."""
    args = ", ".join(f"v{i}" for i in range(nargs))
    a = _cast(acc)
    lines = [f"def kernel(out, shape, length, {args}):"]
    if acc not in _FLOATS:
        lines += ["    for r in range(out.shape[0]):", f"        s = {a}(0)",
                  "        if length:", "            lo = r * length"]  # fmt: skip
        _decode(lines, "            ", ndim)
        lines += [
            "            for t in range(length):",
            f"                s = {a}(s + {a}({text}))",
        ]
        _step(lines, "                ", ndim)
        lines.append("        out[r] = s")
        return "\n".join(lines) + "\n"
    b = PAIRWISE_BLOCK
    lines += [
        f"    buf = np.empty({b}, np.{acc.name})",
        "    stlo = np.empty(64, np.int64)",
        "    stn = np.empty(64, np.int64)",
        "    sts = np.empty(64, np.int64)",
        f"    vals = np.empty(64, np.{acc.name})",
        "    for r in range(out.shape[0]):",
        "        top = 0",
        "        nv = 0",
        "        stlo[0] = r * length",
        "        stn[0] = length",
        "        sts[0] = 0",
        "        while top >= 0:",
        "            lo = stlo[top]",
        "            n = stn[top]",
        f"            if n <= {b}:",
    ]
    pad = "                "
    last = ndim - 1
    _decode(lines, pad, ndim)
    # a block inside one run of the last axis: its values computed as they are summed
    # (unsigned indices along the run: no negative-index test per element, measured 1.4x)
    lines += [f"{pad}if i{last} + n <= shape[{last}]:", f"{pad}    c = np.uint64(i{last})"]
    _block(lines, pad + "    ", a, lambda t: [f"i{last} = c + np.uint64({t})"], text)
    # a block across runs (a whole-piece sum): its values gathered first
    lines += [f"{pad}else:", f"{pad}    for t in range(n):", f"{pad}        buf[t] = {text}"]
    _step(lines, pad + "        ", ndim)
    _block(lines, pad + "    ", a, lambda t: [], f"buf[{'{t}'}]")
    lines += [
        f"{pad}vals[nv] = s",
        f"{pad}nv += 1",
        f"{pad}top -= 1",
        "            else:",
        "                n2 = n // 2",
        "                n2 -= n2 % 8",
        "                if sts[top] == 0:",
        "                    sts[top] = 1",
        "                    top += 1",
        "                    stlo[top] = lo",
        "                    stn[top] = n2",
        "                    sts[top] = 0",
        "                elif sts[top] == 1:",
        "                    sts[top] = 2",
        "                    top += 1",
        "                    stlo[top] = lo + n2",
        "                    stn[top] = n - n2",
        "                    sts[top] = 0",
        "                else:",
        "                    nv -= 1",
        f"                    vals[nv - 1] = {a}(vals[nv - 1] + vals[nv])",
        "                    top -= 1",
        f"        out[r] = {a}({a}(0) + vals[0])",
    ]
    return "\n".join(lines) + "\n"


def _block(lines: list, pad: str, a: str, at: Any, value: str) -> None:
    """Lines setting ``s`` to numpy's sum of one block of ``n`` values (at most
    `PAIRWISE_BLOCK`): below 8 in order from 0; else eight accumulators over the
    multiples of 8, combined pairwise, then the rest in order.  ``at(t)``: the lines
    placing the loop at value ``t``; ``value``: the value's text (``{t}`` replaced)."""

    def get(t: str) -> list:
        return [*at(t), value.replace("{t}", t)]

    def assign(p: str, t: str, target: str, add: str) -> None:
        *moves, v = get(t)
        lines.extend(p + m for m in moves)
        lines.append(f"{p}{target} = {a}({add}{v})" if add else f"{p}{target} = {v}")

    lines += [f"{pad}if n < 8:", f"{pad}    s = {a}(0)", f"{pad}    for t in range(n):"]
    assign(pad + "        ", "t", "s", "s + ")
    lines.append(f"{pad}else:")
    for j in range(8):  # (unrolled: eight scalar accumulators the compiler keeps in registers)
        assign(pad + "    ", str(j), f"r{j}", "")
    lines += [f"{pad}    t = 8", f"{pad}    m = n - n % 8", f"{pad}    while t < m:"]
    for j in range(8):
        assign(pad + "        ", f"t + {j}", f"r{j}", f"r{j} + ")
    lines += [
        f"{pad}        t += 8",
        f"{pad}    s = {a}({a}({a}(r0 + r1) + {a}(r2 + r3)) + {a}({a}(r4 + r5) + {a}(r6 + r7)))",
        f"{pad}    while t < n:",
    ]
    assign(pad + "        ", "t", "s", "s + ")
    lines.append(f"{pad}        t += 1")


def compile_sum(text: str, nargs: int, ndim: int, acc: np.dtype) -> Any:
    """The compiled ``kernel(out, shape, length, *operands)`` of `_sum_source` (cached;
    None without numba)."""
    return _compile(("sum", text, ndim, acc), lambda: _sum_source(text, nargs, ndim, acc))


def compile_kernel(builder: Builder, text: str, ndim: int, depth: int | None) -> Any:
    """The compiled kernel ``kernel(out, buf, shape, *operands)`` of ``builder``'s
    expression ``text`` (cached; None without numba): with its `HALF_POWERS` from square
    roots where it writes straight into ``out`` (``depth`` None), else by ``pow``.  Pass
    the operands through `c_typed`."""
    nargs = len(builder.values)
    if not builder.ranges:
        return _compile((text, ndim, depth), lambda: _source(text, nargs, ndim, depth))
    if depth is not None or not ndim:
        exact_text = builder.exact
        return _compile((exact_text, ndim, depth), lambda: _source(exact_text, nargs, ndim, depth))
    checked = (tuple(builder.bases), " & ".join(builder.ranges), builder.exact)
    return _compile(
        (text, ndim, depth, checked), lambda: _source(text, nargs, ndim, depth, checked)
    )


def _compile(key: tuple, source: Any) -> Any:
    """The numba dispatcher of the generated ``source()`` (cached under ``key``; on disk
    where `cache_dir` allows); None without numba."""
    kernel = _KERNELS.get(key)
    if kernel is None:
        nb = _numba()
        if not nb:  # pragma: no cover - the fusion extra is not installed
            return None
        text = source()
        fn, cache = _on_disk(text)
        if fn is None:
            env: dict = {"np": np}
            exec(text, env)  # noqa: S102 - our own generated loop
            fn = env["kernel"]
        kernel = nb.njit(error_model="numpy", nogil=True, cache=cache)(fn)
        _KERNELS[key] = kernel
    return kernel


def cache_dir() -> str | None:
    """Where compiled loops are kept between processes (numba's cache, next to each
    kernel's generated source): ``$D2O_KERNEL_CACHE`` (empty or ``0``: nowhere), by
    default ``$XDG_CACHE_HOME/d2o/kernels`` (``~/.cache/d2o/kernels``)."""
    d = os.environ.get("D2O_KERNEL_CACHE")
    if d is None:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        d = os.path.join(base, "d2o", "kernels")
    return None if d in ("", "0") else d


def _on_disk(source: str) -> tuple[Any, bool]:
    """The kernel function loaded from its generated module in `cache_dir` (written once,
    atomically: ranks may race), so that numba can cache its machine code there; (None,
    False) where there is no usable cache directory."""
    d = cache_dir()
    if d is None:
        return None, False
    name = "d2o_loop_" + hashlib.sha1(source.encode()).hexdigest()[:24]
    path = os.path.join(d, name + ".py")
    try:
        if not os.path.exists(path):
            os.makedirs(d, exist_ok=True)
            tmp = f"{path}.{os.getpid()}.tmp"
            with open(tmp, "w") as f:
                f.write("import numpy as np\n\n\n" + source)
            os.replace(tmp, path)
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # numba's cache finds the kernel's globals by name
        spec.loader.exec_module(module)
    except (OSError, SyntaxError):  # pragma: no cover - a read-only or broken cache
        return None, False
    return module.kernel, True


def c_typed(a: Any) -> Any:
    """``a`` as an array numba types as C-contiguous, where its last axis is contiguous
    and each row stride a whole multiple of the next: the same memory, each axis but the
    first widened to the stride of the one before (``u[1:-1, 1:-1]`` of an n x n ``u``
    becomes (n - 2) x n).  A kernel indexes only below the true shape (its ``shape``
    argument), so it touches exactly ``a``'s elements; the widening lets LLVM vectorise
    the inner loop (measured: a 4096^2 stencil's kernel 2.3x faster than over the
    strided views).  Other arrays (and scalars) are returned as they are."""
    if not isinstance(a, np.ndarray) or a.ndim < 2 or a.flags.c_contiguous or not a.size:
        return a
    st, item = a.strides, a.itemsize
    if st[-1] != item:
        return a
    shape = [a.shape[0]]
    for k in range(1, a.ndim):
        if st[k - 1] <= 0 or st[k - 1] % st[k] or st[k - 1] // st[k] < a.shape[k]:
            return a
        shape.append(st[k - 1] // st[k])
    return np.lib.stride_tricks.as_strided(a, tuple(shape), st, writeable=a.flags.writeable)


def _address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


def ring_depth(values: list, out: np.ndarray) -> int | None:
    """How many rows a ring buffer must hold back so that a row-by-row kernel writing
    ``out`` reads only values not yet overwritten (0: the row being computed alone);
    None where no ring buffer does (an operand overlapping ``out`` with other strides or
    shape, ``out`` not ordered by rows, or deeper than `MAX_DEPTH`).  Local."""
    if out.ndim == 0 or out.size == 0:
        return None
    stride0 = out.strides[0]
    offsets = [s * (n - 1) for s, n in zip(out.strides[1:], out.shape[1:])]
    lo = sum(o for o in offsets if o < 0)
    hi = sum(o for o in offsets if o > 0) + out.itemsize - 1
    if stride0 <= hi - lo:  # rows interleave (or a reversed first axis)
        return None
    p = _address(out)
    depth = 0
    for v in values:
        if not (isinstance(v, np.ndarray) and v.ndim and np.may_share_memory(v, out)):
            continue
        if v.strides != out.strides or v.shape != out.shape or v.dtype != out.dtype:
            return None
        delta = _address(v) - p
        # the later rows m (from a written row) whose reads touch it: |m s0 + delta| <= span
        span = hi - lo
        m_max = (span - delta) // stride0
        if m_max > MAX_DEPTH:
            return None
        depth = max(depth, m_max)
    return depth
