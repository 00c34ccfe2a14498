"""polyfit (TSQR), the polynomial helpers on distributed coefficients, savetxt (every rank
writes its rows) against numpy (issue 31); savez: tests/test_npz.py."""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest
from _helpers import layouts, make

import d2o
import d2o.numpy as dnp
from d2o import distributed_data_object as D2O
from d2o.testing import assert_raises_everywhere, collective_assert


@pytest.fixture(autouse=True)
def _unchecked():
    """Exact byte counts: without check_args' extra allreduce per call."""
    with d2o.options(check_args=False):
        yield


def _full(v):
    if isinstance(v, D2O):
        return v.get_full_data()
    if isinstance(v, (tuple, list)):
        return type(v)(_full(e) for e in v)
    return v


def _same(got, want, rtol=1e-9, atol=1e-12) -> str | None:
    got = _full(got)
    if isinstance(want, tuple):
        if not isinstance(got, tuple) or len(got) != len(want):
            return f"got {type(got).__name__}"
        for g, w in zip(got, want):
            m = _same(g, w, rtol, atol)
            if m:
                return m
        return None
    g, w = np.asarray(got), np.asarray(want)
    if g.shape != w.shape:
        return f"shape {g.shape} != {w.shape}"
    if g.dtype != w.dtype and not (g.dtype.kind in "iu" and w.dtype.kind in "iu"):
        return f"dtype {g.dtype} != {w.dtype}"
    if not np.allclose(g, w, rtol=rtol, atol=atol):
        return f"{g} != {w}"
    return None


def _no_gather(t, what):
    bad = [r for r in t.records if r.gathers or r.fallback]
    collective_assert(not bad, f"{what}: {[(r.op, r.gathers, r.fallback) for r in bad]}")


def _sent(t) -> int:
    return sum(r.bytes_sent for r in t.records)


