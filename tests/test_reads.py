import gzip

import numpy as np
import pytest

from gpualign.errors import InputError
from gpualign import fastq as fastq_module
from gpualign.fastq import encode_fastq, read_batches
from gpualign.reads import MAX_READ_LEN, Reads, concatenate

COMP = str.maketrans("ACGTN", "TGCAN")


def fastq(path, records, crlf=False, gz=False):
    nl = "\r\n" if crlf else "\n"
    text = "".join(f"@{n}{nl}{s}{nl}+{nl}{q}{nl}" for n, s, q in records)
    path.write_bytes(gzip.compress(text.encode()) if gz else text.encode())
    return str(path)


@pytest.mark.parametrize("crlf, gz", [(False, False), (True, False), (False, True)])
def test_encode_keeps_bases_qualities_and_reverse_complements(tmp_path, crlf, gz):
    rng = np.random.default_rng()
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
        assert "".join("ACGTN"[c] for c in reads.rc_codes[a:b]) == clean.translate(COMP)[::-1]
        assert reads.quals[a:b].tolist() == [ord(c) - 33 for c in q]
        words = reads.packed[reads.word_off[i]:reads.word_off[i + 1]]
        unpacked = [(int(words[x // 16]) >> (2 * (x % 16))) & 3 for x in range(b - a)]
        assert unpacked == [c & 3 for c in reads.codes[a:b]]
        header = clean[:5]
        want = -1 if len(clean) < 5 or "N" in clean else int("".join(str("ACGT".index(c)) for c in header), 4)
        assert reads.hbin[i] == want


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
def test_batches_and_threads_do_not_change_the_reads(tmp_path, monkeypatch, threads):
    """Streaming in batches (cut anywhere, parsed on threads, gzip in several members, decoded by
    rapidgzip when threads > 1) gives the reads one whole-file parse gives."""
    monkeypatch.setattr(fastq_module, "PARALLEL_GZIP_MIN", 0)
    rng = np.random.default_rng()
    recs = random_records(rng, 500)
    text = "".join(f"@{n}\n{s}\n+\n{q}\n" for n, s, q in recs).encode()
    cut = int(rng.integers(1, len(text)))
    (tmp_path / "r.fq.gz").write_bytes(gzip.compress(text[:cut]) + gzip.compress(text[cut:-1]))  # no last newline
    whole = encode_fastq(fastq(tmp_path / "w.fq", recs), k=6)
    batches = list(read_batches(str(tmp_path / "r.fq.gz"), 6, int(rng.integers(1, 60)), threads))
    assert len(batches) > 1
    again = concatenate(batches, 6)
    for field in Reads.__dataclass_fields__:
        assert np.array_equal(getattr(again, field), getattr(whole, field)), field


def test_an_error_names_the_line_in_the_whole_file(tmp_path):
    rng = np.random.default_rng()
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


def test_corrupt_gzip_is_one_clear_error(tmp_path):
    data = gzip.compress(b"@a\nACGT\n+\nIIII\n" * 5000)
    path = tmp_path / "r.fq.gz"
    path.write_bytes(data[:len(data) // 2])
    for threads in (1, 2):
        with pytest.raises(InputError, match=f"reads {path}: corrupt or truncated gzip"):
            list(read_batches(str(path), 8, 100, threads))


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
