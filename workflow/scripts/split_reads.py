"""split_reads: cut a sample's FASTQ into align.chunks gzip files of consecutive records."""

import sys

sys.stderr = log = open(snakemake.log[0], "w", buffering=1)

from gpualign.chunks import split_fastq  # noqa: E402
from gpualign.errors import InputError, one_line  # noqa: E402

try:
    sizes = split_fastq(snakemake.input[0], list(snakemake.output), snakemake.threads)
except (InputError, OSError) as err:  # OSError: a full disk, say
    err = one_line(err, snakemake.output[0])
    print(f"error: {err}", file=log)
    print(f"{snakemake.rule}: error: {err}", file=sys.__stderr__)
    sys.exit(1)
print(f"split {sum(sizes)} reads into {len(sizes)} chunks: {' '.join(map(str, sizes))}", file=log)
