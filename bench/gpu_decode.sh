#!/usr/bin/env bash
# The decoding floor on the lent GPU machine: each read file of the sets in SETS (gpu_real.sh's reads) decoded alone,
# to /dev/null, by isal on one thread, by rapidgzip's command line at each thread count in THREADS_LIST
# [8 16 24 32] and chunk size in CHUNKS_KIB [1024 4096] (rapidgzip's default: 4096), and by the mapper's own decoding
# process (`python3 -m gpualign.seqio THREADS FILE`) at each thread count, each REPEAT [2] times; wall, user and
# system seconds. A run that is bound by decoding (the 10 M E. coli reads) can end no sooner than the best of
# these after its start.
#
#   run(command="SETS=ecoli_se ECOLI_READS=10000000 K_ECOLI=12 bash bench/gpu_decode.sh", carry=[".whlreal", ".peer",
#       ".sim", ".data"])
#
# Set sizes as gpu_real.sh takes them (its header). $OUT/decode.tsv: file, decoder, threads, chunk KiB, wall, user,
# system seconds.
set -uo pipefail
export WHL=${WHL:-.whlreal}
source bench/device_sets.sh
make_sets /tmp/decode_real || exit 1
TSV=$OUT/decode.tsv
printf 'file\tdecoder\tthreads\tchunk_kib\twall_s\tuser_s\tsys_s\n' > "$TSV"
for f in $(read_files); do
  name=$(basename "$f")
  for rep in $(seq "${REPEAT:-2}"); do
    TIMEFORMAT="$name	isal	1	-	%R	%U	%S"
    { time python3 -m isal.igzip -d -c "$f" > /dev/null 2>&1; } 2>> "$TSV"
    for p in ${THREADS_LIST:-8 16 24 32}; do
      for c in ${CHUNKS_KIB:-1024 4096}; do
        TIMEFORMAT="$name	rapidgzip	$p	$c	%R	%U	%S"
        { time rapidgzip -f -P "$p" --chunk-size "$c" -d -c "$f" > /dev/null 2>&1; } 2>> "$TSV"
      done
      # the mapper's own decoding process (seqio.DecodingProcess's child: rapidgzip's Python reads, 4 MiB chunks)
      TIMEFORMAT="$name	gpualign.seqio	$p	4096	%R	%U	%S"
      { time python3 -m gpualign.seqio "$p" "$f" > /dev/null 2>&1; } 2>> "$TSV"
    done
  done
done
cat "$TSV"   # the device has no column(1)
