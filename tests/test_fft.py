"""d2o.fft against numpy.fft, on every layout; bounded memory of a distributed 1-D FFT."""

from __future__ import annotations

import numpy as np
import pytest
from _helpers import mesh_names, spec, traced_peak

import d2o.fft as dfft
from d2o import distributed_data_object as D2O
from d2o.core.comm import default_comm
from d2o.testing import assert_equal_to_numpy, assert_raises_everywhere, collective_assert

COMM = default_comm()
RNG = np.random.default_rng(1234)
TOL = dict(rtol=1e-10, atol=1e-10)


def _layouts(ndim):
    meshes = [(m, 0) for m in mesh_names(ndim)]
    return [("not", 0)] + [(s, ax) for s in ("equal", "fftw") for ax in range(ndim)] + meshes


def _freeform(a, axis):
    lengths = [0] * COMM.size
    for i in range(a.shape[axis]):
        lengths[(i * 7) % COMM.size] += 1
    start = sum(lengths[: COMM.rank])
    piece = np.take(a, np.arange(start, start + lengths[COMM.rank]), axis=axis)
    return D2O(local_data=piece, distribution_strategy="freeform", axis=axis)


def _complex(shape):
    return RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)


@pytest.mark.parametrize("shape", [(16,), (12,), (7,), (1,), (8, 6), (9, 2), (3, 4, 5)], ids=str)
def test_fftn_ifftn_every_layout(shape):
    a = _complex(shape)
    for layout in _layouts(len(shape)):
        x = D2O(a, distribution_strategy=spec(layout[0]), axis=layout[1])
        y = dfft.fftn(x)
        assert_equal_to_numpy(y, np.fft.fftn(a), **TOL)
        collective_assert(y.distributor is x.distributor, f"{layout}: output layout changed")
        assert_equal_to_numpy(dfft.ifftn(x, norm="ortho"), np.fft.ifftn(a, norm="ortho"), **TOL)
    x = _freeform(a, len(shape) - 1)
    assert_equal_to_numpy(dfft.fftn(x, norm="forward"), np.fft.fftn(a, norm="forward"), **TOL)


@pytest.mark.parametrize("shape", [(10,), (13,), (6, 5), (4, 1)], ids=str)
def test_fft_along_each_axis(shape):
    a = _complex(shape)
    r = a.real.copy()
    for layout in _layouts(len(shape)):
        x = D2O(a, distribution_strategy=spec(layout[0]), axis=layout[1])
        xr = D2O(r, distribution_strategy=spec(layout[0]), axis=layout[1])
        for ax in range(len(shape)):
            assert_equal_to_numpy(dfft.fft(x, axis=ax), np.fft.fft(a, axis=ax), **TOL)
            assert_equal_to_numpy(
                dfft.ifft(x, n=7, axis=ax, norm="forward"),
                np.fft.ifft(a, n=7, axis=ax, norm="forward"),
                **TOL,
            )
            assert_equal_to_numpy(dfft.rfft(xr, axis=ax), np.fft.rfft(r, axis=ax), **TOL)
            assert_equal_to_numpy(dfft.irfft(x, n=9, axis=ax), np.fft.irfft(a, n=9, axis=ax), **TOL)


@pytest.mark.parametrize("shape", [(8, 6), (5, 7), (3, 4, 6)], ids=str)
def test_rfftn_irfftn(shape):
    r = RNG.standard_normal(shape)
    for layout in _layouts(len(shape)):
        x = D2O(r, distribution_strategy=spec(layout[0]), axis=layout[1])
        k = dfft.rfftn(x, norm="ortho")
        assert_equal_to_numpy(k, np.fft.rfftn(r, norm="ortho"), **TOL)
        back = dfft.irfftn(k, s=shape, norm="ortho")
        assert_equal_to_numpy(back, r, **TOL)
    x = D2O(r)
    k = dfft.rfftn(x, axes=(0, 1), dist_axis=1)
    collective_assert(k.axis == 1, f"dist_axis=1 gave axis {k.axis}")
    assert_equal_to_numpy(k, np.fft.rfftn(r, axes=(0, 1)), **TOL)
    s = (4, 3) if len(shape) == 2 else (4, 3, 5)
    assert_equal_to_numpy(
        dfft.irfftn(k, s=s[:2], axes=(0, 1)),
        np.fft.irfftn(np.fft.rfftn(r, axes=(0, 1)), s=s[:2], axes=(0, 1)),
        **TOL,
    )


