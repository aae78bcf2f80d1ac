"""seed.find_candidates by a block of threads a read, for reads with thousands of seed hits (the
re-seeding of repeat reads at wide budgets). One thread a read spends milliseconds there walking,
alone, a hit list that it sorts in its slice of global memory, while few such reads leave most of
the GPU idle. Here a block shares the read's work: each thread ranks some seeds, the block copies
each taken seed's bin with neighbouring threads on neighbouring words, and merges the ascending runs
pairwise, every thread a share of each merge (merge path). Thread 0 then votes the sorted hits into
clusters with seed.vote_clusters, so the candidates are find_candidates' own (seed.py is the
reference; tests compare the two).

Device functions only: resident_kernels.py's _seed_block_kernel calls them with the block's shared
arrays (sized by MAX_SEEDS).
"""

from ..jitcache import use_versioned_cache

use_versioned_cache()  # before any @cuda.jit below

import numpy as np
from numba import cuda

from ..encode import DIAG_BIAS, STRAND_BIT
from ..seed import MAX_SEEDS
from .cuda_kernels import _dev

MAX_RUNS = 2 * MAX_SEEDS   # ascending runs of hits, a taken seed each
d_seed_kmer = _dev["seed_kmer"]
d_seed_offset = _dev["seed_offset"]


@cuda.jit(device=True)
def collect_block(q, qoff, n, k, strand, idx_off, idx_pos, max_occ, hits, hoff, budget, kms, cnts, offs, runs,
                  tally):
    """seed.collect_seed_hits for one strand by the block: hits appended at hits[hoff + tally[0]...],
    the start of each taken seed's run (relative to hoff) at runs[tally[1]...], both counts in tally
    updated. The seeds taken are collect_seed_hits': in order of bin size, then offset, while the
    hits fit `budget`, so a seed is taken when the hits of the seeds before it and its own fit."""
    tid = cuda.threadIdx.x
    nt = cuda.blockDim.x
    nseeds = (n + k - 1) // k if n >= k else 0
    for s in range(tid, nseeds, nt):
        km = d_seed_kmer(q, qoff, d_seed_offset(s, n, k), k)
        cnt = 0
        if km >= 0:
            cnt = idx_off[km + 1] - idx_off[km]
            if cnt > max_occ:
                cnt = 0
        kms[s] = km
        cnts[s] = cnt
    cuda.syncthreads()
    nh = tally[0]
    nruns = tally[1]
    for s in range(tid, nseeds, nt):
        cnt = cnts[s]
        offs[s] = -1
        if cnt > 0:
            before = 0
            rank = 0
            for u in range(nseeds):
                c = cnts[u]
                if c > 0 and (c < cnt or (c == cnt and u < s)):
                    before += c
                    rank += 1
            if before + cnt <= budget:
                offs[s] = nh + before
                runs[nruns + rank] = nh + before
    cuda.syncthreads()
    added = 0
    taken = 0
    for s in range(nseeds):   # a seed at a time, its bin by the whole block
        o = offs[s]
        if o >= 0:
            lo = idx_off[kms[s]]
            hi = idx_off[kms[s] + 1]
            diag = strand * STRAND_BIT - d_seed_offset(s, n, k) + DIAG_BIAS
            for h in range(lo + tid, hi, nt):
                hits[hoff + o + h - lo] = diag + np.int64(idx_pos[h])
            added += hi - lo
            taken += 1
    cuda.syncthreads()   # every thread has read tally before thread 0 moves it on
    if tid == 0:
        tally[0] = nh + added
        tally[1] = nruns + taken
    cuda.syncthreads()


@cuda.jit(device=True)
def merge_path(a, ao, na, bo, nb, d):
    """How many of the first d values of the merge of a[ao:ao+na] and a[bo:bo+nb] (both ascending,
    ties from the first) come from the first run."""
    lo = max(0, d - nb)
    hi = min(d, na)
    while lo < hi:
        mid = (lo + hi) // 2
        if a[ao + mid] <= a[bo + d - 1 - mid]:
            lo = mid + 1
        else:
            hi = mid
    return lo


@cuda.jit(device=True)
def merge_block(a, ao, na, bo, nb, out):
    """Merge the ascending a[ao:ao+na] and a[bo:bo+nb] into a[out:out+na+nb], each thread of the
    block a contiguous share of the output, found by merge_path."""
    tid = cuda.threadIdx.x
    nt = cuda.blockDim.x
    total = na + nb
    share = (total + nt - 1) // nt
    d = min(tid * share, total)
    end = min(d + share, total)
    i = merge_path(a, ao, na, bo, nb, d)
    j = d - i
    while d < end:
        if j >= nb or (i < na and a[ao + i] <= a[bo + j]):
            a[out + d] = a[ao + i]
            i += 1
        else:
            a[out + d] = a[bo + j]
            j += 1
        d += 1


@cuda.jit(device=True)
def sort_runs_block(a, off, n, scratch, runs, nruns):
    """seed.merge_sort_runs by the block, given where the ascending runs of a[off:off+n] start
    (runs[:nruns], relative to off, ascending): pairs of neighbouring runs merged, pass by pass,
    between a[off...] and a[scratch...]; returns the offset holding the sorted values."""
    src = off
    dst = scratch
    width = 1
    while width < nruns:
        for p in range(0, nruns, 2 * width):
            a0 = runs[p]
            b0 = runs[p + width] if p + width < nruns else n
            b1 = runs[p + 2 * width] if p + 2 * width < nruns else n
            merge_block(a, src + a0, b0 - a0, src + b0, b1 - b0, dst + a0)
        cuda.syncthreads()
        src, dst = dst, src
        width *= 2
    return src
