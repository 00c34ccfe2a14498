"""Property-based indexing tests (Hypothesis, derandomized by tests/conftest.py).

Draws shapes, layouts (strategy and distributed axis), keys of every kind
and values, and compares ``obj[key]`` and ``obj[key] = value`` with numpy.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from test_indexing import make

from d2o.testing import assert_equal_to_numpy, collective_assert

LAYOUT = st.tuples(st.sampled_from(["not", "equal", "fftw", "freeform"]), st.integers(-3, 2))


@st.composite
def array_and_key(draw):
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=5))
    a = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
    kind = draw(st.sampled_from(["basic", "int_arrays", "mask", "mixed"]))
    if kind == "basic":
        key = draw(hnp.basic_indices(shape, allow_newaxis=True, allow_ellipsis=True))
    elif kind == "int_arrays" and all(shape):
        key = draw(hnp.integer_array_indices(shape, result_shape=hnp.array_shapes(max_dims=2)))
    elif kind == "mask":
        k = draw(st.integers(1, len(shape)))
        key = draw(hnp.arrays(np.bool_, shape[:k]))
    else:
        parts = []
        for n in shape:
            choice = draw(st.sampled_from(["slice", "int", "array", "none"]))
            if choice == "slice" or n == 0:
                parts.append(draw(st.slices(n)))
            elif choice == "int":
                parts.append(draw(st.integers(-n, n - 1)))
            elif choice == "array":
                parts.append(draw(st.lists(st.integers(-n, n - 1), min_size=1, max_size=3)))
            else:
                parts.append(None)
                parts.append(draw(st.slices(n)))
        key = tuple(parts)
    return a, key


@settings(max_examples=25)
@given(array_and_key(), LAYOUT)
def test_get_matches_numpy(ak, layout):
    a, key = ak
    obj = make(a, *layout)
    expected = a[key]
    result = obj[key]
    if isinstance(expected, np.ndarray):
        assert_equal_to_numpy(result, expected)
    else:
        collective_assert(type(result) is type(expected) and result == expected, "scalar")


@settings(max_examples=25)
@given(array_and_key(), LAYOUT, st.data())
def test_set_matches_numpy(ak, layout, data):
    a, key = ak
    sel_shape = a[key].shape
    k = data.draw(st.integers(0, len(sel_shape)))
    ones = data.draw(st.lists(st.booleans(), min_size=k, max_size=k))
    vshape = tuple(1 if one else n for one, n in zip(ones, sel_shape[len(sel_shape) - k :]))
    value = -1 - np.arange(int(np.prod(vshape)), dtype=np.int64).reshape(vshape)
    as_d2o = data.draw(st.sampled_from([None, ("equal", 0), ("fftw", -1), ("freeform", 0)]))
    b = a.copy()
    b[key] = value
    obj = make(a, *layout)
    if as_d2o is None or value.ndim == 0:
        obj[key] = value
    else:
        obj[key] = make(value, *as_d2o)
    assert_equal_to_numpy(obj, b)
