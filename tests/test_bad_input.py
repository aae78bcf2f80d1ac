"""The bad-input matrix, through the CLI and through the workflow: every input is either accepted
with a defined result (reads in = primary records out) or rejected with one line naming the file,
the line and the problem, a non-zero exit, no traceback and no output file.

README.md ("What input is accepted") lists the same cases.
"""

import gzip
import os
import re
import shutil
import subprocess
from pathlib import Path

import pysam
import pytest

from gpualign.reads import MAX_READ_LEN
from test_cli import DEMO_FA, DEMO_FQ, prefix, run_cli  # noqa: F401  (prefix: the demo index fixture)
from test_workflow import make_workdir, numba_cache, run_snakemake  # noqa: F401

GOOD = "".join(f"@g{i}\nACGTACGTTGCAACGTAGCTAGGATCCATGCAAGT\n+\n{'I' * 35}\n" for i in range(3))
REF = Path(DEMO_FA).read_text().split("\n", 1)[1].replace("\n", "")   # lambda, for reads that map

# name -> (file content (bytes), file suffix, None if accepted else the error's pattern)
FASTQ_CASES = {
    "truncated": ((GOOD + "@t\nACGT\n+\n").encode(), ".fq", r"line 13: truncated FASTQ record"),
    "lengths_differ": ((GOOD + "@t\nACGT\n+\nIII\n").encode(), ".fq",
                       r"line 13: sequence and quality lengths differ \(4 vs 3\)"),
    "plus_missing": ((GOOD + "@t\nACGT\nIIII\n@u\nACGT\n+\nIIII\n").encode(), ".fq",
                     r"line 15: expected a '\+' line"),
    "bad_base": ((GOOD + "@t\nACXT\n+\nIIII\n").encode(), ".fq", r"line 14: invalid base 'X'"),
    "bad_quality": ((GOOD + "@t\nACGT\n+\nII I\n").encode(), ".fq", r"line 16: quality character outside"),
    "not_fastq": (b">chr1\nACGT\n>chr2\nACGT\n", ".fq", r"line 1: expected a '@name' header"),
    "empty": (b"", ".fq", r"empty file"),
    "empty_gzip": (gzip.compress(b""), ".fq.gz", r"empty file"),
    "corrupt_gzip": (gzip.compress(GOOD.encode() * 50)[:-30], ".fq.gz", r"corrupt or truncated gzip"),
    "too_long": ((GOOD + f"@t\n{'A' * (MAX_READ_LEN + 1)}\n+\n{'I' * (MAX_READ_LEN + 1)}\n").encode(), ".fq",
                 rf"line 13: read of {MAX_READ_LEN + 1} bases is longer than the {MAX_READ_LEN} supported"),
    # accepted: defined results
    "lowercase": (f"@l\n{REF[1000:1100].lower()}\n+\n{'I' * 100}\n".encode() + GOOD.encode(), ".fq", None),
    "crlf": (GOOD.replace("\n", "\r\n").encode(), ".fq", None),
    "shorter_than_k": ((GOOD + "@s\nACG\n+\nIII\n@z\n\n+\n\n").encode(), ".fq.gz", None),
    "all_n": ((GOOD + f"@n\n{'N' * 50}\n+\n{'I' * 50}\n").encode(), ".fq", None),
    "iupac": ((GOOD + "@i\nACGTRYKMSWBDHVN\n+\nIIIIIIIIIIIIIII\n").encode(), ".fq", None),
    "no_final_newline": (GOOD.encode()[:-1], ".fq", None),
}


def write_case(folder, name):
    content, suffix, _ = FASTQ_CASES[name]
    path = folder / f"{name}{suffix}"
    # .fq.gz cases hold gzip bytes already where the case is about gzip itself
    path.write_bytes(content if name in ("empty_gzip", "corrupt_gzip") or not suffix.endswith(".gz")
                     else gzip.compress(content))
    return path


