# The D2O paper's listing, unchanged (Python 3 prints "0 [...]" where the
# paper, in Python 2, shows "(0, array([...]))").
# ruff: noqa
# fmt: off
# librarian.py
from mpi4py import MPI
import numpy as np
from d2o import distributed_data_object, d2o_librarian

comm = MPI.COMM_WORLD
rank = comm.rank

# initialize four distributed_data_objects
obj = distributed_data_object(np.arange(16).reshape((4,4)))
obj_list = (obj, 2*obj, 3*obj, 4*obj)

# every process gets its respective full array
individual_object = obj_list[rank]
individual_index = individual_object.index
index_list = comm.allgather(individual_index)

for index in index_list:
    # reassemble the current object on every node
    current_object = d2o_librarian[index]
    if rank == 0: print ('Index: ' + str(index))
    # take a slice of the data
    print (rank, current_object[:, 2:].get_local_data())
