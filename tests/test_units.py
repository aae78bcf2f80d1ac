"""Several units (lanes, libraries) per sample in the workflow, run for real on cuts of the demo reads.

Sample s1 has two units, L001 single-end and L002 paired, each with its own read group; sample s2
has one unit (the default name, 1). Each unit is aligned on its own into
results/units/{sample}/{unit}.bam and a sample's units are merged into results/bam/{sample}.bam.
One complete run (module fixture `units_run`) is shared; the rerun tests dry-run a copy of it.
"""

import filecmp
import gzip
import itertools
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pysam
import pytest

from gpualign.bam.markdup import read_metrics
from gpualign.sam import parse_read_group
from test_workflow import (DEMO_PAIRS, DEMO_READS, bam_records, make_workdir, numba_cache,  # noqa: F401
                           planned_jobs, run_snakemake)

CONTIG = "gi|9626243|ref|NC_001416.1|"
SHEET = (
    "sample\tunit\tfq1\tfq2\tlibrary\tplatform\tplatform_unit\n"
    "s1\tL001\treads/se.fq.gz\t\tlibA\t\tFCX.1\n"
    "s1\tL002\treads/pe_R1.fq.gz\treads/pe_R2.fq.gz\t\tdnbseq\t\n"
    "s2\t\treads/s2.fq.gz\t\t\t\t\n"
)
# the read groups the sheet gives: defaults are LB = sample, PL = ILLUMINA, PU = unit, unit = 1
READ_GROUPS = {
    "s1": [{"ID": "s1.L001", "SM": "s1", "LB": "libA", "PL": "ILLUMINA", "PU": "FCX.1"},
           {"ID": "s1.L002", "SM": "s1", "LB": "s1", "PL": "DNBSEQ", "PU": "L002"}],
    "s2": [{"ID": "s2.1", "SM": "s2", "LB": "s2", "PL": "ILLUMINA", "PU": "1"}],
}


def cut_fastq(source: Path, dest: Path, start: int, count: int) -> list[str]:
    """Records [start, start + count) of a FASTQ.gz into dest (gzip); their names, as the BAM has them."""
    with gzip.open(source, "rt") as src:
        lines = list(itertools.islice(src, 4 * start, 4 * (start + count)))
    dest.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(dest, "wt") as out:
        out.writelines(lines)
    return [line[1:].split()[0].removesuffix("/1").removesuffix("/2") for line in lines[::4]]


def primary(bam: Path) -> list:
    with pysam.AlignmentFile(str(bam)) as fh:
        return [r for r in fh if not r.is_secondary and not r.is_supplementary]


@pytest.fixture(scope="module")
def units_run(tmp_path_factory, numba_cache):  # noqa: F811
    """The workflow run on a sheet of two samples, three units; the names of each unit's reads."""
    workdir = make_workdir(tmp_path_factory.mktemp("units"))
    reads = workdir / "reads"
    names = {
        "s1.L001": cut_fastq(DEMO_READS, reads / "se.fq.gz", 0, 200),
        "s1.L002": cut_fastq(DEMO_PAIRS[0], reads / "pe_R1.fq.gz", 0, 150),
        "s2.1": cut_fastq(DEMO_READS, reads / "s2.fq.gz", 200, 100),
    }
    assert cut_fastq(DEMO_PAIRS[1], reads / "pe_R2.fq.gz", 0, 150) == names["s1.L002"]
    (workdir / "samples.tsv").write_text(SHEET)
    run_snakemake(workdir, "--cores", "2", numba_cache=numba_cache)
    return workdir, names


def test_units_are_merged_with_their_read_groups(units_run):
    workdir, names = units_run
    for sample, groups in READ_GROUPS.items():
        bam = workdir / "results" / "bam" / f"{sample}.bam"
        pysam.quickcheck(str(bam))
        with pysam.AlignmentFile(str(bam)) as fh:
            header = fh.header.to_dict()
            assert header["HD"]["SO"] == "coordinate"
            assert header["RG"] == groups   # every unit's @RG line, every field, in the sheet's order
            keys = [(r.reference_id if r.reference_id >= 0 else 1 << 30, r.reference_start) for r in fh]
            assert keys == sorted(keys)
            # the index answers region queries
            mapped = sum(not r.is_unmapped for r in primary(bam))
            assert fh.count(CONTIG, 0, 48502) >= mapped > 0
        records = primary(bam)
        for group in groups:
            mine = [r for r in records if r.get_tag("RG") == group["ID"]]
            expected = names[group["ID"]]
            paired = group["ID"] == "s1.L002"
            # reads in = primary records out, each in its own unit's read group
            assert len(mine) == (2 if paired else 1) * len(expected)
            assert sorted({r.query_name for r in mine}) == sorted(expected)
            assert all(r.is_paired == paired for r in mine)
        assert {r.get_tag("RG") for r in records} == {g["ID"] for g in groups}
        summary = (workdir / "results" / "stats" / f"{sample}.summary.tsv").read_text().splitlines()
        assert dict(zip(*(line.split("\t") for line in summary)))["primary"] == str(len(records))


