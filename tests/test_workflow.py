"""The Snakemake workflow, run for real on the bundled demo: outputs, reruns, lint, bad input, downloads.

Every test runs `python -m snakemake` in a subprocess on the repository's Snakefile, in a working
directory under tmp holding a copy of config.yaml, samples.tsv and resources/demo. One complete
run (module fixture `demo_run`) is shared; the rerun tests dry-run against it and read which jobs
Snakemake plans from the "Job stats" table. Tests that edit gpualign's source do it in a copy of
the workflow and the package, never in the repository.
"""

import gzip
import hashlib
import http.server
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pysam
import pytest

from gpualign.bam.markdup import read_metrics

REPO = Path(__file__).resolve().parents[1]
DEMO_READS = REPO / "resources" / "demo" / "reads.fq.gz"
DEMO_REF = REPO / "resources" / "demo" / "lambda.fa"
DEMO_PAIRS = [REPO / "resources" / "demo" / f"pairs_R{m}.fq.gz" for m in (1, 2)]
REFERENCE_STAGES = {"download_reference", "mask_reference", "pack_reference"}
FALLBACK = "backend auto: no CUDA GPU available, falling back to the CPU backend"


def make_workdir(path: Path) -> Path:
    """A working directory with the demo's config, sample sheet and data, as in a fresh checkout."""
    path.mkdir(parents=True, exist_ok=True)
    for name in ("config.yaml", "samples.tsv"):
        shutil.copy2(REPO / name, path / name)
    shutil.copytree(REPO / "resources" / "demo", path / "resources" / "demo")
    return path


def copy_workflow(dest: Path) -> Path:
    """The workflow and the gpualign package, copied so a test may edit them."""
    dest.mkdir(parents=True)
    shutil.copy2(REPO / "Snakefile", dest / "Snakefile")
    for name in ("workflow", "envs", "gpualign"):
        shutil.copytree(REPO / name, dest / name, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


@pytest.fixture(scope="module")
def numba_cache(request, tmp_path_factory):
    """numba's compile cache, kept between test sessions in pytest's cache when it is enabled."""
    cache = getattr(request.config, "cache", None)
    return str(cache.mkdir("gpualign_numba") if cache is not None else tmp_path_factory.mktemp("numba"))


def snakemake_command(workdir, *args, numba_cache, repo=REPO) -> tuple[list, dict]:
    """The command line and environment of a Snakemake run on the repository's Snakefile."""
    env = dict(os.environ)
    # The test session runs numba's CUDA simulator (conftest.py); the workflow's jobs must not.
    env["NUMBA_ENABLE_CUDASIM"] = "0"
    env["NUMBA_CACHE_DIR"] = numba_cache
    env["PYTHONPATH"] = str(repo)
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(Path(repo, "Snakefile")),
           "--directory", str(workdir), "--workflow-profile", "none", *args]
    return cmd, env


def run_snakemake(workdir, *args, numba_cache, repo=REPO, check=True) -> subprocess.CompletedProcess:
    cmd, env = snakemake_command(workdir, *args, numba_cache=numba_cache, repo=repo)
    result = subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True, timeout=600)
    result.output = result.stdout + result.stderr
    if check and result.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({result.returncode}):\n{result.output[-6000:]}")
    return result


def planned_jobs(output: str) -> dict:
    """Jobs a dry run plans, from its "Job stats" table; {} when there is nothing to do."""
    lines = [line.strip() for line in output.splitlines()]
    if "Job stats:" not in lines:
        assert "Nothing to be done" in output, output[-3000:]
        return {}
    start = lines.index("Job stats:")
    assert lines[start + 1].split() == ["job", "count"], lines[start:start + 3]
    jobs = {}
    for line in lines[start + 3:]:
        name, count = line.split()
        if name == "total":
            assert int(count) == sum(jobs.values())
            return jobs
        jobs[name] = int(count)
    raise AssertionError(f"no total line in the job table:\n{output[-3000:]}")


def dry_run(workdir, *args, numba_cache, repo=REPO) -> set:
    result = run_snakemake(workdir, "--dry-run", *args, numba_cache=numba_cache, repo=repo)
    return set(planned_jobs(result.output))


def gpu_available() -> bool:
    """Whether a real CUDA GPU is usable (asked in a fresh process: this one runs the simulator)."""
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0")
    probe = subprocess.run([sys.executable, "-c", "from numba import cuda; print(cuda.is_available())"],
                           env=env, capture_output=True, text=True, timeout=120)
    return probe.stdout.strip() == "True"


