"""`d2o.numpy`'s sorting, searching and set functions: their table entries.

The sort machinery (`d2o.ops.sorting`) sorts or selects with one all-to-all and no
gather; where the sorted axis is whole on every rank it keeps the axis-local entries
(`d2o.numpy.axes`), so it runs after them.  The functions composed of distributed
building blocks (`d2o.numpy.composed`) are entered here too.
"""

from __future__ import annotations

import numpy as np

from ..ops import sorting as _sorted
from . import composed as _composed
from .axes import with_descending
from .factories import axis_entry

__all__ = ["fill"]


def fill(table: dict) -> None:
    """Enter the sort machinery's functions, wrapping the axis-local and reduction entries
    of ``median``, the quantiles and ``diff``, and the composed functions."""
    table["sort"] = ("sort", with_descending(_sorted.sorter(axis_entry(np.sort, "sort"), "sort", False),
                                         False), "")  # fmt: skip
    table["argsort"] = ("sort", with_descending(_sorted.sorter(axis_entry(np.argsort, "argsort"),
                                                           "argsort", True), True), "")  # fmt: skip
    for n, idx in (("partition", False), ("argpartition", True)):
        table[n] = ("sort", _sorted.partitioner(axis_entry(getattr(np, n), n), n, idx), "")
    for n in ("median percentile quantile nanmedian nanpercentile nanquantile").split():
        table[n] = ("sort", _sorted.quantiler(table[n][1], n), "")
    for f in (_sorted.lexsort, _sorted.searchsorted, _sorted.isin, _sorted.unique,
              _sorted.unique_values, _sorted.unique_counts, _sorted.unique_inverse,
              _sorted.unique_all, _sorted.union1d, _sorted.intersect1d, _sorted.setdiff1d,
              _sorted.setxor1d):  # fmt: skip
        table[f.__name__] = ("sort", f, "")
    if hasattr(np, "in1d"):
        table["in1d"] = ("sort", _sorted.in1d, "deprecated alias")
    table["lexsort"] = ("sort", _sorted.lexsort, "keys of more than one dimension: fallback")
    table["diff"] = ("axis", _composed.diff_along(table["diff"][1]), "")
    for f in (_composed.ediff1d, _composed.convolve, _composed.correlate, _composed.kron,
              _composed.tile, _composed.resize, _composed.trim_zeros, _composed.histogramdd,
              _composed.histogram2d):  # fmt: skip
        table[f.__name__] = ("composed", f, "")
    table["unique"] = ("sort", _sorted.unique, "axis given: fallback")
