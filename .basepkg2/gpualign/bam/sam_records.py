"""SAM text's records: a batch as pysam records (pysam writes the text), built from what the BAM
encoder writes (records.py: record_fields, and the result's MD and NM, md.py), with its tags in the
same order, so SAM text and BAM hold the same records."""

import pysam

from ..encode import BASES, COMPLEMENT, OP_S
from ..extend import TR_END_ROW, TR_NOPS, TR_READ_START
from ..sam import FLAG_REVERSE
from ..tags import comment_fields
from .records import F_FLAG, F_MPOS, F_MQ, F_MRID, F_POS, F_RID, F_TLEN, kernel_args, record_fields


def full_cigar(ops, lens, nops, qs, qe, n):
    """CIGAR tuples with soft clips for read bases outside [qs, qe)."""
    cigar = [(int(o), int(ln)) for o, ln in zip(ops[:nops], lens[:nops])]
    if qs > 0:
        cigar.insert(0, (OP_S, int(qs)))
    if qe < n:
        cigar.append((OP_S, int(n - qe)))
    return cigar


def batch_records(batch, res, genome, header, rg_id):
    """pysam records of a batch, in input order, for SAM text: the fields, MD and NM the BAM
    encoder writes, tags in its order."""
    _, aln, ref, (md, md_off, nm), proper, paired = kernel_args(batch, res, genome)
    row_of, key, mapq, score, sub, ops, lens, trace = aln
    fields = record_fields(aln, ref, proper, paired, 0, len(batch))
    records = []
    for r, f in enumerate(fields):
        s, e = batch.read_off[r], batch.read_off[r + 1]
        row = row_of[r]
        reverse = bool(f[F_FLAG] & FLAG_REVERSE)
        a = pysam.AlignedSegment(header)
        a.query_name = batch.name(r)
        a.flag = int(f[F_FLAG])
        a.reference_id = int(f[F_RID])           # an unmapped read sits at its mapped mate, if any
        a.reference_start = int(f[F_POS])
        a.mapping_quality = int(mapq[r]) if row >= 0 else 0
        if row >= 0:
            t = trace[row]
            a.cigartuples = full_cigar(ops[row], lens[row], int(t[TR_NOPS]), int(t[TR_READ_START]),
                                       int(t[TR_END_ROW]), e - s)
        codes = COMPLEMENT[batch.codes[s:e][::-1]] if reverse else batch.codes[s:e]
        a.query_sequence = BASES[codes].tobytes().decode()
        quals = batch.quals[s:e][::-1] if reverse else batch.quals[s:e]
        a.query_qualities = quals if len(quals) else None
        a.next_reference_id = int(f[F_MRID])
        a.next_reference_start = int(f[F_MPOS])
        a.template_length = int(f[F_TLEN])
        records.append(a)
    for r, (a, f) in enumerate(zip(records, fields)):
        tags = []
        if row_of[r] >= 0:
            row = row_of[r]
            tags += [("NM", int(nm[row])), ("MD", bytes(md[md_off[row]:md_off[row + 1]]).decode()),
                     ("AS", int(score[r]))]
            if sub[r] >= 0:
                tags.append(("XS", int(sub[r])))
        if paired and row_of[r ^ 1] >= 0:   # MC, MQ: none beside an unmapped mate (Picard rejects MC:Z:*)
            tags += [("MC", records[r ^ 1].cigarstring, "Z"), ("MQ", int(f[F_MQ]), "i")]
        if rg_id:
            tags.append(("RG", rg_id))
        a.set_tags(tags)
        if batch.has_comments:   # read with -C: the comments' tags end each record, as in the BAM
            for tag, value, kind in comment_fields(batch, r):
                a.set_tag(tag, value, kind)
    return records


__all__ = ["batch_records", "full_cigar"]
