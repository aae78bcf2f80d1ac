"""k-mer hash bins over the genome (stage index_reference).

`offsets[4**k + 1]` and `positions[]`: the genome positions whose k-mer has code c are
positions[offsets[c]:offsets[c+1]], ascending (a counting sort). A k-mer's code is its bases
read as a base-4 number, first base most significant. k-mers that touch an N or cross a contig
boundary are left out. Bins holding more than `max_occ` positions are kept but skipped by the
mapper (they are repeats that seed nothing useful); how many there are is recorded.
"""

import os
import time
import zipfile
from dataclasses import dataclass

import numba
import numpy as np
from numba import njit, prange

from .atomic import atomic_path
from .encode import base_at
from .errors import InputError
from .genome import Genome
from .jitcache import use_versioned_cache
from .options import AUTO_K, MAX_K, IndexParams

use_versioned_cache()  # before any @njit below

DEFAULTS = IndexParams()


@dataclass
class KmerIndex:
    k: int
    max_occ: int
    offsets: np.ndarray     # OFFSET [4**k + 1]
    positions: np.ndarray   # uint32

    @property
    def capped_bins(self) -> int:
        return bins_over(self.offsets, self.max_occ)


OFFSET = np.uint32   # a bin's offset: the index holds genomes under 4 Gbp, so 4 bytes (a human index's offsets: 1 GiB)
NO_KMER = np.uint32(0xFFFFFFFF)   # a k-mer start whose k bases hold an N (codes are below 4**MAX_K = 2**28)
PIECE = 1 << 20                   # k-mer starts of a piece: the unit of parallel code computing


@njit(cache=True, nogil=True, parallel=True)
def piece_codes(g_packed, g_nmask, starts, firsts, lasts, piece_off, k, codes, where):
    """For each piece (contig start, first and last k-mer start), on parallel threads: the code of
    every k-mer start i at codes[piece_off[x] + i - first] (NO_KMER where its k bases hold an N) and
    its genome position at where[...]. A rolling code over the 2-bit genome."""
    mask = (1 << (2 * k)) - 1
    for x in prange(len(starts)):
        cstart, first, out = starts[x], firsts[x], piece_off[x]
        km = 0
        valid = 0
        for i in range(first, lasts[x] + k - 1):
            c = base_at(g_packed, g_nmask, cstart + i)
            if c == 4:
                valid = 0
            else:
                km = ((km << 2) | c) & mask
                valid += 1
            p = i - k + 1
            if p >= first:
                codes[out + p - first] = km if valid >= k else NO_KMER
                where[out + p - first] = cstart + p


@njit(cache=True, nogil=True, parallel=True)
def bins_by_range(codes, where, n, bounds, bins, positions, count_only):
    """The first n k-mer starts, once for each range of codes [bounds[j], bounds[j + 1]), the ranges
    on parallel threads: counted into bins[c + 1], or, with count_only False, their positions put at
    bins[c]++ (where each bin's next position goes). No two threads touch one bin, and each bin's
    positions are placed in genome order, so the result does not depend on the threads."""
    for j in prange(len(bounds) - 1):
        lo, hi = bounds[j], bounds[j + 1]
        for y in range(n):
            c = codes[y]
            if lo <= c < hi:
                if count_only:
                    bins[c + 1] += 1
                else:
                    positions[bins[c]] = where[y]
                    bins[c] += 1


@njit(cache=True, nogil=True)
def bins_over(offsets, max_occ):
    """Bins holding more than max_occ positions, counted without a temporary the size of the offsets
    (1 GiB at k=14)."""
    n = 0
    for c in range(len(offsets) - 1):
        if offsets[c + 1] - offsets[c] > max_occ:
            n += 1
    return n


@njit(cache=True, nogil=True)
def shift_right(offsets):
    """offsets[c] = offsets[c - 1], offsets[0] = 0, in place: placing moved each bin's start to the
    next bin's, where it belongs."""
    for c in range(len(offsets) - 1, 0, -1):
        offsets[c] = offsets[c - 1]
    offsets[0] = 0


def genome_pieces(genome: Genome, k: int, chunk: int):
    """The genome's k-mer starts in genome order, in groups of about `chunk` (a progress step), each
    group as pieces of at most PIECE: (contig starts, first starts, last starts, where each piece's
    codes begin) arrays, and the group's size."""
    group, size = [], 0
    piece = max(1, min(chunk, PIECE))
    for cstart, clen in zip(genome.offsets, genome.lengths):
        for s in range(0, max(0, int(clen) - k + 1), piece):
            e = min(int(clen) - k + 1, s + piece)
            group.append((int(cstart), s, e, size))
            size += e - s
            if size >= chunk:
                yield tuple(np.array(col, dtype=np.int64) for col in zip(*group)), size
                group, size = [], 0
    if group:
        yield tuple(np.array(col, dtype=np.int64) for col in zip(*group)), size


