"""merge_units: the sorted BAMs of a sample's units -> the sample's sorted BAM + .bai.

Several units: merged (gpualign.bam.merge) under a header holding every unit's @RG line (each unit
keeps its own read group; records keep their RG tags) and every unit's @PG lines, those of the
second and later units renamed ID.unit (gpualign.L002) where the ID is taken already, so the header
says how each unit was aligned and the output is the same on every run. With params.mark_duplicates
the sample's duplicates are marked across its units as the BAM is written, a library (LB) at a
time whatever unit its reads are in, and counted in output metrics. One unit: its BAM as it is (a
hard link where the file system allows one, else a copy), not rewritten, and a copy of its .bai;
its duplicates were marked when it was written, and its metrics are written again naming the
sample's BAM (MultiQC takes the sample from the file named there).
"""

import os
import shutil
import sys

sys.stderr = log = open(snakemake.log[0], "w", buffering=1)

import pysam  # noqa: E402

from gpualign.atomic import atomic_path  # noqa: E402
from gpualign.bam.markdup import duplicates_line, read_metrics, write_metrics  # noqa: E402
from gpualign.workflow.chunks import merge_sorted_bams  # noqa: E402
from gpualign.errors import job_errors  # noqa: E402

COMMAND = "gpualign workflow merge_units"

inp, out = snakemake.input, snakemake.output
bams, bais, units = list(inp.bams), list(inp.bais), list(snakemake.params.units)
markdup, distance = snakemake.params.mark_duplicates, snakemake.params.optical_distance
if out.bai != out.bam + ".bai":
    raise ValueError(f"merge_units: output bai must be {out.bam + '.bai'!r}, got {out.bai!r}")
if len(bams) != len(units) or len(bais) != len(units):
    raise ValueError(f"merge_units: {len(bams)} BAMs and {len(bais)} indexes for the {len(units)} units {units}")


def merged_header(units, bams):
    """The sample's header: the first unit's @HD and @SQ, every unit's @RG and @PG (PG IDs made unique)."""
    header, taken = None, set()
    for unit, bam in zip(units, bams):
        with pysam.AlignmentFile(bam, check_sq=False) as fh:
            h = fh.header.to_dict()
        if header is None:
            header = {key: h[key] for key in ("HD", "SQ") if key in h}
            header.update(RG=[], PG=[])
        elif h.get("SQ", []) != header.get("SQ", []):
            raise ValueError(f"merge_units: {bam} and {bams[0]} have different @SQ lines (references)")
        header["RG"] += [rg for rg in h.get("RG", []) if rg["ID"] not in {g["ID"] for g in header["RG"]}]
        renamed = {pg["ID"]: pg["ID"] if pg["ID"] not in taken else f"{pg['ID']}.{unit}" for pg in h.get("PG", [])}
        for pg in h.get("PG", []):
            pg = dict(pg, ID=renamed[pg["ID"]])
            if "PP" in pg:
                pg["PP"] = renamed.get(pg["PP"], pg["PP"])
            header["PG"].append(pg)
        taken |= set(renamed.values())
    return header


with job_errors(snakemake.rule, log, out.bam):
    if len(bams) == 1:
        # Snakemake wants each output newer than every input, and a hard link shares its source's
        # modification time: the link's (shared) time is set to now, and the small .bai is copied
        # after it, so the BAM is not older than the unit's .bai nor the .bai than the unit's BAM
        with atomic_path(out.bai) as tmp_bai, atomic_path(out.bam) as tmp:
            try:
                os.link(bams[0], tmp)
                os.utime(tmp)
                how = "linked"
            except OSError:   # another file system, or one without hard links
                shutil.copyfile(bams[0], tmp)
                how = "copied"
            shutil.copyfile(bais[0], tmp_bai)
        print(f"one unit ({units[0]}): {how} {bams[0]} to {out.bam}", file=log)
        metrics = read_metrics(inp.unit_metrics) if markdup else {}
        if markdup:
            with atomic_path(out.metrics) as tmp:
                write_metrics(tmp, metrics, os.path.basename(out.bam), COMMAND, distance)
    else:
        summary = merge_sorted_bams(bams, out.bam, snakemake.threads, snakemake.params.compression_level,
                                    header=merged_header(units, bams), what="unit", markdup=markdup,
                                    optical_distance=distance, metrics=out.metrics if markdup else None,
                                    command=COMMAND)
        metrics = summary["metrics"] or {}
        print(f"merged {len(bams)} unit BAMs ({', '.join(units)}; {summary['records']} records) into {out.bam}"
              + (", duplicates marked across them by library" if markdup else ""), file=log)
        if summary["unmatched"]:
            print(f"warning: {summary['unmatched']} reads whose mate is mapped had no mate in the units; "
                  "they were marked as single reads", file=log)
for library, m in metrics.items():
    print(duplicates_line(library, m), file=log)
