"""Smoke test of the local Slurm cluster the workflow tests run on (tests/slurm/cluster.py).

Needs root and the Debian packages (tests/slurm/install.sh); skipped otherwise.
"""

import shlex
import time

import pytest
from cluster import local_slurm, skip_reason

pytestmark = pytest.mark.skipif(bool(skip_reason()), reason=skip_reason() or "n/a")


def test_gpu_and_cpu_jobs_complete(tmp_path):
    with local_slurm(tmp_path / "cluster") as cluster:
        out = tmp_path / "out"
        out.mkdir()

        def sbatch(*args):
            return cluster.run("sbatch", "--parsable", f"--chdir={out}", *args).stdout.strip().split(";")[0]

        gpu = sbatch("--job-name=gpujob", "--gres=gpu:1", "--cpus-per-gpu=1",
                     "--wrap", "echo hi > out.txt; echo $CUDA_VISIBLE_DEVICES > gpu.txt")
        cpu = sbatch("--job-name=X", "--output=cpu.log", "--wrap", "echo cpu > cpu.txt")
        # snakemake's jobstep executor runs srun inside the job with SLURM_* removed from the environment
        step = sbatch("--wrap", "env -u SLURM_CONF srun echo step > step.txt")
        gpus = sbatch("--job-name=X", "--gpus=1", "--mem=100", "--wrap", "true")  # snakemake's way to ask

        assert cluster.wait_jobs([gpu, cpu, gpus, step]) == dict.fromkeys([gpu, cpu, gpus, step], "COMPLETED")
        assert (out / "out.txt").read_text() == "hi\n"
        assert (out / "gpu.txt").read_text() == "0\n"  # the fake GPU is "device 0"
        assert (out / "cpu.txt").read_text() == "cpu\n"
        assert (out / "step.txt").read_text() == "step\n"

        # snakemake-executor-plugin-slurm's status query with --slurm-status-command squeue
        # (the exact command it builds), filtered by job name = the workflow's run uuid.
        query = "squeue --format='%i|%T' --states=all --noheader --name X"
        res = cluster.run(*shlex.split(query))
        assert sorted(res.stdout.split()) == sorted([f"{cpu}|COMPLETED", f"{gpus}|COMPLETED"])

        # Its default, sacct, cannot work without slurmdbd: Slurm 22.05 does not ask slurmctld.
        # If this ever starts passing, sacct became usable as status command.
        res = cluster.run("sacct", "-X", "--parsable2", "--noheader", "--format=JobIdRaw,State", "--name", "X",
                          check=False)
        assert res.returncode != 0 and "accounting storage is disabled" in res.stderr, res
        # `sacct -c` reads the jobcomp file instead (finished jobs only; it ignores --name).
        res = cluster.run("sacct", "-c", "-X", "--parsable2", "--noheader", "--format=JobIdRaw,JobName,State")
        assert {f"{gpu}|gpujob|COMPLETED", f"{cpu}|X|COMPLETED"} <= set(res.stdout.split())

        jobcomp = cluster.jobcomp_log.read_text()
        for job in (gpu, cpu, gpus, step):
            assert f"JobId={job} " in jobcomp
        assert jobcomp.count("JobState=COMPLETED") == 4

        # The GPU is a real constraint: two one-GPU jobs do not overlap, and a CPU job does not
        # wait behind them (backfill).
        g1 = sbatch("--gpus=1", "--wrap", "sleep 30")
        g2 = sbatch("--gpus=1", "--wrap", "true")
        c1 = sbatch("--wrap", "true")
        assert cluster.wait_jobs([c1], timeout=20) == {c1: "COMPLETED"}
        states = dict(line.split("|") for line in cluster.run(
            "squeue", "--noheader", "--format=%i|%T", "--jobs", f"{g1},{g2}").stdout.split())
        assert states == {g1: "RUNNING", g2: "PENDING"}
        leftover_job = g1  # still running: stopping the cluster must cancel it and kill its processes

    # stopped: nothing of it runs any more, and the running job was cancelled on the way out
    assert cluster.leftover_processes() == []
    assert all(p.poll() is not None for p in cluster.procs.values())
    assert f"JobId={leftover_job} " in cluster.jobcomp_log.read_text()


def test_restart_in_same_session(tmp_path):
    # Twice in a row in one process, and the second time in the same (reused) workdir.
    for round_ in range(2):
        t0 = time.monotonic()
        with local_slurm(tmp_path, cpus=4) as cluster:
            started = time.monotonic() - t0
            assert cluster.run("sinfo", "--noheader", "--Node", "--format=%N %T %c").stdout.split() == [
                cluster.nodename, "idle", "4"]  # cpus= beyond nproc is accepted (config_overrides)
            job = cluster.run("sbatch", "--parsable", f"--chdir={tmp_path}", "--wrap", "true").stdout.strip()
            # a cold start forgets the first round's jobs, so ids restart at 1
            assert job == "1"
            assert cluster.wait_jobs([job]) == {job: "COMPLETED"}
        assert cluster.leftover_processes() == []
        assert started < 30, f"round {round_}: start took {started:.1f}s"
