"""Every keyword of every public function, exercised at least once against numpy.

Each case passes its keywords by name (``**kw``) and compares with numpy on the
same global data, on every layout: equal results, or the same exception type
on every rank.  `test_every_keyword_is_exercised` derives the list of
(operation, keyword) pairs from the signatures of the public API (the funnel's
table) and fails when a keyword has no case here, so a new keyword needs one.
"""

# The lambdas handed to `same` are called at once, inside the loop that binds them.
# ruff: noqa: B023

from __future__ import annotations

import inspect
import os
import shutil
import tempfile

import numpy as np
import pytest
from _helpers import layouts, make, sample

import d2o
import d2o.numpy as dnp
from d2o import default_comm, distributed_data_object
from d2o.testing import (
    assert_equal_to_numpy,
    assert_layout,
    assert_raises_everywhere,
    collective_assert,
)

D = distributed_data_object
A = sample((4, 5), "float64", seed=3)
I = sample((4, 5), "int64", seed=4)  # noqa: E741
C = sample((6, 4), "complex128", seed=5)


def same(got, want, **tol) -> None:
    """``got()`` against numpy's ``want()``: equal values and dtypes, or numpy's exception
    type raised on every rank."""
    try:
        expected = want()
    except Exception as e:  # numpy refuses: d2o must refuse the same way, everywhere
        assert_raises_everywhere(type(e), got)
        return
    assert_equal_to_numpy(got(), expected, **tol)


def each_layout(a: np.ndarray):
    for strategy, axis in layouts(a.ndim):
        yield make(a, strategy, axis)


#: (operation, keywords, check); ``check(kw)`` must pass ``kw`` by name to the operation.
CASES: list[tuple[str, dict, object]] = []


def case(op: str, **kw):
    def deco(fn):
        CASES.append((op, kw, fn))
        return fn

    return deco


# -- construction ----------------------------------------------------------------------------


@case("distributed_data_object", global_data=A, dtype=np.float32, distribution_strategy="fftw",
      axis=1, copy=True, comm=None, skip_parsing=True, hermitian=True)  # fmt: skip
def _(kw):
    x = D(**kw)
    assert_equal_to_numpy(x, A.astype(np.float32))
    assert_layout(x, axis=1, strategy="fftw")
    assert x.hermitian


@case("distributed_data_object", global_shape=(3, 4), dtype=np.int16)
def _(kw):
    x = D(global_data=7, **kw)
    assert_equal_to_numpy(x, np.full((3, 4), 7, dtype=np.int16))


@case("distributed_data_object", local_data=None, local_shape=None)
def _(kw):
    comm = default_comm()
    piece = np.full((comm.rank + 1, 3), comm.rank, dtype=np.int32)
    want = np.concatenate([np.full((r + 1, 3), r, dtype=np.int32) for r in range(comm.size)])
    x = D(**{**kw, "local_data": piece}, distribution_strategy="freeform")
    assert_equal_to_numpy(x, want)
    y = D(**{**kw, "local_shape": piece.shape}, dtype=np.int32, distribution_strategy="freeform")
    assert y.shape == want.shape and y.get_local_data().shape == piece.shape


@case("layout", mesh=None, split=(1, 0), block=None, comm=None)
def _(kw):
    lay = d2o.layout(**kw)
    x = D(A, distribution_strategy=lay)
    assert_equal_to_numpy(x, A)
    assert_equal_to_numpy(x.sum(axis=0), A.sum(axis=0), rtol=1e-12)
    size = default_comm().size
    y = D(A, distribution_strategy=d2o.layout(mesh=(1, size), split=(0, 1)))
    assert_equal_to_numpy(y.copy(distribution_strategy=lay) * 2, 2 * A)


@case("layout", halo=1)
@case("get_local_data", halos=True)
def _(kw):
    x = D(A, distribution_strategy=d2o.layout(halo=kw.get("halo", 1)))
    x.update_halos()
    padded = x.get_local_data(halos=kw.get("halos", True))
    assert padded.shape[0] == x.local_shape[0] + 2
    assert np.array_equal(padded[1:-1], x.get_local_data())


