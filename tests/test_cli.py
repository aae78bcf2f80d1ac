"""The command line as a user runs it: index, map to BAM and to SAM on stdout, one-line errors."""

import gzip
import shlex
import os
import shutil
import subprocess
import sys
import threading

import pysam
import pytest

import gpualign
from gpualign.bam import bgzf

from gpualign import trace
from gpualign.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEMO_FA = os.path.join(ROOT, "resources", "demo", "lambda.fa")
DEMO_FQ = os.path.join(ROOT, "resources", "demo", "reads.fq.gz")


def count_fastq(path):
    with gzip.open(path, "rt") as fh:
        return sum(1 for _ in fh) // 4


def run_cli(*args):
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0")
    return subprocess.run([sys.executable, "-m", "gpualign", *args], capture_output=True, text=True, env=env)


@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    p = str(tmp_path_factory.mktemp("idx") / "lambda")
    assert main(["index", DEMO_FA, "-p", p, "-k", "8"]) == 0
    return p


def test_map_to_bam_keeps_every_read_once(prefix, tmp_path):
    out = str(tmp_path / "out.bam")
    assert main(["map", prefix, DEMO_FQ, "-o", out, "-t", "2", "-R", r"@RG\tID:demo\tSM:NA1\tLB:lib\tPU:u1\tCN:c", "--backend", "cpu"]) == 0
    with pysam.AlignmentFile(out) as bam:
        header = bam.header.to_dict()
        records = list(bam)
    primary = [r for r in records if not r.is_secondary and not r.is_supplementary]
    assert len(primary) == count_fastq(DEMO_FQ) == len({r.query_name for r in primary})
    # every field of -R kept, \t read as a tab
    assert header["RG"] == [{"ID": "demo", "SM": "NA1", "LB": "lib", "PU": "u1", "CN": "c"}]
    assert header["PG"][0]["ID"] == "gpualign" and header["PG"][0]["CL"].startswith("gpualign map ")
    assert all(r.get_tag("RG") == "demo" for r in records)
    mapped = [r for r in records if not r.is_unmapped]
    assert len(mapped) > 0.95 * len(records)
    for r in mapped[:200]:
        assert r.has_tag("NM") and r.has_tag("MD") and r.has_tag("AS")
        assert r.query_alignment_length <= r.query_length


def test_map_without_output_writes_sam_to_stdout(prefix):
    proc = run_cli("map", prefix, DEMO_FQ, "--backend", "cpu")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("@HD")
    assert sum(1 for ln in lines if not ln.startswith("@")) == count_fastq(DEMO_FQ)
    assert "falling back" not in proc.stderr   # cpu was asked for by name


def test_auto_backend_says_it_falls_back_to_cpu(prefix, tmp_path):
    proc = run_cli("map", prefix, DEMO_FQ, "-o", str(tmp_path / "x.bam"))
    assert proc.returncode == 0
    assert "falling back to the CPU backend" in proc.stderr


@pytest.mark.parametrize("args, message", [
    (["map", "/nonexistent/prefix", DEMO_FQ], "missing /nonexistent/prefix.idx.npz"),
    (["index", "/nonexistent.fa", "-p", "x"], "/nonexistent.fa: no such file"),
])
def test_errors_are_one_line_without_traceback(args, message):
    proc = run_cli(*args)
    assert proc.returncode == 1
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_bad_reads_leave_no_output(prefix, tmp_path):
    bad = tmp_path / "bad.fq"
    bad.write_text("@a\nACGT\n+\nIIII\n@b\nACG\n")
    out = tmp_path / "out.bam"
    proc = run_cli("map", prefix, str(bad), "-o", str(out))
    assert proc.returncode == 1 and "line 5: truncated FASTQ record" in proc.stderr
    assert not out.exists() and os.listdir(tmp_path) == ["bad.fq"]


