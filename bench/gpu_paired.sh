#!/usr/bin/env bash
# Paired-end 2x150 benchmark on the lent GPU machine (../shared/device/README.md): bench/paired.py, FASTQ.gz
# pair -> sorted, indexed BAM for gpualign (cuda), bwa mem and minimap2 -ax sr, 16 threads, then accuracy per mate.
# Genomes as gpu_check.sh carries them: E. coli K-12 in .data/ecoli.fa.gz and the first 20 Mbp of GRCh37 chrX in
# .data/chrX20.fa.gz, made here once (Debian ragout-examples, smalt-examples installed):
#   cp /usr/share/doc/ragout/examples/E.Coli/references/MG1655-K12.fasta.gz .data/ecoli.fa.gz
#   { echo '>X_0_20M GRCh37 chrX first 20 Mbp (Debian smalt-examples hs37chrXtrunc.fa.gz)'
#     zcat /usr/share/doc/smalt/test/data/hs37chrXtrunc.fa.gz | grep -v '>' | tr -d '\n' | head -c 20000000 | fold -w 60
#   } | gzip > .data/chrX20.fa.gz
# Peers from .peer/*.deb (apt-get download bwa minimap2), wheels from .whl, both set up by device_env.sh.
# .whl less pulp's 16 MiB wheel (only Snakemake's ILP scheduler uses it), .peer and .data fit in the 64 MiB a call
# may carry:
#   run(command="GENOMES=ecoli NPAIRS=5000000 bash bench/gpu_paired.sh", carry=[".whl", ".peer", ".data"])
# Settings by environment: NPAIRS [100000: 200k reads, as gpu_check.sh], GENOMES ["ecoli chrX20"],
# THREADS [nproc], PEERS [bwa,minimap2], BACKEND [cuda]. Where both genomes do not fit in one 10-minute call
# (NPAIRS=200000 may not), run GENOMES=ecoli, then GENOMES=chrX20: a warm machine reuses /tmp/gpualign_paired
# (reads, indexes) and numba's cache.
# $OUT gets machine.txt and paired_<tag>.json/.tsv/.log per genome (7 files); the tables are printed last.
set -uo pipefail
source bench/device_env.sh || exit 1
NPAIRS=${NPAIRS:-100000}; THREADS=${THREADS:-$(nproc)}; PEERS=${PEERS:-bwa,minimap2}; BACKEND=${BACKEND:-cuda}
tables=""
for g in ${GENOMES:-ecoli chrX20}; do
  # k as gpu_check.sh: the default 8 on E. coli, 12 on the human piece
  case $g in
    ecoli) k=8; seed=21;;
    chrX20) k=12; seed=22;;
    *) echo "unknown genome $g (ecoli or chrX20)"; exit 1;;
  esac
  [ -s ".data/$g.fa.gz" ] || { echo "missing .data/$g.fa.gz: see this script's header"; exit 1; }
  echo "== $g: $NPAIRS pairs, k=$k, $THREADS threads, gpualign backend $BACKEND"
  table=$(python3 bench/paired.py ".data/$g.fa.gz" --name "$g" --pairs "$NPAIRS" -k "$k" --seed "$seed" \
            -t "$THREADS" --peers "$PEERS" --gpualign-backend "$BACKEND" --workdir /tmp/gpualign_paired) \
    || echo "paired.py failed on $g (rc $?)"
  tables+="$table"$'\n'
done
echo "$tables"
