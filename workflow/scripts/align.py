"""align: map a unit's FASTQ (input reads, and mates when paired), or one chunk of it (input
chunk: a paired unit's mates interleaved), against the genome image and index into a
coordinate-sorted BAM + .bai with the unit's read group; with params.markdup (a unit's BAM, not a
chunk's) its duplicates marked as it is written, their counts in output metrics."""

import shlex
import sys
from contextlib import nullcontext

sys.stderr = log = open(snakemake.log[0], "w", buffering=1)

from gpualign.workflow.gpus import claim_gpu  # noqa: E402

if snakemake.params.backend != "cpu":   # before CUDA starts in this process
    claim_gpu(log=lambda line: print(line, file=log))

import numba  # noqa: E402

from gpualign.atomic import atomic_path  # noqa: E402
from gpualign.batches import read_interleaved_fastq, read_interleaved_pairs  # noqa: E402
from gpualign.errors import job_errors  # noqa: E402
from gpualign.fastq import read_batches  # noqa: E402
from gpualign.genome import load_genome  # noqa: E402
from gpualign.index import load_index  # noqa: E402
from gpualign.mapper import map_reads  # noqa: E402
from gpualign.options import MapParams  # noqa: E402
from gpualign.qc.map_summary import write_summary  # noqa: E402

inp, out = snakemake.input, snakemake.output
if out.bai != out.bam + ".bai":
    raise ValueError(f"align: output bai must be {out.bam + '.bai'!r}, got {out.bai!r}")
paired = snakemake.params.paired
chunk = "chunk" in inp.keys()
reads = [inp.chunk] if chunk else [inp.reads] + ([inp.mates] if "mates" in inp.keys() else [])


def map_command(index, reads, bam, params, threads) -> str:
    """The `gpualign map` command that writes this job's BAM (its @PG CL), shell-quoted: READS and
    MATES, or one file of interleaved mates (-p: a chunk of a paired unit)."""
    prefix = index.removesuffix(".idx.npz")   # the CLI's index prefix: resources/reference/{name}.k{k}
    read_group = "\\t".join(["@RG"] + [f"{tag}:{value}" for tag, value in params.read_group.items()])
    argv = ["gpualign", "map", "-t", str(threads), "--backend", params.backend, "-l", str(params.compression_level),
            "-R", read_group] + (["--markdup"] if params.markdup else [])
    if params.markdup and params.optical_distance:
        argv += ["--optical-distance", str(params.optical_distance)]
    if params.paired and len(reads) == 1:
        argv.append("-p")
    for name, value in params.mapping.items():
        argv += [f"--{name.replace('_', '-')}", str(value)]
    argv += [prefix, *reads, "-o", bam]
    return shlex.join(argv)


command_line = map_command(inp.index, reads, out.bam, snakemake.params, snakemake.threads)
with job_errors(snakemake.rule, log, out.bam):
    numba.set_num_threads(max(1, min(snakemake.threads, numba.config.NUMBA_NUM_THREADS)))
    params = MapParams(**snakemake.params.mapping).check()
    genome = load_genome(inp.packed, inp.nmask, inp.contigs)
    index = load_index(inp.index)
    # a chunk may hold no reads (fewer reads than chunks): its BAM is then header-only
    if len(reads) == 2:
        batches = read_interleaved_pairs(*reads, index.k, params.batch_size, snakemake.threads)
    elif paired:   # a chunk of a paired unit: mates interleaved (split_reads checked them)
        batches = read_interleaved_fastq(reads[0], index.k, params.batch_size, snakemake.threads, allow_empty=True)
    else:
        batches = read_batches(reads[0], index.k, params.batch_size, snakemake.threads, allow_empty=chunk)
    metrics = out.metrics if "metrics" in out.keys() else None
    with atomic_path(out.summary) as tmp_summary, atomic_path(out.bai) as tmp_bai, atomic_path(out.bam) as tmp, \
            (atomic_path(metrics) if metrics else nullcontext()) as tmp_metrics:
        done = map_reads(
            genome, index, batches, tmp, params,
            backend_name=snakemake.params.backend,
            threads=snakemake.threads,
            read_group=dict(snakemake.params.read_group),
            command_line=command_line,
            log=lambda line: print(line, file=log),
            compression_level=snakemake.params.compression_level,
            sort=True,
            index_path=tmp_bai,
            paired=paired,
            markdup=snakemake.params.markdup,
            metrics_path=tmp_metrics,
            output_name=out.bam,
            optical_distance=snakemake.params.optical_distance,
        )
        write_summary(tmp_summary, done)
