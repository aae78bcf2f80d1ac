"""split_reads: cut a unit's FASTQ into align.chunks plain FASTQ files of consecutive records
(paired reads: of consecutive fragments, the mates interleaved)."""

import sys

sys.stderr = log = open(snakemake.log[0], "w", buffering=1)

from gpualign.workflow.chunks import split_fastq, split_pairs  # noqa: E402
from gpualign.errors import job_errors  # noqa: E402

with job_errors(snakemake.rule, log, snakemake.output[0]):
    if "mates" in snakemake.input.keys():
        sizes = split_pairs(snakemake.input.reads, snakemake.input.mates, list(snakemake.output), snakemake.threads)
    else:
        sizes = split_fastq(snakemake.input.reads, list(snakemake.output), snakemake.threads)
print(f"split {sum(sizes)} reads into {len(sizes)} chunks: {' '.join(map(str, sizes))}", file=log)
