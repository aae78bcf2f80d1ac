"""Paired-end output as a variant caller and the validators read it: `gpualign map PREFIX R1 R2` on the
bundled demo pairs plus mates that cannot map; flags, mate fields, TLEN, MC/MQ, unmapped mates placed
at their mate; samtools fixmate changes nothing, samtools flagstat and Picard ValidateSamFile agree."""

import gzip
import shutil
import subprocess

import pysam
import pytest

from test_cli import DEMO_FA, prefix, run_cli  # noqa: F401  (prefix: the demo index fixture)
from test_workflow import DEMO_PAIRS

FIELDS = ("flag", "reference_id", "reference_start", "next_reference_id", "next_reference_start", "template_length")
GARBAGE = "TTAGGGTTAGGGCATCATCATGAGAGAGAGTCTCTCTCAAAAACCCCCGGGGGTTTTTACACACACAGTGTGTGTGCGCGCGAT" * 2


def mate_fields(rec):
    tags = tuple(rec.get_tag(t) if rec.has_tag(t) else None for t in ("MC", "MQ"))
    return tuple(getattr(rec, f) for f in FIELDS) + tags


@pytest.fixture(scope="module")
def outputs(prefix, tmp_path_factory):  # noqa: F811
    """The demo pairs, then a pair whose R2 cannot map and a pair neither of whose mates can,
    mapped to a sorted BAM, a read-order BAM and SAM."""
    folder = tmp_path_factory.mktemp("paired")
    files = []
    for m, path in enumerate(DEMO_PAIRS):
        text = gzip.decompress(path.read_bytes()).decode()
        first = text.split("\n")[1]     # R1 / R2 of demo pair 1: R1 maps, so 'lonely' keeps it
        extra = f"@lonely/{m + 1}\n{first if m == 0 else GARBAGE}\n+\n{'I' * len(first if m == 0 else GARBAGE)}\n"
        extra += f"@lost/{m + 1}\n{GARBAGE}\n+\n{'I' * len(GARBAGE)}\n"
        files.append(folder / f"r{m + 1}.fq")
        files[-1].write_text(text + extra)
    out = {}
    for kind, name, extra in (("sorted", "out.bam", []), ("unsorted", "reads.bam", ["--unsorted"]),
                              ("sam", "out.sam", [])):
        out[kind] = folder / name
        proc = run_cli("map", prefix, *map(str, files), "-o", str(out[kind]), "--backend", "cpu", "-t", "2",
                       "-R", r"@RG\tID:pe\tSM:pe\tPL:ILLUMINA", *extra)
        assert proc.returncode == 0, proc.stderr
    out["log"] = proc.stderr
    out["pairs"] = len(text.split("\n")) // 4 + 2
    return out


def records(path):
    with pysam.AlignmentFile(str(path), check_sq=False) as fh:
        return list(fh)


def test_every_mate_once_with_pair_flags(outputs):
    recs = records(outputs["sorted"])
    assert len(recs) == 2 * outputs["pairs"]
    assert all(r.is_paired and not r.is_secondary and not r.is_supplementary for r in recs)
    names = {}
    for r in recs:
        names.setdefault(r.query_name, []).append(r.is_read1)
    assert all(sorted(v) == [False, True] for v in names.values()) and len(names) == outputs["pairs"]
    reads = records(outputs["unsorted"])   # read order: R1 then R2 of each fragment
    assert [r.is_read1 for r in reads] == [True, False] * outputs["pairs"]
    assert all(a.query_name == b.query_name for a, b in zip(reads[0::2], reads[1::2]))


def test_demo_pairs_are_placed_right_and_properly_paired(outputs):
    recs = [r for r in records(outputs["unsorted"]) if r.query_name.startswith("p")]
    right = 0
    for r in recs:
        # p{num}:{contig}:{pos1}:{strand1}:{pos2}:{strand2}, 1-based leftmost of R1 and R2
        _, pos1, _, pos2, _ = r.query_name.rsplit(":", 4)
        truth = int(pos1 if r.is_read1 else pos2) - 1
        clip = r.cigartuples[0][1] if not r.is_unmapped and r.cigartuples[0][0] == 4 else 0
        right += not r.is_unmapped and abs(r.reference_start - clip - truth) <= 5
    assert right >= 0.98 * len(recs)
    proper = [r for r in recs if r.is_proper_pair]
    assert len(proper) >= 0.97 * len(recs)
    tlens = [abs(r.template_length) for r in proper]
    assert 380 <= sum(tlens) / len(tlens) <= 420      # simulated fragments of 400 +/- 40
    by_name = {}
    for r in proper:
        by_name.setdefault(r.query_name, []).append(r)
    for a, b in by_name.values():
        assert a.template_length == -b.template_length != 0
        assert (a.next_reference_start, b.next_reference_start) == (b.reference_start, a.reference_start)
        assert a.is_reverse != b.is_reverse and a.mate_is_reverse == b.is_reverse
        assert a.get_tag("MC") == b.cigarstring and a.get_tag("MQ") == b.mapping_quality
    assert "insert size: mean" in outputs["log"]


