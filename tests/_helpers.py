"""Shared builders for the tests: every layout of a global numpy array."""

from __future__ import annotations

import numpy as np

from d2o import default_comm, distributed_data_object
from d2o.layouts.distributors import fftw_lengths

DTYPES = ["bool", "int32", "int64", "uint64", "float32", "float64", "complex128"]
STRATEGIES = ["not", "equal", "fftw", "freeform"]


# Process-mesh layouts the suite runs on besides the paper's strategies, by name:
# (split, block).  The mesh is (2, P // 2) for even P, else (P, 1) (one axis: (P,)), so a
# 2x2 mesh is exercised at 4 ranks and a replica mesh axis at 2 and 4.
MESH_LAYOUTS = {
    "mesh01": ((0, 1), None),  # rows over mesh axis 0, columns over mesh axis 1
    "mesh10": ((1, 0), None),  # the transposed split
    "meshrep": ((None, 0), None),  # mesh axis 0 holds replicas
    "mesh02": ((0, 2), None),  # a 3-d array cut along its first and last axes
    "cyc2": ((0, 1), 2),  # block-cyclic, blocks of 2 on both axes
    "cyc3": ((0,), 3),  # block-cyclic on one mesh axis, blocks of 3 (not dividing 7, 5, ...)
}
MESH_SPLITS = {name: split for name, (split, _) in MESH_LAYOUTS.items()}


def mesh_names(ndim: int) -> list[str]:
    """The mesh layouts used for arrays of ``ndim`` dimensions."""
    if ndim == 1:
        return ["meshrep", "cyc3"]
    if ndim == 2:
        return ["mesh01", "mesh10", "meshrep", "cyc2", "cyc3"]
    if ndim >= 3:
        return ["mesh02", "mesh10", "cyc2"]
    return []