@case("wrap", local_array=None, axis=1, comm=None)
def _(kw):
    comm = default_comm()
    piece = np.full((2, comm.rank + 1), comm.rank, dtype=np.int64)
    want = np.concatenate([np.full((2, r + 1), r) for r in range(comm.size)], axis=1)
    assert_equal_to_numpy(d2o.wrap(**{**kw, "local_array": piece}), want)


@case("copy", dtype=np.float32, distribution_strategy="equal", axis=1)
def _(kw):
    for x in each_layout(A):
        y = x.copy(**kw)
        assert_equal_to_numpy(y, A.astype(np.float32))
        assert_layout(y, axis=1, strategy="equal")


@case("copy_empty", global_shape=(3, 2), local_shape=None, dtype=np.int8,
      distribution_strategy="not")  # fmt: skip
def _(kw):
    for x in each_layout(A):
        y = x.copy_empty(**kw)
        collective_assert(y.shape == (3, 2) and y.dtype == np.int8, (y.shape, y.dtype))
        assert_layout(y, axis=None, strategy="not")


@case("astype", dtype=np.int32, copy=False)
def _(kw):
    for x in each_layout(A):
        same(lambda: x.astype(**kw), lambda: A.astype(**kw))


# -- reductions ------------------------------------------------------------------------------

REDUCTIONS = ["all", "any", "amax", "amin", "max", "min", "sum", "prod", "mean",
              "nanmax", "nanmin", "nansum"]  # fmt: skip
NUMPY_NAME = {"amax": "max", "amin": "min"}


def _np_reduce(name: str, a: np.ndarray, **kw):
    fn = getattr(np, NUMPY_NAME.get(name, name))
    return fn(a, **kw)


def _reduce_case(name: str) -> None:
    @case(name, axis=1, keepdims=True)
    def _(kw):
        for x in each_layout(A):
            same(lambda: getattr(x, name)(**kw), lambda: _np_reduce(name, A, **kw), rtol=1e-12)

    @case(name, dtype=np.float32)
    def _(kw):
        # numpy's max/min/all/any take no dtype: the same TypeError everywhere
        for x in each_layout(A):
            same(lambda: getattr(x, name)(**kw), lambda: _np_reduce(name, A, **kw), rtol=1e-6)

    @case(name, out=None, axis=0)
    def _(kw):
        want = _np_reduce(name, A, axis=0)
        for x in each_layout(A):
            out = D(np.zeros(want.shape, dtype=want.dtype))
            res = getattr(x, name)(**{**kw, "out": out})
            collective_assert(res is out, f"{name}(out=) did not return out")
            assert_equal_to_numpy(out, want, rtol=1e-12)


for _name in REDUCTIONS:
    _reduce_case(_name)


@case("var", axis=0, dtype=np.float32, ddof=1, keepdims=True, out=None)
@case("std", axis=0, dtype=np.float32, ddof=1, keepdims=True, out=None)
def _moments(kw):
    for name in ("var", "std"):
        want = getattr(np, name)(A, **{**kw, "out": None})
        for x in each_layout(A):
            out = D(np.zeros(want.shape, dtype=want.dtype))
            collective_assert(getattr(x, name)(**{**kw, "out": out}) is out, name)
            assert_equal_to_numpy(out, want, rtol=1e-5)
            assert_equal_to_numpy(getattr(x, name)(ddof=kw["ddof"]), getattr(A, name)(ddof=1),
                                  rtol=1e-12)  # fmt: skip


@case("argmax", axis=1, keepdims=True, out=None)
@case("argmin", axis=1, keepdims=True, out=None)
def _args(kw):
    for name in ("argmax", "argmin"):
        want = getattr(np, name)(I, axis=1, keepdims=True)
        for x in each_layout(I):
            assert_equal_to_numpy(getattr(x, name)(axis=1, keepdims=True), want)
            out = D(np.zeros(want.shape, dtype=np.intp))
            same(lambda: getattr(x, name)(**{**kw, "out": out}),
                 lambda: getattr(np, name)(I, **{**kw, "out": np.zeros(want.shape, np.intp)}))  # fmt: skip


@case("argmax_nonflat", axis=None)
@case("argmin_nonflat", axis=None)
def _nonflat(kw):
    for name in ("argmax", "argmin"):
        want = np.unravel_index(getattr(np, name)(I), I.shape)
        for x in each_layout(I):
            got = getattr(x, name + "_nonflat")(**kw)
            collective_assert(tuple(int(v) for v in got) == tuple(int(v) for v in want), got)


