"""Where a run's BAM records go: straight out in read order, or coordinate-sorted by gpualign
itself (no separate `samtools sort` pass), then indexed.

Both sinks take a batch's records as numba-built bytes (records.batch_bam_records, the `encode`
they are given; a slice of a batch a task) on worker threads, so the next batch maps on the GPU
while this one is encoded. The sorted sink sorts each slice on its worker and appends it to one run
file beside the output, keeping only 16 bytes per read in memory (sort key, file offset); at the end a stable merge of the
keys gives the order, and records are gathered from the (page-cached) run file into BGZF blocks
compressed on all threads, their index fields read back as they go (bai.index_fields). Equal keys
keep input order, so the output does not depend on the batch size.
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
from .bai import build_bai, index_fields, virtual_offsets
from .bgzf import BamWriter
from ..jitcache import use_versioned_cache
from ..threads import ordered_map
from .. import trace

use_versioned_cache()  # before any @njit below

GATHER_RECORDS = 1 << 16   # records gathered per write of the final pass
GATHER_THREADS = 4         # gathering runs beside compression, which takes all threads


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
def gather(src, starts, ends, order):
    """The records order[...] of src (given by starts/ends), concatenated."""
    total = 0
    for j in range(order.shape[0]):
        total += ends[order[j]] - starts[order[j]]
    out = np.empty(total, dtype=np.uint8)
    o = 0
    for j in range(order.shape[0]):
        s = starts[order[j]]
        size = ends[order[j]] - s
        out[o:o + size] = src[s:s + size]
        o += size
    return out


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
                fields, writer = self.write_sorted()
            if self.index_path:
                with self.times("sorted BAM: index"):
                    self.write_index(fields, writer)
        finally:
            shutil.rmtree(self.tmpdir, ignore_errors=True)

    def write_sorted(self):
        keys = np.concatenate(self.keys) if self.keys else np.zeros(0, dtype=np.int64)
        ends = np.concatenate([s[1:] for s in self.starts]) if self.starts else np.zeros(0, dtype=np.int64)
        starts = np.concatenate([s[:-1] for s in self.starts]) if self.starts else ends
        self.keys = self.starts = None
        # batches are sorted runs in input order: a stable sort merges them, equal keys in input order
        order = np.argsort(keys, kind="stable")
        del keys
        src = (np.memmap(self.run.name, dtype=np.uint8, mode="r") if self.written
               else np.zeros(0, dtype=np.uint8))
        parts = (order[i:i + GATHER_RECORDS] for i in range(0, len(order), GATHER_RECORDS))
        fields = []

        def gather_part(part):
            with trace.span("gather sorted records"):
                records = gather(src, starts, ends, part)
                return records, (index_fields(records) if self.index_path else None)

        with BamWriter(self.path, self.header, self.level, self.threads) as out, \
                ThreadPoolExecutor(max_workers=GATHER_THREADS) as pool:
            for records, part_fields in ordered_map(pool, gather_part, parts, GATHER_THREADS):
                out.write(records)
                fields.append(part_fields)
        return fields, out

    def write_index(self, fields, writer):
        """The .bai from the records' fields and where the writer's blocks landed."""
        size, tid, pos, end, bins, flag = (np.concatenate(fields, axis=1) if fields
                                           else np.zeros((6, 0), dtype=np.int64))
        stream_end = writer.header_size + np.cumsum(size)
        blocks = np.asarray(writer.block_starts)
        vstart = virtual_offsets(stream_end - size, blocks, bgzf.BGZF_INPUT)
        vend = virtual_offsets(stream_end, blocks, bgzf.BGZF_INPUT)
        with open(self.index_path, "wb") as fh:
            fh.write(build_bai(len(self.header.references), tid, pos, end, bins, flag, vstart, vend))

    def abort(self):
        super().abort()
        self.run.close()
        shutil.rmtree(self.tmpdir, ignore_errors=True)
