"""The single-end batch kept on the GPU from exact match to traceback (the CUDA backend's
single_end_batch): the batch's codes go up once, every stage reads the one before it in device
memory, and only each read's placement and CIGAR come back.

The stages are mapper.map_batch's, on the same per-read functions (seed.py, choose.py, extend.py as
device functions): exact match; seeding of the reads without two exact hits; re-seeding, at wider
budgets, of those whose search left out a well supported locus; each read's candidate pairs
(counted, an exclusive scan for where they start, written); extension; loci and choice; traceback.
Reads are picked for a stage by appending them to a list with an atomic counter. The list's order
then varies from run to run, but every output is indexed by read, so no result depends on it.
Launch sizes come from the host's bounds (reads, reads x candidates a read may keep), with the true
counts read on the device, so no stage waits for the host.
"""

from ..jitcache import use_versioned_cache

use_versioned_cache()  # before any @cuda.jit below

import numba
import numpy as np
from numba import cuda

from .. import extend
from ..extend import TR_COLUMNS, TR_NOPS
from ..options import MAX_INDELS
from . import cuda as cu
from . import launch

MAX_W = 2 * MAX_INDELS + 2
SEED_THREADS = 1 << 17   # threads of a seeding launch, each with its own hit scratch (2 * max_hits words)

d_find_candidates = cu._dev["find_candidates"]
d_kept_candidates = cu._dev["kept_candidates"]
d_left_out = cu._dev["left_out_well_supported"]
d_extend_pair = cu._dev["extend_pair"]
d_trace_pair = cu._dev["trace_pair"]
d_locus_scores = cu._dev["locus_scores"]
d_choose_one = cu._dev["choose_one"]
d_place_exact_copy = cu._dev["place_exact_copy"]


@cuda.jit(cache=True)
def _pick_kernel(counts, below, picked, npicked):
    """Reads with fewer than `below` exact hits, appended to `picked`."""
    r = cuda.grid(1)
    if r < counts.shape[0] and counts[r] < below:
        picked[cuda.atomic.add(npicked, 0, 1)] = r


@cuda.jit(cache=True)
def _seed_kernel(picked, npicked, codes, rc_codes, read_off, k, idx_off, idx_pos, max_occ, t, hits, hmax, mcand,
                 stride, ncand, cand_keys, cand_votes, dropped):
    """find_candidates for the picked reads, a thread's reads in turn with its own hit scratch;
    read r's candidates at row r (`stride` slots a row, the first mcand used)."""
    tid = cuda.grid(1)
    for i in range(tid, npicked[0], cuda.gridsize(1)):
        r = picked[i]
        for c in range(mcand):   # unused vote slots read as 0 (left_out_well_supported looks at the first)
            cand_votes[r * stride + c] = 0
        ncand[r] = d_find_candidates(codes, rc_codes, read_off[r], read_off[r + 1] - read_off[r], k,
                                     idx_off, idx_pos, max_occ, t, hits, tid * 2 * hmax, hmax,
                                     cand_keys, cand_votes, r * stride, mcand, dropped, r)


@cuda.jit(cache=True)
def _incomplete_kernel(counts, ncand, cand_votes, stride, dropped, incomplete, redo, nredo):
    """seed.search_incomplete per read; with a `redo` list, the incomplete reads appended to it."""
    r = cuda.grid(1)
    if r >= counts.shape[0]:
        return
    left_out = counts[r] < 2 and d_left_out(dropped[r], cand_votes[r * stride], counts[r])
    incomplete[r] = left_out
    if left_out and redo.shape[0] > 1:
        redo[cuda.atomic.add(nredo, 0, 1)] = r


@cuda.jit(cache=True)
def _count_pairs_kernel(counts, ncand, cand_votes, stride, vote_fraction, kept, per_read):
    """seed.candidate_pairs' count per read (single-end: reads with two or more exact hits have none)."""
    r = cuda.grid(1)
    if r >= counts.shape[0]:
        return
    kept[r] = 0
    per_read[r] = 0
    if counts[r] < 2:
        kept[r] = d_kept_candidates(ncand[r], cand_votes, r * stride, vote_fraction)
        per_read[r] = kept[r] + (1 if counts[r] == 1 else 0)


