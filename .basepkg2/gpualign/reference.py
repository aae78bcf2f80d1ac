"""Reference FASTA: parse, validate and mask (stage mask_reference).

Masking makes the genome canonical: upper case, IUPAC ambiguity codes and any other
letter become N. Runs of N are recorded as BED so users can see what cannot be mapped to.
"""


import numpy as np
import pysam

from .errors import InputError
from .seqio import iter_line_blocks
from .atomic import atomic_path

# Letters we accept in a reference; everything that is not A/C/G/T becomes N.
_LETTERS = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz*-"
_NOT_ACGT = bytes(c for c in _LETTERS if chr(c).upper() not in "ACGT")
_TO_MASKED = bytes.maketrans(b"acgt" + _NOT_ACGT, b"ACGT" + b"N" * len(_NOT_ACGT))


def parse_fasta(path: str, block: int = 1 << 24):
    """Yield (name, sequence bytes, header line number) for each contig, validating as we go.

    The file is read in blocks of whole lines (a contig at a time in memory); a block's sequence
    lines between headers are checked and joined by bytes methods at once, and only text with
    anything but letters and line ends (spaces, a CR, a bad character) is gone through line by line,
    which finds the line of an error. A human genome's 52 M lines took a Python step each before."""
    contig = _Contig(path)
    for text, lineno in iter_line_blocks(path, "reference", block):
        pos = 0
        while pos < len(text):
            header = pos if text.startswith(b">", pos) else text.find(b"\n>", pos) + 1 or len(text)
            if header > pos:
                contig.add_lines(text[pos:header], lineno)
                lineno += text.count(b"\n", pos, header)
            if header == len(text):
                break
            end = text.find(b"\n", header) + 1 or len(text)
            finished = contig.start(text[header:end].rstrip(b"\n").removesuffix(b"\r"), lineno)
            if finished:
                yield finished
            pos, lineno = end, lineno + 1
    if contig.name is None:   # nothing but blank lines (a sequence line before any header stopped above)
        raise InputError(f"reference {path}: empty file")
    yield contig.finish()


class _Contig:
    """The contig parse_fasta is reading: its name, header line and sequence pieces."""

    def __init__(self, path):
        self.path, self.name, self.header_line, self.chunks, self.seen = path, None, 0, [], set()

    def start(self, line: bytes, lineno: int):
        """A header line: the contig before it, finished (None for the first)."""
        done = self.finish() if self.name is not None else None
        self.name = _contig_name(self.path, line, lineno, self.seen)
        self.header_line, self.chunks = lineno, []
        return done

    def add_lines(self, text: bytes, lineno: int):
        """Sequence lines (text from line lineno on) of the current contig, or blank lines before any."""
        plain = text.replace(b"\r\n", b"\n") if b"\r" in text else text
        if self.name is not None and not plain.translate(None, _LETTERS + b"\n"):
            self.chunks.append(plain.translate(None, b"\n"))   # letters and line ends only
            return
        for i, line in enumerate(text.split(b"\n")):   # line by line, as they were read
            seq = line.strip()
            if self.name is None:
                if seq:
                    raise InputError(f"reference {self.path} line {lineno + i}: sequence before the first '>' header "
                                     "(not a FASTA file?)")
                continue
            bad = seq.translate(None, _LETTERS)
            if bad:
                raise InputError(f"reference {self.path} line {lineno + i}: invalid character "
                                 f"{bad[:1].decode(errors='replace')!r} in sequence")
            self.chunks.append(seq)

    def finish(self):
        return _finish_contig(self.path, self.name, self.header_line, self.chunks)


def _contig_name(path, line, lineno, seen):
    words = line[1:].split()
    if not words:
        raise InputError(f"reference {path} line {lineno}: header with no contig name")
    name = words[0].decode("ascii", errors="replace")
    if not all(33 <= ord(c) < 127 for c in name) or name[0] in "*=":
        raise InputError(f"reference {path} line {lineno}: contig name {name!r} is not a valid SAM reference name")
    if name in seen:
        raise InputError(f"reference {path} line {lineno}: duplicate contig name {name!r}")
    seen.add(name)
    return name


def _finish_contig(path, name, header_line, chunks):
    seq = b"".join(chunks).translate(_TO_MASKED)
    if not seq:
        raise InputError(f"reference {path} line {header_line}: contig {name!r} has no sequence")
    return name, seq, header_line


def n_runs(seq: bytes):
    """(start, end) of every run of N, 0-based half-open."""
    isn = np.frombuffer(seq, dtype=np.uint8) == ord("N")
    edges = np.flatnonzero(np.diff(np.concatenate(([0], isn.view(np.int8), [0]))))
    return edges.reshape(-1, 2)


def mask_reference(src: str, out_fa: str, out_bed: str, out_contigs: str, line_width: int = 60) -> dict:
    """Write the masked FASTA (+ .fai), the N-run BED and the contig table. Returns a summary."""
    contigs, total, total_n = [], 0, 0
    with atomic_path(out_fa) as fa_tmp, atomic_path(out_bed) as bed_tmp:
        with open(fa_tmp, "wb") as fa, open(bed_tmp, "w") as bed:
            for name, seq, _ in parse_fasta(src):
                fa.write(b">" + name.encode() + b"\n")
                write_folded(fa, seq, line_width)
                for start, end in n_runs(seq):
                    bed.write(f"{name}\t{start}\t{end}\n")
                    total_n += int(end - start)
                contigs.append((name, len(seq), total))
                total += len(seq)
    with atomic_path(out_fa + ".fai") as fai_tmp:
        pysam.faidx(out_fa, "--fai-idx", fai_tmp)
    write_contig_table(out_contigs, contigs)
    return {"contigs": len(contigs), "bases": total, "n_bases": total_n}


def write_folded(fh, seq: bytes, width: int):
    """seq in lines of `width` bases, each ended by a newline (numpy lays the lines out at once)."""
    full = len(seq) // width * width
    lines = np.empty((full // width, width + 1), dtype=np.uint8)
    lines[:, :width] = np.frombuffer(seq, dtype=np.uint8, count=full).reshape(-1, width)
    lines[:, width] = ord("\n")
    fh.write(lines)
    if full < len(seq):
        fh.write(seq[full:] + b"\n")


def write_contig_table(path, contigs):
    with atomic_path(path) as tmp, open(tmp, "w") as fh:
        fh.write("name\tlength\toffset\n")
        for name, length, offset in contigs:
            fh.write(f"{name}\t{length}\t{offset}\n")


def read_contig_table(path):
    """Contig names, lengths and offsets in the concatenated genome."""
    names, lengths, offsets = [], [], []
    with open(path) as fh:
        header = fh.readline().rstrip("\n").split("\t")
        if header != ["name", "length", "offset"]:
            raise InputError(f"contig table {path}: unexpected header {header}")
        for line in fh:
            name, length, offset = line.rstrip("\n").split("\t")
            names.append(name)
            lengths.append(int(length))
            offsets.append(int(offset))
    return names, np.array(lengths, dtype=np.int64), np.array(offsets, dtype=np.int64)


__all__ = ["parse_fasta", "mask_reference", "read_contig_table", "write_contig_table", "n_runs"]
