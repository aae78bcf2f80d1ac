"""Duplicate marking, decided on small per-record arrays as the sorted BAM is written (sort.py),
never by a second pass over the BAM.

The encoder (records.dup_fields) gives every record, in input order, its unclipped 5' end (contig,
position, strand, packed so that ends compare in that order; -1 when unmapped), its mapped mate's
(-1 for single-end reads and reads whose mate is unmapped), a score and tie keys. `decide` then
groups those arrays into sets (hashing, in linear time) and returns which records are duplicates; SortedBam sets 0x400 in the flag
of each such record in a part's gathered bytes, before the part is compressed. Records are flagged,
never removed. The rules are Picard MarkDuplicates' and `samtools markdup`'s (template mode):

- Pairs (both mates mapped): a set is the pairs of one library with the same two ends (each end:
  contig, unclipped 5' position, strand; the two in either mate order). The pair with the highest
  score (the two mates' base qualities of 15 and over summed, each mate's capped at 16383, as
  Picard) is kept; every other pair is flagged, both mates.
- Fragments (single-end reads and mapped reads whose mate is unmapped): a set is the mapped reads
  of one library with the same end (contig, unclipped 5' position, strand), the mapped reads of
  pairs included. If the set holds a read of a pair, every fragment in it is flagged (a pair wins
  over a fragment, as both tools do); else the fragment with the highest score is kept, the others
  flagged.
- Ties of score (Picard's comparator): the member with the lowest flow-cell place (tile, x, y
  from its Illumina name; names that do not parse come first) is kept, then the one whose tie
  record comes first in the sorted output: a single read itself, of a pair Picard's read 1 end
  (the mate with the lower unclipped 5' end, on equal ends the one written first). The sorted
  output's order is (sort key, input order), so the rule depends on the records alone, not on
  batches, threads, chunks or units. (`samtools markdup` keeps the lower read name of tied pairs.)
- Unmapped reads, unmapped mates of flagged reads included, are never flagged (Picard, and
  `samtools markdup` without -S). gpualign writes no secondary or supplementary records.
- Libraries: a read group's LB (without one, Picard's "Unknown Library"); a run of `gpualign map` is
  one read group, a merge (merge.py) sees every input's.
- Optical duplicates (optical.py), with a pixel distance: counted among the pairs of each set as
  Picard does (READ_PAIR_OPTICAL_DUPLICATES), flagged like any other duplicate, and left out of
  the pairs ESTIMATED_LIBRARY_SIZE is estimated from.

Metrics are written in Picard's DuplicationMetrics layout (write_metrics), one row a library,
which MultiQC's Picard module reads; read_metrics reads them back.
"""

import math

import numpy as np
from numba import njit

from ..jitcache import use_versioned_cache
from ..output import open_binary
from .optical import FR, OTHER, RF, optical_in_sets
from .records import D_END, D_FIRST, D_FLAGS, D_LOC, D_MATE, D_SCORE, FIRST_IS_MATE, IS_READ1, NOT_PRIMARY

use_versioned_cache()  # before any @njit below

FLAG_DUP_BYTE = 19     # the record byte holding the flag's high 8 bits (block_size 4 + 14 bytes, + 1)
FLAG_DUP_BIT = 0x04    # 0x400 >> 8

UNKNOWN_LIBRARY = "Unknown Library"   # Picard's name for reads without a read group's LB
METRIC_COLUMNS = ("LIBRARY", "UNPAIRED_READS_EXAMINED", "READ_PAIRS_EXAMINED", "SECONDARY_OR_SUPPLEMENTARY_RDS",
                  "UNMAPPED_READS", "UNPAIRED_READ_DUPLICATES", "READ_PAIR_DUPLICATES",
                  "READ_PAIR_OPTICAL_DUPLICATES", "PERCENT_DUPLICATION", "ESTIMATED_LIBRARY_SIZE")


