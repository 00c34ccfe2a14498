"""The sort machinery of d2o.numpy (`d2o.ops.samplesort`, `d2o.ops.sorting`) against numpy.

sort/argsort of 1-d and flattened arrays, lexsort, partition/argpartition, searchsorted,
unique and the array API's unique_*, isin and the set operations, and the quantiles of
the flattened array, on every layout, with numpy as the oracle.  Skewed inputs check the
balance of the sorted result; a trace and a memory test check what the sort moves and
holds.  Every comparison is collective (all ranks pass or fail together).

Distributed sorts cost several collectives each (slow at 4 oversubscribed ranks), so the
layouts rotate over the cases where a full product would add little.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from _helpers import Checks, layouts, make, sample, traced_peak
from hypothesis import given, settings
from hypothesis import strategies as st

import d2o
import d2o.numpy as dnp
from d2o import default_comm
from d2o import distributed_data_object as D2O
from d2o.testing import _compare, assert_raises_everywhere, collective_assert

comm = default_comm()
P = comm.size

#: 1-d layouts: replicated, the slab strategies, the mesh and block-cyclic ones
ALL1 = [s for s, _ in layouts(1)]
DIST1 = [s for s in ALL1 if s != "not"]
DTYPES = ["bool", "int32", "int64", "uint64", "float32", "float64", "complex128"]
METHODS = [
    "inverted_cdf",
    "averaged_inverted_cdf",
    "closest_observation",
    "interpolated_inverted_cdf",
    "hazen",
    "weibull",
    "linear",
    "median_unbiased",
    "normal_unbiased",
    "lower",
    "higher",
    "nearest",
    "midpoint",
]


# -- helpers --------------------------------------------------------------------------------


def full(x):
    """The global value of a result (collective for a distributed one)."""
    return x.get_full_data() if isinstance(x, D2O) else x


def eq(check: Checks, got, want, what="", dtype=True) -> None:
    """Gather ``got`` (collective where distributed) and compare it exactly with ``want``
    (NaNs in the same places are equal; shapes and, by default, dtypes must agree)."""
    try:
        g = full(got)
    except Exception as e:  # the verdict is agreed in check.done()
        check.true(False, f"{what}: gathering raised {type(e).__name__}: {e}")
        return
    if isinstance(got, D2O) or np.ndim(want):
        check.true(np.ndim(g) == np.ndim(want), f"{what}: ndim {np.ndim(g)} != {np.ndim(want)}")
    msg = _compare(g, want, None, 0, dtype)
    check.true(msg is None, f"{what}: {msg}")


def each(a: np.ndarray, names: list[str]):
    """(name, distributed version of ``a``) for the layouts ``names`` (axis 0)."""
    for name in names:
        yield name, make(a, name, 0)


def special(dtype: str, n: int = 61, seed: int = 0) -> np.ndarray:
    """Test data with duplicates and the dtype's awkward values: NaNs, signed zeros and
    infinities, NaN parts of complex numbers, the integer extremes."""
    a = sample((n,), dtype, seed)
    rng = np.random.default_rng(seed + 100)
    pos = rng.permutation(n)
    dt = np.dtype(dtype)
    if dt.kind == "f":
        a[pos[:5]] = np.nan
        a[pos[5:9]] = -0.0
        a[pos[9:13]] = 0.0
        a[pos[13]], a[pos[14]] = np.inf, -np.inf
        if n > 19:
            a[pos[15:19]] = a[pos[19]]  # a run of equal values
    elif dt.kind == "c":
        nan = np.nan
        vals = [complex(1, nan), complex(nan, 1), complex(nan, nan), complex(-2, nan),
                complex(nan, -3), complex(0.0, -0.0), complex(-0.0, 0.0), complex(1, 2),
                complex(1, 2), complex(1, nan), complex(nan, 1), complex(1, -1)]  # fmt: skip
        for p, v in zip(pos, vals):
            a[p] = v
    elif dt.kind in "iu":
        info = np.iinfo(dt)
        a[pos[0]], a[pos[1]] = info.max, info.min
        a[pos[2]] = info.max - 1
        if dt.kind == "u":
            a[pos[3]] = 1 << (8 * dt.itemsize - 1)  # the sign bit of the signed type
            a[pos[4]] = (1 << (8 * dt.itemsize - 1)) - 1
    return a


def balanced(check: Checks, r, n: int, what="") -> None:
    """Every rank's piece of the distributed 1-d result ``r`` is within 1.5x the mean."""
    if not isinstance(r, D2O):
        check.true(False, f"{what}: a {type(r).__name__}, not a distributed result")
        return
    if r.distributor.replicated:
        return
    local = len(r.data)
    check.true(local <= 1.5 * n / P + 1, f"{what}: rank {comm.rank} holds {local} of {n}")


def descending_argsort(a: np.ndarray) -> np.ndarray:
    """The array API's descending stable order as `d2o.numpy.axes._descending` defines
    it: the stable ascending order of the reversed array, reversed."""
    n = a.size
    return (n - 1) - np.flip(np.argsort(np.flip(a), kind="stable"))


def is_perm(idx: np.ndarray, n: int) -> bool:
    return idx.shape == (n,) and np.array_equal(np.sort(idx), np.arange(n))


