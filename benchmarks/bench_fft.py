"""2-D FFT of 2048^2 and 4096^2 complex128 arrays on 1 and 2 processes vs scipy.fft on one.

Run plainly it launches itself under ``mpiexec -n 1`` and ``-n 2`` and writes the results
to ``docs/_data/bench/fft.json`` (``make bench``; the performance page shows it).  Each
line: d2o.fft.fftn on the distributed array (output in the input's layout,
two all-to-alls; and with ``dist_axis=1``, one all-to-all), against
scipy.fft.fftn (numpy.fft without scipy) of the whole array on rank 0 alone,
measured in the same run.  Times are medians, the slowest rank's.
This is a benchmark, not a test: it asserts nothing.
"""

from __future__ import annotations

import numpy as np  # noqa: E402
from _harness import run_or_launch, timed  # noqa: E402  (also puts the repo on sys.path)

import d2o.fft as dfft  # noqa: E402
from d2o import distributed_data_object as D2O  # noqa: E402
from d2o.core.comm import Comm, default_comm  # noqa: E402

RECORD = "fft"  # docs/_data/bench/fft.json
SIZES = (2048, 4096)
REPEAT = 3


def measure() -> dict:
    comm = default_comm()
    out = {"backend": dfft.BACKEND, "sizes": {}}
    for n in SIZES:
        x = D2O(global_shape=(n, n), dtype=np.complex128)
        x.local_array[...] = np.random.default_rng(comm.rank).standard_normal(x.local_shape)
        t = timed(lambda x=x: dfft.fftn(x), comm, REPEAT)
        t1 = timed(lambda x=x: dfft.fftn(x, dist_axis=1), comm, REPEAT)
        del x
        ref = None
        if comm.rank == 0:
            a = np.random.default_rng(0).standard_normal((n, n)).astype(np.complex128)
            ref = timed(lambda a=a: dfft.backend().fftn(a), Comm(None), REPEAT)
            del a
            print(
                f"{comm.size} proc(s) {n}x{n}: d2o fftn {t * 1e3:8.1f} ms "
                f"(dist_axis=1: {t1 * 1e3:8.1f} ms); {dfft.BACKEND}.fftn on 1 proc "
                f"{ref * 1e3:8.1f} ms; speedup {ref / t:4.2f}x ({ref / t1:4.2f}x)",
                flush=True,
            )
            out["sizes"][str(n)] = {"d2o_s": t, "d2o_dist_axis1_s": t1, "reference_s": ref}
        comm.barrier()
    return out


if __name__ == "__main__":
    run_or_launch(__file__, measure, name=RECORD)
