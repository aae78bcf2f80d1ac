"""The CUDA backend's kernels as numba.cuda functions: the per-read functions of seed.py, extend.py,
encode.py, choose.py, md.py and bam/records.py recompiled as device functions, and the kernels of the
staged path (a stage a launch: cuda.py's *_stage functions, which serve the paired path's rescue and
traceback, and tests). The resident chain's kernels are in resident_kernels.py.

Only this module and resident_kernels.py import numba.cuda's compiler. A mapping run on a GPU
launches the machine code `gpualign compile` stored from them (cuda_driver.py), without importing them;
in numba's CUDA simulator, while compiling, and where no machine code is stored, gpu.py hands these
dispatchers out instead.
"""

from ..jitcache import use_versioned_cache

use_versioned_cache()  # before any @cuda.jit below

import types

import numpy as np
from numba import cuda
from numba.cuda.core import config as cuda_core_config

from .. import choose, encode, extend, fastq, md, seed
from ..bam import records
from ..extend import PAIR_DONE, RESCUE_COL, RESCUE_ROW, RESCUE_SCORE
from ..options import MAX_INDELS
from .launch import CLOSE_SHARED_THREADS, NARROW_T, SCAN_SHARED
from . import rescue_block as rb
from .rescue_block import BOUNDARY, LANES_BEST, MAX_ROWS

# A run's last batch is small by nature; numba-cuda would warn about its low occupancy every time.
cuda_core_config.CUDA_LOW_OCCUPANCY_WARNINGS = False
MAX_W = 2 * MAX_INDELS + 2   # band row plus one, for the local-memory arrays of the DP
# a narrow band's six rows (close_pair's H, F, L, LF, HS, FS) for each thread of a block, in shared memory: 2t + 2
# cells a row padded to an odd count, so that the threads of a warp reading cell b hit 32 different banks
ROW_STRIDE = 2 * NARROW_T + 3
NARROW_ROWS = (6, CLOSE_SHARED_THREADS, ROW_STRIDE)
NARROW_BASES = (CLOSE_SHARED_THREADS, ROW_STRIDE)
NARROW_TRACE_ROWS = (4, CLOSE_SHARED_THREADS, ROW_STRIDE)   # a traceback DP's H, F, HS, FS

# the per-read functions the kernels call, and the modules that define them
_SHARED = {encode: ["base_at", "genome_word", "any_n", "contig_of", "derive_read", "fnv1a"],
           seed: ["read_matches_at", "exact_hits", "seed_kmer", "seed_offset", "scratch_words", "collect_seed_hits",
                  "merge_sort_runs", "vote_clusters", "find_candidates", "kept_candidates", "left_out_well_supported",
                  "unseen_score"],
           extend: ["window_of", "mismatches_below", "ungapped_most", "ungapped_most_one_gap", "is_mismatch",
                    "rows_from_start", "first_row_to_end", "one_gap_below", "ungapped_best", "ungapped_decides",
                    "banded_dp", "banded_scores", "local_can_win", "best_clipped_segment", "local_may_win",
                    "skip_local", "open_pair", "close_pair", "push_op", "traceback", "open_trace", "close_trace"],
           choose: ["locus_scores", "mapq_of", "choose_one", "place_exact_copy"],
           md: ["put_decimal", "md_and_nm", "md_of_row"],
           records: ["reg2bin", "put_int", "put_tag_head", "put_int_tag", "read_alone", "read_fields", "sort_key",
                     "put_cigar_op", "put_cigar", "put_seq_qual", "put_alignment_tags", "put_mate_tags", "put_record"],
           fastq: ["content_end", "record_shape"]}
# functions whose device version is another text: the GPU has no memmove
_STANDINS = {"copy_bytes": records.copy_bytes_loop}