def partitioned(res: np.ndarray, a: np.ndarray, ks) -> str | None:
    """Why ``res`` is not a partition of ``a`` around the sorted positions ``ks`` (None
    if it is).  Compares ranks in numpy's sort order (NaN last), so NaNs are fine."""
    s = np.sort(a)
    if res.shape != s.shape or not np.array_equal(np.sort(res), s, equal_nan=True):
        return f"not a permutation of the input: {res}"
    u = np.unique(a)
    r = np.searchsorted(u, res)
    for k in np.atleast_1d(ks):
        k = int(k) % a.size
        if not np.array_equal(res[k : k + 1], s[k : k + 1], equal_nan=True):
            return f"element {k} is {res[k]}, sorted has {s[k]}"
        if not (r[:k] <= r[k]).all() or not (r[k + 1 :] >= r[k]).all():
            return f"not partitioned around {k}: {res}"
    return None


# -- sort and argsort -----------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_sort_argsort_dtypes(dtype):
    a = special(dtype)
    want_sort = np.sort(a)
    want_stable = np.argsort(a, kind="stable")
    check = Checks()
    for i, (name, x) in enumerate(each(a, ALL1)):
        w = f"{dtype} {name}"
        if i % 2:
            r = dnp.sort(x, axis=None)
        else:
            r = dnp.sort(x) if dtype[0] != "f" else dnp.sort(x, kind="stable")
        got = full(r)
        eq(check, got, want_sort, f"{w} sort (axis=None: {i % 2})")
        balanced(check, r, a.size, f"{w} sort")
        if dtype[0] == "f" and i % 2 == 0:  # a stable sort keeps -0.0 and 0.0 in order
            sign = np.signbit(np.sort(a, kind="stable"))
            check.true(np.array_equal(np.signbit(got), sign), f"{w} signs of zeros {got}")
        eq(check, dnp.argsort(x, kind="stable"), want_stable, f"{w} argsort stable")
        idx = full(dnp.argsort(x))
        check.true(is_perm(idx, a.size), f"{w} argsort: not a permutation {idx}")
        if is_perm(idx, a.size):
            eq(check, a[idx], want_sort, f"{w} a[argsort]")
    check.done()


def test_sort_kinds_and_stable_keyword():
    a = special("int64", 50, seed=3)
    check = Checks()
    for i, (name, x) in enumerate(each(a, ALL1)):
        kind = ["quicksort", "mergesort", "heapsort", "stable", None, "quicksort"][i % 6]
        eq(check, dnp.sort(x, kind=kind), np.sort(a), f"{name} sort kind={kind}")
        eq(check, dnp.argsort(x, stable=True), np.argsort(a, kind="stable"), f"{name} stable")
        eq(check, dnp.sort(x, stable=True), np.sort(a, stable=True), f"{name} sort stable=True")
    check.done()


@pytest.mark.parametrize("n", [0, 1, 2, 3, 257])
def test_sort_lengths(n):
    """Empty, single, shorter than the number of ranks, and a few hundred elements."""
    check = Checks()
    for dtype in ("int64", "float64"):
        a = special(dtype, n, seed=n) if n > 20 else sample((n,), dtype, seed=n)
        for name, x in each(a, ALL1):
            w = f"{dtype} n={n} {name}"
            r = dnp.sort(x)
            eq(check, r, np.sort(a), f"{w} sort")
            balanced(check, r, n, w)
            eq(check, dnp.argsort(x, kind="stable"), np.argsort(a, kind="stable"), f"{w} argsort")
    check.done()


@pytest.mark.parametrize("dtype", ["float64", "int32", "complex128"])
def test_sort_flattened_2d(dtype):
    a = special(dtype, 63, seed=7).reshape(7, 9)
    check = Checks()
    for i, (strategy, axis) in enumerate(layouts(2)):
        x = make(a, strategy, axis)
        w = f"{dtype} {strategy} axis {axis}"
        r = dnp.sort(x, axis=None)
        eq(check, r, np.sort(a, axis=None), f"{w} sort(axis=None)")
        balanced(check, r, a.size, w)
        if i % 2 == 0:
            eq(check, dnp.argsort(x, axis=None, kind="stable"),
               np.argsort(a, axis=None, kind="stable"), f"{w} argsort(axis=None)")  # fmt: skip
    check.done()


SKEWED = {
    "all equal": lambda n: np.full(n, 3.5),
    "two values": lambda n: np.where(np.arange(n) % 7 == 3, 2.0, 1.0),
    "sorted": lambda n: np.arange(n, dtype=np.float64),
    "reversed": lambda n: np.arange(n, 0, -1).astype(np.float64),
    "many NaNs": lambda n: np.where(np.arange(n) % 5 == 0, np.arange(n) / 3, np.nan),
    "ints all equal": lambda n: np.zeros(n, dtype=np.int64),
}


@pytest.mark.parametrize("kind", list(SKEWED))
def test_skewed_inputs_balanced(kind):
    n = 203
    a = SKEWED[kind](n)
    check = Checks()
    for name, x in each(a, DIST1):
        r = dnp.sort(x)
        eq(check, r, np.sort(a), f"{kind} {name} sort")
        balanced(check, r, n, f"{kind} {name}")
        i = dnp.argsort(x, kind="stable")
        eq(check, i, np.argsort(a, kind="stable"), f"{kind} {name} argsort")
        balanced(check, i, n, f"{kind} {name} argsort")
    check.done()


