#!/usr/bin/env python3
"""Paired end, FASTQ.gz pair -> sorted, indexed BAM: gpualign next to bwa mem and minimap2.

One run, one genome FASTA (plain or gzip): simulate.py makes N read pairs (FR, fragment length
~ Normal(--insert-mean, --insert-sd), 1 % substitutions, 0.1 % 1-3 bp indels, 0.1 % N, on a
genome with 0.1 % SNPs), each aligner builds its index (timed apart), then each aligner's whole
path from R1.fq.gz + R2.fq.gz to a coordinate-sorted BAM with its .bai is timed as one command,
with peak memory (and GPU memory for gpualign), as end_to_end.py does: peers pipe SAM into
pysam.sort, gpualign writes the sorted, indexed BAM itself (sorted with pysam, timed, if not),
after an untimed warm-up map of a few thousand pairs that fills numba's cache.

Then every BAM is scored mate by mate with accuracy.py's rules: a mate is correct within
--tolerance bases of its own truth (flag 0x40/0x80 picks it from the pair's name); precision at
MAPQ >= 20; share of primary records flagged properly paired (0x2); each mate primary exactly
once. Results go to $OUT/paired_<tag>.json/.tsv/.log; a markdown table is printed last.

Inputs, indexes and reads are kept in --workdir and reused by a later run with the same options.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np

import benchlib as bl
from benchlib import log
import end_to_end as e2e
from peers import PEERS
import simulate

WARMUP_PAIRS = 2000


# --------------------------------------------------------------------------
# inputs

def plain_reference(args) -> Path:
    """The genome as a plain FASTA in the workdir (gzip input is decompressed once)."""
    if not args.ref.name.endswith(".gz"):
        return args.ref.resolve()
    plain = args.gdir / "genome.fa"

    def unzip():
        with gzip.open(args.ref, "rb") as src, open(plain, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 22)
    bl.cached(plain, unzip, "decompress genome")
    return plain


def genome_stats(ref: Path) -> dict:
    names, codes, _, lengths = simulate.load_fasta(ref)
    return {"contigs": len(names), "bp": int(lengths.sum()),
            "n_bases": int(np.count_nonzero(codes == simulate.N_CODE))}


def simulate_pairs(ref: Path, pairs: int, seed: int, args) -> list[Path]:
    """R1 and R2 gzip FASTQ of ``pairs`` simulated pairs (reused when complete)."""
    stem = args.gdir / f"pairs_n{pairs}_l{args.length}_i{args.insert_mean:g}-{args.insert_sd:g}_s{seed}"
    reads = [Path(f"{stem}_R1.fq.gz"), Path(f"{stem}_R2.fq.gz")]
    bl.cached(reads[0], lambda: simulate.simulate(
        ref, reads, pairs, args.length, seed, sub=args.sub, indel=args.indel, snp=args.snp,
        fraction_n=args.fraction_n, insert_mean=args.insert_mean, insert_sd=args.insert_sd,
        threads=args.threads, log=log), f"simulate {pairs} pairs")
    return reads


# --------------------------------------------------------------------------
# report

COLUMNS = ["aligner", "index s", "wall s", "pairs/s", "peak RSS GiB", "peak GPU GiB", "mapped %", "correct %",
           "precision MAPQ>=20 %", "properly paired %", "R1 / R2 correct %", "once each", "gpualign speed-up"]


def table_row(name: str, r: dict, gpualign_rate: float | None) -> dict:
    if "error" in r:
        return {"aligner": name, "wall s": "failed (see log)"}
    acc, gpu = r.get("accuracy") or {}, r.get("peak_gpu_mb")
    pairs_per_s = r["reads_per_s"] / 2
    return {
        "aligner": name,
        "index s": bl.fmt(r.get("index_s")),
        "wall s": bl.fmt(r["wall_s"]),
        "pairs/s": bl.fmt(int(pairs_per_s)),
        "peak RSS GiB": bl.fmt(r["peak_rss_mb"] / 1024, 2),
        "peak GPU GiB": bl.fmt(gpu / 1024, 2) if gpu is not None else "",
        "mapped %": bl.fmt(acc.get("mapped_pct"), 2),
        "correct %": bl.fmt(acc.get("correct_pct"), 2),
        "precision MAPQ>=20 %": bl.fmt(acc.get("precision_mapq20_pct"), 3),
        "properly paired %": bl.fmt(acc.get("properly_paired_pct"), 2),
        "R1 / R2 correct %": f"{acc['r1_correct_pct']:.2f} / {acc['r2_correct_pct']:.2f}" if acc else "",
        "once each": ("yes" if acc["once_each"] else "NO") if acc else "",
        "gpualign speed-up": f"{gpualign_rate / pairs_per_s:.2f}x" if gpualign_rate else "",
    }


def table_rows(results: dict) -> list[dict]:
    g = results.get("gpualign", {}).get("reads_per_s")
    return [table_row(name, r, g / 2 if g else None) for name, r in results.items()]


# --------------------------------------------------------------------------
# command line

def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("ref", type=Path, help="genome FASTA (.fa or .fa.gz)")
    p.add_argument("--name", help="label of the genome in file names [the FASTA's stem]")
    p.add_argument("--pairs", type=int, default=200_000, help="read pairs to simulate [200000]")
    p.add_argument("--length", type=int, default=150, help="read length [150]")
    p.add_argument("--insert-mean", type=float, default=400.0, help="mean fragment length [400]")
    p.add_argument("--insert-sd", type=float, default=40.0, help="fragment length SD [40]")
    p.add_argument("--sub", type=float, default=0.01, help="substitution rate [0.01]")
    p.add_argument("--indel", type=float, default=0.001, help="indel rate per base [0.001]")
    p.add_argument("--snp", type=float, default=0.001, help="SNP rate of the sample genome [0.001]")
    p.add_argument("--fraction-n", type=float, default=0.001, help="N rate of read bases [0.001]")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("-t", "--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--peers", default="bwa,minimap2",
                   help=f"comma-separated subset of {','.join(PEERS)} ('' for none) [bwa,minimap2]")
    p.add_argument("--skip-gpualign", action="store_true", help="run the peers only")
    e2e.add_run_options(p, Path("/tmp/gpualign_paired"))
    args = p.parse_args(argv)
    args.peers = [x.strip() for x in args.peers.split(",") if x.strip()]
    unknown = set(args.peers) - set(PEERS)
    if unknown:
        p.error(f"unknown peer(s): {', '.join(sorted(unknown))}")
    args.name = args.name or args.ref.name.split(".")[0]
    args.gdir = args.workdir / args.name
    args.reads = 2 * args.pairs     # end_to_end's per-read rates count each mate as a read
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    out = bl.out_dir()
    aligners = ([] if args.skip_gpualign else ["gpualign"]) + args.peers
    tag = f"{args.name}_n{args.pairs}_l{args.length}_{'-'.join(aligners) or 'none'}"
    logfile = out / f"paired_{tag}.log"
    logfile.write_text("")
    args.gdir.mkdir(parents=True, exist_ok=True)
    log(f"paired {tag}: {vars(args)}")

    start = time.perf_counter()
    ref = plain_reference(args)
    stats = genome_stats(ref)
    args.k = args.k or e2e.gpualign_k(stats["bp"])
    reads = simulate_pairs(ref, args.pairs, args.seed, args)
    warm = simulate_pairs(ref, WARMUP_PAIRS, args.seed + 1000, args) if "gpualign" in aligners else None
    steps = {"inputs_s": round(time.perf_counter() - start, 2)}
    log(f"genome {stats}; gpualign k {args.k}")

    results = {}
    record = {"script": "paired", "tag": tag, "args": {k: str(v) if isinstance(v, Path) else v
                                                      for k, v in vars(args).items()},
              "machine": bl.machine_info(), "genome": stats, "steps": steps, "results": results}

    def save():   # after every aligner, so a run cut short keeps what it measured
        (out / f"paired_{tag}.json").write_text(json.dumps(record, indent=1))

    mapdir = args.gdir / "bams"
    mapdir.mkdir(parents=True, exist_ok=True)
    for aligner in aligners:
        try:
            results[aligner] = e2e.align(aligner, ref, reads, warm, args.gdir, mapdir / f"{aligner}.bam",
                                         args, logfile)
        except (RuntimeError, OSError) as exc:      # one failing aligner must not cost the others
            log(f"ERROR: {aligner}: {exc}")
            results[aligner] = {"error": str(exc)[-3000:]}
        save()
    done = {a: mapdir / f"{a}.bam" for a, r in results.items() if "error" not in r}

    if not args.skip_accuracy and done:
        bl.add_accuracy(results, done, args.pairs, args, steps, paired=True)
    if not args.keep_bams:
        for path in mapdir.glob("*.bam*"):
            path.unlink()
    save()

    rows = table_rows(results)
    bl.write_tsv(rows, COLUMNS, out / f"paired_{tag}.tsv")
    log(f"wrote {out}/paired_{tag}.json, .tsv, .log; total {time.perf_counter() - bl.T0:.1f} s")
    print(f"\nPaired end, {args.pairs:,} pairs of 2x{args.length} bp (fragments {args.insert_mean:g} ± "
          f"{args.insert_sd:g} bp), {args.name} ({stats['bp']:,} bp), {args.threads} threads, gpualign k={args.k} "
          f"backend {args.gpualign_backend} (FASTQ.gz pair -> sorted, indexed BAM)\n")
    print(bl.markdown(rows, COLUMNS), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
