"""d2o.numpy against numpy (issue 13): a table-driven walk over the dispatch table.

Every function the table gives a distributed algorithm has cases here; each case runs
with its array operands distributed in several layouts and compares with numpy on the
same global data.  A test also checks that no table entry is left without a case.
"""

from __future__ import annotations

import numpy as np
import pytest
from _helpers import make

import d2o
import d2o.numpy as dnp
from d2o import distributed_data_object as D2O
from d2o.numpy.table import DISTRIBUTED, TABLE
from d2o.testing import assert_raises_everywhere, collective_assert


class A:
    """Marks an argument that is passed distributed (a numpy array otherwise)."""

    def __init__(self, value):
        self.value = np.asarray(value)


rng = np.random.default_rng(5)
M = np.arange(35.0).reshape(7, 5) % 11 - 3.5  # 2-d, repeated values, negatives
M3 = (np.arange(60.0).reshape(5, 4, 3) * 7) % 13
V = np.array([3.0, -1.0, 4.0, 1.5, -5.0, 9.0, 2.0, 6.0, -5.0, 3.0, 5.0])
VN = V.copy()
VN[[2, 5]] = np.nan
MN = M.copy()
MN[2, 3] = np.nan
MN[5, 0] = np.nan
I = np.array([0, 3, 1, 4, 2, 2, 6, 0, 1])  # noqa: E741
MI = (np.arange(35).reshape(7, 5) * 3) % 7
C = V + 1j * V[::-1]
MB = M > 0
SQ = np.arange(36.0).reshape(6, 6) % 7

