"""CRAM output: the BAM that gpualign writes, re-encoded by htslib (through pysam) against the
reference FASTA the reads were aligned to (the index's masked FASTA), then indexed (.crai).

CRAM stores reads as differences from the reference, so it must be decoded with the same
sequence: the index's FASTA is that sequence (IUPAC codes already N), and htslib writes each
@SQ's M5 checksum so a reader can verify it. The BAM is an intermediate file in the output's
folder (or the system's temporary folder for a stream output), removed at the end.
"""

import contextlib
import os
import shutil
import tempfile

import pysam

from .errors import InputError
from .output import scratch_dir


def check_reference(fasta: str | None):
    if not fasta or not os.path.exists(fasta):
        raise InputError(f"CRAM output needs the reference FASTA the index was built from; {fasta or 'it'} "
                         "is missing (rebuild the index with `gpualign index`, or write .bam)")
    if not os.path.exists(fasta + ".fai"):
        pysam.faidx(fasta)


@contextlib.contextmanager
def via_bam(out_path: str, fasta: str | None, threads: int, index_path: str | None):
    """The path of a BAM to write (with no index of its own); on success it becomes CRAM at
    out_path (and its .crai at index_path)."""
    check_reference(fasta)
    work = tempfile.mkdtemp(prefix=".gpualign-cram-", dir=scratch_dir(out_path))
    try:
        bam = os.path.join(work, "records.bam")
        yield bam
        # MD and NM stored as written (htslib would drop and regenerate them, at the record's end),
        # so the CRAM decodes to exactly the BAM's records
        args = ["-C", "-T", fasta, "-@", str(max(1, threads)), "--output-fmt-option", "store_md=1",
                "--output-fmt-option", "store_nm=1", "-o", out_path, bam]
        # samtools' own stdout must not be captured by pysam when the CRAM goes to stdout
        pysam.view(*args, catch_stdout=False)
        if index_path:
            pysam.index(out_path, index_path)
    except pysam.SamtoolsError as err:
        raise InputError(f"CRAM output {out_path}: {' '.join(str(err).split())[:300]}") from None
    finally:
        shutil.rmtree(work, ignore_errors=True)


__all__ = ["via_bam", "check_reference"]
