#!/usr/bin/env python3
"""Deterministic short-read simulator (numba), single-end or paired (FR), for the benchmarks.

    python bench/simulate.py REF.fa[.gz] -n N -l LEN [--sub 0.01] [--indel 0.001] [--snp 0.001] \\
        [--fraction-n 0.0] [--seed 1] [-t THREADS] -o OUT.fq.gz
    python bench/simulate.py REF.fa[.gz] -n PAIRS -l 150 [...] [--insert-mean 400] [--insert-sd 40] \\
        -o OUT_R1.fq.gz OUT_R2.fq.gz

Library: ``simulate(reference, outputs, n, length, seed, sub=, indel=, snp=, fraction_n=, ...)``
(end_to_end.py, scaling.py, multi_gpu.py, paired.py); ``read_fasta``, the name formats and their
parsers (accuracy.py and its tests).

1. The reference FASTA (plain or gzip) is read; bases other than A/C/G/T (any case) become N.
2. SNPs at rate ``--snp`` make one "sample genome" shared by all reads.
3. Single-end: a read's origin is uniform over the genome; windows that touch an N or cross a
   contig end are redrawn. The read is copied with indels of 1-3 bases at ``--indel`` per read
   base (none within ``EDGE`` bases of either end, so the leftmost aligned position is well
   defined; deleted bases must not be N either), then taken from either strand with equal odds.
   Pairs: a fragment of ``max(LEN, round(Normal(--insert-mean, --insert-sd)))`` bases, redrawn
   while it (or a mate's span) touches an N or a contig end; one mate is read from its left end
   forward, the other from its right end backward (reverse complement), each with indels as
   above; with equal odds R1 is the forward mate (FR pairs either way).
4. Sequencing: substitutions at ``--sub``, then N bases at ``--fraction-n``; binned
   Illumina-like qualities ('F' mostly, ':', ',', '#'; lower on substituted bases and towards
   the 3' end; '#' on N).

Names: single-end ``r{num}:{contig}:{pos}:{strand}``, ``num`` from 1, ``pos`` the 1-based
leftmost reference position of the read's span on the forward strand, ``strand`` ``+`` or
``-``; pairs ``p{num}:{contig}:{pos1}:{strand1}:{pos2}:{strand2}`` on both mates (mate 1's, then
mate 2's). Contig names may contain ':': parse with ``parse_read_name`` / ``parse_pair_name``.

Every random draw of a read or pair comes from a counter-based stream keyed by (seed, number)
(streams.py; pairs and single reads from separate streams); SNPs from a numpy generator seeded
with the seed. The FASTQ therefore depends on the inputs and options only, never on the thread
count, and the gzip bytes are the same on every run with the same options (header time 0).
"""
from __future__ import annotations

import argparse
import gzip
import os
import sys
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import numba
import numpy as np
from numba import njit, prange

HERE = str(Path(__file__).resolve().parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)
if __name__ not in ("__main__", "simulate"):
    # Loaded from its path under another name (tests/test_accuracy_script.py: "bench_simulate").
    # numba's cache records each kernel's module name and imports that module when another
    # process loads the kernel: define everything under the importable name "simulate".
    sys.modules.setdefault("simulate", sys.modules[__name__])
    __name__ = "simulate"

from streams import INV_2_32, below, next_draw, stream, unit  # noqa: E402

# Base codes: 0..3 = A, C, G, T; 4 = N.
N_CODE = 4
LETTERS = np.frombuffer(b"ACGTN", dtype=np.uint8)
COMPLEMENT = np.array([3, 2, 1, 0, 4], dtype=np.uint8)
EDGE = 5                 # no indel within this many bases of a read end
MAX_TRIES = 10_000       # redraws of a window or fragment before giving up
READ_BATCH = 1 << 19     # reads simulated and formatted per batch (bounds memory; output is the same)
SNP_KEY = 0x534E50       # SNPs draw from numpy's generator seeded with (seed, SNP_KEY)
PAIR_STREAMS = 1 << 62   # pair i draws from stream PAIR_STREAMS + i, apart from read i's
# Binned qualities (NovaSeq-like): '#' 2, ',' 11, ':' 25, 'F' 37.
QUAL_BINS = np.frombuffer(b"#,:F", dtype=np.uint8)


def _encoding_table() -> np.ndarray:
    table = np.full(256, N_CODE, dtype=np.uint8)
    for code, base in enumerate(b"ACGT"):
        table[base] = code
        table[base + 32] = code  # lower case
    return table


