#!/usr/bin/env python3
"""End to end, FASTQ.gz -> sorted, indexed BAM: gpualign next to bwa mem, minimap2 and bowtie2.

One run on one machine: a synthetic genome (synth.py), simulated reads (simulate.py), each
aligner's index (timed apart), then each aligner's whole path from the gzip FASTQ to a
coordinate-sorted BAM with its .bai, timed as one command with peak memory of its process tree
(and of the GPU for gpualign). Peers pipe SAM into pysam.sort (samtools' code; the device has no samtools binary)
and index with pysam.index. gpualign writes a sorted, indexed BAM itself; where it does not
(an older version), sorting and indexing with pysam are timed and counted in its wall time.
gpualign first maps a few thousand reads untimed, so numba's compile cache is warm. Command lines
come from peers.py.

Then every BAM is scored as accuracy.py does (within --tolerance bases of the true origin;
precision at MAPQ >= 20). Results go to $OUT/end_to_end_<tag>.json/.tsv/.log; a markdown
table is printed last on stdout, everything else goes to stderr.

Inputs are deterministic and reused from --workdir when a previous run completed them, so a
run too long for one call can be split with --peers (and --skip-gpualign).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import benchlib as bl
from benchlib import log
import peers
from peers import PEERS, PEERS_CLASSIC
import simulate
import synth

WARMUP_READS = 5000


def gpualign_k(genome_bp: int) -> int:
    """gpualign's own suggestion where it has one, else the brief's rule of thumb."""
    try:
        from gpualign.index import suggested_k
        return suggested_k(genome_bp, 500)
    except ImportError:
        return 8 if genome_bp <= 10_000_000 else (11 if genome_bp <= 300_000_000 else 12)


# --------------------------------------------------------------------------
# inputs

def simulate_reads(ref: Path, out: Path, n: int, length: int, seed: int, threads: int, log=None) -> int:
    """Single-end reads of the synthetic-genome benchmarks (end_to_end.py, scaling.py, multi_gpu.py):
    1 % substitutions, 0.1 % indels, no SNPs and no N (the genome's own gaps keep reads off N)."""
    return simulate.simulate(ref, out, n, length, seed, sub=0.01, indel=0.001, snp=0.0, fraction_n=0.0,
                             threads=threads, log=log)


def genome_dir(args) -> Path:
    return args.workdir / f"g{args.genome_mbp:g}_s{args.seed}"


def prepare_inputs(args) -> tuple[Path, Path, Path, dict]:
    """Genome, reads and gpualign's warm-up reads (each reused when already complete)."""
    gdir = genome_dir(args)
    gdir.mkdir(parents=True, exist_ok=True)
    ref = gdir / "genome.fa"
    size = int(round(args.genome_mbp * 1e6))
    stats, _ = bl.cached(ref, lambda: synth.make_genome(str(ref), size, args.seed, log=log), "genome")
    reads = gdir / f"reads_n{args.reads}_l{args.length}_s{args.seed}.fq.gz"
    bl.cached(reads, lambda: simulate_reads(ref, reads, args.reads, args.length, args.seed, args.threads, log),
              "reads")
    warm = gdir / f"warmup_l{args.length}.fq.gz"
    bl.cached(warm, lambda: simulate_reads(ref, warm, WARMUP_READS, args.length, args.seed + 1000, args.threads),
              "warm-up reads")
    return ref, reads, warm, stats


# --------------------------------------------------------------------------
# indexes

def index_name(aligner: str, args) -> str:
    """The index's folder: gpualign's depends on k, strobealign's on the read length."""
    if aligner == "gpualign":
        return f"gpualign_k{args.k}"
    return f"strobealign_r{args.length}" if aligner == "strobealign" else aligner


def build_index(aligner: str, ref: Path, work: Path, args, logfile: Path) -> tuple[Path, dict]:
    """The aligner's index of ref under work/idx (built and timed, or reused when complete)."""
    prefix = work / "idx" / index_name(aligner, args) / "ref"
    prefix.parent.mkdir(parents=True, exist_ok=True)

    def make():
        command = peers.index_command(aligner, ref, prefix, args.threads, k=args.k, read_length=args.length)
        res = bl.run_timed(command, f"index {aligner}", logfile)
        return {"index_s": res["wall_s"], "index_peak_rss_mb": res["peak_rss_mb"],
                "index_bytes": bl.files_size(prefix)}
    info, reused = bl.cached(prefix.parent / "index", make, f"index {aligner}")
    return prefix, dict(info, index_reused=reused)


# --------------------------------------------------------------------------
# mapping

def map_command(aligner: str, prefix: Path, reads, bam: Path, args) -> str:
    """FASTQ -> sorted, indexed BAM; ``reads`` is one FASTQ or a pair [R1, R2] (paired.py). gpualign
    writes the BAM itself; a peer's SAM is piped into pysam's sort and index."""
    command = peers.map_command(aligner, prefix, reads, args.threads, bam=bam, backend=args.gpualign_backend)
    return command if aligner == "gpualign" else f"{command} | {bl.sort_from_stdin(bam, args.threads)}"


def run_gpualign(prefix: Path, reads: Path, warm: Path, bam: Path, args, logfile: Path) -> dict:
    """Warm-up (untimed in the result), then the timed map; sort+index added if still needed."""
    warm_bam = bam.with_name("warmup.bam")
    warm_res = bl.run_timed(map_command("gpualign", prefix, warm, warm_bam, args), "gpualign warm-up", logfile)
    res = bl.run_timed(map_command("gpualign", prefix, reads, bam, args), "map gpualign", logfile, gpu=True)
    result = {"warmup_s": warm_res["wall_s"], "map_s": res["wall_s"], "sort_s": 0.0,
              "peak_rss_mb": res["peak_rss_mb"], "peak_gpu_mb": res.get("peak_gpu_mb"), "log": res["stderr"],
              "sorted_by_aligner": bl.is_sorted_indexed(bam)}
    if not result["sorted_by_aligner"]:
        srt = bl.run_timed(bl.sort_and_index_file(bam, args.threads), "sort+index gpualign", logfile)
        result["sort_s"] = srt["wall_s"]
        result["peak_rss_mb"] = max(result["peak_rss_mb"], srt["peak_rss_mb"])
    result["wall_s"] = round(result["map_s"] + result["sort_s"], 3)
    return result


def run_peer(aligner: str, prefix: Path, reads: Path, bam: Path, args, logfile: Path) -> dict:
    res = bl.run_timed(map_command(aligner, prefix, reads, bam, args), f"map {aligner}", logfile)
    return {"wall_s": res["wall_s"], "peak_rss_mb": res["peak_rss_mb"], "log": res["stderr"][-20:]}


def align(aligner: str, ref: Path, reads: Path, warm: Path, gdir: Path, bam: Path, args, logfile: Path) -> dict:
    """Index (or reuse it), then FASTQ.gz -> sorted, indexed BAM, timed."""
    prefix, info = build_index(aligner, ref, gdir, args, logfile)
    return map_reads(aligner, prefix, info, reads, warm, bam, args, logfile)


def map_reads(aligner: str, prefix: Path, index_info: dict, reads, warm, bam: Path, args, logfile: Path) -> dict:
    """FASTQ.gz -> sorted, indexed BAM with a built index, timed (gpualign after its warm-up on
    ``warm``); args.reads counts the reads (each mate for pairs) for reads/s."""
    if aligner == "gpualign":
        res = run_gpualign(prefix, reads, warm, bam, args, logfile)
    else:
        res = run_peer(aligner, prefix, reads, bam, args, logfile)
    res.update(index_info)
    res["reads_per_s"] = args.reads / res["wall_s"]
    res["bam_bytes"] = bam.stat().st_size
    res["sorted_indexed"] = bl.is_sorted_indexed(bam)
    res["version"] = bl.tool_version(peers.version_command(aligner))
    res["command"] = map_command(aligner, prefix, reads, bam, args)
    log(f"{aligner}: {res['wall_s']:.1f} s, {res['reads_per_s']:,.0f} reads/s")
    return res


# --------------------------------------------------------------------------
# report

COLUMNS = ["aligner", "index s", "wall s", "reads/s", "peak RSS GiB", "peak GPU GiB", "correct %",
           "precision MAPQ>=20 %", "gpualign speed-up"]


def table_rows(results: dict) -> list[dict]:
    g = results.get("gpualign", {}).get("reads_per_s")   # None where gpualign did not run or failed
    rows = []
    for name, r in results.items():
        if "error" in r:
            rows.append({"aligner": name, "wall s": "failed (see log)"})
            continue
        acc = r.get("accuracy") or {}
        gpu = r.get("peak_gpu_mb")
        rows.append({
            "aligner": name,
            "index s": bl.fmt(r.get("index_s")),
            "wall s": bl.fmt(r.get("wall_s")),
            "reads/s": bl.fmt(int(r["reads_per_s"])),
            "peak RSS GiB": bl.fmt(r["peak_rss_mb"] / 1024, 2),
            "peak GPU GiB": bl.fmt(gpu / 1024, 2) if gpu is not None else "",
            "correct %": bl.fmt(acc.get("correct_pct"), 2),
            "precision MAPQ>=20 %": bl.fmt(acc.get("precision_mapq20_pct"), 3),
            "gpualign speed-up": f"{g / r['reads_per_s']:.2f}x" if g else "",
        })
    return rows


def add_run_options(p, workdir: Path):
    """The options every benchmark driver shares (end_to_end.py, paired.py, real.py): gpualign's backend
    and k, the work folder, the accuracy tolerance, and what to skip or keep."""
    p.add_argument("--gpualign-backend", default="cuda", choices=["cuda", "cpu", "auto"])
    p.add_argument("-k", type=int, help="gpualign index k [gpualign.index.suggested_k for the genome]")
    p.add_argument("--workdir", type=Path, default=workdir)
    p.add_argument("--tolerance", type=int, default=5)
    p.add_argument("--skip-accuracy", action="store_true")
    p.add_argument("--keep-bams", action="store_true", help="keep the BAMs in the workdir (default: delete)")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--genome-mbp", type=float, default=5.0, help="synthetic genome size in Mbp [5]")
    p.add_argument("--reads", type=int, default=10_000_000, help="reads to simulate [10M]")
    p.add_argument("--length", type=int, default=100, help="read length [100]")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--peers", default=",".join(PEERS_CLASSIC),
                   help=f"comma-separated subset of {','.join(PEERS)} ('' for none) [{','.join(PEERS_CLASSIC)}]")
    p.add_argument("--skip-gpualign", action="store_true", help="run the peers only")
    p.add_argument("--seed", type=int, default=1)
    add_run_options(p, Path("/tmp/gpualign_bench"))
    args = p.parse_args(argv)
    args.peers = [x.strip() for x in args.peers.split(",") if x.strip()]
    unknown = set(args.peers) - set(PEERS)
    if unknown:
        p.error(f"unknown peer(s): {', '.join(sorted(unknown))}")
    args.k = args.k or gpualign_k(int(round(args.genome_mbp * 1e6)))
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    out = bl.out_dir()
    aligners = ([] if args.skip_gpualign else ["gpualign"]) + args.peers
    tag = f"g{args.genome_mbp:g}_n{args.reads}_l{args.length}_{'-'.join(aligners) or 'none'}"
    logfile = out / f"end_to_end_{tag}.log"
    logfile.write_text("")
    log(f"end_to_end {tag}: {vars(args)}")
    steps = {}

    start = time.perf_counter()
    ref, reads, warm, genome_stats = prepare_inputs(args)
    steps["inputs_s"] = round(time.perf_counter() - start, 2)
    log(f"genome: repeats {genome_stats['repeat_share']:.1%}, contigs {len(genome_stats['contigs'])}")

    results = {}
    record = {"script": "end_to_end", "tag": tag, "args": {k: str(v) if isinstance(v, Path) else v
                                                          for k, v in vars(args).items()},
              "machine": bl.machine_info(), "genome": genome_stats, "steps": steps, "results": results}

    def save():   # after every aligner, so a run cut short keeps what it measured
        (out / f"end_to_end_{tag}.json").write_text(json.dumps(record, indent=1))

    gdir = genome_dir(args)
    mapdir = gdir / "bams"
    mapdir.mkdir(parents=True, exist_ok=True)
    for aligner in aligners:
        try:
            results[aligner] = align(aligner, ref, reads, warm, gdir, mapdir / f"{aligner}.bam", args, logfile)
        except (RuntimeError, OSError) as exc:      # one failing aligner must not cost the others
            log(f"ERROR: {aligner}: {exc}")
            results[aligner] = {"error": str(exc)[-3000:]}
        save()
    done = {a: mapdir / f"{a}.bam" for a, r in results.items() if "error" not in r}

    if not args.skip_accuracy and done:
        bl.add_accuracy(results, done, args.reads, args, steps)
    if not args.keep_bams:
        for path in mapdir.glob("*.bam*"):
            path.unlink()
    save()

    rows = table_rows(results)
    bl.write_tsv(rows, COLUMNS, out / f"end_to_end_{tag}.tsv")
    log(f"wrote {out}/end_to_end_{tag}.json, .tsv, .log; total {time.perf_counter() - bl.T0:.1f} s")
    print(f"\nEnd to end, {args.reads:,} reads of {args.length} bp, {args.genome_mbp:g} Mbp synthetic genome, "
          f"{args.threads} threads (FASTQ.gz -> sorted, indexed BAM)\n")
    print(bl.markdown(rows, COLUMNS), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
