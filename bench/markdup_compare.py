#!/usr/bin/env python3
"""Duplicate marking on a real genome, against samtools markdup and Picard MarkDuplicates (issue 17).

    python bench/markdup_compare.py [--reference MG1655-K12.fasta.gz] [--pairs 300000] [--length 150] \\
        [--dup-rate 0.05] [--optical 0.3] [--distance 100] [--units 2] [-t 2] [--out DIR]

1. The genome: E. coli K-12 MG1655 as Debian's ragout-examples ships it (a real genome we did not
   make), indexed by `gpualign index`.
2. Pairs from Mason (Debian seqan-apps' mason_simulator, through real_reads.py), renamed with
   Illumina names (SIM:1:FC0:1:TILE:X:Y, tiles 1101-1116, x and y up to 30,000, each place once).
3. `--junk` of the fragments get an R2 of random bases (a mate that cannot map: single reads in
   pairs' places). PCR duplicates: `--dup-rate` of the fragments get copies (1 + a geometric number: most once,
   some many times), each with fresh base qualities (another read's, of the same length); a
   `--optical` share of the copies lies on its original's tile within 60 pixels (an optical
   duplicate at Picard's distance of 100), the others anywhere. Copies are scattered through the
   input.
4. gpualign map --markdup --optical-distance D (one run, one read group); then the same reads as
   `--units` lanes of one library, each mapped unmarked and merged with marking (the workflow's
   merge_units: gpualign.workflow.chunks.merge_sorted_bams), timed (best of two, each in a process
   of its own, with its peak memory) against the same merge unmarked and `samtools merge` of the
   same BAMs (pysam, same threads and level), its flags compared with the single run's (a set
   whose members two mapping runs placed apart, in a repeat, may keep another member: counted).
5. The references mark the single run's records (flags cleared): samtools 1.16 (sort -n, fixmate -m,
   sort, markdup -d D) and Picard (MarkDuplicates OPTICAL_DUPLICATE_PIXEL_DISTANCE=D). Flagged sets
   are compared read by read, (name, read 1 or 2); each read flagged by one and not the other is
   put down to a cause: a tie of the best score in its set (each tool keeps another one of the
   equal best), or not explained. Optical counts are compared, and the pair sets where samtools'
   count (its dt:Z:SQ tags) differs from the clusters Picard and gpualign count are listed, with
   how many hold a chain (a copy within the distance of another copy only).

Writes OUT/markdup_compare.json and prints the table BENCHMARKS.md quotes.
"""

from __future__ import annotations

import argparse
import collections
import gzip
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pysam

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import real_reads  # noqa: E402

from gpualign.bam.markdup import read_metrics  # noqa: E402

ECOLI = "/usr/share/doc/ragout/examples/E.Coli/references/MG1655-K12.fasta.gz"   # Debian ragout-examples
TILES = (1101, 1117)
WIDTH = 30000
NEAR = 60


def log(msg):
    print(f"[markdup_compare] {msg}", file=sys.stderr, flush=True)


def run(cmd, **kw):
    """A command (list or shell string), timed; its stderr shown if it fails."""
    start = time.perf_counter()
    proc = subprocess.run(cmd, shell=isinstance(cmd, str), capture_output=True, text=True, **kw)
    if proc.returncode:
        raise RuntimeError(f"{cmd if isinstance(cmd, str) else ' '.join(map(str, cmd))} failed:\n{proc.stderr[-3000:]}")
    return time.perf_counter() - start


def fastq(path):
    """Records of a FASTQ(.gz) as [name, seq, qual] (bytes; name without '@', comment and /1 /2)."""
    with gzip.open(path, "rb") as fh:
        lines = fh.read().split(b"\n")
    return [[lines[i][1:].split()[0].rsplit(b"/", 1)[0], lines[i + 1], lines[i + 3]]
            for i in range(0, len(lines) - 3, 4)]


