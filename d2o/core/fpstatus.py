"""This thread's floating-point status flags (C99 ``<fenv.h>``, through ctypes).

numpy clears the flags before each ufunc loop and reads them after, to warn or raise as
``np.errstate`` says.  Compiled kernels (`d2o.ops.loops`, numexpr) set the same flags
but report nothing; the fused evaluation (`d2o.ops.fused`) clears them before such a
kernel and reads them after.  `AVAILABLE` is False where the C library or the machine's
flag values are unknown: there such kernels run only where every error is ignored.
Local; no communication.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import platform
from typing import Any

__all__ = ["AVAILABLE", "clear", "raised"]

#: numpy's names of the flags (``np.errstate``'s keywords), in the order of `_BITS`
NAMES = ("divide", "over", "under", "invalid")
#: <fenv.h>'s FE_DIVBYZERO, FE_OVERFLOW, FE_UNDERFLOW, FE_INVALID by machine
_BITS = {
    "x86_64": (4, 8, 16, 1),
    "amd64": (4, 8, 16, 1),
    "i386": (4, 8, 16, 1),
    "i686": (4, 8, 16, 1),
    "aarch64": (2, 4, 8, 1),
    "arm64": (2, 4, 8, 1),
}


def _libm() -> Any:
    """The C library's ``feclearexcept`` and ``fetestexcept``, or None."""
    if platform.machine().lower() not in _BITS:
        return None
    try:
        lib = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")
        clear_, test = lib.feclearexcept, lib.fetestexcept
    except (OSError, AttributeError):  # pragma: no cover - no C99 fenv here
        return None
    clear_.argtypes = test.argtypes = [ctypes.c_int]
    clear_.restype = test.restype = ctypes.c_int
    return clear_, test


_LIB = _libm()
AVAILABLE = _LIB is not None
_FLAGS = _BITS.get(platform.machine().lower(), (0, 0, 0, 0))
_ALL = sum(_FLAGS)


def clear() -> None:
    """Clear the four flags of this thread."""
    if _LIB is not None:
        _LIB[0](_ALL)


def raised() -> tuple[str, ...]:
    """numpy's names of the flags this thread raised since `clear` ("divide", "over",
    "under", "invalid"); empty where `AVAILABLE` is False."""
    if _LIB is None:
        return ()
    bits = _LIB[1](_ALL)
    return tuple(name for name, bit in zip(NAMES, _FLAGS) if bits & bit) if bits else ()
