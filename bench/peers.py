"""The aligners' command lines, built in one place: index, map and version commands of gpualign
and of its peers bwa mem, minimap2 -ax sr, bowtie2, strobealign, bwa-mem2 and minibwa.

accuracy.py, end_to_end.py (and through it paired.py and real.py) and scaling.py take their
commands from here. Peers write SAM on stdout (the caller pipes it into a sort, or into a file); gpualign writes
the BAM named by ``bam`` itself (coordinate-sorted, with its .bai). ``reads`` is one FASTQ, or a
list of two (R1, R2) for pairs. Every value is shell-quoted.

Index files: bwa's and bowtie2's are ``PREFIX.*``, minimap2's is ``PREFIX.mmi``, gpualign's are
``PREFIX.*``. bowtie2 runs as its binaries (bowtie2-build-s, bowtie2-align-s): the wrapper
scripts' #!/usr/bin/python3 may be missing on the GPU machine.

strobealign writes its index beside the FASTA it is given, one file per read-length class
(``REF.r150.sti``, picked by ``-r``; ``--use-index`` picks the class from the reads' length and
fails if that file is missing). So its index step links the reference as ``PREFIX.fa`` and
indexes that: the index is ``PREFIX.fa.r{class}.sti`` beside the link, and the map step reads
``PREFIX.fa`` (the link) with ``--use-index``. Its index command needs the read length.
bwa-mem2's index is ``PREFIX.*`` (``-p``), minibwa's ``PREFIX.mbw`` and ``PREFIX.l2b`` (its
index takes an output prefix after the FASTA). The three come as single binaries
(../shared/peers/README.md); bwa-mem2's dispatcher needs its ``.avx2``/``.avx512bw`` beside it.
"""
from __future__ import annotations

import shlex
import shutil
import sys
from pathlib import Path

PY = sys.executable
# the peers of the synthetic-genome benchmarks (end_to_end.py's and paired.py's defaults), and all
PEERS_CLASSIC = ("bwa", "minimap2", "bowtie2")
PEERS = PEERS_CLASSIC + ("strobealign", "bwa-mem2", "minibwa")
ALIGNERS = ("gpualign",) + PEERS
# the executable each aligner's commands start with (to check that it is on PATH)
EXECUTABLES = {"gpualign": None, "bwa": "bwa", "minimap2": "minimap2", "bowtie2": "bowtie2-align-s",
               "strobealign": "strobealign", "bwa-mem2": "bwa-mem2", "minibwa": "minibwa"}

INDEX = {
    "gpualign": "{py} -m gpualign index {ref} -p {prefix}{k}",
    "bwa": "bwa index -p {prefix} {ref}",
    "minimap2": "minimap2 -x sr -t {threads} -d {prefix}.mmi {ref}",
    "bowtie2": "bowtie2-build-s --threads {threads} {ref} {prefix}",
    "strobealign": ("ln -sfn {ref_abs} {prefix}.fa && "
                    "strobealign --create-index -t {threads} -r {read_length} {prefix}.fa"),
    "bwa-mem2": "bwa-mem2 index -p {prefix} {ref}",
    "minibwa": "minibwa index -t {threads} {ref} {prefix}",
}
MAP = {
    "gpualign": "{py} -m gpualign map {prefix} {reads} -o {bam} -t {threads} --backend {backend}",
    "bwa": "bwa mem -t {threads} {prefix} {reads}",
    "minimap2": "minimap2 -ax sr -t {threads} {prefix}.mmi {reads}",
    "bowtie2": "bowtie2-align-s --wrapper basic-0 -p {threads} -x {prefix} {bowtie2_reads}",
    "strobealign": "strobealign --use-index -t {threads} {prefix}.fa {reads}",
    "bwa-mem2": "bwa-mem2 mem -t {threads} {prefix} {reads}",
    "minibwa": "minibwa map -t {threads} {prefix} {reads}",
}
VERSION = {
    "gpualign": "{py} -m gpualign --version",
    "bwa": "bwa",                       # bwa prints its version in the usage text, on stderr
    "minimap2": "minimap2 --version",
    "bowtie2": "bowtie2-align-s --version",
    "strobealign": "strobealign --version",
    "bwa-mem2": "bwa-mem2 version",     # v2.3 prints 2.2.1 (its version define was not bumped)
    "minibwa": "minibwa version",
}


def q(value) -> str:
    return shlex.quote(str(value))


def quoted_files(reads) -> str:
    """One read file, or several (R1 R2), shell-quoted and space-separated."""
    files = [reads] if isinstance(reads, (str, Path)) else reads
    return " ".join(q(path) for path in files)


def _aligner(aligner: str, table: dict) -> str:
    if aligner not in table:
        raise ValueError(f"unknown aligner {aligner!r}; known: {', '.join(table)}")
    return table[aligner]


def index_command(aligner: str, ref, prefix, threads: int, k: int | None = None,
                  read_length: int | None = None) -> str:
    """Build the index of ref at prefix (k: gpualign's k-mer length, its default when None;
    read_length: the reads' length, which strobealign's index depends on and needs)."""
    template = _aligner(aligner, INDEX)
    if "{read_length}" in template and not read_length:
        raise ValueError(f"{aligner}'s index needs the read length")
    return template.format(py=q(PY), ref=q(ref), ref_abs=q(Path(ref).resolve()), prefix=q(prefix),
                           threads=threads, k=f" -k {k}" if k else "", read_length=read_length)


def map_command(aligner: str, prefix, reads, threads: int, bam=None, backend: str = "cuda") -> str:
    """Map reads with the index at prefix: SAM on stdout for a peer; gpualign (backend as given)
    writes a sorted, indexed BAM to bam."""
    if aligner == "gpualign" and bam is None:
        raise ValueError("gpualign's map command needs the output BAM")
    files = [reads] if isinstance(reads, (str, Path)) else list(reads)
    bowtie2_reads = f"-U {q(files[0])}" if len(files) == 1 else f"-1 {q(files[0])} -2 {q(files[1])}"
    return _aligner(aligner, MAP).format(py=q(PY), prefix=q(prefix), reads=quoted_files(reads), bam=q(bam),
                                         threads=threads, backend=q(backend), bowtie2_reads=bowtie2_reads)


def version_command(aligner: str) -> str:
    return _aligner(aligner, VERSION).format(py=q(PY))


def missing(aligner: str) -> str | None:
    """The executable an aligner needs that is not on PATH (None when it is there)."""
    exe = _aligner(aligner, EXECUTABLES)
    return exe if exe and shutil.which(exe) is None else None
