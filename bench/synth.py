#!/usr/bin/env python3
"""Fast synthetic genomes with mammal-like repeats (numba); reads come from simulate.py.

    python bench/synth.py genome OUT.fa --mbp 5 [--contigs N] [--seed 1]

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

Every random draw of the parallel kernels comes from a counter-based generator (streams.py)
keyed by (seed, item): a genome chunk or a repeat copy; the plan of the repeats is drawn
serially. Output therefore depends on the seed and size only, never on the number of threads.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from numba import njit, prange

HERE = str(Path(__file__).resolve().parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from streams import below, next_draw, stream, unit  # noqa: E402

N_CODE = 4
LETTERS = np.frombuffer(b"ACGTN", dtype=np.uint8)
BG_BLOCK = 1 << 16       # background GC step, and the unit of its random streams
COPY_CHUNK = 1 << 20     # repeat copies are written chunk by chunk in parallel
LINE_WIDTH = 60

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
# genome kernels

_BG_ORDER = np.array([1, 2, 0, 3], dtype=np.uint8)   # C, G, A, T by threshold rank


@njit(parallel=True, cache=True)
def _background(codes, gc, seed):
    """Random bases, block b with GC content gc[b]; 4 bases per draw, branch-free (random
    branches would mispredict on every base)."""
    nblocks = (len(codes) + BG_BLOCK - 1) // BG_BLOCK
    for b in prange(nblocks):
        state = stream(seed, b)
        t1 = np.uint64(gc[b] * 32768.0)                # C below t1, G below t2, A below t3
        t2 = np.uint64(gc[b] * 65536.0)
        t3 = np.uint64(32768.0 + gc[b] * 32768.0)
        end = min(len(codes), (b + 1) * BG_BLOCK)
        for i in range(b * BG_BLOCK, end, 4):
            state, r = next_draw(state)
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
        state, r = next_draw(state)
        u = unit(r)
        if u < indel:              # deletion from the consensus, or insertion of random bases
            size = 1 + below(r, 3)
            if (r & np.uint64(1)) == 0:
                j += size
            else:
                for _ in range(size):
                    if pos < limit:
                        state, r2 = next_draw(state)
                        codes[pos] = r2 & np.uint64(3)
                        labels[pos] = label
                        pos += 1
            continue
        k = clen - 1 - j if reverse else j
        base = cons[(cstart + k) % L]
        if reverse:
            base = 3 - base
        if u < indel + div:
            base = (base + 1 + below(r, 3)) % 4
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
                        div[i], label[i], stream(seed, i))


@njit(cache=True)
def _segdups(codes, labels, src, dst, length, reverse, div, seed):
    """Duplicate genome segments in order (serial: sources may hold earlier duplicates)."""
    for i in range(len(src)):
        segment = codes[src[i]:src[i] + length[i]].copy()
        _write_copy(codes, labels, len(codes), dst[i], segment, 0, len(segment), reverse[i],
                    div[i], LBL_SEGDUP, stream(seed, i))


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
    args = parser.parse_args(argv)
    stats = make_genome(args.output, int(round(args.mbp * 1e6)), args.seed, args.contigs, log=_logger())
    print(stats["share"], file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
