"""Agreement and small values travel in one small Allreduce, never a per-rank Allgather.

An element access (``x[5]``, ``x[2, 3]``), a reduction to a scalar and checked mode's
argument check each make one Allreduce of a fixed 96-byte record: the bytes a rank
sends and receives are the same at any number of processes.  Up to
``d2o.core.comm.RECORD_GATHER_MAX`` ranks the records are gathered and folded locally
instead (faster there than MPI calling a Python op); this module switches that off, so
that the Allreduce path runs at 2-4 ranks, and checks the gathered form separately.  numpy is the oracle for
the values; the values are identical (bit for bit) on every rank; bad input on one
rank still raises on every rank.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from _helpers import Checks, make, sample

import d2o
import d2o.numpy as dnp
from d2o import default_comm
from d2o.core import comm as comm_module
from d2o.core import errors as E
from d2o.ops import special
from d2o.ops.reductions import _ufunc_combiner
from d2o.testing import assert_raises_everywhere, collective_assert

comm = default_comm()
BAD = comm.size - 1
RECORD = 96  # bytes of an agreement record (d2o.core.errors.RECORD_WORDS * 8)
two = pytest.mark.skipif(comm.size == 1, reason="needs two ranks to disagree")


@pytest.fixture(autouse=True)
def record_allreduce():
    """The O(log P) path at any number of ranks (not the gathered form of few ranks)."""
    saved = comm_module.RECORD_GATHER_MAX[0]
    comm_module.RECORD_GATHER_MAX[0] = 0
    yield
    comm_module.RECORD_GATHER_MAX[0] = saved


DTYPES = ["bool", "int8", "int64", "uint64", "float32", "float64", "complex64", "complex128"]
LAYOUTS_2D = [("equal", 0), ("equal", 1), ("fftw", 0), ("freeform", 0), ("freeform", 1)]
MESHES_2D = [("mesh01", 0), ("meshrep", 0), ("cyc2", 0)]


def _everywhere_identical(value) -> bool:
    """True on every rank when ``value`` has the same type and bytes on every rank."""
    arr = np.asarray(value)
    if arr.dtype.kind in "fc" and arr.dtype.itemsize in (16, 32) and arr.dtype != np.complex128:
        mine = (type(value).__name__, repr(arr.tolist()))  # long doubles: padding bytes vary
    else:
        mine = (type(value).__name__, arr.tobytes())
    return len({m for m in comm.allgather(mine)}) == 1


def _same_scalar(got, want) -> str | None:
    """None when ``got`` is numpy's scalar ``want`` (type and value), else what differs."""
    if type(got) is not type(want):
        return f"type {type(got).__name__} != {type(want).__name__}"
    kind, size = np.asarray(want).dtype.kind, np.asarray(want).dtype.itemsize
    if kind in "fc":
        tol = 1e-2 if size == 2 else 1e-4 if size == (4 if kind == "f" else 8) else 1e-9
        if not np.allclose(got, want, rtol=tol, atol=tol, equal_nan=True):
            return f"{got!r} != {want!r}"
    elif got != want:
        return f"{got!r} != {want!r}"
    return None


def _only_allreduce_records(t) -> str | None:
    """None when every MPI call of trace ``t`` is one 96-byte Allreduce per operation."""
    for rec in t.records:
        want = 0 if comm.size == 1 else 1
        if rec.collectives != want:
            return f"{rec.op}: {rec.collectives} calls ({t.calls})"
        if comm.size > 1 and (rec.bytes_sent != RECORD or rec.bytes_received != RECORD):
            return f"{rec.op}: {rec.bytes_sent}/{rec.bytes_received} bytes ({t.calls})"
    kinds = {c[1] for c in t.calls}
    if kinds - {"Allreduce"}:
        return f"calls other than Allreduce: {t.calls}"
    return None