@case("cumsum", axis=1, dtype=np.float32, out=None)
@case("cumprod", axis=1, dtype=np.float32, out=None)
def _cum(kw):
    for name in ("cumsum", "cumprod"):
        want = getattr(np, name)(I, axis=1, dtype=np.float32)
        for x in each_layout(I):
            out = D(np.zeros(want.shape, dtype=np.float32))
            same(lambda: getattr(x, name)(**{**kw, "out": out}), lambda: want)


@case("median", a=None, axis=0, out=None, overwrite_input=True, keepdims=True)
def _(kw):
    want = np.median(A, axis=0, keepdims=True)
    for x in each_layout(A):
        out = D(np.zeros(want.shape))
        collective_assert(d2o.median(**{**kw, "a": x, "out": out}) is out)
        assert_equal_to_numpy(out, want)
        assert_equal_to_numpy(x, A)  # overwrite_input may not change the input here
        assert_equal_to_numpy(x.median(axis=1, keepdims=True), np.median(A, axis=1, keepdims=True))


# -- elementwise and original-API methods -------------------------------------------------------


@case("apply_scalar_function", function=np.exp, inplace=False, dtype=np.float32)
def _(kw):
    for x in each_layout(A):
        assert_equal_to_numpy(x.apply_scalar_function(**kw), np.exp(A).astype(np.float32),
                              rtol=1e-6)  # fmt: skip
        y = x.copy()
        y.apply_scalar_function(np.negative, inplace=True)
        assert_equal_to_numpy(y, -A)


@case("apply_generator", generator=None, copy=True)
def _(kw):
    for x in each_layout(A):
        x.apply_generator(**{**kw, "generator": lambda shape: np.full(shape, 2.5)})
        assert_equal_to_numpy(x, np.full(A.shape, 2.5))


@case("nan_to_num", copy=True, nan=-1.0, posinf=9.0, neginf=-9.0)
def _(kw):
    f = np.array([[np.nan, np.inf, -np.inf, 1.0]] * 3)
    for x in each_layout(f):
        same(lambda: x.nan_to_num(**kw), lambda: np.nan_to_num(f, **kw))
        y = x.copy()
        y.nan_to_num(copy=False, nan=0.0)
        assert_equal_to_numpy(y, np.nan_to_num(f, nan=0.0))


@case("equal", other=None)
def _(kw):
    for x in each_layout(A):
        collective_assert(x.equal(**{**kw, "other": A.copy()}) is True)
        collective_assert(x.equal(**{**kw, "other": A + 1}) is False)


@case("flatten", inplace=True)
def _(kw):
    for x in each_layout(A):
        assert_equal_to_numpy(x.flatten(inplace=False), A.flatten())
        y = x.flatten(**kw)  # the original D2O's copy-free flattening: x keeps its shape
        assert_equal_to_numpy(y, A.flatten())
        assert_equal_to_numpy(x, A)


# -- data access --------------------------------------------------------------------------------


@case("get_data", key=None, local_keys=False, copy=True)
def _(kw):
    for x in each_layout(A):
        got = x.get_data(**{**kw, "key": (slice(1, 3), [0, 2])})
        assert_equal_to_numpy(got, A[1:3, [0, 2]])
        piece = x.get_data(slice(None), local_keys=True, copy=False)
        collective_assert(piece.shape[1:] == A.shape[1:] or x.distributor.axis == 1, piece.shape)


@case("set_data", data=None, to_key=None, from_key=None, local_keys=False)
def _(kw):
    src = np.arange(40.0).reshape(8, 5)
    for x in each_layout(A):
        want = A.copy()
        want[1:3] = src[4:6]
        x.set_data(**{**kw, "data": src, "to_key": slice(1, 3), "from_key": slice(4, 6)})
        assert_equal_to_numpy(x, want)


@case("set_full_data", data=None)
def _(kw):
    for x in each_layout(A):
        x.set_full_data(**{**kw, "data": 2 * A})
        assert_equal_to_numpy(x, 2 * A)


