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
# The reads are mapped twice on the whole card, then once with bench/gpu_ballast.py holding all but SMALL_GIB [22.5]
# GiB of it (a 24 GB card: L4, A10, RTX 4090), and the BAMs compared.
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
map_run full2
python3 bench/gpu_ballast.py ${SMALL_GIB:-22.5} > $T_DIR/ballast.txt 2>&1 &
ballast=$!
for i in $(seq 60); do grep -q "ballast:" $T_DIR/ballast.txt && break; sleep 1; done
cat $T_DIR/ballast.txt | tee -a $S
map_run small
kill $ballast; wait $ballast 2> /dev/null
python3 - $H/full1.bam $H/small.bam <<'PY' | tee -a $S
import sys, pysam
def records(path):
    with pysam.AlignmentFile(path, check_sq=False) as bam:
        return [r.to_string() for r in bam]
a, b = records(sys.argv[1]), records(sys.argv[2])
print(f"full-card and small-card records: {len(a)} and {len(b)}, {'identical' if a == b else 'DIFFERENT'}")
PY
mv $H/full1.bam $H/r.bam
tar -czf $OUT/human_logs.tar.gz -C $T_DIR .
python3 bench/accuracy.py --ref $REAL --reads $H/r.fq.gz --bam $H/r.bam --peers '' -t $T --out $OUT/accuracy.tsv \
  2>> $OUT/sim.log | tail -n 4 | tee -a $S
say "done"
