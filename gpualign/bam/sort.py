"""Where a run's BAM records go: straight out in read order, or coordinate-sorted by gpualign
itself (no separate `samtools sort` pass), then indexed.

Both sinks take a batch's records as numba-built bytes (records.batch_bam_records, the `encode`
they are given; a slice of a batch a task) on worker threads, so the next batch maps on the GPU
while this one is encoded. The sorted sink sorts each slice's keys on its worker (an order; the
bytes stay as they are) and keeps the slice's records where they were made while they fit
`hold_bytes` (their starts are then addresses), else writes them into one run file beside the
output, at a place reserved for it, keeping 20 bytes per read in memory (sort key, record start and
size, in key order; 28 with an index: each record's end, bin and flag): every slice a sorted run.
Writing a slice to the run file costs a copy into the page cache; holding it costs nothing more
than the memory, which the run file's pages would take too while the disk keeps up.

After the last batch nothing runs on one thread alone: the final order (key, ties in input order)
is cut into parts of PART_RECORDS records, and each part is one task on all threads: its rows found
in every run by rank selection (binary searches, no global sort; each cut once, shared by the
parts on either side of it), merged, their records gathered from the page-cached run file,
compressed into BGZF blocks of its own, and their index entries (virtual offsets within the part;
refID and pos from each row's key, and end, bin and flag kept beside it as each slice was sorted:
bai.spans_in_order, so no record is read back) made. The main thread writes the parts in order and
moves their entries to where they landed; only the .bai's assembly (build_bai, on all threads) is
left after the last part. The parts depend on the records alone, so the bytes do not depend on the
batches or the threads; a part's last block may be short, which BGZF allows.

With markdup, each slice's duplicate-marking fields (records.dup_fields) are kept too, in input
order; after the last batch markdup.decide picks the duplicates from those arrays alone, and each
part sets 0x400 in its gathered records before compressing them: no second pass over the BAM.
"""

import collections
import contextlib
import itertools
import os
import shutil
import struct
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from numba import njit

from .bai import build_bai, index_fields, joined_pieces, piece_index, spans_in_order
from .bgzf import BGZF_EOF, BamWriter, header_bytes, sized_bgzf_blocks
from .markdup import UNKNOWN_LIBRARY, decide, flag_duplicates, metrics, write_metrics
from .records import D_COLS, UNMAPPED_KEY, key_place
from ..jitcache import use_versioned_cache
from ..memmove import MEMMOVE
from ..output import open_binary
from ..threads import ordered_map
from .. import trace

use_versioned_cache()  # before any @njit below

PART_RECORDS = 1 << 16   # records of a part of the final pass: one task, its own BGZF blocks


@njit(cache=True, nogil=True)
def key_order(offsets, keys):
    """A slice's keys, record starts and record sizes in key order (stable), and the order (each
    row's record in the slice)."""
    order = stable_rows(keys, np.arange(keys.shape[0]))
    return (keys[order], offsets[:-1][order], (offsets[1:] - offsets[:-1])[order].astype(np.int32),
            order.astype(np.int32))


@njit(cache=True, nogil=True)
def rank_cut(keys, run_off, rank):
    """Where the first `rank` records of the final order end in each run (rows of the runs'
    concatenated keys, each run sorted): the key K at that rank found by bisecting key values,
    each run searched only in its rows still undecided, then the ties at K taken run by run
    (input order)."""
    runs = run_off.shape[0] - 1
    below, above = run_off[:-1].copy(), run_off[1:].copy()   # first row with key >= lo, > hi
    if rank >= run_off[-1]:
        return above
    lo, hi = np.iinfo(np.int64).max, np.iinfo(np.int64).min
    for j in range(runs):
        if below[j] < above[j]:
            lo, hi = min(lo, keys[below[j]]), max(hi, keys[above[j] - 1])
    at = np.empty(runs, dtype=np.int64)
    while lo < hi:   # K: the smallest key with more than `rank` keys <= K
        mid = (lo >> 1) + (hi >> 1) + (lo & hi & 1)   # floor((lo + hi) / 2), no overflow
        count = 0
        for j in range(runs):
            at[j] = below[j] + np.searchsorted(keys[below[j]:above[j]], mid, side="right")
            count += at[j] - run_off[j]
        if count > rank:
            hi = mid
            above[:] = at
        else:
            lo = mid + 1
            below[:] = at
    need = rank - (below - run_off[:-1]).sum()   # rows below..above are the ties at K
    for j in range(runs):
        take = min(need, above[j] - below[j])
        below[j] += take
        need -= take
    return below


