"""The communication trace, the gather option, one-collective reductions and d2o.show."""

from __future__ import annotations

import io
import warnings

import numpy as np
import pytest
from _helpers import Checks, layouts, make, sample

import d2o
from d2o import default_comm, distributed_data_object
from d2o.core import hooks
from d2o.core import trace as tr
from d2o.core.comm import MPI
from d2o.core.registry import flagged
from d2o.layouts.distributors import run_length
from d2o.layouts.mesh import is_mesh
from d2o.testing import assert_equal_to_numpy, assert_raises_everywhere, collective_assert


@pytest.fixture(autouse=True)
def _unchecked():
    """Exact counts: without check_args' extra allreduce per call (the MPI stages turn it on)."""
    with d2o.options(check_args=False):
        yield


def _even(n: int, p: int) -> list[int]:
    """'equal' piece lengths, written out independently of d2o: first ranks take extras."""
    return [n // p + (1 if r < n % p else 0) for r in range(p)]


@pytest.fixture
def eager():
    """Eager element-wise calls (their own trace records): with ``lazy`` on they would be
    recorded instead, and one record per fused kernel appear (tests/test_fusion.py)."""
    with d2o.options(lazy=False):
        yield


@pytest.mark.usefixtures("eager")
def test_same_layout_elementwise_moves_nothing(comm):
    a = sample((6, 5), "float64")
    b = sample((6, 5), "float64", seed=1)
    for strategy, axis in layouts(2):
        x, y = make(a, strategy, axis), make(b, strategy, axis)
        with d2o.trace() as t:
            z = x + y
            z *= 2.0
            w = np.sqrt(np.abs(z)) - x
            c = x < y
            x.transpose()
        collective_assert(t.collectives == 0 and t.bytes_sent == 0 and t.bytes_received == 0,
                          (strategy, axis, t.calls))  # fmt: skip
        ops = [r.op for r in t.records]
        collective_assert(ops[:3] == ["__add__", "__imul__", "absolute"], ops)
        collective_assert(all(r.collectives == 0 for r in t.records), t.records)
    assert_equal_to_numpy(w, np.sqrt(np.abs((a + b) * 2.0)) - a)
    assert_equal_to_numpy(c, a < b)


def _exchanged(t: tr.Trace, op: str, call: str) -> list[tuple]:
    return [c for c in t.calls if c[0] == op and c[1] == call]


@pytest.mark.parametrize("dtype", ["float64", "int32", "complex128"])
def test_redistribution_sends_exactly_what_changes_owner(comm, dtype):
    P, me = comm.size, comm.rank
    n0, n1 = 7, 5
    a = sample((n0, n1), dtype)
    x = distributed_data_object(a, axis=0)
    with d2o.trace() as t:
        y = x.copy(axis=1)
    rows, cols = _even(n0, P), _even(n1, P)
    item = np.dtype(dtype).itemsize
    sent = sum(rows[me] * cols[q] for q in range(P) if q != me) * item
    got = sum(rows[q] * cols[me] for q in range(P) if q != me) * item
    moves = _exchanged(t, "copy", "Alltoallw")
    if P == 1:
        collective_assert(t.collectives == 0 and t.calls == [], t.calls)
    else:
        collective_assert(len(moves) == 1 and moves[0][2:4] == (sent, got), (moves, sent, got))
        collective_assert(moves[0][4] == P, moves)
        # the only other traffic is the one-byte argument agreement
        collective_assert(t.bytes_sent - sent <= 1 and t.collectives <= 2, t.calls)
    assert_equal_to_numpy(y, a)
    collective_assert(y.axis == 1 and y.local_shape == (n0, cols[me]), y.local_shape)


@pytest.mark.parametrize("name", ["sum", "prod", "max", "min", "all", "any", "mean", "var",
                                  "std", "argmax", "argmin", "nansum", "nanmax"])  # fmt: skip
def test_full_reduction_is_one_small_collective(comm, name):
    a = sample((9, 4), "float64")
    check = Checks()
    for strategy, axis in layouts(2):
        x = make(a, strategy, axis)
        with d2o.trace() as t:
            got = getattr(x, name)()
        expected = getattr(np, name)(a)
        spread = strategy != "not" and comm.size > 1
        check.true(t.collectives == (1 if spread else 0), (name, strategy, axis, t.calls))
        check.true(t.bytes_sent <= 256, (name, t.bytes_sent))
        check.true(np.isscalar(got) and np.allclose(got, expected, rtol=1e-12), (got, expected))
        check.true(np.asarray(got).dtype == np.asarray(expected).dtype, (name, type(got)))
        check.true([r.op for r in t.records] == [name], t.records)
    check.done()


def test_full_reduction_bad_input_on_one_rank(comm):
    x = distributed_data_object(np.arange(10.0))
    kw = {"dtype": "no-such-dtype"} if comm.rank == comm.size - 1 else {}
    assert_raises_everywhere(TypeError, x.sum, **kw)
    collective_assert(x.sum() == 45.0)  # the next collective pairs up correctly
    kw = {"ddof": "x"} if comm.rank == 0 else {}
    assert_raises_everywhere(TypeError, x.var, **kw)
    collective_assert(x.var() == np.var(np.arange(10.0)))


def test_printing_moves_nothing(comm):
    x = distributed_data_object(np.arange(12.0).reshape(4, 3), axis=1)
    buf = io.StringIO()
    with d2o.trace() as t:
        repr(x)
        str(x)
        print(x, file=buf)
    collective_assert(t.collectives == 0 and t.bytes_sent == 0 and t.bytes_received == 0)
    collective_assert({r.op for r in t.records} <= {"__repr__", "__str__"}, t.records)


def unwrapped(fn) -> bool:
    """The operation's flag is down after the trace (it stays up once mesh layouts exist
    in this process, for operations that run mesh operands on slabs)."""
    return hooks.mesh_in_use[0] or not flagged(fn)


def test_records_nest_and_zero_records(comm):
    x = distributed_data_object(np.arange(8.0))
    with d2o.trace() as outer:
        x.astype(np.float32)
        with d2o.trace() as inner:
            x.sum()
        x.get_local_data(copy=False)
    collective_assert([r.op for r in inner.records] == ["sum"])
    collective_assert([r.op for r in outer.records] == ["astype", "sum"], outer.records)
    collective_assert(outer.collectives == inner.collectives)
    collective_assert(outer.records[0].collectives == 0 and outer.records[0].bytes_sent == 0)
    collective_assert(not tr.active and tr.current[0] is None)
    collective_assert(unwrapped(distributed_data_object.sum))


def test_trace_closes_after_an_agreed_error(comm):
    x = distributed_data_object(np.zeros((4, 3)))
    bad = 5 if comm.rank == 0 else 1
    with d2o.trace() as t:
        assert_raises_everywhere(np.exceptions.AxisError, x.sum, axis=bad)
        y = x + 1
    collective_assert(not tr.active and tr.current[0] is None)
    collective_assert([r.op for r in t.records][:1] == ["sum"], t.records)
    collective_assert(unwrapped(distributed_data_object.__add__))
    assert_equal_to_numpy(y, np.ones((4, 3)))


def test_report_is_collective_and_prints_on_rank_zero(comm):
    x = distributed_data_object(np.arange(16.0).reshape(4, 4))
    with d2o.trace() as t:
        x.copy(axis=1)
        x.sum()
    before = t.collectives
    out = io.StringIO()
    text = t.report(file=out)
    collective_assert(t.collectives == before)  # the report's own allgather is not traced
    if comm.rank == 0:
        ok = "copy" in text and "sum" in text and "total" in text
        ok = ok and out.getvalue().strip() == text.strip()
    else:
        ok = text is None and out.getvalue() == ""
    collective_assert(ok, text)


def test_fft_and_indexing_have_records(comm):
    x = distributed_data_object(sample((8, 6), "complex128"))
    with d2o.trace() as t:
        d2o.fft.fftn(x)
        x[[1, 5, 2]]
        x[2:5] = 1.0
    ops = [r.op for r in t.records]
    collective_assert(ops == ["fft.fftn", "__getitem__", "__setitem__"], ops)
    collective_assert(t.records[2].collectives == 0, t.records)  # numpy value: local writes


# -- the gather option ---------------------------------------------------------------


def _crossed(comm):
    a = distributed_data_object(np.arange(6.0).reshape(6, 1), axis=0)
    b = distributed_data_object(np.arange(6.0).reshape(1, 6), axis=1)
    return a, b


def test_strict_mode_refuses_implicit_gathers(comm):
    a, b = _crossed(comm)
    expected = np.arange(6.0).reshape(6, 1) + np.arange(6.0).reshape(1, 6)
    with d2o.options(gather="raise"):
        if comm.size > 1:
            before = a.get_local_data()
            with d2o.trace() as t:
                err = assert_raises_everywhere(d2o.GatherError, lambda: a + b)
            collective_assert("(1, 6)" in str(err) and "axis 1" in str(err), str(err))
            moved = [c for c in t.calls if c[1] in ("Alltoallw", "Allgather", "Alltoallv")]
            collective_assert(moved == [], t.calls)  # refused before anything moved
            collective_assert(np.array_equal(a.get_local_data(), before))
        else:
            assert_equal_to_numpy(a + b, expected)  # one rank: nothing to gather
        # explicit gathers are always allowed
        assert_equal_to_numpy(a, np.arange(6.0).reshape(6, 1))
        collective_assert(np.array_equal(np.asarray(b), np.arange(6.0).reshape(1, 6)))
        collective_assert(b.gather(0) is None or b.comm.rank == 0)
        r = b.copy(distribution_strategy="not")
        assert_equal_to_numpy(a + r, expected)
    assert_equal_to_numpy(a + b, expected)  # default 'allow'


def test_warn_mode_warns_and_computes(comm):
    a, b = _crossed(comm)
    with d2o.options(gather="warn"), warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        c = a + b
    expected = np.arange(6.0).reshape(6, 1) + np.arange(6.0).reshape(1, 6)
    assert_equal_to_numpy(c, expected)
    hits = [w for w in seen if issubclass(w.category, d2o.GatherWarning)]
    collective_assert(len(hits) == (1 if comm.size > 1 else 0), [str(w.message) for w in seen])
    if hits:
        collective_assert(hits[0].filename == __file__, hits[0].filename)


def test_options_set_on_one_rank_only_do_not_deadlock(comm):
    if comm.size == 1:
        pytest.skip("needs two ranks")
    a, b = _crossed(comm)
    mode = "raise" if comm.rank == comm.size - 1 else "allow"
    with d2o.options(gather=mode):
        assert_raises_everywhere(d2o.GatherError, lambda: a + b)
    c = a + b  # the next collective pairs up
    assert_equal_to_numpy(c, np.arange(6.0).reshape(6, 1) + np.arange(6.0).reshape(1, 6))


def test_gather_records_in_trace(comm):
    a, b = _crossed(comm)
    with d2o.trace() as t:
        d2o.evaluate(a + b)  # (lazy: the gather happens when the sum is recorded)
    gathers = sum(r.gathers for r in t.records)
    collective_assert(gathers == (1 if comm.size > 1 else 0), t.records)


def _enter_options(kw: dict) -> None:
    with d2o.options(**kw):
        pass


def test_option_validation():
    for bad, exc in (({"bogus": "allow"}, ValueError), ({"gather": "nope"}, ValueError),
                     ({"gather": 1}, TypeError)):  # fmt: skip
        assert_raises_everywhere(exc, d2o.set_options, **bad)
        assert_raises_everywhere(exc, _enter_options, bad)
    collective_assert(d2o.get_option("gather") == "allow")
    with d2o.options(gather="warn"):
        collective_assert(d2o.get_option("gather") == "warn")
    collective_assert(d2o.get_option("gather") == "allow")
    d2o.set_options(gather="raise")
    try:
        collective_assert(d2o.get_option("gather") == "raise")
    finally:
        d2o.set_options(gather="allow")
    assert_raises_everywhere(ValueError, d2o.get_option, "bogus")


# -- show -----------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(7,), (5, 6), (3, 4, 5), (0, 3), ()])
def test_show_labels_every_holder_and_moves_nothing(comm, shape):
    a = sample(shape, "float64")
    for strategy, axis in layouts(len(shape)):
        x = make(a, strategy, axis)
        out = io.StringIO()
        with d2o.trace() as t:
            text = d2o.show(x, file=out)
        collective_assert(t.collectives == 0)
        collective_assert((out.getvalue() != "") == (comm.rank == 0))
        d = x.distributor
        if d.replicated:
            collective_assert("replicated" in text, text)
            continue
        for r in range(comm.size):
            box = d.region(r)
            holds = all(run_length(e) > 0 for e in box)
            collective_assert((f"rank {r}:" in text) == holds, (r, text))
        if is_mesh(d):
            collective_assert(repr(d.layout) in text, text)
        else:
            collective_assert(f"split along axis {d.axis}" in text, text)


# -- every counter of asymmetric operations, per rank, from the layouts (issue 28) -------


def _rows(lengths: list) -> list:
    """Per rank, the set of rows a slab layout of these piece lengths gives it."""
    o = np.cumsum([0] + list(lengths))
    return [set(range(int(o[r]), int(o[r + 1]))) for r in range(len(lengths))]


def _fftw(n: int, p: int) -> list[int]:
    block = -(-n // p)
    return [max(0, min(block, n - r * block)) for r in range(p)]


def _one_empty(n: int, p: int) -> list[int]:
    """Uneven 'freeform' lengths: rank 0 holds nothing (when there are several ranks)."""
    return [n] if p == 1 else [0] + _even(n, p - 1)


def _freeform(a: np.ndarray, lengths: list):
    me = default_comm().rank
    lo = sum(lengths[:me])
    piece = a[lo : lo + lengths[me]]
    return distributed_data_object(local_data=piece, distribution_strategy="freeform")


def _expect_exchange(have: list, want: list, row: int) -> dict:
    """Every counter of a slab-to-slab copy on this rank: the one-byte agreement of the
    arguments, then (when any piece changes) one Alltoallw whose receive buffer is the
    new piece."""
    P, me = len(have), default_comm().rank
    if P == 1:
        return dict(collectives=0, bytes_sent=0, bytes_received=0, max_group=0,
                    temp_bytes=0, gathers=0, fallback=None, calls=[])  # fmt: skip
    h, w = _rows(have), _rows(want)
    moves = have != want
    sent = sum(len(h[me] & w[q]) for q in range(P) if q != me) * row
    got = sum(len(w[me] & h[q]) for q in range(P) if q != me) * row
    return dict(collectives=1 + moves, bytes_sent=1 + sent, bytes_received=1 + got,
                max_group=P, temp_bytes=len(w[me]) * row if moves else 0, gathers=0,
                fallback=None,
                calls=[("copy", "Allreduce", 1, 1, P)]
                + [("copy", "Alltoallw", sent, got, P)] * moves)  # fmt: skip


def _counters(rec) -> dict:
    return {k: getattr(rec, k) for k in ("collectives", "bytes_sent", "bytes_received",
                                         "max_group", "temp_bytes", "gathers", "fallback")}  # fmt: skip


def test_every_counter_of_an_uneven_slab_redistribution(comm):
    """'equal' -> 'fftw' (pieces differ at 3 and 4 ranks) and an uneven 'freeform' (rank 0
    empty) -> 'equal': what each rank sends differs from what it receives; every counter
    of the record, per rank, equals the model computed from the two layouts."""
    P = comm.size
    check = Checks()
    for n, m, dtype in [(10, 3, "float64"), (7, 2, "complex128"), (5, 1, "int32")]:
        a = sample((n, m), dtype)
        row = m * np.dtype(dtype).itemsize
        cases = [
            ("equal -> fftw", distributed_data_object(a), "fftw", _even(n, P), _fftw(n, P)),
            ("freeform -> equal", _freeform(a, _one_empty(n, P)), "equal", _one_empty(n, P),
             _even(n, P)),
        ]  # fmt: skip
        for name, x, target, have, want in cases:
            with d2o.trace() as t:
                y = x.copy(distribution_strategy=target)
            check.equal(y, a, what=name)
            one = len(t.records) == 1 and t.records[0].op == "copy"
            check.true(one, f"{name}: {t.records}")
            rec = t.records[0] if one else tr.Record("missing")
            got = dict(_counters(rec), calls=t.calls)  # and each call's counts
            expected = _expect_exchange(have, want, row)
            check.true(got == expected, f"{name} {(n, m, dtype)}: {got} != {expected}")
    check.done()


@pytest.mark.usefixtures("eager")
@pytest.mark.parametrize("lengths", [_even, _one_empty])
def test_every_counter_of_a_shifted_sum(comm, lengths):
    """``u[1:] + u[:-1]``: the views move nothing; the sum (in the layout of ``u[1:]``)
    takes the row before each rank's first from its owner, point to point: ranks send
    their last row and receive one, except at the ends (and a rank holding nothing does
    neither).  Every counter per rank against the model from the slab layout."""
    P, me = comm.size, comm.rank
    n, m = 9, 2
    a = sample((n, m), "float64")
    row = m * 8
    pieces = lengths(n, P)
    u = _freeform(a, pieces)
    with d2o.trace() as t:
        lo, hi = u[1:], u[:-1]
        s = lo + hi
    check = Checks()
    check.equal(s, a[1:] + a[:-1])
    three = [r.op for r in t.records] == ["__getitem__", "__getitem__", "__add__"]
    check.true(three, t.records)
    records = t.records if three else [tr.Record("missing")] * 3
    for rec in records[:2]:
        check.true(_counters(rec) == _counters(tr.Record("view")), f"a view moved: {rec}")
    # view row i of u[1:] is base row i + 1 (rank r holds the view rows of its base rows);
    # the result is in that layout, so rank r needs base rows (view rows) of u[:-1] = the
    # base rows just before its own
    base = _rows(pieces)
    need = [{i - 1 for i in base[r] if i >= 1} for r in range(P)]  # u[:-1] rows for u[1:]'s
    have = [{i for i in base[r] if i <= n - 2} for r in range(P)]  # u[:-1]'s own rows
    sends = [sum(len(have[r] & need[q]) for q in range(P) if q != r) * row for r in range(P)]
    sent = sends[me]
    got = sum(len(need[me] & have[q]) for q in range(P) if q != me) * row
    talks = bool(sent or got)
    # nothing to move anywhere (one process; all rows on one rank): no call at all; else
    # a one-byte agreement first, then point to point between the ranks that talk
    expected = (
        dict(collectives=0, bytes_sent=0, bytes_received=0, max_group=0, gathers=0,
             fallback=None)
        if not any(sends)
        else dict(collectives=1 + talks, bytes_sent=1 + sent, bytes_received=1 + got,
                  max_group=P, gathers=0, fallback=None)
    )  # fmt: skip
    counters = dict(_counters(records[2]), calls=t.calls)  # and each call's counts
    temp = counters.pop("temp_bytes")
    expected["calls"] = (
        []
        if not any(sends)
        else [("__add__", "Allreduce", 1, 1, P)] + [("__add__", "Sendrecv", sent, got, 2)] * talks
    )
    check.true(counters == expected, f"{counters} != {expected} (pieces {pieces})")
    check.true(temp <= got, f"temporary of {temp} bytes for {got} received")  # never whole
    check.true(sent in (0, row) and got in (0, row), (sent, got))  # the model: one row each
    check.done()


def test_alltoallv_counts_what_each_rank_sends_and_receives(comm):
    """Rank r sends r + 1 elements to every rank: it receives s + 1 from each rank s, so
    what a rank sends and what it receives differ at every rank count above one."""
    P, me = comm.size, comm.rank
    if P == 1:
        pytest.skip("needs two ranks")
    sc = [me + 1] * P
    rc = [s + 1 for s in range(P)]
    send = np.full(sum(sc), float(me))
    recv = np.empty(sum(rc))
    with d2o.trace() as t:
        comm.Alltoallv(send, sc, recv, rc, MPI.DOUBLE)
    want = np.repeat(np.arange(P, dtype=float), rc)
    calls = [c for c in t.calls if c[1] == "Alltoallv"]
    expected = [((P - 1) * (me + 1) * 8, (sum(rc) - rc[me]) * 8, P)]
    collective_assert(np.array_equal(recv, want), f"rank {me}: {recv}")
    collective_assert([c[2:] for c in calls] == expected, f"rank {me}: {calls} != {expected}")


def test_the_operators_count_follows_their_flag_cell():
    """`hooks.defer_from`, the operators' only test of the modes, is `hooks.NEVER` exactly
    while their flag cell is off, 0 while a mode needs every call, and ``lazy_min`` while
    only ``lazy`` records calls; every operator and ``__array_ufunc__`` share that cell."""
    cls = distributed_data_object
    cell = cls.__add__.__d2o_operation__.on
    for name in ("__sub__", "__rmul__", "__itruediv__", "__neg__", "__array_ufunc__"):
        assert getattr(cls, name).__d2o_operation__.on is cell, name

    def state() -> tuple:
        return cell[0], hooks.defer_from[0]

    with d2o.options(lazy=False, check_args=False):
        assert state() == (False, hooks.NEVER)
        with d2o.trace():
            assert state() == (True, 0)
        with d2o.options(check_args=True):
            assert state() == (True, 0)
        with d2o.options(lazy=True, lazy_min=1000):
            assert state() == (True, 1000)
            with d2o.trace():
                assert state() == (True, 0)
        assert state() == (False, hooks.NEVER)
