"""A Jupyter kernel that runs every cell on P processes: ``python -m d2o.kernel install``.

The kernelspec starts ``mpiexec -n P python -m d2o.run --kernel -f CONNECTION_FILE``:
rank 0 runs an IPython kernel in controller mode (see `d2o.run`), ranks > 0 execute
the d2o operations its cells make.  The notebook's code is unchanged sequential code
(``import d2o.numpy as np``); its arrays are distributed over all P processes.

Usage::

    python -m d2o.kernel install [--processes P] [--name NAME] [--user | --sys-prefix | --prefix DIR]
    python -m d2o.kernel remove NAME

Interrupting the kernel (Jupyter's "interrupt" button) sends a message to rank 0,
whose kernel raises KeyboardInterrupt in the cell once the running d2o operation has
finished on every rank; shutting the kernel down ends all P processes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile

__all__ = ["install", "remove", "kernel_json", "main"]


def _mpiexec() -> str:
    """The mpiexec next to this Python (a virtual environment's), else the one on PATH."""
    here = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    if os.path.isfile(here) and os.access(here, os.X_OK):
        return here
    found = shutil.which("mpiexec")
    if found is None:
        raise RuntimeError(
            "mpiexec was not found next to this Python or on PATH: install an MPI "
            "(pip install 'd2o[mpi]') before the d2o kernel"
        )
    return os.path.abspath(found)


#: What each rank runs after ``mpiexec -n P``.
_RANK_CMD = (sys.executable, "-m", "d2o.run", "--kernel", "-f", "{connection_file}")


def kernel_json(processes: int = 2) -> dict:
    """The kernelspec (contents of ``kernel.json``) of a d2o kernel on ``processes`` ranks.

    Parameters
    ----------
    processes : int, optional
        Number of MPI processes the kernel starts (at least 1).

    Returns
    -------
    dict
        ``argv`` (mpiexec, this Python, ``-m d2o.run --kernel``), ``display_name``,
        ``language``, ``interrupt_mode`` (``"message"``: interrupts reach rank 0's
        kernel as a message, never as a signal to mpiexec) and ``env``.
    """
    if int(processes) < 1:
        raise ValueError(f"processes must be at least 1, not {processes}")
    p = int(processes)
    return {
        "argv": [_mpiexec(), "-n", str(p), *_RANK_CMD],
        "display_name": f"d2o, {p} processes",
        "language": "python",
        "interrupt_mode": "message",
        # one thread per rank: P ranks share the machine's cores
        "env": {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"},
        "metadata": {"debugger": False},
    }


def install(
    processes: int = 2, name: str | None = None, user: bool = False, prefix: str | None = None
) -> str:
    """Install the kernelspec of a d2o kernel on ``processes`` MPI processes.

    Parameters
    ----------
    processes : int, optional
        Number of MPI processes (``mpiexec -n processes``); default 2.
    name : str, optional
        The kernel's name (``jupyter ... --kernel NAME``); default ``f"d2o-{processes}"``.
    user : bool, optional
        Install for the current user (``~/.local/share/jupyter/kernels``) rather than
        system-wide.
    prefix : str, optional
        Install under ``PREFIX/share/jupyter/kernels`` (e.g. ``sys.prefix`` for a
        virtual environment).  Not together with ``user``.

    Returns
    -------
    str
        The directory the kernelspec was installed to.

    Examples
    --------
    >>> path = install(4, prefix=sys.prefix)  # doctest: +SKIP
    >>> # jupyter lab, then pick the kernel "d2o, 4 processes"
    """
    from jupyter_client.kernelspec import KernelSpecManager

    spec = kernel_json(processes)
    name = name or f"d2o-{int(processes)}"
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "kernel.json"), "w") as f:
            json.dump(spec, f, indent=1)
        return KernelSpecManager().install_kernel_spec(
            tmp, kernel_name=name, user=user, prefix=prefix
        )


def remove(name: str) -> str:
    """Remove the installed kernelspec ``name``; returns the directory removed."""
    from jupyter_client.kernelspec import KernelSpecManager

    return KernelSpecManager().remove_kernel_spec(name)


def main(argv: list[str] | None = None) -> int:
    """``python -m d2o.kernel install|remove ...``; returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m d2o.kernel", description=__doc__.split("\n")[0]
    )
    sub = parser.add_subparsers(dest="command", required=True)
    inst = sub.add_parser("install", help="install the kernelspec 'd2o, P processes'")
    inst.add_argument("--processes", "-n", type=int, default=2, help="MPI processes (2)")
    inst.add_argument("--name", help="kernel name (default d2o-P)")
    where = inst.add_mutually_exclusive_group()
    where.add_argument("--user", action="store_true", help="install for the current user")
    where.add_argument("--sys-prefix", action="store_true", help=f"install into {sys.prefix}")
    where.add_argument("--prefix", help="install into PREFIX/share/jupyter/kernels")
    rem = sub.add_parser("remove", help="remove an installed kernelspec")
    rem.add_argument("name")
    args = parser.parse_args(argv)
    if args.command == "remove":
        try:
            print(f"Removed {remove(args.name)}")
        except KeyError:
            print(f"no kernelspec named {args.name!r}", file=sys.stderr)
            return 1
        return 0
    prefix = sys.prefix if args.sys_prefix else args.prefix
    try:
        path = install(args.processes, args.name, user=args.user, prefix=prefix)
    except (OSError, ValueError, RuntimeError) as exc:
        print(f"d2o.kernel: {exc}", file=sys.stderr)
        return 1
    print(f"Installed kernelspec {os.path.basename(path)} ({args.processes} processes) in {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
