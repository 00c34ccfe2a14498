"""Random numbers that are the same global array on any number of processes.

The future ``d2o.numpy.random`` namespace.  ``default_rng(seed)`` gives a `Generator`
whose draws are distributed arrays (``dist=`` chooses the layout, as for the creation
functions of `d2o.ops.creation`); the global array it returns depends only on the seed and
on the sequence of calls made, never on the number of processes or on the layout.  The
same program run without MPI, or with ``mpiexec -n 3``, draws the same numbers.

Streams
-------
Two engines, chosen by the distribution.

**Fixed width** (`Generator.random`, `Generator.uniform`, `Generator.choice` with ``p``:
one 64-bit word per double, half a word per single) draw **numpy's own stream**: the
`~numpy.random.PCG64` that numpy's ``default_rng(seed)`` builds from the same
`~numpy.random.SeedSequence`.  Element ``i`` of a call is the value the sequential
stream gives at the generator's position plus ``i``; a rank jumps to the first element
of each run of flat indices it holds (``PCG64.advance``, logarithmic in the distance)
and draws only those.  After the call every rank moves the generator's position past
the whole call.  So a program that draws only with these gets exactly numpy's numbers
for the same seed, on any number of processes.

**Variable width** (normal and exponential ziggurats, bounded integers, ``choice``
without ``p``) consume a varying number of words per value, so no rank can know where
another's values start in a sequential stream.  The flattened global index space (C
order) is cut into blocks of ``BLOCK`` = 4096 elements, and call number ``c`` of the
generator (every public call advances the counter by one, on every rank alike) draws
block ``b`` from the same PCG64 stream jumped ``(2**32 * c + b + 1) * 2**64`` words past
its origin (``PCG64.advance``).  Element ``i`` of the flattened result of call ``c`` is
the ``i % BLOCK``-th value numpy's `~numpy.random.Generator` draws from block
``i // BLOCK``: a function of (seed, call number, global flat index) alone.  Every block
owns 2**64 words of the stream, far more than it can consume, and the fixed-width draws
use the first 2**64, so no two draws ever share a word (up to 2**32 calls of 2**32
blocks each; beyond, `OverflowError`).  Each rank draws the prefix of every block that
meets its piece up to the last element it needs.  These values are not numpy's (numpy's
stream is sequential over the whole array), and ``BLOCK`` is part of the definition:
changing it changes the numbers.  A variable-width call does not move the fixed-width
stream: after one, the fixed-width draws go on where they stopped (and so no longer
match a numpy program making the same calls, whose normal draws consumed its one
stream).

How the blocks are drawn does not change the values.  The walker moves from one
block's start to the next by writing PCG64's 128-bit state (`d2o.ops.bounded.LcgJump`: one
affine map; ``PCG64.advance`` where numpy's C layout is not the expected one).  Bounded
integers (`Generator.integers`, ``choice`` without ``p``) are mostly not drawn by
calling numpy once per block: `d2o.ops.bounded` reproduces numpy's algorithm (Lemire's
method on 32-bit halves of the words, or on 16-bit, 8-bit or 1-bit pieces for the small
dtypes) on the blocks' raw words, ``_BATCH`` blocks at a time with whole-array
operations: the same values bit for bit (tested against numpy's per-block calls for
every branch of its algorithm), at numpy's speed for ranges of 32 bits or less into
int64.  numpy's per-block call stays where it is faster: Lemire's method on whole words
(ranges over 32 bits that are not a power of two), more than one chunk in 20 rejected,
and big-endian machines.

Memory beyond the rank's piece: one block of scratch (bounded integers: the words of
``_BATCH`` blocks, 1 MB for ranges of 32 bits, their values when the piece does not
hold whole blocks, and a few masks), plus a few integers per contiguous run of flat
indices the piece covers (one run for slabs along the first axis and for replicated
arrays).

A generator is a per-process object: build it on every rank with the same seed, and
make the same calls on every rank.  ``default_rng()`` without a seed is collective (rank
0 draws the entropy and broadcasts it).
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..array.base import Array as D2O
from ..array.base import from_local as _from_local
from ..core.comm import default_comm
from ..core.registry import operation, operations
from .bounded import LITTLE_ENDIAN, Bounded, LcgJump, multi_arange
from .creation import distributor_for, shape_tuple
from .flatruns import BLOCK, block_segments, flat_runs, scalar_param, with_held_word

__all__ = [
    "BLOCK", "Generator", "default_rng", "seed", "random", "standard_normal", "normal",
    "uniform", "integers", "exponential", "choice",
]  # fmt: skip

_LIMIT = 1 << 32  # calls per generator and blocks per call of the variable-width draws
_BATCH = 64  # blocks whose bounded integers are computed together (`d2o.ops.bounded`)
_MASK128, _M64 = (1 << 128) - 1, (1 << 64) - 1

_F64 = np.dtype(np.float64)
_F32 = np.dtype(np.float32)
# Validates arguments through numpy itself (same errors and messages); its values are unused.
_CHECK = np.random.Generator(np.random.Philox(key=0))


@dataclass(frozen=True)
class _Kind:
    """How values are drawn from one block's numpy Generator.

    ``fill(gen, out)`` writes ``len(out)`` consecutive values of the stream into ``out``.
    ``per_word`` is the number of values one 64-bit word gives when that is fixed (they
    come from numpy's sequential stream), 0 when it varies (rejection sampling: blocks
    of the stream far apart).  ``bulk``, when given, computes the same values as
    ``fill`` from the blocks' raw words, a batch of blocks at a time (`d2o.ops.bounded`).
    """

    dtype: np.dtype
    per_word: int
    fill: Callable[[np.random.Generator, np.ndarray], Any]
    bulk: Bounded | None = None


def _fill_random(dt: np.dtype) -> Callable:
    return lambda g, out: g.random(dtype=dt, out=out)


def _fill_normal(dt: np.dtype) -> Callable:
    return lambda g, out: g.standard_normal(dtype=dt, out=out)


def _fill_exponential(g: np.random.Generator, out: np.ndarray) -> None:
    g.standard_exponential(dtype=np.float64, out=out)


_RANDOM = {
    _F64: _Kind(_F64, 1, _fill_random(_F64)),  # one word per double
    _F32: _Kind(_F32, 2, _fill_random(_F32)),  # one 32-bit half word per single
}
_NORMAL = {dt: _Kind(dt, 0, _fill_normal(dt)) for dt in (_F64, _F32)}
_EXPONENTIAL = _Kind(_F64, 0, _fill_exponential)


def _integers_kind(low: Any, high: Any, dt: np.dtype, endpoint: bool,
                   bulk: bool | str = True) -> _Kind:  # fmt: skip
    """Bounded integers: numpy's ``Generator.integers`` per block, computed in bulk from
    the blocks' words (the same values) where the machine allows it and that is faster
    (`d2o.ops.bounded.Bounded.faster`).  ``bulk=False``: numpy's own call on every block,
    the definition the bulk kernel is tested against; ``bulk="always"``: the bulk
    kernel even where it is slower (for its tests)."""

    def fill(g: np.random.Generator, out: np.ndarray) -> None:
        out[...] = g.integers(low, high, size=out.size, dtype=dt, endpoint=endpoint)

    kernel = None
    if bulk and LITTLE_ENDIAN:
        kernel = _bounded(int(np.asarray(low)), int(np.asarray(high)), dt, bool(endpoint))
        if bulk != "always" and not kernel.faster:
            kernel = None
    return _Kind(dt, 0, fill, kernel)


@functools.lru_cache(maxsize=64)
def _bounded(low: int, high: int, dt: np.dtype, endpoint: bool) -> Bounded:
    """The bulk kernel of `integers` for these arguments (kept: repeated calls with the
    same bounds are common)."""
    return Bounded(low, high, dt, endpoint)


@operations(kind="random", traced=False, skip={"__repr__", "__reduce__"})
class Generator:
    """Random numbers drawn as distributed arrays, identical on any number of processes.

    Build it with `default_rng` (on every rank, with the same seed).  Each method draws
    a new global array of shape ``size`` in the layout ``dist=`` (default: the layout of
    the creation functions, see `d2o.ops.creation.distributor_for`); each rank computes its
    own piece only, without communication.  ``size=None`` returns one scalar, the same
    on every rank.

    Every element depends only on the seed, the number of calls made on the generator
    before, and its flat global index (see the module notes): not on the number of
    processes, nor on the layout.

    Parameters
    ----------
    seed_seq : numpy.random.SeedSequence
        The seed; the same on every rank.

    Attributes
    ----------
    seed_seq : numpy.random.SeedSequence
        The seed the generator was built from.
    calls : int
        The number of draws made so far (the next call's number).
    """

    def __init__(self, seed_seq: np.random.SeedSequence) -> None:
        if not isinstance(seed_seq, np.random.SeedSequence):
            raise TypeError(
                f"Generator takes a numpy.random.SeedSequence, got {type(seed_seq).__name__}; "
                "use d2o's default_rng(seed) for other seeds"
            )
        self.seed_seq = seed_seq
        self.calls = 0
        self._stream = np.random.PCG64(seed_seq)  # numpy's default_rng(seed) stream
        self._origin = self._stream.state  # where it starts: the blocks jump from here
        self._walker = np.random.PCG64(seed_seq)  # a copy that jumps to this rank's runs
        self._walk = np.random.Generator(self._walker)
        self._lcg_jump: LcgJump | None = None  # see `_jump`
        self._jump_known = False
        # (call, block, LCG state, jump) of the last `_start` that knew its state
        self._last_start: tuple = (-1, -1, 0, None)

    def __repr__(self) -> str:
        return f"d2o Generator(PCG64, blocks of {BLOCK}, calls={self.calls})"

    def __reduce__(self):  # the counter must stay in step on every rank
        raise TypeError("d2o generators cannot be pickled; build them with default_rng")

    def spawn(self, n_children: int) -> list[Generator]:
        """``n_children`` independent generators (numpy's `SeedSequence.spawn`).

        Local: every rank spawns the same children when it makes the same calls.

        Parameters
        ----------
        n_children : int

        Returns
        -------
        list of Generator
        """
        return [Generator(s) for s in self.seed_seq.spawn(n_children)]

    # -- the fixed-width engine: numpy's stream ----------------------------------------

    def _stream_fill(self, kind: _Kind, total: int, starts: np.ndarray, stops: np.ndarray,
                     flat: np.ndarray) -> None:  # fmt: skip
        """Fill ``flat`` with elements ``starts[k]:stops[k]`` of the stream's next
        ``total`` values, then move the stream past all ``total`` of them."""
        base: Any = self._stream.state
        per = kind.per_word  # 1 (doubles) or 2 (singles: low half of a word, then high)
        held = base["has_uint32"] if per == 2 else 0  # a half word left by a last call
        walker, gen = self._walker, self._walk
        scratch = np.empty(1, kind.dtype)
        at, pos = 0, -1  # where the walker stands (-1: nowhere yet)
        for a, b in zip(starts.tolist(), stops.tolist()):
            if a != pos:
                if per == 1 and 0 <= pos < a:
                    walker.advance(a - pos)
                elif a < held:  # element 0 is the held half word
                    walker.state = base
                else:
                    walker.state = with_held_word(base, 0, 0)
                    words, half = divmod(a - held, per)
                    walker.advance(words)
                    if half:
                        kind.fill(gen, scratch)  # the low half of a shared word
            kind.fill(gen, flat[at : at + b - a])
            at, pos = at + b - a, b
        self._skip(base, per, held, total)

    def _skip(self, base: Any, per: int, held: int, total: int) -> None:
        """Move the stream past ``total`` values drawn from state ``base``, as numpy's
        own draws would leave it (a single's high half word stays held)."""
        if total == 0:
            return
        if per == 1:  # doubles leave a held half word alone
            self._stream.advance(total)
            self._stream.state = with_held_word(
                self._stream.state, base["has_uint32"], base["uinteger"]
            )
            return
        halves = total - held
        if halves <= 0:  # only the held half was used
            self._stream.state = with_held_word(base, 0, 0)
            return
        words, odd = divmod(halves, 2)
        self._stream.state = with_held_word(base, 0, 0)
        self._stream.advance(words)
        if odd:  # the last word's high half stays held, as in numpy
            last = int(self._stream.random_raw())
            self._stream.state = with_held_word(self._stream.state, 1, last >> 32)

    # -- the variable-width engine: blocks of the stream far apart ---------------------

    def _start(self, call: int, block: int) -> None:
        """Point the walker at the start of block ``block`` of call ``call``: the
        stream's origin jumped ``(2**32 * call + block + 1) * 2**64`` words ahead (from
        the previous block's start when that was the last one, see `_jump`)."""
        last = self._last_start
        if last[1] == block - 1 and last[0] == call and last[3] is not None:
            self._last_start = (call, block, last[3].next_block(last[2]), last[3])
            return
        self._walker.state = self._origin
        self._walker.advance(((call << 32) + block + 1) << 64)
        jump = self._jump()
        if jump is not None:
            self._last_start = (call, block, jump.state(), jump)

    def _draw(
        self, kind: _Kind, call: int, block: int, lo: int, hi: int, out: np.ndarray | None,
        scratch: np.ndarray,
    ) -> np.ndarray:  # fmt: skip
        """Elements ``lo:hi`` of a block: written into ``out`` when given, else returned as
        a view of ``scratch`` (one block long)."""
        g = self._walk
        self._start(call, block)
        if lo == 0 and out is not None:
            kind.fill(g, out)
            return out
        kind.fill(g, scratch[:hi])  # the prefix of the block up to the last element needed
        if out is None:
            return scratch[lo:hi]
        out[...] = scratch[lo:hi]
        return out

    def _fill(self, kind: _Kind, call: int, starts: np.ndarray, stops: np.ndarray,
              flat: np.ndarray) -> None:  # fmt: skip
        """Fill ``flat`` (this rank's piece, flattened) with the elements of the runs."""
        if starts.size == 0:
            return
        if kind.bulk is not None:
            self._fill_bulk(kind.bulk, call, starts, stops, flat)
            return
        blk, lo, hi, at = block_segments(starts, stops)
        scratch = np.empty(BLOCK, kind.dtype)
        # consecutive segments of one block are drawn together (they sit side by side
        # in the piece); lo/hi of a group are its min/max, whatever the runs' order
        bounds = np.concatenate(([0], np.flatnonzero(np.diff(blk)) + 1, [blk.size])).tolist()
        blk_l, lo_l, hi_l, at_l = blk.tolist(), lo.tolist(), hi.tolist(), at.tolist()
        for i, j in zip(bounds[:-1], bounds[1:]):
            if j - i == 1:
                p = at_l[i]
                self._draw(kind, call, blk_l[i], lo_l[i], hi_l[i], flat[p : p + hi_l[i] - lo_l[i]],
                           scratch)  # fmt: skip
                continue
            glo, ghi = lo[i:j], hi[i:j]
            first = int(glo.min())
            vals = self._draw(kind, call, blk_l[i], first, int(ghi.max()), None, scratch)
            take = multi_arange(glo - first, ghi - glo)
            flat[at_l[i] : at_l[i] + take.size] = vals[take]

    def _fill_bulk(self, kernel: Bounded, call: int, starts: np.ndarray, stops: np.ndarray,
                   flat: np.ndarray) -> None:  # fmt: skip
        """`_fill` for a kind with a bulk kernel: the same values, computed for
        `_BATCH` blocks at a time from their raw words (`d2o.ops.bounded`)."""
        if starts.size == 1:  # one run (slabs along the first axis, replicated, scalars)
            a, z = int(starts[0]), int(stops[0])
            first, last = a // BLOCK, (z - 1) // BLOCK
            blocks = list(range(first, last + 1))
            lo, hi = [0] * len(blocks), [BLOCK] * len(blocks)
            lo[0], hi[-1] = a - first * BLOCK, z - last * BLOCK
            at = list(range(first * BLOCK - a, z - a, BLOCK))  # where each block starts
            at[0] = 0
            g0, g1, need = list(range(len(blocks))), list(range(1, len(blocks) + 1)), hi
        else:
            blk, lo_a, hi_a, at_a = block_segments(starts, stops)
            g0_a = np.concatenate(([0], np.flatnonzero(np.diff(blk)) + 1))  # groups of
            g1_a = np.append(g0_a[1:], blk.size)  # segments in one block, as in `_fill`
            need = np.maximum.reduceat(hi_a, g0_a).tolist()  # a group draws a prefix
            blocks = blk[g0_a].tolist()
            lo, hi, at, g0, g1 = (v.tolist() for v in (lo_a, hi_a, at_a, g0_a, g1_a))
        draw = self._block_words(call, blocks)
        for s in range(0, len(g0), _BATCH):
            e = min(s + _BATCH, len(g0))
            i, j = g0[s], g1[e - 1]  # the batch's segments
            dst = flat[at[i] : at[j - 1] + hi[j - 1] - lo[j - 1]]
            needs = need[s:e]
            dense = j - i == e - s and not any(lo[i:j])  # the prefixes tile dst
            vals = dst if dense else np.empty(sum(needs), flat.dtype)
            kernel.fill(functools.partial(draw, s), needs, vals)
            if not dense:  # the segments' elements of their blocks' prefixes
                n_a = np.array(needs)
                seg_lo, seg_hi = np.array(lo[i:j]), np.array(hi[i:j])
                offset = np.repeat(np.cumsum(n_a) - n_a, np.diff(g0[s:e] + [j]))
                dst[...] = vals[multi_arange(offset + seg_lo, seg_hi - seg_lo)]

    def _block_words(self, call: int, blocks: list) -> Callable:
        """``draw(first, ks, skips, counts)``: for each ``k``, ``counts[k]`` raw words of
        block ``blocks[first + k]`` of call ``call``, from word ``skips[k]`` of the block
        on (the `d2o.ops.bounded.Draw` of a batch starting at ``first``)."""
        walker, start, jump = self._walker, self._start, self._jump()
        raw = walker.random_raw
        words, mul, add = (jump.words, jump.a, jump.c) if jump is not None else (None, 0, 0)

        def draw(first: int, ks: Any, skips: Any, counts: Any) -> list:
            out = []
            last_call, last, s, _ = self._last_start
            for k, skip, n in zip(ks, skips, counts):
                b = blocks[first + k]
                if words is not None and not skip and last == b - 1 and last_call == call:
                    # `_start` inlined (it shows, once per block); random_raw ignores
                    # the held half word, which `_start` clears
                    s = (mul * s + add) & _MASK128
                    words[0] = s & _M64
                    words[1] = s >> 64
                    last = b
                else:
                    self._last_start = (last_call, last, s, jump)
                    start(call, b)
                    last_call, last, s, _ = self._last_start
                    if skip:
                        walker.advance(skip)
                out.append(raw(n))
            self._last_start = (last_call, last, s, jump)
            if jump is not None:
                jump.held[0] = 0
            return out

        return draw

    def _jump(self) -> LcgJump | None:
        """The walker's direct step from block to block (`d2o.ops.bounded.LcgJump`), found
        on first use; None where numpy's layout does not allow it (``advance`` then)."""
        if not self._jump_known:
            self._lcg_jump, self._jump_known = LcgJump.create(self._walker), True
        return self._lcg_jump

    def _piece(self, kind: _Kind, size: Any, dist: Any) -> tuple[np.ndarray, Any]:
        """A new call's values: (this rank's piece, its distributor), or for
        ``size=None`` (a 1-element array, None)."""
        if size is None:
            flat = np.empty(1, kind.dtype)
            self._values(kind, 1, np.zeros(1, np.int64), np.ones(1, np.int64), flat)
            return flat, None
        shape = shape_tuple(size)
        d = distributor_for(dist, shape, kind.dtype)
        piece = np.empty(d.local_shape, kind.dtype)
        box = d.region(d.comm.rank) if shape else ()
        starts, stops = flat_runs(box, shape)
        self._values(kind, math.prod(shape), starts, stops, piece.reshape(-1))
        return piece, d

    def _values(self, kind: _Kind, total: int, starts: np.ndarray, stops: np.ndarray,
                flat: np.ndarray) -> None:  # fmt: skip
        """One call of ``total`` values: this rank's runs into ``flat``, by the engine
        the kind needs (see the module notes)."""
        if not kind.per_word and (self.calls >= _LIMIT or total > _LIMIT * BLOCK):
            raise OverflowError(  # global values: every rank raises alike
                f"d2o's generator draws at most {_LIMIT} arrays of {_LIMIT * BLOCK} elements "
                "with this distribution"
            )
        call = self._next_call()
        if kind.per_word:
            self._stream_fill(kind, total, starts, stops, flat)
        else:
            self._fill(kind, call, starts, stops, flat)

    def _next_call(self) -> int:
        call = self.calls
        self.calls += 1
        return call

    @staticmethod
    def _result(piece: np.ndarray, d: Any, scalar: Callable = float) -> Any:
        if d is None:
            return scalar(piece[0])
        return _from_local(piece, d)

    # -- distributions -------------------------------------------------------------

    def random(self, size: Any = None, dtype: Any = np.float64, *, dist: Any = None) -> Any:
        """Uniform floats in [0, 1), as numpy's ``Generator.random``.

        Parameters
        ----------
        size : int or tuple of int, optional
            The global shape; None gives one Python float.
        dtype : {numpy.float64, numpy.float32}, optional
        dist : optional
            The layout (None, True, False, a strategy name, a `d2o.layout` or an array
            whose layout is taken).

        Returns
        -------
        distributed_data_object or float
        """
        dt = np.dtype(dtype)
        if dt not in _RANDOM:
            raise TypeError(f"Unsupported dtype {dt!r} for random")
        piece, d = self._piece(_RANDOM[dt], size, dist)
        return self._result(piece, d)

    def standard_normal(
        self, size: Any = None, dtype: Any = np.float64, *, dist: Any = None
    ) -> Any:
        """Standard normal values (numpy's ziggurat), as numpy's ``standard_normal``.

        Parameters
        ----------
        size : int or tuple of int, optional
            The global shape; None gives one Python float.
        dtype : {numpy.float64, numpy.float32}, optional
        dist : optional
            The layout, as for `random`.

        Returns
        -------
        distributed_data_object or float
        """
        dt = np.dtype(dtype)
        if dt not in _NORMAL:
            raise TypeError(f"Unsupported dtype {dt!r} for standard_normal")
        piece, d = self._piece(_NORMAL[dt], size, dist)
        return self._result(piece, d)

    def normal(self, loc: float = 0.0, scale: float = 1.0, size: Any = None, *,
               dist: Any = None) -> Any:  # fmt: skip
        """Normal values ``loc + scale * standard_normal``.

        Parameters
        ----------
        loc, scale : float
            Scalars (array-valued ones raise NotImplementedError); ``scale >= 0``.
        size : int or tuple of int, optional
            The global shape; None gives one Python float.
        dist : optional
            The layout, as for `random`.

        Returns
        -------
        distributed_data_object or float

        Raises
        ------
        ValueError
            ``scale < 0`` (numpy's check).
        """
        scalar_param(loc, "loc")
        scalar_param(scale, "scale")
        _CHECK.normal(loc, scale, size=1)
        loc, scale = float(loc), float(scale)
        piece, d = self._piece(_NORMAL[_F64], size, dist)
        np.multiply(piece, scale, out=piece)
        np.add(piece, loc, out=piece)
        return self._result(piece, d)

    def uniform(self, low: float = 0.0, high: float = 1.0, size: Any = None, *,
                dist: Any = None) -> Any:  # fmt: skip
        """Uniform values in [low, high): ``low + (high - low) * random()``.

        Parameters
        ----------
        low, high : float
            Scalars (array-valued ones raise NotImplementedError).
        size : int or tuple of int, optional
            The global shape; None gives one Python float.
        dist : optional
            The layout, as for `random`.

        Returns
        -------
        distributed_data_object or float

        Raises
        ------
        OverflowError
            ``high - low`` is not finite (numpy's check).
        """
        scalar_param(low, "low")
        scalar_param(high, "high")
        _CHECK.uniform(low, high, size=1)
        low, high = float(low), float(high)
        piece, d = self._piece(_RANDOM[_F64], size, dist)
        np.multiply(piece, high - low, out=piece)
        np.add(piece, low, out=piece)
        return self._result(piece, d)

    def exponential(self, scale: float = 1.0, size: Any = None, *, dist: Any = None) -> Any:
        """Exponential values ``scale * standard_exponential`` (numpy's ziggurat).

        Parameters
        ----------
        scale : float
            A scalar ``>= 0`` (array-valued ones raise NotImplementedError).
        size : int or tuple of int, optional
            The global shape; None gives one Python float.
        dist : optional
            The layout, as for `random`.

        Returns
        -------
        distributed_data_object or float

        Raises
        ------
        ValueError
            ``scale < 0`` (numpy's check).
        """
        scalar_param(scale, "scale")
        _CHECK.exponential(scale, size=1)
        scale = float(scale)
        piece, d = self._piece(_EXPONENTIAL, size, dist)
        np.multiply(piece, scale, out=piece)
        return self._result(piece, d)

    def integers(self, low: Any, high: Any = None, size: Any = None, dtype: Any = np.int64,
                 endpoint: bool = False, *, dist: Any = None) -> Any:  # fmt: skip
        """Integers in [low, high) (or [low, high] with ``endpoint``), as numpy's
        ``Generator.integers``; ``high=None`` draws from [0, low).

        Parameters
        ----------
        low, high : int
            Scalars (array-valued ones raise NotImplementedError).
        size : int or tuple of int, optional
            The global shape; None gives one numpy scalar of ``dtype``.
        dtype : integer or bool dtype, optional
        endpoint : bool, optional
        dist : optional
            The layout, as for `random`.

        Returns
        -------
        distributed_data_object or numpy integer

        Raises
        ------
        ValueError
            ``low >= high`` (``low > high`` with ``endpoint``), or bounds outside the
            dtype (numpy's checks).
        TypeError
            A dtype that is not an integer type.
        """
        if high is None:
            low, high = 0, low
        scalar_param(low, "low")
        scalar_param(high, "high")
        dt = np.dtype(dtype)
        _CHECK.integers(low, high, size=1, dtype=dt, endpoint=endpoint)
        kind = _integers_kind(low, high, dt, bool(endpoint))
        piece, d = self._piece(kind, size, dist)
        return self._result(piece, d, scalar=lambda v: v)

    def choice(self, a: Any, size: Any = None, replace: bool = True, p: Any = None, *,
               dist: Any = None) -> Any:  # fmt: skip
        """Samples of ``a`` (a 1-d array, or ``arange(a)`` for an integer), with
        replacement, uniformly or with probabilities ``p``.

        With ``p`` the indices are ``searchsorted(cumsum(p) / sum(p), random())``
        (numpy's rule); without, ``integers(0, len(a))``.  ``a`` and ``p`` must hold the
        same values on every rank.

        Parameters
        ----------
        a : int or 1-d array_like
        size : int or tuple of int, optional
            The global shape; None gives one element (a Python int for an integer ``a``).
        replace : bool, optional
            Only True: sampling without replacement raises NotImplementedError.
        p : 1-d array_like, optional
            The probabilities of the entries of ``a`` (numpy's checks).
        dist : optional
            The layout, as for `random`.

        Returns
        -------
        distributed_data_object or scalar
        """
        if not replace:
            raise NotImplementedError(
                "choice(replace=False) needs the sort machinery (a distributed permutation), "
                "which d2o does not have yet"
            )
        if isinstance(a, D2O) or isinstance(p, D2O):
            raise NotImplementedError(
                "choice from a distributed array is not supported; pass a numpy array"
            )
        pool: np.ndarray | None = np.asarray(a)
        if pool.ndim > 1:
            raise NotImplementedError("choice from a multi-dimensional a is not supported")
        n_samples = 1 if size is None else math.prod(shape_tuple(size))
        _CHECK.choice(a, size=min(n_samples, 1), replace=True, p=p)
        if pool.ndim == 0:  # an integer: choose from arange(a)
            n, pool = operator.index(pool.item()), None
        else:
            n = pool.size
        if p is None or n == 0:
            piece, d = self._piece(_integers_kind(0, n, np.dtype(np.int64), False), size, dist)
        else:
            cdf = np.cumsum(np.asarray(p, dtype=np.float64))
            cdf /= cdf[-1]
            u, d = self._piece(_RANDOM[_F64], size, dist)
            piece = cdf.searchsorted(u, side="right").astype(np.int64, copy=False)
        if pool is not None:
            piece = pool[piece]
        return self._result(piece, d, scalar=int if pool is None else (lambda v: v))


@operation(kind="random", traced=False)
def default_rng(seed: Any = None) -> Generator:
    """A `Generator` whose draws are the same global arrays on any number of processes.

    Parameters
    ----------
    seed : None, int, sequence of int, numpy.random.SeedSequence or Generator, optional
        The same on every rank.  None: fresh entropy from the operating system, drawn
        on rank 0 and broadcast (then the call is collective).  A d2o `Generator` is
        returned unaltered.

    Returns
    -------
    Generator

    Examples
    --------
    >>> rng = default_rng(42)
    >>> x = rng.standard_normal((1000, 3))  # the same global array at any process count
    """
    if isinstance(seed, Generator):
        return seed
    if isinstance(seed, np.random.SeedSequence):
        return Generator(seed)
    if isinstance(seed, (np.random.Generator, np.random.BitGenerator)):
        raise TypeError(
            "d2o's default_rng takes None, an int, a sequence of ints or a SeedSequence, "
            f"not a numpy {type(seed).__name__}"
        )
    if seed is None:
        comm = default_comm()
        entropy = comm.bcast(np.random.SeedSequence().entropy if comm.rank == 0 else None, 0)
        return Generator(np.random.SeedSequence(entropy))
    if isinstance(seed, (bool, np.bool_)):
        raise TypeError(f"seed must be an int or a sequence of ints, got {seed!r}")
    return Generator(np.random.SeedSequence(seed))  # numpy checks the entropy


# -- module-level convenience: one default generator per process ---------------------------

_DEFAULT: list = [None]


def _default() -> Generator:
    if _DEFAULT[0] is None:
        _DEFAULT[0] = default_rng()  # collective: the first call happens on every rank
    return _DEFAULT[0]


@operation(kind="random", traced=False)
def seed(s: Any = None) -> None:
    """Reseed the module's default generator (``default_rng(s)``; collective for None).

    Parameters
    ----------
    s : None, int, sequence of int or numpy.random.SeedSequence, optional
    """
    _DEFAULT[0] = default_rng(s)


@operation(kind="random", traced=False)
def random(size: Any = None, *, dist: Any = None) -> Any:
    """`Generator.random` of the module's default generator (see `seed`)."""
    return _default().random(size, dist=dist)


@operation(kind="random", traced=False)
def standard_normal(size: Any = None, *, dist: Any = None) -> Any:
    """`Generator.standard_normal` of the module's default generator."""
    return _default().standard_normal(size, dist=dist)


@operation(kind="random", traced=False)
def normal(loc: float = 0.0, scale: float = 1.0, size: Any = None, *, dist: Any = None) -> Any:
    """`Generator.normal` of the module's default generator."""
    return _default().normal(loc, scale, size, dist=dist)


@operation(kind="random", traced=False)
def uniform(low: float = 0.0, high: float = 1.0, size: Any = None, *, dist: Any = None) -> Any:
    """`Generator.uniform` of the module's default generator."""
    return _default().uniform(low, high, size, dist=dist)


@operation(kind="random", traced=False)
def integers(low: Any, high: Any = None, size: Any = None, dtype: Any = np.int64,
             endpoint: bool = False, *, dist: Any = None) -> Any:  # fmt: skip
    """`Generator.integers` of the module's default generator."""
    return _default().integers(low, high, size, dtype, endpoint, dist=dist)


@operation(kind="random", traced=False)
def exponential(scale: float = 1.0, size: Any = None, *, dist: Any = None) -> Any:
    """`Generator.exponential` of the module's default generator."""
    return _default().exponential(scale, size, dist=dist)


@operation(kind="random", traced=False)
def choice(a: Any, size: Any = None, replace: bool = True, p: Any = None, *,
           dist: Any = None) -> Any:  # fmt: skip
    """`Generator.choice` of the module's default generator."""
    return _default().choice(a, size, replace, p, dist=dist)
