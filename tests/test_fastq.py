"""FASTQ parsing (gpualign.fastq): records, bad records as one-line errors, batches cut anywhere
and parsed on threads, mates of two files read in lockstep, one file of mates checked in order
(mates_in_order), and header comments (-C)."""

import gzip

import numpy as np
import pytest

import naive
from gpualign.errors import InputError
from gpualign import fastq as fastq_module
from gpualign.fastq import encode_fastq, read_batches
from gpualign.reads import DERIVED, MAX_READ_LEN, Reads, concatenate, derived


def fastq(path, records, crlf=False, gz=False):
    nl = "\r\n" if crlf else "\n"
    text = "".join(f"@{n}{nl}{s}{nl}+{nl}{q}{nl}" for n, s, q in records)
    path.write_bytes(gzip.compress(text.encode()) if gz else text.encode())
    return str(path)


@pytest.mark.parametrize("crlf, gz", [(False, False), (True, False), (False, True)])
def test_encode_keeps_bases_and_qualities(tmp_path, crlf, gz, rng):
    """Names, bases (anything not ACGT read as N) and qualities as the file holds them; the reverse
    complements, packing and header bins built from them are tested in test_encode.py."""
    recs = []
    for i in range(20):
        n = int(rng.integers(0, 60))
        s = "".join(rng.choice(list("ACGTNacgtRY"), size=n))
        recs.append((f"read{i}/1 extra words", s, "".join(chr(33 + int(v)) for v in rng.integers(0, 41, size=n))))
    reads = encode_fastq(fastq(tmp_path / "r.fq", recs, crlf, gz), k=5)
    assert len(reads) == 20
    for i, (_, s, q) in enumerate(recs):
        a, b = reads.read_off[i], reads.read_off[i + 1]
        clean = "".join(c if c in "ACGT" else "N" for c in s.upper())
        assert reads.name(i) == f"read{i}"
        assert "".join("ACGTN"[c] for c in reads.codes[a:b]) == clean
        assert reads.quals[a:b].tolist() == [ord(c) - 33 for c in q]


@pytest.mark.parametrize("text, message", [
    ("", "empty file"),
    ("@a\nACGT\n+\nIIII\n@b\nAC\n", "line 5: truncated FASTQ record"),
    ("@a\nACGT\n+\nIII\n", "line 1: sequence and quality lengths differ"),
    ("@a\nACGT\nIIII\n+\n", "line 3: expected a '\\+' line"),
    ("a\nACGT\n+\nIIII\n", "line 1: expected a '@name' header"),
    ("@a\nAC-T\n+\nIIII\n", "line 2: invalid base '-'"),
    ("@a\nACGT\n+\nII I\n", "line 4: quality character outside"),
])
def test_bad_fastq_is_one_clear_error(tmp_path, text, message):
    path = tmp_path / "bad.fq"
    path.write_text(text)
    with pytest.raises(InputError, match=message) as err:
        encode_fastq(str(path), 8)
    assert str(path) in str(err.value)


def test_too_long_read_is_rejected(tmp_path):
    n = MAX_READ_LEN + 1
    path = fastq(tmp_path / "long.fq", [("a", "A" * n, "I" * n)])
    with pytest.raises(InputError, match=f"longer than the {MAX_READ_LEN} supported"):
        encode_fastq(path, 8)


def test_the_first_bad_record_in_file_order_is_reported(tmp_path):
    path = tmp_path / "bad.fq"
    path.write_text("@ok\nACGT\n+\nIIII\n@b\nACXT\n+\nIIII\n@c\nACGT\n-\nIIII\n@d\nAC\n+\nIIII\n")
    with pytest.raises(InputError, match="line 6: invalid base 'X'"):
        encode_fastq(str(path), 8)


def random_records(rng, n):
    recs = []
    for i in range(n):
        length = int(rng.integers(0, 150))
        seq = "".join(rng.choice(list("ACGTN"), size=length))
        recs.append((f"r{i} x", seq, "".join(chr(33 + int(v)) for v in rng.integers(0, 41, size=length))))
    return recs