def mesh_of(name: str, comm=None):
    """The `d2o.layout` named ``name`` (see MESH_LAYOUTS) on ``comm``."""
    import d2o

    comm = default_comm() if comm is None else comm
    p = comm.size
    split, block = MESH_LAYOUTS[name]
    mesh = (p,) if len(split) == 1 else (2, p // 2) if p % 2 == 0 else (p, 1)
    return d2o.layout(mesh=mesh, split=split, block=block, comm=comm)


def spec(strategy: str):
    """What to pass as ``distribution_strategy=`` for a name from `layouts`."""
    return mesh_of(strategy) if strategy in MESH_SPLITS else strategy


def layouts(ndim: int) -> list[tuple[str, int]]:
    """(strategy, axis) pairs for an array of ``ndim`` dimensions (axis -1 on 3-d).

    Mesh layouts appear as their names in MESH_SPLITS (axis 0, unused); `make` builds them.
    """
    if ndim == 0:
        return [("not", 0), ("equal", 0)]
    axes = [0] if ndim == 1 else [0, 1] if ndim == 2 else [0, 1, -1]
    out = [("not", 0)]
    for s in ("equal", "fftw", "freeform"):
        out += [(s, a) for a in axes]
    return out + [(m, 0) for m in mesh_names(ndim)]


def freeform_lengths(n: int, size: int) -> list[int]:
    """Uneven piece lengths for 'freeform': the first ranks hold nothing when n is small."""
    return fftw_lengths(n, size)[::-1]


def make(a: np.ndarray, strategy: str, axis: int = 0) -> distributed_data_object:
    """The distributed version of ``a`` in the given layout (collective)."""
    if strategy in MESH_SPLITS:
        if a.ndim == 0:
            strategy = "equal"
        else:
            if max(s for s in MESH_SPLITS[strategy] if s is not None) >= a.ndim:
                strategy = "meshrep"  # the split does not fit: the replica mesh instead
            return distributed_data_object(a, distribution_strategy=mesh_of(strategy))
    if strategy != "freeform" or a.ndim == 0:
        strategy = "equal" if strategy == "freeform" else strategy  # 0-d: replicated anyway
        return distributed_data_object(a, distribution_strategy=strategy, axis=axis)
    comm = default_comm()
    ax = axis % a.ndim
    lengths = freeform_lengths(a.shape[ax], comm.size)
    start = sum(lengths[: comm.rank])
    piece = np.take(a, np.arange(start, start + lengths[comm.rank]), axis=ax)
    return distributed_data_object(local_data=piece, distribution_strategy="freeform", axis=ax)


def sample(shape: tuple, dtype: str, seed: int = 0, positive: bool = False) -> np.ndarray:
    """Deterministic test data of ``shape`` and ``dtype`` (the same on every rank)."""
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return (rng.integers(0, 2, n) == 1).reshape(shape)
    if dt.kind in "iu":
        lo = 0 if (positive or dt.kind == "u") else -9
        return rng.integers(lo, 10, n).astype(dt).reshape(shape)
    if dt.kind == "f":
        v = rng.standard_normal(n) * 10
        return (np.abs(v) if positive else v).astype(dt).reshape(shape)
    v = rng.standard_normal(n) + 1j * rng.standard_normal(n)
    return v.astype(dt).reshape(shape)


class Checks:
    """Accumulate local comparisons (no communication) and agree on them once.

    ``check.equal(obj, expected)`` compares this rank's piece of ``obj`` with
    the same part of the numpy result; ``check.done()`` is the one collective
    verdict.  Much cheaper than a gather per comparison on many ranks.
    """

    def __init__(self) -> None:
        self.failures: list[str] = []

    def equal(self, obj, expected, rtol=None, what="") -> None:
        from d2o.testing import _compare

        expected = np.asarray(expected)
        if not isinstance(obj, distributed_data_object):
            msg = f"expected a distributed object, got {type(obj).__name__}"
            self.failures.append(f"{what}: {msg}")
            return
        if obj.shape != expected.shape:
            self.failures.append(f"{what}: shape {obj.shape} != {expected.shape}")
            return
        part = expected[obj.distributor.local_slice] if expected.ndim else expected
        msg = _compare(obj.data, part, rtol, 0, True)
        if msg is not None:
            self.failures.append(f"{what}: {msg}")

    def true(self, cond, what="") -> None:
        if not cond:
            self.failures.append(str(what) or "condition failed")

    def done(self) -> None:
        from d2o.testing import collective_assert

        collective_assert(not self.failures, "\n".join(self.failures[:5]))


def traced_peak(fn, attempts: int = 2):
    """``(result, extra bytes)``: the traced memory peak while ``fn(attempt)`` runs, minimised
    over ``attempts`` runs.

    numpy reports its allocations to tracemalloc.  A one-off interpreter allocation (e.g. the
    interned-string table resizing, seen here at 1.9 MiB) does not repeat; memory an operation
    really needs does.  ``fn`` gets the attempt number (for fresh output paths).
    """
    import gc
    import tracemalloc

    best, result = None, None
    for attempt in range(attempts):
        result = None
        gc.collect()
        tracemalloc.start()
        try:
            tracemalloc.reset_peak()
            base = tracemalloc.get_traced_memory()[0]
            result = fn(attempt)
            peak = tracemalloc.get_traced_memory()[1] - base
        finally:
            tracemalloc.stop()
        best = peak if best is None else min(best, peak)
    return result, best


def spy_sends(monkeypatch) -> list:
    """Record, per data-moving call, ``(kind, the ranks this one sends to)``: ``Alltoallw``
    exchanges and ``Sendrecv`` (point to point)."""
    from d2o.core.comm import Comm

    seen: list = []
    orig_w, orig_p = Comm.Alltoallw, Comm.Sendrecv_many

    def spy_w(self, send, sendtypes, recv, recvtypes, *displs):
        peers = {r for r, (c, _) in enumerate(sendtypes) if c and r != self.rank}
        seen.append(("Alltoallw", peers))
        return orig_w(self, send, sendtypes, recv, recvtypes, *displs)

    def spy_p(self, sends, recvs):
        seen.append(("Sendrecv", {p for p, _ in sends}))
        return orig_p(self, sends, recvs)

    monkeypatch.setattr(Comm, "Alltoallw", spy_w)
    monkeypatch.setattr(Comm, "Sendrecv_many", spy_p)
    return seen
