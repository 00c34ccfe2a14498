"""Deferred element-wise work and fused kernels (the ``lazy`` option; d2o.ops.deferred).

numpy is the oracle: random element-wise expressions (derandomized Hypothesis) over
views of one array, with assignments into overlapping targets; dtype promotion (NEP 50);
the forcing points; errors raised on every rank; one trace entry per fused kernel.
"""

from __future__ import annotations

import sys
import warnings

import numpy as np
import pytest
from _helpers import layouts, make, sample
from hypothesis import given, settings
from hypothesis import strategies as st

import d2o
import d2o.numpy
from d2o.core import config
from d2o.move import halo
from d2o.ops import deferred, fused, loops
from d2o.testing import assert_equal_to_numpy, assert_raises_everywhere, collective_assert


@pytest.fixture(autouse=True)
def lazy():
    with d2o.options(lazy=True, lazy_min=0):
        yield


def _pending(x) -> bool:
    return deferred.pending(x)


DTYPES = ["float64", "float32", "int64", "int32", "int8", "uint8", "bool", "complex128"]


def _exprs(dt: str) -> list:
    """Expressions f(xp, a, b) valid for numpy and distributed operands of dtype ``dt``."""
    kind = np.dtype(dt).kind
    out = [
        lambda xp, a, b: a + b * 2,
        lambda xp, a, b: (a - b) * a + 1,
        lambda xp, a, b: (a < b) | (a >= b),
        lambda xp, a, b: xp.multiply(a, a) - b,
    ]
    if kind == "b":
        out = [lambda xp, a, b: (a & b) | ~a, lambda xp, a, b: a ^ b == a, lambda xp, a, b: a + b]
    if kind in "fc":
        out += [
            lambda xp, a, b: 0.25 * (a + b + a * b) / 3.0,
            lambda xp, a, b: -(a**2) + abs(b),
            lambda xp, a, b: xp.sqrt(a * a + b * b) - a,
        ]
    if kind == "f":
        out += [lambda xp, a, b: xp.floor(a) + xp.ceil(b) * (a > 0), lambda xp, a, b: a**0.5]
    if kind in "iu":
        out += [lambda xp, a, b: a // 3 + a % 4 - (b << 1), lambda xp, a, b: a**2 - b]
    return out


@pytest.mark.parametrize("dt", DTYPES)
def test_expressions_equal_numpy_on_every_layout(dt):
    a = sample((5, 4), dt, positive=True)
    b = sample((5, 4), dt, seed=1, positive=True)
    for strategy, axis in layouts(2):
        x, y = make(a, strategy, axis), make(b, strategy, axis)
        for f in _exprs(dt):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                expected = f(np, a, b)
                got = f(np, x, y)
            assert_equal_to_numpy(got, expected)  # bit for bit, dtype included


@pytest.mark.parametrize("shape", [(0,), (1,), (0, 3), (2, 0), ()])
def test_empty_and_tiny(shape):
    a = sample(shape, "float64")
    for strategy, axis in layouts(len(shape)):
        x = make(a, strategy, axis)
        assert_equal_to_numpy(2 * x + x * x - 1.5, 2 * a + a * a - 1.5)


def test_transcendentals_are_numpys():
    """exp, log, sin, ... run on numpy inside a fused expression: numpy's bits."""
    a = sample((40,), "float64", positive=True) + 0.5
    for dt in ("float64", "float32"):
        v = a.astype(dt)
        for strategy, axis in layouts(1):
            x = make(v, strategy, axis)
            for f in (np.exp, np.log, np.sin, np.cos, np.tanh, np.log1p, np.arctan):
                assert_equal_to_numpy(f(x * 0.5) * 2 + 1, f(v * 0.5) * 2 + 1)


# -- dtype promotion (NEP 50) ---------------------------------------------------------


PROMOTIONS = [
    ("float32", lambda a: a * 0.1),  # a Python float is weak: float32
    ("float32", lambda a: a + np.float64(1.0)),  # a numpy scalar is not: float64
    ("int32", lambda a: a * 2.5),
    ("int32", lambda a: a + 7),
    ("int8", lambda a: a + np.int64(3)),
    ("uint8", lambda a: a * 3 + 250),  # wraps as numpy does
    ("int64", lambda a: a / 2),
    ("bool", lambda a: a + 1),
    ("bool", lambda a: a * 1.5),
    ("float32", lambda a: np.sqrt(a) + 1j),
    ("int32", lambda a: a < 2.5),
]


@pytest.mark.parametrize("case", range(len(PROMOTIONS)))
def test_dtype_promotion(case):
    dt, f = PROMOTIONS[case]
    a = sample((6,), dt, positive=True)
    for strategy, axis in layouts(1):
        x = make(a, strategy, axis)
        r = f(x)
        fusable = np.dtype(dt) in fused.FUSABLE and r.dtype in fused.FUSABLE
        collective_assert(_pending(r) == fusable, "deferred where a kernel fuses it")
        with np.errstate(all="ignore"):
            assert_equal_to_numpy(r, f(a))


def test_python_int_out_of_bounds_raised_when_built():
    x = make(sample((4,), "uint8"), "equal")
    assert_raises_everywhere(OverflowError, lambda: x + 300)
    assert_raises_everywhere(OverflowError, lambda: x - 1 + -1)


def test_shape_mismatch_raised_when_built():
    x = make(sample((3, 4), "float64"), "equal")
    y = make(sample((4, 3), "float64"), "equal")
    s = x * 2  # deferred
    assert_raises_everywhere(ValueError, lambda: s + y)
    assert_equal_to_numpy(s, sample((3, 4), "float64") * 2)


def test_type_error_raised_when_built():
    x = make(sample((4,), "bool"), "equal")
    assert_raises_everywhere(TypeError, lambda: x - x)
    f = make(sample((4,), "float64"), "equal")
    assert_raises_everywhere(TypeError, lambda: f << 1)


def test_integer_division_by_zero_warns_as_numpy():
    a = np.arange(6)
    x = make(a, "equal")
    r = x // 0
    with pytest.warns(RuntimeWarning, match="divide by zero"):
        d2o.evaluate(r)
    with np.errstate(divide="ignore"):
        expected = a // 0
    assert_equal_to_numpy(r, expected)


def _recorded_here(exc: BaseException, name: str, line: int) -> None:
    """``exc`` (on every rank) names the deferred operation and this file's line that
    recorded it (Python 3.11 and later: exception notes)."""
    if not hasattr(exc, "add_note"):
        return
    want = f"{fused.NAMED}{name} recorded at {__file__}:{line}"
    collective_assert(want in getattr(exc, "__notes__", ()), f"{exc.__notes__}")


def test_errstate_raise_is_numpys():
    a = np.arange(8.0)
    x = make(a, "equal")
    with np.errstate(divide="raise"):
        r = x / 0.0  # recorded under 'raise': evaluated by numpy, which raises
    exc = assert_raises_everywhere(FloatingPointError, r.get_full_data)
    _recorded_here(exc, "divide", sys._getframe().f_lineno - 2)


@pytest.mark.parametrize("engine", ["numexpr", "numba"])
def test_errstate_warn_warns_as_numpy_in_a_fused_kernel(monkeypatch, engine):
    """A compiled kernel reports no floating-point flags itself: they are read after it
    (`d2o.core.fpstatus`) and numpy's warnings given (numpy computing the expression
    again for them: a NaN compared in a vectorised loop raises "invalid" where numpy's
    comparison does not); nothing where nothing was raised or numpy ignores it.  A
    kernel writing into its own operand warns once per flag."""
    if engine == "numba":
        pytest.importorskip("numba")
    monkeypatch.setenv("D2O_FUSION_ENGINE", engine)
    a = np.arange(1.0, 9.0)
    a[2] = np.nan
    cases = [
        lambda p: p / 0.0 + 1,
        lambda p: (p - 4.0) * 2.0 < 3.0,
        lambda p: np.sqrt(p - 5.0) * 2.0,
        lambda p: (p * 1e300) * 1e300 + 1.0,
        lambda p: (p + 1.0) * 0.5,
    ]
    for strategy, axis in layouts(1):
        for f in cases:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                want = f(a)
            expected = sorted({str(w.message) for w in caught})
            x = make(a, strategy, axis)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                got = f(x).get_full_data()
            mine = {str(w.message) for w in caught}  # (a rank warns of its own piece)
            union = sorted(set().union(*d2o.default_comm().allgather(mine)))
            collective_assert(union == expected, f"{strategy}: {union} {expected}")
            collective_assert(mine <= set(expected), f"{strategy}: {mine}")
            collective_assert(np.array_equal(got, want, equal_nan=True), f"{strategy}: values")
    for write, want in [
        (lambda y: y.__setitem__(slice(1, None), y[:-1] / 0.0 + 1.0), "divide by zero in divide"),
        (lambda y: y.__setitem__(Ellipsis, np.sqrt(y - 5.0) * 2.0), "invalid value in sqrt"),
    ]:  # (into its own operands: not computed again, one warning per flag)
        y = make(a.copy(), "equal")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            write(y)
            y.get_full_data()
        mine = {str(w.message).replace(" encountered", "") for w in caught}
        messages = set().union(*d2o.default_comm().allgather(mine))
        collective_assert(messages == {want}, f"{messages}")


def test_negative_integer_power_raised_at_evaluation():
    x = make(np.arange(-4, 4), "equal")  # (negative exponents on the first ranks only:
    r = x**x  # the others raise the error they are sent, with its notes)
    line = sys._getframe().f_lineno - 1
    s = r + 1  # (evaluated with its operand: the note names the inner operation's line)
    exc = assert_raises_everywhere(ValueError, s.get_full_data)
    _recorded_here(exc, "power", line)


# -- forcing ----------------------------------------------------------------------------


def test_forcing_points():
    a = sample((6, 3), "float64")
    for strategy, axis in layouts(2):
        x = make(a, strategy, axis)
        checks = [
            (lambda r: r.get_full_data(), lambda e: e),
            (lambda r: r.sum(), lambda e: e.sum()),
            (lambda r: r[1:3], lambda e: e[1:3]),
            (lambda r: r.copy(), lambda e: e),
            (lambda r: np.cumsum(r, axis=0), lambda e: np.cumsum(e, axis=0)),
        ]
        for get, ref in checks:
            r = x * 3 - 1
            collective_assert(_pending(r), "deferred")
            got = get(r)
            collective_assert(not _pending(r), "evaluated")
            if isinstance(got, d2o.distributed_data_object):
                assert_equal_to_numpy(got, ref(a * 3 - 1), rtol=1e-12)
            else:
                collective_assert(np.allclose(got, ref(a * 3 - 1)), "value")
        r = x + 1
        text = repr(r)
        collective_assert(not _pending(r) and "distributed_data_object" in text, text)
        r = x + 1
        rows = [np.asarray(row) for row in r]
        collective_assert(np.array_equal(np.array(rows), a + 1), "iteration")


def test_scalars_and_local_data_force():
    x = make(np.array([2.5]), "equal")
    r = x * 2
    collective_assert(float(r) == 5.0 and bool(r > 4), "float/bool")
    y = make(np.arange(6.0), "equal")
    r = y + 1
    loc = r.get_local_data()
    collective_assert(np.array_equal(loc, y.get_local_data() + 1), "local data")


def test_writes_into_a_leaf_force_pending_expressions_first():
    a = np.arange(10.0)
    x = make(a, "equal")
    r = x * 2
    x[3] = 100.0  # r reads x: evaluated before the write
    x += 1
    x.fill(0.0)
    assert_equal_to_numpy(r, a * 2)


def test_named_intermediates_and_inplace_of_a_deferred_array():
    a = sample((7,), "float64")
    x = make(a, "equal")
    t = x + 1
    u = t * t
    t += 2  # t's expression grows; u keeps t's old value
    assert_equal_to_numpy(u, (a + 1) * (a + 1))
    assert_equal_to_numpy(t, a + 3)


def test_graph_size_limit():
    x = make(np.zeros(5), "equal")
    y = x
    for _ in range(100):
        y = y + 1
    collective_assert(y._expr.count <= deferred.LIMIT, "bounded graph")
    assert_equal_to_numpy(y, np.full(5, 100.0))


def test_evaluate_and_turning_lazy_off():
    x = make(np.arange(4.0), "equal")
    r, s = x + 1, x * 2
    d2o.evaluate(r)
    collective_assert(not _pending(r) and _pending(s), "explicit")
    d2o.set_options(lazy=False)  # the fixture turns it back on
    collective_assert(not _pending(s), "lazy off evaluates everything")
    assert_equal_to_numpy(s, np.arange(4.0) * 2)
    d2o.set_options(lazy=True)
    with pytest.raises(TypeError):
        d2o.set_options(lazy="yes")


def test_lazy_off_is_eager():
    with d2o.options(lazy=False):
        x = make(np.arange(4.0), "equal")
        r = x + 1
        collective_assert(not _pending(r), "eager")


# -- assignment and aliasing ------------------------------------------------------------


def test_aliasing_as_numpy():
    for strategy, axis in layouts(1):
        a = np.arange(12.0)
        x = make(a, strategy, axis)
        x += x[::-1]
        a += a[::-1]
        x[1:] = x[:-1] + 1
        a[1:] = a[:-1] + 1
        x[:-2] = x[2:] * 2 - x[:-2]
        a[:-2] = a[2:] * 2 - a[:-2]
        assert_equal_to_numpy(x, a)


def _stencil(u):
    return 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])


