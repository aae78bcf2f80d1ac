"""SAM/BAM records: header, CIGAR with soft clips, NM and MD, flags and tags (stage align's output)."""

import numpy as np
import pysam

from . import __version__
from .core import OP_D, OP_I, OP_M, OP_S
from .errors import InputError
from .genome import BASES

FLAG_REVERSE, FLAG_UNMAPPED = 0x10, 0x4


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
    header = {
        "HD": {"VN": "1.6", "SO": sort_order},
        "SQ": [{"SN": name, "LN": int(length)} for name, length in zip(genome.names, genome.lengths)],
        "PG": [{"ID": "gpualign", "PN": "gpualign", "VN": __version__, "CL": command_line}],
    }
    if read_group:
        header["RG"] = [read_group]
    return pysam.AlignmentHeader.from_dict(header)


def full_cigar(ops, lens, nops, qs, qe, n):
    """CIGAR tuples with soft clips for read bases outside [qs, qe)."""
    cigar = [(int(o), int(ln)) for o, ln in zip(ops[:nops], lens[:nops])]
    if qs > 0:
        cigar.insert(0, (OP_S, int(qs)))
    if qe < n:
        cigar.append((OP_S, int(n - qe)))
    return cigar


def md_nm(query: np.ndarray, ref: np.ndarray, cigar) -> tuple:
    """MD string and edit distance of an alignment; query and ref are base codes (4 = N).

    N in the read or the reference counts as a mismatch, as it scores as one.
    """
    md, nm, run, qi, ri = [], 0, 0, 0, 0
    for op, ln in cigar:
        if op == OP_M:
            q, r = query[qi:qi + ln], ref[ri:ri + ln]
            diff = np.flatnonzero((q != r) | (q == 4) | (r == 4))
            prev = 0
            for d in diff:
                md.append(str(run + int(d) - prev))
                md.append(chr(BASES[r[d]]))
                run, prev = 0, int(d) + 1
            run += ln - prev
            nm += len(diff)
            qi += ln
            ri += ln
        elif op == OP_I:
            nm += ln
            qi += ln
        elif op == OP_D:
            md.append(str(run))
            md.append("^" + BASES[ref[ri:ri + ln]].tobytes().decode())
            run = 0
            nm += ln
            ri += ln
        elif op == OP_S:
            qi += ln
    md.append(str(run))
    return "".join(md), nm


def ref_span(cigar) -> int:
    return sum(ln for op, ln in cigar if op in (OP_M, OP_D))


def sequence(codes: np.ndarray) -> str:
    return BASES[codes].tobytes().decode()


def unmapped_record(header, name, codes, quals, rg_id):
    a = pysam.AlignedSegment(header)
    a.query_name = name
    a.flag = FLAG_UNMAPPED
    a.reference_id = -1
    a.reference_start = -1
    a.mapping_quality = 0
    a.query_sequence = sequence(codes)
    a.query_qualities = quals if len(quals) else None
    if rg_id:
        a.set_tag("RG", rg_id)
    return a


def mapped_record(header, name, codes, quals, reverse, rid, pos, mapq, cigar, md, nm, score, sub, rg_id):
    """A primary alignment; codes and quals are already in reference orientation."""
    a = pysam.AlignedSegment(header)
    a.query_name = name
    a.flag = FLAG_REVERSE if reverse else 0
    a.reference_id = rid
    a.reference_start = pos
    a.mapping_quality = mapq
    a.cigartuples = cigar
    a.query_sequence = sequence(codes)
    a.query_qualities = quals
    tags = [("NM", nm), ("MD", md), ("AS", score)]
    if sub is not None:
        tags.append(("XS", sub))
    if rg_id:
        tags.append(("RG", rg_id))
    a.set_tags(tags)
    return a


def set_mate_fields(a, fields, mate):
    """Pair fields of a record from bamio.record_fields' row; mate: the mate's record if it mapped."""
    from .bamio import F_FLAG, F_MPOS, F_MRID, F_POS, F_RID, F_TLEN
    a.flag = int(fields[F_FLAG])
    if a.is_unmapped and fields[F_RID] >= 0:   # placed at its mapped mate
        a.reference_id = int(fields[F_RID])
        a.reference_start = int(fields[F_POS])
    a.next_reference_id = int(fields[F_MRID])
    a.next_reference_start = int(fields[F_MPOS])
    a.template_length = int(fields[F_TLEN])
    # MC and MQ before RG, as the BAM encoder writes them; none beside an unmapped mate (Picard
    # rejects MC:Z:*, which samtools fixmate writes there)
    if mate is None:
        return
    mate_tags = [("MC", mate.cigarstring, "Z"), ("MQ", mate.mapping_quality, "i")]
    tags = [t for t in a.get_tags(with_value_type=True) if t[0] != "RG"]
    a.set_tags(tags + mate_tags + [t for t in a.get_tags(with_value_type=True) if t[0] == "RG"])
