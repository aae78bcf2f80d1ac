"""seed.find_candidates by a block of threads a read. A thread a read, as the host runs it, walks its
hit list alone, sorting it in its slice of global memory: on the GPU that kept a warp's threads
waiting on scattered memory and on each other's longer lists. Here a block shares the read's work:
each thread ranks some seeds, the block copies each taken seed's bin with neighbouring threads on
neighbouring words, merges the ascending runs pairwise, every thread a share of each merge (merge
path), and votes the sorted hits into clusters (vote_block), so the candidates are find_candidates'
own (seed.py is the reference; tests compare the two). Most reads have few hits and clusters: those
are sorted and chosen by rank instead (rank_sort_block, rank_clusters), without the merges' and the
vote rounds' fixed cost, which made a read of a few dozen hits cost about 100 k GPU cycles. The hits
live in shared memory for the first seeding's budget (resident_kernels._seed_shared_kernel) and in
global memory for the re-seeding's wider ones, whose reads (thousands of hits, hundreds of clusters) are
sorted a whole pass of merges at a time (sort_runs_pass_block) and voted from their best clusters alone
(vote_block_counted).

Device functions only: resident_kernels.py's seeding kernels call them with the block's shared
arrays (sized by MAX_SEEDS).
"""

from ..jitcache import LINEINFO, use_versioned_cache

use_versioned_cache()  # before any @cuda.jit below

import numpy as np
from numba import cuda

from ..encode import DIAG_BIAS, STRAND_BIT
from ..seed import MAX_SEEDS
from .cuda_kernels import _dev

MAX_RUNS = 2 * MAX_SEEDS   # ascending runs of hits, a taken seed each
RANK_SORT_SHARE = 2        # hits a thread up to which sorting them by rank beats merge passes
VOTE_SHIFT = 1 << 32       # vote_block's key: votes * VOTE_SHIFT + (VOTE_SHIFT - 1 - first hit)
VOTE_BINS = 16             # vote_block_counted's counts of clusters by votes: 1 to VOTE_BINS - 2, VOTE_BINS - 1 or more
PAST_RUN = np.iinfo(np.int64).max   # merge_block's value past a run's end: above every hit (a diagonal)
# Array offsets in the loops below are unsigned (U): numba wraps a signed index around (a compare, a select
# and an add in 64 bits each access), and the first seeding's profile was three quarters integer arithmetic.
# Unsigned and signed operands must not meet in an expression (numba makes the result a float).
U = np.uint64
d_seed_kmer = _dev["seed_kmer"]
d_seed_offset = _dev["seed_offset"]


