"""The FASTQ and FASTA parsers, and the gzip decoders, under hypothesis: any input either parses,
with every record kept, or raises the documented one-line InputError naming the file; never anything
else (and never fewer records without an error)."""

import gzip
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from gpualign.errors import InputError
from gpualign.fastq import encode_fastq
from gpualign.seqio import DECODERS
from gpualign.reference import parse_fasta

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

# FASTQ-shaped pieces, so most examples get deep into the parser rather than failing on line 1
FASTQ_LINES = st.one_of(
    st.sampled_from(["@r", "@r1 x", "@", "+", "+r", "ACGT", "acgtn", "NNNN", "AC GT", "ACGU", "IIII", "I!~",
                     "III", "", " ", "ACG\r", "IIII\r", "@r/1", "@r/2", "#$%"]),
    st.text(alphabet="ACGTN@+I!\t \r", max_size=12),
    st.binary(max_size=6).map(lambda b: b.decode("latin-1")),
)


def simple_fastq_count(data: bytes):
    """Records of a well-formed file by the textbook reading (None when it is not well formed)."""
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    if not lines or len(lines) % 4:
        return None
    return len(lines) // 4


@FUZZ
@given(lines=st.lists(FASTQ_LINES, max_size=24), gz=st.booleans(), final_newline=st.booleans())
def test_fastq_parser_accepts_or_rejects_in_one_line(tmp_path_factory, lines, gz, final_newline):
    path = tmp_path_factory.mktemp("fq") / ("in.fq.gz" if gz else "in.fq")
    data = "\n".join(lines).encode("latin-1") + (b"\n" if final_newline and lines else b"")
    path.write_bytes(gzip.compress(data) if gz else data)
    try:
        reads = encode_fastq(str(path), k=8)
    except InputError as err:
        message = str(err)
        assert "\n" not in message and str(path) in message
        assert re.search(r"line \d+:|empty file|corrupt or truncated", message), message
        return
    # accepted: every record is there, none made up
    assert len(reads) == simple_fastq_count(data)


@FUZZ
@given(records=st.lists(st.tuples(st.text(alphabet="ACGTN", max_size=30),
                                  st.text(alphabet="!#5?I~", min_size=1, max_size=30)), min_size=1, max_size=10))
def test_fastq_with_valid_records_keeps_each(tmp_path_factory, records):
    path = tmp_path_factory.mktemp("fq") / "in.fq"
    text = "".join(f"@r{i}\n{s}\n+\n{(q * 40)[:len(s)]}\n" for i, (s, q) in enumerate(records))
    path.write_text(text)
    reads = encode_fastq(str(path), k=8)
    assert [reads.name(i) for i in range(len(reads))] == [f"r{i}" for i in range(len(records))]
    assert [int(reads.read_off[i + 1] - reads.read_off[i]) for i in range(len(reads))] == \
        [len(s) for s, _ in records]


def damage_corpus():
    """(FASTQ text, gzip bytes in two members split between records) of 300 records of varied
    lengths: a decoder that stopped after the first member would give whole records, fewer."""
    rng = np.random.default_rng(11)
    recs = []
    for i in range(300):
        n = int(rng.integers(1, 90))
        recs.append(f"@r{i} c{i}\n{''.join(rng.choice(list('ACGT'), size=n))}\n+\n{'I' * n}\n")
    text = "".join(recs).encode()
    half = len("".join(recs[:150]))
    return text, gzip.compress(text[:half]) + gzip.compress(text[half:])


DAMAGE_TEXT, DAMAGE_GZ = damage_corpus()


def damaged(kind, where, bit, junk):
    data = bytearray(DAMAGE_GZ)
    where %= len(data)
    if kind == "flip":
        data[where] ^= 1 << bit
        return bytes(data)
    return bytes(data[:where]) + (junk if kind == "cut_and_junk" else b"")


@pytest.mark.parametrize("decoder", DECODERS)
@FUZZ
@given(kind=st.sampled_from(["flip", "cut", "cut_and_junk"]), where=st.integers(0, len(DAMAGE_GZ) - 1),
       bit=st.integers(0, 7), junk=st.binary(min_size=1, max_size=16))
def test_damaged_gzip_gives_every_read_or_one_line(tmp_path_factory, decoder, kind, where, bit, junk):
    """A gzip FASTQ with a bit flipped, cut short, or cut short and followed by junk, through each
    decoder (rapidgzip too, whatever the size): the reads are the original ones, all of them, or
    the error is one line naming the file; no decoder's own exception escapes."""
    path = tmp_path_factory.mktemp("gz") / "in.fq.gz"
    path.write_bytes(damaged(kind, where, bit, junk))
    try:
        reads = encode_fastq(str(path), k=8, threads=2, comments=True, decoder=decoder)
    except InputError as err:
        message = str(err)
        assert "\n" not in message and f"reads {path}" in message, message
        assert re.search(r"corrupt or truncated gzip data \(.+\)$|line \d+:|empty file", message), message
        if kind == "cut" and where >= 2:   # (one byte or none is no gzip file: the FASTQ parser's error)
            assert "corrupt or truncated gzip data" in message, message
        return
    assert to_fastq_with_comments(reads) == DAMAGE_TEXT


def to_fastq_with_comments(reads):
    return "".join(f"@{reads.name(i)} {reads.comment(i).decode()}\n"
                   f"{''.join('ACGTN'[c] for c in reads.codes[reads.read_off[i]:reads.read_off[i + 1]])}\n+\n"
                   f"{''.join(chr(33 + q) for q in reads.quals[reads.read_off[i]:reads.read_off[i + 1]])}\n"
                   for i in range(len(reads))).encode()


FASTA_LINES = st.one_of(
    st.sampled_from([">a", ">b desc", ">", "> ", "ACGT", "acgtnRYKM", "NNNN", "AC-T", "AC*T", "", " ", "ACGT\r",
                     ">a\r", ";comment", "1234"]),
    st.text(alphabet="ACGTNacgtn>\t \r-*", max_size=12),
)


@FUZZ
@given(lines=st.lists(FASTA_LINES, max_size=20), gz=st.booleans())
def test_fasta_parser_accepts_or_rejects_in_one_line(tmp_path_factory, lines, gz):
    path = tmp_path_factory.mktemp("fa") / ("ref.fa.gz" if gz else "ref.fa")
    data = "\n".join(lines).encode() + b"\n"
    path.write_bytes(gzip.compress(data) if gz else data)
    try:
        contigs = list(parse_fasta(str(path)))
    except InputError as err:
        message = str(err)
        assert "\n" not in message and str(path) in message, message
        return
    headers = [line for line in lines if line.startswith(">")]
    assert len(contigs) == len(headers) > 0
