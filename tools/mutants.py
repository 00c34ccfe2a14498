"""Seeded bugs: how many plausible one-line mistakes in d2o does the test suite catch?

A standalone developer tool (not part of the test suite, never collected by pytest).  It
holds a table of seeded bugs (`MUTANTS`): per entry a file of ``d2o/``, an exact piece of
its text (which must occur exactly once: an entry whose text no longer matches is
reported as *stale*, never skipped silently), the replacement, a one-line description and
the test files nearest to the code.  For every selected entry it

1. copies the working tree (``git ls-files -co --exclude-standard``: tracked files with
   their uncommitted changes, plus untracked files that are not ignored; no ``.venv``,
   ``.git`` or build output) into a fresh temporary directory, once per run, and from that
   snapshot a fresh copy per mutant, and applies the replacement there;
2. runs the nearest tests without MPI (``D2O_MPI=0 pytest -x``), with ``PYTHONPATH`` and
   the working directory set to the copy, so that the copy's ``d2o`` is imported (checked
   once per run, serially and under ``mpiexec``: the virtual environment's editable
   install of the real tree must not win);
3. if they pass, runs them under ``mpiexec -n 2`` in d2o's checked mode
   (``D2O_CHECK_ARGS=1``, ``tests/_mpi_runner.py``), as ``make test-mpi`` does;
4. with ``--full``, runs the whole suite (serial, then ``mpiexec -n 2``) for the mutants
   that survived their nearest tests.

A mutant is *caught* when a run exits non-zero.  A run that failed only because a test
timed out (pytest-timeout's ``Timeout``, or the stage's ``timeout`` exit 124/137) with no
other failing test is reported as *timeout-only*: the suite should not rely on timeouts
to detect a bug, so these are listed separately (they still count as caught).

Usage (from the repository root; the machine's cores are shared, so run few at a time)::

    .venv/bin/python tools/mutants.py --list              # the table
    .venv/bin/python tools/mutants.py --check             # every original text occurs once
    .venv/bin/python tools/mutants.py --only ID[,ID...]   # run some mutants
    .venv/bin/python tools/mutants.py --report out.md     # run all, write a markdown table
    .venv/bin/python tools/mutants.py --full              # survivors against the whole suite
    .venv/bin/python tools/mutants.py --baseline          # nearest tests unmutated first

Options: ``--jobs N`` (mutants run in parallel, default 1), ``--nprocs 2,3`` (rank counts
of the MPI stage, default 2), ``--logs DIR`` (keep every run's output), ``--keep`` (keep
the temporary copies).  The last line printed is ``caught K of N (P %)``, N counting the
mutants that ran (not stale ones, nor those whose nearest tests fail unmutated).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv"

PYTEST_OPTS = ("-x", "-q", "-p", "no:cacheprovider", "--timeout=150")
STAGE_TIMEOUT = 900  # seconds, per pytest run (as the Makefile's STAGE_TIMEOUT)
HANG_TIMEOUT = 60  # seconds: d2o's watchdog reports a stalled collective and aborts
EXCLUDED = (".venv/", ".git/", "docs/_build/")


@dataclass(frozen=True)
class Mutant:
    """One seeded bug: ``original`` (exactly once in ``file``) becomes ``replacement``."""

    id: str
    file: str
    original: str
    replacement: str
    description: str
    tests: tuple[str, ...]


def _m(id: str, file: str, original: str, replacement: str, description: str,
       *tests: str) -> Mutant:  # fmt: skip
    return Mutant(id, file, original, replacement, description,
                  tuple(f"tests/{t}" for t in tests))  # fmt: skip


# fmt: off
MUTANTS: tuple[Mutant, ...] = (
    # -- halo exchange and ghost cells ------------------------------------------------
    _m("halo-recv-row", "d2o/move/halo.py",
       "a, b = max(w0, hb[p]), min(w1, hb[p + 1])  # rows of p's slab this rank wants",
       "a, b = max(w0, hb[p]), min(w1, hb[p + 1] + 1)  # rows of p's slab this rank wants",
       "off-by-one boundary: the rows wanted from a neighbour's slab reach one row past it",
       "test_halo.py"),
    _m("ghost-low-layer", "d2o/move/ghost.py",
       "(max(b[r] - w, 0), min(b[r + 1] + w, n)) if b[r + 1] > b[r] else (b[r], b[r])",
       "(max(b[r] - w + 1, 0), min(b[r + 1] + w, n)) if b[r + 1] > b[r] else (b[r], b[r])",
       "off-by-one ghost layer: each slab asks for one row too few below its first row",
       "test_ghost.py"),
    _m("ghost-stale-buffer", "d2o/move/ghost.py",
       "if buf is not None and x.data.base is buf and x.data.shape == d.local_shape:",
       "if buf is not None and x.data.shape == d.local_shape:",
       "stale ghost buffer: the padded buffer is kept after the piece was replaced",
       "test_ghost.py"),
    # -- layouts and their caches -----------------------------------------------------
    _m("dist-slab-cache", "d2o/layouts/distributors.py",
       'key = ("slab", global_shape, comm, axis, offsets, strategy)',
       'key = ("slab", global_shape, comm, axis, strategy)',
       "stale layout cache: slab layouts cached without their offsets table",
       "test_core.py", "test_layout_rules.py", "test_layouts.py"),
    _m("layout-permuted", "d2o/layouts/mesh.py",
       "split = tuple(None if s is None else axes.index(s) for s in d.split)",
       "split = tuple(None if s is None else axes[s] for s in d.split)",
       "a transposed mesh layout maps split axes by the permutation, not its inverse",
       "test_shape_ops.py", "test_views.py", "test_layouts.py"),
    _m("layout-explicit-cache", "d2o/layouts/mesh.py",
       "key = (lay, tuple(shape), tuple(split), tuple(runs))",
       "key = (lay, tuple(shape), tuple(split))",
       "stale layout cache: sliced mesh layouts cached without their pieces",
       "test_views.py", "test_layouts.py"),
    _m("layout-reduced-axis", "d2o/layouts/mesh.py",
       "None if s is None or s in axes else s if keepdims else s - sum(a < s for a in axes)",
       "None if s is None or s in axes else s if keepdims else s - sum(a > s for a in axes)",
       "mesh reduction with axis: result split axes shifted by the reduced axes after them",
       "test_reductions.py", "test_layouts.py"),
    _m("layout-cyclic-blocks", "d2o/layouts/mesh.py",
       "return tuple((k * b, min(k * b + b, n)) for k in range(c, -(-n // b), p))",
       "return tuple((k * b, min(k * b + b, n)) for k in range(c, n // b, p))",
       "block-cyclic runs: the number of blocks rounded down (a last partial block lost)",
       "test_layouts.py", "test_redistribution.py"),
    # -- communication layer and the trace -------------------------------------------
    _m("comm-alltoallv-displs", "d2o/core/comm.py",
       "rd[r] = rd[r - 1] + rc[r - 1]",
       "rd[r] = rd[r - 1] + sc[r - 1]",
       "copy-paste: Alltoallv receive displacements summed from the send counts",
       "test_sorting.py", "test_indexing.py"),
    _m("comm-trace-received", "d2o/core/comm.py",
       '_tr.note("Alltoallv", (sum(sc) - sc[me]) * item, (sum(rc) - rc[me]) * item, self.size)',
       '_tr.note("Alltoallv", (sum(sc) - sc[me]) * item, (sum(sc) - sc[me]) * item, self.size)',
       "copy-pasted trace counter: Alltoallv's bytes_received noted as its bytes_sent",
       "test_trace.py"),
    _m("trace-record-received", "d2o/core/records.py",
       "r.bytes_received += received",
       "r.bytes_received += sent",
       "copy-pasted counter: an operation's record adds the bytes sent to bytes_received",
       "test_trace.py"),
    # -- reductions and scans ---------------------------------------------------------
    _m("reduce-scan-inclusive", "d2o/ops/reductions.py",
       "prior = [stacked[r] for r in range(d.comm.rank) if lengths[r]]",
       "prior = [stacked[r] for r in range(d.comm.rank + 1) if lengths[r]]",
       "cumsum/cumprod across ranks: inclusive instead of exclusive prefix of rank totals",
       "test_reductions.py"),
    _m("reduce-mesh-replicas", "d2o/ops/reductions.py",
       "        parts = parts[sources(d)]\n",
       "        parts = parts[:]\n",
       "full reduction on a mesh combines every replica's partial (each counted again)",
       "test_reductions.py", "test_layouts.py"),
    _m("reduce-kept-axis", "d2o/ops/reductions.py",
       "ax = d.axis if keepdims else d.axis - sum(a < d.axis for a in axes)",
       "ax = d.axis if keepdims else d.axis - sum(a > d.axis for a in axes)",
       "reduction over other axes: result split axis shifted by the reduced axes after it",
       "test_reductions.py", "test_layout_rules.py"),
    _m("reduce-argmax-stride", "d2o/ops/argreduce.py",
       "gi += i * _stride(d.global_shape, ax)",
       "gi += i * _stride(obj.data.shape, ax)",
       "argmax/argmin over all axes: flat index built with the local piece's strides",
       "test_reductions.py"),
    _m("reduce-var-merge", "d2o/ops/reductions.py",
       "m2 = m2 + m2b + abs(delta) ** 2 * (n * nb / tot)",
       "m2 = m2 + m2b + abs(delta) ** 2 * (nb / tot)",
       "var/std over all axes: Chan's pairwise update of M2 drops the factor n",
       "test_reductions.py"),
    # -- error agreement --------------------------------------------------------------
    _m("errors-local-raise", "d2o/core/errors.py",
       "if comm.any_flag(error is not None):",
       "if error is not None:",
       "agreement: only the failing rank raises, the others go on (they wait forever)",
       "test_errors.py", "test_deferred_errors.py"),
    _m("errors-highest-rank", "d2o/core/errors.py",
       "rank = next(r for r, item in enumerate(gathered) if item is not None)",
       "rank = max(r for r, item in enumerate(gathered) if item is not None)",
       "agreement raises the highest failing rank's exception instead of the lowest's",
       "test_errors.py", "test_deferred_errors.py"),
    # -- shapes, transposes, moveaxis -------------------------------------------------
    _m("shape-transpose-inverse", "d2o/ops/shape.py",
       "return d.slabs_like(shape, axes.index(d.axis))",
       "return d.slabs_like(shape, axes[d.axis])",
       "transpose of slabs: split axis moved by the permutation instead of its inverse",
       "test_shape_ops.py", "test_views.py"),
    _m("shape-swapaxes", "d2o/ops/shape.py",
       "axes[a1], axes[a2] = a2, a1",
       "axes[a1], axes[a2] = a1, a2",
       "swapaxes builds the identity permutation (the two axes are not swapped)",
       "test_shape_ops.py"),
    _m("shape-global-slice-owner", "d2o/ops/shape.py",
       "self.empty = not lo <= i < hi",
       "self.empty = not lo <= i <= hi",
       "global_slice with an integer: the next rank's first row counted as held here",
       "test_shape_ops.py"),
    _m("special-moveaxis", "d2o/ops/special.py",
       "for d, s in sorted(zip(dst, src)):",
       "for d, s in zip(dst, src):",
       "moveaxis inserts the moved axes in argument order instead of destination order",
       "test_views.py", "test_numpy_namespace.py"),
    _m("special-bincount-length", "d2o/ops/special.py",
       "n = max(agree_gather(d.comm, error, len(counts) if error is None else 0))",
       "n = min(agree_gather(d.comm, error, len(counts) if error is None else 0))",
       "bincount: the result length agreed as the shortest rank's instead of the longest",
       "test_reductions.py", "test_numpy_namespace.py"),
    # -- axis-local functions ---------------------------------------------------------
    _m("axislocal-layout-back", "d2o/ops/axislocal.py",
       "return _from_local(redistribute(res, out_d, d0), d0)",
       "return _from_local(res, d0)",
       "axis-local result labelled with the input's layout without moving back to it",
       "test_numpy_namespace.py"),
    _m("axislocal-out-axis", "d2o/ops/axislocal.py",
       "out_d = d.slabs_like(tuple(shape), o)",
       "out_d = d.slabs_like(tuple(shape), ax)",
       "axis-local result split at the input's axis instead of the axis it became",
       "test_numpy_namespace.py"),
    # -- redistribution ---------------------------------------------------------------
    _m("redist-packed-displs", "d2o/move/redistribution.py",
       "rd = np.concatenate(([0], np.cumsum(rcounts)[:-1])).astype(int)",
       "rd = np.concatenate(([0], np.cumsum(scounts)[:-1])).astype(int)",
       "copy-paste: the packed exchange unpacks received parts at the send offsets",
       "test_redistribution.py", "test_views.py"),
    _m("redist-runs-offset", "d2o/move/redistribution.py",
       "pos = before[k] + a - full_runs[k][0]",
       "pos = before[k] + a - full_runs[0][0]",
       "block-cyclic local offset measured from the first run's start, not the run's own",
       "test_redistribution.py", "test_layouts.py"),
    _m("redist-axis-shortcut", "d2o/move/redistribution.py",
       "if dst.axis is not None and dst.axis == src.axis and dst.bounds() == src.bounds():",
       "if dst.axis is not None and dst.bounds() == src.bounds():",
       "redistribution skipped when the offsets match although the split axis differs",
       "test_redistribution.py", "test_core.py"),
    # -- indexing: owners, keys, reversed copies -------------------------------------
    _m("indexing-owner-side", "d2o/ops/keyplan.py",
       'owner = np.searchsorted(offs, c_ax, side="right") - 1',
       'owner = np.searchsorted(offs, c_ax, side="left") - 1',
       "wrong owner: an element on a slab's first row is fetched from the previous rank",
       "test_indexing.py", "test_indexing_properties.py"),
    _m("indexing-int-local", "d2o/ops/getting.py",
       "piece = obj.data[emit(k, {ax: idx - d.span()[0]})] if mine else None",
       "piece = obj.data[emit(k, {ax: idx})] if mine else None",
       "integer on the split axis: the owner reads its piece at the global index",
       "test_indexing.py"),
    _m("indexing-reversed-pieces", "d2o/ops/getting.py",
       "dst = _slab(R, comm, o, lengths[::-1])",
       "dst = _slab(R, comm, o, lengths)",
       "a reversed copy's pieces keep the source ranks' lengths, not the mirrored ones",
       "test_layout_rules.py", "test_indexing.py"),
    _m("keys-negative-step", "d2o/core/keys.py",
       "j0 = max(0, (start - hi) // s + 1)",
       "j0 = max(0, (start - hi) // s)",
       "off-by-one: positions of a negative-step slice inside a rank's rows",
       "test_indexing.py", "test_indexing_properties.py", "test_views.py"),
    _m("keys-adjacent", "d2o/core/keys.py",
       "adjacent = adv_pos[-1] - adv_pos[0] + 1 == len(adv_pos)",
       "adjacent = adv_pos[-1] - adv_pos[0] == len(adv_pos)",
       "numpy's placement rule: adjacent advanced indices taken as separated",
       "test_indexing.py", "test_indexing_properties.py"),
    _m("fancy-owner-boundary", "d2o/ops/fancy.py",
       "o = (A >= offs[1]).view(np.int8)",
       "o = (A > offs[1]).view(np.int8)",
       "wrong owner: rank 1's first row is fetched from rank 0 (integer row keys)",
       "test_indexing.py"),
    _m("fancy-scratch-result", "d2o/ops/fancy.py",
       "        got = np.empty(shape, dtype=dtype)\n",
       '        got = _scratch("got", shape, dtype)\n',
       "stale buffer: a large row-fetch result handed back in the reused scratch buffer",
       "test_indexing.py"),
    _m("p2p-fetch-counts", "d2o/move/p2p.py",
       "vals = alltoallv(comm, np.take(_flat(data), req), rc, sc)",
       "vals = alltoallv(comm, np.take(_flat(data), req), sc, rc)",
       "element fetch: the replies sized with the request counts (send/recv swapped)",
       "test_indexing.py"),
    _m("p2p-replicated-counts", "d2o/move/p2p.py",
       "counts = M.sum(axis=1).tolist()",
       "counts = M.sum(axis=0).tolist()",
       "writes into a replicated array: per-rank counts summed over the wrong axis",
       "test_indexing.py"),
    # -- sorting ----------------------------------------------------------------------
    _m("sort-ties-prefix", "d2o/ops/samplesort.py",
       "before = eqs[: comm.rank].sum(axis=0)",
       "before = eqs[: comm.rank + 1].sum(axis=0)",
       "sample sort: ties at a splitter counted with an inclusive prefix (own rank too)",
       "test_sorting.py"),
    _m("sort-values-ties", "d2o/ops/samplesort.py",
       "before = np.cumsum(et, axis=0) - et  # ties held by the ranks before each rank",
       "before = np.cumsum(et, axis=0)  # ties held by the ranks before each rank",
       "exchange-first sort: splitter ties split by an inclusive prefix",
       "test_sorting.py"),
    _m("sorted-partition-prefix", "d2o/ops/sorting.py",
       "mine = start + table[: comm.rank].sum(axis=0)",
       "mine = start + table[: comm.rank + 1].sum(axis=0)",
       "partition: positions in each class from an inclusive prefix of rank counts",
       "test_sorting.py"),
    _m("sorted-median-ranks", "d2o/ops/sorting.py",
       "ks = sorted({(n - 1) // 2, n // 2})",
       "ks = sorted({n // 2 - 1, n // 2})",
       "median of the flattened array: off-by-one order statistics for odd counts",
       "test_sorting.py"),
    _m("sorted-inverse-offset", "d2o/ops/sorting.py",
       "out[g - _offset(d)] = v",
       "out[g] = v",
       "unique(return_inverse): the inverse written at global instead of local positions",
       "test_sorting.py"),
    # -- random numbers ---------------------------------------------------------------
    _m("random-call-jump", "d2o/ops/random.py",
       "self._walker.advance(((call << 32) + block + 1) << 64)",
       "self._walker.advance((call + block + 1) << 64)",
       "variable-width draws: call c's block b+1 starts where call c+1's block b does",
       "test_random.py"),
    _m("random-run-advance", "d2o/ops/random.py",
       "walker.advance(a - pos)",
       "walker.advance(a - pos - 1)",
       "fixed-width stream: the jump between a rank's runs is one word short",
       "test_random.py"),
    # -- FFT --------------------------------------------------------------------------
    _m("fft-twiddle-local", "d2o/ops/fft.py",
       "_twiddle(data, np.arange(n2), np.arange(c0, c1), n, 1 if inverse else -1)",
       "_twiddle(data, np.arange(n2), np.arange(c1 - c0), n, 1 if inverse else -1)",
       "four-step FFT: twiddle factors from local instead of global column indices",
       "test_fft.py"),
    _m("fft-hermitian-mirror", "d2o/ops/fft.py",
       "return ((n - hi + 1, n - lo + 1),) + tuple((0, s) for s in batch)",
       "return ((n - hi, n - lo),) + tuple((0, s) for s in batch)",
       "irfft along the split axis: the mirrored half of the spectrum off by one",
       "test_fft.py"),
    _m("fft-transpose-inverse", "d2o/ops/fft.py",
       "inv = tuple(np.argsort(perm))",
       "inv = perm",
       "FFT along the split axis transposes back by the permutation, not its inverse",
       "test_fft.py"),
    # -- matrix products --------------------------------------------------------------
    _m("summa-block-offset", "d2o/ops/summa.py",
       "s = brows[ib][0]",
       "s = acols[ja][0]",
       "SUMMA: B's panel cut at A's column-block offset (copy-pasted block index)",
       "test_linalg.py"),
    _m("summa-panel-root", "d2o/ops/summa.py",
       "ib = next(r for r, (s, e) in enumerate(brows) if s <= k0 < e)",
       "ib = next(r for r, (s, e) in enumerate(brows) if s <= k0 <= e)",
       "SUMMA: a panel on a block boundary broadcast from the previous block's rank",
       "test_linalg.py"),
    _m("summa-matvec-axis", "d2o/ops/summa.py",
       'y = subcomm(da, (1,)).Allreduce(part, "sum")',
       'y = subcomm(da, (0,)).Allreduce(part, "sum")',
       "mesh matrix-vector product: partials summed down columns instead of along rows",
       "test_linalg.py"),
    _m("linalg-ring-direction", "d2o/ops/linalg.py",
       "src = (comm.rank + step) % comm.size",
       "src = (comm.rank - step) % comm.size",
       "row-block matmul: the circulating block labelled with the wrong neighbour",
       "test_linalg.py"),
    _m("einsum-out-axis", "d2o/ops/einsum.py",
       "result = _from_local(res, d.slabs_like(shape, o))",
       "result = _from_local(res, d.slabs_like(shape, d.axis))",
       "einsum: result split at the operand's axis position, not the output letter's",
       "test_numpy_namespace.py"),
    _m("tensordot-int-axes", "d2o/ops/einsum.py",
       "axes = (list(range(na - axes, na)), list(range(axes)))",
       "axes = (list(range(axes)), list(range(axes)))",
       "tensordot with integer axes contracts a's first axes instead of its last",
       "test_numpy_namespace.py"),
    # -- files ------------------------------------------------------------------------
    _m("npy-offset-bytes", "d2o/io/_npy.py",
       "_read_span(path, local, offset + spans[c.rank] * dtype.itemsize)",
       "_read_span(path, local, offset + spans[c.rank])",
       ".npy load: a rank's contiguous part read at an element offset, not a byte offset",
       "test_io_npy.py"),
    _m("npy-offset-stride", "d2o/io/_npy.py",
       "start += lo * stride",
       "start += lo",
       ".npy load: a box's flat offset ignores the strides of the axes it spans",
       "test_io_npy.py"),
    _m("hdf5-block-rows", "d2o/io/_hdf5.py",
       "i0, i1 = (block[0][0] - box[0][0], block[0][1] - box[0][0])",
       "i0, i1 = (block[0][0], block[0][1])",
       "HDF5 write: a block's rows taken from the piece at global positions",
       "test_io_hdf5.py"),
    _m("io-selection-flip", "d2o/io/_common.py",
       "src.append(slice(last, first + 1, -step))",
       "src.append(slice(last, first, -step))",
       "file selection with a negative step: the stored range misses one element",
       "test_io_hdf5.py", "test_io_zarr.py"),
    # -- joining and creation ---------------------------------------------------------
    _m("join-slot-offset", "d2o/ops/joining.py",
       "at[ax] = slice(w[ax][0] + lo - mine[ax][0], w[ax][1] + lo - mine[ax][0])",
       "at[ax] = slice(w[ax][0] - mine[ax][0], w[ax][1] - mine[ax][0])",
       "concatenate: an input's part written without its slot's offset in the result",
       "test_numpy_namespace.py", "test_shape_ops.py"),
    _m("join-same-bounds", "d2o/ops/joining.py",
       "if d.replicated or is_mesh(d) or d.axis != d0.axis or d.bounds() != d0.bounds():",
       "if d.replicated or is_mesh(d) or d.axis != d0.axis:",
       "concatenate joins pieces locally although the inputs' pieces are cut differently",
       "test_numpy_namespace.py", "test_shape_ops.py"),
    _m("create-eye-k", "d2o/ops/creation.py",
       "want = rows + k",
       "want = rows - k",
       "eye(k=...): the diagonal offset applied with the wrong sign",
       "test_numpy_namespace.py"),
    _m("create-tri-k", "d2o/ops/creation.py",
       "return fill(d, dtype, lambda i, j: j - i <= k)",
       "return fill(d, dtype, lambda i, j: j - i < k)",
       "tri: the k-th diagonal itself left out (off by one)",
       "test_numpy_namespace.py"),
    # -- element-wise operations, the array object ------------------------------------
    _m("align-broadcast-axis", "d2o/array/align.py",
       "return moved(d, shape, shift) if is_mesh(d) else like(d, shape, axis=d.axis + shift)",
       "return moved(d, shape, shift) if is_mesh(d) else like(d, shape, axis=d.axis)",
       "broadcast result split at the operand's axis number, not shifted by new axes",
       "test_arithmetic.py", "test_layout_rules.py"),
    _m("ufunc-reuse-view", "d2o/ops/ufuncs.py",
       "if data.base is not None or not data.flags.writeable:",
       "if not data.flags.writeable:",
       "temporary elision writes into a piece that is a view of another array",
       "test_temporaries.py"),
    _m("d2o-copy-alias", "d2o/api/array.py",
       "data = redistribute(self.data, d, target, copy=True, explicit=True)",
       "data = redistribute(self.data, d, target, copy=False, explicit=True)",
       "copy(distribution_strategy=...) shares memory with the original when nothing moves",
       "test_core.py", "test_views.py"),
    _m("composed-diff-order", "d2o/numpy/composed.py",
       "            x = op(x[1:], x[:-1])\n",
       "            x = op(x[:-1], x[1:])\n",
       "diff of a distributed 1-d array: the operands of the difference swapped",
       "test_numpy_namespace.py"),
    # -- batch 2: a holdout, written after the first whole-table run and its new tests,
    #    run once against the final suite, never used to write a test --------------------
    _m("create-linspace-div", "d2o/ops/creation.py",
       "div = (num - 1) if endpoint else num",
       "div = num if endpoint else num",
       "linspace divides by num even with the endpoint",
       "test_numpy_namespace.py", "test_core.py"),
    _m("create-index-shape", "d2o/ops/creation.py",
       "idx = [_indices(e).reshape((-1,) + (1,) * (ndim - a - 1)) for a, e in enumerate(box)]",
       "idx = [_indices(e).reshape((-1,) + (1,) * (ndim - a)) for a, e in enumerate(box)]",
       "index grids of a box get one trailing axis too many",
       "test_numpy_namespace.py", "test_core.py"),
    _m("original-median-even", "d2o/ops/original.py",
       'ks = [n - 1] if kind in "fc" and bool(np.isnan(obj).any()) else sorted({(n - 1) // 2, n // 2})',
       'ks = [n - 1] if kind in "fc" and bool(np.isnan(obj).any()) else sorted({n // 2})',
       "the paper's median of an even count takes the upper middle alone",
       "test_original_api.py", "test_original_d2o.py"),
    _m("sorted-median-even", "d2o/ops/sorting.py",
       "        ks = sorted({(n - 1) // 2, n // 2})",
       "        ks = sorted({(n - 1) // 2})",
       "d2o.numpy.median of an even count takes the lower middle alone",
       "test_sorting.py", "test_numpy_namespace.py"),
    _m("sorted-unique-ids", "d2o/ops/sorting.py",
       "ids = (int(nu[: comm.rank].sum()) + np.cumsum(flag) - 1).astype(np.intp)",
       "ids = (int(nu[: comm.rank + 1].sum()) + np.cumsum(flag) - 1).astype(np.intp)",
       "unique's inverse: a rank's first id counts its own uniques too",
       "test_sorting.py", "test_numpy_namespace.py"),
    _m("sorted-stable-start", "d2o/ops/sorting.py",
       "mine = start + table[: comm.rank].sum(axis=0)",
       "mine = start + table[: comm.rank + 1].sum(axis=0)",
       "a rank's place among equal keys counts its own keys too (off by one rank)",
       "test_sorting.py", "test_numpy_namespace.py"),
    _m("linalg-matvec-axis", "d2o/ops/linalg.py",
       "return _from_local(res.data[0], d.slabs_like(shape, d.axis - 1))",
       "return _from_local(res.data[0], d.slabs_like(shape, d.axis))",
       "a product that drops the first axis keeps the split axis's old number",
       "test_linalg.py"),
    _m("ndarray-put-last-wins", "d2o/ops/flat.py",
       "pos = (np.cumsum(k) - 1)[g[sel]]",
       "pos = np.cumsum(k)[g[sel]]",
       "flat/put writes: the position of a value among the selected ones off by one",
       "test_ndarray_methods.py"),
    _m("shape-offsets-reversed", "d2o/ops/shape.py",
       "offsets = tuple(np.concatenate(([0], np.cumsum(lengths))).astype(int).tolist())",
       "offsets = tuple(np.concatenate(([0], np.cumsum(lengths[::-1]))).astype(int).tolist())",
       "a layout built from per-rank lengths takes them in reverse rank order",
       "test_shape_ops.py", "test_core.py"),
    _m("reduce-drop-first-partial", "d2o/ops/reductions.py",
       "return ufunc.reduce(stacked, axis=0, dtype=partial.dtype)",
       "return ufunc.reduce(stacked[1:], axis=0, dtype=partial.dtype)",
       "combining partials in rank order leaves out rank 0's",
       "test_reductions.py"),
    _m("reduce-var-mean-dtype", "d2o/ops/reductions.py",
       "m = mean(obj, axis=axis, dtype=dtype, keepdims=True)",
       "m = mean(obj, axis=axis, dtype=dtype, keepdims=False)",
       "var along an axis subtracts a mean without its kept axis (broadcasts wrongly)",
       "test_reductions.py"),
    _m("halo-own-index", "d2o/move/halo.py",
       "                arr = data[lead + (slice(a - mine, b - mine),)]\n                own = len(pieces)",
       "                arr = data[lead + (slice(a - mine, b - mine),)]\n                own = len(pieces) - 1",
       "a shifted operand's own piece is taken for the one before it",
       "test_halo.py"),
)
# fmt: on


# -- the table ------------------------------------------------------------------------


def stale_reason(m: Mutant, root: Path) -> str | None:
    """Why entry ``m`` cannot be applied to the tree at ``root`` (None: it can)."""
    path = root / m.file
    if not path.is_file():
        return f"{m.file} does not exist"
    text = path.read_text(encoding="utf-8")
    count = text.count(m.original)
    if count != 1:
        return f"original text occurs {count} times in {m.file} (must be exactly once)"
    if m.replacement == m.original:
        return "replacement equals the original"
    try:
        compile(text.replace(m.original, m.replacement, 1), str(path), "exec")
    except SyntaxError as exc:
        return f"the mutated file does not compile: {exc}"
    missing = [t for t in m.tests if not (root / t).is_file()]
    if missing:
        return f"missing test files: {', '.join(missing)}"
    return None


def check_table(mutants: Sequence[Mutant]) -> list[str]:
    """Problems of the table itself (duplicate ids, entries without tests)."""
    problems = []
    seen: set[str] = set()
    for m in mutants:
        if m.id in seen:
            problems.append(f"duplicate id {m.id}")
        seen.add(m.id)
        if not m.tests:
            problems.append(f"{m.id}: no tests")
    return problems


def select(ids: str | None) -> list[Mutant]:
    if not ids:
        return list(MUTANTS)
    wanted = [i.strip() for i in ids.split(",") if i.strip()]
    by_id = {m.id: m for m in MUTANTS}
    unknown = [i for i in wanted if i not in by_id]
    if unknown:
        raise SystemExit(f"unknown mutant id(s): {', '.join(unknown)} (see --list)")
    return [by_id[i] for i in wanted]


# -- copies of the tree ---------------------------------------------------------------


def tree_files(root: Path) -> list[str]:
    """The working tree's files: tracked (as they are now) and untracked, not ignored."""
    out = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"],
        cwd=root, check=True, capture_output=True,
    ).stdout.decode()  # fmt: skip
    names = sorted({n for n in out.split("\0") if n})
    return [n for n in names if not n.startswith(EXCLUDED) and (root / n).exists()]


