#!/usr/bin/env bash
# A/B of two settings of gpualign on the lent GPU machine in one call: bench/gpu_trace.sh traces SETS with the
# default setting and with ENV_B alternating (RUNS each), then each set is mapped once more under each setting
# and the two BAMs compared record by record (bench/compare_bams.py). B_DIR: an older copy of the package as B, as
# gpu_trace.sh takes it. ENV_C (optional): a third setting (in the copy C_DIR, where given), traced
# against the default in a second round. RECORDS_DIR (default B_DIR): the copy whose records the default's are
# compared with. $OUT gets traces.tar.gz (and traces_c.tar.gz), records.txt.
#
#   run(command="SETS='chrX_se chrX_pe' CHRX_READS=2000000 CHRX_PAIRS=1000000 K_CHRX=12 RUNS=2 \
#       B_DIR=.basepkg bash bench/gpu_ab.sh", carry=[".whlreal", ".peer", ".sim", ".data", ".basepkg"])
# with .basepkg made by: git archive REV gpualign | tar -x -C .basepkg. NCU_KERNEL (regexes, space-separated):
# Nsight Compute's sections for one launch of each kernel, in $OUT/ncu_<regex>.txt.
set -uo pipefail
export WHL=${WHL:-.whlreal}
bash bench/gpu_trace.sh || exit 1
source bench/device_env.sh 2> /dev/null || exit 1
if [ -n "${ENV_C:-}" ]; then
  mv "$OUT/traces.tar.gz" "$OUT/traces_b.tar.gz"
  B_DIR="${C_DIR:-}" ENV_B="$ENV_C" bash bench/gpu_trace.sh && mv "$OUT/traces.tar.gz" "$OUT/traces_c.tar.gz"
fi
source bench/device_sets.sh
for set in ${SETS:-ecoli_se}; do
  args=$(inputs $set) || continue
  python3 -m gpualign map $args -o /tmp/ab_a.bam -t "$(nproc)" --backend cuda 2> /tmp/ab_a.log
  (cd "${RECORDS_DIR:-${B_DIR:-.}}" && env ${ENV_B:-GPUALIGN_AB=b} python3 -m gpualign map $args -o /tmp/ab_b.bam -t "$(nproc)" \
    --backend cuda) 2> /tmp/ab_b.log
  echo "== $set: default against B (${ENV_B:-} ${RECORDS_DIR:-${B_DIR:-}})" >> "$OUT/records.txt"
  python3 bench/compare_bams.py /tmp/ab_a.bam /tmp/ab_b.bam >> "$OUT/records.txt" 2>&1
  tail -n 3 /tmp/ab_a.log /tmp/ab_b.log >> "$OUT/records.txt"
done
cat "$OUT/records.txt"
if [ -n "${NCU_KERNEL:-}" ]; then   # Nsight Compute on one launch of each kernel (the 6th), in the last set's map
  NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2> /dev/null | head -n 1)
  for kernel in $NCU_KERNEL; do   # regexes, space-separated: $OUT/ncu_<kernel>.txt each
    name=$(echo "$kernel" | tr -c 'A-Za-z0-9_\n' _)
    timeout 240 "$NCU" --clock-control none -k "regex:${kernel}" --launch-skip 5 --launch-count 1 \
      --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
      --section MemoryWorkloadAnalysis --section SchedulerStats --section ComputeWorkloadAnalysis \
      --section InstructionStats \
      python3 -m gpualign map $args -o /tmp/ab_ncu.bam -t "$(nproc)" --backend cuda > "$OUT/ncu_$name.txt" 2>&1
    grep -v "^\[gpualign" "$OUT/ncu_$name.txt" | tail -n 150
  done
fi