@pytest.mark.parametrize("threads", [1, 3])
def test_batches_and_threads_do_not_change_the_reads(tmp_path, monkeypatch, threads, rng):
    """Streaming in batches (cut anywhere, parsed on threads, a batch in pieces side by side, gzip in
    several members, decoded by rapidgzip when threads > 1) gives the reads one whole-file parse gives."""
    monkeypatch.setattr(fastq_module, "PIECE_RECORDS", int(rng.integers(1, 8)))
    monkeypatch.setattr(fastq_module, "PARALLEL_GZIP_MIN", 0)
    monkeypatch.setattr(fastq_module, "PARALLEL_GZIP_THREADS", 2)
    recs = random_records(rng, 500)
    text = "".join(f"@{n}\n{s}\n+\n{q}\n" for n, s, q in recs).encode()
    cut = int(rng.integers(1, len(text)))
    (tmp_path / "r.fq.gz").write_bytes(gzip.compress(text[:cut]) + gzip.compress(text[cut:-1]))  # no last newline
    whole = encode_fastq(fastq(tmp_path / "w.fq", recs), k=6)
    size = int(rng.integers(1, 60))
    monkeypatch.setattr(fastq_module, "READ_BLOCK", int(rng.integers(300, 5000)))   # several reads (ramped too)
    for ramp in (False, True):
        batches = list(read_batches(str(tmp_path / "r.fq.gz"), 6, size, threads, ramp=ramp))
        assert len(batches) > 1
        assert all(getattr(b, f) is None for b in batches for f in DERIVED)   # the backends make them
        again = derived(concatenate(batches, 6))
        for field in Reads.__dataclass_fields__:
            assert np.array_equal(getattr(again, field), getattr(whole, field)), field


@pytest.mark.parametrize("ramp", [False, True])
def test_batches_in_pieces_are_the_joined_batches(tmp_path, monkeypatch, ramp, rng):
    """chunks with pieces: a batch that spans two decoded blocks comes as the two pieces, uncopied;
    joined (text_of), every batch is the one chunks gives without pieces, at the same records and
    lines, and a raw batch of pieces parses to the same reads."""
    from gpualign.fastq import RawReads, chunks, text_of
    recs = random_records(rng, 700)
    path = fastq(tmp_path / "r.fq", recs)
    with open(path, "rb+") as fh:   # no last newline, now and then
        if rng.integers(0, 2):
            fh.truncate(len(fh.read()) - 1)
    monkeypatch.setattr(fastq_module, "READ_BLOCK", int(rng.integers(300, 4000)))
    size = int(rng.integers(1, 50))
    plain = list(chunks(path, size, ramp=ramp))
    split = list(chunks(path, size, ramp=ramp, pieces=True))
    assert [(n, first) for _, n, first in split] == [(n, first) for _, n, first in plain]
    assert all(np.array_equal(text_of(a), b) for (a, _, _), (b, _, _) in zip(split, plain))
    two = [c for c, _, _ in split if isinstance(c, tuple)]
    assert two and all(len(c) == 2 for c in two)
    whole = encode_fastq(path, 6)
    raw = derived(concatenate([RawReads(path, *item, 6).parsed() for item in split], 6))
    for field in Reads.__dataclass_fields__:
        assert np.array_equal(getattr(raw, field), getattr(whole, field)), field


def test_a_ramp_starts_with_small_batches(tmp_path, rng):
    """With ramp, the first batches hold 1/16, 1/8, 1/4 and 1/2 of the batch size, then the full size."""
    recs = random_records(rng, 1000)
    path = fastq(tmp_path / "r.fq", recs)
    sizes = [len(b) for b in read_batches(path, 6, 160, ramp=True)]
    assert sizes == [10, 20, 40, 80] + [160] * 5 + [50]
    assert [len(b) for b in read_batches(path, 6, 160)] == [160] * 6 + [40]