def code_ranges(offsets, parts: int, count_only: bool) -> np.ndarray:
    """Bounds of `parts` ranges of k-mer codes: equal ranges for counting; for placing, ranges of
    about equal positions (offsets counted), so no thread is left with the genome's big bins alone."""
    bins = len(offsets) - 1
    if count_only:
        return np.linspace(0, bins, parts + 1).astype(np.int64)
    cuts = np.searchsorted(offsets, np.linspace(0, offsets[-1], parts + 1)[1:-1], side="left")
    return np.unique(np.concatenate([[0], cuts, [bins]])).astype(np.int64)


AUTO_MIN_K = 8   # the design's 8-mer bins: the smallest k auto picks (a phage, the demo)


def auto_k(genome_size: int) -> int:
    """k for a genome of this size: the smallest from AUTO_MIN_K to MAX_K with 4^k >= the genome's size,
    so a k-mer occurs about once at random and a seed's bin holds few chance positions. On E. coli that is
    12, which seeded 2.5x faster than 10 at the same accuracy (BENCHMARKS.md, "k for bacterial genomes");
    a human chromosome gets 13 and a human genome 14 (its offsets are 1 GiB, the most MAX_K allows)."""
    k = AUTO_MIN_K
    while k < MAX_K and 4 ** k < genome_size:
        k += 1
    return k


def chosen_k(k, genome_size: int, progress=None) -> int:
    """k itself, or for AUTO_K the genome's auto_k, said in a progress line."""
    if k != AUTO_K:
        return int(k)
    k = auto_k(genome_size)
    if progress:
        progress(f"k={k} chosen for a genome of {genome_size} bp: the smallest k from {AUTO_MIN_K} to {MAX_K} with "
                 f"4^k >= the genome's size (-k sets another)")
    return k


def index_memory(genome_size: int, k: int, chunk: int = 1 << 24) -> int:
    """Bytes build_index holds beyond the (memory-mapped) genome: 4 a bin, 4 a position, and a group's
    codes and positions (8 a k-mer start)."""
    return 4 * (4 ** k + 1) + 4 * genome_size + 8 * min(chunk + PIECE, genome_size)


def build_index(genome: Genome, k: int = DEFAULTS.k, max_occ: int = DEFAULTS.max_occ, threads: int = 1,
                chunk: int = 1 << 24, progress=None) -> KmerIndex:
    """Counting sort of all k-mer positions, in two passes over the genome: one counts each bin's
    positions, in place in what become the offsets; the other places each position at its bin's next
    slot, in genome order (so each bin is ascending). The genome goes by in groups of about `chunk`
    k-mer starts: their codes are computed once (piece_codes, pieces on parallel threads), then each
    of `threads` ranges of codes is counted or placed by a thread of its own (bins_by_range), with a
    progress line (and an estimate of the time left) every few seconds. Memory: index_memory.
    k = AUTO_K picks it from the genome's size (auto_k)."""
    IndexParams(k, max_occ).check()
    k = chosen_k(k, genome.size, progress)
    if genome.size >= 1 << 32:
        raise InputError(f"genome of {genome.size} bp: the index holds positions below 4 Gbp (2^32) only; "
                         "split the reference into parts under 4 Gbp and index each")
    parts = max(1, int(threads))   # ranges of codes; numba runs as many at once as it has threads
    saved = numba.get_num_threads()
    numba.set_num_threads(min(parts, numba.config.NUMBA_NUM_THREADS))
    try:
        offsets = np.zeros(4 ** k + 1, dtype=OFFSET)
        positions = np.zeros(0, dtype=np.uint32)
        room = min(chunk + PIECE, max(genome.size, 1))   # a group's k-mer starts, at most
        codes, where = np.empty(room, dtype=np.uint32), np.empty(room, dtype=np.uint32)
        start, last = time.perf_counter(), time.perf_counter()
        total = 2 * genome.size
        done = 0
        for count_only in (True, False):
            if not count_only:
                np.cumsum(offsets, dtype=OFFSET, out=offsets)   # under 2^32: the genome is under 4 Gbp
                positions = np.empty(int(offsets[-1]), dtype=np.uint32)
            bounds = code_ranges(offsets, parts, count_only)
            for (starts, firsts, lasts, piece_off), size in genome_pieces(genome, k, chunk):
                piece_codes(genome.packed, genome.nmask, starts, firsts, lasts, piece_off, k, codes, where)
                bins_by_range(codes, where, size, bounds, offsets, positions, count_only)
                done += size
                if progress and time.perf_counter() - last >= 5:
                    last = time.perf_counter()
                    left = (last - start) * (total - done) / max(done, 1)
                    progress(f"{'counting' if count_only else 'placing'} k-mers (pass {1 if count_only else 2} "
                             f"of 2): {done - (0 if count_only else genome.size)}/{genome.size} bp, "
                             f"{last - start:.0f} s, about {left:.0f} s left")
            if not count_only:
                shift_right(offsets)
    finally:
        numba.set_num_threads(saved)
    index = KmerIndex(k, max_occ, offsets, positions)
    if progress:
        took = time.perf_counter() - start
        progress(f"index built: {genome.size} bp in {took:.1f} s ({genome.size / max(took, 1e-9) / 1e6:.1f} Mbp/s, "
                 f"{parts} thread{'s' if parts > 1 else ''})")
    warning = small_k_warning(index)
    if warning and progress:
        progress(warning)
    return index