@pytest.mark.parametrize("block", [bgzf.BGZF_INPUT, 997])
def test_map_writes_a_sorted_indexed_bam_equal_to_samtools_sort(prefix, tmp_path, monkeypatch, block, rng):
    """The BAM gpualign sorts itself holds the records, in the order, that samtools sort gives;
    its own .bai answers region queries and idxstats as samtools index's does (also with small
    BGZF blocks, so records straddle blocks)."""
    monkeypatch.setattr(bgzf, "BGZF_INPUT", block)
    out, unsorted = str(tmp_path / "s.bam"), str(tmp_path / "u.bam")
    common = [prefix, DEMO_FQ, "-t", "2", "--backend", "cpu", "--batch-size", "300"]
    assert main(["map", *common, "-o", out, "-l", "6"]) == 0
    shutil.copy(out, tmp_path / "copy.bam")
    pysam.index(str(tmp_path / "copy.bam"))
    assert pysam.idxstats(out) == pysam.idxstats(str(tmp_path / "copy.bam"))
    with pysam.AlignmentFile(out) as ours, pysam.AlignmentFile(str(tmp_path / "copy.bam")) as theirs:
        for _ in range(300):
            s = int(rng.integers(0, ours.lengths[0]))
            e = min(ours.lengths[0], s + int(rng.choice([1, 100, 3000, 40000])))
            assert ([r.query_name for r in ours.fetch(ours.references[0], s, e)]
                    == [r.query_name for r in theirs.fetch(theirs.references[0], s, e)])
    os.remove(tmp_path / "copy.bam")
    os.remove(tmp_path / "copy.bam.bai")
    assert main(["map", *common, "-o", unsorted, "--unsorted"]) == 0
    assert not os.path.exists(unsorted + ".bai")
    pysam.sort("-o", str(tmp_path / "ref.bam"), unsorted)
    with pysam.AlignmentFile(out) as ours, pysam.AlignmentFile(str(tmp_path / "ref.bam")) as ref:
        assert ours.header.to_dict()["HD"]["SO"] == "coordinate"
        assert [r.to_string() for r in ours] == [r.to_string() for r in ref]
        contig = ours.references[0]
        # the .bai works: a region query returns exactly the records overlapping the region
        region = [r.query_name for r in ours.fetch(contig, 20000, 20100)]
        expect = [r.query_name for r in pysam.AlignmentFile(out).fetch(until_eof=True)
                  if not r.is_unmapped and r.reference_start < 20100 and r.reference_end > 20000]
        assert region == expect and region
    assert sorted(os.listdir(tmp_path)) == ["ref.bam", "s.bam", "s.bam.bai", "u.bam"]


# ---- arguments checked before any work -------------------------------------------------------

