# Prologue of a benchmark call on the lent GPU machine; source it from the repository root:
#   run(command="source bench/device_env.sh && python3 bench/end_to_end.py ...", carry=[".whl", ".peer"])
# - wheels in .whl (pysam, isal, psutil, pinned numpy, ...; or in the folder $WHL names) installed into /tmp/site,
#   once per machine;
# - peer aligners from .peer/*.deb (apt-get download bwa minimap2 bowtie2) unpacked into /tmp/peer;
# - numba's compile cache in /tmp/nbcache, unbuffered Python, machine facts in $OUT/machine.txt.
# The machine has no samtools binary: the benchmarks sort and index with pysam.
export OUT=${OUT:-/tmp/bench_out}
mkdir -p "$OUT"
_whl_list=$(ls "${WHL:-.whl}"/*.whl 2>/dev/null)
if [ "$(cat /tmp/site/.whl_list 2>/dev/null)" != "$_whl_list" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "${WHL:-.whl}"/*.whl \
    || { echo "device_env: wheel install failed" >&2; return 1 2>/dev/null || exit 1; }
  echo "$_whl_list" > /tmp/site/.whl_list
fi
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH NUMBA_CACHE_DIR=/tmp/nbcache PYTHONUNBUFFERED=1
# byte code, as a pip or conda install has it: the wheels above go in with --no-compile, and the machine sets
# PYTHONDONTWRITEBYTECODE, so without this every start compiled numpy, numba and gpualign from source (numpy's
# import took 0.24-0.35 s there, against 0.05 s with byte code)
python3 -m compileall -q -j 0 /tmp/site "$PWD/gpualign" > /dev/null 2>&1
mkdir -p /tmp/peer
for _deb in .peer/*.deb; do [ -e "$_deb" ] && dpkg -x "$_deb" /tmp/peer; done
export PATH=/tmp/peer/usr/bin:$PATH
{
  date -u +"%Y-%m-%dT%H:%M:%SZ"
  echo "PYTHONDONTWRITEBYTECODE=${PYTHONDONTWRITEBYTECODE:-}"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo "no nvidia-smi"
  echo "cpus $(nproc)"; free -g | sed -n 2p; df -h /tmp | tail -n 1
  python3 -c 'import sys, numpy, numba, pysam; print("python", sys.version.split()[0], "numpy", numpy.__version__, "numba", numba.__version__, "pysam", pysam.__version__)'
  for _t in bwa minimap2 bowtie2-align-s; do command -v $_t >/dev/null && echo "$_t: $(command -v $_t)" || echo "$_t: missing"; done
} > "$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt" >&2
unset _whl_list _deb _t
