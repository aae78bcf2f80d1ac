"""The map summary: what one `gpualign map` run did, as JSON (`--summary FILE`, the workflow's align
jobs), several runs' summaries combined into a sample's, and the sample's row as a MultiQC
custom-content table.

A summary holds (mapper.run_summary): reads, mapped, proper (reads in proper pairs), seconds (wall
time of the mapping, start-up and compilation excluded), backend, paired, stage_seconds (seconds
per stage, summed over the threads that ran it, so their total may exceed the wall time),
insert_sizes (the estimate of each block of fragments: valid, mean, sd, low, high, fragments) and
duplicates (Picard's DuplicationMetrics counts of each library when duplicates were marked, else
null).
"""

import json
import math

from ..errors import InputError

FIELDS = ("reads", "mapped", "proper", "seconds", "backend", "paired", "stage_seconds", "insert_sizes",
          "duplicates")
TABLE_ID = "gpualign_map"


def write_summary(path: str, summary: dict):
    """The summary as JSON (path: a plain file or stream; the caller makes a regular file atomic)."""
    with open(path, "w") as fh:
        json.dump({key: summary[key] for key in FIELDS}, fh, indent=1)
        fh.write("\n")


def read_summary(path: str) -> dict:
    try:
        with open(path) as fh:
            summary = json.load(fh)
    except (OSError, ValueError) as err:
        raise InputError(f"map summary {path}: {err}") from None
    missing = [key for key in FIELDS if key not in summary]
    if missing:
        raise InputError(f"map summary {path}: no {missing[0]!r} (not written by gpualign map --summary?)")
    return summary


def combine(summaries: list) -> dict:
    """Several runs (a sample's units, a unit's chunks) as one: counts, seconds and stage seconds
    summed (so reads / seconds is the rate of one job), the blocks' estimates and the libraries'
    duplicate counts side by side."""
    if not summaries:
        raise ValueError("combine: no summaries")
    stages = {}
    for s in summaries:
        for stage, sec in s["stage_seconds"].items():
            stages[stage] = stages.get(stage, 0.0) + sec
    duplicates = {}
    for s in summaries:
        for library, counts in (s["duplicates"] or {}).items():
            duplicates[library] = add_counts(duplicates.get(library), counts)
    return {
        "reads": sum(s["reads"] for s in summaries),
        "mapped": sum(s["mapped"] for s in summaries),
        "proper": sum(s["proper"] for s in summaries),
        "seconds": sum(s["seconds"] for s in summaries),
        "backend": ",".join(sorted({s["backend"] for s in summaries})),
        "paired": any(s["paired"] for s in summaries),
        "stage_seconds": stages,
        "insert_sizes": [block for s in summaries for block in s["insert_sizes"]],
        "duplicates": duplicates if any(s["duplicates"] for s in summaries) else None,
    }


# Picard's DuplicationMetrics fields that are counts, so add up over a library's parts
PICARD_COUNTS = ("UNPAIRED_READS_EXAMINED", "READ_PAIRS_EXAMINED", "SECONDARY_OR_SUPPLEMENTARY_RDS", "UNMAPPED_READS",
                 "UNPAIRED_READ_DUPLICATES", "READ_PAIR_DUPLICATES", "READ_PAIR_OPTICAL_DUPLICATES")


def add_counts(total: dict | None, counts: dict) -> dict:
    """A library's duplicate counts over its parts: the counts added, the rate worked out again, the
    library size (not a sum) left out."""
    if total is None:
        return dict(counts)
    out = {key: total[key] + counts[key] for key in PICARD_COUNTS}
    examined = out["UNPAIRED_READS_EXAMINED"] + 2 * out["READ_PAIRS_EXAMINED"]
    dups = out["UNPAIRED_READ_DUPLICATES"] + 2 * out["READ_PAIR_DUPLICATES"]
    out["PERCENT_DUPLICATION"] = dups / examined if examined else 0.0
    out["ESTIMATED_LIBRARY_SIZE"] = None
    return out


def insert_size(summary: dict) -> dict | None:
    """The blocks' estimates pooled, weighted by their fragments: mean, sd (within and between
    blocks), the proper-pair range (median of the blocks'), blocks estimated of all; None when no
    block had enough confidently placed fragments."""
    valid = [b for b in summary["insert_sizes"] if b["valid"]]
    if not valid:
        return None
    weight = sum(b["fragments"] for b in valid)
    mean = sum(b["mean"] * b["fragments"] for b in valid) / weight
    var = sum((b["sd"] ** 2 + (b["mean"] - mean) ** 2) * b["fragments"] for b in valid) / weight
    return {"mean": mean, "sd": math.sqrt(var), "low": median([b["low"] for b in valid]),
            "high": median([b["high"] for b in valid]), "blocks": len(valid),
            "all_blocks": len(summary["insert_sizes"])}


