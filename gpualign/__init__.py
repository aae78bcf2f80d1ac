"""gpualign: short-read DNA alignment with numba.cuda kernels and a numba CPU fallback.

Pipeline modules, in the order the data flows:
reference (read and mask FASTA) -> genome (2-bit pack) -> index (k-mer bins) -> reads (FASTQ encode)
-> core (per-read kernels: exact match, seeds, banded DP) run by cpu / cuda -> mapper (orchestration)
-> sam (BAM records) -> bam (sort, index, stats) -> cli.
"""

__version__ = "0.1.0"

from .errors import InputError

__all__ = ["InputError", "__version__"]
