"""Statistics of the sorted, indexed BAM (stage stats).

`write_stats` writes samtools'
flagstat and idxstats reports, optionally the full `samtools stats` report (which MultiQC reads;
given the reference it also counts mismatches per cycle), and a one-row mapping summary:

    records  primary  mapped  mapped_pct  mapq_ge_20

`records` counts every record, `primary` those that are neither secondary nor supplementary (one
per input read, so it is the number of reads); `mapped`, `mapped_pct` and `mapq_ge_20` count
primary records that are mapped (with MAPQ >= 20 for the last), as a share of `primary` for the
percentage. With `sample` given the row starts with a `sample` column, so per-sample rows stack.
The counts come from flagstat and a `samtools view -c` (C passes over the BAM; a Python loop over
its records, tests/naive.py's, took 1.7 s for 3 M records, view -c 1.0-1.25 s).
"""

import os

import pysam

from ..atomic import atomic_path
from ..errors import InputError
from ..qc.samtools import parse_flagstat
from ..sam import FLAG_SECONDARY, FLAG_SUPPLEMENTARY, FLAG_UNMAPPED

SUMMARY_COLUMNS = ("records", "primary", "mapped", "mapped_pct", "mapq_ge_20")
MAPQ_CUTOFF = 20
_NOT_PRIMARY = FLAG_SECONDARY | FLAG_SUPPLEMENTARY


def _check_bam(path: str, what: str):
    if not os.path.isfile(path):
        raise InputError(f"{what} {path}: no such file")
    try:
        pysam.quickcheck(path)
    except pysam.SamtoolsError as err:
        raise InputError(f"{what} {path}: not a complete BAM file ({_one_line(err)})") from None


def _one_line(err) -> str:
    return " ".join(str(err).split())[:300]


def summarize(bam: str, flagstat: str | None = None) -> dict:
    """The summary counts of a BAM, in SUMMARY_COLUMNS order (flagstat: its `samtools flagstat`
    text, if already made)."""
    counts = parse_flagstat(flagstat if flagstat is not None else pysam.flagstat(bam))
    primary, mapped = counts["primary"], counts["primary mapped"]
    skip = _NOT_PRIMARY | FLAG_UNMAPPED
    mapq = int(pysam.view("-c", "-q", str(MAPQ_CUTOFF), "-F", str(skip), bam).strip())
    pct = round(100.0 * mapped / primary, 2) if primary else 0.0
    return dict(zip(SUMMARY_COLUMNS, (counts["in total"], primary, mapped, pct, mapq)))


def write_stats(bam: str, flagstat_path: str, idxstats_path: str, summary_path: str,
                sample: str | None = None, samtools_stats_path: str | None = None,
                reference: str | None = None) -> dict:
    """Write flagstat, idxstats, the summary TSV and (samtools_stats_path) `samtools stats` of an
    indexed BAM, against `reference` (its FASTA, with .fai) if given. Returns the summary."""
    _check_bam(bam, "BAM")
    try:
        reports = [(flagstat_path, pysam.flagstat(bam)), (idxstats_path, pysam.idxstats(bam))]
        if samtools_stats_path:
            reports.append((samtools_stats_path, pysam.stats(*(["-r", reference] if reference else []), bam)))
        summary = summarize(bam, reports[0][1])
    except pysam.SamtoolsError as err:
        raise InputError(f"BAM {bam}: statistics failed: {_one_line(err)}") from None
    for path, text in reports:
        with atomic_path(path) as tmp, open(tmp, "w") as fh:
            fh.write(text)
    columns = (["sample"] if sample is not None else []) + list(SUMMARY_COLUMNS)
    values = ([sample] if sample is not None else []) + [summary[c] for c in SUMMARY_COLUMNS]
    with atomic_path(summary_path) as tmp, open(tmp, "w") as fh:
        fh.write("\t".join(columns) + "\n")
        fh.write("\t".join(str(v) for v in values) + "\n")
    return summary


__all__ = ["write_stats", "summarize", "SUMMARY_COLUMNS"]