def test_unmapped_mates_sit_at_their_mapped_mate(outputs):
    recs = {(r.query_name, r.is_read1): r for r in records(outputs["sorted"])}
    mapped, lonely = recs[("lonely", True)], recs[("lonely", False)]
    assert not mapped.is_unmapped and lonely.is_unmapped
    assert mapped.mate_is_unmapped and not mapped.is_proper_pair and not mapped.has_tag("MC")
    assert (lonely.reference_id, lonely.reference_start) == (mapped.reference_id, mapped.reference_start)
    assert (lonely.next_reference_id, lonely.next_reference_start) == (mapped.reference_id, mapped.reference_start)
    assert (mapped.next_reference_id, mapped.next_reference_start) == (mapped.reference_id, mapped.reference_start)
    assert lonely.template_length == mapped.template_length == 0
    assert lonely.mate_is_reverse == mapped.is_reverse and lonely.get_tag("MC") == mapped.cigarstring
    lost = (recs[("lost", True)], recs[("lost", False)])
    assert [r.flag for r in lost] == [0x1 | 0x4 | 0x8 | 0x40, 0x1 | 0x4 | 0x8 | 0x80]
    assert all(r.reference_id == -1 and r.next_reference_id == -1 for r in lost)
    # the index finds the placed unmapped mate in its mate's region
    with pysam.AlignmentFile(str(outputs["sorted"])) as bam:
        region = bam.fetch(mapped.reference_name, mapped.reference_start, mapped.reference_start + 1)
        assert "lonely" in {r.query_name for r in region if r.is_unmapped}


def test_samtools_fixmate_changes_no_mate_field(outputs, tmp_path):
    """fixmate recomputes flags, mate positions, TLEN, MC and MQ from the mates: ours stand. (It adds
    MC:Z:* beside an unmapped mate, which Picard rejects, so that one tag is left out there.)"""
    fixed = tmp_path / "fixed.bam"
    pysam.fixmate(str(outputs["unsorted"]), str(fixed))
    ours, theirs = records(outputs["unsorted"]), records(fixed)
    assert len(ours) == len(theirs)
    for r in theirs:
        if r.mate_is_unmapped and r.has_tag("MC") and r.get_tag("MC") == "*":
            r.set_tag("MC", None)
    assert [mate_fields(r) for r in ours] == [mate_fields(r) for r in theirs]


def test_samtools_flagstat_counts_what_the_flags_say(outputs):
    text = pysam.flagstat(str(outputs["sorted"]))
    recs = records(outputs["sorted"])
    n = len(recs)
    proper = sum(r.is_proper_pair for r in recs)
    both = sum(not r.is_unmapped and not r.mate_is_unmapped for r in recs)
    assert f"{n} + 0 paired in sequencing" in text
    assert f"{n // 2} + 0 read1" in text and f"{n // 2} + 0 read2" in text
    assert f"{proper} + 0 properly paired" in text
    assert f"{both} + 0 with itself and mate mapped" in text
    assert "1 + 0 singletons" in text


def test_sam_output_has_the_bam_records(outputs):
    assert [r.to_string() for r in records(outputs["sam"])] == [r.to_string() for r in records(outputs["unsorted"])]


@pytest.mark.skipif(shutil.which("PicardCommandLine") is None, reason="Picard (Debian picard-tools) not installed")
def test_picard_validate_sam_file_finds_no_error(outputs, tmp_path):
    """Strict validation, warnings included, with the reference (so NM and MD are checked too)."""
    ref = tmp_path / "lambda.fa"
    shutil.copy(DEMO_FA, ref)
    pysam.faidx(str(ref))
    pysam.dict(str(ref), "-o", str(tmp_path / "lambda.dict"))
    proc = subprocess.run(["PicardCommandLine", "ValidateSamFile", f"I={outputs['sorted']}", f"R={ref}",
                           "MODE=VERBOSE", "IGNORE_WARNINGS=false"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[:3000]
    assert "No errors found" in proc.stdout + proc.stderr
