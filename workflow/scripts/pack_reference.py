"""pack_reference: the 2-bit genome image and its N mask."""

import sys

from gpualign.errors import job_errors
from gpualign.genome import pack_reference

sys.stderr = log = open(snakemake.log[0], "w", buffering=1)

with job_errors(snakemake.rule, log, snakemake.output[0]):
    genome = pack_reference(snakemake.input[0], snakemake.output.packed, snakemake.output.nmask)
print(f"packed {len(genome.names)} contigs, {genome.size} bp", file=log)
