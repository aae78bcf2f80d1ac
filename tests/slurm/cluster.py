"""A throw-away one-node Slurm cluster (Debian's Slurm 22.05 + MUNGE) for integration tests.

    with local_slurm(tmp_path) as cluster:
        subprocess.run(["sbatch", "--wrap", "true"], env=cluster.env, check=True)

Everything (config, state, spool, logs, pid files, MUNGE key and socket, client wrappers) lives
under `workdir`: nothing on the machine is touched (no /etc/slurm, no /run/munge), and clusters can
run one after the other, or side by side, in one session. The daemons run in the foreground (-D / -F) as children of this process, so their PIDs
are known without pid-file races and they are reaped on exit.

Job status: with AccountingStorageType=accounting_storage/none Slurm 22.05's sacct refuses
("Slurm accounting storage is disabled", exit 1): it needs slurmdbd and a database, it does not
fall back to slurmctld. `sacct -c` reads the jobcomp file, but only finished jobs and ignoring
--name. Use squeue: MinJobAge=3600 keeps finished jobs in `squeue --states=all`; for
snakemake-executor-plugin-slurm pass `--slurm-status-command squeue`.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

BINARIES = ("munged", "munge", "unmunge", "slurmctld", "slurmd", "sbatch", "squeue", "sinfo", "scontrol",
            "scancel", "sacct")
CLIENTS = ("sacct", "sacctmgr", "salloc", "sattach", "sbatch", "sbcast", "scancel", "scontrol", "sdiag", "sinfo",
           "sprio", "squeue", "sreport", "srun", "sshare", "sstat", "strigger")
START_TIMEOUT = 60.0
STOP_TIMEOUT = 30.0
FINAL_STATES = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "PREEMPTED",
                "BOOT_FAIL", "DEADLINE"}


def _path() -> str:
    # The daemons live in /usr/sbin, which a non-login root shell or CI may leave off PATH.
    return os.environ.get("PATH", "/usr/bin:/bin") + ":/usr/sbin:/sbin"


def skip_reason() -> str:
    """Why local_slurm cannot run here ('' when it can), for pytest.mark.skipif."""
    if os.geteuid() != 0:
        return "a local Slurm cluster needs root (SlurmUser=root, slurmd starts the jobs)"
    missing = [b for b in BINARIES if shutil.which(b, path=_path()) is None]
    if missing:
        return f"Slurm/MUNGE not installed (missing {', '.join(missing)}): run tests/slurm/install.sh"
    return ""


def slurm_available() -> bool:
    return not skip_reason()


class SlurmClusterError(RuntimeError):
    pass


@dataclass
class SlurmCluster:
    workdir: Path
    conf: Path  # slurm.conf; SLURM_CONF in `env` points every client command at it
    jobcomp_log: Path  # one line per finished job (jobcomp/filetxt)
    nodename: str
    cpus: int
    env: dict[str, str]  # environment for subprocesses: SLURM_CONF, PATH with workdir/bin (client wrappers)
    marker: str = field(repr=False)  # NAME=VALUE put in the daemons' environment to find them and their children
    procs: dict[str, subprocess.Popen] = field(default_factory=dict, repr=False)

    def run(self, *args: str, check: bool = True, timeout: float = 30.0) -> subprocess.CompletedProcess:
        """Run a command against this cluster; a failure's message carries its output and the daemon logs."""
        try:
            res = subprocess.run(args, env=self.env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired as e:
            raise SlurmClusterError(f"{' '.join(args)} timed out after {timeout}s\n{self.logs()}") from e
        if check and res.returncode != 0:
            raise SlurmClusterError(
                f"{' '.join(args)} failed ({res.returncode}):\n{res.stdout}{res.stderr}\n{self.logs()}")
        return res

    def logs(self, lines: int = 40) -> str:
        """Tails of the daemon logs and the jobcomp file, for failure messages."""
        out = []
        for f in sorted((self.workdir / "log").glob("*")):
            text = f.read_text(errors="replace").splitlines()[-lines:]
            out.append(f"----- {f} (last {len(text)} lines) -----\n" + "\n".join(text))
        return "\n".join(out)

    def wait_jobs(self, job_ids, timeout: float = 60.0) -> dict[str, str]:
        """Wait until all jobs reach a final state; returns {job id: state} as squeue reports it."""
        ids = [str(j) for j in job_ids]
        deadline = time.monotonic() + timeout
        while True:
            res = self.run("squeue", "--states=all", "--noheader", "--format=%i|%T", "--jobs", ",".join(ids))
            states = dict(line.split("|", 1) for line in res.stdout.split())
            if all(states.get(j) in FINAL_STATES for j in ids):
                return states
            if time.monotonic() > deadline:
                queue = self.run("squeue", "--states=all", "--format=%i %j %T %R", check=False).stdout
                raise SlurmClusterError(f"jobs {ids} not finished after {timeout}s: {states}\n{queue}\n{self.logs()}")
            time.sleep(0.3)

    def leftover_processes(self) -> list[int]:
        """Live processes of this cluster: daemons and slurmstepds (marker), and job processes."""
        job_env = f"SLURM_CONF={self.conf}".encode()
        found = []
        for p in Path("/proc").iterdir():
            if not p.name.isdigit() or int(p.name) == os.getpid():
                continue
            try:
                env = set((p / "environ").read_bytes().split(b"\0"))  # empty for zombies
            except OSError:  # gone meanwhile
                continue
            if self.marker.encode() in env or (
                    job_env in env and any(v.startswith(b"SLURM_JOB_ID=") for v in env)):
                found.append(int(p.name))
        return found


def _memory_mb() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) // 1024
    raise SlurmClusterError("no MemTotal in /proc/meminfo")