def snapshot(root: Path, dest: Path) -> int:
    """Copy the working tree's files into ``dest``; returns how many."""
    files = tree_files(root)
    for name in files:
        src, dst = root / name, dest / name
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            os.symlink(os.readlink(src), dst)
        else:
            shutil.copy2(src, dst)
    return len(files)


def apply(m: Mutant, tree: Path) -> None:
    path = tree / m.file
    text = path.read_text(encoding="utf-8")
    assert text.count(m.original) == 1, m.id
    path.write_text(text.replace(m.original, m.replacement, 1), encoding="utf-8")


# -- running the tests ----------------------------------------------------------------


@dataclass
class Run:
    """One pytest run on a copy: its stage, exit status, time and what failed."""

    stage: str
    rc: int
    seconds: float
    timed_out: bool = False
    failures: list[str] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return self.rc != 0

    @property
    def timeout_only(self) -> bool:
        return self.failed and self.timed_out and not self.failures


class Runner:
    """Runs pytest stages on copies of the tree with the virtual environment's Python."""

    def __init__(self, venv: Path, nprocs: Sequence[int], logs: Path | None) -> None:
        self.python = str(venv / "bin" / "python")
        mpiexec = venv / "bin" / "mpiexec"
        self.mpiexec = str(mpiexec) if mpiexec.exists() else (shutil.which("mpiexec") or "")
        self.nprocs = tuple(nprocs)
        self.logs = logs

    def env(self, tree: Path, mpi: bool, logdir: Path | None = None) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("D2O_", "PYTEST_"))}
        env.pop("PYTHONPATH", None)
        env.update(PYTHONPATH=str(tree), PYTHONDONTWRITEBYTECODE="1", OMP_NUM_THREADS="1",
                   OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")  # fmt: skip
        if mpi:
            env["D2O_CHECK_ARGS"] = "1"
            env["D2O_MPI_LOGDIR"] = str(logdir)
            env["D2O_HANG_TIMEOUT"] = str(HANG_TIMEOUT)  # as make test-mpi: hangs end early
        else:
            env["D2O_MPI"] = "0"
        return env

    def command(self, stage: str, tests: Sequence[str]) -> list[str]:
        guard = ["timeout", "-k", "10", str(STAGE_TIMEOUT)]
        if stage == "serial":
            return [*guard, self.python, "-m", "pytest", *PYTEST_OPTS, *tests]
        n = stage.split("-")[1]
        return [*guard, self.mpiexec, "-n", n, self.python, "-m", "mpi4py",
                "tests/_mpi_runner.py", *PYTEST_OPTS, "--timeout-method=thread",
                *tests]  # fmt: skip

    def run(self, tree: Path, stage: str, tests: Sequence[str], label: str) -> Run:
        """Run ``tests`` in ``tree``: stage ``serial`` or ``mpi-N``."""
        mpi = stage != "serial"
        logdir = tree.parent / f"{tree.name}-mpi-logs"
        if mpi:
            shutil.rmtree(logdir, ignore_errors=True)
            logdir.mkdir(parents=True)
        start = time.monotonic()
        proc = subprocess.run(self.command(stage, tests), cwd=tree, env=self.env(tree, mpi, logdir),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, errors="replace")  # fmt: skip
        seconds = time.monotonic() - start
        text = proc.stdout
        if mpi:  # ranks > 0 write to their logs (tests/_mpi_runner.py)
            for log in sorted(logdir.glob("rank*.log")):
                text += f"\n===== {log.name} =====\n" + log.read_text(errors="replace")
            shutil.rmtree(logdir, ignore_errors=True)
        if self.logs is not None:
            self.logs.mkdir(parents=True, exist_ok=True)
            (self.logs / f"{label}.log").write_text(text)
        return classify(stage, proc.returncode, seconds, text)


def classify(stage: str, rc: int, seconds: float, text: str) -> Run:
    """A `Run` from a pytest run's exit status and output (all ranks' output for MPI)."""
    lines = text.splitlines()
    failing = [ln for ln in lines if ln.startswith(("FAILED ", "ERROR "))]
    # a hang ended by pytest-timeout, the stage's timeout, or d2o's hang watchdog
    timed_out = rc in (124, 137) or any("Timeout" in ln or "hang_timeout=" in ln for ln in lines)
    failures = sorted({ln for ln in failing if "Timeout" not in ln})
    if rc not in (0, 124, 137) and not failing and not timed_out:
        # no summary line (a crash, an MPI abort, a collection error): still a failure
        failures = [next((ln for ln in reversed(lines) if ln.strip()), f"exit status {rc}")]
    return Run(stage, rc, seconds, timed_out, failures)


def check_import(runner: Runner, tree: Path) -> None:
    """Fail unless the copy's ``d2o`` is the one imported, serially and under mpiexec
    (the virtual environment holds an editable install of the real tree)."""
    code = "import d2o; print(d2o.__file__)"
    expected = str((tree / "d2o" / "__init__.py").resolve())
    cmds = [("serial", [runner.python, "-c", code])]
    if runner.mpiexec:
        cmds.append(("mpi", [runner.mpiexec, "-n", "2", runner.python, "-c", code]))
    for stage, cmd in cmds:
        env = runner.env(tree, stage == "mpi", tree.parent / "import-check-logs")
        out = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, timeout=300)
        found = [str(Path(ln.strip()).resolve()) for ln in out.stdout.splitlines() if ln.strip()]
        if out.returncode != 0 or not found or any(f != expected for f in found):
            raise SystemExit(
                f"the copy's d2o is not the one imported ({stage}): expected {expected}, "
                f"got {found} {out.stderr[-2000:]}"
            )


