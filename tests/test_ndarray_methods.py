"""numpy's ndarray methods and attributes on distributed arrays (issue 31, item 1): ``flat``,
``view``, ``put``, ``searchsorted``, ``partition``, ``argpartition``, ``compress``,
``choose``, ``resize``, ``tobytes``, ``tofile``, ``dump``, ``dumps``, ``byteswap``,
``getfield``, ``setfield``, ``setflags``, ``strides``, ``ctypes``.

numpy is the oracle: the same global data on every layout of tests/_helpers.layouts
(meshes included), several dtypes, empty and tiny shapes; assertions are collective.
"""

from __future__ import annotations

import os
import pickle
import warnings

import numpy as np
import pytest
from _helpers import Checks, layouts, make, sample

import d2o.numpy as dnp
from d2o import distributed_data_object as D2O
from d2o.testing import assert_equal_to_numpy, assert_raises_everywhere, collective_assert

SHAPES = [(), (1,), (7,), (4, 5), (2, 3, 4), (0, 3), (3, 0)]
DTYPES = ["float64", "int32", "complex128", "bool"]

#: public ndarray attributes d2o deliberately leaves out (none)
LEFT_OUT: dict[str, str] = {}


def _cases(shapes=SHAPES):
    for shape in shapes:
        for strategy, axis in layouts(len(shape)):
            yield shape, strategy, axis


def _name(strategy, axis, shape, what=""):
    return f"{strategy}/{axis} {shape} {what}"


def _equal(check: Checks, got, expected, what: str) -> None:
    """``got`` (distributed, numpy or scalar) equals numpy's ``expected`` (local check)."""
    if isinstance(got, D2O):
        check.equal(got, expected, what=what)
        return
    exp = np.asarray(expected)
    ok = np.shape(got) == exp.shape and np.array_equal(np.asarray(got), exp)
    check.true(ok, f"{what}: {got!r} != {expected!r}")


def test_every_ndarray_attribute_exists():
    public = {n for n in dir(np.ndarray) if not n.startswith("_")}
    missing = sorted(n for n in public - set(LEFT_OUT) if not hasattr(D2O, n))
    collective_assert(not missing, f"ndarray attributes missing on d2o arrays: {missing}")


# -- flat -------------------------------------------------------------------------------