@pytest.mark.parametrize("dtype", ["float64", "int64"])
def test_descending(dtype):
    a = special(dtype, 57, seed=11)
    a[::4] = a[1]  # many ties: their order shows stability
    want_i = descending_argsort(a)
    check = Checks()
    for name, x in each(a, ALL1):
        eq(check, dnp.argsort(x, descending=True), want_i, f"{name} argsort descending")
        eq(check, dnp.argsort(x, descending=True, stable=True), want_i, f"{name} +stable")
        eq(check, dnp.sort(x, descending=True), a[want_i], f"{name} sort descending")
    m = a[:56].reshape(8, 7)
    for strategy, axis in layouts(2)[1::3]:
        x = make(m, strategy, axis)
        w = f"2-d {strategy} {axis}"
        want = descending_argsort(m.ravel())
        eq(check, dnp.argsort(x, axis=None, descending=True), want, f"{w} argsort descending")
        eq(check, dnp.sort(x, axis=None, descending=True), m.ravel()[want], f"{w} sort")
    check.done()


def test_other_dtypes_take_the_fallback():
    """dtypes without order keys (float16, strings) still sort as numpy does."""
    check = Checks()
    h = np.array([3, 1, 2, 2, 0.5, -0.0, np.nan, 0.0], dtype=np.float16)
    t = np.array(["pear", "fig", "apple", "fig", "kiwi"])
    for name in ("equal", "freeform", "cyc3"):
        for a in (h, t):
            x = make(a, name)
            w = f"{a.dtype} {name}"
            eq(check, dnp.sort(x), np.sort(a), f"{w} sort")
            eq(check, dnp.argsort(x, kind="stable"), np.argsort(a, kind="stable"), f"{w} argsort")
            eq(check, dnp.unique(x), np.unique(a), f"{w} unique")
    check.done()


def test_sort_bad_input():
    a = sample((20,), "float64")
    for _, x in each(a, ALL1):
        assert_raises_everywhere(ValueError, dnp.sort, x, kind="bogus")
        assert_raises_everywhere(ValueError, dnp.argsort, x, kind="bogus")
        assert_raises_everywhere(np.exceptions.AxisError, dnp.sort, x, axis=1)
        assert_raises_everywhere(np.exceptions.AxisError, dnp.argsort, x, axis=-2)
        assert_raises_everywhere(ValueError, dnp.argsort, x, kind="stable", stable=True)
    m = make(a.reshape(4, 5), "equal")
    assert_raises_everywhere(ValueError, dnp.sort, m, axis=None, kind="bogus")
    assert_raises_everywhere(np.exceptions.AxisError, dnp.sort, m, axis=2)


# -- what the sort moves and holds ----------------------------------------------------------


def test_sort_trace_moves_each_element_at_most_once():
    n = 120_000  # a gather of the array would exceed the bound on the other traffic
    a = np.random.default_rng(1).standard_normal(n)
    a[::10] = 0.5  # duplicates across ranks
    x = make(a, "equal")
    check = Checks()
    for name, index in (("sort", False), ("argsort", True)):
        with d2o.options(check_args=False), d2o.trace() as t:
            r = dnp.argsort(x, kind="stable") if index else dnp.sort(x)
        moved = sum(c[2] for c in t.calls if c[1] == "Alltoallv")
        other = sum(c[2] for c in t.calls if c[1] != "Alltoallv")
        local = x.data.nbytes + (8 * x.data.size if index else 0)
        check.true(moved <= local, f"{name}: Alltoallv sent {moved} B > local {local} B")
        bound = 9 * 3 * 256 * 8 * (P - 1) + 1024
        check.true(other <= bound, f"{name}: other traffic {other} B > {bound} B: {t.calls}")
        balanced(check, r, n, name)
        if index:
            eq(check, r, np.argsort(a, kind="stable"), "argsort")
        else:
            eq(check, r, np.sort(a), "sort")
    check.done()


def test_sort_peak_memory_bounded():
    slack = 256 * 1024  # as in test_memory.py
    n = 200_000
    x = D2O(global_shape=(n,), dtype=np.float64, distribution_strategy="equal")
    x.set_local_data(np.random.default_rng(comm.rank).standard_normal(x.local_shape))
    share = x.data.nbytes
    with d2o.options(check_args=False):
        r, peak = traced_peak(lambda i: dnp.sort(x))
    check = Checks()
    limit = 3 * share + slack
    check.true(peak <= limit, f"sort: peak {peak} B > {limit} B (share {share} B)")
    s = r.data
    check.true(bool((s[1:] >= s[:-1]).all()), "the local piece is not sorted")
    check.done()
    # globally ordered: every piece's first element is >= the previous piece's last
    ends = comm.allgather((s[0], s[-1]) if len(s) else None)
    ends = [e for e in ends if e is not None]
    ordered = all(ends[i][1] <= ends[i + 1][0] for i in range(len(ends) - 1))
    check.true(ordered and sum(comm.allgather(len(s))) == n, f"pieces out of order: {ends}")
    check.done()


