"""merge_units: the sorted BAMs of a sample's units -> the sample's sorted BAM + .bai.

Several units: samtools merge, from a header holding every unit's @RG line (each unit keeps its own
read group; records keep their RG tags) and every unit's @PG lines, those of the second and later
units renamed ID.unit (gpualign.L002) where the ID is taken already, so the header says how each
unit was aligned and the output is the same on every run. One unit: its BAM as it is (a hard link
where the file system allows one, else a copy), not rewritten, and a copy of its .bai; align marked
its duplicates (bam.mark_duplicates) unless it was aligned in chunks. Several units (or chunks) are
not marked yet: the log says so.
"""

import os
import shutil
import sys
import tempfile

sys.stderr = log = open(snakemake.log[0], "w", buffering=1)

import pysam  # noqa: E402

from gpualign.atomic import atomic_path  # noqa: E402
from gpualign.workflow.chunks import merge_sorted_bams  # noqa: E402
from gpualign.errors import job_errors  # noqa: E402

out = snakemake.output
bams, bais, units = list(snakemake.input.bams), list(snakemake.input.bais), list(snakemake.params.units)
if out.bai != out.bam + ".bai":
    raise ValueError(f"merge_units: output bai must be {out.bam + '.bai'!r}, got {out.bai!r}")
if len(bams) != len(units) or len(bais) != len(units):
    raise ValueError(f"merge_units: {len(bams)} BAMs and {len(bais)} indexes for the {len(units)} units {units}")

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
    else:
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
        with tempfile.NamedTemporaryFile("w", suffix=".sam", prefix="merge_units.") as header_sam:
            header_sam.write(str(pysam.AlignmentHeader.from_dict(header)))
            header_sam.flush()
            merge_sorted_bams(bams, out.bam, snakemake.threads, snakemake.params.compression_level,
                              header=header_sam.name, what="unit")
        print(f"merged {len(bams)} unit BAMs ({', '.join(units)}) into {out.bam}", file=log)
    if snakemake.params.mark_duplicates and not snakemake.params.marked_in_align:
        print(f"bam.mark_duplicates: duplicates NOT marked in {out.bam}: marking across several units or chunks "
              "(at the merge) is not implemented yet; only a sample of one unit aligned unchunked is marked",
              file=log)
