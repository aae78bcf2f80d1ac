# (sourced) The benchmark sets on the lent GPU machine, for the scripts that time gpualign alone on them
# (gpu_trace.sh, gpu_ab.sh, gpu_ceiling.sh):
# - make_sets DIR: bench/gpu_real.sh makes the reads and the index of each set in SETS (gpualign alone, so no peer's
#   time is spent; its JSONs in DIR, apart from $OUT's), then device_env.sh is sourced;
# - inputs SET: the map arguments of a set, index prefix and FASTQ file(s), as gpu_real.sh named them (set sizes and
#   k as gpu_real.sh takes them, its header);
# - read_files: the FASTQ files of every set in SETS [ecoli_se], one a line.
W=/tmp/gpualign_real

make_sets() {
  local start=$(date +%s)
  OUT=$1 DEADLINE=${DEADLINE:-330} ALIGNERS=gpualign DECODERS='' bash bench/gpu_real.sh > /tmp/gpu_real.txt 2>&1
  echo "reads and indexes ready +$(( $(date +%s) - start )) s"
  source bench/device_env.sh 2> /dev/null
}

inputs() {
  local g n k reads
  case $1 in
    ecoli_se) g=ecoli; n=${ECOLI_READS:-10000000}; k=${K_ECOLI:-10}; reads="mason_se_n${n}_";;
    chrX_se) g=chrX20; n=${CHRX_READS:-2000000}; k=${K_CHRX:-12}; reads="mason_se_n${n}_";;
    saureus_se) g=saureus; n=${SAUREUS_READS:-5000000}; k=${K_SAUREUS:-10}; reads="mason_se_n${n}_";;
    ecoli_pe) g=ecoli; n=${ECOLI_PAIRS:-4000000}; k=${K_ECOLI:-10}; reads="mason_pe_n${n}_";;
    chrX_pe) g=chrX20; n=${CHRX_PAIRS:-1000000}; k=${K_CHRX:-12}; reads="mason_pe_n${n}_";;
    saureus_pe) g=saureus; n=${SAUREUS_PAIRS:-2000000}; k=${K_SAUREUS:-10}; reads="mason_pe_n${n}_";;
    *) return 1;;
  esac
  echo "$W/$g/idx/gpualign_k$k/ref $(ls $W/$g/${reads}*.fq.gz 2> /dev/null | tr '\n' ' ')"
}

read_files() {
  local set args
  for set in ${SETS:-ecoli_se}; do
    args=$(inputs "$set") || { echo "unknown set $set" >&2; continue; }
    printf '%s\n' ${args#* }
  done
}
