"""The array object's state: what every layer above reads and builds results with.

`ArrayBase` holds a distributed array's three parts (this rank's piece ``data``, its
``distributor``, and the librarian's ``index``) and wraps pieces of known layouts
without checks or communication (`ArrayBase._from_local`, `ArrayBase._view`).  The
public class, `d2o.distributed_data_object` (`d2o.api.array`), derives from it and
adds the whole public interface; it registers itself when it is defined
(``__init_subclass__``), so that operations below the public class build their
results as instances of it without importing it.
"""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.librarian import d2o_librarian
from ..layouts.distributors import Distributor

__all__ = ["ArrayBase", "Array", "from_local", "deferred", "settle", "watch", "unwatch",
           "as_shape", "as_index"]  # fmt: skip

_next_index = d2o_librarian.next_index
_new = object.__new__
#: The public class (the first subclass of ArrayBase: d2o.distributed_data_object).
_public: list = [None]
_PUBLIC: Any = None  # the same, read by `from_local` on every result
#: The class of deferred arrays: the public class with a ``__getattr__`` that evaluates
#: (`d2o.api.deferred`; only its instances pay for the hook, not every array).
_DEFERRED: Any = None
#: The same, for the modules that test an array's type before looking for an expression
deferred_type: list = [None]
#: The class of arrays whose piece a deferred copy reads (`d2o.api.deferred`): the public
#: class with a ``data`` property that evaluates the copy first when code outside d2o
#: reads the piece (which it may write); set on such arrays alone, while the copy waits.
_WATCHED: Any = None


class ArrayBase:
    """A distributed array's state: the local piece, its layout and its librarian index."""

    __slots__ = ("data", "distributor", "index", "hermitian", "base", "_padded", "_expr",
                 "__weakref__")  # fmt: skip
    _padded: np.ndarray  # ghost-cell buffer (d2o.move.ghost); set only on arrays that have one
    #: a deferred array's expression (`d2o.ops.deferred`); set only while ``data`` is not
    _expr: Any
    __array_priority__ = 20.0

    data: np.ndarray
    distributor: Distributor
    index: int
    base: Any
    hermitian: bool

    def __init_subclass__(cls, deferred: bool = False, watched: bool = False,
                          **kwargs: Any) -> None:  # fmt: skip
        super().__init_subclass__(**kwargs)
        global _PUBLIC, _DEFERRED, _WATCHED
        if deferred:  # the class of deferred arrays (`d2o.api.deferred`)
            _DEFERRED = deferred_type[0] = cls
        elif watched:  # the class of arrays a deferred copy reads (`d2o.api.deferred`)
            _WATCHED = cls
        elif _public[0] is None:
            _public[0] = _PUBLIC = cls
            d2o_librarian.cls = cls

    @classmethod
    def _from_local(cls, data: np.ndarray, distributor: Distributor) -> Any:
        """Wrap a local piece of a known layout: no checks, no communication.  Called on
        `ArrayBase` it builds the public class (`from_local`); on a subclass, that class."""
        if cls is ArrayBase:
            return from_local(data, distributor)
        obj = _new(cls)
        obj.data = data
        obj.distributor = distributor
        obj.hermitian = False
        obj.base = None
        obj.index = _next_index()
        return obj

    def _view(self, data: np.ndarray, distributor: Distributor) -> Any:
        """A view of this array: ``data`` is a numpy view of (part of) this rank's piece;
        ``.base`` is the object owning the memory, as in numpy.  No communication."""
        v = _new(type(self))  # (`_from_local` of self's class, inlined: a call less)
        v.data = data
        v.distributor = distributor
        v.hermitian = False
        v.base = self if self.base is None else self.base
        v.index = _next_index()
        return v


def from_local(data: np.ndarray, distributor: Distributor) -> Any:
    """An instance of the public class wrapping a local piece of a known layout: no checks,
    no communication (the fast constructor every operation builds its results with)."""
    obj = _new(_PUBLIC)
    obj.data = data
    obj.distributor = distributor
    obj.hermitian = False
    obj.base = None
    obj.index = _next_index()
    return obj


def deferred(expr: Any, distributor: Distributor) -> Any:
    """A deferred array (a subclass of the public class) whose piece is ``expr`` not yet
    evaluated: its ``data`` slot stays unset until the first read of ``data`` evaluates
    (the subclass's ``__getattr__``: ``expr.force(array)``, then `settle`).  No
    communication."""
    obj = _new(_DEFERRED)
    obj._expr = expr
    obj.distributor = distributor
    obj.hermitian = False
    obj.base = None
    obj.index = _next_index()
    return obj


def expression(obj: Any) -> Any:
    """``obj``'s deferred expression where it is a deferred array not evaluated yet, else
    None.  Local."""
    if type(obj) is not _DEFERRED:
        return None
    try:
        expr = obj._expr
    except AttributeError:
        return None
    return expr if expr.value is None else None


def settle(obj: Any, data: Any = None) -> None:
    """Make deferred array ``obj`` an ordinary one (the public class) holding ``data`` (or
    the piece it holds already).  Local."""
    if data is not None:
        obj.data = data
    try:
        del obj._expr
    except AttributeError:
        pass
    obj.__class__ = _PUBLIC


def watch(obj: Any) -> bool:
    """Give ``obj`` (an instance of the public class itself) the class whose ``data``
    property evaluates the deferred copies of its piece before code outside d2o reads it
    (True also where it has it already); False where ``obj`` is of another class.  Local."""
    if type(obj) is _WATCHED:
        return True
    if type(obj) is not _PUBLIC or _WATCHED is None:
        return False
    obj.__class__ = _WATCHED
    return True


def unwatch(obj: Any) -> None:
    """Make a watched array (`watch`) an ordinary one again.  Local."""
    if type(obj) is _WATCHED:
        obj.__class__ = _PUBLIC


def as_shape(shape: Any) -> tuple:
    """numpy's shape rules: an integer or a sequence of integers (``operator.index``: floats
    and strings are TypeError), none negative (ValueError)."""
    if type(shape) is tuple and all(type(n) is int and n >= 0 for n in shape):
        return shape  # the common case, without exceptions
    try:
        dims = (operator.index(shape),)
    except TypeError:
        if isinstance(shape, (str, bytes)) or not hasattr(shape, "__iter__"):
            raise TypeError(
                f"{type(shape).__name__!r} object cannot be interpreted as an integer"
            ) from None
        dims = tuple(as_index(n) for n in shape)
    if any(n < 0 for n in dims):
        raise ValueError(f"negative dimensions are not allowed: {dims}")
    return dims


def as_index(n: Any) -> int:
    """``operator.index(n)`` with numpy's message for non-integers."""
    try:
        return operator.index(n)
    except TypeError:
        raise TypeError(
            f"{type(n).__name__!r} object cannot be interpreted as an integer"
        ) from None


if TYPE_CHECKING:  # type checkers see the public class and its whole interface
    from ..api.array import distributed_data_object as Array
else:  # at run time: the base class (every array is an instance of the public class)
    Array = ArrayBase
