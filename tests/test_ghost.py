"""Ghost cells (issue 15): ``d2o.layout(..., halo=w)``, ``x.update_halos()`` and the padded
piece from ``x.get_local_data(copy=False, halos=True)``, against numpy on slab and mesh
layouts, with what moves asserted by the trace."""

from __future__ import annotations

import numpy as np
import pytest
from _helpers import Checks, sample, spy_sends

import d2o
from d2o import default_comm, distributed_data_object
from d2o.testing import assert_equal_to_numpy, assert_raises_everywhere, collective_assert

P = default_comm().size


def _layouts(w: int) -> dict:
    out = {
        "rows": d2o.layout(split=(0,), halo=w),
        "columns": d2o.layout(split=(1,), halo=w),
        "mesh": d2o.layout(None, (0, 1), halo=w),
    }
    if P == 4:
        out["mesh 2x2"] = d2o.layout((2, 2), (0, 1), halo=w)
        out["replicas"] = d2o.layout((2, 2), (0, None), halo=w)  # rows cut, pairs of replicas
    return out


def _expected(U: np.ndarray, x, w: int) -> np.ndarray:
    """The padded piece numpy predicts: the rank's box grown by ``w`` along the split
    axes, zeros beyond the array's edges."""
    d = x.distributor
    box = d.region(default_comm().rank)
    axes = set(d.split_axes())
    shape = tuple(hi - lo + 2 * w if a in axes else hi - lo for a, (lo, hi) in enumerate(box))
    out = np.zeros(shape, dtype=U.dtype)
    src, dst = [], []
    for a, (lo, hi) in enumerate(box):
        if a in axes and hi > lo:
            g0, g1 = max(lo - w, 0), min(hi + w, U.shape[a])
            src.append(slice(g0, g1))
            dst.append(slice(w - (lo - g0), w - (lo - g0) + g1 - g0))
        elif a in axes:
            src.append(slice(0, 0))
            dst.append(slice(0, 0))
        else:
            src.append(slice(lo, hi))
            dst.append(slice(None))
    out[tuple(dst)] = U[tuple(src)]
    return out


@pytest.mark.parametrize("name", ["rows", "columns", "mesh", "mesh 2x2", "replicas"])
@pytest.mark.parametrize("w", [1, 2])
@pytest.mark.parametrize("dtype", ["int32", "float64", "complex128"])
def test_update_halos_fills_the_neighbours_cells(name, w, dtype):
    lays = _layouts(w)
    if name not in lays:
        pytest.skip("2 x 2 meshes need 4 ranks")
    U = sample((4 * max(P, 2) + 1, 3 * max(P, 2)), dtype, seed=w)
    x = distributed_data_object(U, distribution_strategy=lays[name])
    collective_assert(x.halo == w, x.halo)
    x.update_halos()
    buf = x.get_local_data(copy=False, halos=True)
    want = _expected(U, x, w)
    collective_assert(buf.shape == want.shape and np.array_equal(buf, want), f"{buf}\n{want}")
    assert_equal_to_numpy(x, U)  # d2o still sees the piece alone


@pytest.mark.parametrize("name", ["rows", "mesh"])
def test_a_local_kernel_over_the_padded_piece(name):
    """A 5-point Jacobi sweep written against the padded piece, as a C or Numba kernel
    would be, matches numpy's sweep of the whole grid."""
    n = 6 * max(P, 2)
    U = sample((n, n), "float64", seed=3)
    u = distributed_data_object(U, distribution_strategy=_layouts(1)[name])
    d = u.distributor
    box = d.region(default_comm().rank)
    axes = set(d.split_axes())
    for _ in range(3):
        u.update_halos()
        b = u.get_local_data(copy=False, halos=True)
        inner = b[tuple(slice(1, -1) if a in axes else slice(None) for a in range(2))]
        g = b if len(axes) == 2 else np.pad(b, [(0, 0) if a in axes else (1, 1) for a in range(2)])
        new = 0.25 * (g[:-2, 1:-1] + g[2:, 1:-1] + g[1:-1, :-2] + g[1:-1, 2:])
        # only interior points of the global grid change (the edges are boundary values)
        rows = np.arange(box[0][0], box[0][1])[:, None]
        cols = np.arange(box[1][0], box[1][1])[None, :]
        keep = (rows == 0) | (rows == n - 1) | (cols == 0) | (cols == n - 1)
        inner[...] = np.where(keep, inner, new)
        U[1:-1, 1:-1] = 0.25 * (U[:-2, 1:-1] + U[2:, 1:-1] + U[1:-1, :-2] + U[1:-1, 2:])
    assert_equal_to_numpy(u, U, rtol=1e-14)