@case("get_local_data", copy=True)
@case("set_local_data", data=None, copy=True)
def _(kw):
    for x in each_layout(A):
        piece = x.get_local_data(copy=True)
        piece[...] = 0  # a copy: the array keeps its values
        assert_equal_to_numpy(x, A)
        x.set_local_data(data=piece + 1, copy=True)
        assert_equal_to_numpy(x, np.ones_like(A))


@case("get_full_data", target_rank=0)
@case("gather", rank=0)
def _(kw):
    comm = default_comm()
    for x in each_layout(A):
        for got in (x.get_full_data(target_rank=0), x.gather(rank=0)):
            ok = np.array_equal(got, A) if comm.rank == 0 else got is None
            collective_assert(ok, f"rank {comm.rank} got {got!r}")


@case("enumerate", axis=0)
def _(kw):
    for x in each_layout(A):
        pairs = list(x.enumerate(**kw))
        local = x.get_local_data()
        cols = x.distributor.global_indices(1)
        ok = len(pairs) == local.shape[0] and all(
            np.array_equal(local[i], A[g][cols]) for i, g in pairs
        )
        collective_assert(ok, f"enumerate gave {pairs}")


@case("redistribute", axis=1)
def _(kw):
    for x in each_layout(A):
        y = x.redistribute(**kw)
        assert_equal_to_numpy(y, A)
        assert_layout(y, axis=1)


# -- shape functions and products -----------------------------------------------------------------


@case("reshape", order="C", obj=None)
def _(kw):
    for x in each_layout(A):
        same(lambda: x.reshape(5, 4, order="C"), lambda: A.reshape(5, 4, order="C"))
        same(lambda: d2o.reshape(x, 20, order=kw["order"]), lambda: A.reshape(20))
        same(lambda: d2o.reshape(obj=x, order="F"), lambda: A.reshape(order="F"))  # TypeError
        for shape in ((5, 4), (2, 10), (20,), (2, 2, 5)):
            same(lambda: d2o.reshape(x, shape, order="F"), lambda: A.reshape(shape, order="F"))
        same(lambda: x.reshape(20, order="K"), lambda: A.reshape(20, order="K"))


@case("swapaxes", obj=None, axis1=0, axis2=1)
@case("transpose", obj=None)
def _(kw):
    for x in each_layout(A):
        assert_equal_to_numpy(d2o.swapaxes(obj=x, axis1=0, axis2=1), np.swapaxes(A, 0, 1))
        assert_equal_to_numpy(x.swapaxes(axis1=1, axis2=0), A.swapaxes(1, 0))
        assert_equal_to_numpy(d2o.transpose(obj=x), A.T)


@case("dot", other=None, a=None, b=None)
@case("matmul", a=None, b=None)
@case("vdot", a=None, b=None)
def _(kw):
    v = sample((5,), "int64", seed=9)
    for x in each_layout(A):
        assert_equal_to_numpy(x.dot(other=v), A.dot(v), rtol=1e-12)
        assert_equal_to_numpy(d2o.dot(a=x, b=v), np.dot(A, v), rtol=1e-12)
        assert_equal_to_numpy(d2o.matmul(a=x, b=v), A @ v, rtol=1e-12)
        assert_equal_to_numpy(d2o.vdot(a=x, b=A), np.vdot(A, A), rtol=1e-12)


@case("bincount", x=None, weights=None, minlength=12)
def _(kw):
    xs = np.array([0, 3, 3, 1, 7, 3], dtype=np.int64)
    w = np.linspace(0.0, 1.0, 6)
    for x in each_layout(xs):
        same(lambda: d2o.bincount(x=x, weights=w, minlength=12),
             lambda: np.bincount(xs, weights=w, minlength=12), rtol=1e-12)  # fmt: skip


@case("unique", x=None)
@case("nonzero", x=None)
@case("where", condition=None, x=None, y=None)
def _(kw):
    for x in each_layout(I):
        assert_equal_to_numpy(d2o.unique(x=x), np.unique(I))
        got = d2o.nonzero(x=x > 0)
        for g, w in zip(got, np.nonzero(I > 0)):
            assert_equal_to_numpy(g, w)
        assert_equal_to_numpy(d2o.where(condition=x > 0, x=x, y=-1), np.where(I > 0, I, -1))


