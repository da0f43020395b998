"""Reading an untrusted gzipped tar as a bounded stream.

``tarfile.getmembers()`` decompresses the whole archive before anything can be checked, and
tarfile reads pax and GNU long-name headers whole into memory: an 8 MB upload can make a server
inflate gigabytes. Here the gzip stream goes through :class:`_CountingGunzip`, which stops the
moment the output passes the total limit or a compression ratio no real bundle reaches, and
tarfile reads it in stream mode (``r|``), so each member is judged as its header arrives.
"""

from __future__ import annotations

import io
import tarfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from clawgym_env.errors import LeaderboardError

__all__ = ["BundleLimits", "bounded_members"]


@dataclass(frozen=True)
class BundleLimits:
    """Upper bounds a reader enforces, so one submission cannot exhaust the server."""

    max_compressed_bytes: int = 64 * 1024 * 1024
    max_uncompressed_bytes: int = 256 * 1024 * 1024
    max_member_bytes: int = 32 * 1024 * 1024
    max_members: int = 50_000
    max_ratio: float = 100.0
    """Inflated / compressed bytes. Results JSON and captures compress 5-20x; deflate bombs ~1000x."""
    ratio_grace_bytes: int = 4 * 1024 * 1024
    """The ratio is only judged past this much output (a tiny bundle of zeros may compress well)."""
    max_capture_line_bytes: int = 4 * 1024 * 1024
    """One captured model call (a CallRecord line)."""


class _CountingGunzip(io.RawIOBase):
    """A read-only file of the inflated bytes that raises LeaderboardError past the limits."""

    _CHUNK = 64 * 1024

    def __init__(self, data: bytes, limits: BundleLimits) -> None:
        self._data = memoryview(data)
        self._pos = 0
        self._limits = limits
        self._z = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        self._pending = b""
        self.inflated = 0

    def readable(self) -> bool:
        return True

    def readinto(self, b: bytearray | memoryview) -> int:  # type: ignore[override]  # io.RawIOBase's buffer protocol
        want = len(b)
        while not self._pending and (self._pos < len(self._data) or self._z.unconsumed_tail):
            if self._z.eof:
                self._pos -= len(self._z.unused_data)  # where the next gzip member (or padding) starts
                if not bytes(self._data[self._pos : self._pos + 512]).strip(b"\0"):  # padding after the stream
                    self._pos = len(self._data)
                    break
                self._z = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)  # concatenated gzip members
                chunk = bytes(self._data[self._pos : self._pos + self._CHUNK])
                self._pos += len(chunk)
            elif self._z.unconsumed_tail:
                chunk = self._z.unconsumed_tail
            else:
                chunk = bytes(self._data[self._pos : self._pos + self._CHUNK])
                self._pos += len(chunk)
            try:
                self._pending = self._z.decompress(chunk, self._CHUNK)
            except zlib.error as exc:
                raise LeaderboardError(f"bundle is not a gzipped tar archive: {exc}") from None
            self._count(len(self._pending))
        n = min(want, len(self._pending))
        b[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        return n

    def _count(self, n: int) -> None:
        self.inflated += n
        lim = self._limits
        if self.inflated > lim.max_uncompressed_bytes + 1024 * 1024:  # + tar headers and padding
            raise LeaderboardError(f"bundle unpacks to more than {lim.max_uncompressed_bytes} bytes")
        consumed = max(self._pos, 1)
        if self.inflated > lim.ratio_grace_bytes and self.inflated / consumed > lim.max_ratio:
            raise LeaderboardError(
                f"bundle inflates {self.inflated / consumed:.0f}x (more than {lim.max_ratio:g}x): refused as a compression bomb"
            )


class _BoundedInfo(tarfile.TarInfo):
    """Refuses pax and GNU long-name headers over 1 MiB before tarfile reads them whole into memory."""

    _META = (tarfile.XHDTYPE, tarfile.XGLTYPE, tarfile.SOLARIS_XHDTYPE, tarfile.GNUTYPE_LONGNAME, tarfile.GNUTYPE_LONGLINK)

    def _proc_member(self, tarfile_: tarfile.TarFile) -> tarfile.TarInfo:  # the one hook tarfile has before the read
        if self.type in self._META and self.size > 1024 * 1024:
            raise LeaderboardError(f"bundle has an extended tar header of {self.size} bytes; refused (the limit is 1 MiB)")
        return super()._proc_member(tarfile_)  # type: ignore[misc]  # tarfile's private hook, bounded


def bounded_members(
    data: bytes, limits: BundleLimits, check_name: Callable[[str], str | None]
) -> Iterator[tuple[str, Callable[[], bytes]]]:
    """Yield ``(name, read)`` per regular file, in archive order; ``read()`` must be called before the next.

    ``check_name(name)`` returns why a name is refused, or None. Directories are skipped (a
    workspace may hold empty ones); every other kind of member is refused.
    """
    if len(data) > limits.max_compressed_bytes:
        raise LeaderboardError(f"bundle is {len(data)} bytes; the limit is {limits.max_compressed_bytes}")
    if data[:2] != b"\x1f\x8b":
        raise LeaderboardError("bundle is not a gzipped tar archive (no gzip header)")
    stream = _CountingGunzip(data, limits)
    try:
        tar = tarfile.open(fileobj=io.BufferedReader(stream, 64 * 1024), mode="r|", tarinfo=_BoundedInfo)  # noqa: SIM115 - bytes in memory
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise LeaderboardError(f"bundle is not a gzipped tar archive: {exc}") from None
    count = total = 0
    seen: set[str] = set()
    try:
        for m in tar:
            count += 1
            if count > limits.max_members:
                raise LeaderboardError(f"bundle has more than {limits.max_members} members")
            if m.isdir() and m.name.startswith("workspaces/"):
                continue
            if not m.isfile() or m.issparse():
                kind = "a sparse file" if m.issparse() else "not a regular file"
                raise LeaderboardError(f"bundle member {m.name!r} is {kind} (links, devices and sparse files are refused)")
            why = check_name(m.name)
            if why:
                raise LeaderboardError(f"bundle member {m.name!r} is not allowed: {why}")
            if m.name in seen:
                raise LeaderboardError(f"bundle member {m.name!r} appears twice")
            seen.add(m.name)
            if m.size > limits.max_member_bytes:
                raise LeaderboardError(f"bundle member {m.name!r} is {m.size} bytes; the limit per member is {limits.max_member_bytes}")
            total += m.size
            if total > limits.max_uncompressed_bytes:
                raise LeaderboardError(f"bundle unpacks to more than {limits.max_uncompressed_bytes} bytes")
            yield m.name, _reader(tar, m)
    except (tarfile.TarError, EOFError) as exc:
        raise LeaderboardError(f"bundle is not a gzipped tar archive: {exc}") from None
    except OSError as exc:
        raise LeaderboardError(f"bundle is not a readable gzipped tar archive: {exc}") from None


def _reader(tar: tarfile.TarFile, m: tarfile.TarInfo) -> Callable[[], bytes]:
    def read() -> bytes:
        fh = tar.extractfile(m)
        raw = fh.read(m.size + 1) if fh else b""
        if len(raw) != m.size:
            raise LeaderboardError(f"bundle member {m.name!r} is truncated")
        return raw

    return read
