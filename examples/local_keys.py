# The D2O paper's listing, unchanged (Python 3 prints "0 [...]" where the
# paper, in Python 2, shows "(0, array([...]))").
# ruff: noqa
# fmt: off
# local_keys.py
from mpi4py import MPI
import numpy as np
from d2o import distributed_data_object

rank = MPI.COMM_WORLD.rank

# initializing some data
obj = distributed_data_object(np.arange(16)*2)

print (rank, obj)

# getting data using the same slice on both processes
print (rank, obj.get_data(key=slice(None, None, 2)))

# getting data using different slices
print (rank, obj.get_data(key=slice(None, None, 2+rank),
                          local_keys=True))

# getting data using different distributed_data_objects
key_tuple = (distributed_data_object([1, 3, 5, 7]),
             distributed_data_object([2, 4, 6, 8]))
key = key_tuple[rank]
print (rank, obj.get_data(key=key, local_keys=True))
