# distribution_schemes.py -- the D2O paper's Appendix 1 listing, unchanged.
# Run: mpiexec -n 3 python examples/distribution_schemes.py
from mpi4py import MPI
import numpy as np
from d2o import distributed_data_object
rank = MPI.COMM_WORLD.rank

a = np.arange(16).reshape((4, 4))
if rank == 0: print((rank, a))

# use 'not', 'equal' and 'fftw'
for strategy in ['not', 'equal', 'fftw']:
    obj = distributed_data_object(
        a, distribution_strategy=strategy)
    print (rank, strategy, obj.get_local_data())

# use the 'freeform' slicer
a += rank
obj = distributed_data_object(
    local_data=a, distribution_strategy='freeform')
print (rank, 'freeform', obj.get_local_data())

full_data = obj.get_full_data()
if rank == 0: print (rank, 'freeform', full_data)