def test_results_keep_the_width_and_pieces_stay_in_the_buffer():
    U = sample((5 * max(P, 2), 4), "float64", seed=5)
    x = distributed_data_object(U, distribution_strategy=d2o.layout(halo=1))
    y = 2 * x + 1  # the layout (and its width) carries over; the buffer comes on demand
    collective_assert(y.halo == 1, y.halo)
    y.update_halos()
    got, want = y.get_local_data(halos=True), _expected(2 * U + 1, y, 1)
    collective_assert(got.shape == want.shape and np.array_equal(got, want), f"{got}\n{want}")
    buf = x.get_local_data(copy=False, halos=True)
    x.set_local_data(x.get_local_data() * 0 + 7)  # written into the buffer's interior
    collective_assert(np.shares_memory(x.get_local_data(copy=False), buf))
    x[...] = x + 1
    assert_equal_to_numpy(x, np.full(U.shape, 8.0))
    collective_assert(not np.shares_memory(x.get_local_data(halos=True), buf))  # copies


def _replacements(U: np.ndarray, lay) -> list:
    """(name, what it does to ``x``, numpy's array afterwards): every way to replace or
    rewrite a piece."""
    V = U * 3 - 1
    other = distributed_data_object(V, distribution_strategy="equal")  # another layout
    return [
        ("set_local_data", lambda x: x.set_local_data(V[x.distributor.local_slice]), V),
        ("x.data = a new array", lambda x: setattr(x, "data", V[x.distributor.local_slice].copy()),
         V),
        ("set_full_data", lambda x: x.set_full_data(V), V),
        ("x[...] = numpy", lambda x: x.__setitem__(Ellipsis, V), V),
        ("x[...] = d2o of another layout", lambda x: x.__setitem__(Ellipsis, other), V),
        ("np.copyto", lambda x: np.copyto(x, V), V),
        ("x += 1", lambda x: x.__iadd__(1.0), U + 1),
        ("x *= x", lambda x: x.__imul__(x), U * U),
        ("np.add(x, 1, out=x)", lambda x: np.add(x, 1.0, out=x), U + 1),
        ("x.fill", lambda x: x.fill(2.5), np.full(U.shape, 2.5)),
    ]  # fmt: skip


@pytest.mark.parametrize("name", ["rows", "columns", "mesh", "mesh 2x2", "replicas"])
@pytest.mark.parametrize("w", [1, 2])
def test_replaced_pieces_stay_in_their_ghost_cells(name, w):
    """After a piece is replaced or rewritten (set_local_data, ``x.data = ...``,
    set_full_data, assignments, in-place operations, copies into it), ``update_halos``
    fills the ghost cells from the new values: the padded piece is numpy's prediction,
    in the same buffer a kernel may hold, with the cells beyond the array's edge left as
    the kernel set them (issue 28)."""
    lays = _layouts(w)
    if name not in lays:
        pytest.skip("2 x 2 meshes need 4 ranks")
    U = sample((4 * max(P, 2) + 1, 3 * max(P, 2)), "float64", seed=w + 7)
    check = Checks()
    for what, replace, E in _replacements(U, lays[name]):
        x = distributed_data_object(U, distribution_strategy=lays[name])
        x.update_halos()
        held = x.get_local_data(copy=False, halos=True)
        beyond = _expected(np.ones(U.shape), x, w) == 0  # padding past the array's edge
        held[beyond] = -5.0  # e.g. boundary values a kernel keeps there
        replace(x)
        x.update_halos()
        buf = x.get_local_data(copy=False, halos=True)
        want = np.where(beyond, -5.0, _expected(E, x, w))
        check.true(buf is held, f"{what}: the padded buffer was replaced")
        check.true(buf.shape == want.shape and np.array_equal(buf, want),
                   f"{what}: padded piece\n{buf}\nexpected\n{want}")  # fmt: skip
        check.true(np.shares_memory(x.get_local_data(copy=False), buf), f"{what}: outside")
        check.equal(x, E, what=what)
    check.done()


