"""The D2O paper's "Basic usage" session (Initialization, Arithmetics, strategies).

Run: python examples/basic_usage.py   (or under mpiexec: every rank prints its piece)
The IPython prompts of the paper become print(repr(...)) calls.
"""

import numpy as np

from d2o import distributed_data_object

a = np.arange(12).reshape((3, 4))
print(repr(a))

obj = distributed_data_object(a)
print(repr(obj))

# Arithmetics: the results are distributed objects again
print((2 * obj, obj**3, obj >= 5))

# a numpy array in first place no longer gathers obj: numpy hands the
# operation to obj.__array_ufunc__, so the result is distributed too
print(repr(a + obj))
print(repr(obj + a))

obj = distributed_data_object(a, distribution_strategy="equal")
print(repr(obj.distribution_strategy))