def records_in(name) -> int:
    content, _, _ = FASTQ_CASES[name]
    return content.replace(b"\r\n", b"\n").rstrip(b"\n").count(b"\n") // 4 + 1


def primary_records(bam) -> list:
    with pysam.AlignmentFile(str(bam), check_sq=False) as fh:
        return [r for r in fh if not r.is_secondary and not r.is_supplementary]


def assert_one_line_error(text, path, pattern):
    # progress lines ("[gpualign map] ...") may come first on a slow machine; the error is one line
    lines = [line for line in text.strip().splitlines() if line.strip() and not line.startswith("[gpualign ")]
    assert len(lines) == 1, text
    assert "Traceback" not in text and str(path) in lines[0] and re.search(pattern, lines[0]), text


@pytest.mark.parametrize("name", FASTQ_CASES)
def test_fastq_case_through_the_cli(prefix, tmp_path, name):  # noqa: F811
    path = write_case(tmp_path, name)
    out = tmp_path / "out.bam"
    proc = run_cli("map", prefix, str(path), "-o", str(out), "--backend", "cpu")
    error = FASTQ_CASES[name][2]
    if error:
        assert proc.returncode == 1
        assert_one_line_error(proc.stderr, path, error)
        assert sorted(os.listdir(tmp_path)) == [path.name], "no output, no temporary left"
        return
    assert proc.returncode == 0, proc.stderr
    primary = primary_records(out)
    assert len(primary) == records_in(name) == len({r.query_name for r in primary})
    if name == "lowercase":   # lowercase bases are read as uppercase and map
        assert not primary[[r.query_name for r in primary].index("l")].is_unmapped
    if name in ("shorter_than_k", "all_n"):   # too short or all N: unmapped, never dropped
        assert {r.query_name for r in primary if r.is_unmapped} >= ({"s", "z"} if name == "shorter_than_k" else {"n"})


def test_fastq_matrix_through_the_workflow(tmp_path, numba_cache):  # noqa: F811
    workdir = make_workdir(tmp_path / "run")
    reads = workdir / "reads"
    reads.mkdir()
    sheet = "sample\tfq1\n" + "".join(f"{name}\t{write_case(reads, name)}\n" for name in FASTQ_CASES)
    (workdir / "samples.tsv").write_text(sheet)
    result = run_snakemake(workdir, "--cores", "2", "--keep-going", numba_cache=numba_cache, check=False)
    assert result.returncode != 0   # some samples are rejected
    for name, (_, suffix, error) in FASTQ_CASES.items():
        bam = workdir / "results" / "units" / name / "1.bam"   # the sheet has no unit column: unit 1
        log = (workdir / "logs" / "align" / f"{name}.1.log").read_text()
        if error:
            assert not bam.exists() and not bam.with_suffix(".bam.bai").exists()
            assert not (workdir / "results" / "bam" / f"{name}.bam").exists()
            errors = [line for line in log.splitlines() if line.startswith("error: ")]
            assert len(errors) == 1 and "Traceback" not in log, log
            assert re.search(error, errors[0]) and f"{name}{suffix}" in errors[0], errors
            assert f"align: error: reads {reads / name}{suffix}" in result.output
        else:
            assert len(primary_records(bam)) == records_in(name), name
            summary = (workdir / "results" / "stats" / f"{name}.summary.tsv").read_text().splitlines()
            assert dict(zip(*(line.split("\t") for line in summary)))["primary"] == str(records_in(name))


# name -> (FASTA text, error pattern or None)
FASTA_CASES = {
    "empty": ("", r"empty file"),
    # the workflow's download stage checks the first line before the FASTA is parsed
    "no_header": ("ACGT\nACGT\n", r"line 1: sequence before the first '>'|not a FASTA file \(first line does not"),
    "empty_contig": (">a\nACGTACGTAC\n>b\n>c\nACGTACGTAC\n", r"line 3: contig 'b' has no sequence"),
    "duplicate_names": (">a\nACGTACGTAC\n>a\nACGTACGTAC\n", r"line 3: duplicate contig name 'a'"),
    "bad_character": (">a\nACGT1CGT\n", r"line 2: invalid character '1'"),
    "no_name": (">\nACGTACGTAC\n", r"line 1: header with no contig name"),
    "short_contig": (">a\n" + REF[:5000] + "\n>tiny\nACG\n", None),   # shorter than k: kept, no k-mers
}