#: name -> list of (args, kwargs); A(...) marks distributed operands
CASES: dict[str, list] = {
    # element-wise
    "clip": [((A(M), -1.0, 2.0), {}), ((A(M),), {"a_min": 0.0, "a_max": A(M * 0 + 1)})],
    "isclose": [((A(M), A(M + 1e-9)), {}), ((A(VN), A(VN)), {"equal_nan": True})],
    "angle": [((A(C),), {}), ((A(C),), {"deg": True})],
    "around": [((A(M / 3),), {"decimals": 2})],
    "round": [((A(M / 3),), {"decimals": 1})],
    "fix": [((A(M / 3),), {})],
    "sinc": [((A(V),), {})],
    "i0": [((A(V),), {})],
    "isneginf": [((A(np.array([-np.inf, 1.0, np.inf, 2.0])),), {})],
    "isposinf": [((A(np.array([-np.inf, 1.0, np.inf, 2.0])),), {})],
    "interp": [((A(V), np.array([-5.0, 0.0, 10.0]), np.array([1.0, 2.0, 0.0])), {})],
    "digitize": [
        ((A(V), np.array([-2.0, 0.0, 3.0, 5.0])), {}),
        ((A(M), [0.0, 1.0]), {"right": True}),
    ],
    "heaviside": [((A(V), 0.5), {})],
    "astype": [((A(M), np.int32), {})],
    "where": [((A(MB), A(M), 0.0), {}), ((A(MB), -1.0, A(M)), {})],
    "isreal": [((A(C),), {})],
    "iscomplex": [((A(C),), {})],
    "nan_to_num": [((A(VN),), {}), ((A(VN),), {"nan": -1.0})],
    "copyto": "special",
    "choose": [((A(I % 3), [A(I), A(I * 10), A(I * 100)]), {})],
    "select": [(([A(V > 3), A(V < 0)], [A(V), A(-V)]), {"default": 7.0})],
    "piecewise": [((A(V), [A(V < 0), A(V >= 0)], [lambda x: -x, lambda x: x * 2]), {})],
    "polyval": [(([1.0, -2.0, 3.0], A(V)), {}), ((A(V), np.array([0.5, -1.0])), {})],
    "polyfit": [((A(V), A(V[::-1] ** 2), 2), {}), ((A(V), A(V * 2), 1), {"full": True})],
    "polyadd": [((A(V), [1.0, 2.0]), {})],
    "polysub": [(([1.0, 2.0], A(V)), {})],
    "polyder": [((A(V),), {"m": 2})],
    "polyint": [((A(V),), {"k": 3.0})],
    "polymul": [((A(V), [1.0, -2.0, 0.5]), {})],
    "vander": [((A(V[:6]),), {}), ((A(V[:5]),), {"N": 3, "increasing": True})],
    "ravel_multi_index": [(((A(I % 3), A(I % 4)), (3, 4)), {})],
    "unravel_index": [((A(I), (3, 4)), {})],
    "datetime_as_string": [((A(np.arange(6).astype("datetime64[D]")),), {})],
    "cross": [((A(M3[:, :, :3]), A(M3[:, :, :3][::-1])), {})],
    "broadcast_to": [((A(V[:5]), (3, 5)), {}), ((A(M[:, :1]), (7, 4)), {})],
    "broadcast_arrays": [((A(M), A(M[0])), {})],
    "tril": [((A(M),), {}), ((A(M),), {"k": 1})],
    "triu": [((A(M),), {"k": -1})],
    # reductions
    "sum": [((A(M),), {"axis": 0}), ((A(M),), {})],
    "prod": [((A(M / 4),), {"axis": 1})],
    "max": [((A(M),), {"axis": 1})],
    "min": [((A(M),), {})],
    "amax": [((A(M),), {"axis": 0})],
    "amin": [((A(M),), {"axis": 1})],
    "mean": [((A(M),), {"axis": 0})],
    "var": [((A(M),), {"axis": 1})],
    "std": [((A(M),), {})],
    "all": [((A(MB),), {"axis": 0})],
    "any": [((A(MB),), {})],
    "argmax": [((A(V),), {})],
    "argmin": [((A(M),), {"axis": 1})],
    "nansum": [((A(MN),), {"axis": 0})],
    "nanmax": [((A(MN),), {"axis": 1})],
    "nanmin": [((A(MN),), {})],
    "cumsum": [((A(M),), {"axis": 0}), ((A(V),), {})],
    "cumprod": [((A(M / 4),), {"axis": 1})],
    "median": [((A(V),), {}), ((A(M),), {"axis": 1})],
    "nanprod": [((A(MN / 4),), {"axis": 0}), ((A(VN / 4),), {})],
    "nanmean": [((A(MN),), {"axis": 1}), ((A(VN),), {})],
    "nanvar": [((A(MN),), {"axis": 0}), ((A(VN),), {"ddof": 1})],
    "nanstd": [((A(MN),), {"axis": 1})],
    "nanargmax": [((A(VN),), {}), ((A(MN),), {"axis": 0})],
    "nanargmin": [((A(VN),), {})],
    "count_nonzero": [((A(MI),), {}), ((A(MI),), {"axis": 0})],
    "ptp": [((A(M),), {}), ((A(M),), {"axis": 1})],
    "average": [((A(M),), {"axis": 0}), ((A(M),), {"axis": 1, "weights": np.arange(1.0, 6.0)})],
    "allclose": [((A(M), A(M + 1e-12)), {}), ((A(M), A(M + 1)), {})],
    "array_equal": [
        ((A(M), A(M)), {}),
        ((A(VN), A(VN)), {"equal_nan": True}),
        ((A(M), A(M + 1)), {}),
    ],
    "array_equiv": [((A(M), A(M[0])), {}), ((A(M), A(M[:, :1])), {})],
    "trace": [((A(SQ),), {}), ((A(M),), {"offset": 1}), ((A(M3),), {})],
    "nonzero": [((A(MI),), {})],
    "bincount": [((A(I),), {})],
    "unique": [
        ((A(I),), {}),
        ((A(MN),), {"return_index": True, "return_inverse": True, "return_counts": True}),
    ],
    "real_if_close": [((A(V + 0j),), {}), ((A(C),), {})],
    "trapezoid": [
        ((A(M),), {}),
        ((A(M),), {"axis": 0, "dx": 0.5}),
        ((A(V),), {"x": np.arange(11.0) ** 2}),
    ],
    "histogram": [((A(V),), {"bins": 4}), ((A(M),), {"bins": [-4.0, 0.0, 2.0, 8.0]})],
    "histogram_bin_edges": [
        ((A(V),), {"bins": 5}),
        ((A(M),), {"bins": "auto"}),
        ((A(V),), {"bins": "fd"}),
    ],
    # axis-local
    "sort": [
        ((A(M),), {"axis": 1}),
        ((A(M),), {"axis": 0}),
        ((A(M3),), {"axis": 0}),
        ((A(VN),), {}),
        ((A(M),), {"axis": None}),
        ((A(C),), {"kind": "stable"}),
    ],
    "argsort": [
        ((A(M),), {"axis": 0, "stable": True}),
        ((A(V),), {"kind": "stable"}),
        ((A(M),), {"axis": None, "stable": True}),
    ],
    "partition": [((A(M),), {"kth": 2, "axis": 1}), ((A(I),), {"kth": list(range(9))})],
    "argpartition": [((A(M),), {"kth": 1, "axis": 0})],
    "lexsort": [(((A(I), A(I[::-1] % 3)),), {})],
    "searchsorted": [
        ((A(np.sort(V)), V[::2]), {}),
        ((A(np.sort(V)), A(V)), {"side": "right"}),
        ((A(np.sort(I)), 3), {}),
    ],
    "isin": [
        ((A(I), np.array([1, 2])), {}),
        ((A(M), A(M[::2])), {}),
        ((A(I), A(I[:3])), {"invert": True}),
    ],
    "unique_values": [((A(VN),), {})],
    "unique_counts": [((A(I),), {})],
    "unique_inverse": [((A(MI),), {})],
    "unique_all": [((A(I),), {})],
    "union1d": [((A(I), A(MI)), {}), ((A(V), np.array([0.5, 9.0])), {})],
    "intersect1d": [((A(I), A(MI)), {}), ((A(I), A(MI)), {"return_indices": True})],
    "setdiff1d": [((A(MI), A(I)), {}), ((A(I), np.array([0, 1])), {})],
    "setxor1d": [((A(I), A(MI)), {})],
    # composed of distributed building blocks
    "ediff1d": [((A(M),), {}), ((A(V),), {"to_begin": [1.0], "to_end": 2.0})],
    "convolve": [((A(V), np.array([1.0, -2.0, 0.5])), {}), ((A(V), np.ones(2)), {"mode": "same"})],
    "correlate": [((A(C), np.array([1.0, 2.0j])), {}), ((A(V), np.ones(3)), {"mode": "full"})],
    "kron": [((A(M), np.eye(2)), {}), ((np.arange(3.0), A(V)), {})],
    "tile": [((A(M), (2, 1)), {}), ((A(V), 3), {}), ((A(M3), 2), {})],
    "resize": [((A(M), (4, 11)), {}), ((A(V), 5), {})],
    "trim_zeros": [((A(np.concatenate(([0.0, 0.0], V, [0.0]))),), {}), ((A(I),), {"trim": "b"})],
    "histogramdd": [
        ((A(M[:, :3]),), {"bins": (2, 3, 2)}),
        ((A(M[:, :2]),), {"bins": 3, "density": True}),
    ],
    "histogram2d": [
        ((A(V), A(V[::-1])), {"bins": 3}),
        ((A(V), A(V * 2)), {"bins": [2, 4], "weights": A(V)}),
    ],
    "diff": [
        ((A(M),), {"axis": 0}),
        ((A(M),), {"n": 2, "axis": 1}),
        ((A(V),), {"n": 2, "prepend": 0.0}),
        ((A(V),), {}),  # odd orders show the operands' order
        ((A(V),), {"n": 3, "append": [1.0, 2.0]}),
    ],
    "unwrap": [((A(M),), {"axis": 0})],
    "nancumsum": [((A(MN),), {"axis": 1}), ((A(MN),), {})],
    "nancumprod": [((A(MN / 4),), {"axis": 0})],
    "cumulative_sum": [((A(M),), {"axis": 0}), ((A(V),), {"include_initial": True})],
    "cumulative_prod": [((A(M / 4),), {"axis": 1, "include_initial": True})],
    "sort_complex": [((A(M3 + 1j),), {}), ((A(C),), {})],
    "percentile": [((A(M), 30), {"axis": 1}), ((A(M), [10, 90]), {"axis": 0})],
    "quantile": [
        ((A(M3), 0.25), {"axis": (0, 2)}),
        ((A(V), 0.5), {}),
        ((A(M), [0.1, 0.5]), {"method": "hazen", "keepdims": True}),
    ],
    "nanmedian": [((A(MN),), {"axis": 0})],
    "nanpercentile": [((A(MN), 50), {"axis": 1})],
    "nanquantile": [((A(MN), 0.75), {"axis": 0, "keepdims": True})],
    "roll": [
        ((A(M), 2), {"axis": 0}),
        ((A(M), (1, -1)), {"axis": (0, 1)}, "fallback"),
        ((A(V), 3), {}, "fallback"),
    ],
    "apply_along_axis": [
        ((np.sort, 0, A(M)), {}),
        ((lambda r: r[:2], 1, A(M)), {}),
        ((np.sum, 1, A(M3)), {}),
    ],  # fmt: skip
    "gradient": [((A(M),), {}), ((A(M), 0.5), {"axis": 0})],
    "diagonal": [((A(M),), {}), ((A(M),), {"offset": -2}), ((A(M3),), {"axis1": 1, "axis2": 2})],
    "diag": [((A(SQ),), {"k": 1}), ((A(V[:4]),), {}), ((A(V),), {"k": -2})],
    "diagflat": [((A(V),), {"k": 1}), ((A(M),), {})],
    "array2string": [((A(M),), {}), ((A(M),), {"precision": 2, "threshold": 5, "edgeitems": 1})],
    "take_along_axis": [((A(M), A(np.argsort(M, axis=1))), {"axis": 1})],
    "repeat": [((A(M), 2), {"axis": 1}), ((A(M), 2), {"axis": 0}), ((A(V), 2), {}, "fallback")],
    "pad": [((A(M), ((0, 0), (1, 2))), {}), ((A(M), 1), {"mode": "edge"}, "fallback")],
    "packbits": [((A(MB),), {"axis": 1}), ((A(MB),), {"bitorder": "little"})],
    "unpackbits": [((A(MI.astype(np.uint8)),), {"axis": 1}), ((A(MI.astype(np.uint8)),), {})],
    "block": [(([[A(M), A(M)], [A(M[:2]), A(M[:2])]],), {}), (([A(V), 1.0, A(V)],), {})],
    "apply_over_axes": [((np.sum, A(M3), [0, 2]), {})],
    # views and shapes
    "flip": [((A(M),), {}), ((A(M),), {"axis": 1})],
    "fliplr": [((A(M),), {})],
    "flipud": [((A(M),), {})],
    "rot90": [((A(M),), {}), ((A(M),), {"k": 2}), ((A(M3),), {"k": 3, "axes": (1, 2)})],
    "reshape": [((A(M), (5, 7)), {}), ((A(M), (-1,)), {})],
    "ravel": [((A(M),), {})],
    "transpose": [((A(M3),), {}), ((A(M3),), {"axes": (1, 0, 2)})],
    "permute_dims": [((A(M3), (2, 0, 1)), {})],
    "matrix_transpose": [((A(M3),), {})],
    "swapaxes": [((A(M3), 0, 2), {})],
    "moveaxis": [((A(M3), 0, -1), {})],
    "rollaxis": [((A(M3), 2), {})],
    "real": [((A(C),), {})],
    "imag": [((A(C),), {})],
    "expand_dims": [((A(M), 1), {}), ((A(M), (0, 3)), {})],
    "squeeze": [((A(M[:, :1]),), {}), ((A(M3[:1]),), {"axis": 0})],
    "atleast_1d": [((A(V),), {})],
    "atleast_2d": [((A(V),), {})],
    "atleast_3d": [((A(M),), {}), ((A(V),), {})],
    "split": [((A(M3), 5), {}), ((A(M), [2, 3]), {"axis": 1})],
    "array_split": [((A(M), 3), {}), ((A(V), 4), {})],
    "hsplit": [((A(M), [1, 4]), {})],
    "vsplit": [((A(SQ), 3), {})],
    "dsplit": [((A(M3), 3), {})],
    "unstack": [((A(M),), {"axis": 1})],
    "copy": [((A(M),), {})],
    # joining
    "concatenate": [
        (([A(M), A(M * 2)],), {}),
        (([A(M), A(M[:, :2])],), {"axis": 1}),
        (([A(M), M],), {"axis": None}),
    ],  # fmt: skip
    "concat": [(([A(V), A(V[:3])],), {})],
    "stack": [(([A(M), A(-M)],), {}), (([A(V), A(V)],), {"axis": 1})],
    "hstack": [(([A(M), A(M)],), {}), (([A(V), A(V)],), {})],
    "vstack": [(([A(M), A(M[:2])],), {}), (([A(V), A(V)],), {})],
    "row_stack": "alias",
    "dstack": [(([A(M), A(M)],), {})],
    "column_stack": [(([A(V), A(V * 2)],), {})],
    "append": [((A(M), A(M)), {"axis": 0}), ((A(V), [1.0, 2.0]), {})],
    # indexing
    "take": [((A(M), [0, 3, 6]), {"axis": 0}), ((A(V), [1, -1, 4]), {})],
    "compress": [(([True, False, True], A(M)), {"axis": 1}), ((A(V > 0), A(V)), {})],
    "extract": [((A(MB), A(M)), {})],
    "flatnonzero": [((A(MI),), {})],
    "argwhere": [((A(MI),), {})],
    "putmask": "special",
    "put": "special",
    "insert": [((A(M), 2, 9.0), {"axis": 0}), ((A(V), [1, -1], [7.0, 8.0]), {})],
    "delete": [((A(M), [0, 3]), {"axis": 1}), ((A(V), slice(1, None, 3)), {})],
    "place": "special",  # tests/test_routed_writes.py
    "put_along_axis": "special",
    "fill_diagonal": "special",
    # linear algebra
    "dot": [((A(M), A(M.T)), {}), ((A(V), A(V)), {})],
    "vdot": [((A(C), A(C)), {})],
    "matmul": [((A(M), A(M.T)), {})],
    "vecdot": [
        ((A(M), A(M * 2)), {}),
        ((A(C), A(C)), {}),
        ((A(M), A(M)), {"axis": 0}),
        ((A(MI.astype(np.uint8)), A(MI.astype(np.uint8))), {}),
    ],  # fmt: skip
    "outer": [((A(V), A(V[:4])), {})],
    "einsum": [
        (("ij,jk->ik", A(M), A(M.T)), {}),
        (("ij,ij->i", A(M), A(M * 2)), {}),
        (("ij->j", A(M)), {}),
        (("ijk,kl->ijl", A(M3), np.ones((3, 2))), {}),
        (("i,i", A(V), A(V)), {}),
        (("ij,j->i", A(M), np.arange(5.0)), {}),
        (("bij,bjk->bik", A(M3), A(M3.transpose(0, 2, 1))), {}),
        (("...j,j", A(M), np.ones(5)), {}, "fallback"),
    ],  # fmt: skip
    "tensordot": [
        ((A(M3), A(M3)), {"axes": ([1, 2], [1, 2])}),
        ((A(M), A(M.T)), {"axes": 1}),
        ((A(M3), np.ones((3, 4))), {"axes": ([2, 1], [0, 1])}),
    ],  # fmt: skip
    "einsum_path": [(("ij,jk->ik", A(M), A(M.T)), {})],
    "inner": [((A(V), A(V)), {})],
    "cov": [((A(M),), {}), ((A(M),), {"rowvar": False, "ddof": 0})],
    "corrcoef": [((A(M),), {})],
    # creation from a distributed prototype
    "zeros_like": [((A(M),), {})],
    "ones_like": [((A(MI),), {"dtype": np.float32})],
    "empty_like": "special",
    "full_like": [((A(M), 7.0), {})],
    "asarray": [((A(M),), {})],
    "asanyarray": [((A(M),), {})],
    "ascontiguousarray": [((A(M),), {})],
    "asfortranarray": [((A(M),), {})],
    "require": [((A(M),), {})],
    "array": [((A(M),), {})],
    "asarray_chkfinite": [((A(M),), {})],
    "shape": [((A(M),), {})],
    "ndim": [((A(M3),), {})],
    "size": [((A(M),), {})],
    "isrealobj": [((A(C),), {})],
    "iscomplexobj": [((A(C),), {})],
    "result_type": [((A(MI), 1.0), {})],
    "can_cast": [((A(MI), np.float64), {})],
    "min_scalar_type": [((A(M),), {})],
    "common_type": [((A(M), A(MI)), {})],
    "shares_memory": [((A(M), A(M)), {})],
    "may_share_memory": [((A(M), A(M)), {})],
    "iterable": [((A(M),), {})],
    "isscalar": [((A(M),), {})],
    "diag_indices_from": [((A(SQ),), {})],
    "tril_indices_from": [((A(SQ),), {})],
    "triu_indices_from": [((A(SQ),), {"k": 1})],
    "isfortran": [((A(M),), {})],
    "array_repr": "special",
    "array_str": "special",
}