@dataclass
class DemoRun:
    workdir: Path
    output: str
    seconds: float


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory, numba_cache) -> DemoRun:
    workdir = make_workdir(tmp_path_factory.mktemp("demo"))
    t0 = time.perf_counter()
    result = run_snakemake(workdir, "--cores", "2", numba_cache=numba_cache)
    return DemoRun(workdir, result.output, time.perf_counter() - t0)


def fastq_records(path: Path) -> int:
    with gzip.open(path, "rt") as fh:
        return sum(1 for _ in fh) // 4


# ---- (a) the demo, end to end -----------------------------------------------------------------


def test_demo_runs_one_align_job_per_unit_without_split_or_merge(demo_run):
    """align.chunks = 1: align reads the unit's FASTQ and writes the unit's BAM itself."""
    assert planned_jobs(demo_run.output) == {"download_reference": 1, "mask_reference": 1, "pack_reference": 1,
                                             "index_reference": 1, "align": 1, "merge_units": 1, "stats": 1,
                                             "map_summary": 1, "plots": 1, "all": 1}


def test_demo_bam_is_sorted_indexed_and_complete(demo_run):
    bam_path = demo_run.workdir / "results" / "bam" / "demo.bam"
    assert bam_path.exists() and Path(f"{bam_path}.bai").exists()
    pysam.quickcheck(str(bam_path))   # raises SamtoolsError on a truncated or malformed BAM
    with pysam.AlignmentFile(str(bam_path)) as bam:
        header = bam.header.to_dict()
        assert header["HD"]["SO"] == "coordinate"
        assert [sq["SN"] for sq in header["SQ"]] == ["gi|9626243|ref|NC_001416.1|"]
        assert header["SQ"][0]["LN"] == 48502
        # the demo sheet's one unit, 1: read group demo.1
        assert header["RG"] == [{"ID": "demo.1", "SM": "demo", "LB": "demo", "PL": "ILLUMINA", "PU": "1"}]
        assert any(pg["ID"] == "gpualign" for pg in header["PG"])
        keys, primary = [], 0
        for rec in bam:
            keys.append((rec.reference_id if rec.reference_id >= 0 else 1 << 30, rec.reference_start))
            primary += not (rec.is_secondary or rec.is_supplementary)
            assert rec.get_tag("RG") == "demo.1"
        assert keys == sorted(keys)
        assert primary == fastq_records(DEMO_READS)
        # the index answers region queries
        assert bam.count(header["SQ"][0]["SN"], 0, 48502) > 0


def test_demo_stats(demo_run):
    stats = demo_run.workdir / "results" / "stats"
    header, row = [line.split("\t") for line in (stats / "demo.summary.tsv").read_text().splitlines()]
    summary = dict(zip(header, row))
    n = fastq_records(DEMO_READS)
    assert summary["sample"] == "demo"
    assert int(summary["primary"]) == n
    assert int(summary["mapped"]) >= 0.95 * n
    assert float(summary["mapped_pct"]) == pytest.approx(100 * int(summary["mapped"]) / n, abs=0.01)
    assert f"{n} + 0 in total" in (stats / "demo.flagstat.txt").read_text()
    assert (stats / "demo.idxstats.txt").read_text().startswith("gi|9626243|ref|NC_001416.1|\t48502\t")
    samtools_stats = (stats / "demo.samtools_stats.txt").read_text()
    assert f"SN\traw total sequences:\t{n}\t" in samtools_stats
    assert "\nMPC\t" in samtools_stats   # run against the reference: mismatches per cycle
    # bam.mark_duplicates: align's counts, written again naming the sample's BAM (MultiQC's sample)
    metrics = (stats / "demo.duplication_metrics.txt").read_text()
    assert "INPUT=[demo.bam]" in metrics and "\ndemo\t" in metrics
    assert read_metrics(stats / "demo.duplication_metrics.txt") == \
        read_metrics(demo_run.workdir / "results" / "units" / "demo" / "1.duplication_metrics.txt")


def test_demo_qc_files(demo_run):
    """The binned coverage, the map summary and its MultiQC table, and the plots, made from the run's
    own numbers."""
    stats = demo_run.workdir / "results" / "stats"
    n = fastq_records(DEMO_READS)
    rows = [line.split("\t") for line in (stats / "demo.coverage.tsv").read_text().splitlines()]
    assert rows[0] == ["contig", "start", "end", "mean_depth"]
    assert len(rows) - 1 == 971   # 48,502 bp in bins of 50 bp (qc.coverage_bins 1000)
    # 2,000 reads of 100 bp, less duplicates and unmapped reads, over the phage's 48.5 kbp: about 4x
    mean = sum((int(e) - int(b)) * float(d) for _, b, e, d in rows[1:]) / 48502
    assert 3.5 < mean < 4.2
    summary = json.loads((stats / "demo.map.json").read_text())
    assert summary["reads"] == n and summary["backend"] in ("cpu", "cuda") and not summary["paired"]
    unit = json.loads((demo_run.workdir / "results" / "units" / "demo" / "1.map.json").read_text())
    assert summary == unit   # one unit: the sample's summary is its unit's
    table = (stats / "demo.map_summary_mqc.tsv").read_text().splitlines()
    assert "# plot_type: 'table'" in table
    header, row = [line.split("\t") for line in table if not line.startswith("#")]
    assert dict(zip(header, row))["Sample"] == "demo" and int(dict(zip(header, row))["reads"]) == n
    plots = demo_run.workdir / "results" / "plots" / "demo"
    assert sorted(p.name for p in plots.iterdir()) == ["coverage.png", "duplicates.png", "errors.png", "mapq.png",
                                                       "throughput.png"]   # no pairs: no insert sizes
    for png in plots.iterdir():
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000


