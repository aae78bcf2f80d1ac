"""The choice of each read's placement (choose.py) against naive.py's, on seeded random extension
rows: competing scores and shadowed loci, the pick among ties, XS, MAPQ, unmapped reads."""

import contextlib
import dataclasses

import numpy as np
import pytest

from gpualign.choose import Loci, choose_one, locus_scores, loci_of, mapq_of, place_multi_exact, single_end_choice
from gpualign.encode import DIAG_BIAS, STRAND_BIT
from gpualign.extend import EXT_C0, EXT_COLUMNS, EXT_END_COL, EXT_LOCAL_END_COL, EXT_LOCAL_END_ROW, \
    EXT_LOCAL_SCORE, EXT_LOCAL_START_ROW, EXT_SCORE, EXT_WINDOW, NEG, local_can_win
from gpualign.options import MapParams

import naive

ROUNDS = 6          # scoring options drawn per test
READS = 250         # reads per round


def random_options(rng) -> MapParams:
    match = int(rng.integers(1, 3))
    return MapParams(max_indels=int(rng.integers(0, 7)), match=match, mismatch=int(rng.integers(1, 6)),
                     clip_penalty=int(rng.integers(0, 7)), min_score=int(rng.integers(0, 70)) * match)


@dataclasses.dataclass
class Candidates:
    """Reads' candidates as the mapper hands them to the choice: grouped by read."""
    name_hash: np.ndarray   # uint32 per read
    lengths: np.ndarray     # int64 per read
    unseen: np.ndarray      # int64 per read: the most a locus left out of its search could score, NEG: none
    start: np.ndarray       # int64 [reads + 1]
    key: np.ndarray         # int64 per candidate
    ext: np.ndarray         # int64 [candidates, EXT_COLUMNS]

    def __len__(self):      # what single_end_choice asks of a batch: len and name_hash
        return len(self.name_hash)

    def of(self, r):
        return range(self.start[r], self.start[r + 1])


def random_candidates(rng, p: MapParams, nreads=READS) -> Candidates:
    """Extension rows as extend_pair writes them, drawn so that choices are often close: scores from
    a few tiers (ties), candidates on both strands at diagonals near each other (shadowing), local
    alignments within a few points of end-to-end plus the clip penalties, uncomputed end-to-end
    scores, skipped local alignments, reads with no candidates, incomplete searches (an unseen locus
    scoring at most a full match less 0-5 mismatches: above, equal to or below the loci found)."""
    t, m = p.max_indels, p.match
    spread = 8 * t + 8
    lengths, start, keys, rows = [], [0], [], []
    for _ in range(nreads):
        n = int(rng.integers(20, 101))
        lengths.append(n)
        home = int(rng.integers(spread, 100_000))
        ncand = int(rng.choice([0, 0, 1, 1, 2, 3, 4, 6, 9]))
        for spot in rng.choice(2 * spread, size=ncand, replace=False):   # distinct (strand, diagonal)
            strand, diag = divmod(int(spot), spread)
            diag += home - spread // 2
            keys.append(strand * STRAND_BIT + diag + DIAG_BIAS)
            row = np.zeros(EXT_COLUMNS, dtype=np.int64)
            row[EXT_WINDOW] = diag - int(rng.integers(0, t + 1))   # clipped at a contig start, or not
            row[EXT_C0] = diag - row[EXT_WINDOW]
            if rng.random() < 0.05:
                g = NEG   # nothing to align against
            else:
                g = n * m - (m + p.mismatch) * int(rng.integers(0, 4)) - int(rng.choice([0, 0, 0, 7]))
            row[EXT_SCORE] = g
            row[EXT_END_COL] = max(1, row[EXT_C0] + n + int(rng.integers(-2, 3)))
            if local_can_win(g, n, m, p.clip_penalty) and rng.random() < 0.9:
                qs = int(rng.choice([0, 0, 0, 1, 2, 5]))
                qe = n - int(rng.choice([0, 0, 0, 1, 3, 7]))
                clips = (qs > 0) + (qe < n)
                near = g + p.clip_penalty * clips if g > NEG // 2 else int(rng.integers(0, n * m))
                row[EXT_LOCAL_SCORE] = min(max(0, near + int(rng.integers(-2, 3))), (qe - qs) * m)
                row[EXT_LOCAL_START_ROW] = qs
                row[EXT_LOCAL_END_ROW] = qe
                row[EXT_LOCAL_END_COL] = max(1, row[EXT_END_COL] - (n - qe) + int(rng.integers(-1, 2)))
            else:   # extend.skip_local: not computed
                row[[EXT_LOCAL_SCORE, EXT_LOCAL_END_ROW, EXT_LOCAL_END_COL, EXT_LOCAL_START_ROW]] = NEG, n, 0, 0
            rows.append(row)
        start.append(len(keys))
    lengths = np.array(lengths, dtype=np.int64)
    unseen = np.where(rng.random(nreads) < 0.25, lengths * m - (m + p.mismatch) * rng.integers(0, 6, nreads), NEG)
    return Candidates(name_hash=rng.integers(0, 1 << 32, size=nreads, dtype=np.uint64).astype(np.uint32),
                      lengths=lengths, unseen=unseen,
                      start=np.array(start, dtype=np.int64), key=np.array(keys, dtype=np.int64),
                      ext=np.array(rows, dtype=np.int64).reshape(-1, EXT_COLUMNS))


