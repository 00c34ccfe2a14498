"""Issue 30's memory table, asserted: each seed program's peak memory per rank, the global
size fixed, stays within ``BOUND x N/P + SLACK`` (`tools/memory_table.py`: N the program's
largest array; the bound is one N/P above numpy's own peak on one process), at every
process count and without MPI, on small sizes.  And the documentation's table is the data
file's."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from d2o import default_comm
from d2o.testing import collective_assert

_spec = importlib.util.spec_from_file_location(
    "memory_table", Path(__file__).resolve().parents[1] / "tools" / "memory_table.py"
)
table = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(table)

comm = default_comm()


@pytest.mark.parametrize("name", list(table.PROGRAMS))
def test_peak_per_rank_within_the_bound(name):
    row = table.measure(name, table.SMALL[name], comm)
    share = row["N"] / comm.size
    bound = table.BOUND[name] * share + table.SLACK
    collective_assert(row["peak"] <= bound, (name, row, f"{row['peak'] / share:.2f} N/P"))
    collective_assert(row["peak"] >= share, (name, row))  # it measured the program's arrays


def test_documented_table_is_the_data_files():
    if comm.rank == 0:
        assert table.TABLE.read_text() == table.render()