def test_the_decoders_cut_the_same_batches(tmp_path, monkeypatch, rng):
    """rapidgzip's decoding process (decoding from the command's start too) hands out blocks of the sizes
    asked for, as isal does, so a ramp's batches are the same whoever decodes: a block one step short was
    taken for the input's last and its records cut into END_BATCHES batches each."""
    from gpualign import seqio
    from gpualign.fastq import chunks
    monkeypatch.setattr(fastq_module, "PARALLEL_GZIP_MIN", 0)
    monkeypatch.setattr(fastq_module, "PARALLEL_GZIP_THREADS", 2)
    recs = random_records(rng, 3000)
    path = tmp_path / "r.fq.gz"
    path.write_bytes(gzip.compress("".join(f"@{n}\n{s}\n+\n{q}\n" for n, s, q in recs).encode()))
    block = int(rng.integers(20000, 60000))
    monkeypatch.setattr(fastq_module, "READ_BLOCK", block)
    monkeypatch.setattr(seqio, "READ_BLOCK", block)
    size = int(rng.integers(150, 300))
    cut = {}
    for decoder in ("isal", "rapidgzip"):
        cut[decoder] = [n for _, n, _ in chunks(str(path), size, 4, decoder=decoder, ramp=True)]
    seqio.start_decoding([str(path)], 4, True)   # as a map command starts: decoded early, then taken
    early = [n for _, n, _ in chunks(str(path), size, 4, ramp=True)]
    seqio.drop_early()
    assert cut["isal"] == cut["rapidgzip"] == early and sum(early) == len(recs)


def test_a_ramp_ends_with_the_last_blocks_records_in_several_batches(tmp_path, rng):
    """With ramp, the records of the input's last block (one that came short: here the whole file)
    go out in END_BATCHES batches or more, none above a quarter of them, so they map side by side."""
    path = fastq(tmp_path / "r.fq", random_records(rng, 1000))
    sizes = [len(b) for b in read_batches(path, 6, 1000, ramp=True)]
    assert fastq_module.END_BATCHES == 4
    assert sizes == [62, 125, 250, 250, 250, 63]


def test_an_error_names_the_line_in_the_whole_file(tmp_path, rng):
    recs = random_records(rng, 100)
    bad = int(rng.integers(10, 100))
    recs[bad] = (recs[bad][0], "AC!T", "IIII")
    path = fastq(tmp_path / "r.fq", recs)
    with pytest.raises(InputError, match=f"line {4 * bad + 2}: invalid base '!'"):
        list(read_batches(path, 8, 7, 2))
    # an earlier bad record is reported before a fault further on (here: truncation at the end)
    with open(path, "a") as fh:
        fh.write("@late\nACGT\n")
    with pytest.raises(InputError, match=f"line {4 * bad + 2}: invalid base '!'"):
        list(read_batches(path, 8, 7, 2))


def test_a_batch_parsed_in_pieces_reports_its_first_bad_record(tmp_path, monkeypatch, rng):
    """Two bad records in two pieces of one batch: the earlier one is reported, with its line in the
    file, whichever piece finishes first."""
    monkeypatch.setattr(fastq_module, "PIECE_RECORDS", 3)   # batches of 40 in 4 pieces of 10
    recs = random_records(rng, 120)
    first, later = int(rng.integers(50, 60)), int(rng.integers(70, 80))   # pieces 1 and 3 of the second batch
    recs[first] = (recs[first][0], "AC!T", "IIII")
    recs[later] = (recs[later][0], "ACGT", "II")
    path = fastq(tmp_path / "r.fq", recs)
    for threads in (1, 4):
        with pytest.raises(InputError, match=f"line {4 * first + 2}: invalid base '!'"):
            list(read_batches(path, 8, 40, threads))


# ---- mates of two files, read in lockstep ------------------------------------------------------

def mates(tmp_path, n1, n2=None, names2=None):
    """R1 with reads p0/1.. and R2 with n2 reads named names2 (default p0/2..)."""
    n2 = n1 if n2 is None else n2
    names2 = names2 or [f"p{i}" for i in range(n2)]
    r1 = fastq(tmp_path / "r1.fq", [(f"p{i}/1", "ACGTACGT", "IIIIIIII") for i in range(n1)])
    r2 = fastq(tmp_path / "r2.fq", [(f"{names2[i]}/2", "TTGCA", "IIIII") for i in range(n2)])
    return r1, r2


def test_mates_are_read_in_lockstep(tmp_path):
    from gpualign.fastq import read_pair_batches
    r1, r2 = mates(tmp_path, 25)
    pairs = list(read_pair_batches(r1, r2, 5, batch_size=7, threads=2))
    assert [len(a) for a, _ in pairs] == [7, 7, 7, 4] == [len(b) for _, b in pairs]
    assert [a.name(i) for a, _ in pairs for i in range(len(a))] == [f"p{i}" for i in range(25)]
    assert all(a.name(i) == b.name(i) for a, b in pairs for i in range(len(a)))


