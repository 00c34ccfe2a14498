"""Compiled loop kernels (numba) for fused element-wise expressions over local pieces.

`d2o.ops.fused` hands this module the largest subtrees of a deferred expression that a
plain loop computes exactly as numpy does; each becomes the source of one ``@njit``
loop nest over the output's index space (no ``fastmath``: IEEE operations, the same
ones in the same order per element as numpy, so the result is numpy's bit for bit),
compiled once per expression text (numba specialises it per operand types).  numba is
imported at the first such kernel, never at ``import d2o`` (import-time budget).

Exact per element, so fused here:

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

__all__ = ["loop_dtypes", "exact", "Builder", "compile_kernel", "c_typed", "ring_depth",
           "kernels"]  # fmt: skip

_NB: list = [None]  # numba, loaded at the first compiled kernel (False: not installed)
_KERNELS: dict = {}  # (text, ndim, ring depth) -> numba dispatcher

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
_INTS = tuple(np.dtype(c) for c in "bhilqBHILQ")
_SIGNED = tuple(d for d in _INTS if d.kind == "i")
_BOOL = np.dtype(bool)
_QUIET = ("ignore", "warn")
_ARITH = {np.add: "+", np.subtract: "-", np.multiply: "*"}
_COMPARE = {np.less: "<", np.less_equal: "<=", np.greater: ">", np.greater_equal: ">=",
            np.equal: "==", np.not_equal: "!="}  # fmt: skip
_BOOLOPS = {np.bitwise_and: "&", np.bitwise_or: "|", np.bitwise_xor: "^", np.logical_and: "&",
            np.logical_or: "|", np.logical_xor: "^"}  # fmt: skip
_FUNCS = {np.sqrt: "np.sqrt", np.floor: "np.floor", np.ceil: "np.ceil", np.absolute: "abs"}
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


def _is_node(a: Any) -> bool:
    return hasattr(a, "ufunc")


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
    try:
        return tuple(node.ufunc.resolve_dtypes((*types, None)))
    except Exception:
        return None


def exact(node: Any) -> bool:
    """True when a compiled loop computes ``node`` exactly as numpy does (module notes)."""
    if node.value is not None or not all(e in _QUIET for e in node.err):
        return False
    loop = loop_dtypes(node)
    if loop is None or loop[-1] != node.dtype:
        return False
    f, ins, res = node.ufunc, loop[:-1], loop[-1]
    if any(d != res for d in ins) and f not in _COMPARE:
        return False
    if f is np.power:
        return is_two(node.args[1]) and node.call is not f and res in _FLOATS + _INTS
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


def _cast(d: np.dtype) -> str:
    return "np.bool_" if d == _BOOL else f"np.{d.name}"


class Builder:
    """One loop kernel's expression: its per-element text, its operands (arrays indexed
    per element, scalars cast to their loop dtype; deduplicated by identity) and the
    operations it holds (for the trace).  ``evaluate(node, ops)`` evaluates a subtree
    the loop does not take (numexpr or numpy)."""

    def __init__(self, ops: list, evaluate: Any) -> None:
        self.names: dict[int, str] = {}
        self.values: list = []
        self.ops = ops
        self.evaluate = evaluate

    def var(self, value: Any, index: str) -> str:
        name = self.names.get(id(value))
        if name is None:
            name = self.names[id(value)] = f"v{len(self.values)}"
            self.values.append(value)
        return f"{name}[{index}]" if isinstance(value, np.ndarray) else name

    def text(self, node: Any, index: str) -> str:
        loop = loop_dtypes(node)
        assert loop is not None
        f, args = node.ufunc, node.args
        if f is np.power:  # ``x ** 2`` is numpy's square: x*x
            args = args[:1]
        parts = []
        for a, d in zip(args, loop):
            if _is_node(a) and a.value is None and exact(a):
                p = self.text(a, index)
                dt = a.dtype
            elif _is_node(a) or isinstance(a, np.ndarray):
                v = self.evaluate(a, self.ops) if _is_node(a) else a
                p, dt = self.var(v, index), v.dtype
            else:  # a scalar, cast to its loop dtype as numpy casts it
                p, dt = self.var(np.asarray(a).astype(d)[()], index), d
            parts.append(p if dt == d else f"{_cast(d)}({p})")
        self.ops.append(f.__name__)
        if f is np.power or f is np.square:
            body = f"{parts[0]} * {parts[0]}"
        elif f in _ARITH:
            body = f"{parts[0]} {_ARITH[f]} {parts[1]}"
        elif f is np.true_divide:
            body = f"{parts[0]} / {parts[1]}"
        elif f in _COMPARE:
            body = f"{parts[0]} {_COMPARE[f]} {parts[1]}"
        elif f in _BOOLOPS:
            body = f"{parts[0]} {_BOOLOPS[f]} {parts[1]}"
        elif f is np.negative:
            body = f"-{parts[0]}"
        elif f is np.invert or f is np.logical_not:
            body = f"not {parts[0]}"
        else:
            body = f"{_FUNCS[f]}({parts[0]})"
        return f"{_cast(node.dtype)}({body})"


def _source(text: str, nargs: int, ndim: int, depth: int | None) -> str:
    """The kernel's source: ``out[idx] = text`` over every index below ``shape``
    (``depth`` None), or through a ring buffer ``buf`` of ``depth + 1`` rows (module
    notes)."""
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
    if depth is None:
        nest(lines, f"out[{', '.join(idx)}] = {text}", 1, 0)
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


def compile_kernel(text: str, nargs: int, ndim: int, depth: int | None) -> Any:
    """The compiled kernel ``kernel(out, buf, shape, *operands)`` (cached; None without
    numba).  Pass the operands through `c_typed`."""
    key = (text, ndim, depth)
    kernel = _KERNELS.get(key)
    if kernel is None:
        nb = _numba()
        if not nb:  # pragma: no cover - the fusion extra is not installed
            return None
        source = _source(text, nargs, ndim, depth)
        fn, cache = _on_disk(source)
        if fn is None:
            env: dict = {"np": np}
            exec(source, env)  # noqa: S102 - our own generated loop
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
