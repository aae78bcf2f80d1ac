"""Where a run's BAM records go: straight out in read order, or coordinate-sorted by gpualign
itself (no separate `samtools sort` pass), then indexed.

Both sinks take a batch's records as numba-built bytes (records.batch_bam_records, the `encode`
they are given; a slice of a batch a task) on worker threads, so the next batch maps on the GPU
while this one is encoded. The sorted sink sorts each slice on its worker and appends it to one run
file beside the output, keeping only 24 bytes per read in memory (sort key, record start and end).

After the last batch nothing runs on one thread alone: the final order is cut into parts by key
ranges (boundaries drawn from the keys themselves, so they depend neither on the batches nor on the
threads), and each part is one task on all threads: its records found in every sorted run by
binary search, ordered (key, then input order), gathered from the page-cached run file, their
index fields read back (bai.index_fields) and compressed into BGZF blocks of its own. The main
thread only writes the parts in order. Equal keys keep input order, so the output does not depend
on the batch size; a part's last block may be short, which BGZF allows.
"""

import collections
import contextlib
import os
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from numba import njit

from . import bgzf
from .bai import build_bai, index_fields
from .bgzf import BGZF_EOF, BamWriter, bgzf_block, header_bytes
from .deflate import compress_blocks
from .records import UNMAPPED_KEY
from ..output import open_binary
from ..jitcache import use_versioned_cache
from ..threads import ordered_map
from .. import trace

use_versioned_cache()  # before any @njit below

PART_RECORDS = 1 << 16   # records of a part of the final pass, about: one task
SAMPLE_EVERY = 64         # 1 key value in about this many (by a hash of the value) draws the parts' boundaries


@njit(cache=True, nogil=True)
def sort_batch(buf, offsets, keys):
    """A batch's records reordered by key (stable): (bytes, record offsets, keys)."""
    order = np.argsort(keys, kind="mergesort")
    out = np.empty_like(buf)
    out_off = np.zeros(offsets.shape[0], dtype=np.int64)
    for j in range(order.shape[0]):
        r = order[j]
        size = offsets[r + 1] - offsets[r]
        out[out_off[j]:out_off[j] + size] = buf[offsets[r]:offsets[r + 1]]
        out_off[j + 1] = out_off[j] + size
    return out, out_off, keys[order]


@njit(cache=True, nogil=True)
def gather_part(src, keys, starts, ends, lo, hi):
    """The records of rows lo[j]..hi[j] of every sorted run j (rows of the runs' concatenated
    key/start/end arrays), in final order: by key, ties in run order then row order (input order)."""
    n = 0
    for j in range(lo.shape[0]):
        n += hi[j] - lo[j]
    rows = np.empty(n, dtype=np.int64)
    o = 0
    for j in range(lo.shape[0]):
        for x in range(lo[j], hi[j]):
            rows[o] = x
            o += 1
    rows = rows[np.argsort(keys[rows], kind="mergesort")]   # stable
    total = 0
    for x in rows:
        total += ends[x] - starts[x]
    out = np.empty(total, dtype=np.uint8)
    o = 0
    for x in rows:
        size = ends[x] - starts[x]
        out[o:o + size] = src[starts[x]:starts[x] + size]
        o += size
    return out


