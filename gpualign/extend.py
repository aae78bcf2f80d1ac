"""Extension: banded semi-global alignment of a read against a candidate window (Needleman-Wunsch
in a band, after Korkmaz), local alignment when it wins by more than the clip penalty (Smith-
Waterman), traceback to a CIGAR, and the rescue alignment that finds a mate near its partner.

Per-pair functions work on one read-candidate pair with scalar arithmetic and array indexing only,
so the same source runs as numba CPU code and as CUDA device functions (backends/).
"""

from .jitcache import use_versioned_cache

use_versioned_cache()  # before any @njit below: numba picks the cache folder at decoration

import numpy as np
from numba import njit

from .encode import DIAG_BIAS, OP_D, OP_I, OP_M, STRAND_BIT, base_at, contig_of

NEG = -(1 << 28)            # minus infinity for scores; far from int32 overflow
# Columns of an extension row (extend_pair, the backends' extend_stage): the end-to-end score and its
# end column; the local score, its end row and column and its start row (read bases); the window's
# first genome position; c0, the diagonal's column in the window.
EXT_SCORE, EXT_END_COL, EXT_LOCAL_SCORE, EXT_LOCAL_END_ROW, EXT_LOCAL_END_COL, EXT_LOCAL_START_ROW, \
    EXT_WINDOW, EXT_C0 = range(8)
EXT_COLUMNS = 8
# Columns of a traceback row (trace_pair, traceback_stage): score, first aligned read base, reference
# start (concatenated genome), end row and end column of the alignment, number of CIGAR operations.
TR_SCORE, TR_READ_START, TR_REF_START, TR_END_ROW, TR_END_COL, TR_NOPS = range(6)
TR_COLUMNS = 6
# Columns of a rescue row (rescue_align, rescue_stage): best local score, its read row, its window column.
RESCUE_SCORE, RESCUE_ROW, RESCUE_COL = range(3)
RESCUE_COLUMNS = 3


# traceback byte: bits 0-1 where H came from, bit 2 E extended, bit 3 F extended
SRC_DIAG, SRC_DEL, SRC_INS, SRC_START = 0, 1, 2, 3


E_EXT, F_EXT = 4, 8


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
def mismatches_below(q, qoff, n, g_packed, g_nmask, gstart, limit):
    """Mismatches of the read laid without gaps on the genome from gstart (N counts as a mismatch,
    as in banded_dp), counted only up to `limit`: the answer is min(mismatches, limit)."""
    m = 0
    for i in range(n):
        qb = q[qoff + i]
        if not (qb < 4 and qb == base_at(g_packed, g_nmask, gstart + i)):
            m += 1
            if m >= limit:
                return limit
    return m


@njit(cache=True)
def ungapped_most(match, mismatch, gap_open, gap_ext):
    """The most mismatches an ungapped end-to-end alignment may have and still outscore every gapped
    one: any alignment with a gap scores at most n*match - gap_open - gap_ext."""
    return (gap_open + gap_ext - 1) // (match + mismatch)


@njit(cache=True)
def ungapped_most_one_gap(match, mismatch, gap_open, gap_ext):
    """The most mismatches an ungapped alignment may have and still outscore every alignment with two gaps or
    more (each of those scores at most n*match - 2 * (gap_open + gap_ext)); against single-gap alignments
    one_gap_below decides."""
    return (2 * (gap_open + gap_ext) - 1) // (match + mismatch)


MAX_ONE_GAP_MISMATCHES = 2   # one_gap_below leaves it to the DP when a single-gap alignment could afford more


@njit(cache=True)
def is_mismatch(q, qoff, i, wstart, wlen, d, g_packed, g_nmask):
    """Whether read base i (0-based) laid on diagonal d scores as a mismatch: its window column d + i holds
    another base, or either is N. Outside the window too, which only overestimates (no path goes there)."""
    j = d + i
    if j < 0 or j >= wlen:
        return True
    qb = q[qoff + i]
    return not (qb < 4 and qb == base_at(g_packed, g_nmask, wstart + j))


@njit(cache=True)
def rows_from_start(q, qoff, n, wstart, wlen, d, most, g_packed, g_nmask):
    """How many rows from the read's start diagonal d holds with at most `most` mismatches."""
    seen = 0
    for i in range(n):
        if is_mismatch(q, qoff, i, wstart, wlen, d, g_packed, g_nmask):
            seen += 1
            if seen > most:
                return i
    return n


