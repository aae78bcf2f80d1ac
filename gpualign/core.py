"""Per-read kernels shared by both backends.

Every function here works on one read (or one read-candidate pair) with scalar arithmetic
and array indexing only, so that the very same source runs as numba CPU code (`cpu.py` calls
these dispatchers inside prange loops) and as CUDA device functions (`cuda.py` recompiles
the same Python functions with cuda.jit(device=True)). One source is what makes the two
backends give identical alignments.

Integer rules that keep the CUDA simulator, numba-CPU and numba-CUDA in agreement: word
arithmetic is done on non-negative values and every left shift is masked back to 32 bits
(numba widens `uint32 << int` to 64 bits on the GPU).

Candidate keys pack (strand, diagonal) into one int64 that sorts by strand then diagonal:
key = strand * STRAND_BIT + diagonal + DIAG_BIAS, diagonal = genome position of read base 0.
"""

from .jitcache import use_versioned_cache

use_versioned_cache()  # before any @njit / @cuda.jit below

import numpy as np
from numba import njit

NEG = -(1 << 28)            # minus infinity for scores; far from int32 overflow
STRAND_BIT = 1 << 40
DIAG_BIAS = 1 << 20         # > longest read, so diagonals left of the genome start stay positive
MASK32 = 0xFFFFFFFF

# traceback byte: bits 0-1 where H came from, bit 2 E extended, bit 3 F extended
SRC_DIAG, SRC_DEL, SRC_INS, SRC_START = 0, 1, 2, 3
E_EXT, F_EXT = 4, 8
# BAM CIGAR operation codes
OP_M, OP_I, OP_D, OP_S = 0, 1, 2, 4


@njit(cache=True)
def base_at(g_packed, g_nmask, pos):
    """Base code 0-3 at a genome position, 4 for N."""
    if (g_nmask[pos >> 5] >> (pos & 31)) & 1:
        return 4
    return (g_packed[pos >> 4] >> ((pos & 15) * 2)) & 3


@njit(cache=True)
def genome_word(words, pos):
    """The 16 bases (32 bits) starting at any base position of a 2-bit packed array."""
    q = pos >> 4
    r = pos & 15
    w = words[q] & MASK32
    if r != 0:
        w = (w >> (2 * r)) | ((words[q + 1] << (32 - 2 * r)) & MASK32)
    return w


@njit(cache=True)
def any_n(g_nmask, start, end):
    """Whether the genome has an N in [start, end)."""
    pos = start
    while pos < end:
        q = pos >> 5
        r = pos & 31
        take = 32 - r
        if take > end - pos:
            take = end - pos
        bits = (g_nmask[q] >> r) & ((1 << take) - 1)
        if bits != 0:
            return True
        pos += take
    return False


@njit(cache=True)
def contig_of(c_offsets, pos):
    """Index of the contig containing a genome position (binary search over contig starts)."""
    lo = 0
    hi = c_offsets.shape[0] - 1
    while lo < hi:
        mid = (lo + hi + 1) >> 1
        if c_offsets[mid] <= pos:
            lo = mid
        else:
            hi = mid - 1
    return lo


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


