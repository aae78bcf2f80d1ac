"""One GPU per align job on a host with several: claimed through a lock file per device.

Snakemake's `--resources gpu=N` only caps how many GPU jobs run at once; it does not say which
device each one gets, and every CUDA process sees GPU 0 first. So an align job, before CUDA starts
in its process, takes the first device whose lock it can get (flock, non-blocking) and narrows
CUDA_VISIBLE_DEVICES to it. The kernel drops the lock when the process ends, however it ends
(SIGKILL included), so a crashed job never leaves a device claimed.

- Under a batch system that assigns devices itself (SLURM_JOB_ID set, as with --gpus=1), the job
  uses what it was given and claims nothing.
- CUDA_VISIBLE_DEVICES set beforehand restricts the choice to those devices (in that order).
- With more jobs than devices, a job waits for a device to come free.
"""

import fcntl
import os
import tempfile
import time

LOCK_DIR = os.path.join(tempfile.gettempdir(), "gpualign-gpu-locks")   # host-local, shared by users
_held = []   # open lock files, kept for the life of the process


def visible_devices(environ=os.environ) -> list[str]:
    """Device ids this process may use: CUDA_VISIBLE_DEVICES's, else the driver's GPUs."""
    given = environ.get("CUDA_VISIBLE_DEVICES")
    if given is not None:
        return [d.strip() for d in given.split(",") if d.strip()]
    try:   # one entry per GPU the NVIDIA driver knows; CUDA numbers them 0..n-1
        return [str(i) for i in range(len(os.listdir("/proc/driver/nvidia/gpus")))]
    except OSError:
        return []


def try_lock(device: str, lock_dir: str):
    """The open, locked file of `device`, or None when another process holds it."""
    os.makedirs(lock_dir, mode=0o1777, exist_ok=True)
    path = os.path.join(lock_dir, f"gpu{device.replace('/', '_')}.lock")
    fh = open(path, "a+")
    try:
        os.chmod(path, 0o666)
    except OSError:
        pass   # another user's file: still lockable
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        fh.close()
        return None
    return fh


def claim_gpu(log=None, environ=os.environ, lock_dir: str = LOCK_DIR, poll_s: float = 1.0) -> str | None:
    """Claim a free GPU for this process and set CUDA_VISIBLE_DEVICES to it; the device id, or
    None when there is nothing to choose (no GPU, one GPU, or a batch system's assignment)."""
    if environ.get("SLURM_JOB_ID"):
        return None
    devices = visible_devices(environ)
    if len(devices) < 2:
        return None
    waited = False
    while True:
        for device in devices:
            fh = try_lock(device, lock_dir)
            if fh is not None:
                _held.append(fh)
                environ["CUDA_VISIBLE_DEVICES"] = device
                if log:
                    log(f"GPU {device} of {','.join(devices)} claimed (lock in {lock_dir})")
                return device
        if not waited and log:
            log(f"all GPUs ({','.join(devices)}) are claimed by other jobs; waiting for one")
        waited = True
        time.sleep(poll_s)