def test_demo_logs(demo_run, numba_cache):
    logs = demo_run.workdir / "logs"
    align_log = (logs / "align" / "demo.1.log").read_text()
    if gpu_available():
        assert "backend cuda" in align_log
    else:
        assert FALLBACK in align_log
    assert f"done: {fastq_records(DEMO_READS)} reads" in align_log
    expected = ["align/demo.1.log", "map_summary/demo.log", "merge_units/demo.log", "plots/demo.log",
                "reference/lambda.download.log", "reference/lambda.kauto.index.log", "reference/lambda.mask.log",
                "reference/lambda.pack.log", "stats/demo.log"]
    assert sorted(str(p.relative_to(logs)) for p in logs.rglob("*.log")) == expected
    # k: auto chose the design's 8 for the 48.5 kbp phage, and said so
    assert "k=8 chosen for a genome of 48502 bp" in (logs / "reference" / "lambda.kauto.index.log").read_text()
    # numba's compile cache went to NUMBA_CACHE_DIR, so the next run skips compiling
    assert any(Path(numba_cache).rglob("*.nbi"))


def test_demo_second_run_has_nothing_to_do(demo_run, numba_cache):
    assert dry_run(demo_run.workdir, numba_cache=numba_cache) == set()


# ---- (b) rerun exactly what a change touches ---------------------------------------------------


ALIGN_ON = {"align", "merge_units", "stats", "map_summary", "plots", "all"}   # a unit aligned again, and what follows


@pytest.mark.parametrize("override, planned", [
    ("align={max_indels: 4}", ALIGN_ON),
    ("align={mismatch: 3, gap_open: 5}", ALIGN_ON),
    ("bam={compression_level: 6}", ALIGN_ON),
    ("bam={mark_duplicates: false}", ALIGN_ON),
    ("bam={optical_duplicate_pixel_distance: 100}", ALIGN_ON),
    ("index={max_occ: 100}", {"index_reference"} | ALIGN_ON),
    ("index={k: 9}", {"index_reference"} | ALIGN_ON),
    ("qc={coverage_bins: 500}", {"stats", "plots", "all"}),
])
def test_changed_parameter_reruns_its_stages(demo_run, numba_cache, override, planned):
    got = dry_run(demo_run.workdir, "--config", override, numba_cache=numba_cache)
    assert got == planned
    assert not got & REFERENCE_STAGES


def test_threads_do_not_rerun(demo_run, numba_cache):
    """Threads change speed, not results: they are `threads:`, not params."""
    assert dry_run(demo_run.workdir, "--config", "align={threads: 1}",
                   numba_cache=numba_cache) == set()


@pytest.fixture
def copied(demo_run, tmp_path):
    """A copy of the workflow and package, and of the finished demo run (outputs and metadata)."""
    repo = copy_workflow(tmp_path / "repo")
    workdir = tmp_path / "run"
    shutil.copytree(demo_run.workdir, workdir, symlinks=True)
    return repo, workdir


def edit_module(repo: Path, name: str):
    """Append a comment to module `name` ('backends.cpu') of the copied package."""
    from gpualign.provenance import module_path
    path = Path(module_path(name, str(repo / "gpualign")))
    path.write_text(path.read_text() + "\n# edited by test_workflow\n")
    return path


def test_kernel_edit_reruns_align_not_reference(copied, numba_cache):
    repo, workdir = copied
    # The copy is the same code: nothing to do (source hashes, not paths or mtimes, are compared).
    assert dry_run(workdir, numba_cache=numba_cache, repo=repo) == set()
    from gpualign.provenance import module_path
    os.utime(module_path("backends.cpu", str(repo / "gpualign")))   # touching alone changes nothing
    assert dry_run(workdir, numba_cache=numba_cache, repo=repo) == set()
    edit_module(repo, "backends.cpu")   # a kernel module of a subpackage
    assert dry_run(workdir, numba_cache=numba_cache, repo=repo) == ALIGN_ON


