"""The class of deferred arrays (the ``lazy`` option, `d2o.ops.deferred`).

A deferred array is a `d2o.distributed_data_object` whose ``data`` slot is not set yet:
its piece is an expression.  Its class is this subclass of the public class, whose only
addition is ``__getattr__``, reached when ``data`` is read while unset: the expression
is evaluated then (one fused kernel, local) and the array becomes an ordinary
``distributed_data_object`` again.  Only deferred arrays pay for the hook: an attribute
hook on the public class itself would slow every attribute read of every array.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .array import distributed_data_object

__all__ = ["deferred_data_object"]


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
