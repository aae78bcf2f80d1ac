"""Shared helpers of the device benchmarks (end_to_end.py, scaling.py, paired.py).

Timed commands run in a shell with their process tree polled by psutil for memory (the sum of
the tree's RSS, so a pipeline such as `bwa mem | samtools sort` counts both sides; getrusage
and /usr/bin/time only see the largest single process), and, where nvidia-smi exists, the
GPU's used memory polled every 100 ms. Alignments are scored with accuracy.py's rules, split
by genome region over several processes so that 10 M reads per aligner take seconds.
"""
from __future__ import annotations

import json
import multiprocessing
import os
import shlex
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import psutil
import pysam

import accuracy

T0 = time.perf_counter()
PY = sys.executable
MB = 1 << 20


def log(msg: str) -> None:
    """Progress line on stderr with wall time and seconds since start (flushed at once)."""
    print(f"[{time.strftime('%H:%M:%S')} +{time.perf_counter() - T0:7.1f}s] {msg}", file=sys.stderr, flush=True)


def out_dir() -> Path:
    path = Path(os.environ.get("OUT") or "/tmp/bench_out")
    path.mkdir(parents=True, exist_ok=True)
    return path


def q(value) -> str:
    return shlex.quote(str(value))


# --------------------------------------------------------------------------
# memory monitors

class TreeMonitor(threading.Thread):
    """Peak summed RSS of a process and all its descendants, polled every `interval` s."""

    def __init__(self, pid: int, interval: float = 0.1):
        super().__init__(daemon=True)
        self.pid, self.interval = pid, interval
        self.peak = 0
        self._halt = threading.Event()

    def run(self):
        try:
            root = psutil.Process(self.pid)
        except psutil.Error:
            return
        while not self._halt.is_set():
            total = 0
            try:
                procs = [root] + root.children(recursive=True)
            except psutil.Error:
                break
            for proc in procs:
                try:
                    total += proc.memory_info().rss
                except psutil.Error:
                    pass
            self.peak = max(self.peak, total)
            self._halt.wait(self.interval)

    def stop(self) -> int:
        self._halt.set()
        self.join()
        return self.peak


class GpuMonitor:
    """Peak GPU memory used above the level at start (MiB), from `nvidia-smi -lms 100`."""

    def __init__(self):
        self.proc = None
        self.baseline = 0
        self.peak = 0
        if shutil.which("nvidia-smi") is None:
            return
        self.baseline = self._used_now()
        self.proc = subprocess.Popen(
            ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits", "-lms", "100"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    @staticmethod
    def _used_now() -> int:
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                                 capture_output=True, text=True, timeout=20).stdout
            return int(out.split()[0])
        except (OSError, ValueError, IndexError, subprocess.TimeoutExpired):
            return 0

    def _read(self):
        for line in self.proc.stdout:
            try:
                self.peak = max(self.peak, int(line.split()[0]))   # first GPU only
            except (ValueError, IndexError):
                pass

    def stop(self) -> int | None:
        if self.proc is None:
            return None
        self.proc.terminate()
        self.proc.wait()
        return max(0, self.peak - self.baseline)


# --------------------------------------------------------------------------
# running commands

