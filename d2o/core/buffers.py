"""Large local buffers kept for reuse: a fresh array's pages each cost a fault.

A loop that makes large temporaries each step (``u_old = u.copy()``, ``u - u_old``) and
drops them at the end of the step gets fresh pages every time: the C library gives
large blocks back to the system when they are freed (two 11 MB blocks freed together on
a 1200 x 1200 grid: about 1,000 page faults a step, measured; close to half of a fused
Laplace sweep's time).  The fused kernels' results come from here (`d2o.ops.fused`);
with one of the two kept, the other's block is reused by the C library itself.  `empty` hands out pieces of `MIN_BYTES` or more from buffers
it keeps (at most `HELD`, of which at most `FREE` unused: the memory kept beyond what
arrays use is at most two pieces; the least recently used go first): a buffer is reused
only when nothing else references it any more (its reference count: every array made
from it, views of views included, holds the buffer itself as its ``base``), so a
reused buffer is never visible through an array still alive.  Local; no communication.
"""

from __future__ import annotations

import math
import sys
from typing import Any

import numpy as np

__all__ = ["empty", "held", "kept", "MIN_BYTES", "HELD", "FREE"]

#: pieces smaller than this come from numpy directly (the C library's own free lists
#: serve them without faults)
MIN_BYTES = 1 << 20
#: how many buffers are kept at most (in use or free), and how many free ones
HELD = 8
FREE = 2

_POOL: list[np.ndarray] = []  # least recently handed out first
#: a buffer's references in this module's loops when no array uses it: the pool, the
#: loop's name and `sys.getrefcount`'s argument
_UNUSED = 3


def empty(shape: Any, dtype: Any) -> np.ndarray:
    """An uninitialised C-ordered array, like ``np.empty(shape, dtype)``; a piece of a kept
    buffer where it has at least `MIN_BYTES` (its ``base`` is that buffer)."""
    dt = np.dtype(dtype)
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    nbytes = math.prod(shape) * dt.itemsize
    if nbytes < MIN_BYTES or dt.hasobject:
        return np.empty(shape, dt)
    pool = _POOL
    b = None
    for i in range(len(pool)):
        b = pool[i]
        if b.nbytes == nbytes and sys.getrefcount(b) == _UNUSED:
            del pool[i]
            pool.append(b)
            return b.view(dt).reshape(shape)
    b = None  # (not a reference of ours while `_trim` counts them)
    new = np.empty(nbytes, np.uint8)
    _trim(pool)
    pool.append(new)
    return new.view(dt).reshape(shape)


def _trim(pool: list) -> None:
    """Drop the oldest free buffers beyond `FREE - 1`, then the oldest beyond `HELD - 1`
    (one in use stays its arrays' until they go)."""
    free = []
    for i in range(len(pool)):
        b = pool[i]
        if sys.getrefcount(b) == _UNUSED:
            free.append(i)
    for i in reversed(free[: max(len(free) - FREE + 1, 0)]):
        del pool[i]
    del pool[: max(len(pool) - HELD + 1, 0)]


def held() -> int:
    """Bytes of kept buffers that no array uses (free for reuse; at most `FREE` buffers)."""
    total = 0
    for i in range(len(_POOL)):
        b = _POOL[i]
        if sys.getrefcount(b) == _UNUSED:
            total += b.nbytes
    return total


def kept(b: Any) -> bool:
    """True when ``b`` is one of the buffers kept here (an array's ``base``)."""
    return any(p is b for p in _POOL)
