"""Opening plain or gzip text inputs, with a clear error for unreadable ones."""

import gzip
import os
import zlib

from .errors import InputError

try:  # isal decodes gzip about twice as fast as zlib; optional
    from isal import igzip as _gzip
except ImportError:  # pragma: no cover - isal is in the pinned env, zlib is the fallback
    _gzip = gzip


def is_gzip(path: str) -> bool:
    with open(path, "rb") as fh:
        return fh.read(2) == b"\x1f\x8b"


def read_bytes(path: str, what: str) -> bytes:
    """The whole (decompressed) content of a plain or gzip file."""
    if not os.path.exists(path):
        raise InputError(f"{what} {path}: no such file")
    if os.path.isdir(path):
        raise InputError(f"{what} {path}: is a directory")
    try:
        if is_gzip(path):
            with _gzip.open(path, "rb") as fh:
                return fh.read()
        with open(path, "rb") as fh:
            return fh.read()
    except (OSError, EOFError, zlib.error, ValueError) as exc:
        raise InputError(f"{what} {path}: corrupt or truncated gzip data ({exc})") from None


def split_lines(data: bytes) -> list:
    """Lines without their ends; CRLF is accepted as a line end."""
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    if b"\r" in data:
        lines = [ln[:-1] if ln.endswith(b"\r") else ln for ln in lines]
    return lines


__all__ = ["is_gzip", "read_bytes", "split_lines"]
