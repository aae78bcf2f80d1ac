#!/usr/bin/env python3
"""Kernel benchmark: gpualign's own CUDA kernels on synthetic data, next to their floors.

On the GPU machine (after the wheel prologue of bench/gpu_check.sh; 1-3 minutes, most of it
input generation and kernel compilation):
    python3 bench/kernels.py [--reads 10000000] [--pairs 4000000] [--seed-reads 500000]
In the CUDA simulator (exercises every code path; its timings mean nothing):
    NUMBA_ENABLE_CUDASIM=1 python bench/kernels.py --quick
Full results go to $OUT/kernels.json (OUT defaults to /tmp/bench_out/kernels); a markdown table
is printed last.

Inputs are made here, deterministically: a 5 Mbp random genome in 3 contigs with exact and
diverged repeats, a tandem array, a poly-A run (a capped bin at k=8) and N runs; its k-mer index
(gpualign.index.build_index); 100 bp reads from both strands with 1% substitutions, 0.1% indels,
0.1% N and 3% drawn from an exact repeat (multi-hit reads), encoded by gpualign.reads.encode_reads
(1 Mi distinct reads, tiled to --reads).

Timing: every kernel's inputs are already on the device; one warm-up launch (compilation) is
excluded; each repeat is bracketed by CUDA events, behind a short busy kernel so that host-side
launch overhead does not fall between the events; the median of --repeats is reported.
Host<->device copies of each kernel's inputs and outputs are timed separately (events, pageable
memory as the pipeline uses it).

Cell counting for GCUPS: one DP pass over a read of n bases with band half-width t computes
n * (2t+1) cells (extend.banded_dp loops i = 1..n, b = 0..2t, whether or not the cell falls inside
the window). The extension (_open_pairs_kernel, then _close_pairs_kernel or, for t > NARROW_T,
_close_wide_pairs_kernel on the pairs the first leaves open) runs the semi-global (NW) pass for every
pair the ungapped test does not settle and the local (SW) pass only where it could win; its cells are counted per pair as n*(2t+1) * (1 + [SW pass ran]),
the SW pass detected from out[:, 2] != NEG (extend.skip_local). The traceback (_open_traces_kernel, then
_close_traces_kernel on the rows the ungapped test leaves open) is counted n*(2t+1) a row, as if each ran the NW
pass with traceback bytes; the traceback walk itself is not counted as cells.

Floors: bytes a kernel reads and writes through its arguments, as the kernel is designed (e.g.
int64 offsets, one traceback byte per cell), divided by the copy bandwidth measured here with a
copy kernel; integer operations a lean implementation needs (nominal counts in OPS) divided by
the int32 add/xor rate measured here. Genome and index reads are left out of the byte floor:
1.3 MB of genome and 20 MB of positions stay in the 50 MB L2.
"""

import argparse
import json
import os
import sys
import time
import warnings
from types import SimpleNamespace

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from gpualign import encode, extend, seed  # noqa: E402  (sets numba's cache folder first)

import numba  # noqa: E402
import numpy as np  # noqa: E402
from numba import cuda, njit, prange  # noqa: E402
from numba.core import config as nb_config  # noqa: E402

from gpualign.backends import cuda as gcuda_host, cuda_kernels as gcuda, launch as cuda_config  # noqa: E402
from gpualign.encode import BASES, header_bins, pack_codes, pack_nmask  # noqa: E402
from gpualign.genome import Genome  # noqa: E402
from gpualign.index import build_index  # noqa: E402
from gpualign.options import MapParams  # noqa: E402
from gpualign.reads import encode_reads  # noqa: E402

SIM = bool(nb_config.ENABLE_CUDASIM)
READ_LEN = 100
NOMINAL_COPY_BPS = 2.4e12          # DESIGN.md; used when the simulator cannot measure
NOMINAL_INT32_OPS = 132 * 64 * 1.98e9
TARGETS = {"exact": 2e9, "trace_t3": 500.0, "score_only": 1000.0}   # reads/s, GCUPS, GCUPS
# Integer operations a lean implementation needs per unit of work (nominal; loads not counted):
OPS = {
    "exact_candidate": 8,   # position load index, funnel shift of 2 genome words, xor, mask, test, loop
    "exact_read": 24,       # bin bounds of both strands, stores
    "nw_affine": 11,        # E: 2 sub + max, F: 2 sub + max, diagonal: compare, select, add, H: 2 max
    "sw_affine": 14,        # NW + max with 0 + best score/position update
    "nw_affine_tb": 16,     # NW + 3 compares/ors building the traceback byte + its store
    "nw_linear": 7,         # diagonal: compare, select, add; up, left: sub; 2 max
    "seed_base": 2,         # rolling k-mer code: shift-or per base, both strands
    "seed_hit": 4,          # per hit and sort level (merge-sort pass), plus clustering
}


# ---------------------------------------------------------------- inputs

