"""fetch_reference against a real HTTP server on 127.0.0.1: every failure mode leaves no file behind."""

import gzip
import hashlib
import http.server
import socket
import threading
import time
from collections import Counter

import pytest

from gpualign.download import fetch_reference
from gpualign.errors import InputError

FASTA = b">chr1 test\nACGTACGTNNACGT\nACGT\n>chr2\nGGGGCCCCAAAATTTT\n"
FASTA_GZ = gzip.compress(FASTA)
# Larger than the 1 MiB read size, so the chunk loop and gzip streaming run more than once.
BIG_FASTA = b">big\n" + b"ACGTTGCA" * 8 * 1024 * 400 + b"\n"
CORRUPT_GZ = FASTA_GZ[:12] + bytes(b ^ 0xFF for b in FASTA_GZ[12:30]) + FASTA_GZ[30:]
TRUNCATED_GZ = FASTA_GZ[:-12]
HTML = b"<!DOCTYPE html>\n<html><body>Not Found</body></html>\n"
SLOW_SECONDS = 2.0


class _Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):  # keep pytest output clean
        pass

    def do_GET(self):
        self.server.hits[self.path] += 1
        name = self.path.lstrip("/")
        behaviour = getattr(self, "serve_" + name.replace(".", "_"), None)
        if behaviour is None:
            self.send_error(404, "Not Found")
        else:
            behaviour()

    def _send(self, body, length=None, status=200):
        self.send_response(status)
        self.send_header("Content-Length", str(len(body) if length is None else length))
        self.end_headers()
        self.wfile.write(body)

    def serve_ref_fa(self):
        self._send(FASTA)

    def serve_ref_fa_gz(self):
        self._send(FASTA_GZ)

    def serve_big_fa(self):
        self._send(BIG_FASTA)

    def serve_broken_fa(self):
        self.send_error(500, "Internal Server Error")

    def serve_flaky_fa(self):
        if self.server.hits[self.path] <= 2:
            self.send_error(500, "Internal Server Error")
        else:
            self._send(FASTA)

    def serve_short_fa(self):
        # Promise more than is sent, then close: a client must not accept this as complete.
        self._send(FASTA, length=len(FASTA) + 100)

    def serve_slow_fa(self):
        self.send_response(200)
        self.send_header("Content-Length", str(len(FASTA)))
        self.end_headers()
        self.server.stopping.wait(SLOW_SECONDS)  # teardown wakes this early
        self.wfile.write(FASTA)

    def serve_dropped_fa_gz(self):
        # Chunked body whose chunk is cut off halfway, then the connection closes.
        self.protocol_version = "HTTP/1.1"
        self.send_response(200)
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(b"%x\r\n" % len(FASTA_GZ) + FASTA_GZ[: len(FASTA_GZ) // 2])
        self.close_connection = True

    def serve_page_html(self):
        self._send(HTML)

    def serve_corrupt_fa_gz(self):
        self._send(CORRUPT_GZ)

    def serve_truncated_fa_gz(self):
        self._send(TRUNCATED_GZ)

    def serve_empty_fa(self):
        self._send(b"")


class _Server(http.server.ThreadingHTTPServer):
    def __init__(self):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.hits = Counter()
        self.stopping = threading.Event()

    def handle_error(self, request, client_address):
        pass  # clients hang up on purpose in the timeout tests

    def url(self, name):
        return f"http://127.0.0.1:{self.server_address[1]}/{name}"


@pytest.fixture
def server(monkeypatch):
    for var in ("http_proxy", "https_proxy", "ftp_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
        monkeypatch.delenv(var.upper(), raising=False)
    httpd = _Server()
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    yield httpd
    httpd.stopping.set()
    httpd.shutdown()
    httpd.server_close()  # joins the handler threads
    thread.join()


@pytest.fixture
def dest(tmp_path):
    return tmp_path / "out" / "ref.fa.gz"


def fetch(source, dest, **kwargs):
    kwargs.setdefault("backoff", 0)
    kwargs.setdefault("timeout", 5)
    return fetch_reference(str(source), str(dest), **kwargs)


def assert_failed_cleanly(dest):
    assert not dest.exists()
    leftovers = list(dest.parent.iterdir()) if dest.parent.exists() else []
    assert leftovers == []


def fails(source, dest, match, **kwargs):
    with pytest.raises(InputError, match=match) as caught:
        fetch(source, dest, **kwargs)
    assert_failed_cleanly(dest)
    message = str(caught.value)
    assert "\n" not in message and message.startswith("reference ")
    return message


# --- successes ---------------------------------------------------------------------------


def test_plain_fasta_is_gzipped(server, dest):
    lines = []
    assert fetch(server.url("ref.fa"), dest, log=lines.append) == str(dest)
    data = dest.read_bytes()
    assert data[:2] == b"\x1f\x8b"
    assert gzip.decompress(data) == FASTA
    assert list(dest.parent.iterdir()) == [dest]
    assert any(hashlib.sha256(FASTA).hexdigest() in line for line in lines)


def test_gzip_fasta_is_copied_byte_for_byte(server, dest):
    fetch(server.url("ref.fa.gz"), dest)
    assert dest.read_bytes() == FASTA_GZ


def test_body_larger_than_one_read(server, dest):
    fetch(server.url("big.fa"), dest)
    assert gzip.decompress(dest.read_bytes()) == BIG_FASTA


def test_retry_after_two_500s_gets_the_right_bytes(server, dest):
    lines = []
    fetch(server.url("flaky.fa"), dest, retries=3, log=lines.append)
    assert server.hits["/flaky.fa"] == 3
    assert gzip.decompress(dest.read_bytes()) == FASTA
    assert any("retrying" in line for line in lines)


def test_correct_checksums_of_the_bytes_as_served(server, dest):
    # For a gzip source the checksum is over the gzip bytes, not the decompressed text.
    fetch(server.url("ref.fa.gz"), dest, sha256=hashlib.sha256(FASTA_GZ).hexdigest().upper(),
          md5=hashlib.md5(FASTA_GZ).hexdigest())
    assert dest.read_bytes() == FASTA_GZ


@pytest.mark.parametrize("body", [FASTA, FASTA_GZ], ids=["plain", "gzip"])
@pytest.mark.parametrize("as_url", [True, False], ids=["file-url", "path"])
def test_local_sources(tmp_path, dest, body, as_url):
    src = tmp_path / "src" / "my genome.fa"
    src.parent.mkdir()
    src.write_bytes(body)
    fetch(src.as_uri() if as_url else src, dest, sha256=hashlib.sha256(body).hexdigest())
    assert gzip.decompress(dest.read_bytes()) == FASTA


def test_failure_keeps_an_existing_dest_untouched(server, dest):
    dest.parent.mkdir()
    dest.write_bytes(b"previous")
    with pytest.raises(InputError, match="HTTP 404"):
        fetch(server.url("nothing.fa"), dest)
    assert dest.read_bytes() == b"previous"
    assert list(dest.parent.iterdir()) == [dest]


# --- failures ----------------------------------------------------------------------------


def test_404_is_not_retried(server, dest):
    url = server.url("nothing.fa")
    message = fails(url, dest, "HTTP 404 Not Found", retries=3)
    assert message == f"reference {url}: HTTP 404 Not Found"
    assert server.hits["/nothing.fa"] == 1


def test_500_is_retried_then_fails(server, dest):
    fails(server.url("broken.fa"), dest, r"HTTP 500 .*after 3 attempts", retries=3)
    assert server.hits["/broken.fa"] == 3


def test_short_body_is_retried_then_fails(server, dest):
    fails(server.url("short.fa"), dest, r"closed after \d+ of \d+ bytes .*after 2 attempts", retries=2)
    assert server.hits["/short.fa"] == 2


def test_connection_dropped_mid_file(server, dest):
    fails(server.url("dropped.fa.gz"), dest, "closed mid-body", retries=2)
    assert server.hits["/dropped.fa.gz"] == 2


def test_slow_body_times_out(server, dest):
    start = time.monotonic()
    fails(server.url("slow.fa"), dest, r"timed out after 2 attempts \(timeout 0.5s\)", retries=2, timeout=0.5)
    assert time.monotonic() - start < SLOW_SECONDS
    assert server.hits["/slow.fa"] == 2


def test_connection_refused_is_retried(dest):
    with socket.socket() as sock:  # a port that was just free and has no listener
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    fails(f"http://127.0.0.1:{port}/ref.fa", dest, r"cannot connect .*after 2 attempts", retries=2)


def test_html_is_not_fasta(server, dest):
    fails(server.url("page.html"), dest, r"not a FASTA file \(first line does not start with '>'\)")


@pytest.mark.parametrize("name", ["corrupt.fa.gz", "truncated.fa.gz"])
def test_bad_gzip(server, dest, name):
    fails(server.url(name), dest, "corrupt gzip data")


def test_empty_body(server, dest):
    fails(server.url("empty.fa"), dest, "empty file")


def test_wrong_sha256_names_expected_and_got(server, dest):
    wrong = "0" * 64
    got = hashlib.sha256(FASTA).hexdigest()
    fails(server.url("ref.fa"), dest, f"sha256 mismatch: expected {wrong}, got {got}", sha256=wrong)


def test_wrong_md5(server, dest):
    fails(server.url("ref.fa"), dest, "md5 mismatch", md5="f" * 32,
          sha256=hashlib.sha256(FASTA).hexdigest())


def test_malformed_checksum(tmp_path, dest):
    fails(tmp_path / "whatever.fa", dest, "sha256 must be 64 hex digits", sha256="abc")


def test_missing_local_path(tmp_path, dest):
    missing = tmp_path / "nope.fa"
    assert fails(missing, dest, "no such file") == f"reference {missing}: no such file"
    fails(missing.as_uri(), dest, "no such file")


@pytest.mark.parametrize("source, scheme", [
    ("gopher://example.org/ref.fa", "gopher"),
    ("javascript:alert(1)", "javascript"),
    ("s3://bucket/ref.fa", "s3"),
])
def test_unsupported_scheme(dest, source, scheme):
    fails(source, dest, f"unsupported URL scheme '{scheme}' \\(use http, https, ftp, file or a local path\\)")


def test_credentials_are_not_echoed(dest):
    message = fails("gopher://user:s3cret@example.org/ref.fa", dest, "unsupported URL scheme")
    assert "s3cret" not in message
