"""map_summary: the map summaries of a sample's units (gpualign map --summary) -> the sample's, and
its row of MultiQC's "gpualign map" table; with input metrics (bam.mark_duplicates) the sample's
duplicate counts are those, which merge_units found across its units."""

import sys

from gpualign.atomic import atomic_path
from gpualign.bam.markdup import read_metrics
from gpualign.errors import job_errors
from gpualign.qc.map_summary import combine, mqc_table, read_summary, write_summary

sys.stderr = log = open(snakemake.log[0], "w", buffering=1)

out = snakemake.output
with job_errors(snakemake.rule, log, out.summary):
    summary = combine([read_summary(path) for path in snakemake.input.summaries])
    if "metrics" in snakemake.input.keys():
        summary["duplicates"] = read_metrics(snakemake.input.metrics)
    with atomic_path(out.summary) as tmp:
        write_summary(tmp, summary)
    with atomic_path(out.table) as tmp, open(tmp, "w") as fh:
        fh.write(mqc_table(snakemake.wildcards.sample, summary))
print(f"{len(snakemake.input.summaries)} units: {summary['reads']} reads, {summary['seconds']:.1f} s", file=log)
