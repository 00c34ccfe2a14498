"""The messages MPICH itself sends for each collective, beside the cost model's schedule
(`d2o.core.costmodel`; not a test: it needs ``strace``).

MPICH's collectives call its internal point-to-point layer, which neither a PMPI layer nor
MPI_T (MPICH 5.0.2 here exposes no performance variables) can count.  This benchmark makes
MPICH carry every message over its network module as between nodes
(``MPIR_CVAR_NOLOCAL=1``, libfabric's ``tcp`` provider) and counts the socket writes of
every rank with ``strace``: each MPICH message is one write of its payload plus a 32-byte
header; the 16-byte writes are the receiver's acknowledgements, not messages.  The
calibration rows (one ``MPI_Send`` of n bytes) check that reading at every size.

Every call runs once before the count (connections are made lazily); a run with ``REPS``
more calls less a run without them, over ``REPS`` and rounded, gives each rank's messages
and payload bytes per call (what differs between two runs once per run — a connection's
handshake, a write split in two — is less than half a message per call; ``raw`` keeps the
unrounded figures).  They are set beside the model's schedule for that rank (`costmodel.schedule`: MPICH's algorithm at that size, op and rank
count).  Run plainly (``python benchmarks/bench_wire.py``; ``--counts 2,3,4,8,16``) it writes
``docs/_data/bench/wire.json``; the scaling-model page shows the table.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

from _harness import record  # noqa: E402  (also puts the repo on sys.path)

from d2o.core import costmodel as cm  # noqa: E402

RECORD = "wire"  # docs/_data/bench/wire.json
COUNTS = (2, 3, 4, 8, 16)
REPS = 100
#: (kind as run here, the model's kind, sizes in bytes per rank; Alltoallv: to all peers)
CASES = (
    ("Send", "Send", (8, 2048, 1 << 20)),
    ("Barrier", "Barrier", (0,)),
    ("Bcast", "Bcast", (8, 2048, 65536, 1 << 20)),
    ("Allreduce", "Allreduce", (8, 96, 2048, 65536)),
    ("Allreduce (user op)", "Allreduce", (96, 65536)),
    ("Allgather", "Allgather", (8, 2048, 65536)),
    ("Alltoallv", "Alltoallv", (96, 65536)),
)
#: MPICH over libfabric's tcp provider: the header of every message, the acknowledgements
HEADER, ACK = 32, 16
WRITE = re.compile(r"(sendto|sendmsg|writev)\(.*= (\d+)$")


def child(kind: str, n: int, reps: int) -> None:
    """Under mpiexec: the collective once, then ``reps`` times between barriers."""
    import numpy as np
    from mpi4py import MPI

    c, p, r = MPI.COMM_WORLD, MPI.COMM_WORLD.size, MPI.COMM_WORLD.rank
    u8 = np.ones(n, np.uint8)
    if kind == "Send":
        buf = np.ones(n, np.uint8)
        fn = (lambda: c.Send(buf, 1, 7)) if r == 0 else (lambda: c.Recv(buf, 0, 7))
        if r > 1:
            fn = lambda: None  # noqa: E731
    elif kind == "Barrier":
        fn = c.Barrier
    elif kind == "Bcast":
        fn = lambda: c.Bcast(u8, 0)  # noqa: E731
    elif kind.startswith("Allreduce"):
        a, b = np.ones(n // 8), np.empty(n // 8)
        op = MPI.Op.Create(_fold, commute=False) if "user" in kind else MPI.SUM
        fn = lambda: c.Allreduce(a, b, op)  # noqa: E731
    elif kind == "Allgather":
        out = np.empty(n * p, np.uint8)
        fn = lambda: c.Allgather(u8, out)  # noqa: E731
    else:  # Alltoallv: n bytes in all, in equal blocks to every other rank
        blk = n // (p - 1)
        s, o = np.ones(blk * p, np.uint8), np.empty(blk * p, np.uint8)
        cnt = [0 if i == r else blk for i in range(p)]
        dsp = [i * blk for i in range(p)]
        fn = lambda: c.Alltoallv([s, (cnt, dsp), MPI.BYTE], [o, (cnt, dsp), MPI.BYTE])  # noqa: E731
    fn()  # connections first
    c.Barrier()
    for _ in range(reps):
        fn()
    c.Barrier()


def _fold(a, b, datatype) -> None:  # a user-defined op, as d2o's agreement records have
    pass


def run(p: int, kind: str, n: int, reps: int) -> list[tuple[int, int]]:
    """Each rank's (messages, payload bytes) written to sockets in one traced run."""
    env = dict(os.environ, MPIR_CVAR_NOLOCAL="1", MPIR_CVAR_CH4_NETMOD="ofi", FI_PROVIDER="tcp")
    mpiexec = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    with tempfile.TemporaryDirectory() as tmp:
        inner = (f"strace -f -qq -o {tmp}/r$PMI_RANK -e trace=sendto,sendmsg,writev "
                 f"{sys.executable} {os.path.abspath(__file__)} --child '{kind}' {n} {reps}")  # fmt: skip
        subprocess.run([mpiexec, "-n", str(p), "sh", "-c", inner], env=env, check=True,
                       capture_output=True, timeout=600)  # fmt: skip
        out = []
        for r in range(p):
            m = b = 0
            with open(f"{tmp}/r{r}") as f:
                for line in f:
                    w = WRITE.search(line)
                    if w and int(w.group(2)) != ACK:
                        m, b = m + 1, b + int(w.group(2)) - HEADER
            out.append((m, b))
        return out