def _free_ports(n: int) -> list[int]:
    # The default ports (6817/6818) could clash with a leftover or parallel cluster;
    # the sockets are held together so that the n ports differ.
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(n)]
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]


def _slurm_conf(d: dict[str, Path], nodename: str, cpus: int, mem_mb: int, munge_socket: Path) -> str:
    # SlurmctldHost: slurmctld exits unless it names this host (`hostname -s`), so "localhost" works only
    #   where that is the hostname; the address in brackets spares DNS.
    # AuthInfo: clients and daemons both read it, so all of them use our munged, not /run/munge.
    # SlurmdParameters=config_overrides: trust CPUs/RealMemory below rather than draining the node when
    #   the hardware differs (`cpus` may exceed nproc; containers misreport memory).
    # DefMemPerCPU: otherwise a job without --mem takes all the node's memory, and jobs run one by one.
    # bf_interval=1: a CPU job queued behind a GPU job waiting for the one GPU is backfilled within a
    #   second instead of 30.
    # MinJobAge=3600: finished jobs stay in squeue (the only status source without slurmdbd).
    ctld_port, slurmd_port = _free_ports(2)
    return f"""\
ClusterName=gpualigntest
SlurmctldHost={nodename}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={munge_socket}
StateSaveLocation={d["state"]}
SlurmdSpoolDir={d["spool"]}
SlurmctldPidFile={d["run"]}/slurmctld.pid
SlurmdPidFile={d["run"]}/slurmd.pid
SlurmctldLogFile={d["log"]}/slurmctld.log
SlurmdLogFile={d["log"]}/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc={d["log"]}/jobcomp.log
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SlurmdParameters=config_overrides
SchedulerParameters=bf_interval=1
GresTypes=gpu
MpiDefault=none
ReturnToService=2
MinJobAge=3600
KillWait=5
InactiveLimit=0
DefMemPerCPU={max(1, min(1024, mem_mb // cpus))}
NodeName={nodename} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={mem_mb} Gres=gpu:1 State=UNKNOWN
PartitionName=debug Nodes={nodename} Default=YES MaxTime=INFINITE State=UP
"""


