#!/usr/bin/env python3
"""Fast synthetic genomes with mammal-like repeats, and a fast read simulator (numba).

Genome (``make_genome``), built on one array of base codes (0-3 = ACGT, 4 = N):

1. background bases with a GC content that drifts along the genome (isochores, 64 kbp steps);
2. interspersed repeat families written over it: SINE-like (~300 bp, poly-A tail), LINE-like
   (~6 kbp, mostly 5'-truncated copies), DNA-transposon-like (~1.5 kbp) and LTR-like (~450 bp),
   each with a few subfamilies; copies on both strands at 2-20 % divergence (substitutions
   plus 1-3 bp indels), some truncated;
3. tandem repeats: microsatellites (1-6 bp units), minisatellites (10-60 bp units) and one
   satellite array (171 bp unit) per contig;
4. segmental duplications: 10-50 kbp copies of the genome itself at 1-3 % divergence;
5. N runs: assembly gaps of 100 bp to 50 kbp (log-uniform), and N at both contig ends.

About 40 % of the bases end up in repeats, so some reads have several good placements.

Reads (``simulate_reads``): uniform over both strands; windows that touch an N or cross a
contig end are redrawn (so reads hold no N); indels of 1-3 bp at ``indel`` per read base (none
within 5 bases of a read end, so the leftmost position is well defined), substitutions at
``sub``; binned Illumina-like qualities ('F' mostly, ':', ',', '#', lower on substituted bases
and towards the 3' end). Names are ``r{i}:{contig}:{pos}:{strand}`` as in ``simulate.py``
(``i`` from 1, ``pos`` the 1-based leftmost reference position on the forward strand), so
``accuracy.py`` scores them.

Every random draw comes from a counter-based generator keyed by (seed, item): a genome chunk,
a repeat copy or a read. Output therefore depends on the seed and sizes only, never on the
number of threads or the batch size.
"""
from __future__ import annotations

import argparse
import gzip
import os
import sys
import time

import numba
import numpy as np
from numba import njit, prange

N_CODE = 4
LETTERS = np.frombuffer(b"ACGTN", dtype=np.uint8)
EDGE = 5                 # no read indel within this many bases of a read end
MAX_TRIES = 1000         # redraws of a read window before giving up
BG_BLOCK = 1 << 16       # background GC step, and the unit of its random streams
COPY_CHUNK = 1 << 20     # repeat copies are written chunk by chunk in parallel
LINE_WIDTH = 60
READ_BATCH = 1 << 19     # reads simulated and formatted per batch (bounds memory)
INV_2_32 = 1.0 / 4294967296.0

# labels of the bases, for the statistics
LABELS = ("unique", "SINE", "LINE", "DNA", "LTR", "simple", "satellite", "segdup", "N")
LBL = {name: i for i, name in enumerate(LABELS)}
LBL_SEGDUP = LBL["segdup"]

# Repeat families: (label, consensus length, subfamilies, share of the genome, mean kept length
# as a fraction of the consensus, GC of the consensus).
FAMILIES = (
    ("SINE", 300, 3, 0.12, 0.85, 0.53),
    ("LINE", 6000, 3, 0.20, 0.20, 0.40),
    ("DNA", 1500, 2, 0.04, 0.60, 0.42),
    ("LTR", 450, 2, 0.04, 0.80, 0.45),
)
SIMPLE_SHARE = 0.02      # micro- and minisatellites
SEGDUP_SHARE = 0.04
GAP_EVERY = 5_000_000    # one assembly gap per this many bp, on average


# --------------------------------------------------------------------------
# counter-based random numbers (splitmix64): a stream per (seed, item)

@njit(inline="always", cache=True)
def _mix(z):
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@njit(inline="always", cache=True)
def _stream(seed, item):
    """Start state of the stream for one item."""
    return _mix(np.uint64(seed) * np.uint64(0x9E3779B97F4A7C15) + _mix(np.uint64(item) + np.uint64(1)))


@njit(inline="always", cache=True)
def _next(state):
    state = state + np.uint64(0x9E3779B97F4A7C15)
    return state, _mix(state)


@njit(inline="always", cache=True)
def _unit(r):
    """Uniform float in [0, 1) from a 64-bit draw."""
    return (r >> np.uint64(11)) * (1.0 / 9007199254740992.0)


