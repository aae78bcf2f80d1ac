"""Reading inputs (gpualign.seqio, through the FASTQ reader): gzip decoded by rapidgzip, isal or zlib,
every decoder failure one clear error, padding after the last member, a file cut short, a path that
cannot be read; and streams.

Streams: `-` (stdin), OS pipes (as `<(...)` gives them, /dev/fd/N) and FIFOs, plain and gzip,
single-end, paired from two streams and interleaved pairs (-p) from one. A slow writer (one record,
a pause, the rest) makes the reader meet short reads: every record must still arrive, in order, and
a stream must be read once (sniffing gzip consumes nothing)."""

import gzip
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from gpualign import fastq as fastq_module
from gpualign.batches import read_interleaved_pairs, read_smart_pairs
from gpualign.errors import InputError
from gpualign.fastq import read_batches
from gpualign.seqio import Input


# ---- gzip files: decoders and their failures ---------------------------------------------------

def test_corrupt_gzip_is_one_clear_error(tmp_path):
    data = gzip.compress(b"@a\nACGT\n+\nIIII\n" * 5000)
    path = tmp_path / "r.fq.gz"
    path.write_bytes(data[:len(data) // 2])
    for threads in (1, 2):
        with pytest.raises(InputError, match=f"reads {path}: corrupt or truncated gzip"):
            list(read_batches(str(path), 8, 100, threads))


def lookback_case():
    """A gzip FASTQ cut short and followed by junk on which isal fails with 'Invalid lookback
    distance' (IsalError, which is no zlib.error or OSError), and the reads it holds."""
    text = b"".join(b"@r%d\nACGTTGCAAC%s\n+\nIIIIIIIIII%s\n" % (i, b"ACGT"[i % 4:i % 4 + 1] * (i % 7), b"I" * (i % 7))
                    for i in range(3000))
    return gzip.compress(text)[:1548] + b"\xcc\x00\xfc\xaa|\xa6"


@pytest.mark.parametrize("decoder", ["isal", "zlib", "rapidgzip"])
@pytest.mark.parametrize("case", ["lookback", "cut", "cut_in_header", "junk_after_end", "short_junk_after_end"])
def test_every_decoder_failure_is_one_clear_error(tmp_path, decoder, case):
    whole = gzip.compress(b"@a\nACGT\n+\nIIII\n" * 20000)
    data = {"lookback": lookback_case(), "cut": whole[:len(whole) * 2 // 3], "cut_in_header": whole[:5],
            "junk_after_end": whole + b"junkjunkjunk", "short_junk_after_end": whole + b"junk"}[case]
    path = tmp_path / "r.fq.gz"
    path.write_bytes(data)
    if case == "short_junk_after_end" and decoder == "rapidgzip":
        # rapidgzip ignores a tail too short for a gzip header after the last member: every read is
        # there, but isal and zlib reject the file; which one reads it depends on its size and -t
        assert sum(len(b) for b in read_batches(str(path), 8, 1000, 2, decoder=decoder)) == 20000
        return
    with pytest.raises(InputError, match=f"^reads {path}: corrupt or truncated gzip data \\(.+\\)$"):
        list(read_batches(str(path), 8, 100, 2, decoder=decoder))


@pytest.mark.parametrize("decoder", ["isal", "zlib", "rapidgzip"])
def test_zeros_after_the_last_member_are_padding(tmp_path, decoder):
    """gzip allows zero bytes after the last member; rapidgzip does not, and isal takes over."""
    path = tmp_path / "r.fq.gz"
    path.write_bytes(gzip.compress(b"@a\nACGT\n+\nIIII\n" * 20000) + bytes(100))
    assert sum(len(b) for b in read_batches(str(path), 8, 1000, 2, decoder=decoder)) == 20000


def test_rapidgzip_cut_short_is_an_error_not_fewer_reads(tmp_path, monkeypatch):
    """rapidgzip ends a truncated file without an error, having given part of it (or nothing): the
    reader checks that it decoded the whole file, through the last member's trailer."""
    monkeypatch.setattr(fastq_module, "PARALLEL_GZIP_MIN", 0)   # threads > 1: rapidgzip
    monkeypatch.setattr(fastq_module, "PARALLEL_GZIP_THREADS", 2)
    text = b"".join(b"@r%d\n%s\n+\n%s\n" % (i, b"ACGT" * (i % 30), b"I" * 4 * (i % 30)) for i in range(20000))
    data = gzip.compress(text[:len(text) // 2]) + gzip.compress(text[len(text) // 2:])
    for cut in (len(data) // 10, len(data) // 2, len(data) - 100, len(data) - 3):
        path = tmp_path / f"cut{cut}.fq.gz"
        path.write_bytes(data[:cut])
        with pytest.raises(InputError, match=f"reads {path}: corrupt or truncated gzip data"):
            list(read_batches(str(path), 8, 1000, threads=2))
    path = tmp_path / "whole.fq.gz"
    path.write_bytes(data)
    assert sum(len(b) for b in read_batches(str(path), 8, 1000, threads=2)) == 20000


def test_a_path_that_cannot_be_read_is_one_line(tmp_path):
    with pytest.raises(InputError, match=f"^reads {tmp_path / 'none.fq'}: no such file$"):
        list(read_batches(str(tmp_path / "none.fq"), 8, 10))
    with pytest.raises(InputError, match=f"^reads {tmp_path}: is a directory$"):
        list(read_batches(str(tmp_path), 8, 10))


# ---- streams: FIFOs, pipes, stdin ---------------------------------------------------------------

PAUSE = 0.3   # seconds the writer waits after its first piece


def fastq_text(names, seq="ACGTACGTTG"):
    return "".join(f"@{n} c:{i}\n{seq}\n+\n{'I' * len(seq)}\n" for i, n in enumerate(names)).encode()


def stream_bytes(text: bytes, gz: bool, cut: str):
    """(bytes, where the writer pauses): after the first record, or after one byte (half the gzip
    magic: the sniffing must wait for the second)."""
    data = gzip.compress(text) if gz else text
    if cut == "byte":
        return data, 1
    first = text.index(b"\n@") + 1
    return data, first if not gz else len(data) // 2


def slow_writer(target, data: bytes, first: int) -> threading.Thread:
    """A thread writing data[:first] to target (a FIFO's path, or a pipe's write end), then after a
    pause the rest, then closing it (the reader's end of input)."""
    def write():
        with (open(target, "wb") if isinstance(target, str) else os.fdopen(target, "wb")) as fh:
            fh.write(data[:first])
            fh.flush()
            time.sleep(PAUSE)
            fh.write(data[first:])
    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    return thread


def names_of(batches):
    return [b.name(i) for b in batches for i in range(len(b))]


@pytest.fixture
def fifo(tmp_path):
    def make(name="reads"):
        path = tmp_path / name
        os.mkfifo(path)
        return str(path)
    return make


STREAMS = [("plain", "record"), ("plain", "byte"), ("gzip", "record"), ("gzip", "byte")]


@pytest.mark.parametrize("kind, cut", STREAMS)
@pytest.mark.parametrize("decoder", [None, "zlib", "rapidgzip"])   # rapidgzip cannot: isal reads a stream
def test_single_end_from_a_slow_fifo(fifo, kind, cut, decoder):
    names = [f"r{i}" for i in range(1000)]
    path = fifo()
    writer = slow_writer(path, *stream_bytes(fastq_text(names), kind == "gzip", cut))
    batches = list(read_batches(path, 8, 64, threads=2, comments=True, decoder=decoder))
    writer.join(5)
    assert names_of(batches) == names
    assert [b.comment(i) for b in batches for i in range(len(b))] == [b"c:%d" % i for i in range(1000)]


@pytest.mark.parametrize("kind, cut", STREAMS)
def test_single_end_from_a_pipe_as_process_substitution_gives_it(kind, cut):
    names = [f"r{i}" for i in range(1000)]
    read_end, write_end = os.pipe()
    try:
        writer = slow_writer(write_end, *stream_bytes(fastq_text(names), kind == "gzip", cut))
        batches = list(read_batches(f"/dev/fd/{read_end}", 8, 64, threads=2))
        writer.join(5)
    finally:
        os.close(read_end)
    assert names_of(batches) == names


def test_a_stream_longer_than_many_blocks_is_read_whole(fifo, monkeypatch):
    """Blocks far smaller than the stream, and than a pipe's buffer: each read of a block meets
    short reads from the pipe, and none of them is taken for the end."""
    monkeypatch.setattr(fastq_module, "READ_BLOCK", 1000)
    names = [f"r{i}" for i in range(5000)]
    path = fifo()
    writer = slow_writer(path, gzip.compress(fastq_text(names)), 7)
    assert names_of(read_batches(path, 8, 300, threads=3)) == names
    writer.join(5)


@pytest.mark.parametrize("kind, cut", STREAMS)
def test_mates_from_two_slow_fifos(fifo, kind, cut):
    names = [f"p{i}" for i in range(700)]
    r1, r2 = fifo("r1"), fifo("r2")
    writers = [slow_writer(r1, *stream_bytes(fastq_text([f"{n}/1" for n in names]), kind == "gzip", cut)),
               slow_writer(r2, *stream_bytes(fastq_text([f"{n}/2" for n in names], "TTGCA"), kind == "gzip", cut))]
    batches = list(read_interleaved_pairs(r1, r2, 8, 64, threads=2))
    for w in writers:
        w.join(5)
    assert names_of(batches) == [n for n in names for _ in range(2)]
    assert all(b.lengths.tolist() == [10, 5] * (len(b) // 2) for b in batches)


@pytest.mark.parametrize("kind, cut", STREAMS)
def test_interleaved_mates_from_one_slow_fifo(fifo, kind, cut, monkeypatch):
    monkeypatch.setattr(fastq_module, "READ_BLOCK", 999)   # blocks that cut between mates
    names = [f"p{i}" for i in range(700)]
    text = b"".join(fastq_text([f"{n}/1"]) + fastq_text([f"{n}/2"], "TTGCA") for n in names)
    path = fifo()
    writer = slow_writer(path, *stream_bytes(text, kind == "gzip", cut))
    batches = list(read_smart_pairs(path, 8, 64, threads=2))
    writer.join(5)
    assert names_of(batches) == [n for n in names for _ in range(2)]
    assert all(b.lengths.tolist() == [10, 5] * (len(b) // 2) for b in batches)


# a reader in a process of its own, with `-` for its input: its stdin is a pipe this test writes to
READER = """
import sys
from gpualign.errors import InputError
from gpualign.batches import read_smart_pairs
from gpualign.fastq import read_batches
from gpualign.seqio import Input
try:
    if sys.argv[1] == "-p":
        batches = read_smart_pairs("-", 8, 64, 2)
    else:
        batches = read_batches("-", 8, 64, 2)
    for b in batches:
        print("\\n".join(b.name(i) for i in range(len(b))))
except InputError as err:
    sys.exit(f"error: {err}")
"""


def run_reader(data: bytes, first: int, mode: str = "single"):
    """(stdout lines, stderr) of READER fed data through its stdin pipe, slowly."""
    with subprocess.Popen([sys.executable, "-c", READER, mode], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        try:
            proc.stdin.write(data[:first])
            proc.stdin.flush()
            time.sleep(PAUSE)
            proc.stdin.write(data[first:])
            proc.stdin.close()
        except BrokenPipeError:   # the reader stopped at an error before the end
            pass
        out, err = proc.stdout.read().decode(), proc.stderr.read().decode()
        proc.wait(60)
    return out.split(), err, proc.returncode


@pytest.mark.parametrize("kind, cut", [("plain", "record"), ("gzip", "byte")])
def test_stdin_is_read_whole(kind, cut):
    names = [f"r{i}" for i in range(1000)]
    out, err, code = run_reader(*stream_bytes(fastq_text(names), kind == "gzip", cut))
    assert code == 0, err
    assert out == names


@pytest.mark.parametrize("kind, cut", [("plain", "record"), ("gzip", "record")])
def test_interleaved_mates_from_stdin(kind, cut):
    names = [f"p{i}" for i in range(500)]
    text = b"".join(fastq_text([f"{n}/1", f"{n}/2"]) for n in names)
    out, err, code = run_reader(*stream_bytes(text, kind == "gzip", cut), mode="-p")
    assert code == 0, err
    assert out == [n for n in names for _ in range(2)]


@pytest.mark.parametrize("data, mode, message", [
    (b"@a\nACGT\n+\nIIII\n@b\nAC\n", "single", "error: reads stdin line 5: truncated FASTQ record"),
    (gzip.compress(fastq_text([f"r{i}" for i in range(3000)]))[:-100], "single",
     "error: reads stdin: corrupt or truncated gzip data"),
    (fastq_text(["a", "a", "b", "c"]), "-p",
     "error: reads stdin record 3 (line 9): 'b' has no mate after it ('c' follows)"),
])
def test_stdin_errors_name_stdin(data, mode, message):
    out, err, code = run_reader(data, 3, mode)
    assert code == 1
    assert err.strip() == err.strip().splitlines()[0] and err.startswith(message), err


def test_an_empty_stream_is_an_empty_file(fifo):
    path = fifo()
    writer = slow_writer(path, b"", 0)
    with pytest.raises(InputError, match=f"reads {path}: empty file"):
        list(read_batches(path, 8, 64))
    writer.join(5)


@pytest.mark.parametrize("threads, size_min, expected", [(1, 0, "isal"), (3, 0, "isal"), (4, 0, "rapidgzip"),
                                                         (16, 1 << 40, "isal")])
def test_rapidgzip_only_for_a_big_file_with_threads_enough(tmp_path, threads, size_min, expected):
    """rapidgzip costs several times isal's CPU a byte: it decodes a file only when the file is big and
    the reader has threads enough to gain from it (each file of a pair has half of them)."""
    path = tmp_path / "r.fq.gz"
    path.write_bytes(gzip.compress(b"@a\nACGT\n+\nIIII\n" * 1000))
    with Input(str(path), "reads", threads, parallel_min=size_min, parallel_threads=4) as fh:
        assert fh.decoder == expected
        assert fh.read() == b"@a\nACGT\n+\nIIII\n" * 1000


@pytest.mark.parametrize("block", [1, 3, 7, 1 << 20])
def test_blocks_of_lines_are_the_file_cut_after_line_ends(tmp_path, rng, block):
    """iter_line_blocks (the reference parser's) gives the file's bytes, plain or gzip, in order, cut
    only after a line end (LF, or CRLF) whatever the block size, the last line with or without its
    end, each block with the number of its first line."""
    import gzip as gz
    from gpualign.seqio import iter_line_blocks
    lines = [rng.choice(np.frombuffer(b"ACGT>N ", dtype=np.uint8), size=int(rng.integers(0, 12))).tobytes()
             for _ in range(40)]
    for ending, last in ((b"\n", b"\n"), (b"\r\n", b""), (b"\n", b"")):
        data = ending.join(lines) + last
        plain, packed = tmp_path / "f.txt", tmp_path / "f.txt.gz"
        plain.write_bytes(data)
        packed.write_bytes(gz.compress(data))
        for path in (plain, packed):
            blocks = list(iter_line_blocks(str(path), "reference", block))
            assert b"".join(text for text, _ in blocks) == data
            assert all(text.endswith(b"\n") for text, _ in blocks[:-1]) and all(text for text, _ in blocks)
            seen = b""
            for text, first in blocks:
                assert first == seen.count(b"\n") + 1
                seen += text


# ---- decoding ahead from a command's start (seqio.decode_early, opened) ----------------------------

def early_reads(key, ahead, sizes):
    """The blocks opened(*key) gives for read sizes `sizes` (the rest by the last size) after
    decode_early(key, ahead) had a moment to read blocks of `ahead` sizes, and the error it ends with."""
    from gpualign import seqio
    seqio.decode_early(key, ahead)
    time.sleep(0.05)
    blocks, error = [], None
    with seqio.opened(*key) as fh:
        try:
            for size in sizes:
                blocks.append(fh.read(size))
            while True:
                block = fh.read(sizes[-1])
                blocks.append(block)
                if not block:
                    break
        except InputError as exc:
            error = str(exc)
    return blocks, error


@pytest.mark.parametrize("kind", ["plain", "gzip"])
def test_an_input_decoded_ahead_gives_the_bytes_of_one_opened_now(tmp_path, rng, kind):
    """Read sizes that cut across the blocks read ahead, or are those blocks; read ahead in part or
    whole: the bytes, the sizes of the reads and the end are those of the same Input read from the start."""
    text = b"".join(b"@r%d\n%s\n+\n%s\n" % (i, b"ACGT" * (i % 40), b"I" * 4 * (i % 40)) for i in range(30000))
    path = tmp_path / ("r.fq.gz" if kind == "gzip" else "r.fq")
    path.write_bytes(gzip.compress(text) if kind == "gzip" else text)
    for ahead in ([], [1000], [len(text) // 3] * 2, [len(text) // 7] * 9, "same"):
        sizes = [int(x) for x in rng.integers(1, 300000, size=int(rng.integers(1, 8)))]
        key = (str(path), "reads", 1, None, 64 << 20, 12)
        got, error = early_reads(key, sizes if ahead == "same" else ahead, sizes)
        with Input(*key) as fh:
            want = [fh.read(size) for size in sizes + [sizes[-1]] * (len(got) - len(sizes))]
        assert error is None
        assert [len(b) for b in got] == [len(b) for b in want], ahead
        assert b"".join(got) == b"".join(want) == text
    assert not [t for t in threading.enumerate() if t.name == "early decode"]


def test_an_error_met_ahead_comes_after_the_bytes_before_it(tmp_path):
    """A gzip file cut short: the bytes decoded before the damage, then the one-line error, as when
    the reader meets it itself."""
    whole = gzip.compress(b"@a\nACGT\n+\nIIII\n" * 200000)
    path = tmp_path / "cut.fq.gz"
    path.write_bytes(whole[:len(whole) * 2 // 3])
    key = (str(path), "reads", 1, None, 64 << 20, 12)
    got, error = early_reads(key, [1 << 16] * 100, [1 << 16])
    assert error is not None and error.startswith(f"reads {path}: corrupt or truncated gzip data")
    want = b""
    with Input(*key) as fh:
        with pytest.raises(InputError):
            while True:
                block = fh.read(1 << 16)
                if not block:
                    break
                want += block
    assert b"".join(got) == want and len(want) > 0


def test_inputs_decoded_ahead_and_not_taken_are_stopped(tmp_path):
    """drop_early stops and closes what no reader took (a command that failed before reading), and an
    input opened with other settings is opened afresh, not from the one read ahead."""
    from gpualign import seqio
    path = tmp_path / "r.fq.gz"
    path.write_bytes(gzip.compress(b"@a\nACGT\n+\nIIII\n" * 300000))
    seqio.decode_early((str(path), "reads", 1, None, 64 << 20, 12), [1 << 20] * 100)
    with seqio.opened(str(path), "reads", 2, None, 64 << 20, 12) as fh:   # other threads: not the early one
        assert isinstance(fh, Input)
    seqio.drop_early()
    assert not [t for t in threading.enumerate() if t.name == "early decode"]
    with seqio.opened(str(path), "reads", 1, None, 64 << 20, 12) as fh:   # dropped: opened afresh
        assert isinstance(fh, Input)


def test_a_decoding_process_gives_the_file_and_stops_with_its_reader(tmp_path, monkeypatch):
    """rapidgzip decodes in a process of its own (DecodingProcess), out of reach of this process's
    GIL: the bytes are the file's, in blocks of the size asked for; a reader that stops early ends
    the process; a process that fails (or cannot start) leaves the file to isal here, which gives the
    same bytes."""
    from gpualign.seqio import DecodingProcess
    text = b"".join(b"@r%d\n%s\n+\n%s\n" % (i, b"ACGT" * (i % 30), b"I" * 4 * (i % 30)) for i in range(20000))
    path = tmp_path / "r.fq.gz"
    path.write_bytes(gzip.compress(text[:1000]) + gzip.compress(text[1000:]))
    with Input(str(path), "reads", 4, decoder="rapidgzip") as fh:
        assert isinstance(fh._fh, DecodingProcess) and fh.decoder == "rapidgzip"
        blocks = [bytes(b) for b in iter(lambda: fh.read(7777), b"")]
        assert fh.decoder == "rapidgzip"   # to the end: isal did not take over
    assert b"".join(blocks) == text and {len(b) for b in blocks[:-1]} == {7777}
    with Input(str(path), "reads", 4, decoder="rapidgzip") as fh:   # sizes that change (a reader's ramp)
        asked = [500, 1000, 4000, 4000, 300, 7777] + [300000] * 10
        blocks = [bytes(fh.read(n)) for n in asked]
        assert fh.decoder == "rapidgzip"
    ends = [i for i, b in enumerate(blocks) if len(b) < asked[i]]   # fewer than asked only at the end
    assert b"".join(blocks) == text and ends and all(not blocks[i] for i in ends[1:])
    assert [len(b) for b in blocks[:ends[0]]] == asked[:ends[0]]
    fh = Input(str(path), "reads", 4, decoder="rapidgzip")
    child = fh._fh._child
    assert bytes(fh.read(100)) == text[:100]
    fh.close()
    assert child.returncode is not None   # stopped and reaped
    with Input(str(path), "reads", 4, decoder="isal") as fh:   # isal: here
        assert not isinstance(fh._fh, DecodingProcess) and fh.read() == text
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-python"))   # the process cannot start
    with Input(str(path), "reads", 4, decoder="rapidgzip") as fh:
        assert fh.decoder == "isal" and bytes(fh.read()) == text
    monkeypatch.setattr(sys, "executable", "/bin/false")   # it starts, gives nothing, and fails
    with Input(str(path), "reads", 4, decoder="rapidgzip") as fh:
        assert isinstance(fh._fh, DecodingProcess)
        assert bytes(fh.read(5000)) == text[:5000] and fh.decoder == "isal"
