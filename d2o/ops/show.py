"""`show`: a text picture of which rank holds which part of a distributed array.

Local: the picture is drawn from the layout (every rank knows every rank's
box), so it never communicates and can be called on one rank only.
"""

from __future__ import annotations

import sys
from typing import Any

from ..layouts.distributors import is_runs, run_length
from ..layouts.mesh import is_mesh

__all__ = ["show"]

_MAX_CELLS = 16  # intervals per drawn axis; larger layouts are listed instead


def _cuts(boxes: list, axis: int, n: int) -> list[int]:
    cuts = {0, n}
    for box in boxes:
        if box is not None:
            cuts.update(box[axis])
    return sorted(cuts)


def _owners(boxes: list, axes: tuple, point: tuple) -> list[int]:
    out = []
    for r, box in enumerate(boxes):
        if box is not None and all(box[a][0] <= p < box[a][1] for a, p in zip(axes, point)):
            out.append(r)
    return out


def _label(ranks: list[int]) -> str:
    if not ranks:
        return "-"
    if len(ranks) > 3 and ranks == list(range(ranks[0], ranks[-1] + 1)):
        return f"r{ranks[0]}-{ranks[-1]}"
    return ",".join(f"r{r}" for r in ranks)


def _grid(boxes: list, shape: tuple, axes: tuple) -> list[str] | None:
    """An ASCII grid over the drawn ``axes`` (one or two), or None when too large."""
    cols_axis = axes[-1]
    rows_axis = axes[0] if len(axes) == 2 else None
    ccuts = _cuts(boxes, cols_axis, shape[cols_axis])
    rcuts = _cuts(boxes, rows_axis, shape[rows_axis]) if rows_axis is not None else [0, 1]
    if len(ccuts) - 1 > _MAX_CELLS or len(rcuts) - 1 > _MAX_CELLS:
        return None
    labels = []
    for i in range(len(rcuts) - 1):
        row = []
        for j in range(len(ccuts) - 1):
            if rcuts[i] == rcuts[i + 1] or ccuts[j] == ccuts[j + 1]:
                row.append("")
                continue
            point = (ccuts[j],) if rows_axis is None else (rcuts[i], ccuts[j])
            row.append(_label(_owners(boxes, axes, point)))
        labels.append(row)
    width = [
        max([len(str(ccuts[j])) + 1, 4] + [len(labels[i][j]) + 2 for i in range(len(labels))])
        for j in range(len(ccuts) - 1)
    ]
    margin = max(len(str(c)) for c in rcuts) + 2 if rows_axis is not None else 0
    head = " " * margin + "".join(str(c).ljust(w + 1) for c, w in zip(ccuts[:-1], width))
    head += str(ccuts[-1])
    rule = "+" + "+".join("-" * w for w in width) + "+"
    lines = [head]
    for i, row in enumerate(labels):
        left = str(rcuts[i]).rjust(margin - 2) + "  " if rows_axis is not None else ""
        lines.append(left + rule)
        pad = " " * margin
        lines.append(pad + "|" + "|".join(lab.center(w) for lab, w in zip(row, width)) + "|")
    bottom = str(rcuts[-1]).rjust(margin - 2) + "  " if rows_axis is not None else ""
    lines.append(bottom + rule)
    return lines


def _fmt_entry(e: tuple) -> str:
    if not is_runs(e):
        return f"{e[0]}:{e[1]}"
    runs = [f"{a}:{b}" for a, b in e]
    return "{" + ",".join(runs if len(runs) <= 4 else runs[:3] + ["..."]) + "}"


def _fmt_box(box: tuple) -> str:
    return "[" + ", ".join(_fmt_entry(e) for e in box) + "]"


def show(obj: Any, file: Any = None, rank: int | None = 0) -> str:
    """Print which rank holds which part of ``obj`` (a picture for small layouts).

    Parameters
    ----------
    obj : distributed_data_object
    file : file-like, optional
        Where to print (default ``sys.stdout``).
    rank : int or None
        The rank that prints (default 0); None: every rank prints.

    Returns
    -------
    str
        The picture, on every rank.

    Notes
    -----
    Local: drawn from the layout alone; no communication, so calling it on
    some ranks only is safe.
    """
    d = obj.distributor
    comm = d.comm
    P = comm.size
    shape = d.global_shape
    title = f"shape {shape} {obj.dtype}, "
    if d.replicated:
        text = title + f"{d.strategy!r}: replicated, every rank of {P} holds the whole array"
    else:
        split = sorted(d.split_axes())
        if is_mesh(d):
            title += f"{d.layout!r} over {P} rank(s)"  # type: ignore[attr-defined]
        else:
            title += f"{d.strategy!r} split along axis {split[0]} over {P} rank(s)"
        boxes = []
        for r in range(P):
            box = d.region(r)
            boxes.append(None if any(run_length(e) == 0 for e in box) else box)
        ax = split[0]
        if len(split) > 1:
            axes = tuple(split[:2])
        else:
            axes = (ax,) if len(shape) == 1 else ((0, ax) if ax else (0, 1))
        lines = [title]
        cyclic = getattr(d, "cyclic", False)  # runs of blocks: listed, not drawn
        if len(shape) > 1 and not cyclic:
            names = " x ".join(f"axis {a}" for a in axes)
            lines.append(f"drawn: {names} (rows x columns)")
        grid = None if cyclic else _grid(boxes, shape, axes)
        if grid is not None:
            lines += grid
        listing = [f"  rank {r}: {_fmt_box(b)}" for r, b in enumerate(boxes) if b is not None]
        empty = [r for r, b in enumerate(boxes) if b is None]
        if len(listing) <= 32:
            lines += listing
        else:
            lines.append(f"  {len(listing)} ranks hold a part")
        if empty:
            lines.append(f"  ranks holding nothing: {_label(empty) if len(empty) > 3 else empty}")
        text = "\n".join(lines)
    if rank is None or rank == comm.rank:
        print(text, file=sys.stdout if file is None else file)
    return text
