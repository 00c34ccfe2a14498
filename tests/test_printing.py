"""`d2o.numpy.array2string` against numpy's on the same global data: every layout, several
dtypes and shapes, numpy's print options; a summarized array fetches only the elements
it shows, whatever its size."""

from __future__ import annotations

import numpy as np
import pytest
from _helpers import layouts, make, sample

import d2o
import d2o.numpy as dnp
from d2o import default_comm
from d2o.testing import assert_raises_everywhere, collective_assert

comm = default_comm()
SHAPES = [(0,), (1,), (7,), (1500,), (3, 4), (40, 30), (2, 3, 4), (12, 9, 11)]
OPTIONS = [{}, {"precision": 3, "separator": ", "}, {"threshold": 10, "edgeitems": 2},
           {"edgeitems": 1, "max_line_width": 40, "prefix": "x = "}]  # fmt: skip


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", ["bool", "int32", "float64", "complex128"])
def test_array2string_as_numpy(shape, dtype):
    a = sample(shape, dtype, seed=len(shape))
    for strategy, axis in layouts(len(shape)):
        x = make(a, strategy, axis)
        for kw in OPTIONS:
            got, want = dnp.array2string(x, **kw), np.array2string(a, **kw)
            collective_assert(got == want, (strategy, axis, kw, got, want))


def test_printoptions_are_read():
    a = sample((30, 40), "float64")
    x = make(a, "equal", 1)
    with np.printoptions(threshold=50, edgeitems=4, precision=2):
        got, want = dnp.array2string(x), np.array2string(a)
    collective_assert(got == want, (got, want))


def test_a_summarized_array_fetches_only_what_it_shows():
    """A 200 x 300 float64 array (470 KiB) prints its 6 x 6 corners: a few KiB move."""
    a = sample((200, 300), "float64")
    for strategy, axis in [("equal", 0), ("equal", 1)] + [(m, 0) for m in ("mesh01", "cyc2")]:
        if strategy in ("mesh01", "cyc2") and comm.size < 2:
            continue
        x = make(a, strategy, axis)
        with d2o.options(check_args=False), d2o.trace() as t:
            text = dnp.array2string(x)
        sent = comm.allreduce(t.bytes_sent)
        collective_assert(text == np.array2string(a), strategy)
        collective_assert(sent <= 16 * 1024 * max(comm.size, 1), (strategy, sent))
        collective_assert(not any(r.fallback or r.gathers for r in t.records), t.records)


def test_bad_options_raise_as_numpy_everywhere():
    x = make(sample((5, 5), "float64"), "equal", 0)
    assert_raises_everywhere(TypeError, dnp.array2string, x, nonsense=1)
    assert_raises_everywhere(ValueError, dnp.array2string, x, floatmode="nonsense")
