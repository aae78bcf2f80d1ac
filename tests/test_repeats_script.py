"""Tests of bench/repeats.py (a script, not a package module): the repeat-context features."""
from __future__ import annotations

import numpy as np

from gpualign.seed import seed_offset
from test_accuracy_script import load_script

repeats = load_script("repeats")


def codes(seq: str) -> np.ndarray:
    return repeats.CODE[np.frombuffer(seq.encode(), dtype=np.uint8)]


def test_dust_scores_as_sdust_does():
    """sum of c(c-1)/2 over a 64-base window's 3-mer counts, over 3-mers less one: a homopolymer
    scores 31, a dinucleotide repeat 930/61, random sequence little; the highest window counts."""
    rng = np.random.default_rng(5)
    random = "".join(rng.choice(list("ACGT"), size=150))
    assert repeats.dust_max(codes("A" * 64), 64) == 31.0
    assert repeats.dust_max(codes("AC" * 32), 64) == 2 * (31 * 30 // 2) / 61
    assert repeats.dust_max(codes(random), 64) < 3
    assert repeats.dust_max(codes(random[:80] + "T" * 64 + random[80:86]), 64) == 31.0
    assert repeats.dust_max(codes("N" * 64), 64) == 0.0


def test_seed_bins_follow_the_seeding_offsets():
    """Bin sizes of the seeds at seed.seed_offset's offsets (the last one moved back to end at the
    read's end); -1 for a seed holding N."""
    k = 4
    sizes = np.arange(4 ** k) % 7
    offsets = np.concatenate(([0], np.cumsum(sizes)))
    seq = "ACGTACGTTTGCANC"
    got = repeats.seed_bins(codes(seq), k, offsets)
    want = []
    for s in range((len(seq) + k - 1) // k):
        kmer = seq[seed_offset(s, len(seq), k):][:k]
        want.append(-1 if "N" in kmer else int("".join(str("ACGT".index(b)) for b in kmer), 4) % 7)
    assert got == want and want[-1] == -1 and want[-2] != -1


def test_context_takes_the_first_that_applies():
    ctx = lambda xs, dust, bins: repeats.context_of(150, (150, xs), dust, bins, 500, 5, 20)  # noqa: E731
    assert ctx(150, 31, [600] * 13) == "identical copy"
    assert ctx(125, 31, [600] * 13) == "near copy"
    assert ctx(124, 31, [600] * 13) == "low complexity"
    assert ctx(-1, 5, [600] * 7 + [3] * 6) == "high-copy k-mers"
    assert ctx(-1, 5, [600] * 6 + [3] * 7) == "unique"
    assert ctx(-1, 5, [-1] * 13) == "unique"


def test_correct_shares_split_identical_copies_from_the_rest(tmp_path, capsys):
    """The last table counts each aligner's correct reads of all, outside identical copies (with the
    wrong ones) and in them; --report prints the tables again from a --tsv file."""
    rows = [dict(read=f"r{i}", context=ctx, xs=0, dust=0.0, seeds_capped=0, seeds=13, median_bin=3, a=a, b=b)
            for i, (ctx, a, b) in enumerate([
                ("identical copy", "correct MAPQ<20", "wrong MAPQ<20"),
                ("identical copy", "wrong MAPQ<20", "wrong MAPQ<20"),
                ("unique", "correct MAPQ>=20", "correct MAPQ>=20"),
                ("near copy", "wrong MAPQ>=20", "correct MAPQ<20"),
                ("unique", "unmapped", "correct MAPQ>=20")])]
    lines = repeats.correct_shares(rows, ["a", "b"])
    assert "| a | 40.000 | 33.3333 (2) | 1 |" in lines and "| b | 60.000 | 100.0000 (0) | 0 |" in lines
    tsv = tmp_path / "reads.tsv"
    tsv.write_text("\t".join(rows[0]) + "\n" + "".join("\t".join(str(v) for v in r.values()) + "\n" for r in rows))
    assert repeats.main(["--report", str(tsv), "--against", "b"]) == 0
    assert capsys.readouterr().out.strip() == repeats.report(rows, ["a", "b"], "b").strip()
