#!/usr/bin/env bash
# The start's own target on the lent GPU machine: the first START_READS [200000] reads of a set gpu_real.sh made
# (SET_DIR [/tmp/gpualign_real/ecoli], its Mason single-end reads and its gpualign k K [12] and bwa indexes), mapped
# by gpualign (cuda, a sorted, indexed BAM) and by `bwa mem -t THREADS` (its SAM to /dev/null: no sort, so bwa's
# lower bound), alternating, RUNS [3] times each. Run it after gpu_real.sh in the same call:
#   run(command="SETS=ecoli_se ... bash bench/gpu_real.sh; bash bench/gpu_start.sh", carry=[...as gpu_real.sh])
# Prints each wall; $OUT/start.txt.
set -uo pipefail
export WHL=${WHL:-.whlreal}
source bench/device_env.sh 2> /dev/null || { echo "device_env.sh failed"; exit 1; }
G=${SET_DIR:-/tmp/gpualign_real/ecoli}; N=${START_READS:-200000}; T=${THREADS:-$(nproc)}
fq=$(ls $G/mason_se_n*_*.fq.gz 2> /dev/null | head -n 1)
bwt=$(ls $G/idx/bwa*/*.bwt $G/idx/*/*.bwt 2> /dev/null | grep -v bwa-mem2 | head -n 1)
idx=$(ls -d $G/idx/gpualign_k${K:-12} 2> /dev/null)
[ -n "$fq" ] && [ -n "$bwt" ] && [ -n "$idx" ] || {
  echo "missing reads, bwa or gpualign index in $G"; ls -R $G | head; exit 1; }
zcat "$fq" | head -n $((4 * N)) | gzip -1 > /tmp/start.fq.gz
wall() { local s=$(date +%s.%N); "$@"; local e=$(date +%s.%N); python3 -c "print(round($e - $s, 2))"; }
{
  echo "$N reads of $fq, $T threads; gpualign index $idx/ref, bwa index ${bwt%.bwt}"
  for i in $(seq ${RUNS:-3}); do
    rm -f /tmp/start.bam /tmp/start.bam.bai
    echo "gpualign $(wall python3 -m gpualign map $idx/ref /tmp/start.fq.gz -o /tmp/start.bam -t $T --backend cuda \
      2> /tmp/start.log) s"
    echo "bwa mem $(wall sh -c "bwa mem -t $T ${bwt%.bwt} /tmp/start.fq.gz > /dev/null 2> /tmp/start_bwa.log") s"
  done
  tail -n 1 /tmp/start.log
} 2>&1 | tee "$OUT/start.txt"
