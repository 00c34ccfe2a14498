"""One-off check (not a test): exchanges whose per-peer message is huge.

An int8 array of shape (2**16, 73_728) is 4.5 GiB.  On 2 ranks, a change of
the distributed axis sends each peer a quarter of it (1.2e9 elements), and a
gather onto rank 0 receives rank 1's whole half in one message: 2.4e9
elements, more than 2**31 = 2.15e9.  d2o sends one element of an MPI subarray
datatype per peer, so no count overflows.  Needs ~9.5 GiB of memory in total.

Run: mpiexec -n 2 python benchmarks/check_large_messages.py
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

from d2o import default_comm, distributed_data_object  # noqa: E402

comm = default_comm()
shape = (1 << 16, 73_728)
x = distributed_data_object(global_shape=shape, dtype=np.int8, axis=0)
lo = x.local_offset[0]
# a pattern that depends on both global indices, cheap to build and to check
rows = (np.arange(x.local_shape[0]) + lo).astype(np.int8)[:, None]
x.data[...] = rows
x.data += (np.arange(shape[1]) % 7).astype(np.int8)[None, :]
per_peer = (shape[0] // comm.size) * (shape[1] // comm.size)
if comm.rank == 0:
    print(
        f"{comm.size} ranks, {x.nbytes / 2**30:.2f} GiB int8, per-peer message "
        f"{per_peer:,} elements ({per_peer / 2**31:.2f} x 2**31)"
    )
t0 = time.perf_counter()
y = x.copy(axis=1)
t = time.perf_counter() - t0
c0 = y.local_offset[1]
cols = (np.arange(y.local_shape[1]) + c0) % 7
ok = True
for r in (0, 1, shape[0] // 2, shape[0] - 1):
    expect = np.int8(r % 256 - 256 if r % 256 > 127 else r % 256) + cols.astype(np.int8)
    ok &= bool(np.array_equal(y.data[r], expect.astype(np.int8)))
ok = comm.allreduce(ok, op="land")
if comm.rank == 0:
    print(f"redistributed axis 0 -> 1 in {t:.1f} s: {'correct' if ok else 'WRONG'}")
del y
t0 = time.perf_counter()
full = x.get_full_data(target_rank=0)
t = time.perf_counter() - t0
if comm.rank == 0:
    cols = (np.arange(shape[1]) % 7).astype(np.int8)
    ok = all(
        np.array_equal(full[r], (np.arange(shape[1]) * 0 + r).astype(np.int8) + cols)
        for r in (0, shape[0] // 2, shape[0] - 1)
    )
    print(
        f"gathered onto rank 0 in {t:.1f} s (rank 1 sent {x.size - x.local_shape[0] * shape[1]:,} "
        f"elements in one message): {'correct' if ok else 'WRONG'}"
    )
