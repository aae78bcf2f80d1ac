"""The Reads container (gpualign.reads): batches built from lists (encode_reads), joined
(concatenate), cut (subset) and mates interleaved (interleave), every field carried along."""

import numpy as np

from gpualign.fastq import exact_batches
from gpualign.reads import concatenate, encode_reads, interleave, subset


def test_comments_travel_with_their_reads():
    n = 9
    def batch(tag):
        return encode_reads([b"%s%d" % (tag, i) for i in range(n)], [b"ACGTA"[:i % 5] for i in range(n)],
                            [b"IIIII"[:i % 5] for i in range(n)], 3, [b"%s:%d" % (tag, i) * (i % 3) for i in range(n)])
    a, b = batch(b"a"), batch(b"b")
    comments = lambda r: [r.comment(i) for i in range(len(r))]  # noqa: E731
    assert comments(subset(a, 2, 7)) == comments(a)[2:7]
    assert comments(concatenate([subset(a, 0, 4), subset(b, 4, 9)], 3)) == comments(a)[:4] + comments(b)[4:]
    assert comments(interleave(a, b)) == [c for pair in zip(comments(a), comments(b)) for c in pair]
    assert [comments(x) for x in exact_batches([subset(a, 0, 5), subset(a, 5, 9), b], 4)] == \
        [comments(a)[0:4], comments(a)[4:8], comments(a)[8:] + comments(b)[:3], comments(b)[3:7], comments(b)[7:]]
    # a batch read without comments beside one read with them
    bare = encode_reads([b"x"], [b"ACG"], [b"III"], 3)
    assert comments(concatenate([bare, a], 3)) == [b""] + comments(a)
    assert comments(interleave(subset(a, 0, 1), bare)) == [comments(a)[0], b""]


def test_interleave_alternates_mates():
    a = encode_reads([b"x", b"y"], [b"ACGT", b"GG"], [b"IIII", b"II"], 2)
    b = encode_reads([b"x", b"y"], [b"TTTAA", b"C"], [b"IIIII", b"I"], 2)
    m = interleave(a, b)
    assert [m.name(i) for i in range(4)] == ["x", "x", "y", "y"]
    want = concatenate([subset(a, 0, 1), subset(b, 0, 1), subset(a, 1, 2), subset(b, 1, 2)], 2)
    for field in ("codes", "rc_codes", "quals", "read_off", "packed", "rc_packed", "word_off", "hbin", "rc_hbin",
                  "name_hash", "names", "name_off"):
        assert np.array_equal(getattr(m, field), getattr(want, field)), field
