"""Reads in chunks (stages split_reads and merge_chunks, with align.chunks > 1).

A sample's FASTQ is cut into N files of consecutive records (chunk c holds records
[c*n//N, (c+1)*n//N)), each aligned as its own job into a coordinate-sorted BAM, and the chunk
BAMs are merged (bam/merge.py, duplicates marked on the way out). Because the chunks keep the input
order and the merge breaks ties between files by their order, the merged BAM holds the records of
the unsplit run in the same order: every read is mapped on its own, so neither the split nor the
batch changes a result.
"""

import contextlib
import os

from ..atomic import atomic_path
from ..bam.merge import merge_sorted
from ..errors import InputError
from ..fastq import checked_records, chunks, cut_records, read_pair_batches
from ..batches import BLOCK, block_starts
from ..reads import RECORDS_ONLY, interleaved_fastq, subset

SPLIT_BATCH = 1 << 20   # records cut and checked at a time while splitting


def count_records(path: str, threads: int = 1) -> int:
    """Records in a FASTQ(.gz); raises the reader's InputError for a truncated or empty file."""
    return sum(n for _, n, _ in chunks(path, SPLIT_BATCH, threads))


def chunk_bounds(n: int, parts: int) -> list[int]:
    """First record of each chunk, then n: as equal as whole records allow."""
    return [c * n // parts for c in range(parts + 1)]


def open_chunk_writer(path: str):
    """Chunk files are plain FASTQ: they are temporary, and deflating them cost more than the
    alignment of a chunk (31 s for 10 M reads at ISA-L level 1 on the H200 host, single stream)."""
    return open(path, "wb", buffering=1 << 22)


def split_fastq(path: str, outputs: list[str], threads: int = 1) -> list[int]:
    """Cut a FASTQ(.gz) into len(outputs) plain FASTQ files of consecutive records; returns the
    records per chunk. A chunk may be empty (fewer reads than chunks): its file is then empty."""
    bounds = chunk_bounds(count_records(path, threads), len(outputs))
    sizes = [bounds[c + 1] - bounds[c] for c in range(len(outputs))]
    with contextlib.ExitStack() as stack:
        tmps = [stack.enter_context(atomic_path(out)) for out in outputs]
        writers = [stack.enter_context(open_chunk_writer(tmp)) for tmp in tmps]
        c, done = 0, 0   # current chunk, records written so far
        for data, n, first_line in chunks(path, SPLIT_BATCH, threads):
            checked_records(path, data, n, first_line)   # align's checks, with the original line numbers
            start, left = 0, n
            while left:
                while done == bounds[c + 1]:
                    c += 1
                take = min(left, bounds[c + 1] - done)
                # the batch holds exactly n whole records: the last piece ends where it ends; an
                # earlier one by newline count
                end = len(data) if take == left else cut_records(data, start, take)[0]
                writers[c].write(data[start:end])
                start, left, done = end, left - take, done + take
        for w in writers:
            w.close()
    return sizes


def split_pairs(path1: str, path2: str, outputs: list[str], threads: int = 1, block: int = BLOCK) -> list[int]:
    """Cut paired FASTQ files into len(outputs) plain FASTQ files of consecutive fragments, mates
    interleaved (R1, R2, R1, ...), as the mapper reads them; returns the reads per chunk.

    Chunks break only between insert-size blocks (batches.block_starts), so each block's estimate
    sees the fragments it sees in the unsplit run and the merged BAM equals the unsplit one.
    Records are written as the mapper read them (names without /1 /2, bases as ACGTN).
    """
    blocks = block_starts(count_records(path1, threads), block)
    nb = len(blocks) - 1
    bounds = [int(blocks[c * nb // len(outputs)]) for c in range(len(outputs))] + [int(blocks[-1])]
    with contextlib.ExitStack() as stack:
        tmps = [stack.enter_context(atomic_path(out)) for out in outputs]
        writers = [stack.enter_context(open_chunk_writer(tmp)) for tmp in tmps]
        c, done = 0, 0
        for a, b in read_pair_batches(path1, path2, RECORDS_ONLY, SPLIT_BATCH, threads):
            start = 0
            while start < len(a):
                while done == bounds[c + 1]:
                    c += 1
                take = min(len(a) - start, bounds[c + 1] - done)
                writers[c].write(interleaved_fastq(subset(a, start, start + take), subset(b, start, start + take)))
                start, done = start + take, done + take
        for w in writers:
            w.close()
    return [2 * (bounds[c + 1] - bounds[c]) for c in range(len(outputs))]


def merge_sorted_bams(inputs: list[str], out_bam: str, threads: int = 1, level: int = 1, header=None,
                      what: str = "chunk", markdup: bool = False, optical_distance: int = 0,
                      metrics: str | None = None, command: str = "gpualign workflow merge"):
    """One coordinate-sorted BAM + .bai from coordinate-sorted chunk (or unit) BAMs, in input order
    on ties (bam/merge.py). header: the output's (a dict or pysam.AlignmentHeader; default: the
    first input's, which chunks share). With markdup, duplicates are marked across all inputs as
    the BAM is written, and Picard-style metrics go to `metrics` if given. what: the word messages
    use for the inputs. Returns merge_sorted's summary."""
    for path in inputs:
        if not os.path.isfile(path):
            raise InputError(f"{what} BAM {path}: no such file")
    with contextlib.ExitStack() as stack:
        tmp_metrics = stack.enter_context(atomic_path(metrics)) if metrics else None
        tmp_bai = stack.enter_context(atomic_path(out_bam + ".bai"))
        tmp = stack.enter_context(atomic_path(out_bam))
        try:
            return merge_sorted(inputs, tmp, tmp_bai, header, threads, level, markdup, optical_distance,
                                tmp_metrics, command, output_name=out_bam)
        except InputError as err:
            raise InputError(f"merging {len(inputs)} {what} BAMs into {out_bam}: {err}") from None
