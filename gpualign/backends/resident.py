"""A batch kept on the GPU from exact match to traceback (the CUDA backend's single_end_batch): the
batch's codes go up once, every stage reads the one before it in device memory, and only each read's
placement and CIGAR come back, or, for BAM output, its BAM record (bam/records.py's encoder as a device
function, cuda.records_on_device), with the names and qualities gone up beside the codes. Paired
batches take the same chain up to each read's own choice (candidates_and_choice) and come back for the
pairing, which runs on the host (pairing.py), their records too (made beside the traceback on the GPU,
they lengthened the mapping threads that carry the pairs' host steps: BENCHMARKS.md).

The stages are mapper.map_batch's, on the same per-read functions (seed.py, choose.py, extend.py as
device functions): exact match; seeding of the reads without two exact hits (a block of threads a
read, seed_block.py, its hits in shared memory); re-seeding, at wider budgets, of those whose search
left out a well supported locus (few reads, thousands of hits each, in global memory); each read's candidate pairs (counted, an exclusive scan for
where they start, written); extension (the pairs the ungapped test leaves open listed apart, so
that their DPs run in warps of their own); loci and choice; traceback; MD and NM; BAM records.
Reads (and open pairs) are picked for a stage by appending them to a list with an atomic counter. The list's order
then varies from run to run, but every output is indexed by read, so no result depends on it.
Launch sizes come from the host's bounds (reads, reads x candidates a read may keep), with the true
counts read on the device, so no stage waits for the host.
"""

from typing import NamedTuple

import numpy as np

from .. import extend, seed
from ..fastq import CHECKED, WHITESPACE, RawReads
from ..extend import TR_COLUMNS, TR_NOPS
from ..md import md_bound
from ..reads import word_offsets
from . import cuda as cu
from . import gpu, launch

LISTS = 5   # a batch's list counters: picked, re-seeded, open pairs, listed traces, spilled seedings
RESEED_BLOCKS = 4096     # blocks of a re-seeding launch, each with its own scratch: about what the GPU holds at once
K = gpu.Kernels("resident_kernels")   # the kernels (resident_kernels.py), as gpu.py hands them out


def _voting(threads: int) -> int:
    """threads, for a block that votes: vote_block keeps a shared slot a thread, MAX_VOTE_THREADS of them."""
    return launch.block_threads(threads, launch.MAX_VOTE_THREADS, "a voting block")


def _first_in_shared(p):
    """Whether the first seeding's hits fit a block's shared memory (_seed_shared_kernel), or go to
    global memory (_seed_block_kernel)."""
    return p.max_hits <= launch.SHARED_MAX_HITS


def _hit_words(n, p):
    """int64 words (at least 1) of the seeding's hit scratch in global memory for a batch of n reads:
    a block's 2 * budget, for the first seeding where its budget is too big for shared memory and for
    the re-seeding (at its wider budget)."""
    tn = p.tuning
    first = 0 if _first_in_shared(p) else min(n, launch.SEED_FIRST_BLOCKS) * 2 * p.max_hits
    again = min(n, RESEED_BLOCKS) * 2 * p.max_hits * tn.reseed_hits if tn.reseed_hits > 0 else 0
    return max(first, again, 1)


class BatchShape(NamedTuple):
    """What the host needs to know of a batch to size its buffers."""
    n: int            # reads
    maxlen: int       # the most bases a read has (at least 1)
    bases: int        # bases in all
    name_bytes: int   # name bytes in all


