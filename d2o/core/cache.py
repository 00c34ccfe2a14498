"""The one bounded cache of d2o: layouts, distributors, digests, exchange plans.

`BoundedCache` is a dict (lookups are dict lookups, at C speed) whose `put` starts
afresh once ``maxsize`` entries are held, first handing every value to ``evict`` (an
exchange plan frees its MPI datatypes there).  Starting afresh rather than evicting one
entry keeps `put` O(1) and the cache free of bookkeeping on the lookup path; what is
cached is cheap to rebuild.  `cached` makes a function of hashable arguments use one.
Nothing here communicates.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

__all__ = ["BoundedCache", "cached"]


class BoundedCache(dict):
    """A dict of at most ``maxsize`` entries, emptied (after ``evict(value)`` for each
    value) when a `put` finds it full."""

    __slots__ = ("maxsize", "evict")

    def __init__(self, maxsize: int, evict: Callable[[Any], None] | None = None) -> None:
        super().__init__()
        self.maxsize = maxsize
        self.evict = evict

    def put(self, key: Any, value: Any) -> Any:
        """Store ``value`` under ``key`` and return it."""
        if len(self) >= self.maxsize:
            self.drop()
        self[key] = value
        return value

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
