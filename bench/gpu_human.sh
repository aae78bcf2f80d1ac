#!/usr/bin/env bash
# A human-size reference on the lent GPU machine, in one call: index build (time, peak memory), map start-up,
# reads/s and the peak host and GPU memory of `gpualign map` on the CUDA backend, and accuracy on the real part.
#
#   run(command="bash bench/gpu_human.sh", carry=[".whlreal", ".sim", ".hdata"])
#
# .hdata/chr20.fa.gz: human chr20 (GRCh37, 63 Mbp; Debian vt-examples' ref/20.fa.gz), apart from .data: a call
# carries 64 MiB at most. The reference (bench/human_ref.py): REAL, then uniform random filler in 100 Mbp contigs
# up to TOTAL [3100000000] bases. Reads: READS [2000000] Mason reads of LEN [150] bp from REAL alone, so they are scored against their truth. THREADS [nproc]; K [auto]. The index is in the page cache when the
# reads are mapped (built just before), as on a user's second run.
# The reads are mapped twice on the whole card (REPEAT [1]), then, with SMALL [1], once with bench/gpu_ballast.py
# holding all but SMALL_GIB [22.5] GiB of it (a 24 GB card: L4, A10, RTX 4090), and the records compared; SCORE [1]
# scores the first run's BAM (bench/accuracy.py). MINIMAP2=1 (carry MM2_DEBS [.peer], minimap2's .deb): minimap2 -x sr
# indexes the reference, then maps the first MM2_READS [2000000] reads into pysam's sort, both timed, each stopped
# at DEADLINE [570] s from the start (minimap2 has no GPU: a run of its own costs this call time).
# $OUT gets human.txt (the summary), index.log (/usr/bin/time -v), accuracy.tsv and human_logs.tar.gz (each map's
# /usr/bin/time -v log, GPUALIGN_TRACE timeline and nvidia-smi memory every 100 ms).
set -uo pipefail
START=$(date +%s)
export WHL=${WHL:-.whlreal}
source bench/device_env.sh || exit 1
source bench/device_sim.sh
H=/tmp/human; mkdir -p $H
REAL=${REAL:-.hdata/chr20.fa.gz}; TOTAL=${TOTAL:-3100000000}; READS=${READS:-2000000}; LEN=${LEN:-150}
T=${THREADS:-$(nproc)}; K=${K:-auto}
S=$OUT/human.txt
say() { echo "[+$(( $(date +%s) - START )) s] $*" | tee -a $S; }
peak() { grep "$1" "$2" | awk -F': ' '{print $2}'; }

[ -s $H/big.fa ] || python3 bench/human_ref.py $REAL --total $TOTAL -o $H/big.fa 2>&1 | tee -a $S
say "reference ready: $(du -h $H/big.fa | cut -f1)"
if [ ! -s $H/hs.idx.npz ]; then
  /usr/bin/time -v python3 -m gpualign index $H/big.fa -p $H/hs -k $K -t $T 2> $OUT/index.log
  grep "gpualign index\]" $OUT/index.log | tail -n 4 | tee -a $S
  say "index: wall $(peak 'Elapsed (wall' $OUT/index.log), peak RSS $(peak 'Maximum resident' $OUT/index.log) kB"
fi
ls -la $H | tee -a $S
[ -s $H/r.fq.gz ] || python3 bench/real_reads.py $REAL -n $READS -l $LEN --parts 16 -t $T -o $H/r.fq.gz 2>> $OUT/sim.log
say "reads ready"
/usr/bin/time -f "compile %e s" python3 -m gpualign compile --backend cuda --no-check 2>&1 | tail -n 1 | tee -a $S
map_run() {   # tag: one traced, timed map of the reads, its peak GPU memory polled
  local tag=$1
  rm -f $H/$tag.bam $H/$tag.bam.bai
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 > $T_DIR/gpumem_$tag.txt &
  local poll=$!
  GPUALIGN_TRACE=$T_DIR/trace_$tag.tsv /usr/bin/time -v python3 -m gpualign map $H/hs $H/r.fq.gz -o $H/$tag.bam \
    -t $T --backend cuda 2> $T_DIR/map_$tag.log
  kill $poll
  grep -E "done:|GPU memory|error" $T_DIR/map_$tag.log | tee -a $S
  say "map $tag: wall $(peak 'Elapsed (wall' $T_DIR/map_$tag.log), peak RSS $(peak 'Maximum resident' $T_DIR/map_$tag.log) kB," \
      "peak GPU memory (whole card) $(sort -n $T_DIR/gpumem_$tag.txt | tail -n 1) MiB, before the run $(head -n 1 $T_DIR/gpumem_$tag.txt) MiB"
  python3 - $T_DIR/trace_$tag.tsv <<'PY' | tee -a $S
import sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if not l.startswith("#")][1:]
def first(step):
    v = [float(r[2]) for r in rows if r[1] == step]
    return min(v) if v else float("nan")