@pytest.mark.parametrize("inplace", [False, True])
def test_stencil_assignment(inplace):
    a = sample((9, 7), "float64")
    for strategy, axis in layouts(2):
        u = make(a, strategy, axis)
        ref = a.copy()
        target = u if inplace else u.copy()
        target[1:-1, 1:-1] = _stencil(u)
        ref[1:-1, 1:-1] = _stencil(a)  # Jacobi: the right side first
        assert_equal_to_numpy(target, ref)


def test_fused_assignment_writes_straight_into_the_target():
    """On one process the stencil into another array is one kernel; on several, the
    shifted views run eagerly (their layouts differ).  Only boundary rows move."""
    n = 64
    a = sample((n, n), "float64")
    u = make(a, "equal")
    new = u.copy()
    with d2o.trace() as t:
        new[1:-1, 1:-1] = _stencil(u)
    # (``new = u.copy()`` is deferred too: evaluated as the target is read, ``fused(copy)``)
    fusedrecs = [r.op for r in t.records if r.op.startswith("fused(") and r.op != "fused(copy)"]
    if d2o.default_comm().size == 1:  # (on several ranks the shifted views run eagerly)
        collective_assert(len(fusedrecs) == 1, [r.op for r in t.records])
        collective_assert(fusedrecs[0].count("add") == 3, fusedrecs[0])
    # only boundary rows move: never the whole array
    collective_assert(t.bytes_sent <= 12 * n * 8, f"{t.bytes_sent} bytes")
    ref = a.copy()
    ref[1:-1, 1:-1] = _stencil(a)
    assert_equal_to_numpy(new, ref)