# -- lexsort --------------------------------------------------------------------------------


def test_lexsort():
    rng = np.random.default_rng(4)
    n = 83
    k1 = rng.integers(0, 4, n)
    k2 = rng.standard_normal(n).round(0)
    k2[::9] = np.nan
    k3 = rng.integers(0, 3, n).astype(np.int32)
    check = Checks()
    for i, name in enumerate(ALL1):
        x1, x2, x3 = make(k1, name), make(k2, name), make(k3, ALL1[(i + 2) % len(ALL1)])
        eq(check, dnp.lexsort((x1, x2)), np.lexsort((k1, k2)), f"{name} lexsort 2 keys")
        eq(check, dnp.lexsort((x2, x1)), np.lexsort((k2, k1)), f"{name} lexsort swapped")
        eq(check, dnp.lexsort((x1, x2, x3)), np.lexsort((k1, k2, k3)), f"{name} 3 keys, mixed")
        eq(check, dnp.lexsort((k1, x3)), np.lexsort((k1, k3)), f"{name} numpy and d2o keys")
        eq(check, dnp.lexsort((x1,)), np.lexsort((k1,)), f"{name} one key")
    check.done()


# -- partition, argpartition ----------------------------------------------------------------


PARTITION_DATA = {
    "float64": special("float64", 67, seed=5),
    "int32": special("int32", 40, seed=6),
    "few values": np.arange(45) % 3,
}