def test_reference_code_edit_reruns_from_mask(copied, numba_cache):
    repo, workdir = copied
    edit_module(repo, "reference")
    planned = dry_run(workdir, numba_cache=numba_cache, repo=repo)
    assert planned == {"mask_reference", "pack_reference", "index_reference"} | ALIGN_ON


def test_bam_code_edit_reruns_align_and_stats(copied, numba_cache):
    repo, workdir = copied
    edit_module(repo, "bam.stats")
    assert dry_run(workdir, numba_cache=numba_cache, repo=repo) == {"stats", "plots", "all"}
    edit_module(repo, "bam.sort")
    assert dry_run(workdir, numba_cache=numba_cache, repo=repo) == ALIGN_ON


def test_stale_script_import_is_one_line(copied, numba_cache):
    """A script importing a module that is not (or no longer) in the package stops the workflow
    before any job, naming the script and the module."""
    repo, workdir = copied
    script = repo / "workflow" / "scripts" / "stats.py"
    script.write_text(script.read_text().replace("import sys\n", "import sys\n\nimport gpualign.gone\n", 1))
    result = run_snakemake(workdir, "--dry-run", numba_cache=numba_cache, repo=repo, check=False)
    assert result.returncode != 0
    assert "scripts/stats.py imports gpualign.gone: no module 'gone'" in result.output
    assert "Traceback" not in result.output


def _schema_defaults(schema):
    if schema.get("type") == "object":
        return {key: _schema_defaults(sub) for key, sub in schema["properties"].items()}
    return schema["default"]


def test_config_yaml_holds_the_schema_defaults():
    """config.yaml spells out every default, every field is described, every MapParams option is a key."""
    import yaml

    from gpualign.options import MapParams

    schema = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    assert config == _schema_defaults(schema)
    assert set(MapParams.names()) <= set(schema["properties"]["align"]["properties"])

    def described(node, where):
        assert node.get("description"), f"{where}: no description"
        for key, sub in node.get("properties", {}).items():
            described(sub, f"{where}.{key}")
    described(schema, "config")
    described(yaml.safe_load((REPO / "workflow" / "schemas" / "samples.schema.yaml").read_text()), "samples")


# ---- (c) lint ----------------------------------------------------------------------------------


@pytest.mark.parametrize("args", [(), ("--config", "align={chunks: 2}")], ids=["unchunked", "chunked"])
def test_lint_is_clean(demo_run, numba_cache, args):
    result = run_snakemake(demo_run.workdir, "--lint", *args, numba_cache=numba_cache)
    assert "Lints for" not in result.output
    assert "Congratulations, your workflow is in a good condition!" in result.output


# ---- (d) bad input is rejected with a clear message --------------------------------------------


@pytest.mark.parametrize("sheet, message", [
    ("sample\tfq1\n../../x\treads.fq.gz\n", "sample '../../x' is not a valid name"),
    ("sample\tfq1\tfq2\npe\tr1.fq.gz\tr1.fq.gz\n", "sample 'pe' has the same file as fq1 and fq2"),
    ("sample\tfq1\tfq2\npe\tr1.fq.gz\tftp://example.org/r2.fq.gz\n", "give its path in fq2"),
    ("sample\tunit\tfq1\na\tL1\tr.fq.gz\na\tL1\tr2.fq.gz\n", "sample 'a' unit 'L1' appears more than once"),
    ("sample\tfq1\na\tr.fq.gz\na\tr.fq.gz\n", "sample 'a' appears more than once (give each of its rows"),
    ("sample\tfq1\nweb\thttps://example.org/r.fq.gz\n", "reads from URLs are not supported yet"),
])
def test_bad_sample_sheet_is_rejected(tmp_path, numba_cache, sheet, message):
    workdir = make_workdir(tmp_path / "run")
    (workdir / "bad.tsv").write_text(sheet)
    result = run_snakemake(workdir, "--dry-run", "--config", "samples=bad.tsv", numba_cache=numba_cache,
                           check=False)
    assert result.returncode != 0
    assert message in result.output
    assert not (workdir / "results").exists()


@pytest.mark.parametrize("override, message", [
    ("reference={name: ../up}", "reference.name '../up' is not a valid name"),
    ("align={backend: gpu}", "'gpu' is not one of ['auto', 'cuda', 'cpu']"),
    ("align={max_indels: 5, bogus: 1}", "Additional properties are not allowed ('bogus' was unexpected)"),
])
def test_bad_config_is_rejected(tmp_path, numba_cache, override, message):
    workdir = make_workdir(tmp_path / "run")
    result = run_snakemake(workdir, "--dry-run", "--config", override, numba_cache=numba_cache, check=False)
    assert result.returncode != 0
    assert message in result.output