class Places:
    """Unique flow-cell places (tile, x, y); near: within NEAR pixels of another, on its tile."""

    def __init__(self, rng):
        self.rng, self.used = rng, set()

    def __call__(self, near=None):
        while True:
            if near is None:
                place = (int(self.rng.integers(*TILES)), *map(int, self.rng.integers(0, WIDTH, size=2)))
            else:
                dx, dy = map(int, self.rng.integers(-NEAR, NEAR + 1, size=2))
                place = (near[0], max(0, near[1] + dx), max(0, near[2] + dy))
            if place not in self.used:
                self.used.add(place)
                return place


def add_duplicates(r1, r2, rng, dup_rate, optical, junk):
    """Fragments (name, R1, R2) renamed with Illumina places, a `junk` share of them with an R2 of
    random bases (a mate that cannot map), plus PCR copies; the truth of the copies (copy name ->
    original name, optical or not) and the fragments in a shuffled order."""
    places = Places(rng)
    frags, truth = [], {}
    by_length = collections.defaultdict(list)
    for a, b in zip(r1, r2):
        by_length[len(a[2]), len(b[2])].append((a[2], b[2]))
    for a, b in zip(r1, r2):
        origin = places()
        name = b"SIM:1:FC0:1:%d:%d:%d" % origin
        if rng.random() < junk:
            b = [b[0], bytes(rng.choice(list(b"ACGT"), size=len(b[1])).astype(np.uint8)), b[2]]
        frags.append((name, a[1], a[2], b[1], b[2]))
        if rng.random() >= dup_rate:
            continue
        pool = by_length[len(a[2]), len(b[2])]
        for _ in range(int(rng.geometric(0.5))):
            beside = rng.random() < optical
            place = places(origin if beside else None)
            qa, qb = pool[int(rng.integers(len(pool)))]   # fresh qualities: another read's
            copy = b"SIM:1:FC0:1:%d:%d:%d" % place
            frags.append((copy, a[1], qa, b[1], qb))
            truth[copy.decode()] = (name.decode(), bool(beside))
    order = rng.permutation(len(frags))
    return [frags[i] for i in order], truth


def write_pairs(frags, r1, r2):
    with gzip.open(r1, "wb", compresslevel=1) as f1, gzip.open(r2, "wb", compresslevel=1) as f2:
        for name, s1, q1, s2, q2 in frags:
            f1.write(b"@" + name + b"/1\n" + s1 + b"\n+\n" + q1 + b"\n")
            f2.write(b"@" + name + b"/2\n" + s2 + b"\n+\n" + q2 + b"\n")


def flagged(bam):
    with pysam.AlignmentFile(str(bam)) as fh:
        return {(r.query_name, r.is_read1) for r in fh if r.is_duplicate}


def samtools_markdup(bam, work, threads, distance):
    """samtools markdup's flagged set and stats (-f), after its flags are cleared, fixmate -m."""
    t = f"-@ {threads}"
    seconds = run(f"samtools view {t} -b --remove-flags 0x400 -o {work}/c.bam {bam} && "
                  f"samtools sort {t} -n -o {work}/n.bam {work}/c.bam && "
                  f"samtools fixmate {t} -m {work}/n.bam {work}/f.bam && "
                  f"samtools sort {t} -o {work}/s.bam {work}/f.bam && "
                  f"samtools markdup {t} -d {distance} -f {work}/samtools.txt {work}/s.bam {work}/samtools.bam")
    stats = {}
    for line in Path(work, "samtools.txt").read_text().splitlines():
        key, _, value = line.partition(":")
        if value.strip().lstrip("-").isdigit():
            stats[key] = int(value)
    return flagged(Path(work, "samtools.bam")), stats, seconds


def picard_markdup(bam, work, distance):
    seconds = run(["PicardCommandLine", "MarkDuplicates", f"I={bam}", f"O={work}/picard.bam",
                   f"M={work}/picard.txt", f"OPTICAL_DUPLICATE_PIXEL_DISTANCE={distance}",
                   "VALIDATION_STRINGENCY=SILENT"])
    (metrics,) = read_metrics(Path(work, "picard.txt")).values()
    return flagged(Path(work, "picard.bam")), metrics, seconds


