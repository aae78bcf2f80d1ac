"""merge_chunks: the sorted chunk BAMs of a unit -> the unit's sorted BAM + .bai (gpualign.bam.merge),
and the chunks' map summaries -> the unit's; with params.mark_duplicates the unit's duplicates marked
across its chunks as it is written, their counts in output metrics and in the unit's summary."""

import sys

sys.stderr = log = open(snakemake.log[0], "w", buffering=1)

from gpualign.atomic import atomic_path  # noqa: E402
from gpualign.bam.markdup import duplicates_line  # noqa: E402
from gpualign.errors import job_errors  # noqa: E402
from gpualign.qc.map_summary import combine, read_summary, write_summary  # noqa: E402
from gpualign.workflow.chunks import merge_sorted_bams  # noqa: E402

out = snakemake.output
if out.bai != out.bam + ".bai":
    raise ValueError(f"merge_chunks: output bai must be {out.bam + '.bai'!r}, got {out.bai!r}")
markdup = snakemake.params.mark_duplicates
with job_errors(snakemake.rule, log, out.bam):
    merged = merge_sorted_bams(list(snakemake.input.bams), out.bam, snakemake.threads,
                               snakemake.params.compression_level, markdup=markdup,
                               optical_distance=snakemake.params.optical_distance,
                               metrics=out.metrics if markdup else None, command="gpualign workflow merge_chunks")
    summary = combine([read_summary(path) for path in snakemake.input.summaries])
    summary["duplicates"] = merged["metrics"]   # the chunks were not marked: the merge marked the unit
    with atomic_path(out.summary) as tmp:
        write_summary(tmp, summary)
print(f"merged {len(snakemake.input.bams)} chunk BAMs ({merged['records']} records) into {out.bam}", file=log)
if merged["unmatched"]:
    print(f"warning: {merged['unmatched']} reads whose mate is mapped had no mate in the chunks; "
          "they were marked as single reads", file=log)
for library, m in (merged["metrics"] or {}).items():
    print(duplicates_line(library, m), file=log)
