# The D2O paper's listing, unchanged (Python 3 prints "0 [...]" where the
# paper, in Python 2, shows "(0, array([...]))").
# ruff: noqa
# fmt: off
# get_set_data.py
from mpi4py import MPI
import numpy as np
from d2o import distributed_data_object
# Get the process' rank number (0,1,2,3) from MPI
rank = MPI.COMM_WORLD.rank

# Initialize some data
a = np.arange(16).reshape((4,4))
# Initialize the distributed_data_object
obj = distributed_data_object(a)

# Print the process' local data
print (rank, obj.get_local_data())
# extract data via slicing
print (rank, obj[0:3:2, 1:3].get_local_data())

b = -np.arange(4).reshape((2,2))
obj[2:4,1:3] = b # Write b into obj

# Print the process' local data
print (rank, obj.get_local_data())

# Consolidate the data
full_data = obj.get_full_data()
if rank == 0: print (rank, full_data)