# ---- (e) reference from a real HTTP server -----------------------------------------------------


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture
def http_server(tmp_path):
    """An HTTP server on 127.0.0.1 serving a folder with the demo reference, gzip-compressed."""
    root = tmp_path / "www"
    root.mkdir()
    (root / "lambda.fa.gz").write_bytes(gzip.compress(DEMO_REF.read_bytes()))
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), lambda *a, **kw: _QuietHandler(*a, directory=str(root), **kw))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", root
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_reference_download_over_http(tmp_path, numba_cache, http_server):
    base, root = http_server
    sha = hashlib.sha256((root / "lambda.fa.gz").read_bytes()).hexdigest()
    workdir = make_workdir(tmp_path / "run")
    target = "resources/reference/web.contigs.tsv"
    run_snakemake(workdir, "--cores", "1", target, "--config",
                  f'reference={{url: "{base}/lambda.fa.gz", name: web, sha256: {sha}}}',
                  numba_cache=numba_cache)
    fetched = workdir / "resources" / "reference" / "web.fa.gz"
    with gzip.open(fetched, "rb") as fh:
        assert fh.read() == DEMO_REF.read_bytes()
    assert (workdir / target).read_text().splitlines()[1].startswith("gi|9626243|ref|NC_001416.1|\t48502\t")
    assert f"sha256 {sha}" in (workdir / "logs" / "reference" / "web.download.log").read_text()


def test_reference_download_error_is_one_line(tmp_path, numba_cache, http_server):
    base, _ = http_server
    workdir = make_workdir(tmp_path / "run")
    result = run_snakemake(workdir, "--cores", "1", "resources/reference/gone.fa.gz", "--config",
                           f'reference={{url: "{base}/missing.fa", name: gone}}',
                           numba_cache=numba_cache, check=False)
    assert result.returncode != 0
    message = f"reference {base}/missing.fa: HTTP 404 File not found"
    assert f"download_reference: error: {message}" in result.output
    log = (workdir / "logs" / "reference" / "gone.download.log").read_text()
    assert f"error: {message}\n" in log
    assert "Traceback" not in log
    assert not (workdir / "resources" / "reference" / "gone.fa.gz").exists()


# ---- (e) reads in chunks -------------------------------------------------------------------------


def bam_records(path: Path) -> list[str]:
    """The records as SAM text."""
    with pysam.AlignmentFile(str(path)) as bam:
        return [rec.to_string() for rec in bam]


def align_script_processes(root: int) -> list:
    import psutil
    try:
        children = psutil.Process(root).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    found = []
    for child in children:
        try:
            if any(part.endswith(".align.py") for part in child.cmdline()):
                found.append(child)
        except psutil.Error:
            continue
    return found


