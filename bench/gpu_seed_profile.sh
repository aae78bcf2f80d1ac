#!/usr/bin/env bash
# Where the first seeding's cycles go, line by line (GPU): Nsight Compute's source counters (warp stall samples,
# instructions executed) for one launch of the seeding kernel SEED_KERNEL [seed_shared] while bench/seed_probe.py maps
# a batch of 200 k simulated reads of GENOME [chrX20] (gpu_seed_probe.sh's), its kernels compiled by numba with line
# information (GPUALIGN_LINEINFO=1, in a numba cache of their own). $OUT: seed_lines.csv (ncu's source page, the
# CUDA lines), seed_sass.csv (the machine code), seed_details.txt (its sections), seed_prof.ncu-rep.
#   run(command="bash bench/gpu_seed_profile.sh", carry=[".whlreal", ".data"])
set -uo pipefail
export WHL=${WHL:-.whlreal}
source bench/device_env.sh 2> /dev/null || exit 1
W=/tmp/seed_probe; mkdir -p $W
name=${GENOME:-chrX20}; len=${LEN:-150}
[ -e $W/$name.idx.npz ] || python3 -m gpualign index .data/$name.fa.gz -p $W/$name -k 12 2>&1 | tail -n 1
[ -e $W/$name.fq.gz ] || python3 bench/simulate.py .data/$name.fa.gz -n 200000 -l $len -t "$(nproc)" \
  -o $W/$name.fq.gz > /dev/null
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2> /dev/null | head -n 1)
export GPUALIGN_LINEINFO=1 GPUALIGN_CUDA_RUNTIME=numba NUMBA_CACHE_DIR=/tmp/nbcache_lines
timeout "${NCU_TIMEOUT:-300}" "$NCU" --clock-control none -k "regex:${SEED_KERNEL:-seed_shared}" --launch-skip 1 \
  --launch-count 1 --section SourceCounters --section WarpStateStats --section SpeedOfLight --section Occupancy \
  --import-source yes -f -o /tmp/seed_prof python3 bench/seed_probe.py $W/$name $W/$name.fq.gz --reads 200000 \
  --repeat 2 --kernels seed_shared > "$OUT/seed_prof_run.txt" 2>&1
tail -n 5 "$OUT/seed_prof_run.txt"
"$NCU" -i /tmp/seed_prof.ncu-rep --page details > "$OUT/seed_details.txt" 2>&1
"$NCU" -i /tmp/seed_prof.ncu-rep --page source --csv --print-source cuda > "$OUT/seed_lines.csv" 2>&1
"$NCU" -i /tmp/seed_prof.ncu-rep --page source --csv --print-source sass > "$OUT/seed_sass.csv" 2>&1
cp /tmp/seed_prof.ncu-rep "$OUT/"
grep -E "Duration|Warp Cycles Per Issued|Achieved Occupancy|Executed Ipc A" "$OUT/seed_details.txt"
head -c 2000 "$OUT/seed_lines.csv"
