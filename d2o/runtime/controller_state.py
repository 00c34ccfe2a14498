"""Controller mode's state and constants (`d2o.runtime.controller`), all in this module.

The cells are mutable objects that the controller modules share by reference (one-element
lists for scalars): change them in place, never rebind them.  Nothing here communicates.
"""

from __future__ import annotations

import collections
import struct

import numpy as np

from ..core import hooks

__all__ = ["ControllerError", "is_controller"]


class ControllerError(RuntimeError):
    """A call that cannot work in controller mode (the message names the alternative)."""


_HEADER = 2048  # bytes of the fixed broadcast buffer (length + batches up to 2040 bytes)
_ERR_TAG = 7001  # worker -> rank 0: an exception in a worker's part of an operation
_PIECE_TAG = 7002  # rank 0 -> worker: its part of a large numpy argument (`_Piece`)
#: numpy arguments of creation functions from this many bytes on are scattered: each
#: worker receives only the part it keeps, not the whole array inside the command
_SCATTER_BYTES = 1 << 20
_SCATTERING = {"numpy.asarray", "numpy.array", "numpy.asanyarray", "numpy.ascontiguousarray"}
_MAX_QUEUED = 64  # commands queued before a batch is sent anyway
_MAX_BYTES = 1 << 20  # bytes queued before a batch is sent anyway
#: Operations on a local piece of this many bytes are sent before rank 0 runs its part,
#: so that every rank computes at once; smaller ones wait in the queue (latency hiding).
_AHEAD_BYTES = 1 << 18
#: "controller" on rank 0, "worker" on the other ranks, None outside controller mode
role = hooks.role  # the same cell, read by d2o.core.trace
_comm: list = [None]  # the commands' own communicator (a duplicate of COMM_WORLD)
_seq = [0]  # commands issued so far
_queue: list = []  # pickled commands not sent yet
_queued_bytes = [0]
#: (handle, commands queued then) of the objects that died on rank 0, not sent yet: a
#: worker drops each before running the commands queued after its death, so that its
#: memory follows rank 0's (a temporary freed before the next one is made)
_freed: list = []
_discard: list = []  # commands that failed on rank 0 after they were sent
_failed: collections.deque = collections.deque(
    maxlen=4096
)  # those commands (worker reports on them are moot)
_reports: list = []  # worker exceptions to raise in the script
_poisoned: dict = {}  # commands whose results some worker could not compute -> why
#: Commands sent ahead of a later one, whose success the ranks have not agreed on yet:
#: they agree (one Allreduce) before the next operation that communicates.
_unagreed: list = []
_NONE = np.iinfo(np.int64).max
_handles: dict = {}  # rank 0: id(object) -> handle; workers: id(object) -> handle
_objects: dict = {}  # workers: handle -> object
_refs: dict = {}  # rank 0: handle -> weak reference (its callback frees the handle)
_flushed = [False]  # the running operation's command was sent
#: [a sent operation is running, an interrupt came meanwhile, the handler put aside]
_sigint: list = [False, False, None]
_headers = (bytearray(_HEADER), bytearray(_HEADER))  # length (int64) + a small batch
_requests: list = [None, None]
_LENGTH = struct.Struct("<q")
_turn = [0]
_CODES: dict = {}  # rank 0: operation key -> its number in commands
#: Rank 0: operations that communicated when last called; they are sent before rank 0
#: runs its part (so the workers start at once), the others wait in the queue.
_talks: set = set()
_talked = [False]
_new_codes: dict = {}  # rank 0: numbers not sent yet
_KEYS: dict = {}  # workers: number -> operation key
_outgoing: list = []  # rank 0: the `_Piece`s of the commands queued, sent with their batch
_PICKLER: list = []  # rank 0: (buffer, pickler) reused by `_dumps`
_FNS: dict = {}  # workers: operation number -> the operation (resolved once)
_pending_reports: list = []  # workers: requests of the error reports sent to rank 0
_SCRIPT_COMM: list = [None]  # rank 0: the `_ScriptComm` the script gets


def is_controller() -> bool:
    """True on rank 0 of a program run in controller mode."""
    return role[0] == "controller"
