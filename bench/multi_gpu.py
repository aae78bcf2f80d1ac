#!/usr/bin/env python3
"""Several GPUs on one host: the workflow with align.chunks = 2, run with `--resources gpu=1` and
`--resources gpu=2` on the same data, in one call (the lent nvidia-h200-x2 machine).

    source bench/device_env.sh && python3 bench/multi_gpu.py --reads 10000000 --genome-mbp 5

Runs the real Snakefile (snakemake from the carried wheels, `--scheduler greedy`) in a working
folder of its own. First, untimed: the reference and index, and a warm-up sample that fills numba's
cache. Then, timed, each from a clean results/ folder: chunks=1 on one GPU; chunks=2 with gpu=1
(the chunk jobs take turns); chunks=2 with gpu=2 (one job per GPU, each claiming its own device,
gpualign.gpus). Every run must give the same records: the BAMs are compared. Prints a table and
writes $OUT/multi_gpu.json.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import benchlib as bl  # noqa: E402
import synth  # noqa: E402
from benchlib import log  # noqa: E402
from end_to_end import simulate_reads  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
WARMUP_READS = 20_000


def snakemake(work: Path, logfile: Path, *args) -> float:
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--directory", str(work),
           "--workflow-profile", "none", "--scheduler", "greedy", *args]
    log(" ".join(cmd))
    start = time.perf_counter()
    with open(logfile, "a") as fh:
        fh.write(f"===== {' '.join(cmd)}\n")
        fh.flush()
        rc = subprocess.run(cmd, cwd=work, stdout=fh, stderr=subprocess.STDOUT).returncode
    seconds = time.perf_counter() - start
    if rc != 0:
        raise SystemExit(f"snakemake failed (rc {rc}); see {logfile}")
    return seconds


def write_config(work: Path, ref: Path, k: int, samples: dict):
    (work / "samples.tsv").write_text("sample\tfq1\tfq2\n" + "".join(f"{s}\t{p}\t\n" for s, p in samples.items()))
    (work / "config.yaml").write_text(
        f"reference: {{url: {ref}, name: bench}}\nsamples: samples.tsv\nindex: {{k: {k}}}\n"
        "align: {backend: cuda}\n")


def records_digest(path: Path, threads: int) -> str:
    """SHA-256 of the BAM's records as SAM text (samtools view in C: fast for millions of records)."""
    import hashlib
    import pysam
    sam = path.with_suffix(".sam")
    pysam.view("-@", str(threads), "-o", str(sam), str(path), catch_stdout=False)
    digest = hashlib.sha256()
    with open(sam, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 24), b""):
            digest.update(block)
    sam.unlink()
    return digest.hexdigest()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--genome-mbp", type=float, default=5)
    ap.add_argument("--reads", type=int, default=10_000_000)
    ap.add_argument("--threads", type=int, default=16, help="threads per align job")
    ap.add_argument("--cores", type=int, default=os.cpu_count())
    ap.add_argument("--gpus", type=int, default=2)
    ap.add_argument("--backend", default="cuda", choices=["cuda", "cpu"], help="cpu: a local dry check")
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/multi_gpu"))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--variants", default="1:1,2:1,2:2",
                    help="chunks:gpu pairs to time, in order (gpu 2 stands for --gpus)")
    args = ap.parse_args()
    out = bl.out_dir()
    logfile = out / "multi_gpu.log"
    work = args.workdir
    data = work / "data"
    data.mkdir(parents=True, exist_ok=True)
    ref = data / "genome.fa"
    bl.cached(ref, lambda: synth.make_genome(str(ref), int(args.genome_mbp * 1e6), args.seed, log=log), "genome")
    reads = data / f"reads_{args.reads}.fq.gz"
    bl.cached(reads, lambda: simulate_reads(ref, reads, args.reads, 100, args.seed, args.cores, log), "reads")
    warm = data / "warm.fq.gz"
    bl.cached(warm, lambda: simulate_reads(ref, warm, WARMUP_READS, 100, args.seed + 1, args.cores),
              "warm-up reads")
    from gpualign.index import suggested_k
    k = suggested_k(int(args.genome_mbp * 1e6), 500)
    write_config(work, ref, k, {"warm": warm, "bench": reads})
    backend = f"backend: {args.backend}, threads: {args.threads}"
    common = ["--cores", str(args.cores)]
    snakemake(work, logfile, "results/bam/warm.bam", *common, "--resources", f"gpu={args.gpus}", "--config",
              f"align={{{backend}, chunks: 2}}")   # index + numba cache, untimed

    runs = []
    variants = [tuple(int(v) for v in pair.split(":")) for pair in args.variants.split(",")]
    for chunks, gpus in variants:
        shutil.rmtree(work / "results" / "bam", ignore_errors=True)
        shutil.rmtree(work / "logs" / "align", ignore_errors=True)
        seconds = snakemake(work, logfile, "results/bam/bench.bam", *common, "--resources", f"gpu={gpus}",
                            "--config", f"align={{{backend}, chunks: {chunks}}}")
        claims = sorted(set(re.findall(r"GPU (\S+) of \S+ claimed", "".join(
            p.read_text() for p in (work / "logs" / "align").glob("bench*.log")))))
        bam = work / "kept" / f"bench_c{chunks}_g{gpus}.bam"
        bam.parent.mkdir(exist_ok=True)
        shutil.move(work / "results" / "bam" / "bench.bam", bam)
        runs.append({"chunks": chunks, "gpu_resource": gpus, "wall_s": round(seconds, 1),
                     "reads_per_s": round(args.reads / seconds), "gpus_claimed": claims, "bam": str(bam)})
        log(f"chunks={chunks} gpu={gpus}: {seconds:.1f} s, {args.reads / seconds:,.0f} reads/s, claimed {claims}")
    first = records_digest(Path(runs[0]["bam"]), args.cores)
    for run in runs:
        run["records_equal_to_first"] = records_digest(Path(run["bam"]), args.cores) == first
    result = {"script": "multi_gpu", "args": {k2: str(v) for k2, v in vars(args).items()},
              "machine": bl.machine_info(), "k": k, "runs": runs}
    (out / "multi_gpu.json").write_text(json.dumps(result, indent=1))
    print(f"\nWorkflow on {args.reads:,} reads of 100 bp, {args.genome_mbp:g} Mbp synthetic genome, "
          f"{args.threads} threads per align job, --cores {args.cores}\n")
    print(bl.markdown([{**r, "gpus_claimed": ",".join(r["gpus_claimed"]) or "-"} for r in runs],
                      ["chunks", "gpu_resource", "wall_s", "reads_per_s", "gpus_claimed", "records_equal_to_first"]))


if __name__ == "__main__":
    main()
