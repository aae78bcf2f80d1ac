"""The per-read kernels against the naive references of naive.py, on fresh random inputs."""

import numpy as np
import pytest
from Bio import Align

from gpualign import core
from gpualign.genome import CODE
from gpualign.params import MapParams

import naive
from helpers import genome_from_text

SCORING = dict(match=1, mismatch=4, gap_open=6, gap_ext=1)


def run_dp(q, ref_text, c0, t, local, do_tb=False, scoring=SCORING):
    genome = genome_from_text([ref_text])
    qa = np.array(q, dtype=np.uint8)
    W = 2 * t + 1
    H, F, HS, FS = (np.zeros(W + 1, dtype=np.int32) for _ in range(4))
    tb = np.zeros(max(1, len(q) * W), dtype=np.uint8)
    res = np.zeros(4, dtype=np.int64)
    core.banded_dp(qa, 0, len(q), genome.packed, genome.nmask, 0, len(ref_text), c0, t, local,
                   scoring["match"], scoring["mismatch"], scoring["gap_open"], scoring["gap_ext"],
                   H, F, HS, FS, tb, 0, do_tb, res)
    return res, tb


def random_case(rng):
    t = int(rng.integers(0, 7))
    n = int(rng.integers(1, 40))
    m = int(rng.integers(1, n + 2 * t + 3))
    alphabet = "ACGTN" if rng.random() < 0.3 else "ACGT"
    ref = "".join(rng.choice(list(alphabet), size=m))
    if rng.random() < 0.7 and m > 4:   # a related read, so alignments are not all noise
        s = int(rng.integers(0, max(1, m - n)))
        q = list(ref[s:s + n].ljust(n, "A"))
        for x in range(n):
            if rng.random() < 0.1:
                q[x] = "ACGTN"[rng.integers(5)]
        q = "".join(q)
    else:
        q = "".join(rng.choice(list(alphabet), size=n))
    c0 = int(rng.integers(-3, t + 3))
    return [int(CODE[ord(ch)]) for ch in q], ref, c0, t


@pytest.mark.parametrize("local", [0, 1])
def test_banded_dp_matches_full_matrix_reference(local, rng):
    for _ in range(300):
        q, ref, c0, t = random_case(rng)
        res, _ = run_dp(q, ref, c0, t, local)
        refcodes = [int(CODE[ord(ch)]) for ch in ref]
        want = naive.banded_align(q, refcodes, c0, t, local, **SCORING)
        if want[0] == float("-inf"):
            assert res[0] <= core.NEG // 2
        else:
            assert tuple(int(v) for v in res) == want, (q, ref, c0, t, local)


@pytest.mark.parametrize("local", [0, 1])
def test_traceback_cigar_scores_what_the_dp_scored(local, rng):
    checked = 0
    for _ in range(300):
        q, ref, c0, t = random_case(rng)
        res, tb = run_dp(q, ref, c0, t, local, do_tb=True)
        if res[0] <= core.NEG // 2 or (local and res[0] == 0):
            continue
        maxops = 2 * len(q) + 2
        ops = np.zeros(3 * maxops, dtype=np.uint8)   # every third slot from 1, as a GPU column would be
        lens = np.zeros(3 * maxops, dtype=np.int32)
        out = np.zeros(4, dtype=np.int64)
        core.traceback(tb, 0, t, c0, res[1], res[2], ops, lens, 1, 3, out)
        assert not ops[0::3].any() and not ops[2::3].any()
        ops, lens = ops[1::3], lens[1::3]
        cigar = list(zip(ops[:out[0]].tolist(), lens[:out[0]].tolist()))
        refcodes = [int(CODE[ord(ch)]) for ch in ref]
        score, qe, re_ = naive.cigar_score(q, refcodes, int(out[1]), int(out[2]), cigar, **SCORING)
        assert score == res[0]
        assert (qe, re_) == (res[1], res[2])
        if local:
            assert out[1] == res[3]
            assert cigar[0][0] == core.OP_M and cigar[-1][0] == core.OP_M
        else:
            assert out[1] == 0 and qe == len(q)
        checked += 1
    assert checked > 100