def total(step):
    return sum(float(r[3]) - float(r[2]) for r in rows if r[1] == step)
kernels = [float(r[2]) for r in rows if r[0] == "GPU"]
print(f"  from the first step: index upload {total('GPU genome and index upload'):.2f} s summed, first kernel at "
      f"{min(kernels):.2f} s, last step ends {max(float(r[3]) for r in rows):.2f} s")
PY
}
T_DIR=/tmp/human_logs; rm -rf $T_DIR; mkdir -p $T_DIR
map_run full1
[ "${REPEAT:-1}" = 1 ] && map_run full2
if [ "${SMALL:-1}" = 1 ]; then   # the same reads with all but SMALL_GIB of the card held by another process
  python3 bench/gpu_ballast.py ${SMALL_GIB:-22.5} > $T_DIR/ballast.txt 2>&1 &
  ballast=$!
  for i in $(seq 60); do grep -q "ballast:" $T_DIR/ballast.txt && break; sleep 1; done
  cat $T_DIR/ballast.txt | tee -a $S
  map_run small
  kill $ballast; wait $ballast 2> /dev/null
  python3 bench/compare_bams.py $H/full1.bam $H/small.bam | tail -n 1 | tee -a $S   # full card against small card
fi
if [ "${SCORE:-1}" = 1 ]; then
  python3 bench/accuracy.py --ref $REAL --reads $H/r.fq.gz --bam $H/full1.bam --peers '' -t $T --out $OUT/accuracy.tsv \
    2>> $OUT/sim.log | tail -n 4 | tee -a $S
fi
if [ "${MINIMAP2:-0}" = 1 ]; then   # minimap2 -ax sr on the first MM2_READS reads, piped into pysam's sort and index
  for deb in ${MM2_DEBS:-.peer}/minimap2*.deb; do dpkg -x $deb /tmp/peer; done; export PATH=/tmp/peer/usr/bin:$PATH
  left=$(( ${DEADLINE:-570} - $(date +%s) + START ))
  /usr/bin/time -v timeout $left minimap2 -x sr -t $T -d $H/mm.mmi $H/big.fa 2> $T_DIR/mm_index.log
  say "minimap2 index: wall $(peak 'Elapsed (wall' $T_DIR/mm_index.log), peak RSS $(peak 'Maximum resident' $T_DIR/mm_index.log) kB"
  zcat $H/r.fq.gz | head -n $((4 * ${MM2_READS:-2000000})) | python3 -c \
    "import sys, isal.igzip as g; sys.stdout.buffer.write(g.compress(sys.stdin.buffer.read(), 2))" > $H/mm_reads.fq.gz
  left=$(( ${DEADLINE:-570} - $(date +%s) + START ))
  /usr/bin/time -v timeout $left sh -c "minimap2 -ax sr -t $T $H/mm.mmi $H/mm_reads.fq.gz 2> $T_DIR/mm_map_stderr.log | \
    python3 -c 'import pysam; pysam.sort(\"-@\", \"$T\", \"-o\", \"$H/mm.bam\", \"-\"); pysam.index(\"-@\", \"$T\", \"$H/mm.bam\")'" \
    2> $T_DIR/mm_map.log
  say "minimap2 ${MM2_READS:-2000000} reads to a sorted, indexed BAM: wall $(peak 'Elapsed (wall' $T_DIR/mm_map.log)," \
      "peak RSS $(peak 'Maximum resident' $T_DIR/mm_map.log) kB"
fi
tar -czf $OUT/human_logs.tar.gz -C $T_DIR .
say "done"