def test_unit_bams_are_kept_and_one_unit_is_not_rewritten(units_run):
    workdir, _ = units_run
    units = workdir / "results" / "units"
    assert sorted(str(p.relative_to(units)) for p in units.rglob("*")) == [
        "s1", "s1/L001.bam", "s1/L001.bam.bai", "s1/L001.duplication_metrics.txt", "s1/L001.map.json", "s1/L002.bam",
        "s1/L002.bam.bai", "s1/L002.duplication_metrics.txt", "s1/L002.map.json", "s2", "s2/1.bam", "s2/1.bam.bai",
        "s2/1.duplication_metrics.txt", "s2/1.map.json"]
    for suffix in (".bam", ".bam.bai"):
        assert filecmp.cmp(units / "s2" / f"1{suffix}", workdir / "results" / "bam" / f"s2{suffix}", shallow=False)
    # duplicate counts: a sample's by library (s1's units are two libraries), s2's its one unit's
    stats = workdir / "results" / "stats"
    assert sorted(read_metrics(stats / "s1.duplication_metrics.txt")) == ["libA", "s1"]
    assert read_metrics(stats / "s2.duplication_metrics.txt") == read_metrics(units / "s2" / "1.duplication_metrics.txt")
    # the merged BAM holds the records of its units, in coordinate order (and, the libraries being
    # two, the duplicate flags each unit's BAM has)
    merged = sorted(bam_records(workdir / "results" / "bam" / "s1.bam"))
    assert merged == sorted(bam_records(units / "s1" / "L001.bam") + bam_records(units / "s1" / "L002.bam"))
    logs = workdir / "logs"
    assert sorted(str(p.relative_to(logs)) for p in logs.glob("*/s[12]*.log")) == [
        "align/s1.L001.log", "align/s1.L002.log", "align/s2.1.log", "map_summary/s1.log", "map_summary/s2.log",
        "merge_units/s1.log", "merge_units/s2.log", "plot_insert_sizes/s1.log", "plots/s1.log", "plots/s2.log",
        "stats/s1.log", "stats/s2.log"]
    assert "reads in proper pairs" in (logs / "align" / "s1.L002.log").read_text()