# -- one mutant -----------------------------------------------------------------------


@dataclass
class Outcome:
    mutant: Mutant
    status: str  # caught, survived, stale, baseline-failed
    runs: list[Run] = field(default_factory=list)
    note: str = ""
    seconds: float = 0.0

    @property
    def caught_by(self) -> Run | None:
        return next((r for r in self.runs if r.failed), None)

    @property
    def timeout_only(self) -> bool:
        r = self.caught_by
        return r is not None and r.timeout_only


def stages(runner: Runner) -> list[str]:
    return ["serial"] + [f"mpi-{n}" for n in runner.nprocs]


def evaluate(m: Mutant, runner: Runner, pristine: Path, work: Path, full: bool,
             baseline: dict | None, keep: bool) -> Outcome:  # fmt: skip
    """Apply ``m`` to a fresh copy of ``pristine`` and run its tests until one run fails."""
    reason = stale_reason(m, pristine)
    if reason is not None:
        return Outcome(m, "stale", note=reason)
    if baseline is not None and baseline.get(m.tests):
        return Outcome(m, "baseline-failed", note=baseline[m.tests])
    start = time.monotonic()
    tree = work / m.id
    shutil.copytree(pristine, tree, symlinks=True)
    out = Outcome(m, "survived")
    try:
        apply(m, tree)
        plan = [(m.tests, "")] + ([(("tests",), "full-")] if full else [])
        for tests, prefix in plan:
            for stage in stages(runner):
                run = runner.run(tree, stage, tests, f"{m.id}.{prefix}{stage}")
                run.stage = prefix + stage
                out.runs.append(run)
                if run.failed:
                    out.status = "caught"
                    out.note = "; ".join(run.failures[:2]) or "timeout"
                    return out
        return out
    finally:
        out.seconds = time.monotonic() - start
        if not keep:
            shutil.rmtree(tree, ignore_errors=True)