@case("show", obj=None, file=None, rank=None)
def _(kw):
    import io

    for x in each_layout(A):
        buf = io.StringIO()
        text = d2o.show(obj=x, file=buf, rank=None)  # every rank prints
        printed = text == buf.getvalue().rstrip("\n") or text in buf.getvalue()
        collective_assert(printed and str(A.shape[0]) in text, text)


@case("get_option", name="gather")
def _(kw):
    assert d2o.get_option(**kw) in ("allow", "warn", "raise")


# -- FFT -------------------------------------------------------------------------------------------

FFT_1D = ["fft", "ifft", "rfft", "irfft"]
FFT_ND = ["fft2", "ifft2", "fftn", "ifftn", "rfftn", "irfftn"]


def _fft_case(name: str) -> None:
    npf = getattr(np.fft, name)
    data = C.real.copy() if name.startswith("rfft") else C
    if name in FFT_1D:
        kw0 = dict(n=5, axis=0, norm="ortho", dist_axis=1)
    else:
        kw0 = dict(s=(5, 3), axes=(0, 1), norm="forward", dist_axis=1)

    @case("fft." + name, a=None, **kw0)
    def _(kw):
        np_kw = {k: v for k, v in kw.items() if k not in ("a", "dist_axis")}
        want = npf(data, **np_kw)
        for x in each_layout(data):
            got = getattr(d2o.fft, name)(**{**kw, "a": x})
            assert_equal_to_numpy(got, want, rtol=1e-10, atol=1e-10)
            assert_layout(got, axis=None if x.distributor.replicated else 1)


for _name in FFT_1D + FFT_ND:
    _fft_case(_name)


@case("fft.fftfreq", n=7, d=0.5, distribution_strategy="fftw", comm=None)
@case("fft.rfftfreq", n=7, d=0.5, distribution_strategy="fftw", comm=None)
def _(kw):
    for name in ("fftfreq", "rfftfreq"):
        got = getattr(d2o.fft, name)(**kw)
        assert_equal_to_numpy(got, getattr(np.fft, name)(7, d=0.5))
        assert_layout(got, strategy="fftw")


# -- files ---------------------------------------------------------------------------------------


@pytest.fixture
def tmpdir_shared():
    comm = default_comm()
    path = comm.bcast(tempfile.mkdtemp(prefix="d2o-kw-") if comm.rank == 0 else None)
    yield path
    comm.barrier()
    if comm.rank == 0:  # (every rank is done with it)
        shutil.rmtree(path, ignore_errors=True)


