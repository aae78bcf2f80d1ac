"""download_reference: fetch the configured reference (URL or local file) as a verified .fa.gz."""

import sys

from gpualign.download import fetch_reference
from gpualign.errors import job_errors

sys.stderr = log = open(snakemake.log[0], "w", buffering=1)

# A local reference is the rule's input (so edits to it rerun the workflow); a remote one a param.
source = snakemake.input[0] if snakemake.input else snakemake.params.url
with job_errors(snakemake.rule, log, snakemake.output[0]):
    fetch_reference(
        source,
        snakemake.output[0],
        sha256=snakemake.params.sha256 or None,
        md5=snakemake.params.md5 or None,
        log=lambda line: print(line, file=log),
    )
