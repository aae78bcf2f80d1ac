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

import numpy as np
from numba import njit

from .atomic import atomic_path
from .encode import base_at
from .genome import Genome
from .jitcache import use_versioned_cache
from .options import MAX_K, IndexParams

use_versioned_cache()  # before any @njit below

DEFAULTS = IndexParams()


@dataclass
class KmerIndex:
    k: int
    max_occ: int
    offsets: np.ndarray     # int64 [4**k + 1]
    positions: np.ndarray   # uint32

    @property
    def capped_bins(self) -> int:
        return int(np.count_nonzero(np.diff(self.offsets) > self.max_occ))


@njit(cache=True, nogil=True)
def kmers_in(g_packed, g_nmask, cstart, first, last, k, counts, fill, positions, count_only):
    """The k-mers starting at contig offsets [first, last) (each inside the contig): counted into
    counts[code + 1], or, with count_only False, their genome positions put at fill[code]++.

    A rolling code over the 2-bit genome; a run of fewer than k N-free bases makes no k-mer.
    """
    mask = (1 << (2 * k)) - 1
    km = 0
    valid = 0
    for i in range(first, last + k - 1):
        c = base_at(g_packed, g_nmask, cstart + i)
        if c == 4:
            valid = 0
            continue
        km = ((km << 2) | c) & mask
        valid += 1
        if valid >= k:
            p = i - k + 1
            if count_only:
                counts[km + 1] += 1
            else:
                positions[fill[km]] = cstart + p
                fill[km] += 1


def build_index(genome: Genome, k: int = DEFAULTS.k, max_occ: int = DEFAULTS.max_occ, chunk: int = 1 << 24,
                progress=None) -> KmerIndex:
    """Counting sort of all k-mer positions: one pass counts, a second fills in genome order (so
    each bin is ascending). `chunk` k-mer starts are done between progress checks."""
    IndexParams(k, max_occ).check()
    counts = np.zeros(4 ** k + 1, dtype=np.int64)
    start, last = time.perf_counter(), 0.0
    offsets = fill = positions = None
    for count_only in (True, False):
        if not count_only:
            offsets = np.cumsum(counts)
            fill = offsets[:-1].copy()
            positions = np.empty(int(offsets[-1]), dtype=np.uint32)
        done = 0
        for cstart, clen in zip(genome.offsets, genome.lengths):
            for s in range(0, max(0, int(clen) - k + 1), chunk):
                e = min(int(clen) - k + 1, s + chunk)
                kmers_in(genome.packed, genome.nmask, int(cstart), s, e, k, counts,
                         fill if fill is not None else counts, positions if positions is not None
                         else np.zeros(0, dtype=np.uint32), count_only)
                done += e - s
                if progress and time.perf_counter() - last >= 5:
                    last = time.perf_counter()
                    progress(f"{'counting' if count_only else 'placing'} k-mers (pass {1 if count_only else 2} "
                             f"of 2): {done}/{genome.size} bp, {last - start:.0f} s")
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
        return KmerIndex(int(z["k"]), int(z["max_occ"]), array("offsets"), array("positions"))


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
