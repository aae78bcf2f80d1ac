"""Scores a placement competes with and the MAPQ it gets: shared by the single-end choice
(mapper.choose) and the choice of both mates of a fragment (pairing)."""

from .jitcache import use_versioned_cache

use_versioned_cache()  # before any @njit below

import numpy as np
from numba import njit, prange

from .core import NEG, STRAND_BIT


@njit(cache=True, nogil=True)
def locus_scores(a, b, n, pair_key, ext, t, clip_penalty, eff, raw, loc, end, span, keep, off):
    """Per candidate x in [a, b) of one read of length n, at index off + x - a of the outputs: eff (the
    score it competes with), raw (its alignment score), loc (1: local), end (reference end), span
    (read bases aligned), keep (False when shadowed by a better or equal, earlier candidate nearby).

    End-to-end is kept unless local alignment beats it by more than the clipping penalty of each
    clipped end (as bwa decides). Candidates ending at the same place on the same strand (within t)
    are one locus.
    """
    for x in range(a, b):
        g = ext[x, 0]
        lscore = ext[x, 2]
        clips = (1 if ext[x, 5] > 0 else 0) + (1 if ext[x, 3] < n else 0)
        y = off + x - a
        if g > NEG // 2 and g >= lscore - clip_penalty * clips:
            eff[y] = g
            raw[y] = g
            loc[y] = 0
            end[y] = ext[x, 6] + ext[x, 1]
            span[y] = n
        else:
            eff[y] = lscore - clip_penalty * clips
            raw[y] = lscore
            loc[y] = 1
            end[y] = ext[x, 6] + ext[x, 4]
            span[y] = ext[x, 3] - ext[x, 5]
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

    About 6 per match-score unit of lead (a lead of one mismatch, 5 points, gives 30); with no
    second locus the lead is measured from two thirds of min_score. Ties give 0; capped at 60.
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