def five_prime(r):
    ops = r.cigartuples
    if r.is_reverse:
        return r.reference_id, r.reference_end - 1 + (ops[-1][1] if ops[-1][0] in (4, 5) else 0), True
    return r.reference_id, r.reference_start - (ops[0][1] if ops[0][0] in (4, 5) else 0), False


def score(r):
    return min(sum(q for q in r.query_qualities if q >= 15), 16383)


def duplicate_sets(bam):
    """For each read (name, is_read1): its set's key, and each set's members' scores, the sets of
    pairs by both ends and of fragments (single reads, mates of unmapped reads) by their own."""
    reads, mates = {}, collections.defaultdict(list)
    with pysam.AlignmentFile(str(bam)) as fh:
        for r in fh:
            if r.is_unmapped or r.is_secondary or r.is_supplementary:
                continue
            reads[r.query_name, r.is_read1] = (five_prime(r), score(r), r.is_paired and not r.mate_is_unmapped)
            if r.is_paired and not r.mate_is_unmapped:
                mates[r.query_name].append((five_prime(r), score(r)))
    set_of, members = {}, collections.defaultdict(list)
    for (name, read1), (end, s, in_pair) in reads.items():
        if in_pair and len(mates[name]) == 2:
            key = ("pair", tuple(sorted(e for e, _ in mates[name])))
            total = sum(x for _, x in mates[name])
        else:
            key, total = ("fragment", end), s
        set_of[name, read1] = key
        if read1 or key[0] == "fragment":
            members[key].append((total, name))
    return set_of, members


def explain(only, set_of, members):
    """Causes of reads flagged by one tool and not the other: a tie of the best score in the read's
    set, a read whose set has no duplicate to the other tool... counted."""
    causes = collections.Counter()
    for read in only:
        key = set_of.get(read)
        if key is None:
            causes["unmapped or not primary"] += 1
            continue
        scores = sorted((s for s, _ in members[key]), reverse=True)
        causes["tie of the best score (another equal member kept)" if len(scores) > 1 and scores[0] == scores[1]
               else "not explained"] += 1
    return dict(causes)


def optical_by_set(samtools_bam, members, distance):
    """Pair sets where samtools' optical count (read 1s tagged dt:Z:SQ) differs from the clusters
    Picard and gpualign count (union-find over members on one tile within the distance): how many
    such sets, the pairs they differ by, and how many of them hold a chain (two members of one
    cluster not within the distance of each other: optical only through a third)."""
    tagged = set()
    with pysam.AlignmentFile(str(samtools_bam)) as fh:
        for r in fh:
            if r.is_read1 and r.has_tag("dt") and r.get_tag("dt") == "SQ":
                tagged.add(r.query_name)
    sets = differ = chains = 0
    for key, group in members.items():
        if key[0] != "pair" or len(group) < 2:
            continue
        places = [tuple(map(int, name.split(":")[-3:])) for _, name in group]
        close = [[a[0] == b[0] and abs(a[1] - b[1]) <= distance and abs(a[2] - b[2]) <= distance
                  for b in places] for a in places]
        parent = list(range(len(places)))

        def root(i):
            while parent[i] != i:
                i = parent[i]
            return i
        for i in range(len(places)):
            for j in range(i + 1, len(places)):
                if close[i][j] and root(i) != root(j):
                    parent[max(root(i), root(j))] = min(root(i), root(j))
        ours = sum(root(i) != i for i in range(len(places)))
        theirs = sum(name in tagged for _, name in group)
        if ours != theirs:
            sets += 1
            differ += ours - theirs
            chains += any(root(i) == root(j) and not close[i][j] for i in range(len(places))
                          for j in range(len(places)))
    return {"sets": sets, "pairs": differ, "sets_with_a_chain": chains}


