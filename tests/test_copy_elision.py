"""Deferred copies and their elision (the ``lazy`` option; `d2o.ops.deferred.copied`).

``u_old = u.copy()`` records the copy; an assignment of a temporary into ``u`` while
it is pending hands ``u``'s piece over to ``u_old`` and gives ``u`` a new one
(``_hand_over``) where nothing else can reach the piece.  Every case is compared with
numpy on the same data: a view, a local array or a named operand held elsewhere, other
pending expressions, writes into either array, other dtypes, shapes and layouts.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from _helpers import layouts, make, sample
from hypothesis import given, settings
from hypothesis import strategies as st

import d2o
import d2o.numpy as dnp
from d2o import distributed_data_object
from d2o.core import buffers
from d2o.ops import deferred
from d2o.testing import assert_equal_to_numpy, collective_assert


@pytest.fixture(autouse=True, params=["own", "kept"])
def lazy(request, monkeypatch):
    """Every test twice: new pieces of their own memory, and pieces of kept buffers
    (`d2o.core.buffers`, as large pieces are: their views' ``base`` is the buffer)."""
    if request.param == "kept":
        monkeypatch.setattr(buffers, "MIN_BYTES", 1)
    with d2o.options(lazy=True, lazy_min=0):
        yield


def _address(x) -> int | None:
    """The address of ``x``'s piece here (None where it is empty)."""
    loc = x.get_local_data(copy=False)
    return loc.__array_interface__["data"][0] if loc.size else None


def _sweep(u):
    """Laplace's sweep (GAiN): the copy, then the stencil into ``u``; returns the copy."""
    u_old = u.copy()
    u[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])
    return u_old


@pytest.mark.parametrize("dt", ["float64", "float32", "int64"])
def test_the_copy_takes_the_old_piece(dt):
    a = sample((9, 7), dt)
    for strategy, axis in layouts(2):
        u, ref = make(a, strategy, axis), a.copy()
        before = _address(u)
        u_old, ref_old = _sweep(u), _sweep(ref)
        after = _address(u_old)
        assert_equal_to_numpy(u, ref)
        assert_equal_to_numpy(u_old, ref_old)
        if strategy == "equal" and axis == 0 and dt != "int64":
            # (int64: the float right side is cast on the way, written through numpy)
            collective_assert(before is None or after == before, "no copy: handed over")
        before = _address(u)
        u_old2, ref_old2 = _sweep(u), _sweep(ref)  # (a second sweep: u's new piece)
        if strategy == "equal" and axis == 0 and dt != "int64":
            collective_assert(before is None or _address(u_old2) == before, "handed over")
        assert_equal_to_numpy(u, ref)
        assert_equal_to_numpy(u_old2, ref_old2)
        assert_equal_to_numpy(u_old, ref_old)


def test_a_sweep_copies_nothing_and_moves_only_halo_rows():
    n = 16
    a = sample((n, n), "float64")
    u = make(a, "equal")
    with d2o.options(check_args=False), d2o.trace() as t:
        u_old = _sweep(u)
        err = float(dnp.sqrt(dnp.dot((u - u_old).ravel(), (u - u_old).ravel())))
    ops = [r.op for r in t.records]
    collective_assert("fused(copy)" not in ops, ops)
    collective_assert(t.bytes_sent <= 4 * n * 8 + 256, f"{t.bytes_sent} bytes")
    ref = a.copy()
    ref_old = _sweep(ref)
    v = (ref - ref_old).ravel()
    collective_assert(np.isclose(err, np.sqrt(np.dot(v, v)), rtol=1e-14), err)
    assert_equal_to_numpy(u, ref)


def _stencil(u):
    return 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])