def _device_functions():
    """Recompile the shared per-read functions as device functions; their calls to each other
    resolve to the device versions through one namespace holding their modules' globals."""
    g = {}
    for module in _SHARED:
        g.update(vars(module))
    for module, names in _SHARED.items():
        for name in names:
            py = getattr(module, name).py_func
            g[name] = cuda.jit(device=True)(types.FunctionType(py.__code__, g, name, py.__defaults__))
    for name, py in _STANDINS.items():
        g[name] = cuda.jit(device=True)(types.FunctionType(py.__code__, g, name, py.__defaults__))
    return g


_dev = _device_functions()
d_derive_read = _dev["derive_read"]
d_exact_hits = _dev["exact_hits"]
d_find_candidates = _dev["find_candidates"]
d_scratch_words = _dev["scratch_words"]
d_open_pair = _dev["open_pair"]
d_close_pair = _dev["close_pair"]
d_open_trace = _dev["open_trace"]
d_close_trace = _dev["close_trace"]
d_md_of_row = _dev["md_of_row"]
d_read_fields = _dev["read_fields"]
d_sort_key = _dev["sort_key"]
d_put_record = _dev["put_record"]
d_fnv1a = _dev["fnv1a"]
d_record_shape = _dev["record_shape"]


@cuda.jit(cache=True)
def _derive_kernel(codes, read_off, word_off, k, rc, packed, rc_packed, hbin, rc_hbin):
    r = cuda.grid(1)
    if r < read_off.shape[0] - 1:
        d_derive_read(r, codes, read_off, word_off, k, rc, packed, rc_packed, hbin, rc_hbin)


@cuda.jit(cache=True)
def _exact_kernel(packed, rc_packed, word_off, read_off, hbin, rc_hbin, g_packed, g_nmask, c_off, c_end,
                  idx_off, idx_pos, max_occ, emax, counts, keys):
    r = cuda.grid(1)
    if r >= read_off.shape[0] - 1:
        return
    n = read_off[r + 1] - read_off[r]
    c = d_exact_hits(packed, word_off[r], n, hbin[r], 0, g_packed, g_nmask, c_off, c_end,
                     idx_off, idx_pos, max_occ, keys, r * emax, emax, 0)
    counts[r] = d_exact_hits(rc_packed, word_off[r], n, rc_hbin[r], 1, g_packed, g_nmask, c_off, c_end,
                             idx_off, idx_pos, max_occ, keys, r * emax, emax, c)


@cuda.jit(cache=True)
def _candidate_kernel(sel, codes, rc_codes, read_off, k, idx_off, idx_pos, max_occ, t, hits, hmax, mcand,
                      ncand, cand_keys, cand_votes, dropped):
    x = cuda.grid(1)
    if x >= sel.shape[0]:
        return
    r = sel[x]
    for c in range(mcand):   # a read's unused vote slots read as 0 (seed.unseen_score looks at the first)
        cand_votes[x * mcand + c] = 0
    ncand[x] = d_find_candidates(codes, rc_codes, read_off[r], read_off[r + 1] - read_off[r], k,
                                 idx_off, idx_pos, max_occ, t, hits, x * d_scratch_words(hmax), hmax,
                                 cand_keys, cand_votes, x * mcand, mcand, dropped, x)


@cuda.jit(cache=True)
def _open_pairs_kernel(count, pair_read, pair_key, codes, rc_codes, read_off, g_packed, g_nmask, c_off, c_end, gsize,
                       t, match, mismatch, gap_open, gap_ext, clip_penalty, out, nopen, opened):
    """open_pair for each pair (as many threads as there could be pairs; the count is count's last
    entry), the pairs it leaves open appended to opened as x * 4 + what they need, nopen counting them:
    the DPs then run in warps whose threads all have one to do."""
    x = cuda.grid(1)
    if x >= count[count.shape[0] - 1]:
        return
    r = pair_read[x]
    kind = d_open_pair(x, pair_key[x], codes, rc_codes, read_off[r], read_off[r + 1] - read_off[r], g_packed,
                       g_nmask, c_off, c_end, gsize, t, match, mismatch, gap_open, gap_ext, clip_penalty,
                       cuda.local.array(4, dtype=np.int64), cuda.local.array(4, dtype=np.int64), out)
    if kind != PAIR_DONE:
        opened[cuda.atomic.add(nopen, 0, 1)] = x * 4 + kind


