#!/usr/bin/env bash
# Real genomes, reads from Mason (or ART), on the lent GPU machine: bench/real.py for each set named in SETS,
# gpualign (cuda) next to strobealign, minimap2 -ax sr, bwa-mem2, minibwa and bwa mem, FASTQ.gz -> sorted, indexed
# BAM with THREADS threads each (peers piped into pysam's sort), accuracy, and the decode floor.
#
#   run(command="bash bench/gpu_real.sh", carry=[".whlreal", ".peer", ".sim", ".data"])          # ecoli_se, 10 M x 100
#   run(command="SETS='chrX_se chrX_pe' bash bench/gpu_real.sh", carry=[".whlreal", ".peer", ".sim", ".data"])
#   run(command="SETS=ecoli_pe bash bench/gpu_real.sh", carry=[".whlreal", ".peer", ".sim", ".data"])
#   run(command="SETS=saureus_se bash bench/gpu_real.sh", carry=[".whlreal", ".peer", ".sim", ".data"])
#
# Ignored folders to fill here first (63.2 MB in all with the working tree of 2.0 MB; the limit is 64 MiB = 67.1 MB):
#   .whlreal  the five wheels real.py needs (numpy 2.4, pysam, isal, psutil, rapidgzip; 30 MB), e.g. hard links:
#             mkdir -p .whlreal; for w in numpy pysam isal psutil rapidgzip; do ln -f .whl/$w-*.whl .whlreal/; done
#             (WHL=.whl also works where the whole .whl fits beside the rest)
#   .peer     apt-get download bwa minimap2 (as device_env.sh unpacks them), and cp ../shared/peers/{strobealign,
#             bwa-mem2,bwa-mem2.avx2,bwa-mem2.avx512bw,minibwa} .peer/  (8 MB)
#   .sim      cd .sim && apt-get download seqan-apps libgomp1 (Mason 2.0.9, 12.5 MB), and for SIMULATOR=art:
#             apt-get download art-nextgen-simulation-tools libgsl27 libgslcblas0 (2.7 MB)
#   .data     ecoli.fa.gz and chrX20.fa.gz as gpu_paired.sh's header makes them (ragout-examples, smalt-examples), and
#             saureus.fa.gz: S. aureus NCTC 8325 (NC_007795.1, 2,821,361 bp, 1 contig), from sibelia-examples:
#             apt-get download sibelia-examples; dpkg -x sibelia-examples_*.deb /tmp/sib
#             cp /tmp/sib/usr/share/doc/sibelia/examples/C-Sibelia/Staphylococcus_aureus/NCTC8325.fasta.gz \
#                .data/saureus.fa.gz
#   (echo /.whlreal/ /.sim/ /.data/ | tr ' ' '\n' >> .git/info/exclude, where not ignored yet)
#
# Sets (SETS, in the order given; default "ecoli_se"):
#   ecoli_se    E. coli K-12 MG1655, ECOLI_READS [10000000] x ECOLI_LEN [100] bp, gpualign k K_ECOLI [10]
#   chrX_se     human chrX 0-20 Mbp, CHRX_READS [2000000] x CHRX_LEN [150] bp, k K_CHRX [12]
#   saureus_se  S. aureus NCTC 8325, SAUREUS_READS [5000000] x SAUREUS_LEN [100] bp, k K_SAUREUS [10]
#   ecoli_pe, chrX_pe, saureus_pe: pairs of 2 x *_PE_LEN [150] bp, ECOLI_PAIRS [4000000], CHRX_PAIRS [1000000],
#               SAUREUS_PAIRS [2000000], fragments FRAG_MEAN [350] ± FRAG_SD [35]
# Other settings: THREADS [nproc], ALIGNERS [gpualign,strobealign,minimap2,bwa-mem2,minibwa,bwa], BACKEND [cuda],
# SIMULATOR [mason] (or art), GZIP [isal:2], QUALITIES [raw] (or binned: NovaSeq's 4 values), SEED [1],
# DECODERS [zcat,isal,rapidgzip; '' for none], DEADLINE [575: seconds from the start after which a set
# still running is stopped, so that the results come back within the 600 s of a call], EXTRA [more real.py options].
# The whole call must fit 600 s. Seen on the H100 (2026-11-23, 400 k reads, peers only): Mason makes ~18 k reads/s per
# part (16 parts: 10 M reads in ~35 s), the aligners' rates are in ../shared/peers/README.md, zcat decodes ~100 MB/s.
# Estimated from those: ecoli_se at 10 M reads ~450 s (gpualign's cold compile in its warm-up included), chrX_se +
# chrX_pe at 2 M reads + 1 M pairs ~400 s; so one bacterial set of this size a call. A set still running at DEADLINE
# is stopped (its JSON keeps what it had measured). A warm machine (30 s after a call) reuses /tmp/gpualign_real.
#
# $OUT gets machine.txt, real_<tag>.json per set (up to 6) and real_logs.tar.gz (every JSON, TSV, aligner log and
# real.py's progress); the tables are printed last.
set -uo pipefail
START=$(date +%s)
DEADLINE=${DEADLINE:-575}
if [ -z "${WHL:-}" ]; then WHL=.whl; [ -d .whlreal ] && WHL=.whlreal; fi
export WHL
source bench/device_env.sh || exit 1
REPO=$PWD
THREADS=${THREADS:-$(nproc)}; BACKEND=${BACKEND:-cuda}; SIMULATOR=${SIMULATOR:-mason}; GZIP=${GZIP:-isal:2}
ALIGNERS=${ALIGNERS:-gpualign,strobealign,minimap2,bwa-mem2,minibwa,bwa}; SEED=${SEED:-1}
FRAG_MEAN=${FRAG_MEAN:-350}; FRAG_SD=${FRAG_SD:-35}

