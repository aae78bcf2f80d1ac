#!/usr/bin/env bash
# Whether fresh memory is what slows a run on the lent GPU machine (a VM may give freed pages back to its host, so
# that a page a process touches first costs more than a recycled one: 2-3x there, 10-20x on the development VM,
# 2026-11-30): bench/mem_probe.py first, on the VM's own fresh memory, then each set in SETS mapped RUNS times,
# alternating: as it comes, and straight after a process has touched and freed TOUCH_GIB [8] GiB on 16 threads
# (recycled pages at hand). Traced as gpu_trace.sh does.
#   run(command="SETS=chrX_se CHRX_READS=2000000 K_CHRX=12 RUNS=3 bash bench/gpu_fresh.sh",
#       carry=[".whlreal", ".peer", ".sim", ".data"])
# $OUT gets mem_probe.txt, fresh.tar.gz (trace_<set><i>[t].tsv, log_*, walls.txt).
set -uo pipefail
START=$(date +%s)
export WHL=${WHL:-.whlreal}
source bench/device_env.sh 2> /dev/null || exit 1
{ python3 bench/mem_probe.py 4 1; python3 bench/mem_probe.py 4 16; sleep 4; python3 bench/mem_probe.py 4 16; } \
  > "$OUT/mem_probe.txt" 2>&1
cat "$OUT/mem_probe.txt"
source bench/device_sets.sh
make_sets /tmp/fresh_real || exit 1
D=/tmp/fresh; rm -rf $D; mkdir -p $D
touch_and_free() {
  python3 -c "
import threading, numpy as np
n = int(${TOUCH_GIB:-8} * (1 << 30)) // 16
arrays = [np.empty(n, dtype=np.uint8) for _ in range(16)]
ts = [threading.Thread(target=a.fill, args=(1,)) for a in arrays]
[t.start() for t in ts]; [t.join() for t in ts]"
}
traced() {   # tag, map arguments...
  local tag=$1; shift
  rm -f /tmp/fresh_out.bam /tmp/fresh_out.bam.bai
  local s=$(date +%s.%N)
  GPUALIGN_TRACE=$D/trace_$tag.tsv python3 -m gpualign map "$@" -t "$(nproc)" --backend cuda 2> $D/log_$tag.txt
  local e=$(date +%s.%N)
  echo "$tag wall=$(python3 -c "print(round($e - $s, 2))")" | tee -a $D/walls.txt
}
for set in ${SETS:-chrX_se}; do
  args=$(inputs $set) || { echo "unknown set $set"; continue; }
  for i in $(seq ${RUNS:-3}); do
    sleep 3; traced $set$i $args -o /tmp/fresh_out.bam
    sleep 3; touch_and_free; traced ${set}${i}t $args -o /tmp/fresh_out.bam
  done
done
tar -czf "$OUT/fresh.tar.gz" -C $D .
echo "== done in $(( $(date +%s) - START )) s"
