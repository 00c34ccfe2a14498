"""The D2O paper's Appendix 1 "Initialization" session.

``np.complex`` and ``np.float`` of the paper were removed from numpy (1.24);
the builtins ``complex`` and ``float`` are the same types.
"""

import numpy as np

from d2o import distributed_data_object

a = np.arange(12).reshape((3, 4))
obj = distributed_data_object(a)
# equivalent to line above
obj = distributed_data_object(global_data=a)

obj = distributed_data_object(global_data=a, dtype=complex)
print(obj.dtype, obj.shape)

obj = distributed_data_object(global_shape=(2, 3), dtype=float)
# equivalent to line above
obj = distributed_data_object(global_shape=(2, 3))
print(obj.dtype, obj.shape)

obj = distributed_data_object(local_data=a, distribution_strategy="freeform")
print(obj.dtype, obj.shape, obj.distribution_strategy)