def _batch_on_device(reads):
    """The batch's codes and, in one upload, its read offsets, word offsets, name hashes and LISTS zeroed
    list counters (picked, re-seeded, open pairs, listed traces, spilled seedings); the derived arrays'
    buffers (the exact kernel fills them), registered as the batch's so that later stages on this thread
    (cuda.py's) find them.
    A raw batch (fastq.RawReads) is parsed here (parse_on_device), or, where a record is not as that parse
    takes it, on the host (its error, if it has one, raised). Returns (arrays, name hashes, the
    LISTS counters, BatchShape)."""
    if isinstance(reads, RawReads):
        on_device = parse_on_device(reads)
        if on_device is not None:
            return on_device
        reads = reads.parsed()
    n = len(reads)
    word_off = word_offsets(reads.read_off)
    ints = np.empty(3 * n + 2 + LISTS, dtype=np.int64)
    ints[:n + 1] = reads.read_off
    ints[n + 1:2 * n + 2] = word_off
    ints[2 * n + 2:3 * n + 2] = reads.name_hash
    ints[3 * n + 2:] = 0
    on = cu._upload("batch integers", ints)
    bases = len(reads.codes)
    arrays = {"reads": reads, "codes": cu._upload("codes", reads.codes), "read_off": on[:n + 1],
              "word_off": on[n + 1:2 * n + 2], **cu._derived_buffers(n, bases, int(word_off[-1]))}
    cu._state().batch = arrays
    shape = BatchShape(n, int(reads.lengths.max(initial=1)), bases, int(reads.name_off[-1]))
    return arrays, on[2 * n + 2:3 * n + 2], *(on[3 * n + 2 + c:3 * n + 3 + c] for c in range(LISTS)), shape


NEWLINE_TILE = 256   # bytes of text a thread of the newline kernels scans
FASTQ_HEADER = 256   # bytes of a record's header line that the GPU's memory plan allows for


