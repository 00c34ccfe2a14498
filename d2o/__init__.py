"""d2o: cluster-distributed multi-dimensional numpy arrays on MPI.

Write numpy-style code once; run it on one process without MPI, or with
``mpiexec -n N`` to spread every array over N processes.
"""

# The class first: it binds the feature modules its one-line methods call.
from .api.array import distributed_data_object  # noqa: I001
from . import fft
from .runtime import funnel as _funnel
from .array.base import Array as _ArrayBase
from .core import registry as _registry
from .ops import indexing as _indexing
from .ops import shape as _shape_ops
from .ops import special as _special
from .core import watchdog as _watchdog
from .core.comm import default_comm
from .core.config import get_option, options, set_options
from .runtime.controller import ControllerError
from .layouts.distributors import STRATEGIES
from .core.errors import GatherError, GatherWarning
from .ops.indexing import *  # noqa: F403
from .layouts.mesh import Layout, layout
from .core.librarian import d2o_librarian
from .ops.linalg import dot, matmul
from .ops.original import median
from .ops.shape import *  # noqa: F403
from .ops.show import show
from .ops.special import *  # noqa: F403
from .core.trace import Trace, trace
from .io import *  # noqa: F403

__version__ = "0.1.0"

__all__ = [
    "distributed_data_object",
    "d2o_librarian",
    "default_comm",
    "STRATEGIES",
    "fft",
    "dot",
    "matmul",
    "median",
    "layout",
    "Layout",
    "trace",
    "Trace",
    "show",
    "set_options",
    "options",
    "get_option",
    "GatherError",
    "GatherWarning",
    "ControllerError",
    *_indexing.__all__,
    *_shape_ops.__all__,
    *_special.__all__,
]
from .io import __all__ as _io_all  # noqa: E402

__all__ += list(_io_all)


def _register_public() -> None:
    """Declare every public operation to the funnel (`d2o.runtime.funnel`): each function of the
    class and of ``d2o``/``d2o.fft``/``d2o.io`` that may communicate gets traced."""
    import inspect

    D = distributed_data_object
    namers = {
        "__array_ufunc__": lambda a: a[1].__name__ + ("" if a[2] == "__call__" else f".{a[2]}"),
        "__array_function__": lambda a: a[1].__name__,
    }
    local = {"__reduce__", "__len__", "__repr__", "__str__", "get_local_data", "set_local_data",
             "__array_namespace__", "to_device", "__dlpack__", "__dlpack_device__"}  # fmt: skip
    # Methods that work on the array itself (views of its pieces, writes into it, its shape
    # changed in place): the mesh fallback must not run them on a slab copy; the public
    # operations they call are recorded and checked.
    in_place = {"view", "getfield", "setfield", "setflags", "byteswap", "resize", "put",
                "partition"}  # fmt: skip
    skip = (local | in_place) - {"__repr__", "__str__"}
    seen: set = set()
    for owner in D.__mro__[:-1]:  # the class and its mixins (d2o.api), not object
        for attr, val in list(owner.__dict__.items()):
            private = attr.startswith("_") and not attr.endswith("__")
            if attr in seen or owner is _ArrayBase:
                continue
            seen.add(attr)
            if inspect.isfunction(val) and not private and attr not in skip:
                name = "distributed_data_object" if attr == "__init__" else attr
                _registry.register(owner, attr, name, namers.get(attr))
    quiet = {"trace", "show", "set_options", "options", "get_option", "default_comm", "layout"}
    for name in __all__:
        obj = globals().get(name)
        if inspect.isfunction(obj) and name not in quiet:
            _registry.register_functions(obj.__module__, [obj.__name__])
    _registry.register_functions("d2o.fft", list(fft.__all__), prefix="fft.")


_register_public()
if get_option("check_args"):
    _funnel.activate()
_watchdog.install_excepthook()
_watchdog.start()