# -- polyfit --------------------------------------------------------------------------
def _points(m: int, dtype: str, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = np.linspace(-2.0, 3.0, m)
    if np.dtype(dtype).kind in "iu":
        x = np.round(x * 3)
    x = x.astype(dtype)
    if np.dtype(dtype).kind == "c":
        x = x + 0.5j * np.cos(x.real)
    y = (1.5 * x**3 - 2 * x + 4 + rng.standard_normal(m)).astype(
        np.result_type(dtype, np.float64) if np.dtype(dtype).kind != "f" else dtype
    )
    return x, y


@pytest.mark.parametrize("dtype", ["float64", "int64", "float32", "complex128"])
@pytest.mark.parametrize("strategy,axis", layouts(1))
def test_polyfit_against_numpy(dtype, strategy, axis):
    x, y = _points(23, dtype)
    rtol = 1e-3 if dtype == "float32" else 1e-8
    X, Y = make(x, strategy, axis), make(y, strategy, axis)
    w = np.abs(np.sin(np.arange(23.0))) + 0.5
    cases = [
        ((X, Y, 3), (x, y, 3), {}),
        ((X, y, 2), (x, y, 2), {"full": True}),  # y as numpy data: sliced locally
        ((x, Y, 3), (x, y, 3), {"w": make(w, strategy, axis)}),
        ((X, Y, 3), (x, y, 3), {"cov": True}),
        ((X, Y, 1), (x, y, 1), {"cov": "unscaled", "w": w}),
        ((X, Y, 0), (x, y, 0), {"rcond": 1e-3}),
    ]
    for dargs, nargs, kw in cases:
        nkw = {k: _full(v) for k, v in kw.items()}
        want = np.polyfit(*nargs, **nkw)
        with d2o.trace() as t:
            got = dnp.polyfit(*dargs, **kw)
        msg = _same(got, want, rtol=rtol, atol=rtol * 1e-3)
        collective_assert(msg is None, f"polyfit {dtype} {strategy} {kw.keys()}: {msg}")
        _no_gather(t, f"polyfit on {strategy}")


@pytest.mark.parametrize("strategy,axis", layouts(2))
def test_polyfit_2d_y(strategy, axis):
    x, y = _points(17, "float64")
    y2 = np.stack([y, 2 * y - x, np.cos(x)], axis=1)
    Y = make(y2, strategy, axis)
    X = make(x, "equal" if strategy.startswith(("mesh", "cyc")) else strategy, 0)
    for kw in ({}, {"full": True}, {"cov": True}, {"w": np.arange(1.0, 18.0)}):
        want = np.polyfit(x, y2, 4, **kw)
        with d2o.trace() as t:
            got = dnp.polyfit(X, Y, 4, **kw)
        msg = _same(got, want, rtol=1e-8, atol=1e-10)
        collective_assert(msg is None, f"polyfit 2-d y on {strategy}/{axis} {kw}: {msg}")
        _no_gather(t, f"polyfit 2-d on {strategy}")


def test_polyfit_tiny_and_rank_deficient():
    """One point; fewer points than coefficients (rank-deficient, minimum norm as numpy's
    gelsd); repeated points; the warning numpy gives."""
    for x, y, deg in (([2.0], [3.0], 0), ([1.0, 2.0], [1.0, 5.0], 3), ([1.0] * 5, [2.0] * 5, 2)):
        x, y = np.asarray(x), np.asarray(y)
        with warnings.catch_warnings(record=True) as wn:
            warnings.simplefilter("always")
            want = np.polyfit(x, y, deg, full=True)
            n_np = len(wn)
            got = dnp.polyfit(D2O(x), D2O(y), deg, full=True)
            dnp.polyfit(D2O(x), D2O(y), deg)
            n_d = len(wn) - n_np
        msg = _same(got, want, rtol=1e-8, atol=1e-10)
        collective_assert(msg is None, f"polyfit tiny {x} deg {deg}: {msg}")
        np_warned = want[2] != deg + 1
        collective_assert(n_d == int(np_warned), f"warnings {n_d} vs numpy's {np_warned}")


def test_polyfit_moves_only_small_factors(comm):
    """Same-layout x, y: the R factors (order^2 per rank) and a few sums of order numbers,
    independent of the number of points; no gather."""
    sent = []
    for m in (40, 400):
        x, y = _points(m, "float64")
        X, Y = D2O(x), D2O(y)
        with d2o.trace() as t:
            dnp.polyfit(X, Y, 3, full=True)
        _no_gather(t, "polyfit")
        sent.append(_sent(t))
    collective_assert(sent[0] == sent[1], f"bytes sent grow with the points: {sent}")
    with d2o.options(gather="raise"):  # no implicit gather on the way
        dnp.polyfit(X, Y, 2, cov=True, w=D2O(np.ones(400)))
    bound = 8 * (16 * comm.size + 3 * 4 + 8) + 1024 if comm.size > 1 else 0
    collective_assert(sent[1] <= bound, f"{sent[1]} bytes > {bound}")


def test_polyfit_bad_input_raises_everywhere():
    X, Y = D2O(np.arange(6.0)), D2O(np.arange(6.0))
    assert_raises_everywhere(ValueError, dnp.polyfit, X, Y, -1)
    assert_raises_everywhere(TypeError, dnp.polyfit, D2O(np.ones((3, 2))), Y, 1)
    assert_raises_everywhere(TypeError, dnp.polyfit, X, D2O(np.arange(5.0)), 1)
    assert_raises_everywhere(TypeError, dnp.polyfit, D2O(np.zeros(0)), D2O(np.zeros(0)), 1)
    assert_raises_everywhere(TypeError, dnp.polyfit, X, Y, 1, w=np.ones(5))
    assert_raises_everywhere(ValueError, dnp.polyfit, X, Y, 5, cov=True)


# -- the coefficient helpers ----------------------------------------------------------
def _coeffs(n: int, dtype: str, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    v = rng.integers(-5, 6, n)
    if np.dtype(dtype).kind == "c":
        return (v + 1j * rng.integers(-3, 4, n)).astype(dtype)
    return v.astype(dtype)


@pytest.mark.parametrize("dtype", ["int64", "float64", "complex128"])
@pytest.mark.parametrize("strategy,axis", layouts(1))
def test_poly_helpers_against_numpy(dtype, strategy, axis):
    for n in (1, 2, 9):
        a = _coeffs(n, dtype)
        b = _coeffs(4, dtype, seed=2)
        A = make(a, strategy, axis)
        B = make(b, strategy, axis)
        lead0 = np.concatenate([np.zeros(2, a.dtype), a])
        cases = [
            ("polyadd", (A, b), (a, b), {}),
            ("polyadd", (b, A), (b, a), {}),
            ("polysub", (A, B), (a, b), {}),
            ("polysub", ([1.0], A), ([1.0], a), {}),
            ("polyder", (A,), (a,), {}),
            ("polyder", (A,), (a,), {"m": 2}),
            ("polyder", (A,), (a,), {"m": 0}),
            ("polyint", (A,), (a,), {}),
            ("polyint", (A,), (a,), {"m": 2, "k": [1.0, 2.0]}),
            ("polyint", (A,), (a,), {"m": 3, "k": 2.0}),
            ("polymul", (A, b), (a, b), {}),
            ("polymul", (b[:2], A), (b[:2], a), {}),
            ("polymul", (A, B), (a, b), {}),
            ("polymul", (make(lead0, strategy, axis), [0.0, 2.0]), (lead0, [0.0, 2.0]), {}),
            ("polyval", (A, np.array([0.5, -1.0, 2.0])), (a, np.array([0.5, -1.0, 2.0])), {}),
            ("polyval", (A, 2), (a, 2), {}),
            ("polyval", (b, make(lead0, strategy, axis)), (b, lead0), {}),
        ]
        for name, dargs, nargs, kw in cases:
            want = getattr(np, name)(*nargs, **kw)
            with d2o.trace() as t:
                got = getattr(dnp, name)(*dargs, **kw)
            msg = _same(got, want)
            collective_assert(msg is None, f"{name} n={n} {dtype} {strategy}: {msg}")
            _no_gather(t, f"{name} on {strategy}")


def test_poly_helpers_small_and_poly1d_inputs():
    """0-d coefficients, poly1d operands and zero polynomials as numpy's (the 0-d and
    poly1d cases take the bounded fallback)."""
    p = np.poly1d([1.0, 2.0, 3.0])
    z = np.zeros(3)
    with d2o.options(fallback_limit=1 << 20):
        for name, dargs, nargs in (
            ("polyadd", (D2O(np.array(2.0)), [1.0, 2.0]), (np.array(2.0), [1.0, 2.0])),
            ("polymul", (p, D2O(np.arange(4.0))), (p, np.arange(4.0))),
            ("polyder", (p,), (p,)),
            ("polymul", (D2O(z), [1.0, 2.0]), (z, [1.0, 2.0])),
            ("polymul", (D2O(z), D2O(z)), (z, z)),
        ):
            want = getattr(np, name)(*nargs)
            got = getattr(dnp, name)(*dargs)
            if isinstance(want, np.poly1d):
                collective_assert(isinstance(got, np.poly1d), f"{name}: {type(got)}")
                got, want = got.coeffs, want.coeffs
            msg = _same(got, want)
            collective_assert(msg is None, f"{name} {nargs}: {msg}")
    assert_raises_everywhere(ValueError, dnp.polyder, D2O(np.arange(4.0)), -1)
    assert_raises_everywhere(ValueError, dnp.polyint, D2O(np.arange(4.0)), -1)
    assert_raises_everywhere(ValueError, dnp.polyint, D2O(np.arange(4.0)), 3, [1.0, 2.0])


def test_poly_helpers_move_boundaries_only(comm):
    """polyder of a long distributed vector: a shifted view (one element per boundary),
    no gather; polymul with a short numpy factor: one exchange per kernel element."""
    n = 2000
    a = np.arange(float(n))
    A = D2O(a)
    with d2o.trace() as t:
        got = dnp.polyder(A)
    _no_gather(t, "polyder")
    collective_assert(_sent(t) <= 8 * 64 * comm.size, f"polyder sent {_sent(t)}")
    collective_assert(_same(got, np.polyder(a)) is None, "polyder")
    with d2o.trace() as t:
        got = dnp.polymul(A, [1.0, -1.0])
    _no_gather(t, "polymul")
    collective_assert(_sent(t) < a.nbytes // 2 or comm.size == 1, f"polymul sent {_sent(t)}")
    collective_assert(_same(got, np.polymul(a, [1.0, -1.0])) is None, "polymul")


# -- savetxt --------------------------------------------------------------------------
def _bytes(path) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _text_data(shape, dtype):
    rng = np.random.default_rng(3)
    v = rng.standard_normal(shape) * 100
    if np.dtype(dtype).kind == "c":
        v = v + 1j * rng.standard_normal(shape)
    return v.astype(dtype)


@pytest.mark.parametrize("dtype", ["float64", "int32", "complex128", "float32"])
@pytest.mark.parametrize("ndim", [1, 2])
def test_savetxt_byte_identical(shared_dir, dtype, ndim):
    a = _text_data((7, 3)[:ndim] if ndim == 2 else (11,), dtype)
    kws = [{}, {"fmt": "%.3f", "delimiter": ",", "header": "one\ntwo", "footer": "end",
                "comments": "// "}]  # fmt: skip
    if dtype == "int32":
        kws.append({"fmt": "%d", "newline": ";\n"})
    for strategy, axis in layouts(ndim):
        x = make(a, strategy, axis)
        for i, kw in enumerate(kws):
            mine = os.path.join(shared_dir, f"d-{strategy}-{axis}-{i}.txt")
            theirs = os.path.join(shared_dir, f"n-{strategy}-{axis}-{i}.txt")
            with d2o.trace() as t:
                dnp.savetxt(mine, x, **kw)
            _no_gather(t, f"savetxt on {strategy}")
            if x.distributor.comm.rank == 0:
                np.savetxt(theirs, a, **kw)
            x.distributor.comm.barrier()
            ok = _bytes(mine) == _bytes(theirs)
            collective_assert(ok, f"savetxt {dtype} {strategy}/{axis} {kw}")


def test_savetxt_empty_tiny_and_rows_only_move(shared_dir, comm):
    for a in (np.zeros((0, 3)), np.zeros(0), np.array([[1.5, 2.5]]), np.array([4.0])):
        for strategy, axis in layouts(a.ndim):
            path = os.path.join(shared_dir, "d.txt")
            dnp.savetxt(path, make(a, strategy, axis), header="h")
            ok = None
            if comm.rank == 0:
                np.savetxt(os.path.join(shared_dir, "n.txt"), a, header="h")
                ok = _bytes(path) == _bytes(os.path.join(shared_dir, "n.txt"))
            collective_assert(comm.bcast(ok, 0), f"savetxt {a.shape} {strategy}/{axis}")
    # cut along its rows: only the byte counts move (one int per rank), never the data
    a = np.arange(4000.0).reshape(1000, 4)
    with d2o.trace() as t:
        dnp.savetxt(os.path.join(shared_dir, "big.txt"), D2O(a))
    _no_gather(t, "savetxt")
    collective_assert(_sent(t) < 4096, f"savetxt sent {_sent(t)} bytes")
    with d2o.options(gather="raise"):
        dnp.savetxt(os.path.join(shared_dir, "big.txt"), make(a, "mesh01"))
    # cut along its columns: redistributed to rows, each element moves at most once
    with d2o.trace() as t:
        dnp.savetxt(os.path.join(shared_dir, "big.txt"), D2O(a, axis=1))
    _no_gather(t, "savetxt")
    collective_assert(_sent(t) <= a.nbytes + 4096, f"savetxt sent {_sent(t)} bytes")
    ok = comm.bcast(np.array_equal(np.loadtxt(os.path.join(shared_dir, "big.txt")), a), 0)
    collective_assert(ok, "savetxt of a column layout")


def test_savetxt_bad_input(shared_dir):
    x = D2O(np.arange(6.0).reshape(3, 2))
    assert_raises_everywhere(ValueError, dnp.savetxt, os.path.join(shared_dir, "a"),
                             D2O(np.zeros((2, 2, 2))))  # fmt: skip
    assert_raises_everywhere(ValueError, dnp.savetxt, os.path.join(shared_dir, "a"), x, "%f %f %f")
    assert_raises_everywhere(FileNotFoundError, dnp.savetxt, os.path.join(shared_dir, "no", "a"), x)
    collective_assert(
        not os.path.exists(os.path.join(shared_dir, "a")), "a failed write left a file"
    )
