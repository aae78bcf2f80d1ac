"""Extension (extend.py): banded NW/SW, traceback and rescue SW against full-matrix references and
Biopython, per pair and through both backends' stages (cpu, and cuda in numba's simulator)."""

import numpy as np
import pytest
from Bio import Align

from gpualign import encode, extend
from gpualign.bam.sam_records import full_cigar
from gpualign.encode import CODE
from gpualign.md import md_bound
from gpualign.options import MapParams

import naive
from helpers import genome_from_text, simulate_reads

SCORING = dict(match=1, mismatch=4, gap_open=6, gap_ext=1)
P = MapParams(max_indels=3, max_candidates=4, max_hits=256)


def run_dp(q, ref_text, c0, t, local, do_tb=False, scoring=SCORING):
    genome = genome_from_text([ref_text])
    qa = np.array(q, dtype=np.uint8)
    W = 2 * t + 1
    H, F, HS, FS = (np.zeros(W + 1, dtype=np.int32) for _ in range(4))
    GB = np.zeros(W + 1, dtype=np.uint8)
    tb = np.zeros(max(1, len(q) * W), dtype=np.uint8)
    res = np.zeros(4, dtype=np.int64)
    extend.banded_dp(qa, 0, len(q), genome.packed, genome.nmask, 0, len(ref_text), c0, t, local,
                   scoring["match"], scoring["mismatch"], scoring["gap_open"], scoring["gap_ext"],
                   H, F, HS, FS, GB, tb, 0, do_tb, res)
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
            assert res[0] <= extend.NEG // 2
        else:
            assert tuple(int(v) for v in res) == want, (q, ref, c0, t, local)


def test_the_one_pass_dp_gives_banded_dps_results(rng):
    """banded_scores (the extension's end-to-end and local DPs in one pass) gives banded_dp's
    four results for local=0 and for local=1, on the random cases above and on reads of up to 150 bases
    in wider bands, some of them from two-letter repeats (where paths tie and the start row depends on
    which one is kept)."""
    for trial in range(900):
        q, ref, c0, t = random_case(rng)
        if trial % 3:   # longer reads, wider bands, the read's own diagonal
            t = int(rng.integers(0, 12))
            letters = list("AC" if trial % 3 == 2 else "ACGTN" if rng.random() < 0.3 else "ACGT")
            ref = "".join(rng.choice(letters, size=int(rng.integers(1, 180))))
            n = int(rng.integers(1, 151))
            c0 = int(rng.integers(-2, t + 3))
            q = [int(CODE[ord(ch)]) for ch in (ref[max(c0, 0):max(c0, 0) + n].ljust(n, "C"))]
            q = [c if rng.random() > 0.08 else int(rng.integers(5)) for c in q]
        want = [run_dp(q, ref, c0, t, local)[0].tolist() for local in (0, 1)]
        genome = genome_from_text([ref])
        W = 2 * t + 1
        rows = np.zeros((6, W + 1), dtype=np.int32)
        GB = np.zeros(W + 1, dtype=np.uint8)
        res = np.zeros(7, dtype=np.int64)
        scoring = (SCORING["match"], SCORING["mismatch"], SCORING["gap_open"], SCORING["gap_ext"])
        args = (np.array(q, dtype=np.uint8), 0, len(q), genome.packed, genome.nmask, 0, len(ref), c0, t, *scoring)
        extend.banded_scores(*args, *rows, GB, res)
        assert res[:3].tolist() == want[0][:3] and want[0][3] == 0, (q, ref, c0, t)
        assert res[3:].tolist() == want[1], (q, ref, c0, t)


