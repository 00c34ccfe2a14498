"""The D2O paper's "Copy methods" session.

``np.float`` (removed from numpy in 1.24) is written ``float``; it is the same type.
"""

import numpy as np

from d2o import distributed_data_object

a = np.arange(4)
obj = distributed_data_object(a)  # dtype == np.int
p = obj.copy(dtype=float, distribution_strategy="not")
print((p.distribution_strategy, p))

obj = distributed_data_object(global_shape=(4, 4), dtype=float)
# only the shape gets changed (the values are uninitialised memory)
e = obj.copy_empty(global_shape=(2, 2))
print(e.shape, e.dtype, e.distribution_strategy)
