"""Choosing each read's placement among its extended candidates, and its MAPQ.

The scores a placement competes with (locus_scores, all_loci) are shared by the single-end choice
(choose) and the choice of both mates of a fragment (pairing.choose_fragments). The choice is one
function for both backends, run on the host, and every read is chosen on its own: neither the
backend nor the batch size can change a result.
"""

from .jitcache import use_versioned_cache

use_versioned_cache()  # before any @njit below

import threading
from typing import NamedTuple

import numpy as np
from numba import njit, prange

from .extend import EXT_END_COL, EXT_LOCAL_END_COL, EXT_LOCAL_END_ROW, EXT_LOCAL_SCORE, \
    EXT_LOCAL_START_ROW, EXT_SCORE, EXT_WINDOW, NEG
from .encode import STRAND_BIT


@njit(cache=True, nogil=True)
def locus_scores(a, b, n, pair_key, ext, t, clip_penalty, eff, raw, loc, end, span, keep, off):
    """Per candidate x in [a, b) of one read of length n, at index off + x - a of the outputs: eff (the
    score it competes with), raw (its alignment score), loc (1: local), end (reference end), span
    (read bases aligned), keep (False when a candidate nearby scores higher, or equal and comes earlier;
    a shadowed candidate still shadows others).

    End-to-end is kept unless local alignment beats it by more than the clipping penalty of each
    clipped end (as bwa decides). Candidates ending at the same place on the same strand (within t)
    are one locus.
    """
    for x in range(a, b):
        g = ext[x, EXT_SCORE]
        lscore = ext[x, EXT_LOCAL_SCORE]
        clips = (1 if ext[x, EXT_LOCAL_START_ROW] > 0 else 0) + (1 if ext[x, EXT_LOCAL_END_ROW] < n else 0)
        y = off + x - a
        if g > NEG // 2 and g >= lscore - clip_penalty * clips:
            eff[y] = g
            raw[y] = g
            loc[y] = 0
            end[y] = ext[x, EXT_WINDOW] + ext[x, EXT_END_COL]
            span[y] = n
        else:
            eff[y] = lscore - clip_penalty * clips
            raw[y] = lscore
            loc[y] = 1
            end[y] = ext[x, EXT_WINDOW] + ext[x, EXT_LOCAL_END_COL]
            span[y] = ext[x, EXT_LOCAL_END_ROW] - ext[x, EXT_LOCAL_START_ROW]
    for y in range(off, off + b - a):
        keep[y] = True
        sy = pair_key[a + y - off] >= STRAND_BIT
        for z in range(off, off + b - a):
            if z == y or (pair_key[a + z - off] >= STRAND_BIT) != sy or abs(end[z] - end[y]) > t:
                continue
            if eff[z] > eff[y] or (eff[z] == eff[y] and z < y):
                keep[y] = False
                break


@njit(cache=True, nogil=True)
def mapq_of(best, second, nties, score, aligned, match, mismatch, min_score):
    """MAPQ from the gap between the best and second-best locus, scaled down for poor identity.

    About 6 per match-score unit of lead (a lead of one mismatch, 5 points, gives 30), the lead
    measured from the second locus or from two thirds of min_score (rounded down), whichever is
    higher; scaled by identity squared, identity = 1 - (aligned * match - score) / ((match +
    mismatch) * aligned). Ties give 0; capped at 60.
    """
    if nties > 1:
        return 0
    sub = (2 * min_score) // 3
    if second > sub:
        sub = second
    if best <= sub:
        return 0
    identity = 1.0
    if aligned > 0:
        identity = 1.0 - (aligned * match - score) / (match + mismatch) / aligned
    if identity < 0.0:
        identity = 0.0
    q = int(6.0 * (best - sub) / match * identity * identity + 0.499)
    return 60 if q > 60 else q


@njit(cache=True, parallel=True, nogil=True)
def all_loci(pair_start, pair_key, ext, lengths, t, clip_penalty):
    """locus_scores of every candidate of every read: (eff, raw, loc, span, keep), indexed as ext."""
    m = pair_key.shape[0]
    eff = np.empty(m, dtype=np.int64)
    raw = np.empty(m, dtype=np.int64)
    loc = np.empty(m, dtype=np.int64)
    end = np.empty(m, dtype=np.int64)
    span = np.empty(m, dtype=np.int64)
    keep = np.empty(m, dtype=np.bool_)
    for r in prange(lengths.shape[0]):
        a = pair_start[r]
        locus_scores(a, pair_start[r + 1], lengths[r], pair_key, ext, t, clip_penalty, eff, raw, loc, end, span,
                     keep, a)
    return eff, raw, loc, span, keep


class Loci(NamedTuple):
    """What each candidate competes with, indexed as the extension rows (locus_scores): computed
    once per set of candidates and shared by the single-end choice and the fragment choice."""
    eff: np.ndarray     # the score it competes with (clip penalties included)
    raw: np.ndarray     # its alignment score (AS)
    loc: np.ndarray     # 1: local alignment
    span: np.ndarray    # read bases aligned
    keep: np.ndarray    # False where a better or equal, earlier candidate ends nearby on the strand


