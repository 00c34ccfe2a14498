# indexing.py: the D2O paper's indexing snippets ("Basic usage: Array indexing" and
# Appendix 1 "Getting and setting data") as one script.  Runs on any number of
# processes, with or without MPI: `python indexing.py` or `mpiexec -n 3 python indexing.py`.
# Results of indexing are distributed objects; get_full_data() gathers them
# explicitly for printing, and rank 0 prints.
import numpy as np

from d2o import default_comm, distributed_data_object

rank = default_comm().rank


def show(label, value):
    if isinstance(value, distributed_data_object):
        value = value.get_full_data()  # collective: every rank calls it
    if rank == 0:
        print(label)
        print(repr(value) if isinstance(value, np.ndarray) else value)


# -- Basic usage: array indexing ---------------------------------------------
a = np.arange(12).reshape((3, 4))
obj = distributed_data_object(a)
show("obj", obj)
show("obj[1]  # extract a row", obj[1])
show("obj[1, -2]  # extract single entry", obj[1, -2])
# The paper prints obj[:,2, 1::2], a typo: its output [[1, 3], [9, 11]] (and the
# assignment below) is obj[::2, 1::2].
show("obj[::2, 1::2]  # slicing notation", obj[::2, 1::2])
obj[::2, 1::2] = [[111, 222], [333, 444]]  # sets data using slicing
show("obj", obj)

# -- Appendix 1: getting and setting data ------------------------------------
a = np.arange(12).reshape(3, 4)
obj = distributed_data_object(a)
show("obj", obj)
show("obj[2, 1]  # simple indexing", obj[2, 1])
index_tuple = (np.array([1, 1, 2, 2, 2, 2]), np.array([2, 3, 0, 1, 2, 3]))
show("obj[index_tuple]  # advanced indexing", obj[index_tuple])
# The paper writes obj[:, :-2] but prints [[3, 1], [7, 5], [11, 9]], which is
# obj[:, ::-2]; we use ::-2.
show("obj[:, ::-2]  # slicing", obj[:, ::-2])
show("obj[obj > 5]  # boolean extraction", obj[obj > 5])

a = np.arange(12).reshape(3, 4)
obj = distributed_data_object(a)
obj[obj > 5] = [11, 22, 33, 44, 55, 66]
show("obj after obj[obj > 5] = [11, 22, 33, 44, 55, 66]", obj)