ENCODE = _encoding_table()


# --------------------------------------------------------------------------
# reference

@dataclass
class Contig:
    name: str
    seq: np.ndarray  # uint8 base codes


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


def load_fasta(path) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    """(names cut at the first whitespace, codes of all contigs concatenated, contig start
    offsets, lengths)."""
    path = str(path)
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
        lengths.append(_encode_body(raw[min(eol + 1, end):end], ENCODE, codes[sum(lengths):]))
        at = nxt
    if not names:
        raise ValueError(f"{path}: no FASTA records")
    lengths = np.array(lengths, dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    return names, codes[:lengths.sum()], starts, lengths


def read_fasta(path) -> list[Contig]:
    """The contigs of a FASTA file (plain or gzip), names cut at the first whitespace."""
    names, codes, starts, lengths = load_fasta(path)
    return [Contig(name, codes[s:s + n]) for name, s, n in zip(names, starts, lengths)]


def apply_snps(codes: np.ndarray, rate: float, seed: int) -> np.ndarray:
    """The sample genome: a copy of codes with a random other base at rate ``rate`` (N kept)."""
    if rate <= 0:
        return codes
    rng = np.random.default_rng([seed, SNP_KEY])
    out = codes.copy()
    at = np.unique(rng.integers(0, len(out), size=rng.binomial(len(out), rate)))
    at = at[out[at] != N_CODE]
    out[at] = (out[at] + rng.integers(1, 4, size=len(at), dtype=np.uint8)) % 4
    return out


# --------------------------------------------------------------------------
# names

def format_name(num: int, contig: str, pos: int, strand: str) -> str:
    return f"r{num}:{contig}:{pos}:{strand}"


def parse_read_name(name: str) -> tuple[int, str, int, str]:
    """Inverse of ``format_name``: (number, contig, 1-based pos, strand)."""
    head, pos, strand = name.rsplit(":", 2)
    number, contig = head.split(":", 1)
    if not number.startswith("r") or strand not in "+-" or len(strand) != 1:
        raise ValueError(f"not a simulated read name: {name!r}")
    return int(number[1:]), contig, int(pos), strand


def format_pair_name(num: int, contig: str, mate1: tuple[int, str], mate2: tuple[int, str]) -> str:
    """Name of both mates of pair ``num``; each mate is (1-based leftmost pos, strand)."""
    return f"p{num}:{contig}:{mate1[0]}:{mate1[1]}:{mate2[0]}:{mate2[1]}"


def parse_pair_name(name: str) -> tuple[int, str, tuple[int, str], tuple[int, str]]:
    """Inverse of ``format_pair_name``: (number, contig, (pos1, strand1), (pos2, strand2))."""
    head, pos1, strand1, pos2, strand2 = name.rsplit(":", 4)
    number, contig = head.split(":", 1)
    if number[:1] != "p" or not number[1:].isdigit() or {strand1, strand2} - {"+", "-"}:
        raise ValueError(f"not a simulated pair name: {name!r}")
    return int(number[1:]), contig, (int(pos1), strand1), (int(pos2), strand2)


# --------------------------------------------------------------------------
# read kernels

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
def _copy(genome, p, step, lo, hi, length, indel, read, state):
    """Copy ``length`` read bases with indels from genome position p, walking forward (step 1)
    or backward (step -1, complemented: the reverse strand's read) within [lo, hi).

    Returns (state, span): span the reference bases covered, -1 when the copy left [lo, hi) or
    covered an N (deleted bases included)."""
    origin = p
    j = 0
    while j < length:
        if EDGE <= j < length - EDGE:
            state, r = next_draw(state)
            if unit(r) < indel:
                size = 1 + below(r, 3)
                if (r & np.uint64(1)) == 0:
                    p += step * size                # deletion
                else:
                    size = min(size, length - EDGE - j)
                    for _ in range(size):           # insertion
                        state, r = next_draw(state)
                        read[j] = r & np.uint64(3)
                        j += 1
                    continue
        if p >= hi or p < lo:
            return state, -1
        base = genome[p]
        if base == N_CODE:
            return state, -1
        read[j] = base if step > 0 else 3 - base
        j += 1
        p += step
    span = (p - origin) * step
    first = origin if step > 0 else p + 1
    for q in range(first, first + span):           # deleted bases must not be N either
        if genome[q] == N_CODE:
            return state, -1
    return state, span


@njit(inline="always", cache=True)
def _sequence(read, quals, sub, n_rate, state):
    """Sequencing errors and qualities of one read (codes, read orientation) in place; the read
    ends up as letters. One draw a base (low 32 bits error, high 32 quality), and a second one
    for N only where n_rate > 0."""
    length = len(read)
    for j in range(length):
        state, r = next_draw(state)
        error = (r & np.uint64(0xFFFFFFFF)) * INV_2_32 < sub
        if error:
            read[j] = (read[j] + 1 + ((r >> np.uint64(16)) & np.uint64(0xFFFF)) % 3) % 4
        q = QUAL_BINS[_quality((r >> np.uint64(32)) * INV_2_32, j / length, error)]
        if n_rate > 0.0:
            state, r = next_draw(state)
            if unit(r) < n_rate:
                read[j] = N_CODE
                q = QUAL_BINS[0]
        quals[j] = q
        read[j] = LETTERS[read[j]]
    return state


@njit(inline="always", cache=True)
def _draw_window(genome, starts, ends, length, indel, read, state):
    """Copy one read (forward) with indels from an N-free window inside one contig.

    Returns (state, contig, start) with contig -1 when the window was unusable."""
    state, r = next_draw(state)
    start = np.int64(unit(r) * len(genome))
    c = np.searchsorted(ends, start, side="right")
    state, span = _copy(genome, start, 1, starts[c], ends[c], length, indel, read, state)
    if span < 0:
        return state, -1, start
    return state, c, start - starts[c]


@njit(parallel=True, nogil=True, cache=True)
def _simulate(genome, starts, ends, first, length, seed, sub, indel, n_rate, seqs, quals, contig, pos, strand):
    """Reads first .. first+n-1 (n = len(pos)); forward-strand origin in contig/pos."""
    for i in prange(len(pos)):
        state = stream(seed, first + i)
        read = seqs[i]
        c, s = -1, 0
        for _ in range(MAX_TRIES):
            state, c, s = _draw_window(genome, starts, ends, length, indel, read, state)
            if c >= 0:
                break
        contig[i], pos[i] = c, s
        state, r = next_draw(state)
        minus = (r & np.uint64(1)) == 1
        strand[i] = 1 if minus else 0
        if minus:
            for j in range(length // 2):
                a, b = read[j], read[length - 1 - j]
                read[j], read[length - 1 - j] = 3 - b, 3 - a
            if length % 2:
                read[length // 2] = 3 - read[length // 2]
        _sequence(read, quals[i], sub, n_rate, state)


@njit(inline="always", cache=True)
def _draw_pair(genome, starts, ends, length, indel, mean, sd, left, right, state):
    """Copy both ends of one fragment: left (forward strand) and right (reverse strand).

    Returns (state, contig, left mate's leftmost, right mate's leftmost), contig -1 when the
    fragment or a mate's span was unusable."""
    state, r = next_draw(state)
    start = np.int64(unit(r) * len(genome))
    state, r1 = next_draw(state)
    state, r2 = next_draw(state)
    z = np.sqrt(-2.0 * np.log(1.0 - unit(r1))) * np.cos(2.0 * np.pi * unit(r2))
    size = max(length, np.int64(np.floor(mean + sd * z + 0.5)))
    c = np.searchsorted(ends, start, side="right")
    lo, hi = starts[c], ends[c]
    end = start + size
    if end > hi:
        return state, -1, 0, 0
    state, span = _copy(genome, start, 1, lo, hi, length, indel, left, state)
    if span < 0:
        return state, -1, 0, 0
    state, span = _copy(genome, end - 1, -1, lo, hi, length, indel, right, state)
    if span < 0:
        return state, -1, 0, 0
    for q in range(start, end):                    # the insert between the mates too
        if genome[q] == N_CODE:
            return state, -1, 0, 0
    return state, c, start - lo, end - span - lo


@njit(parallel=True, nogil=True, cache=True)
def _simulate_pairs(genome, starts, ends, first, length, seed, sub, indel, n_rate, mean, sd,
                    seqs1, quals1, seqs2, quals2, contig, pos1, strand1, pos2, strand2):
    """Pairs first .. first+n-1 (n = len(pos1)); mates' forward-strand origins in pos1/pos2."""
    for i in prange(len(pos1)):
        state = stream(seed, PAIR_STREAMS + first + i)
        read1, read2 = seqs1[i], seqs2[i]
        c, left, right = -1, 0, 0
        for _ in range(MAX_TRIES):
            state, c, left, right = _draw_pair(genome, starts, ends, length, indel, mean, sd, read1, read2, state)
            if c >= 0:
                break
        contig[i] = c
        state, r = next_draw(state)
        if (r & np.uint64(1)) == 0:                 # R1 forward
            pos1[i], strand1[i], pos2[i], strand2[i] = left, 0, right, 1
        else:                                       # R1 reverse: swap the mates
            pos1[i], strand1[i], pos2[i], strand2[i] = right, 1, left, 0
            for j in range(length):
                read1[j], read2[j] = read2[j], read1[j]
        state = _sequence(read1, quals1[i], sub, n_rate, state)
        _sequence(read2, quals2[i], sub, n_rate, state)


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
def _record_sizes(first, contig, pos, pos2, paired, name_len, length):
    """Cumulative byte offsets of the FASTQ records."""
    sizes = np.empty(len(pos) + 1, dtype=np.int64)
    sizes[0] = 0
    for i in range(len(pos)):
        # @r{i}:{contig}:{pos}:{s}\n, or @p{i}:{contig}:{pos1}:{s1}:{pos2}:{s2}\n; seq\n +\n qual\n
        head = 2 + _digits(first + i + 1) + 1 + name_len[contig[i]] + 1 + _digits(pos[i] + 1) + 3
        if paired:
            head += 1 + _digits(pos2[i] + 1) + 2
        sizes[i + 1] = head + 2 * length + 4
    return np.cumsum(sizes)


@njit(parallel=True, nogil=True, cache=True)
def _format_fastq(first, seqs, quals, contig, pos, strand, pos2, strand2, paired, names, name_off, offsets, out):
    length = seqs.shape[1]
    for i in prange(len(pos)):
        o = offsets[i]
        out[o] = 64                                # @
        out[o + 1] = 112 if paired else 114        # p or r
        o = _put_int(out, o + 2, first + i + 1)
        out[o] = 58                                # :
        o += 1
        for k in range(name_off[contig[i]], name_off[contig[i] + 1]):
            out[o] = names[k]
            o += 1
        out[o] = 58
        o = _put_int(out, o + 1, pos[i] + 1)
        out[o] = 58
        out[o + 1] = 45 if strand[i] else 43       # - or +
        o += 2
        if paired:
            out[o] = 58
            o = _put_int(out, o + 1, pos2[i] + 1)
            out[o] = 58
            out[o + 1] = 45 if strand2[i] else 43
            o += 2
        out[o] = 10
        o += 1
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
# public API

def open_gzip_writer(path, threads: int):
    """isal's threaded gzip writer (level 1) when present, else zlib's at level 1; header time 0."""
    try:
        from isal import igzip_threaded
        return igzip_threaded.open(str(path), "wb", compresslevel=1, threads=max(1, threads))
    except ImportError:
        return gzip.GzipFile(str(path), "wb", compresslevel=1, mtime=0)


def _check(n: int, length: int, rates: dict, insert_sd: float) -> None:
    if n < 0 or length < 2 * EDGE + 1:
        raise ValueError(f"need n >= 0 and length >= {2 * EDGE + 1}, not n={n}, length={length}")
    for name, rate in rates.items():
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"{name} must be within [0, 1], not {rate}")
    if insert_sd < 0:
        raise ValueError(f"the insert size sd must be >= 0, not {insert_sd}")


def simulate(reference, outputs, n: int, length: int, seed: int = 1, *, sub: float = 0.01,
             indel: float = 0.001, snp: float = 0.001, fraction_n: float = 0.0, insert_mean: float = 400.0,
             insert_sd: float = 40.0, threads: int | None = None, log=None) -> int:
    """Write n reads (one output path) or n pairs (two: R1, R2) as gzip FASTQ; return n."""
    say = log or (lambda msg: None)
    outputs = [outputs] if isinstance(outputs, (str, Path)) else list(outputs)
    if len(outputs) not in (1, 2) or len(set(map(str, outputs))) != len(outputs):
        raise ValueError(f"outputs: one path, or two different paths for pairs, not {outputs}")
    _check(n, length, {"sub": sub, "indel": indel, "snp": snp, "fraction_n": fraction_n}, insert_sd)
    paired = len(outputs) == 2
    threads = threads or os.cpu_count() or 1
    numba.set_num_threads(max(1, min(threads, numba.config.NUMBA_NUM_THREADS)))
    names, genome, starts, lengths = load_fasta(reference)
    genome = apply_snps(genome, snp, seed)
    ends = starts + lengths
    name_bytes = [nm.encode() for nm in names]
    name_off = np.concatenate([[0], np.cumsum([len(b) for b in name_bytes])]).astype(np.int64)
    name_arr = np.frombuffer(b"".join(name_bytes), dtype=np.uint8)
    name_len = np.diff(name_off)
    say(f"loaded {reference}: {len(names)} contigs, {len(genome):,} bp")
    batch = READ_BATCH // 2 if paired else READ_BATCH
    what = "pairs" if paired else "reads"
    with ExitStack() as stack:
        outs = [stack.enter_context(open_gzip_writer(path, threads)) for path in outputs]
        for first in range(0, n, batch):
            m = min(batch, n - first)
            contig = np.empty(m, dtype=np.int64)
            pos, pos2 = np.empty(m, dtype=np.int64), np.empty(m, dtype=np.int64)
            strand, strand2 = np.empty(m, dtype=np.uint8), np.empty(m, dtype=np.uint8)
            mates = [(np.empty((m, length), dtype=np.uint8), np.empty((m, length), dtype=np.uint8))
                     for _ in outputs]
            if paired:
                _simulate_pairs(genome, starts, ends, first, length, np.uint64(seed), sub, indel, fraction_n,
                                float(insert_mean), float(insert_sd), *mates[0], *mates[1],
                                contig, pos, strand, pos2, strand2)
            else:
                _simulate(genome, starts, ends, first, length, np.uint64(seed), sub, indel, fraction_n,
                          *mates[0], contig, pos, strand)
            if (contig < 0).any():
                raise RuntimeError(f"no N-free {'fragment' if paired else 'window'} found in {MAX_TRIES} "
                                   f"tries; genome too gappy or contigs too short")
            offsets = _record_sizes(first, contig, pos, pos2, paired, name_len, length)
            for out, (seqs, quals) in zip(outs, mates):
                buf = np.empty(offsets[-1], dtype=np.uint8)
                _format_fastq(first, seqs, quals, contig, pos, strand, pos2, strand2, paired,
                              name_arr, name_off, offsets, buf)
                out.write(buf.data)
            if (first // batch) % 8 == 7:
                say(f"{first + m:,} {what}")
    say(f"wrote {n:,} {what} of {length} bp to {' and '.join(map(str, outputs))}")
    return n


# --------------------------------------------------------------------------
# command line

def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("reference", help="reference FASTA (.fa or .fa.gz)")
    parser.add_argument("-n", "--num-reads", type=int, required=True, help="reads, or pairs when paired")
    parser.add_argument("-l", "--length", type=int, default=100)
    parser.add_argument("--sub", type=float, default=0.01, help="sequencing substitution rate")
    parser.add_argument("--indel", type=float, default=0.001, help="indel rate per read base")
    parser.add_argument("--snp", type=float, default=0.001, help="SNP rate of the sample genome")
    parser.add_argument("--fraction-n", type=float, default=0.0, help="rate of N read bases")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("-t", "--threads", type=int, default=os.cpu_count(),
                        help="threads (the output does not depend on them) [all cores]")
    parser.add_argument("-o", "--output", required=True, nargs="+", metavar="FQ_GZ",
                        help="output FASTQ (gzip); two paths (R1 R2) simulate pairs")
    parser.add_argument("--insert-mean", type=float, default=400.0,
                        help="mean fragment length of pairs [400]")
    parser.add_argument("--insert-sd", type=float, default=40.0,
                        help="standard deviation of the fragment length [40]")
    args = parser.parse_args(argv)
    if len(args.output) > 2 or len(set(args.output)) != len(args.output):
        parser.error("-o takes one path, or two different paths for pairs")
    try:
        _check(args.num_reads, args.length, {f"--{r.replace('_', '-')}": getattr(args, r)
                                             for r in ("sub", "indel", "snp", "fraction_n")}, args.insert_sd)
    except ValueError as exc:
        parser.error(str(exc))
    return args


def _logger():
    t0 = time.perf_counter()
    return lambda msg: print(f"[simulate {time.strftime('%H:%M:%S')} +{time.perf_counter() - t0:.1f}s] {msg}",
                             file=sys.stderr, flush=True)


def main(argv=None) -> int:
    args = parse_args(argv)
    simulate(args.reference, args.output, args.num_reads, args.length, args.seed, sub=args.sub, indel=args.indel,
             snp=args.snp, fraction_n=args.fraction_n, insert_mean=args.insert_mean, insert_sd=args.insert_sd,
             threads=args.threads, log=_logger())
    return 0


if __name__ == "__main__":
    sys.exit(main())
