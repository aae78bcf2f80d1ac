"""Orchestration: batches of reads through exact match, seeding, banded extension and traceback
on the chosen backend, then placement choice, MAPQ and BAM records on the host.

The host-side choice (`choose`) is one function for both backends, and every kernel works on one
read or pair at a time, so neither the backend nor the batch size can change a result.
"""

from .jitcache import ensure_compiled, use_versioned_cache

use_versioned_cache()  # before any @njit / @cuda.jit below

import contextlib
import dataclasses
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pysam
from numba import njit, prange

from .bamio import encode_batch, record_fields
from .bamout import SortedBam, UnsortedBam
from . import cram
from .core import NEG, STRAND_BIT
from .errors import InputError
from . import pairing
from .params import MapParams
from .output import scratch_dir
from .placement import all_loci, locus_scores, mapq_of
from .reads import Reads, subset
from .tags import append_tags, comment_fields, comment_tags
from .sam import full_cigar, make_header, mapped_record, md_nm, ref_span, set_mate_fields, unmapped_record
from .threads import ordered_map


def get_backend(name: str, log=None):
    """The backend module for 'cpu', 'cuda' or 'auto' (cuda when a GPU is usable)."""
    from . import cpu
    if name == "cpu":
        return cpu
    from numba import config as nbconfig, cuda as nbcuda
    # the CUDA simulator counts as available; auto must never pick it (tests ask for it by name)
    available = nbcuda.is_available() and (name == "cuda" or not nbconfig.ENABLE_CUDASIM)
    if name == "cuda":
        if not available:
            raise InputError("backend cuda: no usable CUDA GPU found (use --backend auto or cpu)")
        from . import cuda
        return cuda
    if name != "auto":
        raise InputError(f"backend {name!r}: must be auto, cuda or cpu")
    if available:
        from . import cuda
        return cuda
    if log:
        log("backend auto: no CUDA GPU available, falling back to the CPU backend")
    return cpu


# numba's parallel loops must not be entered from two threads at once (the workqueue layer
# aborts); mapping threads take turns at them while the other thread's batch is on the GPU.
HOST_PARALLEL = threading.Lock()


