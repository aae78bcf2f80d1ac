"""Paired-end mapping: insert-size estimate, pair choice, mate rescue, and the same records whatever
the backend (cpu, and cuda in numba's simulator) or the batch size."""

import numpy as np
import pysam
import pytest

from gpualign import pairing
from gpualign.encode import DIAG_BIAS, STRAND_BIT
from gpualign.extend import NEG, TR_REF_START
from gpualign.index import build_index
from gpualign.mapper import map_batch, map_pair_batch, map_reads
from gpualign.options import TUNING, MapParams, Tuning
from gpualign.reads import encode_reads, subset

import naive
from helpers import COMP, random_genome, simulate_pairs

# estimate blocks of 24 fragments (an estimate from 8), so tiny inputs hold several
P = MapParams(max_indels=3, max_candidates=4, max_hits=256, tuning=Tuning(insert_block=24, min_fragments=8))


@pytest.fixture
def world(rng):
    genome, seqs = random_genome(rng, lengths=(4000, 2500), repeat=0)
    return rng, genome, seqs, build_index(genome, k=8, max_occ=50)


def bam_records(path):
    with pysam.AlignmentFile(str(path), check_sq=False) as bam:
        return [r.to_string() for r in bam]


def true_starts(name):
    _, contig, s1, s2 = name.split(":")
    return contig, int(s1) - 1, int(s2) - 1


