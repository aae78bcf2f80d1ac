"""index_reference: k-mer hash bins over the genome image."""

import os
import sys

from gpualign.errors import job_errors
from gpualign.genome import load_genome
from gpualign.index import build_index, save_index

sys.stderr = log = open(snakemake.log[0], "w", buffering=1)

with job_errors(snakemake.rule, log, snakemake.output[0]):
    genome = load_genome(snakemake.input.packed, snakemake.input.nmask, snakemake.input.contigs)
    index = build_index(
        genome,
        snakemake.params.k,
        snakemake.params.max_occ,
        threads=snakemake.threads,
        progress=lambda line: print(line, file=log),
    )
    # the index names its genome image (resources/reference/NAME.*) relative to its own folder, so
    # `gpualign map resources/reference/NAME.kK` finds both
    genome_prefix = os.path.basename(snakemake.input.packed)[: -len(".2bit.npy")]
    save_index(index, snakemake.output[0], genome.size, genome=genome_prefix)
print(
    f"index k={index.k}: {len(index.positions)} positions, "
    f"{index.capped_bins} bins over max_occ={index.max_occ}",
    file=log,
)
