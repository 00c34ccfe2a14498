"""Checked mode: verify that a public operation's global arguments are equal on every rank.

A 62-bit digest of the call's global arguments (`start_check`) rides in the header of
the operation's first agreement (`d2o.core.errors`), or travels alone for operations that
write (so that nothing is written when the arguments differ): the digest and its
complement in one small Allreduce (bitwise OR), equal on every rank iff OR(digest) ==
~OR(~digest).  On a mismatch, every rank raises a ValueError naming the argument and each
rank's value (one allgather of the arguments' digests, on that path only).
"""

from __future__ import annotations

import inspect
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np

from ..array.slabs import MUTATING as _MUTATING
from ..array.walk import find_arrays
from ..core.cache import BoundedCache, cached
from ..core.comm import as_comm, default_comm, pending_check
from ..core.errors import (
    DIGEST,
    NOT_DIGEST,
    digests_agree,
    fold_records,
    fold_rows,
    new_record,
)
from ..core.librarian import d2o_librarian

__all__ = ["Check", "start_check"]

#: Per-rank arguments of collective operations (not compared across ranks).
_LOCAL_ARGS: dict = {
    "distributed_data_object": lambda kw: {"local_data", "local_shape"},
    "wrap": lambda kw: {"local_array"},
    "get_data": lambda kw: {"key"} if kw.get("local_keys") else set(),
    "set_data": lambda kw: {"data", "to_key", "from_key"} if kw.get("local_keys") else set(),
}
_SAMPLE = 1 << 16  # bytes of a large array's data that enter its hash (head and tail)


#: A small code per argument type, so that 1, 1.0 and True digest differently.
_KIND = {int: 1, float: 2, bool: 3, type(None): 4, complex: 5}
_SAMPLE_ITEMS = 32  # list/tuple items digested one by one; longer ones as an array


#: Classes of distributed arrays met so far (their digest is their layout's).
_ARRAY_TYPES: set = set()
_AXES = {None: -1, **{i: i for i in range(64)}}
_CRCS = BoundedCache(4096)
#: dtypes whose items hold padding bytes, and the dtype of their two exact halves
_PADDED = (
    {np.longdouble: np.float64, np.clongdouble: np.complex128}
    if np.dtype(np.longdouble).itemsize > 8
    else {}
)


def _crc(text: Any) -> int:
    """crc32 of a string (or of an object's repr), remembered (`BoundedCache`)."""
    h = _CRCS.get(text)
    if h is None:
        h = _CRCS.put(
            text, zlib.crc32((text if type(text) is str else repr(text)).encode(errors="replace"))
        )
    return h


def _dig(value: Any) -> int:
    """A digest of ``value`` equal on ranks holding equal values (deterministic across
    processes: Python's ``hash`` of numbers and tuples of numbers is not salted; strings
    go through crc32)."""
    t = type(value)
    if t in _ARRAY_TYPES:  # a distributed array: its layout
        d = value.distributor
        return hash((12, d.global_shape, value.dtype.num, _AXES.get(d.axis, -1), _crc(d.strategy)))
    if value is None:  # (Python < 3.12 hashes None by its address)
        return 4
    kind = _KIND.get(t)
    if kind is not None:
        if value != value:  # NaN: hashed by its address since Python 3.10
            return hash((kind, "nan"))
        return hash((kind, value))
    if t is str:
        return hash((6, _crc(value)))
    if t is slice:
        return hash((7, _dig(value.start), _dig(value.stop), _dig(value.step)))
    if t is tuple or t is list:
        if len(value) <= _SAMPLE_ITEMS:
            return hash((8 if t is tuple else 9, *(_dig(v) for v in value)))
        try:
            return hash((10, _dig(np.asarray(value))))
        except Exception:
            return hash((10, len(value), _crc(repr(value)[:4096])))
    if t is np.ndarray:
        h = (11, value.shape, value.dtype.num)
        if value.dtype.hasobject:
            return hash(h)
        if value.dtype.type in _PADDED:  # x87 long doubles: their padding bytes are garbage
            hi = value.astype(_PADDED[value.dtype.type])
            value = np.stack([hi, (value - hi).astype(hi.dtype)])
        flat = np.ascontiguousarray(value).reshape(-1).view(np.uint8)
        if flat.size > 2 * _SAMPLE:
            return hash(
                (*h, zlib.crc32(flat[:_SAMPLE].tobytes()), zlib.crc32(flat[-_SAMPLE:].tobytes()))
            )
        return hash((*h, zlib.crc32(flat.tobytes())))
    d = getattr(value, "distributor", None)
    if d is not None and hasattr(d, "global_shape"):  # a distributed array (class noted)
        _ARRAY_TYPES.add(t)
        return _dig(value)
    if isinstance(value, np.generic):
        return hash((13, value.dtype.num, zlib.crc32(value.tobytes())))
    if isinstance(value, dict):
        return hash((14, *sorted((_crc(repr(k)), _dig(v)) for k, v in value.items())))
    if isinstance(value, (np.ufunc, type, np.dtype)) or callable(value):
        return hash((15, _crc(getattr(value, "__name__", repr(value)))))
    if t.__module__.startswith("mpi4py") or t.__name__ == "Comm":
        return 16
    return hash((17, _crc(f"{t.__name__}:{value!r}"[:4096])))  # os.PathLike and the like


