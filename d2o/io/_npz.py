"""``.npz`` archives: numpy's ``savez``/``savez_compressed`` of distributed arrays, written
in parallel without gathering.

An ``.npz`` file is a zip archive of ``.npy`` members.  A distributed array's member is
the ``.npy`` header (rank 0) followed by the array's bytes in global C order; with the
array in row slabs (`row_layout`: redistributed first when it is cut along other axes or
on a process mesh) every rank's bytes are one run of that stream, in rank order.  Every
rank computes the CRC-32 of its run (and, compressed, deflates it into a piece of one raw
deflate stream: every rank but the last ends its piece with a full flush, byte-aligned and
not final, the last rank always ends the stream), one allgather per member shares the
sizes and CRCs, the member's CRC is combined from them in rank order (`crc32_combine`),
rank 0 writes the local headers and the central directory, and every rank writes its run
at its offset (collective MPI-IO; plain file I/O without MPI).  ZIP64 fields are written
when a size or offset reaches `ZIP64_LIMIT`.  Numpy arrays and scalars are written by
rank 0 alone.
"""

from __future__ import annotations

import struct
import time
import zlib
from typing import Any

import numpy as np

from ..array.align import align
from ..array.base import Array as D2O
from ..core.comm import Comm
from ..core.mpiio import ArrayFile
from . import _common
from ._common import (
    check_path,
    check_writable,
    commit,
    remove,
    replace_path,
    row_layout,
    same_path,
    temp_name,
)
from ._npy import header_bytes

__all__ = ["savez", "crc32_combine"]

#: Sizes and offsets from this on (4 GiB - 1, the 32-bit fields' marker) are written as
#: ZIP64 fields (tests lower it).
ZIP64_LIMIT = 0xFFFFFFFF
#: Member counts from this on need the ZIP64 end of central directory.
ZIP_MAX_MEMBERS = 0xFFFF
_DEFLATED = 8  # the zip compression method of deflate

# -- CRC-32 combination (GF(2) polynomial arithmetic, reflected bit order) ---------------
_POLY = 0xEDB88320  # the CRC-32 polynomial, reflected


def _mult_mod_p(a: int, b: int) -> int:
    """``a(x) * b(x) mod p(x)`` over GF(2); bit 31 holds x^0 (reflected)."""
    prod = 0
    m = 1 << 31
    while m and a:
        if a & m:
            prod ^= b
            a ^= m
        m >>= 1
        b = (b >> 1) ^ _POLY if b & 1 else b >> 1
    return prod


def _powers() -> list[int]:
    """``x^(2^k) mod p`` for k = 0..31."""
    out = [1 << 30]  # x^1
    for _ in range(31):
        out.append(_mult_mod_p(out[-1], out[-1]))
    return out


_X2N = _powers()


def _x8n_mod_p(n: int) -> int:
    """``x^(8 n) mod p``: the factor that shifts a CRC past ``n`` zero bytes."""
    prod = 1 << 31  # x^0
    k = 3  # x^(8 n) = x^(2^3 n)
    while n:
        if n & 1:
            prod = _mult_mod_p(_X2N[k % 32], prod)
        n >>= 1
        k += 1
    return prod


def crc32_combine(crc1: int, crc2: int, len2: int) -> int:
    """The CRC-32 of ``A + B`` from ``crc1 = zlib.crc32(A)``, ``crc2 = zlib.crc32(B)`` and
    ``len2 = len(B)`` (zlib's ``crc32_combine``); local, O(log len2) steps."""
    if len2 <= 0:
        return crc1
    return _mult_mod_p(_x8n_mod_p(len2), crc1) ^ crc2