# -- values: numpy is the oracle ------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES + ["float16", "clongdouble"])
@pytest.mark.parametrize("strategy,axis", LAYOUTS_2D + MESHES_2D)
def test_every_element_equals_numpy_and_is_identical_on_every_rank(dtype, strategy, axis):
    check = Checks()
    for shape in [(1, 1), (2, 3), (7, 5)]:
        a = sample(shape, dtype, seed=3)
        x = make(a, strategy, axis)
        got = [x[i, j] for i in range(shape[0]) for j in range(shape[1])]
        got += [x[-1, -1], x[np.int64(0), np.uint8(0)]]
        want = [a[i, j] for i in range(shape[0]) for j in range(shape[1])]
        want += [a[-1, -1], a[0, 0]]
        for g, w in zip(got, want):
            same = g.tobytes() == w.tobytes() or (dtype == "clongdouble" and g == w)
            check.true(type(g) is type(w) and same, (shape, g, w))
        check.true(_everywhere_identical(got), (shape, "differs between ranks"))
    check.done()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("strategy", ["equal", "fftw", "freeform", "meshrep", "cyc3"])
def test_one_d_element_get(dtype, strategy):
    check = Checks()
    for n in (1, 2, 6, 13):
        a = sample((n,), dtype, seed=n)
        x = make(a, strategy)
        for i in range(-n, n):
            g = x[i]
            check.true(type(g) is type(a[i]) and g.tobytes() == a[i].tobytes(), (n, i, g, a[i]))
        check.true(_everywhere_identical([x[i] for i in range(n)]), (n, "differs"))
    check.done()


SCALAR_OPS = ["sum", "prod", "max", "min", "any", "all", "mean", "var", "std", "argmax", "argmin"]


@pytest.mark.parametrize("dtype", ["bool", "int8", "int64", "float32", "float64", "complex128"])
@pytest.mark.parametrize("strategy,axis", LAYOUTS_2D + MESHES_2D)
def test_reductions_to_a_scalar_match_numpy(dtype, strategy, axis):
    check = Checks()
    for shape in [(0, 3), (1, 1), (3, 1), (5, 3), (13, 4)]:
        a = sample(shape, dtype, seed=5, positive=True)
        x = make(a, strategy, axis)
        for name in SCALAR_OPS:
            if name in ("var", "std", "mean") and dtype == "bool":
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                try:
                    want = getattr(a, name)()
                except Exception as exc:
                    err = assert_raises_everywhere(type(exc), getattr(x, name))
                    check.true(type(err) is type(exc), (shape, name, err, exc))
                    continue
                got = getattr(x, name)()
            msg = _same_scalar(got, want)
            check.true(msg is None, (shape, name, msg))
            check.true(_everywhere_identical(got), (shape, name, "differs between ranks"))
    check.done()


