"""How bases, reads and candidate loci are encoded: the layouts every stage shares.

- Bases: the one ACGTN table. Code 0-3 = A C G T, 4 = N (and anything not ACGT).
- 2-bit packing: 16 bases a uint32 word, base i in bits 2*(i % 16) .. +1 of word i // 16 (N packed
  as A and flagged in a separate mask of one bit a base); one spare zero word at the end lets
  kernels read word q+1 without a bounds check. The genome image and each read use it alike.
- Reads carry their reverse complements (precomputed, so both strands are mapped alike), a header
  bin (the code of the first k bases, -1 when shorter than k or holding an N) and an FNV-1a hash of
  the name (seeds the deterministic choice between equally good placements).
- Candidate keys pack (strand, diagonal) into one int64 that sorts by strand then diagonal:
  key = strand * STRAND_BIT + diagonal + DIAG_BIAS, diagonal = genome position of read base 0.
- CIGAR operations use BAM's op codes.

Integer rules that keep the CUDA simulator, numba-CPU and numba-CUDA in agreement: word
arithmetic is done on non-negative values and every left shift is masked back to 32 bits
(numba widens `uint32 << int` to 64 bits on the GPU).
"""

from .jitcache import use_versioned_cache

use_versioned_cache()  # before any @njit below: numba picks the cache folder at decoration

import numpy as np
from numba import njit

STRAND_BIT = 1 << 40
DIAG_BIAS = 1 << 20         # > longest read, so diagonals left of the genome start stay positive
MASK32 = 0xFFFFFFFF
# BAM CIGAR operation codes, and their letters
OP_M, OP_I, OP_D, OP_S = 0, 1, 2, 4
CIGAR_CHARS = np.frombuffer(b"MIDNSHP=X", dtype=np.uint8)


# byte -> base code; N and anything not ACGT (either case) -> 4
CODE = np.full(256, 4, dtype=np.uint8)
for _i, _c in enumerate(b"ACGT"):
    CODE[_c] = _i
    CODE[ord(chr(_c).lower())] = _i
BASES = np.frombuffer(b"ACGTN", dtype=np.uint8)   # base code -> letter
COMPLEMENT = np.array([3, 2, 1, 0, 4], dtype=np.uint8)   # base code -> its complement's; N stays N


def pack_codes(codes: np.ndarray) -> np.ndarray:
    """2-bit pack base codes (N packed as A); one spare zero word at the end."""
    nwords = (len(codes) + 15) // 16 + 1
    padded = np.zeros(nwords * 16, dtype=np.uint32)
    padded[:len(codes)] = codes & 3
    shifts = (np.arange(16, dtype=np.uint32) * 2)
    return np.bitwise_or.reduce(padded.reshape(-1, 16) << shifts, axis=1).astype(np.uint32)


