"""The one bounded cache of d2o: layouts, distributors, digests, exchange plans.

`BoundedCache` is a dict (lookups are dict lookups, at C speed) of at most ``maxsize``
entries, each value handed to ``evict`` when it leaves (an exchange plan frees its MPI
datatypes there).  By default a `put` into a full cache starts afresh, which keeps the
lookup path free of bookkeeping (for what is cheap to rebuild: layouts, digests); with
``lru=True`` it drops only the least recently used entry, and `use` marks a hit (for
what is worth keeping: exchange plans).  `cached` makes a function of hashable
arguments use one.
Nothing here communicates.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

__all__ = ["BoundedCache", "cached"]


class BoundedCache(dict):
    """A dict of at most ``maxsize`` entries: a `put` into a full one empties it (or, with
    ``lru``, drops the least recently used entry), calling ``evict(value)`` for each
    value that leaves."""

    __slots__ = ("maxsize", "evict", "lru")

    def __init__(
        self, maxsize: int, evict: Callable[[Any], None] | None = None, lru: bool = False
    ) -> None:
        super().__init__()
        self.maxsize = maxsize
        self.evict = evict
        self.lru = lru

    def put(self, key: Any, value: Any) -> Any:
        """Store ``value`` under ``key`` and return it."""
        if len(self) >= self.maxsize:
            if self.lru:
                self.shrink(self.maxsize - 1)
            else:
                self.drop()
        self[key] = value
        return value

    def use(self, key: Any) -> Any:
        """The value under ``key``, marked most recently used (None if absent)."""
        value = self.pop(key, None)
        if value is not None:
            self[key] = value
        return value

    def shrink(self, n: int) -> None:
        """Evict the least recently stored or used entries until at most ``n`` remain."""
        while len(self) > max(n, 0):
            key = next(iter(self))
            value = self.pop(key)
            if self.evict is not None:
                self.evict(value)

    def drop(self) -> None:
        """Empty the cache, handing every value to ``evict`` first."""
        if self.evict is not None:
            for value in self.values():
                self.evict(value)
        self.clear()


def cached(maxsize: int) -> Callable[[Callable], Callable]:
    """Decorator: remember ``f(*args)`` per tuple of (hashable) positional arguments in a
    `BoundedCache` of ``maxsize`` entries (``f.cache``)."""

    def decorate(f: Callable) -> Callable:
        cache = BoundedCache(maxsize)

        @functools.wraps(f)
        def lookup(*args: Any) -> Any:
            value = cache.get(args)
            if value is None:
                value = cache.put(args, f(*args))
            return value

        lookup.cache = cache  # type: ignore[attr-defined]
        return lookup

    return decorate