def _flat_keys(n: int) -> list:
    keys: list = [slice(None), Ellipsis, slice(1, None, 2), slice(None, None, -3), slice(2, 2)]
    if n:
        keys += [0, n - 1, -1, n // 2, (n // 3,), [n - 1, 0, n // 2], np.array([[0], [n - 1]])]
        keys += [np.arange(n) % 3 == 1, np.array([], dtype=np.intp)]
    return keys


@pytest.mark.parametrize("dtype", DTYPES)
def test_flat_get(dtype):
    check = Checks()
    for shape, strategy, axis in _cases():
        a = sample(shape, dtype, seed=1)
        x = make(a, strategy, axis)
        n = a.size
        collective_assert(len(x.flat) == n and x.flat.base is x, "len and base of flat")
        for key in _flat_keys(n):
            _equal(check, x.flat[key], a.flat[key], _name(strategy, axis, shape, repr(key)))
        if n:  # distributed keys: integers and a mask
            idx = np.array([n - 1, 0, n // 2, n - 1])
            _equal(check, x.flat[make(idx, "equal")], a.flat[idx], _name(strategy, axis, shape))
            m = np.arange(n) % 2 == 0
            _equal(check, x.flat[make(m, "equal")], a.flat[m], _name(strategy, axis, shape, "m"))
    check.done()


def _flat_writes(n: int, dtype) -> list:
    """(key, value) pairs: scalars, cycled short values, exact values, repeated indices."""
    v = sample((max(n, 1),), dtype, seed=7)
    out: list = [(slice(None), v[:1]), (Ellipsis, v[:n]), (slice(None, None, -2), v[:2])]
    out += [(slice(1, None, 3), v[:3]), (slice(0, 0), v[:0])]
    if n:
        out += [(n - 1, v[0]), (-n, v[0]), ([0, n - 1, 0], v[:3]), ([n // 2] * 3, v[:2])]
        out += [(np.arange(n) % 2 == 1, v[:2]), (np.array([[n - 1], [0]]), v[:2])]
        out += [([0, n - 1], v[:0])]  # an empty value writes nothing, as in numpy
    return out


@pytest.mark.parametrize("dtype", DTYPES)
def test_flat_set(dtype):
    check = Checks()
    for shape, strategy, axis in _cases():
        a = sample(shape, dtype, seed=2)
        n = a.size
        for key, value in _flat_writes(n, dtype):
            b, x = a.copy(), make(a, strategy, axis)
            b.flat[key] = value
            x.flat[key] = value
            check.equal(x, b, what=_name(strategy, axis, shape, f"flat[{key!r}] = {value!r}"))
        if n:  # distributed values (exact and cycled) and distributed keys
            v = sample((n,), dtype, seed=3)
            for key, value in [(slice(None, None, -1), v), (slice(1, None, 2), v[:2])]:
                b, x = a.copy(), make(a, strategy, axis)
                b.flat[key] = value
                x.flat[key] = make(value, "equal")
                check.equal(x, b, what=_name(strategy, axis, shape, f"d2o value {key!r}"))
            idx = np.array([n - 1, 0, n // 2])
            m = np.arange(n) % 3 == 0
            for key, value in [(idx, v[:3]), (idx, v[:2]), (m, v[:1]), (m, v)]:
                b, x = a.copy(), make(a, strategy, axis)
                b.flat[key] = value
                x.flat[make(key, "equal")] = value
                check.equal(x, b, what=_name(strategy, axis, shape, f"d2o key {key!r}"))
    check.done()


def test_flat_attribute_assignment_iteration_and_numpy_functions():
    check = Checks()
    for shape, strategy, axis in _cases([(), (7,), (4, 5), (2, 3, 4), (0, 3)]):
        a = sample(shape, "int32", seed=4).astype(np.float64)  # exact sums in any order
        x = make(a, strategy, axis)
        what = _name(strategy, axis, shape)
        check.true(list(x.flat) == list(a.flat), f"{what}: iteration")
        check.true(np.array_equal(np.asarray(x.flat), np.asarray(a.flat)), f"{what}: __array__")
        check.equal(x.flat.copy(), a.flat.copy(), what=f"{what}: copy")
        _equal(check, dnp.dot(x.flat, x.flat), np.dot(a.flat, a.flat), f"{what}: dot")
        _equal(check, np.sum(x.flat), np.sum(a.flat), f"{what}: np.sum")
        _equal(check, np.negative(x.flat), np.negative(a.flat), f"{what}: np.negative")
        b = a.copy()
        b.flat = [1.5, -2.0, 3.0]
        x.flat = [1.5, -2.0, 3.0]
        check.equal(x, b, what=f"{what}: x.flat = v")
    check.done()


def test_flat_on_a_view_writes_into_the_base():
    a = np.arange(20.0).reshape(4, 5)
    for strategy, axis in layouts(2):
        b, x = a.copy(), make(a, strategy, axis)
        b[1:, ::2].flat[[0, 4]] = -1
        x[1:, ::2].flat[[0, 4]] = -1
        assert_equal_to_numpy(x, b)


def test_laplace_error_norm_through_flat():
    """GAiN's laplace.py (perfpy): ``v = (u - u_old).flat; sqrt(dot(v, v))``."""
    u0 = sample((6, 5), "float64", seed=10)
    for strategy, axis in layouts(2):
        u_old = make(u0, strategy, axis)
        u = u_old.copy()
        u[1:-1, 1:-1] = (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:]) * 0.25
        w = u0.copy()
        w[1:-1, 1:-1] = (w[:-2, 1:-1] + w[2:, 1:-1] + w[1:-1, :-2] + w[1:-1, 2:]) * 0.25
        v, nv = (u - u_old).flat, (w - u0).flat
        err = float(dnp.sqrt(dnp.dot(v, v)))
        collective_assert(np.isclose(err, np.sqrt(np.dot(nv, nv)), rtol=1e-13), f"{strategy}")


def test_flat_bad_keys_raise_numpy_errors_everywhere():
    x = make(np.arange(12.0).reshape(3, 4), "equal")
    for key in [12, -13, [0, 12], (1, 2), None, "a", np.zeros(5, bool)]:
        assert_raises_everywhere(IndexError, lambda k=key: x.flat[k])
        assert_raises_everywhere(IndexError, x.flat.__setitem__, key, 1.0)
    for key in [make(np.array([0, 12]), "equal"), make(np.zeros(5, bool), "equal")]:
        assert_raises_everywhere(IndexError, lambda k=key: x.flat[k])
        assert_raises_everywhere(IndexError, x.flat.__setitem__, key, 1.0)
    assert_equal_to_numpy(x, np.arange(12.0).reshape(3, 4))  # nothing written
    x.flat[3] = 5.0  # the next operation after the failed ones
    assert_equal_to_numpy(x.flat[3], np.float64(5.0))


# -- put --------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float64", "int32", "complex128"])
def test_put(dtype):
    check = Checks()
    for shape, strategy, axis in _cases([(), (7,), (4, 5), (2, 3, 4), (0, 3)]):
        a = sample(shape, dtype, seed=5)
        n = a.size
        v = sample((4,), dtype, seed=6)
        cases = [([], v, "raise")]
        if n:
            cases += [([0, -1, n // 2], v[:3], "raise"), ([n // 2, n // 2, 0], v[:2], "raise")]
            cases += [([n + 2, -n - 1, 3 * n], v, "wrap"), ([-5, n + 3, 1], v[:1], "clip")]
            cases += [(np.array([[n - 1], [0]]), v[:2], "raise"), (n - 1, v[0], "raise")]
        for ind, vals, mode in cases:
            what = _name(strategy, axis, shape, f"put({ind!r}, mode={mode})")
            b, x = a.copy(), make(a, strategy, axis)
            b.put(ind, vals, mode=mode)
            x.put(ind, vals, mode=mode)
            check.equal(x, b, what=what)
            if n and mode != "raise" or np.ndim(ind) == 1 and len(ind) == 3:
                b2, x2 = a.copy(), make(a, strategy, axis)
                np.put(b2, ind, vals, mode=mode)
                x2.put(make(np.asarray(ind), "equal"), make(vals, "equal"), mode=mode)
                check.equal(x2, b2, what=what + " distributed")
    check.done()


def test_put_bad_input_raises_numpy_errors_everywhere():
    a = np.arange(6.0)
    x = make(a, "equal")
    assert_raises_everywhere(IndexError, x.put, [0, 6], [1.0, 2.0])
    assert_raises_everywhere(IndexError, x.put, -7, 1.0)
    assert_raises_everywhere(IndexError, x.put, make(np.array([1, 9]), "equal"), 1.0)
    assert_raises_everywhere(ValueError, x.put, 0, 1.0, mode="bad")
    assert_raises_everywhere(TypeError, x.put, [1.5], 1.0)
    assert_equal_to_numpy(x, a)


# -- view -------------------------------------------------------------------------------


VIEWS = [
    ("float64", "int64"),
    ("float64", "int32"),
    ("float64", "complex128"),
    ("int32", "float32"),
    ("int32", "int16"),
    ("complex128", "float64"),
    ("int32", "int8"),
]


@pytest.mark.parametrize("src,dst", VIEWS)
def test_view(src, dst):
    check = Checks()
    for shape, strategy, axis in _cases([(), (8,), (4, 6), (2, 3, 4), (0, 4)]):
        a = sample(shape, src, seed=8)
        x = make(a, strategy, axis)
        what = _name(strategy, axis, shape, f"view({dst})")
        try:
            expected = a.view(dst)
        except ValueError:
            assert_raises_everywhere(ValueError, x.view, dst)
            continue
        split_last = x.ndim and (x.ndim - 1) in x.distributor.split_axes()
        if np.dtype(dst).itemsize != a.itemsize and split_last and x.comm.size > 1:
            assert_raises_everywhere(ValueError, x.view, dst)
            continue
        v = x.view(dst)
        check.equal(v, expected, what=what)
        check.true(v.base is x, f"{what}: base")
        if v.size:  # a view: writes reach the base
            expected[...] = expected.dtype.type(3)
            v.fill(3)
            check.equal(x, a, what=f"{what}: write through")
    check.done()


def test_view_without_dtype_is_a_view():
    a = np.arange(20.0).reshape(4, 5)
    for strategy, axis in layouts(2):
        x = make(a, strategy, axis)
        v = x.view()
        collective_assert(v.base is x and v.dtype == x.dtype, "view()")
        v[1:3] = -1.0
        b = a.copy()
        b[1:3] = -1.0
        assert_equal_to_numpy(x, b)
        assert_equal_to_numpy(x.view(D2O), b)
        assert_raises_everywhere(TypeError, x.view, np.matrix)


def test_view_bad_dtypes_raise_value_error_everywhere():
    assert_raises_everywhere(ValueError, make(np.array(1.0), "equal").view, np.int32)
    assert_raises_everywhere(ValueError, make(np.zeros((2, 3), np.int8), "equal").view, np.int16)
    assert_raises_everywhere(ValueError, make(np.zeros((3, 2)), "equal").T.view, np.int32)


# -- resize -----------------------------------------------------------------------------


@pytest.mark.parametrize("new_shape", [(5, 7), (3,), (2, 2, 2), (0,), (20,), ()])
def test_resize(new_shape):
    check = Checks()
    for shape, strategy, axis in _cases([(), (7,), (4, 5), (0, 3)]):
        a = sample(shape, "int64", seed=9)
        b, x = a.copy(), make(a, strategy, axis)
        b.resize(new_shape, refcheck=False)
        x.resize(new_shape)
        check.equal(x, b, what=_name(strategy, axis, shape, f"resize{new_shape}"))
    check.done()


def test_resize_argument_forms_and_refcheck():
    a = np.arange(12.0)
    x = make(a, "equal")
    x.resize(3, 5)
    b = a.copy()
    b.resize(3, 5, refcheck=False)
    assert_equal_to_numpy(x, b)
    x.resize()  # no shape: nothing changes
    x.resize(None)
    assert_equal_to_numpy(x, b)
    v = x[1:]  # a view references x: refcheck refuses, refcheck=False does not
    assert_raises_everywhere(ValueError, x.resize, (4,))
    assert_raises_everywhere(ValueError, v.resize, (4,))  # a view does not own its data
    x.resize((4,), refcheck=False)
    assert_equal_to_numpy(x, a[:4])
    del v
    x.resize((2, 1))
    assert_equal_to_numpy(x, a[:2].reshape(2, 1))
    assert_raises_everywhere(ValueError, x.resize, (-1,))
    assert_raises_everywhere(TypeError, x.resize, (1.5,))


# -- d2o.numpy's functions as methods ------------------------------------------------------


def test_searchsorted():
    check = Checks()
    a = np.array([0.0, 1.0, 1.0, 2.5, 4.0, 4.0, 7.0])
    for strategy, axis in layouts(1):
        x = make(a, strategy, axis)
        for v in [1.0, [-1.0, 1.0, 4.0, 9.0], np.array([[2.0], [4.0]])]:
            for side in ("left", "right"):
                what = _name(strategy, axis, a.shape, f"searchsorted({v}, {side})")
                _equal(check, x.searchsorted(v, side=side), a.searchsorted(v, side=side), what)
        v = np.array([4.0, -3.0, 1.0])
        _equal(check, x.searchsorted(make(v, "equal")), a.searchsorted(v), "distributed v")
        s = np.argsort(a[::-1], kind="stable")
        y = make(a[::-1].copy(), strategy, axis)
        _equal(check, y.searchsorted(2.0, sorter=s), a[::-1].searchsorted(2.0, sorter=s), "s")
    check.done()


def _is_partition(got: np.ndarray, a: np.ndarray, kth, axis: int) -> bool:
    """numpy's contract: got is a permutation of a along ``axis`` with the kth elements in
    their sorted places, smaller ones before and larger ones after."""
    srt = np.sort(a, axis=axis)
    if not np.array_equal(np.sort(got, axis=axis), srt):
        return False
    g, s = np.moveaxis(got, axis, -1), np.moveaxis(srt, axis, -1)
    for k in np.atleast_1d(kth):
        if not np.array_equal(g[..., k], s[..., k]):
            return False
        if (
            not (g[..., :k] <= g[..., k : k + 1]).all()
            or not (g[..., k:] >= g[..., k : k + 1]).all()
        ):
            return False
    return True


@pytest.mark.parametrize("shape,axis_arg", [((7,), -1), ((4, 5), -1), ((4, 5), 0), ((2, 3, 4), 1)])
def test_partition_and_argpartition(shape, axis_arg):
    for strategy, axis in layouts(len(shape)):
        a = sample(shape, "int32", seed=11)
        for kth in (1, [0, 2]):
            x = make(a, strategy, axis)
            x.partition(kth, axis=axis_arg)
            got = x.get_full_data()
            collective_assert(_is_partition(got, a, kth, axis_arg), f"{strategy}/{axis} {kth}")
            idx = make(a, strategy, axis).argpartition(kth, axis=axis_arg).get_full_data()
            vals = np.take_along_axis(a, idx, axis=axis_arg)
            collective_assert(_is_partition(vals, a, kth, axis_arg), f"arg {strategy}/{axis}")
    x = make(np.arange(6), "equal")
    assert_raises_everywhere(TypeError, x.partition, 1, axis=None)
    assert_raises_everywhere(ValueError, x.partition, 6)


def test_compress_and_choose():
    check = Checks()
    for shape, strategy, axis in _cases([(7,), (4, 5), (2, 3, 4)]):
        a = sample(shape, "float64", seed=12)
        x = make(a, strategy, axis)
        what = _name(strategy, axis, shape)
        cond = [True, False, True]
        _equal(check, x.compress(cond), a.compress(cond), what + " compress")
        _equal(check, x.compress(cond[:2], axis=0), a.compress(cond[:2], axis=0), what + " 0")
        _equal(check, x.compress(cond, axis=-1), a.compress(cond, axis=-1), what + " -1")
        c = np.arange(a.size).reshape(shape) % 3
        y = make(c, strategy, axis)
        choices = [a, -a, np.float64(2.0)]
        _equal(check, y.choose(choices), c.choose(choices), what + " choose")
        dch = [make(a, strategy, axis), -a, 2.0]
        _equal(check, y.choose(dch), c.choose(choices), what + " choose distributed")
        _equal(check, (y + 2).choose(choices, mode="wrap"), (c + 2).choose(choices, mode="wrap"),
               what + " wrap")  # fmt: skip
    check.done()
    x = make(np.arange(4), "equal")
    assert_raises_everywhere(ValueError, x.choose, [np.zeros(4)] * 3)
    assert_raises_everywhere(IndexError, x.compress, [True] * 5)


# -- exports ------------------------------------------------------------------------------


def test_tobytes_and_dumps():
    check = Checks()
    for shape, strategy, axis in _cases([(), (7,), (4, 5), (2, 3, 4), (0, 3)]):
        a = sample(shape, "complex128", seed=13)
        x = make(a, strategy, axis)
        what = _name(strategy, axis, shape)
        for order in ("C", "F"):
            check.true(x.tobytes(order) == a.tobytes(order), f"{what} tobytes {order}")
        back = pickle.loads(x.dumps())
        check.true(type(back) is np.ndarray and np.array_equal(back, a), f"{what} dumps")
    check.done()


def test_dump_and_tofile(shared_dir, comm):
    for shape, strategy, axis in _cases([(), (7,), (4, 5), (2, 3, 4), (0, 3)]):
        a = sample(shape, "int32", seed=14)
        x = make(a, strategy, axis)
        tag = f"{strategy}{axis}_{len(shape)}_{a.size}"
        raw, txt, pkl = (os.path.join(shared_dir, f"{tag}.{e}") for e in ("bin", "txt", "pkl"))
        x.tofile(raw)
        x.tofile(txt, sep=",", format="%d")
        x.dump(pkl)
        comm.barrier()
        ref = f"{txt}.{comm.rank}"  # numpy's text, one file per rank
        a.tofile(ref, sep=",", format="%d")
        with open(txt) as f, open(ref) as g:
            same_text = f.read() == g.read()
        with open(pkl, "rb") as f:
            back = pickle.load(f)
        ok = np.array_equal(np.fromfile(raw, dtype=a.dtype), a.reshape(-1)) and same_text
        collective_assert(ok and np.array_equal(back, a), f"{tag}: tofile/dump")
        comm.barrier()
    x = make(np.arange(3), "equal")
    assert_raises_everywhere(OSError, x.tofile, os.path.join(shared_dir, "no", "such", "dir"))
    assert_raises_everywhere(OSError, x.dump, os.path.join(shared_dir, "no", "such", "dir"))


# -- the piece's methods ------------------------------------------------------------------


def test_byteswap_getfield_setfield():
    check = Checks()
    for shape, strategy, axis in _cases([(), (7,), (4, 5), (2, 3, 4), (0, 3)]):
        a = sample(shape, "complex128", seed=15)
        x = make(a, strategy, axis)
        what = _name(strategy, axis, shape)
        check.equal(x.byteswap(), a.byteswap(), what=what + " byteswap")
        check.equal(x, a, what=what + " byteswap leaves the array")
        b, y = a.copy(), make(a, strategy, axis)
        check.true(y.byteswap(inplace=True) is y, what + " inplace returns the array")
        b.byteswap(inplace=True)
        check.equal(y, b, what=what + " byteswap inplace")
        im = x.getfield(np.float64, 8)
        check.equal(im, a.getfield(np.float64, 8), what=what + " getfield")
        check.true(im.base is x, what + " getfield is a view")
        b, y = a.copy(), make(a, strategy, axis)
        b.setfield(np.float64(5.0), np.float64, 8)
        y.setfield(np.float64(5.0), np.float64, 8)
        check.equal(y, b, what=what + " setfield scalar")
        if a.ndim:
            vals = np.arange(a.size, dtype=np.float64).reshape(shape)
            b.setfield(vals, np.float64, 0)
            y.setfield(make(vals, "equal", 0), np.float64, 0)
            check.equal(y, b, what=what + " setfield distributed")
    check.done()


def test_setflags_strides_ctypes():
    a = np.arange(20.0).reshape(4, 5)
    for strategy, axis in layouts(2):
        x = make(a, strategy, axis)
        p = x.get_local_data(copy=False)
        ok = x.strides == p.strides and x.ctypes.data == p.ctypes.data
        collective_assert(ok, "strides and ctypes are the piece's")
        x.setflags(write=False)
        collective_assert(not x.get_local_data(copy=False).flags.writeable, "write flag")
        assert_raises_everywhere(ValueError, x.fill, 1.0)
        x.setflags(write=True)
        x.fill(2.0)
        assert_equal_to_numpy(x, np.full_like(a, 2.0))
    ro = np.arange(3.0)
    ro.setflags(write=False)  # a view of read-only memory cannot be made writeable
    y = D2O(local_data=ro[:], distribution_strategy="freeform", copy=False)
    assert_raises_everywhere(ValueError, y.setflags, write=True)


def test_no_warnings_from_complex_flat_writes_into_complex():
    x = make(np.zeros(4, complex), "equal")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        x.flat[1:3] = [1j, 2j]
    assert_equal_to_numpy(x, np.array([0, 1j, 2j, 0]))
