#!/usr/bin/env bash
# After a change to code both backends run (kernels, choice, pairing), one call on the lent GPU machine:
# 1. the kernel, seeding, choice and pairing tests with compiled CUDA kernels (NUMBA_ENABLE_CUDASIM=0);
# 2. Mason reads of human chrX 0-20 Mbp (bench/gpu_real.sh's sets, gpualign alone): the first N_COMPARE [200000]
#    reads and pairs mapped with --backend cuda and --backend cpu, records compared
#    (bench/compare_bams.py);
# 3. the whole sets traced once (bench/gpu_trace.sh): wall, GPU busy time.
#   run(command="bash bench/gpu_records.sh", carry=[".whlreal", ".sim", ".data"])   # .whlreal with pytest's wheels
# TESTS=0 skips 1, TRACE=0 skips 3 (the reads are still made).
set -uo pipefail
START=$(date +%s)
export WHL=${WHL:-.whlreal}
source bench/device_env.sh || exit 1
if [ "${TESTS:-1}" = 1 ]; then
  echo "== 1. tests with compiled kernels"   # numba-cuda's own performance warning class, not numba's
  NUMBA_ENABLE_CUDASIM=0 python3 -m pytest -q -p no:cacheprovider tests/test_backends.py tests/test_seed.py \
    tests/test_choose.py tests/test_pairing.py -W "ignore::numba.cuda.core.errors.NumbaPerformanceWarning" \
    > $OUT/pytest_gpu.log 2>&1
  tail -n 3 $OUT/pytest_gpu.log; echo "+$(( $(date +%s) - START )) s"
fi
echo "== 2. cuda and cpu records"
if [ "${TRACE:-1}" = 1 ]; then
  SETS="chrX_se chrX_pe" CHRX_READS=${CHRX_READS:-2000000} CHRX_PAIRS=${CHRX_PAIRS:-1000000} K_CHRX=12 RUNS=1 \
    bash bench/gpu_trace.sh > $OUT/trace.txt 2>&1
else   # the reads and index alone
  SETS="chrX_se chrX_pe" CHRX_READS=${CHRX_READS:-2000000} CHRX_PAIRS=${CHRX_PAIRS:-1000000} K_CHRX=12 \
    ALIGNERS=gpualign DECODERS='' DEADLINE=300 bash bench/gpu_real.sh > $OUT/trace.txt 2>&1
fi
tail -n 3 $OUT/trace.txt
W=/tmp/gpualign_real/chrX20; C=/tmp/compare; rm -rf $C; mkdir -p $C; N=${N_COMPARE:-200000}
for f in $W/mason_se_n${CHRX_READS:-2000000}_*.fq.gz $W/mason_pe_n${CHRX_PAIRS:-1000000}_*.fq.gz; do
  zcat $f | head -n $((4 * N)) | python3 -c "import sys, isal.igzip as g; sys.stdout.buffer.write(g.compress(sys.stdin.buffer.read(), 1))" \
    > $C/$(basename $f)
done
idx=$W/idx/gpualign_k12/ref
se=$(ls $C/mason_se_*.fq.gz); pe=$(ls $C/mason_pe_*.fq.gz | tr '\n' ' ')
python3 -m gpualign compile --backend cpu --no-check > /dev/null 2>&1
for b in cuda cpu; do
  (cd $C && python3 -m gpualign map $idx $se -o se_$b.bam -t 16 --backend $b 2> se_$b.log; tail -n 2 se_$b.log)
  (cd $C && python3 -m gpualign map $idx $pe -o pe_$b.bam -t 16 --backend $b 2> pe_$b.log; tail -n 2 pe_$b.log)
done
python3 bench/compare_bams.py $C/se_cuda.bam $C/se_cpu.bam | tail -n 2
python3 bench/compare_bams.py $C/pe_cuda.bam $C/pe_cpu.bam | tail -n 2
echo "+$(( $(date +%s) - START )) s"
cp /tmp/traces/walls.txt $OUT/ 2> /dev/null
for t in /tmp/traces/trace_*.tsv; do
  echo "$(basename $t): $(python3 bench/timeline.py $t 2>&1 | grep -E '^wall|^\| GPU \|' | tr '\n' ' ')"
done
cat $OUT/walls.txt