def run_timed(command: str, label: str, logfile: Path, gpu: bool = False, check: bool = True) -> dict:
    """Run a bash command (pipefail), its stderr appended to logfile under a header.

    Returns wall seconds, peak RSS of the process tree (MiB), peak GPU memory (MiB) when gpu,
    the return code, and the command's stderr lines."""
    with open(logfile, "a") as fh:
        fh.write(f"\n===== {label}: {command}\n")
    log(f"{label}: {command}")
    gpumon = GpuMonitor() if gpu else None
    err_path = Path(str(logfile) + ".part")
    with open(err_path, "w") as err:
        start = time.perf_counter()
        proc = subprocess.Popen(["bash", "-o", "pipefail", "-c", command], stdout=subprocess.DEVNULL, stderr=err)
        mon = TreeMonitor(proc.pid)
        mon.start()
        rc = proc.wait()
        wall = time.perf_counter() - start
        peak = mon.stop()
    gpu_peak = gpumon.stop() if gpumon else None
    lines = err_path.read_text(errors="replace").splitlines()
    err_path.unlink()
    with open(logfile, "a") as fh:
        fh.write("\n".join(lines) + f"\n===== {label}: rc {rc}, {wall:.2f} s, peak RSS {peak / MB:.0f} MiB\n")
    result = {"wall_s": round(wall, 3), "peak_rss_mb": round(peak / MB, 1), "rc": rc, "stderr": lines}
    if gpu:
        result["peak_gpu_mb"] = gpu_peak
    log(f"{label}: rc {rc}, {wall:.2f} s, peak RSS {peak / MB:.0f} MiB"
        + (f", peak GPU {gpu_peak} MiB" if gpu_peak is not None else ""))
    if check and rc != 0:
        tail = "\n".join(lines[-30:])
        raise RuntimeError(f"{label} failed (rc {rc}): {command}\n{tail}")
    return result


def sort_from_stdin(bam: Path, threads: int) -> str:
    """Shell command reading SAM on stdin into a sorted, indexed BAM with pysam (the device has
    no samtools binary; pysam.sort runs samtools' own code in-process)."""
    return (f"{q(PY)} -c 'import pysam, sys; pysam.sort(\"-@\", sys.argv[1], \"-o\", sys.argv[2], \"-\"); "
            f"pysam.index(\"-@\", sys.argv[1], sys.argv[2])' {threads} {q(bam)}")


def sort_and_index_file(bam: Path, threads: int) -> str:
    """Shell command sorting an unsorted BAM in place and indexing it (pysam)."""
    tmp = Path(str(bam) + ".sorting.bam")
    return (f"{q(PY)} -c 'import os, pysam, sys; t, src, dst = sys.argv[1:]; "
            f"pysam.sort(\"-@\", t, \"-o\", dst, src); os.replace(dst, src); pysam.index(\"-@\", t, src)' "
            f"{threads} {q(bam)} {q(tmp)}")


def is_sorted_indexed(bam: Path) -> bool:
    if not (Path(str(bam) + ".bai").exists() or Path(str(bam) + ".csi").exists()):
        return False
    with pysam.AlignmentFile(str(bam), check_sq=False) as fh:
        return fh.header.to_dict().get("HD", {}).get("SO") == "coordinate"