@cuda.jit(device=True)
def d_close_listed(nopen, opened, pair_read, pair_key, codes, rc_codes, read_off, g_packed, g_nmask, c_off, c_end,
                   gsize, t, match, mismatch, gap_open, gap_ext, clip_penalty, H, F, L, LF, HS, FS, GB, tb, out):
    """close_pair for the listed pairs, in turn across the grid."""
    res = cuda.local.array(7, dtype=np.int64)
    win = cuda.local.array(4, dtype=np.int64)
    for y in range(cuda.grid(1), nopen[0], cuda.gridsize(1)):
        x = opened[y] >> 2
        r = pair_read[x]
        d_close_pair(x, opened[y] & 3, pair_key[x], codes, rc_codes, read_off[r], read_off[r + 1] - read_off[r],
                     g_packed, g_nmask, c_off, c_end, gsize, t, match, mismatch, gap_open, gap_ext, clip_penalty,
                     H, F, L, LF, HS, FS, GB, tb, res, win, out)


@cuda.jit(cache=True)
def _close_pairs_kernel(nopen, opened, pair_read, pair_key, codes, rc_codes, read_off, g_packed, g_nmask, c_off,
                        c_end, gsize, t, match, mismatch, gap_open, gap_ext, clip_penalty, tb, out):
    """The listed pairs' DPs for bands of t <= NARROW_T, each thread's band rows in shared memory: 2.1x
    faster than rows in local memory on the H100, whose L1 cannot hold every resident thread's rows."""
    rows = cuda.shared.array(NARROW_ROWS, dtype=np.int32)
    bases = cuda.shared.array(NARROW_BASES, dtype=np.uint8)
    i = cuda.threadIdx.x
    d_close_listed(nopen, opened, pair_read, pair_key, codes, rc_codes, read_off, g_packed, g_nmask, c_off, c_end,
                   gsize, t, match, mismatch, gap_open, gap_ext, clip_penalty, rows[0, i], rows[1, i], rows[2, i],
                   rows[3, i], rows[4, i], rows[5, i], bases[i], tb, out)


@cuda.jit(cache=True)
def _close_wide_pairs_kernel(nopen, opened, pair_read, pair_key, codes, rc_codes, read_off, g_packed, g_nmask, c_off,
                             c_end, gsize, t, match, mismatch, gap_open, gap_ext, clip_penalty, tb, out):
    """The listed pairs' DPs for any band up to MAX_INDELS, the rows in local memory."""
    d_close_listed(nopen, opened, pair_read, pair_key, codes, rc_codes, read_off, g_packed, g_nmask, c_off, c_end,
                   gsize, t, match, mismatch, gap_open, gap_ext, clip_penalty,
                   cuda.local.array(MAX_W, dtype=np.int32), cuda.local.array(MAX_W, dtype=np.int32),
                   cuda.local.array(MAX_W, dtype=np.int32), cuda.local.array(MAX_W, dtype=np.int32),
                   cuda.local.array(MAX_W, dtype=np.int32), cuda.local.array(MAX_W, dtype=np.int32),
                   cuda.local.array(MAX_W, dtype=np.uint8), tb, out)