#: creation functions (no distributed operand): name -> list of (args, kwargs)
CREATION: dict[str, list] = {
    "zeros": [(((4, 3),), {})], "ones": [((5,), {"dtype": int})], "empty": "special",
    "full": [(((3, 4), 2.5), {})], "arange": [((3, 20, 4), {})],
    "linspace": [((0.0, 1.0, 9), {})], "logspace": [((0.0, 2.0, 5), {})],
    "geomspace": [((1.0, 64.0, 7), {})], "eye": [((5,), {"k": -1})], "identity": [((4,), {})],
    "tri": [((4, 5), {})], "fromfunction": [((lambda i, j: i - j, (4, 5)), {})],
    "indices": [(((3, 4),), {})], "meshgrid": [((np.arange(3.0), np.arange(4.0)), {})],
    "loadtxt": "special", "genfromtxt": "special", "fromfile": "special",
    "frombuffer": [((np.arange(6.0).tobytes(),), {})], "fromstring": [(("1 2 3",), {"sep": " "})],
    "fromiter": [((range(7), float), {})], "fromregex": "special", "from_dlpack": [((np.arange(5.0),), {})],
    "load": "special", "save": "special", "savetxt": "special", "savez": "special",
    "savez_compressed": "special",
}  # fmt: skip

STRATS = ["equal", "not", "fftw", "axis1", "mesh01"]


