"""The demo workflow through a real one-node Slurm cluster with the SLURM profile.

The cluster (tests/slurm/cluster.py) runs slurmctld, slurmd and munged on 127.0.0.1 with a fake
GPU gres, so align's GPU request is accepted and scheduled; its jobs fall back to the CPU backend.
Needs root and Debian's slurm-wlm and munge (tests/slurm/install.sh, which .ci/run calls).
"""

import os
import sys
from pathlib import Path

import pysam
import pytest

from slurm.cluster import local_slurm, skip_reason
from test_workflow import DEMO_READS, REPO, fastq_records, make_workdir, numba_cache, run_snakemake  # noqa: F401

pytestmark = pytest.mark.skipif(bool(skip_reason()), reason=skip_reason() or "n/a")


def records(bam: Path) -> list[str]:
    with pysam.AlignmentFile(str(bam)) as fh:
        return [rec.to_string() for rec in fh]


def jobcomp_entries(path: Path) -> list[dict]:
    """Slurm's job completion log: one line of KEY=VALUE fields per finished job."""
    entries = []
    for line in path.read_text().splitlines():
        entries.append(dict(field.split("=", 1) for field in line.split() if "=" in field))
    return entries


def test_demo_through_slurm_equals_the_local_run(tmp_path, numba_cache, monkeypatch):
    local = make_workdir(tmp_path / "local")
    run_snakemake(local, "--cores", "2", numba_cache=numba_cache)

    with local_slurm(tmp_path / "cluster") as cluster:
        for key, value in cluster.env.items():
            monkeypatch.setenv(key, value)
        # jobs run the test's Python (snakemake, pysam, gpualign) from the same PATH
        monkeypatch.setenv("PATH", os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]))
        work = make_workdir(tmp_path / "slurm")
        result = run_snakemake(
            work, "--profile", str(REPO / "workflow" / "profiles" / "slurm"),
            "--slurm-status-command", "squeue",   # no slurmdbd here, so no sacct
            "--slurm-no-account", "--slurm-init-seconds-before-status-checks", "1",
            "--jobs", "2", "--latency-wait", "5",
            # the node has as many CPUs as this host; a job asking for more would wait forever
            "--set-threads", f"align={min(2, cluster.cpus)}", f"merge_units={min(2, cluster.cpus)}",
            f"index_reference={min(2, cluster.cpus)}",
            numba_cache=numba_cache)
        # snakemake puts the rule in each job's comment; --gpus=1 shows as the job's TRES request
        queue = cluster.run("squeue", "--states=all", "--noheader",
                            "--Format=Comment:60,State:15,tres-per-job:30").stdout
    finished = jobcomp_entries(cluster.jobcomp_log)

    # every job went through sbatch and completed there, align with its GPU request
    rules = ["download_reference", "mask_reference", "pack_reference", "index_reference", "align", "merge_units",
             "stats", "map_summary", "plots"]
    assert len(finished) == len(rules), result.output[-3000:]
    assert {e["JobState"] for e in finished} == {"COMPLETED"}, finished
    jobs = {line.split()[0]: line.split()[1:] for line in queue.splitlines()}
    assert {f"rule_{r}" for r in rules} <= {c.split("_wildcards")[0] for c in jobs}, queue
    assert all(fields[0] == "COMPLETED" for fields in jobs.values()), queue
    requested = {c.split("_wildcards")[0]: fields[1] for c, fields in jobs.items()}
    assert "gpu" in requested["rule_align"] and "gpu" not in requested["rule_stats"], queue

    bam = work / "results" / "bam" / "demo.bam"
    assert records(bam) == records(local / "results" / "bam" / "demo.bam")
    assert len(records(bam)) == fastq_records(DEMO_READS)
    assert (work / "results" / "stats" / "demo.summary.tsv").exists()
