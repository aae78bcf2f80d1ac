"""Encoded reads: a batch of n reads as flat arrays, the form every mapping stage takes.

Built from FASTQ by `fastq.read_batches` (streamed, batch by batch), or from lists by `encode_reads`:
- `codes` / `rc_codes` (uint8, 0-3 = ACGT, 4 = N): each read and its reverse complement,
  precomputed so the mapper treats both strands alike; `read_off[n+1]` indexes both.
- `packed` / `rc_packed` (uint32): the same, 2-bit packed 16 bases a word from each read's first
  base (as in the genome image), `word_off[n+1]` indexes them; used by the exact-match kernel.
- `hbin` / `rc_hbin` (int64): the read's header bin, the code of its first k bases; -1 when the
  read is shorter than k or has an N anywhere (N scores as a mismatch, so such a read can never
  match exactly, and the exact-match stage skips it).
- `quals` (uint8 Phred, indexed by read_off), `names` (bytes, `name_off[n+1]`), `name_hash` (uint32,
  FNV-1a of the name: seeds the deterministic choice between equally good placements).
- `comments` (bytes, `comment_off[n+1]`): each FASTQ header's comment, the text after the name and
  the whitespace ending it (for `-C`), when the reader was asked for them; else no bytes and
  `comment_off` zeros (every comment empty). Every function here that makes a Reads carries them.

The FASTQ reader leaves the DERIVED arrays (reverse complements, packing, bins) out (None): the
backend makes them where its stages need them (`backends.*.prepare_reads`: the CPU backend on the
host with `derived`, the CUDA backend on the GPU from the codes alone, so they are neither computed
on the busy host nor uploaded). Every function here carries them when present and None when not.
"""

from dataclasses import dataclass, replace

import numpy as np
from numba import njit

from .encode import BASES, CODE, fnv1a_all, header_bins, pack_reads, reverse_complements
from .jitcache import use_versioned_cache
from .memmove import MEMMOVE

use_versioned_cache()  # before any @njit below: numba picks the cache folder at decoration

MAX_READ_LEN = 1024  # longest read accepted; the banded aligner's buffers are sized from it
DERIVED = ("rc_codes", "packed", "rc_packed", "word_off", "hbin", "rc_hbin")

@dataclass
class Reads:
    names: np.ndarray
    name_off: np.ndarray
    name_hash: np.ndarray
    codes: np.ndarray
    rc_codes: np.ndarray
    quals: np.ndarray
    read_off: np.ndarray
    packed: np.ndarray
    rc_packed: np.ndarray
    word_off: np.ndarray
    hbin: np.ndarray
    rc_hbin: np.ndarray
    k: int
    comments: np.ndarray = None
    comment_off: np.ndarray = None

    def __post_init__(self):
        if self.comment_off is None:   # not read: every comment empty
            self.comments = np.empty(0, dtype=np.uint8)
            self.comment_off = np.zeros(len(self.read_off), dtype=np.int64)

    def __len__(self):
        return len(self.read_off) - 1

    def name(self, i: int) -> str:
        return bytes(self.names[self.name_off[i]:self.name_off[i + 1]]).decode()

    @property
    def has_comments(self) -> bool:
        """Whether any read carries a comment (they are kept only when the reader was asked)."""
        return bool(self.comment_off[-1] > 0)

    def comment(self, i: int) -> bytes:
        return bytes(self.comments[self.comment_off[i]:self.comment_off[i + 1]])

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.read_off)


# k of records that were parsed but not encoded (no reverse complements, packing, bins or name hashes)
RECORDS_ONLY = 0


def finish_reads(names, name_off, codes, quals, read_off, k: int, comments=None, comment_off=None,
                 derive: bool = True) -> Reads:
    """Reads from names, base codes and Phred qualities (and comments, if read): adds name hashes and,
    with derive, reverse complements, packing and bins (else None: see DERIVED). k = RECORDS_ONLY
    adds nothing: the records as parsed, for a caller that only writes them back (the chunk
    splitter); no index has that k, so none maps them."""
    if k == RECORDS_ONLY:
        n = len(read_off) - 1
        none = np.zeros(0, dtype=np.int64)
        return Reads(names=names, name_off=name_off, name_hash=np.zeros(0, dtype=np.uint32), codes=codes,
                     rc_codes=np.zeros(0, dtype=np.uint8), quals=quals, read_off=read_off,
                     packed=np.zeros(0, dtype=np.uint32), rc_packed=np.zeros(0, dtype=np.uint32),
                     word_off=np.zeros(n + 1, dtype=np.int64), hbin=none, rc_hbin=none, k=k,
                     comments=comments, comment_off=comment_off)
    bare = Reads(names=names, name_off=name_off, name_hash=fnv1a_all(names, name_off), codes=codes, rc_codes=None,
                 quals=quals, read_off=read_off, packed=None, rc_packed=None, word_off=None, hbin=None,
                 rc_hbin=None, k=k, comments=comments, comment_off=comment_off)
    return derived(bare) if derive else bare