def decide(d, lib=None, mate=None, rg=None, distance=0):
    """Which records are duplicates, and which pairs are optical duplicates: (dup, optical), bool
    arrays in input order (optical: True on the lower row of each such pair). d: dup_fields rows of
    every record of the output, in input order (records.D_* columns); lib: each record's library
    number (None: one library); mate: each record's mate's row (None: paired records interleave
    mates, the mate of row i is row i ^ 1); rg: read group numbers (None: one), which optical
    duplicates must share; distance: the optical pixel distance (0: none counted).

    Sets are found by hashing their keys and each set's best member by one pass (set_numbers,
    best_of_sets), in time linear in the records: no sort over several keys."""
    n = d.shape[0]
    dup = np.zeros(n, dtype=bool)
    optical = np.zeros(n, dtype=bool)
    idx = np.arange(n, dtype=np.int64)
    lib = np.zeros(n, dtype=np.int64) if lib is None else np.asarray(lib, dtype=np.int64)
    mate = idx ^ 1 if mate is None else np.asarray(mate, dtype=np.int64)
    end, mend = d[:, D_END], d[:, D_MATE]
    first_row = np.where(d[:, D_FLAGS] & FIRST_IS_MATE, mate, idx)   # the row of the fragment's tie record
    tie = (d[:, D_SCORE], d[:, D_LOC], d[:, D_FIRST], first_row)

    # pairs: one representative row a pair (the one with the lower row), both mates flagged
    in_pair = (end >= 0) & (mend >= 0)
    rep = np.flatnonzero(in_pair & (idx < mate))
    sets, count = set_numbers(lib[rep], np.minimum(end[rep], mend[rep]), np.maximum(end[rep], mend[rep]))
    best = best_of_sets(sets, count, *(t[rep] for t in tie), np.ones(len(rep), dtype=np.bool_))
    gone = rep[best[sets] != np.arange(len(rep))]
    dup[gone] = True
    dup[mate[gone]] = True
    if distance > 0 and len(rep):
        # members set by set, the kept pair first
        order = np.argsort(2 * sets + (best[sets] != np.arange(len(rep))), kind="stable")
        rows = rep[order]
        set_start = np.flatnonzero(np.concatenate(([True], sets[order][1:] != sets[order][:-1], [True])))
        rg_rows = np.zeros(len(rows), dtype=np.int64) if rg is None else np.asarray(rg, dtype=np.int64)[rows]
        optical[rows] = optical_in_sets(set_start, d[rows, D_LOC], rg_rows, optical_orientation(d[rows]),
                                        int(distance))

    # fragments: sets by library and end; a set with a read of a pair flags all its fragments, else
    # its best fragment is kept
    cand = np.flatnonzero(end >= 0)
    single = ~in_pair[cand]
    sets, count = set_numbers(lib[cand], end[cand], np.zeros(len(cand), dtype=np.int64))
    best = best_of_sets(sets, count, *(t[cand] for t in tie), single)
    has_pair = np.zeros(count, dtype=bool)
    has_pair[sets[~single]] = True
    dup[cand[single & (has_pair[sets] | (best[sets] != np.arange(len(cand))))]] = True
    return dup, optical


@njit(cache=True, nogil=True)
def set_numbers(a, b, c):
    """A number for each distinct (a, b, c) (0, 1, ... in order of first appearance), rows with equal
    values sharing it, and how many there are: one pass over an open-addressing hash table."""
    n = a.shape[0]
    size = 1
    while size < 2 * n + 2:
        size <<= 1
    mask = np.uint64(size - 1)
    table = np.full(size, -1, dtype=np.int64)   # a row of the slot's set
    numbers = np.empty(n, dtype=np.int64)
    count = 0
    for i in range(n):
        h = (np.uint64(a[i]) * np.uint64(0x9E3779B97F4A7C15) ^ np.uint64(b[i]) * np.uint64(0xC2B2AE3D27D4EB4F)
             ^ np.uint64(c[i]) * np.uint64(0x165667B19E3779F9))
        slot = np.int64((h ^ (h >> np.uint64(29))) & mask)
        while True:
            j = table[slot]
            if j < 0:
                table[slot] = i
                numbers[i] = count
                count += 1
                break
            if a[j] == a[i] and b[j] == b[i] and c[j] == c[i]:
                numbers[i] = numbers[j]
                break
            slot = (slot + 1) & (size - 1)
    return numbers, count