@pytest.mark.parametrize("made", ["before", "after"])
def test_views_held_see_the_assignment(made):
    """Views made before the copy (it is made at once) or after it (no hand-over)."""
    a = sample((9, 7), "float64")
    for strategy, axis in layouts(2):
        u, ref = make(a, strategy, axis), a.copy()
        _sweep(u), _sweep(ref)  # (u's piece a new one: with "kept", a kept buffer's)
        if made == "before":
            inner, left = u[1:-1, 1:-1], u[:, :3]
        u_old, ref_old = u.copy(), ref.copy()
        if made == "after":
            inner, left = u[1:-1, 1:-1], u[:, :3]
        u[1:-1, 1:-1] = _stencil(u)
        ref[1:-1, 1:-1] = _stencil(ref)
        assert_equal_to_numpy(inner, ref[1:-1, 1:-1])
        assert_equal_to_numpy(left, ref[:, :3])
        assert_equal_to_numpy(u_old, ref_old)
        inner[0, 0] = 42.0  # still a view of u
        ref[1, 1] = 42.0
        assert_equal_to_numpy(u, ref)


@pytest.mark.parametrize("made", ["before", "after"])
def test_a_named_operand_is_a_view_of_the_target(made):
    a = sample((9, 7), "float64")
    for strategy, axis in layouts(2):
        u, ref = make(a, strategy, axis), a.copy()
        _sweep(u), _sweep(ref)
        if made == "before":
            up, rup = u[:-2, 1:-1], ref[:-2, 1:-1]
        u_old, r_old = u.copy(), ref.copy()
        if made == "after":
            up, rup = u[:-2, 1:-1], ref[:-2, 1:-1]
        u[1:-1, 1:-1] = up + u[2:, 1:-1]
        ref[1:-1, 1:-1] = rup + ref[2:, 1:-1]
        assert_equal_to_numpy(up, rup)
        assert_equal_to_numpy(u, ref)
        assert_equal_to_numpy(u_old, r_old)


def test_a_local_array_held_makes_the_copy_at_once():
    a = sample((8, 5), "float64")
    u = make(a, "equal")
    loc = u.get_local_data(copy=False)
    u_old = u.copy()
    collective_assert(not deferred.pending(u_old), "copied at once")
    loc += 1.0  # numpy writes u's piece: the copy kept the old values
    assert_equal_to_numpy(u_old, a)
    assert_equal_to_numpy(u, a + 1.0)
    # a local array taken after the copy: the copy is evaluated first
    u_old, ref = u.copy(), a + 1.0
    loc = u.get_local_data(copy=False)
    u[1:-1, 1:-1] = _stencil(u)
    ref_old = ref.copy()
    ref[1:-1, 1:-1] = _stencil(ref)
    collective_assert(np.array_equal(loc, u.get_local_data(copy=False)), "loc is u's piece")
    assert_equal_to_numpy(u_old, ref_old)
    assert_equal_to_numpy(u, ref)


def test_other_pending_expressions_keep_the_old_values():
    a = sample((9, 7), "float64")
    u, ref = make(a, "equal"), a.copy()
    w = u * 2.0
    u_old, ref_old = _sweep(u), _sweep(ref)
    assert_equal_to_numpy(w, a * 2.0)
    assert_equal_to_numpy(u, ref)
    assert_equal_to_numpy(u_old, ref_old)
    # an expression reading the pending copy itself
    u_old = u.copy()
    z = u_old + 1.0
    ref_z = ref + 1.0
    _sweep(u), _sweep(ref)
    assert_equal_to_numpy(z, ref_z)


@pytest.mark.parametrize("dt", ["float64", "int32", "uint8"])
def test_writes_after_a_copy(dt):
    a = sample((6, 5), dt)
    u, ref = make(a, "equal"), a.copy()
    writes = [
        lambda x: x.__setitem__(2, 5),
        lambda x: x.__setitem__((slice(None), 1), x[:, 2]),
        lambda x: x.__iadd__(1),
        lambda x: x.fill(3),
    ]
    for write in writes:
        c, rc = u.copy(), ref.copy()
        write(u), write(ref)
        assert_equal_to_numpy(c, rc)
        assert_equal_to_numpy(u, ref)
    c, rc = u.copy(), ref.copy()  # a write into the copy leaves the original
    c[0, 0] = 9
    rc[0, 0] = 9
    assert_equal_to_numpy(c, rc)
    assert_equal_to_numpy(u, ref)
    c = u.copy()
    del u  # the original dropped while the copy is pending
    assert_equal_to_numpy(c, ref)


