"""pack_reference: the 2-bit genome image and its N mask."""

import sys

from gpualign.errors import InputError, one_line
from gpualign.genome import pack_reference

sys.stderr = log = open(snakemake.log[0], "w", buffering=1)

try:
    genome = pack_reference(snakemake.input[0], snakemake.output.packed, snakemake.output.nmask)
except (InputError, OSError) as err:  # OSError: a full disk, say
    err = one_line(err, snakemake.output[0])
    print(f"error: {err}", file=log)
    print(f"{snakemake.rule}: error: {err}", file=sys.__stderr__)
    sys.exit(1)
print(f"packed {len(genome.names)} contigs, {genome.size} bp", file=log)
