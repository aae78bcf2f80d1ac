"""index_reference: k-mer hash bins over the genome image."""

import sys

from gpualign.errors import InputError, one_line
from gpualign.genome import load_genome
from gpualign.index import build_index, save_index

sys.stderr = log = open(snakemake.log[0], "w", buffering=1)

try:
    genome = load_genome(snakemake.input.packed, snakemake.input.nmask, snakemake.input.contigs)
    index = build_index(
        genome, snakemake.params.k, snakemake.params.max_occ, progress=lambda line: print(line, file=log)
    )
    save_index(index, snakemake.output[0], genome.size)
except (InputError, OSError) as err:  # OSError: a full disk, say
    err = one_line(err, snakemake.output[0])
    print(f"error: {err}", file=log)
    print(f"{snakemake.rule}: error: {err}", file=sys.__stderr__)
    sys.exit(1)
print(
    f"index k={index.k}: {len(index.positions)} positions, "
    f"{index.capped_bins} bins over max_occ={index.max_occ}",
    file=log,
)
