"""Bounded memory: no operation holds more than the local share plus one local-sized temporary.

numpy reports its allocations to tracemalloc, so the traced peak during an
operation is the extra memory it needed on this rank (explicit gathers excepted).
"""

from __future__ import annotations

import numpy as np
import pytest
from _helpers import traced_peak

from d2o import default_comm, distributed_data_object
from d2o.testing import collective_assert

comm = default_comm()
N = 1 << 12  # rows per rank, 64 columns: 2 MiB of float64 per rank
SLACK = 256 * 1024  # small bookkeeping (partials, tables, Python objects)


@pytest.fixture(scope="module")
def big():
    a = distributed_data_object(global_shape=(N * comm.size, 64), dtype=np.float64)
    a.set_local_data(np.random.default_rng(comm.rank).standard_normal(a.local_shape))
    b = a.copy()
    return a, b


OPS = {
    "copy": lambda a, b: a.copy(),
    "copy_empty": lambda a, b: a.copy_empty(),
    "add": lambda a, b: a + b,
    "add_scalar": lambda a, b: a + 0,
    "iadd": lambda a, b: a.__iadd__(b),
    "sqrt": lambda a, b: np.sqrt(a, where=True),
    "sum": lambda a, b: a.sum(),
    "sum_axis0": lambda a, b: a.sum(axis=0),
    "sum_axis1": lambda a, b: a.sum(axis=1),
    "max": lambda a, b: a.max(),
    "mean": lambda a, b: a.mean(),
    "var": lambda a, b: a.var(),
    "std": lambda a, b: a.std(),
    "argmax": lambda a, b: a.argmax(),
    "cumsum": lambda a, b: a.cumsum(axis=0),
    "vdot": lambda a, b: np.vdot(a, b),
    "astype": lambda a, b: a.astype(np.float32),
    "compare": lambda a, b: a > b,
    "redistribute_fftw": lambda a, b: a.copy(distribution_strategy="fftw"),
    "iterate": lambda a, b: sum(1 for _ in a),
}


@pytest.mark.parametrize("name", list(OPS))
def test_peak_memory_bounded(big, name):
    a, b = big
    share = a.data.nbytes
    with np.errstate(invalid="ignore"):
        _, peak = traced_peak(lambda i: OPS[name](a, b))
    limit = share + SLACK if name != "iterate" else 2 * share + SLACK
    collective_assert(peak <= limit, f"{name}: peak {peak} B > {limit} B (share {share} B)")


def test_transposing_redistribution_bounded():
    a = distributed_data_object(global_shape=(512, 128 * comm.size), dtype=np.float64)
    a.set_local_data(1.0)
    share = a.data.nbytes
    _, peak = traced_peak(lambda i: a.copy(axis=1))
    collective_assert(peak <= share + SLACK, f"peak {peak} > {share + SLACK}")


# -- memory is given back at once: no reference cycles ------------------------------------


#: name -> the call, given d2o.numpy, two 6x4 arrays and a mesh layout.
CYCLE_CASES = {
    "add": lambda dnp, x, y, mesh: x + y,
    "dot": lambda dnp, x, y, mesh: dnp.dot(x.ravel(), y.ravel()),  # find_arrays, dispatch
    "sum": lambda dnp, x, y, mesh: dnp.sum(x, axis=0),
    "sort axis 0": lambda dnp, x, y, mesh: dnp.sort(x, axis=0),
    "concatenate": lambda dnp, x, y, mesh: dnp.concatenate([x, y]),
    "median": lambda dnp, x, y, mesh: dnp.median(x),
    "roll": lambda dnp, x, y, mesh: dnp.roll(x, 1, axis=0),
    "einsum": lambda dnp, x, y, mesh: dnp.einsum("ij,ij->i", x, y),
    "polyfit (bounded fallback)": lambda dnp, x, y, mesh: dnp.polyfit(
        dnp.arange(10.0), dnp.arange(10.0), 1
    ),
    "shifted views": lambda dnp, x, y, mesh: x[1:] + x[:-1],
    "mesh operands (funnel)": lambda dnp, x, y, mesh: dnp.ones((4, 4), dist=mesh).sum(axis=1),
    "random": lambda dnp, x, y, mesh: dnp.random.default_rng(1).random(10),
}


@pytest.mark.parametrize("name", sorted(CYCLE_CASES))
def test_operations_leave_no_reference_cycles(name):
    """An operation's temporaries (its operands' pieces, gathered or exchanged copies)
    are freed when it returns, as numpy's are: a reference cycle would keep them until
    the garbage collector happened to run (a nested function calling itself was one,
    and kept every d2o.numpy call's arguments alive: 11 MB per Laplace sweep)."""
    import gc

    import d2o
    import d2o.numpy as dnp

    x = dnp.arange(24.0).reshape(6, 4)
    y = dnp.asarray(np.linspace(0, 1, 24).reshape(6, 4))
    mesh = d2o.layout(mesh=(comm.size, 1))

    def case():
        return CYCLE_CASES[name](dnp, x, y, mesh)

    case()  # first calls may import lazily or fill caches (inspect's parsers make cycles)
    gc.collect()
    gc.freeze()  # (the collection below looks at the new objects only)
    gc.disable()
    try:
        case()
        found = gc.collect()
    finally:
        gc.enable()
        gc.unfreeze()
    collective_assert(found == 0, f"{name}: {found} objects in reference cycles")