def _file_cases():
    @case("save", path=None, obj=None, overwrite=True)
    @case("load", path=None, distribution_strategy="fftw", axis=1, comm=None)
    def _(kw, tmp):
        f = os.path.join(tmp, "a.npy")
        x = make(A, "equal", 0)
        d2o.save(path=f, obj=x, overwrite=False)
        d2o.save(path=f, obj=x * 2, overwrite=True)
        y = d2o.load(path=f, distribution_strategy="fftw", axis=1, comm=None)
        assert_equal_to_numpy(y, 2 * A)
        assert_layout(y, axis=1, strategy="fftw")
        collective_assert(np.array_equal(np.load(f), 2 * A), "the file after save")
        x.save(f, overwrite=True)  # the method's own keywords below
        collective_assert(np.array_equal(np.load(f), A), "the file after x.save")

    @case("save", alias="ds", path=None, overwrite=True, overwriting=True, overwriteQ=True)
    def _(kw, tmp):
        pytest.importorskip("h5py")
        f = os.path.join(tmp, "b.h5")
        x = make(A, "equal", 1)
        x.save(alias="ds", path=f, overwriteQ=True)
        (x + 1).save(alias="ds", path=f, overwriting=True)
        (x + 2).save(alias="ds", path=f, overwrite=True)
        y = D(alias="ds", path=f)
        assert_equal_to_numpy(y, A + 2)

    @case("savetxt", fname=None, X=None, fmt="%.3f", delimiter=",", newline="\n", header="h",
          footer="f", comments="% ", encoding="utf-8")  # fmt: skip
    def _(kw, tmp):
        f = os.path.join(tmp, "t.txt")
        x = make(A, "equal", 0)
        opts = dict(fmt="%.3f", delimiter=",", newline="\n", header="h", footer="f",
                    comments="% ", encoding="utf-8")  # fmt: skip
        d2o.savetxt(fname=f, X=x, **opts)
        want = os.path.join(tmp, "want.txt")
        if default_comm().rank == 0:
            np.savetxt(want, A, **opts)
        default_comm().barrier()
        with open(f, "rb") as got_file, open(want, "rb") as want_file:
            same = got_file.read() == want_file.read()
        collective_assert(same, "savetxt's file is numpy's")

    @case("to_hdf5", obj=None, path=None, dataset="d", overwrite=True, attrs={"k": 1},
          chunks=(2, 5), compression=None, compression_opts=None)  # fmt: skip
    @case("from_hdf5", path_or_group=None, dataset="d", sel=None, distribution_strategy="not",
          axis=0, comm=None)  # fmt: skip
    def _(kw, tmp):
        h5py = pytest.importorskip("h5py")
        f = os.path.join(tmp, "c.h5")
        x = make(A, "fftw", 1)
        d2o.to_hdf5(obj=x, path=f, dataset="d", overwrite=True, attrs={"k": 1}, chunks=(2, 5),
                    compression=None, compression_opts=None)  # fmt: skip
        x.to_hdf5(path=f, dataset="e", overwrite=False)
        y = d2o.from_hdf5(path_or_group=f, dataset="d", sel=(slice(1, 3),),
                          distribution_strategy="not", axis=0, comm=None)  # fmt: skip
        assert_equal_to_numpy(y, A[1:3])
        assert_equal_to_numpy(d2o.from_hdf5(f, "e"), A)
        ok = True
        if default_comm().rank == 0:
            with h5py.File(f, "r") as h:
                ok = h["d"].attrs["k"] == 1 and h["d"].chunks == (2, 5)
        collective_assert(ok, "the dataset's attributes and chunks")

    @case("to_zarr", obj=None, path=None, overwrite=True, chunks=(1, 5), compressors=None,
          attrs={"k": 2})  # fmt: skip
    @case("from_zarr", path_or_array=None, sel=None, distribution_strategy="equal", axis=1,
          comm=None)  # fmt: skip
    def _(kw, tmp):
        zarr = pytest.importorskip("zarr")
        f = os.path.join(tmp, "z.zarr")
        x = make(A, "equal", 0)
        d2o.to_zarr(obj=x, path=f, overwrite=True, chunks=(1, 5), compressors=None,
                    attrs={"k": 2})  # fmt: skip
        x.to_zarr(path=f, overwrite=True)
        y = d2o.from_zarr(path_or_array=f, sel=(slice(None), slice(1, 4)),
                          distribution_strategy="equal", axis=1, comm=None)  # fmt: skip
        assert_equal_to_numpy(y, A[:, 1:4])
        assert_layout(y, axis=1, strategy="equal")
        assert zarr.open_array(f, mode="r").attrs.get("k") in (2, None)


_file_cases()


# -- numpy's ndarray methods (issue 31, item 1) ------------------------------------------------


@case("put", indices=None, values=None, mode="wrap")
def _(kw):
    for x in each_layout(A):
        b = A.copy()
        b.put(indices=[0, 23, -3], values=[1.0, 2.0], mode="wrap")
        x.put(**{**kw, "indices": [0, 23, -3], "values": [1.0, 2.0]})
        assert_equal_to_numpy(x, b)


@case("searchsorted", v=None, side="right", sorter=None)
def _(kw):
    s = np.sort(A.reshape(-1))
    for x in each_layout(s):
        same(lambda: x.searchsorted(**{**kw, "v": s[3]}), lambda: s.searchsorted(s[3], "right"))


@case("partition", kth=2, axis=0, kind="introselect", order=None)
@case("argpartition", kth=2, axis=0, kind="introselect", order=None)
def _(kw):
    want = np.sort(A, axis=0)[2]
    for x in each_layout(A):
        idx = x.argpartition(**kw).get_full_data()
        assert_equal_to_numpy(x.copy()[0], A[0])  # argpartition leaves x
        x.partition(**kw)
        assert_equal_to_numpy(x[2], want)
        assert_equal_to_numpy(np.take_along_axis(A, idx, axis=0)[2], want)


