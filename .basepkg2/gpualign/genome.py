"""The 2-bit genome image (stage pack_reference).

Files, built here and read by every later stage (the packing itself is encode.py's):
- `{prefix}.2bit.npy`: the concatenated genome, 2-bit packed (encode.pack_codes; N is stored as A and
  flagged below).
- `{prefix}.nmask.npy`: uint32 words, one bit a base (bit i % 32 of word i // 32), set where the base is N.
- contigs are concatenated in FASTA order; their names, lengths and offsets are in `{prefix}.contigs.tsv`.
"""

import os
from dataclasses import dataclass, field

import numpy as np

from .atomic import atomic_path
from .encode import CODE, pack_into
from .errors import InputError
from .reference import parse_fasta, read_contig_table, write_contig_table

@dataclass
class Genome:
    packed: np.ndarray      # uint32, 16 bases a word
    nmask: np.ndarray       # uint32, 1 bit a base
    names: list
    lengths: np.ndarray     # int64
    offsets: np.ndarray     # int64, start of each contig in the concatenation
    ends: np.ndarray = field(init=False)   # one array for the run: the GPU backend uploads it once

    def __post_init__(self):
        self.ends = self.offsets + self.lengths

    @property
    def size(self) -> int:
        return int(self.lengths.sum()) if len(self.lengths) else 0

    def codes(self, start: int = 0, end: int | None = None) -> np.ndarray:
        """Base codes 0-4 of [start, end) of the concatenated genome (for tests and reporting)."""
        end = self.size if end is None else end
        pos = np.arange(start, end, dtype=np.int64)
        base = (self.packed[pos >> 4] >> ((pos & 15) * 2).astype(np.uint32)) & 3
        isn = (self.nmask[pos >> 5] >> (pos & 31).astype(np.uint32)) & 1
        return np.where(isn == 1, 4, base).astype(np.uint8)


def contig_lengths(masked_fa: str) -> list:
    """(name, length) of each contig, from the FASTA's .fai where mask_reference wrote one, else read."""
    fai = masked_fa + ".fai"
    if os.path.exists(fai) and os.path.getmtime(fai) >= os.path.getmtime(masked_fa):
        with open(fai) as fh:
            return [(row[0], int(row[1])) for row in (line.split("\t") for line in fh if line.strip())]
    return [(name, len(seq)) for name, seq, _ in parse_fasta(masked_fa)]


def pack_reference(masked_fa: str, out_2bit: str, out_nmask: str, out_contigs: str | None = None) -> Genome:
    """Pack a masked FASTA into the genome image, a contig at a time into words allocated once for the
    whole genome (a human genome: 1.2 GB of image, one contig's bytes and codes besides)."""
    lengths = contig_lengths(masked_fa)
    size = sum(n for _, n in lengths)
    packed = np.zeros((size + 15) // 16 + 1, dtype=np.uint32)   # one spare zero word, as pack_codes
    nmask = np.zeros((size + 31) // 32 + 1, dtype=np.uint32)
    contigs, offset = [], 0
    for (name, seq, _), (fai_name, n) in zip(parse_fasta(masked_fa), lengths):
        if (name, len(seq)) != (fai_name, n):
            raise InputError(f"{masked_fa}.fai: contig {fai_name} of {n} bp, but the FASTA has {name} of {len(seq)} bp")
        pack_into(CODE[np.frombuffer(seq, dtype=np.uint8)], offset, packed, nmask)
        contigs.append((name, len(seq), offset))
        offset += len(seq)
    if offset != size:
        raise InputError(f"{masked_fa}: {offset} bp, but its .fai says {size}")
    genome = Genome(packed, nmask, [c[0] for c in contigs], np.array([c[1] for c in contigs], dtype=np.int64),
                    np.array([c[2] for c in contigs], dtype=np.int64))
    with atomic_path(out_2bit) as tmp:
        np.save(tmp, genome.packed)
    with atomic_path(out_nmask) as tmp:
        np.save(tmp, genome.nmask)
    if out_contigs:
        write_contig_table(out_contigs, contigs)
    return genome


def load_genome(path_2bit: str, path_nmask: str, path_contigs: str) -> Genome:
    names, lengths, offsets = read_contig_table(path_contigs)
    packed = np.load(path_2bit, mmap_mode="r")
    nmask = np.load(path_nmask, mmap_mode="r")
    return Genome(np.ascontiguousarray(packed), np.ascontiguousarray(nmask), names, lengths, offsets)