@njit(cache=True)
def first_row_to_end(q, qoff, n, wstart, wlen, d, most, g_packed, g_nmask):
    """The first row from which diagonal d holds the rest of the read with at most `most` mismatches."""
    seen = 0
    for i in range(n - 1, -1, -1):
        if is_mismatch(q, qoff, i, wstart, wlen, d, g_packed, g_nmask):
            seen += 1
            if seen > most:
                return i + 1
    return 0


@njit(cache=True)
def one_gap_below(q, qoff, n, wstart, wlen, c0, t, score, match, mismatch, gap_open, gap_ext, g_packed, g_nmask):
    """Whether every semi-global alignment in the band with exactly one gap surely scores below `score`
    (False also where it cannot tell cheaply: the DP then decides).

    Such an alignment lays rows 0..r-1 on one diagonal and rows r+L..n-1 on another, after a deletion
    (L = 0) or L inserted read bases. Falling short of n * match by at most D = n * match - score leaves it
    at most k = (D - gap_open - gap_ext) // (match + mismatch) mismatches and L <= (D - gap_open) //
    (gap_ext + match). For each split of k into j before the gap and k - j after, it needs a diagonal
    holding the first r rows with <= j mismatches and one holding rows r+L.. with <= k - j. Mismatches
    are found by walking each diagonal from either end, and a wrong diagonal ends the walk within a few
    bases, so this costs about what ungapped_best does.
    """
    deficit = n * match - score
    if deficit < gap_open + gap_ext:
        return True
    k = (deficit - gap_open - gap_ext) // (match + mismatch)
    if k > MAX_ONE_GAP_MISMATCHES:
        return False
    inserted = (deficit - gap_open) // (gap_ext + match)
    for j in range(k + 1):
        head = 0
        tail = n
        for d in range(c0 - t, c0 + t + 1):
            r = rows_from_start(q, qoff, n, wstart, wlen, d, j, g_packed, g_nmask)
            if r > head:
                head = r
            r = first_row_to_end(q, qoff, n, wstart, wlen, d, k - j, g_packed, g_nmask)
            if r < tail:
                tail = r
        if head + inserted >= tail:
            return False
    return True


@njit(cache=True)
def ungapped_decides(q, qoff, n, wstart, wlen, c0, t, match, mismatch, gap_open, gap_ext, g_packed, g_nmask, res):
    """Whether banded_dp's semi-global optimum is, for sure, the ungapped diagonal ungapped_best finds (res[0]
    its column, res[1] its mismatches): with at most ungapped_most mismatches nothing gapped can reach it;
    with up to ungapped_most_one_gap (the limit ungapped_best searches with), nothing with two gaps can, and
    one_gap_below rules out one gap."""
    if not ungapped_best(q, qoff, n, wstart, wlen, c0, t, ungapped_most_one_gap(match, mismatch, gap_open, gap_ext),
                         g_packed, g_nmask, res):
        return False
    if res[1] <= ungapped_most(match, mismatch, gap_open, gap_ext):
        return True
    return one_gap_below(q, qoff, n, wstart, wlen, c0, t, n * match - res[1] * (match + mismatch), match, mismatch,
                         gap_open, gap_ext, g_packed, g_nmask)


@njit(cache=True)
def ungapped_best(q, qoff, n, wstart, wlen, c0, t, most, g_packed, g_nmask, res):
    """The semi-global banded alignment without dynamic programming, where it is ungapped for sure.

    When some diagonal of the band holds the whole read with at most `most` mismatches
    (ungapped_most), no gapped alignment can score as high, so banded_dp's optimum is the ungapped
    diagonal with the fewest mismatches, the leftmost on ties (banded_dp keeps the first end column
    of the best score), and its traceback is n matches along it. Returns True with res[0] = that
    diagonal's column, res[1] = its mismatches; False (nothing decided) otherwise.

    The candidate's own diagonal c0 goes first: its count bounds the rest, so any other diagonal
    stops at its first mismatch or two unless the read repeats itself at that shift.
    """
    lo = c0 - t
    if lo < 0:
        lo = 0
    hi = c0 + t
    if hi > wlen - n:
        hi = wlen - n
    best_d = -1
    best_m = most
    if n < 1 or lo > hi:
        return False
    for x in range(hi - lo + 2):
        d = c0 if x == 0 else lo + x - 1
        if (x > 0 and d == c0) or d < lo or d > hi:
            continue
        limit = best_m + 1 if (best_d < 0 or d < best_d) else best_m   # a left diagonal wins ties
        m = mismatches_below(q, qoff, n, g_packed, g_nmask, wstart + d, limit)
        if m < limit:
            best_d = d
            best_m = m
    res[0] = best_d
    res[1] = best_m
    return best_d >= 0