def kill_second_chunk_job(proc, logs: Path, timeout: float = 300) -> str:
    """SIGKILL the align job of a chunk that starts second (jobs run one at a time); its scatter
    item (2-of-3)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        started = sorted(logs.glob("demo.1.*-of-3.log"), key=lambda p: p.stat().st_mtime)
        if len(started) >= 2:
            victims = align_script_processes(proc.pid)
            if victims:
                for victim in victims:
                    victim.kill()
                return started[1].name.removeprefix("demo.1.").removesuffix(".log")
        time.sleep(0.02)
    raise AssertionError("the second chunk job was not seen running")


@pytest.mark.parametrize("args", [("--config", "align={chunks: 2}"), ("--set-scatter", "chunk=2")])
def test_chunks_scatter_and_gather(demo_run, numba_cache, args):
    """align.chunks (or Snakemake's --set-scatter chunk=N) splits a unit, aligns the chunks with the
    one align rule and merges them; reference and index are kept."""
    result = run_snakemake(demo_run.workdir, "--dry-run", *args, numba_cache=numba_cache)
    assert planned_jobs(result.output) == {"split_reads": 1, "align": 2, "merge_chunks": 1, "merge_units": 1,
                                           "stats": 1, "map_summary": 1, "plots": 1, "all": 1}
    assert "output: results/chunks/demo/1/2-of-2.bam" in result.output


def test_killed_chunk_job_is_rerun_alone_and_the_merge_equals_the_unsplit_run(demo_run, tmp_path, numba_cache):
    workdir = tmp_path / "run"
    shutil.copytree(demo_run.workdir, workdir, symlinks=True)   # reference and index are done
    chunks = "align={chunks: 3}"
    cmd, env = snakemake_command(workdir, "--cores", "1", "--keep-going", "--config", chunks, numba_cache=numba_cache)
    with subprocess.Popen(cmd, cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True) as proc:
        killed = kill_second_chunk_job(proc, workdir / "logs" / "align")
        output, _ = proc.communicate(timeout=600)
    assert proc.returncode != 0, output[-3000:]
    parts = workdir / "results" / "chunks" / "demo" / "1"   # the demo's one unit
    finished = sorted(p.name for p in parts.glob("*.bam"))
    assert finished == sorted(f"{c}-of-3.bam" for c in "123" if f"{c}-of-3" != killed), output[-3000:]
    mtimes = {name: (parts / name).stat().st_mtime_ns for name in finished}

    rerun = run_snakemake(workdir, "--dry-run", "--config", chunks, numba_cache=numba_cache)
    assert planned_jobs(rerun.output) == {"align": 1, "merge_chunks": 1, "merge_units": 1, "stats": 1,
                                          "map_summary": 1, "plots": 1, "all": 1}
    assert f"scatteritem={killed}" in rerun.output.replace(" ", "")
    assert {name: (parts / name).stat().st_mtime_ns for name in finished} == mtimes
    run_snakemake(workdir, "--cores", "2", "--config", chunks, numba_cache=numba_cache)

    merged = bam_records(workdir / "results" / "bam" / "demo.bam")   # duplicates marked across the chunks
    assert merged == bam_records(demo_run.workdir / "results" / "bam" / "demo.bam")
    assert len(merged) == fastq_records(DEMO_READS)
    assert not parts.exists() or not any(parts.iterdir()), "chunk files are temporary"
    log = (workdir / "logs" / "split_reads" / "demo.1.log").read_text()
    assert "split 2000 reads into 3 chunks: 666 667 667" in log


def test_killed_align_job_leaves_no_bam_and_the_rerun_equals_an_uninterrupted_run(demo_run, tmp_path, numba_cache):
    workdir = tmp_path / "run"
    shutil.copytree(demo_run.workdir, workdir, symlinks=True)
    for folder in ("results/units", "results/bam", "results/stats", "logs/align"):
        shutil.rmtree(workdir / folder)
    cmd, env = snakemake_command(workdir, "--cores", "1", numba_cache=numba_cache)
    with subprocess.Popen(cmd, cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True) as proc:
        bam_dir = workdir / "results" / "units" / "demo"   # the demo's one unit, 1
        deadline = time.monotonic() + 300
        while not (bam_dir.exists() and any(bam_dir.iterdir())):   # killed while writing its output
            assert proc.poll() is None and time.monotonic() < deadline, "the align job never wrote"
            time.sleep(0.005)
        for victim in align_script_processes(proc.pid):
            victim.kill()
        output, _ = proc.communicate(timeout=600)
    assert proc.returncode != 0, output[-3000:]
    assert not any((bam_dir / name).exists() for name in ("1.bam", "1.bam.bai", "1.map.json",
                                                           "1.duplication_metrics.txt"))
    assert planned_jobs(run_snakemake(workdir, "--dry-run", numba_cache=numba_cache).output) == \
        {"align": 1, "merge_units": 1, "stats": 1, "map_summary": 1, "plots": 1, "all": 1}
    run_snakemake(workdir, "--cores", "2", numba_cache=numba_cache)
    merged = workdir / "results" / "bam" / "demo.bam"
    assert bam_records(merged) == bam_records(demo_run.workdir / "results" / "bam" / "demo.bam")
    # the killed job's temporary files are gone too (atomic_path clears those of dead processes)
    assert sorted(p.name for p in bam_dir.iterdir()) == ["1.bam", "1.bam.bai", "1.duplication_metrics.txt",
                                                         "1.map.json"]


# ---- (f) paired-end samples ---------------------------------------------------------------------


def test_paired_sample_runs_as_pairs_and_chunks_give_the_same_bam(tmp_path, numba_cache):
    """A sample with fq2 is aligned as pairs (flags, proper pairs, mates in lockstep); with
    align.chunks = 3 the split, chunked and merged run gives the same records."""
    workdir = make_workdir(tmp_path / "run")
    (workdir / "pe.tsv").write_text("sample\tfq1\tfq2\n" + "pe\t" + "\t".join(
        str(p.relative_to(REPO)) for p in DEMO_PAIRS) + "\n")
    run_snakemake(workdir, "--cores", "2", "--config", "samples=pe.tsv", numba_cache=numba_cache)
    bam = workdir / "results" / "bam" / "pe.bam"
    with pysam.AlignmentFile(str(bam)) as fh:
        records = [r for r in fh if not r.is_secondary and not r.is_supplementary]
    n = fastq_records(DEMO_PAIRS[0])
    assert len(records) == 2 * n == 2 * fastq_records(DEMO_PAIRS[1])
    assert all(r.is_paired for r in records)
    assert sum(r.is_read1 for r in records) == sum(r.is_read2 for r in records) == n
    assert sum(r.is_proper_pair for r in records) >= 0.95 * 2 * n
    log = (workdir / "logs" / "align" / "pe.1.log").read_text()
    assert "insert size: mean" in log and "reads in proper pairs" in log
    assert "duplicates (pe):" in log   # bam.mark_duplicates: marked by align, one unit unchunked
    unsplit = bam_records(bam)
    metrics = workdir / "results" / "stats" / "pe.duplication_metrics.txt"
    counts = read_metrics(metrics)
    summary = json.loads((workdir / "results" / "stats" / "pe.map.json").read_text())
    (block,) = summary["insert_sizes"]   # the demo's 1,000 pairs of 400 +/- 40 bp: one block
    assert summary["paired"] and block["valid"] and 390 < block["mean"] < 410
    assert (workdir / "results" / "plots" / "pe" / "insert_sizes.png").stat().st_size > 5000

    run_snakemake(workdir, "--cores", "2", "--config", "samples=pe.tsv", "align={chunks: 3}",
                  numba_cache=numba_cache)
    assert bam_records(bam) == unsplit   # marked as the chunks are merged
    assert read_metrics(metrics) == counts
    chunked = json.loads((workdir / "results" / "stats" / "pe.map.json").read_text())
    keys = ("reads", "mapped", "proper", "insert_sizes", "duplicates")
    assert [chunked[key] for key in keys] == [summary[key] for key in keys]   # chunks' summaries combined
    assert "duplicates (pe):" in (workdir / "logs" / "merge_chunks" / "pe.1.log").read_text()
    split_log = (workdir / "logs" / "split_reads" / "pe.1.log").read_text()
    assert f"split {2 * n} reads into 3 chunks" in split_log


# ---- (g) the report: snakemake --report, looked at in a browser ----------------------------------------

# the plots' labels in the report, and their files' names under results/plots/{sample}/
PLOT_FILES = {"MAPQ": "mapq", "coverage": "coverage", "mismatches and indels": "errors", "duplication": "duplicates",
              "throughput": "throughput"}
PLOT_LABELS = set(PLOT_FILES)


@pytest.fixture(scope="module")
def report_html(demo_run, numba_cache, tmp_path_factory) -> Path:
    """`snakemake --report report.html` after the demo run."""
    path = tmp_path_factory.mktemp("report") / "report.html"
    run_snakemake(demo_run.workdir, "--report", str(path), numba_cache=numba_cache)
    return path


def test_report_holds_every_plot_and_table_with_its_caption(report_html):
    from snakemake_report import report_results
    html = report_html.read_text()
    results = report_results(html)
    plots = {entry["labels"]["plot"]: entry for path, entry in results.items() if path.startswith("results/plots/")}
    assert set(plots) == PLOT_LABELS
    tables = {entry["labels"]["table"] for path, entry in results.items() if path.startswith("results/stats/")}
    assert tables == {"flagstat", "summary", "gpualign map"}
    for entry in results.values():
        assert entry["labels"]["sample"] == "demo"
        assert "demo" in entry["caption"] and len(entry["caption"]) > 150, entry["caption"]   # a caption each
    assert plots["MAPQ"]["data_uri"].startswith("data:image/png;")
    assert "samtools stats" in plots["MAPQ"]["caption"] and "bedcov" in plots["coverage"]["caption"]
    assert "short reads mapped on the GPU" in html   # the workflow's description (workflow/report/workflow.rst)


def png_size(path: Path) -> tuple:
    """(width, height) from a PNG's header."""
    head = path.read_bytes()[:24]
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")


def test_report_plots_are_visible_in_a_browser(demo_run, report_html, tmp_path):
    """Headless Chromium opens report.html, clicks Plots (the demo is its only subcategory) and each
    plot's eye button: every plot shows as a loaded PNG of its file's size, inside the window, on top.
    GPUALIGN_REPORT_SCREENSHOT=docs/report.png keeps a screenshot (the README's)."""
    from chromium import Chromium, find_chromium
    from snakemake_report import view_results
    binary = find_chromium()
    if binary is None:
        pytest.skip("no chromium to look at the report with (Debian: apt-get install chromium)")
    with Chromium(binary, width=1600, height=1000) as browser:
        browser.navigate(report_html.as_uri())
        intro = browser.evaluate("document.body.innerText")
        assert "short reads mapped on the GPU" in intro   # the workflow description, shown first
        views = view_results(browser, "Plots", "demo")
        assert browser.exceptions() == []
        browser.evaluate(r"""[...document.querySelectorAll("nav table tbody tr")]
            .find(tr => tr.textContent.includes("coverage")).querySelector("td:last-child a").click()""")
        screenshot = tmp_path / "report.png"
        browser.screenshot(str(screenshot))
    assert {view["labels"][1] for view in views} == PLOT_LABELS
    plots = demo_run.workdir / "results" / "plots" / "demo"
    for view in views:
        assert view["labels"][0] == "demo" and view["mime"] == "image/png", view
        png = plots / f"{PLOT_FILES[view['labels'][1]]}.png"
        assert (view["naturalWidth"], view["naturalHeight"]) == png_size(png), view
        assert view["width"] > 0 and view["height"] > 0 and view["visible"] and view["onTop"], view
    assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    keep = os.environ.get("GPUALIGN_REPORT_SCREENSHOT")
    if keep:
        shutil.copyfile(screenshot, keep)


def test_multiqc_report_of_the_demo(demo_run, numba_cache, tmp_path):
    """qc.multiqc: MultiQC's report of samtools' files and gpualign's map table (when multiqc is installed)."""
    if shutil.which("multiqc") is None:
        pytest.skip("no multiqc command (pip install multiqc: about 1 GB, so not a test dependency)")
    workdir = tmp_path / "run"
    shutil.copytree(demo_run.workdir, workdir, symlinks=True)
    result = run_snakemake(workdir, "--cores", "1", "--config", "qc={multiqc: true}", numba_cache=numba_cache)
    assert planned_jobs(result.output) == {"multiqc": 1, "all": 1}
    data = workdir / "results" / "multiqc" / "multiqc_data"
    assert (workdir / "results" / "multiqc" / "multiqc_report.html").stat().st_size > 100_000
    general = (data / "multiqc_general_stats.txt").read_text().splitlines()
    assert general[1].split("\t")[0] == "demo"
    assert {"multiqc_samtools_stats.txt", "multiqc_samtools_flagstat.txt", "multiqc_samtools_idxstats.txt"} <= \
        {p.name for p in data.iterdir()}
    table = next(data.glob("*gpualign_map*"))   # the custom-content table, one row per sample
    rows = [line.split("\t") for line in table.read_text().splitlines()]
    assert rows[1][0] == "demo" and int(float(dict(zip(rows[0], rows[1]))["reads"])) == fastq_records(DEMO_READS)


# ---- (h) duplicates across a sample's units -------------------------------------------------------


def test_units_of_a_library_are_marked_together_and_of_two_libraries_apart(tmp_path, numba_cache):
    """The demo's pairs as two units of each sample (the second a copy of the first, as a library
    sequenced on two lanes): sample same's units share a library, so the merge flags every pair of
    one unit as a copy of the other's (half the pairs); sample apart's units are two libraries, so
    nothing. Each unit's BAM holds its own duplicates (none); the metrics say so, one row a library."""
    workdir = make_workdir(tmp_path / "run")
    pairs = "\t".join(str(p.relative_to(REPO)) for p in DEMO_PAIRS)
    rows = [("same", "L1", "lib"), ("same", "L2", "lib"), ("apart", "L1", "libA"), ("apart", "L2", "libB")]
    (workdir / "units.tsv").write_text("sample\tunit\tfq1\tfq2\tlibrary\n" + "".join(
        f"{sample}\t{unit}\t{pairs}\t{lib}\n" for sample, unit, lib in rows))
    run_snakemake(workdir, "--cores", "2", "--config", "samples=units.tsv", numba_cache=numba_cache)
    n = fastq_records(DEMO_PAIRS[0])
    stats = workdir / "results" / "stats"
    same = read_metrics(stats / "same.duplication_metrics.txt")
    assert list(same) == ["lib"] and same["lib"]["READ_PAIRS_EXAMINED"] == 2 * n
    assert same["lib"]["READ_PAIR_DUPLICATES"] == n
    with pysam.AlignmentFile(str(workdir / "results" / "bam" / "same.bam")) as bam:
        flagged = [rec.get_tag("RG") for rec in bam if rec.is_duplicate]
    # equal qualities: the tie goes to the pair written first, L1's (the first unit) at every position
    assert len(flagged) == 2 * n and set(flagged) == {"same.L2"}
    apart = read_metrics(stats / "apart.duplication_metrics.txt")
    assert sorted(apart) == ["libA", "libB"]
    assert all(row["READ_PAIR_DUPLICATES"] == 0 and row["READ_PAIRS_EXAMINED"] == n for row in apart.values())
    unit = read_metrics(workdir / "results" / "units" / "same" / "L2.duplication_metrics.txt")
    assert unit["lib"]["READ_PAIR_DUPLICATES"] == 0
    assert "duplicates marked across them by library" in (workdir / "logs" / "merge_units" / "same.log").read_text()
