"""sort_bam: coordinate-sort the unsorted BAM and index it (samtools through pysam)."""

import sys

from gpualign.bam import sort_and_index
from gpualign.errors import InputError

sys.stderr = log = open(snakemake.log[0], "w", buffering=1)

if snakemake.output.bai != snakemake.output.bam + ".bai":
    raise ValueError(f"sort_bam: output bai must be {snakemake.output.bam + '.bai'!r}, got {snakemake.output.bai!r}")
try:
    sort_and_index(
        snakemake.input[0], snakemake.output.bam, snakemake.threads, snakemake.params.compression_level
    )
except InputError as err:
    print(f"error: {err}", file=log)
    print(f"{snakemake.rule}: error: {err}", file=sys.__stderr__)
    sys.exit(1)
print(f"sorted and indexed {snakemake.output.bam} ({snakemake.threads} threads)", file=log)