def run_baseline(mutants: Sequence[Mutant], runner: Runner, pristine: Path, work: Path,
                 keep: bool) -> dict:  # fmt: skip
    """The nearest tests of every selected mutant, unmutated: test set -> failure or ''."""
    results: dict = {}
    sets = sorted({m.tests for m in mutants if stale_reason(m, pristine) is None})
    for i, tests in enumerate(sets):
        tree = work / f"baseline-{i}"
        shutil.copytree(pristine, tree, symlinks=True)
        try:
            failure = ""
            for stage in stages(runner):
                run = runner.run(tree, stage, tests, f"baseline-{i}.{stage}")
                print(f"baseline {' '.join(tests)} [{stage}]: "
                      f"{'FAILED' if run.failed else 'ok'} ({run.seconds:.0f} s)", flush=True)  # fmt: skip
                if run.failed:
                    failure = f"unmutated {stage} fails: " + ("; ".join(run.failures[:2]) or
                                                             "timeout")  # fmt: skip
                    break
            results[tests] = failure
        finally:
            if not keep:
                shutil.rmtree(tree, ignore_errors=True)
    return results


# -- reporting ------------------------------------------------------------------------


def stage_cell(o: Outcome, stage: str) -> str:
    run = next((r for r in o.runs if r.stage == stage), None)
    if run is None:
        return "-"
    if not run.failed:
        return "passed"
    return "caught (timeout)" if run.timeout_only else "caught"