@njit(cache=True)
def banded_dp(q, qoff, n, g_packed, g_nmask, wstart, wlen, c0, t, local,
              match, mismatch, gap_open, gap_ext, H, F, HS, FS, GB, tb, tboff, do_tb, res):
    """Banded alignment of a whole read against a reference window (Gotoh affine gaps).

    Rows i = read bases, columns j = window bases; only cells with j - i in [c0 - t, c0 + t]
    are computed (band of width 2t+1, Ukkonen). local=0: semi-global, the read aligned end to end
    and reference end gaps free (Needleman-Wunsch as in Korkmaz). local=1: Smith-Waterman, both
    ends free. A gap of length L costs gap_open + L*gap_ext. N scores as a mismatch.
    H, F, HS, FS, GB: scratch of at least 2t+2 entries (GB: the band's genome bases, a ring where
    column j sits at (j - lo) mod W while in the band, so each base is fetched once). With do_tb, one traceback byte per band cell
    goes to tb[tboff + (i-1)*(2t+1) + b]. Writes res[0]=score, res[1]=end row, res[2]=end column,
    res[3]=start row (read bases before it are clipped; local only).

    One function, longer than the rest: the cell update is the innermost loop of the aligner, and
    on the GPU its band rows and running maxima live in registers and local memory of one thread;
    split into calls, numba-cuda keeps them there only when it inlines every call, which is not
    something to rest the speed of every alignment on.
    """
    W = 2 * t + 1
    lo = c0 - t
    for b in range(W + 1):
        j = b + lo
        H[b] = 0 if (b < W and j >= 0 and j <= wlen) else NEG
        F[b] = NEG
        HS[b] = 0
        FS[b] = 0
    for b in range(W - 1):   # row 1's columns but its last, which enters the ring with the row
        j = 1 + b + lo
        GB[(1 + b) % W] = base_at(g_packed, g_nmask, wstart + j - 1) if (j >= 1 and j <= wlen) else 4
    best = NEG
    bi = 0
    bj = 0
    bs = 0
    for i in range(1, n + 1):
        qb = q[qoff + i - 1]
        j = i + lo + W - 1      # the column entering the band with this row
        GB[(i + W - 1) % W] = base_at(g_packed, g_nmask, wstart + j - 1) if (j >= 1 and j <= wlen) else 4
        slot = i % W
        h_left = NEG
        e_left = NEG
        es_left = 0
        hs_left = 0
        for b in range(W):
            j = i + b + lo
            rb = GB[slot]
            slot += 1
            if slot == W:
                slot = 0
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
def best_clipped_segment(q, qoff, n, wstart, wlen, d, match, mismatch, clip_penalty, g_packed, g_nmask):
    """The best score less clip_penalty per clipped end of a stretch of rows [s, e) laid without gaps on
    diagonal d, the whole read left out (is_mismatch's scores: outside the window counts as a mismatch)."""
    best = NEG
    prefix = 0            # score of rows [0, i)
    low = 1 << 30         # min over 1 <= s < i of the score of rows [0, s), plus one clip for that start
    for i in range(1, n + 1):
        prefix += -mismatch if is_mismatch(q, qoff, i - 1, wstart, wlen, d, g_packed, g_nmask) else match
        start = 0 if low > 0 else low     # s = 0 costs nothing (score of rows [0, 0) is 0)
        if i < n:
            score = prefix - clip_penalty - start
        else:
            score = prefix - low          # ending at n: the start must be clipped
        if score > best:
            best = score
        if prefix + clip_penalty < low:
            low = prefix + clip_penalty
    return best


