#!/usr/bin/env bash
# One call on the lent GPU machine: two copies of the package on the same inputs, CUDA backend.
#   rm -rf .basepkg && mkdir .basepkg && git archive REV gpualign | tar -x -C .basepkg   (the older copy)
#   run(command="bash bench/gpu_compare_commits.sh", carry=[".whl", ".basepkg", ".gpucmp"])
# .gpucmp holds NAME.fa.gz genomes and read sets NAME_se.fq.gz, NAME_pe_R1.fq.gz, NAME_pe_R2.fq.gz (any
# simulator; k=10 for a genome named ecoli, 12 otherwise). Both folders are ignored (.git/info/exclude).
# 1. Records: each copy indexes each genome and maps each set, in a folder of the same path, so the
#    @PG lines agree; every BAM and .bai must be byte-identical. The new copy's BAMs come back in $OUT.
# 2. Speed: bench/end_to_end.py's gpualign run (synthetic 5 Mbp genome, $E2E_READS reads of 100 bp,
#    16 threads) with each copy, alternately, $E2E_REPEATS times; the tables come back in $OUT.
set -uo pipefail
source bench/device_env.sh || exit 1
REPO=$PWD; W=/tmp/compare_commits; rm -rf $W; mkdir -p $W
E2E_READS=${E2E_READS:-4000000}; E2E_REPEATS=${E2E_REPEATS:-2}
code_of() { [ "$1" = old ] && echo "$REPO/.basepkg" || echo "$REPO"; }

echo "== 1. records"
for tag in old new; do
  export PYTHONPATH=$(code_of $tag):/tmp/site:$REPO
  mkdir -p $W/run && cd $W/run
  /usr/bin/time -f "$tag compile cuda: %e s" python3 -m gpualign compile --backend cuda --no-check 2> $OUT/compile_$tag.log
  tail -n 1 $OUT/compile_$tag.log
  for fa in $REPO/.gpucmp/*.fa.gz; do
    g=$(basename $fa .fa.gz); k=$([ $g = ecoli ] && echo 10 || echo 12); R=$REPO/.gpucmp/$g
    python3 -m gpualign index $fa -p $g -k $k 2>> $OUT/index_$tag.log
    python3 -m gpualign map $g ${R}_se.fq.gz -o ${g}_se.bam -t 16 --backend cuda 2>> $OUT/map_$tag.log
    python3 -m gpualign map $g ${R}_pe_R1.fq.gz ${R}_pe_R2.fq.gz -o ${g}_pe.bam -t 16 --backend cuda 2>> $OUT/map_$tag.log
  done
  grep -h "done:" $OUT/map_$tag.log
  cd $REPO && mv $W/run $W/$tag
done
mkdir -p $OUT/bams && cp $W/new/*.bam $OUT/bams/
python3 - "$W" <<'PY'
import filecmp, pathlib, sys, pysam
w = pathlib.Path(sys.argv[1])
for bam in sorted((w / "old").glob("*.bam")):
    new = w / "new" / bam.name
    n = sum(1 for _ in pysam.AlignmentFile(str(bam), check_sq=False))
    same = filecmp.cmp(bam, new, shallow=False)
    same_bai = filecmp.cmp(str(bam) + ".bai", str(new) + ".bai", shallow=False)
    print(f"{bam.name}: {n} records, BAM bytes {'identical' if same else 'DIFFER'}, "
          f".bai {'identical' if same_bai else 'DIFFERS'}")
PY

echo "== 2. speed (end_to_end.py, gpualign only)"
for rep in $(seq 1 $E2E_REPEATS); do
  for tag in old new; do
    OUT=$OUT/e2e_${tag}_$rep PYTHONPATH=$(code_of $tag):/tmp/site:$REPO python3 bench/end_to_end.py --genome-mbp 5 \
        --reads $E2E_READS --peers '' --skip-accuracy --threads 16 --workdir $W/e2e 2> $OUT/e2e_${tag}_$rep.log | tail -n 3
  done
done
