"""Property-based bad input: wrong on one rank, on all ranks, or differently on each
(issue 9, item 7).

Every case is drawn by a derandomized Hypothesis strategy, so all ranks draw the same
case, including who is bad.  For each: the same exception type on every rank, every
rank's data unchanged, no hang (the thread timeout would fire), and the ranks still in
step (a correct collective right afterwards).  The agreement path is tested, so the
checked mode is off, except for arguments that only the checked mode can compare
(values written without any communication).
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import d2o
from d2o import default_comm, distributed_data_object
from d2o.testing import collective_assert

COMM = default_comm()
P = COMM.size


@st.composite
def badness(draw):
    """(mode, bad rank): 'one' rank bad, 'all' bad alike, or 'each' bad differently."""
    return draw(st.sampled_from(["one", "all", "each"])), draw(st.integers(0, P - 1))


def _is_bad(bad) -> bool:
    mode, rank = bad
    return mode != "one" or COMM.rank == rank


def _check(fn, objs, expected, bad):
    """Run ``fn``; require ``expected`` on every rank (or no error when nobody is bad)."""
    before = [o.get_local_data() for o in objs]
    try:
        fn()
        got = None
    except Exception as exc:
        got = exc
    kind = type(got)
    verdict = isinstance(got, expected) if got is not None else False
    collective_assert(verdict, f"rank {COMM.rank}: {kind.__name__}: {got} (case {bad})")
    unchanged = all(
        np.array_equal(o.get_local_data(), b, equal_nan=True) for o, b in zip(objs, before)
    )
    collective_assert(unchanged, f"rank {COMM.rank} changed its data (case {bad})")
    collective_assert(COMM.allreduce(1) == P)  # in step


@pytest.fixture(autouse=True)
def _agreement_path():
    with d2o.options(check_args=False):
        yield


def bad_axis_of(nd: int, bad) -> int:
    return nd + (COMM.rank if bad[0] == "each" else 0)


SHAPES = st.sampled_from([(5,), (4, 3), (3, 4, 2), (1, 6)])
STRATS = st.sampled_from(["equal", "fftw", "not"])


def _array(shape, strategy, axis):
    a = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape)
    return distributed_data_object(a, distribution_strategy=strategy, axis=axis % len(shape))


@settings(max_examples=40)
@given(shape=SHAPES, strategy=STRATS, axis=st.integers(0, 2), bad=badness(), kind=st.integers(0, 3))
def test_getitem_bad_keys(shape, strategy, axis, bad, kind):
    # the key addresses the split axis, so the good ranks' call communicates and the
    # bad ranks' error is agreed in that same collective (views communicate nothing:
    # there the checked mode finds the difference)
    x = _array(shape, strategy, axis)
    ax = axis % len(shape)
    n = shape[ax]
    lead = (slice(None),) * ax
    b = _is_bad(bad)
    if kind == 0:  # an integer out of range
        item = (n + (COMM.rank if bad[0] == "each" else 0)) if b else n - 1
    elif kind == 1:  # a negative one out of range
        item = -n - 1 if b else -1
    elif kind == 2:  # a fancy index out of range
        item = [0, n + 2] if b else [n - 1, 0]
    else:  # a mask of the wrong length
        item = np.ones(n + 1 if b else n, dtype=bool)
    key = lead + (item,)
    view = kind < 2 and len(shape) > 1  # an integer leaving axes: a view, made locally
    if strategy == "not" or view:  # nothing moves, so only the checked mode can compare
        with d2o.options(check_args=True):
            _check(lambda: x[key], [x], (IndexError, ValueError), bad)
    else:
        _check(lambda: x[key], [x], IndexError, bad)


@settings(max_examples=30)
@given(shape=SHAPES, strategy=STRATS, axis=st.integers(0, 2), bad=badness(), kind=st.integers(0, 2))
def test_setitem_bad_keys_and_distributed_values(shape, strategy, axis, bad, kind):
    x = _array(shape, strategy, axis)
    n = shape[0]
    if kind == 0:  # a bad key with a numpy value: written without communication (checked mode)
        key = n + 1 if _is_bad(bad) else 0
        with d2o.options(check_args=True):
            _check(lambda: x.__setitem__(key, 1.0), [x], (IndexError, ValueError), bad)
    elif kind == 1:  # a distributed value of the wrong shape on some ranks: shapes are agreed
        v = distributed_data_object(np.ones(shape))
        key = (Ellipsis, slice(0, -1)) if _is_bad(bad) else Ellipsis
        _check(lambda: x.__setitem__(key, v), [x], ValueError, bad)
    else:  # local keys: each rank's own, bad on some
        key = (n + 3,) if _is_bad(bad) else (0,)
        _check(lambda: x.set_data(5.0, key, local_keys=True), [x], IndexError, bad)


@settings(max_examples=20)
@given(shape=SHAPES, strategy=STRATS, axis=st.integers(0, 2), bad=badness())
def test_setitem_numpy_values_in_checked_mode(shape, strategy, axis, bad):
    # a numpy value is written without communication: only the checked mode can compare it
    x = _array(shape, strategy, axis)
    v = np.ones(shape[-1] + 1) if _is_bad(bad) else np.ones(shape[-1])
    if P == 1 and not _is_bad(bad):
        return
    with d2o.options(check_args=True):
        _check(lambda: x.__setitem__(Ellipsis, v), [x], ValueError, bad)


@settings(max_examples=30)
@given(shape=SHAPES, strategy=STRATS, axis=st.integers(0, 2), bad=badness(), kind=st.integers(0, 4))
def test_collective_operations_with_bad_arguments(shape, strategy, axis, bad, kind):
    x = _array(shape, strategy, axis)
    nd = len(shape)
    b = _is_bad(bad)
    if strategy == "not" and kind in (0, 1):  # a replicated reduction moves nothing
        with d2o.options(check_args=True):
            ax = bad_axis_of(nd, bad) if b else 0
            fn = x.sum if kind == 0 else x.std
            _check(lambda: fn(axis=ax), [x], (np.exceptions.AxisError, ValueError), bad)
        return
    bad_axis = bad_axis_of(nd, bad)
    if kind == 0:
        _check(lambda: x.sum(axis=bad_axis if b else 0), [x], np.exceptions.AxisError, bad)
    elif kind == 1:
        _check(lambda: x.std(axis=bad_axis if b else 0, ddof=1), [x], np.exceptions.AxisError, bad)
    elif kind == 2:
        s = "bogus" if b else "equal"
        _check(lambda: x.copy(distribution_strategy=s), [x], ValueError, bad)
    elif kind == 3:
        new = (x.size + 1,) if b else (x.size,)
        _check(lambda: x.reshape(new), [x], ValueError, bad)
    else:
        x = x.astype(np.complex128)
        _check(
            lambda: d2o.fft.fftn(x, axes=(bad_axis if b else 0,)), [x], np.exceptions.AxisError, bad
        )


@settings(max_examples=25)
@given(bad=badness(), kind=st.integers(0, 3), axis=st.integers(0, 1))
def test_constructors_with_bad_arguments(bad, kind, axis):
    b = _is_bad(bad)
    if kind == 0:
        shape = (3, -1 - COMM.rank) if b else (3, 4)
        _check(lambda: distributed_data_object(global_shape=shape), [], ValueError, bad)
    elif kind == 1:
        shape = (2.5, 4) if b else (3, 4)
        _check(lambda: distributed_data_object(global_shape=shape), [], TypeError, bad)
    elif kind == 2:
        ax = 2 + COMM.rank if b else axis
        fn = lambda: distributed_data_object(np.zeros((3, 4)), axis=ax)  # noqa: E731
        _check(fn, [], np.exceptions.AxisError, bad)
    else:
        piece = np.zeros((2, 3 + (COMM.rank + 1 if b else 0)))
        fn = lambda: distributed_data_object(local_data=piece, distribution_strategy="freeform")  # noqa: E731
        if P == 1:  # one piece always agrees with itself
            return
        _check(fn, [], ValueError, bad)


@pytest.mark.parametrize("fmt", ["npy", "hdf5", "zarr"])
@settings(max_examples=10)
@given(bad=badness())
def test_readers_with_a_missing_file(fmt, bad, tmp_path_factory):
    if fmt == "hdf5":
        pytest.importorskip("h5py")
    if fmt == "zarr":
        pytest.importorskip("zarr")
    base = COMM.bcast(str(tmp_path_factory.getbasetemp()) if COMM.rank == 0 else None)
    missing = os.path.join(base, f"missing-{fmt}-{COMM.rank if bad[0] == 'each' else 0}")
    good = os.path.join(base, f"good.{fmt}")
    if COMM.rank == 0 and not os.path.exists(good):
        {"npy": lambda: np.save(good, np.arange(6.0)),
         "hdf5": lambda: _h5(good), "zarr": lambda: _zarr(good)}[fmt]()  # fmt: skip
    COMM.barrier()
    path = missing if _is_bad(bad) else good
    read = {"npy": lambda: d2o.load(path), "hdf5": lambda: d2o.from_hdf5(path, "x"),
            "zarr": lambda: d2o.from_zarr(path)}[fmt]  # fmt: skip
    _check(read, [], (FileNotFoundError, ValueError), bad)


def _h5(path):
    import h5py

    with h5py.File(path, "w") as f:
        f["x"] = np.arange(6.0)


def _zarr(path):
    import zarr

    z = zarr.create_array(store=path, shape=(6,), dtype="f8", zarr_format=3)
    z[:] = np.arange(6.0)
