"""mask_reference: canonical upper-case FASTA (+ .fai), N runs as BED, the contig table."""

import sys

from gpualign.errors import InputError, one_line
from gpualign.reference import mask_reference

sys.stderr = log = open(snakemake.log[0], "w", buffering=1)

try:
    summary = mask_reference(
        snakemake.input[0], snakemake.output.fa, snakemake.output.bed, snakemake.output.contigs
    )
except (InputError, OSError) as err:  # OSError: a full disk, say
    err = one_line(err, snakemake.output[0])
    print(f"error: {err}", file=log)
    print(f"{snakemake.rule}: error: {err}", file=sys.__stderr__)
    sys.exit(1)
print(f"masked {summary['contigs']} contigs, {summary['bases']} bp, {summary['n_bases']} N", file=log)