@cuda.jit(cache=True)
def _open_traces_kernel(sel_read, sel_key, sel_local, codes, rc_codes, read_off, g_packed, g_nmask, c_off, c_end, gsize,
                        t, match, mismatch, gap_open, gap_ext, ops, lens, out, ntrace, listed):
    """open_trace for row x (read sel_read[x] placed at sel_key[x]); the rows still needing their DP
    appended to `listed`, ntrace counting them (_close_traces_kernel)."""
    x = cuda.grid(1)
    if x >= sel_read.shape[0]:
        return
    r = sel_read[x]
    if d_open_trace(x, sel_key[x], sel_local[x], codes, rc_codes, read_off[r], read_off[r + 1] - read_off[r],
                    g_packed, g_nmask, c_off, c_end, gsize, t, match, mismatch, gap_open, gap_ext,
                    cuda.local.array(4, dtype=np.int64), cuda.local.array(4, dtype=np.int64), ops, lens, x, out):
        listed[cuda.atomic.add(ntrace, 0, 1)] = x


@cuda.jit(device=True)
def d_close_listed_traces(ntrace, listed, by_read, sel_read, sel_key, sel_local, codes, rc_codes, read_off, g_packed,
                          g_nmask, c_off, c_end, gsize, t, match, mismatch, gap_open, gap_ext, maxlen, H, F, HS, FS, GB,
                          tb, ops, lens, out):
    """close_trace for the listed rows, in turn across the grid (row x: read sel_read[x], or read x
    where by_read, at sel_key[x]); a thread's traceback bytes in its own maxlen * (2t+1) of tb."""
    res = cuda.local.array(4, dtype=np.int64)
    win = cuda.local.array(4, dtype=np.int64)
    rows = sel_key.shape[0]
    g = cuda.grid(1)
    tboff = g * maxlen * (2 * t + 1)
    for y in range(g, ntrace[0], cuda.gridsize(1)):
        x = listed[y]
        r = x if by_read else sel_read[x]
        d_close_trace(x, sel_key[x], sel_local[x], codes, rc_codes, read_off[r], read_off[r + 1] - read_off[r],
                      g_packed, g_nmask, c_off, c_end, gsize, t, match, mismatch, gap_open, gap_ext, H, F, HS, FS, GB,
                      tb, tboff, res, win, ops, lens, x, rows, out)


@cuda.jit(cache=True)
def _close_traces_kernel(ntrace, listed, by_read, sel_read, sel_key, sel_local, codes, rc_codes, read_off, g_packed,
                         g_nmask, c_off, c_end, gsize, t, match, mismatch, gap_open, gap_ext, maxlen, tb, ops, lens,
                         out):
    """The listed rows' DPs with traceback for bands of t <= NARROW_T, each thread's band rows in
    shared memory (as _close_pairs_kernel's)."""
    rows = cuda.shared.array(NARROW_TRACE_ROWS, dtype=np.int32)
    bases = cuda.shared.array(NARROW_BASES, dtype=np.uint8)
    i = cuda.threadIdx.x
    d_close_listed_traces(ntrace, listed, by_read, sel_read, sel_key, sel_local, codes, rc_codes, read_off, g_packed,
                          g_nmask, c_off, c_end, gsize, t, match, mismatch, gap_open, gap_ext, maxlen, rows[0, i],
                          rows[1, i], rows[2, i], rows[3, i], bases[i], tb, ops, lens, out)


@cuda.jit(cache=True)
def _close_wide_traces_kernel(ntrace, listed, by_read, sel_read, sel_key, sel_local, codes, rc_codes, read_off,
                              g_packed, g_nmask, c_off, c_end, gsize, t, match, mismatch, gap_open, gap_ext, maxlen, tb,
                              ops, lens, out):
    """The listed rows' DPs with traceback for any band up to MAX_INDELS, the rows in local memory."""
    d_close_listed_traces(ntrace, listed, by_read, sel_read, sel_key, sel_local, codes, rc_codes, read_off, g_packed,
                          g_nmask, c_off, c_end, gsize, t, match, mismatch, gap_open, gap_ext, maxlen,
                          cuda.local.array(MAX_W, dtype=np.int32), cuda.local.array(MAX_W, dtype=np.int32),
                          cuda.local.array(MAX_W, dtype=np.int32), cuda.local.array(MAX_W, dtype=np.int32),
                          cuda.local.array(MAX_W, dtype=np.uint8), tb, ops, lens, out)


