"""CUDA backend: the per-read kernels of core.py as numba.cuda device functions, one thread per
read (exact match, seeding) or per read-candidate pair (extension, traceback).

Three layers, after numba-cuda's examples: kernels; private launchers (to_device, grid from
cuda_config, launch, copy back); public *_stage functions with the same signatures as cpu.py.
Device memory per batch is bounded by the batch size: every buffer is sized from the batch.
"""

from .jitcache import use_versioned_cache

use_versioned_cache()  # before any @njit / @cuda.jit below

import types

import numpy as np
from numba import cuda
from numba.cuda.core import config as cuda_core_config

from . import core, cuda_config
from .params import MAX_INDELS

NAME = "cuda"
# A run's last batch is small by nature; numba-cuda would warn about its low occupancy every time.
cuda_core_config.CUDA_LOW_OCCUPANCY_WARNINGS = False
MAX_W = 2 * MAX_INDELS + 2   # band row plus one, for the local-memory arrays of the DP

_SHARED = ["base_at", "genome_word", "any_n", "contig_of", "read_matches_at", "exact_hits",
           "seed_kmer", "seed_offset", "collect_seed_hits", "merge_sort_runs",
           "find_candidates", "window_of", "banded_dp", "local_can_win", "skip_local", "push_op", "traceback",
           "extend_pair", "trace_pair"]


def _device_functions():
    """Recompile core's functions as device functions; their calls to each other resolve to the
    device versions through a copy of core's globals."""
    g = dict(vars(core))
    for name in _SHARED:
        py = getattr(core, name).py_func
        g[name] = cuda.jit(device=True)(types.FunctionType(py.__code__, g, name, py.__defaults__))
    return g


_dev = _device_functions()
d_exact_hits = _dev["exact_hits"]
d_find_candidates = _dev["find_candidates"]
d_extend_pair = _dev["extend_pair"]
d_trace_pair = _dev["trace_pair"]


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
    ncand[x] = d_find_candidates(codes, rc_codes, read_off[r], read_off[r + 1] - read_off[r], k,
                                 idx_off, idx_pos, max_occ, t, hits, x * 2 * hmax, hmax,
                                 cand_keys, cand_votes, x * mcand, mcand, dropped, x)


@cuda.jit(cache=True)
def _extend_kernel(pair_read, pair_key, codes, rc_codes, read_off, g_packed, g_nmask, c_off, c_end, gsize, t,
                   match, mismatch, gap_open, gap_ext, clip_penalty, tb, out):
    x = cuda.grid(1)
    if x >= pair_read.shape[0]:
        return
    r = pair_read[x]
    d_extend_pair(x, pair_key[x], codes, rc_codes, read_off[r], read_off[r + 1] - read_off[r], g_packed, g_nmask,
                  c_off, c_end, gsize, t, match, mismatch, gap_open, gap_ext, clip_penalty,
                  cuda.local.array(MAX_W, dtype=np.int32), cuda.local.array(MAX_W, dtype=np.int32),
                  cuda.local.array(MAX_W, dtype=np.int32), cuda.local.array(MAX_W, dtype=np.int32), tb,
                  cuda.local.array(4, dtype=np.int64), cuda.local.array(4, dtype=np.int64), out)


@cuda.jit(cache=True)
def _trace_kernel(sel_read, sel_key, sel_local, codes, rc_codes, read_off, g_packed, g_nmask, c_off, c_end, gsize,
                  t, match, mismatch, gap_open, gap_ext, maxlen, tb, ops, lens, out):
    x = cuda.grid(1)
    if x >= sel_read.shape[0]:
        return
    r = sel_read[x]
    d_trace_pair(x, sel_key[x], sel_local[x], codes, rc_codes, read_off[r], read_off[r + 1] - read_off[r],
                 g_packed, g_nmask, c_off, c_end, gsize, t, match, mismatch, gap_open, gap_ext,
                 cuda.local.array(MAX_W, dtype=np.int32), cuda.local.array(MAX_W, dtype=np.int32),
                 cuda.local.array(MAX_W, dtype=np.int32), cuda.local.array(MAX_W, dtype=np.int32),
                 tb, x * maxlen * (2 * t + 1), cuda.local.array(4, dtype=np.int64),
                 cuda.local.array(4, dtype=np.int64), ops, lens, x, sel_read.shape[0], out)


_resident = {}


def _on_device(arr):
    """Genome and index arrays go to the GPU once per process, not once per batch."""
    key = (id(arr), arr.__array_interface__["data"][0], arr.shape)
    if key not in _resident:
        _resident[key] = (arr, cuda.to_device(np.ascontiguousarray(arr)))
    return _resident[key][1]


_batch = {}


