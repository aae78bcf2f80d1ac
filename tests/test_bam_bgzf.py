"""bam/bgzf.py: BamWriter's file is BGZF as the SAM specification (section 4.1) lays it out, read
back by Python's gzip and by htslib (pysam): gzip members with the BC extra field, none over
64 KiB, the stream cut every BGZF_INPUT bytes (the index's virtual offsets count on it), the
writer's `block_starts` the real compressed offsets of its blocks, the 28-byte EOF marker last.
Written in random pieces, at zlib's and ISA-L's levels, on one thread and several; `close`,
`abort` and an error inside `with` leave no compression thread running. Random inputs come from
the seeded `rng`."""

import gzip
import struct
import threading
import zlib

import numpy as np
import pysam
import pytest
from pysam.libcbgzf import BGZFile

from gpualign.bam import bgzf, deflate
from gpualign.bam.bgzf import BamWriter, header_bytes

from helpers import bam_record_bytes, random_alignments

# the empty block that ends every BGZF file (SAM specification, section 4.1.2), written out here
# rather than taken from the module under test
EOF_MARKER = bytes.fromhex("1f8b08040000000000ff0600424302001b0003000000000000000000")
FIXED_HEADER = EOF_MARKER[:16]   # every block's first 16 bytes: gzip's with MTIME 0, OS 255, the BC subfield
HEADER = pysam.AlignmentHeader.from_dict({
    "HD": {"VN": "1.6", "SO": "unsorted"},
    "SQ": [{"SN": "c0", "LN": 60_000}, {"SN": "c1", "LN": 3_000}]})


def blocks_of(data: bytes) -> list:
    """(offset, uncompressed bytes) of each BGZF block of a file, each checked as the specification
    lays it out: a gzip member (FLG.FEXTRA) whose one extra subfield, BC, holds the block's size
    minus 1, then raw deflate data, the CRC32 and the uncompressed size."""
    out, o = [], 0
    while o < len(data):
        id1, id2, cm, flg, _mtime, _xfl, _os, xlen = struct.unpack_from("<BBBBIBBH", data, o)
        assert (id1, id2, cm, flg, xlen) == (31, 139, 8, 4, 6), o
        si1, si2, slen, bsize = struct.unpack_from("<BBHH", data, o + 12)
        assert (si1, si2, slen) == (ord("B"), ord("C"), 2), o
        size = bsize + 1
        assert size <= 1 << 16 and o + size <= len(data), o
        inflate = zlib.decompressobj(wbits=-15)
        payload = inflate.decompress(data[o + 18:o + size - 8])
        assert inflate.eof and inflate.unused_data == b"", o   # one whole deflate stream, nothing after it
        crc, isize = struct.unpack_from("<II", data, o + size - 8)
        assert isize == len(payload) <= 1 << 16 and crc == zlib.crc32(payload), o
        out.append((o, payload))
        o += size
    return out


def pieces(rng, data: np.ndarray, n: int) -> list:
    """data cut into n consecutive pieces of random sizes (some empty)."""
    edges = sorted(rng.integers(0, len(data) + 1, size=n - 1).tolist())
    return [data[a:b] for a, b in zip([0, *edges], [*edges, len(data)])]


def new_threads(before) -> list:
    return [t for t in threading.enumerate() if t not in before]


@pytest.mark.parametrize("block_input", [bgzf.BGZF_INPUT, 997])
@pytest.mark.parametrize("level, threads", [(1, 1), (1, 3), (6, 3)])
@pytest.mark.parametrize("size", ["random", "whole blocks"])
def test_blocks_are_bgzf_and_block_starts_their_offsets(tmp_path, rng, monkeypatch, block_input, level, threads,
                                                        size):
    monkeypatch.setattr(bgzf, "BGZF_INPUT", block_input)
    header = header_bytes(HEADER)
    blocks = int(rng.integers(20, 40))
    n = blocks * block_input - len(header) if size == "whole blocks" else int(rng.integers(blocks * block_input))
    data = rng.integers(0, 256, size=n, dtype=np.uint8)   # incompressible: the largest deflated blocks
    path = tmp_path / "out.bam"
    with BamWriter(str(path), HEADER, level=level, threads=threads) as out:
        for piece in pieces(rng, data, 12):
            out.write(piece)
    raw = path.read_bytes()
    found = blocks_of(raw)
    # the EOF marker closes the file, and block_starts are where every block begins, the marker's
    # offset last (where a virtual offset of the stream's end points)
    assert raw.endswith(EOF_MARKER) and found[-1] == (len(raw) - len(EOF_MARKER), b"")
    assert out.block_starts == [o for o, _ in found]
    # the stream (header, then the data) cut every BGZF_INPUT bytes, the last block holding the rest
    stream = header + data.tobytes()
    whole, rest = divmod(len(stream), block_input)
    assert [len(p) for _, p in found[:-1]] == [block_input] * whole + ([rest] if rest else [])
    assert b"".join(p for _, p in found) == stream
    assert out.header_size == len(header)
    # and read back whole by Python's gzip and by htslib
    assert gzip.decompress(raw) == stream
    with BGZFile(str(path), "rb") as fh:
        assert fh.read() == stream