def test_insert_estimate_recovers_mean_and_sd_despite_outliers(rng):
    n = 2000
    inserts = rng.normal(350, 30, size=n).astype(np.int64)
    inserts[:40] = rng.integers(2000, 50000, size=40)   # chimeras and the like
    length = 100
    lengths = np.full(2 * n, length, dtype=np.int64)
    key = np.empty(2 * n, dtype=np.int64)
    starts = rng.integers(1000, 10_000_000, size=n)
    key[0::2] = starts + DIAG_BIAS                                          # R1 forward
    key[1::2] = STRAND_BIT + starts + inserts - length + DIAG_BIAS     # R2 reverse, ends the fragment
    mapq = np.full(2 * n, 60, dtype=np.int64)
    mapq[2 * 5] = 0                                                              # not confident: left out
    unseen = np.full(2 * n, NEG, dtype=np.int64)
    unseen[2 * 7 + 1] = length - 10                                              # its search left a locus out: too
    stats = pairing.insert_estimates(key, mapq, unseen, lengths,
                                     np.array([0], dtype=np.int64), np.array([0, n], dtype=np.int64), TUNING)
    valid, mean, sd, low, high, count = stats[0]
    assert valid == 1 and count == n - 2
    assert mean == pytest.approx(350, abs=4) and sd == pytest.approx(30, rel=0.15)
    used = np.sort(np.delete(inserts, [5, 7]))
    q1, q3 = used[(len(used) - 1) // 4], used[3 * (len(used) - 1) // 4]
    assert low == pytest.approx(min(mean - 4 * sd, q1 - 3 * (q3 - q1)), abs=1)   # the wider of the two, as bwa
    assert high == pytest.approx(max(mean + 4 * sd, q3 + 3 * (q3 - q1)), abs=1)
    # too few fragments: no estimate
    few = pairing.insert_estimates(key[:20], mapq[:20], unseen[:20], lengths[:20],
                                   np.array([0], dtype=np.int64), np.array([0, 10], dtype=np.int64), TUNING)
    assert few[0, 0] == 0


def test_fr_insert_and_penalty():
    c_off = np.array([0, 1000], dtype=np.int64)
    fwd = 100 + DIAG_BIAS
    rev = STRAND_BIT + 400 + DIAG_BIAS
    assert pairing.fr_insert(fwd, 50, rev, 50, c_off, TUNING.max_fragment) == 350 == pairing.fr_insert(rev, 50, fwd, 50, c_off, TUNING.max_fragment)
    assert pairing.fr_insert(fwd, 50, fwd + 300, 50, c_off, TUNING.max_fragment) == -1             # same strand
    assert pairing.fr_insert(rev - 400, 50, fwd, 50, c_off, TUNING.max_fragment) == -1             # RF: reverse mate ends first
    assert pairing.fr_insert(fwd + 850, 50, rev + 700, 50, c_off, TUNING.max_fragment) == -1       # across two contigs
    pens = [pairing.insert_penalty(300 + d, 300.0, 20.0, 1) for d in (0, 20, 40, 60, 80)]
    assert pens[0] == 0 and pens == sorted(pens) and pens[-1] == 7


def mapped_positions(batch, res, genome):
    """Per read: (contig, leftmost reference position) or None, from a BatchResult."""
    out = [None] * len(batch)
    for row, r in enumerate(res.mapped):
        g = int(res.trace[row, TR_REF_START])
        c = int(np.searchsorted(genome.offsets, g, side="right") - 1)
        out[r] = (f"chr{c + 1}", g - int(genome.offsets[c]))
    return out


def test_pairs_are_placed_together_and_flagged_proper(backend, world):  # noqa: F811
    rng, genome, seqs, index = world
    batch, (names, _, _) = simulate_pairs(rng, seqs, 72, length=50, insert=(250, 25))
    res = map_pair_batch(batch, genome, index, P, backend)
    assert res.inserts[:, pairing.VALID].all()
    assert res.inserts[0, pairing.MEAN] == pytest.approx(250, abs=25)
    placed = mapped_positions(batch, res, genome)
    right = 0
    for r in range(len(batch)):
        contig, s1, s2 = true_starts(names[r].decode())
        truth = (contig, s1 if r % 2 == 0 else s2)
        right += placed[r] is not None and placed[r][0] == truth[0] and abs(placed[r][1] - truth[1]) <= 5
    assert right >= 0.95 * len(batch)
    assert np.count_nonzero(res.proper) >= 0.9 * len(batch)
    assert np.array_equal(res.proper[0::2], res.proper[1::2])   # a pair is proper as a whole


def test_mate_rescue_places_a_mate_that_has_no_seed(backend, world):  # noqa: F811
    """R2 of fragment 0 has a mismatch every 8th base, so it holds no exact 8-mer at all: only the
    rescue's Smith-Waterman over the insert window can place it, next to its mate."""
    rng, genome, seqs, index = world
    batch, (names, reads, quals) = simulate_pairs(rng, seqs, 40, length=100, insert=(300, 20), sub=0.0, indel=0.0)
    r2 = list(reads[1].decode())
    for i in range(3, len(r2), 8):
        r2[i] = "ACGT"[("ACGT".index(r2[i]) + 1) % 4]
    reads = [reads[0], "".join(r2).encode()] + reads[2:]
    batch = encode_reads(names, reads, quals, 8)
    alone = map_batch(subset(batch, 1, 2), genome, index, P, backend)
    assert len(alone.mapped) == 0                     # on its own it cannot be placed
    res = map_pair_batch(batch, genome, index, P, backend)
    placed = mapped_positions(batch, res, genome)
    contig, s1, s2 = true_starts(names[0].decode())
    assert placed[1] is not None and placed[1][0] == contig and abs(placed[1][1] - s2) <= 3
    assert res.proper[0] == res.proper[1] == 1


def test_the_mate_picks_the_right_copy_of_a_repeat(backend, rng):  # noqa: F811
    """R1 lies in an exact repeat (two copies); R2 is unique: the pair picks the copy R2 is beside,
    with a MAPQ the single-end read (a coin toss at MAPQ 0) could not have."""
    unit = "".join(rng.choice(list("ACGT"), size=400))
    text = "".join(rng.choice(list("ACGT"), size=6000))
    text = text[:1000] + unit + text[1400:4000] + unit + text[4400:]
    from helpers import genome_from_text
    genome = genome_from_text([text])
    index = build_index(genome, k=8, max_occ=50)
    batch, (names, reads, quals) = simulate_pairs(rng, [text], 40, length=50, insert=(300, 20), sub=0.0, indel=0.0)
    # fragment 0: R1 forward inside the second copy [4000, 4400), R2 reverse past it (unique)
    names[0] = names[1] = b"rep:chr1:4201:4451"
    reads[0] = text[4200:4250].encode()
    reads[1] = text[4450:4500].translate(COMP)[::-1].encode()
    batch = encode_reads(names, reads, quals, 8)
    single = map_batch(subset(batch, 0, 1), genome, index, P, backend)
    assert single.mapq[0] == 0
    res = map_pair_batch(batch, genome, index, P, backend)
    placed = mapped_positions(batch, res, genome)
    assert placed[0] == ("chr1", 4200) and placed[1] == ("chr1", 4450)
    assert res.proper[0] == 1 and res.mapq[0] > 0


def test_paired_backends_and_batch_sizes_give_identical_records(world, tmp_path, small_launches):
    rng, genome, seqs, index = world
    batch, _ = simulate_pairs(rng, seqs, 130, length=50, insert=(250, 30), sub=0.03, indel=0.01)
    records = {}
    for name, backend_name, batch_size in (("cpu-all", "cpu", 10_000), ("cpu-small", "cpu", 48), ("cuda", "cuda", 48)):
        out = tmp_path / f"{name}.bam"
        map_reads(genome, index, batch, str(out), MapParams(**{**P.__dict__, "batch_size": batch_size}),
                  backend_name=backend_name, paired=True)
        records[name] = bam_records(out)
    assert len(records["cpu-all"]) == len(batch)
    assert records["cpu-small"] == records["cpu-all"]
    assert records["cuda"] == records["cpu-all"]


def test_a_poor_clipped_mate_is_placed_beside_its_partner(backend, world):  # noqa: F811
    """R2 of fragment 0 aligns over 23 bases only (the rest is adapter-like junk): on its own that
    scores under min_score, and it stays unmapped; beside its unique partner it is placed, clipped,
    as bwa reports such mates."""
    rng, genome, seqs, index = world
    batch, (names, reads, quals) = simulate_pairs(rng, seqs, 40, length=60, insert=(250, 20), sub=0.0, indel=0.0)
    junk = "".join(rng.choice(list("ACGT"), size=37))
    reads[1] = (reads[1][:23].decode() + junk).encode()   # local 23, less a clip: 18, under 20
    batch = encode_reads(names, reads, quals, 8)
    assert len(map_batch(subset(batch, 1, 2), genome, index, P, backend).mapped) == 0
    res = map_pair_batch(batch, genome, index, P, backend)
    placed = mapped_positions(batch, res, genome)
    contig, s1, s2 = true_starts(names[0].decode())
    assert res.proper[0] == res.proper[1] == 1
    assert res.local[1] == 1 and placed[1][0] == contig


@pytest.mark.parametrize("seed", range(4))
def test_rescued_candidates_regroup_as_a_stable_sort_by_read(seed):
    """with_rescued's one-pass regrouping against its reference, a stable sort of all rows by read:
    random groups (some reads with none), rescued rows for random reads in any order."""
    from gpualign.mapper import Candidates, with_rescued
    from gpualign.extend import EXT_COLUMNS
    rng = np.random.default_rng(1000 + seed)
    n = int(rng.integers(1, 300))
    counts = rng.integers(0, 5, n)
    start = np.zeros(n + 1, dtype=np.int64)
    start[1:] = np.cumsum(counts)
    total = int(start[-1])
    cand = Candidates(np.repeat(np.arange(n), counts), rng.integers(0, 1 << 40, total),
                      start, rng.integers(-50, 50, (total, EXT_COLUMNS)))
    m = int(rng.integers(1, 200))
    new_read = rng.integers(0, n, m)
    new_key, new_ext = rng.integers(0, 1 << 40, m), rng.integers(-50, 50, (m, EXT_COLUMNS))
    got = with_rescued(cand, new_read, new_key, new_ext)
    want = naive.regrouped_by_sort(cand, new_read, new_key, new_ext)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
