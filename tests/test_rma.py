"""One-sided access (`d2o.move.rma`): ``x.window()`` and its get, put, accumulate,
fetch_and_add and compare_and_swap, against numpy, on every layout, called by subsets
of ranks.  No timing: every rank reaches each closing collective."""

from __future__ import annotations

import time

import numpy as np
import pytest
from _helpers import Checks, layouts, make, sample

import d2o
from d2o.testing import assert_raises_everywhere, collective_assert

SHAPES = {1: (11,), 2: (7, 6), 3: (4, 3, 5)}


def _slice(rng: np.random.Generator, n: int) -> slice:
    """A random slice of an axis of length ``n`` (negative steps too)."""
    a, b = sorted(int(v) for v in rng.integers(0, n + 1, 2))
    step = int(rng.choice([1, 1, 2, 3, -1, -2]))
    return (
        slice(a, b, step) if step > 0 else slice(b - 1 if b else None, a - 1 if a else None, step)
    )


def _key(rng: np.random.Generator, shape: tuple) -> tuple:
    """A random key: slices, an integer here and there, or one integer array."""
    key = []
    fancy = rng.random() < 0.25
    fancy_at = int(rng.integers(len(shape)))
    for ax, n in enumerate(shape):
        if fancy and ax == fancy_at:
            key.append(rng.integers(-n, n, int(rng.integers(1, 4))))
        elif not fancy and rng.random() < 0.2:
            key.append(int(rng.integers(-n, n)))
        else:
            key.append(_slice(rng, n))
    return tuple(key)


def _cases(ndims=(1, 2, 3)):
    for ndim in ndims:
        for strategy, axis in layouts(ndim):
            yield SHAPES[ndim], strategy, axis


#: both ways to a target on this node: loads and stores on its memory, and MPI calls
#: (the way to targets on other nodes)
SHARED = [pytest.param(True, id="shared"), pytest.param(False, id="mpi")]


@pytest.mark.parametrize("shared", SHARED)
@pytest.mark.parametrize("dtype", ["int64", "float64", "complex128"])
def test_get_from_a_subset_of_ranks(comm, dtype, shared):
    check = Checks()
    for shape, strategy, axis in _cases():
        a = sample(shape, dtype)
        x = make(a, strategy, axis)
        rng = np.random.default_rng(comm.rank + 10)
        with x.window(shared=shared) as w:
            if comm.rank % 2 == 0:  # the others do nothing at all
                for _ in range(4):
                    key = _key(rng, shape)
                    got = w.get(key)
                    check.true(np.array_equal(got, a[key]), (strategy, axis, key))
                    check.true(type(got) is type(a[key]) and got.dtype == a.dtype, key)
            check.true(w.get(()).shape == shape, "whole")
        check.equal(x, a, what=f"{strategy} {axis} unchanged")
    check.done()


@pytest.mark.parametrize("shared", SHARED)
@pytest.mark.parametrize("dtype", ["int32", "float64"])
def test_put_by_one_rank_at_a_time(comm, dtype, shared):
    """Each round one rank puts into a random region; after a flush and a barrier every
    rank reads the whole array; at close every holder (replicas too) has it."""
    check = Checks()
    for shape, strategy, axis in _cases():
        a = sample(shape, dtype)
        x = make(a, strategy, axis)
        rng = np.random.default_rng(5)  # the same keys on every rank
        with x.window(shared=shared) as w:
            for turn in range(3):
                key = _key(rng, shape)
                vals = sample(np.empty(shape)[key].shape, dtype, seed=turn + 1)
                if turn % comm.size == comm.rank:
                    w.put(key, vals)
                    w.flush()
                a[key] = vals
                comm.barrier()
                check.true(np.array_equal(w.get(...), a), (strategy, axis, key))
                comm.barrier()  # every rank read before the next put
            if comm.rank == comm.size - 1:  # broadcast values
                w.put((0,), 7)
            a[0] = 7
        check.equal(x, a, what=f"{strategy} {axis}")
    check.done()