@njit(cache=True, nogil=True)
def best_of_sets(sets, count, score, loc, first, first_row, eligible):
    """Each set's kept member among the eligible rows (-1: none): the highest score, then (Picard's
    ties) the lowest flow-cell place, tie record's sort key and row."""
    best = np.full(count, -1, dtype=np.int64)
    for i in range(sets.shape[0]):
        if not eligible[i]:
            continue
        s = sets[i]
        j = best[s]
        if (j < 0 or score[i] > score[j] or (score[i] == score[j] and (
                loc[i] < loc[j] or (loc[i] == loc[j] and (
                    first[i] < first[j] or (first[i] == first[j] and first_row[i] < first_row[j])))))):
            best[s] = i
    return best


def optical_orientation(d):
    """FR, RF or OTHER of pairs (rows of one mate each): read 1's strand, then read 2's (Picard's
    orientationForOpticalDuplicates), whichever mate the row is."""
    own, other = d[:, D_END] & 1, d[:, D_MATE] & 1
    read1 = (d[:, D_FLAGS] & IS_READ1) != 0
    r1, r2 = np.where(read1, own, other), np.where(read1, other, own)
    return np.where((r1 == 0) & (r2 == 1), FR, np.where((r1 == 1) & (r2 == 0), RF, OTHER)).astype(np.int64)


def flag_duplicates(records, sizes, dup):
    """Set 0x400 in the flags of the concatenated BAM records (of the given sizes, in order) whose
    dup is True and clear it in the others, in place: a merge's inputs carry their own units' marks."""
    at = np.cumsum(sizes, dtype=np.int64) - sizes + FLAG_DUP_BYTE
    records[at] = (records[at] & ~np.uint8(FLAG_DUP_BIT)) | np.where(dup, FLAG_DUP_BIT, 0).astype(np.uint8)


def metrics(d, dup, optical=None):
    """Picard's DuplicationMetrics counts of one library (the records' dup_fields rows and
    decide's flags)."""
    end, mend = d[:, D_END], d[:, D_MATE]
    in_pair = (end >= 0) & (mend >= 0)
    single = (end >= 0) & (mend < 0)
    not_primary = (d[:, D_FLAGS] & NOT_PRIMARY) != 0
    m = {"UNPAIRED_READS_EXAMINED": int(single.sum()), "READ_PAIRS_EXAMINED": int(in_pair.sum()) // 2,
         "SECONDARY_OR_SUPPLEMENTARY_RDS": int(not_primary.sum()), "UNMAPPED_READS": int(((end < 0) & ~not_primary).sum()),
         "UNPAIRED_READ_DUPLICATES": int((dup & single).sum()), "READ_PAIR_DUPLICATES": int((dup & in_pair).sum()) // 2,
         "READ_PAIR_OPTICAL_DUPLICATES": 0 if optical is None else int(optical.sum())}
    examined = m["UNPAIRED_READS_EXAMINED"] + 2 * m["READ_PAIRS_EXAMINED"]
    m["PERCENT_DUPLICATION"] = ((m["UNPAIRED_READ_DUPLICATES"] + 2 * m["READ_PAIR_DUPLICATES"]) / examined
                                if examined else 0.0)
    m["ESTIMATED_LIBRARY_SIZE"] = estimate_library_size(
        m["READ_PAIRS_EXAMINED"] - m["READ_PAIR_OPTICAL_DUPLICATES"],
        m["READ_PAIRS_EXAMINED"] - m["READ_PAIR_DUPLICATES"])
    return m