@case("compress", condition=None, axis=1, out=None)
def _(kw):
    cond = [True, False, True]
    for x in each_layout(A):
        same(lambda: x.compress(**{**kw, "condition": cond}), lambda: A.compress(cond, axis=1))


@case("choose", choices=None, out=None, mode="clip")
def _(kw):
    for y in each_layout(I):
        same(lambda: y.choose(**{**kw, "choices": [A, -A]}), lambda: I.choose([A, -A], mode="clip"))


@case("byteswap", inplace=True)
@case("tobytes", order="F")
def _(kw):
    for x in each_layout(A):
        assert x.tobytes(order="F") == A.tobytes(order="F")
        assert x.byteswap(inplace=True) is x
        assert_equal_to_numpy(x, A.byteswap())


@case("getfield", dtype=np.float64, offset=8)
@case("setfield", val=None, dtype=np.float64, offset=8)
def _(kw):
    for x in each_layout(C):
        assert_equal_to_numpy(x.getfield(dtype=np.float64, offset=8), C.imag)
        x.setfield(val=1.5, dtype=np.float64, offset=8)
        assert_equal_to_numpy(x, C.real + 1.5j)


@case("setflags", write=False, align=None, uic=None)
@case("view", dtype=np.int64, type=None)
@case("resize", refcheck=False)
def _(kw):
    for x in each_layout(A):
        assert_equal_to_numpy(x.view(dtype=np.int64, type=None), A.view(np.int64))
        x.setflags(write=False, align=None, uic=None)
        assert_raises_everywhere(ValueError, x.fill, 0.0)
        x.setflags(write=True)
        b = A.copy()
        b.resize((3, 3), refcheck=False)
        x.resize((3, 3), refcheck=False)
        assert_equal_to_numpy(x, b)


@case("window", shared=False)
def _(kw):
    """A window's gets through MPI calls (``shared=False``) and through shared memory give
    the same elements (one-sided: every rank reads every element of the first row)."""
    for x in each_layout(A):
        for shared in (False, True):
            with x.window(shared=shared) as w:
                got = w.get((0, slice(None)))
            collective_assert(np.array_equal(got, A[0]), (shared, got))


@case("tofile", fid=None, sep=" ", format="%.3f")
@case("dump", file=None)
def _(kw, tmp):
    comm = default_comm()
    for i, x in enumerate(each_layout(A)):
        t, p, r = (os.path.join(tmp, f"m{i}.{e}") for e in ("txt", "pkl", f"{comm.rank}"))
        x.tofile(fid=t, sep=" ", format="%.3f")
        x.dump(file=p)
        comm.barrier()
        A.tofile(r, sep=" ", format="%.3f")
        with open(t) as f, open(r) as g:
            assert f.read() == g.read()
        np.testing.assert_array_equal(np.load(p, allow_pickle=True), A)
        comm.barrier()


FILE_OPS = {
    "save",
    "load",
    "savetxt",
    "to_hdf5",
    "from_hdf5",
    "to_zarr",
    "from_zarr",
    "tofile",
    "dump",
}


@pytest.mark.parametrize(
    "index", range(len(CASES)), ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)]
)
def test_keyword_case(index, tmpdir_shared):
    op, kw, check = CASES[index]
    if op in FILE_OPS:
        check(kw, tmpdir_shared)
    else:
        check(kw)


# -- the coverage audit ------------------------------------------------------------------------------

#: Keywords that take no value comparable with numpy, with the reason.
NOT_NUMPY = {}


def _public_keywords() -> set:
    """(operation, keyword) for every keyword parameter of the public API (the funnel's names)."""
    pairs = set()
    cls = distributed_data_object
    for attr in dir(cls):
        val = inspect.getattr_static(cls, attr)
        if inspect.isfunction(val) and (not attr.startswith("_") or attr == "__init__"):
            name = "distributed_data_object" if attr == "__init__" else attr
            pairs |= {(name, p) for p in _keywords(val, skip_first=True)}
    quiet = {"trace", "set_options", "options", "default_comm"}
    for name in d2o.__all__:
        obj = getattr(d2o, name)
        if inspect.isfunction(obj) and name not in quiet:
            pairs |= {(name, p) for p in _keywords(obj)}
    for name in d2o.fft.__all__:
        pairs |= {("fft." + name, p) for p in _keywords(getattr(d2o.fft, name))}
    return pairs


