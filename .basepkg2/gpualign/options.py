"""Options in one place (after minimap2's mapopt): MapParams (the mapping options a user sets),
IndexParams (the index's), and Tuning (the method's constants), each with its defaults written once,
and one clear message per bad value.

Everything here is passed in explicitly, to jitted code too: numba freezes a module global at the
first compile (and caches it on disk), so patching a module constant changes nothing or, worse,
only in a fresh process. Tests and benchmarks set constants through these objects. Only launch
configuration that the host reads at launch time (backends/launch.py) is patched.
"""

from dataclasses import dataclass, field, fields
from typing import NamedTuple

from .errors import InputError

MAX_INDELS = 32  # the CUDA kernels keep a band row of 2t+2 cells in registers/local memory
AUTO_K = "auto"   # k chosen from the genome's size (index.auto_k)
MIN_K, MAX_K = 4, 14  # 4**14 bins of uint32 is 1 GiB; more is not an index for short reads


@dataclass(frozen=True)
class IndexParams:
    k: int | str = "auto"   # k-mer length of the bins and of the read header that looks them up; auto: index.auto_k
    max_occ: int = 500      # bins holding more positions are kept but skipped when seeding (repeats)

    def check(self):
        """Raise InputError naming the first bad option."""
        if self.k != AUTO_K and not (isinstance(self.k, int) and MIN_K <= self.k <= MAX_K):
            raise InputError(f"index k={self.k}: must be between {MIN_K} and {MAX_K}, or {AUTO_K}")
        if self.max_occ < 1:
            raise InputError(f"index max_occ={self.max_occ}: must be at least 1")
        return self


class Tuning(NamedTuple):
    """The method's constants: not options a user sets, but passed in like them (a NamedTuple, so
    jitted code takes it as one argument)."""
    # Reads whose candidate search was cut short (as in high-copy repeats) are seeded again with this
    # many times the hit budget, the candidates and the index's max_occ (seeds in bins up to that
    # size count too): their true locus is often among the clusters left out. 0 hits: no re-seeding.
    reseed_hits: int = 8
    reseed_candidates: int = 4
    reseed_occ: int = 8
    # Candidates with under 1/vote_fraction of the best candidate's seed votes are not extended: a
    # locus that similar to the read shares most of its seeds (at 95% identity, two thirds of 8-mers).
    vote_fraction: int = 4
    # Insert sizes are estimated per block of this many fragments, as bwa does per batch; a fixed
    # block (not the batch) is what keeps the batch size from changing results. A short last block
    # (under half of this) joins the one before it.
    insert_block: int = 1 << 16
    min_fragments: int = 16       # confidently placed FR fragments an estimate needs; fewer: no proper pairs
    confident_mapq: int = 20      # both mates at least this (single-end) to count towards the estimate
    max_fragment: int = 100_000   # longer "fragments" are not pairs (a chimera, a structural variant)
    spread: float = 4.0           # proper pairs lie within mean +/- spread standard deviations ...
    proper_iqr: float = 3.0       # ... or within this many IQRs of the quartiles, whichever is wider (as bwa)
    outlier_iqr: float = 2.0      # estimate from inserts within this many IQRs of the quartiles (after bwa)
    rescue_per_read: int = 4      # placements of a mate whose partner is searched for around them


TUNING = Tuning()


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
    tuning: Tuning = field(default=TUNING, compare=True)   # not a command-line option

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
        """The user's mapping options (the command line's and the workflow's)."""
        return [f.name for f in fields(cls) if f.name != "tuning"]


# Duplicate marking (bam/markdup.py): optical duplicates are counted among pairs whose reads lie within this
# many pixels of each other on one tile (their names give tile, x, y); 0: not looked for. Picard's
# OPTICAL_DUPLICATE_PIXEL_DISTANCE is 100 (2500 is advised for patterned flow cells: HiSeq X, NovaSeq).
OPTICAL_DISTANCE = 0
OPTICAL_HELP = ("with --markdup: count optical duplicates, pairs whose Illumina read names (tile:x:y in the last "
                "three ':' fields) lie within N pixels on one tile, as Picard's OPTICAL_DUPLICATE_PIXEL_DISTANCE "
                "(100; 2500 for patterned flow cells); they are flagged as any duplicate, counted apart in the "
                f"metrics [{OPTICAL_DISTANCE}: off]")


def check_optical_distance(distance: int) -> int:
    """The optical pixel distance, or InputError naming the bad value."""
    if not isinstance(distance, int) or isinstance(distance, bool) or distance < 0:
        raise InputError(f"optical duplicate pixel distance {distance!r}: must be a whole number, 0 or more")
    return distance


# What each index option means, for `gpualign index --help` (the workflow's schema says the same)
INDEX_HELP = {
    "k": "k-mer length of the hash bins, also the read header length used to look them up; auto picks the "
         "smallest k from 8 to 14 whose 4^k k-mers outnumber the genome's bases (8 for a phage, 12 for E. coli, "
         "13 for a human chromosome, 14 for a human genome), and the log says which",
    "max_occ": "bins with more genome positions are kept but skipped when seeding (repeats)",
}

# What each mapping option means, for `gpualign map --help` (the workflow's schema says the same)
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
