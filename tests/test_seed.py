"""Seeding (seed.py): exact match, seed hits, candidate voting and re-seeding, on both backends
(cpu, and cuda in numba's simulator) against the naive references of naive.py."""

import dataclasses

import numpy as np
import pytest

from gpualign import encode, seed
from gpualign.backends import cpu
from gpualign.extend import NEG
from gpualign.options import MapParams
from gpualign.reads import encode_reads
from gpualign.seed import reseed_incomplete, search_incomplete

import naive
from helpers import simulate_reads

P = MapParams(max_indels=3, max_candidates=4, max_hits=256)


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
        at = seed.merge_sort_runs(a, off, n, off + n)
        assert at in (off, off + n)
        assert np.array_equal(a[at:at + n], np.sort(vals))
        assert np.array_equal(np.concatenate([a[:off], a[off + 2 * n:]]), outside)


def test_exact_stage_finds_every_occurrence(backend, world):
    rng, genome, seqs, index = world
    text = "".join(seqs)
    names, reads, quals = [], [], []
    for i in range(12):
        p = int(rng.integers(0, len(text) - 40))
        r = text[p:p + int(rng.integers(20, 40))]
        if i % 3 == 0:
            r = r[:10] + ("A" if r[10] != "A" else "C") + r[11:]
        names.append(f"r{i}".encode())
        reads.append(r.encode())
        quals.append(b"I" * len(r))
    # inside the repeat (seqs[0][:120] is copied at 240): two exact copies, unless the random N run
    # fell on one, so take a 30-mer that is N-free in both
    start = next(o for o in range(0, 91) if "N" not in seqs[0][o:o + 30] + seqs[0][240 + o:270 + o])
    reads.append(seqs[0][start:start + 30].encode())
    names.append(b"rep")
    quals.append(b"I" * 30)
    batch = encode_reads(names, reads, quals, 8)
    counts, keys = backend.exact_stage(batch, genome, index, P)
    gcodes = genome.codes()
    bounds = list(zip(genome.offsets.tolist(), genome.ends.tolist()))
    for r in range(len(batch)):
        s, e = batch.read_off[r], batch.read_off[r + 1]
        want = [encode.DIAG_BIAS + p for p in naive.exact_occurrences(gcodes, bounds, batch.codes[s:e])]
        want += [encode.STRAND_BIT + encode.DIAG_BIAS + p for p in naive.exact_occurrences(gcodes, bounds, batch.rc_codes[s:e])]
        assert counts[r] == len(want)
        assert keys[r, :min(len(want), P.max_exact)].tolist() == want[:P.max_exact]
    assert counts[-1] >= 2


def test_candidates_contain_the_true_locus(backend, world):
    rng, genome, seqs, index = world
    batch, (names, _, _) = simulate_reads(rng, seqs, 10, length=50, sub=0.01, indel=0.0)
    ncand, keys, votes, _ = backend.candidate_stage(batch, np.arange(len(batch)), index, P)
    for r, name in enumerate(names):
        _, contig, pos, strand = name.decode().split(":")
        true = int(genome.offsets[int(contig[3:]) - 1]) + int(pos) - 1
        diags = [int(k) - (encode.STRAND_BIT if k >= encode.STRAND_BIT else 0) - encode.DIAG_BIAS for k in keys[r, :ncand[r]]]
        strands = [int(k >= encode.STRAND_BIT) for k in keys[r, :ncand[r]]]
        assert any(abs(d - true) <= P.max_indels and s == (strand == "-") for d, s in zip(diags, strands)), name
        assert list(votes[r, :ncand[r]]) == sorted(votes[r, :ncand[r]], reverse=True)


def test_candidate_stage_matches_naive_voting(backend, world):
    rng, genome, seqs, index = world
    batch, _ = simulate_reads(rng, seqs, 10, length=int(rng.integers(30, 70)), sub=0.05, n_rate=0.02)
    p = MapParams(max_indels=3, max_candidates=4, max_hits=10)   # a small budget, so it binds
    ncand, keys, votes, dropped = backend.candidate_stage(batch, np.arange(len(batch)), index, p)
    for r in range(len(batch)):
        s, e = batch.read_off[r], batch.read_off[r + 1]
        want, want_dropped = naive.candidates(batch.codes[s:e], batch.rc_codes[s:e], 8, index.offsets, index.positions,
                                index.max_occ, p.max_indels, p.max_hits, p.max_candidates,
                                encode.STRAND_BIT, encode.DIAG_BIAS)
        assert list(zip(keys[r, :ncand[r]].tolist(), votes[r, :ncand[r]].tolist())) == want
        assert dropped[r] == want_dropped


