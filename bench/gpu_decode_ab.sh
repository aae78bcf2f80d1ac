#!/usr/bin/env bash
# The mapper's decoding of each read file of SETS (gpu_real.sh's reads) on the lent GPU machine, the checkout's
# package against B_DIR's, alternating: bench/decode_probe.py reads it through seqio.Input (rapidgzip's decoding
# process, 48 MiB blocks) on all threads beside LOADS [0 4 8] processes spinning in Python at each niceness of
# NICES [0], REPEAT [2] times.
#
#   run(command="SETS=ecoli_se ECOLI_READS=10000000 K_ECOLI=12 B_DIR=.basepkg bash bench/gpu_decode_ab.sh",
#       carry=[".whlreal", ".peer", ".sim", ".data", ".basepkg"])
#
# $OUT/decode_ab.tsv: package, file, threads, load, nice, wall s, reader CPU-s, children's CPU-s, bytes, decoder.
set -uo pipefail
export WHL=${WHL:-.whlreal}
source bench/device_sets.sh
make_sets /tmp/decode_ab || exit 1
TSV=$OUT/decode_ab.tsv
printf 'package\tfile\tthreads\tload\tnice\twall_s\treader_cpu_s\tchildren_cpu_s\tbytes\tdecoder\n' > "$TSV"
for f in $(read_files); do
  for load in ${LOADS:-0 4 8}; do
    for nice in ${NICES:-0}; do
      for rep in $(seq "${REPEAT:-2}"); do
        for pkg in . ${B_DIR:-}; do
          python3 bench/decode_probe.py "$f" --package "$pkg" --load "$load" --nice "$nice" >> "$TSV"
        done
      done
    done
  done
done
cat "$TSV"