@pytest.mark.parametrize("name", FASTA_CASES)
def test_fasta_case_through_the_cli(tmp_path, name):
    text, error = FASTA_CASES[name]
    path = tmp_path / f"{name}.fa"
    path.write_text(text)
    proc = run_cli("index", str(path), "-p", str(tmp_path / "idx" / "ref"), "-k", "8")
    if error:
        assert proc.returncode == 1
        assert_one_line_error(proc.stderr, path, error)
        assert not (tmp_path / "idx").exists() or os.listdir(tmp_path / "idx") == []
    else:
        assert proc.returncode == 0, proc.stderr
        contigs = (tmp_path / "idx" / "ref.contigs.tsv").read_text()
        assert "tiny\t3" in contigs


@pytest.mark.parametrize("name", [*FASTA_CASES, "corrupt_gzip"])
def test_fasta_case_through_the_workflow(tmp_path, numba_cache, name):  # noqa: F811
    workdir = make_workdir(tmp_path / "run")
    if name == "corrupt_gzip":
        path, error = workdir / "ref.fa.gz", r"corrupt (or truncated )?gzip"
        path.write_bytes(gzip.compress(Path(DEMO_FA).read_bytes())[:-40])
    else:
        text, error = FASTA_CASES[name]
        path = workdir / "ref.fa"
        path.write_text(text)
    result = run_snakemake(workdir, "--cores", "2", "--config", f"reference={{url: {path}, name: bad}}",
                           numba_cache=numba_cache, check=False)
    assert "Traceback" not in result.output
    if error is None:   # accepted: the demo reads map, every one of them in the BAM
        assert result.returncode == 0, result.output[-3000:]
        n = len(primary_records(workdir / "results" / "bam" / "demo.bam"))
        assert n == sum(1 for _ in gzip.open(workdir / "resources" / "demo" / "reads.fq.gz")) // 4
        assert "tiny\t3" in (workdir / "resources" / "reference" / "bad.contigs.tsv").read_text()
        return
    assert result.returncode != 0
    assert re.search(error, result.output) and str(path) in result.output, result.output[-3000:]
    # at most the downloaded copy of the source itself; nothing from the stage that rejected it
    assert {p.name for p in (workdir / "resources" / "reference").glob("bad.*")} <= {"bad.fa.gz"}
    shutil.rmtree(workdir)


@pytest.fixture
def full_disk(tmp_path):
    """A 64 KiB tmpfs: too small for the demo's BAM (about 220 KB; the sorted sink may hold every record
    in memory, so its run file need not reach the disk first). Needs root and mount; skipped otherwise."""
    mount = tmp_path / "full"
    mount.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)


def test_full_disk_is_one_line_and_leaves_nothing_through_the_cli(prefix, full_disk):  # noqa: F811
    out = full_disk / "out.bam"
    proc = run_cli("map", prefix, DEMO_FQ, "-o", str(out), "--backend", "cpu")
    assert proc.returncode == 1
    assert_one_line_error(proc.stderr, out, r"No space left on device")
    assert os.listdir(full_disk) == []


