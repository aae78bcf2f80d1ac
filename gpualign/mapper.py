"""Orchestration only: batches of reads through the stages on the chosen backend, several batches
in flight, each stage timed, and the records written.

    exact match, seeding (seed.py) -> extension (extend.py) -> choice, MAPQ (choose.py)
    [paired: insert sizes, mate rescue, fragment choice (pairing.py)] -> traceback -> records (bam/, sam)

Every kernel works on one read or pair at a time, so neither the backend nor the batch size can
change a result.
"""

from .jitcache import ensure_compiled

import contextlib
import functools
import itertools
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pysam

from . import cram, pairing, trace
from .backends import get_backend
from .bam.markdup import duplicates_line
from .bam.records import batch_bam_records, record_slices
from .bam.sam_records import batch_records
from .bam.sort import SortedBam, UnsortedBam
from .batches import as_batches, block_of_fragments, block_starts
from .choose import HOST_PARALLEL, Choice, Loci, loci_of, place_multi_exact, single_end_choice
from .errors import InputError
from .fastq import DeviceParsing, longest_read, parsed
from .md import MdNm
from .options import MapParams, check_optical_distance
from .output import scratch_dir
from .reads import Reads, encode_reads
from .sam import make_header
from .seqio import RAMP_STEPS, available_memory
from .seed import candidate_pairs, edit_cost, reseed_incomplete, unseen_scores
from .threads import in_background, ordered_map


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
    md: MdNm              # MD and NM of the mapped reads, rows follow `mapped`
                          # (ops, lens, trace, md: None where the backend made the records and kept them)
    mapped: np.ndarray    # indices of mapped reads in the batch
    proper: np.ndarray | None = None   # paired batches: 1 where the read is part of a proper pair
    inserts: np.ndarray | None = None  # paired batches: pairing.insert_estimates of each block
    records: tuple | None = None       # the BAM records where the backend made them: (bytes, offsets, sort keys)


class StageTimes:
    """Wall seconds spent in each named stage, summed over batches (for the log's final lines)."""

    def __init__(self):
        self.seconds = {}
        self.lock = threading.Lock()

    @contextlib.contextmanager
    def __call__(self, stage: str):
        start, cpu = time.perf_counter(), time.thread_time()
        try:
            yield
        finally:
            end = time.perf_counter()
            trace.record(stage, start, end, cpu=time.thread_time() - cpu)
            with self.lock:
                self.seconds[stage] = self.seconds.get(stage, 0.0) + end - start

    def summary(self) -> str:
        return ", ".join(f"{stage} {sec:.2f} s" for stage, sec in self.seconds.items())


def map_batch(batch: Reads, genome, index, p: MapParams, backend, times: StageTimes | None = None,
              rg: bytes | None = None, alignments: bool = True) -> BatchResult:
    """Each read's best placement on its own, and its alignment. A backend with single_end_batch
    (cuda) runs the stages below as one chain in its own memory, and with rg (BAM output: the read
    group ID's bytes, empty for none) makes the BAM records there too; then, with alignments False
    (nothing but the records asked for), the result may leave ops, lens, trace and md out (None)."""
    times = times or StageTimes()
    resident = getattr(backend, "single_end_batch", None)
    if resident is not None:
        with times("mapping (resident on the GPU)"):
            *choice, ops, lens, trace_rows, md, mapped, records = resident(
                batch, genome, index, p, None if rg is None else np.frombuffer(rg, dtype=np.uint8), alignments)
        return BatchResult(*choice, ops=ops, lens=lens, trace=trace_rows, md=None if md is None else MdNm(*md),
                           mapped=mapped, records=records)
    exact, cand, unseen = extended_candidates(batch, genome, index, p, backend, times, multi_exact=False)
    loci = timed_loci(cand, batch, p, times)
    choice = single_end_choice(batch, cand.start, cand.key, loci, unseen, p, times)
    with times("choice"):
        place_multi_exact(exact.counts, exact.keys, batch.name_hash, batch.lengths, p.max_exact, p.match, *choice)
    return traced(batch, genome, p, backend, times, choice)