def _dist(value: np.ndarray, strategy: str):
    if value.ndim == 0:
        return D2O(value)
    if strategy == "axis1":
        return D2O(value, distribution_strategy="equal", axis=1 if value.ndim > 1 else 0)
    if strategy == "mesh01":
        return make(value, "mesh01") if value.ndim == 2 else D2O(value)
    return D2O(value, distribution_strategy=strategy)


def _convert(v, strategy, to_d2o):
    if isinstance(v, A):
        return _dist(v.value, strategy) if to_d2o else v.value.copy()
    if type(v) in (list, tuple):
        return type(v)(_convert(e, strategy, to_d2o) for e in v)
    return v


def _gathered(r):
    if isinstance(r, D2O):
        return r.get_full_data()
    if isinstance(r, (list, tuple)):
        items = [_gathered(e) for e in r]
        return type(r)(*items) if hasattr(r, "_fields") else type(r)(items)
    return r


def _same(got, want) -> str | None:
    got = _gathered(got)
    if isinstance(want, (list, tuple)):
        if not isinstance(got, (list, tuple)) or len(got) != len(want):
            return f"got {type(got).__name__} of {len(got) if hasattr(got, '__len__') else '?'}"
        for g, w in zip(got, want):
            m = _same(g, w)
            if m:
                return m
        return None
    if isinstance(want, (np.ndarray, np.generic)) or np.ndim(want):
        g, w = np.asarray(got), np.asarray(want)
        if g.shape != w.shape:
            return f"shape {g.shape} != {w.shape}"
        if g.dtype.kind != w.dtype.kind and not (g.dtype.kind in "iu" and w.dtype.kind in "iu"):
            return f"dtype {g.dtype} != {w.dtype}"
        try:
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12, equal_nan=True)
        except AssertionError as e:
            return str(e)[:400]
        except TypeError:  # strings, datetimes
            if not np.array_equal(g, w):
                return f"{g} != {w}"
        return None
    if isinstance(want, float) and np.isnan(want):
        return None if np.isnan(got) else f"{got} != nan"
    return None if got == want or np.allclose(got, want) else f"{got!r} != {want!r}"


