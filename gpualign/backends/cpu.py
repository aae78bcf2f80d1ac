"""CPU backend: the per-read functions of seed.py and extend.py in numba prange loops.

Public functions have the same signatures as those in cuda.py; backends.get_backend picks one module.
"""

from ..jitcache import use_versioned_cache

use_versioned_cache()  # before any @njit / @cuda.jit below

import numpy as np
from numba import njit, prange

from ..extend import EXT_COLUMNS, RESCUE_COL, RESCUE_COLUMNS, RESCUE_ROW, RESCUE_SCORE, TR_COLUMNS, TR_NOPS, \
    extend_pair_cpu, rescue_align, tidy_cigars, trace_pair
from ..md import md_of_rows
from ..reads import derived
from ..seed import exact_hits, find_candidates, scratch_words

NAME = "cpu"
RESEED_CHUNK = 8192   # reads re-seeded per candidate_stage call (seed.reseed_incomplete)


# Items a task of a prange loop takes in turn, with one set of scratch arrays: allocated for each item,
# they cost more than the ungapped test that decides most pairs and placements without them.
TASK_ITEMS = 64


@njit(cache=True, inline='always')
def _task_range(task, m):
    return task * TASK_ITEMS, min(m, (task + 1) * TASK_ITEMS)


@njit(cache=True, inline='always')
def _tasks(m):
    return (m + TASK_ITEMS - 1) // TASK_ITEMS


@njit(cache=True, inline='always')
def _task_scratch(t, res_words):
    """A task's band rows (_band_scratch) and the result and window words each item starts from zero."""
    H, F, HS, FS, GB = _band_scratch(2 * t + 1)
    return H, F, HS, FS, GB, np.zeros(res_words, dtype=np.int64), np.zeros(4, dtype=np.int64)


@njit(cache=True, inline='always')
def _cleared(res, win):
    res[:] = 0
    win[:] = 0


def prepare_reads(reads):
    """The batch with the arrays the stages look up (reads.DERIVED), made on the host."""
    return derived(reads)


@njit(parallel=True, cache=True)
def _exact(packed, rc_packed, word_off, read_off, hbin, rc_hbin, g_packed, g_nmask, c_off, c_end,
           idx_off, idx_pos, max_occ, emax, counts, keys):
    for r in prange(read_off.shape[0] - 1):
        n = read_off[r + 1] - read_off[r]
        c = exact_hits(packed, word_off[r], n, hbin[r], 0, g_packed, g_nmask, c_off, c_end,
                       idx_off, idx_pos, max_occ, keys, r * emax, emax, 0)
        counts[r] = exact_hits(rc_packed, word_off[r], n, rc_hbin[r], 1, g_packed, g_nmask, c_off, c_end,
                               idx_off, idx_pos, max_occ, keys, r * emax, emax, c)


def exact_stage(reads, genome, index, p):
    """Exact hits of every read on both strands: (counts[n], keys[n, max_exact])."""
    n = len(reads)
    counts = np.zeros(n, dtype=np.int64)
    keys = np.full(n * p.max_exact, -1, dtype=np.int64)
    _exact(reads.packed, reads.rc_packed, reads.word_off, reads.read_off, reads.hbin, reads.rc_hbin,
           genome.packed, genome.nmask, genome.offsets, genome.ends, index.offsets, index.positions,
           index.max_occ, p.max_exact, counts, keys)
    return counts, keys.reshape(n, p.max_exact)


@njit(parallel=True, cache=True)
def _candidates(sel, codes, rc_codes, read_off, k, idx_off, idx_pos, max_occ, t, hmax, mcand,
                ncand, cand_keys, cand_votes, dropped):
    m = sel.shape[0]
    for task in prange(_tasks(m)):
        hits = np.empty(scratch_words(hmax), dtype=np.int64)   # hits, merge and seed scratch
        first, last = _task_range(task, m)
        for x in range(first, last):
            r = sel[x]
            ncand[x] = find_candidates(codes, rc_codes, read_off[r], read_off[r + 1] - read_off[r], k,
                                       idx_off, idx_pos, max_occ, t, hits, 0, hmax,
                                       cand_keys, cand_votes, x * mcand, mcand, dropped, x)


def candidate_stage(reads, sel, index, p):
    """Candidate loci of the reads `sel`: (ncand[m], keys[m, max_candidates], votes[m, max_candidates],
    dropped[m]: votes of the best cluster left out)."""
    m = len(sel)
    ncand = np.zeros(m, dtype=np.int64)
    dropped = np.zeros(m, dtype=np.int64)
    keys = np.full(m * p.max_candidates, -1, dtype=np.int64)
    votes = np.zeros(m * p.max_candidates, dtype=np.int64)
    _candidates(np.asarray(sel, dtype=np.int64), reads.codes, reads.rc_codes, reads.read_off, reads.k,
                index.offsets, index.positions, index.max_occ, p.max_indels, p.max_hits,
                p.max_candidates, ncand, keys, votes, dropped)
    return ncand, keys.reshape(m, p.max_candidates), votes.reshape(m, p.max_candidates), dropped


@njit(cache=True)
def _band_scratch(W):
    return (np.empty(W + 1, dtype=np.int32), np.empty(W + 1, dtype=np.int32),
            np.empty(W + 1, dtype=np.int32), np.empty(W + 1, dtype=np.int32), np.empty(W + 1, dtype=np.uint8))


