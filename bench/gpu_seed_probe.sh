#!/usr/bin/env bash
# On the GPU machine: bench/seed_probe.py on E. coli (100 bp) and chrX 0-20 Mbp (150 bp) reads from bench/simulate.py
# (1% substitutions, 0.1% indels), k=12, one batch each, under the settings in PROBE_SETS (space-separated, each a
# --set of seed_probe.py); B_DIR: a second copy of the package, its default setting timed after the checkout's and
# its BAM records of the batch compared with the checkout's.
#   run(command="PROBE_SETS='max_candidates=1 max_hits=128' bash bench/gpu_seed_probe.sh", carry=[".whlreal", ".data"])
set -uo pipefail
export WHL=${WHL:-.whlreal}
source bench/device_env.sh 2> /dev/null || exit 1
W=/tmp/seed_probe; mkdir -p $W
sets=(); for s in ${PROBE_SETS:-}; do sets+=(--set "$s"); done
for g in ecoli:100 chrX20:150; do
  name=${g%%:*}; len=${g##*:}
  [ -e $W/$name.idx.npz ] || python3 -m gpualign index .data/$name.fa.gz -p $W/$name -k 12 2>&1 | tail -n 1
  [ -e $W/$name.fq.gz ] || python3 bench/simulate.py .data/$name.fa.gz -n ${PROBE_READS:-200000} -l $len -t "$(nproc)" \
    -o $W/$name.fq.gz > /dev/null
  echo "== $name"
  python3 bench/seed_probe.py $W/$name $W/$name.fq.gz --reads ${PROBE_READS:-200000} --repeat ${REPEAT:-5} \
    --save $W/$name.a.rec "${sets[@]}" 2>&1 | grep -v "^\[gpualign"
  if [ -n "${B_DIR:-}" ]; then   # the copy's default setting, and its records against the checkout's
    dir=$(cd "$B_DIR" && pwd)
    echo "== $name, package in $B_DIR"
    (cd "$dir" && SEED_PROBE_PACKAGE=$dir PYTHONPATH=/tmp/site:$dir python3 "$OLDPWD/bench/seed_probe.py" $W/$name \
      $W/$name.fq.gz --reads ${PROBE_READS:-200000} --repeat ${REPEAT:-5} --save $W/$name.b.rec) 2>&1 | grep -v "^\[gpualign"
    cmp $W/$name.a.rec $W/$name.b.rec && echo "records identical ($(stat -c %s $W/$name.a.rec) bytes)"
  fi
done | tee "$OUT/seed_probe.txt"
