#!/usr/bin/env python3
"""Real genomes, reads from Mason or ART: gpualign next to strobealign, minimap2, bwa-mem2, minibwa and bwa mem.

    python3 bench/real.py GENOME.fa[.gz] [GENOME2 ...] [--reads 2000000] [--length 150] [--paired] \\
        [-t THREADS] [--simulator mason|art] [--aligners gpualign,strobealign,minimap2,bwa-mem2,minibwa,bwa] \\
        [--gpualign-backend cuda|cpu] [-k K] [--workdir /tmp/gpualign_real] [--out DIR]

For each genome (plain or gzip FASTA): real_reads.py simulates ``--reads`` reads (or pairs with
``--paired``) of ``--length`` bp with Mason 2 (default) or ART, named with their truth as
simulate.py names its reads, written as gzip FASTQ (``--gzip``, default ISA-L level 2, about
zlib level 4's size), and a few thousand more for gpualign's warm-up; both are kept in
``--workdir`` and reused by a later run with the same options. Each aligner builds its index
(timed apart, kept and reused), then each aligner's whole path from the gzip FASTQ to a
coordinate-sorted BAM with its .bai is timed as one command with T threads and the peak memory of
its process tree (and of the GPU for gpualign): peers pipe SAM into pysam's sort and index
(samtools' code; the GPU machine has no samtools binary), gpualign writes its sorted, indexed BAM
itself after an untimed warm-up map that fills numba's cache (end_to_end.py's functions, command
lines from peers.py). An aligner whose executable is not on PATH is left out, with a message.

Then every BAM is scored with accuracy.py's rules (benchlib.score_bams): correct when on the true
contig within --tolerance bases of the true leftmost position; precision (correct share of the
records with MAPQ >= 20) and recall (reads correct with MAPQ >= 20, of all reads) at MAPQ >= 20;
every read (each mate) primary exactly once. Pairs are scored per mate and report the share of
properly paired records. Last, the decode floor: the same gzip FASTQ decompressed and thrown away
by ``zcat`` (where it exists), python-isal (one thread) and rapidgzip on T threads (where
importable), each timed as a command (``--decoders``).

Results: ``OUT/real_<tag>.json`` (rewritten after every step), ``.tsv`` and ``.log``, OUT being
``--out`` or $OUT (/tmp/bench_out); the markdown tables are printed last on stdout, progress goes
to stderr. Locally, as a check of the script (speed there means nothing):
``python bench/real.py .data/ecoli.fa.gz --reads 20000 --length 100 -t 2 --gpualign-backend cpu``.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import sys
import time
from pathlib import Path
from types import SimpleNamespace

HERE = str(Path(__file__).resolve().parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import benchlib as bl  # noqa: E402
from benchlib import log  # noqa: E402
import end_to_end as e2e  # noqa: E402
import paired as pe  # noqa: E402
import peers  # noqa: E402
import real_reads  # noqa: E402

DEFAULT_ALIGNERS = ("gpualign", "strobealign", "minimap2", "bwa-mem2", "minibwa", "bwa")
WARMUP_READS = 5000
WARMUP_PAIRS = 2000


# --------------------------------------------------------------------------
# inputs

def reference(g) -> Path:
    """The genome as a plain FASTA at g.gdir/genome.fa: gzip decompressed once, a plain file
    linked (the simulator's .fai, strobealign's index and others go beside it, not beside the
    original)."""
    if g.ref.name.endswith(".gz"):
        return pe.plain_reference(g)
    link = g.gdir / "genome.fa"
    target = g.ref.resolve()
    if not (link.is_symlink() and link.resolve() == target):
        link.unlink(missing_ok=True)
        Path(f"{link}.fai").unlink(missing_ok=True)
        link.symlink_to(target)
    return link


def read_files(args, n: int, seed: int) -> list[Path]:
    """The FASTQ path(s) of n reads (pairs) simulated with this run's options and seed."""
    kind = "pe" if args.paired else "se"
    frag = f"_f{args.fragment_mean}-{args.fragment_sd}" if args.paired else ""
    stem = (f"{args.simulator}_{kind}_n{n}_l{args.length}{frag}_s{seed}_p{args.parts or args.threads}"
            f"_{args.gzip.replace(':', '')}{'_qbin' if args.qualities == 'binned' else ''}")
    if args.paired:
        return [args.gdir / f"{stem}_R1.fq.gz", args.gdir / f"{stem}_R2.fq.gz"]
    return [args.gdir / f"{stem}.fq.gz"]