@pytest.mark.seed(13)   # an input whose repeat reads leave some searches incomplete (not every draw does)
def test_incomplete_searches_are_redone_with_a_wider_budget(world):
    rng, genome, seqs, index = world
    _, (names, reads, quals) = simulate_reads(rng, seqs, 20, length=60, sub=0.02)
    # reads from the repeat (seqs[0][:120] is copied at 240) with one substitution: two loci, no
    # exact hit, so one kept candidate leaves an equally supported one out
    for o in range(0, 61, 6):
        piece = seqs[0][o:o + 60]
        if "N" in piece + seqs[0][240 + o:300 + o]:
            continue
        reads.append((piece[:30] + "ACGT"[("ACGT".index(piece[30]) + 1) % 4] + piece[31:]).encode())
        names.append(f"rep{o}".encode())
        quals.append(b"I" * 60)
    batch = encode_reads(names, reads, quals, 8)
    p = MapParams(max_indels=3, max_candidates=1, max_hits=12)
    counts, _ = cpu.exact_stage(batch, genome, index, p)
    need = np.flatnonzero(counts < 2)
    first = cpu.candidate_stage(batch, need, index, p)
    redo = np.flatnonzero(search_incomplete(len(batch), need, first[2], first[3], counts)[need])
    assert len(redo) > 0   # the tight budget leaves some searches incomplete
    ncand, keys, votes, dropped = reseed_incomplete(batch, need, counts, index, p, cpu, *first)
    tn = p.tuning
    wide = MapParams(max_indels=3, max_candidates=1 * tn.reseed_candidates, max_hits=12 * tn.reseed_hits)
    deep = dataclasses.replace(index, max_occ=index.max_occ * tn.reseed_occ)
    want = cpu.candidate_stage(batch, need[redo], deep, wide)
    assert np.array_equal(ncand[redo], want[0]) and np.array_equal(keys[redo], want[1])
    assert np.array_equal(votes[redo], want[2]) and np.array_equal(dropped[redo], want[3])
    kept = np.setdiff1d(np.arange(len(need)), redo)
    assert np.array_equal(ncand[kept], first[0][kept]) and np.array_equal(keys[kept, :1], first[1][kept])


def test_unseen_score_is_the_best_the_votes_allow(rng):
    """seed.unseen_score against naive.naive_unseen_score's brute force over the seed windows a left-out
    locus may lack: never below what such a locus could score (the MAPQ would overstate a placement),
    and exactly it; n divisible by k or not (the last window overlaps the one before or not), best
    votes above the seed count (tandem hits), and searches that left nothing well supported out."""
    cases = {"neg": 0, "overlap": 0, "disjoint": 0, "tandem": 0}
    for _ in range(400):
        k = int(rng.integers(3, 7))
        n = k * int(rng.integers(1, 7)) + int(rng.choice([0, int(rng.integers(1, k))]))
        seeds = (n + k - 1) // k
        best_votes = int(rng.integers(1, seeds + 3))
        dropped = int(rng.integers(0, best_votes + 1) if rng.random() < 0.3 else rng.integers(best_votes // 2, best_votes + 1))
        exact = int(rng.choice([0, 0, 0, 1]))
        match, cost = int(rng.integers(1, 3)), int(rng.integers(1, 8))
        want = naive.naive_unseen_score(dropped, best_votes, exact, n, k, match, cost)
        got = seed.unseen_score(dropped, best_votes, exact, n, k, match, cost)
        assert got == (NEG if want is None else want), (dropped, best_votes, exact, n, k, match, cost)
        if want is None:
            cases["neg"] += 1
        else:
            cases["overlap" if n % k else "disjoint"] += min(best_votes, seeds) - dropped >= 2
            cases["tandem"] += best_votes > seeds
    assert min(cases.values()) >= 5, cases


def test_edit_cost_is_the_cheapest_edit():
    assert seed.edit_cost(MapParams()) == 5                                  # a mismatch: 1 + 4
    assert seed.edit_cost(MapParams(gap_open=1, gap_extend=1)) == 2         # a one-base gap
    assert seed.edit_cost(MapParams(clip_penalty=0)) == 1                   # clipping the end base
