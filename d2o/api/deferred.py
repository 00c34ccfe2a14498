"""The class of deferred arrays (the ``lazy`` option, `d2o.ops.deferred`).

A deferred array is a `d2o.distributed_data_object` whose ``data`` slot is not set yet:
its piece is an expression.  Its class is this subclass of the public class, whose only
addition is ``__getattr__``, reached when ``data`` is read while unset: the expression
is evaluated then (one fused kernel, local) and the array becomes an ordinary
``distributed_data_object`` again.  Only deferred arrays pay for the hook: an attribute
hook on the public class itself would slow every attribute read of every array.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from ..array.base import ArrayBase
from ..ops import deferred as _deferred
from .array import distributed_data_object

__all__ = ["deferred_data_object", "watched_data_object"]

_SLOT = ArrayBase.__dict__["data"]  # the piece's slot itself


class deferred_data_object(distributed_data_object, deferred=True):  # noqa: N801 - numpy style
    """A distributed array whose piece is a deferred expression (see the module notes)."""

    __slots__ = ()

    @property
    def dtype(self) -> np.dtype:
        """The expression's dtype (known without evaluating it)."""
        try:
            return self._expr.dtype
        except AttributeError:
            return self.data.dtype

    @property
    def local_shape(self) -> tuple:
        """The shape of this rank's piece (known without evaluating it)."""
        try:
            return self._expr.shape
        except AttributeError:
            return self.data.shape

    def __getattr__(self, name: str) -> Any:
        """``data``: the expression evaluated now, on this rank alone (local); any other
        missing attribute is AttributeError."""
        if name == "data":
            try:
                expr = self._expr
            except AttributeError:
                pass
            else:
                return expr.force(self)
        raise AttributeError(f"'distributed_data_object' object has no attribute {name!r}")


def _outside() -> bool:
    """True when the code reading or setting ``data`` (two frames up) is not d2o's own."""
    return not sys._getframe(2).f_globals.get("__name__", "").startswith("d2o.")


class watched_data_object(distributed_data_object, watched=True):  # noqa: N801 - numpy style
    """A distributed array whose piece a deferred copy reads (``lazy``:
    `d2o.ops.deferred.copied`).  Code outside d2o that reads ``data`` may write the piece
    (numpy, C, FFTW): the copy is evaluated first, and the array is an ordinary one
    again (`d2o.ops.deferred.release`).  d2o's own reads go straight to the piece."""

    __slots__ = ()

    @property  # type: ignore[override]
    def data(self) -> np.ndarray:
        """This rank's piece (a deferred copy of it evaluated first, from outside d2o)."""
        if _outside():
            _deferred.release(self)
        return _SLOT.__get__(self, type(self))

    @data.setter
    def data(self, value: np.ndarray) -> None:
        if _outside():
            _deferred.release(self)
        _SLOT.__set__(self, value)