def simulate(ref: Path, n: int, seed: int, args, what: str) -> tuple[list[Path], dict, bool]:
    """Simulated reads (reused when complete): their paths, what real_reads said, reused?"""
    files = read_files(args, n, seed)
    info, reused = bl.cached(files[0], lambda: real_reads.simulate(
        ref, files, n, args.length, seed, simulator=args.simulator, simulator_bin=args.simulator_bin,
        parts=args.parts, threads=args.threads, fragment_mean=args.fragment_mean, fragment_sd=args.fragment_sd,
        gzip_spec=args.gzip, sim_args=args.sim_args, qualities=args.qualities, log=log), what)
    return files, info, reused


# --------------------------------------------------------------------------
# decode floor

# python -c TOOL THREADS FILES...: decompress, output thrown away (imports nothing else, so the
# start-up is Python's alone)
DECODE = """import sys
tool, threads, files = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
for path in files:
    if tool == "isal":
        from isal import igzip
        fh = igzip.open(path, "rb")
    elif tool == "rapidgzip":
        import rapidgzip
        fh = rapidgzip.open(path, parallelization=threads)
    else:
        import gzip
        fh = gzip.open(path, "rb")
    with fh:
        while fh.read(1 << 24):
            pass
"""


DECODERS = ("zcat", "isal", "rapidgzip")


def decoders(names, threads: int) -> list[tuple[str, int, str]]:
    """(name, threads, command with {files}) of each decoder named and present here (python's
    zlib stands in for isal where python-isal is missing)."""
    out = []
    python = f"{bl.q(bl.PY)} -c {bl.q(DECODE)}"
    if "zcat" in names and shutil.which("zcat"):
        out.append(("zcat", 1, "zcat {files} > /dev/null"))
    if "isal" in names:
        if importlib.util.find_spec("isal"):
            out.append(("python-isal", 1, f"{python} isal 1 {{files}}"))
        else:
            out.append(("python-zlib", 1, f"{python} zlib 1 {{files}}"))
    if "rapidgzip" in names and importlib.util.find_spec("rapidgzip"):
        out.append(("rapidgzip", threads, f"{python} rapidgzip {threads} {{files}}"))
    return out


def decode_floor(files: list[Path], n_reads: int, plain_bytes: int, args, logfile: Path) -> list[dict]:
    """Each decoder's wall time on the input (all its files, one after the other)."""
    rows = []
    quoted = " ".join(bl.q(f) for f in files)
    for name, threads, command in decoders(args.decoders, args.threads):
        res = bl.run_timed(command.format(files=quoted), f"decode {name}", logfile, check=False)
        if res["rc"]:
            continue
        rows.append({"decoder": name, "threads": threads, "wall_s": res["wall_s"],
                     "mb_per_s": round(plain_bytes / 1e6 / res["wall_s"], 1),
                     "reads_per_s": int(n_reads / res["wall_s"])})
    return rows


# --------------------------------------------------------------------------
# one genome

