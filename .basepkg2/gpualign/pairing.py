"""Paired-end reads (stage align, samples with fq2): insert-size estimate, mate-rescue tasks and
the joint choice of both mates' placements. Host code, one source for both backends.

A paired batch interleaves the mates: read 2i is R1 of fragment i, read 2i+1 its R2. Orientation is
FR (Illumina paired-end): the forward mate starts the fragment, the reverse mate ends it, and the
insert size is the fragment's length, from the forward mate's first base to the reverse mate's last.

(In mapper.py a "pair" is a read and one candidate locus; fragments here are pairs of mates.)
"""

from .jitcache import use_versioned_cache

use_versioned_cache()  # before any @njit below

import math

import numpy as np
from numba import njit, prange

from .choose import mapq_of
from .encode import DIAG_BIAS, STRAND_BIT, contig_of
from .extend import NEG, RESCUE_COL, RESCUE_ROW, RESCUE_SCORE

# columns of insert_estimates' rows
VALID, MEAN, SD, LOW, HIGH, COUNT = range(6)


@njit(cache=True, nogil=True)
def mate_min_score(min_score):
    """A mate in a proper pair may score this little (two thirds of min_score) when its partner
    reaches min_score: the pair, not the short or poor read alone, places it (bwa reports such mates)."""
    return (2 * min_score) // 3


@njit(cache=True, nogil=True)
def diagonal(key):
    return key - (STRAND_BIT if key >= STRAND_BIT else 0) - DIAG_BIAS


@njit(cache=True, nogil=True)
def fr_insert(kx, nx, ky, ny, c_off, max_fragment):
    """Insert size of two placements (keys, read lengths) if they form an FR fragment on one
    contig (one forward, one reverse, the reverse one ending after the forward one starts), else -1."""
    if (kx >= STRAND_BIT) == (ky >= STRAND_BIT):
        return -1
    if kx >= STRAND_BIT:
        kx, nx, ky, ny = ky, ny, kx, nx
    start = diagonal(kx)
    end = diagonal(ky) + ny
    if end <= start or end - start > max_fragment:
        return -1
    if contig_of(c_off, max(start, 0)) != contig_of(c_off, max(end - 1, 0)):
        return -1
    return end - start