@njit(parallel=True, cache=True)
def _extend(pair_read, pair_key, codes, rc_codes, read_off, g_packed, g_nmask, c_off, c_end, gsize, t,
            match, mismatch, gap_open, gap_ext, clip_penalty, out):
    m = pair_read.shape[0]
    for task in prange(_tasks(m)):
        H, F, HS, FS, GB, res, win = _task_scratch(t, 7)
        rows = np.empty((2, 2 * t + 2), dtype=np.int32)   # the local rows of banded_scores
        tb = np.empty(1, dtype=np.uint8)
        first, last = _task_range(task, m)
        for x in range(first, last):
            r = pair_read[x]
            _cleared(res, win)
            extend_pair_cpu(x, pair_key[x], codes, rc_codes, read_off[r], read_off[r + 1] - read_off[r], g_packed,
                            g_nmask, c_off, c_end, gsize, t, match, mismatch, gap_open, gap_ext, clip_penalty,
                            H, F, rows[0], rows[1], HS, FS, GB, tb, res, win, out)


def extend_stage(reads, genome, pair_read, pair_key, p):
    """Banded scores of read-candidate pairs, out[P, 8]: semi-global score and end column;
    local score, end row, end column and start row; window start; c0 (diagonal - window start)."""
    out = np.zeros((len(pair_read), EXT_COLUMNS), dtype=np.int64)
    _extend(np.asarray(pair_read, dtype=np.int64), np.asarray(pair_key, dtype=np.int64), reads.codes,
            reads.rc_codes, reads.read_off, genome.packed, genome.nmask, genome.offsets, genome.ends,
            genome.size, p.max_indels, p.match, p.mismatch, p.gap_open, p.gap_extend, p.clip_penalty, out)
    return out


@njit(parallel=True, cache=True)
def _trace(sel_read, sel_key, sel_local, codes, rc_codes, read_off, g_packed, g_nmask, c_off, c_end, gsize,
           t, match, mismatch, gap_open, gap_ext, maxops, ops, lens, out):
    m = sel_read.shape[0]
    maxlen = 1
    for x in range(m):
        maxlen = max(maxlen, read_off[sel_read[x] + 1] - read_off[sel_read[x]])
    for task in prange(_tasks(m)):
        H, F, HS, FS, GB, res, win = _task_scratch(t, 4)
        tb = np.empty(maxlen * (2 * t + 1), dtype=np.uint8)   # traceback bytes for the longest read listed
        first, last = _task_range(task, m)
        for x in range(first, last):
            r = sel_read[x]
            _cleared(res, win)
            trace_pair(x, sel_key[x], sel_local[x], codes, rc_codes, read_off[r], read_off[r + 1] - read_off[r],
                       g_packed, g_nmask, c_off, c_end, gsize, t, match, mismatch, gap_open, gap_ext, H, F, HS, FS,
                       GB, tb, 0, res, win, ops, lens, x * maxops, 1, out)


def traceback_stage(reads, genome, sel_read, sel_key, sel_local, p):
    """Alignments of the chosen placements: CIGAR ops/lens[m, maxops] (M/I/D, forward order),
    out[m, 6]: score, first aligned read base, reference start, end row, end column, number of ops,
    and their MD and NM (md.md_of_rows)."""
    m = len(sel_read)
    maxops = 2 * int(reads.lengths.max(initial=1)) + 2
    ops = np.zeros(m * maxops, dtype=np.uint8)
    lens = np.zeros(m * maxops, dtype=np.int32)
    out = np.zeros((m, TR_COLUMNS), dtype=np.int64)
    _trace(np.asarray(sel_read, dtype=np.int64), np.asarray(sel_key, dtype=np.int64),
           np.asarray(sel_local, dtype=np.int64), reads.codes, reads.rc_codes, reads.read_off,
           genome.packed, genome.nmask, genome.offsets, genome.ends, genome.size, p.max_indels,
           p.match, p.mismatch, p.gap_open, p.gap_extend, maxops, ops, lens, out)
    ops, lens = tidy_cigars(ops.reshape(m, maxops), lens.reshape(m, maxops), out[:, TR_NOPS])
    md = md_of_rows(np.asarray(sel_read, dtype=np.int64), np.asarray(sel_key, dtype=np.int64), reads.codes,
                    reads.rc_codes, reads.read_off, ops, lens, out, genome.packed, genome.nmask)
    return ops, lens, out, md


@njit(parallel=True, cache=True)
def _rescue(task_read, task_strand, task_start, task_len, codes, rc_codes, read_off, g_packed, g_nmask,
            match, mismatch, gap_open, gap_ext, out):
    for x in prange(task_read.shape[0]):
        r = task_read[x]
        n = read_off[r + 1] - read_off[r]
        H = np.empty(n + 1, dtype=np.int32)
        E = np.empty(n + 1, dtype=np.int32)
        res = np.zeros(3, dtype=np.int64)
        rescue_align(rc_codes if task_strand[x] == 1 else codes, read_off[r], n, g_packed, g_nmask,
                     task_start[x], task_len[x], match, mismatch, gap_open, gap_ext, H, E, 0, 1, res)
        out[x, RESCUE_SCORE] = res[0]
        out[x, RESCUE_ROW] = res[1]
        out[x, RESCUE_COL] = res[2]


def rescue_stage(reads, genome, task_read, task_strand, task_start, task_len, p):
    """Mate rescue: each task's read (strand 1: its reverse complement) aligned locally anywhere in a
    reference window [task_start, + task_len): out[m, 3] = best score, its read row, its window column."""
    out = np.zeros((len(task_read), RESCUE_COLUMNS), dtype=np.int64)
    _rescue(*(np.asarray(a, dtype=np.int64) for a in (task_read, task_strand, task_start, task_len)),
            reads.codes, reads.rc_codes, reads.read_off, genome.packed, genome.nmask,
            p.match, p.mismatch, p.gap_open, p.gap_extend, out)
    return out