def model(kind: str, model_kind: str, n: int, p: int) -> list[tuple[int, int]]:
    """Each rank's (messages, bytes) of the model's schedule for one call."""
    if model_kind == "Send":
        return [(1, n) if r == 0 else (0, 0) for r in range(p)]
    count = 0 if "user" in kind else None
    rows = []
    for r in range(p):
        sent = [op for op in cm.schedule(model_kind, n, p, r, count=count) if op[0] is not None]
        rows.append((len(sent), sum(op[1] or 0 for op in sent)))
    return rows


def measure(counts: tuple) -> list[dict]:
    rows = []
    for p in counts:
        for kind, model_kind, sizes in CASES:
            for n in sizes:
                base, runs = run(p, kind, n, 0), run(p, kind, n, REPS)
                raw = [((m1 - m0) / REPS, (b1 - b0) / REPS) for (m0, b0), (m1, b1) in zip(base, runs)]  # fmt: skip
                real = [(round(m), round(b)) for m, b in raw]
                want = model(kind, model_kind, n, p)
                alg = "point-to-point" if kind == "Send" else cm.algorithm(
                    model_kind, n * p if model_kind == "Allgather" else n, p,
                    0 if "user" in kind else None)  # fmt: skip
                same = real == want
                rows.append(dict(processes=p, kind=kind, bytes=n, algorithm=alg,
                                 messages=[a[0] for a in real], sent=[a[1] for a in real],
                                 model_messages=[m for m, _ in want],
                                 model_sent=[b for _, b in want], match=same,
                                 raw=raw))  # fmt: skip
                print(f"{'equal' if same else 'DIFFERENT':9} P = {p:2} {kind:20} {n:>8} B "
                      f"{alg:28} messages {sum(a[0] for a in real)} (model "
                      f"{sum(m for m, _ in want)}), bytes {sum(a[1] for a in real)} (model "
                      f"{sum(b for _, b in want)})", flush=True)  # fmt: skip
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--counts", default=",".join(map(str, COUNTS)),
                    help="process counts, comma-separated (default 2,3,4,8,16)")  # fmt: skip
    ap.add_argument("--child", nargs=3, metavar=("KIND", "N", "REPS"), help=argparse.SUPPRESS)
    opts = ap.parse_args()
    if opts.child:
        child(opts.child[0], int(opts.child[1]), int(opts.child[2]))
        return
    if shutil.which("strace") is None:
        sys.exit("bench_wire needs strace (apt install strace); nothing measured")
    counts = tuple(int(c) for c in opts.counts.split(","))
    rows = measure(counts)
    equal = sum(r["match"] for r in rows)
    print(f"\n{equal} of {len(rows)} calls: every rank's messages and bytes equal the model's")
    record(RECORD, {"rows": rows, "equal": equal, "reps": REPS}, processes=counts)


if __name__ == "__main__":
    main()
