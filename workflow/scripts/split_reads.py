"""split_reads: cut a sample's FASTQ into align.chunks gzip files of consecutive records."""

import sys

sys.stderr = log = open(snakemake.log[0], "w", buffering=1)

from gpualign.chunks import split_fastq  # noqa: E402
from gpualign.errors import job_errors  # noqa: E402

with job_errors(snakemake.rule, log, snakemake.output[0]):
    sizes = split_fastq(snakemake.input[0], list(snakemake.output), snakemake.threads)
print(f"split {sum(sizes)} reads into {len(sizes)} chunks: {' '.join(map(str, sizes))}", file=log)