def run_genome(genome: Path, args, out: Path) -> tuple[str, list[dict], list[dict], str]:
    """Simulate, index, map, score one genome; return (title, aligner rows, decode rows, tag)."""
    g = SimpleNamespace(**vars(args))          # per genome: gdir, k, reads (mates counted)
    name = args.name if args.name and len(args.genomes) == 1 else genome.name.split(".")[0]
    g.ref, g.gdir = genome, args.workdir / name
    g.gdir.mkdir(parents=True, exist_ok=True)
    kind = "pe" if args.paired else "se"
    aligners = [a for a in args.aligners if a != "gpualign" or not args.skip_gpualign]
    tag = f"{name}_{kind}_n{args.reads}_l{args.length}_{args.simulator}{'_qbin' if args.qualities == 'binned' else ''}"
    logfile = out / f"real_{tag}.log"
    logfile.write_text("")
    log(f"real {tag}: {vars(args)}")

    ref = reference(g)
    stats = pe.genome_stats(ref)
    g.k = args.k or e2e.gpualign_k(stats["bp"])
    g.reads = args.reads * (2 if args.paired else 1)     # reads/s count each mate
    steps, results, indexes, skipped = {}, {}, {}, {}
    record = {"script": "real", "tag": tag, "genome": dict(stats, name=name, path=str(genome)),
              "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
              "gpualign_k": g.k, "machine": bl.machine_info(), "steps": steps, "indexes": indexes,
              "skipped": skipped, "results": results}

    def save():   # after every step, so a run cut short keeps what it measured
        (out / f"real_{tag}.json").write_text(json.dumps(record, indent=1, default=str))

    start = time.perf_counter()
    reads, sim_info, reused = simulate(ref, args.reads, args.seed, g, f"simulate {kind} ({args.simulator})")
    record["reads"] = dict(sim_info, files=[str(f) for f in reads], reused=reused)
    steps["simulate_s"] = round(time.perf_counter() - start, 2)
    warm = None
    if "gpualign" in aligners:
        warm_n = WARMUP_PAIRS if args.paired else WARMUP_READS
        warm, _, _ = simulate(ref, warm_n, args.seed + 1000, SimpleNamespace(**dict(vars(g), parts=1)),
                              "simulate warm-up reads")
        warm = warm if args.paired else warm[0]
    log(f"genome {stats}; gpualign k {g.k}; reads {[f.name for f in reads]}")
    save()

    for aligner in list(aligners):
        missing = peers.missing(aligner)
        if missing:
            log(f"skipping {aligner}: {missing} is not on PATH")
            skipped[aligner] = {"skipped": f"{missing} not on PATH"}
            aligners.remove(aligner)
    for aligner in aligners:        # every index first, timed apart
        try:
            indexes[aligner] = e2e.build_index(aligner, ref, g.gdir, g, logfile)
        except (RuntimeError, OSError, ValueError) as exc:
            log(f"ERROR: index {aligner}: {exc}")
            results[aligner] = {"error": str(exc)[-3000:]}
        save()
    mapdir = g.gdir / "bams"
    mapdir.mkdir(parents=True, exist_ok=True)
    map_input = reads if args.paired else reads[0]
    for aligner in aligners:
        if aligner not in indexes:
            continue
        prefix, info = indexes[aligner]
        try:
            results[aligner] = e2e.map_reads(aligner, prefix, info, map_input, warm, mapdir / f"{aligner}.bam", g,
                                             logfile)
        except (RuntimeError, OSError) as exc:      # one failing aligner must not cost the others
            log(f"ERROR: {aligner}: {exc}")
            results[aligner] = {"error": str(exc)[-3000:]}
        save()
    indexes_json = {a: dict(info, prefix=str(prefix)) for a, (prefix, info) in indexes.items()}
    record["indexes"] = indexes_json
    done = {a: mapdir / f"{a}.bam" for a, r in results.items() if "wall_s" in r}
    if not args.skip_accuracy and done:
        bl.add_accuracy(results, done, args.reads, g, steps, paired=args.paired)
    if not args.keep_bams:
        for path in mapdir.glob("*.bam*"):
            path.unlink()
    save()
    # last: of the steps, the one a call short of time can best do without
    decode_rows = decode_floor(reads, g.reads, sum(sim_info["plain_bytes"]), g, logfile) if args.decoders else []
    record["decode"] = decode_rows
    save()

    rows = table_rows(results | skipped, args.paired)
    bl.write_tsv(rows, columns(args.paired), out / f"real_{tag}.tsv")
    what = f"{args.reads:,} pairs of 2x{args.length} bp (fragments {args.fragment_mean} ± {args.fragment_sd})" \
        if args.paired else f"{args.reads:,} reads of {args.length} bp"
    binned = " (qualities binned)" if args.qualities == "binned" else ""
    title = (f"{name} ({stats['bp']:,} bp, {stats['contigs']} contig(s)), {what} from {sim_info['version']}{binned}, "
             f"{sim_info['gzip']}; {args.threads} threads; "
             + (f"gpualign k={g.k}, backend {args.gpualign_backend}; " if "gpualign" in aligners else "")
             + "FASTQ.gz -> sorted, indexed BAM")
    log(f"wrote {out}/real_{tag}.json, .tsv, .log")
    return title, rows, decode_rows, tag


# --------------------------------------------------------------------------
# report

def columns(paired: bool) -> list[str]:
    rate = "pairs/s" if paired else "reads/s"
    return (["aligner", "version", "index s", "wall s", rate, "gpualign ×", "peak RSS GiB", "peak GPU GiB",
             "mapped %", "correct %", "precision MAPQ≥20 %", "recall MAPQ≥20 %"]
            + (["properly paired %"] if paired else []) + ["once each"])


DECODE_COLUMNS = ["decoder", "threads", "wall s", "MB/s (plain)", "reads/s"]


