#!/usr/bin/env python3
"""How long the coordinate-sorted BAM writer (bam/sort.py SortedBam) takes after the last batch,
and what its per-slice work costs while mapping goes on, on millions of records without mapping.

The records are real ones (an unsorted BAM of gpualign's, say 200 k Mason reads) copied until
there are --records of them, each copy placed at random positions (pos, bin and sort key rewritten,
--unplaced of them made unmapped: one key shared by all), fed to SortedBam in the mapper's slices
(records.RECORDS_PER_TASK). Reports the summed per-slice time (worker threads), the summed time of
`consume` (the mapping thread), and the tail: from the last slice handed over to the BAM and .bai
written, in wall and CPU seconds (all threads; less sensitive to other load). Run it against
another checkout with PYTHONPATH=that/checkout to compare.

    gpualign map IDX reads.fq.gz -o u.bam --unsorted ; python bench/sorted_tail.py u.bam -n 3000000 -t 2
"""
import argparse
import contextlib
import gzip
import hashlib
import os
import struct
import tempfile
import time

import numpy as np
import pysam
from numba import njit

from gpualign import trace
from gpualign.bam import bai, sort
from gpualign.bam.records import RECORDS_PER_TASK, UNMAPPED_KEY


def read_records(path):
    """(header, uncompressed record bytes, record offsets) of a BAM."""
    with pysam.AlignmentFile(path, check_sq=False) as bam:
        header = bam.header
    data = gzip.open(path).read()
    l_text = struct.unpack_from("<i", data, 4)[0]
    o = 8 + l_text
    n_ref = struct.unpack_from("<i", data, o)[0]
    o += 4
    for _ in range(n_ref):
        o += 8 + struct.unpack_from("<i", data, o)[0]
    buf = np.frombuffer(data, dtype=np.uint8)[o:]
    size = bai.index_fields(buf)[0]
    return header, buf, np.concatenate(([0], np.cumsum(size)))


@njit(cache=True)
def place(buf, offsets, pos, unplaced):
    """Records moved to pos (their pos and bin rewritten), or made unmapped; their sort keys."""
    keys = np.empty(pos.shape[0], dtype=np.int64)
    for r in range(pos.shape[0]):
        o = offsets[r]
        fields = bai.index_fields(buf[o:offsets[r + 1]])
        span = fields[3, 0] - fields[2, 0]
        if unplaced[r]:
            refid, p, b, flag = -1, -1, 4680, (fields[5, 0] | 4) & ~16
            keys[r] = UNMAPPED_KEY
        else:
            refid, p, flag = fields[1, 0], pos[r], fields[5, 0]
            b = bai.reg2bin(p, p + span)
            keys[r] = (refid << 33) | (p << 1) | (1 if flag & 16 else 0)
        for i in range(4):
            buf[o + 4 + i] = (refid >> (8 * i)) & 0xFF
            buf[o + 8 + i] = (p >> (8 * i)) & 0xFF
        buf[o + 14], buf[o + 15] = b & 0xFF, b >> 8
        buf[o + 18], buf[o + 19] = flag & 0xFF, flag >> 8
    return keys


def synthetic(path, n, unplaced, rng):
    header, src, src_off = read_records(path)
    copies = -(-n // (len(src_off) - 1))
    sizes = np.tile(np.diff(src_off), copies)[:n]
    offsets = np.concatenate(([0], np.cumsum(sizes)))
    buf = np.tile(src, copies)[:offsets[-1]].copy()
    pos = rng.integers(0, header.lengths[0] - 200, size=n)
    keys = place(buf, offsets, pos, rng.random(n) < unplaced)
    return header, buf, offsets, keys


def run(header, buf, offsets, keys, out, threads, level):
    times = {}

    @contextlib.contextmanager
    def timed(stage):
        t = time.perf_counter()
        yield
        times[stage] = times.get(stage, 0.0) + time.perf_counter() - t

    slices = [(a, min(len(keys), a + RECORDS_PER_TASK)) for a in range(0, len(keys), RECORDS_PER_TASK)]

    def encode(a, b):
        return buf[offsets[a]:offsets[b]], offsets[a:b + 1] - offsets[a], keys[a:b]

    per_slice = sort.SortedBam.sorted_records
    consume = sort.SortedBam.consume

    def sorted_records(self, *item):
        with timed("per slice (worker threads)"):
            return per_slice(self, *item)

    def timed_consume(self, *item):
        with timed("consume (mapping thread)"):
            consume(self, *item)

    sort.SortedBam.sorted_records = sorted_records
    sort.SortedBam.consume = timed_consume
    try:
        sink = sort.SortedBam(out, header, encode, level, threads, index_path=out + ".bai", times=timed,
                              work_dir=os.path.dirname(out))
        t0 = time.perf_counter()
        for a, b in slices:
            sink.add(a, b)
        while sink.jobs:   # the slices still encoding: not the tail
            sink.consume(*sink.jobs.popleft().result())
        t1, c1 = time.perf_counter(), time.process_time()
        sink.close()
        t2, c2 = time.perf_counter(), time.process_time()
    finally:
        sort.SortedBam.sorted_records, sort.SortedBam.consume = per_slice, consume
    times["slices handed over"] = t1 - t0
    times["tail"] = t2 - t1
    times["tail CPU (all threads)"] = c2 - c1
    return times


def digest(path):
    return hashlib.sha1(open(path, "rb").read()).hexdigest()[:12]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("bam", help="an unsorted BAM whose records are copied")
    ap.add_argument("-n", "--records", type=int, default=3_000_000)
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("-l", "--level", type=int, default=1)
    ap.add_argument("--unplaced", type=float, default=0.02, help="fraction made unmapped")
    ap.add_argument("--repeat", type=int, default=2, help="runs (the first also compiles)")
    ap.add_argument("--workdir", default=tempfile.gettempdir())
    args = ap.parse_args()
    header, buf, offsets, keys = synthetic(args.bam, args.records, args.unplaced, np.random.default_rng(1))
    print(f"{len(keys)} records, {offsets[-1] / 1e6:.0f} MB, {len(keys) // RECORDS_PER_TASK + 1} slices, "
          f"{args.threads} threads, level {args.level}")
    out = os.path.join(args.workdir, "sorted_tail.bam")
    for rep in range(args.repeat):
        trace.write()
        times = run(header, buf, offsets, keys, out, args.threads, args.level)
        print(f"run {rep + 1}: " + ", ".join(f"{k} {v:.2f} s" for k, v in times.items())
              + f"; bam {digest(out)}, bai {digest(out + '.bai')}, {os.path.getsize(out) / 1e6:.1f} MB")
    trace.write()   # with GPUALIGN_TRACE set: the last run's steps, for bench/timeline.py


if __name__ == "__main__":
    main()
