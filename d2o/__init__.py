"""d2o: cluster-distributed multi-dimensional numpy arrays on MPI.

Write numpy-style code once; run it on one process without MPI, or with
``mpiexec -n N`` to spread every array over N processes.
"""

# The class first: it binds the feature modules its one-line methods call.
from .api.array import distributed_data_object  # noqa: I001
from . import fft
from .runtime import funnel as _funnel  # noqa: F401 - sets the operations' flags
from .ops import indexing as _indexing
from .ops import shape as _shape_ops
from .ops import special as _special
from .core import watchdog as _watchdog
from .core.comm import user_default_comm as default_comm
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
from .ops.deferred import evaluate
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
    "evaluate",
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


_watchdog.install_excepthook()
_watchdog.start()
