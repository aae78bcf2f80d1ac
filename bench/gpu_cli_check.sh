#!/usr/bin/env bash
# One call on the lent GPU machine: the command line's inputs and outputs with the CUDA backend.
#   run(command="bash bench/gpu_cli_check.sh", carry=[".whl"])
# (.whl: ../shared/device/make_wheels.sh .whl pysam biopython pytest hypothesis psutil 'numpy==2.4.*' isal rapidgzip)
# 1. the kernel and backend tests with compiled CUDA kernels;
# 2. gpualign compile --backend cuda into a fresh cache, then the demo through every input and output
#    form (file, stdin, -p on stdin, R1 R2, -C, -R; BAM, CRAM, SAM to a pipe, /dev/null): cuda's records
#    must equal cpu's, and no run may compile again.
set -uo pipefail
source bench/device_env.sh || exit 1
export NUMBA_CACHE_DIR=/tmp/nbcache_cli
W=/tmp/cli; rm -rf $W; mkdir -p $W
D=resources/demo

echo "== 1. tests on the GPU"
NUMBA_ENABLE_CUDASIM=0 python3 -m pytest -q -p no:cacheprovider tests/test_backends.py tests/test_seed.py tests/test_extend.py \
    tests/test_pairing.py -W "ignore::numba.core.errors.NumbaPerformanceWarning" 2>&1 | tail -n 3

echo "== 2. compile, then every input and output form"
/usr/bin/time -f "compile cuda: %e s wall" python3 -m gpualign compile --backend cuda 2> $OUT/compile.log
tail -n 3 $OUT/compile.log
python3 -m gpualign index $D/lambda.fa -p $W/lambda 2> $OUT/index.log
python3 - <<'EOF' > $W/inter.fq
import gzip
a = gzip.open("resources/demo/pairs_R1.fq.gz", "rt").read().splitlines()
b = gzip.open("resources/demo/pairs_R2.fq.gz", "rt").read().splitlines()
for i in range(0, len(a), 4):
    for m, rec in enumerate((a[i:i + 4], b[i:i + 4])):
        name = rec[0].split()[0].removesuffix("/1").removesuffix("/2")
        print(f"{name}\tBC:Z:{'ACGT'[i // 4 % 4] * 6}\tXI:i:{i // 4}", *rec[1:], sep="\n")
EOF
for be in cuda cpu; do
  m="python3 -m gpualign map $W/lambda --backend $be -t 16 -R @RG\\tID:x\\tSM:y"
  $m $D/reads.fq.gz -o $W/se_$be.bam 2> $OUT/se_$be.log
  zcat $D/reads.fq.gz | $m - -o $W/stdin_$be.cram 2> $OUT/stdin_$be.log
  $m -p -C - -o - < $W/inter.fq 2> $OUT/p_$be.log | cat > $W/p_$be.sam
  $m $D/pairs_R1.fq.gz $D/pairs_R2.fq.gz -o $W/pe_$be.bam 2> $OUT/pe_$be.log
  $m $D/reads.fq.gz -o /dev/null -O bam 2> $OUT/null_$be.log
  grep -h "done:" $OUT/*_$be.log
done
grep -l "compiling kernels" $OUT/*_cuda.log $OUT/*_cpu.log || echo "no map compiled kernels (cpu compiles once, on its first map)"
ls -l /dev/null
python3 - <<'EOF'
import pysam
W = "/tmp/cli"
def recs(path, **kw):
    with pysam.AlignmentFile(path, **kw) as f:
        return [r.to_string() for r in f]
for name in ("se", "stdin", "p", "pe"):
    ext = {"se": "bam", "stdin": "cram", "p": "sam", "pe": "bam"}[name]
    kw = {"reference_filename": f"{W}/lambda.fa"} if ext == "cram" else {}
    a, b = recs(f"{W}/{name}_cuda.{ext}", **kw), recs(f"{W}/{name}_cpu.{ext}", **kw)
    tags = sum("BC:Z:" in r for r in a)
    print(f"{name:6s} {ext:4s} cuda {len(a)} records, cpu {len(b)}, identical: {a == b}, BC tags {tags}")
EOF