def test_trace_one_entry_per_fused_kernel():
    a = sample((50,), "float64")
    x, y = make(a, "equal"), make(a + 1, "equal")
    with d2o.trace() as t:
        r = (x * 2 + y) / (y * y + 1)
        d2o.evaluate(r)
    ops = [rec.op for rec in t.records]
    collective_assert(ops.count("fused(multiply, add, multiply, add, divide)") == 1, ops)
    collective_assert(t.bytes_sent == 0 and t.bytes_received == 0 and t.collectives == 0, ops)
    b = a + 1
    assert_equal_to_numpy(r, (a * 2 + b) / (b * b + 1))


def test_kernels_are_cached():
    x = make(np.arange(20.0), "equal")
    d2o.evaluate(x * 3.0 + 1.0)
    n = fused.kernels()
    for k in range(3):
        d2o.evaluate(x * float(k) + 1.0)
    collective_assert(fused.kernels() == n, "one kernel per signature")


# -- properties: random expressions over views of one array ------------------------------

OPS = [
    lambda p, q: p + q,
    lambda p, q: p - q,
    lambda p, q: p * q,
    lambda p, q: p * 0.5 + q,
    lambda p, q: (p + 1.5) / (abs(q) + 1.0),
    lambda p, q: p - 2 * q,
    lambda p, q: -p + q**2,
    lambda p, q: np.sqrt(abs(p)) + q,
]


@st.composite
def programs(draw):
    n = draw(st.integers(3, 12))
    length = draw(st.integers(1, n))
    offsets = st.integers(0, n - length)
    leaves = draw(st.lists(offsets, min_size=2, max_size=5))
    steps = draw(st.lists(st.tuples(st.integers(0, len(OPS) - 1), st.integers(0, 99)),
                          min_size=1, max_size=6))  # fmt: skip
    target = draw(offsets)
    mode = draw(st.sampled_from(["assign", "iadd", "new"]))
    layout = draw(st.sampled_from(layouts(1)))
    return n, length, leaves, steps, target, mode, layout


def _run(program, x):
    n, length, leaves, steps, target, mode, _ = program
    views = [x[o : o + length] for o in leaves]
    e = views[0]
    for op, pick in steps:
        e = OPS[op](e, views[pick % len(views)])
    if mode == "assign":
        x[target : target + length] = e
    elif mode == "iadd":
        v = x[target : target + length]
        v += e
    else:
        return e
    return x


@settings(max_examples=40, deadline=None)
@given(programs())
def test_random_expressions_over_views_match_numpy(program):
    n, *_, layout = program
    a = sample((n,), "float64")
    x = make(a, *layout)
    got = _run(program, x)
    expected = _run(program, a.copy())
    assert_equal_to_numpy(got, expected)


# -- compiled loops (numba; d2o.ops.loops) ---------------------------------------------


@pytest.fixture
def numba_engine(monkeypatch):
    """Every fused kernel a compiled loop where exact (``auto`` takes large pieces only)."""
    pytest.importorskip("numba")
    monkeypatch.setenv("D2O_FUSION_ENGINE", "numba")


def _special(a: np.ndarray) -> np.ndarray:
    """``a`` with NaN, infinities and signed zeros in it (floats)."""
    a = a.copy()
    if a.dtype.kind == "f" and a.size >= 6:
        a.flat[:6] = [np.nan, np.inf, -np.inf, -0.0, 0.0, np.nan]
    return a


