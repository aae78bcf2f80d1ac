"""plots: a sample's report plots (MAPQ, coverage, mismatches and indels by cycle, duplication,
throughput) from its QC files."""

import sys

sys.stderr = log = open(snakemake.log[0], "w", buffering=1)

from gpualign.errors import job_errors  # noqa: E402
from gpualign.qc.coverage import read_coverage  # noqa: E402
from gpualign.qc.map_summary import read_summary  # noqa: E402
from gpualign.qc.plots import sample_figures, save_png  # noqa: E402
from gpualign.qc.samtools import parse_flagstat, parse_stats  # noqa: E402

inp, out = snakemake.input, snakemake.output
with job_errors(snakemake.rule, log, out[0]):
    with open(inp.samtools_stats) as fh:
        sections = parse_stats(fh.read())
    with open(inp.flagstat) as fh:
        flagstat = parse_flagstat(fh.read())
    figures = sample_figures(sections, flagstat, read_coverage(inp.coverage), read_summary(inp.summary),
                             snakemake.wildcards.sample, snakemake.params.duplicates_marked)
    for name, figure in figures.items():
        save_png(figure, out[name])
        print(f"{name}: {out[name]}", file=log)