@njit(cache=True)
def local_may_win(q, qoff, n, wstart, wlen, c0, t, global_score, match, mismatch, gap_open, gap_ext, clip_penalty,
                  g_packed, g_nmask):
    """Whether some local alignment, less clip_penalty per clipped end, could beat the end-to-end score g
    (choose.locus_scores' rule), so that the local DP must run; False only where none can.

    A clipped local alignment aligns at most n - 1 rows, so one with a gap scores at most
    (n - 1) * match - gap_open - gap_ext less a clip: where that is <= g, only ungapped stretches of one
    diagonal are left. To win, one must score above g + clip_penalty, so it spans at least `need` rows
    with at most `most` mismatches, and every such stretch covers the middle rows [n - need, need): a
    diagonal with more mismatches there (a wrong one: a few bases walked) cannot hold one; the rest are
    scored exactly (best_clipped_segment)."""
    g = global_score
    if not local_can_win(g, n, match, clip_penalty):
        return False
    if g < 0 or (n - 1) * match - gap_open - gap_ext - clip_penalty > g:
        return True
    need = (g + clip_penalty + match) // match              # rows: need * match >= g + clip_penalty + 1
    most = ((n - 1) * match - g - clip_penalty - 1) // (match + mismatch)
    if need > n - 1 or most < 0:
        return False
    if 2 * need - n < 1:
        return True
    for d in range(c0 - t, c0 + t + 1):
        seen = 0
        for i in range(n - need, need):
            if is_mismatch(q, qoff, i, wstart, wlen, d, g_packed, g_nmask):
                seen += 1
                if seen > most:
                    break
        if seen <= most and best_clipped_segment(q, qoff, n, wstart, wlen, d, match, mismatch, clip_penalty,
                                                 g_packed, g_nmask) > g:
            return True
    return False


@njit(cache=True)
def skip_local(out, x, n):
    """Mark a pair's local alignment as not computed (it cannot be chosen)."""
    out[x, EXT_LOCAL_SCORE] = NEG
    out[x, EXT_LOCAL_END_ROW] = n
    out[x, EXT_LOCAL_END_COL] = 0
    out[x, EXT_LOCAL_START_ROW] = 0


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
                match, mismatch, gap_open, gap_ext, clip_penalty, H, F, HS, FS, GB, tb, res, win, out):
    """Score one read-candidate pair end to end and, if it could be chosen, locally: row x of out
    gets semi-global score and end column; local score, end row, end column, start row; window
    start; c0. H, F, HS, FS, GB: band scratch of 2t+2; res, win: 4 each; tb is not written.
    The plain form, the two DPs one after the other: the backends run open_pair and close_pair, which
    tests hold to its rows."""
    window_of(key, n, t, c_off, c_end, gsize, win)
    out[x, EXT_WINDOW] = win[0]
    out[x, EXT_C0] = win[2]
    q = rc_codes if win[3] == 1 else codes
    if ungapped_decides(q, qoff, n, win[0], win[1], win[2], t, match, mismatch, gap_open, gap_ext, g_packed, g_nmask,
                        res):
        score = n * match - res[1] * (match + mismatch)
        end_col = res[0] + n
    else:
        banded_dp(q, qoff, n, g_packed, g_nmask, win[0], win[1], win[2], t, 0,
                  match, mismatch, gap_open, gap_ext, H, F, HS, FS, GB, tb, 0, False, res)
        score = res[0]
        end_col = res[2]
    out[x, EXT_SCORE] = score
    out[x, EXT_END_COL] = end_col
    if not local_may_win(q, qoff, n, win[0], win[1], win[2], t, score, match, mismatch, gap_open, gap_ext, clip_penalty,
                         g_packed, g_nmask):
        skip_local(out, x, n)
        return
    banded_dp(q, qoff, n, g_packed, g_nmask, win[0], win[1], win[2], t, 1,
              match, mismatch, gap_open, gap_ext, H, F, HS, FS, GB, tb, 0, False, res)
    out[x, EXT_LOCAL_SCORE] = res[0]
    out[x, EXT_LOCAL_END_ROW] = res[1]
    out[x, EXT_LOCAL_END_COL] = res[2]
    out[x, EXT_LOCAL_START_ROW] = res[3]