def _cases():
    for name, cases in CASES.items():
        if isinstance(cases, str):
            continue
        for i, (args, kwargs, *how) in enumerate(cases):
            yield pytest.param(name, args, kwargs, bool(how), id=f"{name}-{i}")


@pytest.mark.parametrize("name,args,kwargs,fallback", list(_cases()))
def test_against_numpy(name, args, kwargs, fallback):
    """A distributed algorithm (no gather allowed), except the cases marked 'fallback'
    (the flattened array, an array's only axis), which gather under the limit."""
    import warnings

    for strategy in STRATS:
        np_args = _convert(args, strategy, False)
        np_kwargs = {k: _convert(v, strategy, False) for k, v in kwargs.items()}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = getattr(np, name)(*np_args, **np_kwargs)
            d_args = _convert(args, strategy, True)
            d_kwargs = {k: _convert(v, strategy, True) for k, v in kwargs.items()}
            with d2o.options(fallback_limit=1 << 20 if fallback else 0):
                got = getattr(dnp, name)(*d_args, **d_kwargs)
        msg = _same(got, want)
        collective_assert(msg is None, f"{name} on {strategy}: {msg}")


@pytest.mark.parametrize(
    "name,cases", [(n, c) for n, c in CREATION.items() if not isinstance(c, str)]
)
def test_creation_against_numpy(name, cases):
    for args, kwargs in cases:
        want = getattr(np, name)(*args, **kwargs)
        for dist in (None, True, False, "fftw"):
            got = getattr(dnp, name)(*args, dist=dist, **kwargs)
            msg = _same(got, want)
            collective_assert(msg is None, f"{name} dist={dist}: {msg}")
            collective_assert(
                all(isinstance(g, D2O) for g in (got if isinstance(got, (tuple, list)) else (got,)))
            )