def naive_loci_of(c: Candidates, r, p: MapParams):
    """naive.naive_loci of read r, its extension rows read by column name."""
    cands = [dict(strand=int(c.key[x] >= STRAND_BIT), score=int(c.ext[x, EXT_SCORE]),
                  end_col=int(c.ext[x, EXT_END_COL]), local_score=int(c.ext[x, EXT_LOCAL_SCORE]),
                  local_start_row=int(c.ext[x, EXT_LOCAL_START_ROW]), local_end_row=int(c.ext[x, EXT_LOCAL_END_ROW]),
                  local_end_col=int(c.ext[x, EXT_LOCAL_END_COL]), window=int(c.ext[x, EXT_WINDOW]))
             for x in c.of(r)]
    return naive.naive_loci(cands, int(c.lengths[r]), p.max_indels, p.clip_penalty, NEG // 2)


def all_loci_fast(c: Candidates, p):
    """(eff, raw, loc, span, keep, end or None) of every candidate, the way the mapper gets them."""
    return (*loci_of(c.start, c.key, c.ext, c.lengths, p), None)


def locus_scores_fast(c: Candidates, p):
    """locus_scores read by read, each written at an offset into larger outputs."""
    m, pad = len(c.key), 3
    out = [np.full(m, -7, dtype=np.int64) for _ in range(5)] + [np.zeros(m, dtype=np.bool_)]
    for r in range(len(c)):
        a, b = c.start[r], c.start[r + 1]
        part = [np.full(b - a + 2 * pad, -7, dtype=np.int64) for _ in range(5)] + [np.ones(b - a + 2 * pad, np.bool_)]
        locus_scores(a, b, c.lengths[r], c.key, c.ext, p.max_indels, p.clip_penalty, *part, pad)
        for whole, piece, unset in zip(out, part, [-7] * 5 + [True]):
            whole[a:b] = piece[pad:pad + b - a]
            assert (piece[:pad] == unset).all() and (piece[pad + b - a:] == unset).all(), "wrote outside its rows"
    eff, raw, loc, end, span, keep = out
    return eff, raw, loc, span, keep, end


@pytest.mark.parametrize("fast", [all_loci_fast, locus_scores_fast], ids=["all_loci", "locus_scores"])
def test_loci_match_naive(rng, fast):
    seen = {"local": 0, "shadowed": 0}
    for _ in range(ROUNDS):
        p = random_options(rng)
        c = random_candidates(rng, p)
        eff, raw, loc, span, keep, end = fast(c, p)
        for r in range(len(c)):
            want = naive_loci_of(c, r, p)
            for x, w in zip(c.of(r), want):
                got = dict(eff=eff[x], raw=raw[x], loc=loc[x], span=span[x], keep=bool(keep[x]))
                if end is not None:
                    got["end"] = end[x]
                assert got == {f: w[f] for f in got}, f"read {r} candidate {x - c.start[r]} of {p}"
                seen["local"] += w["loc"]
                seen["shadowed"] += not w["keep"]
    assert min(seen.values()) > 50, seen   # the inputs exercise both rules


def choice_arrays(c: Candidates, p):
    """naive loci of every candidate as the Loci arrays choose() takes (so that the choice is tested
    on its own), with the naive loci per read."""
    per_read = [naive_loci_of(c, r, p) for r in range(len(c))]
    flat = [locus for loci in per_read for locus in loci]
    col = lambda f, dt=np.int64: np.array([locus[f] for locus in flat], dtype=dt)  # noqa: E731
    return Loci(col("eff"), col("raw"), col("loc"), col("span"), col("keep", np.bool_)), per_read


def single_end_choice_fast(c: Candidates, loci: Loci, p):
    return single_end_choice(c, c.start, c.key, loci, c.unseen, p, lambda stage: contextlib.nullcontext())


def choose_one_fast(c: Candidates, loci: Loci, p):
    """choose_one read by read, in reverse order."""
    n = len(c)
    out = [np.full(n, -9, dtype=np.int64) for _ in range(5)]
    for r in reversed(range(n)):
        choose_one(r, c.name_hash, c.start, c.key, *loci, c.unseen, p.match, p.mismatch, p.min_score, *out)
        if out[0][r] == -1:   # an unmapped read's other outputs are left as they were
            for o, unset in zip(out[1:], (0, 0, -1, 0)):
                o[r] = unset
    return out


@pytest.mark.parametrize("fast", [single_end_choice_fast, choose_one_fast], ids=["single_end_choice", "choose_one"])
def test_choice_matches_naive(rng, fast):
    seen = {"unmapped": 0, "tied": 0, "unique": 0, "xs": 0, "mapq>0": 0, "no candidates": 0,
            "unseen lowers mapq": 0, "unseen leaves mapq": 0}
    for _ in range(ROUNDS):
        p = random_options(rng)
        c = random_candidates(rng, p)
        loci, per_read = choice_arrays(c, p)
        key, local, score, sub, mapq = fast(c, loci, p)
        for r in range(len(c)):
            keys = [int(k) for k in c.key[c.of(r)]]
            unseen = None if c.unseen[r] == NEG else int(c.unseen[r])
            want = naive.naive_choice(per_read[r], keys, c.name_hash[r], unseen,
                                      p.match, p.mismatch, p.min_score)
            got = tuple(int(v[r]) for v in (key, local, score, sub, mapq))
            assert got == want, f"read {r} of {p}: (key, local, AS, XS, MAPQ)"
            best = max((locus["eff"] for locus in per_read[r] if locus["keep"]), default=None)
            ties = sum(locus["keep"] and locus["eff"] == best for locus in per_read[r])
            seen["unmapped"] += want[0] == -1
            seen["no candidates"] += not keys
            seen["tied"] += want[0] != -1 and ties > 1
            seen["unique"] += want[0] != -1 and ties == 1
            seen["xs"] += want[3] != -1
            seen["mapq>0"] += want[4] > 0
            if unseen is not None and want[0] != -1 and ties == 1:
                alone = naive.naive_choice(per_read[r], keys, c.name_hash[r], None, p.match, p.mismatch, p.min_score)
                seen["unseen lowers mapq"] += want[4] < alone[4]
                seen["unseen leaves mapq"] += 0 < want[4] == alone[4]
    assert min(seen.values()) > 30, seen


def test_tie_pick_follows_key_order_not_candidate_order(rng):
    """Equal loci listed in any order: the read-name hash picks the same one."""
    p = MapParams(max_indels=2, min_score=10)
    n, ncand = 50, 5
    keys = np.sort(rng.choice(1 << 16, size=ncand, replace=False) * 100 + DIAG_BIAS).astype(np.int64)
    picks = set()
    for _ in range(10):
        order = rng.permutation(ncand)
        ext = np.zeros((ncand, EXT_COLUMNS), dtype=np.int64)
        ext[:, EXT_SCORE] = n
        ext[:, EXT_END_COL] = n
        ext[:, EXT_WINDOW] = keys[order] - DIAG_BIAS
        ext[:, [EXT_LOCAL_SCORE, EXT_LOCAL_END_ROW]] = NEG, n
        c = Candidates(np.array([12347], dtype=np.uint32), np.array([n]), np.array([NEG]),
                       np.array([0, ncand]), keys[order].copy(), ext)
        choice = single_end_choice_fast(c, Loci(*all_loci_fast(c, p)[:5]), p)
        assert choice.mapq[0] == 0 and choice.sub[0] == n
        picks.add(int(choice.key[0]))
    assert picks == {int(keys[12347 % ncand])}


def test_mapq_of_matches_naive(rng):
    cases = 0
    for _ in range(4000):
        match, mismatch = int(rng.integers(1, 4)), int(rng.integers(1, 7))
        min_score = int(rng.integers(0, 80))
        aligned = int(rng.choice([0, int(rng.integers(1, 151))]))
        score = aligned * match - (match + mismatch) * int(rng.integers(0, 40)) - int(rng.integers(0, 3))
        best = int(rng.integers(min_score, min_score + 60))
        second = None if rng.random() < 0.3 else best - int(rng.integers(0, 40))
        nties = int(rng.choice([1, 1, 1, 2, 3]))
        got = mapq_of(best, NEG if second is None else second, nties, score, aligned, match, mismatch, min_score)
        want = naive.naive_mapq(best, second, nties, score, aligned, match, mismatch, min_score)
        assert got == want, (best, second, nties, score, aligned, match, mismatch, min_score)
        cases += 0 < want < 60
    assert cases > 1000
    # the docstring's example: a lead of one mismatch (5 points at match 1, mismatch 4) gives 30
    assert mapq_of(60, 55, 1, 60, 60, 1, 4, 30) == naive.naive_mapq(60, 55, 1, 60, 60, 1, 4, 30) == 30


def test_place_multi_exact_matches_naive(rng):
    n, max_exact, match = 200, 4, int(rng.integers(1, 3))
    counts = rng.choice([0, 1, 2, 3, 4, 5, 9], size=n).astype(np.int64)
    ekeys = rng.integers(DIAG_BIAS, STRAND_BIT * 2, size=(n, max_exact), dtype=np.int64)
    name_hash = rng.integers(0, 1 << 32, size=n, dtype=np.uint64).astype(np.uint32)
    lengths = rng.integers(20, 150, size=n).astype(np.int64)
    before = [rng.integers(-1, 100, size=n).astype(np.int64) for _ in range(5)]
    out = [b.copy() for b in before]
    place_multi_exact(counts, ekeys, name_hash, lengths, max_exact, match, *out)
    for r in range(n):
        want = naive.naive_multi_exact(int(counts[r]), ekeys[r].tolist(), name_hash[r], int(lengths[r]), max_exact,
                                       match)
        got = tuple(int(o[r]) for o in out)
        assert got == (want or tuple(int(b[r]) for b in before)), f"read {r}, {counts[r]} exact matches"