@cuda.jit(cache=True)
def _scan_kernel(values, out):
    """out[0] = 0, out[i + 1] = values[0] + ... + values[i], by one block: each thread sums a
    contiguous chunk, thread 0 scans the chunk sums in shared memory, each thread writes its chunk."""
    sums = cuda.shared.array(1024, dtype=numba.int64)
    tid = cuda.threadIdx.x
    nt = cuda.blockDim.x
    n = values.shape[0]
    chunk = (n + nt - 1) // nt
    lo = min(tid * chunk, n)
    hi = min(lo + chunk, n)
    s = 0
    for i in range(lo, hi):
        s += values[i]
    sums[tid] = s
    cuda.syncthreads()
    if tid == 0:
        run = 0
        for j in range(nt):
            v = sums[j]
            sums[j] = run
            run += v
        out[0] = 0
    cuda.syncthreads()
    run = sums[tid]
    for i in range(lo, hi):
        run += values[i]
        out[i + 1] = run


@cuda.jit(cache=True)
def _write_pairs_kernel(counts, ekeys, emax, kept, cand_keys, stride, pair_start, pair_read, pair_key):
    """seed.candidate_pairs' pairs of read r at pair_start[r]: its kept candidates, then its single exact hit."""
    r = cuda.grid(1)
    if r >= counts.shape[0]:
        return
    s = pair_start[r]
    for c in range(kept[r]):
        pair_read[s + c] = r
        pair_key[s + c] = cand_keys[r * stride + c]
    if counts[r] == 1:
        pair_read[s + kept[r]] = r
        pair_key[s + kept[r]] = ekeys[r * emax]


@cuda.jit(cache=True)
def _extend_pairs_kernel(pair_start, pair_read, pair_key, codes, rc_codes, read_off, g_packed, g_nmask, c_off, c_end,
                         gsize, t, match, mismatch, gap_open, gap_ext, clip_penalty, tb, out):
    """extend_pair for each pair, as many threads as pairs could be; those past the count return."""
    x = cuda.grid(1)
    if x >= pair_start[pair_start.shape[0] - 1]:
        return
    r = pair_read[x]
    d_extend_pair(x, pair_key[x], codes, rc_codes, read_off[r], read_off[r + 1] - read_off[r], g_packed, g_nmask,
                  c_off, c_end, gsize, t, match, mismatch, gap_open, gap_ext, clip_penalty,
                  cuda.local.array(MAX_W, dtype=np.int32), cuda.local.array(MAX_W, dtype=np.int32),
                  cuda.local.array(MAX_W, dtype=np.int32), cuda.local.array(MAX_W, dtype=np.int32),
                  cuda.local.array(MAX_W, dtype=np.uint8), tb,
                  cuda.local.array(4, dtype=np.int64), cuda.local.array(4, dtype=np.int64), out)


@cuda.jit(cache=True)
def _choose_kernel(pair_start, pair_key, ext, read_off, t, clip_penalty, eff, raw, loc, end, span, keep,
                   counts, ekeys, emax, name_hash, incomplete, match, mismatch, min_score,
                   key, local, score, sub, mapq):
    """choose.all_loci, choose.choose and choose.place_multi_exact for read r."""
    r = cuda.grid(1)
    if r >= counts.shape[0]:
        return
    a = pair_start[r]
    n = read_off[r + 1] - read_off[r]
    d_locus_scores(a, pair_start[r + 1], n, pair_key, ext, t, clip_penalty, eff, raw, loc, end, span, keep, a)
    key[r] = -1
    local[r] = 0
    score[r] = 0
    sub[r] = -1
    mapq[r] = 0
    d_choose_one(r, name_hash, pair_start, pair_key, eff, raw, loc, span, keep, incomplete, match, mismatch,
                 min_score, key, local, score, sub, mapq)
    d_place_exact_copy(r, counts[r], ekeys, r * emax, name_hash, n, emax, match, key, local, score, sub, mapq)