def report(outcomes: Sequence[Outcome], runner: Runner, full: bool) -> str:
    cols = stages(runner)
    names = ["serial"] + [f"{n} ranks" for n in runner.nprocs]
    if full:
        cols += [f"full-{s}" for s in stages(runner)]
        names += ["full serial"] + [f"full {n} ranks" for n in runner.nprocs]
    head = ["id", "file", "description", *names, "timeout only", "result", "s"]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for o in outcomes:
        result = o.status if o.status != "caught" else f"caught ({o.caught_by.stage})"
        cells = [o.mutant.id, f"`{o.mutant.file}`", o.mutant.description,
                 *[stage_cell(o, s) for s in cols], "yes" if o.timeout_only else "",
                 result if not o.note or o.status == "caught" else f"{result}: {o.note}",
                 f"{o.seconds:.0f}"]  # fmt: skip
        rows.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(rows) + "\n\n" + summary(outcomes) + "\n"


def summary(outcomes: Sequence[Outcome]) -> str:
    ran = [o for o in outcomes if o.status in ("caught", "survived")]
    caught = [o for o in ran if o.status == "caught"]
    lines = []
    for status in ("stale", "baseline-failed"):
        bad = [o.mutant.id for o in outcomes if o.status == status]
        if bad:
            lines.append(f"{status} (not counted): {', '.join(bad)}")
    timeouts = [o.mutant.id for o in caught if o.timeout_only]
    lines.append(f"caught only by a timeout: {', '.join(timeouts) if timeouts else 'none'}")
    survivors = [o.mutant.id for o in ran if o.status == "survived"]
    lines.append(f"survived: {', '.join(survivors) if survivors else 'none'}")
    pct = 100.0 * len(caught) / len(ran) if ran else 0.0
    lines.append(f"caught {len(caught)} of {len(ran)} ({pct:.1f} %)")
    return "\n".join(lines)


