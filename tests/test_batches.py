"""Paired readers of gpualign.batches: mates of two files interleaved (read_interleaved_pairs) and
one file of interleaved mates (read_smart_pairs, bwa mem -p), cut into whole insert-size blocks
(the block is passed in, as options.Tuning.insert_block), with their comments; and the cutting of
batches and insert-size blocks itself."""

import numpy as np
import pytest

from gpualign import fastq as fastq_module
from gpualign.batches import as_batches, block_starts, fragments_per_batch, read_interleaved_pairs, read_smart_pairs
from gpualign.errors import InputError
from gpualign.reads import Reads, concatenate

from helpers import random_genome, simulate_pairs
from test_fastq import fastq


def test_paired_readers_keep_comments(tmp_path):
    r1 = fastq(tmp_path / "r1.fq", [(f"p{i}/1 X1:i:{i}", "ACGT", "IIII") for i in range(30)])
    r2 = fastq(tmp_path / "r2.fq", [(f"p{i}/2 X2:i:{i}", "TTG", "III") for i in range(30)])
    one = fastq(tmp_path / "i.fq", [(f"p{i}/{m} X{m}:i:{i}", "ACGT"[:5 - m], "IIII"[:5 - m])
                                    for i in range(30) for m in (1, 2)])
    want = [b"X%d:i:%d" % (m, i) for i in range(30) for m in (1, 2)]
    for batches in (read_interleaved_pairs(r1, r2, 5, 10, comments=True), read_smart_pairs(one, 5, 10, comments=True)):
        got = concatenate(list(batches), 5)
        assert [got.comment(i) for i in range(len(got))] == want
        assert [got.name(i) for i in range(len(got))] == [f"p{i}" for i in range(30) for _ in range(2)]


# ---- interleaved mates in one file (-p) ----------------------------------------------------------

def smart_file(tmp_path, names):
    return fastq(tmp_path / "p.fq", [(n, "ACGTAC"[:2 + i % 5], "IIIIII"[:2 + i % 5]) for i, n in enumerate(names)])


def test_smart_pairs_equal_two_files_of_mates(tmp_path, monkeypatch):
    """Consecutive records with the same name are mates: the batches equal those two files of the
    same mates give, also where the reader's blocks cut between two mates."""
    monkeypatch.setattr(fastq_module, "READ_BLOCK", 777)
    block = 16   # insert-size blocks of 16 fragments: a batch of 40 reads holds 32 fragments
    recs1 = [(f"p{i}/1", "ACGTACGT"[:1 + i % 8], "IIIIIIII"[:1 + i % 8]) for i in range(101)]
    recs2 = [(f"p{i}/2 x", "TTGCA"[:1 + i % 5], "IIIII"[:1 + i % 5]) for i in range(101)]
    one = fastq(tmp_path / "one.fq", [r for pair in zip(recs1, recs2) for r in pair])
    pairs = list(read_interleaved_pairs(fastq(tmp_path / "r1.fq", recs1), fastq(tmp_path / "r2.fq", recs2), 5, 40,
                                        block=block))
    smart = list(read_smart_pairs(one, 5, 40, threads=2, block=block))
    assert [len(b) for b in smart] == [len(b) for b in pairs] == [32, 32, 32, 32, 32, 32, 10]
    for x, y in zip(smart, pairs):
        for field in Reads.__dataclass_fields__:
            assert np.array_equal(getattr(x, field), getattr(y, field)), field


@pytest.mark.parametrize("names, message", [
    (["a/1", "a/2", "b", "b", "c", "c", "a", "b"], r"record 7 \(line 25\): 'a' has no mate after it \('b' follows\)"),
    (["a", "b", "b"], r"record 1 \(line 1\): 'a' has no mate after it \('b' follows\)"),
    (["a", "a", "b"], r"record 3 \(line 9\): 'b' has no mate after it \(the file ends\)"),
    (["a", "a", "a", "a", "b", "a"], r"record 5 \(line 17\): 'b' has no mate after it \('a' follows\)"),
])
def test_records_without_their_mate_are_one_line(tmp_path, monkeypatch, names, message):
    monkeypatch.setattr(fastq_module, "READ_BLOCK", 20)   # a block of about one record: cuts between mates
    path = smart_file(tmp_path, names)
    rule = "with -p, consecutive records with the same name are mates"
    with pytest.raises(InputError, match=f"^reads {path} {message}; {rule}$"):
        list(read_smart_pairs(path, 5, 10, threads=2))


def test_block_starts_join_a_short_tail_and_batches_hold_whole_blocks(rng):
    assert block_starts(95, 40).tolist() == [0, 40, 95]       # tail of 15 joins
    assert block_starts(100, 30).tolist() == [0, 30, 60, 100]       # tail of 10 joins
    assert block_starts(105, 30).tolist() == [0, 30, 60, 90, 105]   # tail 15 = half: own block
    assert block_starts(10, 30).tolist() == [0, 10]
    assert block_starts(0, 30).tolist() == [0, 0]
    assert fragments_per_batch(2, 10) == 10 and fragments_per_batch(45, 10) == 20
    # a paired batch stream is cut into whole blocks; a final batch under half a block joins the last
    _, seqs = random_genome(rng, lengths=(3000,), repeat=0)
    reads, _ = simulate_pairs(rng, seqs, 64, length=30)
    sizes = [len(b) // 2 for b in as_batches(reads, 45, paired=True, block=10)]
    assert sizes == [20, 20, 24]
    assert [len(b) // 2 for b in as_batches(reads, 1000, paired=True, block=10)] == [64]
