"""Duplicate marking, decided on small per-record arrays as the sorted BAM is written (sort.py),
never by a second pass over the BAM.

The encoder (records.dup_fields) gives every record, in input order, its unclipped 5' end (contig,
position, strand, packed so that ends compare in that order; -1 when unmapped), its mapped mate's
(-1 for single-end reads and reads whose mate is unmapped), a score and a tie key. `decide` then
sorts those arrays once and returns which records are duplicates; SortedBam sets 0x400 in the flag
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

from ..output import open_binary
from .optical import FR, OTHER, RF, optical_in_sets
from .records import D_END, D_FIRST, D_FLAGS, D_LOC, D_MATE, D_SCORE, FIRST_IS_MATE, IS_READ1, NOT_PRIMARY

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
    duplicates must share; distance: the optical pixel distance (0: none counted)."""
    n = d.shape[0]
    dup = np.zeros(n, dtype=bool)
    optical = np.zeros(n, dtype=bool)
    idx = np.arange(n, dtype=np.int64)
    lib = np.zeros(n, dtype=np.int64) if lib is None else np.asarray(lib, dtype=np.int64)
    mate = idx ^ 1 if mate is None else np.asarray(mate, dtype=np.int64)
    end, mend, score, first = d[:, D_END], d[:, D_MATE], d[:, D_SCORE], d[:, D_FIRST]
    loc = d[:, D_LOC]
    first_row = np.where(d[:, D_FLAGS] & FIRST_IS_MATE, mate, idx)   # the row of the fragment's tie record

    # pairs: one representative row a pair (the one with the lower row), both mates flagged
    in_pair = (end >= 0) & (mend >= 0)
    rep = np.flatnonzero(in_pair & (idx < mate))
    lo, hi = np.minimum(end[rep], mend[rep]), np.maximum(end[rep], mend[rep])
    order = np.lexsort((first_row[rep], first[rep], loc[rep], -score[rep], hi, lo, lib[rep]))
    same = same_set(order, lib[rep], lo, hi)
    gone = rep[order[1:][same]]
    dup[gone] = True
    dup[mate[gone]] = True
    if distance > 0 and len(rep):
        rows = rep[order]
        set_start = np.flatnonzero(np.concatenate(([True], ~same, [True])))
        rg_rows = np.zeros(len(rows), dtype=np.int64) if rg is None else np.asarray(rg, dtype=np.int64)[rows]
        optical[rows] = optical_in_sets(set_start, d[rows, D_LOC], rg_rows, optical_orientation(d[rows]),
                                        int(distance))

    # fragments: sets by library and end; a set with a read of a pair flags all its fragments
    cand = np.flatnonzero(end >= 0)
    paired = in_pair[cand].astype(np.int64)
    # in a set, the reads of pairs first, then fragments by score and tie key: the first fragment
    # of a set is kept only when it is the set's first row (no pair in the set)
    order = np.lexsort((first_row[cand], first[cand], loc[cand], -score[cand], -paired, end[cand], lib[cand]))
    rows = cand[order]
    new_set = np.ones(len(rows), dtype=bool)
    new_set[1:] = ~same_set(order, lib[cand], end[cand])
    dup[rows[~new_set & (paired[order] == 0)]] = True
    return dup, optical


def optical_orientation(d):
    """FR, RF or OTHER of pairs (rows of one mate each): read 1's strand, then read 2's (Picard's
    orientationForOpticalDuplicates), whichever mate the row is."""
    own, other = d[:, D_END] & 1, d[:, D_MATE] & 1
    read1 = (d[:, D_FLAGS] & IS_READ1) != 0
    r1, r2 = np.where(read1, own, other), np.where(read1, other, own)
    return np.where((r1 == 0) & (r2 == 1), FR, np.where((r1 == 1) & (r2 == 0), RF, OTHER)).astype(np.int64)


def same_set(order, *columns):
    """For each row after the first of `order`: whether it has the same values in every column
    as the row before it."""
    same = np.ones(max(len(order) - 1, 0), dtype=bool)
    for c in columns:
        v = c[order]
        same &= v[1:] == v[:-1]
    return same


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