@pytest.mark.parametrize("n2, names2, message", [
    (20, None, r"r2.fq has fewer records than .*r1.fq: it ends after record 20"),
    (21, None, r"r2.fq has fewer records than .*r1.fq: it ends after record 21"),
    (30, None, r"r2.fq has more records than .*r1.fq \(25\)"),
    (28, None, r"r2.fq has more records than .*r1.fq \(25\)"),
    (25, [f"p{i}" if i != 17 else "q17" for i in range(25)],
     r"record 18 \(line 69\) is 'p17' in one and 'q17' in the other"),
])
def test_mates_that_do_not_pair_are_one_line(tmp_path, n2, names2, message):
    from gpualign.fastq import read_pair_batches
    r1, r2 = mates(tmp_path, 25, n2, names2)
    with pytest.raises(InputError, match=message) as err:
        list(read_pair_batches(r1, r2, 5, batch_size=7))
    assert "\n" not in str(err.value)


def test_mates_of_different_lengths_stay_in_lockstep_across_reader_blocks(tmp_path, monkeypatch):
    """R1 and R2 of different lengths fill the reader's decompression blocks at different records;
    the mates must still come in lockstep, in batches of exactly batch_size."""
    from gpualign import fastq
    monkeypatch.setattr(fastq, "READ_BLOCK", 1000)   # many blocks, cut at different records
    r1, r2 = tmp_path / "r1.fq", tmp_path / "r2.fq"
    r1.write_text("".join(f"@p{i}/1\n{'ACGT' * 20}\n+\n{'I' * 80}\n" for i in range(120)))
    r2.write_text("".join(f"@p{i}/2\n{'TTGCA' * 6}\n+\n{'I' * 30}\n" for i in range(120)))
    pairs = list(fastq.read_pair_batches(str(r1), str(r2), 5, batch_size=25))
    assert [len(a) for a, _ in pairs] == [25, 25, 25, 25, 20] == [len(b) for _, b in pairs]
    assert [a.name(i) for a, _ in pairs for i in range(len(a))] == [f"p{i}" for i in range(120)]
    assert all(a.lengths.tolist() == [80] * len(a) and b.lengths.tolist() == [30] * len(b) for a, b in pairs)


# ---- mates interleaved in one file (-p): checked in order ----------------------------------------

def naive_unmated(names):
    """(record, name, next name or None) of the first record without its mate, else None."""
    for i in range(0, len(names), 2):
        if i + 1 == len(names):
            return i + 1, names[i], None
        if names[i] != names[i + 1]:
            return i + 1, names[i], names[i + 1]
    return None


def test_mates_in_order_checks_pairs_across_any_batch_cut(rng):
    from gpualign.fastq import mates_in_order
    from gpualign.reads import encode_reads, subset
    for _ in range(300):
        n = int(rng.integers(1, 14))
        names = [f"m{i // 2}" for i in range(n)]
        for _ in range(int(rng.integers(0, 3))):   # damage: a name changed or a record dropped
            if rng.random() < 0.5:
                names[int(rng.integers(0, len(names)))] = "odd"   # len: a record may be gone
            elif len(names) > 1:
                del names[int(rng.integers(0, len(names)))]
        reads = encode_reads([x.encode() for x in names], [b"ACGT"] * len(names), [b"IIII"] * len(names), 3)
        cuts = sorted({0, len(names), *rng.integers(0, len(names) + 1, size=3).tolist()})
        batches = [subset(reads, a, b) for a, b in zip(cuts, cuts[1:])]
        want = naive_unmated(names)
        if want is None:
            assert sum(len(b) for b in mates_in_order(batches, "f.fq")) == len(names)
            continue
        record, name, after = want
        follows = "the file ends" if after is None else f"{after!r} follows"
        with pytest.raises(InputError) as err:
            list(mates_in_order(batches, "f.fq"))
        assert str(err.value) == (f"reads f.fq record {record} (line {4 * record - 3}): {name!r} has no mate after "
                                  f"it ({follows}); with -p, consecutive records with the same name are mates")


# ---- comments (-C) ---------------------------------------------------------------------------

