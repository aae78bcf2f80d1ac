"""Compile every CUDA kernel a mapping run launches for a real GPU (PTX for sm_90), without a GPU.

numba's CUDA simulator runs the kernels as Python, so it accepts code the GPU compiler refuses (a
shared array sized by an expression, say), and a device call is too scarce to find that out. This
maps a few simulated reads (parsed and raw) and pairs in the simulator, notes each launched kernel's argument types,
then, in a second process without the simulator, compiles each kernel for those types with
numba-cuda's compile_ptx. It needs NVVM and NVRTC, which pip installs without a GPU or driver:

    pip install --target /opt/nvcc nvidia-cuda-nvcc-cu12 nvidia-cuda-nvrtc-cu12
    python bench/ptx_check.py /opt/nvcc

Prints one line a kernel and signature, with ptxas's registers, stack frame and spills for sm_90
(what bounds its occupancy); exits 1 if any fails to compile. PTX_DUMP=FOLDER writes each kernel's PTX
there as NAME.ptx (the last signature of each), to read what a change compiles to; with GPUALIGN_LINEINFO=1 it
carries .loc lines, so bench/ptx_lines.py can count a kernel's PTX instructions by source line.
"""

import json
import re
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def record_launches() -> list:
    """(module, kernel, [numba type strings]) of each distinct launch of a small simulated run."""
    import numpy as np
    import numba
    from gpualign.backends import cuda, cuda_kernels, launch, resident_kernels
    from gpualign.fastq import RawReads
    from gpualign.index import build_index
    from gpualign.mapper import map_batch, map_pair_batch
    from gpualign.options import MapParams
    from gpualign.reads import encode_reads, finish_reads
    sys.path.insert(0, os.path.join(REPO, "tests"))
    from helpers import random_genome, simulate_pairs, simulate_reads

    seen = {}

    def type_of(a):
        if hasattr(a, "copy_to_host"):   # a simulator device array: a GPU's is typed as a C-contiguous array
            return f"array {np.dtype(a.dtype).name} {a.ndim}"
        return str(numba.typeof(a))

    enqueue = cuda._enqueue

    def noting(kernel, blocks, threads, *args):
        key = (kernel.py_func.__module__, kernel.py_func.__name__, tuple(type_of(a) for a in args))
        seen[key] = True
        return enqueue(kernel, blocks, threads, *args)

    cuda._enqueue = noting
    launch.THREADS_PER_BLOCK, launch.SEED_BLOCK_THREADS, launch.SCAN_THREADS = 8, 4, 8
    rng = np.random.default_rng(1)
    genome, seqs = random_genome(rng, lengths=(1500, 700), repeat=120)
    index = build_index(genome, k=8, max_occ=50)
    p = MapParams(max_indels=3, min_score=15, max_candidates=1, max_hits=12)   # tight: re-seeding runs
    reads, (names, seqs1, quals) = simulate_reads(rng, seqs, 8, length=50, n_rate=0.01)
    map_batch(reads, genome, index, p, cuda)
    text = b"".join(b"@%s\n%s\n+\n%s\n" % (nm, r, bytes(x + 33 for x in q)) for nm, r, q in zip(names, seqs1, quals))
    raw = RawReads("r.fq", np.frombuffer(text, dtype=np.uint8), len(reads), 0, 8)   # parsed on the GPU, records made there
    map_batch(raw, genome, index, p, cuda, rg=b"", alignments=False)
    # pairs whose first R2 holds no exact 8-mer (a mismatch every 8th base): mate rescue places it
    _, (names, seqs2, quals) = simulate_pairs(rng, seqs, 40, length=100, insert=(300, 20), sub=0.0, indel=0.0)
    r2 = bytearray(seqs2[1])
    for i in range(3, len(r2), 8):
        r2[i] = b"ACGT"[(b"ACGT".index(r2[i]) + 1) % 4]
    pairs = encode_reads(names, [seqs2[0], bytes(r2)] + seqs2[2:], quals, 8)
    map_pair_batch(pairs, genome, index, MapParams(max_indels=3, max_candidates=4, max_hits=256), cuda)
    cuda.candidate_stage(reads, np.arange(len(reads)), index, p)   # the staged path's kernels
    cuda.extend_stage(reads, genome, np.arange(len(reads)), np.full(len(reads), 1 << 20, np.int64),
                      MapParams(max_indels=12))   # a band too wide for shared memory: the wide kernel
    cuda.traceback_stage(reads, genome, np.arange(len(reads)), np.full(len(reads), 1 << 20, np.int64),
                         np.zeros(len(reads), np.int64), MapParams(max_indels=12))   # the same for the traceback
    bare = finish_reads(reads.names, reads.name_off, reads.codes, reads.quals, reads.read_off, 8, derive=False)
    cuda._read_arrays(bare, "rc_codes", "packed", "rc_packed", "word_off", "hbin", "rc_hbin")
    launched = {name for _, name, _ in seen}
    for module in (cuda_kernels, resident_kernels):
        for name, obj in vars(module).items():
            if hasattr(obj, "py_func") and name.endswith("_kernel") and name not in launched:
                print(f"not launched here, not checked: {name}", file=sys.stderr)
    return [list(k[:2]) + [list(k[2])] for k in seen]