@njit(cache=True)
def banded_scores(q, qoff, n, g_packed, g_nmask, wstart, wlen, c0, t, match, mismatch, gap_open, gap_ext,
                  H, F, L, LF, LS, LFS, GB, res):
    """banded_dp's end-to-end (local=0) and local (local=1) results in one pass, without traceback, for
    close_pair: res[0:3] the first's score, end row and end column, res[3:7] the second's score, end row,
    end column and start row. Nearly every extension the ungapped test leaves open needs both, and one
    pass shares the band's genome bases, read base and match score, the loop and the bounds checks
    (checked only in rows the band leaves the window): 26 -> 19 us a 100-base read (t = 10) against the
    two separate calls on the CPU; on the GPU, 14.3 -> 6.7 ms for the extensions of 100 k Mason reads of chrX
    with the open pairs listed apart (BENCHMARKS.md). H, F (end-to-end) and L, LF, LS, LFS (local, with start
    rows) are band rows as banded_dp's (int32). The cells' arithmetic is int32 too, every value cast back as it is
    made: numba widens integer arithmetic to 64 bits, which on a GPU takes two instructions an add and more a
    maximum, in the aligner's innermost loop (scores stay within NEG's distance of int32's limits)."""
    W = 2 * t + 1
    lo = c0 - t
    for b in range(W + 1):
        j = b + lo
        H[b] = 0 if (b < W and j >= 0 and j <= wlen) else NEG
        F[b] = NEG
        L[b] = H[b]
        LF[b] = NEG
        LS[b] = 0
        LFS[b] = 0
    for b in range(W - 1):
        j = 1 + b + lo
        GB[(1 + b) % W] = base_at(g_packed, g_nmask, wstart + j - 1) if (j >= 1 and j <= wlen) else 4
    go = np.int32(gap_open + gap_ext)
    ge = np.int32(gap_ext)
    hit = np.int32(match)
    miss = np.int32(-mismatch)
    neg = np.int32(NEG)
    zero = np.int32(0)
    lbest = neg
    li = 0
    lj = 0
    ls = zero
    for i in range(1, n + 1):
        qb = q[qoff + i - 1]
        j = i + lo + W - 1
        GB[(i + W - 1) % W] = base_at(g_packed, g_nmask, wstart + j - 1) if (j >= 1 and j <= wlen) else 4
        slot = i % W
        row = np.int32(i)
        h_left = neg
        e_left = neg
        l_left = neg
        le_left = neg
        ls_left = zero
        les_left = zero
        jfirst = i + lo
        inside = jfirst >= 1 and jfirst + W - 1 <= wlen   # the whole band row lies in the window
        for b in range(W):
            j = jfirst + b
            rb = GB[slot]
            slot += 1
            if slot == W:
                slot = 0
            if not inside and (j < 0 or j > wlen):
                h = neg
                e = neg
                f = neg
                lh = neg
                le = neg
                lf = neg
                lhs = zero
                les = zero
                lfs = zero
            elif not inside and j == 0:
                e = neg
                f = neg
                h = np.int32(-(gap_open + gap_ext * i))
                lh = zero
                le = neg
                lf = neg
                lhs = row
                les = zero
                lfs = zero
            else:
                s = hit if (qb == rb and qb < 4) else miss
                e = max(np.int32(h_left - go), np.int32(e_left - ge))
                f = max(np.int32(H[b + 1] - go), np.int32(F[b + 1] - ge))
                h = np.int32(H[b] + s)
                if e > h:
                    h = e
                if f > h:
                    h = f
                le = np.int32(l_left - go)            # local: banded_dp's order of choices, start rows with them
                les = ls_left
                if np.int32(le_left - ge) > le:
                    le = np.int32(le_left - ge)
                    les = les_left
                lf = np.int32(L[b + 1] - go)
                lfs = LS[b + 1]
                if np.int32(LF[b + 1] - ge) > lf:
                    lf = np.int32(LF[b + 1] - ge)
                    lfs = LFS[b + 1]
                lh = np.int32(L[b] + s)
                lhs = LS[b]
                if le > lh:
                    lh = le
                    lhs = les
                if lf > lh:
                    lh = lf
                    lhs = lfs
                if lh <= zero:
                    lh = zero
                    lhs = row
                if lh > lbest:
                    lbest = lh
                    li = i
                    lj = j
                    ls = lhs
            if h < neg:
                h = neg
            if e < neg:
                e = neg
            if f < neg:
                f = neg
            if le < neg:
                le = neg
            if lf < neg:
                lf = neg
            H[b] = h
            F[b] = f
            h_left = h
            e_left = e
            L[b] = lh
            LF[b] = lf
            LS[b] = lhs
            LFS[b] = lfs
            l_left = lh
            le_left = le
            ls_left = lhs
            les_left = les
    best = NEG
    bi = 0
    bj = 0
    for b in range(W):
        j = n + b + lo
        if j >= 1 and j <= wlen and H[b] > best:
            best = H[b]
            bi = n
            bj = j
    res[0] = best
    res[1] = bi
    res[2] = bj
    res[3] = lbest
    res[4] = li
    res[5] = lj
    res[6] = ls