@pytest.mark.parametrize("local", [0, 1])
def test_traceback_cigar_scores_what_the_dp_scored(local, rng):
    checked = 0
    for _ in range(300):
        q, ref, c0, t = random_case(rng)
        res, tb = run_dp(q, ref, c0, t, local, do_tb=True)
        if res[0] <= extend.NEG // 2 or (local and res[0] == 0):
            continue
        maxops = 2 * len(q) + 2
        ops = np.zeros(3 * maxops, dtype=np.uint8)   # every third slot from 1, as a GPU column would be
        lens = np.zeros(3 * maxops, dtype=np.int32)
        out = np.zeros(4, dtype=np.int64)
        extend.traceback(tb, 0, t, c0, res[1], res[2], ops, lens, 1, 3, out)
        assert not ops[0::3].any() and not ops[2::3].any()
        ops, lens = ops[1::3], lens[1::3]
        cigar = list(zip(ops[:out[0]].tolist(), lens[:out[0]].tolist()))
        refcodes = [int(CODE[ord(ch)]) for ch in ref]
        score, qe, re_ = naive.cigar_score(q, refcodes, int(out[1]), int(out[2]), cigar, **SCORING)
        assert score == res[0]
        assert (qe, re_) == (res[1], res[2])
        if local:
            assert out[1] == res[3]
            assert cigar[0][0] == encode.OP_M and cigar[-1][0] == encode.OP_M
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
        extend.rescue_align(CODE[np.frombuffer(q.encode(), dtype=np.uint8)], 0, n, genome.packed, genome.nmask,
                          0, m, 1, 4, 6, 1, H, E, 0, 1, res)
        assert res[0] == aligner.score(ref, q), (q, ref)


def test_extend_stage_matches_naive_dp(backend, world):
    rng, genome, seqs, index = world
    batch, _ = simulate_reads(rng, seqs, 6, length=40)
    pair_read = np.repeat(np.arange(len(batch)), 2)
    keys = []
    for r in range(len(batch)):
        for _ in range(2):
            strand = int(rng.integers(2))
            keys.append(strand * encode.STRAND_BIT + encode.DIAG_BIAS + int(rng.integers(-5, genome.size)))
    out = backend.extend_stage(batch, genome, pair_read, np.array(keys), P)
    gcodes = genome.codes().tolist()
    for x, (r, key) in enumerate(zip(pair_read, keys)):
        s, e = batch.read_off[r], batch.read_off[r + 1]
        q = (batch.rc_codes if key >= encode.STRAND_BIT else batch.codes)[s:e].tolist()
        ws, c0 = int(out[x, 6]), int(out[x, 7])
        win = np.zeros(4, dtype=np.int64)
        extend.window_of(key, e - s, P.max_indels, genome.offsets, genome.ends, genome.size, win)
        ref = gcodes[ws:ws + int(win[1])]
        for local, cols in ((0, (0, 1)), (1, (2, 3, 4, 5))):
            want = naive.banded_align(q, ref, c0, P.max_indels, local, 1, 4, 6, 1)
            if want[0] == float("-inf"):
                assert out[x, cols[0]] <= extend.NEG // 2
            elif local and out[x, 2] == extend.NEG:   # skipped: end-to-end is within a clip of perfect
                assert out[x, 0] >= (e - s) * P.match - P.clip_penalty
            elif local:
                assert tuple(out[x, list(cols)]) == want
            else:
                assert (out[x, 0], out[x, 1]) == (want[0], want[2])


def test_rescue_stage_matches_full_matrix_smith_waterman(backend, world):
    """Mate rescue's window alignment against an unbanded full-matrix reference (score and end cell),
    on both strands, on windows around the read's true place and on unrelated ones."""
    rng, genome, seqs, index = world
    batch, _ = simulate_reads(rng, seqs, 8, length=30, sub=0.05, indel=0.02)
    task_read, task_strand, task_start, task_len = [], [], [], []
    for r in range(len(batch)):
        for _ in range(2):
            task_read.append(r)
            task_strand.append(int(rng.integers(2)))
            task_start.append(int(rng.integers(0, genome.size - 80)))
            task_len.append(int(rng.integers(0, 80)))
    out = backend.rescue_stage(batch, genome, task_read, task_strand, task_start, task_len, P)
    gcodes = genome.codes().tolist()
    for x, r in enumerate(task_read):
        s, e = batch.read_off[r], batch.read_off[r + 1]
        q = (batch.rc_codes if task_strand[x] else batch.codes)[s:e].tolist()
        ref = gcodes[task_start[x]:task_start[x] + task_len[x]]
        want = naive.local_best(q, ref, P.match, P.mismatch, P.gap_open, P.gap_extend)
        assert tuple(out[x]) == want, (x, q, ref)


