#!/usr/bin/env bash
# Timelines of gpualign runs on the lent GPU machine: bench/gpu_real.sh makes the reads and the index of each set in
# SETS (gpualign alone, so no peer's time is spent), then each set is mapped RUNS times with GPUALIGN_TRACE on, and
# everything comes back as one archive (the device returns at most a few files a call).
#
#   run(command="SETS='ecoli_se ecoli_pe chrX_se' ECOLI_READS=10000000 ECOLI_PAIRS=2000000 K_ECOLI=12 K_CHRX=12 \
#       bash bench/gpu_trace.sh", carry=[".whlreal", ".peer", ".sim", ".data"])
#
# Set sizes and k as gpu_real.sh takes them (its header). RUNS [1]; ENV_B: a second setting to alternate with
# (e.g. ENV_B="GPUALIGN_CUDA_RUNTIME=numba", or an older copy of the package: git archive REV gpualign | tar -x -C
# .basepkg, carried, and B_DIR=.basepkg: the B runs start there, because `python3 -m` puts the folder it starts in
# ahead of PYTHONPATH, so a PYTHONPATH alone ran the checkout's own package), traced as <set><i>b after an untimed
# warm-up map of its own. $OUT gets traces.tar.gz: trace_<set><i>.tsv,
# log_<set><i>.txt, walls.txt (start, end and wall of each run: what passed before the first step and after the
# last is the wall less the trace's span), gpu_real.txt; read it here with `python bench/timeline.py trace_X.tsv`.
set -uo pipefail
START=$(date +%s)
export WHL=${WHL:-.whlreal}
source bench/device_sets.sh
make_sets /tmp/trace_real || exit 1   # its own results folder: JSONs in $OUT from an earlier gpu_real.sh run are kept
D=/tmp/traces; rm -rf $D; mkdir -p $D; cp /tmp/gpu_real.txt $D/
if [ -n "${B_DIR:-}" ] && [ -z "${ENV_B:-}" ]; then ENV_B="GPUALIGN_AB=b"; fi   # a package copy alone is a B too
B_DIR=$(cd "${B_DIR:-.}" && pwd)
# the copy's byte code, as device_env.sh makes the checkout's: the machine sets PYTHONDONTWRITEBYTECODE, so a copy
# without it compiled its modules at every start (B runs 0.1-0.25 s slower before their first step, until 2026-11-26)
[ "$B_DIR" != "$PWD" ] && python3 -m compileall -q -j 0 "$B_DIR/gpualign" > /dev/null 2>&1
traced() {   # tag, env assignments ('' for none), folder to start in, map arguments...
  local tag=$1 envs=$2 dir=$3; shift 3
  rm -f /tmp/trace_out.bam /tmp/trace_out.bam.bai   # a run that replaces a file pays for deleting it
  local s=$(date +%s.%N)
  (cd "$dir" && env $envs GPUALIGN_TRACE=$D/trace_$tag.tsv python3 -m gpualign map "$@" -t "${THREADS:-$(nproc)}" \
    --backend cuda 2> $D/log_$tag.txt)
  local e=$(date +%s.%N)
  echo "$tag start=$s end=$e wall=$(python3 -c "print(round($e - $s, 2))")" | tee -a $D/walls.txt
}
for set in ${SETS:-ecoli_se}; do
  args=$(inputs $set) || { echo "unknown set $set"; continue; }
  if [ -n "${ENV_B:-}" ]; then   # ENV_B's (and B_DIR's) kernels compiled and stored before its first traced run (gpu_real.sh
    # compiled the other's), so both launch stored machine code
    (cd "$B_DIR" && env $ENV_B python3 -m gpualign compile --backend cuda --no-check) > $D/compile_${set}b.txt 2>&1
    (cd "$B_DIR" && env $ENV_B python3 -m gpualign map $args -o /tmp/trace_out.bam -t "${THREADS:-$(nproc)}" \
      --backend cuda) 2> $D/warmup_${set}b.txt
  fi
  for i in $(seq ${RUNS:-1}); do
    traced $set$i "" "$PWD" $args -o /tmp/trace_out.bam
    [ -n "${ENV_B:-}" ] && traced ${set}${i}b "$ENV_B" "$B_DIR" $args -o /tmp/trace_out.bam
    rm -f /tmp/trace_out.bam /tmp/trace_out.bam.bai
  done
done
tar -czf "$OUT/traces.tar.gz" -C $D .
echo "== done in $(( $(date +%s) - START )) s"