# What open_pair leaves to close_pair: nothing; the end-to-end and local DPs (banded_scores); the local DP only.
PAIR_DONE, PAIR_BOTH_DPS, PAIR_LOCAL_DP = 0, 1, 2


@njit(cache=True)
def open_pair(x, key, codes, rc_codes, qoff, n, g_packed, g_nmask, c_off, c_end, gsize, t,
              match, mismatch, gap_open, gap_ext, clip_penalty, res, win, out):
    """extend_pair's row x of out as far as it goes without dynamic programming: the window, and where
    the ungapped test decides the end-to-end alignment, its score and whether a local one could win.
    Returns what close_pair must still do (PAIR_*). Nearly all pairs the ungapped test leaves open
    need both DPs; the GPU runs those together, apart from the pairs that need none."""
    window_of(key, n, t, c_off, c_end, gsize, win)
    out[x, EXT_WINDOW] = win[0]
    out[x, EXT_C0] = win[2]
    q = rc_codes if win[3] == 1 else codes
    if not ungapped_decides(q, qoff, n, win[0], win[1], win[2], t, match, mismatch, gap_open, gap_ext, g_packed,
                            g_nmask, res):
        return PAIR_BOTH_DPS
    score = n * match - res[1] * (match + mismatch)
    out[x, EXT_SCORE] = score
    out[x, EXT_END_COL] = res[0] + n
    if local_may_win(q, qoff, n, win[0], win[1], win[2], t, score, match, mismatch, gap_open, gap_ext, clip_penalty,
                     g_packed, g_nmask):
        return PAIR_LOCAL_DP
    skip_local(out, x, n)
    return PAIR_DONE


@njit(cache=True)
def close_pair(x, kind, key, codes, rc_codes, qoff, n, g_packed, g_nmask, c_off, c_end, gsize, t,
               match, mismatch, gap_open, gap_ext, clip_penalty, H, F, L, LF, HS, FS, GB, tb, res, win, out):
    """The rest of extend_pair's row x after open_pair returned kind: the end-to-end and local DPs in
    one pass (banded_scores), the local one kept only where it could win; or the local DP alone. H, F, L,
    LF, HS, FS, GB: band rows of 2t+2; res needs 7 entries; tb is not written."""
    window_of(key, n, t, c_off, c_end, gsize, win)
    q = rc_codes if win[3] == 1 else codes
    if kind == PAIR_BOTH_DPS:
        banded_scores(q, qoff, n, g_packed, g_nmask, win[0], win[1], win[2], t, match, mismatch, gap_open, gap_ext,
                      H, F, L, LF, HS, FS, GB, res)
        out[x, EXT_SCORE] = res[0]
        out[x, EXT_END_COL] = res[2]
        if not local_may_win(q, qoff, n, win[0], win[1], win[2], t, res[0], match, mismatch, gap_open, gap_ext,
                             clip_penalty, g_packed, g_nmask):
            skip_local(out, x, n)
            return
        for v in range(4):
            res[v] = res[3 + v]
    else:
        banded_dp(q, qoff, n, g_packed, g_nmask, win[0], win[1], win[2], t, 1,
                  match, mismatch, gap_open, gap_ext, H, F, HS, FS, GB, tb, 0, False, res)
    out[x, EXT_LOCAL_SCORE] = res[0]
    out[x, EXT_LOCAL_END_ROW] = res[1]
    out[x, EXT_LOCAL_END_COL] = res[2]
    out[x, EXT_LOCAL_START_ROW] = res[3]


@njit(cache=True)
def extend_pair_cpu(x, key, codes, rc_codes, qoff, n, g_packed, g_nmask, c_off, c_end, gsize, t,
                    match, mismatch, gap_open, gap_ext, clip_penalty, H, F, L, LF, HS, FS, GB, tb, res, win, out):
    """extend_pair's row x by open_pair and close_pair, a pair at a time (the GPU gathers the pairs
    open_pair leaves open into a list of their own); tests hold the two equal."""
    kind = open_pair(x, key, codes, rc_codes, qoff, n, g_packed, g_nmask, c_off, c_end, gsize, t,
                     match, mismatch, gap_open, gap_ext, clip_penalty, res, win, out)
    if kind != PAIR_DONE:
        close_pair(x, kind, key, codes, rc_codes, qoff, n, g_packed, g_nmask, c_off, c_end, gsize, t,
                   match, mismatch, gap_open, gap_ext, clip_penalty, H, F, L, LF, HS, FS, GB, tb, res, win, out)