@cuda.jit(device=True, **LINEINFO)
def collect_block(q, qoff, n, k, strand, idx_off, idx_pos, max_occ, hits, hoff, budget, most, kms, cnts, offs, order,
                  runs, tally):
    """seed.collect_seed_hits for one strand by the block: hits appended at hits[hoff + tally[0]...],
    the start of each taken seed's run (relative to hoff) at runs[tally[1]...], both counts in tally
    updated (tally[2]: scratch, 0 between calls). The seeds taken are collect_seed_hits': in order of
    bin size, then offset, while the hits fit `budget`, so a seed is taken when the hits of the seeds
    before it and its own fit (the taken seeds are the first ranks). Then every thread copies its share
    of all the taken bins at once (order: the seed of each rank), so the block waits on the bins' memory
    once, not once a seed. most >= 0: where the hits so far and all this strand's would be more than
    `most`, nothing is copied and every thread returns False (else True)."""
    tid = cuda.threadIdx.x
    nt = cuda.blockDim.x
    nseeds = (n + k - 1) // k if n >= k else 0
    mine = 0
    for s in range(tid, nseeds, nt):
        km = d_seed_kmer(q, qoff, d_seed_offset(s, n, k), k)
        cnt = 0
        if km >= 0:
            cnt = idx_off[U(km + 1)] - idx_off[U(km)]
            if cnt > max_occ:
                cnt = 0
        kms[U(s)] = km
        cnts[U(s)] = cnt
        mine += cnt
    if most >= 0 and mine > 0:
        cuda.atomic.add(tally, 2, mine)
    cuda.syncthreads()
    nh = tally[0]
    nruns = tally[1]
    if most >= 0 and nh + tally[2] > most:
        cuda.syncthreads()   # every thread has read tally before thread 0 zeroes it
        if tid == 0:
            tally[2] = 0
        cuda.syncthreads()
        return False
    for s in range(tid, nseeds, nt):
        cnt = cnts[U(s)]
        offs[U(s)] = -1
        if cnt > 0:
            before = 0
            rank = 0
            for u in range(nseeds):
                c = cnts[U(u)]
                if c > 0 and (c < cnt or (c == cnt and u < s)):
                    before += c
                    rank += 1
            if before + cnt <= budget:
                offs[U(s)] = nh + before
                runs[U(nruns + rank)] = nh + before
                order[U(rank)] = s
    cuda.syncthreads()
    added = 0
    taken = 0
    for s in range(nseeds):
        if offs[U(s)] >= 0:
            added += cnts[U(s)]
            taken += 1
    for g in range(nh + tid, nh + added, nt):
        lo = 0   # the last taken rank whose run starts at or before slot g
        hi = taken - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if runs[U(nruns + mid)] <= g:
                lo = mid
            else:
                hi = mid - 1
        s = np.int64(order[U(lo)])   # int32 in shared memory: the diagonal below needs 64 bits
        h = idx_off[U(kms[U(s)])] + g - np.int64(runs[U(nruns + lo)])
        hits[U(hoff + g)] = strand * STRAND_BIT - d_seed_offset(s, n, k) + DIAG_BIAS + np.int64(idx_pos[U(h)])
    cuda.syncthreads()   # every thread has read tally before thread 0 moves it on
    if tid == 0:
        tally[0] = nh + added
        tally[1] = nruns + taken
        tally[2] = 0
    cuda.syncthreads()
    return True


@cuda.jit(device=True, **LINEINFO)
def rank_sort_block(a, off, n, dst):
    """a[off:off+n] sorted into a[dst:dst+n]: each value written at its rank (the values below it, and
    the equal ones before it), a thread's values counted against all n; one wait. Equal values are
    equal bits, so the order is merge_sort_runs' own."""
    uoff = U(off)
    for j in range(cuda.threadIdx.x, n, cuda.blockDim.x):
        v = a[uoff + U(j)]
        rank = 0
        for i in range(n):
            w = a[uoff + U(i)]
            if w < v or (w == v and i < j):
                rank += 1
        a[U(dst + rank)] = v
    cuda.syncthreads()


@cuda.jit(device=True, **LINEINFO)
def merge_path(a, ao, na, bo, nb, d):
    """How many of the first d values of the merge of a[ao:ao+na] and a[bo:bo+nb] (both ascending,
    ties from the first) come from the first run."""
    lo = max(0, d - nb)
    hi = min(d, na)
    while lo < hi:
        mid = (lo + hi) // 2
        if a[U(ao + mid)] <= a[U(bo + d - 1 - mid)]:
            lo = mid + 1
        else:
            hi = mid
    return lo


@cuda.jit(device=True, **LINEINFO)
def merge_block(a, ao, na, bo, nb, out):
    """Merge the ascending a[ao:ao+na] and a[bo:bo+nb] into a[out:out+na+nb], each thread of the
    block a contiguous share of the output (merge_share)."""
    nt = cuda.blockDim.x
    total = na + nb
    share = (total + nt - 1) // nt
    d = min(cuda.threadIdx.x * share, total)
    merge_share(a, ao, na, bo, nb, out, d, min(d + share, total))


