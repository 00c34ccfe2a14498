"""Redistribution between every pair of layouts, mixed-layout elementwise ops, bounded memory."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from _helpers import MESH_SPLITS, mesh_names, spec, traced_peak
from _helpers import make as make_layout

from d2o import distributed_data_object as D2O
from d2o.core.comm import default_comm
from d2o.testing import assert_equal_to_numpy, collective_assert

COMM = default_comm()
SHAPES = [(7,), (0,), (2, 5), (3, 0), (3, 2, 4)]


def _freeform_lengths(n: int, size: int) -> list[int]:
    """Uneven lengths with the first rank(s) holding nothing when possible."""
    lengths = [0] * size
    for i in range(n):
        lengths[size - 1 - (i % max(1, size - 1)) if size > 1 else 0] += 1
    return lengths


def make(a: np.ndarray, strategy: str, axis: int) -> D2O:
    """A d2o holding ``a`` in the given layout (freeform: uneven pieces, some empty)."""
    if strategy in MESH_SPLITS:
        return make_layout(a, strategy)
    if strategy != "freeform":
        return D2O(a, distribution_strategy=strategy, axis=axis)
    lengths = _freeform_lengths(a.shape[axis], COMM.size)
    start = sum(lengths[: COMM.rank])
    piece = np.take(a, np.arange(start, start + lengths[COMM.rank]), axis=axis)
    return D2O(local_data=piece, distribution_strategy="freeform", axis=axis)


def _mismatch(obj: D2O, expected: np.ndarray, label) -> str | None:
    """Local comparison after a (collective) gather; collect, then agree once per test."""
    got = obj.get_full_data()
    if got.shape != expected.shape or got.dtype != expected.dtype:
        return f"{label}: got {got.shape} {got.dtype}, expected {expected.shape} {expected.dtype}"
    if not np.array_equal(got, expected):
        return f"{label}: values differ"
    return None


def _agree_all(errors: list) -> None:
    errors = [e for e in errors if e]
    collective_assert(not errors, "; ".join(errors[:5]))


def layouts(ndim: int, with_freeform: bool = True):
    out = [("not", 0)]
    for strategy in ("equal", "fftw") + (("freeform",) if with_freeform else ()):
        out += [(strategy, ax) for ax in range(ndim)]
    return out + [(m, 0) for m in mesh_names(ndim)]


def _array(shape, dtype=np.float64):
    a = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape)
    return (a * 1.5 - 3).astype(dtype) if np.dtype(dtype).kind != "b" else (a % 3 == 0)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_every_pair_of_layouts(shape):
    a = _array(shape)
    errors = []
    for (s1, a1), (s2, a2) in itertools.product(layouts(len(shape)), repeat=2):
        if s2 == "freeform":
            continue  # freeform lengths are chosen by the ranks, not a copy target
        label = f"{s1}/{a1} -> {s2}/{a2}"
        x = make(a, s1, a1)
        y = x.copy(distribution_strategy=spec(s2), axis=a2)
        errors.append(_mismatch(y, a, label))
        if s2 in MESH_SPLITS:
            if y.distributor is not spec(s2).distributor(shape):
                errors.append(f"{label}: got {y.distributor}")
        elif y.distribution_strategy != s2 or (s2 != "not" and y.axis != a2):
            errors.append(f"{label}: got {y.distribution_strategy}/{y.axis}")
        if y.local_shape != y.distributor.local_shape:
            errors.append(f"{label}: local piece {y.local_shape} != layout's")
        errors.append(_mismatch(x, a, label + " (source changed)"))
    _agree_all(errors)


@pytest.mark.parametrize("dtype", [np.int16, np.complex64, np.bool_, np.float32])
def test_dtypes(dtype):
    a = _array((4, 3), dtype)
    for (s1, a1), (s2, a2) in [(("equal", 0), ("equal", 1)), (("freeform", 1), ("fftw", 0))]:
        y = make(a, s1, a1).copy(distribution_strategy=s2, axis=a2)
        assert_equal_to_numpy(y, a)


def test_redistribute_shorthand():
    a = _array((3, 4, 5))
    for src in layouts(3):
        x = make(a, *src)
        for ax in range(3):
            y = x.redistribute(ax)
            assert_equal_to_numpy(y, a)
            collective_assert(y.axis == ax, f"redistribute({ax}) gave axis {y.axis}")


def test_ranks_holding_nothing():
    a = _array((2, 9))  # 2 rows: with 3 or 4 ranks some hold no rows
    x = D2O(a, distribution_strategy="fftw", axis=0)
    y = x.redistribute(1)
    assert_equal_to_numpy(y, a)
    z = y.copy(distribution_strategy="equal", axis=0)
    assert_equal_to_numpy(z, a)


def test_bad_target_raises_everywhere():
    from d2o.testing import assert_raises_everywhere

    x = D2O(_array((3, 4)))
    assert_raises_everywhere(ValueError, x.copy, distribution_strategy="bogus")
    assert_raises_everywhere(np.exceptions.AxisError, x.redistribute, 2)


# -- elementwise operations between different layouts ---------------------------------


@pytest.mark.parametrize("shape", [(5,), (3, 4), (2, 3, 2)], ids=str)
def test_binary_ops_any_two_layouts(shape):
    """Rule: the result takes the first distributed operand's layout (see _ufuncs)."""
    a = _array(shape)
    b = _array(shape)[..., ::-1] + 0.25
    errors = []
    for l1, l2 in itertools.product(layouts(len(shape)), repeat=2):
        x, y = make(a, *l1), make(b, *l2)
        r = x + y
        errors.append(_mismatch(r, a + b, f"{l1} + {l2}"))
        want = y.distributor if x.distributor.replicated else x.distributor
        if r.distribution_strategy != want.strategy or r.axis != want.axis:
            errors.append(f"{l1} + {l2} gave {r.distribution_strategy}/{r.axis}")
    _agree_all(errors)


def test_broadcasting_across_layouts():
    a = _array((4, 3))
    row = np.arange(3.0)
    for layout in layouts(2):
        x = make(a, *layout)
        r = make(row, "equal", 0)
        assert_equal_to_numpy(x - r, a - row)
        assert_equal_to_numpy(r - x, row - a)


@pytest.mark.parametrize("layout", layouts(3))
def test_reductions_any_axis(layout):
    a = _array((3, 4, 2))
    x = make(a, *layout)
    assert_equal_to_numpy(x.sum(), a.sum())
    for ax in range(3):
        assert_equal_to_numpy(x.sum(axis=ax), a.sum(axis=ax))
        assert_equal_to_numpy(x.max(axis=ax), a.max(axis=ax))


# -- bounded memory ---------------------------------------------------------------------


def test_redistribution_memory_is_bounded():
    """No rank allocates more than its new share plus a small constant (numpy -> tracemalloc)."""
    rows, cols = 256 * COMM.size, 1024  # 2 MiB of float64 per rank
    x = D2O(global_shape=(rows, cols), dtype=np.float64)
    x.local_array[...] = COMM.rank
    y, peak = traced_peak(lambda i: x.redistribute(1))
    new = y.local_array.nbytes
    collective_assert(
        peak <= new + (64 << 10),
        f"peak {peak} bytes > new share {new} + 64 KiB (old share {x.local_array.nbytes})",
    )
    lengths = [x.distributor.offsets[r + 1] - x.distributor.offsets[r] for r in range(COMM.size)]
    expected = np.repeat(np.arange(COMM.size, dtype=np.float64), lengths)[:, None]
    assert_equal_to_numpy(y, np.broadcast_to(expected, (rows, cols)))
