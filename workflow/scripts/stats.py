"""stats: flagstat, idxstats and the mapping summary of a sorted BAM."""

import sys

from gpualign.bam import write_stats
from gpualign.errors import InputError, one_line

sys.stderr = log = open(snakemake.log[0], "w", buffering=1)

try:
    summary = write_stats(
        snakemake.input.bam,
        snakemake.output.flagstat,
        snakemake.output.idxstats,
        snakemake.output.summary,
        sample=snakemake.wildcards.sample,
    )
except (InputError, OSError) as err:  # OSError: a full disk, say
    err = one_line(err, snakemake.output[0])
    print(f"error: {err}", file=log)
    print(f"{snakemake.rule}: error: {err}", file=sys.__stderr__)
    sys.exit(1)
print(" ".join(f"{key}={value}" for key, value in summary.items()), file=log)