@cuda.jit(device=True, **LINEINFO)
def merge_share(a, ao, na, bo, nb, out, d, end):
    """Slots d to end of the merge of the ascending a[ao:ao+na] and a[bo:bo+nb] written at a[out + d...],
    from where merge_path puts slot d."""
    i = merge_path(a, ao, na, bo, nb, d)
    one = U(1)   # unsigned from here on (U)
    ua, ub, uo, una, unb = U(ao), U(bo), U(out), U(na), U(nb)
    ui, ud, uend = U(i), U(d), U(end)
    uj = ud - ui
    x = a[ua + ui] if ui < una else PAST_RUN   # each run's next value held, so a step reads one value, not three
    y = a[ub + uj] if uj < unb else PAST_RUN
    while ud < uend:
        if x <= y:   # ties from the first run; a run's end reads as larger than any hit
            a[uo + ud] = x
            ui += one
            x = a[ua + ui] if ui < una else PAST_RUN
        else:
            a[uo + ud] = y
            uj += one
            y = a[ub + uj] if uj < unb else PAST_RUN
        ud += one


@cuda.jit(device=True, **LINEINFO)
def pair_of(runs, nruns, width, d):
    """The first run of the pair (runs 2 * width apart) whose merged output holds slot d of a pass:
    the last such run starting at or before d."""
    lo = 0
    hi = (nruns - 1) // (2 * width)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if runs[mid * 2 * width] <= d:
            lo = mid
        else:
            hi = mid - 1
    return lo * 2 * width


@cuda.jit(device=True, **LINEINFO)
def merge_pass(a, src, dst, n, runs, nruns, width):
    """One pass of sort_runs_pass_block: each pair of neighbouring merged runs (width runs each) of
    a[src:src+n] merged into a[dst:dst+n]. Each thread writes a contiguous share of the whole pass's
    output, crossing from pair to pair where its share does (a search or two a pass, however many
    pairs: a pair at a time, every thread takes a share of each, a search and a wait a pair)."""
    nt = cuda.blockDim.x
    share = (n + nt - 1) // nt
    d = min(cuda.threadIdx.x * share, n)
    end = min(d + share, n)
    while d < end:
        p = pair_of(runs, nruns, width, d)
        a0 = runs[p]
        b0 = runs[p + width] if p + width < nruns else n
        b1 = runs[p + 2 * width] if p + 2 * width < nruns else n
        stop = min(end, b1)
        merge_share(a, src + a0, b0 - a0, src + b0, b1 - b0, dst + a0, d - a0, stop - a0)
        d = stop


@cuda.jit(device=True, **LINEINFO)
def merge_pairs(a, src, dst, n, runs, nruns, width):
    """One pass of sort_runs_block: each pair of neighbouring merged runs (width runs each) of a[src:src+n]
    merged into a[dst:dst+n] by merge_block, every thread a share of each pair's merge."""
    for p in range(0, nruns, 2 * width):
        a0 = runs[p]
        b0 = runs[p + width] if p + width < nruns else n
        b1 = runs[p + 2 * width] if p + 2 * width < nruns else n
        merge_block(a, src + a0, b0 - a0, src + b0, b1 - b0, dst + a0)


def runs_sorter(merge_all):
    """seed.merge_sort_runs by the block, each pass of merges made by merge_all (merge_pairs or merge_pass),
    as a device function (a, off, n, scratch, runs, nruns): given where the ascending runs of a[off:off+n]
    start (runs[:nruns], relative to off, ascending), pairs of neighbouring runs merged, pass by pass,
    between a[off...] and a[scratch...]; it returns the offset holding the sorted values. At most
    RANK_SORT_SHARE values a thread are ranked instead (rank_sort_block): most reads' hits, whose merge
    passes cost a merge path search and a division a run pair, whatever the pair's length."""
    @cuda.jit(device=True, **LINEINFO)
    def sort_runs(a, off, n, scratch, runs, nruns):
        if nruns > 1 and n <= RANK_SORT_SHARE * cuda.blockDim.x:
            rank_sort_block(a, off, n, scratch)
            return scratch
        src = off
        dst = scratch
        width = 1
        while width < nruns:
            merge_all(a, src, dst, n, runs, nruns, width)
            cuda.syncthreads()
            src, dst = dst, src
            width *= 2
        return src
    return sort_runs


