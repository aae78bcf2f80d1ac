"""encode_reads: FASTQ(.gz) -> 2-bit reads with reverse complements, qualities and header bins."""

import sys

from gpualign.errors import InputError
from gpualign.reads import encode_fastq, save_reads

sys.stderr = log = open(snakemake.log[0], "w", buffering=1)

try:
    reads = encode_fastq(snakemake.input[0], snakemake.params.k)
    save_reads(reads, snakemake.output[0])
except InputError as err:
    print(f"error: {err}", file=log)
    print(f"{snakemake.rule}: error: {err}", file=sys.__stderr__)
    sys.exit(1)
print(f"encoded {len(reads)} reads, {int(reads.lengths.sum())} bases, k={reads.k}", file=log)
