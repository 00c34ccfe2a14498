"""Settings: read once from the environment, and the user options of `set_options`.

Environment (read at import):

``D2O_MPI=0``            use the serial stand-in even when mpi4py is installed (read by _comm).
``D2O_STRATEGY``         the default distribution strategy (default 'equal').
``D2O_ITER_CHUNK``       minimum number of elements moved per chunk while iterating.
``D2O_SMALL_REDUCE``     result size (elements x ranks) up to which reductions combine
                         gathered partials in rank order instead of an Allreduce.
``D2O_GATHER``           the initial value of the ``gather`` option (default 'allow').
``D2O_CHECK_ARGS=1``     start with the ``check_args`` option on.
``D2O_HANG_TIMEOUT``     the initial ``hang_timeout`` in seconds (0 or ``off``: none).
``D2O_ABORT_ON_ERROR=0`` start with the ``abort_on_error`` option off.
``D2O_LAZY``             ``0``: start with the ``lazy`` option off; ``1``: on, with
                         ``lazy_min`` 0 (every element-wise call deferred: how the test
                         suites run lazily).  Unset: on, ``lazy_min`` its default.
``D2O_LAZY_MIN``         the initial ``lazy_min`` (elements).

Options (`set_options`, `options`) are settings of the calling process only:
setting them communicates nothing.  ``gather`` may differ between ranks (where
it decides whether a collective call goes ahead, the ranks agree first, so a
mismatch cannot leave a rank waiting).  ``check_args`` adds a collective to
every call, so it must be on or off on every rank alike.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

from . import hooks
from .registry import operation

__all__ = ["set_options", "options", "get_option"]

_STRATEGY = os.environ.get("D2O_STRATEGY", "equal")
_ITER_CHUNK = int(os.environ.get("D2O_ITER_CHUNK", 1 << 16))
_SMALL_REDUCE = int(os.environ.get("D2O_SMALL_REDUCE", 1 << 16))


def default_strategy() -> str:
    return _STRATEGY


def iter_chunk() -> int:
    return _ITER_CHUNK


def small_reduce() -> int:
    return _SMALL_REDUCE


_GATHER_MODES = ("allow", "warn", "raise")
_VALID: dict[str, tuple] = {
    "gather": _GATHER_MODES,
    "check_args": (True, False),
    "fallback_limit": (),
    "replicate_below": (),
    "hang_timeout": (),
    "abort_on_error": (True, False),
    "lazy": (True, False),
    "lazy_min": (),
}
#: The default ``lazy_min`` (elements, 4 MiB of float64): recording and evaluating an
#: expression costs about 50-100 µs of Python, more than the temporaries fusion saves
#: on smaller arrays (measured: ``x *= c`` on 512 x 512, 39 µs eager, 148 lazy; the
#: Wiener filter example 15-25 % slower lazily at 512^2)
LAZY_MIN = 1 << 19
#: The default ``hang_timeout`` (seconds): generous, since a legitimate program may keep
#: the other ranks waiting while one rank computes alone.
HANG_TIMEOUT = 1800.0
#: The options now (read on hot paths as a plain dict; change them with `set_options`).
OPTIONS: dict[str, Any] = {
    "gather": "allow",
    "check_args": False,
    "fallback_limit": 16 << 20,
    "replicate_below": 0,
    "hang_timeout": HANG_TIMEOUT,
    "abort_on_error": True,
    "lazy": True,
    "lazy_min": LAZY_MIN,
}
_SIZES = ("fallback_limit", "replicate_below")


def _check(name: str, value: Any) -> None:
    if not isinstance(name, str) or name not in _VALID:
        raise ValueError(f"unknown d2o option {name!r}; the options are {', '.join(_VALID)}")
    allowed = _VALID[name]
    if name in _SIZES:
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"option {name!r} takes a number of bytes (an int); got {value!r}")
        if value < 0:
            raise ValueError(f"option {name!r} must be >= 0; got {value}")
        return
    if name in ("check_args", "abort_on_error", "lazy"):
        if not isinstance(value, bool):
            raise TypeError(f"option {name!r} takes True or False; got {value!r}")
        return
    if name == "hang_timeout":
        _check_timeout(value)
        return
    if name == "lazy_min":
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"option 'lazy_min' takes a number of elements (an int); got {value!r}")
        if value < 0:
            raise ValueError(f"option 'lazy_min' must be >= 0; got {value}")
        return
    if not isinstance(value, str):
        raise TypeError(f"option {name!r} takes a string, one of {allowed}; got {value!r}")
    if value not in allowed:
        raise ValueError(f"option {name!r} must be one of {allowed}; got {value!r}")


def _check_timeout(value: Any) -> None:
    """``hang_timeout``: a positive number of seconds, or None (no timeout)."""
    if value is None:
        return
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not ok or not value > 0 or value != value or value == float("inf"):
        raise ValueError(
            f"option 'hang_timeout' takes a positive, finite number of seconds or None; "
            f"got {value!r}"
        )


def _timeout_from_env(text: str) -> float | None:
    """``D2O_HANG_TIMEOUT``: seconds, or 0/off/none for no timeout."""
    if text.strip().lower() in ("0", "off", "none", "no", "false"):
        return None
    try:
        value = float(text)
    except ValueError:
        value = text  # type: ignore[assignment]
    _check_timeout(value)
    return value


@operation(traced=False)
def set_options(**kwargs: Any) -> None:
    """Set d2o's options for this process.

    Parameters
    ----------
    gather : {'allow', 'warn', 'raise'}
        What to do when an operation would bring a whole distributed operand
        onto one or every rank without being asked to (an *implicit gather*,
        e.g. broadcasting a (1, n) array split along axis 1 against an (n, 1)
        array split along axis 0).  'allow' (default) does it, 'warn' does it
        and warns once per call site (`d2o.GatherWarning`), 'raise' raises
        `d2o.GatherError` on every rank before moving anything.  Explicit
        gathers (``get_full_data``, ``gather``, ``allgather``, ``np.asarray``,
        or asking for the replicated strategy ``'not'``) are always allowed.
    check_args : bool
        Verify, before every public collective operation, that its global
        arguments (keys, axes, shapes, dtypes, values, layouts of the operands,
        paths) are equal on every rank: one small allreduce of a hash per call.
        A mismatch raises ValueError on every rank, naming the argument.  Off by
        default: d2o's contract is that global arguments are equal on every
        rank (per-rank arguments are only the local ones: ``local_data``,
        ``local_shape``, ``set_local_data``, keys with ``local_keys=True``).
        ``D2O_CHECK_ARGS=1`` turns it on at import; the test suite's MPI runs do.
        Unlike ``gather`` it changes the communication of every call: set it on
        every rank alike (the environment variable is the safe way).
    fallback_limit : int
        Bytes (default 16 MiB): a `d2o.numpy` function without a distributed
        algorithm gathers its distributed operands when together they are at most
        this large (recorded in the trace as a fallback; refused under
        ``gather='raise'``), and raises NotImplementedError above it.
    replicate_below : int
        Bytes (default 0): `d2o.numpy` creation functions called without ``dist=``
        replicate arrays smaller than this instead of distributing them.
    hang_timeout : float or None
        Seconds (default 1800; ``D2O_HANG_TIMEOUT``): when this rank has waited that
        long in one MPI call of a d2o collective, it prints where it is (operation,
        call site, MPI call), asks every other rank where it is (each prints its own
        line), names the ranks that never arrived and aborts the job.  None turns
        the timeout off.  A number <= 0 or not a number raises ValueError.
    abort_on_error : bool
        True (default; ``D2O_ABORT_ON_ERROR=0`` turns it off): under MPI with more
        than one process, an exception that escapes the script on any rank prints
        that rank's traceback and aborts the whole job (``MPI_Abort``).
    lazy : bool
        True (default; ``D2O_LAZY=0`` turns it off): operators and ufuncs of arrays of
        at least ``lazy_min`` elements (and scalars) record an expression, evaluated as
        one fused kernel over the local piece when something reads it
        (`d2o.ops.deferred`; ``d2o.evaluate`` forces explicitly).  False: element-wise
        operations run at once.  Set it on every rank alike.
    lazy_min : int
        Elements (global; default 524288): with ``lazy`` on, element-wise calls whose
        result is smaller run at once (recording costs more than fusion saves there).
        0 defers every call.  Set it on every rank alike.

    Notes
    -----
    Local: options are settings of the calling process, not of the job, and
    setting them communicates nothing.  Setting ``gather`` on some ranks only is
    safe: an operation that it may stop first agrees across ranks.  All names
    and values are checked before any is set.
    """
    for name, value in kwargs.items():
        _check(name, value)
    OPTIONS.update(kwargs)
    hooks.fire("modes")  # the runtime installs or removes its wrappers


def get_option(name: str) -> Any:
    """The current value of option ``name`` on this process."""
    if name not in OPTIONS:
        raise ValueError(f"unknown d2o option {name!r}; the options are {', '.join(_VALID)}")
    return OPTIONS[name]


@contextlib.contextmanager
def options(**kwargs: Any) -> Iterator[None]:
    """Context manager: set options (see `set_options`) for the enclosed block only. Local.

    Examples
    --------
    >>> import d2o
    >>> with d2o.options(gather="raise"):  # implicit gathers raise d2o.GatherError here
    ...     d2o.get_option("gather")
    'raise'
    """
    for name, value in kwargs.items():
        _check(name, value)
    saved = {k: OPTIONS[k] for k in kwargs}
    set_options(**kwargs)  # (in controller mode, `d2o.run`, a command to every rank)
    try:
        yield
    finally:
        set_options(**saved)


_env_gather = os.environ.get("D2O_GATHER")
if _env_gather:
    _check("gather", _env_gather)
    OPTIONS["gather"] = _env_gather
OPTIONS["check_args"] = os.environ.get("D2O_CHECK_ARGS", "0").strip().lower() in (
    "1",
    "true",
    "yes",
    "on",
)
OPTIONS["abort_on_error"] = os.environ.get("D2O_ABORT_ON_ERROR", "1").strip().lower() not in (
    "0",
    "false",
    "no",
    "off",
)
_env_lazy = os.environ.get("D2O_LAZY", "").strip().lower()
if _env_lazy:
    OPTIONS["lazy"] = _env_lazy in ("1", "true", "yes", "on")
    if OPTIONS["lazy"]:
        OPTIONS["lazy_min"] = 0
_env_lazy_min = os.environ.get("D2O_LAZY_MIN")
if _env_lazy_min:
    OPTIONS["lazy_min"] = int(_env_lazy_min)
_env_timeout = os.environ.get("D2O_HANG_TIMEOUT")
if _env_timeout:
    OPTIONS["hang_timeout"] = _timeout_from_env(_env_timeout)
