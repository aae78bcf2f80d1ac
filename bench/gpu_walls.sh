#!/usr/bin/env bash
# Untraced walls of several variants of gpualign on the lent GPU machine, alternating run by run (a trace's CUDA
# events and spans cost the mapping threads time of their own, and more with some variants than others), then the
# decoding alone on the same host (bench/gpu_decode_ab.sh with LOADS=0: the host floor's larger part).
#   VARIANTS: space-separated NAME=DIR[:ENV=VALUE], e.g. "new=. main=.basepkg_main pageable=.:GPUALIGN_HOST_COPIES=pageable"
#   (DIR: the checkout, or a copy of the package made by git archive REV gpualign | tar -x -C DIR, carried).
#   run(command="SETS='chrX_se ecoli_se' ECOLI_READS=10000000 K_ECOLI=12 CHRX_READS=2000000 K_CHRX=12 RUNS=3 \
#       VARIANTS='new=. main=.basepkg_main' FLOOR=1 bash bench/gpu_walls.sh", carry=[".whlreal", ".peer", ".sim", ".data", ".basepkg_main"])
# RECORDS=1: each set mapped once more by each variant, the first twice (to one output path, so that the headers are
# the same), and each BAM compared with the first variant's first: the same bytes (md5), or else record by record
# (bench/compare_bams.py).
# $OUT gets walls.tsv (set, run, variant, wall seconds), with RECORDS=1 records.txt, with FLOOR=1 decode_ab.tsv.
set -uo pipefail
export WHL=${WHL:-.whlreal}
source bench/device_sets.sh
make_sets /tmp/walls_real || exit 1
here=$PWD
for v in ${VARIANTS:-new=.}; do   # each copy's byte code and stored kernels made before any timed run
  rest=${v#*=}; dir=${rest%%:*}
  [ "$dir" != "." ] && python3 -m compileall -q -j 0 "$dir/gpualign" > /dev/null 2>&1
  (cd "$dir" && python3 -m gpualign compile --backend cuda --no-check) > /dev/null 2>&1
done
map_variant() {   # variant (NAME=DIR[:ENV=VALUE]), output BAM, log: one map of the set in $args; sets $name
  local rest=${1#*=} dir envs=""
  name=${1%%=*}; dir=${rest%%:*}; [ "$rest" != "$dir" ] && envs=${rest#*:}
  (cd "$dir" && env $envs python3 -m gpualign map $args -o "$2" -t "$(nproc)" --backend "${BACKEND:-cuda}" 2> "$3") \
    || { echo "$name failed:"; tail -n 3 "$3"; return 1; }
}
printf 'set\trun\tvariant\twall_s\n' > "$OUT/walls.tsv"
for set in ${SETS:-ecoli_se}; do
  args=$(inputs $set) || { echo "unknown set $set"; continue; }
  for i in $(seq 0 ${RUNS:-3}); do   # run 0 of each variant warms the page cache and is not kept
    for v in ${VARIANTS:-new=.}; do
      rm -f /tmp/walls_out.bam /tmp/walls_out.bam.bai; sleep 1
      s=$(date +%s.%N)
      map_variant "$v" /tmp/walls_out.bam "/tmp/walls_${v%%=*}.log"
      e=$(date +%s.%N)
      [ "$i" -gt 0 ] && printf '%s\t%s\t%s\t%s\n' "$set" "$i" "$name" "$(python3 -c "print(round($e - $s, 3))")" >> "$OUT/walls.tsv"
    done
  done
done
cat "$OUT/walls.tsv"
python3 - "$OUT/walls.tsv" <<'PY'
import collections, sys
walls = collections.defaultdict(list)
for line in list(open(sys.argv[1]))[1:]:
    s, _, v, w = line.split("\t")
    walls[s, v].append(float(w))
for (s, v), w in sorted(walls.items()):
    print(f"{s:10s} {v:12s} median {sorted(w)[len(w) // 2]:.3f}  all {' '.join(f'{x:.2f}' for x in w)}")
PY
cd "$here"
if [ "${RECORDS:-0}" = 1 ]; then
  for set in ${SETS:-ecoli_se}; do
    args=$(inputs $set) || continue
    first=""
    first_v=${VARIANTS:-new=.}; first_v=${first_v%% *}
    for v in $first_v ${VARIANTS:-new=.}; do   # the first variant twice: whether a run gives the same bytes again
      rm -f /tmp/walls_rec.bam /tmp/walls_rec.bam.bai
      map_variant "$v" /tmp/walls_rec.bam "/tmp/walls_rec_${v%%=*}.log" || continue
      bam=/tmp/walls_rec_${set}_$name.bam
      if [ -z "$first" ]; then first=/tmp/walls_rec_${set}_${name}_first.bam; mv /tmp/walls_rec.bam "$first"; continue; fi
      mv /tmp/walls_rec.bam "$bam"
      if [ "$(md5sum < "$first")" = "$(md5sum < "$bam")" ]; then
        echo "$set $name: the same bytes as ${first##*/}" | tee -a "$OUT/records.txt"
      else
        echo "$set $name: other bytes than ${first##*/}; records:" | tee -a "$OUT/records.txt"
        python3 bench/compare_bams.py "$first" "$bam" 2>&1 | head -n 12 | tee -a "$OUT/records.txt"
      fi
    done
    rm -f /tmp/walls_rec_${set}_*.bam
  done
fi
[ "${FLOOR:-0}" = 1 ] && LOADS=0 REPEAT=${FLOOR_REPEAT:-2} bash bench/gpu_decode_ab.sh 2>&1 | tail -n 8
