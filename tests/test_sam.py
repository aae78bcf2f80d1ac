import numpy as np

from gpualign.core import OP_D, OP_I, OP_M, OP_S
from gpualign.sam import full_cigar, md_nm


def codes(s):
    return np.array(["ACGTN".index(c) for c in s], dtype=np.uint8)


def test_md_and_nm_follow_the_sam_spec():
    # 2M1D5M of read ACGTTAN on reference ACAGTCAG: deletion of A, T/C mismatch, N/G mismatch
    md, nm = md_nm(codes("ACGTTAN"), codes("ACAGTCAG"), [(OP_M, 2), (OP_D, 1), (OP_M, 5)])
    assert (md, nm) == ("2^A2C1G0", 3)
    # a mismatch right after a deletion needs a 0 between them
    md, nm = md_nm(codes("ACTT"), codes("ACGAT"), [(OP_M, 2), (OP_D, 1), (OP_M, 2)])
    assert (md, nm) == ("2^G0A1", 2)


def test_md_nm_with_insertion_and_clips():
    query = codes("TTACGAAGT")
    ref = codes("ACGGT")
    cigar = [(OP_S, 2), (OP_M, 3), (OP_I, 2), (OP_M, 2)]
    md, nm = md_nm(query, ref, cigar)
    assert (md, nm) == ("5", 2)


def test_full_cigar_adds_soft_clips():
    ops = np.array([OP_M, OP_I, OP_M], dtype=np.uint8)
    lens = np.array([5, 1, 3], dtype=np.int32)
    assert full_cigar(ops, lens, 3, 2, 11, 14) == [(OP_S, 2), (OP_M, 5), (OP_I, 1), (OP_M, 3), (OP_S, 3)]
    assert full_cigar(ops, lens, 1, 0, 5, 5) == [(OP_M, 5)]
