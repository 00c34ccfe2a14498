"""`d2o.numpy`'s I/O and the functions of no array data: their table entries.

Readers distribute what they read (every rank reads, keeps its piece); ``load`` and
``save`` of ``.npy`` files read and write each rank's part, ``savetxt`` writes every rank's
rows at their offset, ``savez`` writes every rank's bytes of each zip member at their offset
(`d2o.io`).  Functions of
dtypes, shapes and settings (``result_type``, ``shape``, ``seterr``, windows, ...) are
numpy's own on empty stand-ins: nothing moves.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np

from ..array.base import Array as D2O
from ..io import load as _load
from ..io import save as _save
from ..io import savetxt as _savetxt
from ..io import savez as _savez
from ..ops import creation as _creation
from ..ops.axislocal import fallback
from .factories import handled, meta_entry

__all__ = ["fill", "from_dlpack", "load", "save", "savetxt", "savez", "savez_compressed"]


def _read_with(reader: Callable) -> Callable:
    def f(*args: Any, dist: Any = None, **kwargs: Any) -> Any:
        return _creation.asarray(reader(*args, **kwargs), dist=dist)

    f.__doc__ = f"numpy's ``{reader.__name__}``, distributed after reading."
    return f


def from_dlpack(x: Any, /, *, device: Any = None, copy: Any = None, dist: Any = None) -> Any:
    """numpy's ``from_dlpack`` (the array API's signature), distributed after every rank
    imports ``x`` (no communication but the distribution's own)."""
    return _creation.asarray(np.from_dlpack(x, device=device, copy=copy), dist=dist)


def load(file: Any, mmap_mode=None, allow_pickle=False, fix_imports=True, encoding="ASCII", *,
         max_header_size=10000, dist: Any = None):  # fmt: skip
    """numpy's ``load`` of a ``.npy`` file, each rank reading its part (d2o.io.load)."""
    return _load(file)


def save(file: Any, arr: Any, allow_pickle=True, fix_imports=True):
    """numpy's ``save``: a distributed array writes its parts (d2o.io.save)."""
    if isinstance(arr, D2O):
        return _save(file, arr, overwrite=True)
    return np.save(file, arr, allow_pickle=allow_pickle)


def savetxt(fname: Any, X: Any, fmt: Any = "%.18e", delimiter: str = " ", newline: str = "\n",
            header: str = "", footer: str = "", comments: str = "# ",
            encoding: Any = None) -> None:  # fmt: skip
    """numpy's ``savetxt``: a distributed ``X`` written to a path with its rows in global
    order, every rank formatting and writing its own rows at its offset (d2o.io.savetxt:
    one allgather of byte counts, no gather of ``X``).  File handles and compressed names
    (``.gz``, ...) take the bounded fallback."""
    kw = dict(fmt=fmt, delimiter=delimiter, newline=newline, header=header, footer=footer,
              comments=comments, encoding=encoding)  # fmt: skip
    if isinstance(X, D2O) and isinstance(fname, (str, os.PathLike)):
        if not os.fspath(fname).endswith((".gz", ".bz2", ".xz", ".lzma")):
            return _savetxt(fname, X, **kw)
    return fallback("savetxt", np.savetxt, (fname, X), kw)


def _npz(name: str, compress: bool, file: Any, args: tuple, kwds: dict, allow_pickle: bool):
    arrays = [v for v in (*args, *kwds.values()) if isinstance(v, D2O)]
    if not arrays or not isinstance(file, (str, os.PathLike)):  # file handles, nested arrays
        kw = dict(kwds, allow_pickle=allow_pickle)
        return fallback(name, getattr(np, name), (file, *args), kw)
    return _savez(arrays[0].distributor.comm, file, args, kwds, compress, allow_pickle)


def savez(file: Any, *args: Any, allow_pickle: bool = True, **kwds: Any) -> None:
    """numpy's ``savez``: every rank writes its own bytes of each distributed array's
    member (row slabs; other layouts and meshes redistributed to them first), one
    allgather of sizes and CRC-32s per member, rank 0 the zip headers, numpy arrays and
    scalars (d2o.io.savez).  File handles: fallback."""
    return _npz("savez", False, file, args, kwds, allow_pickle)


def savez_compressed(file: Any, *args: Any, allow_pickle: bool = True, **kwds: Any) -> None:
    """numpy's ``savez_compressed``: `savez` with every rank deflating its own bytes into
    its piece of the member's one deflate stream."""
    return _npz("savez_compressed", True, file, args, kwds, allow_pickle)


def fill(table: dict) -> None:
    """Enter the functions of no array data and the readers and writers."""
    handled(table, "meta", "shares_memory may_share_memory shape ndim size isrealobj "
             "iscomplexobj")  # fmt: skip
    for n in ("result_type can_cast promote_types min_scalar_type common_type mintypecode "
              "isdtype issubdtype iterable isscalar typename broadcast_shapes get_printoptions "
              "set_printoptions printoptions geterr seterr geterrcall seterrcall getbufsize "
              "setbufsize format_float_positional format_float_scientific base_repr "
              "binary_repr show_config show_runtime get_include info frompyfunc "
              "tril_indices triu_indices diag_indices mask_indices ix_ isfortran "
              "datetime_data busday_count busday_offset is_busday unravel_index").split():  # fmt: skip
        if hasattr(np, n) and n not in table:
            table[n] = ("meta", meta_entry(getattr(np, n)), "")
    # small by nature or local by definition: numpy's own on gathered operands (bounded)
    for n in ("asmatrix", "bmat"):
        table[n] = ("fallback", None, "returns numpy.matrix, a class of one process's memory")
    table["nested_iters"] = ("fallback", None, "numpy iterators walk one process's memory")
    table["test"] = ("fallback", None, "numpy's own test runner: no array data")
    table["array_repr"] = ("meta", lambda arr, *a, **k: repr(arr), "")
    table["array_str"] = ("meta", lambda a, *x, **k: str(a), "")
    for n in "bartlett blackman hamming hanning kaiser".split():
        table[n] = ("meta", getattr(np, n), "a window of scalars: numpy's own array")
    for n in "loadtxt genfromtxt fromfile frombuffer fromstring fromiter fromregex".split():
        table[n] = ("create", _read_with(getattr(np, n)), "every rank reads, keeps its piece")
    table["from_dlpack"] = ("create", from_dlpack, "every rank imports, keeps its piece")
    table["load"] = ("create", load, ".npy: every rank reads only its part (d2o.io)")
    table["save"] = ("create", save, ".npy: every rank writes its part (d2o.io)")
    table["savetxt"] = ("create", savetxt, "rows in global order: every rank writes its own "
                        "text at its offset (d2o.io); file handles, .gz: fallback")  # fmt: skip
    note = ("every rank writes its bytes of each member, CRC-32s combined (d2o.io); layouts "
            "not cut along axis 0 only, meshes: via row slabs; file handles: fallback")  # fmt: skip
    table["savez"] = ("create", savez, note)
    table["savez_compressed"] = ("create", savez_compressed, note + "; one deflate stream")
