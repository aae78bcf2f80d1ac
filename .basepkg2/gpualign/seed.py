"""Seeding: exact match of whole reads, seed hits, candidate loci by diagonal votes, and the
re-seeding policy for reads whose candidate search was cut short.

Per-read functions work on one read with scalar arithmetic and array indexing only, so the same
source runs as numba CPU code (backends/cpu.py) and as CUDA device functions (backends/cuda.py).
Exact match (after Weiss & Bailey): the read's header bin names the genome offsets to compare,
16 bases a word. Seeds (pigeonhole rule): disjoint k-mers, each hit a diagonal; hits are merged,
clustered within the band and ranked by votes.
"""

from .jitcache import use_versioned_cache

use_versioned_cache()  # before any @njit below: numba picks the cache folder at decoration

import dataclasses

import numpy as np
from numba import njit

from .encode import DIAG_BIAS, MASK32, STRAND_BIT, any_n, contig_of, genome_word
from .extend import NEG
from .options import MIN_K
from .reads import MAX_READ_LEN


@njit(cache=True)
def read_matches_at(r_words, woff, n, g_packed, g_nmask, pos):
    """Whether the read equals the genome at pos, compared 16 bases a word (no N allowed)."""
    nw = (n + 15) >> 4
    for w in range(nw):
        nb = n - 16 * w
        if nb > 16:
            nb = 16
        mask = (1 << (2 * nb)) - 1
        if ((genome_word(g_packed, pos + 16 * w) ^ (r_words[woff + w] & MASK32)) & mask) != 0:
            return False
    return not any_n(g_nmask, pos, pos + n)


@njit(cache=True)
def exact_hits(r_words, woff, n, hbin, strand, g_packed, g_nmask, c_offsets, c_ends,
               idx_off, idx_pos, max_occ, out_keys, obase, emax, count):
    """Exact occurrences of one strand of a read: scan the genome offsets of its header bin.

    Appends keys of hits to out_keys[obase + count ...] (at most emax kept) and returns the
    new total count (hits past emax are counted, not stored). Bins over max_occ are skipped.
    """
    if hbin < 0:
        return count
    lo = idx_off[hbin]
    hi = idx_off[hbin + 1]
    if hi - lo > max_occ:
        return count
    for h in range(lo, hi):
        pos = np.int64(idx_pos[h])   # uint32 + large int would overflow in the simulator
        c = contig_of(c_offsets, pos)
        if pos + n > c_ends[c]:
            continue
        if read_matches_at(r_words, woff, n, g_packed, g_nmask, pos):
            if count < emax:
                out_keys[obase + count] = strand * STRAND_BIT + pos + DIAG_BIAS
            count += 1
    return count


@njit(cache=True)
def seed_kmer(q, qoff, o, k):
    """Code of the k-mer at read offset o, -1 if it contains N."""
    v = 0
    for x in range(k):
        c = np.int64(q[qoff + o + x])   # uint8 arithmetic would wrap in the simulator
        if c > 3:
            return -1
        v = v * 4 + c
    return v


@njit(cache=True)
def seed_offset(s, n, k):
    """Disjoint seeds at 0, k, 2k, ...; the last one is moved back to end at the read's end."""
    o = s * k
    if o + k > n:
        o = n - k
    return o


# A read's seeds of one strand, at most: the longest read (reads.MAX_READ_LEN) cut at the smallest k.
MAX_SEEDS = (MAX_READ_LEN + MIN_K - 1) // MIN_K


@njit(cache=True)
def scratch_words(hmax):
    """int64 words of find_candidates' scratch for a hit budget of hmax: the hits, the merge sort's
    second buffer, and one strand's seeds in the order they are taken."""
    return 2 * hmax + MAX_SEEDS