@pytest.mark.parametrize("args, message", [
    (["map", "P", DEMO_FQ, "-t", "0"], "argument -t/--threads: must be at least 1, got 0"),
    (["map", "P", DEMO_FQ, "-t", "-1"], "argument -t/--threads: must be at least 1, got -1"),
    (["index", DEMO_FA, "-p", "P", "-k", "15"], "argument -k: must be between 4 and 14, got 15"),
    (["index", DEMO_FA, "-p", "P", "-k", "3"], "argument -k: must be between 4 and 14, got 3"),
])
def test_bad_numbers_are_refused_before_any_work(tmp_path, args, message):
    proc = subprocess.run([sys.executable, "-m", "gpualign", *args], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr
    assert os.listdir(tmp_path) == []   # nothing packed or written


@pytest.mark.parametrize("rg, message", [
    (r"ID:x\tSM:y", "must be an @RG header line"),
    (r"@RG\tSM:y", "no ID field"),
    (r"@RG\tID:x\tSM", "field 'SM' is not TAG:VALUE"),
    (r"@RG\tID:x\tID:y", "field ID given twice"),
    (r"@RG\tID:a b", "ID must be non-empty, without white space"),
])
def test_a_malformed_read_group_is_one_line(prefix, rg, message):
    proc = run_cli("map", prefix, DEMO_FQ, "-R", rg)
    assert proc.returncode == 1 and message in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "backend" not in proc.stderr


def test_version_and_help():
    for flag in ("-v", "--version"):
        proc = run_cli(flag)
        assert proc.returncode == 0 and proc.stdout.strip() == f"gpualign {gpualign.__version__}"
    text = run_cli("map", "--help").stdout
    from gpualign.options import HELP, MapParams
    for name in MapParams.names():   # every mapping flag has its description and default
        flag = "--" + name.replace("_", "-")
        assert flag in text
        assert " ".join(HELP[name].split()[:3]) in " ".join(text.split())
    for flag in ("-R", "-p", "-C", "-O", "--unsorted", "-o"):
        assert f"  {flag}" in text


def test_the_pg_command_line_reproduces_the_run(prefix, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    folder, name = os.path.split(prefix)
    os.symlink(folder, "idx")   # a relative prefix, as a user types it
    assert main(["map", f"idx/{name}", DEMO_FQ, "-o", "a.bam", "-t", "2", "--backend", "cpu", "-R", r"@RG\tID:r\tSM:s",
                 "--min-score", "40", "--unsorted"]) == 0
    with pysam.AlignmentFile("a.bam") as bam:
        command = bam.header.to_dict()["PG"][0]["CL"]
        first = [r.to_string() for r in bam]
    words = shlex.split(command)
    assert words[:2] == ["gpualign", "map"]
    os.rename("a.bam", "first.bam")
    assert main(words[1:]) == 0   # the CL, as a shell would split it
    with pysam.AlignmentFile("a.bam") as bam:
        assert [r.to_string() for r in bam] == first and len(first) == count_fastq(DEMO_FQ)


def test_an_index_and_its_genome_may_have_different_prefixes(tmp_path):
    """The workflow's layout: one genome image NAME.*, an index per k NAME.kK.idx.npz; the CLI
    accepts NAME.kK as the prefix (the index names its genome)."""
    from gpualign.genome import load_genome
    from gpualign.index import build_index, save_index
    from gpualign.reference import mask_reference
    from gpualign.genome import pack_reference
    g = str(tmp_path / "lambda")
    mask_reference(DEMO_FA, g + ".fa", g + ".nmask.bed", g + ".contigs.tsv")
    genome = pack_reference(g + ".fa", g + ".2bit.npy", g + ".nmask.npy")
    save_index(build_index(genome, 9), g + ".k9.idx.npz", genome.size, genome="lambda")
    out = str(tmp_path / "x.cram")
    assert main(["map", g + ".k9", DEMO_FQ, "-o", out, "--backend", "cpu"]) == 0
    with pysam.AlignmentFile(out, reference_filename=g + ".fa") as f:
        assert sum(1 for r in f if not r.is_unmapped) > 0.95 * count_fastq(DEMO_FQ)
    assert load_genome(g + ".2bit.npy", g + ".nmask.npy", g + ".contigs.tsv").size == genome.size


# ---- streams in, bwa's -p and -C -------------------------------------------------------------

SLOW_WRITER = r"""
import sys, time
data = open(sys.argv[1], 'rb').read()
cut = int(sys.argv[2])
sys.stdout.buffer.write(data[:cut]); sys.stdout.buffer.flush()
time.sleep(0.5)
sys.stdout.buffer.write(data[cut:]); sys.stdout.buffer.flush()
"""


def bam_records(path):
    with pysam.AlignmentFile(path) as f:
        return [r.to_string() for r in f]


def primary_names(path):
    with pysam.AlignmentFile(path) as f:
        return [r.query_name for r in f if not r.is_secondary and not r.is_supplementary]


@pytest.mark.parametrize("compressed", [False, True])
def test_reads_from_a_slow_pipe_on_stdin_are_all_mapped(prefix, tmp_path, compressed):
    """`-` reads stdin; a writer that pauses after the first record loses nothing."""
    src = tmp_path / ("r.fq.gz" if compressed else "r.fq")
    with gzip.open(DEMO_FQ, "rb") as fh:
        text = fh.read()
    src.write_bytes(gzip.compress(text) if compressed else text)
    # the writer pauses after the first record (plain) or the first 40 bytes (gzip)
    cut = 40 if compressed else len(b"\n".join(text.split(b"\n")[:4])) + 1
    out = tmp_path / "out.bam"
    writer = subprocess.Popen([sys.executable, "-c", SLOW_WRITER, str(src), str(cut)], stdout=subprocess.PIPE)
    proc = subprocess.run([sys.executable, "-m", "gpualign", "map", prefix, "-", "-o", str(out), "--backend", "cpu"],
                          stdin=writer.stdout, capture_output=True, text=True)
    writer.stdout.close()
    assert writer.wait() == 0 and proc.returncode == 0, proc.stderr
    names = primary_names(str(out))
    assert len(names) == count_fastq(DEMO_FQ) == len(set(names))


def interleaved_demo_pairs(tmp_path, comment=lambda i, mate: ""):
    """The bundled pairs as one interleaved FASTQ (mates named without /1 /2), with comments."""
    pairs = [os.path.join(ROOT, "resources", "demo", f"pairs_R{m}.fq.gz") for m in (1, 2)]
    with gzip.open(pairs[0], "rt") as a, gzip.open(pairs[1], "rt") as b:
        r1, r2 = a.read().splitlines(), b.read().splitlines()
    lines = []
    for i in range(0, len(r1), 4):
        for mate, rec in enumerate((r1[i:i + 4], r2[i:i + 4])):
            name = rec[0].split()[0]
            name = name[:-2] if name.endswith(("/1", "/2")) else name
            extra = comment(i // 4, mate)
            lines += [name + ("\t" + extra if extra else ""), *rec[1:]]
    path = tmp_path / "inter.fq"
    path.write_text("\n".join(lines) + "\n")
    return pairs, path


def test_interleaved_pairs_with_p_equal_the_two_file_run(prefix, tmp_path):
    pairs, inter = interleaved_demo_pairs(tmp_path)
    two, one = str(tmp_path / "two.bam"), str(tmp_path / "one.bam")
    assert main(["map", prefix, *pairs, "-o", two, "--backend", "cpu", "--unsorted"]) == 0
    with open(inter, "rb") as fh:   # -p on stdin
        proc = subprocess.run([sys.executable, "-m", "gpualign", "map", prefix, "-p", "-", "-o", one, "--backend", "cpu",
                               "--unsorted"], stdin=fh, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert bam_records(one) == bam_records(two) and len(bam_records(one)) == 2 * count_fastq(pairs[0])
    bad = tmp_path / "odd.fq"
    bad.write_text("".join(inter.read_text().splitlines(keepends=True)[4:]))   # R1 of the first pair missing
    proc = run_cli("map", prefix, "-p", str(bad), "--backend", "cpu")
    assert proc.returncode == 1 and f"reads {bad} record 1" in proc.stderr and "Traceback" not in proc.stderr


def test_comments_become_tags_with_c_in_bam_and_sam(prefix, tmp_path):
    barcode = lambda i, mate: f"BC:Z:{'ACGT'[i % 4] * 8}\tXI:i:{i - 500}\tXM:A:{'12'[mate]}"  # noqa: E731
    _, inter = interleaved_demo_pairs(tmp_path, barcode)
    for out in ("c.bam", "c.sam"):
        assert main(["map", prefix, "-p", str(inter), "-C", "-o", str(tmp_path / out), "--backend", "cpu",
                     "-R", r"@RG\tID:g"]) == 0
        with pysam.AlignmentFile(str(tmp_path / out)) as f:
            recs = list(f)
        assert len(recs) == 2 * 1000
        for r in recs:
            i = int(r.get_tag("XI")) + 500
            mate = 0 if r.is_read1 else 1
            assert r.get_tag("BC") == "ACGT"[i % 4] * 8 and r.get_tag("XM") == "12"[mate]
            assert r.get_tag("RG") == "g"
    # without -C the comments are dropped, as bwa does
    assert main(["map", prefix, "-p", str(inter), "-o", str(tmp_path / "n.bam"), "--backend", "cpu"]) == 0
    with pysam.AlignmentFile(str(tmp_path / "n.bam")) as f:
        assert not any(r.has_tag("BC") for r in f)
    # a comment that is not tags is one line naming the record
    illumina = tmp_path / "ill.fq"
    illumina.write_text("@a 1:N:0:ACGT\nACGTACGTAC\n+\nIIIIIIIIII\n")
    proc = run_cli("map", prefix, str(illumina), "-C", "--backend", "cpu")
    assert proc.returncode == 1 and f"reads {illumina} record 1: -C: comment '1:N:0:ACGT'" in proc.stderr


def test_trace_is_a_timeline_of_the_run_that_timeline_reads(prefix, tmp_path, monkeypatch):
    """GPUALIGN_TRACE: every stage of the mapping and of the input and output threads as TSV rows with
    ordered times, which bench/timeline.py turns into tables whose steps cover the run."""
    path = tmp_path / "trace.tsv"
    monkeypatch.setenv("GPUALIGN_TRACE", str(path))
    assert main(["map", prefix, DEMO_FQ, "-o", str(tmp_path / "out.bam"), "-t", "2", "--backend", "cpu"]) == 0
    lines = path.read_text().splitlines()
    rows = [line.split("\t") for line in lines if not line.startswith("# ")]
    assert lines[0].startswith("# t0_epoch=") and rows[0] == ["thread", "step", "start", "end", "cpu"]
    steps = {r[1] for r in rows[1:]}
    assert {"decompress", "parse and encode reads", "exact match", "seeding", "extension", "traceback",
            "BAM records (worker threads)", "compress BGZF"} <= steps
    assert all(0 <= float(r[2]) <= float(r[3]) for r in rows[1:])
    # every step on the CPU knows its thread's CPU seconds: never more than the step's wall
    assert all(0 <= float(r[4]) <= float(r[3]) - float(r[2]) + 0.01 for r in rows[1:])
    user, system = next(line.split("\t")[1:] for line in lines if line.startswith("# process_cpu"))
    assert float(user) + float(system) >= sum(float(r[4]) for r in rows[1:]) > 0
    table = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "timeline.py"), str(path)],
                           capture_output=True, text=True, check=True).stdout
    assert "| extension |" in table and table.startswith("wall ") and "CPU of the process:" in table


def test_the_gil_probe_records_the_wake_ups_a_busy_python_thread_delays(monkeypatch):
    """GPUALIGN_TRACE_GIL: the probe's sleeps end late while another thread runs Python (it gives the GIL up
    only at the switch interval), and those wake-ups are steps on the probe's thread; without the variable
    no probe starts."""
    monkeypatch.setenv("GPUALIGN_TRACE", "unused.tsv")   # written only by trace.write
    monkeypatch.delenv("GPUALIGN_TRACE_GIL", raising=False)
    monkeypatch.setattr(trace, "_events", [])
    monkeypatch.setattr(trace, "_probing", [])
    trace.start_gil_probe()
    assert trace._probing == []
    stop = threading.Event()

    def run_python():   # never sleeps, never lets go of the GIL on its own
        while not stop.is_set():
            pass

    busy = threading.Thread(target=run_python)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(0.005)
    try:
        busy.start()
        trace._probe_gil(rounds=20)
    finally:
        stop.set()
        busy.join()
        sys.setswitchinterval(interval)
    late = [(thread, step, end - start) for thread, step, start, end, _ in trace._events]
    assert len(late) >= 10
    assert all(step == "GIL wait (probe)" and thread == threading.current_thread().name and wait > trace.GIL_LATE
               for thread, step, wait in late)


def test_index_refuses_a_prefix_that_would_overwrite_its_reference(tmp_path):
    """`gpualign index ref.fa -p ref` would write the masked sequence (PREFIX.fa) over the input: one line,
    and the reference left as it was."""
    ref = tmp_path / "ref.fa"
    shutil.copy(DEMO_FA, ref)
    before = ref.read_bytes()
    proc = run_cli("index", str(ref), "-p", str(tmp_path / "ref"))
    assert proc.returncode == 1 and "would write the masked sequence over the reference" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert ref.read_bytes() == before


def test_index_chooses_k_from_the_genome_unless_given(tmp_path):
    proc = run_cli("index", DEMO_FA, "-p", str(tmp_path / "auto"))
    assert proc.returncode == 0 and "k=8 chosen for a genome of 48502 bp" in proc.stderr
    proc = run_cli("index", DEMO_FA, "-p", str(tmp_path / "nine"), "-k", "9")
    assert proc.returncode == 0 and "chosen" not in proc.stderr and "index k=9" in proc.stderr