@pytest.mark.parametrize("dtype", ["int64", "float64", "complex128"])
def test_concurrent_accumulate_gives_the_exact_sum(comm, dtype):
    """Every rank adds into overlapping regions at once: no update is lost."""
    check = Checks()
    for shape, strategy, axis in _cases((1, 2)):
        a = sample(shape, "int64").astype(dtype)  # whole numbers: sums exact in any order
        x = make(a, strategy, axis)
        keys = [_key(np.random.default_rng(r + 20), shape) for r in range(comm.size)]
        keys += [(slice(None),) * len(shape)] * comm.size  # all ranks into everything
        with x.window() as w:
            for _rep in range(2):
                for r, key in enumerate(keys):
                    vals = np.ones(np.empty(shape)[key].shape, dtype=dtype) * (r % comm.size + 1)
                    if r % comm.size == comm.rank:
                        w.accumulate(key, vals)
            w.flush()
        for _rep in range(2):
            for r, key in enumerate(keys):
                vals = np.ones(np.empty(shape)[key].shape, dtype=dtype) * (r % comm.size + 1)
                np.add.at(a, key, vals)  # repeated indices add each value, as accumulate
        check.equal(x, a, what=f"{strategy} {axis}")
    check.done()


@pytest.mark.parametrize("op", ["prod", "min", "max", "replace"])
def test_accumulate_ops_from_a_subset(comm, op):
    check = Checks()
    ufunc = {"prod": np.multiply, "min": np.minimum, "max": np.maximum}.get(op)
    for shape, strategy, axis in _cases((1, 2)):
        a = sample(shape, "int64")
        x = make(a, strategy, axis)
        rng = np.random.default_rng(3)
        key = tuple(_slice(rng, n) for n in shape)
        vals = sample(np.empty(shape)[key].shape, "int64", seed=4)
        with x.window() as w:
            if comm.rank == 0:
                w.accumulate(key, vals, op=op)
        if ufunc is None:
            a[key] = vals
        else:
            a[key] = ufunc(a[key], vals)
        check.equal(x, a, what=f"{op} {strategy} {axis}")
    check.done()


def _elements(rng: np.random.Generator, shape: tuple) -> tuple:
    """A random element list (repeats likely): one index array per axis."""
    return tuple(rng.integers(-n, n, 9) for n in shape)


@pytest.mark.parametrize("shared", SHARED)
@pytest.mark.parametrize("dtype", ["int64", "float64"])
def test_element_lists(comm, dtype, shared):
    """gather from every rank; scatter_acc from every rank at once, repeated elements
    included (they add each value); scatter by one rank."""
    check = Checks()
    for shape, strategy, axis in _cases((1, 2, 3)):
        a = sample(shape, "int64").astype(dtype)
        x = make(a, strategy, axis)
        alls = [_elements(np.random.default_rng(r + 40), shape) for r in range(comm.size)]
        mine = alls[comm.rank]
        with x.window(shared=shared) as w:
            check.true(np.array_equal(w.gather(mine), a[mine]), (strategy, axis, "gather"))
            comm.barrier()  # every rank read before anyone adds
            w.scatter_acc(mine, np.arange(9) % 4 + comm.rank)
            w.flush()
            comm.barrier()
            for r, idx in enumerate(alls):
                np.add.at(a, idx, (np.arange(9) % 4 + r).astype(dtype))
            check.true(np.array_equal(w.gather(alls[0]), a[alls[0]]), (strategy, axis, "acc"))
            comm.barrier()
            if comm.rank == 0:
                w.scatter(alls[-1], -1)
        a[alls[-1]] = -1
        check.equal(x, a, what=f"{strategy} {axis}")
    check.done()


def test_fetch_and_add_hands_out_every_ticket_once(comm):
    for shape, strategy, axis in _cases((1, 2)):
        x = make(np.zeros(shape, dtype=np.int64), strategy, axis)
        where = (shape[0] - 1,) + (0,) * (len(shape) - 1)
        per = 5
        with x.window() as w:
            mine = [int(w.fetch_and_add(where, 1)) for _ in range(per)]
        tickets = sorted(t for ts in comm.allgather(mine) for t in ts)
        collective_assert(tickets == list(range(per * comm.size)), (strategy, axis, tickets))
        total = x[where]
        collective_assert(int(total) == per * comm.size, (strategy, axis, total))


def test_task_pool_until_none_left(comm):
    """Ranks take items from a shared counter until none is left: each item once."""
    n = 13
    x = d2o.distributed_data_object(np.zeros(3, dtype=np.int32), distribution_strategy="equal")
    done = []
    with x.window() as w:
        while True:
            item = int(w.fetch_and_add(2, 1))
            if item >= n:
                break
            done.append(item)
    got = sorted(i for part in comm.allgather(done) for i in part)
    collective_assert(got == list(range(n)), got)


