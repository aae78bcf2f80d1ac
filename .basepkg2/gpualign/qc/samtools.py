"""samtools' text reports (stats, flagstat), read back into the numbers the report plots.

The histograms come from `samtools stats` (a C pass over the BAM), never from a Python loop over
its records. `samtools stats` sections used here (`grep ^KEY` of its output):

    SN    summary numbers ("reads mapped:", "reads duplicated:", ...)
    MAPQ  mapping qualities of primary mapped reads that are not duplicates (nor QC-failed)
    IS    insert sizes: size, pairs, inward, outward, other orientation (each pair once)
    MPC   mismatches per cycle (with -r REF only): cycle, N bases, then mismatches at quality 0, 1, ...
    IC    indels per cycle: cycle, insertions in first / last fragments, deletions in first / last
    FFQ, LFQ  base qualities per cycle of first / last fragments: cycle, then bases at quality 0, 1, ...

Cycles are sequencing cycles, counted from the read's first base as sequenced (reverse-strand
reads are turned back).
"""

import numpy as np

from ..errors import InputError


def parse_stats(text: str) -> dict:
    """`samtools stats` output as {section: [row, ...]}, each row its fields after the key."""
    sections = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        key, *fields = line.split("\t")
        sections.setdefault(key, []).append(fields)
    if "SN" not in sections:
        raise InputError("samtools stats: no summary numbers (SN lines): not samtools stats output")
    return sections


def summary_numbers(sections: dict) -> dict:
    """SN as {name: number}, names without their colon ('reads mapped')."""
    out = {}
    for name, value, *_ in sections["SN"]:
        out[name.rstrip(":")] = float(value)
    return out


def histogram(sections: dict, key: str, columns: int = 2) -> np.ndarray:
    """A section's rows as an integer array (first `columns` fields); an absent section is empty."""
    rows = [[int(float(f)) for f in fields[:columns]] for fields in sections.get(key, [])]
    return np.array(rows, dtype=np.int64).reshape(-1, columns)


def mapq_histogram(sections: dict) -> tuple[np.ndarray, np.ndarray]:
    """(MAPQ values 0..max, reads at each) of primary mapped reads that are not duplicates."""
    rows = histogram(sections, "MAPQ")
    counts = np.zeros(int(rows[:, 0].max(initial=60)) + 1, dtype=np.int64)
    counts[rows[:, 0]] = rows[:, 1]
    return np.arange(len(counts)), counts


def insert_sizes(sections: dict) -> tuple[np.ndarray, np.ndarray]:
    """(insert sizes, pairs at each) of pairs whose mates face each other (FR: inward), as samtools
    stats lists them (up to where most pairs lie; -i caps the size)."""
    rows = histogram(sections, "IS", columns=3)
    return rows[:, 0], rows[:, 2]


def per_cycle(sections: dict, key: str, cycles: int) -> np.ndarray:
    """A per-cycle section summed over its columns after the cycle, as an array over cycles 1..cycles."""
    out = np.zeros(cycles, dtype=np.int64)
    for fields in sections.get(key, []):
        cycle = int(fields[0])
        if 1 <= cycle <= cycles:
            out[cycle - 1] += sum(int(f) for f in fields[1:])
    return out


def bases_per_cycle(sections: dict) -> np.ndarray:
    """Bases sequenced at each cycle, of all reads (first and last fragments)."""
    cycles = max((int(fields[0]) for key in ("FFQ", "LFQ") for fields in sections.get(key, [])), default=0)
    return per_cycle(sections, "FFQ", cycles) + per_cycle(sections, "LFQ", cycles)


def error_rates(sections: dict) -> dict:
    """Mismatches, insertions and deletions per mapped base at each cycle: {cycle, mismatch,
    insertion, deletion} arrays (mismatch None without MPC, i.e. samtools stats run without -r).

    The bases at a cycle are those of all reads times the share of reads mapped, exact when mapped
    and unmapped reads have the same lengths (reads of one length); N bases are not mismatches."""
    bases = bases_per_cycle(sections)
    sn = summary_numbers(sections)
    mapped = bases * (sn["reads mapped"] / sn["sequences"] if sn.get("sequences") else 0.0)
    cycles = len(bases)
    mismatches = None
    if "MPC" in sections:
        mismatches = np.zeros(cycles, dtype=np.int64)
        for fields in sections["MPC"]:
            if 1 <= int(fields[0]) <= cycles:
                mismatches[int(fields[0]) - 1] += sum(int(f) for f in fields[2:])   # fields[1]: N bases
    indels = np.zeros((cycles, 4), dtype=np.int64)
    for fields in sections.get("IC", []):
        if 1 <= int(fields[0]) <= cycles:
            indels[int(fields[0]) - 1] += [int(f) for f in fields[1:5]]
    return {"cycle": np.arange(1, cycles + 1),
            "mismatch": None if mismatches is None else per_base(mismatches, mapped),
            "insertion": per_base(indels[:, 0] + indels[:, 1], mapped),
            "deletion": per_base(indels[:, 2] + indels[:, 3], mapped)}


def per_base(counts: np.ndarray, bases: np.ndarray) -> np.ndarray:
    return np.divide(counts, bases, out=np.zeros(len(bases)), where=bases > 0)


def parse_flagstat(text: str) -> dict:
    """`samtools flagstat` (default format) as {what: QC-passed + QC-failed count}: 'in total',
    'primary', 'secondary', 'duplicates', 'primary duplicates', 'mapped', 'primary mapped', ..."""
    out = {}
    for line in text.splitlines():
        parts = line.split(" ", 3)
        if len(parts) < 4 or parts[1] != "+":
            continue
        what = parts[3].split(" (", 1)[0].strip()
        out[what] = int(parts[0]) + int(parts[2])
    if "in total" not in out:
        raise InputError("samtools flagstat: no 'in total' line: not samtools flagstat output")
    return out


def duplication(flagstat: dict) -> dict:
    """Primary reads split into unique mapped, duplicate (0x400; duplicate marking flags mapped reads
    only) and unmapped, and the duplication rate: duplicates among the primary mapped reads, as
    Picard's PERCENT_DUPLICATION."""
    primary = flagstat["primary"]
    mapped = flagstat["primary mapped"]
    dups = flagstat["primary duplicates"]
    return {"primary": primary, "unique": mapped - dups, "duplicates": dups, "unmapped": primary - mapped,
            "rate": dups / mapped if mapped else 0.0}


__all__ = ["parse_stats", "summary_numbers", "mapq_histogram", "insert_sizes", "error_rates", "bases_per_cycle",
           "parse_flagstat", "duplication"]