sort_runs_block = runs_sorter(merge_pairs)   # the first seeding's reads
# the re-seeding's (many runs and hits): a pass's threads' shares cross the pairs. On the H200 the re-seeding's
# kernel took 2.12 against 3.40 ms a chrX batch with this and vote_block_counted; the first seeding's kernels were
# slower with them (fourteenth session), so they keep sort_runs_block and vote_block
sort_runs_pass_block = runs_sorter(merge_pass)


@cuda.jit(device=True, **LINEINFO)
def vote_block(a, at, nh, t, fo, best, cand_keys, cand_votes, coff, max_cand, dropped, di):
    """seed.vote_clusters of the sorted a[at:at + nh] by the block; every thread returns the number of
    candidates. a[fo:fo + nh] is scratch (the sort's other buffer); best: a shared slot a thread.

    The clusters are cut by walk_clusters. Where they fit `best`, each is ranked at once (rank_clusters):
    most reads have a few, and a ranking stops early for all but the best. Else the best max_cand are
    taken one a round (best_by_rounds)."""
    nclusters = walk_clusters(a, at, nh, t, fo, best)
    if nclusters <= best.shape[0]:
        return rank_clusters(a, at, best, nclusters, cand_keys, cand_votes, coff, max_cand, dropped, di)
    return best_by_rounds(a, at, nh, fo, best, cand_keys, cand_votes, coff, max_cand, dropped, di)


@cuda.jit(device=True, **LINEINFO)
def vote_block_counted(a, at, nh, t, fo, best, cand_keys, cand_votes, coff, max_cand, dropped, di):
    """vote_block for reads with many clusters (the re-seeding's: a repeat's read has hundreds, most of a
    hit), where a ranking's every key would read all the others: a few clusters (two a thread at most) are
    ranked at once; of more, only the best max_cand + 1 (best_by_threshold): those of more votes than the
    (max_cand + 1)th best has, found from the clusters counted by votes, and the earliest of its votes.
    Where the counts do not tell (that cluster has VOTE_BINS - 1 votes or more), all are ranked where they
    fit `best`, else taken a round at a time (best_by_rounds)."""
    tid = cuda.threadIdx.x
    nt = cuda.blockDim.x
    by_votes = cuda.shared.array(VOTE_BINS, dtype=np.int32)   # clusters of v votes at [v], the last bin v or more
    slots = cuda.shared.array(1, dtype=np.int64)   # best_by_threshold's count of the keys it gathers
    for v in range(tid, VOTE_BINS, nt):
        by_votes[v] = 0
    if tid == 0:
        slots[0] = 0
    nclusters = walk_clusters(a, at, nh, t, fo, best)   # it waits for the block before and after
    fits = best.shape[0]
    if nclusters <= fits and nclusters <= 2 * nt:
        return rank_clusters(a, at, best, nclusters, cand_keys, cand_votes, coff, max_cand, dropped, di)
    for j in range(tid, nh, nt):   # counted only here: most reads have a few clusters
        if a[fo + j] > 0:
            cuda.atomic.add(by_votes, min(a[fo + j], VOTE_BINS - 1), 1)
    cuda.syncthreads()
    votes, above = vote_threshold(by_votes, max_cand)
    counted = 0 < votes < VOTE_BINS - 1 and max_cand + 1 <= fits
    if counted:
        return best_by_threshold(a, at, nh, fo, votes, max_cand + 1 - above, slots, best, cand_keys, cand_votes,
                                 coff, max_cand, dropped, di)
    if nclusters <= fits:
        return rank_clusters(a, at, best, nclusters, cand_keys, cand_votes, coff, max_cand, dropped, di)
    return best_by_rounds(a, at, nh, fo, best, cand_keys, cand_votes, coff, max_cand, dropped, di)


