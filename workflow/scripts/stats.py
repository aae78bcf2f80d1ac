"""stats: flagstat, idxstats, samtools stats and the mapping summary of a sorted BAM."""

import sys

from gpualign.bam.stats import write_stats
from gpualign.errors import job_errors

sys.stderr = log = open(snakemake.log[0], "w", buffering=1)

with job_errors(snakemake.rule, log, snakemake.output[0]):
    summary = write_stats(
        snakemake.input.bam,
        snakemake.output.flagstat,
        snakemake.output.idxstats,
        snakemake.output.summary,
        sample=snakemake.wildcards.sample,
        samtools_stats_path=snakemake.output.samtools_stats,
    )
print(" ".join(f"{key}={value}" for key, value in summary.items()), file=log)
