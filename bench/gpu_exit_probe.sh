#!/usr/bin/env bash
# Where a run's start and exit go, on the lent GPU machine: bench/exit_probe/sitecustomize.py goes into the wheels'
# folder, so every python3 there logs when the interpreter reached site, when os._exit was called and what the
# process held then (VmRSS, smaps_rollup, and resident memory by kind of mapping); the B runs reset the CUDA context
# before exiting (PROBE_RESET=1), or run under another setting given as ENV_B (PROBE_TRIM=1: malloc_trim at the exit,
# timed). The chrX sets are traced as bench/gpu_trace.sh does; the table: wall, interpreter start, site to the first
# step, the steps, os._exit to the end. It also prints the host's transparent huge pages mode and CPU topology.
#   run(command="bash bench/gpu_exit_probe.sh", carry=[".whlreal", ".peer", ".sim", ".data"])
set -uo pipefail
export WHL=${WHL:-.whlreal}
# in one process: a detached command (gpualign/detach.py) leaves the teardown to a child whose stderr is gone by then,
# and the probe is there to measure that teardown
export GPUALIGN_NO_DETACH=1
source bench/device_env.sh 2> /dev/null || exit 1
cp bench/exit_probe/sitecustomize.py /tmp/site/sitecustomize.py
echo "THP: $(cat /sys/kernel/mm/transparent_hugepage/enabled) defrag: $(cat /sys/kernel/mm/transparent_hugepage/defrag)"
lscpu | grep -E "^(Model name|Thread|Core|Socket|CPU\(s\)|NUMA node\(s\))"
python3 -X importtime -c "import sys; sys.modules.setdefault('scipy', None); sys.modules.setdefault('scipy.linalg', None); \
import gpualign.cli, numba; from gpualign.mapper import map_reads; from gpualign.backends import cuda" 2> $OUT/importtime.txt
SETS=${SETS:-"chrX_se chrX_pe"} CHRX_READS=${CHRX_READS:-2000000} CHRX_PAIRS=${CHRX_PAIRS:-1000000} K_CHRX=12 \
  ENV_B="${ENV_B:-PROBE_RESET=1}" RUNS=${RUNS:-3} bash bench/gpu_trace.sh
rm -f /tmp/site/sitecustomize.py
mkdir -p /tmp/probe && tar -xzf $OUT/traces.tar.gz -C /tmp/probe
python3 - <<'PY'
import re
d = "/tmp/probe"
for line in open(f"{d}/walls.txt"):
    tag, s, e, _ = line.split()
    s, e = float(s.split("=")[1]), float(e.split("=")[1])
    log = open(f"{d}/log_{tag}.txt").read()
    m = re.search(r"\[probe\] site_at=([\d.]+) exit_at=([\d.]+) (\{.*?\})(.*)", log)
    rows = open(f"{d}/trace_{tag}.tsv").read().splitlines()
    t0 = float(re.search(r"t0_epoch=([\d.]+)", rows[0]).group(1))
    last = max(float(r.split("\t")[3]) for r in rows[2:] if not r.startswith("#"))
    site, ex = float(m.group(1)), float(m.group(2))
    print(f"{tag:10s} wall {e - s:.2f} interpreter {site - s:.3f} site->first step {t0 - site:.3f} steps {last:.3f} "
          f"os._exit->end {e - ex:.3f} {m.group(3)}{m.group(4)}")
    maps = re.search(r"\[probe-maps\].*", log)
    print("   ", maps.group(0) if maps else "")
PY
