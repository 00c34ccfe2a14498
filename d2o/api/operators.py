"""The operators of `d2o.distributed_data_object`, generated from one table.

Every arithmetic, bitwise and comparison operator is one row of `BINARY` (the ufunc
and Python's operator); the class gets ``__op__``, ``__rop__`` and ``__iop__`` for it,
made by `d2o.ops.ufuncs`' ``binary_operator``, ``reflected_operator`` and
``inplace_operator`` (each one Python call: the modes' test, the fast paths, the
general path), and the unary operators from `UNARY`.  Local on one layout; operands of
other layouts are aligned first (one exchange).  The methods are made when the class
body runs, never set onto the class afterwards.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.registry import Operation, declare_op, operations
from ..ops import ufuncs as _ufuncs

__all__ = ["Operators"]

_binary = _ufuncs.binary_operator
_reflected = _ufuncs.reflected_operator
_inplace = _ufuncs.inplace_operator
_unary = _ufuncs.unary_operator

#: name -> (ufunc, Python operator, in-place operator or None for comparisons)
BINARY: dict[str, tuple[np.ufunc, Callable, Callable | None]] = {
    "add": (np.add, operator.add, operator.iadd),
    "sub": (np.subtract, operator.sub, operator.isub),
    "mul": (np.multiply, operator.mul, operator.imul),
    "truediv": (np.true_divide, operator.truediv, operator.itruediv),
    "floordiv": (np.floor_divide, operator.floordiv, operator.ifloordiv),
    "mod": (np.remainder, operator.mod, operator.imod),
    "pow": (np.power, operator.pow, operator.ipow),
    "and": (np.bitwise_and, operator.and_, operator.iand),
    "or": (np.bitwise_or, operator.or_, operator.ior),
    "xor": (np.bitwise_xor, operator.xor, operator.ixor),
    "lshift": (np.left_shift, operator.lshift, operator.ilshift),
    "rshift": (np.right_shift, operator.rshift, operator.irshift),
    "lt": (np.less, operator.lt, None),
    "le": (np.less_equal, operator.le, None),
    "eq": (np.equal, operator.eq, None),
    "ne": (np.not_equal, operator.ne, None),
    "gt": (np.greater, operator.gt, None),
    "ge": (np.greater_equal, operator.ge, None),
}
#: name -> ufunc of the unary operators
UNARY: dict[str, np.ufunc] = {
    "neg": np.negative,
    "pos": np.positive,
    "abs": np.absolute,
    "invert": np.invert,
}


def _named(f: Callable, name: str, doc: str) -> Callable:
    """``f`` named ``name``, down to its code object (tracebacks and the hang watchdog
    show ``Operators.__add__``, not the factory's inner function)."""
    qualname = f"Operators.{name}"
    code = f.__code__.replace(co_name=name)
    if hasattr(code, "co_qualname"):  # Python >= 3.11
        code = code.replace(co_qualname=qualname)
    f.__code__ = code
    f.__name__, f.__qualname__, f.__doc__ = name, qualname, doc
    return f


def _declared(name: str, fn: Callable) -> Operation:
    """The operation of the generated method ``name`` (`d2o.core.registry`) that the
    runtime runs as ``fn``: native on meshes and 0-d views; the method tests its flag
    itself, so that no trampoline holds a reference to the operands (temporaries are
    reused by their reference counts)."""
    return declare_op(fn, name, ("c", __name__, "Operators", name), kind="elementwise",
                      mesh=True, held="native", defers=True)  # fmt: skip


def _make_pair(factory: Callable, name: str, ufunc: np.ufunc, pyop: Callable, doc: str) -> Callable:
    """The method ``name`` of two operands made by ``factory`` (`d2o.ops.ufuncs`'
    ``binary_operator``, ``reflected_operator`` or ``inplace_operator``)."""
    return _named(factory(ufunc, pyop, lambda fn: _declared(name, fn)), name, doc)


def _make_unary(name: str, ufunc: np.ufunc) -> Callable:
    method = _unary(ufunc, lambda fn: _declared(f"__{name}__", fn))
    return _named(method, f"__{name}__", f"numpy's ``{ufunc.__name__}``; local.")


def _operator_methods() -> dict[str, Callable]:
    methods: dict[str, Callable] = {}
    for name, (ufunc, pyop, ipyop) in BINARY.items():
        uname = ufunc.__name__
        methods[f"__{name}__"] = _make_pair(
            _binary, f"__{name}__", ufunc, pyop, f"``self {name} other``: numpy's ``{uname}``."
        )
        if ipyop is not None:  # comparisons have no reflected or in-place form
            methods[f"__r{name}__"] = _make_pair(
                _reflected, f"__r{name}__", ufunc, pyop,
                f"``other {name} self``: numpy's ``{uname}``.",
            )  # fmt: skip
            methods[f"__i{name}__"] = _make_pair(
                _inplace, f"__i{name}__", ufunc, ipyop,
                f"``self {name}= other``, in this array's layout.",
            )  # fmt: skip
    for name, ufunc in UNARY.items():
        methods[f"__{name}__"] = _make_unary(name, ufunc)
    return methods


_METHODS = _operator_methods()


@operations(mesh=True, skip=set(_METHODS))
class Operators:
    """Python's operators on distributed arrays (a mixin of the public class)."""

    __slots__ = ()
    locals().update(_METHODS)

    if TYPE_CHECKING:  # what type checkers see of the generated methods above

        def __add__(self, other: Any) -> Any: ...
        def __radd__(self, other: Any) -> Any: ...
        def __iadd__(self, other: Any) -> Any: ...
        def __sub__(self, other: Any) -> Any: ...
        def __rsub__(self, other: Any) -> Any: ...
        def __isub__(self, other: Any) -> Any: ...
        def __mul__(self, other: Any) -> Any: ...
        def __rmul__(self, other: Any) -> Any: ...
        def __imul__(self, other: Any) -> Any: ...
        def __truediv__(self, other: Any) -> Any: ...
        def __rtruediv__(self, other: Any) -> Any: ...
        def __itruediv__(self, other: Any) -> Any: ...
        def __floordiv__(self, other: Any) -> Any: ...
        def __rfloordiv__(self, other: Any) -> Any: ...
        def __ifloordiv__(self, other: Any) -> Any: ...
        def __mod__(self, other: Any) -> Any: ...
        def __rmod__(self, other: Any) -> Any: ...
        def __imod__(self, other: Any) -> Any: ...
        def __pow__(self, other: Any) -> Any: ...
        def __rpow__(self, other: Any) -> Any: ...
        def __ipow__(self, other: Any) -> Any: ...
        def __and__(self, other: Any) -> Any: ...
        def __rand__(self, other: Any) -> Any: ...
        def __iand__(self, other: Any) -> Any: ...
        def __or__(self, other: Any) -> Any: ...
        def __ror__(self, other: Any) -> Any: ...
        def __ior__(self, other: Any) -> Any: ...
        def __xor__(self, other: Any) -> Any: ...
        def __rxor__(self, other: Any) -> Any: ...
        def __ixor__(self, other: Any) -> Any: ...
        def __lshift__(self, other: Any) -> Any: ...
        def __rlshift__(self, other: Any) -> Any: ...
        def __ilshift__(self, other: Any) -> Any: ...
        def __rshift__(self, other: Any) -> Any: ...
        def __rrshift__(self, other: Any) -> Any: ...
        def __irshift__(self, other: Any) -> Any: ...
        def __lt__(self, other: Any) -> Any: ...  # type: ignore[override]
        def __le__(self, other: Any) -> Any: ...  # type: ignore[override]
        def __eq__(self, other: Any) -> Any: ...  # type: ignore[override]
        def __ne__(self, other: Any) -> Any: ...  # type: ignore[override]
        def __gt__(self, other: Any) -> Any: ...  # type: ignore[override]
        def __ge__(self, other: Any) -> Any: ...  # type: ignore[override]
        def __neg__(self) -> Any: ...
        def __pos__(self) -> Any: ...
        def __abs__(self) -> Any: ...
        def __invert__(self) -> Any: ...

    def __divmod__(self, other: Any) -> tuple:
        """``divmod(self, other)``: numpy's ``divmod``."""
        return _ufuncs.apply_ufunc(np.divmod, "__call__", (self, other), {})

    def __rdivmod__(self, other: Any) -> tuple:
        """``divmod(other, self)``: numpy's ``divmod``."""
        return _ufuncs.apply_ufunc(np.divmod, "__call__", (other, self), {})
