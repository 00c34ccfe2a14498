"""Which flat indices of the global array a rank holds, as runs: what `d2o.ops.random`
needs to jump each rank to its own stretch of the stream.  Nothing here communicates."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..layouts.distributors import as_runs, entry_indices

#: Elements per block: every block of the flattened global array has its own stream
#: (`d2o.ops.random`).
BLOCK = 4096

# -- which flat indices a rank holds -----------------------------------------------------


def flat_runs(box: Any, shape: tuple) -> tuple[np.ndarray, np.ndarray]:
    """The runs of consecutive global flat indices (C order) of this rank's piece.

    Parameters
    ----------
    box : tuple
        The rank's region (`Distributor.region`): per axis a (start, stop) pair or a
        tuple of such runs.
    shape : tuple of int
        The global shape.

    Returns
    -------
    starts, stops : numpy.ndarray of int64
        Run ``k`` covers flat indices ``starts[k]:stops[k]``; the runs, one after the
        other, are the piece's elements in its own C order.
    """
    if not shape:  # a 0-d array: the one element, held (or computed) by every rank
        return np.zeros(1, np.int64), np.ones(1, np.int64)
    runs = [_joined(e) for e in box]
    if any(not r for r in runs):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    # the trailing axes held whole make each run longer: find the last axis that is not
    k = len(shape) - 1
    while k >= 0 and runs[k] == [(0, shape[k])]:
        k -= 1
    if k < 0:
        return np.zeros(1, np.int64), np.full(1, math.prod(shape), np.int64)
    inner = math.prod(shape[k + 1 :])
    rk = np.array(runs[k], dtype=np.int64) * inner  # the runs along axis k
    run_starts, run_stops = rk[:, 0], rk[:, 1]
    outer = np.zeros(1, np.int64)  # flat offsets of the positions along the axes before k
    for a in range(k):
        along = entry_indices(box[a]).astype(np.int64) * math.prod(shape[a + 1 :])
        outer = (outer[:, None] + along[None, :]).reshape(-1)
    starts = (outer[:, None] + run_starts[None, :]).reshape(-1)
    stops = (outer[:, None] + run_stops[None, :]).reshape(-1)
    keep = np.concatenate(([True], starts[1:] != stops[:-1]))  # join touching runs
    return starts[keep], stops[np.concatenate((keep[1:], [True]))]


def _joined(entry: tuple) -> list:
    """One axis of a region as a list of non-empty (start, stop) runs, touching runs
    joined."""
    out: list = []
    for a, b in as_runs(entry):
        if out and out[-1][1] == a:
            out[-1] = (out[-1][0], b)
        else:
            out.append((a, b))
    return out


def block_segments(starts: np.ndarray, stops: np.ndarray) -> tuple:
    """The runs cut at block boundaries: per segment (int64 arrays) its block, its
    ``lo:hi`` offsets in that block and its position in the rank's flattened piece."""
    lengths = stops - starts
    pos = np.cumsum(lengths) - lengths
    first, last = starts // BLOCK, (stops - 1) // BLOCK
    count = last - first + 1
    run = np.repeat(np.arange(starts.size), count)
    step = np.arange(run.size) - np.repeat(np.cumsum(count) - count, count)
    blk = first[run] + step
    lo = np.maximum(starts[run], blk * BLOCK)
    hi = np.minimum(stops[run], (blk + 1) * BLOCK)
    at = pos[run] + (lo - starts[run])
    base = blk * BLOCK
    return blk, lo - base, hi - base, at


def with_held_word(state: Any, has: int, value: int) -> Any:
    """A PCG64 state with its held half word (``has_uint32``, ``uinteger``) replaced."""
    return {**state, "has_uint32": has, "uinteger": value}


def scalar_param(value: Any, name: str) -> Any:
    if np.ndim(value) != 0:
        raise NotImplementedError(
            f"array-valued {name} is not supported by d2o's random generator yet; pass a scalar"
        )
    return value
