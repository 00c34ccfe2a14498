"""What the lower layers tell the runtime, and the runtime's state they read.

d2o's layers import only downwards (docs/internals.md).  Where a lower layer must tell
a higher one that something happened (an option changed, a trace started, the first
mesh layout or 0-d view was made), it calls `fire` here, and the runtime
(`d2o.runtime.funnel`) subscribes with `subscribe` when it is imported.  The flags
below are written by the runtime and read, as plain list cells, on hot paths.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

__all__ = ["subscribe", "fire", "depth", "controlled", "role", "temporary", "mesh_in_use", "held_in_use",
           "pending", "defer_from", "NEVER", "use_mesh", "use_held", "drop_held"]  # fmt: skip

#: 1 while a public operation runs (its inner calls are not wrapped again).
depth = [0]
#: True in controller mode, on every rank (`d2o.runtime.controller`).
controlled = [False]
#: In controller mode: "controller" on rank 0, "worker" on the others; else None.
role: list = [None]
#: Controller mode with ``lazy`` on: whether the array an item assignment writes or a
#: ``ravel`` flattens is a temporary of the script (rank 0 counts its references and
#: sends the answer with the command, so that every rank decides alike: a worker's
#: own objects are held by its table of handles); None: count here.
temporary: list = [None]
#: True once a mesh layout was built in this process.
mesh_in_use = [False]
#: How many 0-d views (`d2o.layouts.distributors.HeldScalar` layouts) are alive now.
held_in_use = [0]

#: Event name -> callbacks, in the order they subscribed.
_SUBSCRIBERS: dict[str, list[Callable[[], None]]] = {}

#: The events: "modes" (check_args changed, a trace entered or left), "mesh" (the first
#: mesh layout), "held" (the first 0-d view), "registered" (public operations declared),
#: "pending" (the ``lazy`` option's first expression recorded, or its last evaluated).
EVENTS = ("modes", "mesh", "held", "registered", "pending")
#: True while a deferred expression is pending (`d2o.ops.deferred`).
pending = [False]
#: No element count reaches it (`defer_from` while nothing needs the operators' calls).
NEVER = sys.maxsize
#: The element count from which the element-wise calls (the operators,
#: ``__array_ufunc__``) go to the runtime (set by the runtime): 0 while a mode needs every
#: call, ``lazy_min`` while only the ``lazy`` option records them (a smaller call that
#: does not broadcast runs at once), else `NEVER`.  The operators' only test of the
#: modes, on the array's size they read anyway.
defer_from = [NEVER]


def subscribe(event: str, callback: Callable[[], None]) -> None:
    """Call ``callback()`` whenever ``event`` fires (see `EVENTS`)."""
    if event not in EVENTS:
        raise ValueError(f"unknown d2o event {event!r}")
    _SUBSCRIBERS.setdefault(event, []).append(callback)


def fire(event: str) -> None:
    """Tell the subscribers of ``event``; nothing happens if none subscribed."""
    for callback in _SUBSCRIBERS.get(event, ()):
        callback()


def use_mesh() -> None:
    """A mesh layout was built: note it, once, and fire "mesh"."""
    if not mesh_in_use[0]:
        mesh_in_use[0] = True
        fire("mesh")


def use_held() -> None:
    """A 0-d view's layout was made: count it (and note a mesh); fire "held" for the first."""
    use_mesh()
    held_in_use[0] += 1
    if held_in_use[0] == 1:
        fire("held")


def drop_held() -> None:
    """A 0-d view's layout was freed: fire "held" when none is left (the operations that
    ran on replicated copies of 0-d views go back to their own path)."""
    held_in_use[0] -= 1
    if held_in_use[0] == 0:
        fire("held")