@pytest.mark.parametrize("dtype", ["int64", "float64"])
def test_compare_and_swap_lock(comm, dtype):
    for shape, strategy, axis in _cases((1,)):
        x = make(np.zeros(shape, dtype=dtype), strategy, axis)
        with x.window() as w:
            old = w.compare_and_swap(-1, 0, comm.rank + 1)
        wins = [o == 0 for o in comm.allgather(old)]
        collective_assert(sum(wins) == 1, (strategy, axis, wins))
        winner = wins.index(True)
        last = x[shape[0] - 1]
        collective_assert(last == winner + 1, (strategy, axis, last, winner))


@pytest.mark.parametrize("shared", SHARED)
def test_zero_d_and_empty(comm, shared):
    check = Checks()
    for strategy, axis in layouts(0):
        x = make(np.array(3.5), strategy, axis)
        with x.window(shared=shared) as w:
            check.true(w.get(()) == 3.5, "0-d get")
            comm.barrier()  # every rank read before rank 0 adds
            if comm.rank == 0:
                w.accumulate((), 1.0)
        check.true(float(x) == 4.5, (strategy, float(x)))
    for strategy, axis in layouts(2):
        a = np.zeros((0, 3))
        x = make(a, strategy, axis)
        with x.window(shared=shared) as w:
            check.true(w.get((slice(None), 1)).shape == (0,), strategy)
            w.put(..., 1.0)
        check.equal(x, a, what=strategy)
    check.done()


def test_bad_input_raises_on_the_calling_rank_only(comm):
    a = sample((5, 4), "float64")
    for strategy, axis in layouts(2):
        x = make(a, strategy, axis)
        errors = []
        with x.window() as w:
            if comm.rank == comm.size - 1:
                for call, exc in [
                    (lambda: w.get((5, 0)), IndexError),
                    (lambda: w.get((slice(None), [0, 4])), IndexError),
                    (lambda: w.put((slice(0, 2), 0), np.ones(3)), ValueError),
                    (lambda: w.accumulate(0, 1.0, op="xor"), ValueError),
                    (lambda: w.accumulate((0, -5), 1.0), IndexError),
                    (lambda: w.fetch_and_add((0, slice(None)), 1), IndexError),
                    (lambda: w.gather(([0, 1], [4, 0])), IndexError),
                    (lambda: w.scatter(([0, 1], [0, 1]), np.ones(3)), ValueError),
                    (lambda: w.scatter_acc(([0], [0]), 1.0, op="and"), ValueError),
                ]:
                    try:
                        call()
                        errors.append(f"{exc.__name__} not raised")
                    except exc:
                        pass
            w.flush()
        collective_assert(not errors, (strategy, axis, errors))
        collective_assert(np.array_equal(x.get_full_data(), a), "nothing changed")
        try:
            w.get(0)
            closed = False
        except ValueError:
            closed = True
        collective_assert(closed and w.closed, "a closed window raises ValueError")
        w.close()  # closing again does nothing


@pytest.mark.parametrize("shared", SHARED)
def test_trace_moves_only_the_patch(comm, shared):
    """A get or put of a patch held by another rank moves exactly its bytes, one call: a
    copy on the target's memory (the tests run on one node), or one MPI call with
    ``shared=False``; so does a one-element get (its 8 bytes)."""
    a = sample((8, 6), "float64")
    x = make(a, "equal", 0)
    owner = comm.size - 1
    rows = x.distributor.region(owner)[0]
    get, put = ("Get (load)", "Put (store)") if shared else ("Get", "Put")
    with x.window(shared=shared) as w:
        if comm.rank == 0:
            with d2o.trace() as t:
                got = w.get((slice(*rows), slice(1, 5)))
            collective_assert(np.array_equal(got, a[slice(*rows), 1:5]), "get")
            n = (rows[1] - rows[0]) * 4 * 8
            remote = owner != comm.rank
            ok = t.bytes_received == (n if remote else 0) and t.bytes_sent == 0
            ok = ok and t.collectives == (1 if remote else 0)
            with d2o.trace() as t2:
                w.put((slice(*rows), slice(1, 5)), 2.0)
                w.flush()
            ok = ok and t2.bytes_sent == (n if remote else 0) and t2.bytes_received == 0
            with d2o.trace() as t3:
                one = w.get((rows[0], 5))  # (not among the columns put)
            ok = ok and one == a[rows[0], 5] and t3.bytes_received == (8 if remote else 0)
            ok = ok and t3.bytes_sent == 0 and t3.collectives == (1 if remote else 0)
            kinds = {c[1] for c in t.calls + t2.calls + t3.calls if c[2] or c[3]}
            ok = ok and kinds == ({get, put} if remote else set())
            collective_assert(ok, (t.calls, t2.calls, t3.calls))
        else:
            collective_assert(True)
            collective_assert(True)


