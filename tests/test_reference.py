import gzip

import numpy as np
import pytest

from gpualign.errors import InputError
from gpualign.genome import load_genome, pack_reference
from gpualign.index import build_index
from gpualign.reference import mask_reference, parse_fasta, read_contig_table

from helpers import genome_from_text


def write(path, text, gz=False):
    data = text.encode()
    path.write_bytes(gzip.compress(data) if gz else data)
    return str(path)


@pytest.mark.parametrize("gz", [False, True])
def test_mask_uppercases_and_turns_iupac_into_n(tmp_path, gz):
    src = write(tmp_path / ("in.fa.gz" if gz else "in.fa"), ">a desc\nacgtRYKM\nNNNNacgt\r\n>b\nTTTTnnGG\n", gz)
    summary = mask_reference(src, str(tmp_path / "m.fa"), str(tmp_path / "m.bed"), str(tmp_path / "m.tsv"))
    assert (tmp_path / "m.fa").read_text() == ">a\nACGTNNNNNNNNACGT\n>b\nTTTTNNGG\n"
    assert (tmp_path / "m.bed").read_text() == "a\t4\t12\nb\t4\t6\n"
    assert summary == {"contigs": 2, "bases": 24, "n_bases": 10}
    names, lengths, offsets = read_contig_table(str(tmp_path / "m.tsv"))
    assert names == ["a", "b"] and lengths.tolist() == [16, 8] and offsets.tolist() == [0, 16]
    assert (tmp_path / "m.fa.fai").read_text().splitlines()[1].startswith("b\t8\t")


@pytest.mark.parametrize("text, message", [
    ("", "empty file"),
    ("ACGT\n", "line 1: sequence before the first '>'"),
    (">a\nACGT\n>b\n>c\nAC\n", "line 3: contig 'b' has no sequence"),
    (">a\nACGT\n>a\nAC\n", "line 3: duplicate contig name 'a'"),
    (">a\nAC1T\n", "line 2: invalid character '1'"),
    (">\nACGT\n", "line 1: header with no contig name"),
])
def test_bad_fasta_is_one_clear_error(tmp_path, text, message):
    src = write(tmp_path / "bad.fa", text)
    with pytest.raises(InputError, match=message) as err:
        list(parse_fasta(src))
    assert src in str(err.value) and "\n" not in str(err.value)


def random_fasta(rng) -> bytes:
    """A FASTA with what real files hold and what they should not: lower case and IUPAC letters, CRLF,
    blank lines, spaces around lines, lines of any length, empty and duplicate contigs, bad letters."""
    parts = []
    if rng.random() < 0.2:
        parts.append(rng.choice([b"\n", b"  \n", b"ACGT\n"]))
    for c in range(int(rng.integers(1, 5))):
        name = rng.choice([f"c{c}", "c0", ""]) if rng.random() < 0.1 else f"c{c}"
        parts.append(f">{name} some description\n".encode())
        for _ in range(int(rng.integers(0 if rng.random() < 0.05 else 1, 12))):
            line = rng.choice(np.frombuffer(b"ACGTacgtNRYn", dtype=np.uint8), size=int(rng.integers(0, 70))).tobytes()
            if rng.random() < 0.03:
                line += rng.choice([b"1", b" ", b"-", b"*"]) + line
            if rng.random() < 0.05:
                line = b" " + line + b"\t"
            parts.append(line + rng.choice([b"\n", b"\r\n", b"\n\n"], p=[0.85, 0.1, 0.05]))
    text = b"".join(parts)
    return text[:-1] if rng.random() < 0.2 else text


@pytest.mark.parametrize("block", [1, 7, 64, 1 << 24])
def test_fasta_parsed_in_blocks_is_the_fasta_read_line_by_line(tmp_path, rng, block):
    """parse_fasta (blocks of lines, sequence checked and joined a block at a time) gives the contigs, or
    the first error with its line, that reading one line at a time gives, wherever the blocks cut."""
    from naive import parse_fasta_lines
    for trial in range(60):
        path = tmp_path / f"r{trial}.fa"
        path.write_bytes(random_fasta(rng))
        want = parse_fasta_lines(str(path))
        try:
            got = [(name, seq) for name, seq, _ in parse_fasta(str(path), block)]
        except InputError as exc:
            got = str(exc)
        assert got == want, path.read_bytes()[:300]


def test_corrupt_gzip_is_reported(tmp_path):
    path = tmp_path / "x.fa.gz"
    path.write_bytes(gzip.compress(b">a\nACGT\n" * 1000)[:-20])
    with pytest.raises(InputError, match="corrupt or truncated gzip"):
        list(parse_fasta(str(path)))


def test_pack_round_trips_and_index_matches_a_dictionary(tmp_path, rng):
    seqs = ["".join(rng.choice(list("ACGTN"), size=n, p=[.24, .24, .24, .24, .04])) for n in (333, 17, 5, 700)]
    src = write(tmp_path / "g.fa", "".join(f">c{i}\n{s}\n" for i, s in enumerate(seqs)))
    pack_reference(src, str(tmp_path / "g.2bit.npy"), str(tmp_path / "g.nmask.npy"), str(tmp_path / "g.tsv"))
    genome = load_genome(str(tmp_path / "g.2bit.npy"), str(tmp_path / "g.nmask.npy"), str(tmp_path / "g.tsv"))
    assert "".join("ACGTN"[c] for c in genome.codes()) == "".join(seqs)
    k = 6
    want = {}
    for off, s in zip(genome.offsets, seqs):
        for p in range(len(s) - k + 1):
            if "N" not in s[p:p + k]:
                want.setdefault(s[p:p + k], []).append(int(off) + p)
    for chunk in (7, 1 << 20):   # chunked builds must equal one-piece builds
        index = build_index(genome, k=k, max_occ=3, chunk=chunk)
        got = {}
        for code in np.flatnonzero(np.diff(index.offsets)):
            kmer = "".join("ACGT"[(code >> (2 * (k - 1 - x))) & 3] for x in range(k))
            got[kmer] = index.positions[index.offsets[code]:index.offsets[code + 1]].tolist()
        assert got == want
        assert index.capped_bins == sum(len(v) > 3 for v in want.values())


def test_genome_codes_of_helper_genome():
    g = genome_from_text(["ACGTN", "GG"])
    assert g.codes().tolist() == [0, 1, 2, 3, 4, 2, 2]
    assert g.ends.tolist() == [5, 7]


def test_index_warns_when_k_is_too_small_for_the_genome(rng):
    genome = genome_from_text(["".join(rng.choice(list("ACGT"), size=20000))])
    lines = []
    build_index(genome, k=4, max_occ=100, progress=lines.append)
    assert any("k=4 is small" in ln and "use k=" in ln for ln in lines)
    lines.clear()
    build_index(genome, k=8, max_occ=100, progress=lines.append)
    assert not any("WARNING" in ln for ln in lines)