@njit(cache=True)
def open_trace(x, key, local, codes, rc_codes, qoff, n, g_packed, g_nmask, c_off, c_end, gsize, t,
               match, mismatch, gap_open, gap_ext, res, win, ops, lens, obase, out):
    """trace_pair's row x as far as it goes without dynamic programming: where the ungapped test decides
    the end-to-end alignment, its one M op and row. Returns whether the DP with traceback (close_trace)
    is still to run: for about 4% of reads, so the GPU lists them and runs their DPs in warps of their own."""
    window_of(key, n, t, c_off, c_end, gsize, win)
    q = rc_codes if win[3] == 1 else codes
    if local != 0 or not ungapped_decides(q, qoff, n, win[0], win[1], win[2], t, match, mismatch, gap_open, gap_ext,
                                          g_packed, g_nmask, res):
        return True
    out[x, TR_SCORE] = n * match - res[1] * (match + mismatch)
    out[x, TR_END_ROW] = n
    out[x, TR_END_COL] = res[0] + n
    ops[obase] = OP_M
    lens[obase] = n
    out[x, TR_NOPS] = 1
    out[x, TR_READ_START] = 0
    out[x, TR_REF_START] = win[0] + res[0]
    return False


@njit(cache=True)
def close_trace(x, key, local, codes, rc_codes, qoff, n, g_packed, g_nmask, c_off, c_end, gsize, t,
                match, mismatch, gap_open, gap_ext, H, F, HS, FS, GB, tb, tboff, res, win, ops, lens, obase, ostride,
                out):
    """The rest of trace_pair's row x after open_trace asked for it: the banded DP with traceback bytes
    (n * (2t+1) of them from tboff), then the walk back. H, F, HS, FS, GB: band rows of 2t+2."""
    window_of(key, n, t, c_off, c_end, gsize, win)
    q = rc_codes if win[3] == 1 else codes
    banded_dp(q, qoff, n, g_packed, g_nmask, win[0], win[1], win[2], t, local,
              match, mismatch, gap_open, gap_ext, H, F, HS, FS, GB, tb, tboff, True, res)
    out[x, TR_SCORE] = res[0]
    out[x, TR_END_ROW] = res[1]
    out[x, TR_END_COL] = res[2]
    traceback(tb, tboff, t, win[2], res[1], res[2], ops, lens, obase, ostride, res)
    out[x, TR_NOPS] = res[0]
    out[x, TR_READ_START] = res[1]
    out[x, TR_REF_START] = win[0] + res[2]


@njit(cache=True)
def trace_pair(x, key, local, codes, rc_codes, qoff, n, g_packed, g_nmask, c_off, c_end, gsize, t,
               match, mismatch, gap_open, gap_ext, H, F, HS, FS, GB, tb, tboff, res, win, ops, lens, obase, ostride, out):
    """Align one chosen placement with traceback: CIGAR to ops/lens[obase + j * ostride] and row x of out:
    score, first aligned read base, reference start, end row, end column, number of ops.
    tb needs n * (2t+1) bytes from tboff. open_trace, then close_trace where it is still needed."""
    if open_trace(x, key, local, codes, rc_codes, qoff, n, g_packed, g_nmask, c_off, c_end, gsize, t,
                  match, mismatch, gap_open, gap_ext, res, win, ops, lens, obase, out):
        close_trace(x, key, local, codes, rc_codes, qoff, n, g_packed, g_nmask, c_off, c_end, gsize, t,
                    match, mismatch, gap_open, gap_ext, H, F, HS, FS, GB, tb, tboff, res, win, ops, lens, obase,
                    ostride, out)


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
    of H and E at H/E[soff + i * sstride]. res[0] = best score (the first maximum in that order),
    res[1] = its row, res[2] = its column; the read's diagonal is then wstart + res[2] - res[1].
    The CPU backend runs this; the GPU's, with the same results, is backends/rescue_block.py.
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