def test_every_distributed_entry_has_a_case():
    missing = [
        n for n, (kind, _, _) in TABLE.items()
        if kind in DISTRIBUTED - {"ufunc", "meta"} and n not in CASES and n not in CREATION
    ]  # fmt: skip
    assert not missing, f"table entries without a test case: {missing}"


def test_in_place_and_special_cases():
    for strategy in STRATS:
        a = M.copy()
        x = _dist(a, strategy)
        dnp.copyto(x, _dist(-a, strategy), where=_dist(a > 0, strategy))
        np.copyto(a, -a, where=a > 0)
        collective_assert(_same(x, a) is None, f"copyto on {strategy}")
        dnp.putmask(x, _dist(a < -2, strategy), 100.0)
        np.putmask(a, a < -2, 100.0)
        collective_assert(_same(x, a) is None, f"putmask on {strategy}")
        dnp.put(x, [0, -1, 3, 0], _dist(np.array([7.0, 8.0, 9.0]), "equal"), mode="raise")
        np.put(a, [0, -1, 3, 0], [7.0, 8.0, 9.0])
        collective_assert(_same(x, a) is None, f"put on {strategy}")
        e = dnp.empty_like(x)
        collective_assert(e.shape == a.shape and e.dtype == a.dtype)
        r, t = dnp.array_repr(x), dnp.array_str(x)  # a mesh prints as its slab copy
        collective_assert(isinstance(r, str) and isinstance(t, str))
        if strategy != "mesh01":
            collective_assert(r == repr(x) and t == str(x), f"{r} / {t}")


