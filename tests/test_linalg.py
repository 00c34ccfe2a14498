"""Matrix products against numpy for every pair of layouts."""

from __future__ import annotations

import numpy as np
import pytest
from _helpers import Checks, layouts, make, sample

from d2o import distributed_data_object
from d2o.testing import assert_raises_everywhere

CASES = [((5, 4), (4, 3)), ((5, 4), (4,)), ((4,), (4, 3)), ((4,), (4,)), ((3, 0), (0, 2)),
         ((1, 6), (6, 1)), ((6, 2), (2, 7))]  # fmt: skip


@pytest.mark.parametrize("sa,sb", CASES)
def test_matmul_every_layout_pair(sa, sb):
    a = sample(sa, "float64")
    b = sample(sb, "float64", seed=3)
    expected = a @ b
    check = Checks()
    for la in layouts(len(sa)):
        x = make(a, *la)
        for lb in layouts(len(sb)):
            y = make(b, *lb)
            for got, what in ((x @ y, "d2o@d2o"), (np.matmul(x, y), "np.matmul"),
                              (np.dot(x, y), "np.dot"), (x @ b, "d2o@np"),
                              (a @ y, "np@d2o")):  # fmt: skip
                if expected.ndim:
                    check.equal(got, expected, rtol=1e-12, what=(what, la, lb))
                else:
                    ok = isinstance(got, np.generic) and np.isclose(got, expected, rtol=1e-12)
                    check.true(ok, (what, la, lb, got, expected))
    check.done()


@pytest.mark.parametrize("dtype", ["int64", "bool", "complex128", "float32"])
def test_matmul_dtypes(dtype):
    a = sample((4, 3), dtype)
    b = sample((3, 5), dtype, seed=1)
    check = Checks()
    for la in layouts(2):
        for lb in (("equal", 0), ("fftw", 1), ("not", 0)):
            got = make(a, *la) @ make(b, *lb)
            rtol = {"float32": 1e-5, "complex128": 1e-12}.get(dtype)  # summation order differs
            check.equal(got, a @ b, rtol=rtol, what=(la, lb))
    check.done()


def test_matmul_errors_and_unsupported_gufuncs():
    x = distributed_data_object(np.ones((3, 4)))
    assert_raises_everywhere(ValueError, x.__matmul__, distributed_data_object(np.ones((3, 4))))
    assert_raises_everywhere(ValueError, np.matmul, x, 2.0)
    y = distributed_data_object(np.ones((2, 3, 4)))
    assert_raises_everywhere(TypeError, lambda: y @ np.ones((4, 2)))
    if hasattr(np, "vecdot"):  # a generalized ufunc: never applied piece-wise
        assert_raises_everywhere(TypeError, np.vecdot, x, x)