def ptxas_usage(ptx: str) -> str:
    """ptxas -v's resource line for sm_90 (registers, stack frame, spills, shared memory), where
    $PTXAS names the assembler (the nvcc wheel's bin/ptxas): what bounds a kernel's occupancy."""
    ptxas = os.environ.get("PTXAS")
    if not ptxas:
        return ""
    import tempfile
    with tempfile.NamedTemporaryFile("w", suffix=".ptx") as fh:
        fh.write(re.sub(r"^\.version 9\.\d+", ".version 8.8", ptx, flags=re.M))   # the wheel's ptxas reads up to 8.8
        fh.flush()
        done = subprocess.run([ptxas, "-arch=sm_90", "-v", fh.name, "-o", os.devnull], capture_output=True, text=True)
    if done.returncode:
        return "\n        ptxas failed: " + " | ".join(done.stderr.strip().splitlines()[:3])[:300]
    lines = [line.split("info    : ", 1)[-1].strip() for line in done.stderr.splitlines()
             if "Used" in line or "stack frame" in line]
    return "\n        " + "; ".join(lines)


def compile_all(launches: list) -> int:
    """compile_ptx of each recorded launch for sm_90; the number that failed."""
    import importlib
    import types
    import numba
    import numba.cuda.dispatcher as dispatcher
    from numba import cuda
    dispatcher.get_current_device = lambda: types.SimpleNamespace(compute_capability=(9, 0))   # no GPU here
    import numpy as np

    def parse(t):
        if t.startswith("array "):
            _, dtype, ndim = t.split()
            return numba.types.Array(numba.from_dtype(np.dtype(dtype)), int(ndim), "C")
        return numba.types.boolean if t == "bool" else getattr(numba.types, t)

    failed = 0
    for module, name, sig in launches:
        kernel = getattr(importlib.import_module(module), name)
        argtypes = tuple(parse(t) for t in sig)
        try:
            ptx, _ = cuda.compile_ptx(kernel.py_func, argtypes, cc=(9, 0),   # line info for PTX_DUMP's readers
                                      lineinfo=os.environ.get("GPUALIGN_LINEINFO") == "1")
            print(f"ok      {name} ({len(ptx)} chars of PTX){ptxas_usage(ptx)}")
            if os.environ.get("PTX_DUMP"):   # a folder: each kernel's PTX, to read what it compiles to
                with open(os.path.join(os.environ["PTX_DUMP"], f"{name}.ptx"), "w") as fh:
                    fh.write(ptx)
        except Exception as exc:   # report every kernel, then fail
            failed += 1
            print(f"FAILED  {name}: {type(exc).__name__}: {str(exc).strip().splitlines()[-1][:300]}")
    return failed


def main(argv):
    if argv and argv[0] == "--record":
        print(json.dumps(record_launches()))
        return 0
    if argv and argv[0] == "--compile":
        return 1 if compile_all(json.loads(sys.stdin.read())) else 0
    wheels = argv[0] if argv else "/opt/nvcc"
    base = {**os.environ, "PYTHONPATH": os.pathsep.join([REPO, os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, __file__, "--record"], env={**base, "NUMBA_ENABLE_CUDASIM": "1"},
                          capture_output=True, text=True, check=True)
    sys.stderr.write("".join(line + "\n" for line in done.stderr.splitlines() if line.startswith("not launched")))
    recorded = done.stdout.strip().splitlines()[-1]
    nvidia = os.path.join(wheels, "nvidia")
    env = {**base, "NUMBA_ENABLE_CUDASIM": "0", "CUDA_HOME": os.path.join(nvidia, "cuda_nvcc"),
           "PYTHONPATH": os.pathsep.join([wheels, base["PYTHONPATH"]]),
           "PTXAS": os.path.join(nvidia, "cuda_nvcc", "bin", "ptxas"),
           "LD_LIBRARY_PATH": os.pathsep.join([os.path.join(nvidia, "cuda_nvrtc", "lib"),
                                               os.path.join(nvidia, "cuda_nvcc", "nvvm", "lib64")])}
    print(f"{len(json.loads(recorded))} kernel signatures launched in the simulator; compiling for sm_90")
    return subprocess.run([sys.executable, __file__, "--compile"], input=recorded, env=env, text=True).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