def derived(reads: Reads) -> Reads:
    """reads with the DERIVED arrays, made on the host where the reader left them out."""
    if reads.rc_codes is not None or reads.k == RECORDS_ONLY:
        return reads
    codes, read_off, k = reads.codes, reads.read_off, reads.k
    rc = reverse_complements(codes, read_off)
    packed, word_off = pack_reads(codes, read_off)
    return replace(reads, rc_codes=rc, packed=packed, rc_packed=pack_reads(rc, read_off)[0], word_off=word_off,
                   hbin=header_bins(codes, read_off, k), rc_hbin=header_bins(rc, read_off, k))


def word_offsets(read_off: np.ndarray) -> np.ndarray:
    """Where each read's packed words start (16 bases a word), as pack_reads gives them."""
    return np.concatenate(([0], np.cumsum((np.diff(read_off) + 15) // 16))).astype(np.int64)


def offsets_of(items) -> np.ndarray:
    return np.concatenate(([0], np.cumsum([len(x) for x in items], dtype=np.int64))).astype(np.int64)


def encode_reads(names, seqs, quals, k: int, comments=None) -> Reads:
    """Reads from lists of names, sequences and FASTQ quality strings (bytes, Phred+33), and
    optionally of comments (bytes)."""
    text = None if comments is None else np.frombuffer(b"".join(comments), dtype=np.uint8).copy()
    return finish_reads(np.frombuffer(b"".join(names), dtype=np.uint8).copy(), offsets_of(names),
                        CODE[np.frombuffer(b"".join(seqs), dtype=np.uint8)],
                        (np.frombuffer(b"".join(quals), dtype=np.uint8) - 33).astype(np.uint8),
                        offsets_of(seqs), k, text, None if comments is None else offsets_of(comments))


def concatenate(batches, k: int) -> Reads:
    """One Reads of several, in order."""
    if not batches:
        return encode_reads([], [], [], k)
    def cat(field):
        parts = [getattr(b, field) for b in batches]
        return None if any(x is None for x in parts) else np.concatenate(parts)

    def cat_offsets(field):
        offs = [getattr(b, field) for b in batches]
        if any(o is None for o in offs):
            return None
        base = np.cumsum([0] + [o[-1] for o in offs[:-1]])
        return np.concatenate([offs[0][:1]] + [o[1:] + b for o, b in zip(offs, base)]).astype(np.int64)
    return Reads(names=cat("names"), name_off=cat_offsets("name_off"), name_hash=cat("name_hash"),
                 codes=cat("codes"), rc_codes=cat("rc_codes"), quals=cat("quals"),
                 read_off=cat_offsets("read_off"), packed=cat("packed"), rc_packed=cat("rc_packed"),
                 word_off=cat_offsets("word_off"), hbin=cat("hbin"), rc_hbin=cat("rc_hbin"), k=k,
                 comments=cat("comments"), comment_off=cat_offsets("comment_off"))


def subset(reads: Reads, start: int, end: int) -> Reads:
    """Reads [start, end) as their own Reads (offsets rebased): a mapper batch."""
    ro, wo, no, co = reads.read_off, reads.word_off, reads.name_off, reads.comment_off
    part = Reads(
        names=reads.names[no[start]:no[end]], name_off=no[start:end + 1] - no[start],
        name_hash=reads.name_hash[start:end], codes=reads.codes[ro[start]:ro[end]], rc_codes=None,
        quals=reads.quals[ro[start]:ro[end]], read_off=ro[start:end + 1] - ro[start],
        packed=None, rc_packed=None, word_off=None, hbin=None, rc_hbin=None, k=reads.k,
        comments=reads.comments[co[start]:co[end]], comment_off=co[start:end + 1] - co[start])
    if reads.rc_codes is not None:
        part.rc_codes = reads.rc_codes[ro[start]:ro[end]]
        part.packed, part.rc_packed = reads.packed[wo[start]:wo[end]], reads.rc_packed[wo[start]:wo[end]]
        part.word_off = wo[start:end + 1] - wo[start]
        part.hbin, part.rc_hbin = reads.hbin[start:end], reads.rc_hbin[start:end]
    return part


def interleave_segments(a, a_off, b, b_off):
    """Segments a[a_off[i]:a_off[i+1]] and b[b_off[i]:...] alternated: a0 b0 a1 b1 ... (and offsets)."""
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b.astype(a.dtype, copy=False))
    return alternate_segments(a, a_off, b, b_off, MEMMOVE)


@njit(cache=True, nogil=True)
def alternate_segments(a, a_off, b, b_off, memmove):
    """interleave_segments on contiguous arrays of one type, each segment one memmove."""
    n = a_off.shape[0] - 1
    off = np.zeros(2 * n + 1, dtype=np.int64)
    out = np.empty(a.shape[0] + b.shape[0], dtype=a.dtype)
    size = a.itemsize
    out_at, a_at, b_at = out.ctypes.data, a.ctypes.data, b.ctypes.data
    o = 0
    for i in range(n):
        la = a_off[i + 1] - a_off[i]
        memmove(out_at + o * size, a_at + a_off[i] * size, la * size)
        o += la
        off[2 * i + 1] = o
        lb = b_off[i + 1] - b_off[i]
        memmove(out_at + o * size, b_at + b_off[i] * size, lb * size)
        o += lb
        off[2 * i + 2] = o
    return out, off


def interleave(a: Reads, b: Reads) -> Reads:
    """Mates of two equally long batches as one: read 2i is a's i-th, read 2i+1 b's i-th."""
    def alternate(x, y):
        out = np.empty(len(x) + len(y), dtype=x.dtype)
        out[0::2], out[1::2] = x, y
        return out
    names, name_off = interleave_segments(a.names, a.name_off, b.names, b.name_off)
    codes, read_off = interleave_segments(a.codes, a.read_off, b.codes, b.read_off)
    comments, comment_off = interleave_segments(a.comments, a.comment_off, b.comments, b.comment_off)
    both = Reads(names=names, name_off=name_off, name_hash=alternate(a.name_hash, b.name_hash), codes=codes,
                 rc_codes=None, quals=interleave_segments(a.quals, a.read_off, b.quals, b.read_off)[0],
                 read_off=read_off, packed=None, rc_packed=None, word_off=None, hbin=None, rc_hbin=None, k=a.k,
                 comments=comments, comment_off=comment_off)
    if a.rc_codes is not None and b.rc_codes is not None:
        both.rc_codes = interleave_segments(a.rc_codes, a.read_off, b.rc_codes, b.read_off)[0]
        both.packed, both.word_off = interleave_segments(a.packed, a.word_off, b.packed, b.word_off)
        both.rc_packed = interleave_segments(a.rc_packed, a.word_off, b.rc_packed, b.word_off)[0]
        both.hbin, both.rc_hbin = alternate(a.hbin, b.hbin), alternate(a.rc_hbin, b.rc_hbin)
    return both


@njit(cache=True, nogil=True)
def fastq_bytes(names, name_off, codes, quals, read_off, letters):
    """FASTQ text of reads (Phred+33 qualities; a read without qualities gets 'I's)."""
    n = read_off.shape[0] - 1
    size = 0
    for r in range(n):
        size += (name_off[r + 1] - name_off[r]) + 2 * (read_off[r + 1] - read_off[r]) + 6
    out = np.empty(size, dtype=np.uint8)
    o = 0
    for r in range(n):
        out[o] = 64   # '@'
        o += 1
        for i in range(name_off[r], name_off[r + 1]):
            out[o] = names[i]
            o += 1
        out[o] = 10
        o += 1
        for i in range(read_off[r], read_off[r + 1]):
            out[o] = letters[codes[i]]
            o += 1
        out[o] = 10
        out[o + 1] = 43   # '+'
        out[o + 2] = 10
        o += 3
        for i in range(read_off[r], read_off[r + 1]):
            out[o] = (quals[i] + 33) if quals.shape[0] > 0 else 73
            o += 1
        out[o] = 10
        o += 1
    return out


def to_fastq(reads: Reads) -> bytes:
    """The reads as FASTQ records, as the parser read them (first word of the name, ACGTN)."""
    return fastq_bytes(reads.names, reads.name_off, reads.codes, reads.quals, reads.read_off, BASES).tobytes()


def interleaved_fastq(a: Reads, b: Reads) -> bytes:
    """Mates of two equally long batches as FASTQ, a's i-th then b's i-th: from the records alone, so
    batches read with k = RECORDS_ONLY will do."""
    names, name_off = interleave_segments(a.names, a.name_off, b.names, b.name_off)
    codes, read_off = interleave_segments(a.codes, a.read_off, b.codes, b.read_off)
    quals = interleave_segments(a.quals, a.read_off, b.quals, b.read_off)[0]
    return fastq_bytes(names, name_off, codes, quals, read_off, BASES).tobytes()