@pytest.mark.parametrize("mode", ["global", "local"])
def test_full_band_scores_equal_biopython(mode, rng):
    """With a band wider than both sequences the DP is unbanded: Biopython's aligner must agree."""
    aligner = Align.PairwiseAligner()
    aligner.match_score, aligner.mismatch_score = 1, -4
    aligner.open_gap_score, aligner.extend_gap_score = -7, -1
    aligner.mode = mode
    if mode == "global":   # reference end gaps free, read aligned end to end
        aligner.end_deletion_score = 0   # gaps in the read at its ends = unaligned reference
    for _ in range(100):
        n, m = int(rng.integers(1, 15)), int(rng.integers(1, 20))
        q = "".join(rng.choice(list("ACGT"), size=n))
        ref = "".join(rng.choice(list("ACGT"), size=m))
        res, _ = run_dp([int(CODE[ord(ch)]) for ch in q], ref, 0, 24, 1 if mode == "local" else 0)
        assert res[0] == aligner.score(ref, q), (q, ref)


def test_genome_word_and_base_lookup_agree_with_codes(rng):
    text = "".join(rng.choice(list("ACGTN"), size=1000, p=[0.24, 0.24, 0.24, 0.24, 0.04]))
    g = genome_from_text([text])
    codes = g.codes()
    assert codes.tolist() == [int(CODE[ord(c)]) for c in text]
    for pos in rng.integers(0, 1000 - 16, size=200):
        w = core.genome_word(g.packed, int(pos))
        got = [(w >> (2 * i)) & 3 for i in range(16)]
        assert got == [c & 3 for c in codes[pos:pos + 16]]
        assert core.base_at(g.packed, g.nmask, int(pos)) == codes[pos]
        end = int(pos) + int(rng.integers(0, 50))
        assert core.any_n(g.nmask, int(pos), min(end, 1000)) == bool((codes[pos:min(end, 1000)] == 4).any())


@pytest.mark.parametrize("runs", [None, 1, 3, 30])
def test_merge_sort_runs_sorts_any_slice(runs, rng):
    """Random values, or concatenated ascending runs as seed hits come; the scratch half is
    used and the values outside both halves are left alone."""
    for _ in range(50):
        n = int(rng.integers(0, 200))
        if runs is None:
            vals = rng.integers(-1000, 1000, size=n)
        else:
            vals = np.concatenate([np.sort(rng.integers(-1000, 1000, size=len(p)))
                                   for p in np.array_split(np.arange(n), runs)])
        off = int(rng.integers(0, 20))
        a = rng.integers(-5, 5, size=off + 2 * n + 20).astype(np.int64)
        a[off:off + n] = vals
        outside = np.concatenate([a[:off], a[off + 2 * n:]]).copy()
        at = core.merge_sort_runs(a, off, n, off + n)
        assert at in (off, off + n)
        assert np.array_equal(a[at:at + n], np.sort(vals))
        assert np.array_equal(np.concatenate([a[:off], a[off + 2 * n:]]), outside)


def test_params_check_names_the_bad_option():
    with pytest.raises(Exception, match="max_indels=99"):
        MapParams(max_indels=99).check()


def test_rescue_align_scores_equal_biopython_local(rng):
    """The rescue kernel is plain Smith-Waterman over the whole window: Biopython's local score."""
    aligner = Align.PairwiseAligner(mode="local", match_score=1, mismatch_score=-4,
                                    open_gap_score=-7, extend_gap_score=-1)
    for _ in range(100):
        n, m = int(rng.integers(1, 20)), int(rng.integers(1, 40))
        q = "".join(rng.choice(list("ACGT"), size=n))
        ref = "".join(rng.choice(list("ACGT"), size=m))
        genome = genome_from_text([ref])
        res = np.zeros(3, dtype=np.int64)
        H, E = np.empty(n + 1, dtype=np.int32), np.empty(n + 1, dtype=np.int32)
        core.rescue_align(CODE[np.frombuffer(q.encode(), dtype=np.uint8)], 0, n, genome.packed, genome.nmask,
                          0, m, 1, 4, 6, 1, H, E, 0, 1, res)
        assert res[0] == aligner.score(ref, q), (q, ref)