@njit(cache=True, parallel=True, nogil=True)
def choose(lengths, name_hash, pair_start, pair_key, ext, incomplete, t, match, mismatch, clip_penalty, min_score,
           out_key, out_local, out_as, out_xs, out_mapq):
    """Pick each read's primary placement from its extended candidates.

    Per pair, end-to-end is kept unless local alignment beats it by more than the clipping
    penalty of each clipped end (as bwa decides). Pairs ending at the same place on the same strand
    (within t) are one locus. Equal best loci are broken by the read-name hash, and get MAPQ 0.
    So do reads whose candidate search was incomplete (a locus as well supported as the best was
    left out, as in repeats): a better placement may exist unseen. out_key = -1: unmapped.
    """
    n = lengths.shape[0]
    widest = 1
    for r in range(n):
        widest = max(widest, pair_start[r + 1] - pair_start[r])
    nchunks = min(n, 1024)
    for c in prange(nchunks):   # scratch allocated once per chunk of reads, not per read
        eff = np.empty(widest, dtype=np.int64)
        raw = np.empty(widest, dtype=np.int64)
        loc = np.empty(widest, dtype=np.int64)
        end = np.empty(widest, dtype=np.int64)
        span = np.empty(widest, dtype=np.int64)
        keep = np.empty(widest, dtype=np.bool_)
        ties = np.empty(widest, dtype=np.int64)
        for r in range(c * n // nchunks, (c + 1) * n // nchunks):
            choose_one(r, lengths, name_hash, pair_start, pair_key, ext, incomplete, t, match, mismatch,
                       clip_penalty, min_score, out_key, out_local, out_as, out_xs, out_mapq,
                       eff, raw, loc, end, span, keep, ties)


@njit(cache=True)
def choose_one(r, lengths, name_hash, pair_start, pair_key, ext, incomplete, t, match, mismatch, clip_penalty,
               min_score, out_key, out_local, out_as, out_xs, out_mapq, eff, raw, loc, end, span, keep, ties):
    """choose() for read r, with scratch arrays at least as long as its candidate list."""
    a = pair_start[r]
    b = pair_start[r + 1]
    n = lengths[r]
    out_key[r] = -1
    if b == a:
        return
    locus_scores(a, b, n, pair_key, ext, t, clip_penalty, eff, raw, loc, end, span, keep, 0)
    best = NEG
    for y in range(b - a):
        if keep[y] and eff[y] > best:
            best = eff[y]
    if best < min_score:
        return
    nties = 0
    for y in range(b - a):
        if keep[y] and eff[y] == best:
            nties += 1
    c = 0
    for y in range(b - a):
        if keep[y] and eff[y] == best:
            ties[c] = y
            c += 1
    # order ties by key so the pick does not depend on candidate order
    for u in range(1, nties):
        v = u
        while v > 0 and pair_key[a + ties[v - 1]] > pair_key[a + ties[v]]:
            ties[v - 1], ties[v] = ties[v], ties[v - 1]
            v -= 1
    chosen = ties[name_hash[r] % nties]
    second = NEG
    for y in range(b - a):
        if keep[y] and y != chosen and eff[y] > second:
            second = eff[y]
    out_key[r] = pair_key[a + chosen]
    out_local[r] = loc[chosen]
    out_as[r] = raw[chosen]
    out_xs[r] = second if second >= min_score else -1
    out_mapq[r] = 0 if incomplete[r] else mapq_of(best, second, nties, raw[chosen], span[chosen],
                                                   match, mismatch, min_score)


@dataclass
class BatchResult:
    key: np.ndarray       # primary candidate key per read, -1 unmapped
    local: np.ndarray
    score: np.ndarray
    sub: np.ndarray
    mapq: np.ndarray
    ops: np.ndarray       # CIGAR of mapped reads, rows follow `mapped`
    lens: np.ndarray
    trace: np.ndarray     # score, first aligned base, reference start, end row, end column, nops
    mapped: np.ndarray    # indices of mapped reads in the batch
    proper: np.ndarray | None = None   # paired batches: 1 where the read is part of a proper pair
    inserts: np.ndarray | None = None  # paired batches: pairing.insert_estimates of each block


class StageTimes:
    """Wall seconds spent in each named stage, summed over batches (for the log's final lines)."""

    def __init__(self):
        self.seconds = {}
        self.lock = threading.Lock()

    @contextlib.contextmanager
    def __call__(self, stage: str):
        start = time.perf_counter()
        try:
            yield
        finally:
            with self.lock:
                self.seconds[stage] = self.seconds.get(stage, 0.0) + time.perf_counter() - start

    def summary(self) -> str:
        return ", ".join(f"{stage} {sec:.2f} s" for stage, sec in self.seconds.items())


def map_batch(batch: Reads, genome, index, p: MapParams, backend, times: StageTimes | None = None) -> BatchResult:
    times = times or StageTimes()
    counts, ekeys, _, pair_key, pair_start, incomplete, ext = extended_candidates(batch, genome, index, p, backend,
                                                                                 times, multi_exact=False)
    key, local, score, sub, mapq = single_end_choice(batch, pair_start, pair_key, ext, incomplete, p, times)
    with times("choice"):
        place_multi_exact(counts, ekeys, batch.name_hash, batch.lengths, p.max_exact, p.match, key, local, score,
                          sub, mapq)
    return traced(batch, genome, p, backend, times, key, local, score, sub, mapq)


def map_pair_batch(batch: Reads, genome, index, p: MapParams, backend, times: StageTimes | None = None) -> BatchResult:
    """map_batch for interleaved mates (read 2i is R1 of fragment i, 2i+1 its R2): every read's
    loci as map_batch finds them, the insert-size estimate of each block, mate rescue on the backend,
    then both mates' placements chosen together (pairing.py)."""
    times = times or StageTimes()
    n = len(batch)
    lengths = batch.lengths
    counts, ekeys, pair_read, pair_key, pair_start, incomplete, ext = extended_candidates(
        batch, genome, index, p, backend, times, multi_exact=True)
    incomplete |= counts > p.max_exact   # exact copies beyond those stored were not seen
    key, local, score, sub, mapq = single_end_choice(batch, pair_start, pair_key, ext, incomplete, p, times)
    with times("pairing"):
        starts = pairing.block_starts(n // 2, pairing.INSERT_BLOCK)
        block = pairing.block_of_fragments(starts, n // 2)
        inserts = pairing.insert_estimates(key, mapq, incomplete, lengths, genome.offsets, starts,
                                           pairing.MIN_FRAGMENTS)
        eff, raw, loc, span, keep = all_loci(pair_start, pair_key, ext, lengths, p.max_indels, p.clip_penalty)
        tasks = pairing.rescue_tasks(pair_start, pair_key, eff, keep, lengths, block, inserts, genome.offsets,
                                     genome.ends, p.max_indels, p.min_score, p.unpaired_penalty)
    if len(tasks[0]):
        with times("mate rescue"):
            found = backend.rescue_stage(batch, genome, *tasks, p)
            new_key = pairing.rescued_keys(tasks[1], tasks[2], found, p.min_score)
            new_read = tasks[0][new_key >= 0]
            new_key = new_key[new_key >= 0]
        if len(new_key):
            with times("extension"):
                new_ext = backend.extend_stage(batch, genome, new_read, new_key, p)
            pair_read, pair_key, pair_start, ext = merge_candidates(n, pair_read, pair_key, ext, new_read, new_key,
                                                                    new_ext)
            key, local, score, sub, mapq = single_end_choice(batch, pair_start, pair_key, ext, incomplete, p, times)
            eff, raw, loc, span, keep = all_loci(pair_start, pair_key, ext, lengths, p.max_indels, p.clip_penalty)
    proper = np.zeros(n, dtype=np.int64)
    with times("pairing"), HOST_PARALLEL:
        pairing.choose_fragments(pair_start, pair_key, eff, raw, loc, span, keep, lengths, batch.name_hash, incomplete,
                                 block, inserts, genome.offsets, p.match, p.mismatch, p.min_score, p.unpaired_penalty,
                                 key, local, score, sub, mapq, proper)
    return traced(batch, genome, p, backend, times, key, local, score, sub, mapq, proper, inserts)


def extended_candidates(batch, genome, index, p, backend, times, multi_exact):
    """The stages every read goes through: exact match, seeding (redone wider where incomplete),
    candidate loci and their banded extension. Returns (exact counts, exact keys, pair_read, pair_key,
    pair_start, incomplete, ext), the candidates grouped by read as candidate_pairs makes them."""
    n = len(batch)
    with times("exact match"):
        counts, ekeys = backend.exact_stage(batch, genome, index, p)
    need = np.flatnonzero(counts < 2)
    with times("seeding"):
        ncand, ckeys, cvotes, dropped = backend.candidate_stage(batch, need, index, p)
        ncand, ckeys, cvotes, dropped = reseed_incomplete(batch, need, counts, index, p, backend,
                                                          ncand, ckeys, cvotes, dropped)
    with times("choice"):
        pair_read, pair_key, pair_start = candidate_pairs(n, need, ncand, ckeys, cvotes, counts, ekeys, multi_exact)
        incomplete = search_incomplete(n, need, cvotes, dropped, counts)
    with times("extension"):
        ext = backend.extend_stage(batch, genome, pair_read, pair_key, p)
    return counts, ekeys, pair_read, pair_key, pair_start, incomplete, ext


def traced(batch, genome, p, backend, times, key, local, score, sub, mapq, proper=None, inserts=None) -> BatchResult:
    """The batch's result: CIGARs of the chosen placements by banded alignment with traceback."""
    mapped = np.flatnonzero(key >= 0)
    with times("traceback"):
        ops, lens, trace = backend.traceback_stage(batch, genome, mapped, key[mapped], local[mapped], p)
    return BatchResult(key, local, score, sub, mapq, ops, lens, trace, mapped, proper, inserts)


def single_end_choice(batch, pair_start, pair_key, ext, incomplete, p, times):
    """Each read's own best placement (key, local, score, sub, mapq), as map_batch chooses it."""
    n = len(batch)
    key = np.full(n, -1, dtype=np.int64)
    local = np.zeros(n, dtype=np.int64)
    score = np.zeros(n, dtype=np.int64)
    sub = np.full(n, -1, dtype=np.int64)
    mapq = np.zeros(n, dtype=np.int64)
    with times("choice"), HOST_PARALLEL:
        choose(batch.lengths, batch.name_hash, pair_start, pair_key, ext, incomplete, p.max_indels, p.match,
               p.mismatch, p.clip_penalty, p.min_score, key, local, score, sub, mapq)
    return key, local, score, sub, mapq


def merge_candidates(n, pair_read, pair_key, ext, new_read, new_key, new_ext):
    """Candidates with rescued ones added after each read's own (a stable regrouping by read)."""
    reads = np.concatenate((pair_read, new_read))
    order = np.argsort(reads, kind="stable")
    pair_start = np.zeros(n + 1, dtype=np.int64)
    pair_start[1:] = np.cumsum(np.bincount(reads, minlength=n))
    return reads[order], np.concatenate((pair_key, new_key))[order], pair_start, np.concatenate((ext, new_ext))[order]


# Reads whose candidate search was cut short (as in high-copy repeats) are seeded again with this
# many times the hit budget, the candidates and the index's max_occ (seeds in bins up to that size
# count too): their true locus is often among the clusters left out.
RESEED_HITS, RESEED_CANDIDATES, RESEED_OCC = 8, 4, 8
RESEED_CHUNK = 8192   # reads re-seeded per call (a backend may set its own), so the wider hit scratch stays bounded


def reseed_incomplete(batch, need, counts, index, p, backend, ncand, ckeys, cvotes, dropped):
    """Candidates of `need` with the incomplete searches redone at a wider budget (per read, so
    neither batch size nor backend changes the outcome); arrays widened to the new candidate count."""
    redo = np.flatnonzero(search_incomplete(len(counts), need, cvotes, dropped, counts)[need])
    if not len(redo):
        return ncand, ckeys, cvotes, dropped
    wide = dataclasses.replace(p, max_hits=p.max_hits * RESEED_HITS,
                               max_candidates=p.max_candidates * RESEED_CANDIDATES)
    deep = dataclasses.replace(index, max_occ=index.max_occ * RESEED_OCC)   # same arrays, higher cap
    keys = np.full((len(need), wide.max_candidates), -1, dtype=np.int64)
    votes = np.zeros((len(need), wide.max_candidates), dtype=np.int64)
    keys[:, :ckeys.shape[1]] = ckeys
    votes[:, :cvotes.shape[1]] = cvotes
    ncand, dropped = ncand.copy(), dropped.copy()
    chunk = getattr(backend, "RESEED_CHUNK", RESEED_CHUNK)
    for start in range(0, len(redo), chunk):
        part = redo[start:start + chunk]
        ncand[part], keys[part], votes[part], dropped[part] = backend.candidate_stage(batch, need[part], deep, wide)
    return ncand, keys, votes, dropped


# Candidates with under a quarter of the best candidate's seed votes are not extended: a locus
# that similar to the read shares most of its seeds (at 95% identity, two thirds of 8-mers).
VOTE_FRACTION = 4


@njit(cache=True, nogil=True)
def candidate_pairs(n, need, ncand, ckeys, cvotes, counts, ekeys, multi_exact):
    """(read, key) pairs to extend, grouped by read; a single exact hit is always a candidate, and
    with multi_exact (paired reads, where the mate can tell copies apart) every stored exact hit."""
    kept = np.zeros(need.shape[0], dtype=np.int64)
    per_read = np.zeros(n, dtype=np.int64)
    for x in range(need.shape[0]):
        c = 0
        while c < ncand[x] and cvotes[x, c] * VOTE_FRACTION >= cvotes[x, 0]:   # votes are sorted
            c += 1
        kept[x] = c
        per_read[need[x]] = c + (1 if counts[need[x]] == 1 else 0)
    if multi_exact:
        for r in range(n):
            if counts[r] >= 2:
                per_read[r] = min(counts[r], ekeys.shape[1])
    pair_start = np.zeros(n + 1, dtype=np.int64)
    pair_start[1:] = np.cumsum(per_read)
    pair_read = np.empty(pair_start[n], dtype=np.int64)
    for r in range(n):
        pair_read[pair_start[r]:pair_start[r + 1]] = r
    pair_key = np.empty(pair_start[n], dtype=np.int64)
    for x in range(need.shape[0]):
        r = need[x]
        s = pair_start[r]
        pair_key[s:s + kept[x]] = ckeys[x, :kept[x]]
        if counts[r] == 1:
            pair_key[s + kept[x]] = ekeys[r, 0]
    if multi_exact:
        for r in range(n):
            if counts[r] >= 2:
                pair_key[pair_start[r]:pair_start[r + 1]] = ekeys[r, :pair_start[r + 1] - pair_start[r]]
    return pair_read, pair_key, pair_start


def search_incomplete(n, need, cvotes, dropped, counts):
    """Reads whose left-out candidates had at least half the votes of the best kept one.

    The true locus of a read with ~1% errors shares nearly all of its seeds; a locus within a few
    edits of it shares most. When clusters that well supported were dropped (too many to keep, as
    in repeats), the best placement may be among them. A unique exact hit is certain regardless.
    """
    out = np.zeros(n, dtype=np.bool_)
    out[need] = (dropped > 0) & (2 * dropped >= cvotes[:, 0]) & (counts[need] == 0)
    return out


@njit(cache=True, nogil=True)
def place_multi_exact(counts, ekeys, name_hash, lengths, max_exact, match, key, local, score, sub, mapq):
    """Reads matching exactly at two or more places: a hash-chosen one, MAPQ 0, XS = AS."""
    for r in range(counts.shape[0]):
        if counts[r] < 2:
            continue
        stored = min(counts[r], max_exact)
        key[r] = ekeys[r, name_hash[r] % stored]
        local[r] = 0
        score[r] = lengths[r] * match
        sub[r] = lengths[r] * match
        mapq[r] = 0


def batch_records(batch: Reads, res: BatchResult, genome, header, rg_id):
    """pysam records of a batch, in input order (SAM output; the same fields as the BAM encoder's)."""
    row_of = np.full(len(batch), -1, dtype=np.int64)
    row_of[res.mapped] = np.arange(len(res.mapped))
    paired = res.proper is not None
    fields = record_fields(row_of, res.key, res.mapq, res.proper if paired else row_of, res.trace, res.ops.ravel(),
                           res.lens.ravel(), res.ops.shape[1], genome.offsets, paired)
    records = []
    for r in range(len(batch)):
        s, e = batch.read_off[r], batch.read_off[r + 1]
        name = batch.name(r)
        row = row_of[r]
        if row < 0:
            records.append(unmapped_record(header, name, batch.codes[s:e], batch.quals[s:e], rg_id))
            continue
        reverse = res.key[r] >= STRAND_BIT
        codes = batch.rc_codes[s:e] if reverse else batch.codes[s:e]
        quals = batch.quals[s:e][::-1] if reverse else batch.quals[s:e]
        t = res.trace[row]
        cigar = full_cigar(res.ops[row], res.lens[row], int(t[5]), int(t[1]), int(t[3]), e - s)
        gstart = int(t[2])
        ref = genome.codes(gstart, gstart + ref_span(cigar))
        md, nm = md_nm(codes, ref, cigar)
        rid = int(np.searchsorted(genome.offsets, gstart, side="right") - 1)
        sub = int(res.sub[r]) if res.sub[r] >= 0 else None
        records.append(mapped_record(header, name, codes, quals, reverse, rid, gstart - int(genome.offsets[rid]),
                                     int(res.mapq[r]), cigar, md, nm, int(res.score[r]), sub, rg_id))
    if paired:
        for r, rec in enumerate(records):
            set_mate_fields(rec, fields[r], records[r ^ 1] if row_of[r ^ 1] >= 0 else None)
    if batch.has_comments:   # read with -C: the comments' tags end each record, as in the BAM
        for r, rec in enumerate(records):
            for tag, value, kind in comment_fields(batch, r):
                rec.set_tag(tag, value, kind)
    return records


def batch_bam_records(batch: Reads, res: BatchResult, genome, rg_id):
    """The BAM records of a batch, in input order: (bytes, record offsets, coordinate sort keys)."""
    row_of = np.full(len(batch), -1, dtype=np.int64)
    row_of[res.mapped] = np.arange(len(res.mapped))
    rg = np.frombuffer((rg_id or "").encode(), dtype=np.uint8)
    paired = res.proper is not None
    buf, offsets, keys = encode_batch(
        row_of, batch.names, batch.name_off, batch.codes, batch.rc_codes, batch.quals, batch.read_off, res.key,
        res.mapq, res.score, res.sub, res.ops.ravel(), res.lens.ravel(), res.ops.shape[1], res.trace, genome.packed,
        genome.nmask, genome.offsets, rg, res.proper if paired else row_of, paired)
    if batch.has_comments:   # read with -C: the comments' tags end each record
        _, _, tags, tag_off = comment_tags(batch.comments, batch.comment_off)
        buf, offsets = append_tags(buf, offsets, tags, tag_off)
    return buf, offsets, keys


def as_batches(reads, batch_size: int, paired: bool = False):
    """Batches of at most batch_size reads, from one Reads or an iterable of Reads batches.
    Paired (interleaved mates): whole blocks of insert-size estimation, as pairing.paired_batches."""
    size = 2 * pairing.fragments_per_batch(batch_size) if paired else batch_size

    def cut():
        for batch in [reads] if isinstance(reads, Reads) else reads:
            if len(batch) <= size:
                yield batch
                continue
            for start in range(0, len(batch), size):
                yield subset(batch, start, min(len(batch), start + size))
    return pairing.paired_batches(cut()) if paired else cut()


def mapped_batches(batches, genome, index, p: MapParams, backend, times: StageTimes, paired: bool = False):
    """(batch, result) in input order. A backend with BATCHES_IN_FLIGHT > 1 (cuda) maps that many
    batches at once on threads of their own, so one batch's GPU work overlaps another's host work;
    results do not depend on it (every read is mapped on its own)."""
    def map_one(batch):
        if batch.k != index.k:
            raise InputError(f"reads were encoded with k={batch.k} but the index has k={index.k}")
        return batch, (map_pair_batch if paired else map_batch)(batch, genome, index, p, backend, times)

    def timed(source):
        source = iter(source)
        while True:
            with times("reading FASTQ (wait)"):
                batch = next(source, None)
            if batch is None:
                return
            yield batch

    in_flight = getattr(backend, "BATCHES_IN_FLIGHT", 1)
    if in_flight <= 1:
        yield from map(map_one, timed(batches))
        return
    with ThreadPoolExecutor(max_workers=in_flight, thread_name_prefix="map") as pool:
        yield from ordered_map(pool, map_one, timed(batches), in_flight)


class Progress:
    """Log lines of reads done and reads/s, at most every `every` seconds, and a final summary."""

    def __init__(self, log, backend_name, every=10.0):
        self.log, self.backend_name, self.every = log, backend_name, every
        self.start = self.last = time.perf_counter()
        self.reads = self.mapped = self.proper = 0
        self.estimates = 0

    def update(self, n, mapped):
        self.reads += n
        self.mapped += mapped
        now = time.perf_counter()
        if now - self.last >= self.every:
            self.last = now
            self.log(f"mapped {self.reads} reads ({self.backend_name}, {self.rate(now):.0f} reads/s)")

    def paired(self, res, log):
        """Count proper pairs; log the first insert-size estimates (one per block of fragments)."""
        self.proper += int(np.count_nonzero(res.proper))
        for valid, mean, sd, low, high, count in res.inserts:
            if self.estimates < 3:
                log(f"insert size: mean {mean:.1f}, sd {sd:.1f}, proper pairs {low:.0f}-{high:.0f} bp, "
                    f"from {count:.0f} confidently placed fragments" if valid else
                    f"insert size: too few confidently placed fragments ({count:.0f}) to estimate; "
                    "no proper pairs in this block")
            self.estimates += 1

    def rate(self, now=None):
        return self.reads / max((now or time.perf_counter()) - self.start, 1e-9)


def map_reads(genome, index, reads, out_path: str, p: MapParams, backend_name="auto",
              threads: int = 1, read_group=None, command_line="gpualign", log=None, fmt: str = "bam",
              compression_level: int = 6, sort: bool = False, index_path: str | None = None, paired: bool = False,
              reference_fasta: str | None = None):
    """Map reads (one Reads, or an iterable of batches as fastq.read_batches gives) and write them
    to out_path ('-' is stdout) as fmt: 'bam' (coordinate-sorted with sort=True, plus a .bai at
    index_path if given), 'sam' (read order), or 'cram' (as bam, re-encoded by htslib against
    reference_fasta, with a .crai at index_path if given).
    paired: the reads interleave mates (fastq.read_interleaved_pairs gives them so).
    """
    log = log or (lambda msg: print(msg, file=sys.stderr))
    p.check()
    if fmt not in ("sam", "bam", "cram"):
        raise ValueError(f"map_reads: fmt {fmt!r}")
    if fmt == "cram":
        with cram.via_bam(out_path, reference_fasta, threads, index_path) as bam_path:
            return map_reads(genome, index, reads, bam_path, p, backend_name, threads, read_group, command_line,
                             log, "bam", compression_level, sort, None, paired)
    sam = fmt == "sam"
    backend = get_backend(backend_name, log)
    ensure_compiled(backend.NAME, log)   # a cold cache compiles first, before the mapping clock starts
    header = make_header(genome, read_group, command_line, sort_order="coordinate" if sort and not sam else "unsorted")
    rg_id = read_group["ID"] if read_group else None
    times = StageTimes()

    def encode(batch, res):
        with times("BAM records (worker threads)"):
            return batch_bam_records(batch, res, genome, rg_id)

    if sam:   # text output goes through pysam's records; BAM is encoded in bulk (bamio)
        out = pysam.AlignmentFile(out_path, "w", header=header)
    elif sort:
        out = SortedBam(out_path, header, encode, compression_level, threads, index_path, times,
                        work_dir=scratch_dir(out_path))
    else:
        out = UnsortedBam(out_path, header, encode, compression_level, threads)
    progress = Progress(log, backend.NAME)
    try:
        for batch, res in mapped_batches(as_batches(reads, p.batch_size, paired), genome, index, p, backend,
                                         times, paired):
            if sam:
                for rec in batch_records(batch, res, genome, header, rg_id):
                    out.write(rec)
            else:
                with times("BAM records (wait)"):
                    out.add(batch, res)
            progress.update(len(batch), len(res.mapped))
            if paired:
                progress.paired(res, log)
        if sort and not sam:
            out.close()   # times its own phases
        else:
            with times("BAM write"):
                out.close()
    except BaseException:
        if sam:
            out.close()
        else:
            out.abort()
        raise
    elapsed = time.perf_counter() - progress.start
    log(f"stage times (summed over threads): {times.summary()}")
    if paired:
        log(f"{progress.proper} reads in proper pairs ({100 * progress.proper / max(progress.reads, 1):.2f}%)")
    log(f"done: {progress.reads} reads, {progress.mapped} mapped, {elapsed:.1f} s, "
        f"{progress.reads / max(elapsed, 1e-9):.0f} reads/s, backend {backend.NAME}")
    return {"reads": progress.reads, "mapped": progress.mapped, "seconds": elapsed, "backend": backend.NAME}
