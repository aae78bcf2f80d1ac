"""Small random genomes and reads for tests, made fresh from a seed."""

import numpy as np

from gpualign.encode import pack_codes, pack_nmask
from gpualign.genome import Genome
from gpualign.reads import encode_reads

COMP = str.maketrans("ACGTN", "TGCAN")


def random_genome(rng, lengths=(3000, 2000), n_runs=1, repeat=300) -> tuple:
    """A Genome of random contigs with a copied segment (a repeat) and runs of N; and its text."""
    seqs = ["".join(rng.choice(list("ACGT"), size=ln)) for ln in lengths]
    if repeat and lengths[0] > 3 * repeat:
        s = seqs[0]
        seqs[0] = s[:2 * repeat] + s[:repeat] + s[3 * repeat:]
    for _ in range(n_runs):
        c = int(rng.integers(len(seqs)))
        p = int(rng.integers(0, len(seqs[c]) - 20))
        seqs[c] = seqs[c][:p] + "N" * 12 + seqs[c][p + 12:]
    return genome_from_text(seqs), seqs


def genome_from_text(seqs) -> Genome:
    codes = np.frombuffer("".join(seqs).encode(), dtype=np.uint8)
    from gpualign.genome import CODE
    codes = CODE[codes]
    lengths = np.array([len(s) for s in seqs], dtype=np.int64)
    offsets = np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int64)
    return Genome(pack_codes(codes), pack_nmask(codes), [f"chr{i + 1}" for i in range(len(seqs))], lengths, offsets)


def mutate(rng, seq, sub=0.02, indel=0.01):
    out, i = [], 0
    while i < len(seq):
        r = rng.random()
        if r < indel / 2:
            i += 1                      # deletion
            continue
        if r < indel:
            out.append("ACGT"[rng.integers(4)])   # insertion
        out.append("ACGT"[rng.integers(4)] if rng.random() < sub else seq[i])
        i += 1
    return "".join(out)


def simulate_reads(rng, seqs, count, length=60, sub=0.02, indel=0.01, n_rate=0.0, k=8):
    """Reads named r{i}:{contig}:{pos1}:{strand}, from random places on both strands."""
    names, reads, quals = [], [], []
    for i in range(count):
        c = int(rng.integers(len(seqs)))
        p = int(rng.integers(0, len(seqs[c]) - length))
        r = mutate(rng, seqs[c][p:p + length], sub, indel)
        if n_rate:
            r = "".join("N" if rng.random() < n_rate else b for b in r)
        strand = "+"
        if rng.random() < 0.5:
            r, strand = r.translate(COMP)[::-1], "-"
        names.append(f"r{i}:chr{c + 1}:{p + 1}:{strand}".encode())
        reads.append(r.encode())
        quals.append(bytes(rng.integers(35, 74, size=len(r)).astype(np.uint8)))
    return encode_reads(names, reads, quals, k), (names, reads, quals)


def simulate_pairs(rng, seqs, count, length=50, insert=(200, 20), sub=0.02, indel=0.005, k=8):
    """Interleaved FR mates of `count` fragments (read 2i = R1, 2i+1 = R2), both named
    f{i}:{contig}:{R1 leftmost 1-based}:{R2 leftmost 1-based}, and the (names, reads, quals) lists."""
    names, reads, quals = [], [], []
    for i in range(count):
        c = int(rng.integers(len(seqs)))
        size = max(length, int(rng.normal(*insert)))
        p = int(rng.integers(0, len(seqs[c]) - size))
        left = mutate(rng, seqs[c][p:p + length], sub, indel)
        right = mutate(rng, seqs[c][p + size - length:p + size], sub, indel).translate(COMP)[::-1]
        mates = (left, right) if rng.random() < 0.5 else (right, left)   # R1 on either strand
        starts = (p + 1, p + size - length + 1) if mates[0] is left else (p + size - length + 1, p + 1)
        name = f"f{i}:chr{c + 1}:{starts[0]}:{starts[1]}".encode()
        for m in mates:
            names.append(name)
            reads.append(m.encode())
            quals.append(bytes(rng.integers(35, 74, size=len(m)).astype(np.uint8)))
    return encode_reads(names, reads, quals, k), (names, reads, quals)


def write_fastq(path, names, reads, quals):
    with open(path, "wb") as fh:
        for n, r, q in zip(names, reads, quals):
            fh.write(b"@" + n + b"\n" + r + b"\n+\n" + q + b"\n")


# ---- BAM records made by pysam, for the writer and index tests --------------------------------

def reg2bin(beg, end):
    """The BAM bin of [beg, end), as the SAM specification (section 5.3) writes it."""
    end -= 1
    for shift, first in ((14, 4681), (17, 585), (20, 73), (23, 9), (26, 1)):
        if beg >> shift == end >> shift:
            return first + (beg >> shift)
    return 0


