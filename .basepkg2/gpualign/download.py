"""Fetch a reference FASTA named by URL or local path into a verified, gzip-compressed file.

The result appears at `dest` only once it is complete, matches any checksum the user gave,
and decompresses to something that starts like FASTA; otherwise an InputError names the
source and the problem, and `dest` is left as it was.
"""

import contextlib
import ftplib
import gzip
import hashlib
import http.client
import os
import secrets
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
import zlib
from dataclasses import dataclass

from .errors import InputError

_URL_SCHEMES = ("http", "https", "ftp")
_GZIP_MAGIC = b"\x1f\x8b"
_CHUNK = 1 << 20
_PROGRESS_EVERY = 256 << 20  # log a progress line per 256 MiB so big genomes show life
_USER_AGENT = "gpualign-fetch-reference"
# Failures that another attempt cannot fix: a bad certificate or an FTP "550 no such file".
_PERMANENT_URL_REASONS = (ssl.SSLCertVerificationError, ftplib.error_perm)


class _Transient(Exception):
    """A failure worth another attempt (network trouble, HTTP 5xx, a body cut short)."""

    def __init__(self, problem: str, timed_out: bool = False):
        super().__init__(problem)
        self.timed_out = timed_out


@dataclass
class _Fetched:
    size: int
    sha256: str
    md5: str


def fetch_reference(source: str, dest: str, sha256: str | None = None, md5: str | None = None,
                    retries: int = 3, timeout: float = 60.0, backoff: float = 1.0, log=None) -> str:
    """Fetch `source` (http/https/ftp/file URL or local path, plain or gzip FASTA) to `dest` as .fa.gz.

    `sha256`/`md5` are hex digests of the bytes as served. `retries` is the total number of
    attempts for transient network failures; attempt n+1 waits `backoff * 2**n` seconds.
    Returns `dest`. Raises InputError with a one-line message on any failure.
    """
    where = f"reference {_redact(source)}"
    say = log or (lambda _line: None)
    want = {"sha256": _expected_digest(where, "sha256", sha256, 64),
            "md5": _expected_digest(where, "md5", md5, 32)}
    path = _local_path(where, source)
    parent = os.path.dirname(os.path.abspath(dest))
    # The temp file sits beside dest so the final os.replace is an atomic rename, never a copy.
    tmp = os.path.join(parent, f".{os.path.basename(dest)}.tmp.{os.getpid()}.{secrets.token_hex(4)}")
    try:
        os.makedirs(parent, exist_ok=True)
        fetched = _fetch_with_retries(where, source, path, tmp, max(1, retries), timeout, backoff, say)
        _check_digests(where, want, fetched)
        _check_fasta(where, tmp, fetched.size)
        os.replace(tmp, dest)
    except BaseException as err:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        if isinstance(err, OSError):  # e.g. disk full or an unwritable dest: still one clear line
            raise InputError(f"{where}: I/O error while fetching to {dest} ({err})") from err
        raise
    say(f"{where}: wrote {dest} ({fetched.size} bytes fetched, sha256 {fetched.sha256})")
    return dest


def _redact(source: str) -> str:
    """Hide any user:password in the URL, since error messages end up in shared logs."""
    parts = urllib.parse.urlsplit(source)
    if "@" not in parts.netloc:
        return source
    return urllib.parse.urlunsplit(parts._replace(netloc="***@" + parts.netloc.rpartition("@")[2]))


def _expected_digest(where: str, name: str, value: str | None, length: int) -> str | None:
    """Normalise a user-given digest; reject a malformed one now rather than report a 'mismatch'."""
    if not value:
        return None
    value = value.strip().lower()
    if len(value) != length or any(c not in "0123456789abcdef" for c in value):
        raise InputError(f"{where}: {name} must be {length} hex digits, got {value!r}")
    return value


def _local_path(where: str, source: str) -> str | None:
    """The filesystem path for a file:// URL or plain path; None for a network URL."""
    parts = urllib.parse.urlsplit(source)
    scheme = parts.scheme.lower()
    if scheme in _URL_SCHEMES:
        return None
    if scheme == "file":
        if parts.netloc not in ("", "localhost"):
            raise InputError(f"{where}: file URL names a remote host {parts.netloc!r}")
        return urllib.request.url2pathname(parts.path)
    # A colon in a real file name looks like a scheme; an existing file wins.
    if not scheme or os.path.exists(source):
        return source
    raise InputError(f"{where}: unsupported URL scheme {scheme!r} (use http, https, ftp, file or a local path)")


def _fetch_with_retries(where, source, path, tmp, attempts, timeout, backoff, say) -> _Fetched:
    for attempt in range(attempts):
        say(f"{where}: attempt {attempt + 1}/{attempts}")
        try:
            return _fetch_once(where, source, path, tmp, timeout, say)
        except _Transient as err:
            failure = err
            if attempt + 1 < attempts:
                delay = backoff * 2 ** attempt
                say(f"{where}: attempt {attempt + 1}/{attempts} failed ({err}); retrying in {delay:g}s")
                time.sleep(delay)
    if failure.timed_out:
        raise InputError(f"{where}: timed out after {attempts} attempts (timeout {timeout:g}s)")
    raise InputError(f"{where}: {failure} (gave up after {attempts} attempts)")


