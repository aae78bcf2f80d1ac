"""Cutting reads into mapper batches: the one place that knows insert-size blocks.

Single-end batches hold at most batch_size reads. Paired batches interleave mates (read 2i is R1
of fragment i, 2i+1 its R2) and hold whole blocks of fragments (options.Tuning.insert_block), each
block getting its own insert-size estimate (pairing.insert_estimates); a short last block joins the
one before it. So a read's placement depends on its block, never on the batch size or the number of chunks.
"""

from concurrent.futures import ThreadPoolExecutor

import numpy as np

from . import trace
from .fastq import exact_batches, mates_in_order, parsed, read_batches, read_pair_batches
from .options import TUNING
from .reads import Reads, concatenate, interleave, subset
from .threads import ordered_map

BLOCK = TUNING.insert_block   # the default: every function takes the block it cuts by
INTERLEAVING_THREADS = 3      # paired batches interleaved at once (nogil numba copies)


def block_starts(fragments: int, block: int) -> np.ndarray:
    """Start of each estimate block of a batch, plus the end; a short last block joins the one
    before it (so a run's short tail still gets an estimate from enough fragments)."""
    starts = list(range(0, fragments, block)) or [0]
    if len(starts) > 1 and fragments - starts[-1] < block // 2:
        starts.pop()
    return np.array(starts + [fragments], dtype=np.int64)


def fragments_per_batch(batch_size: int, block: int = BLOCK) -> int:
    """Fragments in a paired batch: batch_size reads rounded down to whole insert-size blocks (one
    at least), so every block's estimate sees the same fragments whatever the batch size."""
    return max(block, (batch_size // 2) // block * block)


def paired_batches(batches, block: int = BLOCK):
    """Batches of fragments (interleaved Reads) holding whole estimate blocks: the reader's batches
    already are whole blocks, and a final batch shorter than half a block is joined to the one
    before it, as block_starts joins a short last block."""
    held = None
    for batch in batches:
        if held is not None and len(batch) // 2 < block // 2:
            batch = concatenate([held, batch], batch.k)
            held = None
        if held is not None:
            yield held
        held = batch
    if held is not None:
        yield held


def block_of_fragments(starts: np.ndarray) -> np.ndarray:
    """The estimate block of each fragment, from block_starts."""
    return np.repeat(np.arange(len(starts) - 1, dtype=np.int64), np.diff(starts))


def as_batches(reads, batch_size: int, paired: bool = False, block: int = BLOCK):
    """Batches of at most batch_size reads, from one Reads or an iterable of Reads batches.
    Paired (interleaved mates): whole blocks of insert-size estimation, as paired_batches."""
    size = 2 * fragments_per_batch(batch_size, block) if paired else batch_size

    def cut():
        for batch in [reads] if isinstance(reads, Reads) else reads:
            if len(batch) <= size:
                yield batch
                continue
            batch = parsed(batch)   # a raw batch (fastq.RawReads) is cut as Reads
            for start in range(0, len(batch), size):
                yield subset(batch, start, min(len(batch), start + size))
    return paired_batches(cut(), block) if paired else cut()


def read_interleaved_pairs(path1: str, path2: str, k: int, batch_size: int, threads: int = 1, comments: bool = False,
                           block: int = BLOCK):
    """Paired batches for the mapper: mates interleaved (read 2i from path1, 2i+1 from path2), each
    batch whole blocks of insert-size estimation (fragments_per_batch). The interleaving copies every
    byte of a batch; done serially it paced the whole reader (about 0.1 s a batch of 62,500 pairs on
    the GPU host, where the mapper takes one in 0.05 s), so batches are interleaved side by side."""
    pairs = read_pair_batches(path1, path2, k, fragments_per_batch(batch_size, block), threads, comments)
    with ThreadPoolExecutor(max_workers=INTERLEAVING_THREADS, thread_name_prefix="interleave") as pool:
        yield from ordered_map(pool, interleaved, pairs, INTERLEAVING_THREADS + 1)


def interleaved(pair) -> Reads:
    with trace.span("interleave mates"):
        return interleave(*pair)


def read_smart_pairs(path: str, k: int, batch_size: int, threads: int = 1, comments: bool = False,
                     block: int = BLOCK):
    """Paired batches from one file (or `-`) of interleaved mates, as bwa mem -p reads it: consecutive
    records with the same name are mates (R1 first). Batches as read_interleaved_pairs gives them:
    read 2i is R1 of fragment i, 2i+1 its R2, each batch whole insert-size blocks."""
    size = 2 * fragments_per_batch(batch_size, block)
    checked = mates_in_order(read_batches(path, k, size, threads, comments=comments), path)
    return exact_batches(checked, size)


def read_interleaved_fastq(path: str, k: int, batch_size: int, threads: int = 1, allow_empty: bool = False,
                           comments: bool = False, block: int = BLOCK):
    """Paired batches from one FASTQ of interleaved mates (a paired chunk of split_reads, which checked
    the mates): exactly whole blocks a batch, so no batch splits a fragment."""
    size = 2 * fragments_per_batch(batch_size, block)
    return exact_batches(read_batches(path, k, size, threads, allow_empty, comments), size)