_WRITERS = [
    ("np.copyto", lambda m, A: np.copyto(m, -A)),
    ("np.copyto where", lambda m, A: np.copyto(m, -A, where=A > 5)),
    ("np.putmask", lambda m, A: np.putmask(m, A > 5, 100.0)),
    ("np.place", lambda m, A: np.place(m, A > 5, [1.0, 2.0, 3.0])),
    ("np.put", lambda m, A: np.put(m, [0, 7, 29], [-1.0, -2.0, -3.0])),
    ("np.fill_diagonal", lambda m, A: np.fill_diagonal(m, 9.0)),
    ("np.put_along_axis", lambda m, A: np.put_along_axis(m, np.zeros((5, 1), int), 8.0, axis=1)),
]


def test_numpy_functions_that_write_reach_every_layout():
    """numpy's own in-place functions (through ``__array_function__``) on every layout:
    on meshes they run on slab copies, which must be written back (issue 28: they were
    not, and np.copyto on a 2 x 2 mesh changed nothing)."""
    from _helpers import Checks, layouts

    A = (np.arange(30.0).reshape(5, 6) * 7) % 13
    check = Checks()
    for strategy, axis in layouts(2):
        for name, write in _WRITERS:
            a = A.copy()
            x = make(a, strategy, axis)
            write(x, A)
            write(a, A)
            check.equal(x, a, what=f"{name} on {strategy} axis {axis}")
    check.done()


def test_numpy_inputs_give_numpy_results():
    assert isinstance(dnp.sort(np.array([3, 1, 2])), np.ndarray)
    assert dnp.sum([1, 2, 3]) == 6
    assert dnp.add is np.add and dnp.float64 is np.float64 and dnp.pi == np.pi


def test_the_fallback_is_bounded_and_recorded():
    # roots: one of the functions still on the fallback (docs/coverage.md)
    x = _dist(V, "equal")
    with d2o.options(fallback_limit=1 << 20), d2o.trace() as t:
        got = dnp.roots(x)
    collective_assert(np.allclose(np.sort_complex(got), np.sort_complex(np.roots(V))))
    from d2o import default_comm

    if default_comm().size > 1:
        collective_assert(any(r.fallback == "roots" for r in t.records), f"{t.records}")
        with d2o.options(fallback_limit=8):
            exc = assert_raises_everywhere(NotImplementedError, dnp.roots, x)
        collective_assert("roots" in str(exc), str(exc))
        with d2o.options(gather="raise"):
            assert_raises_everywhere(d2o.GatherError, dnp.roots, x)


def test_coverage_doc_is_current():
    """docs/coverage.md is what tools/numpy_coverage.py generates from the table."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "tools" / "numpy_coverage.py"
    spec = importlib.util.spec_from_file_location("numpy_coverage", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.OUT.read_text() == mod.render(), "run python tools/numpy_coverage.py"


@pytest.mark.parametrize("strategy", STRATS)
def test_real_numpy_routes_to_d2o_numpy(strategy):
    """``np.f(d2o_array)`` runs d2o.numpy's f; ``__array_namespace__`` is d2o.numpy."""
    x = _dist(M, strategy)
    got = np.concatenate([x, x], axis=1)
    collective_assert(isinstance(got, D2O) and _same(got, np.concatenate([M, M], axis=1)) is None)
    collective_assert(_same(np.flip(x, 0), np.flip(M, 0)) is None)
    collective_assert(x.__array_namespace__() is dnp)


