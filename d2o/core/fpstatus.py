"""This thread's floating-point status flags (C99 ``<fenv.h>``, through ctypes).

numpy clears the flags before each ufunc loop and reads them after, to warn or raise as
``np.errstate`` says.  Compiled kernels (`d2o.ops.loops`, numexpr) set the same flags
but report nothing; the fused evaluation (`d2o.ops.fused`) clears them before such a
kernel and reads them after.  `available` is False where the C library or the
machine's flag values are unknown: there such kernels run only where every error is
ignored.  The C library is looked up at the first use (import-time budget).  Local; no
communication.
"""

from __future__ import annotations

import platform
from typing import Any

__all__ = ["NAMES", "available", "clear", "raised"]

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
_FLAGS = _BITS.get(platform.machine().lower(), (0, 0, 0, 0))
_ALL = sum(_FLAGS)
_LIB: list = []  # [(feclearexcept, fetestexcept) or None], once looked up


def _lib() -> Any:
    """The C library's ``feclearexcept`` and ``fetestexcept``, or None (looked up once:
    the process's own symbols first, where numpy's C library already is)."""
    if not _LIB:
        import ctypes  # (standard library, loaded at the first kernel)

        found = None
        if _ALL:
            for name in (None, "libm.so.6", "libm.dylib"):
                try:
                    lib = ctypes.CDLL(name)
                    found = (lib.feclearexcept, lib.fetestexcept)
                    break
                except (OSError, AttributeError):
                    continue
        if found is not None:
            for f in found:
                f.argtypes, f.restype = [ctypes.c_int], ctypes.c_int
        _LIB.append(found)
    return _LIB[0]


def available() -> bool:
    """True where this thread's flags can be read."""
    return _lib() is not None


def clear() -> None:
    """Clear the four flags of this thread."""
    lib = _lib()
    if lib is not None:
        lib[0](_ALL)


def raised() -> tuple[str, ...]:
    """numpy's names of the flags this thread raised since `clear` ("divide", "over",
    "under", "invalid"); empty where `available` is False."""
    lib = _lib()
    if lib is None:
        return ()
    bits = lib[1](_ALL)
    return tuple(name for name, bit in zip(NAMES, _FLAGS) if bits & bit) if bits else ()
