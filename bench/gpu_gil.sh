#!/usr/bin/env bash
# Who holds the GIL in a mapping run, on the lent GPU machine: bench/gpu_trace.sh traces each set of SETS (RUNS
# times, ENV_B alternating where given), then each set is mapped twice under py-spy (from the .whlreal wheels):
# once sampling only the thread that holds the GIL (--gil), once every thread, idle ones too (--idle). Both with
# --nonblocking, so the sampler does not stop the process it samples. The share of --gil samples in the run's
# samples is how busy the GIL was; their stacks say what held it.
#
#   run(command="SETS=ecoli_se ECOLI_READS=10000000 K_ECOLI=12 bash bench/gpu_gil.sh",
#       carry=[".whlreal", ".peer", ".sim", ".data"])
#
# py-spy comes as a wheel beside gpu_real.sh's five in .whlreal (3 MB): python3 -m pip download --no-deps
# --only-binary=:all: --python-version 3.12 --platform manylinux1_x86_64 -d .whlreal py-spy
#
# $OUT gets traces.tar.gz (gpu_trace.sh's) and gil.tar.gz: gil_<set>.txt and all_<set>.txt (py-spy's raw format:
# one collapsed stack a line, with its thread, and its sample count), their logs and walls; read them here with
# `python bench/gil_report.py gil_<set>.txt --rate RATE --wall WALL`.
set -uo pipefail
export WHL=${WHL:-.whlreal}
bash bench/gpu_trace.sh || exit 1
source bench/device_env.sh 2> /dev/null || exit 1
source bench/device_sets.sh
RATE=${RATE:-250}
G=/tmp/gil; rm -rf $G; mkdir -p $G
for set in ${SETS:-ecoli_se}; do
  args=$(inputs $set) || continue
  for mode in gil all; do
    flags="--gil"; [ $mode = all ] && flags="--idle"
    rm -f /tmp/gil_out.bam /tmp/gil_out.bam.bai
    s=$(date +%s.%N)
    GPUALIGN_NO_DETACH=1 py-spy record --nonblocking --threads $flags -r $RATE -f raw -o $G/${mode}_$set.txt -- \
      python3 -m gpualign map $args -o /tmp/gil_out.bam -t "$(nproc)" --backend cuda > $G/pyspy_${mode}_$set.log 2>&1
    e=$(date +%s.%N)
    echo "$set $mode rate=$RATE wall=$(python3 -c "print(round($e - $s, 2))")" | tee -a $G/walls.txt
  done
done
tar -czf "$OUT/gil.tar.gz" -C $G .
for set in ${SETS:-ecoli_se}; do
  for mode in gil all; do
    [ -s $G/${mode}_$set.txt ] && python3 bench/gil_report.py $G/${mode}_$set.txt --rate $RATE --top 25 | head -n 45
  done
done