@cuda.jit(device=True, **LINEINFO)
def walk_clusters(a, at, nh, t, fo, best):
    """The clusters of the sorted a[at:at + nh] (seed.vote_clusters'), their votes written at each one's
    first hit in a[fo:fo + nh] (0 elsewhere) and their keys (votes, earliest first: votes * VOTE_SHIFT +
    (VOTE_SHIFT - 1 - first hit)) in best[:n] where they fit; returns their number n to every thread.

    A gap of more than t between neighbouring hits always starts a cluster, so the segments between
    such gaps are cut into clusters independently: a thread walks each segment it starts (most hold
    one hit)."""
    tid = cuda.threadIdx.x
    nt = cuda.blockDim.x
    clusters = cuda.shared.array(1, dtype=np.int64)
    if tid == 0:
        clusters[0] = 0
    uat, ufo = U(at), U(fo)
    for j in range(tid, nh, nt):
        a[ufo + U(j)] = 0
    cuda.syncthreads()
    fits = best.shape[0]
    for j in range(tid, nh, nt):
        if j == 0 or a[uat + U(j)] - a[uat + U(j - 1)] > t:
            s = j
            while True:
                e = s + 1
                while e < nh and a[uat + U(e)] - a[uat + U(s)] <= t:
                    e += 1
                a[ufo + U(s)] = e - s
                slot = cuda.atomic.add(clusters, 0, 1)   # the slots' order varies; the keys are distinct
                if slot < fits:
                    best[U(slot)] = (e - s) * VOTE_SHIFT + (VOTE_SHIFT - 1 - s)
                if e >= nh or a[uat + U(e)] - a[uat + U(e - 1)] > t:
                    break
                s = e
    cuda.syncthreads()
    return clusters[0]


