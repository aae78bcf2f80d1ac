"""merge_chunks: the sorted chunk BAMs of a unit -> the unit's sorted BAM + .bai (samtools merge), and
the chunks' map summaries -> the unit's."""

import sys

sys.stderr = log = open(snakemake.log[0], "w", buffering=1)

from gpualign.atomic import atomic_path  # noqa: E402
from gpualign.errors import job_errors  # noqa: E402
from gpualign.qc.map_summary import combine, read_summary, write_summary  # noqa: E402
from gpualign.workflow.chunks import merge_sorted_bams  # noqa: E402

out = snakemake.output
if out.bai != out.bam + ".bai":
    raise ValueError(f"merge_chunks: output bai must be {out.bam + '.bai'!r}, got {out.bai!r}")
with job_errors(snakemake.rule, log, snakemake.output[0]):
    merge_sorted_bams(list(snakemake.input.bams), out.bam, snakemake.threads, snakemake.params.compression_level)
    with atomic_path(out.summary) as tmp:
        write_summary(tmp, combine([read_summary(path) for path in snakemake.input.summaries]))
print(f"merged {len(snakemake.input.bams)} chunk BAMs into {out.bam}", file=log)