@njit(cache=True)
def collect_seed_hits(q, qoff, n, k, strand, idx_off, idx_pos, max_occ, hits, hoff, nh, budget):
    """Add the diagonals of one strand's seed hits to hits[hoff + nh ...], rarest seeds first.

    Seeds are taken in order of bin size (then offset) until the next would overflow `budget`
    hits, so repeats cannot crowd out the informative seeds. Returns the new hit count.
    """
    if n < k:
        return nh
    nseeds = (n + k - 1) // k
    used = 0
    last_cnt = -1
    last_s = -1
    while True:
        best_cnt = -1
        best_s = -1
        best_km = -1
        for s in range(nseeds):
            km = seed_kmer(q, qoff, seed_offset(s, n, k), k)
            if km < 0:
                continue
            cnt = idx_off[km + 1] - idx_off[km]
            if cnt == 0 or cnt > max_occ:
                continue
            after_last = cnt > last_cnt or (cnt == last_cnt and s > last_s)
            before_best = best_s < 0 or cnt < best_cnt or (cnt == best_cnt and s < best_s)
            if after_last and before_best:
                best_cnt = cnt
                best_s = s
                best_km = km
        if best_s < 0 or used + best_cnt > budget:
            return nh
        o = seed_offset(best_s, n, k)
        for h in range(idx_off[best_km], idx_off[best_km + 1]):
            hits[hoff + nh] = strand * STRAND_BIT + np.int64(idx_pos[h]) - o + DIAG_BIAS
            nh += 1
        used += best_cnt
        last_cnt = best_cnt
        last_s = best_s


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

    hits[hoff:hoff + 2*hmax] is scratch: up to hmax hits and the merge sort's second buffer.

    A cluster is a run of sorted hit keys within t of its first; its key is the median hit's and
    its votes the number of hits. Kept ordered by votes (desc), then key (asc). Returns how many;
    dropped[di] gets the votes of the best cluster that was not kept (0 if none), which tells
    the mapper whether its search of a repetitive read was complete.
    """
    nh = collect_seed_hits(q_fwd, qoff, n, k, 0, idx_off, idx_pos, max_occ, hits, hoff, 0, hmax // 2)
    nh = collect_seed_hits(q_rc, qoff, n, k, 1, idx_off, idx_pos, max_occ, hits, hoff, nh, hmax - nh)
    hoff = merge_sort_runs(hits, hoff, nh, hoff + hmax)
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


@njit(cache=True)
def window_of(key, n, t, c_offsets, c_ends, genome_size, win):
    """Reference window for a candidate: [diag - t, diag + n + t) clipped to the contig holding
    the read's middle. Writes win[0]=start, win[1]=length, win[2]=c0 (diag - start), win[3]=strand."""
    strand = 1 if key >= STRAND_BIT else 0
    diag = key - strand * STRAND_BIT - DIAG_BIAS
    mid = diag + n // 2
    if mid < 0:
        mid = 0
    if mid >= genome_size:
        mid = genome_size - 1
    c = contig_of(c_offsets, mid)
    ws = diag - t
    if ws < c_offsets[c]:
        ws = c_offsets[c]
    we = diag + n + t
    if we > c_ends[c]:
        we = c_ends[c]
    win[0] = ws
    win[1] = we - ws if we > ws else 0
    win[2] = diag - ws
    win[3] = strand


@njit(cache=True)
def banded_dp(q, qoff, n, g_packed, g_nmask, wstart, wlen, c0, t, local,
              match, mismatch, gap_open, gap_ext, H, F, HS, FS, tb, tboff, do_tb, res):
    """Banded alignment of a whole read against a reference window (Gotoh affine gaps).

    Rows i = read bases, columns j = window bases; only cells with j - i in [c0 - t, c0 + t]
    are computed (band of width 2t+1, Ukkonen). local=0: semi-global, the read aligned end to end
    and reference end gaps free (Needleman-Wunsch as in Korkmaz). local=1: Smith-Waterman, both
    ends free. A gap of length L costs gap_open + L*gap_ext. N scores as a mismatch.
    H, F, HS, FS: scratch of at least 2t+2 entries. With do_tb, one traceback byte per band cell
    goes to tb[tboff + (i-1)*(2t+1) + b]. Writes res[0]=score, res[1]=end row, res[2]=end column,
    res[3]=start row (read bases before it are clipped; local only).
    """
    W = 2 * t + 1
    lo = c0 - t
    for b in range(W + 1):
        j = b + lo
        H[b] = 0 if (b < W and j >= 0 and j <= wlen) else NEG
        F[b] = NEG
        HS[b] = 0
        FS[b] = 0
    best = NEG
    bi = 0
    bj = 0
    bs = 0
    for i in range(1, n + 1):
        qb = q[qoff + i - 1]
        h_left = NEG
        e_left = NEG
        es_left = 0
        hs_left = 0
        for b in range(W):
            j = i + b + lo
            h_diag = H[b]
            hs_diag = HS[b]
            code = 0
            if j < 0 or j > wlen:
                h = NEG
                e = NEG
                f = NEG
                hs = 0
                es = 0
                fs = 0
            elif j == 0:
                e = NEG
                f = NEG
                es = 0
                fs = 0
                hs = i
                if local:
                    h = 0
                    code = SRC_START
                else:
                    h = -(gap_open + gap_ext * i)   # the read's first i bases as an insertion
                    code = SRC_INS | F_EXT
            else:
                e = h_left - gap_open - gap_ext
                es = hs_left
                if e_left - gap_ext > e:
                    e = e_left - gap_ext
                    es = es_left
                    code |= E_EXT
                f = H[b + 1] - gap_open - gap_ext
                fs = HS[b + 1]
                if F[b + 1] - gap_ext > f:
                    f = F[b + 1] - gap_ext
                    fs = FS[b + 1]
                    code |= F_EXT
                rb = base_at(g_packed, g_nmask, wstart + j - 1)
                h = h_diag + (match if (qb == rb and qb < 4) else -mismatch)
                hs = hs_diag
                src = SRC_DIAG
                if e > h:
                    h = e
                    hs = es
                    src = SRC_DEL
                if f > h:
                    h = f
                    hs = fs
                    src = SRC_INS
                if local and h <= 0:
                    h = 0
                    hs = i
                    src = SRC_START
                code |= src
                if local and h > best:
                    best = h
                    bi = i
                    bj = j
                    bs = hs
            if h < NEG:
                h = NEG
            if e < NEG:
                e = NEG
            if f < NEG:
                f = NEG
            H[b] = h
            HS[b] = hs
            F[b] = f
            FS[b] = fs
            h_left = h
            hs_left = hs
            e_left = e
            es_left = es
            if do_tb:
                tb[tboff + (i - 1) * W + b] = code
    if not local:
        for b in range(W):
            j = n + b + lo
            if j >= 1 and j <= wlen and H[b] > best:
                best = H[b]
                bi = n
                bj = j
                bs = 0
    res[0] = best
    res[1] = bi
    res[2] = bj
    res[3] = bs


