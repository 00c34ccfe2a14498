"""The D2O paper's Appendix 2: chunked iteration versus element-wise indexing.

``xrange``/IPython's ``%timeit`` of the paper become ``range``/``timeit``.
Run: python examples/iterators.py   (or under mpiexec)
"""

import timeit

import numpy as np

from d2o import distributed_data_object

length = 1000
obj = distributed_data_object(np.arange(length))


def using_iterators(obj):
    for i in obj:  # noqa: B007 - the listing as printed
        pass


def not_using_iterators(obj):
    for j in range(length):
        obj[j]


for fn in (not_using_iterators, using_iterators):
    n, total = timeit.Timer(lambda fn=fn: fn(obj)).autorange()
    print(f"{fn.__name__}: {total / n * 1e3:.3f} ms per loop")

for item in [9, 8, 7, 6]:
    print(item)
print(sum(int(x) for x in obj) == length * (length - 1) // 2)
