#!/usr/bin/env bash
# What a run would take without decoding gzip, and the CPU it spends: on the lent GPU machine, each set in SETS (as
# bench/gpu_trace.sh names them; reads and index made by bench/gpu_real.sh, gpualign alone) is mapped RUNS times from
# its FASTQ.gz and from the same FASTQ decompressed beforehand (alternating), each run's wall and its user and system
# CPU seconds (the process's children, from getrusage) printed, and $OUT/ceiling.txt written.
#
#   run(command="SETS='chrX_se ecoli_pe' CHRX_READS=2000000 ECOLI_PAIRS=2000000 K_CHRX=12 K_ECOLI=12 \
#       bash bench/gpu_ceiling.sh", carry=[".whlreal", ".peer", ".sim", ".data"])
set -uo pipefail
START=$(date +%s)
export WHL=${WHL:-.whlreal}
source bench/device_sets.sh
make_sets /tmp/ceiling_real || exit 1
timed() {   # label, map arguments...: wall and CPU of one `gpualign map`
  local label=$1; shift
  rm -f /tmp/ceiling_out.bam /tmp/ceiling_out.bam.bai
  python3 - "$label" "$@" <<'PY' | tee -a "$OUT/ceiling.txt"
import resource, subprocess, sys, time
label, args = sys.argv[1], sys.argv[2:]
t = time.perf_counter()
rc = subprocess.run([sys.executable, "-m", "gpualign", "map", *args, "-o", "/tmp/ceiling_out.bam", "-t", "16",
                     "--backend", "cuda"], stderr=subprocess.DEVNULL).returncode
wall = time.perf_counter() - t
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
print(f"{label:24s} rc {rc} wall {wall:.2f} s  user {ru.ru_utime:.2f} s  sys {ru.ru_stime:.2f} s  "
      f"cores {(ru.ru_utime + ru.ru_stime) / wall:.1f}")
PY
}
for set in ${SETS:-chrX_se}; do
  args=$(inputs $set) || continue
  plain=""
  for f in $args; do
    case $f in
      *.fq.gz) p=/tmp/plain_$(basename "$f" .gz); [ -s "$p" ] || python3 -m isal.igzip -d -c "$f" > "$p"; plain+="$p ";;
      *) plain+="$f ";;
    esac
  done
  python3 -m gpualign map $args -o /tmp/ceiling_out.bam -t 16 --backend cuda 2> /dev/null   # warm: kernels, page cache
  for i in $(seq ${RUNS:-2}); do
    timed "$set gz $i" $args
    timed "$set plain $i" $plain
  done
done
echo "== done in $(( $(date +%s) - START )) s"