@njit(cache=True, nogil=True)
def part_rows(keys, a, b):
    """Rows of the final ranks between two cuts (rank_cut's a and b: rows of the runs' concatenated
    arrays), in final order: each run's piece a[j]..b[j]-1, the pieces put in order by a stable sort
    (stable_rows: a part is mostly a stretch of the genome), ties in run then row order."""
    rows = np.empty((b - a).sum(), dtype=np.int64)
    o = 0
    for j in range(a.shape[0]):
        for r in range(a[j], b[j]):
            rows[o] = r
            o += 1
    return stable_rows(keys, rows)


RADIX_BITS = 11
RADIX_SPAN = 1 << 44   # keys spread wider than this (over 4 radix passes) are merge sorted


@njit(cache=True, nogil=True)
def stable_rows(keys, rows):
    """rows stably sorted by keys[row]: the placed ones by radix_rows where their keys span less than
    RADIX_SPAN (a slice's keys lie anywhere in the genome, but within a few contigs' shifts), else by
    a merge sort; then the unmapped ones (UNMAPPED_KEY, the largest key) in the order given, which is
    where a stable sort of all puts them. A slice of 15 k reads: 0.08 ms against numpy's merge sort's
    0.7 ms (2-core machine)."""
    n = rows.shape[0]
    placed, unplaced = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
    m = u = 0
    lo, hi = np.iinfo(np.int64).max, np.iinfo(np.int64).min
    for r in rows:
        k = keys[r]
        if k == UNMAPPED_KEY:
            unplaced[u] = r
            u += 1
        else:
            placed[m] = r
            m += 1
            lo, hi = min(lo, k), max(hi, k)
    out = np.empty(n, dtype=np.int64)
    if m < 2:
        out[:m] = placed[:m]
    elif lo < 0 or hi - lo >= RADIX_SPAN:   # the difference fits int64 only from lo >= 0 on
        out[:m] = placed[:m][np.argsort(keys[placed[:m]], kind="mergesort")]
    else:
        out[:m] = radix_rows(keys, placed[:m], lo, hi - lo)
    out[m:] = unplaced[:u]
    return out


@njit(cache=True, nogil=True)
def radix_rows(keys, rows, lo, span):
    """rows stably sorted by keys[row] - lo (all in 0..span): a counting sort of RADIX_BITS of it a
    pass, from the lowest bits."""
    n = rows.shape[0]
    mask = (1 << RADIX_BITS) - 1
    src, dst = rows.copy(), np.empty(n, dtype=np.int64)
    dist, dist_to = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
    for i in range(n):
        dist[i] = keys[src[i]] - lo
    count = np.empty(mask + 2, dtype=np.int64)
    shift = 0
    while True:
        count[:] = 0
        for i in range(n):
            count[((dist[i] >> shift) & mask) + 1] += 1
        for c in range(mask + 1):
            count[c + 1] += count[c]
        for i in range(n):   # in order: equal digits keep the order of the pass before
            digit = (dist[i] >> shift) & mask
            at = count[digit]
            count[digit] = at + 1
            dst[at] = src[i]
            dist_to[at] = dist[i]
        src, dst = dst, src
        dist, dist_to = dist_to, dist
        shift += RADIX_BITS
        if (span >> shift) == 0:
            return src


@njit(cache=True, nogil=True)
def gather_at(src_at, starts, sizes, rows, memmove):
    """The records rows[...] (given by starts and sizes from address src_at; 0: the starts are
    addresses), concatenated."""
    total = 0
    for r in rows:
        total += sizes[r]
    out = np.empty(total, dtype=np.uint8)
    out_at = out.ctypes.data
    o = 0
    for r in rows:
        memmove(out_at + o, src_at + starts[r], sizes[r])
        o += sizes[r]
    return out


