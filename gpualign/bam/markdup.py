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
- Ties of score: the set member whose first record comes first in the sorted output is kept
  (Picard's rule; `samtools markdup` keeps the lower read name for pairs and the first in the file
  for fragments). The sorted output's order is (sort key, input order), so the rule depends on the
  records alone, not on batches or threads.
- Unmapped reads, unmapped mates of flagged reads included, are never flagged (Picard, and
  `samtools markdup` without -S). gpualign writes no secondary or supplementary records.
- Libraries: one run is one library (its read group's LB; without one, Picard's "Unknown Library").

Metrics are written in Picard's DuplicationMetrics layout (write_metrics), which MultiQC's Picard
module reads. Optical duplicates are not detected: READ_PAIR_OPTICAL_DUPLICATES is 0.
"""

import math

import numpy as np

from ..output import open_binary
from .records import D_END, D_FIRST, D_FLAGS, D_MATE, D_SCORE, FIRST_IS_MATE

FLAG_DUP_BYTE = 19     # the record byte holding the flag's high 8 bits (block_size 4 + 14 bytes, + 1)
FLAG_DUP_BIT = 0x04    # 0x400 >> 8

UNKNOWN_LIBRARY = "Unknown Library"   # Picard's name for reads without a read group's LB
METRIC_COLUMNS = ("LIBRARY", "UNPAIRED_READS_EXAMINED", "READ_PAIRS_EXAMINED", "SECONDARY_OR_SUPPLEMENTARY_RDS",
                  "UNMAPPED_READS", "UNPAIRED_READ_DUPLICATES", "READ_PAIR_DUPLICATES",
                  "READ_PAIR_OPTICAL_DUPLICATES", "PERCENT_DUPLICATION", "ESTIMATED_LIBRARY_SIZE")


def decide(d, lib=None, mate=None):
    """Which records are duplicates: a bool array in input order. d: dup_fields rows of every
    record of the output, in input order (records.D_* columns); lib: each record's library number
    (None: one library); mate: each record's mate's row (None: paired records interleave mates,
    the mate of row i is row i ^ 1)."""
    n = d.shape[0]
    dup = np.zeros(n, dtype=bool)
    idx = np.arange(n, dtype=np.int64)
    lib = np.zeros(n, dtype=np.int64) if lib is None else np.asarray(lib, dtype=np.int64)
    mate = idx ^ 1 if mate is None else np.asarray(mate, dtype=np.int64)
    end, mend, score, first = d[:, D_END], d[:, D_MATE], d[:, D_SCORE], d[:, D_FIRST]
    first_row = np.where(d[:, D_FLAGS] & FIRST_IS_MATE, mate, idx)   # the row of the fragment's first record

    # pairs: one representative row a pair (the one with the lower row), both mates flagged
    in_pair = (end >= 0) & (mend >= 0)
    rep = np.flatnonzero(in_pair & (idx < mate))
    lo, hi = np.minimum(end[rep], mend[rep]), np.maximum(end[rep], mend[rep])
    order = np.lexsort((first_row[rep], first[rep], -score[rep], hi, lo, lib[rep]))
    gone = rep[order[1:][same_set(order, lib[rep], lo, hi)]]
    dup[gone] = True
    dup[mate[gone]] = True

    # fragments: sets by library and end; a set with a read of a pair flags all its fragments
    cand = np.flatnonzero(end >= 0)
    paired = in_pair[cand].astype(np.int64)
    # in a set, the reads of pairs first, then fragments by score and tie key: the first fragment
    # of a set is kept only when it is the set's first row (no pair in the set)
    order = np.lexsort((first_row[cand], first[cand], -score[cand], -paired, end[cand], lib[cand]))
    rows = cand[order]
    new_set = np.ones(len(rows), dtype=bool)
    new_set[1:] = ~same_set(order, lib[cand], end[cand])
    dup[rows[~new_set & (paired[order] == 0)]] = True
    return dup


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
    dup is True, in place."""
    if dup.any():
        starts = np.cumsum(sizes, dtype=np.int64) - sizes
        records[starts[dup] + FLAG_DUP_BYTE] |= FLAG_DUP_BIT


def metrics(d, dup, mate=None):
    """Picard's DuplicationMetrics counts of one library (the records' dup_fields rows and
    decide's flags)."""
    end, mend = d[:, D_END], d[:, D_MATE]
    in_pair = (end >= 0) & (mend >= 0)
    single = (end >= 0) & (mend < 0)
    m = {"UNPAIRED_READS_EXAMINED": int(single.sum()), "READ_PAIRS_EXAMINED": int(in_pair.sum()) // 2,
         "SECONDARY_OR_SUPPLEMENTARY_RDS": 0, "UNMAPPED_READS": int((end < 0).sum()),
         "UNPAIRED_READ_DUPLICATES": int((dup & single).sum()), "READ_PAIR_DUPLICATES": int((dup & in_pair).sum()) // 2,
         "READ_PAIR_OPTICAL_DUPLICATES": 0}
    examined = m["UNPAIRED_READS_EXAMINED"] + 2 * m["READ_PAIRS_EXAMINED"]
    m["PERCENT_DUPLICATION"] = ((m["UNPAIRED_READ_DUPLICATES"] + 2 * m["READ_PAIR_DUPLICATES"]) / examined
                                if examined else 0.0)
    m["ESTIMATED_LIBRARY_SIZE"] = estimate_library_size(
        m["READ_PAIRS_EXAMINED"] - m["READ_PAIR_OPTICAL_DUPLICATES"],
        m["READ_PAIRS_EXAMINED"] - m["READ_PAIR_DUPLICATES"])
    return m


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


def write_metrics(path: str, rows, source: str, command: str):
    """A metrics file in Picard MarkDuplicates' layout (## METRICS CLASS picard.sam.DuplicationMetrics),
    one row a library: rows maps a library name to metrics(); source names the BAM (MultiQC takes
    the sample name from INPUT=)."""
    lines = ["## htsjdk.samtools.metrics.StringHeader",
             f"# picard.sam.markduplicates.MarkDuplicates INPUT=[{source}] (duplicates marked by {command}, "
             "in Picard's layout; no optical duplicates)",
             "", "## METRICS CLASS\tpicard.sam.DuplicationMetrics", "\t".join(METRIC_COLUMNS)]
    for library, m in rows.items():
        values = [library] + [m[c] for c in METRIC_COLUMNS[1:]]
        lines.append("\t".join("" if v is None else f"{v:.6f}" if isinstance(v, float) else str(v) for v in values))
    with open_binary(path) as fh:   # '-' is stdout
        fh.write(("\n".join(lines) + "\n\n").encode())