def time_merges(units, out, threads, distance, repeats=2):
    """The units merged with marking (the workflow's merge_units), without, and by `samtools merge`
    (pysam, same threads and level), each in a process of its own, alternately, `repeats` times:
    the best wall time and the peak memory of each (GNU time), and the marking merge's phases."""
    runs = collections.defaultdict(list)
    code = ("import json, sys, pysam; from gpualign.workflow.chunks import merge_sorted_bams\n"
            "out, markdup, distance, threads, units = sys.argv[1], sys.argv[2] == '1', int(sys.argv[3]), "
            "int(sys.argv[4]), sys.argv[5:]\n"
            "header = None\n"
            "for bam in units:\n"
            "    h = pysam.AlignmentFile(bam).header.to_dict()\n"
            "    header = header or dict(h, RG=[], PG=h['PG'][:1]); header['RG'] += h['RG']\n"
            "s = merge_sorted_bams(units, out, threads, 1, header=header, what='unit', markdup=markdup,\n"
            "                      optical_distance=distance, metrics=out[:-4] + '.txt' if markdup else None)\n"
            "print(json.dumps({'records': s['records'], 'phases_s': s['seconds']}))\n")
    samtools = ("import sys, pysam; out, threads, units = sys.argv[1], sys.argv[2], sys.argv[3:]\n"
                "pysam.merge('-f', '-c', '-p', '--no-PG', '-l', '1', '-@', threads, '--write-index',\n"
                "            '-o', f'{out}##idx##{out}.bai', *units)\n")
    commands = {"merge_markdup": [code, str(out / "units_marked.bam"), "1", str(distance), str(threads), *units],
                "merge_plain": [code, str(out / "units_plain.bam"), "0", str(distance), str(threads), *units],
                "samtools_merge": [samtools, str(out / "units_samtools.bam"), str(threads), *units]}
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(HERE.parent), os.environ.get("PYTHONPATH")])))
    for _ in range(repeats):
        for name, (program, *argv) in commands.items():
            start = time.perf_counter()
            proc = subprocess.run(["/usr/bin/time", "-f", "%M", sys.executable, "-c", program, *argv],
                                  capture_output=True, text=True, env=env)
            if proc.returncode:
                raise RuntimeError(f"{name} failed:\n{proc.stderr[-3000:]}")
            runs[name].append((time.perf_counter() - start, int(proc.stderr.strip().splitlines()[-1]) // 1024,
                               proc.stdout.strip()))
    result = {}
    for name, done in runs.items():
        seconds, rss, text = min(done)
        result[f"{name}_s"], result[f"{name}_peak_mb"] = round(seconds, 2), rss
        if name == "merge_markdup":
            result.update(json.loads(text.splitlines()[-1]))
    return result