def random_alignments(rng, header, n, with_reads=None):
    """n pysam AlignedSegments named a{i}, in random order: forward and reverse, secondary ones,
    ties (several records at one position and strand), clips and insertions, skips and deletions
    spanning 16 kbp windows and larger bins, unmapped reads placed at a mate's position and
    unplaced ones. with_reads: the contig ids that get records (default: all)."""
    import pysam
    contigs = list(range(len(header.references))) if with_reads is None else list(with_reads)
    lengths = header.lengths
    hot = []                                               # positions shared by several records
    for _ in range(4):
        c = int(rng.choice(contigs))
        hot.append((c, int(rng.integers(0, lengths[c] - 300))))
    out = []
    for i in range(n):
        seg = pysam.AlignedSegment(header)
        seg.query_name = f"a{i}"
        length = int(rng.integers(20, 151))
        seg.query_sequence = "".join(rng.choice(list("ACGTN"), size=length, p=[0.245] * 4 + [0.02]))
        seg.query_qualities = pysam.qualitystring_to_array("".join(chr(33 + int(q)) for q in rng.integers(2, 41, size=length)))
        kind = rng.random()
        tid = int(rng.choice(contigs))
        if kind < 0.08:                                    # unmapped, no coordinate: last when sorted
            seg.flag = 0x4
            seg.reference_id, seg.reference_start = -1, -1
            seg.bin = reg2bin(-1, 0)
        elif kind < 0.16:                                  # unmapped, placed where its mate maps
            seg.flag = 0x1 | 0x4 | (0x40 if rng.random() < 0.5 else 0x80)
            seg.reference_id = seg.next_reference_id = tid
            seg.reference_start = seg.next_reference_start = int(rng.integers(0, lengths[tid]))
            seg.bin = reg2bin(seg.reference_start, seg.reference_start + 1)
        else:
            cigar = [(0, length)]
            shape = rng.random()
            if shape < 0.25:                               # a skip or deletion: spans windows and bins
                gap = int(rng.choice([100, 20_000, 150_000, 1_200_000]))
                a = int(rng.integers(1, length))
                cigar = [(0, a), (3 if rng.random() < 0.5 else 2, gap), (0, length - a)]
            elif shape < 0.45:                             # a soft clip and an insertion
                a = int(rng.integers(1, length // 3))
                cigar = [(4, a), (0, length - a - 3), (1, 1), (0, 2)]
            span = sum(ln for op, ln in cigar if op in (0, 2, 3, 7, 8))
            if span > lengths[tid]:
                cigar, span = [(0, length)], length
            where = rng.random()
            c, p = hot[int(rng.integers(len(hot)))]
            if where < 0.2 and c == tid and p + span <= lengths[tid]:
                pos = p
            elif where < 0.5 and lengths[tid] > 2 << 14:  # across a 16 kbp window edge, or ending or starting at one
                edge = int(rng.integers(1, lengths[tid] >> 14)) << 14
                pos = edge - int(rng.choice([int(rng.integers(1, span + 1)), span, 0]))
                pos = min(max(0, pos), lengths[tid] - span)
            else:
                pos = int(rng.integers(0, lengths[tid] - span + 1))
            seg.flag = (0x10 if rng.random() < 0.5 else 0) | (0x100 if rng.random() < 0.05 else 0)
            seg.reference_id, seg.reference_start, seg.cigartuples = tid, pos, cigar
            seg.mapping_quality = int(rng.integers(0, 61))
            seg.bin = reg2bin(pos, pos + span)
            seg.set_tag("NM", int(rng.integers(0, 5)))
        out.append(seg)
    return out


def bam_record_bytes(header, segments, tmp_dir):
    """The BAM records of segments as pysam (htslib) encodes them: (uint8 bytes, offsets[n+1])."""
    import gzip
    import os
    import pysam
    path = os.path.join(tmp_dir, "records.tmp.bam")
    with pysam.AlignmentFile(path, "wbu", header=header) as out:
        for seg in segments:
            out.write(seg)
    with open(path, "rb") as fh:
        data = gzip.decompress(fh.read())
    os.remove(path)
    o = 8 + int.from_bytes(data[4:8], "little")              # magic, l_text, text
    n_ref = int.from_bytes(data[o:o + 4], "little")
    o += 4
    for _ in range(n_ref):
        o += 4 + int.from_bytes(data[o:o + 4], "little") + 4
    buf = np.frombuffer(data[o:], dtype=np.uint8)
    offsets = [0]
    while offsets[-1] < len(buf):
        offsets.append(offsets[-1] + 4 + int.from_bytes(buf[offsets[-1]:offsets[-1] + 4].tobytes(), "little"))
    assert len(offsets) == len(segments) + 1 and offsets[-1] == len(buf)
    return buf, np.array(offsets, dtype=np.int64)


def coordinate_keys(segments):
    """samtools sort's order as int64 keys: contig, position, forward before reverse; records
    without a contig last (ties keep input order in a stable sort)."""
    return np.array([(s.reference_id << 33) | (s.reference_start << 1) | int(s.is_reverse)
                     if s.reference_id >= 0 else np.iinfo(np.int64).max for s in segments], dtype=np.int64)


# ---- a BAM of known content, for the QC tests (tests/test_qc_*.py) --------------------------------

QC_READ_LENGTH = 20


def write_known_bam(folder, rng):
    """A sorted, indexed BAM of 20 bp reads whose statistics are known, and its reference FASTA (+ .fai).

    Reads (all 20 bases, quality 30): on chrA, f1 at 100 with a mismatch at its 4th base, r1 at 300 on
    the reverse strand with a mismatch at its first base in the record (the last one sequenced: cycle
    20), i1 at 500 with a 1-base insertion after 5 bases (cycle 6), d1 at 700 with a 1-base deletion
    after 5 (cycle 5), dup at 100 (flag 0x400), and two FR pairs at 1000 and 1500 with inserts of 250
    and 300; on chrB, two reads of MAPQ 0 and one of MAPQ 17; and an unmapped read. Every other read
    has MAPQ 60 and matches the reference. Returns (bam, fasta, records): records as (name, flag,
    contig, start, end) of the mapped reads.
    """
    import pysam
    ref = {"chrA": "".join(rng.choice(list("ACGT"), size=2000)), "chrB": "".join(rng.choice(list("ACGT"), size=1000))}
    fasta = str(folder / "known.fa")
    with open(fasta, "w") as fh:
        for name, seq in ref.items():
            fh.write(f">{name}\n{seq}\n")
    pysam.faidx(fasta)
    header = pysam.AlignmentHeader.from_dict({
        "HD": {"VN": "1.6", "SO": "unsorted"}, "SQ": [{"SN": n, "LN": len(s)} for n, s in ref.items()]})
    n = QC_READ_LENGTH

    def changed(seq, i):   # another base at i
        return seq[:i] + "ACGT"[("ACGT".index(seq[i]) + 1) % 4] + seq[i + 1:]

    def record(name, contig, pos, seq=None, cigar=((0, n),), flag=0, mapq=60, mate=None, tlen=0):
        rec = pysam.AlignedSegment(header)
        rec.query_name, rec.flag = name, flag
        rec.query_sequence = seq or ref[contig][pos:pos + n]
        rec.query_qualities = pysam.qualitystring_to_array("?" * n)
        if flag & 4:
            rec.reference_id, rec.reference_start, rec.mapping_quality = -1, -1, 0
            return rec
        rec.reference_id, rec.reference_start, rec.mapping_quality = header.get_tid(contig), pos, mapq
        rec.cigartuples = list(cigar)
        if mate is not None:
            rec.next_reference_id, rec.next_reference_start, rec.template_length = rec.reference_id, mate, tlen
        return rec

    a = ref["chrA"]
    records = [
        record("f1", "chrA", 100, changed(a[100:100 + n], 3)),
        record("r1", "chrA", 300, changed(a[300:300 + n], 0), flag=16),
        record("i1", "chrA", 500, a[500:505] + "A" + a[505:519], ((0, 5), (1, 1), (0, 14))),
        record("d1", "chrA", 700, a[700:705] + a[706:721], ((0, 5), (2, 1), (0, 15))),
        record("dup", "chrA", 100, flag=0x400),
        record("p1", "chrA", 1000, flag=99, mate=1230, tlen=250),
        record("p1", "chrA", 1230, flag=147, mate=1000, tlen=-250),
        record("p2", "chrA", 1500, flag=99, mate=1780, tlen=300),
        record("p2", "chrA", 1780, flag=147, mate=1500, tlen=-300),
        record("q0a", "chrB", 100, mapq=0),
        record("q0b", "chrB", 200, mapq=0),
        record("q17", "chrB", 300, mapq=17),
        record("u1", "chrA", 0, flag=4),
    ]
    unsorted, bam = str(folder / "known.unsorted.bam"), str(folder / "known.bam")
    with pysam.AlignmentFile(unsorted, "wb", header=header) as out:
        for rec in records:
            out.write(rec)
    pysam.sort("-o", bam, unsorted)
    pysam.index(bam)
    mapped = [(r.query_name, r.flag, r.reference_name, r.reference_start, r.reference_end)
              for r in records if not r.is_unmapped]
    return bam, fasta, mapped


def known_bam_stats(folder, rng):
    """(samtools stats sections, flagstat counts, bam, fasta, mapped records) of write_known_bam's BAM,
    through write_stats as the workflow's stats rule runs it."""
    from gpualign.bam.stats import write_stats
    from gpualign.qc.samtools import parse_flagstat, parse_stats
    bam, fasta, records = write_known_bam(folder, rng)
    out = {name: str(folder / name) for name in ("flagstat", "idxstats", "summary", "stats")}
    write_stats(bam, out["flagstat"], out["idxstats"], out["summary"], samtools_stats_path=out["stats"],
                reference=fasta)
    with open(out["stats"]) as fh:
        sections = parse_stats(fh.read())
    with open(out["flagstat"]) as fh:
        flagstat = parse_flagstat(fh.read())
    return sections, flagstat, bam, fasta, records
