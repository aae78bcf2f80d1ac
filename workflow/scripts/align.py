"""align: map the encoded reads against the genome image and index into an unsorted BAM."""

import sys

sys.stderr = log = open(snakemake.log[0], "w", buffering=1)

import numba  # noqa: E402

from gpualign.atomic import atomic_path  # noqa: E402
from gpualign.errors import InputError  # noqa: E402
from gpualign.genome import load_genome  # noqa: E402
from gpualign.index import load_index  # noqa: E402
from gpualign.mapper import map_reads  # noqa: E402
from gpualign.params import MapParams  # noqa: E402
from gpualign.reads import load_reads  # noqa: E402

options = " ".join(f"--{name.replace('_', '-')} {value}" for name, value in snakemake.params.mapping.items())
command_line = (
    f"gpualign map (snakemake rule align) --backend {snakemake.params.backend} "
    f"--threads {snakemake.threads} --rg-id {snakemake.params.read_group['ID']} {options} "
    f"{snakemake.input.index} {snakemake.input.reads}"
)
try:
    numba.set_num_threads(max(1, min(snakemake.threads, numba.config.NUMBA_NUM_THREADS)))
    params = MapParams(**snakemake.params.mapping).check()
    genome = load_genome(snakemake.input.packed, snakemake.input.nmask, snakemake.input.contigs)
    index = load_index(snakemake.input.index)
    reads = load_reads(snakemake.input.reads)
    with atomic_path(snakemake.output[0]) as tmp:
        map_reads(
            genome, index, reads, tmp, params,
            backend_name=snakemake.params.backend,
            threads=snakemake.threads,
            read_group=dict(snakemake.params.read_group),
            command_line=command_line,
            log=lambda line: print(line, file=log),
        )
except InputError as err:
    print(f"error: {err}", file=log)
    print(f"{snakemake.rule}: error: {err}", file=sys.__stderr__)
    sys.exit(1)