@pytest.mark.parametrize("data", list(PARTITION_DATA))
def test_partition_and_argpartition(data):
    a = PARTITION_DATA[data]
    n = a.size
    kths = [0, n // 2, -1, -n, [3, n // 3, -4], [n - 1, 0, n // 2, n // 2]]
    check = Checks()
    for i, kth in enumerate(kths):
        name = ALL1[i % len(ALL1)]
        x = make(a, name)
        w = f"{data} {name} kth={kth}"
        r = full(dnp.partition(x, kth))
        check.true((why := partitioned(r, a, kth)) is None, f"{w} partition: {why}")
        check.true(r.dtype == a.dtype, f"{w} dtype {r.dtype}")
        idx = full(dnp.argpartition(x, kth))
        check.true(is_perm(idx, n), f"{w} argpartition: not a permutation {idx}")
        check.true(idx.dtype == np.intp, f"{w} argpartition dtype {idx.dtype}")
        if is_perm(idx, n):
            why = partitioned(a[idx], a, kth)
            check.true(why is None, f"{w} argpartition: {why}")
        r2 = full(dnp.partition(x, kth, axis=None))
        check.true((why := partitioned(r2, a, kth)) is None, f"{w} axis=None: {why}")
    m = a[: (n // 5) * 5].reshape(-1, 5)
    x = make(m, "equal", 1)
    r = full(dnp.partition(x, 7, axis=None))
    why = partitioned(r, m.ravel(), 7)
    check.true(why is None, f"{data} 2-d axis=None: {why}")
    check.done()


def test_partition_bad_kth():
    a = sample((30,), "float64")
    for name in ("equal", "freeform", "cyc3", "not"):
        x = make(a, name)
        for kth in (30, -31, [2, 30]):
            assert_raises_everywhere(ValueError, dnp.partition, x, kth)
            assert_raises_everywhere(ValueError, dnp.argpartition, x, kth)
        assert_raises_everywhere(ValueError, dnp.partition, x, 40, axis=None)


# -- searchsorted ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float64", "int64"])
def test_searchsorted(dtype):
    a = np.sort(special(dtype, 71, seed=8))
    v = special(dtype, 23, seed=9)
    v[:3] = a[[0, 35, -1]]  # hits at the ends and in the middle
    check = Checks()
    for i, name in enumerate(ALL1):
        s = make(a, name)
        vd = make(v, ALL1[(i + 1) % len(ALL1)])  # queries in another layout
        vr = make(v, "not")
        for side in ("left", "right"):
            w = f"{dtype} {name} {side}"
            want = np.searchsorted(a, v, side)
            eq(check, dnp.searchsorted(s, v, side), want, f"{w} numpy queries")
            eq(check, dnp.searchsorted(s, v, side=side), want, f"{w} numpy queries (keyword)")
            eq(check, dnp.searchsorted(s, vd, side), want, f"{w} distributed queries")
            eq(check, dnp.searchsorted(s, vr, side), want, f"{w} replicated queries")
            for q in (v[5], a[-1], a[0]):
                eq(check, dnp.searchsorted(s, q, side), np.searchsorted(a, q, side), f"{w} {q}")
        check.true(isinstance(dnp.searchsorted(s, vd), D2O), f"{name}: not distributed")
    eq(check, dnp.searchsorted(make(a, "equal"), v.reshape(1, -1)),
       np.searchsorted(a, v.reshape(1, -1)), "2-d queries")  # fmt: skip
    check.done()


def test_searchsorted_short_and_empty():
    """Sorted arrays shorter than the number of ranks (some pieces empty), and empty."""
    v = np.array([-1.0, 0.0, 0.5, 1.0, 2.0, np.nan, 9.0])
    check = Checks()
    for n in (0, 1, 3):
        a = np.arange(n, dtype=np.float64)
        for name in ("equal", "freeform", "cyc3"):
            s = make(a, name)
            for side in ("left", "right"):
                want = np.searchsorted(a, v, side)
                w = f"n={n} {name} {side}"
                eq(check, dnp.searchsorted(s, make(v, "freeform"), side), want, f"{w} d2o v")
                eq(check, dnp.searchsorted(s, v, side), want, f"{w} numpy v")
    check.done()


def test_searchsorted_sorter():
    a = special("float64", 53, seed=10)
    order = np.argsort(a, kind="stable")
    v = np.array([a[3], -1.5, 0.0, np.nan, 100.0, a[7]])
    check = Checks()
    for i, name in enumerate(DIST1):
        x = make(a, name)
        sorter = order if i % 2 else dnp.argsort(x, kind="stable")
        for side in ("left", "right"):
            want = np.searchsorted(a, v, side, sorter=order)
            w = f"{name} {side} sorter {type(sorter).__name__}"
            eq(check, dnp.searchsorted(x, v, side=side, sorter=sorter), want, w)
            eq(check, dnp.searchsorted(x, make(v, "equal"), side, sorter), want, f"{w} d2o v")
    check.done()


def test_searchsorted_bad_side():
    s = make(np.arange(10.0), "equal")
    assert_raises_everywhere(ValueError, dnp.searchsorted, s, 3.0, side="middle")


# -- unique ---------------------------------------------------------------------------------


UNIQUE_DATA = {
    "int64": np.array([5, 3, 3, -1, 7, 5, 5, 0, 3, 9, -1, 2] * 4 + [11, -8]),
    "float64 NaN": special("float64", 64, seed=12),
    "float32": np.round(special("float32", 40, seed=13)),
    "all NaN": np.full(9, np.nan),
}
FLAGS = [(i, v, c) for i in (False, True) for v in (False, True) for c in (False, True)]


@pytest.mark.parametrize("data", list(UNIQUE_DATA))
def test_unique_flags(data):
    a = UNIQUE_DATA[data]
    check = Checks()
    for j, (ri, rv, rc) in enumerate(FLAGS):
        for equal_nan in (True, False):
            name = ALL1[(2 * j + equal_nan) % len(ALL1)]
            x = make(a, name)
            kw = {"return_index": ri, "return_inverse": rv, "return_counts": rc}
            got = dnp.unique(x, equal_nan=equal_nan, **kw)
            want = np.unique(a, equal_nan=equal_nan, **kw)
            w = f"{data} {name} {kw} equal_nan={equal_nan}"
            if not isinstance(want, tuple):
                got, want = (got,), (want,)
            check.true(isinstance(got, tuple) and len(got) == len(want), f"{w}: {got}")
            for k, (g, e) in enumerate(zip(got, want)):
                if rv and k == 1 + ri:
                    inverse(check, g, e, a, f"{w} inverse")
                else:
                    eq(check, g, e, f"{w} result {k}")
    check.done()


def test_unique_2d_and_lengths():
    check = Checks()
    m = (np.arange(42) * 7 % 9).reshape(6, 7)
    for strategy, axis in layouts(2)[::2]:
        x = make(m, strategy, axis)
        got = dnp.unique(x, return_index=True, return_inverse=True, return_counts=True)
        want = np.unique(m, return_index=True, return_inverse=True, return_counts=True)
        for k, (g, e) in enumerate(zip(got, want)):
            eq(check, g, e, f"2-d {strategy} {axis} result {k}")
    for n in (0, 1, 3):
        a = np.arange(n, dtype=np.float64)[::-1]
        for name in ("equal", "freeform", "cyc3"):
            got = dnp.unique(make(a, name), return_inverse=True, return_counts=True)
            want = np.unique(a, return_inverse=True, return_counts=True)
            for k, (g, e) in enumerate(zip(got, want)):
                eq(check, g, e, f"n={n} {name} result {k}")
    check.done()


def inverse(check: Checks, got, want: np.ndarray, a: np.ndarray, what: str) -> None:
    """``unique``'s inverse: numpy's exactly, except that distinct NaNs (``equal_nan=False``)
    may be numbered in any order (numpy's own order comes from an unstable sort)."""
    g = full(got)
    nan = np.isnan(a) if a.dtype.kind in "fc" else np.zeros(a.shape, bool)
    if not nan.any() or g.shape != want.shape:
        eq(check, g, want, what)
        return
    ok = g.dtype == want.dtype and np.array_equal(g[~nan], want[~nan])
    ok = ok and np.array_equal(np.sort(g[nan]), np.sort(want[nan]))
    check.true(ok, f"{what}: {g} is not {want} up to the order of the NaNs")


def _sorted_fields(res) -> dict:
    """numpy's unique_* result with its values in ascending order (numpy may return them
    unsorted), the other fields permuted to match."""
    f = res._asdict()
    order = np.argsort(f["values"], kind="stable")
    out = {k: (v[order] if k in ("values", "indices", "counts") else v) for k, v in f.items()}
    if "inverse_indices" in f:
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        out["inverse_indices"] = rank[f["inverse_indices"]]
    return out


@pytest.mark.parametrize("data", ["int64", "float64 NaN"])
def test_unique_array_api(data):
    a = UNIQUE_DATA[data]
    check = Checks()
    for name in ("equal", "freeform", "cyc3", "not"):
        x = make(a, name)
        w = f"{data} {name}"
        eq(check, dnp.unique_values(x), np.sort(np.unique_values(a)), f"{w} unique_values")
        for fname in ("unique_counts", "unique_inverse", "unique_all"):
            got = getattr(dnp, fname)(x)
            want = getattr(np, fname)(a)
            check.true(type(got).__name__ == type(want).__name__, f"{w} {fname}: {type(got)}")
            check.true(got._fields == want._fields, f"{w} {fname} fields {got._fields}")
            for field, e in _sorted_fields(want).items():
                if field == "inverse_indices":
                    inverse(check, got.inverse_indices, e, a, f"{w} {fname}.{field}")
                else:
                    eq(check, getattr(got, field), e, f"{w} {fname}.{field}")
    check.done()


# -- isin and the set operations ------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["int64", "float64"])
def test_isin(dtype):
    a = special(dtype, 59, seed=14)
    t = np.concatenate([a[::5], special(dtype, 17, seed=15)])
    check = Checks()
    for i, name in enumerate(ALL1):
        x = make(a, name)
        tests = {"numpy": t, "replicated": make(t, "not"),
                 "distributed": make(t, DIST1[i % len(DIST1)])}  # fmt: skip
        for j, (what, tt) in enumerate(tests.items()):
            invert = (i + j) % 2 == 1
            w = f"{dtype} {name} test {what} invert={invert}"
            want = np.isin(a, t, invert=invert)
            got = dnp.isin(x, tt, invert=invert)
            check.true(isinstance(got, D2O), f"{w}: {type(got).__name__}")
            eq(check, got, want, w)
    # a numpy element against distributed test elements, and 2-d elements
    td = make(t, "freeform")
    eq(check, dnp.isin(a, td), np.isin(a, t), "numpy element, distributed test")
    eq(check, dnp.isin(a, td, invert=True), np.isin(a, t, invert=True), "numpy, invert")
    m = a[:56].reshape(8, 7)
    eq(check, dnp.isin(make(m, "equal", 1), td), np.isin(m, t), "2-d element")
    check.done()


SET_A = np.array([4, 1, 9, 9, 3, 7, 1, 12, 0, 5, 5, 8, 2, 14, 6] * 3)
SET_B = np.array([9, 2, 2, 11, 5, 20, 3, 3, 13, 0, 17])


def _operands(i: int):
    """Operand pairs: d2o/d2o (different layouts), d2o/numpy, numpy/d2o, replicated."""
    la, lb = DIST1[i % len(DIST1)], DIST1[(i + 2) % len(DIST1)]
    xa, xb = make(SET_A, la), make(SET_B, lb)
    return {f"{la}/{lb}": (xa, xb), f"{la}/numpy": (xa, SET_B), f"numpy/{lb}": (SET_A, xb),
            "not/numpy": (make(SET_A, "not"), SET_B)}  # fmt: skip


@pytest.mark.parametrize("op", ["union1d", "intersect1d", "setdiff1d", "setxor1d"])
def test_set_operations(op):
    check = Checks()
    for i in range(2):
        for what, (p, q) in _operands(i).items():
            want = getattr(np, op)(SET_A, SET_B)
            eq(check, getattr(dnp, op)(p, q), want, f"{op} {what}")
            want = getattr(np, op)(SET_B, SET_A)
            eq(check, getattr(dnp, op)(q, p), want, f"{op} reversed {what}")
    check.done()


def test_set_operations_assume_unique_and_indices():
    ua, ub = np.unique(SET_A)[::-1].copy(), np.unique(SET_B)  # unique, ua unsorted
    check = Checks()
    for i, name in enumerate(DIST1):
        xa, xb = make(ua, name), make(ub, DIST1[(i + 1) % len(DIST1)])
        for p, q, w in ((xa, xb, "d2o/d2o"), (xa, ub, "d2o/numpy"), (ua, xb, "numpy/d2o")):
            w = f"{name} {w}"
            if not isinstance(p, np.ndarray):  # numpy first: test_intersect1d_numpy_first
                got = dnp.intersect1d(p, q, assume_unique=True)
                want = np.intersect1d(ua, ub, assume_unique=True)
                eq(check, got, want, f"{w} intersect unique")
            got = dnp.setdiff1d(p, q, assume_unique=True)
            eq(check, got, np.setdiff1d(ua, ub, assume_unique=True), f"{w} setdiff unique")
            got = dnp.setxor1d(p, q, assume_unique=True)
            eq(check, got, np.setxor1d(ua, ub, assume_unique=True), f"{w} setxor unique")
        ya, yb = make(SET_A, name), make(SET_B, DIST1[(i + 3) % len(DIST1)])
        got = dnp.intersect1d(ya, yb, return_indices=True)
        want = np.intersect1d(SET_A, SET_B, return_indices=True)
        check.true(isinstance(got, tuple) and len(got) == 3, f"{name} return_indices: {got}")
        for k, (g, e) in enumerate(zip(got, want)):
            eq(check, g, e, f"{name} intersect1d return_indices result {k}")
    check.done()


# -- quantiles of the flattened array -------------------------------------------------------


QDATA = {
    "int64": special("int64", 45, seed=16) % 1000,
    "float64": special("float64", 52, seed=17)[np.isfinite(special("float64", 52, seed=17))],
    "float64 NaN": np.nan_to_num(special("float64", 38, seed=18), nan=np.nan, posinf=7, neginf=-7),
    "float32": np.round(sample((33,), "float32", seed=19), 2),
    "int32 2-d": (sample((6, 7), "int32", seed=20) * 3),
}


def close(check: Checks, got, want, what, rtol=1e-12) -> None:
    """Local (numpy) results: allclose with NaNs equal, the same dtype and shape."""
    g, e = np.asarray(got), np.asarray(want)
    try:
        np.testing.assert_allclose(g, e, rtol=rtol, atol=0, equal_nan=True)
        ok = g.dtype == e.dtype and g.shape == e.shape and np.ndim(got) == np.ndim(want)
        check.true(ok, f"{what}: {g.dtype}{g.shape} != {e.dtype}{e.shape}")
    except AssertionError as exc:
        check.true(False, f"{what}: {exc}")


def _qlayout(data: str, i: int):
    a = QDATA[data]
    if a.ndim == 2:
        strategy, axis = layouts(2)[1 + i % (len(layouts(2)) - 1)]
        return a, make(a, strategy, axis), f"{strategy} {axis}"
    name = DIST1[i % len(DIST1)]
    return a, make(a, name), name


@pytest.mark.parametrize("data", list(QDATA))
def test_quantile_methods(data):
    check = Checks()
    rtol = 1e-6 if "32" in data else 1e-12
    qs = [0.0, 0.1, 0.25, 0.5, 0.77, 1.0]
    others = (("percentile", 37.5), ("nanquantile", 0.3), ("nanpercentile", [5, 50, 95.5]))
    with np.errstate(invalid="ignore"):
        for i, method in enumerate(METHODS):
            a, x, name = _qlayout(data, i)
            w = f"{data} {name} {method}"
            # every method with quantile (a list or a scalar q), and with one of the others
            for fname, q in (("quantile", qs if i % 2 == 0 else 0.62), others[i % 3]):
                got = getattr(dnp, fname)(x, q, method=method)
                want = getattr(np, fname)(a, q, method=method)
                close(check, got, want, f"{w} {fname} q={q}", rtol)
    check.done()


@pytest.mark.parametrize("data", list(QDATA))
def test_median_and_keywords(data):
    check = Checks()
    rtol = 1e-6 if "32" in data else 1e-12
    with np.errstate(invalid="ignore"):
        for i in range(2):
            a, x, name = _qlayout(data, 2 * i + 1)
            w = f"{data} {name}"
            close(check, dnp.median(x), np.median(a), f"{w} median", rtol)
            close(check, dnp.nanmedian(x), np.nanmedian(a), f"{w} nanmedian", rtol)
            close(check, dnp.median(x, keepdims=True), np.median(a, keepdims=True),
                  f"{w} median keepdims", rtol)  # fmt: skip
            kws = ({"keepdims": True}, {"axis": None, "keepdims": True}, {"method": "nearest"})
            calls = (("quantile", 0.4), ("percentile", [10, 90]), ("nanquantile", [0.5]),
                     ("nanpercentile", 99))  # fmt: skip
            for j, (fname, q) in enumerate(calls):
                kw = kws[(i + j) % 3]
                got = getattr(dnp, fname)(x, q, **kw)
                close(check, got, getattr(np, fname)(a, q, **kw), f"{w} {fname} {kw}", rtol)
            q = np.array([0.2, 0.6])  # a numpy q: numpy's dtype rules for array q
            close(check, dnp.quantile(x, q), np.quantile(a, q), f"{w} array q", rtol)
            close(check, dnp.quantile(x, np.float32(0.3)), np.quantile(a, np.float32(0.3)),
                  f"{w} float32 q", rtol)  # fmt: skip
    check.done()


def test_quantile_short_and_skewed():
    """Fewer elements than ranks, all equal, all NaN (nan functions: NaN, as numpy)."""
    check = Checks()
    cases = {"n=1": np.array([4.0]), "n=2": np.array([3, 1]), "n=3": np.array([2.0, -1.0, 7.0]),
             "equal": np.full(30, 2.5), "all NaN": np.full(5, np.nan)}  # fmt: skip
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # numpy's and d2o's All-NaN warnings
        for i, (what, a) in enumerate(cases.items()):
            x = make(a, DIST1[i % len(DIST1)])
            close(check, dnp.median(x), np.median(a), f"{what} median")
            close(check, dnp.nanmedian(x), np.nanmedian(a), f"{what} nanmedian")
            q = [0.0, 0.3, 1.0]
            for method in ("linear", "closest_observation", "midpoint"):
                got = dnp.nanquantile(x, q, method=method)
                close(check, got, np.nanquantile(a, q, method=method), f"{what} nanquantile")
            got = dnp.percentile(x, 40, method="higher")
            close(check, got, np.percentile(a, 40, method="higher"), f"{what} percentile")
    check.done()


def test_quantile_bad_input():
    x = make(QDATA["float64"], "equal")
    for fname, q in (("quantile", 1.5), ("quantile", -0.1), ("quantile", [0.5, 2.0]),
                     ("percentile", 101), ("percentile", -1), ("nanquantile", 1.01),
                     ("nanpercentile", [50, 150])):  # fmt: skip
        assert_raises_everywhere(ValueError, getattr(dnp, fname), x, q)
    for fname in ("quantile", "nanquantile"):
        assert_raises_everywhere(ValueError, getattr(dnp, fname), x, 0.5, method="bogus")
    assert_raises_everywhere(ValueError, dnp.percentile, x, 50, method="bogus")


# -- a property test ------------------------------------------------------------------------


@settings(max_examples=25)
@given(
    data=st.one_of(
        st.lists(st.integers(-4, 4), max_size=40).map(lambda v: np.array(v, dtype=np.int64)),
        st.lists(st.sampled_from([-1.5, -0.0, 0.0, 2.0, 7.25, np.nan, np.inf]), max_size=40).map(
            lambda v: np.array(v, dtype=np.float64)
        ),
    ),
    name=st.sampled_from(ALL1),
)
def test_sort_unique_property(data, name):
    a = data
    x = make(a, name)
    check = Checks()
    eq(check, dnp.sort(x), np.sort(a), "sort")
    eq(check, dnp.argsort(x, kind="stable"), np.argsort(a, kind="stable"), "argsort")
    got = dnp.unique(x, return_counts=True)
    want = np.unique(a, return_counts=True)
    eq(check, got[0], want[0], "unique values")
    eq(check, got[1], want[1], "unique counts")
    check.done()


def test_results_are_collective_values():
    """Distributed results stay distributed (no gather into every rank's memory)."""
    a = special("float64", 40, seed=21)
    x = make(a, "equal")
    for r in (dnp.sort(x), dnp.argsort(x), dnp.unique(x), dnp.partition(x, 3)):
        collective_assert(isinstance(r, D2O) and not r.distributor.replicated, repr(r))


# -- known problems ---------------------------------------------------------------------------


def test_intersect1d_numpy_first_assume_unique():
    """A numpy first operand, a distributed second one, assume_unique: numpy's sorted
    intersection."""
    ua, ub = np.unique(SET_A)[::-1].copy(), np.unique(SET_B)
    want = np.intersect1d(ua, ub, assume_unique=True)
    check = Checks()
    for name in ("equal", "not"):
        try:
            got = dnp.intersect1d(ua, make(ub, name), assume_unique=True)
        except Exception as e:  # agreed in check.done()
            check.true(False, f"{name}: raised {type(e).__name__}: {e}")
            continue
        eq(check, got, want, f"numpy/{name}")
    check.done()


@pytest.mark.parametrize("name", ["rand", "nan", "nan_half", "same", "two", "ints", "sorted"])
def test_selection_of_larger_arrays(name):
    """Above 2**16 elements the selection brackets each target with a sample first."""
    n = 70_001
    rng = np.random.default_rng(2)
    data = {
        "rand": rng.random(n),
        "nan": np.where(rng.random(n) < 0.3, np.nan, rng.standard_normal(n)),
        "nan_half": np.concatenate([np.full(n // 2, np.nan), rng.random(n - n // 2)]),
        "same": np.full(n, 2.5),
        "two": np.repeat([1.0, 2.0], [n - 5, 5]),
        "ints": rng.integers(-100, 100, n),
        "sorted": np.arange(n),
    }[name]
    x = make(data, "equal")
    for q in (0.0, 0.25, 0.5, [0.1, 0.9], 1.0):
        got, want = dnp.quantile(x, q), np.quantile(data, q)
        collective_assert(np.allclose(got, want, equal_nan=True), f"quantile {q}: {got} {want}")
        got, want = dnp.nanquantile(x, q, method="lower"), np.nanquantile(data, q, method="lower")
        collective_assert(np.allclose(got, want, equal_nan=True), f"nanquantile {q}: {got} {want}")
    collective_assert(np.allclose(x.median(), np.median(data), equal_nan=True), "median")
    part = dnp.partition(x, [5, n // 2]).get_full_data()
    ref = np.sort(data)
    collective_assert(np.array_equal(part[[5, n // 2]], ref[[5, n // 2]], equal_nan=True))


def test_argument_bad_on_one_rank_raises_everywhere():
    """A kth, q, query or kind that differs on one rank: ValueError on every rank (checked
    mode), nothing changed, and the next call works."""
    rank = default_comm().rank
    data = np.arange(20.0)[::-1].copy()
    x = make(data, "equal")
    before = x.get_local_data().copy()
    calls = [
        lambda: dnp.partition(x, 3 if rank == 0 else 4),
        lambda: dnp.quantile(x, 0.5 if rank == 0 else 0.25),
        lambda: dnp.searchsorted(dnp.sort(x), 3.0 if rank == 0 else 4.0),
        lambda: dnp.sort(x, kind="stable" if rank == 0 else "quicksort"),
    ]
    if default_comm().size > 1:
        for call in calls:
            with d2o.options(check_args=True):
                assert_raises_everywhere(ValueError, call)
    collective_assert(np.array_equal(x.get_local_data(), before), "the input changed")
    again = dnp.sort(x).get_full_data()
    collective_assert(np.array_equal(again, np.sort(data)), "the next call")
