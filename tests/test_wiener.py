"""The Wiener filter demo against a single-process plain-numpy implementation of the same filter."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from d2o.testing import assert_equal_to_numpy, collective_assert

PATH = Path(__file__).resolve().parent.parent / "examples" / "wiener_filter.py"


@pytest.fixture(scope="module")
def wf():
    spec = importlib.util.spec_from_file_location("wiener_filter_example", PATH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def numpy_problem(wf, n, seed):
    """The same problem in plain numpy (same random numbers: one generator per global row)."""

    def noise(stream):
        return np.stack(
            [np.random.default_rng([seed, stream, i]).standard_normal(n) for i in range(n)]
        )

    kx = np.fft.fftfreq(n, 1.0 / n)[:, None]
    ky = np.fft.rfftfreq(n, 1.0 / n)[None, :]
    k = np.sqrt(kx**2 + ky**2)
    power = (1.0 + (k / (wf.KNEE * n)) ** 2) ** (-wf.SLOPE / 2)
    power *= n * n / power.sum()
    kernel = np.exp(-2.0 * (np.pi * wf.SMOOTHING * k) ** 2)
    rows = np.arange(n, dtype=float)[:, None]
    cols = np.arange(n, dtype=float)[None, :]
    sigma = wf.NOISE[0] + (wf.NOISE[1] - wf.NOISE[0]) * cols / (n - 1) + 0 * rows
    cx, cy, r = wf.HOLE
    observed = (cols - cx * n) ** 2 + (rows - cy * n) ** 2 >= (r * n) ** 2
    inv_noise = observed / sigma**2

    def to_k(x):
        return np.fft.rfftn(x, norm="ortho")

    def to_x(xk):
        return np.fft.irfftn(xk, s=(n, n), axes=(0, 1), norm="ortho")

    signal = to_x(np.sqrt(power) * to_k(noise(1)))
    data = (to_x(kernel * to_k(signal)) + sigma * noise(2)) * observed
    j = to_x(kernel * to_k(inv_noise * data))

    def inverse_propagator(x):
        xk = to_k(x)
        return to_x(xk / power + kernel * to_k(inv_noise * to_x(kernel * xk)))

    return signal, data, j, inverse_propagator


@pytest.mark.parametrize("n", [10, 16])
def test_wiener_matches_numpy(wf, n):
    seed = 7
    out = wf.wiener_filter(n, seed=seed, tol=1e-10, maxiter=400)
    signal, data, j, dinv = numpy_problem(wf, n, seed)
    assert_equal_to_numpy(out["signal"], signal, rtol=1e-9, atol=1e-9)
    assert_equal_to_numpy(out["data"], data, rtol=1e-9, atol=1e-9)
    # the exact solution of D^-1 m = j, by a dense solve (n*n unknowns)
    eye = np.eye(n * n).reshape(n * n, n, n)
    matrix = np.stack([dinv(e).ravel() for e in eye], axis=1)
    m = np.linalg.solve(matrix, j.ravel()).reshape(n, n)
    scale = np.abs(m).max()
    assert_equal_to_numpy(out["reconstruction"], m, rtol=0, atol=1e-7 * scale)
    collective_assert(out["residual"] < 1e-10, f"residual {out['residual']}")
    collective_assert(0 < out["iterations"] < 400, f"{out['iterations']} iterations")


def test_cli_writes_png(wf, tmp_path_factory):
    from d2o.core.comm import default_comm

    comm = default_comm()
    path = str(tmp_path_factory.mktemp("wiener") / "w.png") if comm.rank == 0 else None
    path = comm.bcast(path)
    rc = wf.main(["--size", "16", "--tol", "1e-3", "--output", path])
    ok = rc == 0 and (comm.rank != 0 or Path(path).stat().st_size > 1000)
    collective_assert(ok, "main() failed or wrote no PNG")