@njit(cache=True)
def local_can_win(global_score, n, match, clip_penalty):
    """Whether a soft-clipped local alignment could be preferred to this end-to-end score.

    A local alignment covering the whole read is also end-to-end, so it must clip an end, and it
    scores at most n * match: with the end-to-end score within one clip penalty of that, it cannot win.
    """
    return global_score < n * match - clip_penalty


@njit(cache=True)
def skip_local(out, x, n):
    """Mark a pair's local alignment as not computed (it cannot be chosen)."""
    out[x, 2] = NEG
    out[x, 3] = n
    out[x, 4] = 0
    out[x, 5] = 0


@njit(cache=True)
def push_op(ops, lens, obase, ostride, nops, op):
    """Append one base of an operation (traceback runs backwards), merging runs. Operation j
    lives at obase + j * ostride (rows on the CPU, columns on the GPU: coalesced and copied
    back only as wide as the longest CIGAR)."""
    if nops > 0 and ops[obase + (nops - 1) * ostride] == op:
        lens[obase + (nops - 1) * ostride] += 1
        return nops
    ops[obase + nops * ostride] = op
    lens[obase + nops * ostride] = 1
    return nops + 1


@njit(cache=True)
def traceback(tb, tboff, t, c0, end_i, end_j, ops, lens, obase, ostride, res):
    """Walk the traceback bytes from (end_i, end_j) back to the alignment start.

    Writes the CIGAR (M/I/D only, forward order) to ops/lens[obase + j * ostride] and res[0]=number of
    ops, res[1]=first aligned read base, res[2]=first aligned window column.
    """
    W = 2 * t + 1
    lo = c0 - t
    i = end_i
    j = end_j
    state = 0
    nops = 0
    while i > 0:
        code = tb[tboff + (i - 1) * W + (j - i - lo)]
        if state == 0:
            src = code & 3
            if src == SRC_START:
                break
            if src == SRC_DIAG:
                nops = push_op(ops, lens, obase, ostride, nops, OP_M)
                i -= 1
                j -= 1
            elif src == SRC_DEL:
                state = 1
            else:
                state = 2
        elif state == 1:
            nops = push_op(ops, lens, obase, ostride, nops, OP_D)
            if not (code & E_EXT):
                state = 0
            j -= 1
        else:
            nops = push_op(ops, lens, obase, ostride, nops, OP_I)
            if not (code & F_EXT):
                state = 0
            i -= 1
    for x in range(nops // 2):   # reverse into forward order
        a = obase + x * ostride
        b = obase + (nops - 1 - x) * ostride
        to = ops[a]
        tl = lens[a]
        ops[a] = ops[b]
        lens[a] = lens[b]
        ops[b] = to
        lens[b] = tl
    res[0] = nops
    res[1] = i
    res[2] = j


@njit(cache=True)
def extend_pair(x, key, codes, rc_codes, qoff, n, g_packed, g_nmask, c_off, c_end, gsize, t,
                match, mismatch, gap_open, gap_ext, clip_penalty, H, F, HS, FS, tb, res, win, out):
    """Score one read-candidate pair end to end and, if it could be chosen, locally: row x of out
    gets semi-global score and end column; local score, end row, end column, start row; window
    start; c0. H, F, HS, FS: band scratch of 2t+2; res, win: 4 each; tb is not written."""
    window_of(key, n, t, c_off, c_end, gsize, win)
    out[x, 6] = win[0]
    out[x, 7] = win[2]
    q = rc_codes if win[3] == 1 else codes
    banded_dp(q, qoff, n, g_packed, g_nmask, win[0], win[1], win[2], t, 0,
              match, mismatch, gap_open, gap_ext, H, F, HS, FS, tb, 0, False, res)
    out[x, 0] = res[0]
    out[x, 1] = res[2]
    if not local_can_win(res[0], n, match, clip_penalty):
        skip_local(out, x, n)
        return
    banded_dp(q, qoff, n, g_packed, g_nmask, win[0], win[1], win[2], t, 1,
              match, mismatch, gap_open, gap_ext, H, F, HS, FS, tb, 0, False, res)
    out[x, 2] = res[0]
    out[x, 3] = res[1]
    out[x, 4] = res[2]
    out[x, 5] = res[3]


@njit(cache=True)
def trace_pair(x, key, local, codes, rc_codes, qoff, n, g_packed, g_nmask, c_off, c_end, gsize, t,
               match, mismatch, gap_open, gap_ext, H, F, HS, FS, tb, tboff, res, win, ops, lens, obase, ostride, out):
    """Align one chosen placement with traceback: CIGAR to ops/lens[obase + j * ostride] and row x of out:
    score, first aligned read base, reference start, end row, end column, number of ops.
    tb needs n * (2t+1) bytes from tboff."""
    window_of(key, n, t, c_off, c_end, gsize, win)
    q = rc_codes if win[3] == 1 else codes
    banded_dp(q, qoff, n, g_packed, g_nmask, win[0], win[1], win[2], t, local,
              match, mismatch, gap_open, gap_ext, H, F, HS, FS, tb, tboff, True, res)
    out[x, 0] = res[0]
    out[x, 3] = res[1]
    out[x, 4] = res[2]
    traceback(tb, tboff, t, win[2], res[1], res[2], ops, lens, obase, ostride, res)
    out[x, 5] = res[0]
    out[x, 1] = res[1]
    out[x, 2] = win[0] + res[2]


def tidy_cigars(ops, lens, nops):
    """CIGAR arrays as both backends return them: as wide as the longest CIGAR (at least 1),
    zero past each row's own length, so results compare equal whatever the layout used."""
    width = max(1, int(nops.max(initial=0)))
    ops, lens = ops[:, :width], lens[:, :width]
    unused = np.arange(width)[None, :] >= nops[:, None]
    return np.where(unused, 0, ops).astype(np.uint8), np.where(unused, 0, lens).astype(np.int32)


@njit(cache=True)
def rescue_align(q, qoff, n, g_packed, g_nmask, wstart, wlen, match, mismatch, gap_open, gap_ext,
                 H, E, soff, sstride, res):
    """Smith-Waterman (Gotoh affine gaps, score only) of a whole read against a reference window:
    mate rescue, where the read's diagonal is unknown anywhere in the window the insert size allows.

    Columns (window bases) outer, rows (read bases) inner, so scratch is one column of n+1 cells
    of H and E at H/E[soff + i * sstride] (per thread contiguous on the CPU, interleaved across
    threads on the GPU). res[0] = best score (the first maximum in that order), res[1] = its row,
    res[2] = its column; the read's diagonal is then wstart + res[2] - res[1].
    """
    for i in range(n + 1):
        H[soff + i * sstride] = 0
        E[soff + i * sstride] = NEG
    best = 0
    bi = 0
    bj = 0
    for j in range(1, wlen + 1):
        rb = base_at(g_packed, g_nmask, wstart + j - 1)
        diag = 0      # H[i-1][j-1]; row 0 is all zero in local alignment
        h_up = 0      # H[i-1][j]
        f = NEG       # gap along the read (an insertion), running down the column
        for i in range(1, n + 1):
            at = soff + i * sstride
            qb = q[qoff + i - 1]
            e = H[at] - gap_open - gap_ext          # gap along the reference (a deletion), from the left
            if E[at] - gap_ext > e:
                e = E[at] - gap_ext
            if h_up - gap_open - gap_ext > f - gap_ext:
                f = h_up - gap_open - gap_ext
            else:
                f = f - gap_ext
            h = diag + (match if (qb == rb and qb < 4) else -mismatch)
            if e > h:
                h = e
            if f > h:
                h = f
            if h < 0:
                h = 0
            diag = H[at]
            H[at] = h
            E[at] = e
            h_up = h
            if h > best:
                best = h
                bi = i
                bj = j
    res[0] = best
    res[1] = bi
    res[2] = bj