def sets_moved(a_bam, b_bam, reads):
    """How many of the reads ((name, read 1 or 2) flagged in one BAM and not the other) are in a
    duplicate set whose members differ between the two (the same fragments mapped by two runs: a
    member in a repeat, such as E. coli's seven rRNA operons, placed at another copy of it; separate
    runs estimate insert sizes on different blocks of pairs)."""
    if not reads:
        return 0
    (set_a, members_a), (set_b, members_b) = duplicate_sets(a_bam), duplicate_sets(b_bam)

    def names(set_of, members, read):
        key = set_of.get(read)
        return key, {name for _, name in members.get(key, [])}
    return sum(names(set_a, members_a, r) != names(set_b, members_b, r) for r in reads)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--reference", default=ECOLI)
    p.add_argument("--pairs", type=int, default=300_000)
    p.add_argument("--length", type=int, default=150)
    p.add_argument("--dup-rate", type=float, default=0.05)
    p.add_argument("--optical", type=float, default=0.3)
    p.add_argument("--junk", type=float, default=0.005, help="share of fragments whose R2 cannot map")
    p.add_argument("--skip-references", action="store_true", help="gpualign and the merge only (timing)")
    p.add_argument("--distance", type=int, default=100)
    p.add_argument("--units", type=int, default=2)
    p.add_argument("-t", "--threads", type=int, default=os.cpu_count())
    p.add_argument("--seed", type=int, default=17)
    p.add_argument("--out", default="markdup_compare")
    p.add_argument("--backend", default="auto")
    args = p.parse_args(argv)
    out = Path(args.out).absolute()
    out.mkdir(parents=True, exist_ok=True)
    t = str(args.threads)
    result = {"args": vars(args), "reference": args.reference, "samtools": pysam.samtools.version().split("\n")[0]}

    ref = out / "ecoli.fa"
    if not ref.exists():
        with gzip.open(args.reference, "rb") as src, open(ref, "wb") as dst:
            shutil.copyfileobj(src, dst)
    prefix = out / "ecoli_k12"   # not the FASTA's name: gpualign index writes PREFIX.fa
    if not Path(f"{prefix}.idx.npz").exists():
        run(["gpualign", "index", str(ref), "-p", str(prefix), "-t", t])
    sim = [out / "mason_R1.fq.gz", out / "mason_R2.fq.gz"]
    if not sim[1].exists():
        result["mason"] = real_reads.simulate(ref, sim, args.pairs, args.length, args.seed, threads=args.threads,
                                              log=log)
    rng = np.random.default_rng(args.seed)
    frags, truth = add_duplicates(fastq(sim[0]), fastq(sim[1]), rng, args.dup_rate, args.optical, args.junk)
    reads = [out / "R1.fq.gz", out / "R2.fq.gz"]
    write_pairs(frags, *reads)
    result["fragments"], result["copies"] = len(frags), len(truth)
    result["optical_copies"] = sum(optical for _, optical in truth.values())
    log(f"{len(frags):,} fragments, {len(truth):,} PCR copies ({result['optical_copies']:,} beside their original)")

    rg = r"@RG\tID:sim.L1\tSM:sim\tLB:lib1\tPL:ILLUMINA"
    marked, metrics = out / "gpualign.bam", out / "gpualign.txt"
    result["map_markdup_s"] = run(["gpualign", "map", str(prefix), *map(str, reads), "-o", str(marked), "-t", t,
                                   "--backend", args.backend, "-R", rg, "--markdup", "--optical-distance",
                                   str(args.distance), "--markdup-metrics", str(metrics)])
    (ours_m,) = read_metrics(metrics).values()
    ours = flagged(marked)
    with pysam.AlignmentFile(str(marked)) as fh:
        total = sum(1 for r in fh if not (r.is_secondary or r.is_supplementary))
    result["reads"], result["gpualign"] = total, {"flagged": len(ours), "metrics": ours_m}
    log(f"gpualign: {len(ours):,} of {total:,} reads flagged, {ours_m['READ_PAIR_OPTICAL_DUPLICATES']} optical pairs")

    # the same reads as lanes of one library, merged with marking (the workflow's merge_units)
    units = []
    for u in range(args.units):
        part = frags[u * len(frags) // args.units:(u + 1) * len(frags) // args.units]
        files = [out / f"unit{u}_R1.fq.gz", out / f"unit{u}_R2.fq.gz"]
        write_pairs(part, *files)
        units.append(str(out / f"unit{u}.bam"))
        run(["gpualign", "map", str(prefix), *map(str, files), "-o", units[-1], "-t", t, "--backend", args.backend,
             "-R", rg.replace("sim.L1", f"sim.L{u + 1}")])
    merges = time_merges(units, out, args.threads, args.distance)
    unit_flags = flagged(out / "units_marked.bam")
    moved = sets_moved(marked, out / "units_marked.bam", unit_flags ^ ours)
    result["units"] = dict(merges, units=args.units, flags_equal_single_run=unit_flags == ours,
                           only_units=len(unit_flags - ours), only_single=len(ours - unit_flags),
                           differing_reads_in_sets_mapped_apart=moved,
                           metrics=read_metrics(out / "units_marked.txt"))
    log(f"units: {merges['records']:,} records merged and marked in {merges['merge_markdup_s']} s (unmarked "
        f"{merges['merge_plain_s']} s, samtools merge {merges['samtools_merge_s']} s); flags as the single run: "
        f"{unit_flags == ours} ({len(unit_flags ^ ours)} reads differ, {moved} of them in sets mapped apart)")

    if args.skip_references:
        (out / "markdup_compare.json").write_text(json.dumps(result, indent=1, default=str))
        print(json.dumps(result["units"], default=str))
        return 0
    set_of, members = duplicate_sets(marked)
    work = out / "tools"
    work.mkdir(exist_ok=True)
    sam_flags, sam_stats, sam_s = samtools_markdup(marked, work, args.threads, args.distance)
    pic_flags, pic_m, pic_s = picard_markdup(marked, work, args.distance)
    result["optical_sets_unlike_samtools"] = optical_by_set(work / "samtools.bam", members, args.distance)
    for tool, theirs, seconds in (("samtools", sam_flags, sam_s), ("picard", pic_flags, pic_s)):
        only_ours, only_theirs = ours - theirs, theirs - ours
        result[tool] = {"flagged": len(theirs), "seconds": round(seconds, 1), "only_gpualign": len(only_ours),
                        f"only_{tool}": len(only_theirs),
                        "disagree_pct": round(100 * len(ours ^ theirs) / total, 4),
                        "causes_only_gpualign": explain(only_ours, set_of, members),
                        f"causes_only_{tool}": explain(only_theirs, set_of, members)}
    result["samtools"]["stats"] = sam_stats
    result["samtools"]["optical_pairs"] = sam_stats.get("DUPLICATE PAIR OPTICAL", 0) // 2
    result["picard"]["metrics"] = pic_m
    (out / "markdup_compare.json").write_text(json.dumps(result, indent=1, default=str))

    rows = [("reads (primary records)", f"{total:,}", "", ""),
            ("flagged", f"{len(ours):,}", f"{len(sam_flags):,}", f"{len(pic_flags):,}"),
            ("only this tool / only gpualign", "",
             f"{result['samtools']['only_samtools']} / {result['samtools']['only_gpualign']}",
             f"{result['picard']['only_picard']} / {result['picard']['only_gpualign']}"),
            ("reads flagged differently", "", f"{result['samtools']['disagree_pct']}%",
             f"{result['picard']['disagree_pct']}%"),
            ("duplicate pairs", f"{ours_m['READ_PAIR_DUPLICATES']:,}", f"{sam_stats.get('DUPLICATE PAIR', 0) // 2:,}",
             f"{pic_m['READ_PAIR_DUPLICATES']:,}"),
            ("duplicate single reads", f"{ours_m['UNPAIRED_READ_DUPLICATES']:,}",
             f"{sam_stats.get('DUPLICATE SINGLE', 0):,}", f"{pic_m['UNPAIRED_READ_DUPLICATES']:,}"),
            ("optical pairs", f"{ours_m['READ_PAIR_OPTICAL_DUPLICATES']:,}", f"{result['samtools']['optical_pairs']:,}",
             f"{pic_m['READ_PAIR_OPTICAL_DUPLICATES']:,}"),
            ("estimated library size", f"{ours_m['ESTIMATED_LIBRARY_SIZE']:,}",
             f"{sam_stats.get('ESTIMATED_LIBRARY_SIZE', 0):,}", f"{pic_m['ESTIMATED_LIBRARY_SIZE']:,}"),
            ("time (s)", f"{result['map_markdup_s']:.1f} (map + mark)", f"{sam_s:.1f} (fixmate + markdup)",
             f"{pic_s:.1f}")]
    print("| | gpualign | samtools markdup | Picard MarkDuplicates |\n| --- | --- | --- | --- |")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print(json.dumps({k: result[k] for k in ("units", "optical_sets_unlike_samtools")}, default=str))
    print(json.dumps({tool: {k: v for k, v in result[tool].items() if k.startswith("causes")}
                      for tool in ("samtools", "picard")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
