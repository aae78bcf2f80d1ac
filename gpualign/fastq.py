"""FASTQ(.gz) -> batches of encoded reads, streamed (stage encode_reads, run inside align).

No per-read Python: a decompressor (seqio.Input: rapidgzip on 12 threads or more for big files,
else isal, else zlib) feeds blocks of bytes; a numba scan cuts them at record boundaries into batches of
at most `batch_size` reads; numba parses, validates and encodes each batch over the raw bytes.
Batches are parsed on worker threads (the numba functions release the GIL) while earlier batches
are mapped, and handed out in file order, so the first error raised is the first bad record of the
file. A path may be `-` (stdin) or any stream (a pipe, a FIFO, `<(...)`): it is read once, and
messages call `-` stdin. Mates are read from two files in lockstep (`read_pair_batches`) or from one
file of consecutive mates (`mates_in_order`, bwa mem -p), checked here; batches.py cuts them into the
mapper's paired batches (it alone knows insert-size blocks).

With comments=True the readers keep each header's comment (the text after the name and the
whitespace that ends it, for `-C`) in Reads.comments / comment_off; without, those are empty.
"""

from .jitcache import use_versioned_cache

use_versioned_cache()  # before any @njit below: numba picks the cache folder at decoration

import itertools
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from numba import njit

from .errors import InputError
from .encode import CODE
from .reads import MAX_READ_LEN, finish_reads
from .seqio import PARALLEL_GZIP_MIN, PARALLEL_GZIP_THREADS, READ_BLOCK, decode_ahead_bytes, opened, ramp_sizes, shown
from .threads import in_background, ordered_map
from . import trace


# IUPAC ambiguity codes (and '.') are accepted and read as N; anything else is an error.
SEQ_OK = np.zeros(256, dtype=np.bool_)
for _c in b"ACGTNRYKMSWBDHVUacgtnrykmswbdhvu.":
    SEQ_OK[_c] = True
WHITESPACE = np.zeros(256, dtype=np.bool_)
for _c in b" \t\r\n\x0b\x0c":
    WHITESPACE[_c] = True

# first-failure codes of parse_records, in the order the checks run within a record
BAD_HEADER, BAD_PLUS, BAD_LENGTHS, TOO_LONG, BAD_BASE, BAD_QUAL = 1, 2, 3, 4, 5, 6
NOT_A_BASE = 128   # CHECKED's entry for a byte that is not a base (bit 7: a branchless check)
CHECKED = np.where(SEQ_OK, CODE, NOT_A_BASE).astype(np.uint8)   # a base's code, or NOT_A_BASE (parse_records' table)