@pytest.mark.parametrize("threads", [1, 3])
def test_records_are_read_back_by_htslib_at_their_virtual_offsets(tmp_path, rng, monkeypatch, threads):
    """pysam reads the records back, and tell() before each one is the virtual offset that
    block_starts give for its place in the stream (as the index computes it)."""
    monkeypatch.setattr(bgzf, "BGZF_INPUT", 997)   # records across block edges
    segments = random_alignments(rng, HEADER, 400)
    buf, offsets = bam_record_bytes(HEADER, segments, tmp_path)
    path = str(tmp_path / "out.bam")
    with BamWriter(path, HEADER, level=6, threads=threads) as out:
        for piece in pieces(rng, buf, 7):
            out.write(piece)
    pysam.quickcheck(path)
    starts = np.asarray(out.block_starts)
    stream = out.header_size + offsets[:-1]
    want = [(int(starts[s // 997]) << 16) | int(s % 997) for s in stream]
    got, tells = [], []
    with pysam.AlignmentFile(path, check_sq=False) as bam:
        assert bam.header.to_dict() == HEADER.to_dict()
        while True:
            tells.append(bam.tell())
            try:
                got.append(next(bam).to_string())
            except StopIteration:
                break
    assert got == [s.to_string() for s in segments]
    assert tells[:-1] == want


def test_a_bam_without_records_is_its_header_and_the_eof_marker(tmp_path):
    path = tmp_path / "empty.bam"
    with BamWriter(str(path), HEADER, level=6, threads=2) as out:
        out.write(np.zeros(0, dtype=np.uint8))
    found = blocks_of(path.read_bytes())
    assert [p for _, p in found] == [header_bytes(HEADER), b""] and out.block_starts == [0, found[1][0]]
    assert path.read_bytes().endswith(EOF_MARKER)
    pysam.quickcheck(str(path))
    with pysam.AlignmentFile(str(path), check_sq=False) as bam:
        assert list(bam) == []


@pytest.mark.parametrize("end", ["close", "abort", "error inside with"])
def test_no_compression_thread_outlives_the_writer(tmp_path, rng, end):
    before = set(threading.enumerate())
    data = rng.integers(0, 256, size=60 * bgzf.BGZF_INPUT, dtype=np.uint8)
    path = tmp_path / "out.bam"
    if end == "error inside with":
        with pytest.raises(RuntimeError, match="mapping failed"):
            with BamWriter(str(path), HEADER, level=6, threads=4) as out:
                out.write(data)
                assert new_threads(before)   # the pool is at work
                raise RuntimeError("mapping failed")
    else:
        out = BamWriter(str(path), HEADER, level=6, threads=4)
        out.write(data)
        assert new_threads(before)
        if end == "close":
            out.close()
        else:
            out.abort()
    assert new_threads(before) == []
    assert out.fh.closed
    assert path.read_bytes().endswith(EOF_MARKER) == (end == "close")


@pytest.mark.skipif(deflate.compress_blocks is None, reason="python-isal's ISA-L symbols not found")
@pytest.mark.parametrize("level", [1, 2, 3])
@pytest.mark.parametrize("block_input", [bgzf.BGZF_INPUT, 997])
def test_isal_from_numba_gives_bgzf_blocks_as_python_isal_does(rng, level, block_input):
    """deflate.compress_blocks (all blocks in one numba call) cuts the data every block_input bytes
    into BGZF blocks, each its own deflate stream, on compressible and incompressible data: each
    block holds its slice, sizes are the blocks' sizes, a block's bytes depend on its slice alone
    (so where a batch is cut never changes them), and the compression is python-isal's at that
    level. Not byte for byte: one CI run's python-isal wrote a block one byte shorter than the
    same call gives elsewhere (ISA-L picks its code by CPU), so the sizes are compared in total."""
    text = np.frombuffer(b"".join(b"ACGT"[i % 4:i % 4 + 1] * int(n) for i, n in
                                  enumerate(rng.integers(1, 9, size=60_000))), dtype=np.uint8)
    noise = rng.integers(0, 256, size=int(rng.integers(1, 5 * block_input)), dtype=np.uint8)
    for data in (text, noise, np.concatenate((text[:3 * block_input], noise))):
        blocks, sizes = deflate.compress_blocks(data, block_input, level)
        blocks = bytes(blocks)
        found = blocks_of(blocks)
        assert [o for o, _ in found] == np.concatenate(([0], np.cumsum(sizes)[:-1])).tolist()
        assert int(sizes.sum()) == len(blocks)
        assert [p for _, p in found] == [bytes(data[i:i + block_input]) for i in range(0, len(data), block_input)]
        assert all(blocks[o:o + 16] == FIXED_HEADER for o, _ in found)
        later, later_sizes = deflate.compress_blocks(data[block_input:], block_input, level)
        assert bytes(later) == blocks[int(sizes[0]):] and later_sizes.tolist() == sizes.tolist()[1:]
        theirs = sum(len(bgzf.bgzf_block(bytes(data[i:i + block_input]), level))
                     for i in range(0, len(data), block_input))
        assert abs(int(sizes.sum()) - theirs) <= max(8, theirs // 1000)
    blocks, sizes = deflate.compress_blocks(np.zeros(0, dtype=np.uint8), block_input, level)
    assert len(blocks) == 0 and len(sizes) == 0
