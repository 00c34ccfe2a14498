"""numpy's bounded integers (``Generator.integers``) computed in bulk from raw PCG64 words.

`d2o.ops.random` draws bounded integers block by block: block ``b`` of a call is what
numpy's ``Generator.integers`` gives on the stream jumped to that block's start.  Calling
numpy once per block of 4096 values cost about as much again as the values themselves
(``integers(0, 100)`` into int64 took 2.1x numpy's time on one process); this module
reproduces numpy's algorithm on the blocks' raw 64-bit words (``PCG64.random_raw``)
with whole-array operations, for a batch of blocks at a time, and gives the same values
bit for bit.

numpy's algorithm (``random_bounded_uint{64,32,16,8}_fill`` and
``random_bounded_bool_fill`` of numpy's ``distributions.c``, ``use_masked=False`` as
``Generator.integers`` passes), for ``rng = high_inclusive - low`` and ``off = low``
taken modulo ``2**bits`` of the dtype:

* It reads the words as a stream of **chunks** of ``w`` bits, lowest bits first (the
  bit generator's 32-bit halves, low half first, split further into 16-bit, 8-bit or
  1-bit pieces, lowest first): ``w`` is 64 for 64-bit dtypes whose ``rng`` needs more
  than 32 bits, 32 for the other 64-bit and for 32-bit dtypes, 16 and 8 for 16-bit and
  8-bit dtypes, 1 for bool.  On a little-endian machine the chunks are a view of the
  words (``raw.view(uint{w})``; bits: ``unpackbits(..., bitorder='little')``).
* ``rng == 0``: every value is ``off``, no chunk is read.  ``rng == 2**w - 1`` (and
  bool): each value is ``off + chunk``.
* Otherwise Lemire's method: ``m = chunk * (rng + 1)`` in ``2w`` bits; the chunk is
  accepted when the low ``w`` bits of ``m`` are at least ``threshold = 2**w % (rng + 1)``
  and gives ``off + (m >> w)``; a rejected chunk gives nothing and the next chunk is
  tried.  So the values are those of the accepted chunks, in order.

The bulk version draws enough words for each block (a few extra where rejections are
expected), computes every chunk's value at once (in place in the result when blocks
are whole and no rejection is likely) and finds the rejected chunks (one minimum where
they are rare); when some were rejected it keeps the first accepted chunks of each
block, copying the runs between rejections (or through a mask where runs are many); a
block short of accepted chunks (rare) draws more words where it stopped.
(`Bounded.faster` says where this beats numpy's own per-block call: not for Lemire's
method on whole words, whose 128-bit product takes a dozen array operations, nor where
more than one chunk in 20 is rejected.)  On a big-endian machine the chunks are not a
view of the words: there `d2o.ops.random` keeps numpy's per-block calls.

`LcgJump` places a PCG64 at the next block's start by writing its state (see there).
"""

from __future__ import annotations

import ctypes
import math
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

#: Whether the chunks of a word are a view of it (see the module notes).
LITTLE_ENDIAN = sys.byteorder == "little"

_PASS = 1 << 16  # chunks per slice of the array operations (512 kB of int64 values)
_M64 = (1 << 64) - 1
_MASK128 = (1 << 128) - 1
_M32 = np.uint64(0xFFFFFFFF)
_S32 = np.uint64(32)

# Draws raw words: draw(blocks, skips, counts) gives, for each k, counts[k] words of the
# k-th block of the batch starting skips[k] words past that block's start.
Draw = Callable[[Sequence[int], Sequence[int], Sequence[int]], list]