def map_pair_batch(batch: Reads, genome, index, p: MapParams, backend, times: StageTimes | None = None) -> BatchResult:
    """map_batch for interleaved mates (read 2i is R1 of fragment i, 2i+1 its R2): every read's
    loci as map_batch finds them, the insert-size estimate of each block, mate rescue on the backend,
    then both mates' placements chosen together (pairing.py). A backend with candidates_and_choice
    (cuda) finds the loci and single-end choices as one chain in its own memory."""
    times = times or StageTimes()
    n, lengths, tn = len(batch), batch.lengths, p.tuning
    resident = getattr(backend, "candidates_and_choice", None)
    if resident is not None:
        with times("mapping (resident on the GPU)"):
            _, cand, unseen, loci, choice = resident(batch, genome, index, p)
        cand, loci, choice = Candidates(*cand), Loci(*loci), Choice(*choice)
    else:
        exact, cand, unseen = extended_candidates(batch, genome, index, p, backend, times, multi_exact=True)
        beyond = exact.counts > p.max_exact   # exact copies beyond those stored were not seen: a perfect score
        unseen[beyond] = lengths[beyond] * p.match
        loci = timed_loci(cand, batch, p, times)
        choice = single_end_choice(batch, cand.start, cand.key, loci, unseen, p, times)
    with times("pairing"):
        starts = block_starts(n // 2, tn.insert_block)
        block = block_of_fragments(starts)
        inserts = pairing.insert_estimates(choice.key, choice.mapq, unseen, lengths, genome.offsets, starts, tn)
        tasks = pairing.rescue_tasks(cand.start, cand.key, loci.eff, loci.keep, lengths, block, inserts,
                                     genome.offsets, genome.ends, p.max_indels, p.min_score, p.unpaired_penalty, tn)
    if len(tasks[0]):
        with times("mate rescue"):
            found = backend.rescue_stage(batch, genome, *tasks, p)
            new_key = pairing.rescued_keys(tasks[1], tasks[2], found, p.min_score)
            new_read = tasks[0][new_key >= 0]
            new_key = new_key[new_key >= 0]
        if len(new_key):
            with times("extension"):
                new_ext = backend.extend_stage(batch, genome, new_read, new_key, p)
            cand = with_rescued(cand, new_read, new_key, new_ext)
            loci = timed_loci(cand, batch, p, times)
            choice = single_end_choice(batch, cand.start, cand.key, loci, unseen, p, times)
    proper = np.zeros(n, dtype=np.int64)
    with times("pairing"), HOST_PARALLEL:
        pairing.choose_fragments(cand.start, cand.key, *loci, lengths, batch.name_hash, unseen, block, inserts,
                                 genome.offsets, p.match, p.mismatch, p.min_score, p.unpaired_penalty,
                                 tn.max_fragment, *choice, proper)
    return traced(batch, genome, p, backend, times, choice, proper, inserts)


class Exact(NamedTuple):
    counts: np.ndarray    # exact hits of each read, both strands (counted past those stored)
    keys: np.ndarray      # [n, max_exact] candidate keys of the stored hits, -1 past them


class Candidates(NamedTuple):
    """A batch's candidate loci grouped by read (read r's are rows start[r]:start[r + 1]), extended."""
    read: np.ndarray
    key: np.ndarray
    start: np.ndarray
    ext: np.ndarray       # extension rows, extend.EXT_* columns


def extended_candidates(batch, genome, index, p, backend, times, multi_exact):
    """The stages every read goes through: exact match, seeding (redone wider where incomplete),
    candidate loci and their banded extension. Returns (Exact, Candidates, unseen), the
    candidates grouped by read as candidate_pairs makes them; unseen: per read, the most a locus
    left out of its search could score (seed.unseen_score; NEG where none well supported was)."""
    n = len(batch)
    with times("exact match"):
        exact = Exact(*backend.exact_stage(batch, genome, index, p))
    need = np.flatnonzero(exact.counts < 2)
    with times("seeding"):
        ncand, ckeys, cvotes, dropped = backend.candidate_stage(batch, need, index, p)
        ncand, ckeys, cvotes, dropped = reseed_incomplete(batch, need, exact.counts, index, p, backend,
                                                          ncand, ckeys, cvotes, dropped)
    with times("choice"):
        pair_read, pair_key, pair_start = candidate_pairs(n, need, ncand, ckeys, cvotes, exact.counts, exact.keys,
                                                          multi_exact, p.tuning.vote_fraction)
        unseen = unseen_scores(n, need, cvotes, dropped, exact.counts, batch.lengths, index.k, p.match,
                               edit_cost(p))
    with times("extension"):
        ext = backend.extend_stage(batch, genome, pair_read, pair_key, p)
    return exact, Candidates(pair_read, pair_key, pair_start, ext), unseen


def timed_loci(cand: Candidates, batch, p, times):
    with times("choice"), HOST_PARALLEL:
        return loci_of(cand.start, cand.key, cand.ext, batch.lengths, p)


def traced(batch, genome, p, backend, times, choice: Choice, proper=None, inserts=None) -> BatchResult:
    """The batch's result: CIGARs of the chosen placements by banded alignment with traceback, and
    their MD and NM."""
    key = choice.key
    mapped = np.flatnonzero(key >= 0)
    with times("traceback"):
        ops, lens, trace, md = backend.traceback_stage(batch, genome, mapped, key[mapped], choice.local[mapped], p)
    return BatchResult(**choice._asdict(), ops=ops, lens=lens, trace=trace, md=MdNm(*md), mapped=mapped,
                       proper=proper, inserts=inserts)


def with_rescued(cand: Candidates, new_read, new_key, new_ext) -> Candidates:
    """Candidates with rescued ones added after each read's own (pairing.regroup_rescued: one pass,
    where a stable sort of all rows took 17-24 ms a batch of the mapping thread on the GPU host)."""
    return Candidates(*pairing.regroup_rescued(cand.start, cand.key, cand.ext, new_read, new_key, new_ext))


def mapped_batches(batches, genome, index, p: MapParams, backend, times: StageTimes, paired: bool = False,
                   in_flight: int | None = None, rg: bytes | None = None, alignments: bool = True,
                   prepare_thread=None):
    """(batch, result) in input order. in_flight > 1 (default: the backend's BATCHES_IN_FLIGHT; cuda
    has 4) maps that many batches at once on threads of their own, so one batch's GPU work overlaps
    another's host work; results do not depend on it (every read is mapped on its own); prepare_thread,
    if given, is called on each of those threads before its first batch (thread_sizing). rg: BAM
    output, whose records the backend may make; alignments False: nothing but them is needed
    (map_batch)."""
    raw = parses_raw(backend, paired, rg, alignments)

    def map_one(batch):
        if batch.k != index.k:
            raise InputError(f"reads were encoded with k={batch.k} but the index has k={index.k}")
        if not raw:
            batch = parsed(batch)
        with times("prepare reads"):
            batch = backend.prepare_reads(batch)
        if paired:
            return batch, map_pair_batch(batch, genome, index, p, backend, times)
        res = map_batch(batch, genome, index, p, backend, times, rg, alignments)
        return (batch if res.records is not None else parsed(batch)), res   # the host encodes from Reads

    def timed(source):
        source = iter(source)
        while True:
            with times("reading FASTQ (wait)"):
                batch = next(source, None)
            if batch is None:
                return
            yield batch

    in_flight = in_flight or getattr(backend, "BATCHES_IN_FLIGHT", 1)
    if in_flight <= 1:
        yield from map(map_one, timed(batches))
        return
    # Driven from a thread of its own, so batches keep going to the map threads while the caller
    # waits for records and writes them; batches queued behind the busy ones start as soon as a map
    # thread frees, not when the oldest batch is done.
    pool = ThreadPoolExecutor(max_workers=in_flight, thread_name_prefix="map", initializer=prepare_thread)
    done = False
    try:
        yield from in_background(ordered_map(pool, map_one, timed(batches), 2 * in_flight), depth=in_flight)
        done = True
    finally:
        # after the last batch the map threads end beside the sorted tail: a thread's end frees its device
        # buffers, and every run's traces on the GPU host showed 0.08-0.1 s between the last batch's
        # records and the tail's start. On an error they are waited for, as before.
        pool.shutdown(wait=not done)


def parses_raw(backend, paired: bool, rg, alignments: bool) -> bool:
    """Whether batches may reach the backend unparsed (fastq.RawReads): where it maps single-end batches on
    its device (single_end_batch) and nothing but the BAM records it makes there is asked for."""
    return hasattr(backend, "single_end_batch") and not paired and rg is not None and not alignments


class Progress:
    """Log lines of reads done and reads/s, at most every `every` seconds, and a final summary."""

    def __init__(self, log, backend_name, every=10.0):
        self.log, self.backend_name, self.every = log, backend_name, every
        self.start = self.last = time.perf_counter()
        self.reads = self.mapped = self.proper = 0
        self.inserts = []   # pairing.insert_estimates' rows, one per block of fragments

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
            if len(self.inserts) < 3:
                log(f"insert size: mean {mean:.1f}, sd {sd:.1f}, proper pairs {low:.0f}-{high:.0f} bp, "
                    f"from {count:.0f} confidently placed fragments" if valid else
                    f"insert size: too few confidently placed fragments ({count:.0f}) to estimate; "
                    "no proper pairs in this block")
            self.inserts.append((valid, mean, sd, low, high, count))

    def rate(self, now=None):
        return self.reads / max((now or time.perf_counter()) - self.start, 1e-9)


WARM_UP_READ = b"ACGT" * 25
# the sorted sink holds records in memory up to this share of the memory available at the start (the rest
# goes to its run file): an eighth, as the reads decoded ahead take (seqio.decode_ahead_bytes)
HOLD_SHARE = 8


def warm_up(backend, genome, index, p, paired: bool):
    """One read (a pair) mapped as the first batch will be, on a thread of its own while that batch is
    read: numba's cached machine code is loaded (about 0.1 s of a 2-core start), and on the GPU the
    kernels are, and the genome and index go up, before the first batch needs them."""
    mates = 2 if paired else 1
    batch = encode_reads([b"warm-up"] * mates, [WARM_UP_READ] * mates, [b"?" * len(WARM_UP_READ)] * mates, index.k)
    with trace.span("warm up backend"):
        (map_pair_batch if paired else map_batch)(backend.prepare_reads(batch), genome, index, p, backend)


def thread_sizing(backend, head, size: int, longest: int, p: MapParams, paired: bool):
    """What each mapping thread calls before its first batch: the backend's sized_for (cuda: its buffers
    made once, for full batches), for batches of `size` reads of at most `longest` bases, but no more
    than the ramp makes of the first batch (fastq.ramp_sizes: a run whose first batch is small is a
    small run); None for a backend without it."""
    sized_for = getattr(backend, "sized_for", None)
    if sized_for is None or head is None:
        return None
    reads = min(size, len(head) << RAMP_STEPS)
    return functools.partial(sized_for, reads, longest, p, paired)


def map_reads(genome, index, reads, out_path: str, p: MapParams, backend_name="auto",
              threads: int = 1, read_group=None, command_line="gpualign", log=None, fmt: str = "bam",
              compression_level: int = 6, sort: bool = False, index_path: str | None = None, paired: bool = False,
              reference_fasta: str | None = None, markdup: bool = False, metrics_path: str | None = None,
              output_name: str | None = None, optical_distance: int = 0, device_parsing: DeviceParsing | None = None):
    """Map reads (one Reads, or an iterable of batches as fastq.read_batches gives) and write them
    to out_path ('-' is stdout) as fmt: 'bam' (coordinate-sorted with sort=True, plus a .bai at
    index_path if given), 'sam' (read order), or 'cram' (as bam, re-encoded by htslib against
    reference_fasta, with a .crai at index_path if given).
    paired: the reads interleave mates (fastq.read_interleaved_pairs gives them so).
    markdup: flag duplicates as the sorted BAM is written (bam/markdup.py; sorted BAM or CRAM only),
    their metrics in Picard's layout at metrics_path if given, naming the BAM output_name (MultiQC's
    sample name; default out_path); optical_distance: count optical duplicates within that many
    pixels (bam/optical.py; 0: none).
    device_parsing: the reader's switch (fastq.read_batches' device), set here once the backend is known:
    whether its batches are left for the backend to parse (parses_raw).
    """
    log = log or (lambda msg: print(msg, file=sys.stderr))
    p.check()
    if fmt not in ("sam", "bam", "cram"):
        raise ValueError(f"map_reads: fmt {fmt!r}")
    if markdup and (fmt == "sam" or not sort):
        raise ValueError("map_reads: markdup needs sorted BAM or CRAM output")
    check_optical_distance(optical_distance)
    if fmt == "cram":
        with cram.via_bam(out_path, reference_fasta, threads, index_path) as bam_path:
            return map_reads(genome, index, reads, bam_path, p, backend_name, threads, read_group, command_line,
                             log, "bam", compression_level, sort, None, paired, markdup=markdup,
                             metrics_path=metrics_path, output_name=output_name or out_path,
                             optical_distance=optical_distance, device_parsing=device_parsing)
    sam = fmt == "sam"
    # batches are assembled ahead on a thread of their own (mates paired, re-cut, interleaved: copies)
    batches = reader = in_background(as_batches(reads, p.batch_size, paired, p.tuning.insert_block), depth=2)
    try:
        with ThreadPoolExecutor(max_workers=3, thread_name_prefix="first batch") as early:
            reading = early.submit(next, iter(batches), None)   # reading starts while the backend does
            with trace.span("start backend"):
                backend = get_backend(backend_name, log)
                if device_parsing is not None:
                    device_parsing.wanted = parses_raw(backend, paired, None if sam else b"", sam or markdup)
                ensure_compiled(backend.NAME, log)   # a cold cache compiles first, before the mapping clock starts
                plan = getattr(backend, "batch_plan", None)   # the GPU's memory: checked before anything goes up
                plan = plan(genome, index, p, paired, log) if plan else None
            prepare = getattr(backend, "prepare_buffers", None)   # the map threads' GPU buffers, made meanwhile
            ahead = early.submit(prepare, plan, p, paired) if prepare and plan else None
            warming = early.submit(warm_up, backend, genome, index, p, paired)   # while the first batch is read
            head = reading.result()
            warming.result()
            if ahead:
                ahead.result()
        batches = itertools.chain([] if head is None else [head], batches)
        longest = longest_read(head) if head is not None else 1
        in_flight, size = (plan(longest) if plan else (getattr(backend, "BATCHES_IN_FLIGHT", 1), p.batch_size))
        prepare_thread = thread_sizing(backend, head, size, longest, p, paired)
        if size < p.batch_size and not paired:   # smaller batches where the GPU's memory asks for them
            batches = as_batches(batches, size)
        order = "coordinate" if sort and not sam else "unsorted"
        header = make_header(genome, read_group, command_line, sort_order=order)
        rg_id = read_group["ID"] if read_group else None
        times = StageTimes()

        def encode(batch, res, first, last):
            with times("BAM records (worker threads)"):
                return batch_bam_records(batch, res, genome, rg_id, first, last, dup=markdup)

        if sam:   # text output goes through pysam's records; BAM is encoded in bulk (bam.records)
            out = pysam.AlignmentFile(out_path, "w", header=header)
        elif sort:
            out = SortedBam(out_path, header, encode, compression_level, threads, index_path, times,
                            work_dir=scratch_dir(out_path), markdup=markdup,
                            library=(read_group or {}).get("LB"), metrics_path=metrics_path, command=command_line,
                            output_name=output_name, optical_distance=optical_distance,
                            hold_bytes=available_memory() // HOLD_SHARE)
        else:
            out = UnsortedBam(out_path, header, encode, compression_level, threads)
        progress = Progress(log, backend.NAME)
        mapped = mapped_batches(batches, genome, index, p, backend, times, paired, in_flight,
                                None if sam else (rg_id or "").encode(), alignments=sam or markdup,
                                prepare_thread=prepare_thread)
        try:
            for batch, res in mapped:
                if sam:
                    for rec in batch_records(batch, res, genome, header, rg_id):
                        out.write(rec)
                else:
                    with times("BAM records (wait)"):
                        for first, last in record_slices(len(batch)):   # a batch's records on several threads
                            out.add(batch, res, first, last)
                progress.update(len(batch), len(res.mapped))
                if paired:
                    progress.paired(res, log)
            if sort and not sam:
                out.close()   # times its own phases
            else:
                with times("BAM write"):
                    out.close()
        except BaseException:
            mapped.close()   # its threads stopped, none of them still taking batches from the reader
            if sam:
                out.close()
            else:
                out.abort()
            raise
    except BaseException:
        reader.close()   # stops the reading thread now: one still decoding at exit aborts the process (rapidgzip)
        raise
    elapsed = time.perf_counter() - progress.start
    trace.write()
    log(f"stage times (summed over threads): {times.summary()}")
    if paired:
        log(f"{progress.proper} reads in proper pairs ({100 * progress.proper / max(progress.reads, 1):.2f}%)")
    if markdup:
        (library, m), = out.dup_metrics.items()
        log(duplicates_line(library, m))
    log(f"done: {progress.reads} reads, {progress.mapped} mapped, {elapsed:.1f} s, "
        f"{progress.reads / max(elapsed, 1e-9):.0f} reads/s, backend {backend.NAME}")
    return run_summary(progress, elapsed, backend.NAME, times, paired, out.dup_metrics if markdup else None)


def run_summary(progress: Progress, elapsed: float, backend: str, times: StageTimes, paired: bool, dup_metrics):
    """What map_reads returns, and `gpualign map --summary` writes (qc/map_summary.py): counts, wall
    seconds of the mapping (start-up excluded), seconds per stage summed over threads, the insert-size
    estimate of each block of fragments (paired), and the duplicate counts of each library (markdup)."""
    return {
        "reads": progress.reads, "mapped": progress.mapped, "seconds": elapsed, "backend": backend,
        "paired": paired, "proper": progress.proper, "stage_seconds": dict(times.seconds),
        "insert_sizes": [{"valid": bool(valid), "mean": float(mean), "sd": float(sd), "low": float(low),
                          "high": float(high), "fragments": int(count)}
                         for valid, mean, sd, low, high, count in progress.inserts],
        "duplicates": dup_metrics,
    }