@njit(inline="always", cache=True)
def _below(r, n):
    """Integer in [0, n) from a 64-bit draw (n < 2**32; bias negligible)."""
    return np.int64(((r >> np.uint64(32)) * np.uint64(n)) >> np.uint64(32))


# --------------------------------------------------------------------------
# genome kernels

_BG_ORDER = np.array([1, 2, 0, 3], dtype=np.uint8)   # C, G, A, T by threshold rank


@njit(parallel=True, cache=True)
def _background(codes, gc, seed):
    """Random bases, block b with GC content gc[b]; 4 bases per draw, branch-free (random
    branches would mispredict on every base)."""
    nblocks = (len(codes) + BG_BLOCK - 1) // BG_BLOCK
    for b in prange(nblocks):
        state = _stream(seed, b)
        t1 = np.uint64(gc[b] * 32768.0)                # C below t1, G below t2, A below t3
        t2 = np.uint64(gc[b] * 65536.0)
        t3 = np.uint64(32768.0 + gc[b] * 32768.0)
        end = min(len(codes), (b + 1) * BG_BLOCK)
        for i in range(b * BG_BLOCK, end, 4):
            state, r = _next(state)
            for k in range(min(4, end - i)):
                v = (r >> np.uint64(16 * k)) & np.uint64(0xFFFF)
                codes[i + k] = _BG_ORDER[(v >= t1) + (v >= t2) + (v >= t3)]


@njit(inline="always", cache=True)
def _write_copy(codes, labels, limit, pos, cons, cstart, clen, reverse, div, label, state):
    """Write clen consensus bases from cstart (cyclic, for tandem units) at pos, mutated.

    Substitutions at rate div, 1-3 bp indels at div / 10; stops at limit. Reverse copies
    write the reverse complement."""
    L = len(cons)
    indel = div * 0.1
    j = 0
    while j < clen and pos < limit:
        state, r = _next(state)
        u = _unit(r)
        if u < indel:              # deletion from the consensus, or insertion of random bases
            size = 1 + _below(r, 3)
            if (r & np.uint64(1)) == 0:
                j += size
            else:
                for _ in range(size):
                    if pos < limit:
                        state, r2 = _next(state)
                        codes[pos] = r2 & np.uint64(3)
                        labels[pos] = label
                        pos += 1
            continue
        k = clen - 1 - j if reverse else j
        base = cons[(cstart + k) % L]
        if reverse:
            base = 3 - base
        if u < indel + div:
            base = (base + 1 + _below(r, 3)) % 4
        codes[pos] = base
        labels[pos] = label
        pos += 1
        j += 1
    return state


@njit(parallel=True, cache=True)
def _write_copies(codes, labels, cons_all, cons_off, fam, pos, cstart, clen, reverse, div, label,
                  chunk_first, seed):
    """Copies sorted by position; chunk c holds copies chunk_first[c]:chunk_first[c+1] and
    writes only inside its own COPY_CHUNK bases, so chunks run in parallel yet in a fixed order."""
    nchunks = len(chunk_first) - 1
    for c in prange(nchunks):
        limit = min(len(codes), (c + 1) * COPY_CHUNK)
        for i in range(chunk_first[c], chunk_first[c + 1]):
            f = fam[i]
            cons = cons_all[cons_off[f]:cons_off[f + 1]]
            _write_copy(codes, labels, limit, pos[i], cons, cstart[i], clen[i], reverse[i],
                        div[i], label[i], _stream(seed, i))


@njit(cache=True)
def _segdups(codes, labels, src, dst, length, reverse, div, seed):
    """Duplicate genome segments in order (serial: sources may hold earlier duplicates)."""
    for i in range(len(src)):
        segment = codes[src[i]:src[i] + length[i]].copy()
        _write_copy(codes, labels, len(codes), dst[i], segment, 0, len(segment), reverse[i],
                    div[i], LBL_SEGDUP, _stream(seed, i))


@njit(cache=True)
def _count_labels(labels, n):
    counts = np.zeros(n, dtype=np.int64)   # np.bincount would first widen labels to int64
    for x in labels:
        counts[x] += 1
    return counts