def test_set_full_data_on_a_view_reaches_the_base():
    a = np.arange(12.0).reshape(6, 2)
    x = distributed_data_object(a.copy())
    v = x[1:4]
    v.set_full_data(-np.ones((3, 2)))
    a[1:4] = -1
    assert_equal_to_numpy(x, a)
    assert_equal_to_numpy(v, a[1:4])


def test_update_halos_moves_boundary_layers_to_neighbours_only():
    n, m, w = 6 * max(P, 2), 5, 2
    x = distributed_data_object(sample((n, m), "float64"), distribution_strategy=d2o.layout(halo=w))
    x.update_halos()  # the buffer exists: the traced call moves the layers alone
    with d2o.options(check_args=False), d2o.trace() as t:
        x.update_halos()
    me = default_comm().rank
    neighbours = (me > 0) + (me < P - 1)
    calls = [c for c in t.calls if c[2] or c[3]]
    collective_assert(all(c[1] == "Sendrecv" for c in calls), f"{t.calls}")
    sent = sum(c[2] for c in calls)
    collective_assert(sent == neighbours * w * m * 8, f"sent {sent}")


def test_serial_and_no_halo():
    x = distributed_data_object(np.arange(12.0).reshape(4, 3), distribution_strategy=d2o.layout())
    collective_assert(x.halo == 0, x.halo)
    assert_raises_everywhere(ValueError, x.update_halos)
    assert_raises_everywhere(ValueError, lambda: x.get_local_data(halos=True))


def test_bad_widths_raise_everywhere():
    assert_raises_everywhere(ValueError, lambda: d2o.layout(halo=-1))
    assert_raises_everywhere(TypeError, lambda: d2o.layout(halo=1.5))
    assert_raises_everywhere(ValueError, lambda: d2o.layout(split=(), halo=1))
    assert_raises_everywhere(ValueError, lambda: d2o.layout(block=2, halo=1))
    lay = d2o.layout(halo=3)
    if P > 1:  # pieces of 2 rows: ghost cells of 3 would reach past the neighbour
        assert_raises_everywhere(
            ValueError,
            lambda: distributed_data_object(np.zeros((2 * P, 3)), distribution_strategy=lay),
        )
    x = distributed_data_object(np.zeros((3 * P, 3)), distribution_strategy=lay)
    x.update_halos()
    assert_equal_to_numpy(x, np.zeros((3 * P, 3)))


@pytest.mark.parametrize("name", ["mesh", "mesh 2x2"])
def test_mesh_update_moves_ghost_cells_once_to_neighbours(name, monkeypatch):
    lays = _layouts(1)
    if name not in lays:
        pytest.skip("a 2 x 2 mesh needs 4 ranks")
    U = sample((4 * max(P, 2), 3 * max(P, 2)), "float64", seed=1)
    x = distributed_data_object(U, distribution_strategy=lays[name])
    x.update_halos()
    seen = spy_sends(monkeypatch)
    with d2o.options(check_args=False), d2o.trace() as t:
        x.update_halos()
    seen = list(seen)
    d = x.distributor
    comm = default_comm()
    me = comm.rank

    def grown(r):
        return [(max(lo - 1, 0), min(hi + 1, n)) for (lo, hi), n in zip(d.region(r), U.shape)]

    ghost = sum(
        np.prod([b - a for a, b in grown(r)]) - np.prod([b - a for a, b in d.region(r)])
        for r in range(comm.size)
    )
    sent = comm.allreduce(sum(c[2] for c in t.calls if c[1] == "Sendrecv"))
    collective_assert(sent == ghost * 8, f"{sent} bytes for {ghost} ghost cells")
    here = np.array(d.coords_of(me))
    far = {r for r in range(comm.size) if np.abs(np.array(d.coords_of(r)) - here).max() > 1}
    collective_assert(all(not (peers & far) for _, peers in seen), f"{seen}, far {far}")
