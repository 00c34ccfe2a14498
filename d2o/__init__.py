"""d2o: cluster-distributed multi-dimensional numpy arrays on MPI.

Write numpy-style code once; run it on one process without MPI, or with
``mpiexec -n N`` to spread every array over N processes.
"""

# Feature modules attach their methods to distributed_data_object on import.
from . import (  # noqa: F401
    _indexing,
    _reductions,
    _shape_ops,
    _special,
    _ufuncs,
    fft,  # noqa: F401
)
from ._comm import default_comm
from ._d2o import distributed_data_object
from ._distributors import STRATEGIES
from ._indexing import *  # noqa: F403
from ._librarian import d2o_librarian
from ._linalg import dot, matmul
from ._shape_ops import *  # noqa: F403
from ._special import *  # noqa: F403
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
    *_indexing.__all__,
    *_shape_ops.__all__,
    *_special.__all__,
]
from .io import __all__ as _io_all  # noqa: E402

__all__ += list(_io_all)