def cut_records(buf: np.ndarray, start: int, max_records: int):
    """(end, n): the first n <= max_records complete 4-line records of buf from start end at end.

    The cut is the one sequential step of reading, so it runs at memory speed and without the GIL:
    newlines counted by a loop the compiler vectorizes, then a few steps back from the end to the
    newline that ends the last whole record (or, when max_records cuts earlier, a count by blocks
    to the newline that ends record n).
    """
    lines = newlines_in(buf, start, len(buf))
    n = min(lines // 4, max_records)
    if n == 0:
        return start, 0
    if n < lines // 4:
        return nth_newline(buf, start, 4 * n) + 1, n
    return nth_newline_back(buf, start, lines - 4 * n + 1) + 1, n


@njit(cache=True, nogil=True)
def nth_newline_back(buf, s, k):
    """Index of the k-th newline counted back from the end of buf (there are at least k after s)."""
    for i in range(len(buf) - 1, s - 1, -1):
        if buf[i] == 10:
            k -= 1
            if k == 0:
                return i
    return -1


@njit(cache=True, nogil=True)
def newlines_in(buf, s, e):
    """Newlines in buf[s:e] (in this form the compiler vectorizes the loop: 8 GB/s, 4x numpy's
    compare and count)."""
    c = 0
    for x in buf[s:e]:
        if x == 10:
            c += 1
    return c


@njit(cache=True, nogil=True)
def nth_newline(buf, s, k):
    """Index of the k-th newline (k >= 1) from s; there are at least k. Whole 4 KiB blocks are
    counted, the block that holds it is scanned."""
    block = 4096
    seen = 0
    while True:
        e = min(s + block, len(buf))
        c = newlines_in(buf, s, e)
        if seen + c >= k:
            break
        seen += c
        s = e
    for i in range(s, e):
        if buf[i] == 10:
            seen += 1
            if seen == k:
                return i
    return -1


@njit(cache=True, nogil=True)
def line_end(buf, i):
    """Index of the newline ending the line that starts at i (the buffer ends with one)."""
    while buf[i] != 10:
        i += 1
    return i


@njit(cache=True, nogil=True)
def content_end(buf, s, e):
    """End of a line's content: a CR before the newline is part of the line end."""
    return e - 1 if e > s and buf[e - 1] == 13 else e


@njit(cache=True, nogil=True, inline="always")
def line_from(buf, s, guess, cr):
    """(end, content end) of the line at s: where a guess of its content's length (guess bytes, then
    a CR where cr is 1) says it ends, when no byte up to there is a CR or newline, so that this is
    the line's true end; else found by scanning. The guesses (the record before's lines; a quality
    line's length is its sequence's) hold for reads of one length: the newline is then not looked
    for byte by byte, and the bytes' lowest is found without a branch."""
    e = s + guess
    end = e + cr
    if end < buf.shape[0] and buf[end] == 10 and (cr == 0 or buf[e] == 13):
        lowest = 255
        for x in range(s, e):
            lowest = min(lowest, buf[x])
        if lowest > 13:
            return end, e
    end = line_end(buf, s)
    return end, content_end(buf, s, end)


@njit(cache=True, nogil=True)
def parse_records(buf, n, seq_ok, whitespace, code, want_comments):
    """Parse n complete records; returns (status, record, detail, arrays...).

    status is 0 or the code of the first failed check of the first bad record; detail is the
    offending byte or the two lengths. Names are the header's first word without /1 or /2; with
    want_comments, comments the rest of the header after the whitespace that ends the name, less
    trailing whitespace (else comments is empty and comment_off zeros).

    One pass over the bytes, record after record, with each check where its field is read: split
    into functions per field, the position in the buffer and the first failure would have to be
    handed back and forth for every line. The bases and qualities are converted without a branch
    a byte (a code table whose invalid entries have bit 7 set; the qualities' lowest and highest),
    and the first bad byte is looked for only where there is one (370-450 -> 315-345 ns a 100 bp
    record on the 2-core machine).
    """
    checked = np.empty(256, dtype=np.uint8)   # CHECKED, for the tables given
    for c in range(256):
        checked[c] = code[c] if seq_ok[c] else NOT_A_BASE
    names = np.empty(buf.shape[0], dtype=np.uint8)
    name_off = np.zeros(n + 1, dtype=np.int64)
    codes = np.empty(buf.shape[0] // 2 + 1, dtype=np.uint8)
    quals = np.empty(buf.shape[0] // 2 + 1, dtype=np.uint8)
    read_off = np.zeros(n + 1, dtype=np.int64)
    comments = np.empty(buf.shape[0] if want_comments else 0, dtype=np.uint8)
    comment_off = np.zeros(n + 1, dtype=np.int64)
    detail = np.zeros(2, dtype=np.int64)
    i = 0
    hl = hc = sl = sc = pl = pc = 0   # line_from's guesses: the record before's lengths and CRs
    for r in range(n):
        h0 = i
        h1, he = line_from(buf, h0, hl, hc)
        s0 = h1 + 1
        s1, se = line_from(buf, s0, sl, sc)
        p0 = s1 + 1
        p1, pe = line_from(buf, p0, pl, pc)
        q0 = p1 + 1
        q1, qe = line_from(buf, q0, se - s0, s1 - se)
        i = q1 + 1
        hl, hc, sl, sc, pl, pc = he - h0, h1 - he, se - s0, s1 - se, pe - p0, p1 - pe
        if he - h0 < 2 or buf[h0] != 64 or whitespace[buf[h0 + 1]]:
            detail[0] = h0
            detail[1] = he
            return BAD_HEADER, r, detail, names, name_off, codes, quals, read_off, comments, comment_off
        if pe == p0 or buf[p0] != 43:
            detail[0] = p0
            detail[1] = pe
            return BAD_PLUS, r, detail, names, name_off, codes, quals, read_off, comments, comment_off
        slen = se - s0
        if slen != qe - q0:
            detail[0] = slen
            detail[1] = qe - q0
            return BAD_LENGTHS, r, detail, names, name_off, codes, quals, read_off, comments, comment_off
        if slen > MAX_READ_LEN:
            detail[0] = slen
            return TOO_LONG, r, detail, names, name_off, codes, quals, read_off, comments, comment_off
        base = read_off[r]
        bad = 0
        for x in range(slen):
            v = checked[buf[s0 + x]]
            codes[base + x] = v
            bad |= v
        if bad & 128:
            detail[0] = first_non_base(buf, s0, se, seq_ok)
            return BAD_BASE, r, detail, names, name_off, codes, quals, read_off, comments, comment_off
        lowest = 255
        highest = 0
        for x in range(slen):
            q = buf[q0 + x]
            quals[base + x] = q - 33
            lowest = min(lowest, q)
            highest = max(highest, q)
        if lowest < 33 or highest > 126:
            detail[0] = first_outside(buf, q0, qe, 33, 126)
            return BAD_QUAL, r, detail, names, name_off, codes, quals, read_off, comments, comment_off
        read_off[r + 1] = base + slen
        w = h0 + 1
        while w < he and not whitespace[buf[w]]:
            w += 1
        if want_comments:
            c0 = w
            while c0 < he and whitespace[buf[c0]]:
                c0 += 1
            c1 = he
            while c1 > c0 and whitespace[buf[c1 - 1]]:
                c1 -= 1
            cb = comment_off[r]
            for x in range(c0, c1):
                comments[cb + x - c0] = buf[x]
            comment_off[r + 1] = cb + c1 - c0
        if w - (h0 + 1) > 2 and buf[w - 2] == 47 and (buf[w - 1] == 49 or buf[w - 1] == 50):
            w -= 2   # a /1 or /2 mate suffix is not part of the name (as bwa reads it)
        nb = name_off[r]
        for x in range(h0 + 1, w):
            names[nb + x - h0 - 1] = buf[x]
        name_off[r + 1] = nb + w - h0 - 1
    return 0, n, detail, names, name_off, codes, quals, read_off, comments, comment_off


@njit(cache=True, nogil=True)
def first_non_base(buf, s, e, seq_ok):
    """The first byte of buf[s:e] that is not a base; there is one."""
    for x in range(s, e):
        if not seq_ok[buf[x]]:
            return buf[x]
    return -1


@njit(cache=True, nogil=True)
def first_outside(buf, s, e, lo, hi):
    """The first byte of buf[s:e] outside lo..hi; there is one."""
    for x in range(s, e):
        if buf[x] < lo or buf[x] > hi:
            return buf[x]
    return -1


@njit(cache=True, nogil=True)
def record_shape(buf, h0, h1, s1, p1, q1, checked, whitespace):
    """(ok, bases, name end) of the record at h0 whose four lines end at the newlines h1, s1, p1 and
    q1: ok is False where parse_records would fail on it (the host parser then says how); the name
    is buf[h0 + 1:name end], as parse_records cuts it. The GPU's parse (resident_kernels), a thread
    a record, with each line's end already known."""
    he = content_end(buf, h0, h1)
    s0, p0, q0 = h1 + 1, s1 + 1, p1 + 1
    se, pe, qe = content_end(buf, s0, s1), content_end(buf, p0, p1), content_end(buf, q0, q1)
    slen = se - s0
    if he - h0 < 2 or buf[h0] != 64 or whitespace[buf[h0 + 1]] or pe == p0 or buf[p0] != 43:
        return False, slen, h0 + 1
    if slen != qe - q0 or slen > MAX_READ_LEN:
        return False, slen, h0 + 1
    bad = 0
    lowest = 255
    highest = 0
    for x in range(slen):
        bad |= checked[buf[s0 + x]]
        q = buf[q0 + x]
        lowest = min(lowest, q)
        highest = max(highest, q)
    if bad & NOT_A_BASE or lowest < 33 or highest > 126:
        return False, slen, h0 + 1
    w = h0 + 1
    while w < he and not whitespace[buf[w]]:
        w += 1
    if w - (h0 + 1) > 2 and buf[w - 2] == 47 and (buf[w - 1] == 49 or buf[w - 1] == 50):
        w -= 2   # a /1 or /2 mate suffix is not part of the name (as parse_records cuts it)
    return True, slen, w


def parse_error(path, chunk, status, record, detail, first_line):
    """The one-line InputError for parse_records' first failure."""
    path = shown(path)
    line = first_line + 4 * record
    raw = lambda: bytes(chunk[detail[0]:detail[1]])[:30]  # noqa: E731
    if status == BAD_HEADER:
        return InputError(f"reads {path} line {line + 1}: expected a '@name' header, found {raw()!r}")
    if status == BAD_PLUS:
        return InputError(f"reads {path} line {line + 3}: expected a '+' line, found {raw()!r}")
    if status == BAD_LENGTHS:
        return InputError(f"reads {path} line {line + 1}: sequence and quality lengths differ "
                          f"({detail[0]} vs {detail[1]})")
    if status == TOO_LONG:
        return InputError(f"reads {path} line {line + 1}: read of {detail[0]} bases is longer than "
                          f"the {MAX_READ_LEN} supported")
    if status == BAD_BASE:
        return InputError(f"reads {path} line {line + 2}: invalid base {chr(detail[0])!r} in sequence")
    return InputError(f"reads {path} line {line + 4}: quality character outside '!'..'~'")


def checked_records(path, chunk, n, first_line, comments: bool = False):
    """parse_records' arrays (names, name_off, codes, quals, read_off, comments, comment_off) of a
    chunk holding exactly n complete records from line first_line + 1; the first bad one raises
    its one-line error."""
    status, record, detail, *arrays = parse_records(chunk, n, SEQ_OK, WHITESPACE, CODE, comments)
    if status:
        raise parse_error(path, chunk, status, record, detail, first_line)
    return arrays


# A batch's records are parsed in pieces side by side: one thread took 0.2 s for a batch of 200,000 reads on the
# GPU host, and the last batch's parse lay between the end of decoding and its mapping. At most PARSE_PIECES pieces,
# of at least PIECE_RECORDS records.
PARSE_PIECES = 4
PIECE_RECORDS = 16384


def encode_chunk(path, chunk, n, first_line, k, comments: bool = False, pool=None):
    """Reads of a chunk holding exactly n complete records starting at line first_line + 1: its
    pieces (piece_cuts) parsed on `pool` beside the first, parsed here (None: one piece), then joined.
    A bad record raises its error in order: a later piece's is raised only when the earlier ones parsed."""
    pieces = min(PARSE_PIECES, -(-n // PIECE_RECORDS)) if pool is not None else 1
    at, first = piece_cuts(chunk, n, max(1, pieces))
    with trace.span("parse and encode reads"):
        later = [pool.submit(parsed_piece, path, chunk, at[j], at[j + 1], first[j + 1] - first[j],
                             first_line + 4 * first[j], comments) for j in range(1, len(first) - 1)]
        parts = [parsed_piece(path, chunk, at[0], at[1], first[1], first_line, comments)]
        try:
            parts += [piece.result() for piece in later]
        finally:
            for piece in later:
                piece.cancel()
        names, name_off, codes, quals, read_off, text, text_off = joined_pieces(parts)
        return finish_reads(names, name_off, codes, quals, read_off, k, text, text_off, derive=False)


def piece_cuts(chunk, n, pieces):
    """Where each of `pieces` pieces of the chunk's n records starts, in bytes and in records (lists
    ending with the chunk's end and n): equal counts of records, cut at the newline that ends a
    record's fourth line (the chunk holds whole 4-line records, as cut_records cut it)."""
    per = -(-n // pieces) if n else 0
    at, first = [0], [0]
    while first[-1] + per < n:
        at.append(nth_newline(chunk, at[-1], 4 * per) + 1)
        first.append(first[-1] + per)
    return at + [len(chunk)], first + [n]


def parsed_piece(path, chunk, start, end, n, first_line, comments):
    """checked_records of the n records in chunk[start:end] (lines from first_line + 1)."""
    with trace.span("parse reads (a piece)"):
        return checked_records(path, chunk[start:end], n, first_line, comments)


def joined_pieces(parts):
    """checked_records' arrays of consecutive pieces as one piece's, each cut to its length: names,
    codes, qualities and comments concatenated, their offsets moved on by the pieces before."""
    def joined(values, offsets):
        data = np.concatenate([v[:o[-1]] for v, o in zip(values, offsets)])
        base = np.cumsum([0] + [o[-1] for o in offsets[:-1]])
        return data, np.concatenate([offsets[0][:1]] + [o[1:] + b for o, b in zip(offsets, base)])

    names, name_off, codes, quals, read_off, text, text_off = zip(*parts)
    codes, read_off_joined = joined(codes, read_off)
    quals, _ = joined(quals, read_off)
    names, name_off = joined(names, name_off)
    text, text_off = joined(text, text_off)
    return names, name_off, codes, quals, read_off_joined, text, text_off


class RawReads:
    """A batch of FASTQ records not parsed yet: the chunk of text holding exactly n whole records, from
    line first_line + 1 of path (an array, or its pieces in a tuple: chunks with pieces). A backend that
    parses on its device (cuda: resident.py) takes it as it is; everything else asks for parsed(), the
    Reads the host's parser makes of it (and the first bad record's one-line error). Only single-end
    batches without comments are left raw (DeviceParsing)."""

    has_comments = False

    def __init__(self, path: str, chunk, n: int, first_line: int, k: int):
        self.path, self.n, self.first_line, self.k = path, n, first_line, k
        self.pieces = chunk if isinstance(chunk, tuple) else (chunk,)   # the text, in pieces (chunks' pieces)
        self.size = sum(len(piece) for piece in self.pieces)
        self._parsed = None

    def __len__(self):
        return self.n

    @property
    def chunk(self) -> np.ndarray:
        """The text as one array (pieces joined)."""
        return text_of(self.pieces) if len(self.pieces) > 1 else self.pieces[0]

    def longest(self) -> int:
        """The most bases a record has (its sequence line's length, a CR included), without parsing."""
        return int(longest_sequence_line(self.chunk))

    def parsed(self):
        if self._parsed is None:
            self._parsed = encode_chunk(self.path, self.chunk, self.n, self.first_line, self.k)
        return self._parsed


def parsed(batch):
    """The batch as Reads: a RawReads parsed on the host, anything else as it is."""
    return batch.parsed() if isinstance(batch, RawReads) else batch


def longest_read(batch) -> int:
    """The most bases a read of the batch (Reads or RawReads) has, at least 1."""
    return max(1, batch.longest() if isinstance(batch, RawReads) else int(batch.lengths.max(initial=1)))


@njit(cache=True, nogil=True)
def longest_sequence_line(buf):
    """The longest second line of buf's 4-line records."""
    longest = line = start = 0
    for i in range(buf.shape[0]):
        if buf[i] == 10:
            if line % 4 == 1:
                longest = max(longest, i - start)
            line += 1
            start = i + 1
    return longest


class DeviceParsing:
    """Whether read_batches leaves its batches raw (RawReads) for the mapper's device to parse: set by
    whoever knows the backend and the output (cli.open_reads, mapper.map_reads), read for each batch
    as it is cut. The host's parse took 8-10 CPU-seconds of 10 M reads of 100 bp on the GPU host,
    in the part of the run that all the host's cores are busy with (decoding, parsing, sorting)."""

    def __init__(self, wanted: bool = False):
        self.wanted = wanted


def chunks(path: str, batch_size: int, threads: int = 1, allow_empty: bool = False, decoder: str | None = None,
           ramp: bool = False, pieces: bool = False):
    """(text, n records, lines before it) of each batch of at most batch_size complete records (with
    ramp, the first ones smaller, as ramp_sizes, and the last block's records in END_BATCHES batches).
    A file with no records is an error unless allow_empty (a chunk of a split sample may be empty).
    decoder: see seqio.Input (None: the fastest that fits). text: a byte array, or with pieces, where a
    batch spans two decoded blocks, a tuple of two (text_of joins them)."""
    sizes = ramp_sizes(batch_size) if ramp else itertools.repeat(batch_size)
    reads = ramp_sizes(READ_BLOCK) if ramp else itertools.repeat(READ_BLOCK)   # the first batch not behind 48 MB
    with opened(path, "reads", threads, decoder, PARALLEL_GZIP_MIN, PARALLEL_GZIP_THREADS) as fh:
        # blocks decoded ahead of the one being cut (seqio.decode_ahead_bytes of them, for each file: a pair's two
        # readers hold twice that) on a thread that does nothing else: cutting a 48 MB block between two reads
        # left isal idle 0.04-0.05 s of every 0.15 s on the GPU host, and a run is bound by decoding its files
        blocks = in_background(decoded_blocks(fh, reads), depth=max(2, decode_ahead_bytes() // READ_BLOCK))
        try:
            yield from cut_batches(path, blocks, sizes, allow_empty, END_BATCHES if ramp else 1, pieces)
        finally:
            blocks.close()   # the decoding thread stopped before its input is closed


# The last block's records (a block shorter than asked for: the input's end) go out in END_BATCHES batches, so that
# they are parsed, mapped and encoded side by side: what follows the end of decoding is the run's tail.
END_BATCHES = 4


def decoded_blocks(fh, sizes):
    """(block, last) for fh's decoded blocks of `sizes` bytes (fewer only at the end of the input: then
    last is True), then (b"", True) once."""
    while True:
        size = next(sizes)
        with trace.span("decompress"):
            block = fh.read(size)
        yield block, len(block) < size
        if not block:
            return


def cut_batches(path, blocks, sizes, allow_empty, end_batches=1, pieces=False):
    """chunks' batches of the decoded `blocks` (decoded_blocks'); the last block's records in
    end_batches batches (or more: none above the batch size). A block's records beyond its full
    batches wait for the next block where they are fewer than half a batch: 48 MB of 100 bp reads
    hold a batch and a twentieth, and the twentieth alone, as a batch of its own, took as much of a
    mapping thread's time on the GPU host as a full one.

    The records that wait (`held`, a view of their block) and the next block are not joined: a batch
    that takes both is given as the two pieces (a tuple) with `pieces`, joined otherwise (text_of).
    Copying every block behind the last one's rest, into memory the system had to map afresh, was
    most of the cutter's time, and the mapping threads waited for the cutter."""
    held = np.zeros(0, dtype=np.uint8)
    lines_before = size = 0
    eof = False
    while not eof:
        block, last = next(blocks)
        eof = not block
        if eof and len(held) and held[-1] != 10:
            block = b"\n"      # a last line without its newline is still a line
        block = writable(block)
        with trace.span("cut: count a block"):   # the cutter's steps traced: the mapping threads wait on it
            held_lines = newlines_in(held, 0, len(held))   # the last may be a record's first lines
            lines = held_lines + newlines_in(block, 0, len(block))
            most = -(-lines // (4 * end_batches)) if last and end_batches > 1 else None
        start = 0   # where the block's records not yet handed out begin (after `held`'s)
        while True:   # the complete records now, in batches of at most batch_size
            size = size or next(sizes)
            want = size if most is None else max(1, min(size, most))
            with trace.span("cut: find record ends"):
                if len(held):
                    n = min(want, lines // 4)
                else:
                    end, n = cut_records(block, start, want)
            if n == 0 or (n < size // 2 and not last and not eof):   # a small rest waits for the next block
                break
            if len(held) and 4 * n <= held_lines:   # the batch lies in the held records alone
                end = nth_newline(held, 0, 4 * n) + 1
                text, held, held_lines = held[:end], held[end:], held_lines - 4 * n
            elif len(held):   # the held records, then the block up to the end of record n
                end = nth_newline(block, 0, 4 * n - held_lines) + 1
                text = (held, block[:end]) if pieces else np.concatenate((held, block[:end]))
                held, held_lines, start = held[:0], 0, end
            else:
                text, start = block[start:end], end
            yield text, n, lines_before
            lines_before += 4 * n
            lines -= 4 * n
            size = 0
        if not len(held):
            held = block[start:]
        elif start < len(block):   # records held from blocks before, and this one's (a rare small block)
            held = np.concatenate((held, block[start:]))
        if eof and len(held):
            raise InputError(f"reads {shown(path)} line {lines_before + 1}: truncated FASTQ record "
                             "(file ends inside a record)")
    if lines_before == 0 and not allow_empty:
        raise InputError(f"reads {shown(path)}: empty file (no FASTQ records)")


def writable(block) -> np.ndarray:
    """A decoded block as a writable byte array: rapidgzip's process gives one (no copy); bytes (isal, zlib, a
    plain file) are copied, as joining them to the rest before them did, so the parsers see the one array type
    their compiled code takes."""
    array = np.frombuffer(block, dtype=np.uint8) if len(block) else np.zeros(0, dtype=np.uint8)
    return array if array.flags.writeable else array.copy()


def text_of(chunk) -> np.ndarray:
    """A batch's text as one array: a chunk given in pieces (cut_batches) joined."""
    return np.concatenate(chunk) if isinstance(chunk, tuple) else chunk


def read_batches(path: str, k: int, batch_size: int, threads: int = 1, allow_empty: bool = False,
                 comments: bool = False, decoder: str | None = None, ramp: bool = False,
                 device: DeviceParsing | None = None):
    """Encoded batches of the file (or `-`, stdin), in order: decompressed and cut on a reader
    thread, parsed ahead on about half the threads (the rest map and write), a batch in pieces side
    by side on as many threads again (encode_chunk), which wait while nothing is left. A fault the reader
    meets (a truncated file, say) is raised after the batches before it, so an earlier bad record
    is reported first. comments: keep each record's header comment (Reads.comments). ramp: the first
    batches smaller (ramp_sizes), for a mapper, whose results never depend on the batch size.
    device: where its wanted is set as a batch is cut (and no comments are asked for), that batch is
    left raw (RawReads) for the mapper's device to parse."""
    workers = max(1, min(8, (threads + 1) // 2))
    with ThreadPoolExecutor(max_workers=workers) as pool, ThreadPoolExecutor(max_workers=workers) as pieces:
        source = in_background(chunks(path, batch_size, threads, allow_empty, decoder, ramp, device is not None),
                               depth=workers)
        def batch_of(item):
            if device is not None and device.wanted and not comments:
                return RawReads(path, *item, k)
            text, n, first_line = item
            return encode_chunk(path, text_of(text), n, first_line, k, comments, pieces)
        yield from ordered_map(pool, batch_of, source, workers + 1)


def encode_fastq(path: str, k: int, threads: int = 1, comments: bool = False, decoder: str | None = None):
    """All reads of a FASTQ file as one Reads (for tests and small inputs)."""
    from .reads import concatenate, derived
    return derived(concatenate(list(read_batches(path, k, 1 << 20, threads, comments=comments, decoder=decoder)), k))


def first_name_mismatch(a, b) -> int:
    """Index of the first read whose name differs between two equal-length batches, else -1
    (names are compared without their /1 and /2 suffixes, which parse_records drops)."""
    if np.array_equal(a.name_off, b.name_off) and np.array_equal(a.names, b.names):
        return -1
    for i in range(len(a)):
        if a.name(i) != b.name(i):
            return i
    return -1


def exact_batches(batches, size: int):
    """The reads of a stream of batches re-cut into batches of exactly `size` (the last may be
    shorter): the reader cuts at its decompression blocks too, which fall at different records in
    two files whose reads differ in length."""
    from .reads import concatenate, subset
    pending = []
    held = 0
    for batch in batches:
        pending.append(batch)
        held += len(batch)
        if held < size:
            continue
        whole = concatenate(pending, batch.k) if len(pending) > 1 else batch
        start = 0
        while held - start >= size:
            yield subset(whole, start, start + size)
            start += size
        pending = [subset(whole, start, held)] if start < held else []
        held -= start
    if held:
        yield concatenate(pending, pending[0].k) if len(pending) > 1 else pending[0]


def read_pair_batches(path1: str, path2: str, k: int, batch_size: int, threads: int = 1, comments: bool = False):
    """Batches of mates, (reads of R1, reads of R2), read in lockstep, batch_size each but the last:
    the i-th records of the two files must share a name (after /1 and /2), and both files must hold
    the same number of records; otherwise one line names the files, the record and the problem."""
    half = max(1, threads // 2)
    # both files decoded, parsed and re-cut side by side from the start, each on threads of its own
    first = in_background(exact_batches(read_batches(path1, k, batch_size, half, comments=comments), batch_size),
                          2, start_now=True)
    second = in_background(exact_batches(read_batches(path2, k, batch_size, half, comments=comments), batch_size),
                           2, start_now=True)
    name1, name2 = shown(path1), shown(path2)
    done = 0
    for a in first:
        b = next(second, None)
        # both streams are cut into batches of batch_size, so only a last batch may differ in length
        if b is None or len(b) < len(a):
            got = done + (0 if b is None else len(b))
            raise InputError(f"reads {name2} has fewer records than {name1}: it ends after record {got}")
        if len(b) > len(a):
            raise InputError(f"reads {name2} has more records than {name1} ({done + len(a)})")
        bad = first_name_mismatch(a, b)
        if bad >= 0:
            record = done + bad + 1
            raise InputError(f"reads {name1} and {name2}: record {record} (line {4 * record - 3}) is "
                             f"{a.name(bad)!r} in one and {b.name(bad)!r} in the other (mates must be in the same order)")
        done += len(a)
        yield a, b
    if next(second, None) is not None:
        raise InputError(f"reads {name2} has more records than {name1} ({done})")


@njit(cache=True, nogil=True)
def first_unmated(names, name_off, start):
    """The first read i of start, start + 2, ... whose name differs from read i + 1's, else -1 (a
    last read without a read after it is not counted)."""
    for i in range(start, name_off.shape[0] - 2, 2):
        a, b, e = name_off[i], name_off[i + 1], name_off[i + 2]
        if b - a != e - b:
            return i
        for x in range(b - a):
            if names[a + x] != names[b + x]:
                return i
    return -1


def unmated(path, record: int, name: str, after: str | None) -> InputError:
    """The one-line error for a record (1-based) whose next record is not its mate (none: the end)."""
    follows = "the file ends" if after is None else f"{after!r} follows"
    return InputError(f"reads {shown(path)} record {record} (line {4 * record - 3}): {name!r} has no mate "
                      f"after it ({follows}); with -p, consecutive records with the same name are mates")


def mates_in_order(batches, path: str):
    """The batches of one file of interleaved mates, checked: records 2i and 2i + 1 (counted over
    the whole file, whichever batch each falls in) share a name (after /1 and /2), and the count is
    even. Singletons are not supported: the first record without its mate after it is the error."""
    done = 0
    last = None   # the name of a batch's last read when its mate is the next batch's first
    for batch in batches:
        start = 0
        if done % 2 and len(batch):
            if batch.name(0) != last:
                raise unmated(path, done, last, batch.name(0))
            start = 1
        bad = first_unmated(batch.names, batch.name_off, start)
        if bad >= 0:
            raise unmated(path, done + bad + 1, batch.name(bad), batch.name(bad + 1))
        done += len(batch)
        if done % 2:
            last = batch.name(len(batch) - 1)
        yield batch
    if done % 2:
        raise unmated(path, done, last, None)