# -- savez --------------------------------------------------------------------------------
def savez(comm: Comm, file: Any, args: tuple, kwds: dict, compress: bool,
          allow_pickle: bool = True) -> None:  # fmt: skip
    """Collective: numpy's ``savez`` (``compress``: ``savez_compressed``) of numpy and
    distributed arrays to the path ``file`` (``.npz`` appended when missing), no gather.

    Notes
    -----
    Communication: per distributed array cut along other axes than its first (or on a
    process mesh), one redistribution to row slabs; per member one allgather of
    (size, compressed size, CRC-32); error agreements, collective MPI-IO writes of every
    rank's own bytes, and the final rename by rank 0.  Memory: a rank's own part (and its
    compressed copy).  Numpy arrays and scalars are serialised by rank 0 alone.
    """
    path = check_path(file)
    if not path.endswith(".npz"):
        path += ".npz"
    named = dict(kwds)
    for i, val in enumerate(args):
        key = "arr_%d" % i
        if key in named:
            raise ValueError(f"Cannot use un-named variables and keyword {key}")
        named[key] = val
    for key, val in named.items():
        if isinstance(val, D2O) and val.dtype.hasobject:
            raise ValueError(
                f"cannot write the distributed object array {key!r} (dtype {val.dtype}) "
                "to an .npz archive"
            )
    tmp, error = None, None
    try:
        check_writable(path)
        if comm.rank == 0:
            tmp = temp_name(path)
    except Exception as exc:
        error = exc
    same_path(comm, error, None if error else path)
    tmp = comm.bcast(tmp, 0)
    error = None
    writer = None
    try:
        writer = _Writer(comm, tmp)
    except Exception as exc:
        error = exc
    # any rank failed (one allgather per step): the others go on with the collectives
    # without writing, and `commit` raises the failing rank's error everywhere
    failed = any(comm.allgather(error is not None))
    for key, val in () if failed else named.items():
        raw, err = _member_bytes(comm, val, allow_pickle)
        error = error or err
        data, crc, err = _encode(comm, raw, compress)
        error = error or err
        del raw
        parts = comm.allgather((len(data[1]) if data else 0, crc, data[0] if data else 0,
                                error is not None))  # fmt: skip
        failed = failed or any(p[3] for p in parts)
        if failed:
            continue
        assert writer is not None and data is not None
        try:
            writer.member(key, data[1], parts, compress)
        except Exception as exc:
            error = exc
            failed = True  # MPI-IO writes are collective: an error there is everywhere
    if writer is not None:
        try:
            writer.finish(not failed)
        except Exception as exc:
            error = error or exc
    commit(comm, error, lambda: remove(tmp), lambda: replace_path(tmp, path))


def _member_bytes(comm: Comm, val: Any, allow_pickle: bool) -> tuple[Any, Any]:
    """This rank's run of a member's ``.npy`` bytes (rank 0's starts with the header), and
    this rank's error.  Collective for distributed arrays (a redistribution to row slabs
    when needed)."""
    if isinstance(val, D2O):
        rows = row_layout(val)
        local = np.asarray(align(val, rows)) if rows is not val.distributor else val.data
        if rows.replicated and comm.rank:
            local = local.reshape(-1)[:0]
        flat: Any = np.ascontiguousarray(local).reshape(-1).view(np.uint8)
        run = memoryview(flat)
        if comm.rank:
            return run, None
        return header_bytes(val.shape, val.dtype) + bytes(run), None
    if comm.rank:
        return b"", None
    try:
        buf = _Buffer()
        np.lib.format.write_array(buf, np.asanyarray(val), allow_pickle=allow_pickle)
        return b"".join(buf.parts), None
    except Exception as exc:
        return b"", exc


class _Buffer:
    """A write-only file object that keeps what numpy writes (no seeking)."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def write(self, data: Any) -> int:
        b = bytes(data)
        self.parts.append(b)
        return len(b)


def _encode(comm: Comm, raw: Any, compress: bool) -> tuple[Any, int, Any]:
    """((uncompressed length, stored bytes), CRC-32 of ``raw``, error) of this rank's run;
    compressed: a piece of one raw deflate stream, the last rank's ending it."""
    try:
        crc = zlib.crc32(raw)
        if not compress:
            return (len(raw), raw), crc, None
        last = comm.rank == comm.size - 1
        if not len(raw) and not last:
            return (0, b""), crc, None
        z = zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION, zlib.DEFLATED, -15)
        out = z.compress(raw) + z.flush(zlib.Z_FINISH if last else zlib.Z_FULL_FLUSH)
        return (len(raw), out), crc, None
    except Exception as exc:
        return None, 0, exc


def _dos_time() -> tuple[int, int]:
    t = time.localtime(time.time())
    date = (max(t.tm_year, 1980) - 1980) << 9 | t.tm_mon << 5 | t.tm_mday
    return date, t.tm_hour << 11 | t.tm_min << 5 | t.tm_sec // 2