class Bounded:
    """numpy's ``Generator.integers(low, high, dtype=dt, endpoint=endpoint)``, from words.

    Parameters
    ----------
    low, high : int
        The bounds as numpy takes them (already checked by numpy).
    dt : numpy.dtype
        An integer or bool dtype.
    endpoint : bool

    Attributes
    ----------
    width : int
        Bits per chunk (64, 32, 16, 8 or 1).
    lemire : bool
        Whether chunks go through Lemire's multiply-and-reject (else each chunk is one
        value, or no chunk is read at all for ``rng == 0``).
    threshold : int
        Chunks whose low product bits are below it are rejected (0: none ever is).
    """

    def __init__(self, low: int, high: int, dt: np.dtype, endpoint: bool) -> None:
        low, high = int(low), int(high)
        rng = (high if endpoint else high - 1) - low
        self.dtype = dt
        if dt.kind == "b":
            self.udt = np.dtype(np.uint8)
            width = 1
        else:
            self.udt = np.dtype(f"u{dt.itemsize}")
            bits = 8 * dt.itemsize
            width = 64 if bits == 64 and rng > 0xFFFFFFFF else min(bits, 32)
        self.width = width
        self.rng = rng
        self.off = low % (1 << (8 * self.udt.itemsize))
        self.excl = rng + 1
        self.lemire = dt.kind != "b" and 0 < rng < (1 << width) - 1
        self.threshold = (1 << width) % self.excl if self.lemire else 0
        self.per_word = 64 // width
        self._reject = self.threshold / 2.0**width  # probability a chunk is rejected
        self._chunk = np.dtype(f"u{max(width // 8, 1)}")  # (bits: unpacked to uint8)
        self._wide = np.dtype(f"u{min(max(width // 4, 1), 8)}")  # chunk * (rng + 1)
        self._excl = self._wide.type(self.excl % (1 << (8 * self._wide.itemsize)))
        self._shift = self._wide.type(width % 64)
        self._off = self.udt.type(self.off)
        # rng + 1 = 2**k: Lemire's product keeps the chunk's top k bits (a shift by w - k)
        self._pow2 = width - self.excl.bit_length() + 1 if self.lemire and not (
            self.excl & (self.excl - 1)) else 0  # fmt: skip
        self._words: dict[int, int] = {}  # words(n), remembered

    @property
    def faster(self) -> bool:
        """Whether the bulk computation beats numpy's own call per block: not for
        Lemire's method on whole words (the 128-bit product takes a dozen array
        operations, unless ``rng + 1`` is a power of two), nor where more than one
        chunk in 20 is rejected (numpy's loop handles rejections at no extra cost; the
        bulk one drops them in extra passes)."""
        if self.width == 64 and self.lemire and not self._pow2:
            return False
        return self._reject < 0.05

    def words(self, n: int) -> int:
        """Words to draw first for ``n`` values: exactly enough when a rejection among
        them is unlikely (below 1 in 1000), else enough for six standard deviations of
        rejections more than expected."""
        w = self._words.get(n)
        if w is None:
            w = self._words[n] = self._count_words(n)
        return w

    def _count_words(self, n: int) -> int:
        if n <= 0 or self.rng == 0:
            return 0
        q = self._reject
        extra = 0
        if n * q >= 1e-3:
            extra = math.ceil((n * q + 6 * math.sqrt(n * q)) / (1 - q)) + 2
        return -(-(n + extra) // self.per_word)

    def fill(self, draw: Draw, needs: Sequence[int], out: np.ndarray) -> None:
        """The first ``needs[k]`` values of each block ``k`` of a batch, one block after
        the other, into ``out`` (``sum(needs)`` elements of the dtype)."""
        u, needs = out.view(self.udt), list(needs)
        if self.rng == 0:
            u[...] = self.off
            return
        words = self.words
        if needs[0] == needs[-1] and len(set(needs)) == 1:  # whole blocks, the usual case
            counts = [words(needs[0])] * len(needs)
        else:
            counts = [words(n) for n in needs]
        raws = draw(range(len(needs)), [0] * len(needs), counts)
        while True:
            raw = raws[0] if len(raws) == 1 else np.concatenate(raws)
            chunks = self._chunks(raw)
            have = [r.size * self.per_word for r in raws]
            exact = have == needs  # every chunk is a value: computed in place
            vals = u if exact else np.empty(chunks.size, self.udt)
            rejected = self._values(chunks, vals)
            if exact and rejected is None:
                return
            # the first needs[k] accepted chunks of each block, in order: every block
            # is cut after its needs[k]-th accepted chunk, at cut[k]
            ends = np.cumsum(have)
            starts, need = ends - have, np.array(needs)
            if rejected is None:
                got, cut, rejected = ends - starts, starts + need, ends[:0]
            else:
                at = np.searchsorted(rejected, starts)  # each block's first rejection
                got = have - (np.searchsorted(rejected, ends) - at)
                blk = np.searchsorted(starts, rejected, "right") - 1
                # accepted chunks before each rejection: it comes before its block's
                # cut when they are fewer than the block needs
                before = rejected - starts[blk] - (np.arange(rejected.size) - at[blk])
                inside = before < need[blk]
                rejected = rejected[inside]
                cut = starts + need + np.bincount(blk[inside], minlength=len(needs))
            short = np.flatnonzero(got < need).tolist()
            if short:  # draw more words where these blocks stopped, and start again
                more = draw(short, [raws[k].size for k in short],
                            [words(needs[k] - int(got[k])) for k in short])  # fmt: skip
                for k, extra in zip(short, more):
                    raws[k] = np.concatenate((raws[k], extra))
                continue
            if (rejected.size + len(needs)) * 512 <= vals.size:  # few runs: slices
                run_starts = np.sort(np.concatenate((starts, rejected + 1))).tolist()
                run_stops = np.sort(np.concatenate((rejected, cut))).tolist()
                at = 0
                for a, b in zip(run_starts, run_stops):
                    u[at : at + b - a] = vals[a:b]
                    at += b - a
            else:
                keep = np.ones(vals.size, bool)
                keep[rejected] = False
                keep[multi_arange(cut, ends - cut)] = False  # each block's surplus
                u[...] = vals[keep]
            return

    # -- the chunk stream and the values of its chunks -----------------------------------

    def _chunks(self, raw: np.ndarray) -> np.ndarray:
        if self.width == 64:
            return raw
        if self.width == 1:
            return np.unpackbits(raw.view(np.uint8), bitorder="little")
        return raw.view(self._chunk)

    def _values(self, x: np.ndarray, out: np.ndarray) -> np.ndarray | None:
        """Each chunk's value into ``out`` (``self.udt``, as long as ``x``); returns the
        rejected chunks' indices (sorted), or None when there are none."""
        if x.size > _PASS:  # a few passes over a slice that stays in cache, slice by slice
            found = []
            for at in range(0, x.size, _PASS):
                part = self._values(x[at : at + _PASS], out[at : at + _PASS])
                if part is not None:
                    found.append(part + at)
            return np.concatenate(found) if found else None
        rejected = None
        if not self.lemire:  # one chunk, one value
            if self.off:
                np.add(x, self._off, out=out)
            else:
                out[...] = x
            return None
        if self._pow2:  # rng + 1 = 2**k: the top k bits, never a rejection
            np.right_shift(x, x.dtype.type(self._pow2), out=out)
        elif self.width == 64:
            rejected = self._lemire64(x, out)
        else:
            m = out if out.dtype == self._wide else np.empty(x.size, self._wide)
            np.multiply(x, self._excl, out=m)
            if self.threshold:
                low = m.view(x.dtype)[0::2]  # the low w bits (little-endian halves)
                # where rejections are rare, a minimum says whether to look for them
                if self._reject > 1e-6 or np.minimum.reduce(low) < self.threshold:
                    rejected = np.flatnonzero(low < self.threshold)
            np.right_shift(m, self._shift, out=m)
            if m is not out:
                out[...] = m
        if self.off:
            np.add(out, self._off, out=out)
        return rejected if rejected is not None and rejected.size else None

    def _lemire64(self, x: np.ndarray, out: np.ndarray) -> np.ndarray | None:
        """The high 64 bits of ``x * (rng + 1)`` into ``out``, from 32-bit limbs (numpy
        has no 128-bit product); returns the indices of the chunks whose low 64 bits are
        below the threshold (rejected), or None."""
        r = self.excl
        r0, r1 = np.uint64(r & 0xFFFFFFFF), np.uint64(r >> 32)
        low = np.multiply(x, np.uint64(r))  # wraps: the low 64 bits
        rejected = None
        if self.threshold and np.minimum.reduce(low) < self.threshold:
            rejected = np.flatnonzero(low < np.uint64(self.threshold))
        x0 = np.bitwise_and(x, _M32, out=low)
        x1 = np.right_shift(x, _S32)
        t = np.multiply(x0, r0)  # x0 r0
        np.right_shift(t, _S32, out=t)
        t += np.multiply(x1, r0, out=out)  # t = x1 r0 + (x0 r0 >> 32)
        np.multiply(x0, r1, out=x0)
        x0 += np.bitwise_and(t, _M32, out=out)  # w1 = (t & M) + x0 r1
        np.right_shift(t, _S32, out=t)
        np.multiply(x1, r1, out=out)
        out += t
        np.right_shift(x0, _S32, out=x0)
        out += x0  # x1 r1 + (t >> 32) + (w1 >> 32)
        return rejected


class LcgJump:
    """Puts a `numpy.random.PCG64` at the start of the next block by writing its 128-bit
    LCG state: a cheaper step than ``PCG64.advance`` (a Python-level call costing as much
    as drawing a few hundred words, paid once per block of 4096 values otherwise).

    Block ``b + 1`` starts ``2**64`` words after block ``b``: the LCG state there is
    ``A * s + C`` modulo ``2**128`` for the state ``s`` at block ``b``'s start, with
    ``(A, C)`` the affine map of ``2**64`` steps (found with ``advance`` itself).  The
    state is written through ``PCG64.ctypes.state_address``, which points to numpy's
    ``pcg64_state`` (a pointer to the ``pcg64_random_t``, then the held half word's flag
    and value); the ``pcg64_random_t`` holds the state, then the increment, each a
    little-endian ``__uint128_t``.  `create` checks that layout against ``PCG64.state``
    (reads, then writes read back) and gives None where it does not hold (another numpy,
    emulated 128-bit arithmetic): the caller keeps ``advance``.
    """

    def __init__(self, bitgen: np.random.PCG64, words: ctypes.Array, held: ctypes.Array,
                 a: int, c: int) -> None:  # fmt: skip
        self.bitgen = bitgen  # keeps the memory of ``words`` and ``held`` alive
        self.words = words  # state low, high, increment low, high
        self.held = held  # has_uint32, uinteger
        self.a, self.c = a, c

    @classmethod
    def create(cls, bitgen: np.random.PCG64) -> LcgJump | None:
        """The jump for ``bitgen`` (its increment fixes ``C``), or None (see above)."""
        try:
            views = _state_views(bitgen)
            if views is None:
                return None
            inc = bitgen.state["state"]["inc"]
            scratch = np.random.PCG64(0)

            def after(s: int) -> int:  # the state 2**64 steps after s
                scratch.state = _pcg_state(s, inc, 0, 0)
                scratch.advance(1 << 64)
                return int(scratch.state["state"]["state"])

            c = after(0)
            words, held = views
            return cls(bitgen, words, held, (after(1) - c) & _MASK128, c)
        except Exception:  # any surprise: keep advance
            return None

    def state(self) -> int:
        """The LCG state now."""
        w = self.words
        return int(w[0]) | int(w[1]) << 64

    def next_block(self, s: int) -> int:
        """Put the generator at the start of the block after the one starting at LCG
        state ``s``, as ``advance`` would (no half word held); returns the new state."""
        s = (self.a * s + self.c) & _MASK128
        self.words[0] = s & _M64
        self.words[1] = s >> 64
        self.held[0] = 0
        return s


def _pcg_state(s: int, inc: int, has: int, value: int) -> Any:
    return {"bit_generator": "PCG64", "state": {"state": s, "inc": inc},
            "has_uint32": has, "uinteger": value}  # fmt: skip


def _state_views(bitgen: np.random.PCG64) -> tuple | None:
    """Writable views of numpy's PCG64 state: (state low, high, increment low, high) and
    (has_uint32, uinteger); None where its C layout is not the expected one."""
    addr = bitgen.ctypes.state_address
    target = ctypes.c_void_p.from_address(addr).value  # pcg64_state.pcg_state
    # the pcg64_random_t is a member of the same object, just after the pcg64_state
    if target is None or not 16 <= target - addr <= 64:
        return None
    words = (ctypes.c_uint64 * 4).from_address(target)
    held = (ctypes.c_uint32 * 2).from_address(addr + ctypes.sizeof(ctypes.c_void_p))
    saved = bitgen.state

    def seen() -> tuple:
        st = bitgen.state
        return (int(st["state"]["state"]), int(st["state"]["inc"]), int(st["has_uint32"]),
                int(st["uinteger"]))  # fmt: skip

    def views() -> tuple:
        return words[0] | words[1] << 64, words[2] | words[3] << 64, held[0], held[1]

    try:
        s, inc = int(saved["state"]["state"]), int(saved["state"]["inc"])
        bitgen.state = _pcg_state(s ^ (1 << 100), inc, 1, 0x9E3779B9)  # numpy writes...
        ok = views() == seen()  # ...we read
        words[1] ^= 1 << 36  # we write...
        words[0] ^= 1
        held[0], held[1] = 0, 0
        ok = ok and seen() == (s ^ 1, inc, 0, 0)  # ...numpy reads
    finally:
        bitgen.state = saved
    return (words, held) if ok and views() == seen() else None


def multi_arange(first: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """``concatenate([arange(f, f + n) for f, n in zip(first, lengths)])``, vectorized."""
    offsets = np.cumsum(lengths) - lengths
    return np.repeat(first - offsets, lengths) + np.arange(int(lengths.sum()))