def _read_arrays(reads, *fields):
    """A batch's read arrays on the GPU, uploaded once for all its stages; only the current
    batch is kept, so device memory stays bounded by the batch size."""
    if _batch.get("reads") is not reads:
        _batch.clear()
        _batch["reads"] = reads
    for f in fields:
        if f not in _batch:
            _batch[f] = cuda.to_device(getattr(reads, f))
    return tuple(_batch[f] for f in fields)


def _launch(kernel, n, *args):
    if n > 0:
        kernel[cuda_config.blocks_for(n), cuda_config.THREADS_PER_BLOCK](*args)


def _genome_args(genome):
    return (_on_device(genome.packed), _on_device(genome.nmask), _on_device(genome.offsets),
            _on_device(genome.ends))


def exact_stage(reads, genome, index, p):
    n = len(reads)
    counts = cuda.device_array(max(n, 1), dtype=np.int64)          # written for every read
    keys = cuda.device_array(max(n, 1) * p.max_exact, dtype=np.int64)   # read only below counts
    _launch(_exact_kernel, n, *_read_arrays(reads, "packed", "rc_packed", "word_off", "read_off", "hbin", "rc_hbin"),
            *_genome_args(genome), _on_device(index.offsets),
            _on_device(index.positions), index.max_occ, p.max_exact, counts, keys)
    return counts.copy_to_host()[:n], keys.copy_to_host()[:n * p.max_exact].reshape(n, p.max_exact)


def candidate_stage(reads, sel, index, p):
    m = len(sel)
    ncand = cuda.to_device(np.zeros(m, dtype=np.int64))
    keys = cuda.device_array(max(m, 1) * p.max_candidates, dtype=np.int64)   # read only below ncand
    votes = cuda.to_device(np.zeros(max(m, 1) * p.max_candidates, dtype=np.int64))
    dropped = cuda.to_device(np.zeros(max(m, 1), dtype=np.int64))
    hits = cuda.device_array(max(m, 1) * 2 * p.max_hits, dtype=np.int64)   # hits + merge scratch
    _launch(_candidate_kernel, m, cuda.to_device(np.asarray(sel, dtype=np.int64)),
            *_read_arrays(reads, "codes", "rc_codes", "read_off"), reads.k, _on_device(index.offsets),
            _on_device(index.positions), index.max_occ, p.max_indels, hits, p.max_hits, p.max_candidates,
            ncand, keys, votes, dropped)
    keys = keys.copy_to_host()[:m * p.max_candidates]
    votes = votes.copy_to_host()[:m * p.max_candidates]
    return ncand.copy_to_host(), keys.reshape(m, -1), votes.reshape(m, -1), dropped.copy_to_host()[:m]


def extend_stage(reads, genome, pair_read, pair_key, p):
    m = len(pair_read)
    out = cuda.device_array((max(m, 1), 8), dtype=np.int64)   # every column written
    _launch(_extend_kernel, m, cuda.to_device(np.asarray(pair_read, dtype=np.int64)),
            cuda.to_device(np.asarray(pair_key, dtype=np.int64)),
            *_read_arrays(reads, "codes", "rc_codes", "read_off"), *_genome_args(genome), genome.size,
            p.max_indels, p.match, p.mismatch, p.gap_open, p.gap_extend, p.clip_penalty,
            cuda.to_device(np.zeros(1, dtype=np.uint8)), out)
    return out.copy_to_host()[:m]


def traceback_stage(reads, genome, sel_read, sel_key, sel_local, p):
    m = len(sel_read)
    maxlen = int(reads.lengths.max(initial=1))
    W = 2 * p.max_indels + 1
    # CIGAR op j of pair x at [j * m + x]: only as many rows as the longest CIGAR come back;
    # nothing is uploaded for outputs the kernel writes in full
    ops = cuda.device_array(max(m, 1) * (2 * maxlen + 2), dtype=np.uint8)
    lens = cuda.device_array(max(m, 1) * (2 * maxlen + 2), dtype=np.int32)
    out = cuda.device_array((max(m, 1), 6), dtype=np.int64)
    tb = cuda.device_array(max(m, 1) * maxlen * W, dtype=np.uint8)
    _launch(_trace_kernel, m, cuda.to_device(np.asarray(sel_read, dtype=np.int64)),
            cuda.to_device(np.asarray(sel_key, dtype=np.int64)), cuda.to_device(np.asarray(sel_local, dtype=np.int64)),
            *_read_arrays(reads, "codes", "rc_codes", "read_off"),
            *_genome_args(genome), genome.size, p.max_indels, p.match, p.mismatch, p.gap_open, p.gap_extend,
            maxlen, tb, ops, lens, out)
    out = out.copy_to_host()[:m]
    width = max(1, int(out[:, 5].max(initial=0)))
    ops = ops[:width * m].copy_to_host().reshape(width, m).T
    lens = lens[:width * m].copy_to_host().reshape(width, m).T
    return (*core.tidy_cigars(ops, lens, out[:, 5]), out)
