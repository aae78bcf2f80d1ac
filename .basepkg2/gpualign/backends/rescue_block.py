"""extend.rescue_align by a block of threads a task (the GPU's mate rescue): a Smith-Waterman of a whole
read against the window its mate's insert range allows, each thread a stripe of the read's rows, the
stripes a column apart (a wavefront), so a thread's rows stay in its own small arrays and only each
stripe's last row passes to the next thread, through shared memory, once a step. One thread a task
kept a whole column in global memory (16 bytes of traffic a cell); here the cells stay on the chip.

The result is rescue_align's (extend.py is the reference; tests compare the two): every thread keeps
the first maximum of its own cells in rescue_align's order (columns, then rows), and thread 0 takes
the best score of all, the earliest column, then the earliest row.

Device functions only: cuda_kernels.py's _rescue_block_kernel calls them with the block's shared arrays.
"""

from ..jitcache import use_versioned_cache

use_versioned_cache()  # before any @cuda.jit below

from numba import cuda

from ..encode import base_at
from ..extend import NEG
from . import launch

MAX_THREADS = 32                   # threads of a block at most: a warp
MAX_ROWS = launch.RESCUE_MAX_ROWS  # rows of one thread's stripe at most
BOUNDARY = (2, MAX_THREADS)        # shape of the shared last-row H and F, by step parity and thread
LANES_BEST = (MAX_THREADS, 3)      # shape of the threads' first maxima
d_base_at = cuda.jit(device=True)(base_at.py_func)


@cuda.jit(device=True)
def sw_stripes(q, qoff, n, g_packed, g_nmask, wstart, wlen, match, mismatch, gap_open, gap_ext, hc, ec,
               up_h, up_f, best):
    """This thread's stripe of rows of the wavefront over the window's columns, its first maximum in
    best[0:3] (score, row, column). up_h/up_f[2, threads]: each stripe's last-row H and F of the
    column it did last step (double-buffered by step parity)."""
    lane = cuda.threadIdx.x
    lanes = cuda.blockDim.x
    stripe = (n + lanes - 1) // lanes
    i0 = lane * stripe + 1
    rows = max(0, min(i0 + stripe, n + 1) - i0)
    for r in range(rows):
        hc[r] = 0
        ec[r] = NEG
    go = gap_open + gap_ext
    best[0] = 0
    best[1] = 0
    best[2] = 0
    diag_top = 0          # H[i0 - 1][j - 1]: row above the stripe, column before
    for s in range(wlen + lanes - 1):
        j = s - lane + 1  # the column this stripe does this step
        if lane == 0:
            h_up = 0      # row 0 of a local alignment
            f = NEG
        else:
            h_up = up_h[(s + 1) % 2, lane - 1]   # the stripe above did column j last step
            f = up_f[(s + 1) % 2, lane - 1]
        if j >= 1 and j <= wlen:
            rb = d_base_at(g_packed, g_nmask, wstart + j - 1)
            diag = diag_top
            diag_top = h_up
            for r in range(rows):
                i = i0 + r
                qb = q[qoff + i - 1]
                e = hc[r] - go
                if ec[r] - gap_ext > e:
                    e = ec[r] - gap_ext
                if h_up - go > f - gap_ext:
                    f = h_up - go
                else:
                    f = f - gap_ext
                h = diag + (match if (qb == rb and qb < 4) else -mismatch)
                if e > h:
                    h = e
                if f > h:
                    h = f
                if h < 0:
                    h = 0
                diag = hc[r]
                hc[r] = h
                ec[r] = e
                h_up = h
                if h > best[0]:
                    best[0] = h
                    best[1] = i
                    best[2] = j
            up_h[s % 2, lane] = h_up
            up_f[s % 2, lane] = f
        cuda.syncthreads()


@cuda.jit(device=True)
def first_best(lanes_best, res):
    """Of the threads' first maxima (score, row, column each), rescue_align's: the best score, then the
    earliest column, then the earliest row."""
    res[0] = lanes_best[0, 0]
    res[1] = lanes_best[0, 1]
    res[2] = lanes_best[0, 2]
    for lane in range(1, cuda.blockDim.x):
        s = lanes_best[lane, 0]
        i = lanes_best[lane, 1]
        j = lanes_best[lane, 2]
        if s > res[0] or (s == res[0] and (j < res[2] or (j == res[2] and i < res[1]))):
            res[0] = s
            res[1] = i
            res[2] = j
