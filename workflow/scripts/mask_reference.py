"""mask_reference: canonical upper-case FASTA (+ .fai), N runs as BED, the contig table."""

import sys

from gpualign.errors import job_errors
from gpualign.reference import mask_reference

sys.stderr = log = open(snakemake.log[0], "w", buffering=1)

with job_errors(snakemake.rule, log, snakemake.output[0]):
    summary = mask_reference(
        snakemake.input[0], snakemake.output.fa, snakemake.output.bed, snakemake.output.contigs
    )
print(f"masked {summary['contigs']} contigs, {summary['bases']} bp, {summary['n_bases']} N", file=log)