class Choice(NamedTuple):
    """Each read's placement: its candidate key (-1: unmapped), whether local, AS, XS (the second locus's
    competing score, clip penalties included; -1: none), MAPQ."""
    key: np.ndarray
    local: np.ndarray
    score: np.ndarray
    sub: np.ndarray
    mapq: np.ndarray


def loci_of(pair_start, pair_key, ext, lengths, p) -> Loci:
    return Loci(*all_loci(pair_start, pair_key, ext, lengths, p.max_indels, p.clip_penalty))


# numba's parallel loops must not be entered from two threads at once (the workqueue layer
# aborts); mapping threads take turns at them while the other thread's batch is on the GPU.
HOST_PARALLEL = threading.Lock()


@njit(cache=True, parallel=True, nogil=True)
def choose(name_hash, pair_start, pair_key, eff, raw, loc, span, keep, unseen, match, mismatch, min_score,
           out_key, out_local, out_as, out_xs, out_mapq):
    """Pick each read's primary placement among its loci (all_loci): choose_one for every read."""
    for r in prange(name_hash.shape[0]):
        choose_one(r, name_hash, pair_start, pair_key, eff, raw, loc, span, keep, unseen, match, mismatch,
                   min_score, out_key, out_local, out_as, out_xs, out_mapq)


@njit(cache=True)
def choose_one(r, name_hash, pair_start, pair_key, eff, raw, loc, span, keep, unseen, match, mismatch, min_score,
               out_key, out_local, out_as, out_xs, out_mapq):
    """Read r's primary placement among its loci (no scratch: it runs as a CUDA device function too).

    Equal best loci are broken by the read-name hash, and get MAPQ 0: the ties ordered by key (then
    by position in the list), the one at rank name_hash % ties is picked, so the pick does not
    depend on candidate order. Where the candidate search left a well supported locus out (as in
    repeats), unseen[r] is the most it could score (seed.unseen_score, NEG otherwise): the MAPQ is
    the lead over the second locus or over that, whichever is less (0 where the unseen locus could
    score as high as the best). out_key = -1: unmapped.
    """
    a = pair_start[r]
    b = pair_start[r + 1]
    out_key[r] = -1
    if b == a:
        return
    best = NEG
    for x in range(a, b):
        if keep[x] and eff[x] > best:
            best = eff[x]
    if best < min_score:
        return
    nties = 0
    for x in range(a, b):
        if keep[x] and eff[x] == best:
            nties += 1
    want = name_hash[r] % nties
    chosen = a
    for x in range(a, b):
        if not (keep[x] and eff[x] == best):
            continue
        rank = 0
        for y in range(a, b):
            if keep[y] and eff[y] == best and (pair_key[y] < pair_key[x] or (pair_key[y] == pair_key[x] and y < x)):
                rank += 1
        if rank == want:
            chosen = x
            break
    second = NEG
    for x in range(a, b):
        if keep[x] and x != chosen and eff[x] > second:
            second = eff[x]
    out_key[r] = pair_key[chosen]
    out_local[r] = loc[chosen]
    out_as[r] = raw[chosen]
    out_xs[r] = second if second >= min_score else -1
    out_mapq[r] = mapq_of(best, max(second, unseen[r]), nties, raw[chosen], span[chosen], match, mismatch,
                          min_score)


def single_end_choice(batch, pair_start, pair_key, loci: Loci, unseen, p, times) -> Choice:
    """Each read's own best placement, as map_batch chooses it."""
    n = len(batch)
    out = Choice(np.full(n, -1, dtype=np.int64), np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64),
                 np.full(n, -1, dtype=np.int64), np.zeros(n, dtype=np.int64))
    with times("choice"), HOST_PARALLEL:
        choose(batch.name_hash, pair_start, pair_key, loci.eff, loci.raw, loci.loc, loci.span, loci.keep, unseen,
               p.match, p.mismatch, p.min_score, *out)
    return out


@njit(cache=True, nogil=True)
def place_multi_exact(counts, ekeys, name_hash, lengths, max_exact, match, key, local, score, sub, mapq):
    """Reads matching exactly at two or more places: place_exact_copy for every read."""
    for r in range(counts.shape[0]):
        place_exact_copy(r, counts[r], ekeys[r], 0, name_hash, lengths[r], max_exact, match, key, local, score, sub,
                         mapq)


@njit(cache=True)
def place_exact_copy(r, count, ekeys, eoff, name_hash, length, max_exact, match, key, local, score, sub, mapq):
    """Read r, if it matches exactly at two or more places (count; stored keys at ekeys[eoff:]):
    a hash-chosen copy, MAPQ 0, XS = AS."""
    if count < 2:
        return
    stored = min(count, max_exact)
    key[r] = ekeys[eoff + name_hash[r] % stored]
    local[r] = 0
    score[r] = length * match
    sub[r] = length * match
    mapq[r] = 0
