"""One GPU per job (gpualign.workflow.gpus): the devices CUDA_VISIBLE_DEVICES names, and a claim that
gives concurrent jobs different GPUs (none under Slurm, or with one GPU)."""

import select
import subprocess
import sys

from gpualign.workflow.gpus import claim_gpu, visible_devices


def test_visible_devices():
    assert visible_devices({"CUDA_VISIBLE_DEVICES": "2, 5"}) == ["2", "5"]
    assert visible_devices({"CUDA_VISIBLE_DEVICES": ""}) == []


CLAIM = """
import os, sys, time
from gpualign.workflow.gpus import claim_gpu
env = {"CUDA_VISIBLE_DEVICES": "0,1"}
print(claim_gpu(environ=env, lock_dir=sys.argv[1], poll_s=0.05), env["CUDA_VISIBLE_DEVICES"], flush=True)
sys.stdin.readline()   # hold the claim until told to exit
"""


def test_concurrent_jobs_claim_different_gpus_and_a_third_waits(tmp_path):
    def start():
        return subprocess.Popen([sys.executable, "-c", CLAIM, str(tmp_path)], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True)

    def line_within(proc, seconds):
        ready, _, _ = select.select([proc.stdout], [], [], seconds)
        return proc.stdout.readline().split() if ready else None

    with start() as first, start() as second:
        claimed = [line_within(p, 60) for p in (first, second)]
        assert sorted(claimed) == [["0", "0"], ["1", "1"]]
        with start() as third:
            assert line_within(third, 1.5) is None   # both GPUs taken: it waits
            first.kill()   # a killed job's claim is freed by the kernel
            first.wait()
            assert line_within(third, 60) == claimed[0]
            for p in (second, third):
                p.stdin.close()
                p.wait(timeout=30)


def test_no_claim_under_slurm_or_with_one_gpu(tmp_path):
    env = {"CUDA_VISIBLE_DEVICES": "0,1", "SLURM_JOB_ID": "7"}
    assert claim_gpu(environ=env, lock_dir=str(tmp_path)) is None
    assert env["CUDA_VISIBLE_DEVICES"] == "0,1"
    env = {"CUDA_VISIBLE_DEVICES": "3"}
    assert claim_gpu(environ=env, lock_dir=str(tmp_path)) is None
    assert env["CUDA_VISIBLE_DEVICES"] == "3"
