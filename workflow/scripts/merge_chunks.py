"""merge_chunks: the sorted chunk BAMs of a unit -> the unit's sorted BAM + .bai (samtools merge)."""

import sys

sys.stderr = log = open(snakemake.log[0], "w", buffering=1)

from gpualign.workflow.chunks import merge_sorted_bams  # noqa: E402
from gpualign.errors import job_errors  # noqa: E402

out = snakemake.output
if out.bai != out.bam + ".bai":
    raise ValueError(f"merge_chunks: output bai must be {out.bam + '.bai'!r}, got {out.bai!r}")
with job_errors(snakemake.rule, log, snakemake.output[0]):
    merge_sorted_bams(list(snakemake.input), out.bam, snakemake.threads, snakemake.params.compression_level)
print(f"merged {len(snakemake.input)} chunk BAMs into {out.bam}", file=log)