@pytest.mark.parametrize("shape", [(12,), (5, 4, 6), (0, 4), (1, 3), (3, 1)])
def test_other_shapes_and_stepped_targets(shape):
    a = sample(shape, "float64")
    for strategy, axis in layouts(len(shape)):
        u, ref = make(a, strategy, axis), a.copy()
        u_old, r_old = u.copy(), ref.copy()
        u[1:] = u[:-1] * 2.0 + 1.0
        ref[1:] = ref[:-1] * 2.0 + 1.0
        assert_equal_to_numpy(u, ref)
        assert_equal_to_numpy(u_old, r_old)
        u_old, r_old = u.copy(), ref.copy()
        u[::2] = u[::2] - 3.0
        ref[::2] = ref[::2] - 3.0
        assert_equal_to_numpy(u, ref)
        assert_equal_to_numpy(u_old, r_old)


def test_copies_made_at_once():
    b = make(np.arange(10) % 2 == 0, "equal")
    collective_assert(not deferred.pending(b.copy()), "bools: numpy's positive refuses them")
    x = make(np.arange(10.0), "equal")
    collective_assert(not deferred.pending(x.copy(dtype=np.float32)), "another dtype")
    collective_assert(not deferred.pending(x[2:].copy()), "a view")
    with d2o.options(lazy_min=1000):
        collective_assert(not deferred.pending(x.copy()), "below lazy_min")
    with d2o.options(lazy=False):
        collective_assert(not deferred.pending(x.copy()), "lazy off")
    c = x.copy()
    collective_assert(deferred.pending(c), "deferred")
    assert_equal_to_numpy(c, np.arange(10.0))


# -- properties: a copy, then a random expression of views assigned into the array -------

OPS = [
    lambda p, q: p + q,
    lambda p, q: p - q,
    lambda p, q: p * 0.5 + q,
    lambda p, q: (p + 1.5) / (abs(q) + 1.0),
    lambda p, q: -p + q**2,
]


@st.composite
def programs(draw):
    n = draw(st.integers(3, 12))
    length = draw(st.integers(1, n))
    offsets = st.integers(0, n - length)
    first = draw(offsets)
    steps = draw(st.lists(st.tuples(st.integers(0, len(OPS) - 1), offsets), max_size=4))
    target = draw(offsets)
    hold = draw(st.sampled_from(["none", "target", "operand", "piece"]))
    layout = draw(st.sampled_from(layouts(1)))
    return n, length, first, steps, target, hold, layout


def _copy_program(program, x, local):
    """``old = x.copy()``, then one statement assigning a temporary expression of views of
    ``x`` into a slice of ``x`` (something held meanwhile, or not); returns what was held
    and the arrays to compare."""
    n, length, first, steps, target, hold, _ = program
    old = x.copy()
    held = {
        "none": lambda: None,
        "target": lambda: x[target : target + length],
        "operand": lambda: x[first : first + length],
        "piece": lambda: local(x),
    }[hold]()
    x[target : target + length] = functools.reduce(
        lambda e, s: OPS[s[0]](e, x[s[1] : s[1] + length]), steps, x[first : first + length] * 1.0
    )
    return held, x, old


@settings(max_examples=40, deadline=None)
@given(programs())
def test_random_assignments_after_a_copy_match_numpy(program):
    n, *_, layout = program
    a = sample((n,), "float64")
    held, x, old = _copy_program(program, make(a, *layout), lambda x: x.get_local_data(copy=False))
    ref_held, ref, ref_old = _copy_program(program, a.copy(), lambda x: x)
    assert_equal_to_numpy(x, ref)
    assert_equal_to_numpy(old, ref_old)
    if isinstance(ref_held, np.ndarray) and program[5] != "piece":
        assert_equal_to_numpy(held, ref_held)  # a view: numpy's values after the write
    if program[5] == "piece":  # the local array taken: still the array's piece
        collective_assert(np.array_equal(held, x.get_local_data(copy=False)), "the piece")


