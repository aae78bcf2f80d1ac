# One call on the lent GPU machine: the package before and after a change (.basepkg/gpualign, from
# `git archive REV gpualign`) on a real genome with reads from dwgsim, and strobealign and minimap2 in
# the same call (FASTQ.gz to a sorted, indexed BAM, 16 threads). .gpucmp2 holds ecoli.fa.gz; .peer the
# dwgsim, bwa and minimap2 .debs and ../shared/peers/strobealign.
#   run(command="bash bench/gpu_compare_real.sh", carry=[".whl", ".peer", ".gpucmp2", ".basepkg"])
set -uo pipefail
source bench/device_env.sh || exit 1
REPO=$PWD; export PATH=$REPO/.peer:$PATH
W=/tmp/s14; mkdir -p $W; cd $W
zcat $REPO/.gpucmp2/ecoli.fa.gz > ecoli.fa
for i in 1 2 3 4 5 6 7 8; do dwgsim -z $i -N 500000 -1 100 -2 0 -y 0 -S 1 ecoli.fa part$i > /dev/null 2>&1 & done; wait
cat part*.bwa.read1.fastq.gz > r.fq.gz; rm -f part*; ls -la r.fq.gz
for tag in old new; do
  code=$([ $tag = old ] && echo $REPO/.basepkg || echo $REPO)
  PYTHONPATH=$code:/tmp/site:$REPO python3 -m gpualign compile --backend cuda --no-check 2>&1 | tail -1
done
PYTHONPATH=$REPO:/tmp/site python3 -m gpualign index ecoli.fa -p $W/ecoli -k 10 2> /dev/null
mkdir -p $W/old $W/new
for rep in 1 2; do for tag in old new; do
  code=$([ $tag = old ] && echo $REPO/.basepkg || echo $REPO)
  # the same command line in folders of the same depth: the @PG lines, and so the bytes, can agree
  (cd $W/$tag && PYTHONPATH=$code:/tmp/site:$REPO /usr/bin/time -f "$tag run $rep: %e s" python3 -m gpualign map \
      $W/ecoli $W/r.fq.gz -o out.bam -t 16 --backend cuda 2> map.log; grep -h "done:" map.log; tail -1 map.log)
done; done
cmp $W/old/out.bam $W/new/out.bam && cmp $W/old/out.bam.bai $W/new/out.bam.bai && echo "old and new BAM and .bai byte-identical"
/usr/bin/time -f "strobealign+sort+index: %e s" sh -c 'strobealign -t 16 ecoli.fa r.fq.gz 2>/dev/null | python3 -c "import pysam; pysam.sort(\"-@\",\"16\",\"-o\",\"s.bam\",\"-\"); pysam.index(\"-@\",\"16\",\"s.bam\")"'
minimap2 -x sr -d ecoli.mmi ecoli.fa 2>/dev/null
/usr/bin/time -f "minimap2+sort+index: %e s" sh -c 'minimap2 -ax sr -t 16 ecoli.mmi r.fq.gz 2>/dev/null | python3 -c "import pysam; pysam.sort(\"-@\",\"16\",\"-o\",\"m.bam\",\"-\"); pysam.index(\"-@\",\"16\",\"m.bam\")"'
