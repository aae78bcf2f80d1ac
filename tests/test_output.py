"""`gpualign map -o`: outputs never damage anything, and the format is the one asked for.

Devices are private `mknod` copies of /dev/null inside tmp_path (never the real /dev/null), so the
tests need root for those cases; FIFOs and symlinks need nothing special.
"""

import os
import shutil
import stat
import subprocess
import sys

import pysam
import pytest

from gpualign.cli import main
from gpualign.errors import InputError
from gpualign.output import plan_output

from test_cli import DEMO_FA, DEMO_FQ, count_fastq, run_cli

ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="mknod needs root")


@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    p = str(tmp_path_factory.mktemp("idx") / "lambda")
    assert main(["index", DEMO_FA, "-p", p]) == 0
    return p


def private_null(folder) -> str:
    path = os.path.join(folder, "null")
    os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    return path


def records(path, reference=None):
    with pysam.AlignmentFile(path, reference_filename=reference) as f:
        return [r.to_string() for r in f]


def map_args(prefix, *extra):
    return ["map", prefix, DEMO_FQ, "--backend", "cpu", "-t", "2", *extra]


# ---- where the output goes -------------------------------------------------------------------

@ROOT_ONLY
@pytest.mark.parametrize("fmt", [[], ["-O", "bam"], ["-O", "cram"]])
def test_a_character_device_is_written_in_place_not_replaced(prefix, tmp_path, fmt):
    null = private_null(tmp_path)
    before = os.stat(null)
    assert main(map_args(prefix, "-o", null, *fmt)) == 0
    after = os.lstat(null)
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev and after.st_ino == before.st_ino
    assert sorted(os.listdir(tmp_path)) == ["null"]   # no temporaries, no index beside a device


@pytest.mark.parametrize("fmt, opener", [("sam", "r"), ("bam", "rb")])
def test_a_fifo_reader_gets_every_record(prefix, tmp_path, fmt, opener):
    fifo = str(tmp_path / "out.fifo")
    os.mkfifo(fifo)
    copy = tmp_path / f"copy.{fmt}"
    # the reader is another process, as in use (a thread here would wait on the GIL that
    # htslib holds while its write to the full pipe blocks)
    with open(copy, "wb") as sink:
        reader = subprocess.Popen(["cat", fifo], stdout=sink)
        assert main(map_args(prefix, "-o", fifo, "-O", fmt)) == 0
        assert reader.wait(60) == 0
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    with pysam.AlignmentFile(str(copy), opener) as f:
        names = [r.query_name for r in f]
    assert len(names) == count_fastq(DEMO_FQ) == len(set(names))
    if fmt == "bam":   # sorted, but a FIFO gets no index beside it
        assert not os.path.exists(fifo + ".bai")


def test_a_symlink_is_followed_and_kept(prefix, tmp_path):
    target = tmp_path / "data" / "real.bam"
    target.parent.mkdir()
    link = tmp_path / "link.bam"
    link.symlink_to(target)
    assert main(map_args(prefix, "-o", str(link))) == 0
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert len(records(str(target))) == count_fastq(DEMO_FQ)
    # the index sits beside the name given, where samtools looks for it
    with pysam.AlignmentFile(str(link)) as bam:
        assert bam.check_index() and bam.count(bam.references[0], 0, 1000) > 0


def test_an_existing_regular_file_is_replaced_atomically_and_a_stale_index_removed(prefix, tmp_path):
    out = tmp_path / "out.bam"
    out.write_bytes(b"old")
    assert main(map_args(prefix, "-o", str(out))) == 0
    assert os.path.exists(str(out) + ".bai")
    assert main(map_args(prefix, "-o", str(out), "--unsorted")) == 0   # read order: no index
    assert sorted(os.listdir(tmp_path)) == ["out.bam"]