def parse_on_device(raw):
    """A raw batch's text parsed on the GPU into what _batch_on_device makes of a parsed one (and its
    names, name offsets and qualities, which the records kernel reads), registered as the batch's
    arrays: the text goes up, each newline's place is found (counted a tile a thread, an exclusive scan,
    written), then a thread a record measures and checks it (fastq.record_shape), three scans make the
    offsets, and a warp a record writes its codes, qualities, name and name hash. The host waits once,
    for the batch's shape. None where any record is not as parse_records would take it without an error
    (the host parses the batch then, and names its first bad record)."""
    n, size = raw.n, raw.size
    text = cu._upload_pieces("fastq text", raw.pieces)
    tiles = max(1, -(-size // NEWLINE_TILE))
    starts = cu._empty("newline starts", tiles + 1, np.int64)
    cu._launch(K._newline_counts_kernel, tiles, text, NEWLINE_TILE, starts)
    cu.scan_on_device(starts, 1, tiles, starts)
    places = cu._empty("newlines", 4 * n, np.int64)
    cu._launch(K._newline_places_kernel, tiles, text, NEWLINE_TILE, starts, places)
    ints = cu._empty("parsed integers", 4 * n + 3, np.int64)
    read_off, word_off, name_off, name_hash = ints[:n + 1], ints[n + 1:2 * n + 2], ints[2 * n + 2:3 * n + 3], ints[3 * n + 3:]
    counters = cu._upload("batch counters", np.zeros(LISTS + 2, dtype=np.int64))   # the lists'; bad records, longest
    checked = cu._on_device(CHECKED)
    cu._launch(K._measure_records_kernel, n, text, places, checked, cu._on_device(WHITESPACE), read_off, word_off,
               name_off, counters[LISTS:])
    for offsets in (read_off, word_off, name_off):
        cu.scan_on_device(offsets, 1, n, offsets)
    bound = size // 2 + 1   # bases (and qualities) a text of `size` bytes can hold, as parse_records sizes them
    codes, quals = cu._empty("codes", bound, np.uint8), cu._empty("quals", bound, np.uint8)
    names = cu._empty("names", max(size, 1), np.uint8)
    cu._launch(K._write_records_kernel, launch.WARP * n, text, places, checked, read_off, name_off, codes, quals, names,
               name_hash)
    shape, bases, words, name_bytes = cu._fetch(counters[LISTS:], read_off[n:], word_off[n:], name_off[n:])
    if shape[0]:
        return None
    bases, words, name_bytes = int(bases[0]), int(words[0]), int(name_bytes[0])
    arrays = {"reads": raw, "codes": codes[:max(bases, 1)], "read_off": read_off, "word_off": word_off,
              "names": names[:max(name_bytes, 1)], "name_off": name_off, "quals": quals[:max(bases, 1)],
              **cu._derived_buffers(n, bases, words)}
    cu._state().batch = arrays
    return (arrays, name_hash, *(counters[c:c + 1] for c in range(LISTS)),
            BatchShape(n, max(int(shape[1]), 1), bases, name_bytes))


def _chain(reads, genome, index, p, single_end, rg=None):
    """The stages up to the choice (single-end: and traceback, and with rg, the read group ID's bytes,
    the BAM records), launched on this thread's stream. Returns the device arrays by name."""
    n, tn, t = len(reads), p.tuning, p.max_indels
    emax = p.max_exact
    widen = tn.reseed_hits > 0
    stride = p.max_candidates * (tn.reseed_candidates if widen else 1)   # candidate slots a read
    arrays, name_hash, npicked, nredo, nopen, ntrace, nspill, shape = _batch_on_device(reads)
    reads = arrays["reads"]   # a raw batch the host had to parse is Reads now
    codes, rc_codes, read_off = arrays["codes"], arrays["rc_codes"], arrays["read_off"]
    g = cu._genome_args(genome)
    idx = (cu._on_device(index.offsets), cu._on_device(index.positions))
    d = {f: cu._empty(f, n, np.int64) for f in ("counts", "ncand", "dropped", "kept", "per read", "picked")}
    d["unseen"] = cu._empty("unseen", n, np.int64)
    d["exact keys"] = cu._empty("exact keys", n * emax, np.int64)
    cu._launch(K._exact_kernel, n, codes, read_off, arrays["word_off"], reads.k,
               *(arrays[f] for f in ("rc_codes", "packed", "rc_packed", "hbin", "rc_hbin")), *g, *idx, index.max_occ,
               emax, not single_end, p.match, d["counts"], d["exact keys"], d["unseen"], d["kept"], d["per read"],
               d["picked"], npicked)

    d["candidate keys"] = cu._empty("candidate keys", n * stride, np.int64)
    d["votes"] = cu._empty("votes", n * stride, np.int64)
    hits = cu._empty("hits", _hit_words(n, p), np.int64)
    redo = cu._empty("redo", n if widen else 1, np.int64)
    seeding = (p.match, seed.edit_cost(p), d["counts"], tn.vote_fraction, d["ncand"], d["candidate keys"], d["votes"],
               d["dropped"], d["unseen"], d["kept"], d["per read"])
    # a block a read: first those with few hits, in small shared arrays; the rest (spilled) in full-size ones,
    # their hits in shared memory where the budget fits it
    spilled = cu._empty("spilled seedings", n, np.int64)
    cu._launch_blocks(K._seed_small_kernel, min(n, launch.SEED_SHARED_BLOCKS), _voting(launch.SEED_FIRST_THREADS),
                      d["picked"], npicked, codes, rc_codes, read_off, reads.k, *idx, index.max_occ, t, p.max_hits,
                      p.max_candidates, stride, *seeding, redo, nredo, spilled, nspill)
    if _first_in_shared(p):
        cu._launch_blocks(K._seed_shared_kernel, min(n, launch.SEED_SHARED_BLOCKS), _voting(launch.SEED_SPILL_THREADS),
                          spilled, nspill, codes, rc_codes, read_off, reads.k, *idx, index.max_occ, t, p.max_hits,
                          p.max_candidates, stride, *seeding, redo, nredo)
    else:
        cu._launch_blocks(K._seed_block_kernel, min(n, launch.SEED_FIRST_BLOCKS), _voting(launch.SEED_SPILL_THREADS),
                          spilled, nspill, codes, rc_codes, read_off, reads.k, *idx, index.max_occ, t, hits,
                          p.max_hits, p.max_candidates, stride, *seeding, redo, nredo)
    if widen:   # seed.reseed_incomplete's wider budgets, for the reads whose search was incomplete: few reads
        # with thousands of hits each, a block a read
        cu._launch_blocks(K._seed_block_kernel, min(n, RESEED_BLOCKS), _voting(launch.SEED_BLOCK_THREADS), redo,
                          nredo, codes, rc_codes, read_off, reads.k, *idx, index.max_occ * tn.reseed_occ, t, hits,
                          p.max_hits * tn.reseed_hits, stride, stride, *seeding, cu._empty("no list", 1, np.int64),
                          nredo)

    bound = n * max(stride + 1, emax)   # pairs a batch could have
    d["pair start"] = cu._empty("pair start", n + 1, np.int64)
    d["pair read"] = cu._empty("pair read", bound, np.int64)
    d["pair key"] = cu._empty("pair key", bound, np.int64)
    cu.scan_on_device(d["per read"], 0, n, d["pair start"])
    cu._launch(K._pairs_kernel, n, d["per read"], d["counts"], d["exact keys"], emax, d["kept"], d["candidate keys"],
               stride, d["pair start"], d["pair read"], d["pair key"])
    d["ext"] = cu._empty("extension", (bound, extend.EXT_COLUMNS), np.int64)
    cu.extend_on_device(bound, d["pair start"], d["pair read"], d["pair key"], (codes, rc_codes, read_off), genome, p,
                        d["ext"], nopen)

    for f in ("eff", "raw", "loc", "end", "span"):
        d[f] = cu._empty(f"loci {f}", bound, np.int64)
    d["keep"] = cu._empty("loci keep", bound, np.bool_)
    for f in CHOICE:
        d[f] = cu._empty(f"choice {f}", n, np.int64)
    maxlen = shape.maxlen
    traced = n if single_end else 1
    d["ops"] = cu._empty("ops", traced * (2 * maxlen + 2), np.uint8)
    d["lens"] = cu._empty("lens", traced * (2 * maxlen + 2), np.int32)
    d["trace"] = cu._empty("traceback", (traced, TR_COLUMNS), np.int64)
    listed = cu._empty("listed traces", traced, np.int64)
    cu._launch(K._choose_kernel, n, d["pair start"], d["pair key"], d["ext"], codes, rc_codes, read_off, *g,
               genome.size, t, p.clip_penalty, *(d[f] for f in ("eff", "raw", "loc", "end", "span", "keep")),
               d["counts"], d["exact keys"], emax, name_hash, d["unseen"], p.match, p.mismatch, p.gap_open,
               p.gap_extend, p.min_score, single_end, *(d[f] for f in CHOICE), d["ops"], d["lens"], d["trace"],
               ntrace, listed)
    if single_end:   # the listed reads' DPs with traceback; then every read's MD and NM from its traceback (key:
        # the read's own row; unmapped ones empty)
        cu.close_traces_on_device(n, ntrace, listed, True, d["key"], d["key"], d["local"], (codes, rc_codes, read_off),
                                  genome, p, maxlen, d["ops"], d["lens"], d["trace"])
        d["md offsets"], d["md text"], d["nm"] = cu.md_on_device(True, d["key"], d["key"], (codes, rc_codes, read_off),
                                                                 d["ops"], d["lens"], d["trace"], genome, maxlen, t)
        if rg is not None:
            width = 2 * maxlen + 2
            d["capacity"] = cu.record_capacity(shape, len(rg), t)
            d["record offsets"], d["records"], d["record keys"] = cu.records_on_device(
                True, d["key"], tuple(d[f] for f in ("key", "mapq", "score", "sub")), d["key"], False,
                cu._read_arrays(reads, "names", "name_off", "codes", "quals", "read_off"),
                d["ops"][:width * n].reshape((width, n)), d["lens"][:width * n].reshape((width, n)), d["trace"],
                (d["md text"], d["md offsets"], d["nm"]), genome, rg, d["capacity"])
    return d


CHOICE = ("key", "local", "score", "sub", "mapq")


def _empty_batch(single_end):
    none = np.zeros(0, dtype=np.int64)
    if single_end:
        return (none,) * 5 + (np.zeros((0, 1), np.uint8), np.zeros((0, 1), np.int32),
                              np.zeros((0, TR_COLUMNS), np.int64), (np.zeros(0, np.uint8), np.zeros(1, np.int64), none),
                              none)
    return none, (none, none, np.zeros(1, np.int64), np.zeros((0, extend.EXT_COLUMNS), np.int64)), \
        none, (none, none, none, none, np.zeros(0, np.bool_)), (none,) * 5


def single_end_batch(reads, genome, index, p, rg=None, alignments=True):
    """mapper.map_batch's result fields for a single-end batch, computed on the GPU:
    (key, local, score, sub, mapq, ops, lens, trace, md, mapped, records); with rg (the read group ID's
    bytes, empty for none) the reads' BAM records too, as records.batch_bam_records takes them
    ((bytes, offsets, sort keys); None where rg is None or the batch's records overflowed the GPU's
    buffer). With records made and alignments False, the CIGARs, traceback rows and MD (ops, lens,
    trace, md) stay on the GPU (None): taking them apart on the host cost a mapping thread about 50 ms
    a batch of 160,000 reads on the GPU host, most of it waiting for the GIL."""
    n = len(reads)
    if n == 0:
        return (*_empty_batch(True), None)
    d = _chain(reads, genome, index, p, single_end=True, rg=rg)
    if "records" in d and not alignments:
        *choice, rec_off, rec_keys = cu._fetch(*(d[f] for f in CHOICE), d["record offsets"], d["record keys"][:n])
        if rec_off[n] <= d["capacity"]:
            rec, = cu._fetch(d["records"][:int(rec_off[n])])
            return (*choice, None, None, None, None, np.flatnonzero(choice[0] >= 0), (rec, rec_off, rec_keys))
    encoded = "records" in d
    fetched = cu._fetch(*(d[f] for f in CHOICE), d["trace"], d["md offsets"], d["nm"],
                        *((d["record offsets"], d["record keys"][:n]) if encoded else ()))
    choice, (out, md_off, nm), (rec_off, rec_keys) = fetched[:5], fetched[5:8], (fetched[8:] or (None, None))
    width = max(1, int(out[:, TR_NOPS].max(initial=0)))
    fits = encoded and rec_off[n] <= d["capacity"]
    ops, lens, text, *rec = cu._fetch(d["ops"][:width * n], d["lens"][:width * n], d["md text"][:int(md_off[n])],
                                      *((d["records"][:int(rec_off[n])],) if fits else ()))
    mapped = np.flatnonzero(choice[0] >= 0)
    out = out[mapped]
    ops, lens = extend.tidy_cigars(ops.reshape(width, n).T[mapped], lens.reshape(width, n).T[mapped], out[:, TR_NOPS])
    # an unmapped read's MD is empty, so the mapped reads' strings lie end to end in the text
    md = (text, np.append(md_off[mapped], md_off[n]), nm[mapped])
    return (*choice, ops, lens, out, md, mapped, (rec[0], rec_off, rec_keys) if fits else None)


def candidates_and_choice(reads, genome, index, p):
    """What mapper.map_pair_batch pairs from, computed on the GPU with every stored exact hit a
    candidate: (exact counts, (pair read, pair key, pair start, extension rows), unseen,
    (eff, raw, loc, span, keep), (key, local, score, sub, mapq)), as host arrays."""
    if len(reads) == 0:
        return _empty_batch(False)
    d = _chain(reads, genome, index, p, single_end=False)
    counts, unseen, start, *choice = cu._fetch(d["counts"], d["unseen"], d["pair start"],
                                               *(d[f] for f in CHOICE))
    m = int(start[-1])
    read, key, ext, eff, raw, loc, span, keep = cu._fetch(
        *(d[f][:m] for f in ("pair read", "pair key", "ext", "eff", "raw", "loc", "span", "keep")))
    return counts, (read, key, start, ext), unseen, (eff, raw, loc, span, keep), tuple(choice)


def device_slots(n: int, maxlen: int, p, single_end: bool) -> dict:
    """Bytes of each buffer a mapping thread keeps on the GPU (cuda._kept's slots, by name) for a batch
    of n reads of at most maxlen bases: _chain's, and for pairs the traceback, mate rescue and
    rescued extension after it. What a batch in flight holds (cuda.plan_batches sizes batches by
    it); a test holds it to the buffers a mapped batch made, slot by slot."""
    tn, t = p.tuning, p.max_indels
    widen = tn.reseed_hits > 0
    stride = p.max_candidates * (tn.reseed_candidates if widen else 1)
    bound = n * max(stride + 1, p.max_exact)
    words = n * -(-maxlen // 16)
    traced = n if single_end else 1
    slots = {"batch integers": 8 * (3 * n + 2 + LISTS), "codes": n * maxlen, "rc_codes": n * maxlen,
             "packed": 4 * words, "rc_packed": 4 * words, "hbin": 8 * n, "rc_hbin": 8 * n,
             "unseen": 8 * n, "exact keys": 8 * n * p.max_exact, "candidate keys": 8 * n * stride,
             "votes": 8 * n * stride, "redo": 8 * (n if widen else 1), "pair start": 8 * (n + 1),
             "pair read": 8 * bound, "pair key": 8 * bound, "extension": 8 * extend.EXT_COLUMNS * bound,
             "open pairs": 8 * bound, "no traceback": 1, "loci keep": bound,
             "hits": 8 * _hit_words(n, p), "scan tile sums": 8 * -(-n // launch.SCAN_THREADS)}
    slots |= {f: 8 * n for f in ("counts", "ncand", "dropped", "kept", "per read", "picked", "spilled seedings")}
    slots |= {f"loci {f}": 8 * bound for f in ("eff", "raw", "loc", "end", "span")}
    slots |= {f"choice {f}": 8 * n for f in CHOICE}
    if widen:
        slots["no list"] = 8
    if not single_end:   # the chosen placements' traceback, mate rescue, the rescued candidates' extension
        traced = n
        tasks = n * tn.rescue_per_read
        slots["traceback integers"] = 8 * (3 * n + 1)
        slots |= {f: 8 * tasks for f in ("task_read", "task_strand", "task_start", "task_len", "pair_read", "pair_key")}
        slots |= {"rescue": 8 * extend.RESCUE_COLUMNS * tasks, "extension counters": 16}
    if single_end:   # the BAM records (cuda.record_capacity's, with BAM's longest names and a 255-byte read group)
        slots |= {"names": n * 254, "name_off": 8 * (n + 1), "quals": n * maxlen, "record offsets": 8 * (n + 1),
                  "record keys": 8 * n, "read group": 256,
                  "records": n * (254 + cu.record_allowance(maxlen, 255, t) + (maxlen + 1) // 2 + maxlen)}
        # a raw batch's text and what parse_on_device makes of it (a header taken as at most FASTQ_HEADER bytes)
        text = n * (2 * maxlen + 6 + FASTQ_HEADER)
        slots |= {"fastq text": text, "newline starts": 8 * (-(-text // NEWLINE_TILE) + 1), "newlines": 32 * n,
                  "parsed integers": 8 * (4 * n + 3), "batch counters": 8 * (LISTS + 2),
                  "scan tile sums": 8 * -(-max(n, -(-text // NEWLINE_TILE)) // launch.SCAN_THREADS)}
        for slot, size in (("codes", text // 2 + 1), ("quals", text // 2 + 1), ("names", text)):
            slots[slot] = max(slots[slot], size)
    slots |= {"ops": traced * (2 * maxlen + 2), "lens": 4 * traced * (2 * maxlen + 2),
              "traceback": 8 * TR_COLUMNS * traced, "listed traces": 8 * traced,
              "traceback bytes": cu.close_trace_bytes(traced, maxlen, t),
              "md offsets": 8 * (traced + 1), "nm": 8 * traced, "md text": md_bound(traced, maxlen, t)}
    return slots