def near_exact_world(rng, clipped_ends=False):
    """Contigs where the ungapped shortcut decides often and ties are common: random sequence, a
    tandem repeat with a short period (the read fits several diagonals), and N runs; reads with
    0-3 substitutions (sometimes an indel) on either strand, keys on or near their true diagonal.
    clipped_ends: half the reads get two more substitutions in their last four bases instead, where
    a local alignment may win over an ungapped end-to-end one."""
    period = int(rng.integers(1, 7))
    unit = "".join(rng.choice(list("ACGT"), size=period))
    tandem = list((unit * (400 // period + 1))[:400])
    for x in rng.integers(0, 400, size=3):
        tandem[x] = "ACGT"[rng.integers(4)]
    with_n = list("".join(rng.choice(list("ACGT"), size=300)))
    for x in rng.integers(0, 300, size=4):
        with_n[x] = "N"
    two_letter = "".join(rng.choice(list("AC"), size=300))   # ungapped and gapped alignments tie here
    seqs = ["".join(rng.choice(list("ACGT"), size=300)), "".join(tandem), "".join(with_n), two_letter]
    genome = genome_from_text(seqs)
    names, reads, quals, keys = [], [], [], []
    for i in range(60):
        c = int(rng.integers(len(seqs)))
        n = int(rng.integers(15, 61))
        pos = int(rng.integers(-4, len(seqs[c]) - n + 5))        # a few hang over a contig end
        seg = list(seqs[c][max(pos, 0):pos + n].ljust(n, "A"))
        if clipped_ends and i % 2:
            for x in rng.integers(n - 4, n, size=2):
                seg[x] = "ACGT"[("ACGTN".index(seg[x]) + 1) % 4]
        else:
            for x in rng.integers(0, n, size=int(rng.integers(0, 4))):
                seg[x] = "ACGTN"[rng.integers(5)]
        if rng.random() < 0.15 and not (clipped_ends and i % 2):
            del seg[int(rng.integers(n))]
        read, strand = "".join(seg), int(rng.integers(2))
        if strand:
            read = read.translate({ord(a): b for a, b in zip("ACGTN", "TGCAN")})[::-1]
        names.append(f"r{i}".encode())
        reads.append(read.encode())
        quals.append(b"I" * len(read))
        diag = int(genome.offsets[c]) + pos + int(rng.integers(-2, 3))
        keys.append(strand * encode.STRAND_BIT + encode.DIAG_BIAS + diag)
    from gpualign.reads import encode_reads
    return genome, encode_reads(names, reads, quals, 8), np.array(keys, dtype=np.int64)


@pytest.mark.parametrize("t", [4, 12])   # on the GPU: band rows in shared memory, and (t > NARROW_T) local memory
def test_extend_stage_gives_extend_pairs_rows(backend, rng, t):
    """The backends' extension (open_pair for every pair, then close_pair for the pairs it leaves open,
    which the GPU lists apart) writes extend_pair's rows, the two DPs run one after the other: on pairs
    the ungapped test settles, pairs that need only the local DP and pairs that need both."""
    p = MapParams(max_indels=t)
    W = 2 * t + 2
    kinds = set()
    for _ in range(2):
        genome, batch, near = near_exact_world(rng, clipped_ends=True)
        n = len(batch)
        wrong = encode.DIAG_BIAS + rng.integers(-5, genome.size, size=n) + encode.STRAND_BIT * rng.integers(2, size=n)
        pair_read = np.concatenate([np.arange(n), np.arange(n)])
        pair_key = np.concatenate([near, wrong]).astype(np.int64)
        got = backend.extend_stage(batch, genome, pair_read, pair_key, p)
        want = np.zeros_like(got)
        seen = np.zeros_like(got)
        rows = [np.zeros(W, np.int32) for _ in range(4)]
        GB, tb = np.zeros(W, np.uint8), np.zeros(1, np.uint8)
        args = lambda x: (x, pair_key[x], batch.codes, batch.rc_codes, batch.read_off[pair_read[x]],   # noqa: E731
                          batch.lengths[pair_read[x]], genome.packed, genome.nmask, genome.offsets, genome.ends,
                          genome.size, t, p.match, p.mismatch, p.gap_open, p.gap_extend, p.clip_penalty)
        for x in range(len(pair_read)):
            extend.extend_pair(*args(x), *rows, GB, tb, np.zeros(4, np.int64), np.zeros(4, np.int64), want)
            kinds.add(extend.open_pair(*args(x), np.zeros(4, np.int64), np.zeros(4, np.int64), seen))
        assert np.array_equal(got, want)
    assert kinds == {extend.PAIR_DONE, extend.PAIR_BOTH_DPS, extend.PAIR_LOCAL_DP}


def near_read(rng, m, t_max, n_hi, two_letter, changes, insertions):
    """A read of n < n_hi bases from a reference of m (two-letter sequence at the rate two_letter, where one
    diagonal often ties another or a gapped alignment), with a deletion in half of them (an insertion instead,
    half the time, if insertions), up to `changes` - 1 substitutions or N, and a candidate diagonal c0 within
    three of the true one: (codes, ref, c0, t)."""
    t = int(rng.integers(0, t_max))
    ref = "".join(rng.choice(list("AC" if rng.random() < two_letter else "ACGTN"), size=m))
    n = int(rng.integers(3, n_hi))
    s = int(rng.integers(0, m - n))
    q = list(ref[s:s + n])
    if rng.random() < 0.5:
        x = int(rng.integers(1, n - 1))
        if insertions and rng.random() < 0.5:
            q.insert(x, "ACGT"[rng.integers(4)])
            q.pop()
        else:
            del q[x]
            q.append("ACGT"[rng.integers(4)] if insertions else "A")
    for x in rng.integers(0, n, size=int(rng.integers(0, changes))):
        q[x] = ("ACGN" if insertions else "ACN")[rng.integers(4 if insertions else 3)]
    return [int(CODE[ord(ch)]) for ch in q], ref, s + int(rng.integers(-3, 4)), t


@pytest.mark.parametrize("scoring", [SCORING, dict(match=1, mismatch=4, gap_open=4, gap_ext=1),
                                     dict(match=2, mismatch=3, gap_open=9, gap_ext=2),
                                     dict(match=2, mismatch=8, gap_open=12, gap_ext=2)])
@pytest.mark.parametrize("shortcut", ["ungapped_best", "ungapped_decides"])
def test_ungapped_shortcuts_decide_only_what_the_dp_would(rng, scoring, shortcut):
    """Where ungapped_best (up to ungapped_most mismatches) or ungapped_decides (more, once one_gap_below has
    ruled out every single-gap alignment) decides, its diagonal and score are banded_dp's score and end column:
    short reads with substitutions, N and indels, near contig ends."""
    decided = beyond = 0
    most = extend.ungapped_most(**scoring)
    for _ in range(4000):
        if shortcut == "ungapped_best":
            q, ref, c0, t = near_read(rng, 30, 5, 16, 0.7, 3, insertions=False)
        else:
            q, ref, c0, t = near_read(rng, 40, 6, 25, 0.4, 5, insertions=True)
        n, m = len(q), len(ref)
        res, _ = run_dp(q, ref, c0, t, 0, scoring=scoring)
        genome = genome_from_text([ref])
        got = np.zeros(4, dtype=np.int64)
        qa = np.array(q, dtype=np.uint8)
        if shortcut == "ungapped_best":
            said = extend.ungapped_best(qa, 0, n, 0, m, c0, t, most, genome.packed, genome.nmask, got)
        else:
            said = extend.ungapped_decides(qa, 0, n, 0, m, c0, t, scoring["match"], scoring["mismatch"],
                                           scoring["gap_open"], scoring["gap_ext"], genome.packed, genome.nmask, got)
        if said:
            score = n * scoring["match"] - int(got[1]) * (scoring["match"] + scoring["mismatch"])
            assert (score, int(got[0]) + n) == (res[0], res[2]), (q, ref, c0, t)
            decided += 1
            beyond += int(got[1]) > most
    assert decided > 500
    assert shortcut == "ungapped_best" or beyond > 100


@pytest.mark.parametrize("scoring", [dict(SCORING, clip=5), dict(match=2, mismatch=8, gap_open=12, gap_ext=2, clip=5),
                                     dict(match=1, mismatch=4, gap_open=6, gap_ext=1, clip=1),
                                     dict(match=1, mismatch=2, gap_open=2, gap_ext=1, clip=0),
                                     dict(match=1, mismatch=1, gap_open=10, gap_ext=1, clip=2)])
def test_local_may_win_only_says_no_where_the_local_dp_loses(rng, scoring):
    """Wherever local_may_win says no local alignment can beat the end-to-end score, the local DP's best, less
    the clip penalty per clipped end, is no higher (choose.locus_scores keeps the end-to-end one); reads with
    changes near their ends, where clipping pays, and indels."""
    s = {k: scoring[k] for k in ("match", "mismatch", "gap_open", "gap_ext")}
    spared = 0
    for _ in range(3000):
        m, t = 90, int(rng.integers(0, 5))
        ref = "".join(rng.choice(list("AC" if rng.random() < 0.3 else "ACGTN"), size=m))
        n = int(rng.integers(4, 70))
        st = int(rng.integers(0, m - n))
        q = list(ref[st:st + n])
        for x in rng.integers(0, n, size=int(rng.integers(0, 4))):
            q[x] = "ACGTN"[rng.integers(5)]
        for _ in range(int(rng.integers(0, 3))):    # damage near an end
            x = int(rng.integers(0, 4)) if rng.random() < 0.5 else n - 1 - int(rng.integers(0, 4))
            q[x] = "ACGT"[rng.integers(4)]
        if rng.random() < 0.3:
            del q[int(rng.integers(1, n - 1))]
            q.append("G")
        q = [int(CODE[ord(ch)]) for ch in q]
        c0 = st + int(rng.integers(-3, 4))
        glob, _ = run_dp(q, ref, c0, t, 0, scoring=s)
        if glob[0] <= extend.NEG // 2:
            continue
        genome = genome_from_text([ref])
        if extend.local_may_win(np.array(q, dtype=np.uint8), 0, n, 0, m, c0, t, int(glob[0]), s["match"],
                                s["mismatch"], s["gap_open"], s["gap_ext"], scoring["clip"], genome.packed,
                                genome.nmask):
            continue
        loc, _ = run_dp(q, ref, c0, t, 1, scoring=s)
        clips = int(loc[3] > 0) + int(loc[1] < n)
        assert loc[0] - scoring["clip"] * clips <= glob[0], (q, ref, c0, t)
        spared += bool(extend.local_can_win(int(glob[0]), n, s["match"], scoring["clip"]))
    assert spared > 30    # it says no where the score alone could not


def best_one_gap(q, ref, c0, t, match, mismatch, gap_open, gap_ext):
    """The best semi-global alignment in the band with exactly one gap, by trying every one (slow, plain)."""
    n, m = len(q), len(ref)

    def laid(d, rows):   # score of read rows (0-based) on diagonal d; None where a row leaves the window
        total = 0
        for i in rows:
            if not 0 <= d + i < m:
                return None
            total += match if (q[i] < 4 and "ACGTN".index(ref[d + i]) == q[i]) else -mismatch
        return total

    best = None
    band = range(c0 - t, c0 + t + 1)
    for d1 in band:
        for r in range(n + 1):
            head = laid(d1, range(r))
            if head is None:
                continue
            for d2 in band:
                if d2 > d1 and 1 <= r <= n - 1:     # a deletion of d2 - d1 bases after row r
                    tail = laid(d2, range(r, n))
                    if tail is not None:
                        cand = head + tail - gap_open - gap_ext * (d2 - d1)
                        best = cand if best is None else max(best, cand)
                if d2 < d1 and r + d1 - d2 <= n:   # d1 - d2 read bases inserted after row r
                    tail = laid(d2, range(r + d1 - d2, n))
                    if tail is not None and (r > 0 or 0 <= d1 <= m):
                        cand = head + tail - gap_open - gap_ext * (d1 - d2)
                        best = cand if best is None else max(best, cand)
    return best


def test_one_gap_below_never_rules_out_a_single_gap_alignment_that_reaches_the_score(rng):
    """Against every single-gap alignment tried one by one: when one_gap_below says all score below s, the best
    of them does; and on related reads the bound is tight enough to say so often."""
    said = 0
    for _ in range(1500):
        q, ref, c0, t = random_case(rng)
        n, m = len(q), len(ref)
        if n < 2:
            continue
        want = best_one_gap(q, ref, c0, t, **SCORING)
        genome = genome_from_text([ref])
        for score in range(n - 25, n + 2):
            if extend.one_gap_below(np.array(q, dtype=np.uint8), 0, n, 0, m, c0, t, score, SCORING["match"],
                                    SCORING["mismatch"], SCORING["gap_open"], SCORING["gap_ext"], genome.packed,
                                    genome.nmask):
                assert want is None or want < score, (q, ref, c0, t, score, want)
                said += score <= n - 8
    assert said > 300


@pytest.mark.parametrize("scoring", [dict(match=1, mismatch=4, gap_open=6, gap_extend=1),
                                     dict(match=2, mismatch=2, gap_open=12, gap_extend=2),
                                     dict(match=1, mismatch=4, gap_open=4, gap_extend=1)])   # 1 mismatch ties a gap
@pytest.mark.parametrize("bands", [(1, 6), (11, 14)])   # on the GPU: the traceback DPs' band rows in shared memory,
# and (t > NARROW_T) in local memory
def test_ungapped_shortcut_equals_the_dp(backend, rng, scoring, bands):
    """Extension and traceback skip the DP where the alignment is ungapped for sure
    (extend.ungapped_best; the GPU lists the rows left to a DP apart): their rows and CIGARs must be
    exactly what the DP gives."""
    p = MapParams(max_indels=int(rng.integers(*bands)), **scoring)
    s = dict(match=p.match, mismatch=p.mismatch, gap_open=p.gap_open, gap_ext=p.gap_extend)
    decided = 0
    for _ in range(3):
        genome, batch, keys = near_exact_world(rng)
        reads = np.arange(len(batch))
        out = backend.extend_stage(batch, genome, reads, keys, p)
        ops, lens, trace, (md, md_off, nm) = backend.traceback_stage(batch, genome, reads, keys,
                                                                    np.zeros(len(batch), np.int64), p)
        gtext = "".join("ACGTN"[c] for c in genome.codes())
        for x, key in enumerate(keys):
            s0, e0 = batch.read_off[x], batch.read_off[x + 1]
            q = (batch.rc_codes if key >= encode.STRAND_BIT else batch.codes)[s0:e0].tolist()
            ws, c0 = int(out[x, extend.EXT_WINDOW]), int(out[x, extend.EXT_C0])
            win = np.zeros(4, dtype=np.int64)
            extend.window_of(key, len(q), p.max_indels, genome.offsets, genome.ends, genome.size, win)
            res, tb = run_dp(q, gtext[ws:ws + int(win[1])], c0, p.max_indels, 0, do_tb=True, scoring=s)
            assert (out[x, extend.EXT_SCORE], out[x, extend.EXT_END_COL]) == (res[0], res[2]), x
            got = np.zeros(4, dtype=np.int64)
            decided += bool(extend.ungapped_best(np.array(q, dtype=np.uint8), 0, len(q), ws, int(win[1]), c0,
                                                 p.max_indels, extend.ungapped_most(**s), genome.packed,
                                                 genome.nmask, got))
            if res[0] <= extend.NEG // 2:
                continue
            assert tuple(trace[x, [extend.TR_SCORE, extend.TR_END_ROW, extend.TR_END_COL]]) == (res[0], res[1], res[2])
            want_ops, want_lens = np.zeros(2 * len(q) + 2, np.uint8), np.zeros(2 * len(q) + 2, np.int32)
            tr = np.zeros(4, dtype=np.int64)
            extend.traceback(tb, 0, p.max_indels, c0, res[1], res[2], want_ops, want_lens, 0, 1, tr)
            nops = int(tr[0])
            assert trace[x, extend.TR_NOPS] == nops
            assert (trace[x, extend.TR_READ_START], trace[x, extend.TR_REF_START]) == (tr[1], ws + tr[2])
            assert ops[x, :nops].tolist() == want_ops[:nops].tolist()
            assert lens[x, :nops].tolist() == want_lens[:nops].tolist()
            # the row's MD and NM, made beside the traceback (md.py; on the GPU, cuda_kernels._md_kernel)
            cigar = full_cigar(ops[x], lens[x], nops, int(tr[1]), int(res[1]), len(q))
            want_md = naive.md_nm(q, genome.codes()[ws + int(tr[2]):], cigar)
            assert (bytes(md[md_off[x]:md_off[x + 1]]).decode(), nm[x]) == want_md, x
            assert md_off[x + 1] - md_off[x] <= md_bound(1, len(q), p.max_indels)
    assert decided > 20   # the shortcut was taken, not only the DP


@pytest.mark.parametrize("threads", [1, 3, 8])
def test_the_gpus_rescue_gives_rescue_aligns_results(monkeypatch, rng, threads):
    """cuda.rescue_stage (a block a task: stripes of rows a column apart, rescue_block.py) against
    extend.rescue_align on the host: score, row and column of the first maximum, for reads shorter
    than the block, N in read and window, two-letter repeats (tied maxima), and more tasks than blocks."""
    from gpualign.backends import cuda, launch
    from gpualign.reads import encode_reads
    monkeypatch.setattr(launch, "RESCUE_THREADS", threads)
    monkeypatch.setattr(cuda, "RESCUE_BLOCKS", 5)
    text = "".join(rng.choice(list("ACGT"), size=700)) + "AC" * 60 + "".join(rng.choice(list("ACGTN"), size=200))
    genome = genome_from_text([text])
    seqs = []
    for i in range(14):
        n = int(rng.integers(1, 60))
        p = int(rng.integers(0, len(text) - n))
        s = list(text[p:p + n].replace("N", "A"))
        for _ in range(int(rng.integers(0, 4))):   # substitutions and an N now and then
            s[int(rng.integers(n))] = str(rng.choice(list("ACGTN")))
        seqs.append("".join(s).encode())
    reads = encode_reads([f"r{i}".encode() for i in range(len(seqs))], seqs, [b"I" * len(s) for s in seqs], 8)
    m = 20
    task_read = rng.integers(0, len(seqs), size=m)
    task_strand = rng.integers(0, 2, size=m)
    task_len = rng.integers(1, 150, size=m)
    task_start = np.array([int(rng.integers(0, len(text) - w)) for w in task_len])
    task_start[:3] = 700   # the repeat: many equal maxima
    got = cuda.rescue_stage(reads, genome, task_read, task_strand, task_start, task_len, P)
    for x in range(m):
        r = task_read[x]
        q = reads.rc_codes if task_strand[x] == 1 else reads.codes
        n = reads.read_off[r + 1] - reads.read_off[r]
        want = np.zeros(3, dtype=np.int64)
        H, E = np.empty(n + 1, dtype=np.int32), np.empty(n + 1, dtype=np.int32)
        extend.rescue_align(q, reads.read_off[r], n, genome.packed, genome.nmask, task_start[x], task_len[x],
                            P.match, P.mismatch, P.gap_open, P.gap_extend, H, E, 0, 1, want)
        assert got[x].tolist() == want.tolist(), x
    assert (got[:, 0] > 0).sum() >= m // 2   # not a vacuous comparison
