"""FASTQ -> encoded reads (stage encode_reads).

`{sample}.reads.npz` holds, for n reads concatenated in input order:
- `codes` / `rc_codes` (uint8, 0-3 = ACGT, 4 = N): each read and its reverse complement,
  precomputed here so the mapper treats both strands alike; `read_off[n+1]` indexes both.
- `packed` / `rc_packed` (uint32): the same, 2-bit packed 16 bases a word from each read's first
  base (as in the genome image), `word_off[n+1]` indexes them; used by the exact-match kernel.
- `hbin` / `rc_hbin` (int64): the read's header bin, the code of its first k bases; -1 when the
  read is shorter than k or has an N anywhere (N scores as a mismatch, so such a read can never
  match exactly, and the exact-match stage skips it).
- `quals` (uint8 Phred, indexed by read_off), `names` (bytes, `name_off[n+1]`), `name_hash` (uint32,
  FNV-1a of the name: seeds the deterministic choice between equally good placements).
"""

from dataclasses import dataclass

import numpy as np
from numba import njit

from .atomic import atomic_path
from .errors import InputError
from .genome import CODE
from .jitcache import use_versioned_cache
from .seqio import read_bytes, split_lines

use_versioned_cache()  # before any @njit below: numba picks the cache folder at decoration

MAX_READ_LEN = 1024  # longest read accepted; the banded aligner's buffers are sized from it

# IUPAC ambiguity codes (and '.') are accepted and read as N; anything else is an error.
_SEQ_OK = np.zeros(256, dtype=bool)
for _c in b"ACGTNRYKMSWBDHVUacgtnrykmswbdhvu.":
    _SEQ_OK[_c] = True


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

    def __len__(self):
        return len(self.read_off) - 1

    def name(self, i: int) -> str:
        return bytes(self.names[self.name_off[i]:self.name_off[i + 1]]).decode()

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.read_off)


def parse_fastq(path: str):
    """Names, sequences and qualities (lists of bytes) of a FASTQ file, validated as a whole with
    array operations; the first bad record (in file order) is reported."""
    lines = split_lines(read_bytes(path, "reads"))
    if not lines:
        raise InputError(f"reads {path}: empty file (no FASTQ records)")
    if len(lines) % 4:
        last = len(lines) - len(lines) % 4 + 1
        raise InputError(f"reads {path} line {last}: truncated FASTQ record (file ends inside a record)")
    names, seqs, pluses, quals = lines[0::4], lines[1::4], lines[2::4], lines[3::4]
    problem = first_bad_record(names, seqs, pluses, quals)
    if problem is not None:
        r, line_in_record, message = problem
        raise InputError(f"reads {path} line {4 * r + line_in_record}: {message}")
    return [_read_name(n) for n in names], seqs, quals


def first_bad_record(names, seqs, pluses, quals):
    """(record index, line within the record 1-4, message) of the first invalid record, or None.

    Within a record the checks run in this order: header, '+' line, lengths, bases, qualities.
    """
    n = len(names)
    found = []   # (record, check order, line, message) of each check's first failure

    def first(bad, order, line, message):
        idx = np.flatnonzero(bad)
        if len(idx):
            r = int(idx[0])
            found.append((r, order, line, message(r)))

    heads = np.frombuffer(b"".join(x[:2].ljust(2) for x in names), dtype=np.uint8).reshape(n, 2)
    first((heads[:, 0] != ord("@")) | np.isin(heads[:, 1], list(b" \t\r\x0b\x0c")), 0, 1,
          lambda r: f"expected a '@name' header, found {names[r][:30]!r}")
    seq_len = np.fromiter(map(len, seqs), dtype=np.int64, count=n)
    qual_len = np.fromiter(map(len, quals), dtype=np.int64, count=n)
    first(seq_len != qual_len, 2, 1,
          lambda r: f"sequence and quality lengths differ ({seq_len[r]} vs {qual_len[r]})")
    first(seq_len > MAX_READ_LEN, 3, 1,
          lambda r: f"read of {seq_len[r]} bases is longer than the {MAX_READ_LEN} supported")
    first(bad_per_record(~_SEQ_OK[np.frombuffer(b"".join(seqs), dtype=np.uint8)], seq_len), 4, 2,
          lambda r: f"invalid base {chr(next(c for c in seqs[r] if not _SEQ_OK[c]))!r} in sequence")
    first(np.frombuffer(b"".join(x[:1] or b" " for x in pluses), dtype=np.uint8) != ord("+"), 1, 3,
          lambda r: f"expected a '+' line, found {pluses[r][:30]!r}")
    q = np.frombuffer(b"".join(quals), dtype=np.uint8)
    first(bad_per_record((q < 33) | (q > 126), qual_len), 5, 4, lambda r: "quality character outside '!'..'~'")
    if not found:
        return None
    r, _, line, message = min(found)
    return r, line, message