def test_program_lines_are_commands_that_rerun(units_run, tmp_path, numba_cache):  # noqa: F811
    """Each unit's @PG CL is a `gpualign map` command line: run in the working directory (with
    another -o), it writes the unit's records again."""
    workdir, _ = units_run
    with pysam.AlignmentFile(str(workdir / "results" / "bam" / "s1.bam")) as fh:
        programs = {pg["ID"]: pg for pg in fh.header.to_dict()["PG"]}
    assert {"gpualign", "gpualign.L002"} <= set(programs)
    for pg_id, group in zip(("gpualign", "gpualign.L002"), READ_GROUPS["s1"]):
        argv = shlex.split(programs[pg_id]["CL"])
        assert argv[:2] == ["gpualign", "map"] and "-p" not in argv   # no interleaved chunk files here
        assert parse_read_group(argv[argv.index("-R") + 1]) == group
        assert argv[argv.index("-o") + 1] == f"results/units/s1/{group['ID'].split('.')[1]}.bam"
        assert "resources/reference/lambda.kauto" in argv
    argv = shlex.split(programs["gpualign.L002"]["CL"])
    assert argv[-4:-2] == ["reads/pe_R1.fq.gz", "reads/pe_R2.fq.gz"]
    out = tmp_path / "again.bam"
    argv[argv.index("-o") + 1] = str(out)
    argv[argv.index("--backend") + 1] = "cpu"
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0", NUMBA_CACHE_DIR=numba_cache)
    proc = subprocess.run([sys.executable, "-m", "gpualign", *argv[1:]], cwd=workdir, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert bam_records(out) == bam_records(workdir / "results" / "units" / "s1" / "L002.bam")


@pytest.fixture
def copied(units_run, tmp_path):
    workdir = tmp_path / "run"
    shutil.copytree(units_run[0], workdir, symlinks=True)
    return workdir


def planned(workdir, numba_cache, *args):  # noqa: F811
    result = run_snakemake(workdir, "--dry-run", *args, numba_cache=numba_cache)
    return planned_jobs(result.output), result.output


def unit_outputs(output: str) -> list[str]:
    """The unit BAMs of the align jobs a dry run plans."""
    return [line.split()[1].rstrip(",") for line in output.splitlines()
            if line.strip().startswith("output: results/units/")]


# sample s1 once one of its units is aligned again: merged, its QC and plots (it has pairs: insert sizes)
S1_AGAIN = {"align": 1, "merge_units": 1, "stats": 1, "map_summary": 1, "plots": 1, "plot_insert_sizes": 1, "all": 1}


def test_added_unit_aligns_only_itself(copied, numba_cache):  # noqa: F811
    assert planned(copied, numba_cache)[0] == {}
    cut_fastq(DEMO_READS, copied / "reads" / "more.fq.gz", 300, 50)
    sheet = copied / "samples.tsv"
    sheet.write_text(sheet.read_text() + "s1\tL003\treads/more.fq.gz\t\t\t\t\n")
    jobs, output = planned(copied, numba_cache)
    assert jobs == S1_AGAIN
    assert unit_outputs(output) == ["results/units/s1/L003.bam"]


def test_changed_read_group_reruns_its_unit_only(copied, numba_cache):  # noqa: F811
    sheet = copied / "samples.tsv"
    sheet.write_text(sheet.read_text().replace("libA", "libC"))
    jobs, output = planned(copied, numba_cache)
    assert jobs == S1_AGAIN
    assert unit_outputs(output) == ["results/units/s1/L001.bam"]


def test_units_in_chunks_give_the_same_bams(copied, numba_cache):  # noqa: F811
    """With align.chunks each unit is split, aligned in chunks and merged into the unit's BAM, the
    same records as the unsplit run; then the units are merged as before."""
    before = {s: bam_records(copied / "results" / "bam" / f"{s}.bam") for s in ("s1", "s2")}
    jobs, _ = planned(copied, numba_cache, "--config", "align={chunks: 2}")
    assert jobs == {"split_reads": 3, "align": 6, "merge_chunks": 3, "merge_units": 2, "stats": 2, "map_summary": 2,
                    "plots": 2, "plot_insert_sizes": 1, "all": 1}
    run_snakemake(copied, "--cores", "2", "--config", "align={chunks: 2}", numba_cache=numba_cache)
    for sample, records in before.items():
        assert bam_records(copied / "results" / "bam" / f"{sample}.bam") == records
    logs = copied / "logs"
    assert "split 300 reads into 2 chunks" in (logs / "split_reads" / "s1.L002.log").read_text()
    assert (logs / "align" / "s1.L002.2-of-2.log").exists() and (logs / "merge_chunks" / "s2.1.log").exists()
    assert not any((copied / "results" / "chunks").rglob("*.fq")), "chunk files are temporary"
    # a chunk of a paired unit holds interleaved mates: its command line reads them with -p
    with pysam.AlignmentFile(str(copied / "results" / "units" / "s1" / "L002.bam")) as fh:
        argv = shlex.split(next(pg["CL"] for pg in fh.header.to_dict()["PG"] if pg["ID"] == "gpualign"))
    assert "-p" in argv and argv[-3:] == ["results/chunks/s1/L002/1-of-2.fq", "-o", "results/chunks/s1/L002/1-of-2.bam"]


@pytest.mark.parametrize("sheet, message", [
    ("sample\tunit\tfq1\na\tL1\tr.fq.gz\na\tL2\tr.fq.gz\na\tL1\tr2.fq.gz\n",
     "sample sheet bad.tsv: sample 'a' unit 'L1' appears more than once"),
    ("sample\tfq1\na\tr.fq.gz\na\tr2.fq.gz\n",
     "sample sheet bad.tsv: sample 'a' appears more than once (give each of its rows a name in a column unit)"),
    ("sample\tunit\tfq1\na\tL/1\tr.fq.gz\n", "sample sheet bad.tsv: sample 'a' unit 'L/1' is not a valid name"),
    ("sample\tunit\tfq1\na.b\tc\tr.fq.gz\na\tb.c\tr.fq.gz\n",
     "sample sheet bad.tsv: sample 'a.b' unit 'c' and sample 'a' unit 'b.c' would share the read group ID 'a.b.c'"),
    ("sample\tunit\tfq1\tplatform\na\t1\tr.fq.gz\tnanopore\n",
     "sample 'a' unit '1': platform 'nanopore' is not one of CAPILLARY"),
    ("sample\tunit\tfq1\tlibrary\na\t1\tr.fq.gz\tlib\\t2\n", "library 'lib\\\\t2' holds a character outside"),
    ("sample\tunit\tfq1\tfq2\na\t1\tr.fq.gz\tr.fq.gz\n", "sample sheet bad.tsv: sample 'a' unit '1' has the same file"),
])
def test_bad_units_are_one_line_without_traceback(tmp_path, numba_cache, sheet, message):  # noqa: F811
    workdir = make_workdir(tmp_path / "run")
    (workdir / "bad.tsv").write_text(sheet)
    result = run_snakemake(workdir, "--dry-run", "--config", "samples=bad.tsv", numba_cache=numba_cache,
                           check=False)
    assert result.returncode != 0
    lines = [line for line in result.output.splitlines()
             if line.strip() and not line.startswith("Config file config.yaml is extended")]
    assert lines == [lines[0]] and message in lines[0], result.output
    assert "Traceback" not in result.output
    assert not (workdir / "results").exists()
