"""The dtype thinning of the 3- and 4-rank stages (tests/conftest.py, `thin_dtypes`).

From 3 ranks on, tests that differ only in their ``dtype`` (or ``dt``) parameter keep two
dtypes: the widest and the narrowest floating one.  Checked here on stand-in items (no
MPI), and on the session's own collection at every rank count.
"""

from __future__ import annotations

import os
from types import SimpleNamespace

import conftest
import pytest
from conftest import kept_dtypes, thin_dtypes

from d2o.testing import collective_assert

DTYPES = ["bool", "int32", "int64", "uint64", "float32", "float64", "complex128"]


@pytest.mark.parametrize(
    "values,kept",
    [
        (DTYPES, ["float32", "complex128"]),
        ([*DTYPES, "float16", "clongdouble"], ["float16", "clongdouble"]),
        (["int32", "float64", "complex128"], ["float64", "complex128"]),
        (["bool", "int32", "uint8", "int64"], ["bool", "int64"]),  # no float: the narrowest
        (["int8", "float32", "complex64", "float64"], ["float32", "complex64"]),
        (["int64", "float64", "int64"], ["int64", "float64"]),  # equals: the first
        (["float64", "int32"], ["float64", "int32"]),  # two: both
        (["one", "two", "three"], ["one", "two", "three"]),  # not dtypes: all
    ],
)
def test_a_sweep_keeps_its_widest_and_narrowest_floating_dtype(values, kept):
    got = [values[i] for i in sorted(kept_dtypes(values))]
    collective_assert(got == kept, f"{values}: kept {got}, expected {kept}")


def _item(name, **params):
    spec = SimpleNamespace(params=params)
    return SimpleNamespace(path="t.py", originalname=name, name=name, cls=None, callspec=spec)


def test_every_other_parameter_combination_stays():
    items = [_item("f", op=op, dtype=d) for op in ("sum", "max") for d in DTYPES]
    items += [_item("g", dt=d) for d in DTYPES] + [_item("h", shape=s) for s in range(3)]
    items.append(SimpleNamespace(path="t.py", name="plain"))  # not parametrized
    kept, dropped = thin_dtypes(items)
    seen = [(it.name, tuple(sorted(it.callspec.params.items()))) for it in kept[:-1]]
    want = [
        ("f", (("dtype", d), ("op", op)))
        for op in ("sum", "max")
        for d in ("float32", "complex128")
    ]
    want += [("g", (("dt", d),)) for d in ("float32", "complex128")]
    want += [("h", (("shape", s),)) for s in range(3)]
    collective_assert(seen == want and kept[-1].name == "plain", f"kept {seen}")
    collective_assert(len(dropped) == len(items) - len(kept) == 15, f"dropped {len(dropped)}")


def test_this_session_is_thinned_only_from_three_ranks(request, size):
    kept, dropped = thin_dtypes(request.session.items)
    full = os.environ.get("D2O_TESTS_ALL_DTYPES") == "1"  # asked for the full sweeps
    if size >= conftest.THIN_FROM_RANKS and not full:  # thinned already: nothing to drop
        collective_assert(not dropped, f"{len(dropped)} items left to thin at {size} ranks")
    elif request.config.getoption("file_or_dir") in ([], ["tests"]):  # the whole suite
        collective_assert(len(dropped) > 100, f"only {len(dropped)} dtype variants")