@njit(cache=True, nogil=True)
def insert_estimates(key, mapq, unseen, lengths, c_off, starts, tn):
    """Per block of fragments: valid, mean, sd, low, high (the proper-pair insert range: tn.spread sds
    around the mean or tn.proper_iqr IQRs outside the quartiles, whichever is wider), count; valid
    where at least tn.min_fragments count (tn: options.Tuning).

    From fragments whose mates both placed confidently on their own, each with a complete candidate
    search (unseen NEG: choose.choose_one): the quartiles, then mean and
    sd of the inserts within tn.outlier_iqr interquartile ranges of them (after bwa's estimate)."""
    nb = starts.shape[0] - 1
    stats = np.zeros((nb, 6), dtype=np.float64)
    for b in range(nb):
        ins = np.empty(starts[b + 1] - starts[b], dtype=np.int64)
        m = 0
        for f in range(starts[b], starts[b + 1]):
            r1 = 2 * f
            r2 = r1 + 1
            if key[r1] < 0 or key[r2] < 0 or unseen[r1] > NEG or unseen[r2] > NEG:
                continue
            if mapq[r1] < tn.confident_mapq or mapq[r2] < tn.confident_mapq:
                continue
            d = fr_insert(key[r1], lengths[r1], key[r2], lengths[r2], c_off, tn.max_fragment)
            if d > 0:
                ins[m] = d
                m += 1
        stats[b, COUNT] = m
        if m < tn.min_fragments:
            continue
        v = np.sort(ins[:m])
        q1 = v[(m - 1) // 4]
        q3 = v[(3 * (m - 1)) // 4]
        lo = q1 - tn.outlier_iqr * (q3 - q1)
        hi = q3 + tn.outlier_iqr * (q3 - q1)
        s = 0.0
        s2 = 0.0
        c = 0
        for x in range(m):
            if lo <= v[x] <= hi:
                s += v[x]
                s2 += v[x] * v[x]
                c += 1
        mean = s / c
        sd = math.sqrt(max(s2 / c - mean * mean, 1.0))
        stats[b, VALID] = 1
        stats[b, MEAN] = mean
        stats[b, SD] = sd
        stats[b, LOW] = max(1.0, math.floor(min(mean - tn.spread * sd, q1 - tn.proper_iqr * (q3 - q1))))
        stats[b, HIGH] = math.ceil(max(mean + tn.spread * sd, q3 + tn.proper_iqr * (q3 - q1)))
    return stats


@njit(cache=True, nogil=True)
def insert_penalty(d, mean, sd, match):
    """-log4 of the two-sided normal tail probability of insert d, in match units: 0 at the mean,
    about 7 at four standard deviations (the same scale as bwa's pair score)."""
    z = abs(d - mean) / sd
    p = math.erfc(z / math.sqrt(2.0))
    if p < 1e-300:
        p = 1e-300
    return int(-math.log(p) / math.log(4.0) * match + 0.499)


@njit(cache=True, nogil=True)
def rescue_tasks(pair_start, pair_key, eff, keep, lengths, block, stats, c_off, c_end, t, min_score,
                 unpaired_penalty, tn):
    """Windows to search a mate in: for each placement of one mate within unpaired_penalty of its best
    (at most tn.rescue_per_read), where the insert range puts the other mate, unless the other mate
    already has a placement there. Returns (read, strand, window start, window length) arrays."""
    nfrag = lengths.shape[0] // 2
    cap = 2 * nfrag * tn.rescue_per_read
    t_read = np.empty(cap, dtype=np.int64)
    t_strand = np.empty(cap, dtype=np.int64)
    t_start = np.empty(cap, dtype=np.int64)
    t_len = np.empty(cap, dtype=np.int64)
    m = 0
    for f in range(nfrag):
        st = stats[block[f]]
        if st[VALID] == 0:
            continue
        lo = np.int64(st[LOW])
        hi = np.int64(st[HIGH])
        for side in range(2):
            ra = 2 * f + side
            rb = 2 * f + 1 - side
            na = lengths[ra]
            nb = lengths[rb]
            best = NEG
            for x in range(pair_start[ra], pair_start[ra + 1]):
                if keep[x] and eff[x] > best:
                    best = eff[x]
            if best < min_score:
                continue
            done = 0
            for x in range(pair_start[ra], pair_start[ra + 1]):
                if done == tn.rescue_per_read:
                    break
                if not keep[x] or eff[x] < best - unpaired_penalty or eff[x] < min_score:
                    continue
                found = False
                for y in range(pair_start[rb], pair_start[rb + 1]):
                    if keep[y] and eff[y] >= mate_min_score(min_score):
                        d = fr_insert(pair_key[x], na, pair_key[y], nb, c_off, tn.max_fragment)
                        if lo <= d <= hi:
                            found = True
                            break
                if found:
                    continue
                ka = pair_key[x]
                da = diagonal(ka)
                if ka < STRAND_BIT:    # forward mate: the other is reverse and ends lo..hi after da
                    strand = 1
                    ws = da + lo - nb - t
                    we = da + hi + t
                else:                  # reverse mate, ending at da + na: the other starts lo..hi before
                    strand = 0
                    ws = da + na - hi - t
                    we = da + na - lo + nb + t
                c = contig_of(c_off, min(max(da + na // 2, 0), c_end[c_end.shape[0] - 1] - 1))
                ws = max(ws, c_off[c])
                we = min(we, c_end[c])
                done += 1
                if we - ws < 1:
                    continue
                t_read[m] = rb
                t_strand[m] = strand
                t_start[m] = ws
                t_len[m] = we - ws
                m += 1
    return t_read[:m], t_strand[:m], t_start[:m], t_len[:m]


@njit(cache=True, nogil=True)
def rescued_keys(t_strand, t_start, found, min_score):
    """Candidate keys of rescued mates (the diagonal of the best local alignment's end cell; the
    banded extension's +/- t absorbs indels before it); -1 where the best scored under mate_min_score."""
    out = np.full(t_strand.shape[0], -1, dtype=np.int64)
    for x in range(t_strand.shape[0]):
        if found[x, RESCUE_SCORE] >= mate_min_score(min_score):
            out[x] = t_strand[x] * STRAND_BIT + t_start[x] + found[x, RESCUE_COL] - found[x, RESCUE_ROW] + DIAG_BIAS
    return out


@njit(cache=True, nogil=True)
def regroup_rescued(start, key, ext, new_read, new_key, new_ext):
    """Candidates grouped by read (read r's rows start[r]:start[r + 1]) with the rescued ones
    (new_*, in task order) added after each read's own, in one pass: (read, key, start, ext) as a
    stable sort of all rows by read gives them (the reference: tests/naive.py, regrouped_by_sort)."""
    n = start.shape[0] - 1
    m = new_read.shape[0]
    first = np.zeros(n + 1, dtype=np.int64)    # read r's rescued rows: order[first[r]:first[r + 1]]
    for x in range(m):
        first[new_read[x] + 1] += 1
    for r in range(n):
        first[r + 1] += first[r]
    order = np.empty(m, dtype=np.int64)
    fill = first[:n].copy()
    for x in range(m):                         # a counting sort: task order kept within a read
        order[fill[new_read[x]]] = x
        fill[new_read[x]] += 1
    out_start = start + first
    total = out_start[n]
    out_read = np.empty(total, dtype=np.int64)
    out_key = np.empty(total, dtype=key.dtype)
    out_ext = np.empty((total, ext.shape[1]), dtype=ext.dtype)
    for r in range(n):
        o = out_start[r]
        for x in range(start[r], start[r + 1]):
            out_read[o] = r
            out_key[o] = key[x]
            out_ext[o] = ext[x]
            o += 1
        for z in range(first[r], first[r + 1]):
            out_read[o] = r
            out_key[o] = new_key[order[z]]
            out_ext[o] = new_ext[order[z]]
            o += 1
    return out_read, out_key, out_start, out_ext


@njit(cache=True, parallel=True, nogil=True)
def choose_fragments(pair_start, pair_key, eff, raw, loc, span, keep, lengths, name_hash, unseen, block,
                     stats, c_off, match, mismatch, min_score, unpaired_penalty, max_fragment,
                     out_key, out_local, out_as, out_xs, out_mapq, out_proper):
    """Both mates' placements at once. The best FR combination within the block's insert range scores
    both mates' scores less an insert-size penalty; it wins over placing the mates apart when it beats
    their two best scores less unpaired_penalty (as bwa). The winners are properly paired, and each
    mate's MAPQ is raised by the pair's lead over the runner-up, at most 40 above its own. Otherwise
    the single-end choice already in out_* stands. Equal best combinations: the R1 name hash picks.
    unseen: per read, the most a locus its search left out could score (choose.choose_one); with both
    mates' searches incomplete the pair's lead counts for nothing."""
    nfrag = lengths.shape[0] // 2
    for f in prange(nfrag):
        r1 = 2 * f
        r2 = r1 + 1
        out_proper[r1] = 0
        out_proper[r2] = 0
        st = stats[block[f]]
        if st[VALID] == 0:
            continue
        best = NEG
        second = NEG
        nties = 0
        for x in range(pair_start[r1], pair_start[r1 + 1]):
            for y in range(pair_start[r2], pair_start[r2 + 1]):
                s = combination_score(x, y, pair_key, eff, raw, keep, lengths[r1], lengths[r2], st, c_off, match,
                                      min_score, max_fragment)
                if s == NEG:
                    continue
                if s > best:
                    second = best
                    best = s
                    nties = 1
                elif s == best:
                    nties += 1
                    second = s
                elif s > second:
                    second = s
        if best == NEG:
            continue
        unpaired = (alone_score(pair_start, eff, keep, r1, min_score) + alone_score(pair_start, eff, keep, r2, min_score)
                    - unpaired_penalty)
        if best <= unpaired:
            continue
        # the tie pick: the (hash % nties)-th tie in order of (R1 key, R2 key)
        pick = name_hash[r1] % nties
        cx = -1
        cy = -1
        for _ in range(pick + 1):
            bx = -1
            by = -1
            for x in range(pair_start[r1], pair_start[r1 + 1]):
                for y in range(pair_start[r2], pair_start[r2 + 1]):
                    if combination_score(x, y, pair_key, eff, raw, keep, lengths[r1], lengths[r2], st, c_off, match,
                                         min_score, max_fragment) != best:
                        continue
                    after = cx < 0 or pair_key[x] > pair_key[cx] or (pair_key[x] == pair_key[cx] and pair_key[y] > pair_key[cy])
                    first = bx < 0 or pair_key[x] < pair_key[bx] or (pair_key[x] == pair_key[bx] and pair_key[y] < pair_key[by])
                    if after and first:
                        bx = x
                        by = y
            cx = bx
            cy = by
        q_pe = 0
        if nties == 1 and not (unseen[r1] > NEG and unseen[r2] > NEG):
            q_pe = min(60, int(6.0 * (best - max(second, unpaired)) / match + 0.499))
        place_mate(r1, cx, pair_start, pair_key, eff, raw, loc, span, keep, lengths, unseen, q_pe,
                   match, mismatch, min_score, out_key, out_local, out_as, out_xs, out_mapq)
        place_mate(r2, cy, pair_start, pair_key, eff, raw, loc, span, keep, lengths, unseen, q_pe,
                   match, mismatch, min_score, out_key, out_local, out_as, out_xs, out_mapq)
        out_proper[r1] = 1
        out_proper[r2] = 1


@njit(cache=True, nogil=True)
def combination_score(x, y, pair_key, eff, raw, keep, n1, n2, st, c_off, match, min_score, max_fragment):
    """Score of R1 at candidate x with R2 at candidate y as a proper pair: both scores less the
    insert-size penalty; NEG unless both are kept loci, one scores min_score, the other's alignment
    mate_min_score (before clipping penalties: a clipped mate beside its partner is still placed),
    and they form an FR fragment within the block's insert range."""
    if not keep[x] or not keep[y] or max(eff[x], eff[y]) < min_score:
        return NEG
    if min(raw[x], raw[y]) < mate_min_score(min_score):
        return NEG
    d = fr_insert(pair_key[x], n1, pair_key[y], n2, c_off, max_fragment)
    if d < st[LOW] or d > st[HIGH]:
        return NEG
    return eff[x] + eff[y] - insert_penalty(d, st[MEAN], st[SD], match)


@njit(cache=True, nogil=True)
def best_score(pair_start, eff, keep, r, skip):
    """A read's best locus score, leaving out candidate `skip` (NEG if none)."""
    best = NEG
    for x in range(pair_start[r], pair_start[r + 1]):
        if keep[x] and x != skip and eff[x] > best:
            best = eff[x]
    return best


@njit(cache=True, nogil=True)
def alone_score(pair_start, eff, keep, r, min_score):
    """What a read adds placed on its own: its best score, 0 under min_score (it stays unmapped)."""
    best = best_score(pair_start, eff, keep, r, -1)
    return best if best >= min_score else 0


@njit(cache=True, nogil=True)
def place_mate(r, x, pair_start, pair_key, eff, raw, loc, span, keep, lengths, unseen, q_pe,
               match, mismatch, min_score, out_key, out_local, out_as, out_xs, out_mapq):
    """Mate r placed at candidate x by pairing: its own MAPQ where x is its unique best locus (its lead
    over the other loci and over what its search left out: choose.choose_one), raised towards the
    pair's, at most 40 above its own."""
    other = best_score(pair_start, eff, keep, r, x)
    q_se = 0
    if eff[x] > other:
        q_se = mapq_of(eff[x], max(other, unseen[r]), 1, raw[x], span[x], match, mismatch, min_score)
    out_key[r] = pair_key[x]
    out_local[r] = loc[x]
    out_as[r] = raw[x]
    out_xs[r] = other if other >= mate_min_score(min_score) else -1
    out_mapq[r] = max(q_se, min(q_pe, q_se + 40))
