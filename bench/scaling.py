#!/usr/bin/env python3
"""How gpualign scales: (a) genome size at a fixed read count, (b) read count at a fixed genome.

For each point: index build time and peak RSS, index size on disk (all PREFIX.* files), then
`gpualign map` from the gzip FASTQ to a sorted, indexed BAM (pysam sort+index timed and added
where gpualign leaves the BAM unsorted): wall time, reads/s, peak host RSS of the process tree
and peak GPU memory (nvidia-smi). A few thousand reads are mapped untimed first, so numba's
compile cache is warm. Genomes come from synth.py and reads from simulate.py (as end_to_end.py
makes them), both reused from --workdir; command lines from peers.py.

Results go to $OUT/scaling_<part>_<values>.json (rewritten after every point, so a run cut
short keeps what it measured) and .log; a markdown table is printed last on stdout.
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
import synth
from end_to_end import WARMUP_READS, gpualign_k, simulate_reads


def parse_list(text: str, kind=float) -> list:
    """'5,50,500' or '1M,10M' -> numbers (k and M suffixes allowed)."""
    out = []
    for item in text.split(","):
        item = item.strip().upper()
        scale = {"K": 1e3, "M": 1e6, "G": 1e9}.get(item[-1:], 1)
        out.append(kind(float(item.rstrip("KMG")) * scale))
    return out


def inputs(mbp: float, n_reads: int, args) -> tuple[Path, Path, dict]:
    gdir = args.workdir / f"g{mbp:g}_s{args.seed}"
    gdir.mkdir(parents=True, exist_ok=True)
    ref = gdir / "genome.fa"
    stats, _ = bl.cached(ref, lambda: synth.make_genome(str(ref), int(round(mbp * 1e6)), args.seed, log=log),
                         f"genome {mbp:g} Mbp")
    reads = gdir / f"reads_n{n_reads}_l{args.length}_s{args.seed}.fq.gz"
    bl.cached(reads, lambda: simulate_reads(ref, reads, n_reads, args.length, args.seed, args.threads, log),
              f"{n_reads:,} reads")
    return ref, reads, stats


def index(ref: Path, mbp: float, args, logfile: Path) -> tuple[Path, int, dict]:
    k = gpualign_k(int(round(mbp * 1e6)))
    prefix = ref.parent / "idx" / f"gpualign_k{k}" / "ref"
    prefix.parent.mkdir(parents=True, exist_ok=True)

    def make():
        res = bl.run_timed(peers.index_command("gpualign", ref, prefix, args.threads, k=k), f"index {mbp:g} Mbp",
                           logfile)
        return {"index_s": res["wall_s"], "index_peak_rss_mb": res["peak_rss_mb"],
                "index_bytes": bl.files_size(prefix), "index_log": res["stderr"]}
    info, reused = bl.cached(prefix.parent / "index", make, f"index {mbp:g} Mbp")
    return prefix, k, dict(info, index_reused=reused)


def map_cmd(prefix: Path, reads: Path, bam: Path, args) -> str:
    return peers.map_command("gpualign", prefix, reads, args.threads, bam=bam, backend=args.backend)


def warm_up(ref: Path, prefix: Path, args, logfile: Path) -> float:
    warm = ref.parent / f"warmup_l{args.length}.fq.gz"
    bl.cached(warm, lambda: simulate_reads(ref, warm, WARMUP_READS, args.length, args.seed + 1000, args.threads),
              "warm-up reads")
    res = bl.run_timed(map_cmd(prefix, warm, ref.parent / "warmup.bam", args), "gpualign warm-up", logfile)
    return res["wall_s"]


def measure(part: str, mbp: float, n_reads: int, args, logfile: Path, state: dict) -> dict:
    """One point: inputs, index, (warm-up once), timed map to a sorted, indexed BAM."""
    ref, reads, stats = inputs(mbp, n_reads, args)
    prefix, k, info = index(ref, mbp, args, logfile)
    if "warmup_s" not in state:
        state["warmup_s"] = warm_up(ref, prefix, args, logfile)
    bam = ref.parent / f"scaling_n{n_reads}.bam"
    res = bl.run_timed(map_cmd(prefix, reads, bam, args), f"map {mbp:g} Mbp, {n_reads:,} reads", logfile, gpu=True)
    sort_s, peak = 0.0, res["peak_rss_mb"]
    sorted_by_aligner = bl.is_sorted_indexed(bam)
    if not sorted_by_aligner:
        srt = bl.run_timed(bl.sort_and_index_file(bam, args.threads), "sort+index", logfile)
        sort_s, peak = srt["wall_s"], max(peak, srt["peak_rss_mb"])
    point = {"part": part, "genome_mbp": mbp, "genome_bp": stats["size_bp"], "repeat_share": stats["repeat_share"],
             "reads": n_reads, "length": args.length, "k": k, **info,
             "map_s": res["wall_s"], "sort_s": sort_s, "wall_s": round(res["wall_s"] + sort_s, 3),
             "reads_per_s": n_reads / (res["wall_s"] + sort_s), "peak_rss_mb": peak,
             "peak_gpu_mb": res.get("peak_gpu_mb"), "sorted_by_aligner": sorted_by_aligner,
             "bam_bytes": bam.stat().st_size, "log": res["stderr"]}
    if not args.keep:
        for path in ref.parent.glob(bam.name + "*"):
            path.unlink()
    log(f"point {mbp:g} Mbp, {n_reads:,} reads: {point['wall_s']:.1f} s, {point['reads_per_s']:,.0f} reads/s")
    return point


COLUMNS = ["part", "genome Mbp", "reads", "k", "index s", "index MiB", "wall s", "reads/s",
           "peak RSS GiB", "peak GPU GiB"]


def row(p: dict) -> dict:
    gpu = p.get("peak_gpu_mb")
    return {"part": p["part"], "genome Mbp": f"{p['genome_mbp']:g}", "reads": f"{p['reads']:,}", "k": p["k"],
            "index s": bl.fmt(p["index_s"]), "index MiB": bl.fmt(p["index_bytes"] / 2 ** 20),
            "wall s": bl.fmt(p["wall_s"]), "reads/s": f"{p['reads_per_s']:,.0f}",
            "peak RSS GiB": bl.fmt(p["peak_rss_mb"] / 1024, 2),
            "peak GPU GiB": bl.fmt(gpu / 1024, 2) if gpu is not None else ""}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--part", choices=["genomes", "reads", "both"], default="both")
    p.add_argument("--genome-mbp", default="5,50,500", help="genome sizes of part 'genomes' [5,50,500]")
    p.add_argument("--reads-for-genomes", default="2M", help="read count of part 'genomes' [2M]")
    p.add_argument("--read-counts", default="1M,10M,50M", help="read counts of part 'reads' [1M,10M,50M]")
    p.add_argument("--genome-for-reads", type=float, default=5.0, help="genome Mbp of part 'reads' [5]")
    p.add_argument("--length", type=int, default=100)
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--backend", default="cuda", choices=["cuda", "cpu", "auto"])
    p.add_argument("--workdir", type=Path, default=Path("/tmp/gpualign_bench"))
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--keep", action="store_true", help="keep the BAMs")
    return p.parse_args(argv)


def plan(args) -> list[tuple[str, float, int]]:
    points = []
    if args.part in ("genomes", "both"):
        n = parse_list(args.reads_for_genomes, int)[0]
        points += [("genomes", mbp, n) for mbp in parse_list(args.genome_mbp)]
    if args.part in ("reads", "both"):
        points += [("reads", args.genome_for_reads, n) for n in parse_list(args.read_counts, int)]
    return points


def main(argv=None) -> int:
    args = parse_args(argv)
    out = bl.out_dir()
    points = plan(args)
    if args.part == "genomes":
        tag = "genomes_" + "-".join(f"{m:g}" for _, m, _ in points)
    else:
        tag = "reads_" + "-".join(str(n) for _, _, n in points) if args.part == "reads" else "both"
    logfile = out / f"scaling_{tag}.log"
    logfile.write_text("")
    log(f"scaling {tag}: {len(points)} points, {vars(args)}")
    record = {"script": "scaling", "tag": tag, "machine": bl.machine_info(),
              "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}, "points": []}
    state = {}
    for part, mbp, n in points:
        record["points"].append(measure(part, mbp, n, args, logfile, state))
        record["warmup_s"] = state.get("warmup_s")
        (out / f"scaling_{tag}.json").write_text(json.dumps(record, indent=1))
    log(f"wrote {out}/scaling_{tag}.json; total {time.perf_counter() - bl.T0:.1f} s")
    print(f"\ngpualign scaling, {args.length} bp reads, {args.threads} threads, backend {args.backend} "
          f"(FASTQ.gz -> sorted, indexed BAM)\n")
    print(bl.markdown([row(p) for p in record["points"]], COLUMNS), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
