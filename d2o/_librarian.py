"""The d2o librarian: a weak registry giving each object the same index on every rank.

Objects are numbered in creation order.  Since every distributed object is
created collectively, the n-th object has index n on every rank, so a rank
that holds only its local instance can name the global object by its index,
and ``d2o_librarian[index]`` returns that rank's instance of it.
"""

from __future__ import annotations

import weakref
from typing import Any

__all__ = ["d2o_librarian", "Librarian"]

_ref = weakref.ref


class Librarian:
    """Weak references to the live distributed objects, keyed by their index."""

    __slots__ = ("_count", "_refs", "_sweep_at")

    def __init__(self) -> None:
        self._count = 0
        self._refs: dict[int, weakref.ref] = {}
        self._sweep_at = 4096

    def register(self, obj: Any) -> int:
        """Give ``obj`` the next index (starting at 1) and remember it weakly."""
        i = self._count = self._count + 1
        refs = self._refs
        refs[i] = _ref(obj)
        if len(refs) > self._sweep_at:
            self._sweep()
        return i

    def _sweep(self) -> None:
        self._refs = {k: r for k, r in self._refs.items() if r() is not None}
        self._sweep_at = max(4096, 2 * len(self._refs))

    def __getitem__(self, index: int) -> Any:
        ref = self._refs.get(int(index))
        obj = None if ref is None else ref()
        if obj is None:
            raise KeyError(f"no live distributed_data_object with index {index}")
        return obj

    def __contains__(self, index: int) -> bool:
        ref = self._refs.get(int(index))
        return ref is not None and ref() is not None

    def __len__(self) -> int:
        return sum(1 for r in self._refs.values() if r() is not None)

    def __repr__(self) -> str:
        return f"<d2o_librarian: {len(self)} live objects>"


d2o_librarian = Librarian()