@cuda.jit(device=True, **LINEINFO)
def best_by_rounds(a, at, nh, fo, best, cand_keys, cand_votes, coff, max_cand, dropped, di):
    """vote_block's outcome from walk_clusters' votes in a[fo:fo + nh], the best max_cand clusters taken one
    a round by a block-wide maximum of (votes, earliest first), vote_clusters' order, and one more round for
    the votes of the best left out; best: a shared slot a thread."""
    tid = cuda.threadIdx.x
    nt = cuda.blockDim.x
    ufo = U(fo)
    nc = 0
    lost = 0
    for rnd in range(max_cand + 1):
        top = 0
        for j in range(tid, nh, nt):   # (votes, earliest first) packed so that the larger key is the better
            v = a[ufo + U(j)]
            if v > 0:
                top = max(top, v * VOTE_SHIFT + (VOTE_SHIFT - 1 - j))
        best[tid] = top
        cuda.syncthreads()
        width = 1
        while width < nt:   # tree maximum over the block's slots
            if (tid & (2 * width - 1)) == 0 and tid + width < nt:   # width a power of two: no division
                best[tid] = max(best[tid], best[tid + width])
            width *= 2
            cuda.syncthreads()
        top = best[0]
        cuda.syncthreads()   # every thread has read best[0] before the next round writes it
        if top == 0:
            break
        v = top // VOTE_SHIFT
        if rnd == max_cand:
            lost = v
        else:
            j = VOTE_SHIFT - 1 - top % VOTE_SHIFT
            if tid == 0:
                cand_votes[coff + rnd] = v
                cand_keys[coff + rnd] = a[at + (2 * j + v - 1) // 2]
                a[fo + j] = 0
            nc += 1
        cuda.syncthreads()   # the taken cluster is gone before the next round looks
    if tid == 0:
        dropped[di] = lost
    return nc


@cuda.jit(device=True, **LINEINFO)
def vote_threshold(by_votes, max_cand):
    """The votes of the (max_cand + 1)th best cluster, from the clusters counted by votes, and how many
    clusters have more; 0 votes where there are not that many clusters, VOTE_BINS - 1 where the last
    bin (that many votes or more) holds it."""
    above = 0
    for v in range(VOTE_BINS - 1, 0, -1):
        if above + by_votes[v] >= max_cand + 1:
            return v, above
        above += by_votes[v]
    return 0, above


@cuda.jit(device=True, **LINEINFO)
def best_by_threshold(a, at, nh, fo, votes, needed, slots, keys, cand_keys, cand_votes, coff, max_cand, dropped,
                      di):
    """vote_block's outcome from its best max_cand + 1 clusters alone: every cluster of more than
    `votes` votes, and the `needed` earliest of exactly `votes` (vote_threshold's), gathered into keys
    and ranked by rank_clusters. Every key above one of them is one of them, so their ranks among
    them are their ranks among all. a[fo + j] holds the votes of the cluster starting at hit j (0
    elsewhere); slots: a shared count, 0 on entry."""
    tid = cuda.threadIdx.x
    nt = cuda.blockDim.x
    for j in range(tid, nh, nt):
        v = a[fo + j]
        if v > votes:
            keys[cuda.atomic.add(slots, 0, 1)] = v * VOTE_SHIFT + (VOTE_SHIFT - 1 - j)
    taken = 0   # clusters of `votes` votes passed, the same in every thread (a block-wide count a chunk)
    c0 = 0
    while taken < needed and c0 < nh:   # a chunk of nt hits at a time, earliest first
        j = c0 + tid
        tie = np.int32(0)   # syncthreads_count takes an integer (the GPU's compiler has no bool form)
        if j < nh and a[fo + j] == votes:
            tie = np.int32(1)
            before = taken   # the chunk's ties before this one, and the earlier chunks'
            for i in range(c0, j):
                if a[fo + i] == votes:
                    before += 1
            if before < needed:
                keys[cuda.atomic.add(slots, 0, 1)] = votes * VOTE_SHIFT + (VOTE_SHIFT - 1 - j)
        taken += cuda.syncthreads_count(tie)
        c0 += nt
    cuda.syncthreads()   # the keys are all written (where no chunk's count waited)
    return rank_clusters(a, at, keys, slots[0], cand_keys, cand_votes, coff, max_cand, dropped, di)


@cuda.jit(device=True, **LINEINFO)
def rank_clusters(a, at, keys, nclusters, cand_keys, cand_votes, coff, max_cand, dropped, di):
    """vote_block's outcome from the keys of all its clusters (keys[:nclusters], in any order; votes *
    VOTE_SHIFT + (VOTE_SHIFT - 1 - first hit), distinct): a thread's keys each ranked by the keys above
    it, the first max_cand written as candidates at their rank, the votes of rank max_cand (0 if none)
    the best left out. Returns the number of candidates once the block has waited, so that every thread
    sees them (another thread may have written them)."""
    for x in range(cuda.threadIdx.x, nclusters, cuda.blockDim.x):
        key = keys[U(x)]
        rank = 0
        for y in range(nclusters):
            if keys[U(y)] > key:
                rank += 1
                if rank > max_cand:
                    break
        if rank <= max_cand:
            v = key // VOTE_SHIFT
            if rank == max_cand:
                dropped[di] = v
            else:
                j = VOTE_SHIFT - 1 - key % VOTE_SHIFT
                cand_votes[coff + rank] = v
                cand_keys[coff + rank] = a[at + (2 * j + v - 1) // 2]
    if cuda.threadIdx.x == 0 and nclusters <= max_cand:
        dropped[di] = 0
    cuda.syncthreads()
    return min(nclusters, max_cand)