def make_genome(size, seed):
    """Base codes of a random genome with repeats and N runs, its contig lengths and the starts of
    an exactly repeated 1.5 kbp element (reads drawn from it match several places exactly)."""
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, 4, size, dtype=np.uint8)
    # a 300 bp element in many copies with 2% substitutions: inexact repeats for the seeding
    elem = rng.integers(0, 4, 300, dtype=np.uint8)
    for s in rng.integers(0, size - 300, max(10, size // 16000)):
        copy = elem.copy()
        hit = rng.random(300) < 0.02
        copy[hit] = (copy[hit] + rng.integers(1, 4, hit.sum(), dtype=np.uint8)) % 4
        codes[s:s + 300] = copy
    # a tandem array of a 40 bp unit and a poly-A run: crowded and over-full (capped) k-mer bins
    tandem = np.tile(rng.integers(0, 4, 40, dtype=np.uint8), min(10000, size // 50) // 40)
    codes[size // 5:size // 5 + len(tandem)] = tandem
    codes[size // 3:size // 3 + min(2000, size // 100)] = 0
    # a 1.5 kbp element in 24 exact copies, on a grid so that the copies do not overlap
    elem = rng.integers(0, 4, 1500, dtype=np.uint8)
    starts = np.sort(rng.choice(size // 4000 - 1, 24, replace=False)) * 4000 + 1000
    for s in starts:
        codes[s:s + 1500] = elem
    # N runs (assembly gaps)
    for frac, length in ((0.11, 10), (0.37, 100), (0.52, 1000), (0.81, 5000), (0.93, 50)):
        s = int(size * frac)
        codes[s:s + min(length, size // 200)] = 4
    lengths = np.array([size - size // 25 - size // 100, size // 25, size // 100], dtype=np.int64)
    return codes, lengths, starts.astype(np.int64)


def genome_of(codes, lengths):
    offsets = np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int64)
    return Genome(pack_codes(codes), pack_nmask(codes), [f"chr{i + 1}" for i in range(len(lengths))],
                  lengths, offsets)


@njit(cache=True)
def uniform(key, c):
    """Draw number c of stream `key`, uniform in [0, 1): splitmix64 of key + c * golden ratio. Counter
    based, so reads are simulated in parallel and the output does not depend on the thread count."""
    z = key + np.uint64(c) * np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> np.uint64(31))
    return np.float64(z >> np.uint64(11)) * (1.0 / 9007199254740992.0)


@njit(cache=True)
def complement(c):
    return 4 if c == 4 else 3 - c


@njit(parallel=True, cache=True)
def simulate_reads(gcodes, n_before, starts_before, rep_starts, rep_len, n, L, sub, indel, n_rate,
                   rep_share, seed):
    """n reads of L bases: codes (read-major), true diagonal (genome position of the forward
    fragment's first base) and strand. Windows with an N or across a contig start are redrawn.
    One uniform draw a base decides between indel (half insertions), substitution, N or none."""
    span = L + 16                       # room for deletions
    G = gcodes.shape[0]
    out = np.empty(n * L, dtype=np.uint8)
    diag = np.empty(n, dtype=np.int64)
    strand = np.empty(n, dtype=np.int64)
    for r in prange(n):
        key = (np.uint64(seed) << np.uint64(32)) + np.uint64(r)
        c = 0
        while True:
            if uniform(key, c) < rep_share:
                p = (rep_starts[int(uniform(key, c + 1) * rep_starts.shape[0])]
                     + int(uniform(key, c + 2) * (rep_len - span)))
            else:
                p = int(uniform(key, c + 1) * (G - span))
            c += 3
            if n_before[p + span] == n_before[p] and starts_before[p + span] == starts_before[p + 1]:
                break
        o = r * L
        g = p
        i = 0
        while i < L:
            u = uniform(key, c)
            c += 1
            if u < indel:
                if u < indel * 0.5 and i > 0:
                    out[o + i] = int(u / (indel * 0.5) * 4)     # inserted base
                    i += 1
                else:
                    g += 1                                     # deleted reference base
                continue
            b = np.int64(gcodes[min(g, G - 1)])
            g += 1
            if u < indel + sub:
                b = (b + 1 + int((u - indel) / sub * 3)) % 4
            elif u < indel + sub + n_rate:
                b = 4
            out[o + i] = b
            i += 1
        s = 1 if uniform(key, c) < 0.5 else 0
        if s == 1:                                             # reverse complement in place
            for x in range((L + 1) // 2):
                a = out[o + x]
                out[o + x] = complement(out[o + L - 1 - x])
                out[o + L - 1 - x] = complement(a)
        diag[r] = p
        strand[r] = s
    return out, diag, strand


def make_reads(codes, lengths, rep_starts, n_distinct, seed, k):
    """Simulated reads encoded by gpualign (Reads), with their true diagonals and strands."""
    n_before = np.concatenate(([0], np.cumsum(codes == 4))).astype(np.int64)
    is_start = np.zeros(len(codes), dtype=np.int64)
    is_start[np.cumsum(lengths)[:-1]] = 1
    starts_before = np.concatenate(([0], np.cumsum(is_start))).astype(np.int64)
    rcodes, diag, strand = simulate_reads(codes, n_before, starts_before, rep_starts, 1500, n_distinct,
                                          READ_LEN, 0.01, 0.001, 0.001, 0.03, seed)
    blob = BASES[rcodes].tobytes()
    seqs = [blob[i * READ_LEN:(i + 1) * READ_LEN] for i in range(n_distinct)]
    names = [b"r%d" % i for i in range(n_distinct)]
    reads = encode_reads(names, seqs, [b"I" * READ_LEN] * n_distinct, k)
    return reads, diag, strand


def exact_inputs(distinct, hbin, rc_hbin, n, by_bin):
    """The exact kernel's read arrays for n reads: the distinct reads (sorted by header bin if by_bin)
    repeated; all reads have READ_LEN bases."""
    wpr = int(distinct.word_off[1])
    order = np.argsort(hbin, kind="stable") if by_bin else np.arange(len(hbin))

    def tile(a, per):
        return np.resize(a.reshape(-1, per)[order], (n, per)).ravel()
    return SimpleNamespace(n=n, packed=tile(distinct.packed, wpr), rc_packed=tile(distinct.rc_packed, wpr),
                           word_off=np.arange(n + 1, dtype=np.int64) * wpr,
                           read_off=np.arange(n + 1, dtype=np.int64) * READ_LEN,
                           hbin=tile(hbin, 1), rc_hbin=tile(rc_hbin, 1))


def dp_inputs(distinct, diag, strand, n):
    """Codes (read-major, as the pipeline keeps them), offsets and truth of n tiled reads."""
    return SimpleNamespace(n=n, codes=np.resize(distinct.codes, n * READ_LEN),
                           rc_codes=np.resize(distinct.rc_codes, n * READ_LEN),
                           read_off=np.arange(n + 1, dtype=np.int64) * READ_LEN,
                           diag=np.resize(diag, n), strand=np.resize(strand, n))


# ---------------------------------------------------------------- reference kernels

LEAN_T = 3                          # _lean_nw_kernel is written out for this band
LEAN_W = 2 * LEAN_T + 1
LEAN_NEG = -(1 << 28)


@cuda.jit(device=True)
def _lean_cell(diag, up, left, qb, rb, match, mismatch, gap):
    """One cell of the linear-gap recurrence, in int32."""
    s = match if qb == rb else mismatch
    return np.int32(max(np.int32(diag + s), np.int32(up - gap), np.int32(left - gap)))


@cuda.jit(cache=True)
def _lean_nw_kernel(q, r, n, match, mismatch, gap, out):
    """Score-only banded semi-global NW, linear gaps, t = 3; one thread per alignment.

    q[i * P + a]: read base i of alignment a (N = 4); r[j * P + a]: window base j (N = 5, so N never
    matches), window = n + 2t bases from t before the diagonal. Both column-major: a warp's loads
    are coalesced. Band cell b of row i is column j = i + b; the 7 band cells (h0..h6) and the 7
    reference bases they face (r0..r6) are plain scalars, so they stay in registers; each row loads
    one read base and one new reference base.
    """
    a = cuda.grid(1)
    P = out.shape[0]
    if a >= P:
        return
    m = np.int32(match)
    x = np.int32(-mismatch)
    g = np.int32(gap)
    neg = np.int32(LEAN_NEG)
    h0 = h1 = h2 = h3 = h4 = h5 = h6 = np.int32(0)     # reference end gaps are free
    r0 = np.int32(r[a])
    r1 = np.int32(r[P + a])
    r2 = np.int32(r[2 * P + a])
    r3 = np.int32(r[3 * P + a])
    r4 = np.int32(r[4 * P + a])
    r5 = np.int32(r[5 * P + a])
    r6 = np.int32(r[6 * P + a])
    qo = a
    ro = 7 * P + a
    for i in range(n):
        qb = np.int32(q[qo])
        h0 = _lean_cell(h0, h1, neg, qb, r0, m, x, g)     # diagonal: same b; up: b + 1; left: b - 1
        h1 = _lean_cell(h1, h2, h0, qb, r1, m, x, g)
        h2 = _lean_cell(h2, h3, h1, qb, r2, m, x, g)
        h3 = _lean_cell(h3, h4, h2, qb, r3, m, x, g)
        h4 = _lean_cell(h4, h5, h3, qb, r4, m, x, g)
        h5 = _lean_cell(h5, h6, h4, qb, r5, m, x, g)
        h6 = _lean_cell(h6, neg, h5, qb, r6, m, x, g)
        r0, r1, r2, r3, r4, r5 = r1, r2, r3, r4, r5, r6
        if i + 1 < n:
            r6 = np.int32(r[ro])
        qo += P
        ro += P
    out[a] = max(h0, h1, h2, h3, h4, h5, h6)


@njit(cache=True)
def lean_nw_reference(q, r, P, a, n, t, match, mismatch, gap):
    """The lean kernel's alignment on a full matrix (cells off the band stay -inf): its check."""
    m = n + 2 * t
    H = np.full((n + 1, m + 1), LEAN_NEG, dtype=np.int64)
    for j in range(2 * t + 1):
        H[0, j] = 0
    for i in range(1, n + 1):
        for j in range(i, i + 2 * t + 1):
            s = match if q[(i - 1) * P + a] == r[(j - 1) * P + a] else -mismatch
            H[i, j] = max(H[i - 1, j - 1] + s, H[i - 1, j] - gap, H[i, j - 1] - gap)
    return H[n, n:n + 2 * t + 1].max()


@njit(parallel=True, cache=True)
def lean_columns(codes, rc_codes, L, pair_read, diag, strand, gcodes, t):
    """Column-major read and window bases of each pair for the lean kernel (genome N as 5), filled
    in chunks of 256 pairs so that each row's writes are contiguous."""
    P = pair_read.shape[0]
    q = np.empty(L * P, dtype=np.uint8)
    r = np.empty((L + 2 * t) * P, dtype=np.uint8)
    G = gcodes.shape[0]
    for chunk in prange((P + 255) // 256):
        lo = chunk * 256
        hi = min(P, lo + 256)
        for i in range(L):
            for a in range(lo, hi):
                src = rc_codes if strand[a] == 1 else codes
                q[i * P + a] = src[pair_read[a] * L + i]
        for j in range(L + 2 * t):
            for a in range(lo, hi):
                c = gcodes[min(max(diag[a] - t + j, 0), G - 1)]
                r[j * P + a] = 5 if c == 4 else c
    return q, r


@cuda.jit(cache=True)
def _int32_ops(out, iters):
    """32 dependent add/xor int32 operations per iteration in 4 chains (no two alike in a row, so
    the compiler cannot fuse them into IADD3/LOP3): measures the int32 ALU rate."""
    i = cuda.grid(1)
    if i >= out.shape[0]:
        return
    a = np.int32(i)
    b = np.int32(i ^ 0x5BD1)
    c = np.int32(i + 0x3C6E)
    d = np.int32(i ^ 0x7F4A)
    for _ in range(iters):
        for _u in range(4):
            a = np.int32(a + b)
            b = np.int32(b ^ c)
            c = np.int32(c + d)
            d = np.int32(d ^ a)
            a = np.int32(a ^ b)
            b = np.int32(b + c)
            c = np.int32(c ^ d)
            d = np.int32(d + a)
    out[i] = a ^ b ^ c ^ d


@cuda.jit(cache=True)
def _int64_ops(out, iters):
    """The same on int64 (numba's default integer; 2 instructions an add on the GPU)."""
    i = cuda.grid(1)
    if i >= out.shape[0]:
        return
    a = np.int64(i)
    b = np.int64(i ^ 0x5BD1)
    c = np.int64(i + 0x3C6E)
    d = np.int64(i ^ 0x7F4A)
    for _ in range(iters):
        for _u in range(4):
            a = a + b
            b = b ^ c
            c = c + d
            d = d ^ a
            a = a ^ b
            b = b + c
            c = c ^ d
            d = d + a
    out[i] = a ^ b ^ c ^ d


INT_OPS_PER_ITER = 32


@cuda.jit(cache=True)
def _copy_kernel(src, dst):
    i = cuda.grid(1)
    if i < src.shape[0]:
        dst[i] = src[i]


# ---------------------------------------------------------------- timing

class Clock:
    """Kernel and copy timing with CUDA events (wall clock in the simulator, whose events are empty)."""

    def __init__(self, repeats, pad_iters):
        self.repeats = repeats
        self.pad_iters = pad_iters
        self.pad_out = cuda.device_array(32, dtype=np.int64)

    def pad(self):
        """A ~0.3 ms busy kernel, so the start event and the next launch queue behind it."""
        _int32_ops[1, 32](self.pad_out, self.pad_iters)

    def once(self, fn):
        self.pad()
        e0, e1 = cuda.event(), cuda.event()
        t0 = time.perf_counter()
        e0.record()
        fn()
        e1.record()
        e1.synchronize()
        wall = (time.perf_counter() - t0) * 1e3
        ms = e0.elapsed_time(e1)
        return ms if ms >= 0 else wall

    def kernel(self, fn):
        """(per-repeat ms, warm-up wall seconds including compilation); 5 repeats when slow."""
        t0 = time.perf_counter()
        fn()
        cuda.synchronize()
        warm = time.perf_counter() - t0
        ms = [self.once(fn)]
        n = self.repeats if ms[0] < 300 or SIM else min(self.repeats, 5)
        return ms + [self.once(fn) for _ in range(n - 1)], warm


def launch(kernel, n, *args, threads=cuda_config.THREADS_PER_BLOCK):
    """A closure launching kernel over n threads, as gpualign.backends.cuda does (its block size)."""
    blocks = max(1, (n + threads - 1) // threads)
    return lambda: kernel[blocks, threads](*args)


def upload(clock, arrays):
    """Device copies of host arrays; the copy (allocation excluded) timed with events."""
    devs = [cuda.device_array(a.shape, a.dtype) for a in arrays]
    ms = clock.once(lambda: [d.copy_to_device(a) for d, a in zip(devs, arrays)])
    return devs, {"bytes": int(sum(a.nbytes for a in arrays)), "ms": ms}


def download(clock, devs):
    out = []
    ms = clock.once(lambda: out.extend(d.copy_to_host() for d in devs))
    return out, {"bytes": int(sum(d.nbytes for d in devs)), "ms": ms}


def gbps(copy):
    return copy["bytes"] / max(copy["ms"], 1e-9) / 1e6


def resources(kernel):
    """Registers and local memory per thread of a compiled kernel (absent in the simulator)."""
    out = {}
    for key, attr in (("regs", "get_regs_per_thread"), ("local_bytes", "get_local_mem_per_thread"),
                      ("shared_bytes", "get_shared_mem_per_block")):
        try:
            v = getattr(kernel, attr)()
            out[key] = int(max(v.values()) if isinstance(v, dict) else v)
        except Exception:
            pass
    return out


def free_device():
    """Release device arrays dropped so far (numba defers frees)."""
    if not SIM:
        cuda.current_context().deallocations.clear()


# ---------------------------------------------------------------- results

class Results:
    def __init__(self, copy_bps, int_ops):
        self.rows = []
        self.copy_bps = copy_bps
        self.int_ops = int_ops

    def add(self, name, unit, n, ms, *, cells=None, bytes_=None, ops=None, target=None, **extra):
        """One kernel measurement; rate in reads/s (unit 'reads/s') or GCUPS (cells given)."""
        med = float(np.median(ms))
        row = {"name": name, "unit": unit, "n": int(n), "ms": [float(x) for x in ms], "median_ms": med}
        if cells is not None:
            row["cells"] = int(cells)
            row["rate"] = cells / (med * 1e-3) / 1e9
        else:
            row["rate"] = n / (med * 1e-3)
        floors = []
        if bytes_ is not None:
            row["bytes"] = int(bytes_)
            row["bytes_floor_ms"] = bytes_ / self.copy_bps * 1e3
            floors.append(row["bytes_floor_ms"])
        if ops is not None:
            row["int_ops"] = int(ops)
            row["ops_floor_ms"] = ops / self.int_ops * 1e3
            floors.append(row["ops_floor_ms"])
        if floors:
            row["x_floor"] = med / max(floors)
        if target is not None:
            row["target"] = target
            row["meets_target"] = bool(row["rate"] >= target)
        row.update(extra)
        self.rows.append(row)
        print(f"  {name}: n={n} median {med:.3f} ms, {fmt_rate(row)}"
              + (f", {row['x_floor']:.1f}x its floor" if floors else ""), flush=True)
        return row


def fmt_rate(row):
    r, u = row["rate"], row["unit"]
    if u == "reads/s":
        return f"{r / 1e9:.3f} G reads/s" if r >= 1e8 else f"{r / 1e6:.2f} M reads/s"
    if u == "GB/s":
        return f"{r:.1f} GB/s"
    if u == "Tops/s":
        return f"{r:.2f} T ops/s"
    return f"{r:.1f} GCUPS"


def fmt_target(row):
    if "target" not in row:
        return ""
    t = row["target"]
    txt = f"{t / 1e9:.0f} G reads/s" if row["unit"] == "reads/s" else f"{t:.0f} GCUPS"
    return f"≥ {txt} {'met' if row['meets_target'] else 'NOT met'}"


def table(rows):
    lines = ["| kernel | n | median ms | rate | target | bytes floor ms | int-op floor ms | x floor | "
             "regs | local B | in/out copies |",
             "|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        def num(key, f="{:.3f}"):
            return f.format(r[key]) if key in r else ""
        copies = ""
        if "h2d" in r:
            copies = f"{r['h2d']['ms']:.1f} ms in ({gbps(r['h2d']):.0f} GB/s)"
        if "d2h" in r:
            copies += f", {r['d2h']['ms']:.1f} ms out ({gbps(r['d2h']):.0f} GB/s)"
        lines.append(f"| {r['name']} | {r['n']} | {r['median_ms']:.3f} | {fmt_rate(r)} | {fmt_target(r)} | "
                     f"{num('bytes_floor_ms')} | {num('ops_floor_ms')} | {num('x_floor', '{:.1f}')} | "
                     f"{r.get('regs', '')} | {r.get('local_bytes', '')} | {copies} |")
    return "\n".join(lines)


# ---------------------------------------------------------------- benchmarks

def bench_int_ops(clock, threads, iters):
    out = cuda.device_array(threads, dtype=np.int64)
    rows = []
    for name, kern in (("int32 add/xor", _int32_ops), ("int64 add/xor", _int64_ops)):
        ms, _ = clock.kernel(launch(kern, threads, out, iters, threads=256))
        med = float(np.median(ms))
        ops = threads * iters * INT_OPS_PER_ITER
        rows.append({"name": name, "unit": "Tops/s", "n": ops, "ms": ms, "median_ms": med,
                     "rate": ops / (med * 1e-3) / 1e12, **resources(kern)})
        print(f"  {name}: {rows[-1]['rate']:.2f} T ops/s", flush=True)
    return rows


def bench_copies(clock, nbytes):
    """Device copy bandwidth (copy kernel and driver memcpy, read + write bytes) and host<->device
    copies from pinned and pageable memory."""
    n = nbytes // 8
    src = cuda.to_device(np.arange(n, dtype=np.uint64))
    dst = cuda.device_array(n, dtype=np.uint64)
    rows = []

    def row(name, ms, moved):
        med = float(np.median(ms))
        rows.append({"name": name, "unit": "GB/s", "n": moved, "ms": ms, "median_ms": med,
                     "rate": moved / (med * 1e-3) / 1e9})
        print(f"  {name}: {rows[-1]['rate']:.1f} GB/s", flush=True)

    ms, _ = clock.kernel(launch(_copy_kernel, n, src, dst, threads=256))
    row("D2D copy kernel", ms, 2 * 8 * n)
    assert int(dst[n - 1]) == n - 1, "copy kernel lost data"
    ms, _ = clock.kernel(lambda: dst.copy_to_device(src))
    row("D2D memcpy", ms, 2 * 8 * n)
    pinned = cuda.pinned_array(n, dtype=np.uint64)
    pinned[:] = 1
    pageable = np.ones(n, dtype=np.uint64)
    for kind, host in (("pinned", pinned), ("pageable", pageable)):
        ms, _ = clock.kernel(lambda: dst.copy_to_device(host))
        row(f"H2D {kind}", ms, 8 * n)
        ms, _ = clock.kernel(lambda: dst.copy_to_host(host))
        row(f"D2H {kind}", ms, 8 * n)
    return rows


def bench_exact(clock, res, reads, dg, index, p, order_name, stats):
    """_exact_kernel on all reads, both strands: reads/s."""
    n = reads.n
    inputs = [reads.packed, reads.rc_packed, reads.word_off, reads.read_off, reads.hbin, reads.rc_hbin]
    d_in, h2d = upload(clock, inputs)
    counts = cuda.device_array(n, dtype=np.int64)
    keys = cuda.device_array(n * p.max_exact, dtype=np.int64)   # written only where a hit is stored
    d_idx = cuda.to_device(index.offsets), cuda.to_device(index.positions)
    run = launch(gcuda._exact_kernel, n, *d_in, *dg, *d_idx, index.max_occ, p.max_exact, counts, keys)
    ms, warm = clock.kernel(run)
    (h_counts, _), d2h = download(clock, [counts, keys])
    sizes = np.diff(index.offsets)
    scanned = sum(np.where((b >= 0) & (sizes[np.maximum(b, 0)] <= index.max_occ), sizes[np.maximum(b, 0)], 0).sum()
                  for b in (reads.hbin, reads.rc_hbin))
    stored = np.minimum(h_counts, p.max_exact).sum()
    bytes_ = sum(a.nbytes for a in inputs) + 8 * n + 8 * stored
    row = res.add(f"exact k={index.k} ({order_name})", "reads/s", n, ms, bytes_=bytes_,
                  ops=scanned * OPS["exact_candidate"] + n * OPS["exact_read"], target=TARGETS["exact"],
                  h2d=h2d, d2h=d2h, warmup_s=warm, **resources(gcuda._exact_kernel),
                  candidates_per_read=float(scanned / n), max_occ=index.max_occ,
                  share_no_hit=float(np.mean(h_counts == 0)), share_one_hit=float(np.mean(h_counts == 1)),
                  share_multi_hit=float(np.mean(h_counts >= 2)),
                  ideal_bytes=int(n * (READ_LEN // 4 + 4)))   # one packed strand + an int32 count
    stats.setdefault("exact_counts", h_counts)   # the first run's (input order, first k)
    return row


def sample_seed_hits(reads, sel, index, p, m):
    """Seed hits per read (both strands) of the first m selected reads, from core on the CPU."""
    hits = np.empty(seed.scratch_words(p.max_hits), dtype=np.int64)
    order = 2 * p.max_hits   # where the seeds' order goes, as find_candidates puts it
    nh = np.empty(min(m, len(sel)), dtype=np.int64)
    for x in range(len(nh)):
        s = int(reads.read_off[sel[x]])
        c = seed.collect_seed_hits(reads.codes, s, READ_LEN, index.k, 0, index.offsets, index.positions,
                                   index.max_occ, hits, 0, 0, p.max_hits // 2, hits, order)
        nh[x] = seed.collect_seed_hits(reads.rc_codes, s, READ_LEN, index.k, 1, index.offsets, index.positions,
                                       index.max_occ, hits, 0, c, p.max_hits - c, hits, order)
    return nh


def bench_seeding(clock, res, reads, d_codes, index, p, sel):
    """_candidate_kernel on reads without a single exact hit (as the mapper sends them): reads/s."""
    m = len(sel)
    (d_sel,), h2d = upload(clock, [sel])
    ncand = cuda.device_array(m, dtype=np.int64)
    keys = cuda.device_array(m * p.max_candidates, dtype=np.int64)
    votes = cuda.device_array(m * p.max_candidates, dtype=np.int64)
    dropped = cuda.device_array(m, dtype=np.int64)
    hits = cuda.device_array(m * seed.scratch_words(p.max_hits), dtype=np.int64)   # hits, merge and seed scratch
    run = launch(gcuda._candidate_kernel, m, d_sel, *d_codes, index.k, cuda.to_device(index.offsets),
                 cuda.to_device(index.positions), index.max_occ, p.max_indels, hits, p.max_hits,
                 p.max_candidates, ncand, keys, votes, dropped)
    ms, warm = clock.kernel(run)
    (h_ncand, _, _, _), d2h = download(clock, [ncand, keys, votes, dropped])
    nh = sample_seed_hits(reads, sel, index, p, 2000)
    mean_nh = float(nh.mean())
    sort_work = float((nh * (np.log2(np.maximum(nh, 2)) + 1)).mean())
    per_read = 8 + 16 + 2 * READ_LEN + 8 + 16 * p.max_candidates + 8
    return res.add(f"seeding k={index.k}", "reads/s", m, ms,
                   bytes_=m * (per_read + 16 * mean_nh),
                   ops=m * (2 * READ_LEN * OPS["seed_base"] + sort_work * OPS["seed_hit"]),
                   h2d=h2d, d2h=d2h, warmup_s=warm, **resources(gcuda._candidate_kernel),
                   seed_hits_per_read=mean_nh, hits_scratch_bytes=int(m * seed.scratch_words(p.max_hits) * 8),
                   mean_candidates=float(h_ncand.mean()))


def window_bytes(t):
    """Packed genome words and N-mask words a window of READ_LEN + 2t bases spans."""
    return 4 * ((READ_LEN + 2 * t) // 16 + 2) + 4 * ((READ_LEN + 2 * t) // 32 + 2)


def bench_extend(clock, res, pairs, d_codes, dg, genome, t):
    """The extension's two kernels (NW, then SW where it could win) on true placements: GCUPS."""
    p = MapParams(max_indels=t)
    P = len(pairs.read)
    W = 2 * t + 1
    (d_read, d_key), h2d = upload(clock, [pairs.read, pairs.key])
    out = cuda.device_array((P, 8), dtype=np.int64)
    count, nopen, opened = cuda.to_device(np.array([P], np.int64)), cuda.device_array(1, np.int64), \
        cuda.device_array(P, np.int64)
    at = (*d_codes, *dg, genome.size, t, p.match, p.mismatch, p.gap_open, p.gap_extend, p.clip_penalty)
    narrow = t <= cuda_config.NARROW_T
    close = gcuda._close_pairs_kernel if narrow else gcuda._close_wide_pairs_kernel
    threads = cuda_config.CLOSE_THREADS if narrow else cuda_config.THREADS_PER_BLOCK
    open_pairs = launch(gcuda._open_pairs_kernel, P, count, d_read, d_key, *at, out, nopen, opened)
    close_pairs = launch(close, min(P, cuda_config.CLOSE_BLOCKS * threads), nopen, opened, d_read, d_key, *at,
                         cuda.to_device(np.zeros(1, dtype=np.uint8)), out, threads=threads)

    def run():
        nopen.copy_to_device(np.zeros(1, np.int64))
        open_pairs()
        close_pairs()
    ms, warm = clock.kernel(run)
    (h_out,), d2h = download(clock, [out])
    local = h_out[:, 2] > extend.NEG // 2
    nw_cells = P * READ_LEN * W
    sw_cells = int(local.sum()) * READ_LEN * W
    return res.add(f"extend NW+SW t={t}", "GCUPS", P, ms, cells=nw_cells + sw_cells,
                   bytes_=P * (16 + 16 + READ_LEN + window_bytes(t) + 64),
                   ops=nw_cells * OPS["nw_affine"] + sw_cells * OPS["sw_affine"],
                   target=TARGETS["score_only"] if t == 3 else None,
                   h2d=h2d, d2h=d2h, warmup_s=warm, **resources(close),
                   share_sw_pass=float(local.mean()), mean_nw_score=float(h_out[:, 0].mean()),
                   share_nw_at_least_min_score=float(np.mean(h_out[:, 0] >= p.min_score)))


def bench_trace(clock, res, pairs, d_codes, dg, genome, t):
    """The traceback's two kernels (the ungapped test, then NW with traceback bytes and the walk to a
    CIGAR for the rows it leaves open, listed) on true placements: GCUPS, every row's cells counted."""
    p = MapParams(max_indels=t)
    P = len(pairs.read)
    W = 2 * t + 1
    maxops = 2 * READ_LEN + 2
    (d_read, d_key, d_local), h2d = upload(clock, [pairs.read, pairs.key, np.zeros(P, dtype=np.int64)])
    ops = cuda.device_array(P * maxops, dtype=np.uint8)
    lens = cuda.device_array(P * maxops, dtype=np.int32)
    out = cuda.device_array((P, 6), dtype=np.int64)
    ntrace, listed = cuda.device_array(1, np.int64), cuda.device_array(P, np.int64)
    scoring = (t, p.match, p.mismatch, p.gap_open, p.gap_extend)
    blocks, threads = gcuda_host.close_trace_grid(P, t)
    tb = cuda.device_array(blocks * threads * READ_LEN * W, dtype=np.uint8)
    close = gcuda._close_traces_kernel if t <= cuda_config.NARROW_T else gcuda._close_wide_traces_kernel
    open_traces = launch(gcuda._open_traces_kernel, P, d_read, d_key, d_local, *d_codes, *dg, genome.size, *scoring,
                         ops, lens, out, ntrace, listed)

    def run():
        ntrace.copy_to_device(np.zeros(1, np.int64))
        open_traces()
        close[blocks, threads](ntrace, listed, False, d_read, d_key, d_local, *d_codes, *dg, genome.size, *scoring,
                               READ_LEN, tb, ops, lens, out)
    ms, warm = clock.kernel(run)
    (h_out,), d2h = download(clock, [out])
    cells = P * READ_LEN * W
    nops = h_out[:, 5]
    return res.add(f"trace NW+CIGAR t={t}", "GCUPS", P, ms, cells=cells,
                   bytes_=P * (24 + 16 + READ_LEN + window_bytes(t) + READ_LEN * W + 48) + int(nops.sum()) * 5,
                   ops=cells * OPS["nw_affine_tb"] + P * (READ_LEN + 2 * t) * 6,
                   target=TARGETS["trace_t3"] if t == 3 else None,
                   h2d=h2d, d2h=d2h, warmup_s=warm, **resources(close),
                   mean_cigar_ops=float(nops.mean()), share_one_op=float(np.mean(nops == 1)),
                   tb_bytes=int(tb.size))


def bench_lean(clock, res, pairs, reads, gcodes):
    """The lean reference: score-only banded NW, linear gaps, t = 3, coalesced columns: GCUPS."""
    P = len(pairs.read)
    t = LEAN_T
    q, r = lean_columns(reads.codes, reads.rc_codes, READ_LEN, pairs.read, pairs.diag, pairs.strand, gcodes, t)
    (d_q, d_r), h2d = upload(clock, [q, r])
    out = cuda.device_array(P, dtype=np.int32)
    match, mismatch, gap = 1, 4, 3
    ms, warm = clock.kernel(launch(_lean_nw_kernel, P, d_q, d_r, READ_LEN, match, mismatch, gap, out, threads=256))
    (h_out,), d2h = download(clock, [out])
    check = min(P, 2000)
    bad = sum(int(h_out[a]) != lean_nw_reference(q, r, P, a, READ_LEN, t, match, mismatch, gap) for a in range(check))
    cells = P * READ_LEN * LEAN_W
    return res.add(f"lean NW linear t={t} (reference)", "GCUPS", P, ms, cells=cells,
                   bytes_=P * (READ_LEN + READ_LEN + 2 * t + 4), ops=cells * OPS["nw_linear"],
                   target=TARGETS["score_only"], h2d=h2d, d2h=d2h, warmup_s=warm, **resources(_lean_nw_kernel),
                   checked=check, mismatches_vs_cpu=bad, plain_kernel_gcups_in_design=580)


# ---------------------------------------------------------------- main

def sizes(args, sms):
    if args.quick:
        return SimpleNamespace(genome=200_000, reads=args.reads or 512, distinct=256, pairs=args.pairs or 16,
                               seed_reads=args.seed_reads or 32, repeats=args.repeats or 2,
                               copy_bytes=1 << 12, int_threads=64, int_iters=2, pad_iters=1)
    reads = args.reads or 10_000_000
    return SimpleNamespace(genome=5_000_000, reads=reads, distinct=min(reads, 1 << 20),
                           pairs=args.pairs or 4_000_000, seed_reads=args.seed_reads or 500_000,
                           repeats=args.repeats or 7, copy_bytes=1 << 30, int_threads=sms * 2048 * 4,
                           int_iters=1024, pad_iters=20000)


def device_info():
    info = {"simulator": SIM, "numba": numba.__version__, "numpy": np.__version__}
    try:
        import importlib.metadata as md
        info["numba_cuda"] = md.version("numba-cuda")
    except Exception:
        pass
    try:
        dev = cuda.get_current_device()
        info["device"] = dev.name.decode() if isinstance(dev.name, bytes) else str(dev.name)
        info["compute_capability"] = list(dev.compute_capability)
        info["sms"] = int(dev.MULTIPROCESSOR_COUNT)
        info["clock_khz"] = int(dev.CLOCK_RATE)
    except Exception:
        pass
    return info


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reads", type=int, help="reads for the exact-match kernel (default 10 M)")
    ap.add_argument("--pairs", type=int, help="alignments for the DP kernels (default 4 M)")
    ap.add_argument("--seed-reads", type=int, help="reads for the seeding kernel (default 500 k; 8 KB scratch each)")
    ap.add_argument("--repeats", type=int, help="timed launches per kernel (default 7)")
    ap.add_argument("--ks", default="8,10", help="index k values for the exact kernel; seeding uses the first")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--quick", action="store_true", help="tiny sizes, for the CUDA simulator")
    ap.add_argument("--out", default=os.environ.get("OUT", "/tmp/bench_out/kernels"))
    args = ap.parse_args(argv)
    if SIM:
        warnings.filterwarnings("ignore", category=RuntimeWarning)   # numpy scalar overflow in int kernels
    info = device_info()
    print(f"device: {info}", flush=True)
    sz = sizes(args, info.get("sms", 132))
    ks = [int(k) for k in args.ks.split(",")]
    os.makedirs(args.out, exist_ok=True)
    clock = Clock(sz.repeats, sz.pad_iters)
    t_start = time.perf_counter()

    print("== int ops and copies", flush=True)
    int_rows = bench_int_ops(clock, sz.int_threads, sz.int_iters)
    copy_rows = bench_copies(clock, sz.copy_bytes)
    int32_rate = int_rows[0]["rate"] * 1e12 if not SIM else NOMINAL_INT32_OPS
    copy_bps = copy_rows[0]["rate"] * 1e9 if not SIM else NOMINAL_COPY_BPS
    res = Results(copy_bps, int32_rate)

    print("== inputs", flush=True)
    t0 = time.perf_counter()
    gcodes, lengths, rep_starts = make_genome(sz.genome, args.seed)
    genome = genome_of(gcodes, lengths)
    indexes = {k: build_index(genome, k=k) for k in ks}
    distinct, diag, strand = make_reads(gcodes, lengths, rep_starts, sz.distinct, args.seed + 1, ks[0])
    # DP and seeding use the first R reads (codes read-major, as the pipeline stores them)
    R = min(sz.reads, max(sz.pairs, sz.seed_reads * 2))
    reads = dp_inputs(distinct, diag, strand, R)
    gen_s = time.perf_counter() - t0
    print(f"  genome {genome.size} bp, {sz.reads} reads ({sz.distinct} distinct), {gen_s:.1f} s", flush=True)
    dg = tuple(cuda.to_device(a) for a in (genome.packed, genome.nmask, genome.offsets, genome.ends))

    print("== exact match", flush=True)
    stats = {}
    p = MapParams()
    for k in ks:
        bins = ((distinct.hbin, distinct.rc_hbin) if k == ks[0] else
                (header_bins(distinct.codes, distinct.read_off, k), header_bins(distinct.rc_codes, distinct.read_off, k)))
        for by_bin in (False, True):
            x = exact_inputs(distinct, *bins, sz.reads, by_bin)
            bench_exact(clock, res, x, dg, indexes[k], p, "sorted by bin" if by_bin else "input order", stats)
            del x
            free_device()
    d_codes, _ = upload(clock, [reads.codes, reads.rc_codes, reads.read_off])

    print("== seeding", flush=True)
    need = np.flatnonzero(stats["exact_counts"][:R] < 2)[:sz.seed_reads].astype(np.int64)
    bench_seeding(clock, res, reads, d_codes, indexes[ks[0]], p, need)
    free_device()

    print("== banded DP", flush=True)
    pr = np.arange(sz.pairs, dtype=np.int64) % R
    pairs = SimpleNamespace(read=pr, diag=reads.diag[pr], strand=reads.strand[pr],
                            key=reads.strand[pr] * encode.STRAND_BIT + reads.diag[pr] + encode.DIAG_BIAS)
    for t in (3, 10):
        bench_extend(clock, res, pairs, d_codes, dg, genome, t)
        free_device()
    for t in (3, 10):
        bench_trace(clock, res, pairs, d_codes, dg, genome, t)
        free_device()
    bench_lean(clock, res, pairs, reads, gcodes)

    total_s = time.perf_counter() - t_start
    report = {"device": info, "sizes": vars(sz), "ks": ks, "seconds": total_s, "input_seconds": gen_s,
              "copy_bandwidth_for_floors_Bps": copy_bps, "int32_ops_for_floors": int32_rate,
              "ops_per_unit": OPS, "targets": TARGETS, "int_ops": int_rows, "copies": copy_rows,
              "kernels": res.rows, "index": {str(k): {"bins": 4 ** k, "positions": len(ix.positions),
                                                      "capped_bins": ix.capped_bins} for k, ix in indexes.items()}}
    path = os.path.join(args.out, "kernels.json")
    with open(path, "w") as fh:
        json.dump(report, fh, indent=1, default=lambda o: o.item() if hasattr(o, "item") else str(o))
    print(f"\nwrote {path}; {total_s:.1f} s in all{' (CUDA simulator: timings meaningless)' if SIM else ''}")
    print(f"floors: bytes / {copy_bps / 1e12:.2f} TB/s (copy kernel), int ops / {int32_rate / 1e12:.1f} T/s "
          f"(int32 add/xor); x floor = median / max(floors)\n")
    print(table(res.rows + int_rows + copy_rows))


if __name__ == "__main__":
    main()
