#!/usr/bin/env bash
# One call on the lent GPU machine (../shared/device/README.md): wheels in .whl, peer aligners
# in .peer (apt-get download bwa minimap2 bowtie2), E. coli K-12 in .data/ecoli.fa.gz (ragout-examples),
# human chrX 0-20 Mbp in .data/chrX20.fa.gz (smalt-examples).
#   run(command="bash bench/gpu_check.sh", carry=[".whl", ".peer", ".data"])
# 1. kernel and backend tests with compiled CUDA kernels (the simulator's tests, on the GPU);
# 2. the demo workflow with backend cuda, then cpu: the two BAMs' records must be identical;
# 3. E. coli, simulated 100 bp and 150 bp reads: gpualign cuda vs cpu (identical records), accuracy
#    next to bwa mem and minimap2 -ax sr, all 16 threads, same run;
# 4. the same for 150 bp reads on the first 20 Mbp of human chrX (.data/chrX20.fa.gz, made from
#    smalt-examples' hs37chrXtrunc.fa.gz), index k=12.
set -uo pipefail
OUT=${OUT:-/tmp/gpu_check}; mkdir -p "$OUT"
NREADS=${NREADS:-200000}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH NUMBA_CACHE_DIR=/tmp/nbcache PYTHONUNBUFFERED=1
mkdir -p /tmp/peer; for f in .peer/*.deb; do dpkg -x "$f" /tmp/peer; done; export PATH=/tmp/peer/usr/bin:$PATH
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/machine.txt"
nproc | tee -a "$OUT/machine.txt"

echo "== 1. tests on the GPU"
NUMBA_ENABLE_CUDASIM=0 python3 -m pytest -q -p no:cacheprovider tests/test_backends.py tests/test_seed.py tests/test_extend.py \
    -W "ignore::numba.core.errors.NumbaPerformanceWarning" 2>&1 | tee "$OUT/pytest_gpu.log" | tail -n 3

echo "== 2. demo workflow, cuda then cpu"
for be in cuda cpu; do
  start=$(date +%s%N)
  snakemake --cores 16 --resources gpu=1 --config align="{\"backend\": \"$be\"}" -q > "$OUT/demo_$be.log" 2>&1 \
    || { echo "workflow ($be) failed"; tail -n 30 "$OUT/demo_$be.log"; cat logs/align/demo.1.log; }
  echo "demo workflow backend=$be wall $(( ($(date +%s%N) - start) / 1000000 )) ms"
  cp results/bam/demo.bam "$OUT/demo_$be.bam"; cp logs/align/demo.1.log "$OUT/demo_align_$be.log"
done
grep -h "backend" "$OUT"/demo_align_*.log | tail -n 2
python3 bench/compare_bams.py "$OUT/demo_cuda.bam" "$OUT/demo_cpu.bam" | tee "$OUT/demo_compare.txt"

echo "== 3. E. coli"
W=/tmp/ecoli; mkdir -p $W; zcat .data/ecoli.fa.gz > $W/ecoli.fa
python3 -m gpualign index $W/ecoli.fa -p $W/ec 2> "$OUT/index.log"
for L in 100 150; do
  python3 bench/simulate.py $W/ecoli.fa -n $NREADS -l $L --sub 0.01 --indel 0.001 --snp 0.001 --fraction-n 0.001 --seed 11 -o $W/r$L.fq.gz
  for be in cuda cpu; do
    start=$(date +%s%N)
    python3 -m gpualign map $W/ec $W/r$L.fq.gz -o $W/g${L}_$be.bam --backend $be -t 16 2> "$OUT/map${L}_$be.log"
    echo "gpualign map L=$L backend=$be wall $(( ($(date +%s%N) - start) / 1000000 )) ms; $(grep -E 'read and encoded|stage times|done:' "$OUT/map${L}_$be.log" | cut -d] -f2 | tr '\n' ';')"
  done
  python3 bench/compare_bams.py $W/g${L}_cuda.bam $W/g${L}_cpu.bam | head -n 12 | tee "$OUT/compare$L.txt"
  python3 bench/accuracy.py --ref $W/ecoli.fa --reads $W/r$L.fq.gz --bam $W/g${L}_cuda.bam --peers bwa,minimap2 \
      -t 16 --workdir $W/acc$L --out "$OUT/accuracy$L.tsv" > "$OUT/accuracy$L.txt" 2>&1
  tail -n 4 "$OUT/accuracy$L.txt"
done

echo "== 4. human chrX, first 20 Mbp, k=12"
H=/tmp/human; mkdir -p $H; zcat .data/chrX20.fa.gz > $H/chrX20.fa
python3 -m gpualign index $H/chrX20.fa -p $H/hx -k 12 2> "$OUT/index_human.log"
python3 bench/simulate.py $H/chrX20.fa -n $NREADS -l 150 --sub 0.01 --indel 0.001 --snp 0.001 --fraction-n 0.001 --seed 12 -o $H/r150.fq.gz
for be in cuda cpu; do
  start=$(date +%s%N)
  python3 -m gpualign map $H/hx $H/r150.fq.gz -o $H/g150_$be.bam --backend $be -t 16 2> "$OUT/maphuman_$be.log"
  echo "gpualign map human L=150 backend=$be wall $(( ($(date +%s%N) - start) / 1000000 )) ms; $(grep -E 'read and encoded|stage times|done:' "$OUT/maphuman_$be.log" | cut -d] -f2 | tr '\n' ';')"
done
python3 bench/compare_bams.py $H/g150_cuda.bam $H/g150_cpu.bam | head -n 12 | tee "$OUT/compare_human.txt"
python3 bench/accuracy.py --ref $H/chrX20.fa --reads $H/r150.fq.gz --bam $H/g150_cuda.bam --peers bwa,minimap2 \
    -t 16 --workdir $H/acc --out "$OUT/accuracy_human.tsv" > "$OUT/accuracy_human.txt" 2>&1
tail -n 4 "$OUT/accuracy_human.txt"
