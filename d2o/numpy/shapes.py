"""`d2o.numpy`'s shape, view and joining functions: their table entries.

Views (``flip``, ``reshape``, ``transpose``, ...) move nothing; joining is local or one
exchange per input (`d2o.ops.joining`); ``repeat`` and ``pad`` are axis-local (one
exchange when the axes they act along are split).
"""

from __future__ import annotations

import numpy as np

from ..array.base import Array as D2O
from ..ops import joining as _joining
from ..ops.axislocal import axis_local, fallback
from .composed import broadcast_to
from .factories import agreed_axes, handled, normalize_axis_index, normalize_axis_tuple

__all__ = ["fill", "flip", "fliplr", "flipud", "rot90", "broadcast_arrays", "repeat", "pad"]


def flip(m, axis=None):
    """numpy's ``flip``: a view."""
    axes = range(m.ndim) if axis is None else normalize_axis_tuple(axis, m.ndim)
    return m[tuple(slice(None, None, -1) if i in axes else slice(None) for i in range(m.ndim))]


def fliplr(m):
    """numpy's ``fliplr``: a view."""
    if m.ndim < 2:
        raise ValueError("Input must be >= 2-d.")
    return m[:, ::-1]


def flipud(m):
    """numpy's ``flipud``: a view."""
    if m.ndim < 1:
        raise ValueError("Input must be >= 1-d.")
    return m[::-1]


def rot90(m, k=1, axes=(0, 1)):
    """numpy's ``rot90``: flips and a transpose (views)."""
    axes = tuple(axes)
    if len(axes) != 2:
        raise ValueError("len(axes) must be 2.")
    if axes[0] == axes[1] or abs(axes[0] - axes[1]) == m.ndim:
        raise ValueError("Axes must be different.")
    a0, a1 = normalize_axis_index(axes[0], m.ndim), normalize_axis_index(axes[1], m.ndim)
    k %= 4
    if k == 0:
        return m[...]
    if k == 2:
        return flip(flip(m, a0), a1)
    perm = list(range(m.ndim))
    perm[a0], perm[a1] = perm[a1], perm[a0]
    if k == 1:
        return flip(m, a1).transpose(perm)
    return flip(m.transpose(perm), a1)


def _rollaxis_order(n: int, axis: int, start: int) -> list:
    axis = normalize_axis_index(axis, n)
    if start < 0:
        start += n
    if not 0 <= start < n + 1:
        raise np.exceptions.AxisError(
            f"'start' arg requires {-n} <= start < {n + 1}, but {start} was passed in"
        )
    order = list(range(n))
    order.remove(axis)
    order.insert(start - 1 if axis < start else start, axis)
    return order


def broadcast_arrays(*args, subok=False):
    """numpy's ``broadcast_arrays``."""
    shape = np.broadcast_shapes(*[np.shape(a) for a in args])
    return [  # a list, as the array API asks (numpy gives a tuple)
        broadcast_to(a, shape) if isinstance(a, D2O) else np.broadcast_to(a, shape) for a in args
    ]


def repeat(a, repeats, axis=None):
    """numpy's ``repeat`` along an axis (axis-local); ``axis=None`` repeats the
    flattened array along its only axis (the fallback)."""
    if axis is None or np.ndim(repeats) or not isinstance(a, D2O):
        return fallback("repeat", np.repeat, (a, repeats), {"axis": axis})
    (ax,) = agreed_axes(a, axis)
    return axis_local("repeat", lambda p: np.repeat(p, repeats, axis=ax), a, (ax,))


def pad(array, pad_width, mode="constant", **kwargs):
    """numpy's ``pad``: the padded axes whole on every rank (axis-local)."""
    widths = np.broadcast_to(np.asarray(pad_width, dtype=np.intp).reshape(-1, 2) if np.ndim(pad_width) else np.full((1, 2), pad_width), (array.ndim, 2))  # fmt: skip
    core = tuple(i for i in range(array.ndim) if widths[i].any())
    if not core:
        return array.copy()
    return axis_local("pad", lambda p: np.pad(p, pad_width, mode, **kwargs), array, core)


def fill(table: dict) -> None:
    """Enter the joining functions, the views and ``broadcast_*``, ``repeat``, ``pad``."""
    for n in _joining.__all__:
        kind = (
            "join"
            if n in ("concatenate", "stack", "hstack", "vstack", "dstack", "column_stack", "append")
            else "view"
        )
        table[n] = (kind, getattr(_joining, n), "")
    table["concat"] = ("join", _joining.concatenate, "")
    table["row_stack"] = ("join", _joining.vstack, "deprecated alias")
    handled(table, "view", "real imag transpose swapaxes moveaxis ravel")
    for f in (flip, fliplr, flipud, rot90):
        table[f.__name__] = ("view", f, "")
    table["reshape"] = (
        "view",
        lambda a, shape=None, order="C", *, newshape=None, copy=None: a.reshape(
            shape if shape is not None else newshape, order=order
        ),
        "",
    )
    table["permute_dims"] = ("view", lambda a, axes=None: a.transpose(axes), "")
    table["matrix_transpose"] = ("view", lambda x: x.swapaxes(-1, -2), "")
    table["rollaxis"] = (
        "view",
        lambda a, axis, start=0: (
            np.rollaxis(a, axis, start)
            if not isinstance(a, D2O)
            else a.transpose(_rollaxis_order(a.ndim, axis, start))
        ),
        "",
    )
    table["broadcast_to"] = ("local", broadcast_to, "")
    table["broadcast_arrays"] = ("local", broadcast_arrays, "")
    table["repeat"] = ("axis", repeat, "")
    table["pad"] = ("axis", pad, "padded axes whole on every rank (one exchange)")
