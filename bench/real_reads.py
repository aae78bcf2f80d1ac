#!/usr/bin/env python3
"""Reads from simulators we did not write (Mason 2, ART), named with their truth as simulate.py names its reads.

    python bench/real_reads.py REF.fa -n N -l LEN [--simulator mason|art] [--parts P] [-t T] \\
        [--gzip isal:2] [--seed 1] -o OUT.fq.gz
    python bench/real_reads.py REF.fa -n PAIRS -l 150 [--fragment-mean 350 --fragment-sd 35] \\
        -o OUT_R1.fq.gz OUT_R2.fq.gz                       # pairs (FR)

Library: ``simulate(reference, outputs, n, length, seed, simulator=, parts=, threads=, ...)`` (real.py).

The simulators are single-threaded and slow (Mason: ~30 us a read), so the reads are made in
``--parts`` independent runs side by side (``-t`` at a time), each with its own seed
(``seed * 1000 + part``) and its share of the reads; the output depends on ``--parts`` (and not
on ``-t``). Each run writes plain FASTQ and its SAM of true alignments; its reads are renamed
with the truth and numbered from the part's offset, then all parts are written, in order, to one
gzip stream per output file (``--gzip``: ``isal:L``, python-isal's threaded writer at ISA-L level
L = 0..3, the default ``isal:2`` giving files within ~2 % of the size zlib's level 4 gives, the
level of bcl2fastq's output; or ``zlib:L``, L = 1..9, zlib deflate in 4 MiB pieces on ``-t``
threads, each piece primed with the 32 KiB before it, as pigz does; both one gzip member, header
time 0).

* Mason 2 (``mason_simulator``, Debian seqan-apps): ``-n`` reads (or pairs) of
  ``--illumina-read-length`` bases from fragments ~ Normal(``--fragment-mean``,
  ``--fragment-sd``), its default Illumina error model (0.4 % mismatches on average, rising
  towards the 3' end, 0.005 % insertions and deletions each, some N), no variants (no VCF: the
  reference is taken verbatim, so the SAM's positions are reference coordinates). Reads come from
  N-free stretches of every contig, in proportion to its length. Binary: ``--simulator-bin``, else
  ``mason_simulator`` on PATH, else /usr/lib/seqan/bin/mason_simulator.
* ART (``art_illumina``, Debian art-nextgen-simulation-tools): its built-in quality profile for
  the read length (HiSeq 2000 for 100 bp, HiSeq 2500 for 150 bp), ``-c`` reads per contig, so each
  part runs once per contig with a multinomial share of the part's reads by contig length
  (contigs shorter than a fragment left out); regions with N are masked (its default ``-nf 1``).

Truth: the leftmost 1-based position (SAM POS) and strand (flag 0x10) of each read's record in
the simulator's SAM, and its contig's name cut at the first white space (as aligners cut it).
Names: ``r{num}:{contig}:{pos}:{strand}``, pairs ``p{num}:{contig}:{pos1}:{strand1}:{pos2}:{strand2}``
(mate 1 is the simulator's first file), exactly as simulate.py writes them
(``simulate.format_name`` / ``format_pair_name``), so accuracy.py and benchlib score them.
Extra simulator options go after ``--sim-args`` (one string, split as a shell would).
``--qualities binned`` maps the simulator's qualities to NovaSeq's four values (Q2, Q12, Q23,
Q37), as today's Illumina data comes; Mason and ART write HiSeq-era qualities of ~40 values,
which make the FASTQ.gz and every aligner's BAM bigger and slower to write (bench/results/fairness_synthetic.md).
"""
from __future__ import annotations

import argparse
import gzip
import os
import shlex
import shutil
import subprocess
import sys
import time
import zlib
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from multiprocessing import get_context
from pathlib import Path

import numpy as np