@pytest.mark.parametrize("shared", SHARED)
@pytest.mark.parametrize("dtype", ["int32", "float64", "complex128", "bool"])
def test_one_element_keys(comm, dtype, shared):
    """One integer per axis (Python or numpy integers, negative ones too): get, put of a
    scalar, fetch_and_add and compare_and_swap on every layout, as numpy."""
    check = Checks()
    for shape, strategy, axis in _cases():
        a = sample(shape, dtype)
        x = make(a, strategy, axis)
        rng = np.random.default_rng(comm.rank + 60)
        with x.window(shared=shared) as w:
            for _ in range(6):
                key = tuple(int(rng.integers(-n, n)) for n in shape)
                key = key if rng.random() < 0.5 else tuple(np.int64(k) for k in key)
                got = w.get(key)
                check.true(got == a[key] and type(got) is type(a[key]), (strategy, key))
            if len(shape) == 1:
                check.true(w.get(-1) == a[-1] and w.get(int(shape[0] // 2)) == a[shape[0] // 2])
            comm.barrier()  # every rank read before anyone writes
            # each rank writes one element of its own (when there are enough)
            flat = np.random.default_rng(7).permutation(a.size)[: comm.size]
            keys = [tuple(int(i) for i in np.unravel_index(f, shape)) for f in flat]
            vals = sample((len(keys),), dtype, seed=8)
            if comm.rank < len(keys):
                w.put(keys[comm.rank], vals[comm.rank])
                w.flush()
            for k, v in zip(keys, vals):
                a[k] = v
            comm.barrier()
            check.true(np.array_equal(w.get(...), a), (strategy, axis, "puts"))
            comm.barrier()  # every rank read before the counters move
            if dtype != "bool":
                where = tuple(n - 1 for n in shape)
                old = w.fetch_and_add(where, 1)
                w.flush()
                comm.barrier()
                olds = comm.allgather(old)
                want = sorted(a[where] + np.arange(comm.size).astype(dtype))
                check.true(sorted(olds) == want, (strategy, axis, olds))
                a[where] += comm.size
                if dtype != "complex128":
                    comm.barrier()
                    first = tuple(np.int64(0) for _ in shape)
                    prev = w.compare_and_swap(first, a.flat[0], a.flat[0] + 1)
                    won = comm.allgather(bool(prev == a.flat[0]))
                    check.true(sum(won) == 1, (strategy, axis, won))
                    a.flat[0] += 1
        check.equal(x, a, what=f"{strategy} {axis}")
    check.done()


@pytest.mark.skipif(d2o.default_comm().size == 1, reason="needs a target to keep busy")
@pytest.mark.parametrize("shared", SHARED)
def test_get_while_the_target_computes(comm, shared):
    """A get from a rank that computes in numpy for 1 s (outside MPI) completes within
    0.1 s: the window's memory is MPI's, so the origin copies it itself."""
    x = make(np.arange(8.0 * comm.size), "equal", 0)
    target = comm.size - 1
    lo = x.distributor.region(target)[0][0]
    took = 0.0
    with x.window(shared=shared) as w:
        if comm.rank == target:
            t0 = time.perf_counter()
            while time.perf_counter() - t0 < 1.0:
                np.sum(np.ones(1000))
        elif comm.rank == 0:
            time.sleep(0.1)
            t0 = time.perf_counter()
            one, patch = w.get(lo + 1), w.get(slice(lo, lo + 8))
            took = time.perf_counter() - t0
            collective_assert(one == lo + 1 and np.array_equal(patch, np.arange(lo, lo + 8.0)))
        if comm.rank != 0:
            collective_assert(True)
    slowest = max(comm.allgather(took))
    collective_assert(slowest < 0.1, slowest)


def _example(name: str):
    """The module of examples/<name>.py."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "examples" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"_d2o_example_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_examples_pic_deposit_and_task_pool(comm, capsys):
    """Both examples check themselves against numpy (they assert on every rank)."""
    err = _example("pic_deposit").main(cells=12, count=200)
    collective_assert(err < 1e-9, err)
    counts = _example("task_pool").main(tasks=17)
    collective_assert(sum(counts) == 17, counts)


@pytest.mark.skipif(d2o.default_comm().size == 1, reason="needs two ranks to disagree")
def test_checked_mode_catches_a_window_opened_on_one_rank_only(comm):
    x = make(np.arange(6.0), "equal")
    with d2o.options(check_args=True):
        assert_raises_everywhere(ValueError, lambda: x.window() if comm.rank == 0 else x.sum())
    collective_assert(comm.allreduce(1) == comm.size)  # still in step