def part_boundaries(keys: np.ndarray, part_records: int) -> np.ndarray:
    """Key values that cut the placed records into parts of about part_records: every
    (part_records / SAMPLE_EVERY)-th of the distinct values a hash of the value picks out, so the cut
    depends on the keys alone, not on where they came from."""
    placed = keys[keys != UNMAPPED_KEY]
    mixed = (placed.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(40)
    sample = np.unique(placed[mixed % np.uint64(SAMPLE_EVERY) == 0])
    return sample[max(1, part_records // SAMPLE_EVERY)::max(1, part_records // SAMPLE_EVERY)]


def part_rows(keys, run_off, part_records):
    """(lo, hi) of each part: for every run, the rows it gives to the part (the runs' rows are
    indices into their concatenated arrays). Parts by key range, in key order; the unplaced records
    (one key) last, cut into parts by run, as they are already in order."""
    bounds = part_boundaries(keys, part_records)
    edges = np.append(bounds, UNMAPPED_KEY)
    runs = len(run_off) - 1
    cut = np.empty((runs, len(edges) + 2), dtype=np.int64)   # per run: 0, each edge, its end
    for j in range(runs):
        a, b = run_off[j], run_off[j + 1]
        cut[j, 0], cut[j, -1] = a, b
        cut[j, 1:-1] = a + np.searchsorted(keys[a:b], edges)
    parts = [(cut[:, i], cut[:, i + 1]) for i in range(len(edges))]
    rank = 0   # the unplaced rows (the last column), in input order: cut every part_records of them
    for j in range(runs):
        a, b = cut[j, -2], cut[j, -1]
        while a < b:
            if rank % part_records == 0:
                parts.append((cut[:, -1].copy(), cut[:, -1].copy()))   # every run empty, so far
            take = min(b - a, part_records - rank % part_records)
            parts[-1][0][j], parts[-1][1][j] = a, a + take
            a += take
            rank += take
    return parts


def compress_part(data, level):
    """BGZF blocks of data: (bytes, compressed sizes, uncompressed sizes) of its blocks."""
    step = bgzf.BGZF_INPUT
    usizes = np.array([min(step, len(data) - i) for i in range(0, len(data), step)], dtype=np.int64)
    with trace.span("compress BGZF"):
        if compress_blocks is not None and 1 <= level <= 3:
            blocks, csizes = compress_blocks(data, step, level)
            return blocks, csizes, usizes
        parts = [bgzf_block(data[i:i + step], level) for i in range(0, len(data), step)]
        return b"".join(parts), np.array([len(b) for b in parts], dtype=np.int64), usizes


class RecordSink:
    """Encodes items (a batch and its result, or a slice of them: whatever `encode` takes) on worker
    threads and hands their records to `consume` in input order."""

    def __init__(self, encode, threads: int):
        self.encode = encode
        self.workers = max(1, threads)
        self.pool = ThreadPoolExecutor(max_workers=self.workers)
        self.jobs = collections.deque()

    def add(self, *item):
        self.jobs.append(self.pool.submit(self.encode, *item))
        while self.jobs and (len(self.jobs) > self.workers or self.jobs[0].done()):
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

    def consume(self, buf, offsets, keys):
        self.writer.write(buf)

    def close(self):
        self.finish()
        self.writer.close()

    def abort(self):
        super().abort()
        self.writer.abort()


class SortedBam(RecordSink):
    """Records in coordinate order, then a .bai index (at `index_path`)."""

    def __init__(self, path, header, encode, level, threads, index_path=None, times=None, work_dir=None):
        super().__init__(lambda *item: self.sorted_records(*encode(*item)), threads)
        self.path, self.header, self.level, self.threads = path, header, level, threads
        self.index_path = index_path
        self.times = times or (lambda stage: contextlib.nullcontext())
        # named after the output (an atomic_path temporary), so a rerun clears it if this process
        # dies; work_dir None (a stream output, /dev/null say): the system's temporary folder
        base = os.path.basename(path)
        self.tmpdir = tempfile.mkdtemp(prefix=f"{base if base.startswith('.') else '.' + base}.sort-",
                                       dir=work_dir)
        self.run = open(os.path.join(self.tmpdir, "records.bin"), "wb")
        self.written = 0
        self.keys, self.starts = [], []

    @staticmethod
    def sorted_records(buf, offsets, keys):
        with trace.span("sort batch records"):
            return sort_batch(buf, offsets, keys)

    def consume(self, buf, offsets, keys):
        with trace.span("write sorted run"):
            self.run.write(buf)
        self.keys.append(keys)
        self.starts.append(offsets + self.written)
        self.written += len(buf)

    def close(self):
        try:
            with self.times("BAM records (wait)"):
                self.finish()
                self.run.close()
            with self.times("sorted BAM: merge and compress"):
                written = self.write_sorted()
            if self.index_path:
                with self.times("sorted BAM: index"):
                    self.write_index(written)
        finally:
            shutil.rmtree(self.tmpdir, ignore_errors=True)

    def write_sorted(self):
        """The sorted BAM, parts gathered and compressed on all threads; what the .bai needs."""
        keys = np.concatenate(self.keys) if self.keys else np.zeros(0, dtype=np.int64)
        ends = np.concatenate([s[1:] for s in self.starts]) if self.starts else np.zeros(0, dtype=np.int64)
        starts = np.concatenate([s[:-1] for s in self.starts]) if self.starts else ends
        run_off = np.concatenate(([0], np.cumsum([len(k) for k in self.keys]))).astype(np.int64)
        self.keys = self.starts = None
        src = (np.memmap(self.run.name, dtype=np.uint8, mode="r") if self.written
               else np.zeros(0, dtype=np.uint8))

        def header_part(_):
            data = np.frombuffer(header_bytes(self.header), dtype=np.uint8)
            return (*compress_part(data, self.level), None)

        def part(rows):
            with trace.span("gather sorted records"):
                records = gather_part(src, keys, starts, ends, *rows)
                fields = index_fields(records) if self.index_path else None
            return (*compress_part(records, self.level), fields)

        tasks = [(header_part, None)] + [(part, rows) for rows in part_rows(keys, run_off, PART_RECORDS)]
        written = []   # (compressed sizes, uncompressed sizes, index fields) of each task, in order
        with open_binary(self.path) as fh, ThreadPoolExecutor(max_workers=self.threads) as pool:
            for blocks, csizes, usizes, fields in ordered_map(pool, lambda t: t[0](t[1]), iter(tasks),
                                                               2 * self.threads):
                fh.write(blocks)
                written.append((csizes, usizes, fields))
            fh.write(BGZF_EOF)
        return written

    def write_index(self, written):
        """The .bai from the records' fields and where their blocks landed."""
        csizes = np.concatenate([c for c, _, _ in written])
        usizes = np.concatenate([u for _, u, _ in written])
        fields = [f for _, _, f in written[1:]]
        size, tid, pos, end, bins, flag = (np.concatenate(fields, axis=1) if fields
                                           else np.zeros((6, 0), dtype=np.int64))
        header = int(written[0][1].sum())
        stream_end = header + np.cumsum(size)
        ustart = np.concatenate(([0], np.cumsum(usizes)))    # every block, and the EOF block last
        cstart = np.concatenate(([0], np.cumsum(csizes)))
        vstart = stream_virtual_offsets(stream_end - size, ustart, cstart)
        vend = stream_virtual_offsets(stream_end, ustart, cstart)
        with open(self.index_path, "wb") as fh:
            fh.write(build_bai(len(self.header.references), tid, pos, end, bins, flag, vstart, vend))

    def abort(self):
        super().abort()
        self.run.close()
        shutil.rmtree(self.tmpdir, ignore_errors=True)


def stream_virtual_offsets(offsets, ustart, cstart):
    """Virtual offsets of positions in the uncompressed stream, given where each block starts in it
    (ustart) and in the file (cstart); a position at a block's end points to the next block's start."""
    block = np.searchsorted(ustart, offsets, side="right") - 1
    return (cstart[block].astype(np.uint64) << np.uint64(16)) | (offsets - ustart[block]).astype(np.uint64)