def library_metrics(d, dup, optical, lib, names):
    """metrics() of each library that has records ({name: counts}; names[i] is library i's), or of
    the first when none has (an empty input still gets its row)."""
    rows = {name: metrics(d[lib == i], dup[lib == i], optical[lib == i])
            for i, name in enumerate(names) if (lib == i).any()}
    return rows or {names[0]: metrics(d[:0], dup[:0], optical[:0])}


def duplicates_line(library: str, m) -> str:
    """One log line of a library's metrics()."""
    optical = f", {m['READ_PAIR_OPTICAL_DUPLICATES']} optical" if m["READ_PAIR_OPTICAL_DUPLICATES"] else ""
    return (f"duplicates ({library}): {m['UNPAIRED_READ_DUPLICATES']} of {m['UNPAIRED_READS_EXAMINED']} single reads, "
            f"{m['READ_PAIR_DUPLICATES']} of {m['READ_PAIRS_EXAMINED']} pairs{optical} "
            f"({100 * m['PERCENT_DUPLICATION']:.2f}%)")


def estimate_library_size(pairs: int, unique: int):
    """Picard's estimate (DuplicationMetrics.estimateLibrarySize): the library size x solving
    unique / x = 1 - exp(-pairs / x), by bisection; None (empty in the file) without duplicates."""
    if pairs <= 0 or pairs - unique <= 0 or unique <= 0:
        return None

    def f(x):
        return unique / x - 1 + math.exp(-pairs / x)

    lo, hi = 1.0, 100.0
    if f(lo * unique) < 0:
        return None
    while f(hi * unique) > 0:
        hi *= 10.0
    for _ in range(40):
        mid = (lo + hi) / 2.0
        v = f(mid * unique)
        if v == 0:
            break
        if v > 0:
            lo = mid
        else:
            hi = mid
    return int(unique * (lo + hi) / 2.0)


def write_metrics(path: str, rows, source: str, command: str, distance: int = 0):
    """A metrics file in Picard MarkDuplicates' layout (## METRICS CLASS picard.sam.DuplicationMetrics),
    one row a library: rows maps a library name to metrics(); source names the BAM (MultiQC takes
    the sample name from INPUT=); distance: the optical pixel distance (0: not looked for)."""
    optical = f"OPTICAL_DUPLICATE_PIXEL_DISTANCE={distance}" if distance else "no optical duplicates"
    lines = ["## htsjdk.samtools.metrics.StringHeader",
             f"# picard.sam.markduplicates.MarkDuplicates INPUT=[{source}] (duplicates marked by {command}, "
             f"in Picard's layout; {optical})",
             "", "## METRICS CLASS\tpicard.sam.DuplicationMetrics", "\t".join(METRIC_COLUMNS)]
    for library, m in rows.items():
        values = [library] + [m[c] for c in METRIC_COLUMNS[1:]]
        lines.append("\t".join("" if v is None else f"{v:.6f}" if isinstance(v, float) else str(v) for v in values))
    with open_binary(path) as fh:   # '-' is stdout
        fh.write(("\n".join(lines) + "\n\n").encode())


def read_metrics(path: str):
    """The rows of a metrics file that write_metrics (or Picard) wrote: {library: {column: value}},
    numbers as int or float, empty values None."""
    with open(path) as fh:
        lines = fh.read().split("\n")
    at = next(i for i, line in enumerate(lines) if line.startswith("## METRICS CLASS")) + 1
    columns = lines[at].split("\t")
    rows = {}
    for line in lines[at + 1:]:
        if not line.strip():
            break
        values = dict(zip(columns, line.split("\t")))
        library = values.pop("LIBRARY")
        rows[library] = {c: None if v == "" else float(v) if "." in v else int(v) for c, v in values.items()}
    return rows