def _fetch_once(where, source, path, tmp, timeout, say) -> _Fetched:
    """One attempt: stream the source into tmp, sorting errors into transient and final."""
    if path is not None:
        try:
            stream = open(path, "rb")
        except FileNotFoundError:
            raise InputError(f"{where}: no such file") from None
        except IsADirectoryError:
            raise InputError(f"{where}: is a directory, not a file") from None
        except OSError as err:
            raise InputError(f"{where}: cannot read ({err.strerror or err})") from None
        with stream:
            return _copy(stream, None, tmp, where, say)
    request = urllib.request.Request(source, headers={"User-Agent": _USER_AGENT})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return _copy(response, _content_length(response), tmp, where, say)
    except urllib.error.HTTPError as err:
        err.close()  # the error carries the open response; leaving it open leaks the socket
        problem = f"HTTP {err.code} {err.reason}"
        if err.code >= 500:
            raise _Transient(problem) from None
        raise InputError(f"{where}: {problem}") from None
    except urllib.error.URLError as err:
        if isinstance(err.reason, TimeoutError):
            raise _Transient("timed out", timed_out=True) from None
        if isinstance(err.reason, _PERMANENT_URL_REASONS):
            raise InputError(f"{where}: {err.reason}") from None
        raise _Transient(f"cannot connect ({err.reason})") from None
    except TimeoutError:
        raise _Transient("timed out", timed_out=True) from None
    except (ConnectionError, http.client.HTTPException) as err:
        raise _Transient(f"connection failed ({type(err).__name__}: {err})") from None


def _content_length(response) -> int | None:
    """The promised body size, so a connection closed early is caught rather than accepted."""
    if response.headers.get("Transfer-Encoding", "").lower() == "chunked":
        return None  # http.client itself raises IncompleteRead on a cut chunked body
    try:
        return int(response.headers.get("Content-Length", ""))
    except ValueError:
        return None


def _copy(stream, length, tmp, where, say) -> _Fetched:
    """Stream source bytes into tmp as gzip, hashing the bytes exactly as they arrive."""
    sha, md5 = hashlib.sha256(), hashlib.md5(usedforsecurity=False)
    size = 0
    with open(tmp, "wb") as out:
        head = _read_head(stream)
        # A gzip source (bgzip included) is kept byte for byte; anything else we compress.
        sink = contextlib.nullcontext(out) if head[:2] == _GZIP_MAGIC else _gzip_writer(out)
        with sink as writer:
            chunk = head
            while chunk:
                sha.update(chunk)
                md5.update(chunk)
                writer.write(chunk)
                size += len(chunk)
                if size // _PROGRESS_EVERY != (size - len(chunk)) // _PROGRESS_EVERY:
                    say(f"{where}: {size >> 20} MiB received")
                chunk = _read_chunk(stream)
    if length is not None and size < length:
        raise _Transient(f"connection closed after {size} of {length} bytes")
    return _Fetched(size, sha.hexdigest(), md5.hexdigest())


def _read_chunk(stream) -> bytes:
    try:
        return stream.read(_CHUNK)
    except http.client.IncompleteRead:  # a chunked body cut off part-way
        raise _Transient("connection closed mid-body") from None


def _read_head(stream) -> bytes:
    """At least two bytes (unless the source is shorter), enough to spot the gzip magic."""
    head = b""
    while len(head) < 2:
        more = _read_chunk(stream)
        if not more:
            break
        head += more
    return head


def _gzip_writer(out):
    # mtime=0 and no file name in the header make the output depend only on the input.
    return gzip.GzipFile(filename="", mode="wb", fileobj=out, compresslevel=6, mtime=0)


def _check_digests(where: str, want: dict, fetched: _Fetched) -> None:
    for name, expected in want.items():
        got = getattr(fetched, name)
        if expected is not None and expected != got:
            raise InputError(f"{where}: {name} mismatch: expected {expected}, got {got}")


def _check_fasta(where: str, tmp: str, size: int) -> None:
    """Decompress the whole file once: checks gzip integrity (CRC, truncation) and the FASTA header."""
    if size == 0:
        raise InputError(f"{where}: empty file")
    try:
        with gzip.open(tmp, "rb") as text:
            first = _first_visible_byte(text)
            if first is None:
                raise InputError(f"{where}: empty file (no sequence data)")
            if first != b">":
                raise InputError(f"{where}: not a FASTA file (first line does not start with '>')")
            while text.read(_CHUNK):
                pass
    except (gzip.BadGzipFile, EOFError, zlib.error) as err:
        raise InputError(f"{where}: corrupt gzip data ({err})") from None


def _first_visible_byte(stream) -> bytes | None:
    """The first non-whitespace byte, i.e. the start of the first non-blank line, read in chunks."""
    while chunk := stream.read(_CHUNK):
        visible = chunk.lstrip()
        if visible:
            return visible[:1]
    return None