@cached(1024)
def _param_names(fn: Callable) -> list:
    """The names of ``fn``'s positional parameters."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):  # pragma: no cover - builtins
        return []
    return [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def _named_args(fn: Callable, args: tuple, kwargs: dict) -> list[tuple[str, Any]]:
    names = _param_names(fn)
    out = [(names[i] if i < len(names) else f"argument {i + 1}", a) for i, a in enumerate(args)]
    return out + sorted(kwargs.items())


def _checked(fn: Callable, name: str, args: tuple, kwargs: dict) -> list[tuple[str, Any]]:
    """The global arguments of a call, named (``self`` and the per-rank ones left out)."""
    named = _named_args(fn, args, kwargs)
    spec = _LOCAL_ARGS.get(name)
    skip = spec(dict(named)) if spec is not None else set()
    return [(k, v) for k, v in named if k not in skip and k != "self"]


def _comm_of(args: tuple, kwargs: dict) -> Any:
    """The communicator of a call: its first distributed array's, else ``comm=``'s."""
    found = find_arrays((args, kwargs))
    if found:
        return found[0].distributor.comm
    c = kwargs.get("comm")
    return default_comm() if c is None else as_comm(c)


class Check:
    """Checked mode's verification of one call's global arguments: a 62-bit digest that
    rides in the header of the operation's first agreement (`d2o.core.errors`), or travels
    alone (`standalone`) where the operation has none or writes before it."""

    __slots__ = ("comm", "word", "fn", "name", "args", "kwargs")

    def __init__(self, comm: Any, digest: int, fn: Callable, name: str, args: tuple, kwargs: dict):
        self.comm, self.word = comm, np.uint64(digest)
        self.fn, self.name, self.args, self.kwargs = fn, name, args, kwargs

    def flush(self) -> None:
        """Collective: run the check now, on its own (another MPI call comes first)."""
        pending_check[0] = None
        self.standalone()

    def standalone(self) -> None:
        """Collective: one agreement record carrying only the digest (the same Allreduce as
        a folded agreement, so ranks that reach either one match)."""
        rec = new_record()
        rec[DIGEST], rec[NOT_DIGEST] = self.word, ~self.word
        self.verdict(self.comm.Allreduce(rec, fold_records, rows=fold_rows))

    def verdict(self, record: np.ndarray) -> None:
        """ValueError on every rank unless every rank's digest in the combined agreement
        ``record`` equals this one."""
        if digests_agree(record):
            return
        checked = _checked(self.fn, self.name, self.args, self.kwargs)
        # The check ran after the operation: objects it made on some ranks only (views)
        # drew librarian indices there; every rank draws up to the highest, so that the
        # n-th object still has index n everywhere.
        mine = d2o_librarian.next_index()
        gathered = self.comm.allgather((mine, [(k, _dig(v), repr(v)[:80]) for k, v in checked]))
        for _ in range(max(n for n, _ in gathered) - mine):
            d2o_librarian.next_index()
        # by name: an argument left at its default on one rank is absent from its call
        maps = [{k: (d, text) for k, d, text in lst} for _, lst in gathered]
        names = list(dict.fromkeys(k for m in maps for k in m))
        for k in names:
            if len({m[k][0] if k in m else None for m in maps}) > 1:
                shown = "; ".join(
                    f"rank {r}: {m[k][1] if k in m else '(its default)'}"
                    for r, m in enumerate(maps)
                )
                raise ValueError(
                    f"d2o check_args: argument {k!r} of {self.name!r} differs between ranks "
                    f"({shown}); global arguments must be equal on every rank"
                )
        raise ValueError(f"d2o check_args: the arguments of {self.name!r} differ between ranks")


def start_check(fn: Callable, name: str, args: tuple, kwargs: dict) -> Check | None:
    """Checked mode, at the start of a public operation: its argument check, left pending
    for the operation's first agreement (`d2o.core.comm.pending_check`), or run at once for
    operations that write (so that nothing is written when the arguments differ)."""
    init = name == "distributed_data_object"  # __init__: self is not built yet
    if args and type(args[0]) in _ARRAY_TYPES and not init:  # a method: self's comm
        comm = args[0].distributor.comm
    else:
        comm = _comm_of(args[1:] if init else args, kwargs)
    if comm.size == 1:
        return None
    if name in _LOCAL_ARGS:
        parts = [_dig(v) for _, v in _checked(fn, name, args, kwargs)]
    else:
        first = _FIRST.get(fn)
        if first is None:
            first = _FIRST[fn] = 1 if _param_names(fn)[:1] == ["self"] else 0
        parts = [_dig(a) for a in args[first:]]
        if kwargs:
            parts += [hash((_crc(k), _dig(v))) for k, v in sorted(kwargs.items())]
    digest = hash((_crc(name), *parts)) & _MASK
    check = Check(comm, digest, fn, name, args, kwargs)
    if name in _MUTATING:
        check.standalone()
        return None
    if pending_check[0] is not None:  # pragma: no cover - an earlier check never ran
        pending_check[0].flush()
    pending_check[0] = check
    return check


_MASK = (1 << 62) - 1
_FIRST: dict = {}  # 1 for methods (``self`` is not compared), 0 for functions