def test_full_disk_is_one_line_and_leaves_nothing_through_the_workflow(tmp_path, numba_cache, full_disk):  # noqa: F811
    workdir = make_workdir(tmp_path / "run")
    (workdir / "results").symlink_to(full_disk)
    result = run_snakemake(workdir, "--cores", "2", numba_cache=numba_cache, check=False)
    assert result.returncode != 0
    log = (workdir / "logs" / "align" / "demo.1.log").read_text()
    errors = [line for line in log.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "No space left on device" in errors[0] and "Traceback" not in log, log
    assert "align: error: results/units/demo/1.bam: No space left on device" in result.output
    for folder in (full_disk / "bam", full_disk / "units" / "demo"):   # nothing half-written
        assert not folder.exists() or list(folder.iterdir()) == []


# ---- paired files: the mates must pair up --------------------------------------------------------

def mates(names, seq="ACGTACGTTGCAACGTAGCTAGGATCCATGCAAGT"):
    return "".join(f"@{n}\n{seq}\n+\n{'I' * len(seq)}\n" for n in names)


# name -> (R1 text, R2 text, the file the error names (1 or 2) and its pattern; None if accepted)
PAIRED_CASES = {
    "r2_shorter": (mates(["a", "b", "c"]), mates(["a", "b"]), (2, r"has fewer records than .*: it ends after record 2")),
    "r2_longer": (mates(["a", "b"]), mates(["a", "b", "c"]), (2, r"has more records than")),
    "names_differ": (mates(["a", "b", "c"]), mates(["a", "x", "c"]),
                     (1, r"record 2 \(line 5\) is 'b' in one and 'x' in the other")),
    "bad_base_in_r2": (mates(["a", "b"]), mates(["a"]) + "@b\nACXT\n+\nIIII\n", (2, r"line 6: invalid base 'X'")),
    "suffixes_and_lengths": (mates(["a/1", "b/1"]), mates(["a/2", "b/2"], seq="TTGACCA"), None),
}


def write_pair(folder, name):
    r1, r2, _ = PAIRED_CASES[name]
    paths = (folder / f"{name}_1.fq", folder / f"{name}_2.fq")
    paths[0].write_text(r1)
    paths[1].write_text(r2)
    return paths


@pytest.mark.parametrize("name", PAIRED_CASES)
def test_paired_case_through_the_cli(prefix, tmp_path, name):  # noqa: F811
    paths = write_pair(tmp_path, name)
    out = tmp_path / "out.bam"
    proc = run_cli("map", prefix, *map(str, paths), "-o", str(out), "--backend", "cpu")
    error = PAIRED_CASES[name][2]
    if error:
        assert proc.returncode == 1
        assert_one_line_error(proc.stderr, paths[error[0] - 1], error[1])
        assert sorted(os.listdir(tmp_path)) == sorted(p.name for p in paths), "no output, no temporary left"
        return
    assert proc.returncode == 0, proc.stderr
    primary = primary_records(out)
    assert len(primary) == 4 and sorted((r.query_name, r.is_read1) for r in primary) == \
        [("a", False), ("a", True), ("b", False), ("b", True)]


def test_paired_cases_through_the_workflow(tmp_path, numba_cache):  # noqa: F811
    workdir = make_workdir(tmp_path / "run")
    reads = workdir / "reads"
    reads.mkdir()
    sheet = "sample\tfq1\tfq2\n" + "".join(f"{name}\t" + "\t".join(map(str, write_pair(reads, name))) + "\n"
                                            for name in PAIRED_CASES)
    (workdir / "samples.tsv").write_text(sheet)
    result = run_snakemake(workdir, "--cores", "2", "--keep-going", numba_cache=numba_cache, check=False)
    assert result.returncode != 0
    for name, (_, _, error) in PAIRED_CASES.items():
        bam = workdir / "results" / "bam" / f"{name}.bam"
        log = (workdir / "logs" / "align" / f"{name}.1.log").read_text()
        if error:
            assert not bam.exists() and not (workdir / "results" / "units" / name / "1.bam").exists()
            errors = [line for line in log.splitlines() if line.startswith("error: ")]
            assert len(errors) == 1 and "Traceback" not in log, log
            assert re.search(error[1], errors[0]) and f"{name}_{error[0]}.fq" in errors[0], errors
        else:
            assert len(primary_records(bam)) == 4
