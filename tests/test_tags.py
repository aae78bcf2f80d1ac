"""FASTQ comments as SAM tags (-C): the numba encoder against the naive one, on random comments
(from the seeded `rng`), and the tags appended to real BAM records."""

import gzip

import numpy as np
import pysam
import pytest

from gpualign.bam.bgzf import BamWriter, header_bytes
from gpualign.tags import BAD_TYPE, BAD_VALUE, NOT_TAG, append_tags, comment_tags

from naive import bam_tags_of_comment

PIECES = ["BC:Z:ACGTACGT", "RX:Z:AC GT", "XA:A:q", "XI:i:-2147483648", "XJ:i:2147483647", "XK:i:+12",
          "XH:H:1AE3", "CO:Z:", "OQ:Z:!!##", "Xi:i:0"]
BAD = ["1:N:0:ATCACG", "BC:Z", "B:Z:x", "BC:f:1.5", "XI:i:2147483648", "XI:i:1x", "XH:H:123", "XA:A:ab",
       "XA:A:", "BC:Z:\x01", "BCZ:x", "XB:B:c,1"]


def blob(comments):
    data = [c.encode("latin-1") for c in comments]
    off = np.zeros(len(data) + 1, dtype=np.int64)
    off[1:] = np.cumsum([len(d) for d in data])
    return np.frombuffer(b"".join(data), dtype=np.uint8).copy(), off


def test_good_comments_encode_as_the_naive_reference(rng):
    comments = ["\t".join(rng.choice(PIECES, size=rng.integers(0, 4))) for _ in range(500)]
    status, bad, tags, off = comment_tags(*blob(comments))
    assert status == 0 and bad == -1
    for r, c in enumerate(comments):
        assert bytes(tags[off[r]:off[r + 1]]) == bam_tags_of_comment(c), c


@pytest.mark.parametrize("bad", BAD)
def test_a_comment_that_is_not_tags_is_reported_with_its_read(bad):
    assert bam_tags_of_comment(bad) is None
    status, read, _, _ = comment_tags(*blob(["BC:Z:AC", "XA:A:q\t" + bad, "BC:Z:GG"]))
    assert read == 1 and status in (NOT_TAG, BAD_TYPE, BAD_VALUE)


def test_appended_tags_are_read_back_by_htslib(tmp_path):
    header = pysam.AlignmentHeader.from_dict({"SQ": [{"SN": "c", "LN": 100}]})
    raw = []
    for i in range(3):
        seg = pysam.AlignedSegment(header)
        seg.query_name, seg.query_sequence, seg.flag = f"r{i}", "ACGT", 4
        seg.query_qualities = pysam.qualitystring_to_array("IIII")
        seg.set_tag("RG", "g")
        raw.append(seg)
    # BAM records of the three reads, as bytes, then the comments' tags appended
    path = str(tmp_path / "a.bam")
    with pysam.AlignmentFile(path, "wbu", header=header) as f:
        for seg in raw:
            f.write(seg)
    with open(path, "rb") as fh:
        data = gzip.decompress(fh.read())[len(header_bytes(header)):]
    buf = np.frombuffer(data, dtype=np.uint8).copy()
    offsets = [0]
    while offsets[-1] < len(buf):
        offsets.append(offsets[-1] + 4 + int.from_bytes(bytes(buf[offsets[-1]:offsets[-1] + 4]), "little"))
    comments = ["BC:Z:AAC\tXI:i:-5", "", "XH:H:0AFF\tXA:A:z"]
    _, _, tags, tag_off = comment_tags(*blob(comments))
    out, new_off = append_tags(buf, np.array(offsets, dtype=np.int64), tags, tag_off)
    with BamWriter(str(tmp_path / "b.bam"), header, 1) as w:
        w.write(out)
    with pysam.AlignmentFile(str(tmp_path / "b.bam")) as f:
        got = [r.get_tags(with_value_type=True) for r in f]
    assert got == [[("RG", "g", "Z"), ("BC", "AAC", "Z"), ("XI", -5, "i")], [("RG", "g", "Z")],
                   [("RG", "g", "Z"), ("XH", "0AFF", "H"), ("XA", "z", "A")]]
