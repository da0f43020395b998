"""Hostile bundles, built fast (no gigabytes are ever written): shared by the tests and bench/leaderboard_bombs.py."""

from __future__ import annotations

import tarfile
import zlib

GiB = 1024**3
MiB = 1024**2


def _gzip(parts: list[bytes], repeat_zeros: int = 0, zeros_block: int = 64 * MiB) -> bytes:
    """Gzip of ``parts`` followed by ``repeat_zeros`` blocks of zeros, without compressing each block anew.

    After a full flush deflate restarts from an empty window, so one compressed block of zeros
    can be repeated: the stream inflates to the full size (its trailer is left out; every
    reader under test has refused long before it would look).
    """
    c = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    out = bytearray()
    for p in parts:
        out += c.compress(p)
    out += c.flush(zlib.Z_FULL_FLUSH)
    if repeat_zeros:
        block = c.compress(b"\0" * zeros_block) + c.flush(zlib.Z_FULL_FLUSH)
        out += block * repeat_zeros
    out += c.flush()
    return bytes(out)


def _header(name: str, size: int, kind: bytes = tarfile.REGTYPE) -> bytes:
    info = tarfile.TarInfo(name)
    info.size = size
    info.type = kind
    return info.tobuf(format=tarfile.GNU_FORMAT)


def member_bomb(size: int = 8 * GiB) -> bytes:
    """One member declaring ``size`` bytes of zeros (8 GiB: about 8 MB sent)."""
    return _gzip([_header("attempts/a.json", size)], repeat_zeros=size // (64 * MiB))


def ratio_bomb(members: int = 300, each: int = 30 * MiB) -> bytes:
    """Many members each under the per-member limit, all zeros: only the compression ratio gives it away."""
    c = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    out = bytearray(c.compress(_header("captures/s0.jsonl", each)) + c.flush(zlib.Z_FULL_FLUSH))
    zeros = c.compress(b"\0" * each) + c.flush(zlib.Z_FULL_FLUSH)
    out += zeros
    for i in range(1, members):
        out += c.compress(_header(f"captures/s{i}.jsonl", each)) + c.flush(zlib.Z_FULL_FLUSH)
        out += zeros
    out += c.flush()
    return bytes(out)


def pax_bomb(size: int = 500 * MiB) -> bytes:
    """A pax extended header declaring ``size`` bytes: tarfile would read it whole into memory."""
    return _gzip([_header("././@PaxHeader", size, tarfile.XHDTYPE)], repeat_zeros=size // (64 * MiB) + 1)


def sparse_bundle(real_size: int = 500 * MiB) -> bytes:
    """A GNU sparse member that expands to ``real_size`` bytes from a few hundred bytes sent."""
    hdr = bytearray(_header("attempts/a.json", 0, tarfile.GNUTYPE_SPARSE))
    hdr[386 : 386 + 24] = tarfile.itn(real_size - 1, 12, tarfile.GNU_FORMAT) + tarfile.itn(1, 12, tarfile.GNU_FORMAT)
    hdr[483 : 483 + 12] = tarfile.itn(real_size, 12, tarfile.GNU_FORMAT)
    hdr[124:136] = tarfile.itn(512, 12, tarfile.GNU_FORMAT)  # one block of stored data
    hdr[148:156] = b" " * 8
    chksum = sum(hdr[:512])
    hdr[148:156] = b"%06o\0 " % chksum
    raw = bytes(hdr[:512]) + b"x" + b"\0" * 511 + b"\0" * 1024
    c = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    return c.compress(raw) + c.flush()


ALL = {
    "8 GiB member": member_bomb,
    "ratio bomb (300 x 30 MiB)": ratio_bomb,
    "500 MiB pax header": pax_bomb,
    "500 MiB sparse member": sparse_bundle,
}