def suggested_k(genome_size: int, max_occ: int) -> int:
    """Smallest k whose bins hold, on average, no more than max_occ / 16 positions."""
    k = 4
    while k < MAX_K and genome_size * 16 > max_occ * 4 ** k:
        k += 1
    return k


def small_k_warning(index: KmerIndex) -> str | None:
    """A warning when k is too small for the genome: most seeds would fall in skipped bins."""
    size = len(index.positions)
    mean = size / 4 ** index.k
    if mean * 4 <= index.max_occ:
        return None
    return (f"WARNING: k={index.k} is small for a genome of {size} indexed positions: a bin holds "
            f"{mean:.0f} positions on average and {index.capped_bins} bins exceed max_occ={index.max_occ} "
            f"(their seeds are skipped), so many reads will not map; use k={suggested_k(size, index.max_occ)}")


def save_index(index: KmerIndex, path: str, genome_size: int, genome: str):
    """Write the index; `genome` is the prefix of its genome image (PREFIX.2bit.npy, ...), relative
    to the index's folder: the index is found by its own prefix (path less .idx.npz), the genome
    through it, so `gpualign index` (genome and index share a prefix) and the workflow (one genome,
    an index per k) both give prefixes `gpualign map` accepts."""
    with atomic_path(path) as tmp:
        np.savez(tmp, k=index.k, max_occ=index.max_occ, offsets=index.offsets,
                 positions=index.positions, genome_size=genome_size, capped_bins=index.capped_bins,
                 genome=np.array(genome))


def genome_of_index(path: str) -> str:
    """The genome image's prefix of the index at `path` (an index of before this field: its own)."""
    with np.load(path) as z:
        name = str(z["genome"]) if "genome" in z.files else os.path.basename(path)[:-len(".idx.npz")]
    return os.path.join(os.path.dirname(path), name)


def load_index(path: str) -> KmerIndex:
    """The index at path; its big arrays memory-mapped (copy on write) where stored uncompressed, as
    save_index writes them, so loading reads nothing until a bin is looked up or the GPU copy is made."""
    with np.load(path) as z:
        def array(name):
            mapped = mapped_member(path, z.zip, name)
            return z[name] if mapped is None else mapped
        offsets = array("offsets")
        if offsets.dtype != OFFSET:   # an index of before OFFSET (int64): the kernels take OFFSET
            offsets = np.array(offsets, dtype=OFFSET)
        return KmerIndex(int(z["k"]), int(z["max_occ"]), offsets, array("positions"))


def mapped_member(path: str, archive: zipfile.ZipFile, name: str):
    """Array `name` of an .npz memory-mapped (copy on write) from where its .npy sits in the zip, or
    None where it cannot be (compressed, or not a plain array)."""
    info = archive.getinfo(name + ".npy")
    if info.compress_type != zipfile.ZIP_STORED:
        return None
    with open(path, "rb") as fh:
        fh.seek(info.header_offset)
        local = fh.read(30)   # the local file header: its name and extra lengths say where data starts
        if local[:4] != b"PK\x03\x04":
            return None
        fh.seek(info.header_offset + 30 + int.from_bytes(local[26:28], "little")
                + int.from_bytes(local[28:30], "little"))
        version = np.lib.format.read_magic(fh)
        read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                       else np.lib.format.read_array_header_2_0)
        shape, fortran, dtype = read_header(fh)
        if dtype.hasobject or fortran:
            return None
        return np.memmap(path, dtype=dtype, mode="c", offset=fh.tell(), shape=shape)
