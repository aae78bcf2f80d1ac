"""k-mer hash bins over the genome (stage index_reference).

`offsets[4**k + 1]` and `positions[]`: the genome positions whose k-mer has code c are
positions[offsets[c]:offsets[c+1]], ascending (a counting sort). A k-mer's code is its bases
read as a base-4 number, first base most significant. k-mers that touch an N or cross a contig
boundary are left out. Bins holding more than `max_occ` positions are kept but skipped by the
mapper (they are repeats that seed nothing useful); how many there are is recorded.
"""

import time
from dataclasses import dataclass

import numpy as np

from .atomic import atomic_path
from .errors import InputError
from .genome import Genome

MAX_K = 14  # 4**14 bins of uint32 is 1 GiB; more is not an index for short reads


@dataclass
class KmerIndex:
    k: int
    max_occ: int
    offsets: np.ndarray     # int64 [4**k + 1]
    positions: np.ndarray   # uint32

    @property
    def capped_bins(self) -> int:
        return int(np.count_nonzero(np.diff(self.offsets) > self.max_occ))


def kmer_codes(codes: np.ndarray, k: int):
    """Code of the k-mer starting at each position, and whether it is free of N."""
    n = len(codes) - k + 1
    if n <= 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool)
    km = np.zeros(n, dtype=np.int64)
    clean = np.ones(n, dtype=bool)
    for x in range(k):
        c = codes[x:x + n]
        km = km * 4 + (c & 3)
        clean &= c < 4
    return km, clean


def build_index(genome: Genome, k: int = 8, max_occ: int = 500, chunk: int = 1 << 24, progress=None) -> KmerIndex:
    if not 4 <= k <= MAX_K:
        raise InputError(f"index k={k}: must be between 4 and {MAX_K}")
    counts = np.zeros(4 ** k + 1, dtype=np.int64)
    per_chunk = []
    start, done, last = time.perf_counter(), 0, 0.0
    for cstart, clen in zip(genome.offsets, genome.lengths):
        for s in range(0, int(clen), chunk):
            e = min(int(clen), s + chunk + k - 1)   # overlap so no k-mer is lost at chunk edges
            km, clean = kmer_codes(genome.codes(int(cstart) + s, int(cstart) + e), k)
            pos = np.flatnonzero(clean).astype(np.int64)
            km = km[pos]
            per_chunk.append((km, (pos + cstart + s).astype(np.uint32)))
            counts[1:] += np.bincount(km, minlength=4 ** k)
            done += min(int(clen) - s, chunk)
            if progress and time.perf_counter() - last >= 5:
                last = time.perf_counter()
                progress(f"counted k-mers of {done}/{genome.size} bp ({done / (last - start) / 1e6:.1f} Mbp/s)")
    offsets = np.cumsum(counts)
    positions = np.empty(int(offsets[-1]), dtype=np.uint32)
    fill = offsets[:-1].copy()
    for km, pos in per_chunk:   # chunks come in genome order, so each bin stays ascending
        order = np.argsort(km, kind="stable")
        km, pos = km[order], pos[order]
        first = np.searchsorted(km, km, side="left")
        slot = fill[km] + (np.arange(len(km)) - first)
        positions[slot] = pos
        fill += np.bincount(km, minlength=4 ** k)
    index = KmerIndex(k, max_occ, offsets, positions)
    if progress:
        took = time.perf_counter() - start
        progress(f"index built: {genome.size} bp in {took:.1f} s ({genome.size / max(took, 1e-9) / 1e6:.1f} Mbp/s)")
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


def save_index(index: KmerIndex, path: str, genome_size: int):
    with atomic_path(path) as tmp:
        np.savez(tmp, k=index.k, max_occ=index.max_occ, offsets=index.offsets,
                 positions=index.positions, genome_size=genome_size, capped_bins=index.capped_bins)


def load_index(path: str) -> KmerIndex:
    with np.load(path) as z:
        return KmerIndex(int(z["k"]), int(z["max_occ"]), z["offsets"], z["positions"])
