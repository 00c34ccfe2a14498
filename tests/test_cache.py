"""d2o.core.cache: the one bounded cache (layouts, distributors, digests, plans)."""

from __future__ import annotations

from d2o.core.cache import BoundedCache, cached
from d2o.testing import collective_assert


def test_a_full_cache_starts_afresh_and_hands_its_values_to_evict():
    gone: list = []
    c = BoundedCache(3, evict=gone.append)
    for i in range(3):
        collective_assert(c.put(i, f"v{i}") == f"v{i}")
    collective_assert(gone == [] and len(c) == 3 and c.get(1) == "v1")
    c.put(3, "v3")
    collective_assert(sorted(gone) == ["v0", "v1", "v2"] and dict(c) == {3: "v3"})
    c.drop()
    collective_assert(gone[-1] == "v3" and len(c) == 0)


def test_cached_calls_once_per_arguments_within_its_bound():
    calls: list = []

    @cached(2)
    def square(n: int) -> int:
        calls.append(n)
        return n * n

    collective_assert([square(2), square(2), square(3)] == [4, 4, 9] and calls == [2, 3])
    square(4)  # the third distinct argument: the cache starts afresh
    collective_assert(square(2) == 4 and calls == [2, 3, 4, 2] and len(square.cache) == 2)


def test_an_lru_cache_drops_the_least_recently_used_entry():
    gone: list = []
    c = BoundedCache(2, evict=gone.append, lru=True)
    c.put("a", 1)
    c.put("b", 2)
    collective_assert(c.use("a") == 1 and c.use("zz") is None)  # "b" is now the oldest
    c.put("c", 3)
    collective_assert(gone == [2] and dict(c) == {"a": 1, "c": 3})
    c.shrink(0)
    collective_assert(sorted(gone) == [1, 2, 3] and not c)
