"""A batch kept on the GPU from exact match to traceback (the CUDA backend's single_end_batch): the
batch's codes go up once, every stage reads the one before it in device memory, and only each read's
placement and CIGAR come back. Paired batches take the same chain up to each read's own choice
(candidates_and_choice) and come back for the pairing, which runs on the host (pairing.py).

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
from ..reads import encode_reads, word_offsets
from ..options import MAX_INDELS
from . import cuda as cu
from . import launch

MAX_W = 2 * MAX_INDELS + 2
SEED_THREADS = 1 << 17   # threads of a seeding launch, each with its own hit scratch (2 * max_hits words)

d_derive_read = cu._dev["derive_read"]
d_exact_hits = cu._dev["exact_hits"]
d_find_candidates = cu._dev["find_candidates"]
d_kept_candidates = cu._dev["kept_candidates"]
d_left_out = cu._dev["left_out_well_supported"]
d_extend_pair = cu._dev["extend_pair"]
d_trace_pair = cu._dev["trace_pair"]
d_locus_scores = cu._dev["locus_scores"]
d_choose_one = cu._dev["choose_one"]
d_place_exact_copy = cu._dev["place_exact_copy"]


@cuda.jit(cache=True)
def _exact_kernel(codes, read_off, word_off, k, rc_codes, packed, rc_packed, hbin, rc_hbin, g_packed, g_nmask,
                  c_off, c_end, idx_off, idx_pos, max_occ, emax, multi_exact, counts, ekeys, incomplete, kept,
                  per_read, picked, npicked):
    """Read r's reverse complement, packed words and header bins (encode.derive_read), its exact hits
    on both strands, and what the later stages start from: reads with fewer than two exact hits are
    appended to `picked` for seeding; with multi_exact (pairs) every stored exact hit is a candidate,
    and a read with more hits than stored counts as incomplete."""
    r = cuda.grid(1)
    if r >= read_off.shape[0] - 1:
        return
    d_derive_read(r, codes, read_off, word_off, k, rc_codes, packed, rc_packed, hbin, rc_hbin)
    n = read_off[r + 1] - read_off[r]
    c = d_exact_hits(packed, word_off[r], n, hbin[r], 0, g_packed, g_nmask, c_off, c_end,
                     idx_off, idx_pos, max_occ, ekeys, r * emax, emax, 0)
    c = d_exact_hits(rc_packed, word_off[r], n, rc_hbin[r], 1, g_packed, g_nmask, c_off, c_end,
                     idx_off, idx_pos, max_occ, ekeys, r * emax, emax, c)
    counts[r] = c
    incomplete[r] = multi_exact and c > emax
    kept[r] = 0
    per_read[r] = min(c, emax) if multi_exact and c >= 2 else 0
    if c < 2:
        picked[cuda.atomic.add(npicked, 0, 1)] = r


@cuda.jit(cache=True)
def _seed_kernel(picked, npicked, codes, rc_codes, read_off, k, idx_off, idx_pos, max_occ, t, hits, hmax, mcand,
                 stride, counts, vote_fraction, ncand, cand_keys, cand_votes, dropped, incomplete, kept, per_read,
                 redo, nredo):
    """find_candidates for the picked reads, a thread's reads in turn with its own hit scratch, read
    r's candidates at row r (`stride` slots a row, the first mcand used); then whether its search
    left out a well supported locus (seed.search_incomplete; appended to `redo` where one is given)
    and how many candidate pairs it has (seed.candidate_pairs)."""
    tid = cuda.grid(1)
    for i in range(tid, npicked[0], cuda.gridsize(1)):
        r = picked[i]
        row = r * stride
        for c in range(mcand):   # unused vote slots read as 0 (left_out_well_supported looks at the first)
            cand_votes[row + c] = 0
        nc = d_find_candidates(codes, rc_codes, read_off[r], read_off[r + 1] - read_off[r], k,
                               idx_off, idx_pos, max_occ, t, hits, tid * 2 * hmax, hmax,
                               cand_keys, cand_votes, row, mcand, dropped, r)
        ncand[r] = nc
        left_out = d_left_out(dropped[r], cand_votes[row], counts[r])
        incomplete[r] = left_out
        if left_out and redo.shape[0] > 1:
            redo[cuda.atomic.add(nredo, 0, 1)] = r
        kept[r] = d_kept_candidates(nc, cand_votes, row, vote_fraction)
        per_read[r] = kept[r] + (1 if counts[r] == 1 else 0)


@cuda.jit(cache=True)
def _pairs_kernel(per_read, counts, ekeys, emax, kept, cand_keys, stride, pair_start, pair_read, pair_key):
    """seed.candidate_pairs on the device, by one block: pair_start is the exclusive scan of per_read
    (each thread sums a contiguous chunk of reads, thread 0 scans the chunk sums in shared memory);
    then each thread writes its reads' pairs: kept candidates, then the single exact hit, or every
    stored exact hit (multi_exact reads, whose per_read counts them)."""
    sums = cuda.shared.array(1024, dtype=numba.int64)
    tid = cuda.threadIdx.x
    nt = cuda.blockDim.x
    n = per_read.shape[0]
    chunk = (n + nt - 1) // nt
    lo = min(tid * chunk, n)
    hi = min(lo + chunk, n)
    s = 0
    for r in range(lo, hi):
        s += per_read[r]
    sums[tid] = s
    cuda.syncthreads()
    if tid == 0:
        run = 0
        for j in range(nt):
            v = sums[j]
            sums[j] = run
            run += v
        pair_start[0] = 0
    cuda.syncthreads()
    run = sums[tid]
    for r in range(lo, hi):
        for c in range(kept[r]):
            pair_read[run + c] = r
            pair_key[run + c] = cand_keys[r * stride + c]
        if counts[r] == 1:
            pair_read[run + kept[r]] = r
            pair_key[run + kept[r]] = ekeys[r * emax]
        elif counts[r] >= 2:
            for c in range(per_read[r]):   # 0 unless multi_exact
                pair_read[run + c] = r
                pair_key[run + c] = ekeys[r * emax + c]
        run += per_read[r]
        pair_start[r + 1] = run


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
def _choose_kernel(pair_start, pair_key, ext, codes, rc_codes, read_off, g_packed, g_nmask, c_off, c_end, gsize,
                   t, clip_penalty, eff, raw, loc, end, span, keep, counts, ekeys, emax, name_hash, incomplete,
                   match, mismatch, gap_open, gap_ext, min_score, single_end, key, local, score, sub, mapq,
                   maxlen, tb, ops, lens, out):
    """Read r's loci (choose.all_loci) and placement (choose.choose); single-end, also
    choose.place_multi_exact and the chosen placement's traceback (trace_pair), CIGAR op j at
    [j * reads + r] (unmapped reads get no ops)."""
    r = cuda.grid(1)
    m = counts.shape[0]
    if r >= m:
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
    if not single_end:
        return
    d_place_exact_copy(r, counts[r], ekeys, r * emax, name_hash, n, emax, match, key, local, score, sub, mapq)
    out[r, TR_NOPS] = 0
    if key[r] < 0:
        return
    d_trace_pair(r, key[r], local[r], codes, rc_codes, read_off[r], n,
                 g_packed, g_nmask, c_off, c_end, gsize, t, match, mismatch, gap_open, gap_ext,
                 cuda.local.array(MAX_W, dtype=np.int32), cuda.local.array(MAX_W, dtype=np.int32),
                 cuda.local.array(MAX_W, dtype=np.int32), cuda.local.array(MAX_W, dtype=np.int32),
                 cuda.local.array(MAX_W, dtype=np.uint8), tb, r * maxlen * (2 * t + 1),
                 cuda.local.array(4, dtype=np.int64), cuda.local.array(4, dtype=np.int64), ops, lens, r, m, out)


def _grid_threads(n):
    """Threads a launch for n items runs (whole blocks): what per-thread scratch must cover."""
    return launch.blocks_for(n) * launch.THREADS_PER_BLOCK


def _batch_on_device(reads):
    """The batch's codes and, in one upload, its read offsets, word offsets, name hashes and two
    zeroed list counters; the derived arrays' buffers (the exact kernel fills them), registered as
    the batch's so that later stages on this thread (cuda.py's) find them."""
    n = len(reads)
    word_off = word_offsets(reads.read_off)
    ints = np.empty(3 * n + 4, dtype=np.int64)
    ints[:n + 1] = reads.read_off
    ints[n + 1:2 * n + 2] = word_off
    ints[2 * n + 2:3 * n + 2] = reads.name_hash
    ints[3 * n + 2:] = 0
    on = cu._upload("batch integers", ints)
    arrays = {"reads": reads, "codes": cu._upload("codes", reads.codes), "read_off": on[:n + 1],
              "word_off": on[n + 1:2 * n + 2], **cu._derived_buffers(reads, word_off)}
    cu._state().batch = arrays
    return arrays, on[2 * n + 2:3 * n + 2], on[3 * n + 2:3 * n + 3], on[3 * n + 3:3 * n + 4]


def _chain(reads, genome, index, p, single_end):
    """The stages up to the choice (single-end: and traceback), launched on this thread's stream.
    Returns the device arrays by name."""
    n, tn, t = len(reads), p.tuning, p.max_indels
    emax = p.max_exact
    widen = tn.reseed_hits > 0
    stride = p.max_candidates * (tn.reseed_candidates if widen else 1)   # candidate slots a read
    arrays, name_hash, npicked, nredo = _batch_on_device(reads)
    codes, rc_codes, read_off = arrays["codes"], arrays["rc_codes"], arrays["read_off"]
    g = cu._genome_args(genome)
    idx = (cu._on_device(index.offsets), cu._on_device(index.positions))
    d = {f: cu._empty(f, n, np.int64) for f in ("counts", "ncand", "dropped", "kept", "per read", "picked")}
    d["incomplete"] = cu._empty("incomplete", n, np.bool_)
    d["exact keys"] = cu._empty("exact keys", n * emax, np.int64)
    cu._launch(_exact_kernel, n, codes, read_off, arrays["word_off"], reads.k,
               *(arrays[f] for f in ("rc_codes", "packed", "rc_packed", "hbin", "rc_hbin")), *g, *idx, index.max_occ,
               emax, not single_end, d["counts"], d["exact keys"], d["incomplete"], d["kept"], d["per read"],
               d["picked"], npicked)

    d["candidate keys"] = cu._empty("candidate keys", n * stride, np.int64)
    d["votes"] = cu._empty("votes", n * stride, np.int64)
    first, again = min(n, SEED_THREADS), min(n, cu.RESEED_CHUNK)
    hits = cu._empty("hits", max(_grid_threads(first) * 2 * p.max_hits,
                                 _grid_threads(again) * 2 * p.max_hits * tn.reseed_hits if widen else 0), np.int64)
    redo = cu._empty("redo", n if widen else 1, np.int64)
    seeding = (d["counts"], tn.vote_fraction, d["ncand"], d["candidate keys"], d["votes"], d["dropped"],
               d["incomplete"], d["kept"], d["per read"])
    cu._launch(_seed_kernel, first, d["picked"], npicked, codes, rc_codes, read_off, reads.k, *idx, index.max_occ,
               t, hits, p.max_hits, p.max_candidates, stride, *seeding, redo, nredo)
    if widen:   # seed.reseed_incomplete's wider budgets, for the reads whose search was incomplete
        cu._launch(_seed_kernel, again, redo, nredo, codes, rc_codes, read_off, reads.k, *idx,
                   index.max_occ * tn.reseed_occ, t, hits, p.max_hits * tn.reseed_hits, stride, stride, *seeding,
                   cu._empty("no list", 1, np.int64), nredo)

    bound = n * max(stride + 1, emax)   # pairs a batch could have
    d["pair start"] = cu._empty("pair start", n + 1, np.int64)
    d["pair read"] = cu._empty("pair read", bound, np.int64)
    d["pair key"] = cu._empty("pair key", bound, np.int64)
    cu._launch_block(_pairs_kernel, launch.SCAN_THREADS, d["per read"], d["counts"], d["exact keys"], emax, d["kept"],
                     d["candidate keys"], stride, d["pair start"], d["pair read"], d["pair key"])
    d["ext"] = cu._empty("extension", (bound, extend.EXT_COLUMNS), np.int64)
    cu._launch(_extend_pairs_kernel, bound, d["pair start"], d["pair read"], d["pair key"], codes, rc_codes,
               read_off, *g, genome.size, t, p.match, p.mismatch, p.gap_open, p.gap_extend, p.clip_penalty,
               cu._empty("no traceback", 1, np.uint8), d["ext"])

    for f in ("eff", "raw", "loc", "end", "span"):
        d[f] = cu._empty(f"loci {f}", bound, np.int64)
    d["keep"] = cu._empty("loci keep", bound, np.bool_)
    for f in CHOICE:
        d[f] = cu._empty(f"choice {f}", n, np.int64)
    maxlen = int(reads.lengths.max(initial=1))
    traced = n if single_end else 1
    d["ops"] = cu._empty("ops", traced * (2 * maxlen + 2), np.uint8)
    d["lens"] = cu._empty("lens", traced * (2 * maxlen + 2), np.int32)
    d["trace"] = cu._empty("traceback", (traced, TR_COLUMNS), np.int64)
    tb = cu._empty("traceback bytes", traced * maxlen * (2 * t + 1), np.uint8)
    cu._launch(_choose_kernel, n, d["pair start"], d["pair key"], d["ext"], codes, rc_codes, read_off, *g,
               genome.size, t, p.clip_penalty, *(d[f] for f in ("eff", "raw", "loc", "end", "span", "keep")),
               d["counts"], d["exact keys"], emax, name_hash, d["incomplete"], p.match, p.mismatch, p.gap_open,
               p.gap_extend, p.min_score, single_end, *(d[f] for f in CHOICE), maxlen, tb, d["ops"], d["lens"],
               d["trace"])
    return d


CHOICE = ("key", "local", "score", "sub", "mapq")


def _empty_batch(single_end):
    none = np.zeros(0, dtype=np.int64)
    if single_end:
        return (none,) * 5 + (np.zeros((0, 1), np.uint8), np.zeros((0, 1), np.int32),
                              np.zeros((0, TR_COLUMNS), np.int64), none)
    return none, (none, none, np.zeros(1, np.int64), np.zeros((0, extend.EXT_COLUMNS), np.int64)), \
        np.zeros(0, np.bool_), (none, none, none, none, np.zeros(0, np.bool_)), (none,) * 5


def single_end_batch(reads, genome, index, p):
    """mapper.map_batch's result fields for a single-end batch, computed on the GPU:
    (key, local, score, sub, mapq, ops, lens, trace, mapped)."""
    n = len(reads)
    if n == 0:
        return _empty_batch(True)
    d = _chain(reads, genome, index, p, single_end=True)
    *choice, out = cu._fetch(*(d[f] for f in CHOICE), d["trace"])
    width = max(1, int(out[:, TR_NOPS].max(initial=0)))
    ops, lens = cu._fetch(d["ops"][:width * n], d["lens"][:width * n])
    mapped = np.flatnonzero(choice[0] >= 0)
    out = out[mapped]
    ops, lens = extend.tidy_cigars(ops.reshape(width, n).T[mapped], lens.reshape(width, n).T[mapped], out[:, TR_NOPS])
    return (*choice, ops, lens, out, mapped)


def candidates_and_choice(reads, genome, index, p):
    """What mapper.map_pair_batch pairs from, computed on the GPU with every stored exact hit a
    candidate: (exact counts, (pair read, pair key, pair start, extension rows), incomplete,
    (eff, raw, loc, span, keep), (key, local, score, sub, mapq)), as host arrays."""
    if len(reads) == 0:
        return _empty_batch(False)
    d = _chain(reads, genome, index, p, single_end=False)
    counts, incomplete, start, *choice = cu._fetch(d["counts"], d["incomplete"], d["pair start"],
                                                   *(d[f] for f in CHOICE))
    m = int(start[-1])
    read, key, ext, eff, raw, loc, span, keep = cu._fetch(
        *(d[f][:m] for f in ("pair read", "pair key", "ext", "eff", "raw", "loc", "span", "keep")))
    return counts, (read, key, start, ext), incomplete, (eff, raw, loc, span, keep), tuple(choice)


def warm_up(genome, index, p):
    """One read through the chain on this thread: the first launch of a process pays for loading
    the kernels (about 0.5 s on the H100 host) and the genome and index go up; done on a thread of
    its own while the first batch is read, the mapping threads find it all in place."""
    read = (b"ACGT" * 25)
    single_end_batch(encode_reads([b"warm-up"], [read], [b"?" * len(read)], index.k), genome, index, p)