COMMENTED = [("r0/1 BC:Z:ACGT\tRG:Z:x", b"BC:Z:ACGT\tRG:Z:x"), ("r1", b""), ("r2 \t ", b""),
             ("r3\t XY:i:5  \t", b"XY:i:5"), ("r4/2  a  b ", b"a  b"), ("r5/3 x", b"x")]


@pytest.mark.parametrize("crlf, gz", [(False, False), (True, False), (False, True)])
def test_comments_are_kept_when_asked(tmp_path, crlf, gz):
    path = fastq(tmp_path / "c.fq", [(h, "ACGT", "IIII") for h, _ in COMMENTED], crlf, gz)
    reads = encode_fastq(path, 5, comments=True)
    assert [reads.name(i) for i in range(len(reads))] == ["r0", "r1", "r2", "r3", "r4", "r5/3"]
    assert [reads.comment(i) for i in range(len(reads))] == [c for _, c in COMMENTED]
    plain = encode_fastq(path, 5)   # not asked: nothing kept, every comment empty
    assert len(plain.comments) == 0 and plain.comment_off.tolist() == [0] * (len(COMMENTED) + 1)
    for field in Reads.__dataclass_fields__:
        if field not in ("comments", "comment_off"):
            assert np.array_equal(getattr(plain, field), getattr(reads, field)), field


def test_cut_records_finds_the_end_of_record_n_as_a_line_count_does(rng):
    """fastq.cut_records (a vectorized newline count, then back from the end, or a count by
    4 KiB blocks when max_records cuts earlier) against splitting the text into lines."""
    for _ in range(40):
        nlines = int(rng.integers(0, 3000))
        lines = [b"x" * int(rng.integers(0, 60)) for _ in range(nlines)]
        data = b"\n".join(lines) + (b"\n" if nlines and rng.random() < 0.7 else b"")
        start = int(rng.integers(0, 3)) * (len(lines[0]) + 1) if nlines > 2 else 0
        max_records = int(rng.choice([1, 7, 100, 10_000]))
        complete = data[start:].count(b"\n") // 4
        n = min(complete, max_records)
        end = start + sum(len(line) + 1 for line in data[start:].split(b"\n")[:4 * n])
        assert fastq_module.cut_records(np.frombuffer(data, dtype=np.uint8), start, max_records) == (end if n else start, n)



def test_guessed_line_ends_give_what_splitting_lines_gives(rng):
    """parse_records guesses each line's end from the record before's (fastq.line_from): reads of
    mixed lengths, CR line ends here and there, tabs in headers, and quality lines four bytes short
    (whose guessed end falls on the newline after the next header, `@r1`) parse as splitting the
    lines does."""
    for trial in range(300):
        parts = []
        for r in range(int(rng.integers(1, 6))):
            n = int(rng.choice([5, 5, 5, 6, 0]))
            nl = [b"\n", b"\r\n"][int(rng.random() < 0.2)]
            name = b"r%d" % r + (b"\tc" if rng.random() < 0.2 else b"")
            seq = bytes(rng.choice(list(b"ACGTN"), size=n).astype(np.uint8))
            qual = bytes(rng.integers(33, 127, size=n).astype(np.uint8))
            if rng.random() < 0.1 and n:
                qual = qual[:-4]                        # a short quality line
            if rng.random() < 0.03 and n:
                qual = qual[:1] + b"\x0b" + qual[2:]    # a control byte in it
            parts.append(b"@" + name + nl + seq + nl + b"+" + nl + qual + nl)
        text = b"".join(parts)
        want = naive.parse_fastq(text)
        buf = np.frombuffer(text, dtype=np.uint8)
        status, record, _, names, name_off, codes, quals, read_off, _, _ = fastq_module.parse_records(
            buf, len(parts), fastq_module.SEQ_OK, fastq_module.WHITESPACE, fastq_module.CODE, False)
        if isinstance(want, int):
            assert status == want, text
            continue
        assert status == 0, text
        for r, (name, seq, qual) in enumerate(want):
            a, b = read_off[r], read_off[r + 1]
            assert bytes(names[name_off[r]:name_off[r + 1]]) == name
            assert bytes(codes[a:b]) == bytes(fastq_module.CODE[list(seq)].tolist() if seq else b"")
            assert bytes(quals[a:b]) == bytes(c - 33 for c in qual)