def test_fft2_and_s():
    a = _complex((6, 8))
    x = D2O(a, axis=1)
    assert_equal_to_numpy(dfft.fft2(x), np.fft.fft2(a), **TOL)
    assert_equal_to_numpy(dfft.ifft2(x, s=(5, 9)), np.fft.ifft2(a, s=(5, 9)), **TOL)
    assert_equal_to_numpy(dfft.fftn(x, s=(4,), axes=(0,)), np.fft.fftn(a, s=(4,), axes=(0,)), **TOL)


def test_single_precision_and_real_input():
    a = RNG.standard_normal((8, 4)).astype(np.float32)
    x = D2O(a)
    y = dfft.fftn(x)
    assert_equal_to_numpy(y, np.fft.fftn(a).astype(y.dtype), rtol=1e-4, atol=1e-4)


def test_freqs():
    for n in (1, 8, 9):
        assert_equal_to_numpy(dfft.fftfreq(n, 0.5), np.fft.fftfreq(n, 0.5), **TOL)
        assert_equal_to_numpy(dfft.rfftfreq(n), np.fft.rfftfreq(n), **TOL)
        f = dfft.fftfreq(n, distribution_strategy="not")
        collective_assert(np.allclose(f.local_array, np.fft.fftfreq(n)))


def test_errors_raise_everywhere():
    x = D2O(_complex((4, 4)))
    assert_raises_everywhere(ValueError, dfft.fftn, x, norm="bogus")
    assert_raises_everywhere(ValueError, dfft.fft, x, n=0)
    assert_raises_everywhere(np.exceptions.AxisError, dfft.fft, x, axis=2)
    assert_raises_everywhere(TypeError, dfft.fft, np.zeros(4))


def test_1d_fft_memory_is_bounded():
    """A 1-D FFT never holds more than old + new share + one more share + a constant."""
    n = (1 << 16) * COMM.size  # 1 MiB of complex128 per rank
    x = D2O(global_shape=(n,), dtype=np.complex128)
    x.local_array[...] = np.exp(2j * np.pi * 3 * np.arange(*x.distributor.region(COMM.rank)[0]) / n)
    share = x.local_array.nbytes
    y, peak = traced_peak(lambda i: dfft.fft(x))
    # peak counts allocations after the input existed: the output share plus one transient
    # share during each all-to-all, plus bounded twiddle chunks; a gather would need n * 16.
    collective_assert(
        peak <= 2 * share + (512 << 10), f"peak {peak / share:.2f} local shares (share {share})"
    )
    lo, hi = y.distributor.region(COMM.rank)[0]
    expected = np.zeros(hi - lo, dtype=complex)
    if lo <= 3 < hi:
        expected[3 - lo] = n
    collective_assert(np.allclose(y.local_array, expected, atol=1e-6), "wrong spectrum")


@pytest.mark.parametrize("n", [1, 7, 6])
def test_single_precision_is_kept(n):
    """numpy keeps complex64/float32 precision; so does every distributed path (the
    chirp-z one for prime lengths computes in double, then casts back)."""
    a = (np.arange(n) + 1j).astype(np.complex64)
    x = D2O(a)
    for fn in (dfft.fft, dfft.ifft):
        got = fn(x)
        want = getattr(np.fft, fn.__name__)(a)
        collective_assert(got.dtype == want.dtype == np.complex64, f"{got.dtype}, {want.dtype}")
        assert_equal_to_numpy(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape", [(4, 3, 5), (1, 1, 9)])
@pytest.mark.parametrize("axis", [0, 1, 2])
def test_fft_along_the_split_axis_of_a_3d_array(shape, axis):
    # (1, 1, 9) split along its last axis has no other axis to move the split to: the
    # transform runs along the split axis, moved to the front and back by (2, 0, 1), which
    # is not its own inverse
    a = np.arange(np.prod(shape), dtype=np.float64).reshape(shape) ** 1.5
    x = D2O(a, distribution_strategy="equal", axis=axis)
    assert_equal_to_numpy(dfft.fft(x, axis=axis), np.fft.fft(a, axis=axis), rtol=1e-10)
    assert_equal_to_numpy(dfft.ifft(x, axis=axis), np.fft.ifft(a, axis=axis), rtol=1e-10)