@njit(parallel=True, cache=True)
def _format_fasta(codes, width, out):
    """Bases as letters, width per line, each line ending in a newline."""
    nlines = (len(codes) + width - 1) // width
    for line in prange(nlines):
        start = line * width
        end = min(len(codes), start + width)
        o = line * (width + 1)
        for i in range(start, end):
            out[o + i - start] = LETTERS[codes[i]]
        out[o + end - start] = 10


# --------------------------------------------------------------------------
# genome plan (cheap, serial, numpy)

def _contig_lengths(size_bp: int, n_contigs: int, rng) -> np.ndarray:
    """Chromosome-like sizes: decreasing, largest about 2.5x the smallest."""
    weights = np.linspace(1.0, 0.4, n_contigs) * rng.uniform(0.9, 1.1, n_contigs)
    lengths = np.floor(weights / weights.sum() * size_bp).astype(np.int64)
    lengths[0] += size_bp - lengths.sum()
    return lengths


def _gc_track(nblocks: int, rng) -> np.ndarray:
    """GC content per 64 kbp block: an AR(1) walk around 41 %, within 30-62 %."""
    noise = rng.normal(0.0, 0.025, nblocks)
    gc = np.empty(nblocks)
    level = 0.41
    for b in range(nblocks):
        level = 0.41 + 0.92 * (level - 0.41) + noise[b]
        gc[b] = min(0.62, max(0.30, level))
    return gc


def _random_seq(n: int, gc: float, rng) -> np.ndarray:
    p = [(1 - gc) / 2, gc / 2, gc / 2, (1 - gc) / 2]
    return rng.choice(4, size=n, p=p).astype(np.uint8)


def _mutate(seq: np.ndarray, rate: float, rng) -> np.ndarray:
    out = seq.copy()
    hit = rng.random(len(seq)) < rate
    out[hit] = (out[hit] + rng.integers(1, 4, hit.sum())) % 4
    return out


class _Plan:
    """Consensus sequences and copies to write; copies as parallel arrays."""

    def __init__(self):
        self.cons: list[np.ndarray] = []
        self.cols = {k: [] for k in ("fam", "pos", "cstart", "clen", "reverse", "div", "label")}

    def family(self, seq: np.ndarray) -> int:
        self.cons.append(seq.astype(np.uint8))
        return len(self.cons) - 1

    def add(self, **cols):
        for key, value in cols.items():
            self.cols[key].append(np.asarray(value))

    def arrays(self):
        cols = {k: np.concatenate(v) if v else np.zeros(0) for k, v in self.cols.items()}
        order = np.argsort(cols["pos"], kind="stable")
        dtypes = {"fam": np.int64, "pos": np.int64, "cstart": np.int64, "clen": np.int64,
                  "reverse": np.bool_, "div": np.float64, "label": np.uint8}
        cols = {k: cols[k][order].astype(dtypes[k]) for k in cols}
        cons_off = np.zeros(len(self.cons) + 1, dtype=np.int64)
        cons_off[1:] = np.cumsum([len(c) for c in self.cons])
        return np.concatenate(self.cons), cons_off, cols


def _plan_interspersed(plan: _Plan, size: int, rng):
    for label, length, nsub, share, kept, gc in FAMILIES:
        root = _random_seq(length, gc, rng)
        if label == "SINE":
            root[-25:] = 0                     # poly-A tail
        subs = [plan.family(_mutate(root, 0.04, rng)) for _ in range(nsub)]
        # kept length: SINE/LTR/DNA mostly full length, LINE mostly 5'-truncated (keep the 3' end)
        n = max(1, int(size * share / (length * kept)))
        if label == "LINE":
            clen = np.minimum(length, rng.exponential(length * kept, n).astype(np.int64) + 100)
        else:
            full = rng.random(n) < 0.7
            clen = np.where(full, length, rng.integers(50, length, n))
        clen = np.maximum(clen, 30)
        cstart = length - clen if label == "LINE" else rng.integers(0, length - clen + 1)
        plan.add(fam=rng.choice(subs, n), pos=rng.integers(0, size, n), cstart=cstart, clen=clen,
                 reverse=rng.random(n) < 0.5, div=0.02 + 0.18 * rng.random(n) ** 1.5,
                 label=np.full(n, LBL[label]))