@cuda.jit(cache=True)
def _trace_chosen_kernel(key, local, codes, rc_codes, read_off, g_packed, g_nmask, c_off, c_end, gsize,
                         t, match, mismatch, gap_open, gap_ext, maxlen, tb, ops, lens, out):
    """trace_pair for every mapped read, its CIGAR op j at [j * reads + r]; unmapped reads get no ops."""
    r = cuda.grid(1)
    m = key.shape[0]
    if r >= m:
        return
    if key[r] < 0:
        out[r, TR_NOPS] = 0
        return
    d_trace_pair(r, key[r], local[r], codes, rc_codes, read_off[r], read_off[r + 1] - read_off[r],
                 g_packed, g_nmask, c_off, c_end, gsize, t, match, mismatch, gap_open, gap_ext,
                 cuda.local.array(MAX_W, dtype=np.int32), cuda.local.array(MAX_W, dtype=np.int32),
                 cuda.local.array(MAX_W, dtype=np.int32), cuda.local.array(MAX_W, dtype=np.int32),
                 cuda.local.array(MAX_W, dtype=np.uint8), tb, r * maxlen * (2 * t + 1),
                 cuda.local.array(4, dtype=np.int64), cuda.local.array(4, dtype=np.int64), ops, lens, r, m, out)


def _counter(slot):
    """A one-word device counter for an atomic list, zero when the stream reaches it."""
    return cu._upload(slot, np.zeros(1, dtype=np.int64))


def _grid_threads(n):
    """Threads a launch for n items runs (whole blocks): what per-thread scratch must cover."""
    return launch.blocks_for(n) * launch.THREADS_PER_BLOCK


