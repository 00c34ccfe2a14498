"""The seed papers' programs (examples/programs/) run unchanged on d2o.numpy and on numpy.

DistNumPy's Monte Carlo pi, Jacobi solver and N-body simulation and GAiN's laplace.py
are plain numpy code taking the namespace as an argument (``run(np, n, iterations)``).
Each test runs a program with d2o.numpy and with numpy on the same small inputs and
compares: the Jacobi, N-body and Laplace inputs come from deterministic formulas (both
backends build bit-for-bit the same arrays); for Monte Carlo, whose generators differ
between the backends, the counting part gets identical samples made by numpy, and
d2o's own draws are checked against numpy counting d2o's (gathered) samples.

numpy is the oracle; the verdicts are collective (every rank asserts the same thing).
The sizes include ones that do not divide among 2, 3 or 4 ranks and ones smaller than
the number of ranks (ranks holding one row or none).
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import math
import runpy
import sys
from pathlib import Path

import numpy as np
import pytest

import d2o
import d2o.numpy as dnp
from d2o import default_comm
from d2o.testing import assert_equal_to_numpy, collective_assert

PROGRAMS = Path(d2o.__file__).resolve().parent.parent / "examples" / "programs"
NAMES = ["monte_carlo_pi", "jacobi", "nbody", "nbody_dot", "laplace"]


def _load(name: str):
    """The program module (importing it runs its ``import d2o.numpy as np`` switch)."""
    key = f"_d2o_program_{name}"
    if key not in sys.modules:
        spec = importlib.util.spec_from_file_location(key, PROGRAMS / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules[key] = module
    return sys.modules[key]


def _close(actual, expected, rtol: float, what: str) -> None:
    """Collective: ``actual`` (plain values on every rank) is close to numpy's ``expected``."""
    try:
        np.testing.assert_allclose(np.asarray(actual), np.asarray(expected), rtol=rtol, atol=0)
        msg = None
    except AssertionError as exc:
        msg = f"{what}: {exc}"
    collective_assert(msg is None, msg or "")


# -- Monte Carlo pi -------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 7, 1000, 40_001])
def test_monte_carlo_identical_samples_count_identically(n):
    mc = _load("monte_carlo_pi")
    x, y = np.random.default_rng(7).random((2, n))  # the same samples on every rank
    expected = mc.pi_from_points(np, x, y)
    got = mc.pi_from_points(dnp, dnp.asarray(x), dnp.asarray(y))
    collective_assert(type(got) is float, f"pi_from_points returned {type(got).__name__}")
    collective_assert(got == expected, f"d2o.numpy counted {got}, numpy {expected}")


@pytest.mark.parametrize("n, iterations", [(5, 1), (10_000, 1), (30_001, 3)])
def test_monte_carlo_run_gives_numpys_estimate(n, iterations):
    """``random`` draws numpy's own stream: the whole program prints numpy's figure."""
    mc = _load("monte_carlo_pi")
    got = mc.run(dnp, n, iterations, seed=3)
    expected = mc.run(np, n, iterations, seed=3)
    collective_assert(got == expected, f"d2o.numpy's run gave {got}, numpy {expected}")


def test_monte_carlo_estimates_pi_on_both_backends():
    mc = _load("monte_carlo_pi")
    n, iterations = 50_000, 2
    sigma = 4 * math.sqrt(math.pi / 4 * (1 - math.pi / 4) / (n * iterations))
    for backend in (dnp, np):
        pi = mc.run(backend, n, iterations, seed=0)
        collective_assert(
            abs(pi - math.pi) < 5 * sigma, f"{backend.__name__}: pi ~ {pi}, 5 sigma = {5 * sigma}"
        )


# -- Jacobi ---------------------------------------------------------------------------


@pytest.mark.parametrize("n, iterations", [(3, 4), (50, 10), (201, 12)])
def test_jacobi_matches_numpy(n, iterations):
    jac = _load("jacobi")
    A, b = jac.system(dnp, n, seed=1)
    nA, nb = jac.system(np, n, seed=1)
    assert_equal_to_numpy(A, nA)
    assert_equal_to_numpy(b, nb)
    h, dmax, k = jac.solve(dnp, A, b, iterations)
    nh, ndmax, nk = jac.solve(np, nA, nb, iterations)
    collective_assert(k == nk, f"{k} iterations, numpy {nk}")
    assert_equal_to_numpy(h, nh, rtol=1e-12)
    # dmax is a relative difference of nearly equal numbers: rounding shows more
    _close(dmax, ndmax, 1e-8, "dmax")
    _close(jac.run(dnp, n, iterations, seed=1), jac.run(np, n, iterations, seed=1), 1e-8, "run")


def test_jacobi_stops_at_the_tolerance_like_numpy():
    jac = _load("jacobi")
    h, dmax, k = jac.solve(dnp, *jac.system(dnp, 120), iterations=500, tol=1e-9)
    nh, ndmax, nk = jac.solve(np, *jac.system(np, 120), iterations=500, tol=1e-9)
    collective_assert(k == nk and k < 500, f"stopped after {k} iterations, numpy after {nk}")
    collective_assert(dmax <= 1e-9, f"dmax {dmax} above the tolerance")
    assert_equal_to_numpy(h, nh, rtol=1e-12)
    # h solves the system
    nA, nb = jac.system(np, 120)
    _close(nA @ nh, nb, 1e-7, "A h = b")