@pytest.mark.parametrize("strategy", STRATS)
def test_linalg_norm(strategy):
    """Every ord and axis numpy supports, against numpy (2, -2, 'nuc' via the fallback)."""
    x = _dist(M, strategy)
    v = _dist(V, strategy)
    cases = [(x, {}), (x, {"ord": "fro"}), (x, {"ord": 1}), (x, {"ord": -1}),
             (x, {"ord": np.inf}), (x, {"ord": -np.inf}), (x, {"axis": 0}),
             (x, {"axis": 1, "ord": 3}), (x, {"axis": (1, 0), "ord": 1}),
             (x, {"keepdims": True}), (v, {}), (v, {"ord": 0}), (v, {"ord": 1}),
             (v, {"ord": -np.inf}), (v, {"ord": 0.5}), (x, {"ord": 2}), (x, {"ord": "nuc"})]  # fmt: skip
    for arr, kw in cases:
        want = np.linalg.norm(arr.get_full_data(), **kw)
        got = dnp.linalg.norm(arr, **kw)
        collective_assert(_same(got, want) is None, f"norm {kw} on {strategy}: {got} vs {want}")
    assert_raises_everywhere(ValueError, dnp.linalg.norm, x, ord="bad")


@pytest.mark.parametrize("strategy", ["equal", "fftw", "not"])
def test_linalg_qr_and_lstsq_of_tall_matrices(strategy):
    """TSQR: Q R = A with orthonormal Q and triangular R; lstsq matches numpy's solution,
    residuals, rank and singular values; nothing is gathered (fallback limit 0)."""
    r = np.random.default_rng(0)
    a, b, bb = r.standard_normal((23, 4)), r.standard_normal(23), r.standard_normal((23, 2))
    x = _dist(a, strategy)
    with d2o.options(fallback_limit=0 if strategy != "not" else 1 << 20):
        q, rr = dnp.linalg.qr(x)
        Q, R = q.get_full_data(), rr.get_full_data()
        ok = (
            np.allclose(Q @ R, a) and np.allclose(Q.T @ Q, np.eye(4)) and np.allclose(np.triu(R), R)
        )
        collective_assert(ok, f"qr on {strategy}")
        for rhs in (b, bb):
            got = dnp.linalg.lstsq(x, _dist(rhs, strategy))
            want = np.linalg.lstsq(a, rhs)
            for g, w in zip(got, want):
                collective_assert(_same(g, w) is None, f"lstsq on {strategy}: {_same(g, w)}")


def test_bad_axis_on_one_rank_raises_everywhere():
    """An axis wrong on one rank only: every rank raises numpy's AxisError before anything
    moves (the agreement path, without the checked mode), and nothing is written."""
    from d2o import default_comm

    comm = default_comm()
    x = _dist(M, "equal")
    before = x.get_local_data()
    bad = 5 if comm.rank == 0 else 0
    calls = [
        lambda: dnp.sort(x, axis=bad),
        lambda: dnp.diff(x, axis=bad),
        lambda: dnp.roll(x, 1, axis=bad),
        lambda: dnp.repeat(x, 2, axis=bad),
        lambda: dnp.apply_along_axis(np.sum, bad, x),
        lambda: dnp.percentile(x, 50, axis=bad),
    ]
    for call in calls:
        with d2o.options(check_args=False):
            try:
                call()
                got = None
            except Exception as exc:
                got = exc
        collective_assert(isinstance(got, np.exceptions.AxisError), f"rank {comm.rank}: {got!r}")
    collective_assert(np.array_equal(x.get_local_data(), before))


def test_what_axis_local_and_joining_functions_move():
    """Along whole axes nothing but one-byte agreements moves; along the split axis the
    data moves there and back once (the trace's bytes)."""
    x = _dist(M, "equal")
    with d2o.options(check_args=False), d2o.trace() as t:
        dnp.sort(x, axis=1)
        dnp.concatenate([x, x], axis=1)  # inputs cut alike: local
    collective_assert(all(c[2] <= 1 for c in t.calls), f"local work moved data: {t.calls}")
    with d2o.options(check_args=False), d2o.trace() as t:
        got = dnp.sort(x, axis=0)
    collective_assert(_same(got, np.sort(M, axis=0)) is None)
    sent = sum(c[2] for c in t.calls)
    collective_assert(sent <= 2 * M.nbytes, f"sort along the split axis sent {sent} bytes")


def test_axis_local_results_keep_the_kind_of_layout_on_any_process_count():
    """One process and several give the same strategy label (not 'not' on one)."""
    x = dnp.ones((6, 4))
    for got in (dnp.sort(x, axis=1), dnp.cumsum(x, axis=0), dnp.diff(x, axis=1)):
        collective_assert(got.distribution_strategy == x.distribution_strategy, f"{got!r}")


def test_d2o_functions_take_numpy_only_input():
    import d2o

    a = np.array([0, 1, 2])
    got = d2o.where(a)
    collective_assert(len(got) == 1 and np.array_equal(got[0], [1, 2]), f"{got}")
    collective_assert(np.array_equal(d2o.where(a > 0, a, -1), [-1, 1, 2]))
    collective_assert(d2o.vdot(a, a) == 5)