def single_end_batch(reads, genome, index, p):
    """mapper.map_batch's result fields for a single-end batch, computed on the GPU:
    (key, local, score, sub, mapq, ops, lens, trace, mapped)."""
    n, tn, t = len(reads), p.tuning, p.max_indels
    if n == 0:
        none = np.zeros(0, dtype=np.int64)
        return (none, none, none, none, none, np.zeros((0, 1), np.uint8), np.zeros((0, 1), np.int32),
                np.zeros((0, TR_COLUMNS), np.int64), none)
    emax = p.max_exact
    widen = tn.reseed_hits > 0
    stride = p.max_candidates * (tn.reseed_candidates if widen else 1)   # candidate slots a read
    codes, rc_codes, read_off = cu._read_arrays(reads, "codes", "rc_codes", "read_off")
    read_args = (codes, rc_codes, read_off)
    g = cu._genome_args(genome)

    counts = cu._empty("exact counts", n, np.int64)
    ekeys = cu._empty("exact keys", n * emax, np.int64)
    cu._launch(cu._exact_kernel, n, *cu._read_arrays(reads, "packed", "rc_packed", "word_off", "read_off", "hbin",
                                                     "rc_hbin"),
               *g, cu._on_device(index.offsets), cu._on_device(index.positions), index.max_occ, emax, counts, ekeys)

    ncand = cu._empty("ncand", n, np.int64)
    ckeys = cu._empty("candidate keys", n * stride, np.int64)
    votes = cu._empty("votes", n * stride, np.int64)
    dropped = cu._empty("dropped", n, np.int64)
    picked, npicked = cu._empty("picked", n, np.int64), _counter("npicked")
    cu._launch(_pick_kernel, n, counts, 2, picked, npicked)
    seed_args = (reads.k, cu._on_device(index.offsets), cu._on_device(index.positions))
    first, again = min(n, SEED_THREADS), min(n, cu.RESEED_CHUNK)
    hits = cu._empty("hits", max(_grid_threads(first) * 2 * p.max_hits,
                                 _grid_threads(again) * 2 * p.max_hits * tn.reseed_hits if widen else 0), np.int64)
    cu._launch(_seed_kernel, first, picked, npicked, *read_args, *seed_args, index.max_occ, t, hits, p.max_hits,
               p.max_candidates, stride, ncand, ckeys, votes, dropped)
    incomplete = cu._empty("incomplete", n, np.bool_)
    if widen:
        redo, nredo = cu._empty("redo", n, np.int64), _counter("nredo")
        cu._launch(_incomplete_kernel, n, counts, ncand, votes, stride, dropped, incomplete, redo, nredo)
        cu._launch(_seed_kernel, again, redo, nredo, *read_args, *seed_args,
                   index.max_occ * tn.reseed_occ, t, hits, p.max_hits * tn.reseed_hits, stride, stride,
                   ncand, ckeys, votes, dropped)
    cu._launch(_incomplete_kernel, n, counts, ncand, votes, stride, dropped, incomplete,
               cu._empty("no list", 1, np.int64), cu._empty("no count", 1, np.int64))

    kept, per_read = cu._empty("kept", n, np.int64), cu._empty("per read", n, np.int64)
    cu._launch(_count_pairs_kernel, n, counts, ncand, votes, stride, tn.vote_fraction, kept, per_read)
    pair_start = cu._empty("pair start", n + 1, np.int64)
    cu._launch_block(_scan_kernel, launch.SCAN_THREADS, per_read, pair_start)
    bound = n * (stride + 1)
    pair_read, pair_key = cu._empty("pair read", bound, np.int64), cu._empty("pair key", bound, np.int64)
    cu._launch(_write_pairs_kernel, n, counts, ekeys, emax, kept, ckeys, stride, pair_start, pair_read, pair_key)
    ext = cu._empty("extension", (bound, extend.EXT_COLUMNS), np.int64)
    cu._launch(_extend_pairs_kernel, bound, pair_start, pair_read, pair_key, *read_args, *g, genome.size, t,
               p.match, p.mismatch, p.gap_open, p.gap_extend, p.clip_penalty, cu._empty("no traceback", 1, np.uint8),
               ext)

    loci = [cu._empty(f"loci {f}", bound, np.int64) for f in ("eff", "raw", "loc", "end", "span")]
    keep = cu._empty("loci keep", bound, np.bool_)
    choice = [cu._empty(f"choice {f}", n, np.int64) for f in ("key", "local", "score", "sub", "mapq")]
    cu._launch(_choose_kernel, n, pair_start, pair_key, ext, read_off, t, p.clip_penalty, *loci, keep, counts,
               ekeys, emax, cu._upload("name hash", reads.name_hash), incomplete, p.match, p.mismatch, p.min_score,
               *choice)

    maxlen = int(reads.lengths.max(initial=1))
    ops = cu._empty("ops", n * (2 * maxlen + 2), np.uint8)
    lens = cu._empty("lens", n * (2 * maxlen + 2), np.int32)
    out = cu._empty("traceback", (n, TR_COLUMNS), np.int64)
    tb = cu._empty("traceback bytes", n * maxlen * (2 * t + 1), np.uint8)
    cu._launch(_trace_chosen_kernel, n, choice[0], choice[1], *read_args, *g, genome.size, t, p.match, p.mismatch,
               p.gap_open, p.gap_extend, maxlen, tb, ops, lens, out)
    *choice, out = cu._fetch(*choice, out)
    width = max(1, int(out[:, TR_NOPS].max(initial=0)))
    ops, lens = cu._fetch(ops[:width * n], lens[:width * n])
    mapped = np.flatnonzero(choice[0] >= 0)
    out = out[mapped]
    ops, lens = extend.tidy_cigars(ops.reshape(width, n).T[mapped], lens.reshape(width, n).T[mapped], out[:, TR_NOPS])
    return (*choice, ops, lens, out, mapped)
