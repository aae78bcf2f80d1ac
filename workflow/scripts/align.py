"""align / align_chunk: map a FASTQ (a unit's, or one chunk of it) against the genome image and
index into a coordinate-sorted BAM with the unit's read group, plus its .bai when the rule has a
bai output."""

import contextlib
import shlex
import sys

sys.stderr = log = open(snakemake.log[0], "w", buffering=1)

from gpualign.gpus import claim_gpu  # noqa: E402

if snakemake.params.backend != "cpu":   # before CUDA starts in this process
    claim_gpu(log=lambda line: print(line, file=log))

import numba  # noqa: E402

from gpualign.atomic import atomic_path  # noqa: E402
from gpualign.errors import job_errors  # noqa: E402
from gpualign.fastq import read_batches, read_interleaved_fastq, read_interleaved_pairs  # noqa: E402
from gpualign.genome import load_genome  # noqa: E402
from gpualign.index import load_index  # noqa: E402
from gpualign.mapper import map_reads  # noqa: E402
from gpualign.params import MapParams  # noqa: E402

out = snakemake.output
bai = out.get("bai")
if bai is not None and bai != out.bam + ".bai":
    raise ValueError(f"align: output bai must be {out.bam + '.bai'!r}, got {bai!r}")
chunk_of_sample = "chunk" in snakemake.wildcards.keys()
paired = snakemake.params.paired


def map_command(inp, out, params, threads) -> str:
    """The `gpualign map` command that writes this job's BAM (its @PG CL), shell-quoted: READS and
    MATES, or one file of interleaved mates (-p: a chunk of a paired unit)."""
    prefix = inp.index.removesuffix(".idx.npz")   # the CLI's index prefix: resources/reference/{name}.k{k}
    read_group = "\\t".join(["@RG"] + [f"{tag}:{value}" for tag, value in params.read_group.items()])
    argv = ["gpualign", "map", "-t", str(threads), "--backend", params.backend, "-l", str(params.compression_level),
            "-R", read_group]
    if params.paired and "mates" not in inp.keys():
        argv.append("-p")
    for name, value in params.mapping.items():
        argv += [f"--{name.replace('_', '-')}", str(value)]
    argv += [prefix, inp.reads] + ([inp.mates] if "mates" in inp.keys() else []) + ["-o", out.bam]
    return shlex.join(argv)


command_line = map_command(snakemake.input, out, snakemake.params, snakemake.threads)
with job_errors(snakemake.rule, log, snakemake.output[0]):
    numba.set_num_threads(max(1, min(snakemake.threads, numba.config.NUMBA_NUM_THREADS)))
    params = MapParams(**snakemake.params.mapping).check()
    genome = load_genome(snakemake.input.packed, snakemake.input.nmask, snakemake.input.contigs)
    index = load_index(snakemake.input.index)
    # a chunk may hold no reads (fewer reads than chunks): its BAM is then header-only
    if "mates" in snakemake.input.keys():
        reads = read_interleaved_pairs(snakemake.input.reads, snakemake.input.mates, index.k, params.batch_size,
                                       snakemake.threads)
    elif paired:   # a chunk of a paired sample: mates interleaved (split_reads checked them)
        reads = read_interleaved_fastq(snakemake.input.reads, index.k, params.batch_size, snakemake.threads,
                                       allow_empty=True)
    else:
        reads = read_batches(snakemake.input.reads, index.k, params.batch_size, snakemake.threads,
                             allow_empty=chunk_of_sample)
    with (atomic_path(bai) if bai else contextlib.nullcontext()) as tmp_bai, atomic_path(out.bam) as tmp:
        map_reads(
            genome, index, reads, tmp, params,
            backend_name=snakemake.params.backend,
            threads=snakemake.threads,
            read_group=dict(snakemake.params.read_group),
            command_line=command_line,
            log=lambda line: print(line, file=log),
            compression_level=snakemake.params.compression_level,
            sort=True,
            index_path=tmp_bai,
            paired=paired,
        )