@cuda.jit(cache=True)
def _md_kernel(write, by_read, sel_read, sel_key, codes, rc_codes, read_off, ops, lens, trace, g_packed, g_nmask,
               md_off, text, nm):
    """MD and NM of each traceback row (md.md_of_row), row x being read sel_read[x] placed at sel_key[x]
    (by_read: read x, as the resident chain traces every read; sel_read is then not read). Measured
    (write False: row x's size to md_off[x + 1], its NM to nm[x]), or written at md_off[x] once
    cuda.scan_on_device has summed the sizes. CIGARs in the GPU's layout: op j of row x at [j * rows + x]."""
    x = cuda.grid(1)
    rows = sel_key.shape[0]
    if x >= rows:
        return
    r = x if by_read else sel_read[x]
    if write:
        d_md_of_row(x, r, sel_key[x], codes, rc_codes, read_off, ops, lens, x, rows, trace, g_packed, g_nmask, text,
                    md_off[x], True)
    else:
        end, nm_x = d_md_of_row(x, r, sel_key[x], codes, rc_codes, read_off, ops, lens, x, rows, trace, g_packed,
                                g_nmask, text, 0, False)
        md_off[x + 1] = end
        nm[x] = nm_x


@cuda.jit(cache=True)
def _records_kernel(write, by_read, row_of, key, mapq, score, sub, proper, paired, names, name_off, codes, quals,
                    read_off, ops, lens, trace, text, md_off, nm, c_off, rg, rec_off, buf, keys):
    """Each read's BAM record (records.put_record, the host's own function), a thread a read: measured
    (write False: its size to rec_off[r + 1], its sort key to keys[r]), or written at rec_off[r] once
    cuda.scan_on_device has summed the sizes, unless they overflow buf (the host then encodes the
    batch itself). The read's traceback row: r where it mapped (by_read), else row_of[r]; CIGARs at
    ops/lens[x, row] (the GPU's layout, [op, row])."""
    r = cuda.grid(1)
    n = read_off.shape[0] - 1
    if r >= n or (write and rec_off[n] > buf.shape[0]):
        return
    row = (r if key[r] >= 0 else -1) if by_read else row_of[r]
    mate_row = -1
    if paired:
        mate_row = ((r ^ 1) if key[r ^ 1] >= 0 else -1) if by_read else row_of[r ^ 1]
    fields = d_read_fields(r, row, mate_row, key, mapq, proper, paired, trace, ops, lens, c_off)
    if write:
        d_put_record(r, row, names, name_off, codes, quals, read_off, mapq, score, sub, ops, lens, trace, text, md_off,
                     nm, rg, fields, mate_row, buf, rec_off[r], True, 0)
    else:
        rec_off[r + 1] = d_put_record(r, row, names, name_off, codes, quals, read_off, mapq, score, sub, ops, lens,
                                      trace, text, md_off, nm, rg, fields, mate_row, buf, 0, False, 0)
        keys[r] = d_sort_key(fields[0], fields[1], fields[2])


@cuda.jit(device=True)
def d_chunk_start(values, first, n, sums):
    """A one-block exclusive scan of values[first:first + n], chunk by chunk: this thread's chunk
    [lo, hi) (the block's threads split the items in order) and the sum of the values before it.
    Each thread sums its chunk into the shared `sums` (a slot a thread), thread 0 scans them."""
    tid = cuda.threadIdx.x
    nt = cuda.blockDim.x
    chunk = (n + nt - 1) // nt
    lo = min(tid * chunk, n)
    hi = min(lo + chunk, n)
    s = 0
    for i in range(lo, hi):
        s += values[first + i]
    sums[tid] = s
    cuda.syncthreads()
    if tid == 0:
        run = 0
        for j in range(nt):
            v = sums[j]
            sums[j] = run
            run += v
    cuda.syncthreads()
    return lo, hi, sums[tid]