# -- N-body ---------------------------------------------------------------------------


@pytest.mark.parametrize("n, iterations", [(2, 3), (5, 4), (97, 5)])
def test_nbody_matches_numpy(n, iterations):
    nb = _load("nbody")
    state = nb.simulate(dnp, n, iterations, seed=2)
    expected = nb.simulate(np, n, iterations, seed=2)
    for name, got, want in zip(["x", "y", "z", "vx", "vy", "vz", "m"], state, expected):
        collective_assert(got.shape == want.shape, f"{name}: shape {got.shape}")
        # a few steps of a chaotic system: rounding differences stay near 1e-15
        assert_equal_to_numpy(got, want, rtol=1e-10, atol=1e-14)
    _close(nb.run(dnp, n, iterations, seed=2), nb.run(np, n, iterations, seed=2), 1e-10, "run")


def test_nbody_conserves_momentum():
    nb = _load("nbody")
    x, y, z, vx, vy, vz, m = nb.simulate(dnp, 64, 10)
    x0, y0, z0, vx0, vy0, vz0, m0 = nb.bodies(dnp, 64)
    for v, v0 in ((vx, vx0), (vy, vy0), (vz, vz0)):
        p, p0 = float(dnp.sum(m * v)), float(dnp.sum(m0 * v0))
        collective_assert(abs(p - p0) < 1e-12, f"momentum {p0} became {p}")


@pytest.mark.parametrize("n, iterations", [(1, 2), (2, 3), (5, 4), (97, 5)])
def test_nbody_dot_form_matches_numpy(n, iterations):
    """The paper's form (outer products and row sums by ``dot``) on both backends."""
    nd = _load("nbody_dot")
    state = nd.simulate(dnp, n, iterations, seed=2)
    expected = nd.simulate(np, n, iterations, seed=2)
    for name, got, want in zip(["Px", "Py", "Pz", "Vx", "Vy", "Vz", "M"], state, expected):
        collective_assert(got.shape == want.shape == (n, 1), f"{name}: shape {got.shape}")
        assert_equal_to_numpy(got, want, rtol=1e-10, atol=1e-14)
    _close(nd.run(dnp, n, iterations, seed=2), nd.run(np, n, iterations, seed=2), 1e-10, "run")


def test_nbody_forms_simulate_the_same_bodies():
    """``nbody_dot`` is ``nbody`` written with ``dot``: the same trajectories (to rounding)."""
    nb, nd = _load("nbody"), _load("nbody_dot")
    n, iterations = 40, 6
    broadcast = nb.simulate(dnp, n, iterations, seed=1)
    paper = nd.simulate(dnp, n, iterations, seed=1)
    for got, want in zip(paper, broadcast):
        assert_equal_to_numpy(got, want.get_full_data()[:, None], rtol=1e-9, atol=1e-13)
    _close(nd.run(np, n, iterations, seed=1), nb.run(np, n, iterations, seed=1), 1e-9, "run")


# -- Laplace --------------------------------------------------------------------------


@pytest.mark.parametrize("n, iterations", [(3, 2), (5, 3), (6, 7), (41, 25)])
def test_laplace_matches_numpy(n, iterations):
    lap = _load("laplace")
    u0 = lap.grid(dnp, n)
    assert_equal_to_numpy(u0, lap.grid(np, n))
    u, err = lap.solve(dnp, n, iterations)
    nu, nerr = lap.solve(np, n, iterations)
    assert_equal_to_numpy(u, nu, rtol=1e-13, atol=1e-15)
    _close(err, nerr, 1e-10, "err")
    _close(lap.run(dnp, n, iterations), lap.run(np, n, iterations), 1e-10, "run")


def test_laplace_sweep_is_jacobi_and_keeps_the_boundary():
    lap = _load("laplace")
    n = 9
    u = lap.grid(dnp, n)
    before = u.get_full_data()
    lap.time_step(dnp, u)
    after = u.get_full_data()
    expected = before.copy()
    expected[1:-1, 1:-1] = (
        before[:-2, 1:-1] + before[2:, 1:-1] + before[1:-1, :-2] + before[1:-1, 2:]
    ) * 0.25
    collective_assert(np.array_equal(after, expected), "one sweep differs from numpy's")


def test_laplace_converges_to_the_harmonic_boundary_function():
    # x^2 - y^2 is harmonic and its discrete Laplacian vanishes too: the fixed point
    lap = _load("laplace")
    n = 8
    u, err = lap.solve(dnp, n, 2000, eps=1e-10)
    collective_assert(err <= 1e-10, f"not converged: err = {err}")
    x = np.linspace(0.0, 1.0, n)
    exact = x[:, None] ** 2 - x[None, :] ** 2
    assert_equal_to_numpy(u, exact, atol=1e-8)


# -- the scripts ----------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_main_prints_on_rank_0_only(name, monkeypatch):
    monkeypatch.delenv("USE_NUMPY", raising=False)
    monkeypatch.setattr(sys, "argv", [f"{name}.py", "40", "--iterations", "2"])
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        runpy.run_path(str(PROGRAMS / f"{name}.py"), run_name="__main__")
    text = out.getvalue()
    if default_comm().rank == 0:
        ok = "d2o.numpy" in text and len(text.splitlines()) == 1
    else:
        ok = text == ""
    collective_assert(ok, f"rank {default_comm().rank} printed {text!r}")