@pytest.mark.parametrize("dt", DTYPES)
def test_loops_equal_numpy_bit_for_bit(numba_engine, dt):
    a = _special(sample((5, 4), dt, positive=True))
    b = sample((5, 4), dt, seed=1, positive=True)
    for strategy, axis in layouts(2):
        x, y = make(a, strategy, axis), make(b, strategy, axis)
        for f in _exprs(dt):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                with np.errstate(all="ignore"):
                    expected = f(np, a, b)
                    got = f(np, x, y)
                    d2o.evaluate(got)
            assert_equal_to_numpy(got, expected)


def test_loops_take_exactly_what_numpy_computes_alike(numba_engine):
    """Which nodes compile to a loop: float and integer arithmetic, comparisons, bool
    logic, float64 powers where numpy's are the C library's (`loops.libm_pow`); not
    integer division, the exponents numpy's ``**`` computes otherwise (0.5: sqrt), other
    powers, transcendentals (complex numbers are not recorded at all)."""
    pow_ok = loops.libm_pow()
    cases = [
        ("float64", lambda a: (a - 1.5) * a / 3.0, True),
        ("float32", lambda a: np.sqrt(abs(a)) + a**2, True),
        ("int8", lambda a: a * 3 - a, True),
        ("uint8", lambda a: (a < 3) | (a == 4), True),
        ("float32", lambda a: np.square(a) + np.square(a - 1) < 9, True),
        ("int16", lambda a: np.square(a * 50) - 7, True),
        ("int64", lambda a: a // 3, False),
        ("float64", lambda a: a**3, pow_ok),
        ("float64", lambda a: (a + 1.0) ** -2.5, pow_ok),
        ("float64", lambda a: np.power(a, 0.5), pow_ok),
        ("float64", lambda a: a**0.5, False),
        ("float32", lambda a: a**3, False),
        ("int64", lambda a: a**3, False),
        ("float64", lambda a: np.exp(a), False),
    ]
    for dt, f, expected in cases:
        a = sample((6,), dt, positive=True)
        x = make(a, "equal")
        r = f(x)
        collective_assert(loops.exact(r._expr) == expected, f"{dt}: {r._expr.ufunc.__name__}")
        with np.errstate(all="ignore"):
            assert_equal_to_numpy(r, f(a))


@pytest.mark.parametrize("dt", ["float64", "float32"])
def test_loops_special_values(numba_engine, dt):
    a = _special(sample((12,), dt))
    b = _special(sample((12,), dt, seed=2))[::-1].copy()
    for strategy, axis in layouts(1):
        x, y = make(a, strategy, axis), make(b, strategy, axis)
        with np.errstate(all="ignore"):
            for f in (
                lambda p, q: p / q,
                lambda p, q: (p < q) ^ (p != q),
                lambda p, q: np.sqrt(p) - np.floor(q) * np.ceil(p),
                lambda p, q: -p * 0.1 + abs(q),
            ):
                assert_equal_to_numpy(f(x, y), f(a, b))


@pytest.mark.parametrize("shape", [(0,), (1,), (0, 3), (2, 0), (), (1, 1)])
def test_loops_empty_and_tiny(numba_engine, shape):
    a = sample(shape, "float64")
    for strategy, axis in layouts(len(shape)):
        x = make(a, strategy, axis)
        assert_equal_to_numpy(2 * x + x * x - 1.5, 2 * a + a * a - 1.5)
        if len(shape) == 2 and all(shape):
            y = x.copy()
            y[0:1] = y[0:1] * 3.0 + 1.0
            b = a.copy()
            b[0:1] = b[0:1] * 3.0 + 1.0
            assert_equal_to_numpy(y, b)


SHIFTS = [(-1, 0), (1, 0), (-2, 0), (2, 0), (0, 1), (0, -2), (-1, 1), (2, -1), (0, 0)]


@pytest.mark.parametrize("dt", ["float64", "float32", "int64", "int32"])
def test_ring_buffer_shifts_as_numpy(numba_engine, dt):
    """``u[dst] = u[dst shifted] * 3 + u[dst]``: the target overlaps its operands by whole
    rows (shifts of 1 and 2 rows, both signs, and along the rows): numpy's result."""
    a = sample((11, 10), dt)
    dst = (slice(2, 9), slice(2, 8))
    for sr, sc in SHIFTS:
        src = (slice(2 + sr, 9 + sr), slice(2 + sc, 8 + sc))
        for strategy, axis in layouts(2):
            u = make(a, strategy, axis)
            u[dst] = u[src] * 3 + u[dst]
            ref = a.copy()
            ref[dst] = ref[src] * 3 + ref[dst]
            assert_equal_to_numpy(u, ref)


@pytest.mark.parametrize("dt", ["float64", "float32"])
def test_inplace_stencil_one_pass(numba_engine, dt):
    """Jacobi in place: the right side is a temporary, written through a ring buffer of
    two rows (one process: one kernel, nothing moves); numpy's result bit for bit."""
    a = sample((12, 9), dt)
    for strategy, axis in layouts(2):
        u = make(a, strategy, axis)
        ref = a.copy()
        for _ in range(3):
            with d2o.trace() as t:
                u[1:-1, 1:-1] = _stencil(u)
            ref[1:-1, 1:-1] = _stencil(ref)
        if d2o.default_comm().size == 1:
            ops = [r.op for r in t.records]
            held = [op for op in ops if "in place: 2 rows held" in op]
            collective_assert(len(held) == 1 and held[0].count("add") == 3, ops)
            collective_assert(t.bytes_sent == 0 and t.collectives == 0, ops)
        assert_equal_to_numpy(u, ref)


def test_named_right_side_keeps_its_value(numba_engine):
    """A right side held by a name (or a list) is evaluated on its own before the
    target changes: it keeps numpy's value afterwards."""
    a = sample((8, 6), "float64")
    for strategy, axis in layouts(2):
        u = make(a, strategy, axis)
        v = _stencil(u)
        u[1:-1, 1:-1] = v
        held = [_stencil(u) + 1.0]
        u[1:-1, 1:-1] = held[0]
        u[1:-1, 1:-1] = 0.0
        ref = a.copy()
        ref_v = _stencil(ref)
        ref[1:-1, 1:-1] = ref_v
        ref_h = _stencil(ref) + 1.0
        assert_equal_to_numpy(v, ref_v)
        assert_equal_to_numpy(held[0], ref_h)


def test_loops_other_overlaps_take_a_temporary(numba_engine):
    for strategy, axis in layouts(1):
        a = np.arange(20.0)
        x = make(a, strategy, axis)
        x += x[::-1]
        a += a[::-1]
        x[1:] = x[:-1] * 2.0 + 1.0  # one element held back
        a[1:] = a[:-1] * 2.0 + 1.0
        x[:-3] = x[3:] - x[:-3]
        a[:-3] = a[3:] - a[:-3]
        x[::2] = x[1::2] * 0.5 + x[::2]
        a[::2] = a[1::2] * 0.5 + a[::2]
        assert_equal_to_numpy(x, a)
    s = sample((6, 6), "float64")
    u = make(s, "equal")
    u[...] = u.T * 2.0 + u
    s[...] = s.T * 2.0 + s
    assert_equal_to_numpy(u, s)


def test_loops_bad_input_raised_everywhere(numba_engine):
    a = sample((6, 5), "float64")
    u = make(a, "equal")
    w = make(sample((3, 5), "float64"), "equal")
    assert_raises_everywhere(ValueError, lambda: u.__setitem__((slice(1, -1),), w * 2.0 + w))
    assert_raises_everywhere(TypeError, lambda: u[1:-1] - (u[1:-1] > 0) ^ 1.5)
    assert_equal_to_numpy(u, a)  # nothing changed


def test_loops_cached_per_expression(numba_engine):
    x = make(np.arange(30.0), "equal")
    d2o.evaluate(x * 3.0 - 1.0)
    n = loops.kernels()
    for k in range(3):
        d2o.evaluate(x * float(k) - 1.0)
    collective_assert(loops.kernels() == n, "one kernel per expression")


@settings(max_examples=15, deadline=None)
@given(programs())
def test_random_expressions_compiled_match_numpy(program):
    with pytest.MonkeyPatch.context() as mp:
        pytest.importorskip("numba")
        mp.setenv("D2O_FUSION_ENGINE", "numba")
        n, *_, layout = program
        a = sample((n,), "float64")
        x = make(a, *layout)
        got = _run(program, x)
        expected = _run(program, a.copy())
        assert_equal_to_numpy(got, expected)


# -- shifted views on several ranks: halo rows, then one kernel per segment --------------


@pytest.mark.parametrize("dt", ["float64", "float32"])
def test_shifted_stencil_moves_only_halo_rows(dt):
    """``u[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + ...)`` on P ranks: the expression takes the
    centre view's layout (the target's), each shifted operand brings one row across each
    rank boundary: 2 rows per boundary per step in all, and one fused kernel; the
    assignment agrees on taking the fused way in one 96-byte record per rank."""
    n, steps = 24, 3
    a = sample((n, n), dt)
    comm = d2o.default_comm()
    u = make(a, "equal")
    ref = a.copy()
    row = (n - 2) * np.dtype(dt).itemsize
    for _ in range(steps):
        with d2o.options(check_args=False), d2o.trace() as t:  # (checked mode: its checks)
            u[1:-1, 1:-1] = _stencil(u)
        ref[1:-1, 1:-1] = _stencil(ref)
        ops = [r.op for r in t.records]
        sent = comm.allreduce(t.bytes_sent)
        record = 96 * comm.size if comm.size > 1 else 0
        collective_assert(sent == 2 * (comm.size - 1) * row + record, f"{sent} bytes: {ops}")
        fusedrecs = [op for op in ops if op.startswith("fused(")]
        collective_assert(len(fusedrecs) == 1 and fusedrecs[0].count("add") == 3, ops)
    assert_equal_to_numpy(u, ref)


@pytest.mark.parametrize("engine", ["numexpr", "numba"])
def test_shifted_expressions_on_every_layout(monkeypatch, engine):
    """Shifted views by one and two rows, both signs, into another array and in place,
    on every layout; each engine: numpy's result bit for bit."""
    if engine == "numba":
        pytest.importorskip("numba")
    monkeypatch.setenv("D2O_FUSION_ENGINE", engine)
    a = sample((13, 6), "float64")
    for strategy, axis in layouts(2):
        for s in (1, 2):
            u = make(a, strategy, axis)
            w = u.copy()
            ref, wref = a.copy(), a.copy()
            w[s:-s] = (u[: -2 * s] - u[2 * s :]) * 0.5 + u[s:-s] * u[s:-s]
            wref[s:-s] = (ref[: -2 * s] - ref[2 * s :]) * 0.5 + ref[s:-s] * ref[s:-s]
            u[s:-s] = u[2 * s :] * 2.0 - u[: -2 * s] / 3.0
            ref[s:-s] = ref[2 * s :] * 2.0 - ref[: -2 * s] / 3.0
            assert_equal_to_numpy(w, wref)
            assert_equal_to_numpy(u, ref)
            v = u[:-s] + u[s:]  # not assigned: the pending result read as it is
            assert_equal_to_numpy(v, ref[:-s] + ref[s:])


# -- broadcasting, fused sums, powers, shared costly nodes ---------------------------------


@pytest.mark.parametrize("engine", ["numexpr", "numba"])
def test_broadcast_operands_are_deferred(monkeypatch, engine):
    """Operands of other shapes (a row against a matrix, outer differences, a (k, 1)
    column) are recorded, aligned to the result's layout as the eager call aligns them,
    on every layout; numpy's result bit for bit."""
    if engine == "numba":
        pytest.importorskip("numba")
    monkeypatch.setenv("D2O_FUSION_ENGINE", engine)
    a = sample((7, 5), "float64")
    r = sample((5,), "float64", seed=1)
    c = sample((7, 1), "float64", seed=2)
    v = sample((6,), "float64", seed=3)
    for strategy, axis in layouts(2):
        x = make(a, strategy, axis)
        for s1, _ in layouts(1):
            y, z = make(r, s1), make(c, strategy, axis)
            got = x * y + z - 1.5
            assert_equal_to_numpy(got, a * r + c - 1.5)
            w = make(v, s1)
            outer = w[np.newaxis, :] - w[:, np.newaxis]
            assert_equal_to_numpy(outer * outer + 0.5, (v[None, :] - v[:, None]) ** 2 + 0.5)


def test_broadcast_shape_mismatch_raised_everywhere():
    x, y = make(sample((4, 3), "float64"), "equal"), make(sample((4,), "float64"), "equal")
    assert_raises_everywhere(ValueError, lambda: x + y)


@pytest.mark.parametrize("dt", ["float64", "float32", "int64", "int32", "uint8", "bool"])
@pytest.mark.parametrize("shape", [(300,), (9, 130), (3, 5, 40), (1, 257)])
def test_fused_sum_is_numpys(numba_engine, dt, shape):
    """A sum (whole array, last axis, ``add.reduce``, ``keepdims``) of a deferred expression
    runs in one pass with it (the trace names ``sum`` in the kernel) and is the eager
    sum bit for bit (each piece's part: numpy's pairwise order for floats); numpy's own
    on one piece, within rounding where several pieces' parts are combined."""
    a = sample(shape, dt, positive=True)
    b = sample(shape, dt, seed=1, positive=True)
    expr = {"b": lambda p, q: (p & q) | p, "u": lambda p, q: p * 3 - q}.get(
        np.dtype(dt).kind, lambda p, q: (p - q) * (p + q) + 0.5 * p)  # fmt: skip
    e = expr(a, b)
    last = e.ndim - 1
    for strategy, axis in layouts(len(shape)):
        x, y = make(a, strategy, axis), make(b, strategy, axis)
        with d2o.trace() as t:
            total = expr(x, y).sum()
        with d2o.options(lazy=False):
            eager = expr(x, y).sum()
        collective_assert(total == eager and np.asarray(total).dtype == e.sum().dtype,
                          f"{strategy}: {total} != {eager}")  # fmt: skip
        one_piece = d2o.default_comm().size == 1 or strategy == "not"
        collective_assert(total == e.sum() if one_piece else np.isclose(total, e.sum()),
                          f"{strategy}: {total} != {e.sum()}")  # fmt: skip
        if one_piece:  # the fused kernel is the whole sum
            fusedrecs = [r.op for r in t.records if r.op.startswith("fused(")]
            collective_assert(len(fusedrecs) == 1 and fusedrecs[0].endswith(", sum)"), fusedrecs)
        for f in (lambda v: np.add.reduce(v, last), lambda v: v.sum(axis=-1, keepdims=True)):
            got = f(expr(x, y))
            with d2o.options(lazy=False):
                eager = f(expr(x, y))
            full = lambda v: v.get_full_data() if hasattr(v, "get_full_data") else np.asarray(v)  # noqa: E731
            assert_equal_to_numpy(got, full(eager))
            if one_piece:
                assert_equal_to_numpy(got, f(e))
            else:  # pieces' parts combined: numpy's within rounding
                collective_assert(np.allclose(full(got), f(e), rtol=1e-5), strategy)


def test_fused_sum_counts_points_in_one_kernel(numba_engine):
    """Monte Carlo pi's ``add.reduce((square(x) + square(y)) < 1)`` with named
    intermediates: one kernel, nothing stored, numpy's count."""
    a, b = sample((5000,), "float64"), sample((5000,), "float64", seed=1)
    for strategy, axis in layouts(1)[:4]:  # (meshes: ufunc.reduce runs on slabs, evaluated)
        x, y = make(a, strategy, axis), make(b, strategy, axis)
        with d2o.trace() as t:
            xs = np.square(x)
            ys = np.square(y)
            z = (xs + ys) < 1
            count = int(np.add.reduce(z))
        collective_assert(count == int(np.add.reduce((a * a + b * b) < 1)), f"{count}")
        fusedrecs = [r.op for r in t.records if r.op.startswith("fused(")]
        collective_assert(fusedrecs == ["fused(square, square, add, less, sum)"], fusedrecs)
        collective_assert(_pending(xs) and _pending(z), "the named arrays stay deferred")
        assert_equal_to_numpy(z, (a * a + b * b) < 1)


@pytest.mark.parametrize("dt", ["float64", "float32"])
def test_dot_of_a_raveled_difference_in_one_pass(numba_engine, dt):
    """Laplace's ``v = (u - u_old).ravel(); dot(v, v)``: the ravel of a temporary stays
    deferred and the dot sums the products with the difference in one kernel (nothing
    stored) where the ravel moves nothing (replicated, one process, rows); numpy's
    ``sum(v * v)`` bit for bit on one piece, its ``dot`` within rounding; one Allreduce
    of one element over several pieces.  Where the ravel moves (columns, meshes) it runs
    as before."""
    a, b = sample((40, 30), dt), sample((40, 30), dt, seed=1)
    e = (a - b).ravel()
    size = d2o.default_comm().size
    for strategy, axis in layouts(2):
        x, y = make(a, strategy, axis), make(b, strategy, axis)
        with d2o.options(check_args=False), d2o.trace() as t:  # (checked mode: one more)
            v = (x - y).ravel()
            got = d2o.numpy.dot(v, v)
        collective_assert(np.asarray(got).dtype == e.dtype, f"{strategy}: {type(got)}")
        collective_assert(np.isclose(got, np.dot(e, e), rtol=1e-5), f"{strategy}: {got}")
        in_place = strategy == "not" or (strategy in ("equal", "fftw", "freeform")
                                          and (size == 1 or axis == 0))  # fmt: skip
        fusedrecs = [r.op for r in t.records if r.op.startswith("fused(")]
        if in_place:
            collective_assert(fusedrecs == ["fused(subtract, subtract, multiply, sum)"],
                              f"{strategy}, {axis}: {fusedrecs}")  # fmt: skip
            dots = [r for r in t.records if r.op == "numpy.dot"]
            want = 0 if strategy == "not" or size == 1 else 1
            collective_assert(len(dots) == 1 and dots[0].collectives == want,
                              f"{strategy}, {axis}: {dots}")  # fmt: skip
            with d2o.options(check_args=False), d2o.trace() as t:
                w = (x - y).ravel()
                at = w @ w  # (the operator: the same algorithm)
            with d2o.options(lazy=False, check_args=False), d2o.trace() as t2:
                w = (x - y).ravel()
                eager = d2o.numpy.dot(w, w)  # numpy's dot of the pieces, one Allreduce
            dots = [r for r in t.records + t2.records if r.op in ("__matmul__", "numpy.dot")]
            collective_assert(at == got and np.isclose(eager, got, rtol=1e-5)
                              and [r.collectives for r in dots] == [want, want],
                              f"{strategy}, {axis}: {at} {eager} {dots}")  # fmt: skip
        if in_place and (strategy == "not" or size == 1):
            collective_assert(got == np.add.reduce(e * e), f"{strategy}: {got}")


def test_dot_of_vectors_failing_on_one_rank_raises_everywhere(numba_engine, monkeypatch):
    """A failure in one rank's partial of a vector dot (here its fused kernel, patched to
    fail on rank 0 alone) is raised on every rank, nobody left waiting in the Allreduce;
    the next dot is numpy's."""
    a = sample((300,), "float64")
    x = make(a, "equal")
    real = fused.reduce_dot

    def failing(ea, eb):
        if d2o.default_comm().rank == 0:
            raise RuntimeError("rank 0's partial failed")
        return real(ea, eb)

    monkeypatch.setattr(fused, "reduce_dot", failing)
    v = x * 2.0
    assert_raises_everywhere(RuntimeError, d2o.numpy.dot, v, v)
    monkeypatch.setattr(fused, "reduce_dot", real)
    w = x * 2.0
    got = d2o.numpy.dot(w, w)
    collective_assert(np.isclose(got, np.dot(a * 2.0, a * 2.0)), f"{got}")


def test_ravel_of_deferred_arrays_keeps_numpys_semantics():
    """A named deferred array's ravel is its view (a write through it shows), as numpy's;
    a temporary's deferred ravel reads its operands as they were (a later write into one
    evaluates it first)."""
    a, b = sample((6, 4), "float64"), sample((6, 4), "float64", seed=1)
    for strategy, axis in [("not", 0), ("equal", 0), ("freeform", 0)]:  # (ravel's views)
        x, y = make(a, strategy, axis), make(b, strategy, axis)
        d = x - y
        v = d.ravel()
        v[3] = 5.0
        want = a - b
        want.ravel()[3] = 5.0
        assert_equal_to_numpy(d, want)
        w = (x * 2.0).ravel()
        x[1] = 7.0
        assert_equal_to_numpy(w, (a * 2.0).ravel())
        assert_equal_to_numpy(d2o.numpy.dot(w, w), np.add.reduce((a * 2.0).ravel() ** 2),
                              rtol=1e-12)  # fmt: skip


def test_reduction_with_out_evaluates_pending_first():
    """A reduction writing into ``out`` is not read-only: an expression pending on
    ``out``'s memory is evaluated before it (numpy's order of statements)."""
    a = sample((6, 4), "float64")
    x = make(a, "equal")
    o = make(np.zeros(4), "not")
    e = o + 1.0
    np.sum(x, axis=0, out=o)
    assert_equal_to_numpy(e, np.ones(4))
    collective_assert(np.allclose(o.get_full_data(), a.sum(axis=0)), "out holds the sum")


def _ulps(got: np.ndarray, want: np.ndarray) -> float:
    """The largest difference of ``got`` from ``want`` in units of the last place."""
    return float(np.max(np.abs(got - want) / np.spacing(np.abs(want)), initial=0.0))


@pytest.mark.parametrize("e", sorted(loops.HALF_POWERS))
def test_half_powers_within_ulps_and_special_values_exact(numba_engine, e):
    """float64 ``x ** -1.5``, ``1.5``, ``-0.5`` from a square root (`loops.HALF_POWERS`):
    within `loops.HALF_ULPS` of numpy's ``pow`` for bases inside `loops.HALF_RANGE`;
    numpy's bit for bit (and numpy's warnings) for the others: zeros, infinities, nan,
    negatives, subnormals, huge; written into its own operand, alike.  Summed, the
    power is ``pow``'s: the eager sum bit for bit."""
    if not loops.libm_pow():
        pytest.skip("numpy's float64 power is not the C library's: powers are not fused")
    rng = np.random.default_rng(5)
    a = np.exp(rng.uniform(-700.0, 700.0, (9, 8)))  # (about half outside HALF_RANGE)
    a.flat[:10] = [0.0, -0.0, np.inf, -np.inf, np.nan, -2.0, 5e-324, 1e-310, 1e-200, 1e200]
    a[5:] = rng.uniform(0.01, 3.0, (4, 8))
    lo, hi = loops.HALF_RANGE
    inside = (a > lo) & (a < hi)

    def check(got: np.ndarray, want: np.ndarray, inside: np.ndarray, where: str) -> None:
        same = np.array_equal(got[~inside], want[~inside], equal_nan=True)
        collective_assert(same, f"{where}: outside the range {got[~inside]}")
        ulps = _ulps(got[inside], want[inside])
        collective_assert(ulps <= loops.HALF_ULPS, f"{where}: {ulps} ulps")

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        want = (a + 0.0) ** e
    expected = sorted(str(w.message) for w in caught)
    for strategy, axis in layouts(2):
        x = make(a, strategy, axis)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = ((x + 0.0) ** e).get_full_data()
        mine = {str(w.message) for w in caught}  # (a rank warns of its own piece)
        union = sorted(set().union(*d2o.default_comm().allgather(mine)))
        collective_assert(union == sorted(set(expected)), f"{strategy}: {union}")
        check(got, want, inside, strategy)
        with np.errstate(all="ignore"):
            s = ((x[5:] + 0.0) ** e).sum()
            y = make(a, strategy, axis)
            y[1:] = (y[:-1] + 0.0) ** e
            b = a.copy()
            b[1:] = (b[:-1] + 0.0) ** e
        with d2o.options(lazy=False):  # (the eager sum: ``pow``, pieces combined alike)
            eager = ((x[5:] + 0.0) ** e).sum()
        collective_assert(s == eager, f"{strategy}: sum {s} against {eager}")
        shifted = np.concatenate([np.zeros((1, 8), bool), inside[:-1]])  # (row 0 kept)
        check(y.get_full_data(), b, shifted, f"{strategy} in place")


def test_in_place_write_copies_small_operands_of_pending_expressions():
    """N-body's pattern: ``d = x[None, :] - x[:, None]`` pending, then ``x += 1``: ``d``
    reads a copy of ``x`` (n elements) instead of being evaluated (n^2 elements); an
    expression no larger than what it reads of the target is evaluated first.  numpy's
    values either way."""
    a = sample((7,), "float64")
    kept = []
    for strategy, axis in layouts(1):
        x = make(a, strategy, axis)
        d = x[np.newaxis, :] - x[:, np.newaxis]
        y = x * 2.0
        was = _pending(d), _pending(y)
        empty = 0 in x.local_shape  # (an empty piece shares no memory: nothing to evaluate)
        with d2o.trace() as t:
            x += 1.0
        ok = _pending(d) == was[0] and (empty or not _pending(y))
        collective_assert(ok, f"{strategy}: {was} -> {_pending(d), _pending(y)}")
        kernels = [r.op for r in t.records if r.op.startswith("fused(")]
        collective_assert(not any("subtract" in k for k in kernels), f"{strategy}: {kernels}")
        kept.append(was[0])
        assert_equal_to_numpy(d, a[np.newaxis, :] - a[:, np.newaxis])
        assert_equal_to_numpy(y, a * 2.0)
        assert_equal_to_numpy(x, a + 1.0)
    collective_assert(any(kept), "no layout deferred the outer difference")


def test_costly_shared_node_evaluated_once(numba_engine):
    """A power read by several expressions (N-body's ``inv_r3`` in three products) is
    evaluated once and kept; cheap shared nodes are recomputed inside each kernel."""
    a = sample((40,), "float64", positive=True)
    x = make(a, "equal")
    with d2o.trace() as t:
        d = x[np.newaxis, :] - x[:, np.newaxis]
        r2 = d * d + 0.01
        inv = r2**-1.5
        p1, p2 = (d * inv).sum(), (d * d * inv).sum()
    fusedrecs = [r.op for r in t.records if r.op.startswith("fused(")]
    pow_kernels = [op for op in fusedrecs if "power" in op]
    collective_assert(len(pow_kernels) == 1, fusedrecs)
    dn = a[None, :] - a[:, None]
    invn = (dn * dn + 0.01) ** -1.5
    got = inv.get_full_data()  # (from a square root: `loops.HALF_POWERS`)
    collective_assert(_ulps(got, invn) <= loops.HALF_ULPS, f"{_ulps(got, invn)} ulps")
    collective_assert(np.isclose(p1, (dn * invn).sum()) and np.isclose(p2, (dn * dn * invn).sum()),
                      f"{p1} {p2}")  # fmt: skip


def test_halo_exchange_overlaps_the_interior(monkeypatch):
    """A stencil into another array on several ranks: the boundary rows' exchange is
    posted when the expression is recorded and waited for only after the interior's
    kernel ran (then the boundary rows' kernels); numpy's result."""
    events: list = []
    real_wait, real_evaluate = halo.Parts.wait, fused._evaluate

    def wait(self):
        if self.requests:
            events.append("wait")
        real_wait(self)

    def evaluate(node, ops, out=None):
        events.append(("kernel", node.shape))
        return real_evaluate(node, ops, out)

    monkeypatch.setattr(halo.Parts, "wait", wait)
    monkeypatch.setattr(fused, "_evaluate", evaluate)
    n = 40
    a = sample((n, n), "float64")
    u, new = make(a, "equal"), make(np.zeros((n, n)), "equal")
    new[1:-1, 1:-1] = _stencil(u)
    monkeypatch.undo()
    ref = np.zeros((n, n))
    ref[1:-1, 1:-1] = _stencil(a)
    assert_equal_to_numpy(new, ref)
    comm = d2o.default_comm()
    if comm.size > 1:
        first_wait = events.index("wait") if "wait" in events else len(events)
        kernels = [e for e in events[:first_wait] if e != "wait"]
        big = max(e[1][0] for e in events if e != "wait")
        collective_assert(any(k[1][0] == big for k in kernels) and "wait" in events, events)


def test_lazy_is_on_by_default_for_large_results():
    """By default ``lazy`` is on with ``lazy_min`` 524288 (global elements): smaller results
    run at once, larger ones are recorded; ``lazy_min`` takes a non-negative int."""
    collective_assert(config.LAZY_MIN == 524288, "the documented default")
    with d2o.options(lazy_min=config.LAZY_MIN):
        small = make(sample((100,), "float64", positive=True), "equal")
        big = make(sample((800, 800), "float64", positive=True), "equal")
        collective_assert(
            not _pending(small + 1) and _pending(big + 1), "small eager, big deferred"
        )
        s, b = np.sqrt(small), np.sqrt(big)
        collective_assert(not _pending(s) and _pending(b), "the same for ufuncs")
        c = big * 1j  # complex numbers: no kernel fuses them, numpy runs them at once
        collective_assert(not _pending(c) and not _pending(c + 1), "complex at once")
        assert_equal_to_numpy(c + 1, big.get_full_data() * 1j + 1)
        assert_equal_to_numpy(b, np.sqrt(big.get_full_data()))
    assert_raises_everywhere(TypeError, lambda: d2o.set_options(lazy_min=1.5))
    assert_raises_everywhere(ValueError, lambda: d2o.set_options(lazy_min=-1))


def test_inner_calls_of_operations_are_not_deferred():
    """An operation's own element-wise calls (``diff`` subtracts shifted views) run at
    once even while nothing is pending, when only the element-wise calls are flagged:
    its result is an ordinary array, and nothing stays pending on any rank."""
    a = sample((9, 4), "float64")
    for strategy, axis in layouts(2)[:4]:
        x = make(a, strategy, axis)
        r = d2o.numpy.diff(x, axis=0)
        collective_assert(not _pending(r) and not deferred.PENDING, strategy)
        assert_equal_to_numpy(r, np.diff(a, axis=0))
