"""An argument bad on exactly one rank (issue 28, item 3): agreed where the call communicates.

Each case is drawn by a derandomized Hypothesis strategy, so every rank draws the same
case, including which rank is bad: indexing get/set, ``get_data``/``set_data``,
reductions with ``axis``, ``copy``/``astype`` and the constructor, on every layout kind
(slabs along either axis, replicated, meshes, block-cyclic).  The good ranks call the
operation with a valid argument, the bad rank with one of the same structure that numpy
rejects.

Whether the operation communicates is read from the trace of the good call made on every
rank.  If it does, every rank must raise numpy's exception type and no rank's piece may
change.  If it does not (the documented collective-free operations, e.g. ``x[5] = 1`` on
a slab: each rank writes what it owns), the bad rank raises numpy's exception type and
the good ranks go on; only checked mode (``D2O_CHECK_ARGS=1``) compares such arguments.
Either way the ranks stay in step: every case ends with a correct collective.  Each case
runs on its own duplicate of the communicator, so a message left over from a failed
case cannot hide a bug; one test runs on the shared communicator.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import d2o
from d2o import default_comm, distributed_data_object
from d2o.core.comm import as_comm
from d2o.testing import collective_assert

COMM = default_comm()
P = COMM.size
A = np.arange(42.0).reshape(7, 6)
MASK = A > 20

LAYOUTS = ["equal0", "equal1", "fftw", "not", "mesh_rows", "mesh_cols", "cyclic"]


def _spec(name: str, comm):
    if name.startswith("equal"):
        return {"distribution_strategy": "equal", "axis": int(name[-1]), "comm": comm}
    if name in ("fftw", "not"):
        return {"distribution_strategy": name, "comm": comm}
    split, block = {"mesh_rows": ((0,), None), "mesh_cols": ((1,), None), "cyclic": ((0,), 2)}[name]
    return {
        "distribution_strategy": d2o.layout(
            mesh=(as_comm(comm).size,), split=split, block=block, comm=comm
        )
    }


# (name, good argument, bad argument of the same structure)
KEYS = [
    ("int pair, first out of range", (1, 2), (99, 2)),
    ("int pair, second out of range", (1, 2), (1, -99)),
    ("one int out of range", 1, 99),
    ("negative int out of range", -1, -99),
    ("float index", (1, 2), (1.5, 2)),
    ("string index", 1, "a"),
    ("too many integers", (0, 1), (0, 1, 2)),
    ("too many slices", (slice(1, 5), slice(None)), (slice(1, 5), slice(None), 3)),
    ("fancy rows out of range", [0, 2], [0, 99]),
    ("fancy columns out of range", (slice(None), [1, 2]), (slice(None), [1, 99])),
    ("fancy 2-d out of range", [[0, 1], [2, 3]], [[0, 1], [2, 77]]),
    ("float fancy index", np.array([0, 1]), np.array([0.0, 1.0])),
    ("mask of the wrong shape", MASK, np.ones((5, 6), bool)),
    ("step zero", slice(0, 3), slice(0, 3, 0)),
    ("column out of range", (slice(None), 1), (slice(None), 99)),
]
VALUE_KEYS = [(1, 2), 1, [0, 2], MASK, slice(1, 4), (slice(None), 1), ([0, 2], slice(None))]
BAD_VALUES = [("value of the wrong shape", np.ones((3, 3, 3))), ("value not a number", "abc")]
# (what, good keywords, bad keywords, numpy call of the bad ones or None for d2o's own)
CONSTRUCTORS = [
    ("dtype", {"global_data": A}, {"global_data": A, "dtype": "notadtype"},
     lambda a: np.asarray(a, dtype="notadtype")),
    ("negative shape", {"global_shape": (7, 6)}, {"global_shape": (7, -6)},
     lambda a: np.empty((7, -6))),
    ("strategy", {"global_data": A}, {"global_data": A, "distribution_strategy": "bogus"}, None),
    ("axis out of range", {"global_data": A, "axis": 1}, {"global_data": A, "axis": 5}, None),
]  # fmt: skip
REDUCTIONS = ["sum", "prod", "max", "min", "mean", "var", "std", "argmax", "argmin", "cumsum"]
AXES = [("axis out of range", 0, 5), ("negative axis out of range", 1, -5), ("float axis", 0, 1.5)]


#: index operation -> (d2o call, numpy call) of an array and a key
INDEX_OPS = {
    "get": (lambda x, k: x[k], lambda a, k: a[k]),
    "set": (lambda x, k: x.__setitem__(k, 1.0), lambda a, k: a.__setitem__(k, 1.0)),
    "get_data": (lambda x, k: x.get_data(k), lambda a, k: a[k]),
    "set_data": (lambda x, k: x.set_data(1.0, k), lambda a, k: a.__setitem__(k, 1.0)),
}


def _index_case(draw) -> tuple:
    what, good, bad = draw(st.sampled_from(KEYS))
    op = draw(st.sampled_from(sorted(INDEX_OPS)))
    fn, numpy_fn = INDEX_OPS[op]
    return (
        f"{op}: {what}",
        (lambda x: fn(x, good)),
        (lambda x: fn(x, bad)),
        (lambda a: numpy_fn(a, bad)),
    )


@st.composite
def cases(draw):
    """(description, good call, bad call, numpy call of the bad argument)."""
    family = draw(st.sampled_from(["index", "value", "reduce", "convert", "construct"]))
    if family == "index":
        return _index_case(draw)
    if family == "value":
        key = draw(st.sampled_from(VALUE_KEYS))
        what, value = draw(st.sampled_from(BAD_VALUES))
        setter = draw(st.sampled_from(["set", "set_data"]))
        if setter == "set":
            return (
                f"set {what}",
                lambda x: x.__setitem__(key, 2.0),
                lambda x: x.__setitem__(key, value),
                lambda a: a.__setitem__(key, value),
            )
        return (
            f"set_data {what}",
            lambda x: x.set_data(2.0, key),
            lambda x: x.set_data(value, key),
            lambda a: a.__setitem__(key, value),
        )
    if family == "reduce":
        name = draw(st.sampled_from(REDUCTIONS))
        what, good_axis, bad_axis = draw(st.sampled_from(AXES))
        return (
            f"{name}: {what}",
            lambda x: getattr(x, name)(axis=good_axis),
            lambda x: getattr(x, name)(axis=bad_axis),
            lambda a: getattr(a, name)(axis=bad_axis),
        )
    if family == "construct":
        what, good_kw, bad_kw, numpy_call = draw(st.sampled_from(CONSTRUCTORS))
        return (
            f"constructor: {what}",
            lambda x: distributed_data_object(comm=x.distributor.comm, **good_kw),
            lambda x: distributed_data_object(comm=x.distributor.comm, **bad_kw),
            numpy_call,
        )
    kind = draw(st.sampled_from(["astype", "copy dtype", "copy strategy", "reshape", "transpose"]))
    good, bad, numpy_call = {
        "astype": (
            lambda x: x.astype(np.float32),
            lambda x: x.astype("notadtype"),
            lambda a: a.astype("notadtype"),
        ),
        "copy dtype": (
            lambda x: x.copy(dtype=np.int64),
            lambda x: x.copy(dtype="notadtype"),
            lambda a: a.astype("notadtype"),
        ),
        "copy strategy": (
            lambda x: x.copy(distribution_strategy="equal"),
            lambda x: x.copy(distribution_strategy="bogus"),
            None,  # d2o's own argument: ValueError
        ),
        "reshape": (
            lambda x: x.reshape(6, 7),
            lambda x: x.reshape(5, 7),
            lambda a: a.reshape(5, 7),
        ),
        "transpose": (
            lambda x: x.transpose(1, 0),
            lambda x: x.transpose(0, 0),
            lambda a: a.transpose(0, 0),
        ),
    }[kind]
    return kind, good, bad, numpy_call


@pytest.fixture(autouse=True)
def _agreement_path():
    """The agreement path itself: checked mode would compare the arguments first."""
    with d2o.options(check_args=False):
        yield


def _numpy_error(numpy_call) -> type:
    """The exception numpy raises for the bad argument on the global array."""
    if numpy_call is None:
        return ValueError
    try:
        numpy_call(A.copy())
    except Exception as exc:
        return type(exc)
    raise AssertionError("numpy accepts the bad argument: not a bad case")


def _run_case(comm, layout: str, case, bad_rank: int) -> None:
    what, good, bad, numpy_call = case
    expected = _numpy_error(numpy_call)
    spec = _spec(layout, comm.mpi if comm.mpi is not None else None)
    probe = distributed_data_object(A, **spec)
    with d2o.trace() as t:
        try:
            good(probe)
        except Exception:  # pragma: no cover - the good argument is valid
            pass
    communicates = comm.allreduce(sum(r.collectives for r in t.records), "max") > 0
    x = distributed_data_object(A, **spec)
    before = x.get_local_data()
    mine_bad = comm.rank == bad_rank
    try:
        (bad if mine_bad else good)(x)
        got = None
    except Exception as exc:
        got = exc
    changed = not np.array_equal(before, x.get_local_data())
    where = f"{what!r} on {layout}, bad rank {bad_rank}: rank {comm.rank} got {got!r}"
    if communicates or comm.size == 1:
        ok = isinstance(got, expected) and not changed
    elif mine_bad:  # collective-free: the bad rank raises numpy's error, nothing written
        ok = isinstance(got, expected) and not changed
    else:
        ok = got is None
    collective_assert(ok, f"{where} (expected {expected.__name__}, changed={changed})")
    collective_assert(comm.allreduce(1) == comm.size, "ranks out of step")


@settings(max_examples=80)
@given(layout=st.sampled_from(LAYOUTS), case=cases(), bad_rank=st.integers(0, P - 1))
def test_an_argument_bad_on_one_rank(layout, case, bad_rank):
    if COMM.mpi is None:
        _run_case(COMM, layout, case, bad_rank)
        return
    dup = COMM.mpi.Dup()
    try:
        _run_case(as_comm(dup), layout, case, bad_rank)
    finally:
        dup.Free()


@pytest.mark.parametrize("layout", [n for n in LAYOUTS if n != "not"])  # 'not': local
def test_a_correct_call_after_a_failed_one_on_the_shared_communicator(layout):
    x = distributed_data_object(A, **_spec(layout, None))
    bad_rank = P - 1
    key = (99, 2) if COMM.rank == bad_rank else (1, 2)
    try:
        x.get_data(key)
    except IndexError:
        pass
    else:
        collective_assert(False, "no IndexError")
    collective_assert(x.get_data((1, 2)) == A[1, 2])
    collective_assert(np.array_equal(x.get_full_data(), A))