def pack_nmask(codes: np.ndarray) -> np.ndarray:
    """One bit a base, set for N; one spare zero word at the end."""
    bits = np.packbits(codes == 4, bitorder="little")
    nbytes = ((len(codes) + 31) // 32 + 1) * 4
    out = np.zeros(nbytes, dtype=np.uint8)
    out[:len(bits)] = bits
    return out.view("<u4").astype(np.uint32)


@njit(cache=True, nogil=True)
def pack_into(codes, start, packed, nmask):
    """Base codes (0-3, 4 for N) put at genome positions start, start + 1, ... of zeroed 2-bit words
    and N-mask words, as pack_codes and pack_nmask lay them out (N as A, its mask bit set): a genome
    packed a contig at a time, without a whole-genome array of codes."""
    for i in range(len(codes)):
        p = start + i
        c = codes[i]
        if c > 3:
            nmask[p >> 5] |= np.uint32(1) << np.uint32(p & 31)
        else:
            packed[p >> 4] |= np.uint32(c) << np.uint32((p & 15) * 2)


@njit(cache=True)
def base_at(g_packed, g_nmask, pos):
    """Base code 0-3 at a genome position, 4 for N."""
    if (g_nmask[pos >> 5] >> (pos & 31)) & 1:
        return 4
    return (g_packed[pos >> 4] >> ((pos & 15) * 2)) & 3


@njit(cache=True)
def genome_word(words, pos):
    """The 16 bases (32 bits) starting at any base position of a 2-bit packed array."""
    q = pos >> 4
    r = pos & 15
    w = words[q] & MASK32
    if r != 0:
        w = (w >> (2 * r)) | ((words[q + 1] << (32 - 2 * r)) & MASK32)
    return w


@njit(cache=True)
def any_n(g_nmask, start, end):
    """Whether the genome has an N in [start, end)."""
    pos = start
    while pos < end:
        q = pos >> 5
        r = pos & 31
        take = 32 - r
        if take > end - pos:
            take = end - pos
        bits = (g_nmask[q] >> r) & ((1 << take) - 1)
        if bits != 0:
            return True
        pos += take
    return False


@njit(cache=True)
def contig_of(c_offsets, pos):
    """Index of the contig containing a genome position (binary search over contig starts)."""
    lo = 0
    hi = c_offsets.shape[0] - 1
    while lo < hi:
        mid = (lo + hi + 1) >> 1
        if c_offsets[mid] <= pos:
            lo = mid
        else:
            hi = mid - 1
    return lo


@njit(cache=True, nogil=True)
def fnv1a(blob, s, e):
    """FNV-1a (32-bit) of blob[s:e] (a name)."""
    h = np.int64(0x811C9DC5)
    for j in range(s, e):
        h = ((h ^ np.int64(blob[j])) * 0x01000193) & 0xFFFFFFFF   # int64 alike in numpy (the simulator) and numba
    return h


@njit(cache=True, nogil=True)
def fnv1a_all(blob, offsets):
    """FNV-1a (32-bit) of each name in a concatenated blob."""
    out = np.empty(offsets.shape[0] - 1, dtype=np.uint32)
    for i in range(offsets.shape[0] - 1):
        out[i] = fnv1a(blob, offsets[i], offsets[i + 1])
    return out


@njit(cache=True, nogil=True)
def header_bins(codes, read_off, k):
    """Code of each read's first k bases, -1 where the read is shorter than k or has an N."""
    n = read_off.shape[0] - 1
    out = np.full(n, -1, dtype=np.int64)
    for r in range(n):
        s = read_off[r]
        e = read_off[r + 1]
        if e - s < k:
            continue
        clean = True
        for i in range(s, e):
            if codes[i] == 4:
                clean = False
                break
        if clean:
            km = 0
            for i in range(s, s + k):
                km = km * 4 + codes[i]
            out[r] = km
    return out


@njit(cache=True, nogil=True)
def reverse_complements(codes: np.ndarray, read_off: np.ndarray) -> np.ndarray:
    """Each read reversed and complemented in place of itself (same offsets); N stays N."""
    rc = np.empty_like(codes)
    for r in range(read_off.shape[0] - 1):
        s = read_off[r]
        e = read_off[r + 1]
        for i in range(e - s):
            c = codes[e - 1 - i]
            rc[s + i] = 4 if c == 4 else 3 - c
    return rc


@njit(cache=True)
def derive_read(r, codes, read_off, word_off, k, rc, packed, rc_packed, hbin, rc_hbin):
    """Read r's reverse complement, packed words of both strands and header bins, as
    reverse_complements, pack_reads and header_bins make them for a whole batch: the GPU derives a
    batch's from its codes alone, a thread per read, rather than have the host make and upload them."""
    s = read_off[r]
    e = read_off[r + 1]
    n = e - s
    w0 = word_off[r]
    clean = True
    km = 0
    rkm = 0
    word = 0      # the words are built in registers and stored once each: on the GPU a
    rc_word = 0   # read-modify-write of global memory for every base cost 7 ms per 100 k reads
    for i in range(n):
        c = np.int64(codes[s + i])       # int64: in the CUDA simulator uint8 arithmetic would wrap
        b = np.int64(codes[e - 1 - i])
        cb = 4 if b == 4 else 3 - b
        rc[s + i] = cb
        clean = clean and c != 4
        word |= (c & 3) << (2 * (i % 16))
        rc_word |= (cb & 3) << (2 * (i % 16))
        if i % 16 == 15 or i == n - 1:
            packed[w0 + i // 16] = np.uint32(word)
            rc_packed[w0 + i // 16] = np.uint32(rc_word)
            word = 0
            rc_word = 0
        if i < k:
            km = km * 4 + (c & 3)
            rkm = rkm * 4 + (cb & 3)
    hbin[r] = km if clean and n >= k else -1
    rc_hbin[r] = rkm if clean and n >= k else -1


@njit(cache=True, nogil=True)
def pack_reads(codes: np.ndarray, read_off: np.ndarray):
    """2-bit pack each read from its own first base (N packed as A); returns words and word offsets."""
    n = read_off.shape[0] - 1
    word_off = np.zeros(n + 1, dtype=np.int64)
    for r in range(n):
        word_off[r + 1] = word_off[r] + (read_off[r + 1] - read_off[r] + 15) // 16
    words = np.zeros(word_off[n], dtype=np.uint32)
    for r in range(n):
        s = read_off[r]
        for i in range(read_off[r + 1] - s):
            words[word_off[r] + i // 16] |= np.uint32((codes[s + i] & 3) << (2 * (i % 16)))
    return words, word_off
