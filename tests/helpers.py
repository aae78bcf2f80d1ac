"""Small random genomes and reads for tests, made fresh from a seed."""

import numpy as np

from gpualign.genome import Genome, pack_codes, pack_nmask
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
