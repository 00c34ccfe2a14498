"""Layouts on process meshes (`d2o.layout`): numpy as the oracle on every layout.

Mesh layouts (block and block-cyclic) run elementwise work and reductions natively;
operations without a mesh algorithm run on the slab equivalent (one exchange).
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from _helpers import sample

import d2o
import d2o.numpy
from d2o import default_comm, distributed_data_object
from d2o.core import hooks
from d2o.core.registry import flagged
from d2o.testing import assert_equal_to_numpy, assert_raises_everywhere, collective_assert

P = default_comm().size


def mesh_layouts(ndim: int) -> list:
    """The layouts the issue names, those that exist for this number of ranks."""
    out = [d2o.layout(), d2o.layout(split=(0, None))]
    if ndim >= 2:
        out += [d2o.layout(mesh=(1, P), split=(0, 1)), d2o.layout(split=(1, 0))]
        out += [d2o.layout(mesh=(P, 1), split=(None, 1))]
    if ndim >= 3:
        out += [d2o.layout(split=(0, 2)), d2o.layout(split=(2, 1))]
    if P % 2 == 0:
        out += [d2o.layout(mesh=(2, P // 2), split=(0, 1) if ndim >= 2 else (0, None))]
    return out


SHAPES = [(7,), (4, 5), (3, 4, 5), (0, 3), (1, 1)]


def ids(lays):
    return [repr(x) for x in lays]


@pytest.mark.parametrize("shape", SHAPES)
def test_construct_gather_and_pieces(shape):
    a = sample(shape, "float64")
    for lay in mesh_layouts(len(shape)):
        x = distributed_data_object(a, distribution_strategy=lay)
        assert_equal_to_numpy(x, a)
        d = x.layout
        box = d.region(default_comm().rank)
        # this rank's piece is exactly its box of the global array
        mine = a[tuple(slice(*b) for b in box)]
        collective_assert(np.array_equal(x.get_local_data(), mine), f"piece of {box}")
        y = distributed_data_object(global_shape=shape, dtype=np.int16, distribution_strategy=lay)
        collective_assert(y.layout is d and y.dtype == np.int16)


def test_pieces_cover_the_array_once():
    """Boxes of the sending ranks tile the global array (replicas send once)."""
    a = sample((6, 5, 4), "int64")
    for lay in mesh_layouts(3):
        d = distributed_data_object(a, distribution_strategy=lay).layout
        count = np.zeros(a.shape, dtype=int)
        for r in range(P):
            box = d.source(r)
            if box is not None:
                count[tuple(slice(*b) for b in box)] += 1
        collective_assert((count == 1).all(), str(lay))


@pytest.mark.parametrize("dtype", ["int32", "float64", "complex128", "bool"])
def test_elementwise_is_local_on_one_layout(dtype):
    a = sample((4, 5), dtype)
    b = sample((4, 5), dtype, seed=1)
    for lay in mesh_layouts(2):
        x = distributed_data_object(a, distribution_strategy=lay)
        y = distributed_data_object(b, distribution_strategy=lay)
        with d2o.options(check_args=False), d2o.trace() as t:
            z = x + y
            w = np.multiply(x, 2)
            v = -x if dtype != "bool" else ~x
        collective_assert(t.collectives == 0 and t.bytes_sent == 0)
        collective_assert(z.layout is x.layout and w.layout is x.layout)
        assert_equal_to_numpy(z, a + b)
        assert_equal_to_numpy(w, np.multiply(a, 2))
        assert_equal_to_numpy(v, -a if dtype != "bool" else ~a)
        x += y
        assert_equal_to_numpy(x, a + b)
        collective_assert(x.layout is y.layout)


def test_mixed_layouts_and_numpy_operands():
    a, b = sample((4, 6), "float64"), sample((4, 6), "float64", seed=2)
    lays = mesh_layouts(2)
    for la in lays:
        x = distributed_data_object(a, distribution_strategy=la)
        dist_b = distributed_data_object(b, distribution_strategy="equal", axis=1)
        for other, want in ((dist_b, b), (b, b), (b[0], b[0]), (2.5, 2.5)):
            assert_equal_to_numpy(x * other, a * want)
        for lb in lays:
            y = distributed_data_object(b, distribution_strategy=lb)
            assert_equal_to_numpy(x - y, a - b)
            out = distributed_data_object(np.zeros_like(a), distribution_strategy=lb)
            np.add(x, y, out=out)
            collective_assert(out.layout is y.layout)
            assert_equal_to_numpy(out, a + b)


@pytest.mark.parametrize("axis", [None, 0, 1, 2, (0, 2), -1])
def test_reductions(axis):
    a = sample((3, 4, 5), "float64")
    for lay in mesh_layouts(3):
        x = distributed_data_object(a, distribution_strategy=lay)
        for name in ("sum", "max", "mean", "std", "argmax"):
            if name == "argmax" and isinstance(axis, tuple):
                continue
            assert_equal_to_numpy(getattr(x, name)(axis=axis), getattr(a, name)(axis=axis),
                                  rtol=1e-12)  # fmt: skip


def test_indexing_get_and_set():
    a = sample((5, 6), "int64")
    keys = [2, (1, 3), slice(1, 4), (slice(None), 2), (slice(None, None, -2), [0, 5]), a > 3,
            ([0, 4, 2], [1, 1, 5]), Ellipsis]  # fmt: skip
    for lay in mesh_layouts(2):
        for k in keys:
            x = distributed_data_object(a, distribution_strategy=lay)
            assert_equal_to_numpy(x[k], a[k])
            want = a.copy()
            want[k] = -7
            x[k] = -7
            collective_assert(x.layout.__class__ is type(x.layout))
            assert_equal_to_numpy(x, want)
            collective_assert(
                x.layout is distributed_data_object(a, distribution_strategy=lay).layout
            )


def test_copy_between_layouts_moves_only_what_changes_owner():
    """A change between layouts moves exactly the bytes whose owner changes."""
    a = sample((6, 8), "float64")
    comm = default_comm()
    lays = mesh_layouts(2) + ["equal", "fftw", "not"]
    for la in lays:
        for lb in lays:
            x = distributed_data_object(a, distribution_strategy=la)
            with d2o.trace() as t:
                y = x.copy(distribution_strategy=lb)
            assert_equal_to_numpy(y, a)
            if isinstance(lb, str) and lb == "not":
                continue  # a gather: everything moves
            old, new = x.layout.region(comm.rank), y.layout.region(comm.rank)
            held = [max(0, min(o1, n1) - max(o0, n0)) for (o0, o1), (n0, n1) in zip(old, new)]
            size = int(np.prod([n1 - n0 for n0, n1 in new]))
            expect = (size - int(np.prod(held))) * a.itemsize  # the elements I did not hold
            moved = sum(c[3] for c in t.calls if c[1] == "Alltoallw")  # the data, not agreement
            collective_assert(moved == expect, str((la, lb, moved, expect)))


def _mask(box, shape):
    m = np.zeros(shape, dtype=bool)
    m[tuple(slice(a, b) for a, b in box)] = True
    return m


@pytest.mark.skipif(P % 2, reason="needs a (2, P // 2) mesh")
@pytest.mark.parametrize("dtype", ["float64", "int32"])
def test_change_along_one_mesh_axis_stays_in_its_group(dtype):
    """Layouts that differ along one mesh axis exchange inside that axis's group of ranks
    (trace: the collective's group size) and move exactly the bytes whose owner changes."""
    shape, mesh = (6, 5), (2, P // 2)
    a = sample(shape, dtype)
    comm = default_comm()
    me = comm.rank
    cases = [((0, 1), (0, None), 1), ((0, 1), (None, 1), 0), ((1, 0), (None, 0), 0)]
    cases += [((0, None), (0, 1), 1), ((None, 1), (0, 1), 0)]  # from replicas: no exchange
    for src, dst, m in cases:
        la, lb = d2o.layout(mesh, src), d2o.layout(mesh, dst)
        x = distributed_data_object(a, distribution_strategy=la)
        with d2o.options(check_args=False), d2o.trace() as t:
            y = x.copy(distribution_strategy=lb)
        assert_equal_to_numpy(y, a)
        dx, dy = x.distributor, y.distributor
        coords = np.array([np.unravel_index(r, mesh) for r in range(P)])
        group = [q for q in range(P) if all(coords[q][k] == coords[me][k] for k in (1 - m,))]
        held = [_mask(dx.region(q), shape) for q in range(P)]
        wanted = [_mask(dy.region(q), shape) for q in range(P)]
        received = int((wanted[me] & ~held[me]).sum()) * a.itemsize
        sent = sum(int((held[me] & wanted[q] & ~held[q]).sum()) for q in group if q != me)
        if src[m] is None:
            sent = 0  # every rank of the group holds what it wants
        calls = [c for c in t.calls if c[1] == "Alltoallw"]
        collective_assert(all(c[4] == mesh[m] for c in calls), str((src, dst, calls)))
        collective_assert(sum(c[3] for c in calls) == received, str((src, dst, calls, received)))
        collective_assert(
            sum(c[2] for c in calls) == sent * a.itemsize, str((src, dst, calls, sent))
        )
        collective_assert(
            len(calls) == (0 if src[m] is None or mesh[m] == 1 else 1), str((src, dst, calls))
        )


def test_bad_layouts_raise_everywhere():
    assert_raises_everywhere(ValueError, d2o.layout, mesh=(P + 1,))
    assert_raises_everywhere(ValueError, d2o.layout, mesh=(P,), split=(0, 1))
    assert_raises_everywhere(ValueError, d2o.layout, split=(1, 1))
    assert_raises_everywhere(ValueError, d2o.layout, block=0)
    assert_raises_everywhere(ValueError, d2o.layout, block=-2)
    assert_raises_everywhere(TypeError, d2o.layout, split=(0.5,))
    lay = d2o.layout(split=(0, 2))
    assert_raises_everywhere(np.exceptions.AxisError, distributed_data_object, np.zeros((2, 3)),
                             distribution_strategy=lay)  # fmt: skip
    same_axis = d2o.layout(split=(0, -2))
    assert_raises_everywhere(ValueError, distributed_data_object, np.zeros((2, 3)),
                             distribution_strategy=same_axis)  # fmt: skip


def test_layouts_are_cached_and_named():
    collective_assert(d2o.layout(split=(0, 1)) is d2o.layout(split=[0, 1]))
    collective_assert(d2o.layout().mesh == (P,))
    m = d2o.layout(split=(0, 1)).mesh
    collective_assert(len(m) == 2 and m[0] * m[1] == P and m[0] >= m[1])
    x = distributed_data_object(np.zeros((4, 4)), distribution_strategy=d2o.layout())
    collective_assert(x.distribution_strategy == "equal" and x.axis == 0)
    y = distributed_data_object(np.zeros((4, 4)), distribution_strategy=d2o.layout(split=()))
    collective_assert(y.distribution_strategy == "not")
    collective_assert("split=(0, 1)" in repr(d2o.layout(split=(0, 1))))


def test_shape_functions_and_fft_fall_back_to_slabs():
    a = sample((4, 6), "complex128")
    for lay in mesh_layouts(2):
        x = distributed_data_object(a, distribution_strategy=lay)
        assert_equal_to_numpy(x.reshape(6, 4), a.reshape(6, 4))
        assert_equal_to_numpy(x.T, a.T)
        assert_equal_to_numpy(d2o.fft.fftn(x), np.fft.fftn(a), rtol=1e-10, atol=1e-10)
        assert_equal_to_numpy(x.dot(a.real[0]), a.dot(a.real[0]), rtol=1e-12)
        assert_equal_to_numpy(x.conj(), a.conj())
        collective_assert([row.tolist() for row in x] == [row.tolist() for row in a])


def test_layout_differing_on_one_rank_is_refused_everywhere():
    """A layout is a global argument: with the checked mode, one rank's other layout raises
    ValueError on every rank and nothing is created."""
    if P == 1:
        return
    comm = default_comm()
    x = distributed_data_object(np.arange(12.0).reshape(3, 4))
    lay = d2o.layout(split=(0, 1)) if comm.rank == 0 else d2o.layout()
    with d2o.options(check_args=True):
        assert_raises_everywhere(ValueError, x.copy, distribution_strategy=lay)
        assert_raises_everywhere(ValueError, distributed_data_object, np.zeros((3, 4)),
                                 distribution_strategy=lay)  # fmt: skip
    assert_equal_to_numpy(x, np.arange(12.0).reshape(3, 4))


@pytest.mark.parametrize("fmt", ["npy", "hdf5", "zarr"])
def test_io_round_trip_on_mesh_and_block_cyclic_layouts(shared_dir, fmt):
    """Writers take any layout; readers read straight into mesh layouts (block-cyclic ones
    through their slab equivalent, one exchange)."""
    import os
    import warnings

    from _helpers import make, mesh_names, mesh_of

    if fmt != "npy":
        pytest.importorskip("h5py" if fmt == "hdf5" else "zarr")
    a = sample((7, 5, 3), "float64")
    for name in mesh_names(3) + ["cyc3"]:
        obj = make(a, name)
        lay = mesh_of(name)
        path = os.path.join(shared_dir, f"a_{name}.{fmt}")
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", "h5py is not built with MPI")
            if fmt == "npy":
                d2o.save(path, obj)
                back = d2o.load(path, distribution_strategy=lay)
            elif fmt == "hdf5":
                d2o.to_hdf5(obj, path, "x")
                back = d2o.from_hdf5(path, "x", distribution_strategy=lay)
            else:
                d2o.to_zarr(obj, path)
                back = d2o.from_zarr(path, distribution_strategy=lay)
        assert_equal_to_numpy(back, a)
        collective_assert(
            back.distributor is lay.distributor(a.shape), str((name, back.distributor))
        )


@pytest.mark.skipif(P % 2, reason="needs a (2, P // 2) mesh")
def test_reduction_over_a_split_axis_runs_in_its_mesh_group():
    """Reducing an axis that mesh axis m splits combines partials among that axis's ranks
    only (trace: one data collective, group size mesh[m], besides the 1-byte error
    agreement over all ranks); the result holds replicas there."""
    mesh = (2, P // 2)
    a = sample((6, 5), "float64")
    x = distributed_data_object(a, distribution_strategy=d2o.layout(mesh, (0, 1)))
    for axis, m in ((0, 0), (1, 1)):
        x.sum(axis=axis)  # creates the mesh axis's sub-communicator (once per mesh)
        with d2o.options(check_args=False), d2o.trace() as t:
            s = x.sum(axis=axis)
        assert_equal_to_numpy(s, a.sum(axis=axis), rtol=1e-12)
        flag = [c for c in t.calls if c[1] == "Allreduce" and c[2] == 1]  # error agreement
        data = [c for c in t.calls if c not in flag]
        collective_assert(len(flag) == (P > 1) and all(c[4] == P for c in flag), str(t.calls))
        expect = [] if mesh[m] == 1 else [mesh[m]]
        collective_assert([c[4] for c in data] == expect, str((axis, t.calls)))
        part = 8 * s.local_shape[0]  # this rank's partial; received: the group's others'
        collective_assert(
            all(c[2] == part and c[3] == part * (mesh[m] - 1) for c in data), str(t.calls)
        )
        want = d2o.layout(mesh, tuple(None if i == m else 0 for i in range(2)))
        collective_assert(s.distributor is want.distributor(s.shape), str((axis, s.distributor)))


@pytest.mark.parametrize("op", ["sum", "max", "argmax", "var", "mean"])
def test_mesh_reduction_axis_bad_on_one_rank_raises_everywhere(op):
    """An axis valid on all ranks but one: numpy's AxisError on every rank, no hang (the
    checked mode is off, so the operation's own agreement must catch it)."""
    a = sample((4, 6), "float64")
    for lay in mesh_layouts(2) + [d2o.layout(split=(0, 1), block=2)]:
        x = distributed_data_object(a, distribution_strategy=lay)
        bad = 5 if default_comm().rank == 0 else 1
        with d2o.options(check_args=False):
            assert_raises_everywhere(np.exceptions.AxisError, getattr(x, op), axis=bad)
        assert_equal_to_numpy(x, a)  # nothing written


def test_mesh_fallback_wraps_only_operations_without_a_mesh_algorithm():
    """Once mesh layouts exist, only operations without a mesh algorithm are wrapped (so
    native ones cost nothing extra), and a copy from a mesh moves the data once."""
    comm = default_comm()
    lay = d2o.layout(mesh=(1, comm.size), split=(0, 1))  # columns: differs from the slab
    a = np.arange(48.0).reshape(6, 8)
    x = distributed_data_object(a, distribution_strategy=lay)
    D = distributed_data_object
    # once a 0-d view was made in this process (another test), operations other than the
    # operators are wrapped for good (d2o.runtime.funnel's level 2)
    held = hooks.held_in_use[0]
    with d2o.options(check_args=False, lazy=False):  # lazy flags operations of its own
        copy_wrapped = flagged(inspect.getattr_static(D, "copy"))
        collective_assert(copy_wrapped == held)
        collective_assert(not flagged(inspect.getattr_static(D, "__add__")))
        collective_assert(flagged(inspect.getattr_static(D, "__iter__")))
        collective_assert(
            not flagged(inspect.getattr_static(D, "_target"))
        )  # private: never wrapped
        with d2o.trace() as t:  # a trace wraps everything while it lasts
            collective_assert(flagged(inspect.getattr_static(D, "copy")))
            y = x.copy(distribution_strategy="equal")
        copy_wrapped = flagged(inspect.getattr_static(D, "copy"))
        collective_assert(copy_wrapped == held)
    assert_equal_to_numpy(y, a)
    moves = [c for c in t.calls if c[1] == "Alltoallw"]
    collective_assert(len(moves) == (1 if comm.size > 1 else 0))


def test_feature_modules_ask_layout_questions_instead_of_reading_slab_fields():
    """Only the layout module reads a slab's fields (offsets, local_start, local_stop);
    everything else asks the distributor (span, bounds, slabs_like, region)."""
    import pathlib
    import re

    root = pathlib.Path(d2o.__file__).parent
    pattern = re.compile(r"\.offsets|local_start|local_stop")
    readers = sorted(
        str(p.relative_to(root))
        for p in root.rglob("*.py")
        if pattern.search(p.read_text(encoding="utf-8"))
    )
    assert readers == ["layouts/distributors.py"]


def test_the_trace_says_which_operations_went_the_slab_way():
    """An operation without a mesh algorithm says so in its record (``via_slab``: the mesh
    operands it moved to slab equivalents); a native one moves nothing and says nothing."""
    a = np.arange(48.0).reshape(6, 8)
    x = distributed_data_object(a, distribution_strategy=d2o.layout(split=(0, 1)))
    with d2o.trace() as t:
        c = x.round(1)  # no mesh algorithm yet: one operand via its slab equivalent
        s = x.sum(axis=0)  # native: partials combined along the mesh axis
        w = d2o.numpy.where(x > 5, x, 0)  # native, local
        k = x.cumsum(axis=1)  # native: a scan inside the mesh axis's sub-communicator
    by_op = {r.op: r for r in t.records}
    collective_assert(by_op["round"].via_slab == 1, by_op["round"])
    native = ("sum", "numpy.where", "cumsum")
    collective_assert(all(by_op[n].via_slab == 0 for n in native), by_op)
    collective_assert("via_slab=1" in repr(by_op["round"]))
    assert_equal_to_numpy(c, np.round(a, 1))
    assert_equal_to_numpy(k, np.cumsum(a, axis=1))
    assert_equal_to_numpy(s, a.sum(axis=0))
    assert_equal_to_numpy(w, np.where(a > 5, a, 0))