def table_rows(results: dict, paired: bool) -> list[dict]:
    """One row per aligner; gpualign × is the peer's wall time over gpualign's (> 1: gpualign faster)."""
    g = results.get("gpualign", {}).get("wall_s")
    rate = "pairs/s" if paired else "reads/s"
    rows = []
    for name, r in results.items():
        if "wall_s" not in r:
            rows.append({"aligner": name, "wall s": r.get("skipped") or "failed (see log)"})
            continue
        acc, gpu = r.get("accuracy") or {}, r.get("peak_gpu_mb")
        row = {
            "aligner": name, "version": r.get("version", ""),
            "index s": bl.fmt(r.get("index_s")), "wall s": bl.fmt(r["wall_s"]),
            rate: bl.fmt(int(r["reads_per_s"] / (2 if paired else 1))),
            "gpualign ×": f"{r['wall_s'] / g:.2f}" if g and name != "gpualign" else "",
            "peak RSS GiB": bl.fmt(r["peak_rss_mb"] / 1024, 2),
            "peak GPU GiB": bl.fmt(gpu / 1024, 2) if gpu is not None else "",
        }
        if acc:
            row.update({
                "mapped %": bl.fmt(acc["mapped_pct"], 2), "correct %": bl.fmt(acc["correct_pct"], 2),
                "precision MAPQ≥20 %": bl.fmt(acc["precision_mapq20_pct"], 3),
                "recall MAPQ≥20 %": bl.fmt(100.0 * acc["mapq20_correct"] / max(1, acc["reads_in"]), 2),
                "properly paired %": bl.fmt(acc.get("properly_paired_pct"), 2),
                "once each": "yes" if acc["once_each"] else
                f"NO (missing {acc['missing']}, duplicated {acc['duplicated']}, unknown {acc['unknown']})",
            })
        rows.append(row)
    return rows


def decode_table(rows: list[dict]) -> list[dict]:
    return [{"decoder": r["decoder"], "threads": r["threads"], "wall s": bl.fmt(r["wall_s"]),
             "MB/s (plain)": bl.fmt(r["mb_per_s"]), "reads/s": bl.fmt(r["reads_per_s"])} for r in rows]


# --------------------------------------------------------------------------
# command line

def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("genomes", type=Path, nargs="+", help="genome FASTA(s), plain or gzip")
    p.add_argument("--name", help="label of the genome (one genome only) [the FASTA's stem]")
    p.add_argument("--reads", type=int, default=2_000_000, help="reads, or pairs with --paired [2000000]")
    p.add_argument("--length", type=int, default=150, help="read length [150]")
    p.add_argument("--paired", action="store_true", help="simulate and map read pairs (FR)")
    p.add_argument("--fragment-mean", type=int, default=350, help="mean fragment length [350]")
    p.add_argument("--fragment-sd", type=int, default=35, help="fragment length sd [35]")
    p.add_argument("--simulator", choices=real_reads.SIMULATORS, default="mason")
    p.add_argument("--simulator-bin", help="the simulator's executable [on PATH, or Debian's place]")
    p.add_argument("--sim-args", default="", help="extra options for the simulator, one string")
    p.add_argument("--parts", type=int, help="simulator runs side by side, each with its own seed [-t]")
    p.add_argument("--gzip", default=real_reads.DEFAULT_GZIP, help="isal:0..3 or zlib:1..9 [isal:2]")
    p.add_argument("--qualities", choices=real_reads.QUALITIES, default="raw",
                   help="the simulator's qualities, or binned NovaSeq-like (Q2/12/23/37) [raw]")
    p.add_argument("-t", "--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--aligners", default=",".join(DEFAULT_ALIGNERS),
                   help=f"comma-separated, in the order they run [{','.join(DEFAULT_ALIGNERS)}]")
    p.add_argument("--skip-gpualign", action="store_true", help="leave gpualign out of --aligners")
    e2e.add_run_options(p, Path("/tmp/gpualign_real"))
    p.add_argument("--out", type=Path, help="results folder [$OUT, else /tmp/bench_out]")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--decoders", default=",".join(DECODERS),
                   help=f"decode floor: comma-separated subset of {','.join(DECODERS)} ('' for none) "
                        f"[{','.join(DECODERS)}]")
    args = p.parse_args(argv)
    args.aligners = [x.strip() for x in args.aligners.split(",") if x.strip()]
    args.decoders = [x.strip() for x in args.decoders.split(",") if x.strip()]
    if set(args.decoders) - set(DECODERS):
        p.error(f"--decoders: a subset of {','.join(DECODERS)}")
    unknown = set(args.aligners) - set(peers.ALIGNERS)
    if unknown:
        p.error(f"unknown aligner(s): {', '.join(sorted(unknown))}; known: {', '.join(peers.ALIGNERS)}")
    try:
        real_reads.parse_gzip(args.gzip)
    except ValueError as exc:
        p.error(str(exc))
    args.workdir = args.workdir.resolve()
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
    out = args.out or bl.out_dir()
    tables = []
    for genome in args.genomes:
        tables.append(run_genome(genome, args, out))
    log(f"total {time.perf_counter() - bl.T0:.1f} s")
    for title, rows, decode_rows, tag in tables:
        print(f"\n{title} [{tag}]\n")
        print(bl.markdown(rows, columns(args.paired)))
        if decode_rows:
            print("\nDecode floor (the same FASTQ.gz decompressed, output thrown away):\n")
            print(bl.markdown(decode_table(decode_rows), DECODE_COLUMNS))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
