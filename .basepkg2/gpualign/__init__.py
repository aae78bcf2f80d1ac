"""gpualign: short-read DNA alignment with numba.cuda kernels and a numba CPU fallback.

Modules, in the order the data flows (README.md, "Development", has the table):
encode (layouts shared by all) ; reference (read and mask FASTA) -> genome (2-bit image) -> index (k-mer
bins) ; fastq (parse) -> reads (batch container) -> batches (batches, insert-size blocks) -> seed (exact
match, seeds, candidates) -> extend (banded NW/SW, traceback) -> choose (placement, MAPQ) -> pairing
(insert sizes, rescue, fragments), each stage run by backends/ (cpu, cuda) -> mapper (orchestration)
-> bam/ (records, BGZF, sorted writer, .bai, stats), sam (flags, header) -> cli; qc/ (a finished BAM's
QC files and the report's plots). options holds every option and constant; workflow/ the helpers the
Snakemake rules call.
"""

__version__ = "0.1.0"

from .errors import InputError

__all__ = ["InputError", "__version__"]