class _Writer:
    """The archive being written: the open file, the offset reached and (rank 0) the
    central directory entries."""

    def __init__(self, comm: Comm, tmp: str) -> None:
        self.comm = comm
        self.offset = 0
        self.entries: list[bytes] = []
        self.count = 0
        self.date, self.time = _dos_time()
        if comm.mpi is None:
            self.fh: Any = open(tmp, "wb")
            self.mpi: Any = None
        else:
            self.fh = None
            self.mpi = ArrayFile(comm, tmp, "w")

    def member(self, key: str, data: Any, parts: list, compress: bool) -> None:
        """Collective: write one member; ``parts`` holds every rank's
        (stored length, CRC, uncompressed length, failed)."""
        usize = sum(p[2] for p in parts)
        csize = sum(p[0] for p in parts)
        crc = 0
        for _, c, u, _ in parts:
            crc = crc32_combine(crc, c, u)
        name = key + ".npy"
        local, central = _headers(name, usize, csize, crc, self.offset, compress,
                                  self.date, self.time)  # fmt: skip
        self.count += 1
        mine = (local + bytes(data)) if self.comm.rank == 0 else data
        counts = [p[0] for p in parts]
        counts[0] += len(local)
        self._write(mine, counts)
        if self.comm.rank == 0:
            self.entries.append(central)

    def _write(self, mine: Any, counts: list[int]) -> None:
        """Collective: every rank's ``mine`` at the exclusive prefix of ``counts``."""
        start = sum(counts[: self.comm.rank])
        total = sum(counts)
        if self.mpi is None:
            self.fh.write(mine)
        else:
            buf = np.frombuffer(mine, dtype=np.uint8) if len(mine) else np.empty(0, np.uint8)
            box = ((start, start + len(mine)),) if len(mine) else None
            self.mpi.view(self.offset, 1, (max(total, 1),), box, fortran=False)
            block = max(1, _common.BUFFER_BYTES)
            rounds = max(-(-n // block) for n in counts)
            for i in range(rounds):
                lo, hi = min(len(buf), i * block), min(len(buf), (i + 1) * block)
                self.mpi.write_all(lo, buf[lo:hi])
        self.offset += total

    def finish(self, ok: bool) -> None:
        """Collective: rank 0 writes the central directory and its end; close the file."""
        try:
            if ok:
                tail = b""
                if self.comm.rank == 0:
                    tail = _end(self.entries, self.count, self.offset)
                n = self.comm.bcast(len(tail), 0) if self.mpi is not None else len(tail)
                self._write(tail, [n] + [0] * (self.comm.size - 1))
        finally:
            if self.mpi is not None:
                self.mpi.close()
            else:
                self.fh.close()


def _headers(name: str, usize: int, csize: int, crc: int, offset: int, compress: bool,
             date: int, dtime: int) -> tuple[bytes, bytes]:  # fmt: skip
    """The local file header and the central directory entry of one member."""
    try:
        fname, flags = name.encode("ascii"), 0
    except UnicodeEncodeError:
        fname, flags = name.encode("utf-8"), 0x800
    method = _DEFLATED if compress else 0
    big = usize >= ZIP64_LIMIT or csize >= ZIP64_LIMIT
    version = 45 if big or offset >= ZIP64_LIMIT else 20
    extra = struct.pack("<HHQQ", 1, 16, usize, csize) if big else b""
    u32, c32 = (0xFFFFFFFF, 0xFFFFFFFF) if big else (usize, csize)
    local = struct.pack("<4sHHHHHIIIHH", b"PK\x03\x04", version, flags, method, dtime, date,
                        crc, c32, u32, len(fname), len(extra)) + fname + extra  # fmt: skip
    fields, cu, cc, co = [], usize, csize, offset
    if usize >= ZIP64_LIMIT:
        fields.append(usize)
        cu = 0xFFFFFFFF
    if csize >= ZIP64_LIMIT:
        fields.append(csize)
        cc = 0xFFFFFFFF
    if offset >= ZIP64_LIMIT:
        fields.append(offset)
        co = 0xFFFFFFFF
    cextra = struct.pack("<HH", 1, 8 * len(fields)) + struct.pack("<%dQ" % len(fields), *fields)
    cextra = cextra if fields else b""
    central = struct.pack("<4sBBHHHHHIIIHHHHHII", b"PK\x01\x02", version, 3, version, flags,
                          method, dtime, date, crc, cc, cu, len(fname), len(cextra), 0, 0, 0,
                          0o600 << 16, co) + fname + cextra  # fmt: skip
    return local, central


def _end(entries: list[bytes], count: int, offset: int) -> bytes:
    """The central directory at ``offset`` and its end record (ZIP64 when needed)."""
    cd = b"".join(entries)
    size = len(cd)
    out = [cd]
    if count >= ZIP_MAX_MEMBERS or size >= ZIP64_LIMIT or offset >= ZIP64_LIMIT:
        eocd64 = offset + size
        out.append(struct.pack("<4sQHHIIQQQQ", b"PK\x06\x06", 44, 45, 45, 0, 0, count, count,
                               size, offset))  # fmt: skip
        out.append(struct.pack("<4sIQI", b"PK\x06\x07", 0, eocd64, 1))
        n16, size32, off32 = 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF
    else:
        n16, size32, off32 = count, size, offset
    out.append(struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, n16, n16, size32, off32, 0))
    return b"".join(out)