def median(values):
    v = sorted(values)
    mid = len(v) // 2
    return v[mid] if len(v) % 2 else (v[mid - 1] + v[mid]) / 2


def stage_rates(summary: dict) -> dict:
    """Reads per second of each stage: the reads over the stage's seconds (summed over threads, so
    one thread's rate). Waits ('BAM records (wait)': the writer waiting for records) are not stages,
    and stages that took no measurable time are left out."""
    return {stage: summary["reads"] / sec for stage, sec in summary["stage_seconds"].items()
            if sec > 0 and not stage.endswith("(wait)")}


# The table's columns: (key, title, description, format)
COLUMNS = (
    ("reads", "Reads", "reads mapped by gpualign map (both mates of a pair count)", "{:,.0f}"),
    ("mapped_pct", "Mapped", "share of the reads placed", "{:,.2f}"),
    ("proper_pct", "Proper pairs", "share of the reads in proper pairs (paired reads)", "{:,.2f}"),
    ("reads_per_s", "Reads/s", "reads over the wall seconds of the mapping (start-up excluded), per job", "{:,.0f}"),
    ("seconds", "Seconds", "wall seconds of the mapping, summed over the sample's jobs", "{:,.1f}"),
    ("backend", "Backend", "where the kernels ran", None),
    ("insert_mean", "Insert mean", "gpualign's insert-size estimate: mean over blocks of 65,536 fragments", "{:,.1f}"),
    ("insert_sd", "Insert SD", "gpualign's insert-size estimate: standard deviation", "{:,.1f}"),
    ("proper_low", "Proper from", "shortest insert of a proper pair (median over blocks)", "{:,.0f}"),
    ("proper_high", "Proper to", "longest insert of a proper pair (median over blocks)", "{:,.0f}"),
)


def table_row(summary: dict) -> dict:
    """The sample's values for COLUMNS, and each stage's seconds (stage_<name>_s); empty where they
    do not apply (insert sizes of single reads)."""
    reads = summary["reads"]
    row = {
        "reads": reads,
        "mapped_pct": 100.0 * summary["mapped"] / reads if reads else 0.0,
        "proper_pct": 100.0 * summary["proper"] / reads if reads and summary["paired"] else "",
        "reads_per_s": reads / summary["seconds"] if summary["seconds"] > 0 else "",
        "seconds": summary["seconds"],
        "backend": summary["backend"],
    }
    inserts = insert_size(summary) or {}
    row.update(insert_mean=inserts.get("mean", ""), insert_sd=inserts.get("sd", ""),
               proper_low=inserts.get("low", ""), proper_high=inserts.get("high", ""))
    for stage, sec in summary["stage_seconds"].items():
        row[stage_column(stage)] = sec
    return row


def stage_column(stage: str) -> str:
    """'BAM records (worker threads)' -> 'stage_bam_records_worker_threads_s'"""
    words = "".join(c if c.isalnum() else " " for c in stage.lower()).split()
    return "stage_" + "_".join(words) + "_s"


def mqc_table(sample: str, summary: dict) -> str:
    """The sample's row as MultiQC custom content (a file named *_mqc.tsv): MultiQC puts the rows of
    every sample's file with this id into one table, "gpualign map"."""
    row = table_row(summary)
    stages = [(stage_column(stage), f"{stage} (s)",
               f"seconds in stage '{stage}', summed over the threads that ran it", "{:,.2f}")
              for stage in summary["stage_seconds"]]
    headers = list(COLUMNS) + stages
    lines = [f"# id: '{TABLE_ID}'",
             "# section_name: 'gpualign map'",
             "# description: 'what gpualign map did: throughput, seconds per stage and its insert-size estimates'",
             "# plot_type: 'table'",
             "# pconfig:",
             f"#     id: '{TABLE_ID}_table'",
             "#     title: 'gpualign map'",
             "# headers:"]
    for key, title, desc, fmt in headers:
        lines += [f"#     {key}:", f"#         title: {json.dumps(title)}",
                  f"#         description: {json.dumps(desc)}"]
        if fmt:
            lines.append(f"#         format: '{fmt}'")
        if key.startswith("stage_"):
            lines.append("#         hidden: true")   # a dozen columns: shown on demand in MultiQC
    lines.append("\t".join(["Sample"] + [key for key, *_ in headers]))
    lines.append("\t".join([sample] + [cell(row.get(key, "")) for key, *_ in headers]))
    return "\n".join(lines) + "\n"


def cell(value) -> str:
    if isinstance(value, float):
        return f"{value:.6g}" if abs(value) < 1e6 else f"{value:.0f}"
    return str(value)


__all__ = ["write_summary", "read_summary", "combine", "insert_size", "stage_rates", "table_row", "mqc_table"]
