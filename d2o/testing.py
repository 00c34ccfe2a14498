"""Collective test helpers for code that uses d2o.

Under MPI every rank runs the same test.  A plain ``assert`` that fails on
one rank only leaves the other ranks waiting in their next collective call;
the helpers here compare locally, then agree on the verdict across ranks, so
that every rank raises :class:`AssertionError` together (or none does).

All functions in this module are collective: call them on every rank.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .core.comm import default_comm
from .layouts.distributors import as_runs, index_of, run_length

__all__ = [
    "assert_equal_to_numpy",
    "assert_layout",
    "assert_raises_everywhere",
    "collective_assert",
    "distribution_strategies",
    "shapes",
]

_DISTRIBUTION_STRATEGIES = ("not", "equal", "fftw")
_MAX_MSG = 2000


def _comm_of(obj: Any = None):
    comm = getattr(obj, "comm", None)
    if comm is not None and hasattr(comm, "allgather"):
        return comm
    return default_comm()


def _agree(local_msg: str | None, comm=None) -> None:
    """Raise AssertionError on every rank if any rank reports a failure message (a one-byte
    Allreduce; the messages are gathered only when some rank failed).

    Parameters
    ----------
    local_msg : str or None
        None when the check passed on this rank, else a description.
    comm : optional
        The d2o communicator to agree on; ``default_comm()`` if None.
    """
    comm = default_comm() if comm is None else comm
    if local_msg is not None and len(local_msg) > _MAX_MSG:
        local_msg = local_msg[:_MAX_MSG] + " ..."
    if comm.size > 1 and hasattr(comm, "any_flag"):  # a d2o Comm: one 1-byte Allreduce ...
        if not comm.any_flag(local_msg is not None):
            return
    msgs = comm.allgather(local_msg)  # ... and the messages only when a check failed
    failing = [r for r, m in enumerate(msgs) if m is not None]
    if not failing:
        return
    if comm.size == 1:
        raise AssertionError(msgs[0])
    first = failing[0]
    raise AssertionError(
        f"check failed on rank(s) {failing} of {comm.size}; rank {first} says:\n{msgs[first]}"
    )


def collective_assert(condition: bool, msg: str = "") -> None:
    """Assert ``condition`` on every rank; fail on all ranks if it fails on any.

    Parameters
    ----------
    condition : bool
        The local verdict of this rank.
    msg : str, optional
        Message used when this rank's condition is false.

    Raises
    ------
    AssertionError
        On every rank, when ``condition`` is false on at least one rank.
    """
    local = None if bool(condition) else (msg or "assertion failed")
    _agree(local)


def _local_data(obj: Any) -> Any:
    if hasattr(obj, "get_full_data"):
        return obj.get_full_data()
    return obj


def _compare(actual: Any, expected: Any, rtol: float | None, atol: float, check_dtype: bool):
    a = np.asarray(actual)
    e = np.asarray(expected)
    if a.shape != e.shape:
        return f"shape mismatch: got {a.shape}, expected {e.shape}"
    if check_dtype and a.dtype != e.dtype:
        return f"dtype mismatch: got {a.dtype}, expected {e.dtype}"
    try:
        if rtol is None and not atol:
            np.testing.assert_array_equal(a, e, strict=False)
        else:
            np.testing.assert_allclose(
                a, e, rtol=0.0 if rtol is None else rtol, atol=atol, equal_nan=True
            )
    except AssertionError as exc:
        return str(exc)
    except Exception as exc:  # e.g. comparing incomparable dtypes
        return f"comparison raised {type(exc).__name__}: {exc}"
    return None


def assert_equal_to_numpy(
    obj: Any,
    expected: Any,
    *,
    rtol: float | None = None,
    atol: float = 0,
    check_dtype: bool = True,
) -> None:
    """Check that a distributed object (or plain value) equals a numpy array.

    Collective.  A distributed object (anything with ``get_full_data``) is
    gathered with ``obj.get_full_data()`` on every rank; numpy arrays, numpy
    scalars and Python scalars are compared as they are.

    Parameters
    ----------
    obj : distributed_data_object, numpy.ndarray or scalar
        The value under test.
    expected : array_like
        The reference result, typically computed with numpy.
    rtol : float, optional
        Relative tolerance.  When None (default) and ``atol`` is 0 the
        comparison is exact; NaNs in the same places count as equal.
    atol : float, optional
        Absolute tolerance (default 0).
    check_dtype : bool, optional
        Also require equal dtypes (``np.asarray(x).dtype``).  Default True.

    Raises
    ------
    AssertionError
        On every rank, when the check fails on at least one rank; the
        message names the failing ranks and the first rank's reason.

    Examples
    --------
    >>> import numpy as np, d2o
    >>> from d2o.testing import assert_equal_to_numpy
    >>> a = np.arange(12.0).reshape(3, 4)
    >>> assert_equal_to_numpy(d2o.distributed_data_object(a).sum(axis=1), a.sum(axis=1))
    """
    comm = _comm_of(obj)
    try:
        actual = _local_data(obj)
        local = _compare(actual, expected, rtol, atol, check_dtype)
    except Exception as exc:  # a failure before comparing still needs agreement
        local = f"gathering the data raised {type(exc).__name__}: {exc}"
    _agree(local, comm)


def assert_layout(
    obj: Any,
    expected: Any = None,
    *,
    axis: Any = "any",
    lengths: Any = None,
    strategy: str | None = None,
    regions: Any = None,
    descending: bool = False,
    rtol: float | None = None,
    atol: float = 0,
    check_dtype: bool = True,
    msg: str = "",
) -> None:
    """Check the layout a documented rule promises and, given ``expected``, the values of
    every rank's piece: each rank must hold exactly the part of ``expected`` that the
    rule gives it.

    Collective.  Give the expected layout from the rule itself (literal tables, the
    rule written out in the test), not from the function under test: a result with the
    right values in the wrong pieces, or pieces its distributor does not describe, fails.
    Each rank checks its own piece; the verdict is agreed.

    Parameters
    ----------
    obj : distributed_data_object
    expected : array_like, optional
        The numpy result.  When given: the global shape (and dtype) must match, and this
        rank's piece must equal ``expected`` cut to the box the rule gives this rank
        (``regions`` or ``lengths``; without either, the box ``obj``'s distributor says
        it holds: values only).
    axis : int or None, optional
        The expected distributed axis, ``obj.axis`` (None: replicated); with ``lengths``
        also the axis the lengths are along.  Not checked when omitted.
    lengths : sequence of int, optional
        Every rank's expected extent along ``axis`` (default: ``obj.axis``), slabs in
        rank order: rank r holds ``[sum(lengths[:r]), sum(lengths[:r + 1]))``.
    strategy : str, optional
        The expected ``distribution_strategy``.
    regions : sequence, optional
        Per rank, the box it holds: per axis a ``(start, stop)`` pair or, for a
        block-cyclic axis, a tuple of such runs (in the order stored).  Empty pieces
        compare equal wherever they sit.
    descending : bool, optional
        With ``lengths``: the ranks hold their ranges in descending order along
        ``axis`` (a reversed view, ``x[::-1]``: rank 0 holds the last ``lengths[0]``);
        ``obj.axis`` is then not compared (such a view is not a slab layout).
    rtol, atol, check_dtype
        As in `assert_equal_to_numpy`.
    msg : str, optional
        Named first in the failure message (which case of a table failed).

    Raises
    ------
    AssertionError
        On every rank, when the layout or the values differ on at least one rank.

    Examples
    --------
    >>> import numpy as np, d2o
    >>> from d2o.testing import assert_layout
    >>> a = np.arange(12.0).reshape(4, 3)
    >>> x = d2o.distributed_data_object(a, distribution_strategy="equal")
    >>> p = x.comm.size
    >>> assert_layout(x, a, axis=0, lengths=[4 // p + (r < 4 % p) for r in range(p)])
    """
    problems: list = []
    comm = obj.distributor.comm
    try:
        _layout_problems(obj, expected, axis, lengths, strategy, regions, descending,
                         (rtol, atol, check_dtype), problems)  # fmt: skip
    except Exception as exc:  # a failure before comparing still needs agreement
        problems.append(f"checking the layout raised {type(exc).__name__}: {exc}")
    text = "; ".join(problems) if problems else None
    _agree(f"{msg}: {text}" if msg and text else text, comm)


# the slab rules, written out here independently of d2o's distributors
_RULES: dict = {
    "equal": lambda n, p: [n // p + (1 if r < n % p else 0) for r in range(p)],
    "fftw": lambda n, p: [max(0, min(-(-n // p), n - r * -(-n // p))) for r in range(p)],
}


def _runs_per_axis(box: Any) -> tuple:
    """A box in one form for comparisons: per axis the tuple of its non-empty runs."""
    return tuple(as_runs(tuple(e)) for e in box)


def _layout_problems(obj, expected, axis, lengths, strategy, regions, descending, tol, out):
    d = obj.distributor
    comm = d.comm
    me, size, shape = comm.rank, comm.size, tuple(obj.shape)
    if axis != "any" and not descending and obj.axis != axis:
        out.append(f"distributed axis {obj.axis}, expected {axis}")
    if strategy is not None and obj.distribution_strategy != strategy:
        out.append(f"strategy {obj.distribution_strategy!r}, expected {strategy!r}")
    rule = _RULES.get(obj.distribution_strategy)
    if rule is not None and obj.axis is not None:  # the label promises its rule's pieces
        held = [run_length(d.region(r)[obj.axis]) for r in range(size)]
        if held != rule(shape[obj.axis], size):
            out.append(f"labelled {obj.distribution_strategy!r} along axis {obj.axis} but the "
                       f"pieces have lengths {held}, not {rule(shape[obj.axis], size)}")  # fmt: skip
    box = None
    if regions is not None:
        regions = list(regions)
        if len(regions) != size:
            out.append(f"{len(regions)} expected regions for {size} ranks")
        else:
            box = tuple(tuple(e) for e in regions[me])
    elif lengths is not None:
        lengths = [int(n) for n in lengths]
        ax = obj.axis if axis == "any" else axis
        if len(lengths) != size:
            out.append(f"{len(lengths)} expected lengths for {size} ranks")
        elif ax is None:
            out.append(f"replicated, expected piece lengths {lengths}")
        elif sum(lengths) != shape[ax]:
            out.append(f"expected lengths {lengths} do not add up to axis {ax} of {shape}")
        else:
            ax %= len(shape)
            lo = sum(lengths[:me])
            hi = lo + lengths[me]
            if descending:
                lo, hi = shape[ax] - hi, shape[ax] - lo
            box = tuple((lo, hi) if k == ax else (0, n) for k, n in enumerate(shape))
    if box is not None:
        held = d.region(me)
        if len(box) != len(shape):
            out.append(f"expected box {box} has not one entry per axis of {shape}")
            box = None
        elif held is None or _runs_per_axis(held) != _runs_per_axis(box):
            out.append(f"rank {me} holds {held}, the rule gives it {box}")
        elif tuple(obj.data.shape) != tuple(run_length(e) for e in box):
            out.append(f"rank {me}'s piece has shape {obj.data.shape}, its box {box}")
    if expected is None:
        return
    e = np.asarray(expected)
    if shape != e.shape:
        out.append(f"shape {shape}, expected {e.shape}")
        return
    where = box if box is not None else d.region(me)
    if where is None:  # a rank that holds nothing of a 0-d view
        return
    part = e[index_of(where)] if e.ndim else e
    msg = _compare(obj.data, part, *tol)
    if msg is not None:
        out.append(f"rank {me}'s piece (box {where}): {msg}")


def assert_raises_everywhere(
    exc_type: type[BaseException] | tuple[type[BaseException], ...],
    func: Callable[..., Any],
    *args: Any,
    **kwargs: Any,
) -> BaseException:
    """Call ``func(*args, **kwargs)`` and require that it raises on every rank.

    Collective.  Note that ``func`` itself must not leave ranks blocked in a
    collective that only some ranks reach.

    Parameters
    ----------
    exc_type : exception type or tuple of types
        The expected exception (checked with ``isinstance``).
    func : callable
        The function to call.
    *args, **kwargs
        Passed to ``func``.

    Returns
    -------
    BaseException
        The exception raised on this rank.

    Raises
    ------
    AssertionError
        On every rank, unless every rank raised an instance of ``exc_type``.
    """
    caught: BaseException | None = None
    try:
        func(*args, **kwargs)
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt | SystemExit):
            raise
        caught = exc
    name = getattr(exc_type, "__name__", repr(exc_type))
    if caught is None:
        local = f"{name} not raised"
    elif not isinstance(caught, exc_type):
        local = f"expected {name}, got {type(caught).__name__}: {caught}"
    else:
        local = None
    _agree(local)
    assert caught is not None
    return caught


def shapes(min_dims: int = 0, max_dims: int = 3, max_side: int = 5):
    """Hypothesis strategy for array shapes (sides 0..``max_side``).

    Parameters
    ----------
    min_dims, max_dims : int
        Range of the number of dimensions.
    max_side : int
        Largest length of an axis.

    Returns
    -------
    hypothesis.strategies.SearchStrategy
        Strategy drawing shape tuples.
    """
    from hypothesis.extra.numpy import array_shapes

    return array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=0, max_side=max_side)


def distribution_strategies():
    """Hypothesis strategy over d2o's distribution strategies.

    Returns
    -------
    hypothesis.strategies.SearchStrategy
        ``sampled_from(['not', 'equal', 'fftw'])``.
    """
    from hypothesis import strategies as st

    return st.sampled_from(_DISTRIBUTION_STRATEGIES)
