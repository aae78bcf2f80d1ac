"""stats: flagstat, idxstats, samtools stats (against the reference) and the mapping summary of a
sorted BAM, and its depth along the contigs in bins."""

import sys

from gpualign.bam.stats import write_stats
from gpualign.errors import job_errors
from gpualign.qc.coverage import binned_depth, write_coverage

sys.stderr = log = open(snakemake.log[0], "w", buffering=1)

with job_errors(snakemake.rule, log, snakemake.output[0]):
    summary = write_stats(
        snakemake.input.bam,
        snakemake.output.flagstat,
        snakemake.output.idxstats,
        snakemake.output.summary,
        sample=snakemake.wildcards.sample,
        samtools_stats_path=snakemake.output.samtools_stats,
        reference=snakemake.input.fasta,
    )
    bins = binned_depth(snakemake.input.bam, snakemake.params.coverage_bins)
    write_coverage(snakemake.output.coverage, bins)
print(" ".join(f"{key}={value}" for key, value in summary.items()), file=log)
print(f"coverage: {len(bins)} bins", file=log)