@pytest.mark.parametrize("dtype", ["int8", "float32", "complex64", "float64"])
def test_keepdims_and_nan_rules(dtype):
    a = sample((9, 4), dtype, seed=2)
    if np.dtype(dtype).kind in "fc":
        a[4, 1] = np.nan
        a[7, 2] = np.nan
    x = make(a, "equal", 0)
    check = Checks()
    for name in ("sum", "max", "min", "argmax", "argmin", "var"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            want = getattr(np, name)(a, keepdims=True)
            got = getattr(x, name)(keepdims=True)
            check.equal(got, want, rtol=1e-5, what=name)
            check.true(_same_scalar(getattr(x, name)(), getattr(a, name)()) is None, name)
    # ties go to the lowest index, on every layout
    b = np.zeros((6, 3), dtype=dtype)
    b[1, 2] = b[4, 0] = 1
    for strategy, axis in LAYOUTS_2D + MESHES_2D:
        y = make(b, strategy, axis)
        check.true(y.argmax() == b.argmax() and y.argmin() == b.argmin(), (strategy, axis))
    check.done()


# -- communication: one small Allreduce, the same bytes at any P ------------------------


def test_element_get_and_scalar_reductions_make_one_96_byte_allreduce():
    a = np.arange(40.0).reshape(8, 5)
    for axis in (0, 1):
        x = make(a, "equal", axis)
        v = make(np.arange(12), "equal")
        with d2o.trace() as t:
            v[5]
            x[2, 3]
            x[-1, 0]
            for name in ("sum", "max", "min", "prod", "any", "all", "mean"):
                getattr(x, name)()
            x.var()
            x.std()
            x.argmax()
            x.argmin()
            np.sum(x)
        msg = _only_allreduce_records(t)
        collective_assert(msg is None, msg)
        collective_assert(len(t.records) == 15, t.records)


def test_checked_mode_rides_on_the_record_and_checks_alone_in_one_allreduce():
    a = np.arange(40.0).reshape(8, 5)
    x = make(a, "equal", 0)
    with d2o.options(check_args=True):
        with d2o.trace() as t:
            x[5, 1]
            x.sum()
            x.argmax()
        msg = _only_allreduce_records(t)
        collective_assert(msg is None, msg)
        with d2o.trace() as t:
            x[1, 1] = 2.0  # writes: the check travels alone, before anything is written
        calls = [c for c in t.calls if c[1] != "Allreduce" or c[2] != RECORD]
        collective_assert(not calls, t.calls)
        collective_assert(not any(c[1].startswith("Allgather") for c in t.calls), t.calls)
    a[1, 1] = 2.0
    collective_assert(x[1, 1] == 2.0)


def test_construction_makes_one_96_byte_allreduce():
    """The metadata of every rank agrees through a digest (``agree_same``), not a gather
    of every rank's; only 'freeform' gathers the pieces' lengths, which it needs."""
    a = np.arange(40.0).reshape(8, 5)
    with d2o.options(check_args=False), d2o.trace() as t:
        for strategy in ("equal", "fftw", "not"):
            d2o.distributed_data_object(global_shape=(8, 5), distribution_strategy=strategy)
            d2o.distributed_data_object(a, distribution_strategy=strategy, axis=1)
        for lay in (d2o.layout((comm.size, 1), split=(0, 1)),  # a mesh; block-cyclic
                    d2o.layout((comm.size,), split=(0,), block=2)):  # fmt: skip
            d2o.distributed_data_object(a, distribution_strategy=lay)
    msg = _only_allreduce_records(t)
    collective_assert(msg is None, msg)
    collective_assert(len(t.records) == 8, t.records)
    with d2o.options(check_args=False), d2o.trace() as t:
        d2o.distributed_data_object(local_data=np.ones((comm.rank + 1, 2)))
    want = [] if comm.size == 1 else ["Allreduce", "allgather"]
    collective_assert([c[1] for c in t.calls][:2] == want, t.calls)


@two
@pytest.mark.parametrize("bad", [{"global_shape": (9, 5)}, {"dtype": np.float32},
                                 {"distribution_strategy": "fftw"}, {"axis": 1}])  # fmt: skip
def test_construction_with_other_metadata_on_one_rank_raises_everywhere(bad):
    kw = {"global_shape": (8, 5), "dtype": np.float64, "distribution_strategy": "equal"}
    with d2o.options(check_args=False):  # (checked mode would name the argument first)
        err = assert_raises_everywhere(ValueError, lambda: d2o.distributed_data_object(
            **{**kw, **(bad if comm.rank == BAD else {})}))  # fmt: skip
    collective_assert("same on every rank" in str(err), str(err))
    x = d2o.distributed_data_object(**kw)  # still in step
    collective_assert(x.shape == (8, 5) and x.dtype == np.float64)


def test_small_axis_reductions_make_one_allreduce_of_the_result():
    a = np.arange(40.0).reshape(8, 5)
    x = make(a, "equal", 0)
    with d2o.options(check_args=False), d2o.trace() as t:  # (checked mode: a 96-byte one)
        s = x.sum(axis=0)
    if comm.size > 1:  # the 1-byte agreement, then the partials (not P times their size)
        got = [c[1:4] for c in t.calls]
        collective_assert(got == [("Allreduce", 1, 1), ("Allreduce", 40, 40)], t.calls)
    collective_assert(np.array_equal(s.get_full_data(), a.sum(axis=0)))


# -- bad input on one rank: raises on every rank -----------------------------------------


def _per_rank(good, bad):
    return bad if comm.rank == BAD else good


@two
def test_bad_key_on_one_rank_raises_everywhere():
    with d2o.options(check_args=False):
        v = make(np.arange(12.0), "equal")
        x = make(np.arange(40.0).reshape(8, 5), "equal", 1)
        err = assert_raises_everywhere(IndexError, lambda: v[_per_rank(5, 12)])
        collective_assert(f"raised on rank {BAD}" in str(err) or comm.rank == BAD, str(err))
        assert_raises_everywhere(IndexError, lambda: x[_per_rank((2, 3), (2, 3, 0))])
        assert_raises_everywhere(IndexError, lambda: x[_per_rank((2, 3), (2, 9))])
        assert_raises_everywhere(TypeError, lambda: x.sum(dtype=_per_rank(None, "no-such")))
        assert_raises_everywhere(TypeError, lambda: x.var(ddof=_per_rank(0, "one")))
        assert_raises_everywhere(TypeError, lambda: x.std(dtype=_per_rank(None, "no-such")))
        collective_assert(comm.allreduce(1) == comm.size)  # still in step
        collective_assert(v[5] == 5.0 and x[2, 3] == 13.0)


@two
def test_checked_mode_mismatch_on_a_scalar_path_names_the_argument():
    v = make(np.arange(12.0), "equal")
    with d2o.options(check_args=True):
        err = assert_raises_everywhere(ValueError, lambda: v[_per_rank(5, 6)])
        collective_assert("'key'" in str(err), str(err))
        err = assert_raises_everywhere(ValueError, lambda: v.sum(dtype=_per_rank(None, "f4")))
        collective_assert("'dtype'" in str(err), str(err))
    collective_assert(comm.allreduce(1) == comm.size)


def test_few_ranks_gather_the_records_and_fold_them_alike():
    """Up to RECORD_GATHER_MAX ranks: one Allgather of the 96-byte records, folded in rank
    order: the values of the Allreduce path, bit-identical on every rank."""
    a = sample((7, 5), "float64", seed=5)
    x = make(a, "equal", 0)
    got = {}
    for limit in (0, 64):
        comm_module.RECORD_GATHER_MAX[0] = limit
        with d2o.trace() as t:
            got[limit] = (x[3, 2], x.sum(), x.var(), x.argmax(), x.max())
        if comm.size > 1:
            kind = "Allreduce" if limit == 0 else "Allgather"
            recv = RECORD if limit == 0 else RECORD * (comm.size - 1)
            collective_assert(all(c[1:4] == (kind, RECORD, recv) for c in t.calls), t.calls)
    # the same values (the fold's order differs in the tree: floating point may round
    # differently in the last place), each bit-identical on every rank
    close = all(np.isclose(u, v, rtol=1e-12) for u, v in zip(*got.values()))
    collective_assert(close, got)
    mine = b"".join(np.asarray(v).tobytes() for v in got[64])
    collective_assert(len(set(comm.allgather(mine))) == 1, "ranks differ")
    collective_assert(np.isclose(got[64][1], a.sum()) and got[64][3] == a.argmax())


def _special(dt: np.dtype) -> list:
    """Payloads that the folds' Python-number path must hand to numpy (wrapping, nan,
    inf, +-0) or get exactly right (the largest finite values, subnormals)."""
    if dt.kind == "i":
        info = np.iinfo(dt)
        return [info.max, info.max, info.min, -1, 0, info.max // 2 + 1, 3]
    if dt.kind not in "fc":
        return []
    big = float(np.finfo(dt).max)
    tiny = float(np.finfo(dt).smallest_subnormal)
    if dt.kind == "f":
        return [np.nan, np.inf, -np.inf, 0.0, -0.0, 0.0, big, big, -big, tiny, 1.5]
    return [complex(np.nan, 1), complex(np.inf, 0), complex(-np.inf, 1), -0.0, big]


@pytest.mark.parametrize("dtype", ["bool", "int8", "int64", "float32", "float64", "complex128"])
@pytest.mark.parametrize("ranks", [2, 3, 5, 8])
def test_gathered_records_fold_as_one_fold_per_rank(dtype, ranks):
    """`fold_rows` (the gathered form's fast fold) gives the bits of folding the records one
    rank after another with `fold_records`: values held by any subset of the ranks, flags
    and checked mode's digests ORed, the payload of one holder kept as it is."""
    dt = np.dtype(dtype)
    rng = np.random.default_rng(ranks)
    special = _special(dt)
    for ufunc in (np.add, np.maximum, np.minimum, np.multiply, None):
        code = 0 if ufunc is None else _ufunc_combiner(ufunc, dt)
        for trial in range(16):
            rows = np.zeros((ranks, E.RECORD_WORDS), dtype=np.uint64)
            held = rng.random(ranks) < (0.5 if 0 < trial < 8 else 1.0)
            if ufunc is None:  # no combiner: one owner
                held[:] = False
                held[rng.integers(ranks)] = True
            for r in range(ranks):
                if rng.random() < 0.2:
                    rows[r, 0] |= E.ERROR
                if trial % 3 == 0:  # checked mode's digest
                    word = int(rng.integers(1, 2**62))
                    rows[r, E.DIGEST], rows[r, E.NOT_DIGEST] = word, ~np.uint64(word)
                if held[r]:
                    value = (
                        rng.integers(-60, 60) if dt.kind in "biu" else rng.standard_normal() * 50
                    )
                    if trial >= 8 and special:  # overflow, nan, inf, signed zeros
                        value = special[(r + trial) % len(special)]
                    E.put_value(rows[r], dt.type(value), dt, code)
            want = rows[0].copy()
            for row in rows[1:]:
                row = row.copy()
                with np.errstate(all="ignore"):
                    E.fold_records(want, row)
                want = row
            with np.errstate(all="ignore"):
                got = E.fold_rows(rows.copy())
            assert got.tobytes() == want.tobytes(), (dtype, ranks, ufunc, trial, got, want)


def test_vdot_failing_on_one_rank_raises_everywhere(monkeypatch):
    """A failure in one rank's part of ``vdot`` (numpy's ``vdot`` patched to fail on the
    last rank alone), or a numpy operand of another size there, is raised on every rank,
    nobody left waiting in the combination; the next ``vdot`` is numpy's, in one 96-byte
    record."""
    a = np.arange(12.0)
    x = make(a, "equal")
    real = special.np.vdot

    class Failing:
        def __getattr__(self, name):
            return getattr(np, name)

        @staticmethod
        def vdot(p, q):
            if comm.rank == BAD:
                raise MemoryError("the last rank's part failed")
            return real(p, q)

    monkeypatch.setattr(special, "np", Failing())
    assert_raises_everywhere(MemoryError, dnp.vdot, x, x)
    monkeypatch.setattr(special, "np", np)
    wrong = np.arange(13.0) if comm.rank == BAD else a  # (a numpy operand: its size here)
    assert_raises_everywhere(ValueError, dnp.vdot, x, wrong)
    assert_raises_everywhere(ValueError, dnp.vdot, x, make(np.arange(13.0), "equal"))
    with d2o.trace() as t:
        got = dnp.vdot(x, x)
    collective_assert(got == np.vdot(a, a))
    msg = _only_allreduce_records(t)  # (the partials and the errors: one record)
    collective_assert(msg is None, msg)
