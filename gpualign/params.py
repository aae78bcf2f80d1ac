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


# What each option means, for `gpualign map --help` (the workflow's schema says the same)
HELP = {
    "max_indels": "band half-width t of the banded alignment: the most net inserted or deleted bases one "
                  f"alignment may carry (0-{MAX_INDELS})",
    "match": "score of a matching base",
    "mismatch": "penalty of a mismatching base (an N in read or reference scores as a mismatch)",
    "gap_open": "gap opening penalty: a gap of length L costs gap-open + L * gap-extend",
    "gap_extend": "gap extension penalty per gap base",
    "clip_penalty": "cost of soft-clipping a read end: a local alignment is taken only when it beats "
                    "end-to-end by more than this per clipped end (as bwa -L)",
    "min_score": "reads whose best alignment scores lower are reported unmapped (as bwa -T)",
    "max_candidates": "candidate loci extended per read",
    "max_hits": "seed hits kept per read, both strands together",
    "max_exact": "exact-match hits stored per read",
    "unpaired_penalty": "paired reads: cost of placing the two mates apart rather than as a proper pair (as bwa -U)",
    "batch_size": "reads mapped per batch: bounds host and GPU memory, never changes results "
                  "(paired reads: whole blocks of 65,536 fragments)",
}