def line(o: Outcome) -> str:
    if o.status == "caught":
        run = o.caught_by
        how = f"by {run.stage}" + (" (timeout only)" if o.timeout_only else "")
        return f"{o.mutant.id}: caught {how} in {o.seconds:.0f} s  [{o.note[:120]}]"
    if o.status == "survived":
        times = ", ".join(f"{r.stage} {r.seconds:.0f} s" for r in o.runs)
        return f"{o.mutant.id}: SURVIVED ({times})"
    return f"{o.mutant.id}: {o.status}: {o.note}"


# -- main -----------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--list", action="store_true", help="print the table and exit")
    p.add_argument("--check", action="store_true",
                   help="check that every original text occurs exactly once; run nothing")  # fmt: skip
    p.add_argument("--only", metavar="ID[,ID]", help="run these mutants only")
    p.add_argument("--full", action="store_true",
                   help="run the whole suite for survivors of their nearest tests")  # fmt: skip
    p.add_argument("--baseline", action="store_true",
                   help="run the nearest tests unmutated first; mutants whose tests fail "
                        "unmutated are not counted")  # fmt: skip
    p.add_argument("--jobs", type=int, default=1, help="mutants run in parallel (default 1)")
    p.add_argument("--nprocs", default="2", help="rank counts of the MPI stage (default 2)")
    p.add_argument("--report", metavar="FILE", help="write a markdown table to FILE")
    p.add_argument("--logs", metavar="DIR", help="keep every run's output in DIR")
    p.add_argument("--keep", action="store_true", help="keep the temporary copies")
    p.add_argument("--venv", default=str(VENV), help=f"virtual environment (default {VENV})")
    args = p.parse_args(argv)

    problems = check_table(MUTANTS)
    if problems:
        print("\n".join(problems), file=sys.stderr)
        return 2
    mutants = select(args.only)
    if args.list:
        for m in mutants:
            print(f"{m.id:26} {m.file:24} {m.description}")
            print(f"{'':26} tests: {' '.join(m.tests)}")
        files = sorted({m.file for m in mutants})
        print(f"{len(mutants)} mutants in {len(files)} files")
        return 0
    if args.check:
        stale = 0
        for m in mutants:
            reason = stale_reason(m, ROOT)
            if reason is not None:
                stale += 1
                print(f"STALE {m.id}: {reason}")
        print(f"{len(mutants) - stale} of {len(mutants)} entries apply to {ROOT}")
        return 1 if stale else 0

    nprocs = [int(n) for n in args.nprocs.split(",") if n.strip()]
    runner = Runner(Path(args.venv), nprocs, Path(args.logs).resolve() if args.logs else None)
    if not Path(runner.python).exists():
        raise SystemExit(f"no Python at {runner.python} (make venv)")
    if nprocs and not runner.mpiexec:
        raise SystemExit("mpiexec not found")
    work = Path(tempfile.mkdtemp(prefix="d2o-mutants-"))
    try:
        pristine = work / "pristine"
        n = snapshot(ROOT, pristine)
        print(f"snapshot of {n} files of {ROOT} in {pristine}", flush=True)
        check_import(runner, pristine)
        print("checked: the copies' d2o is imported (serial and mpiexec)", flush=True)
        baseline = (
            run_baseline(mutants, runner, pristine, work, args.keep) if args.baseline else None
        )
        lock = threading.Lock()

        def one(m: Mutant) -> Outcome:
            o = evaluate(m, runner, pristine, work, args.full, baseline, args.keep)
            with lock:
                print(line(o), flush=True)
            return o

        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            outcomes = list(pool.map(one, mutants))
    finally:
        if args.keep:
            print(f"copies kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    if args.report:
        Path(args.report).write_text(report(outcomes, runner, args.full))
        print(f"report written to {args.report}")
    print(summary(outcomes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
