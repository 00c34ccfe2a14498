"""Contractions for `d2o.numpy`: ``einsum`` and ``tensordot`` (as an einsum, or as
`d2o.dot` where it is a matrix product).

The first distributed operand's split axis names a letter ``s``.  Every other operand
holding ``s`` is moved (one exchange) so that its ``s`` axis is cut with the same bounds;
an operand without ``s`` is needed whole by every rank (replicated: an implicit gather
of that operand, under the ``gather`` option).  numpy's einsum then runs on the pieces:
when ``s`` is in the output the result keeps that cut; when it is contracted the partial
results are summed (one Allreduce of the result) and the result is replicated.
Subscripts with ``...``, a letter repeated on the split axis's operand, or the
interleaved calling form take the bounded fallback.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..array.base import Array as D2O
from ..array.base import from_local as _from_local
from ..array.slabs import as_slab
from ..core.errors import agreed
from ..layouts.distributors import get_distributor
from ..move.redistribution import redistribute
from .axislocal import fallback
from .linalg import dot

__all__ = ["einsum", "tensordot"]


def _parse(subscripts: str, n: int) -> tuple[list, str] | None:
    s = subscripts.replace(" ", "")
    if "." in s:
        return None
    ins, arrow, out = s.partition("->")
    terms = ins.split(",")
    if len(terms) != n:
        raise ValueError("more operands were provided than specified in the subscripts string"
                         if n > len(terms) else "fewer operands provided to einstein sum function "
                         "than specified in the subscripts string")  # fmt: skip
    if not arrow:
        letters = "".join(terms)
        out = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    return terms, out


def einsum(*operands: Any, out: Any = None, **kwargs: Any) -> Any:
    """numpy's ``einsum`` on distributed operands (see the module notes)."""
    if not operands or not isinstance(operands[0], str):
        return fallback("einsum", np.einsum, operands, dict(kwargs, out=out))
    subscripts, arrays = operands[0], list(operands[1:])
    first = next((a for a in arrays if isinstance(a, D2O)), None)
    comm = first.distributor.comm
    with agreed(comm):
        parsed = _parse(subscripts, len(arrays))
        if parsed is not None:
            for t, a in zip(parsed[0], arrays):
                if len(t) != np.ndim(a):
                    raise ValueError(
                        f"einstein sum subscripts string contains too many subscripts for operand "
                        f"(got {len(t)} for an operand of {np.ndim(a)} dimensions)"
                    )
    lead = as_slab(first)
    d = lead.distributor
    if parsed is None or d.replicated or comm.size == 1 or kwargs.get("optimize") is True:
        return fallback("einsum", np.einsum, operands, dict(kwargs, out=out))
    terms, out_letters = parsed
    k = arrays.index(first)
    letter = terms[k][d.axis]
    if terms[k].count(letter) > 1:
        return fallback("einsum", np.einsum, operands, dict(kwargs, out=out))
    bounds, n = d.bounds(), first.shape[d.axis]
    pieces = []
    for t, a in zip(terms, arrays):
        if a is first:
            pieces.append(lead.data)
            continue
        x = a if isinstance(a, D2O) else None
        if letter in t and np.shape(a)[t.index(letter)] == n and t.count(letter) == 1:
            ax = t.index(letter)
            if x is None:  # a numpy operand: every rank cuts its part
                sl = [slice(None)] * np.ndim(a)
                sl[ax] = slice(bounds[comm.rank], bounds[comm.rank + 1])
                pieces.append(np.asarray(a)[tuple(sl)])
            else:
                x = as_slab(x)
                pieces.append(redistribute(x.data, x.distributor, d.slabs_like(x.shape, ax)))
        elif x is None:
            pieces.append(np.asarray(a))
        else:
            x = as_slab(x)
            whole = get_distributor("not", x.shape, comm)
            pieces.append(redistribute(x.data, x.distributor, whole))
    with agreed(comm):
        res = np.asarray(np.einsum(subscripts, *pieces, **kwargs))
    if letter in out_letters:
        o = out_letters.index(letter)
        shape = res.shape[:o] + (n,) + res.shape[o + 1 :]
        result = _from_local(res, d.slabs_like(shape, o))
    else:
        total = comm.Allreduce(np.ascontiguousarray(res), "sum") if res.size else res
        total = np.asarray(total).reshape(res.shape)
        result = _from_local(total, get_distributor("not", total.shape, comm))
    if out is not None:
        out[...] = result
        return out
    return result if result.ndim else result.get_local_data()[()]


def tensordot(a: Any, b: Any, axes: Any = 2) -> Any:
    """numpy's ``tensordot``: a matrix product (the last axis of a 1-d/2-d ``a`` with the
    first of a 1-d/2-d ``b``, not both 1-d) is `d2o.dot` (`d2o.ops.linalg`: the product picked
    by shape); any other contraction is an `einsum`."""
    na, nb = np.ndim(a), np.ndim(b)
    if isinstance(axes, (int, np.integer)):
        axes = (list(range(na - axes, na)), list(range(axes)))
    ax_a, ax_b = axes
    ax_a = [ax_a] if isinstance(ax_a, (int, np.integer)) else list(ax_a)
    ax_b = [ax_b] if isinstance(ax_b, (int, np.integer)) else list(ax_b)
    if len(ax_a) != len(ax_b):
        raise ValueError("shape-mismatch for sum")
    ax_a = [x % na for x in ax_a] if na else ax_a
    ax_b = [x % nb for x in ax_b] if nb else ax_b
    if na + nb > 52:
        return fallback("tensordot", np.tensordot, (a, b), {"axes": axes})
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)] + [
        chr(c) for c in range(ord("A"), ord("Z") + 1)
    ]
    ta = letters[:na]
    tb = letters[na : na + nb]
    for i, j in zip(ax_a, ax_b):
        if np.shape(a)[i] != np.shape(b)[j]:
            raise ValueError("shape-mismatch for sum")
        tb[j] = ta[i]
    if ax_a == [na - 1] and ax_b == [0] and na <= 2 and nb <= 2 and na + nb > 2:
        return dot(a, b)  # a matrix product: picked by shape, BLAS on the pieces
    out = [c for i, c in enumerate(ta) if i not in ax_a] + [
        c for j, c in enumerate(tb) if j not in ax_b
    ]
    return einsum(f"{''.join(ta)},{''.join(tb)}->{''.join(out)}", a, b)
