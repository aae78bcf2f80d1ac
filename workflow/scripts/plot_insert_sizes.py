"""plot_insert_sizes: a paired sample's insert sizes (samtools stats) with gpualign's estimate."""

import sys

sys.stderr = log = open(snakemake.log[0], "w", buffering=1)

from gpualign.errors import job_errors  # noqa: E402
from gpualign.qc.map_summary import read_summary  # noqa: E402
from gpualign.qc.plots import insert_size_plot, save_png  # noqa: E402
from gpualign.qc.samtools import parse_stats  # noqa: E402

with job_errors(snakemake.rule, log, snakemake.output[0]):
    with open(snakemake.input.samtools_stats) as fh:
        sections = parse_stats(fh.read())
    save_png(insert_size_plot(sections, read_summary(snakemake.input.summary), snakemake.wildcards.sample),
             snakemake.output[0])
print(f"insert sizes: {snakemake.output[0]}", file=log)