@pytest.mark.parametrize("case", ["reads", "reads via symlink", "index file", "fasta"])
def test_an_output_that_is_an_input_is_refused_before_any_work(prefix, tmp_path, case):
    reads = tmp_path / "reads.fq.gz"
    shutil.copy(DEMO_FQ, reads)
    before = reads.read_bytes()
    if case == "reads":
        out = str(reads)
    elif case == "reads via symlink":
        out = str(tmp_path / "out.sam")
        os.symlink(reads, out)
    elif case == "index file":
        out = prefix + ".idx.npz"
    else:
        out = prefix + ".fa"
    proc = run_cli("map", prefix, str(reads), "-o", out, "-O", "sam", "--backend", "cpu")
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()]   # one line
    assert "is also an input" in proc.stderr and f"output {out}:" in proc.stderr
    assert "backend" not in proc.stderr   # refused before any work
    assert reads.read_bytes() == before


def test_errors_name_the_path_the_user_gave(prefix, tmp_path):
    folder = tmp_path / "afolder"
    folder.mkdir()
    proc = run_cli("map", prefix, DEMO_FQ, "-o", str(folder))
    assert proc.returncode == 1 and proc.stderr.strip() == f"gpualign: error: output {folder}: is a directory"
    proc = run_cli("map", prefix, DEMO_FQ, "-o", str(tmp_path / "nofolder" / "x.bam"))
    assert proc.returncode == 1 and "no such folder" in proc.stderr and ".tmp" not in proc.stderr


@ROOT_ONLY
def test_an_index_path_that_is_a_device_is_refused(prefix, tmp_path):
    os.mknod(str(tmp_path / "out.bam.bai"), 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    with pytest.raises(InputError, match="exists and is not a regular file"):
        plan_output(str(tmp_path / "out.bam"))


# ---- formats ---------------------------------------------------------------------------------

@pytest.mark.parametrize("name, fmt, sort", [
    ("x.bam", "bam", True), ("x.BAM", "bam", True), ("x.Cram", "cram", True), ("x.sam", "sam", False),
    ("x", "sam", False), ("-", "sam", False), ("/dev/stdout", "sam", False), ("/dev/fd/1", "sam", False),
])
def test_the_format_comes_from_the_name(tmp_path, name, fmt, sort, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = plan_output(name)
    assert (out.fmt, out.sort) == (fmt, sort)
    assert plan_output(name, "cram", unsorted=True).fmt == "cram"
    assert not plan_output(name, "bam", unsorted=True).sort


@pytest.mark.parametrize("name", ["x.sam.gz", "x.bam.tmp", "x.txt", "reads.fq"])
def test_an_unknown_extension_is_one_line_listing_the_accepted_ones(tmp_path, name):
    with pytest.raises(InputError, match=r"\.bam, \.cram or \.sam"):
        plan_output(str(tmp_path / name))
    assert plan_output(str(tmp_path / name), "sam").fmt == "sam"   # -O overrides


def test_cram_decodes_to_the_records_of_the_bam(prefix, tmp_path):
    bam, cram = str(tmp_path / "x.bam"), str(tmp_path / "x.CRAM")
    rg = r"@RG\tID:l1\tSM:s1"
    assert main(map_args(prefix, "-o", bam, "-R", rg)) == 0
    assert main(map_args(prefix, "-o", cram, "-R", rg)) == 0
    assert os.path.exists(cram + ".crai")
    with open(cram, "rb") as fh:
        assert fh.read(4) == b"CRAM"
    expected = [line.split("\t") for line in records(bam)]
    got = [line.split("\t") for line in records(cram, reference=prefix + ".fa")]
    assert got == expected and len(got) == count_fastq(DEMO_FQ)
    # samtools view -T REF (Debian's samtools, where installed) agrees
    if shutil.which("samtools"):
        text = subprocess.run(["samtools", "view", "-T", prefix + ".fa", cram], capture_output=True, text=True,
                              check=True).stdout
        assert text.splitlines() == ["\t".join(x) for x in expected]
    with pysam.AlignmentFile(cram, reference_filename=prefix + ".fa") as f:   # the .crai answers regions
        assert f.count(f.references[0], 10000, 10100) > 0


def test_sam_to_stdout_and_bam_to_stdout(prefix):
    proc = subprocess.run([sys.executable, "-m", "gpualign", *map_args(prefix, "-o", "-", "-O", "bam")],
                          capture_output=True)
    assert proc.returncode == 0 and proc.stdout[:2] == b"\x1f\x8b"
    proc = run_cli(*map_args(prefix))
    assert proc.returncode == 0 and proc.stdout.startswith("@HD")