@cuda.jit(device=True)
def d_tile_scan(v, tile):
    """The inclusive scan of the block's values (v, this thread's) in the shared `tile` (a slot a
    thread; Hillis and Steele: log2(threads) steps); returns this thread's running sum. The block's
    total stays in tile[threads - 1]."""
    tid = cuda.threadIdx.x
    tile[tid] = v
    cuda.syncthreads()
    step = 1
    while step < cuda.blockDim.x:
        add = tile[tid - step] if tid >= step else 0
        cuda.syncthreads()
        tile[tid] += add
        cuda.syncthreads()
        step *= 2
    return tile[tid]


@cuda.jit(cache=True)
def _tile_sums_kernel(values, first, n, sums):
    """sums[b]: the sum of block b's tile of values[first:first + n] (a value a thread)."""
    tile = cuda.shared.array(SCAN_SHARED, dtype=np.int64)
    i = cuda.grid(1)
    total = d_tile_scan(values[first + i] if i < n else 0, tile)
    if cuda.threadIdx.x == cuda.blockDim.x - 1:
        sums[cuda.blockIdx.x] = total


@cuda.jit(cache=True)
def _scan_sums_kernel(sums):
    """sums turned into their exclusive running sums (where each tile starts), by one block
    (d_chunk_start)."""
    lo, hi, run = d_chunk_start(sums, 0, sums.shape[0], cuda.shared.array(SCAN_SHARED, dtype=np.int64))
    for i in range(lo, hi):
        v = sums[i]
        sums[i] = run
        run += v


@cuda.jit(cache=True)
def _scan_tiles_kernel(values, first, n, sums, start):
    """start[0] = 0 and start[i + 1] = values[first] + ... + values[first + i]: each tile scanned by its
    block from where _scan_sums_kernel says it starts. values may be start itself (first = 1: sizes
    in start[1:] turned into offsets): each thread reads its value before any thread writes."""
    i = cuda.grid(1)
    run = d_tile_scan(values[first + i] if i < n else 0, cuda.shared.array(SCAN_SHARED, dtype=np.int64))
    if i < n:
        start[i + 1] = sums[cuda.blockIdx.x] + run
    if i == 0:
        start[0] = 0


@cuda.jit(cache=True)
def _rescue_block_kernel(task_read, task_strand, task_start, task_len, codes, rc_codes, read_off, g_packed, g_nmask,
                         match, mismatch, gap_open, gap_ext, out):
    """rescue_align of each task, a block a task (rescue_block.py), tasks in turn across the grid."""
    up_h = cuda.shared.array(BOUNDARY, dtype=np.int32)
    up_f = cuda.shared.array(BOUNDARY, dtype=np.int32)
    lanes_best = cuda.shared.array(LANES_BEST, dtype=np.int64)
    hc = cuda.local.array(MAX_ROWS, dtype=np.int32)
    ec = cuda.local.array(MAX_ROWS, dtype=np.int32)
    best = cuda.local.array(3, dtype=np.int64)
    res = cuda.local.array(3, dtype=np.int64)
    lane = cuda.threadIdx.x
    for x in range(cuda.blockIdx.x, task_read.shape[0], cuda.gridDim.x):
        r = task_read[x]
        rb.sw_stripes(rc_codes if task_strand[x] == 1 else codes, read_off[r], read_off[r + 1] - read_off[r],
                      g_packed, g_nmask, task_start[x], task_len[x], match, mismatch, gap_open, gap_ext, hc, ec,
                      up_h, up_f, best)
        lanes_best[lane, 0] = best[0]
        lanes_best[lane, 1] = best[1]
        lanes_best[lane, 2] = best[2]
        cuda.syncthreads()
        if lane == 0:
            rb.first_best(lanes_best, res)
            out[x, RESCUE_SCORE] = res[0]
            out[x, RESCUE_ROW] = res[1]
            out[x, RESCUE_COL] = res[2]
        cuda.syncthreads()   # the shared arrays are the next task's
