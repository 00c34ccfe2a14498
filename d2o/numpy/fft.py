"""``d2o.numpy.fft``: d2o's distributed FFTs (`d2o.fft`) under numpy's names, plus
``fftshift``/``ifftshift``
(``roll`` along the axes: axis-local) and ``hfft``/``ihfft`` (the bounded fallback)."""

from __future__ import annotations

from typing import Any

import numpy as _np

from ..core.registry import operation
from ..ops import fft as _fft
from ..ops.axislocal import fallback as _fallback
from ..ops.fft import *  # noqa: F403
from ..ops.fft import __all__ as _d2o_all
from .table import implementation as _implementation

__all__ = [*_d2o_all, "fftshift", "ifftshift", "hfft", "ihfft"]


def _shift(x: Any, axes: Any, sign: int) -> Any:
    if not hasattr(x, "distributor"):
        return (_np.fft.fftshift if sign > 0 else _np.fft.ifftshift)(x, axes)
    axes = tuple(range(x.ndim)) if axes is None else (axes,) if _np.ndim(axes) == 0 else tuple(axes)
    shifts = [sign * (x.shape[a] // 2) for a in axes]
    return _implementation("roll")[1](x, shifts, axis=axes)


@operation(traced=False)
def fftshift(x: Any, axes: Any = None) -> Any:
    """numpy's ``fftshift``: a roll along the axes (axis-local)."""
    return _shift(x, axes, 1)


@operation(traced=False)
def ifftshift(x: Any, axes: Any = None) -> Any:
    """numpy's ``ifftshift``: a roll along the axes (axis-local)."""
    return _shift(x, axes, -1)


@operation(traced=False)
def hfft(a: Any, n: Any = None, axis: int = -1, norm: Any = None, out: Any = None) -> Any:
    """numpy's ``hfft`` (the bounded fallback)."""
    return _fallback("fft.hfft", _np.fft.hfft, (a,), {"n": n, "axis": axis, "norm": norm})


@operation(traced=False)
def ihfft(a: Any, n: Any = None, axis: int = -1, norm: Any = None, out: Any = None) -> Any:
    """numpy's ``ihfft`` (the bounded fallback)."""
    return _fallback("fft.ihfft", _np.fft.ihfft, (a,), {"n": n, "axis": axis, "norm": norm})


@operation(traced=False)
def fftfreq(n: int, d: float = 1.0, *, dtype: Any = None, device: Any = None) -> Any:
    """numpy's ``fftfreq`` (d2o.fft's: each rank computes its piece), with ``dtype``."""
    out = _fft.fftfreq(n, d)
    return out if dtype is None else out.astype(dtype)


@operation(traced=False)
def rfftfreq(n: int, d: float = 1.0, *, dtype: Any = None, device: Any = None) -> Any:
    """numpy's ``rfftfreq`` (d2o.fft's), with ``dtype``."""
    out = _fft.rfftfreq(n, d)
    return out if dtype is None else out.astype(dtype)
