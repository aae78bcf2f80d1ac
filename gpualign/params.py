"""Mapping options in one place, with one clear message per bad value (after minimap2's mapopt)."""

from dataclasses import dataclass, fields

from .errors import InputError

MAX_INDELS = 32  # the CUDA kernels keep a band row of 2t+2 cells in registers/local memory


@dataclass(frozen=True)
class MapParams:
    max_indels: int = 10         # t: band half-width, the most net indel bases an alignment may carry
    match: int = 1
    mismatch: int = 4
    gap_open: int = 6
    gap_extend: int = 1          # a gap of length L costs gap_open + L * gap_extend
    clip_penalty: int = 5        # cost of soft-clipping a read end (local vs end-to-end choice)
    min_score: int = 30          # best alignments scoring lower are reported unmapped
    max_candidates: int = 8      # candidate loci extended per read
    max_hits: int = 1024         # seed hits kept per read (both strands)
    max_exact: int = 16          # exact hits stored per read
    unpaired_penalty: int = 17   # paired reads: cost of placing the two mates apart, not as a proper pair (bwa -U)
    batch_size: int = 200000     # reads per batch; bounds memory, never changes results (paired: whole pairing blocks)

    def check(self):
        """Raise InputError naming the first bad option."""
        problems = []
        if not 0 <= self.max_indels <= MAX_INDELS:
            problems.append(f"max_indels={self.max_indels}: must be between 0 and {MAX_INDELS}")
        for name in ("match", "mismatch", "gap_extend", "max_candidates", "max_hits", "max_exact", "batch_size"):
            if getattr(self, name) < 1:
                problems.append(f"{name}={getattr(self, name)}: must be at least 1")
        for name in ("gap_open", "clip_penalty", "min_score", "unpaired_penalty"):
            if getattr(self, name) < 0:
                problems.append(f"{name}={getattr(self, name)}: must not be negative")
        if problems:
            raise InputError("bad mapping option " + problems[0])
        return self

    @classmethod
    def names(cls):
        return [f.name for f in fields(cls)]