@pytest.mark.parametrize("shape", [(), (0,), (0, 3), (1, 1)])
def test_copies_of_0d_and_empty_arrays(shape):
    a = np.full(shape, 3.5)
    x, y = make(a, "not" if not shape else "equal"), make(a, "not" if not shape else "equal")
    c, c2 = x.copy(), y.copy()
    x += 1.0
    y[...] = y * 2.0 + 1.0
    assert_equal_to_numpy(c, a)
    assert_equal_to_numpy(c2, a)
    assert_equal_to_numpy(x, a + 1.0)
    assert_equal_to_numpy(y, a * 2.0 + 1.0)


def test_the_piece_handed_to_outside_code_evaluates_the_copy_first():
    """``x.data`` read outside d2o (numpy, C, FFTW may write it) while a copy of ``x``
    waits: the copy is evaluated first, then the array is an ordinary one again."""
    a = sample((6, 5), "float64")
    for write in ("data", "name", "view", "set"):
        x = make(a, "equal")
        c = x.copy()
        collective_assert(deferred.pending(c), "deferred")
        if write == "data":
            x.data[...] = 7.0
        elif write == "name":
            loc = x.data
            loc += 1.0
        elif write == "view":
            v = x[1:]
            v.data[...] = -1.0
        else:
            x.data = np.zeros_like(x.data)
        collective_assert(not deferred.pending(c), "evaluated first")
        collective_assert(type(x) is distributed_data_object, type(x).__name__)
        assert_equal_to_numpy(c, a)
    x = make(a, "equal")  # after the hand-over, x is an ordinary array
    _sweep(x)
    collective_assert(type(x) is distributed_data_object, type(x).__name__)
    y = make(a, "equal")  # two copies of one array: the second stays protected
    c1, c2 = y.copy(), y.copy()
    d2o.evaluate(c1)
    y.data[...] = 0.0
    assert_equal_to_numpy(c2, a)


def test_copies_and_hand_over_move_nothing_on_every_layout():
    """A deferred copy and an assignment handing the piece over are local on every
    layout: the assignment's 96-byte agreement moves, and on meshes (no fused
    assignment there: the eager one after the agreement) its one-byte flags too (two on
    block-cyclic layouts); nothing of the array's size."""
    a = sample((8, 6), "float64")
    for strategy, axis in layouts(2):
        x, ref = make(a, strategy, axis), a.copy()
        with d2o.options(check_args=False), d2o.trace() as t:
            c = x.copy()
            x[...] = x * 2.0 + 1.0
            d2o.evaluate(c)
        collective_assert(t.bytes_sent <= 98, f"{strategy}: {t.bytes_sent} bytes")
        collective_assert(t.collectives <= 3, f"{strategy}: {t.collectives} collectives")
        assert_equal_to_numpy(c, ref)
        assert_equal_to_numpy(x, ref * 2.0 + 1.0)


def test_trace_names_copies_and_positives_apart():
    """A deferred copy's kernel is ``fused(copy)`` in a trace; ``+x`` and
    ``np.positive(x)`` (the same ufunc) are ``fused(positive)``."""
    a = sample((8, 3), "float64")
    for strategy, axis in layouts(2):
        x = make(a, strategy, axis)
        with d2o.trace() as t:
            c = x.copy()
            d2o.evaluate(c)
        ops = [r.op for r in t.records if r.op.startswith("fused(")]
        collective_assert(ops == ["fused(copy)"], f"{strategy}: {ops}")
        assert_equal_to_numpy(c, a)
        with d2o.trace() as t:
            y, z = +x, dnp.positive(x)
            d2o.evaluate(y, z)
        ops = [r.op for r in t.records if r.op.startswith("fused(")]
        collective_assert(ops == ["fused(positive)"] * 2, f"{strategy}: {ops}")