class RecordSink:
    """Encodes items (a batch and its result, or a slice of them: whatever `encode` takes) on worker
    threads and hands their records to `consume` in input order.

    add() waits for the oldest item only when JOBS_PER_WORKER items a worker are pending: waiting
    whenever every worker had one kept a batch's last slices from being handed out while the slices
    before them were consumed (0.05 s at the end of a run on the GPU host)."""

    JOBS_PER_WORKER = 3

    def __init__(self, encode, threads: int):
        self.encode = encode
        self.workers = max(1, threads)
        self.pool = ThreadPoolExecutor(max_workers=self.workers)
        self.jobs = collections.deque()

    def add(self, *item):
        self.jobs.append(self.pool.submit(self.encode, *item))
        while self.jobs and (len(self.jobs) > self.JOBS_PER_WORKER * self.workers or self.jobs[0].done()):
            self.consume(*self.jobs.popleft().result())

    def finish(self):
        while self.jobs:
            self.consume(*self.jobs.popleft().result())
        self.pool.shutdown()

    def abort(self):
        for job in self.jobs:
            job.cancel()
        self.pool.shutdown()


class UnsortedBam(RecordSink):
    """Records in read order, compressed as they come."""

    def __init__(self, path, header, encode, level, threads):
        super().__init__(encode, threads)
        self.writer = BamWriter(path, header, level, threads)

    def consume(self, buf, offsets, keys, dupf=None):
        self.writer.write(buf)

    def close(self):
        self.finish()
        self.writer.close()

    def abort(self):
        super().abort()
        self.writer.abort()


