"""The shared layouts of encode.py: base codes, 2-bit packing and its lookups, reverse complements,
header bins and name hashes, against plain Python."""


from gpualign import encode
from gpualign.encode import CODE
from gpualign.reads import encode_reads

from helpers import COMP, genome_from_text


def test_genome_word_and_base_lookup_agree_with_codes(rng):
    text = "".join(rng.choice(list("ACGTN"), size=1000, p=[0.24, 0.24, 0.24, 0.24, 0.04]))
    g = genome_from_text([text])
    codes = g.codes()
    assert codes.tolist() == [int(CODE[ord(c)]) for c in text]
    for pos in rng.integers(0, 1000 - 16, size=200):
        w = encode.genome_word(g.packed, int(pos))
        got = [(w >> (2 * i)) & 3 for i in range(16)]
        assert got == [c & 3 for c in codes[pos:pos + 16]]
        assert encode.base_at(g.packed, g.nmask, int(pos)) == codes[pos]
        end = int(pos) + int(rng.integers(0, 50))
        assert encode.any_n(g.nmask, int(pos), min(end, 1000)) == bool((codes[pos:min(end, 1000)] == 4).any())


def test_reads_carry_reverse_complements_packing_and_header_bins(rng):
    """Each read's reverse complement, 2-bit packing and header bin (reverse_complements, pack_reads,
    header_bins, as reads.finish_reads applies them) against plain Python; anything not ACGT, in
    either case, is N."""
    seqs = ["".join(rng.choice(list("ACGTNacgtRY"), size=int(rng.integers(0, 60)))) for _ in range(20)]
    reads = encode_reads([b"read%d" % i for i in range(20)], [s.encode() for s in seqs],
                         [b"I" * len(s) for s in seqs], 5)
    for i, s in enumerate(seqs):
        a, b = reads.read_off[i], reads.read_off[i + 1]
        clean = "".join(c if c in "ACGT" else "N" for c in s.upper())
        assert "".join("ACGTN"[c] for c in reads.rc_codes[a:b]) == clean.translate(COMP)[::-1]
        words = reads.packed[reads.word_off[i]:reads.word_off[i + 1]]
        unpacked = [(int(words[x // 16]) >> (2 * (x % 16))) & 3 for x in range(b - a)]
        assert unpacked == [c & 3 for c in reads.codes[a:b]]
        header = clean[:5]
        want = -1 if len(clean) < 5 or "N" in clean else int("".join(str("ACGT".index(c)) for c in header), 4)
        assert reads.hbin[i] == want


def test_packing_a_contig_at_a_time_gives_the_whole_genomes_words(rng):
    """encode.pack_into (pack_reference, a contig at a time) lays out the words and N mask that
    pack_codes and pack_nmask make of the whole genome at once, at any word alignment of the contigs."""
    import numpy as np
    for _ in range(20):
        contigs = [rng.choice(np.array([0, 1, 2, 3, 4], np.uint8), size=int(rng.integers(0, 90)),
                              p=[.23, .23, .23, .23, .08]) for _ in range(int(rng.integers(1, 6)))]
        whole = np.concatenate(contigs)
        packed = np.zeros((len(whole) + 15) // 16 + 1, np.uint32)
        nmask = np.zeros((len(whole) + 31) // 32 + 1, np.uint32)
        start = 0
        for c in contigs:
            encode.pack_into(c, start, packed, nmask)
            start += len(c)
        assert np.array_equal(packed, encode.pack_codes(whole))
        assert np.array_equal(nmask, encode.pack_nmask(whole))
