"""What every output builds on, from the SAM specification: the FLAG bits (section 1.4), the read
group given with -R, and the header. A leaf: bam/ imports it, it imports nothing of bam/."""

import pysam

from . import __version__
from .errors import InputError

# FLAG bits (SAM specification, section 1.4); the one definition, for the BAM encoder, SAM text,
# the index and the statistics alike
FLAG_PAIRED, FLAG_PROPER, FLAG_UNMAPPED, FLAG_MATE_UNMAPPED = 0x1, 0x2, 0x4, 0x8
FLAG_REVERSE, FLAG_MATE_REVERSE, FLAG_READ1, FLAG_READ2 = 0x10, 0x20, 0x40, 0x80
FLAG_SECONDARY, FLAG_QC_FAIL, FLAG_DUPLICATE, FLAG_SUPPLEMENTARY = 0x100, 0x200, 0x400, 0x800


def parse_read_group(line: str) -> dict:
    """bwa's -R: an @RG header line ('@RG\\tID:x\\tSM:y', a typed backslash-t or a real tab
    between fields) as an ordered dict of its fields; ID is required, every field is kept."""
    fields = line.replace("\\t", "\t").split("\t")
    if fields[0] != "@RG" or len(fields) < 2:
        raise InputError(f"read group '{line}': must be an @RG header line such as '@RG\\tID:lane1\\tSM:sample'")
    group = {}
    for field in fields[1:]:
        if len(field) < 4 or field[2] != ":" or not field[:2].isalnum() or not field[0].isalpha():
            raise InputError(f"read group '{line}': field {field!r} is not TAG:VALUE")
        tag, value = field[:2], field[3:]
        if tag in group:
            raise InputError(f"read group '{line}': field {tag} given twice")
        if any(c < " " or c > "~" for c in value):
            raise InputError(f"read group '{line}': field {tag} holds a character outside ' '..'~'")
        group[tag] = value
    if "ID" not in group:
        raise InputError(f"read group '{line}': no ID field (e.g. '@RG\\tID:lane1\\tSM:sample')")
    if not group["ID"] or any(c.isspace() for c in group["ID"]):
        raise InputError(f"read group '{line}': ID must be non-empty, without white space")
    return group


def make_header(genome, read_group: dict | None, command_line: str,
                sort_order: str = "unsorted") -> pysam.AlignmentHeader:
    """The header of a run's output: @HD, one @SQ per contig, @PG with the command line, the @RG."""
    header = {
        "HD": {"VN": "1.6", "SO": sort_order},
        "SQ": [{"SN": name, "LN": int(length)} for name, length in zip(genome.names, genome.lengths)],
        "PG": [{"ID": "gpualign", "PN": "gpualign", "VN": __version__, "CL": command_line}],
    }
    if read_group:
        header["RG"] = [read_group]
    return pysam.AlignmentHeader.from_dict(header)


__all__ = ["FLAG_PAIRED", "FLAG_PROPER", "FLAG_UNMAPPED", "FLAG_MATE_UNMAPPED", "FLAG_REVERSE", "FLAG_MATE_REVERSE",
           "FLAG_READ1", "FLAG_READ2", "FLAG_SECONDARY", "FLAG_QC_FAIL", "FLAG_DUPLICATE", "FLAG_SUPPLEMENTARY",
           "parse_read_group", "make_header"]