class SortedBam(RecordSink):
    """Records in coordinate order, then a .bai index (at `index_path`).

    markdup: mark duplicates (markdup.py) as the records are written; `encode` then also gives each
    slice's duplicate-marking fields (records.dup_fields), kept in input order beside the sort keys
    (48 bytes a record, and 4 for the row's place in its slice). After the last batch, decide()
    picks the duplicates from those arrays alone, and each part sets 0x400 in its gathered records
    before compressing them. `library` names the one library for the metrics; `metrics_path`, if
    given, gets them in Picard's DuplicationMetrics layout; self.dup_metrics holds them after close;
    optical_distance: count optical duplicates within that many pixels (0: none)."""

    def __init__(self, path, header, encode, level, threads, index_path=None, times=None, work_dir=None,
                 markdup=False, library=None, metrics_path=None, command="gpualign", output_name=None,
                 optical_distance=0, hold_bytes=0):
        super().__init__(lambda *item: self.sorted_records(*encode(*item)), threads)
        self.hold_bytes = hold_bytes   # records kept where they were made, up to this many bytes
        self.held = 0                  # bytes of records kept so far
        self.held_slices = []          # their arrays, alive until the tail has gathered them
        self.in_file = []              # each slice: True where its records went to the run file
        self.markdup, self.library, self.metrics_path, self.command = markdup, library, metrics_path, command
        self.optical_distance = optical_distance
        self.output_name = output_name or path
        self.orders, self.dups = [], []
        self.dup_metrics = None
        self.path, self.header, self.level, self.threads = path, header, level, threads
        self.index_path = index_path
        self.times = times or (lambda stage: contextlib.nullcontext())
        # named after the output (an atomic_path temporary), so a rerun clears it if this process
        # dies; work_dir None (a stream output, /dev/null say): the system's temporary folder
        base = os.path.basename(path)
        self.tmpdir = tempfile.mkdtemp(prefix=f"{base if base.startswith('.') else '.' + base}.sort-",
                                       dir=work_dir)
        self.run_path = os.path.join(self.tmpdir, "records.bin")
        self.run = os.open(self.run_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        self.written = 0              # bytes of the run file handed out to slices so far
        self.reserving = threading.Lock()
        self.keys, self.starts, self.sizes = [], [], []
        self.spans = []   # with an index: each slice's (end, bin, flag) a row (bai.spans_in_order)
        self.tail_code = None   # the final pass's code, loaded on a worker while mapping goes on

    def add(self, *item):
        if self.tail_code is None:
            self.tail_code = self.pool.submit(load_tail_code, self.level)
        super().add(*item)

    def sorted_records(self, buf, offsets, keys, dupf=None):
        """A slice's keys, record starts (addresses, or offsets in the run file) and sizes in key order
        (stable), the order, its duplicate-marking fields (None without), and its records where they
        are held (None where they went to the run file); held while they fit hold_bytes, else written
        to the run file as they are, from this worker, at a place reserved for them: moving the bytes
        would cost more here, while mapping goes on, than gathering them later, and written by the
        thread that hands the slices out (1.4 ms a slice on the GPU host) they held back the next
        batch's slices, and the tail."""
        with trace.span("sort batch records"):
            keys, starts, sizes, order = key_order(offsets, keys)
            spans = spans_in_order(buf, offsets, order) if self.index_path else None
        buf = np.ascontiguousarray(buf)
        with self.reserving:
            hold = self.held + len(buf) <= self.hold_bytes
            if hold:
                self.held += len(buf)
            else:
                at = self.written
                self.written += len(buf)
        if hold:   # the records stay where they are; their starts become addresses
            return keys, starts + buf.ctypes.data, sizes, order, dupf, spans, buf
        with trace.span("write sorted run"):
            write_at(self.run, buf, at)
        return keys, starts + at, sizes, order, dupf, spans, None

    def consume(self, keys, starts, sizes, order=None, dupf=None, spans=None, held=None):
        self.keys.append(keys)
        self.starts.append(starts)
        self.sizes.append(sizes)
        self.in_file.append(held is None)
        if held is not None:
            self.held_slices.append(held)
        if spans is not None:
            self.spans.append(spans)
        if self.markdup:
            if dupf is None:
                raise ValueError("SortedBam: markdup needs the records' duplicate-marking fields")
            self.orders.append(order)
            self.dups.append(dupf)

    def close(self):
        removing = None
        try:
            with self.times("BAM records (wait)"):
                self.finish()
                self.close_run()
            with self.times("sorted BAM: merge and compress"):
                entries = self.write_sorted()
            # freeing the run file's blocks (0.06 s for 1.5 GB on the GPU host) goes on beside the index
            removing = threading.Thread(target=self.remove_run, name="remove the run file")
            removing.start()
            if self.index_path:
                with self.times("sorted BAM: index"):
                    self.write_index(entries)
        finally:
            if removing is not None:
                removing.join()
            else:
                self.remove_run()

    def remove_run(self):
        with trace.span("remove the run file"):
            shutil.rmtree(self.tmpdir, ignore_errors=True)

    def write_sorted(self):
        """The sorted BAM (write_runs); returns the records' index entries."""
        if self.keys:
            columns = [self.keys, self.starts, self.sizes] + ([list(c) for c in zip(*self.spans)] if self.index_path
                                                                  else [])
            with trace.span("join the slices' arrays"):
                keys, starts, sizes, *spans = join_slices(columns, self.threads)
        else:
            keys, starts, sizes = (np.zeros(0, dtype=np.int64) for _ in range(3))
            spans = [np.zeros(0, dtype=t) for t in (np.int32, np.uint16, np.uint16)]
        run_off = np.cumsum([0] + [len(k) for k in self.keys], dtype=np.int64)
        spans = tuple(spans) if self.index_path else None   # kept only with an index
        self.keys = self.starts = self.sizes = self.spans = None
        dup_row = self.duplicates(run_off) if self.markdup else None
        if self.written:   # the run file's slices: their offsets become addresses too
            run = np.memmap(self.run_path, dtype=np.uint8, mode="r")
            for j in np.flatnonzero(self.in_file):
                starts[run_off[j]:run_off[j + 1]] += run.ctypes.data
        try:
            return write_runs(self.path, self.header, self.level, self.threads, None, keys, starts, sizes, run_off,
                              dup_row, bool(self.index_path), spans)
        finally:
            self.held_slices = None

    def duplicates(self, run_off):
        """Which rows (of the runs' concatenated arrays, each run in key order) are duplicates:
        decided over the whole output in input order (the runs are consumed in input order, one
        slice each, so run j's records are input rows run_off[j]...), then laid out by row. The
        metrics are counted here and written at once when asked for."""
        with self.times("sorted BAM: mark duplicates"):
            d = (np.concatenate(self.dups) if self.dups else np.zeros((0, D_COLS), dtype=np.int64))
            dup, optical = decide(d, distance=self.optical_distance)
            self.dup_metrics = {self.library or UNKNOWN_LIBRARY: metrics(d, dup, optical)}
            if self.metrics_path:
                write_metrics(self.metrics_path, self.dup_metrics, os.path.basename(self.output_name),
                              self.command, self.optical_distance)
            dup_row = np.empty(len(d), dtype=bool)
            for j, order in enumerate(self.orders):
                dup_row[run_off[j]:run_off[j + 1]] = dup[run_off[j] + order]
            self.orders = self.dups = None
            return dup_row

    def write_index(self, entries):
        """The .bai from the records' index entries (write_runs')."""
        write_bai(self.index_path, len(self.header.references), entries, self.threads)

    def close_run(self):
        if self.run is not None:
            run, self.run = self.run, None
            os.close(run)

    def abort(self):
        super().abort()
        self.held_slices = None
        self.close_run()
        shutil.rmtree(self.tmpdir, ignore_errors=True)


def join_slices(columns, threads: int) -> list:
    """[np.concatenate(column) for column in columns], each column a list of the slices' arrays (slice j
    the same rows long in every column), the copies made by groups of slices on `threads` threads (numpy's
    copies let go of the GIL): on one thread the 10 M E. coli reads' 280 MB of keys, starts, sizes and
    spans took the sorted tail's first 0.1 s on the GPU host, before any part could start."""
    rows = np.cumsum([0] + [len(a) for a in columns[0]], dtype=np.int64)
    outs = [np.empty(int(rows[-1]), dtype=np.result_type(*column)) for column in columns]

    def copy(group):
        for j in group:
            for out, column in zip(outs, columns):
                out[rows[j]:rows[j + 1]] = column[j]

    groups = np.array_split(np.arange(len(columns[0])), max(1, min(threads, len(columns[0]))))
    with ThreadPoolExecutor(max_workers=len(groups), thread_name_prefix="join slices") as pool:
        list(pool.map(copy, groups))
    return outs


def write_at(fd, data, at):
    """data (a contiguous array or bytes) written into file descriptor fd from byte `at`, whole."""
    view = memoryview(data).cast("B")
    while view:
        done = os.pwrite(fd, view, at)
        view, at = view[done:], at + done


def write_runs(path, header, level, threads, src, keys, starts, sizes, run_off, dup_row=None, index=True, spans=None):
    """A sorted BAM from sorted runs of records (SortedBam's, or a merge's inputs): its parts merged,
    gathered and compressed on all threads. src: the runs' records (None: the starts are addresses
    of records held in memory); keys, starts, sizes: the runs' concatenated rows (run j is rows
    run_off[j]..run_off[j+1]-1, in key order); dup_row: each row's
    duplicate flag, set or cleared in its record (None: records as they are). Returns the records'
    index entries (index_entries' rows, the virtual offsets moved to where each part landed; none
    unless index), each part's written by its worker, its offsets moved by the main thread as the
    parts come in order. spans: the rows' (end, bin, flag) (bai.spans_in_order), with their refID and
    pos in their keys (records.key_place); None: read back from the records (a merge's keys are made
    otherwise)."""

    def cut(rank):
        with trace.span("merge sorted runs"):
            return rank_cut(keys, run_off, rank)

    def part(first):
        if first is None:
            return sized_bgzf_blocks(header_bytes(header), level)[0], None
        last = min(len(keys), first + PART_RECORDS)
        a, b = cuts[first].result(), cuts[last].result()
        with trace.span("merge sorted runs"):
            rows = part_rows(keys, a, b)
        with trace.span("gather sorted records"):
            records = gather_at(src_at, starts, sizes, rows, MEMMOVE)
        if dup_row is not None:
            with trace.span("flag duplicates"):
                flag_duplicates(records, sizes[rows], dup_row[rows])
        blocks, csizes, usizes = sized_bgzf_blocks(records, level)
        if index:
            with trace.span("index sorted records"):
                if spans is None:
                    entries[:, first:last] = index_entries(records, csizes, usizes)
                else:
                    end, bins, flag = spans
                    entries[:, first:last] = entries_of_rows(keys, end, bins, flag, sizes, rows, csizes, usizes)
        return blocks, slice(first, last)

    src_at = 0 if src is None else src.ctypes.data
    # each part's index entries go straight to their columns, from its worker: copied by the thread
    # that writes the parts in order, 7 words a record took that thread as long as the writing
    entries = np.empty((7, len(keys) if index else 0), dtype=np.int64)
    at = 0
    tasks = itertools.chain([None], range(0, len(keys), PART_RECORDS))   # None: the header
    with open_binary(path) as fh, ThreadPoolExecutor(max_workers=threads) as pool:
        # where each part starts and ends in every run, each cut found once (a part's end is the next
        # one's start); asked for before any part, so no part waits on a cut not yet begun
        cuts = {rank: pool.submit(cut, rank) for rank in [*range(0, len(keys), PART_RECORDS), len(keys)]}
        for blocks, columns in ordered_map(pool, part, tasks, 2 * threads):
            fh.write(blocks)
            if index and columns is not None:
                entries[5:, columns] += at << 16
            at += len(blocks)
        fh.write(BGZF_EOF)
    return entries


def write_bai(path, n_ref, entries, threads=1):
    """The .bai of n_ref references from the records' index entries (write_runs'), on `threads` threads."""
    tid, pos, end, bins, flag, vstart, vend = entries
    with open(path, "wb") as fh:
        fh.write(build_bai(n_ref, tid, pos, end, bins, flag, vstart.view(np.uint64), vend.view(np.uint64),
                           threads))


# one unmapped record at refID 0, pos 0, named "a": the smallest whole BAM record
TINY_RECORD = np.frombuffer(struct.pack("<iiiBBHHHiiii2s", 34, 0, 0, 2, 0, 4680, 0, 4, 0, -1, -1, 0, b"a\0"),
                            dtype=np.uint8)


def load_tail_code(level: int):
    """Run the final pass's compiled functions once on one tiny record, with the argument types the
    tail gives them. Their first call loads their machine code from numba's cache (10-40 ms each on
    the GPU host, one at a time); done here, on a worker while batches map, it is not left for the
    tail, where every thread would wait for it at once."""
    with trace.span("load the sorted tail's code"):
        keys, run_off = np.zeros(1, dtype=np.int64), np.array([0, 1], dtype=np.int64)
        _, starts, sizes, _ = key_order(np.array([0, len(TINY_RECORD)], dtype=np.int64), keys)
        src = TINY_RECORD.copy()
        rows = part_rows(keys, rank_cut(keys, run_off, 0), rank_cut(keys, run_off, 1))
        records = gather_at(src.ctypes.data, starts, sizes, rows, MEMMOVE)
        _, csizes, usizes = sized_bgzf_blocks(records, level)
        tid, pos, end, bins, flag, vstart, vend = index_entries(records, csizes, usizes)
        spans = np.zeros(1, dtype=np.int32), np.zeros(1, dtype=np.uint16), np.zeros(1, dtype=np.uint16)
        entries_of_rows(keys, *spans, sizes, rows, csizes, usizes)
        build_bai(1, tid, pos, end, bins, flag, vstart.view(np.uint64), vend.view(np.uint64))
        piece = piece_index(pos, end, bins, flag, vstart.view(np.uint64), vend.view(np.uint64))
        joined_pieces([piece, piece])   # a reference in several pieces (merge_touching)


@njit(cache=True, nogil=True)
def index_entries(records, csizes, usizes):
    """What the .bai needs of a part's records, in rows: refID, pos, end, bin, flag, and the virtual
    offsets of their starts and ends as if the part's first block began the file (a part written
    at file offset c adds c << 16), read back from the records."""
    fields = index_fields(records)
    out = np.empty((7, fields.shape[1]), dtype=np.int64)
    out[:5] = fields[1:]
    virtual_offsets(fields[0], csizes, usizes, out)
    return out


@njit(cache=True, nogil=True)
def entries_of_rows(keys, end, bins, flag, sizes, rows, csizes, usizes):
    """index_entries for a part's rows of the runs, from what the sink kept of each (its key, the
    (end, bin, flag) of bai.spans_in_order, its size) rather than from the records."""
    n = rows.shape[0]
    out = np.empty((7, n), dtype=np.int64)
    row_sizes = np.empty(n, dtype=np.int64)
    for i in range(n):
        r = rows[i]
        out[0, i], out[1, i] = key_place(keys[r])
        out[2, i], out[3, i], out[4, i] = end[r], bins[r], flag[r]
        row_sizes[i] = sizes[r]
    virtual_offsets(row_sizes, csizes, usizes, out)
    return out


@njit(cache=True, nogil=True)
def virtual_offsets(sizes, csizes, usizes, out):
    """out[5] and out[6]: the virtual offsets of the starts and ends of records of `sizes`, laid end to
    end in blocks of csizes compressed and usizes uncompressed bytes from the part's start. A record
    ending at a block's end points to the next block's start, as htslib's bgzf_tell gives it."""
    block = ustart = cstart = o = 0   # o: a record's start; `at` lies in block, from ustart (cstart in the file)
    for r in range(sizes.shape[0]):
        for row, at in ((5, o), (6, o + sizes[r])):   # the record's start, then its end
            while block < usizes.shape[0] and at >= ustart + usizes[block]:
                ustart += usizes[block]
                cstart += csizes[block]
                block += 1
            out[row, r] = (cstart << 16) | (at - ustart)
        o += sizes[r]