def tool_version(command: str) -> str:
    """First line mentioning a version from a tool's output (bwa prints it on stderr)."""
    try:
        res = subprocess.run(command, shell=True, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    text = res.stdout + res.stderr
    for line in text.splitlines():
        if "ersion" in line or line[:1].isdigit():
            return line.strip()
    return text.strip().splitlines()[0] if text.strip() else ""


def files_size(prefix: Path) -> int:
    """Bytes of all files named PREFIX.* (an index on disk; links, such as strobealign's link to
    the reference, not counted)."""
    return sum(p.stat().st_size for p in prefix.parent.glob(prefix.name + ".*")
               if p.is_file() and not p.is_symlink())


def done_marker(path: Path) -> Path:
    return Path(str(path) + ".done")


def cached(path: Path, make, what: str):
    """(make(), False), or (what it returned before, True) when path was completed by an
    earlier run (a .done marker beside it): inputs are deterministic, so a warm machine reuses
    them across calls."""
    marker = done_marker(path)
    if marker.exists():
        log(f"{what}: reusing {path}")
        return json.loads(marker.read_text() or "null"), True
    start = time.perf_counter()
    info = make()
    log(f"{what}: {time.perf_counter() - start:.1f} s")
    marker.write_text(json.dumps(info))
    return info, False


# --------------------------------------------------------------------------
# scoring (accuracy.py's rules), parallel over regions of each BAM

def _regions(bam: Path, parts: int):
    """Genome cut into about `parts` intervals (contig, start, end), plus the unplaced '*'."""
    with pysam.AlignmentFile(str(bam), check_sq=False) as fh:
        contigs = list(zip(fh.references, fh.lengths))
    total = sum(length for _, length in contigs) or 1
    step = max(1, total // max(1, parts))
    regions = []
    for name, length in contigs:
        for start in range(0, length, step):
            regions.append((name, start, min(length, start + step)))
    return regions + [("*", 0, 0)]


def _read_number(name: str, prefix: str = "r") -> int:
    head = name.split(":", 1)[0]
    return int(head[1:]) if head[:1] == prefix and head[1:].isdigit() else -1


def _read_index(rec, paired: bool) -> int:
    """0-based index of a record's read: r{i} -> i-1; mate m of p{i} -> 2(i-1)+m-1; -1 if unknown."""
    if not paired:
        number = _read_number(rec.query_name)
        return number - 1 if number > 0 else -1
    number, mate = _read_number(rec.query_name, "p"), accuracy.mate_of(rec)
    return 2 * (number - 1) + mate - 1 if number > 0 and mate else -1


SUMMED = ("primary", "mapped", "correct", "mapq20", "mapq20_correct", "proper")


def _add_scores(total: accuracy.Score, part: accuracy.Score) -> None:
    for field in SUMMED:
        setattr(total, field, getattr(total, field) + getattr(part, field))
    for field in ("mate_primary", "mate_correct"):
        setattr(total, field, [a + b for a, b in zip(getattr(total, field), getattr(part, field))])


def _score_region(task):
    """Score primary records whose leftmost position lies in one region (or the whole file)."""
    path, (contig, start, end), tolerance, whole, paired = task
    s = accuracy.Score(paired=paired)
    numbers, records = [], 0
    with pysam.AlignmentFile(path, check_sq=False) as fh:
        if whole:
            it = fh.fetch(until_eof=True)
        elif contig == "*":
            it = fh.fetch("*")
        else:
            it = fh.fetch(contig, start, end)
        for rec in it:
            if not whole and contig != "*" and not start <= rec.reference_start < end:
                continue                    # overlaps the region but starts in the previous one
            records += 1
            if rec.is_secondary or rec.is_supplementary:
                continue
            s.primary += 1
            numbers.append(_read_index(rec, paired))
            try:
                ok = accuracy.is_correct(rec, tolerance)
            except ValueError:
                ok = False
            if paired:
                s.count_mate(accuracy.mate_of(rec), rec.is_proper_pair, ok)
            if rec.is_unmapped:
                continue
            s.mapped += 1
            s.correct += ok
            if rec.mapping_quality >= accuracy.MAPQ_CUTOFF:
                s.mapq20 += 1
                s.mapq20_correct += ok
    return path, s, np.array(numbers, dtype=np.int64), records


def _total_records(path: str) -> int | None:
    try:
        with pysam.AlignmentFile(path, check_sq=False) as fh:
            return fh.mapped + fh.unmapped
    except (ValueError, OSError):
        return None


def score_bams(bams: dict, n_reads: int, threads: int, tolerance: int = 5, paired: bool = False) -> dict:
    """{label: bam} -> {label: accuracy.Score}; reads are numbered 1..n_reads by name
    (r{i}), or pairs p{i} 1..n_reads when paired, each mate counted as a read."""
    parts = max(1, threads // max(1, len(bams)))
    n_keys = 2 * n_reads if paired else n_reads
    tasks = []
    for bam in bams.values():
        indexed = is_sorted_indexed(Path(bam))
        regions = _regions(Path(bam), parts) if indexed else [("", 0, 0)]
        tasks += [(str(bam), region, tolerance, not indexed, paired) for region in regions]
    sums = {str(b): accuracy.Score(reads_in=n_keys, paired=paired) for b in bams.values()}
    numbers = {str(b): [] for b in bams.values()}
    records = {str(b): 0 for b in bams.values()}
    with multiprocessing.get_context("fork").Pool(max(1, min(threads, len(tasks)))) as pool:
        for path, s, nums, nrec in pool.imap_unordered(_score_region, tasks):
            _add_scores(sums[path], s)
            numbers[path].append(nums)
            records[path] += nrec
    scores = {}
    for label, bam in bams.items():
        path = str(bam)
        expected = _total_records(path) if is_sorted_indexed(Path(bam)) else None
        if expected is not None and expected != records[path]:
            log(f"WARNING: {label}: scored {records[path]} records but the index counts {expected}")
        nums = np.concatenate(numbers[path]) if numbers[path] else np.zeros(0, np.int64)
        known = (nums >= 0) & (nums < n_keys)
        counts = np.bincount(nums[known], minlength=n_keys)
        s = sums[path]
        s.unknown = int((~known).sum())
        s.missing = int((counts == 0).sum())
        s.duplicated = int((counts > 1).sum())
        scores[label] = s
    return scores


def add_accuracy(results: dict, bams: dict, n_reads: int, args, steps: dict, paired: bool = False) -> None:
    """Score each aligner's BAM (score_bams) into results[aligner]["accuracy"], timed in steps; warn
    where a read (paired: a mate) is not primary exactly once."""
    start = time.perf_counter()
    scores = score_bams(bams, n_reads, args.threads, args.tolerance, paired=paired)
    steps["accuracy_s"] = round(time.perf_counter() - start, 2)
    log(f"scored {len(scores)} BAMs in {steps['accuracy_s']} s")
    for aligner, score in scores.items():
        results[aligner]["accuracy"] = score_dict(score)
        if not score.once_each:
            log(f"WARNING: {aligner}: {'mates' if paired else 'reads'} not primary exactly once "
                f"(missing {score.missing}, duplicated {score.duplicated}, unknown {score.unknown})")


def score_dict(s: accuracy.Score) -> dict:
    return {
        "reads_in": s.reads_in, "primary": s.primary, "mapped": s.mapped, "correct": s.correct,
        "mapq20": s.mapq20, "mapq20_correct": s.mapq20_correct,
        "mapped_pct": round(accuracy.percent(s.mapped, s.reads_in), 3),
        "correct_pct": round(accuracy.percent(s.correct, s.reads_in), 3),
        "precision_mapq20_pct": round(accuracy.percent(s.mapq20_correct, s.mapq20), 3),
        "once_each": s.once_each, "missing": s.missing, "duplicated": s.duplicated, "unknown": s.unknown,
    } | (_paired_dict(s) if s.paired else {})


def _paired_dict(s: accuracy.Score) -> dict:
    pairs = s.reads_in // 2
    return {
        "proper": s.proper, "properly_paired_pct": round(accuracy.percent(s.proper, s.primary), 3),
        "r1_primary": s.mate_primary[0], "r2_primary": s.mate_primary[1],
        "r1_correct": s.mate_correct[0], "r2_correct": s.mate_correct[1],
        "r1_correct_pct": round(accuracy.percent(s.mate_correct[0], pairs), 3),
        "r2_correct_pct": round(accuracy.percent(s.mate_correct[1], pairs), 3),
    }


# --------------------------------------------------------------------------
# output

def machine_info() -> dict:
    info = {"cpus": os.cpu_count(), "python": sys.version.split()[0],
            "mem_gb": round(psutil.virtual_memory().total / 2 ** 30, 1)}
    if shutil.which("nvidia-smi"):
        res = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                             capture_output=True, text=True)
        info["gpu"] = res.stdout.strip()
    return info


def markdown(rows: list[dict], columns: list[str]) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(str(row.get(c, "")) for c in columns) + " |" for row in rows]
    return "\n".join(lines)


def write_tsv(rows: list[dict], columns: list[str], path: Path) -> None:
    with open(path, "w") as fh:
        fh.write("\t".join(columns) + "\n")
        for row in rows:
            fh.write("\t".join(str(row.get(c, "")) for c in columns) + "\n")


def fmt(value, digits: int = 1) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return f"{value:,}" if isinstance(value, int) else str(value)