def bad_per_record(bad_chars: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Per record, whether any of its characters (concatenated in record order) is bad."""
    before = np.concatenate(([0], np.cumsum(bad_chars)))
    ends = np.cumsum(lengths)
    return before[ends] > before[ends - lengths]


def _read_name(header: bytes) -> bytes:
    """First word of the header, without a /1 or /2 mate suffix (as bwa does)."""
    name = header[1:].split()[0]
    if len(name) > 2 and name[-2:] in (b"/1", b"/2"):
        name = name[:-2]
    return name


@njit(cache=True)
def fnv1a_all(blob, offsets):
    """FNV-1a (32-bit) of each name in a concatenated blob."""
    out = np.empty(offsets.shape[0] - 1, dtype=np.uint32)
    for i in range(offsets.shape[0] - 1):
        h = 0x811C9DC5
        for j in range(offsets[i], offsets[i + 1]):
            h = ((h ^ blob[j]) * 0x01000193) & 0xFFFFFFFF
        out[i] = h
    return out


def header_bins(codes: np.ndarray, read_off: np.ndarray, k: int) -> np.ndarray:
    """Code of each read's first k bases, -1 where the read is shorter than k or has an N."""
    n = len(read_off) - 1
    lengths = np.diff(read_off)
    out = np.full(n, -1, dtype=np.int64)
    n_before = np.concatenate(([0], np.cumsum(codes == 4)))
    ok = (lengths >= k) & (n_before[read_off[1:]] == n_before[read_off[:-1]])
    starts = read_off[:-1][ok]
    km = np.zeros(len(starts), dtype=np.int64)
    clean = np.ones(len(starts), dtype=bool)
    for x in range(k):
        c = codes[starts + x]
        km = km * 4 + (c & 3)
        clean &= c < 4
    out[np.flatnonzero(ok)[clean]] = km[clean]
    return out


@njit(cache=True)
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


def encode_reads(names, seqs, quals, k: int) -> Reads:
    lengths = np.fromiter((len(s) for s in seqs), dtype=np.int64, count=len(seqs))
    read_off = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
    codes = CODE[np.frombuffer(b"".join(seqs), dtype=np.uint8)]
    rc = reverse_complements(codes, read_off)
    packed, word_off = pack_reads(codes, read_off)
    rc_packed, _ = pack_reads(rc, read_off)
    name_len = np.fromiter((len(n) for n in names), dtype=np.int64, count=len(names))
    return Reads(
        names=np.frombuffer(b"".join(names), dtype=np.uint8).copy(),
        name_off=np.concatenate(([0], np.cumsum(name_len))).astype(np.int64),
        name_hash=fnv1a_all(np.frombuffer(b"".join(names), dtype=np.uint8),
                            np.concatenate(([0], np.cumsum(name_len))).astype(np.int64)),
        codes=codes, rc_codes=rc,
        quals=(np.frombuffer(b"".join(quals), dtype=np.uint8) - 33).astype(np.uint8),
        read_off=read_off, packed=packed, rc_packed=rc_packed, word_off=word_off,
        hbin=header_bins(codes, read_off, k), rc_hbin=header_bins(rc, read_off, k), k=k)


def encode_fastq(path: str, k: int) -> Reads:
    return encode_reads(*parse_fastq(path), k=k)


def save_reads(reads: Reads, path: str):
    with atomic_path(path) as tmp:
        np.savez(tmp, **{f: getattr(reads, f) for f in Reads.__dataclass_fields__})


def load_reads(path: str) -> Reads:
    with np.load(path) as z:
        fields = {f: z[f] for f in Reads.__dataclass_fields__}
    fields["k"] = int(fields["k"])
    return Reads(**fields)


def subset(reads: Reads, start: int, end: int) -> Reads:
    """Reads [start, end) as their own Reads (offsets rebased): a mapper batch."""
    ro, wo, no = reads.read_off, reads.word_off, reads.name_off
    return Reads(
        names=reads.names[no[start]:no[end]], name_off=no[start:end + 1] - no[start],
        name_hash=reads.name_hash[start:end],
        codes=reads.codes[ro[start]:ro[end]], rc_codes=reads.rc_codes[ro[start]:ro[end]],
        quals=reads.quals[ro[start]:ro[end]], read_off=ro[start:end + 1] - ro[start],
        packed=reads.packed[wo[start]:wo[end]], rc_packed=reads.rc_packed[wo[start]:wo[end]],
        word_off=wo[start:end + 1] - wo[start],
        hbin=reads.hbin[start:end], rc_hbin=reads.rc_hbin[start:end], k=reads.k)
