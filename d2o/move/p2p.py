"""The one router of elements to their owners and back: every point-to-point exchange of
1-d pieces grouped by destination goes through `alltoallv` here.

- `route_pieces`: arrays already grouped by destination rank, with their counts (the
  sort's buckets); `route`: elements sent to the rank ``owner[i]`` names; `ask`: queries
  sent to their owners and the answers brought back in the queries' order.
- Advanced indexing: `fetch` and `scatter`.

A requester knows, for each element it wants (or wants to write), the owning
rank and the element's flat position in the owner's local piece.  `fetch`
sends those positions to the owners and the values back (two ``Alltoallv``
calls sized by the elements moved); `scatter` sends positions and values to
the owners, which write them in rank order (a later rank wins on duplicates,
as a later position wins in numpy).  Both first need the matrix of request
counts (`count_matrix`, one small allgather that can also agree on errors);
when no rank sends anything to another rank they communicate nothing more.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..core.comm import Comm, base_type
from ..core.errors import agree_gather

__all__ = ["alltoallv", "route_pieces", "route", "ask", "count_matrix", "fetch", "scatter"]


def alltoallv(comm: Comm, send: np.ndarray, sendcounts, recvcounts) -> np.ndarray:
    """Collective: 1-D all-to-all; ``send`` is grouped by destination rank."""
    send = np.ascontiguousarray(send).reshape(-1)
    recv = np.empty(int(np.sum(recvcounts)), dtype=send.dtype)
    if comm.size == 1:
        recv[...] = send
        return recv
    sc = [int(c) for c in sendcounts]
    rc = [int(c) for c in recvcounts]
    comm.Alltoallv(send, sc, recv, rc, base_type(send.dtype.itemsize))
    return recv


def route_pieces(
    arrays: list, sendcounts: Any, comm: Comm, recvcounts: Any = None
) -> tuple[list, list]:
    """Collective: one `alltoallv` per array of 1-d pieces grouped by destination rank
    (``sendcounts[r]`` elements to rank ``r``); the received pieces in source-rank order,
    and how many elements came from each rank.  ``recvcounts``, when the caller knows
    them (a reply), saves the ``Allgather`` of the counts."""
    sc = np.asarray(sendcounts, dtype=np.int64)
    if comm.size == 1:
        return [np.array(a) for a in arrays], sc.tolist()
    if recvcounts is None:
        rc = comm.Allgather(sc)[:, comm.rank].tolist()
    else:
        rc = [int(c) for c in recvcounts]
    return [alltoallv(comm, a, sc, rc) for a in arrays], rc


def route(owner: np.ndarray, arrays: list, comm: Comm) -> tuple:
    """Collective: send element ``i`` of every array to rank ``owner[i]`` (one
    ``Alltoallv`` per array); returns the send order, the counts sent per rank, the
    received arrays and the counts received per rank."""
    order = np.argsort(owner, kind="stable")
    counts = np.bincount(owner, minlength=comm.size)
    recv, rc = route_pieces([a[order] for a in arrays], counts, comm)
    return order, counts, recv, rc


def ask(owner: np.ndarray, queries: list, comm: Comm, answer: Callable) -> list:
    """Collective: send each query to the rank ``owner`` names, let it compute
    ``answer(*queries)`` (arrays of the same length), and return the answers in the
    queries' order.  Two ``Alltoallv`` rounds of the queries' and answers' bytes."""
    order, counts, recv, rc = route(owner, queries, comm)
    back, _ = route_pieces(answer(*recv), rc, comm, recvcounts=counts)  # sizes are known
    out = []
    for b in back:
        r = np.empty_like(b)
        r[order] = b
        out.append(r)
    return out


def count_matrix(comm: Comm, owner: np.ndarray, error=None, extra=None, agree: bool = False):
    """Collective: the P x P matrix of request counts (row: requester), and the
    gathered ``extra`` values.  With ``agree`` an error on any rank raises everywhere."""
    counts = np.bincount(owner, minlength=comm.size).astype(np.int64)
    if comm.size == 1:
        if error is not None:
            raise error
        return counts.reshape(1, 1), [extra]
    if agree:
        rows = agree_gather(comm, error, (counts.tolist(), extra))
        return np.array([r[0] for r in rows], dtype=np.int64), [r[1] for r in rows]
    return comm.Allgather(counts), None


def _all_local(M: np.ndarray) -> bool:
    return int(M.sum() - np.trace(M)) == 0


def _flat(data: np.ndarray) -> np.ndarray:
    return data.reshape(-1) if data.flags.c_contiguous else data.ravel()


def fetch(comm: Comm, data: np.ndarray, owner: np.ndarray, lin: np.ndarray, M) -> np.ndarray:
    """Collective: the values at flat positions ``lin`` of the pieces of ranks ``owner``."""
    if _all_local(M):
        return np.take(_flat(data), lin)
    me = comm.rank
    order = np.argsort(owner, kind="stable")
    sc, rc = M[me], M[:, me]
    req = alltoallv(comm, lin[order], sc, rc)
    vals = alltoallv(comm, np.take(_flat(data), req), rc, sc)
    out = np.empty(lin.size, dtype=data.dtype)
    out[order] = vals
    return out


def _put(data: np.ndarray, lin: np.ndarray, vals: np.ndarray) -> None:
    if data.flags.c_contiguous:
        data.reshape(-1)[lin] = vals
    else:
        data.flat[lin] = vals


def scatter(
    comm: Comm,
    data: np.ndarray,
    owner: np.ndarray,
    lin: np.ndarray,
    vals: np.ndarray,
    M,
    replicated: bool = False,
) -> None:
    """Collective: write ``vals`` at flat positions ``lin`` of the pieces of ranks ``owner``.

    With ``replicated`` every rank holds the whole array and applies every
    rank's writes, in rank order.
    """
    vals = np.asarray(vals, dtype=data.dtype)
    if replicated:
        if comm.size == 1:
            _put(data, lin, vals)
            return
        counts = M.sum(axis=1).tolist()
        all_lin = comm.Allgatherv(lin.astype(np.int64), counts)
        all_vals = comm.Allgatherv(vals, counts)
        _put(data, all_lin, all_vals)
        return
    if _all_local(M):
        _put(data, lin, vals)
        return
    me = comm.rank
    order = np.argsort(owner, kind="stable")
    sc, rc = M[me], M[:, me]
    req = alltoallv(comm, lin[order], sc, rc)
    got = alltoallv(comm, vals[order], sc, rc)
    _put(data, req, got)
