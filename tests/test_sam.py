"""sam.py: the FLAG bits are the SAM specification's (as htslib numbers them); the header."""

from types import SimpleNamespace

import pysam

from gpualign import sam


def test_flags_are_the_spec_bits():
    assert [sam.FLAG_PAIRED, sam.FLAG_PROPER, sam.FLAG_UNMAPPED, sam.FLAG_MATE_UNMAPPED, sam.FLAG_REVERSE,
            sam.FLAG_MATE_REVERSE, sam.FLAG_READ1, sam.FLAG_READ2, sam.FLAG_SECONDARY, sam.FLAG_QC_FAIL,
            sam.FLAG_DUPLICATE, sam.FLAG_SUPPLEMENTARY] == \
        [pysam.FPAIRED, pysam.FPROPER_PAIR, pysam.FUNMAP, pysam.FMUNMAP, pysam.FREVERSE, pysam.FMREVERSE,
         pysam.FREAD1, pysam.FREAD2, pysam.FSECONDARY, pysam.FQCFAIL, pysam.FDUP, pysam.FSUPPLEMENTARY]


def test_header_lists_contigs_program_and_read_group():
    genome = SimpleNamespace(names=["chrA", "chrB"], lengths=[1000, 500])
    header = sam.make_header(genome, {"ID": "u1", "SM": "s"}, "gpualign map x", sort_order="coordinate")
    d = header.to_dict()
    assert d["HD"] == {"VN": "1.6", "SO": "coordinate"}
    assert d["SQ"] == [{"SN": "chrA", "LN": 1000}, {"SN": "chrB", "LN": 500}]
    assert d["PG"][0]["CL"] == "gpualign map x" and d["RG"] == [{"ID": "u1", "SM": "s"}]
    assert "RG" not in sam.make_header(genome, None, "x").to_dict()