def _plan_simple(plan: _Plan, size: int, rng):
    units = [plan.family(rng.integers(0, 4, rng.integers(1, 7))) for _ in range(60)]
    units += [plan.family(rng.integers(0, 4, rng.integers(10, 61))) for _ in range(20)]
    n = max(1, int(size * SIMPLE_SHARE / 120))
    fam = rng.choice(units, n)
    plan.add(fam=fam, pos=rng.integers(0, size, n), cstart=np.zeros(n), clen=rng.integers(20, 221, n),
             reverse=rng.random(n) < 0.5, div=0.05 * rng.random(n), label=np.full(n, LBL["simple"]))


def _plan_satellites(plan: _Plan, starts: np.ndarray, lengths: np.ndarray, rng):
    """One satellite array per contig (a 'centromere'): about 1 % of it, at most 200 kbp."""
    unit = plan.family(_random_seq(171, 0.38, rng))
    for start, length in zip(starts, lengths):
        alen = int(min(200_000, max(2_000, 0.01 * length)))
        if alen >= length // 2:
            continue
        pos = start + rng.integers(length // 4, length // 2)
        plan.add(fam=[unit], pos=[pos], cstart=[0], clen=[alen], reverse=[False], div=[0.03],
                 label=[LBL["satellite"]])


def _n_runs(starts: np.ndarray, lengths: np.ndarray, rng) -> list[tuple[int, int]]:
    """(start, length) of N runs: gaps inside contigs and at both ends of each contig."""
    runs = []
    for start, length in zip(starts, lengths):
        cap = max(1, int(length) // 100)
        for at_end in (False, True):
            n = int(min(cap, np.exp(rng.uniform(np.log(100), np.log(10_000)))))
            runs.append((start + length - n if at_end else start, n))
        for _ in range(rng.poisson(length / GAP_EVERY)):
            n = int(min(cap, np.exp(rng.uniform(np.log(100), np.log(50_000)))))
            if length - cap - n > cap:
                runs.append((start + rng.integers(cap, length - cap - n), n))
    return runs


# --------------------------------------------------------------------------
# genome: public API

def default_contigs(size_bp: int) -> int:
    return int(min(24, max(3, size_bp // 25_000_000)))


def make_genome(path: str, size_bp: int, seed: int = 1, n_contigs: int | None = None,
                log=None) -> dict:
    """Write a synthetic genome of size_bp bases as FASTA (contigs chr1, chr2, ...) to path.

    Returns statistics: contig names and lengths, and the share of bases by label."""
    say = log or (lambda msg: None)
    n_contigs = n_contigs or default_contigs(size_bp)
    rng = np.random.default_rng([seed, 7])
    lengths = _contig_lengths(size_bp, n_contigs, rng)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    codes = np.empty(size_bp, dtype=np.uint8)
    labels = np.zeros(size_bp, dtype=np.uint8)
    _background(codes, _gc_track((size_bp + BG_BLOCK - 1) // BG_BLOCK, rng), np.uint64(seed))
    say(f"background {size_bp:,} bp")

    plan = _Plan()
    _plan_interspersed(plan, size_bp, rng)
    _plan_simple(plan, size_bp, rng)
    _plan_satellites(plan, starts, lengths, rng)
    cons, cons_off, c = plan.arrays()
    chunk_first = np.searchsorted(c["pos"], np.arange(0, size_bp + COPY_CHUNK, COPY_CHUNK))
    chunk_first[-1] = len(c["pos"])
    _write_copies(codes, labels, cons, cons_off, c["fam"], c["pos"], c["cstart"], c["clen"],
                  c["reverse"], c["div"], c["label"], chunk_first, np.uint64(seed + 1))
    say(f"{len(c['pos']):,} repeat copies")

    n = max(1, int(size_bp * SEGDUP_SHARE / 30_000)) if size_bp >= 500_000 else 0
    seg_len = rng.integers(10_000, 50_001, n)
    src = rng.integers(0, np.maximum(1, size_bp - seg_len))
    dst = rng.integers(0, np.maximum(1, size_bp - seg_len))
    _segdups(codes, labels, src, dst, seg_len, rng.random(n) < 0.5, rng.uniform(0.01, 0.03, n),
             np.uint64(seed + 2))
    say(f"{n} segmental duplications")

    for start, length in _n_runs(starts, lengths, rng):
        codes[start:start + length] = N_CODE
        labels[start:start + length] = LBL["N"]
    names = [f"chr{i + 1}" for i in range(n_contigs)]
    _write_fasta(path, names, codes, starts, lengths)
    share = _count_labels(labels, len(LABELS)) / size_bp
    stats = {"size_bp": int(size_bp), "seed": seed, "contigs": dict(zip(names, map(int, lengths))),
             "share": {name: round(float(s), 4) for name, s in zip(LABELS, share)}}
    stats["repeat_share"] = round(float(1.0 - share[LBL["unique"]] - share[LBL["N"]]), 4)
    say(f"wrote {path}: repeats {100 * stats['repeat_share']:.1f} %, N {100 * share[LBL['N']]:.2f} %")
    return stats


def _write_fasta(path: str, names, codes, starts, lengths):
    with open(path, "wb") as out:
        for name, start, length in zip(names, starts, lengths):
            seq = codes[start:start + length]
            buf = np.empty(len(seq) + (len(seq) + LINE_WIDTH - 1) // LINE_WIDTH, dtype=np.uint8)
            _format_fasta(seq, LINE_WIDTH, buf)
            out.write(b">%s\n" % name.encode())
            out.write(buf.data)


# --------------------------------------------------------------------------
# FASTA input

_ENCODE = np.full(256, N_CODE, dtype=np.uint8)
for _i, _b in enumerate(b"ACGT"):
    _ENCODE[_b] = _ENCODE[_b + 32] = _i


@njit(parallel=True, cache=True)
def _encode_body(raw, table, out):
    """Write the base codes of a FASTA record body, line breaks dropped, to out; return how
    many. Pieces are counted, then filled, in parallel."""
    pieces = 256
    step = (len(raw) + pieces - 1) // pieces
    kept = np.zeros(pieces + 1, dtype=np.int64)
    for p in prange(pieces):
        for i in range(p * step, min(len(raw), (p + 1) * step)):
            kept[p + 1] += (raw[i] != 10) & (raw[i] != 13)
    kept = np.cumsum(kept)
    for p in prange(pieces):
        n = kept[p]
        for i in range(p * step, min(len(raw), (p + 1) * step)):
            x = raw[i]
            if x != 10 and x != 13:
                out[n] = table[x]
                n += 1
    return kept[-1]


def read_fasta(path: str):
    """(names, codes of all contigs concatenated, contig start offsets, lengths)."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as fh:
        data = fh.read()
    raw = np.frombuffer(data, dtype=np.uint8)
    codes = np.empty(len(data), dtype=np.uint8)     # an upper bound; trimmed below
    names, lengths, at = [], [], data.find(b">")   # '>' only ever starts a header line
    while at >= 0:
        eol = data.find(b"\n", at)
        eol = len(data) if eol < 0 else eol
        nxt = data.find(b">", eol)
        end = len(data) if nxt < 0 else nxt
        names.append((data[at + 1:eol].split() or [b""])[0].decode())
        lengths.append(_encode_body(raw[min(eol + 1, end):end], _ENCODE, codes[sum(lengths):]))
        at = nxt
    if not names:
        raise ValueError(f"{path}: no FASTA records")
    lengths = np.array(lengths, dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    return names, codes[:lengths.sum()], starts, lengths


# --------------------------------------------------------------------------
# read kernels

# Binned qualities (NovaSeq-like): '#' 2, ',' 11, ':' 25, 'F' 37.
QUAL_BINS = np.frombuffer(b"#,:F", dtype=np.uint8)


@njit(inline="always", cache=True)
def _quality(u, frac, error):
    """Quality letter index: good bases mostly 'F' (worse towards the 3' end), errors lower."""
    if error:
        return 3 if u < 0.35 else (2 if u < 0.70 else (1 if u < 0.92 else 0))
    bad = 0.04 + 0.12 * frac * frac
    if u >= bad:
        return 3
    return 2 if u < bad * 0.7 else (1 if u < bad * 0.95 else 0)


@njit(inline="always", cache=True)
def _draw_window(genome, starts, ends, length, indel, read, state):
    """Copy one read (forward) with indels from an N-free window inside one contig.

    Returns (state, contig, start) with contig -1 when the window was unusable."""
    total = len(genome)
    state, r = _next(state)
    start = np.int64(_unit(r) * total)
    c = np.searchsorted(ends, start, side="right")
    end = ends[c]
    p, j = start, 0
    while j < length:
        if EDGE <= j < length - EDGE:
            state, r = _next(state)
            if _unit(r) < indel:
                size = 1 + _below(r, 3)
                if (r & np.uint64(1)) == 0:
                    p += size                       # deletion
                else:
                    size = min(size, length - EDGE - j)
                    for _ in range(size):           # insertion
                        state, r = _next(state)
                        read[j] = r & np.uint64(3)
                        j += 1
                    continue
        if p >= end:
            return state, -1, start
        base = genome[p]
        if base == N_CODE:
            return state, -1, start
        read[j] = base
        j += 1
        p += 1
    for q in range(start, p):                       # deleted bases must not be N either
        if genome[q] == N_CODE:
            return state, -1, start
    return state, c, start - starts[c]


@njit(parallel=True, nogil=True, cache=True)
def _simulate(genome, starts, ends, first, length, seed, sub, indel, seqs, quals, contig, pos, strand):
    """Reads first .. first+n-1 (n = len(pos)); forward-strand origin in contig/pos."""
    for i in prange(len(pos)):
        state = _stream(seed, first + i)
        read = seqs[i]
        c, s = -1, 0
        for _ in range(MAX_TRIES):
            state, c, s = _draw_window(genome, starts, ends, length, indel, read, state)
            if c >= 0:
                break
        contig[i], pos[i] = c, s
        state, r = _next(state)
        minus = (r & np.uint64(1)) == 1
        strand[i] = 1 if minus else 0
        if minus:
            for j in range(length // 2):
                a, b = read[j], read[length - 1 - j]
                read[j], read[length - 1 - j] = 3 - b, 3 - a
            if length % 2:
                read[length // 2] = 3 - read[length // 2]
        for j in range(length):      # one draw a base: low 32 bits error, high 32 quality
            state, r = _next(state)
            error = (r & np.uint64(0xFFFFFFFF)) * INV_2_32 < sub
            if error:
                read[j] = (read[j] + 1 + ((r >> np.uint64(16)) & np.uint64(0xFFFF)) % 3) % 4
            quals[i, j] = QUAL_BINS[_quality((r >> np.uint64(32)) * INV_2_32, j / length, error)]
            read[j] = LETTERS[read[j]]


@njit(inline="always", cache=True)
def _digits(x):
    d = 1
    while x >= 10:
        x //= 10
        d += 1
    return d


@njit(inline="always", cache=True)
def _put_int(out, o, x):
    d = _digits(x)
    for k in range(d - 1, -1, -1):
        out[o + k] = 48 + x % 10
        x //= 10
    return o + d


@njit(cache=True)
def _record_sizes(first, contig, pos, name_len, length):
    sizes = np.empty(len(pos) + 1, dtype=np.int64)
    sizes[0] = 0
    for i in range(len(pos)):
        # @r{i}:{contig}:{pos}:{s}\n seq\n +\n qual\n
        head = 2 + _digits(first + i + 1) + 1 + name_len[contig[i]] + 1 + _digits(pos[i] + 1) + 3
        sizes[i + 1] = head + 2 * length + 4
    return np.cumsum(sizes)


@njit(parallel=True, nogil=True, cache=True)
def _format_fastq(first, seqs, quals, contig, pos, strand, names, name_off, offsets, out):
    length = seqs.shape[1]
    for i in prange(len(pos)):
        o = offsets[i]
        out[o] = 64          # @
        out[o + 1] = 114     # r
        o = _put_int(out, o + 2, first + i + 1)
        out[o] = 58          # :
        o += 1
        for k in range(name_off[contig[i]], name_off[contig[i] + 1]):
            out[o] = names[k]
            o += 1
        out[o] = 58
        o = _put_int(out, o + 1, pos[i] + 1)
        out[o] = 58
        out[o + 1] = 45 if strand[i] else 43   # - or +
        out[o + 2] = 10
        o += 3
        for j in range(length):
            out[o + j] = seqs[i, j]
        o += length
        out[o] = 10
        out[o + 1] = 43
        out[o + 2] = 10
        o += 3
        for j in range(length):
            out[o + j] = quals[i, j]
        out[o + length] = 10


# --------------------------------------------------------------------------
# reads: public API

def open_gzip_writer(path: str, threads: int):
    """isal's threaded gzip writer (level 1) when present, else zlib's at level 1."""
    try:
        from isal import igzip_threaded
        return igzip_threaded.open(path, "wb", compresslevel=1, threads=max(1, threads))
    except ImportError:
        return gzip.open(path, "wb", compresslevel=1)


def simulate_reads(fasta: str, n: int, length: int, seed: int, out_fq_gz: str, sub: float = 0.01,
                   indel: float = 0.001, threads: int | None = None, log=None) -> int:
    """Simulate n reads of the given length from fasta into a gzip FASTQ; returns n."""
    say = log or (lambda msg: None)
    if length < 2 * EDGE + 1:
        raise ValueError(f"read length must be at least {2 * EDGE + 1}")
    threads = threads or os.cpu_count() or 1
    numba.set_num_threads(max(1, min(threads, numba.config.NUMBA_NUM_THREADS)))
    names, genome, starts, lengths = read_fasta(fasta)
    ends = starts + lengths
    name_bytes = [nm.encode() for nm in names]
    name_off = np.concatenate([[0], np.cumsum([len(b) for b in name_bytes])]).astype(np.int64)
    name_arr = np.frombuffer(b"".join(name_bytes), dtype=np.uint8)
    name_len = np.diff(name_off)
    say(f"loaded {fasta}: {len(names)} contigs, {len(genome):,} bp")
    with open_gzip_writer(out_fq_gz, threads) as out:
        for first in range(0, n, READ_BATCH):
            m = min(READ_BATCH, n - first)
            seqs = np.empty((m, length), dtype=np.uint8)
            quals = np.empty((m, length), dtype=np.uint8)
            contig = np.empty(m, dtype=np.int64)
            pos = np.empty(m, dtype=np.int64)
            strand = np.empty(m, dtype=np.uint8)
            _simulate(genome, starts, ends, first, length, np.uint64(seed), sub, indel,
                      seqs, quals, contig, pos, strand)
            if (contig < 0).any():
                raise RuntimeError(f"no N-free window found in {MAX_TRIES} tries; genome too gappy")
            offsets = _record_sizes(first, contig, pos, name_len, length)
            buf = np.empty(offsets[-1], dtype=np.uint8)
            _format_fastq(first, seqs, quals, contig, pos, strand, name_arr, name_off, offsets, buf)
            out.write(buf.data)
            if (first // READ_BATCH) % 8 == 7:
                say(f"{first + m:,} reads")
    say(f"wrote {n:,} reads of {length} bp to {out_fq_gz}")
    return n


# --------------------------------------------------------------------------
# command line

def _logger():
    t0 = time.perf_counter()
    return lambda msg: print(f"[synth {time.strftime('%H:%M:%S')} +{time.perf_counter() - t0:.1f}s] {msg}",
                             file=sys.stderr, flush=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    g = sub.add_parser("genome", help="write a synthetic genome FASTA")
    g.add_argument("output")
    g.add_argument("--mbp", type=float, required=True, help="genome size in Mbp")
    g.add_argument("--contigs", type=int, help="number of contigs [size/25 Mbp, 3..24]")
    g.add_argument("--seed", type=int, default=1)
    r = sub.add_parser("reads", help="simulate reads into a gzip FASTQ")
    r.add_argument("reference")
    r.add_argument("-n", "--num-reads", type=int, required=True)
    r.add_argument("-l", "--length", type=int, default=100)
    r.add_argument("--sub", type=float, default=0.01)
    r.add_argument("--indel", type=float, default=0.001)
    r.add_argument("--seed", type=int, default=1)
    r.add_argument("-t", "--threads", type=int, default=os.cpu_count())
    r.add_argument("-o", "--output", required=True)
    args = parser.parse_args(argv)
    log = _logger()
    if args.command == "genome":
        stats = make_genome(args.output, int(round(args.mbp * 1e6)), args.seed, args.contigs, log=log)
        print(stats["share"], file=sys.stderr)
    else:
        simulate_reads(args.reference, args.num_reads, args.length, args.seed, args.output,
                       args.sub, args.indel, args.threads, log=log)
    return 0


if __name__ == "__main__":
    sys.exit(main())