HERE = str(Path(__file__).resolve().parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from simulate import format_name, format_pair_name  # noqa: E402

SIMULATORS = ("mason", "art")
EXECUTABLE = {"mason": "mason_simulator", "art": "art_illumina"}
FALLBACK = {"mason": "/usr/lib/seqan/bin/mason_simulator"}
DEFAULT_GZIP = "isal:2"
QUALITIES = ("raw", "binned")
# NovaSeq-like binning (RTA3's four values: Q2, Q12, Q23, Q37) of Phred+33 qualities, for --qualities binned
BINNED = bytes((c if c < 33 else 33 + (2 if c - 33 <= 2 else 12 if c - 33 <= 14 else 23 if c - 33 <= 30 else 37))
               for c in range(256))
CHUNK = 1 << 22          # bytes a zlib piece (and a copy step) holds


# --------------------------------------------------------------------------
# the simulators

def find_simulator(simulator: str, path: str | None = None) -> str:
    """The simulator's executable: path if given, else on PATH, else Debian's own place."""
    if simulator not in SIMULATORS:
        raise ValueError(f"unknown simulator {simulator!r}; known: {', '.join(SIMULATORS)}")
    for candidate in (path, shutil.which(EXECUTABLE[simulator]), FALLBACK.get(simulator)):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise FileNotFoundError(f"{EXECUTABLE[simulator]} not found (give --simulator-bin, or put it on PATH)")


def simulator_version(simulator: str, exe: str) -> str:
    """One line naming the simulator's version."""
    res = subprocess.run([exe, "--version"] if simulator == "mason" else [exe],
                         capture_output=True, text=True, timeout=30)
    for line in (res.stdout + res.stderr).splitlines():
        if "version" in line.lower():
            return " ".join(line.split())
    return ""


def part_counts(n: int, parts: int) -> list[int]:
    """n split into `parts` shares that differ by at most one, larger first."""
    return [n // parts + (i < n % parts) for i in range(parts)]


def contig_lengths(ref: Path) -> list[tuple[str, int]]:
    """(name, length) of each record of a plain FASTA, the name cut at the first white space."""
    out, name, size = [], None, 0
    with open(ref, "rb") as fh:
        for line in fh:
            if line.startswith(b">"):
                if name is not None:
                    out.append((name, size))
                name, size = line[1:].split(maxsplit=1)[0].decode() if line[1:].strip() else "", 0
            else:
                size += len(line.strip())
    if name is not None:
        out.append((name, size))
    return out


def split_contigs(ref: Path, folder: Path) -> list[Path]:
    """One FASTA per record of ref in folder (ART's -c counts reads per record), each named by
    the first word of its header (ART puts the whole header in its read names)."""
    folder.mkdir(parents=True, exist_ok=True)
    paths, out = [], None
    with open(ref, "rb") as fh:
        for line in fh:
            if line.startswith(b">"):
                if out:
                    out.close()
                paths.append(folder / f"contig{len(paths)}.fa")
                out = open(paths[-1], "wb")
                line = b">" + (line[1:].split(maxsplit=1) or [b""])[0] + b"\n"
            if out:
                out.write(line)
    if out:
        out.close()
    return paths


def mason_command(exe: str, ref: Path, n: int, length: int, seed: int, outs: list[Path], sam: Path,
                  fragment_mean: int, fragment_sd: int, extra: list[str]) -> list[str]:
    command = [exe, "-q", "--seed", str(seed), "--num-threads", "1", "-n", str(n), "-ir", str(ref),
               "--illumina-read-length", str(length), "--fragment-mean-size", str(fragment_mean),
               "--fragment-size-std-dev", str(fragment_sd), "--read-name-prefix", "s", "-o", str(outs[0])]
    if len(outs) == 2:
        command += ["-or", str(outs[1])]
    return command + ["-oa", str(sam)] + extra


def art_command(exe: str, contig_fa: Path, n: int, length: int, seed: int, prefix: Path, paired: bool,
                fragment_mean: int, fragment_sd: int, extra: list[str]) -> list[str]:
    command = [exe, "-q", "-na", "-sam", "-i", str(contig_fa), "-l", str(length), "-c", str(n),
               "-rs", str(seed), "-o", str(prefix)]
    if paired:
        command += ["-p", "-m", str(fragment_mean), "-s", str(fragment_sd)]
    return command + extra


def art_shares(ref: Path, n: int, seed: int, min_length: int) -> list[int]:
    """A multinomial share of n for each contig by length (0 for contigs under min_length)."""
    lengths = np.array([size if size >= min_length else 0 for _, size in contig_lengths(ref)], dtype=np.float64)
    if lengths.sum() == 0:
        raise ValueError(f"no contig of {min_length} bp or more in {ref}")
    return [int(x) for x in np.random.default_rng(seed).multinomial(n, lengths / lengths.sum())]


# --------------------------------------------------------------------------
# one part: simulate, then rename with the truth

def _read_name(header: bytes) -> bytes:
    """A FASTQ header's read name, less '@', any comment and a /1 or /2 suffix."""
    name = header[1:].split(maxsplit=1)[0]
    return name[:-2] if name[-2:] in (b"/1", b"/2") else name


def read_truth(sams: list[Path], paired: bool, contig_names: dict) -> dict:
    """{read name: truth} from simulator SAMs: (contig, pos, strand), or for pairs
    (contig, (pos1, strand1), (pos2, strand2)) with mate 1 flagged 0x40."""
    truth = {}
    for sam in sams:
        with open(sam, "rb") as fh:
            for line in fh:
                if line[:1] == b"@":
                    continue
                qname, flag, rname, pos = line.split(b"\t", 4)[:4]
                flag = int(flag)
                if flag & 0x4 or rname == b"*":
                    raise ValueError(f"{sam}: read {qname.decode()} has no true alignment: {line[:200]!r}")
                contig = contig_names.get(rname) or rname.split()[0].decode()
                mate = (int(pos), "-" if flag & 0x10 else "+")
                if not paired:
                    truth[qname] = (contig, *mate)
                    continue
                first = bool(flag & 0x40)
                other = truth.get(qname)
                if other is None:
                    truth[qname] = [contig, mate if first else None, None if first else mate]
                else:
                    if other[0] != contig:
                        raise ValueError(f"{sam}: mates of {qname.decode()} on two contigs")
                    other[1 if first else 2] = mate
    return truth


def rename_part(fastqs: list[Path], sams: list[Path], outs: list[Path], first: int, paired: bool,
                contig_names: dict, keep=None, binned: bool = False) -> int:
    """Write the part's reads to outs (plain FASTQ) named with their truth, numbered from first + 1
    (keep: a mask of the records to write, all when None; binned: qualities binned NovaSeq-like)."""
    truth = read_truth(sams, paired, contig_names)
    handles = [open(path, "rb") for path in fastqs]
    writers = [open(path, "wb", buffering=1 << 22) for path in outs]
    number, index = first, -1
    try:
        while True:
            records = [[fh.readline() for _ in range(4)] for fh in handles]
            if not records[0][0]:
                break
            index += 1
            if keep is not None and not keep[index]:
                continue
            number += 1
            names = {_read_name(rec[0]) for rec in records}
            if len(names) != 1:
                raise ValueError(f"mates out of step in {fastqs}: {names}")
            t = truth[names.pop()]
            name = format_pair_name(number, t[0], t[1], t[2]) if paired else format_name(number, *t)
            for rec, out in zip(records, writers):
                out.write(b"@%s\n%s+\n%s" % (name.encode(), rec[1], rec[3].translate(BINNED) if binned else rec[3]))
    finally:
        for fh in handles + writers:
            fh.close()
    return number - first


def run_part(task: dict) -> dict:
    """Simulate one part (Mason once, ART once per contig), then rename its reads; return counts
    and seconds."""
    start = time.perf_counter()
    work, i, paired = Path(task["work"]), task["part"], task["paired"]
    sims = []           # (fastq files, sam) of each simulator run
    if task["simulator"] == "mason":
        fqs = [work / f"sim{i}_{m}.fq" for m in (1, 2)[:1 + paired]]
        sam = work / f"sim{i}.sam"
        subprocess.run(mason_command(task["exe"], task["ref"], task["n"], task["length"], task["seed"], fqs, sam,
                                     task["fragment_mean"], task["fragment_sd"], task["extra"]),
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        sims.append((fqs, sam))
    else:
        # ART's -c is only roughly the count it writes where a contig has N (masked regions), so
        # it is asked for more (again, with another seed, while short) and a random subset of
        # exactly the share is kept
        rng = np.random.default_rng(task["seed"])
        shares = art_shares(Path(task["ref"]), task["n"], task["seed"], task["min_length"])
        for c, (contig_fa, share) in enumerate(zip(task["contig_fastas"], shares)):
            runs, made, attempt = [], 0, 0
            while made < share:
                if attempt == 20:
                    raise RuntimeError(f"ART wrote {made} of {share} reads of contig {c} in 20 runs")
                prefix = work / f"sim{i}_c{c}_a{attempt}_"
                subprocess.run(art_command(task["exe"], Path(contig_fa), int((share - made) * 1.25) + 50,
                                           task["length"], (task["seed"] * 7919 + c) * 101 + attempt, prefix,
                                           paired, task["fragment_mean"], task["fragment_sd"], task["extra"]),
                               check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                fqs = [Path(f"{prefix}{m}.fq") for m in (1, 2)] if paired else [Path(f"{prefix}.fq")]
                with open(fqs[0], "rb") as fh:
                    count = sum(1 for _ in fh) // 4
                runs.append((fqs, Path(f"{prefix}.sam"), count))
                made, attempt = made + count, attempt + 1
            keep = np.zeros(made, dtype=bool)
            keep[rng.choice(made, share, replace=False)] = True
            offsets = np.cumsum([0] + [r[2] for r in runs])
            sims += [(fqs, sam, keep[offsets[j]:offsets[j + 1]]) for j, (fqs, sam, _) in enumerate(runs)]
    simulated = time.perf_counter()
    outs = [work / f"part{i}_{m}.fq" for m in (1, 2)[:1 + paired]]
    # ART's runs (per contig, and again while short) are renamed into the part's files in turn
    count = 0
    for j, (fqs, sam, *keep) in enumerate(sims):
        piece = [Path(f"{out}.{j}") for out in outs]
        count += rename_part(fqs, [sam], piece, task["first"] + count, paired, task["contig_names"],
                             keep[0] if keep else None, task["qualities"] == "binned")
        for path in fqs + [sam]:
            path.unlink()
    for m, out in enumerate(outs):
        with open(out, "wb") as dst:
            for j in range(len(sims)):
                piece = Path(f"{out}.{j}")
                with open(piece, "rb") as src:
                    shutil.copyfileobj(src, dst, CHUNK)
                piece.unlink()
    if count != task["n"]:
        raise RuntimeError(f"part {i}: the simulator wrote {count} reads, not {task['n']}")
    return {"part": i, "reads": count, "simulate_s": simulated - start,
            "rename_s": time.perf_counter() - simulated, "files": [str(p) for p in outs]}


# --------------------------------------------------------------------------
# gzip output

class ZlibThreadedWriter:
    """One gzip member from zlib deflate at a level, 4 MiB pieces compressed on threads (each
    primed with the 32 KiB before it, as pigz does), header time 0."""

    def __init__(self, path, level: int, threads: int):
        self.fh = open(path, "wb")
        self.fh.write(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03")
        self.level, self.pool = level, ThreadPoolExecutor(max(1, threads))
        self.threads = max(1, threads)
        self.buffer, self.prev, self.pending = bytearray(), b"", []
        self.crc, self.size = 0, 0

    def _deflate(self, data: bytes, zdict: bytes) -> bytes:
        c = zlib.compressobj(self.level, zlib.DEFLATED, -15, zdict=zdict) if zdict else \
            zlib.compressobj(self.level, zlib.DEFLATED, -15)
        return c.compress(data) + c.flush(zlib.Z_SYNC_FLUSH)

    def _submit(self, data: bytes) -> None:
        self.crc = zlib.crc32(data, self.crc)
        self.size += len(data)
        self.pending.append(self.pool.submit(self._deflate, data, self.prev))
        self.prev = data[-32768:]
        while len(self.pending) > 2 * self.threads:
            self.fh.write(self.pending.pop(0).result())

    def write(self, data) -> int:
        self.buffer += data
        while len(self.buffer) >= CHUNK:
            self._submit(bytes(self.buffer[:CHUNK]))
            del self.buffer[:CHUNK]
        return len(data)

    def close(self) -> None:
        if self.buffer:
            self._submit(bytes(self.buffer))
            self.buffer = bytearray()
        for job in self.pending:
            self.fh.write(job.result())
        self.pool.shutdown()
        self.fh.write(zlib.compressobj(self.level, zlib.DEFLATED, -15).flush(zlib.Z_FINISH))   # last block
        self.fh.write((self.crc & 0xFFFFFFFF).to_bytes(4, "little") + (self.size & 0xFFFFFFFF).to_bytes(4, "little"))
        self.fh.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def parse_gzip(spec: str) -> tuple[str, int]:
    """'isal:L' (0..3) or 'zlib:L' (1..9) -> (tool, level)."""
    tool, _, level = spec.partition(":")
    limits = {"isal": (0, 3), "zlib": (1, 9)}
    if tool not in limits or not level.isdigit() or not limits[tool][0] <= int(level) <= limits[tool][1]:
        raise ValueError(f"--gzip: isal:0..3 or zlib:1..9, not {spec!r}")
    return tool, int(level)


def gzip_writer(path, spec: str, threads: int):
    """(writer, what it is): isal's threaded writer, or zlib pieces on threads; isal falls back
    to zlib at level 4 if python-isal is missing."""
    tool, level = parse_gzip(spec)
    if tool == "isal":
        try:
            from isal import igzip_threaded
            return igzip_threaded.open(str(path), "wb", compresslevel=level, threads=max(1, threads)), \
                f"isal igzip_threaded level {level}, {threads} threads"
        except ImportError:
            tool, level = "zlib", 4
    return ZlibThreadedWriter(path, level, threads), f"zlib deflate level {level} in pieces, {threads} threads"


# --------------------------------------------------------------------------
# public API

def simulate(reference, outputs, n: int, length: int, seed: int = 1, *, simulator: str = "mason",
             simulator_bin: str | None = None, parts: int | None = None, threads: int | None = None,
             fragment_mean: int = 350, fragment_sd: int = 35, gzip_spec: str = DEFAULT_GZIP,
             sim_args: str = "", qualities: str = "raw", log=None) -> dict:
    """Write n reads (one output) or n pairs (two: R1, R2) as gzip FASTQ named with their truth;
    return what was done (simulator, version, command of part 0, seconds, gzip, bytes)."""
    say = log or (lambda msg: None)
    ref = Path(reference).absolute()
    if str(ref).endswith(".gz"):
        raise ValueError("the simulators read a plain FASTA; decompress it first")
    outputs = [Path(outputs)] if isinstance(outputs, (str, Path)) else [Path(p) for p in outputs]
    if len(outputs) not in (1, 2) or len(set(outputs)) != len(outputs):
        raise ValueError(f"outputs: one path, or two different paths for pairs, not {outputs}")
    paired = len(outputs) == 2
    threads = max(1, threads or os.cpu_count() or 1)
    parts = max(1, min(parts or threads, n))
    exe = find_simulator(simulator, simulator_bin)
    parse_gzip(gzip_spec)
    work = outputs[0].parent / f"{outputs[0].name}.parts"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    contigs = contig_lengths(ref)
    contig_names = {}
    if simulator == "mason":
        import pysam
        if not Path(f"{ref}.fai").exists():
            pysam.faidx(str(ref))          # before the parts start: each Mason would write it at once
        # Mason names contigs by the whole header line where it has white space
        with open(ref, "rb") as fh:
            contig_names = {line[1:].strip(): line[1:].split(maxsplit=1)[0].decode()
                            for line in fh if line.startswith(b">")}
    extra = shlex.split(sim_args)
    counts = part_counts(n, parts)
    firsts = np.concatenate([[0], np.cumsum(counts)[:-1]]).tolist()
    if qualities not in QUALITIES:
        raise ValueError(f"qualities: one of {', '.join(QUALITIES)}, not {qualities!r}")
    base = {"work": str(work), "paired": paired, "simulator": simulator, "exe": exe, "ref": str(ref),
            "qualities": qualities,
            "length": length, "fragment_mean": fragment_mean, "fragment_sd": fragment_sd, "extra": extra,
            "contig_names": contig_names}
    if simulator == "art":
        base["contig_fastas"] = [str(p) for p in split_contigs(ref, work / "contigs")]
        base["min_length"] = max(length, fragment_mean + 3 * fragment_sd if paired else length)
    tasks = [dict(base, part=i, n=counts[i], first=firsts[i], seed=seed * 1000 + i) for i in range(parts)]
    what = "pairs" if paired else "reads"
    say(f"{simulator} ({exe}): {n:,} {what} of {length} bp in {parts} parts, {threads} at a time")
    start = time.perf_counter()
    done = []
    with ProcessPoolExecutor(min(threads, parts), mp_context=get_context("fork")) as pool:
        try:
            for res in pool.map(run_part, tasks):
                done.append(res)
        except subprocess.CalledProcessError as exc:
            raise RuntimeError(f"{simulator} failed (rc {exc.returncode}): {shlex.join(exc.cmd)}\n"
                               f"{(exc.stderr or b'').decode(errors='replace')[-2000:]}") from exc
    simulated = time.perf_counter()
    say(f"simulated and renamed in {simulated - start:.1f} s (slowest part: simulator "
        f"{max(r['simulate_s'] for r in done):.1f} s, renaming {max(r['rename_s'] for r in done):.1f} s)")
    plain = [0] * len(outputs)
    for m, out in enumerate(outputs):
        writer, how = gzip_writer(out, gzip_spec, threads)
        with writer:
            for res in done:
                with open(res["files"][m], "rb") as src:
                    while block := src.read(CHUNK):
                        writer.write(block)
                        plain[m] += len(block)
                os.unlink(res["files"][m])
    shutil.rmtree(work, ignore_errors=True)
    written = time.perf_counter()
    say(f"wrote {n:,} {what} to {' and '.join(map(str, outputs))} ({how}) in {written - simulated:.1f} s")
    if simulator == "mason":
        part0 = [Path("part0_1.fq"), Path("part0_2.fq")][:1 + paired]
        first_command = mason_command(exe, ref, counts[0], length, seed * 1000, part0, Path("part0.sam"),
                                      fragment_mean, fragment_sd, extra)
    else:
        first_command = art_command(exe, Path("contig0.fa"), counts[0], length, seed * 1000 * 7919, Path("part0_c0_"),
                                    paired, fragment_mean, fragment_sd, extra)
        first_command.append("# the form only: -c and -rs differ per contig and retry")
    return {"simulator": simulator, "version": simulator_version(simulator, exe), "exe": exe,
            "command_part0": shlex.join(first_command), "n": n, "paired": paired, "length": length,
            "parts": parts, "seed": seed, "fragment_mean": fragment_mean, "fragment_sd": fragment_sd,
            "contigs": len(contigs), "qualities": qualities, "simulate_s": round(simulated - start, 2),
            "compress_s": round(written - simulated, 2), "gzip": how, "plain_bytes": plain,
            "gzip_bytes": [out.stat().st_size for out in outputs]}


# --------------------------------------------------------------------------
# command line

def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("reference", help="reference FASTA (plain; gzip is decompressed beside the output)")
    parser.add_argument("-n", "--num-reads", type=int, required=True, help="reads, or pairs when paired")
    parser.add_argument("-l", "--length", type=int, default=100)
    parser.add_argument("--simulator", choices=SIMULATORS, default="mason")
    parser.add_argument("--simulator-bin", help="the simulator's executable [on PATH, or Debian's place]")
    parser.add_argument("--sim-args", default="", help="extra options for the simulator, one string")
    parser.add_argument("--parts", type=int, help="simulator runs, each with its own seed [-t]")
    parser.add_argument("-t", "--threads", type=int, default=os.cpu_count(), help="runs at a time and gzip threads")
    parser.add_argument("--fragment-mean", type=int, default=350, help="mean fragment length [350]")
    parser.add_argument("--fragment-sd", type=int, default=35, help="fragment length sd [35]")
    parser.add_argument("--gzip", default=DEFAULT_GZIP, help=f"isal:0..3 or zlib:1..9 [{DEFAULT_GZIP}]")
    parser.add_argument("--qualities", choices=QUALITIES, default="raw",
                        help="the simulator's qualities, or binned as NovaSeq bins them (Q2/12/23/37) [raw]")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("-o", "--output", required=True, nargs="+", metavar="FQ_GZ",
                        help="output FASTQ (gzip); two paths (R1 R2) simulate pairs")
    args = parser.parse_args(argv)
    if len(args.output) > 2 or len(set(args.output)) != len(args.output):
        parser.error("-o takes one path, or two different paths for pairs")
    try:
        parse_gzip(args.gzip)
    except ValueError as exc:
        parser.error(str(exc))
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    t0 = time.perf_counter()

    def log(msg):
        print(f"[real_reads {time.strftime('%H:%M:%S')} +{time.perf_counter() - t0:.1f}s] {msg}",
              file=sys.stderr, flush=True)
    ref = Path(args.reference)
    if ref.name.endswith(".gz"):
        plain = Path(args.output[0]).parent / ref.name[:-3]
        with gzip.open(ref, "rb") as src, open(plain, "wb") as dst:
            shutil.copyfileobj(src, dst, CHUNK)
        ref = plain
    info = simulate(ref, args.output, args.num_reads, args.length, args.seed, simulator=args.simulator,
                    simulator_bin=args.simulator_bin, parts=args.parts, threads=args.threads,
                    fragment_mean=args.fragment_mean, fragment_sd=args.fragment_sd, gzip_spec=args.gzip,
                    sim_args=args.sim_args, qualities=args.qualities, log=log)
    log(f"{info['version']}; part 0: {info['command_part0']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