def _keywords(fn, skip_first: bool = False) -> list:
    params = list(inspect.signature(fn).parameters.values())[1 if skip_first else 0 :]
    return [p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


def test_every_keyword_is_exercised():
    covered = {(op, k) for op, kw, _ in CASES for k in kw}
    missing = sorted(_public_keywords() - covered - set(NOT_NUMPY))
    assert not missing, f"keywords without a case in {__file__}: {missing}"


def test_out_follows_numpy_rules():
    """out= must be distributed, of the result's shape, and same-kind castable; nothing is
    written when it is refused."""
    for x in each_layout(A):
        for bad, exc in (
            (np.zeros(5), TypeError),  # a numpy out would need a gather
            (D(np.zeros(4)), ValueError),  # shape (4,) for a (5,) result
            (D(np.zeros(5, dtype=np.int64)), TypeError),  # float64 -> int64 is not same_kind
        ):
            keep = bad.copy()
            for name in ("sum", "mean", "var", "max"):
                assert_raises_everywhere(exc, getattr(x, name), axis=0, out=bad)
            assert_equal_to_numpy(bad, keep.get_full_data() if isinstance(keep, D) else keep)
        out = D(np.zeros(5, dtype=np.complex128))  # float64 -> complex128 is allowed
        collective_assert(x.sum(axis=0, out=out) is out)
        assert_equal_to_numpy(out, A.sum(axis=0).astype(np.complex128), rtol=1e-12)
        out2 = D(np.zeros(4 * 5))
        collective_assert(x.cumsum(out=out2) is out2)
        assert_equal_to_numpy(out2, A.cumsum(), rtol=1e-12)


@case("linalg.solve", overwrite_a=True, overwrite_b=True)
def _(kw):
    """d2o's extension (scipy.linalg.solve's convention): numpy's solution either way."""
    a = sample((6, 6), "float64", seed=8) + 6 * np.eye(6)
    b = sample((6, 2), "float64", seed=9)
    for x in each_layout(a):
        same(lambda: dnp.linalg.solve(x, b, **kw), lambda: np.linalg.solve(a, b), rtol=1e-10)


@case("to_device", stream=None)
def _(kw):
    x = D(A)
    assert x.to_device("cpu", **kw) is x


# -- numpy's other ndarray methods (d2o.numpy's functions) ------------------------------------


@case("clip", min=-1.0, max=2.0, out=None)
@case("round", decimals=1, out=None)
@case("squeeze", axis=None)
@case("diagonal", offset=1, axis1=0, axis2=1)
@case("trace", offset=-1, axis1=0, axis2=1, dtype=np.float32, out=None)
@case("repeat", repeats=2, axis=1)
@case("take", indices=[0, 2], axis=1, out=None, mode="raise")
@case("argsort", axis=0, kind="stable", order=None, stable=True)
def _methods(kw):
    a = A / 3
    for name, k in (("clip", {"min": -1.0, "max": 2.0, "out": None}),
                    ("round", {"decimals": 1, "out": None}), ("squeeze", {"axis": None}),
                    ("diagonal", {"offset": 1, "axis1": 0, "axis2": 1}),
                    ("trace", {"offset": -1, "axis1": 0, "axis2": 1, "dtype": np.float32}),
                    ("repeat", {"repeats": 2, "axis": 1}),
                    ("take", {"indices": [0, 2], "axis": 1, "mode": "raise"}),
                    ("argsort", {"axis": 0, "kind": "stable", "stable": True})):  # fmt: skip
        for x in each_layout(a):
            assert_equal_to_numpy(getattr(x, name)(**k), getattr(a, name)(**k), rtol=1e-6)


@case("sort", axis=1, kind=None, order=None)
@case("fill", value=2.5)
def _in_place(kw):
    for x in each_layout(A):
        y, b = x.copy(), A.copy()
        y.sort(axis=0, kind=None, order=None)
        b.sort(axis=0)
        assert_equal_to_numpy(y, b)
        y.fill(value=2.5)
        assert_equal_to_numpy(y, np.full(A.shape, 2.5))
        collective_assert(x.item(0, 1) == A.item(0, 1) and x.tolist() == A.tolist())