@contextlib.contextmanager
def local_slurm(workdir: Path, cpus: int | None = None, extra_conf: str = ""):
    """Start munged, slurmctld and slurmd under `workdir`, yield a SlurmCluster, stop them all.

    cpus: CPUs the node offers (default: nproc); extra_conf: lines appended to slurm.conf.
    Raises SlurmClusterError, with the daemon logs, if the node is not idle within START_TIMEOUT.
    """
    reason = skip_reason()
    if reason:
        raise SlurmClusterError(reason)
    workdir = Path(workdir).resolve()
    d = {k: workdir / k for k in ("etc", "bin", "state", "spool", "log", "run", "munge")}
    for k, p in d.items():
        if k in ("state", "spool", "log", "run"):  # a reused workdir starts afresh: no old jobs, no old logs
            shutil.rmtree(p, ignore_errors=True)
        p.mkdir(parents=True, exist_ok=True)
    # munged wants its key directory writable by the owner only, its socket directory enterable by all.
    d["munge"].chmod(0o755)
    # A unix socket path must fit in 108 bytes, and pytest's tmp_path can be deep.
    sockdir = d["munge"] if len(str(d["munge"])) < 80 else Path(tempfile.mkdtemp(prefix="munge-"))
    sockdir.chmod(0o755)
    munge_socket = sockdir / "munge.socket"

    nodename = socket.gethostname().split(".")[0]
    cpus = cpus or os.cpu_count() or 1
    mem_mb = max(256, _memory_mb() - max(512, _memory_mb() // 10))  # leave room for the OS
    conf = d["etc"] / "slurm.conf"
    conf.write_text(_slurm_conf(d, nodename, cpus, mem_mb, munge_socket) + extra_conf)
    # The fake GPU: Slurm 22.05 ignores a gpu line without File= (the node reports 0 GPUs and goes
    # INVAL), but any existing file does as the "device"; jobs then see CUDA_VISIBLE_DEVICES=0.
    (d["etc"] / "gres.conf").write_text(f"AutoDetect=off\nNodeName={nodename} Name=gpu File=/dev/null\n")

    # Our own key, not /etc/munge/munge.key: that one may be missing and belongs to the munge user,
    # while munged wants the key owned by the user it runs as (root here) and private to it.
    key = d["munge"] / "munge.key"
    if not key.exists():
        key.write_bytes(secrets.token_bytes(1024))
    key.chmod(0o600)

    # Client wrappers that set SLURM_CONF themselves, first on PATH (jobs inherit it via sbatch's
    # --export=ALL): snakemake's slurm-jobstep executor strips SLURM_* before its srun inside the
    # job, and srun without SLURM_CONF looks only at /etc/slurm and DNS.
    for name in CLIENTS:
        real = shutil.which(name, path=_path())
        if real:
            shim = d["bin"] / name
            shim.write_text(f"#!/bin/sh\nexport SLURM_CONF={shlex.quote(str(conf))}\nexec {shlex.quote(real)} \"$@\"\n")
            shim.chmod(0o755)
    # Drop a surrounding job's SLURM_* (tests run inside a real Slurm job) so it cannot leak in.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SBATCH_", "SRUN_", "SALLOC_"))}
    env.update(SLURM_CONF=str(conf), PATH=f"{d['bin']}:{_path()}")
    marker = f"GPUALIGN_LOCAL_SLURM={secrets.token_hex(8)}"
    daemon_env = dict(env, **dict([marker.split("=", 1)]))
    cluster = SlurmCluster(workdir, conf, d["log"] / "jobcomp.log", nodename, cpus, env, marker)

    def start(name: str, *cmd: str) -> None:
        with open(d["log"] / f"{name}.out", "ab") as out:  # the child keeps its own copy of the fd
            cluster.procs[name] = subprocess.Popen(
                cmd, env=daemon_env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                cwd=workdir, start_new_session=True)  # a Ctrl-C in the terminal must not reach them

    def wait_for(what: str, ok) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            with contextlib.suppress(subprocess.TimeoutExpired):  # a hung client: try again, up to the deadline
                if ok():
                    return
            for name, p in cluster.procs.items():
                if p.poll() is not None:
                    raise SlurmClusterError(f"{name} exited ({p.returncode}) while waiting for {what}\n{cluster.logs()}")
            if time.monotonic() > deadline:
                raise SlurmClusterError(f"timed out after {START_TIMEOUT}s waiting for {what}\n{cluster.logs()}")
            time.sleep(0.1)

    def quiet(*cmd: str, **kw) -> subprocess.CompletedProcess:
        return subprocess.run(cmd, env=env, capture_output=True, timeout=10, **kw)

    def munge_ok() -> bool:
        cred = quiet("munge", "-n", "-S", str(munge_socket))
        return cred.returncode == 0 and quiet("unmunge", "-S", str(munge_socket), input=cred.stdout).returncode == 0

    def node_idle() -> bool:
        state = quiet("sinfo", "--noheader", "--Node", "--format=%T").stdout.decode().strip()
        if state.startswith(("inval", "drain")):  # a config mismatch, which waiting will not heal
            node = quiet("scontrol", "show", "node").stdout.decode()
            raise SlurmClusterError(f"node is {state}:\n{node}\n{cluster.logs()}")
        return state == "idle"

    try:
        start("munged", "munged", "--foreground", "--force", f"--socket={munge_socket}", f"--key-file={key}",
              f"--pid-file={d['run']}/munged.pid", f"--seed-file={d['munge']}/munged.seed")
        wait_for("munged to answer", munge_ok)
        start("slurmctld", "slurmctld", "-D", "-c", "-f", str(conf))
        wait_for("slurmctld to answer", lambda: quiet("scontrol", "ping").returncode == 0)
        start("slurmd", "slurmd", "-D", "-c", "-N", nodename, "-f", str(conf))
        wait_for("the node to become idle", node_idle)
        yield cluster
    finally:
        _stop(cluster)
        if sockdir != d["munge"]:
            shutil.rmtree(sockdir, ignore_errors=True)


def _stop(cluster: SlurmCluster) -> None:
    procs = cluster.procs

    def alive(name: str) -> bool:
        return name in procs and procs[name].poll() is None

    # Cancel jobs while slurmd still runs, so that slurmstepd kills the jobs' processes.
    if alive("slurmctld") and alive("slurmd"):
        with contextlib.suppress(subprocess.TimeoutExpired):
            subprocess.run(["scancel", "--user=root"], env=cluster.env, capture_output=True, timeout=10)
            deadline = time.monotonic() + STOP_TIMEOUT / 2
            while time.monotonic() < deadline:
                res = subprocess.run(["squeue", "--noheader", "--states=all", "--format=%T"], env=cluster.env,
                                     capture_output=True, text=True, timeout=10)
                if res.returncode != 0 or set(res.stdout.split()) <= FINAL_STATES:
                    break
                time.sleep(0.2)
    # slurmd first (it reports to slurmctld), munged last (the others authenticate through it).
    for name in ("slurmd", "slurmctld", "munged"):
        if name not in procs:
            continue
        if alive(name):
            procs[name].terminate()
        try:
            procs[name].wait(timeout=STOP_TIMEOUT / 3)
        except subprocess.TimeoutExpired:
            procs[name].kill()
            procs[name].wait()
    # slurmstepd is double-forked away from slurmd; whatever of ours outlived the above goes now.
    # (Exited ones may stay zombies of PID 1 for a moment; they no longer run.)
    deadline = time.monotonic() + 5
    while (pids := cluster.leftover_processes()) and time.monotonic() < deadline:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.1)