# peer binaries carried in .peer (bwa and minimap2 come from .peer/*.deb through device_env.sh)
chmod +x .peer/strobealign .peer/bwa-mem2* .peer/minibwa 2>/dev/null
export PATH=$REPO/.peer:$PATH
source bench/device_sim.sh
{
  for t in strobealign bwa-mem2 minibwa bwa minimap2; do printf '%s: %s\n' $t "$(command -v $t || echo missing)"; done
  mason_simulator --version 2>&1 | head -n 1
  [ -x /tmp/sim/usr/bin/art_illumina ] && art_illumina 2>&1 | grep -m1 Version
  python3 -c 'import isal, rapidgzip; print("isal", isal.__version__, "rapidgzip", rapidgzip.__version__)'
} 2>&1 | tee -a "$OUT/machine.txt"

R=/tmp/real_out; mkdir -p $R
rm -f $R/*.json $R/progress_*.log   # a warm machine's earlier calls' results are not this call's
tables=""
for set in ${SETS:-ecoli_se}; do
  case $set in
    ecoli_se) g=ecoli; n=${ECOLI_READS:-10000000}; len=${ECOLI_LEN:-100}; k=${K_ECOLI:-10}; pe="";;
    chrX_se) g=chrX20; n=${CHRX_READS:-2000000}; len=${CHRX_LEN:-150}; k=${K_CHRX:-12}; pe="";;
    saureus_se) g=saureus; n=${SAUREUS_READS:-5000000}; len=${SAUREUS_LEN:-100}; k=${K_SAUREUS:-10}; pe="";;
    ecoli_pe) g=ecoli; n=${ECOLI_PAIRS:-4000000}; len=${ECOLI_PE_LEN:-150}; k=${K_ECOLI:-10}; pe=--paired;;
    chrX_pe) g=chrX20; n=${CHRX_PAIRS:-1000000}; len=${CHRX_PE_LEN:-150}; k=${K_CHRX:-12}; pe=--paired;;
    saureus_pe) g=saureus; n=${SAUREUS_PAIRS:-2000000}; len=${SAUREUS_PE_LEN:-150}; k=${K_SAUREUS:-10}; pe=--paired;;
    *) echo "unknown set $set (ecoli_se chrX_se saureus_se ecoli_pe chrX_pe saureus_pe)"; continue;;
  esac
  [ -s ".data/$g.fa.gz" ] || { echo "missing .data/$g.fa.gz: see this script's header"; continue; }
  left=$(( DEADLINE - ($(date +%s) - START) ))
  if [ $left -lt 30 ]; then echo "== $set: skipped, ${left} s left before the deadline"; continue; fi
  echo "== $set: $n x $len bp ${pe:-single-end}, $SIMULATOR, k=$k, $THREADS threads, up to $left s" \
       "(+$(( $(date +%s) - START )) s)"
  table=$(timeout -s INT $left python3 bench/real.py ".data/$g.fa.gz" --name "$g" --reads "$n" --length "$len" $pe \
            --fragment-mean "$FRAG_MEAN" --fragment-sd "$FRAG_SD" -k "$k" -t "$THREADS" --simulator "$SIMULATOR" \
            --gzip "$GZIP" --qualities "${QUALITIES:-raw}" --seed "$SEED" --aligners "$ALIGNERS" \
            --gpualign-backend "$BACKEND" \
            --decoders "${DECODERS-zcat,isal,rapidgzip}" --workdir /tmp/gpualign_real --out $R ${EXTRA:-} \
            2> "$R/progress_$set.log")
  rc=$?
  grep -E "simulated and renamed|: [0-9.]+ s, [0-9,]+ reads/s|skipping|ERROR|WARNING|decode .*: rc" "$R/progress_$set.log" \
    | cut -c1-200
  [ $rc -ne 0 ] && { echo "real.py on $set: rc $rc"; tail -n 15 "$R/progress_$set.log"; }
  tables+="$table"$'\n'
done
njson=$(ls $R/*.json 2>/dev/null | wc -l)
[ "$njson" -le 6 ] && cp $R/*.json "$OUT"/ 2>/dev/null
tar -czf "$OUT/real_logs.tar.gz" -C $R . 2>/dev/null
echo "== done in $(( $(date +%s) - START )) s"
echo "$tables"