@njit(cache=True)
def collect_seed_hits(q, qoff, n, k, strand, idx_off, idx_pos, max_occ, hits, hoff, nh, budget, order, ooff):
    """Add the diagonals of one strand's seed hits to hits[hoff + nh ...], rarest seeds first.

    Seeds are taken in order of bin size (then offset) until the next would overflow `budget`
    hits, so repeats cannot crowd out the informative seeds. Returns the new hit count.
    order[ooff:ooff + MAX_SEEDS] is scratch: the usable seeds as bin size * MAX_SEEDS + seed number,
    sorted as they are found (a read has a dozen or so), so that each k-mer and bin size is looked
    up once, not once for every seed taken.
    """
    if n < k:
        return nh
    m = 0
    for s in range((n + k - 1) // k):
        km = seed_kmer(q, qoff, seed_offset(s, n, k), k)
        if km < 0:
            continue
        cnt = idx_off[km + 1] - idx_off[km]
        if cnt == 0 or cnt > max_occ:
            continue
        key = np.int64(cnt) * MAX_SEEDS + s
        j = ooff + m
        while j > ooff and order[j - 1] > key:
            order[j] = order[j - 1]
            j -= 1
        order[j] = key
        m += 1
    used = 0
    for j in range(ooff, ooff + m):
        cnt = order[j] // MAX_SEEDS
        if used + cnt > budget:
            break
        o = seed_offset(order[j] % MAX_SEEDS, n, k)
        km = seed_kmer(q, qoff, o, k)
        for h in range(idx_off[km], idx_off[km + 1]):
            hits[hoff + nh] = strand * STRAND_BIT + np.int64(idx_pos[h]) - o + DIAG_BIAS
            nh += 1
        used += cnt
    return nh


@njit(cache=True)
def merge_sort_runs(a, off, n, scratch):
    """Sort a[off:off+n] ascending by merging its ascending runs (natural merge sort), using
    a[scratch:scratch+n] as the second buffer; returns the offset holding the sorted values.

    Seed hits arrive as one ascending run per seed (a bin's positions are ascending), so a few
    sequential passes sort them: far fewer and more local memory accesses than a heap sort,
    which is what a GPU thread's private slice of global memory needs.
    """
    src = off
    dst = scratch
    while True:
        i = 0
        runs = 0
        while i < n:
            j = i + 1
            while j < n and a[src + j - 1] <= a[src + j]:
                j += 1
            k = j
            if j < n:
                k = j + 1
                while k < n and a[src + k - 1] <= a[src + k]:
                    k += 1
            x = i
            y = j
            o = i
            while x < j and y < k:
                if a[src + y] < a[src + x]:
                    a[dst + o] = a[src + y]
                    y += 1
                else:
                    a[dst + o] = a[src + x]
                    x += 1
                o += 1
            while x < j:
                a[dst + o] = a[src + x]
                x += 1
                o += 1
            while y < k:
                a[dst + o] = a[src + y]
                y += 1
                o += 1
            runs += 1
            i = k
        src, dst = dst, src
        if runs <= 1:
            return src


@njit(cache=True)
def find_candidates(q_fwd, q_rc, qoff, n, k, idx_off, idx_pos, max_occ, t,
                    hits, hoff, hmax, cand_keys, cand_votes, coff, max_cand, dropped, di):
    """Seed both strands, vote hits into diagonal clusters, keep the best `max_cand` clusters.

    hits[hoff:hoff + scratch_words(hmax)] is scratch: up to hmax hits, the merge sort's second buffer
    and the seeds' order.

    A cluster is a run of sorted hit keys within t of its first; its key is the median hit's and
    its votes the number of hits. Kept ordered by votes (desc), then key (asc). Returns how many;
    dropped[di] gets the votes of the best cluster that was not kept (0 if none), which tells
    the mapper whether its search of a repetitive read was complete.
    """
    nh = collect_seed_hits(q_fwd, qoff, n, k, 0, idx_off, idx_pos, max_occ, hits, hoff, 0, hmax // 2,
                           hits, hoff + 2 * hmax)
    nh = collect_seed_hits(q_rc, qoff, n, k, 1, idx_off, idx_pos, max_occ, hits, hoff, nh, hmax - nh,
                           hits, hoff + 2 * hmax)
    hoff = merge_sort_runs(hits, hoff, nh, hoff + hmax)
    return vote_clusters(hits, hoff, nh, t, cand_keys, cand_votes, coff, max_cand, dropped, di)


@njit(cache=True)
def vote_clusters(hits, hoff, nh, t, cand_keys, cand_votes, coff, max_cand, dropped, di):
    """find_candidates' clusters of the sorted hits[hoff:hoff + nh]: the best max_cand written at
    coff, their number returned, the votes of the best one left out in dropped[di]."""
    ncand = 0
    lost = 0
    i = 0
    while i < nh:
        j = i + 1
        while j < nh and hits[hoff + j] - hits[hoff + i] <= t:
            j += 1
        votes = j - i
        key = hits[hoff + (i + j - 1) // 2]
        p = ncand
        while p > 0 and cand_votes[coff + p - 1] < votes:
            p -= 1
        if p >= max_cand:
            if votes > lost:
                lost = votes
        else:
            if ncand == max_cand and cand_votes[coff + max_cand - 1] > lost:
                lost = cand_votes[coff + max_cand - 1]   # evicted
            last = ncand if ncand < max_cand else max_cand - 1
            for m in range(last, p, -1):
                cand_votes[coff + m] = cand_votes[coff + m - 1]
                cand_keys[coff + m] = cand_keys[coff + m - 1]
            cand_votes[coff + p] = votes
            cand_keys[coff + p] = key
            if ncand < max_cand:
                ncand += 1
        i = j
    dropped[di] = lost
    return ncand


def reseed_incomplete(batch, need, counts, index, p, backend, ncand, ckeys, cvotes, dropped):
    """Candidates of `need` with the incomplete searches redone at a wider budget (per read, so
    neither batch size nor backend changes the outcome); arrays widened to the new candidate count.
    Budgets are p.tuning's reseed_* times the first ones; the backend's RESEED_CHUNK reads go per call,
    so the wider hit scratch stays bounded."""
    tn = p.tuning
    redo = np.flatnonzero(search_incomplete(len(counts), need, cvotes, dropped, counts)[need])
    if not len(redo) or not tn.reseed_hits:
        return ncand, ckeys, cvotes, dropped
    wide = dataclasses.replace(p, max_hits=p.max_hits * tn.reseed_hits,
                               max_candidates=p.max_candidates * tn.reseed_candidates)
    deep = dataclasses.replace(index, max_occ=index.max_occ * tn.reseed_occ)   # same arrays, higher cap
    keys = np.full((len(need), wide.max_candidates), -1, dtype=np.int64)
    votes = np.zeros((len(need), wide.max_candidates), dtype=np.int64)
    keys[:, :ckeys.shape[1]] = ckeys
    votes[:, :cvotes.shape[1]] = cvotes
    ncand, dropped = ncand.copy(), dropped.copy()
    chunk = backend.RESEED_CHUNK
    for start in range(0, len(redo), chunk):
        part = redo[start:start + chunk]
        ncand[part], keys[part], votes[part], dropped[part] = backend.candidate_stage(batch, need[part], deep, wide)
    return ncand, keys, votes, dropped


@njit(cache=True, nogil=True)
def candidate_pairs(n, need, ncand, ckeys, cvotes, counts, ekeys, multi_exact, vote_fraction):
    """(read, key) pairs to extend, grouped by read: candidates with at least 1/vote_fraction of the
    best one's seed votes (options.Tuning); a single exact hit is always a candidate, and with
    multi_exact (paired reads, where the mate can tell copies apart) every stored exact hit."""
    kept = np.zeros(need.shape[0], dtype=np.int64)
    per_read = np.zeros(n, dtype=np.int64)
    for x in range(need.shape[0]):
        c = kept_candidates(ncand[x], cvotes[x], 0, vote_fraction)
        kept[x] = c
        per_read[need[x]] = c + (1 if counts[need[x]] == 1 else 0)
    if multi_exact:
        for r in range(n):
            if counts[r] >= 2:
                per_read[r] = min(counts[r], ekeys.shape[1])
    pair_start = np.zeros(n + 1, dtype=np.int64)
    pair_start[1:] = np.cumsum(per_read)
    pair_read = np.empty(pair_start[n], dtype=np.int64)
    for r in range(n):
        pair_read[pair_start[r]:pair_start[r + 1]] = r
    pair_key = np.empty(pair_start[n], dtype=np.int64)
    for x in range(need.shape[0]):
        r = need[x]
        s = pair_start[r]
        pair_key[s:s + kept[x]] = ckeys[x, :kept[x]]
        if counts[r] == 1:
            pair_key[s + kept[x]] = ekeys[r, 0]
    if multi_exact:
        for r in range(n):
            if counts[r] >= 2:
                pair_key[pair_start[r]:pair_start[r + 1]] = ekeys[r, :pair_start[r + 1] - pair_start[r]]
    return pair_read, pair_key, pair_start


@njit(cache=True)
def kept_candidates(ncand, votes, voff, vote_fraction):
    """How many of a read's candidates (votes at votes[voff:], sorted, ncand of them) have at least
    1/vote_fraction of the best one's votes."""
    c = 0
    while c < ncand and votes[voff + c] * vote_fraction >= votes[voff]:
        c += 1
    return c


@njit(cache=True)
def left_out_well_supported(dropped, best_votes, exact_count):
    """search_incomplete for one read: a left-out cluster had at least half the best kept one's votes
    (and the read has no exact hit)."""
    return dropped > 0 and 2 * dropped >= best_votes and exact_count == 0


def search_incomplete(n, need, cvotes, dropped, counts):
    """Reads whose left-out candidates had at least half the votes of the best kept one.

    The true locus of a read with ~1% errors shares nearly all of its seeds; a locus within a few
    edits of it shares most. When clusters that well supported were dropped (too many to keep, as
    in repeats), the best placement may be among them. A unique exact hit is certain regardless.
    """
    out = np.zeros(n, dtype=np.bool_)
    out[need] = (dropped > 0) & (2 * dropped >= cvotes[:, 0]) & (counts[need] == 0)
    return out


@njit(cache=True)
def unseen_score(dropped, best_votes, exact_count, n, k, match, cost):
    """The most a locus left out of a read's candidate search could score (NEG when the search left out
    no well supported locus: left_out_well_supported), for the MAPQ to weigh as it weighs the second
    locus: a placement is no surer than its lead over what the search could not see.

    The best kept candidate's seed votes stand for the seeds the search looked up (at most one
    strand's, (n + k - 1) // k, so that tandem hits in one cluster do not count twice); the left-out
    locus has at most `dropped` of them. Each seed it lacks has an edit of the read in its window,
    and the windows are disjoint but for the last, which overlaps the one before where k does not
    divide n: one edit there can break two. So m = votes - dropped missing seeds mean at least m
    edits, m - 1 where two of them may share the overlap, each costing at least `cost`
    (edit_cost())."""
    if not left_out_well_supported(dropped, best_votes, exact_count):
        return NEG
    seeds = (n + k - 1) // k
    missing = min(best_votes, seeds) - dropped
    if missing <= 0:
        return n * match
    edits = missing - 1 if missing >= 2 and n % k != 0 else missing
    return n * match - edits * cost


def edit_cost(p):
    """The least score an edit costs an alignment against a perfect match: a mismatch (match +
    mismatch), a gap (gap_open + gap_extend), or clipping an end (match + clip_penalty)."""
    return min(p.match + p.mismatch, p.gap_open + p.gap_extend, p.match + p.clip_penalty)


@njit(cache=True, nogil=True)
def unseen_scores(n, need, cvotes, dropped, counts, lengths, k, match, cost):
    """unseen_score of every read (NEG for reads not in `need`, which were not seeded)."""
    out = np.full(n, NEG, dtype=np.int64)
    for x in range(need.shape[0]):
        r = need[x]
        out[r] = unseen_score(dropped[x], cvotes[x, 0], counts[r], lengths[r], k, match, cost)
    return out
