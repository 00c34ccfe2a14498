"""Wiener filter reconstruction of a Gaussian random field: d2o's main job.

The data model (the D2O paper's Wiener filter showcase)::

    d = R s + n

* ``s``: a Gaussian random field with a power-law power spectrum P(k);
* ``R``: a smoothing response (a Gaussian kernel, diagonal in Fourier space);
* ``n``: Gaussian noise whose standard deviation grows from left to right,
  with a disc where nothing was measured (inverse noise variance 0).

The reconstruction is ``m = D j`` with ``j = R^T N^-1 d`` and
``D = (S^-1 + R^T N^-1 R)^-1``, applied by conjugate gradient (preconditioned
with S) using d2o's distributed FFT.  The algorithm below is plain global
array code: no MPI, no ranks, no local pieces.  Run it as::

    mpiexec -n 2 python examples/wiener_filter.py --size 512 --output out/wiener.png
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import d2o
import d2o.fft as dfft
from d2o import distributed_data_object as D2O

# -- the problem ---------------------------------------------------------------------

SLOPE = 4.0  # power law P(k) ~ (1 + (k/k0)^2)^(-SLOPE/2)
KNEE = 1 / 20  # k0 as a fraction of the grid size (structures ~ 1/20 of the field)
SMOOTHING = 1 / 100  # width of the Gaussian response, as a fraction of the grid size
NOISE = (0.4, 1.6)  # noise standard deviation at the left and right edge (signal std ~ 1)
HOLE = (0.6, 0.4, 0.12)  # unobserved disc: centre (x, y) and radius, in units of the size


def white_noise(shape: tuple, seed: int, stream: int, comm=None) -> D2O:
    """Unit Gaussian noise distributed along axis 0, independent of the layout.

    Global row ``i`` comes from ``numpy.random.default_rng([seed, stream, i])``,
    so every process count gives the same field.  Local: no communication.
    """
    field = D2O(global_shape=shape, dtype=np.float64, comm=comm)
    local = field.local_array
    for li, gi in field.enumerate(axis=0):
        local[li] = np.random.default_rng([seed, stream, gi]).standard_normal(shape[1:])
    return field


def fourier_grid(n: int, comm=None) -> D2O:
    """|k| (in grid frequencies) on the rfftn grid of an n x n field, laid out like ``to_k``'s output."""
    kx = dfft.fftfreq(n, 1.0 / n, distribution_strategy="not", comm=comm).reshape(n, 1)
    ky = dfft.rfftfreq(n, 1.0 / n, comm=comm).reshape(1, n // 2 + 1)
    return (kx**2 + ky**2) ** 0.5


class Problem:
    """The operators and fields of one Wiener filter problem on an n x n grid."""

    def __init__(self, n: int, seed: int = 42, comm=None) -> None:
        self.n = n
        k = fourier_grid(n, comm)
        self.power = (1.0 + (k / (KNEE * n)) ** 2) ** (-SLOPE / 2)  # S in Fourier space
        self.power *= n * n / self.power.sum()  # unit signal variance (ortho FFTs)
        self.kernel = np.exp(-2.0 * (np.pi * SMOOTHING * k) ** 2)  # R in Fourier space
        rows = D2O(np.arange(n, dtype=np.float64), comm=comm).reshape(n, 1)
        cols = np.arange(n, dtype=np.float64).reshape(1, n)
        sigma = NOISE[0] + (NOISE[1] - NOISE[0]) * cols / (n - 1) + 0.0 * rows
        cx, cy, r = HOLE
        observed = (cols - cx * n) ** 2 + (rows - cy * n) ** 2 >= (r * n) ** 2
        self.noise_std = sigma
        self.inv_noise = observed / sigma**2  # N^-1, zero where nothing was measured
        self.signal = self.to_x(self.power**0.5 * self.to_k(white_noise((n, n), seed, 1, comm)))
        noise = sigma * white_noise((n, n), seed, 2, comm)
        self.data = self.response(self.signal) + noise
        self.data *= observed

    # Fourier transforms (orthonormal), k-space distributed along axis 1
    def to_k(self, x: D2O) -> D2O:
        return dfft.rfftn(x, axes=(0, 1), norm="ortho", dist_axis=1)

    def to_x(self, xk: D2O) -> D2O:
        return dfft.irfftn(xk, s=(self.n, self.n), axes=(0, 1), norm="ortho", dist_axis=0)

    def response(self, x: D2O) -> D2O:
        """R x (R is symmetric: R^T = R)."""
        return self.to_x(self.kernel * self.to_k(x))

    def inverse_propagator(self, x: D2O) -> D2O:
        """D^-1 x = S^-1 x + R^T N^-1 R x (four FFTs)."""
        xk = self.to_k(x)
        rn = self.to_k(self.inv_noise * self.to_x(self.kernel * xk))
        return self.to_x(xk / self.power + self.kernel * rn)

    def prior(self, x: D2O) -> D2O:
        """S x, the preconditioner."""
        return self.to_x(self.power * self.to_k(x))


def conjugate_gradient(apply_a, b, precondition, tol=1e-6, maxiter=500, callback=None):
    """Solve ``A x = b`` for symmetric positive definite A (preconditioned CG).

    Stops when ``|r| / |b| < tol``.  Returns (x, iterations, relative residual).
    """
    x = b * 0.0
    r = b.copy()
    z = precondition(r)
    p = z.copy()
    rz = (r * z).sum()
    bnorm = float((b * b).sum()) ** 0.5 or 1.0
    res = float((r * r).sum()) ** 0.5 / bnorm
    it = 0
    while res >= tol and it < maxiter:
        ap = apply_a(p)
        alpha = rz / (p * ap).sum()
        x += alpha * p
        r -= alpha * ap
        it += 1
        res = float((r * r).sum()) ** 0.5 / bnorm
        if callback is not None:
            callback(it, res)
        if res < tol:
            break
        z = precondition(r)
        rz_new = (r * z).sum()
        p *= rz_new / rz
        p += z
        rz = rz_new
    return x, it, res


def wiener_filter(
    n: int, seed: int = 42, tol: float = 1e-6, maxiter: int = 500, callback=None, comm=None
) -> dict:
    """Build the problem and reconstruct the signal; collective.

    Returns a dict with the d2o fields ``signal``, ``data``, ``reconstruction``
    and the numbers ``iterations`` and ``residual``.
    """
    prob = Problem(n, seed, comm)
    j = prob.response(prob.inv_noise * prob.data)
    m, it, res = conjugate_gradient(
        prob.inverse_propagator, j, prob.prior, tol=tol, maxiter=maxiter, callback=callback
    )
    return {
        "problem": prob,
        "signal": prob.signal,
        "data": prob.data,
        "reconstruction": m,
        "iterations": it,
        "residual": res,
    }


# -- the command line ----------------------------------------------------------------


class ProgressBar:
    """A plain-text progress bar over CG iterations (progress: log residual / log tol)."""

    def __init__(self, tol: float, maxiter: int, enabled: bool, width: int = 30) -> None:
        self.tol, self.maxiter, self.enabled, self.width = tol, maxiter, enabled, width
        self.last = -1.0

    def __call__(self, it: int, res: float) -> None:
        now = time.perf_counter()
        if not self.enabled or (now - self.last < 0.1 and res >= self.tol):
            return
        self.last = now
        frac = max(np.log(max(res, 1e-300)) / np.log(self.tol), it / self.maxiter)
        frac = min(max(frac, 0.0), 1.0)
        done = int(round(frac * self.width))
        bar = "#" * done + "." * (self.width - done)
        sys.stdout.write(f"\rCG [{bar}] {frac:4.0%}  iteration {it:4d}  residual {res:.2e}")
        sys.stdout.flush()

    def close(self) -> None:
        if self.enabled:
            sys.stdout.write("\n")
            sys.stdout.flush()


def plot(signal: np.ndarray, data: np.ndarray, rec: np.ndarray, path: str) -> None:
    """Signal / data / reconstruction side by side (rank 0 only)."""
    import os

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lim = np.abs(signal).max()
    fig, axes = plt.subplots(1, 3, figsize=(12, 4.2), constrained_layout=True)
    for ax, img, title in zip(axes, (signal, data, rec), ("signal", "data", "reconstruction")):
        im = ax.imshow(img, cmap="RdBu_r", vmin=-lim, vmax=lim, origin="lower")
        ax.set_title(title)
        ax.set_xticks([])
        ax.set_yticks([])
    fig.colorbar(im, ax=axes, shrink=0.8)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=512, help="grid size n (n x n)")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--tol", type=float, default=1e-5, help="relative CG residual")
    parser.add_argument("--maxiter", type=int, default=500)
    parser.add_argument("--output", default="out/wiener.png", help="PNG path ('' for none)")
    args = parser.parse_args(argv)

    comm = d2o.default_comm()
    root = comm.rank == 0
    if root:
        print(f"Wiener filter on a {args.size} x {args.size} grid, {comm.size} process(es)")
    bar = ProgressBar(args.tol, args.maxiter, root)
    t0 = time.perf_counter()
    result = wiener_filter(args.size, args.seed, args.tol, args.maxiter, callback=bar)
    elapsed = time.perf_counter() - t0
    bar.close()
    if root:
        print(
            f"residual {result['residual']:.3e} after {result['iterations']} iterations, "
            f"{elapsed:.2f} s"
        )
    if args.output:
        # Explicit gathers, for plotting only.
        fields = [result[k].gather(0) for k in ("signal", "data", "reconstruction")]
        if root:
            plot(*fields, args.output)
            print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
