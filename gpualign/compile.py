"""`gpualign compile`: compile every kernel ahead of use, into the cache that the CLI and the
workflow share (jitcache.py says where).

numba compiles a function on its first call, for the argument types of that call, so the sure way
to compile everything a run needs is to run it: a small random genome is indexed and a few hundred
single-end and paired reads are mapped through the command line's own code path (sorted BAM with
its .bai, unsorted BAM, SAM, read groups, FASTQ comments, R1/R2 files and interleaved mates,
duplicates marked) and through the workflow's (reads split into chunks, a chunk of interleaved
mates, BAMs merged with their duplicates marked). Then a fresh process runs the same again and
counts what numba still compiles: it should be nothing.
"""

import contextlib
import gzip
import io
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

from . import jitcache

GENOME_SEED = 20240611
READ_LEN = (60, 151)      # read lengths drawn from this range
READS = 400               # single-end reads
PAIRS = 200               # read pairs
ADAPTER = "AGATCGGAAGAGCACACGTCTGAACTCCAGTCAC"


def random_genome(rng) -> dict:
    """Two contigs with what the index and the mapper treat specially: an N run, an IUPAC code,
    lower case, and a repeat (reads placed twice: ties, MAPQ 0, incomplete candidate search)."""
    bases = np.array(list("ACGT"))
    chr1 = "".join(rng.choice(bases, 30000))
    repeat = chr1[5000:5800]
    chr1 = chr1[:20000] + repeat + chr1[20800:]
    chr2 = "".join(rng.choice(bases, 9000))
    chr2 = chr2[:3000] + "N" * 120 + chr2[3120:6000].lower() + "R" + chr2[6001:]
    return {"chr1": chr1, "chr2": chr2}


def revcomp(seq: str) -> str:
    return seq.translate(str.maketrans("ACGTNacgtn", "TGCANtgcan"))[::-1]


def mutate(rng, seq: str, kind: int) -> str:
    """Sequencing-like damage by kind: 0 none, 1 substitutions, 2 an insertion and a deletion,
    3 an N, 4 adapter read-through (soft clips), 5 heavy damage (found by mate rescue or not at all)."""
    s = list(seq.upper())
    if kind in (1, 5):
        for _ in range(3 if kind == 1 else len(s) // 6):
            i = rng.integers(len(s))
            s[i] = "ACGT"[(("ACGT".find(s[i]) if s[i] in "ACGT" else 0) + 1 + rng.integers(3)) % 4]
    if kind == 2 and len(s) > 40:
        i = rng.integers(10, len(s) - 20)
        s[i:i] = list("GA")
        del s[i + 12:i + 15]
    if kind == 3:
        s[rng.integers(len(s))] = "N"
    if kind == 4:
        cut = len(s) * 2 // 3
        s = s[:cut] + list(ADAPTER)[:len(s) - cut]
    return "".join(s)


def draw(rng, genome: dict, length: int) -> tuple[str, int, str]:
    names = list(genome)
    name = names[rng.integers(len(names))]
    start = int(rng.integers(0, len(genome[name]) - length))
    return name, start, genome[name][start:start + length]


def fastq_record(name: str, seq: str, comment: str = "") -> str:
    return f"@{name}{' ' + comment if comment else ''}\n{seq}\n+\n{'I' * len(seq)}\n"


def write_inputs(folder: str, rng) -> dict:
    """FASTA, single-end reads (gzip, with SAM-tag comments), R1/R2 files and their interleaving."""
    genome = random_genome(rng)
    paths = {name: os.path.join(folder, name) for name in
             ("ref.fa", "se.fq.gz", "se.fq", "r1.fq.gz", "r2.fq.gz", "pairs.fq")}
    with open(paths["ref.fa"], "w") as fh:
        for name, seq in genome.items():
            fh.write(f">{name} random\n" + "\n".join(seq[i:i + 70] for i in range(0, len(seq), 70)) + "\n")
    single = []
    for r in range(READS):
        length = int(rng.integers(*READ_LEN))
        if r % 25 == 24:   # unmapped: random sequence
            seq = "".join(rng.choice(list("ACGT"), length))
        else:
            seq = mutate(rng, draw(rng, genome, length)[2], r % 6)
            seq = revcomp(seq) if r % 2 else seq
        single.append(fastq_record(f"se{r}", seq, f"BC:Z:ACGT{r % 4}\tXZ:i:{r}"))
    with gzip.open(paths["se.fq.gz"], "wt") as fh:
        fh.writelines(single)
    with open(paths["se.fq"], "w") as fh:
        fh.writelines(single[:100])
    r1, r2 = [], []
    for p in range(PAIRS):
        length = int(rng.integers(*READ_LEN))
        insert = int(rng.normal(320, 30)) if p % 17 else 2000   # a few discordant fragments
        name, start, frag = draw(rng, genome, max(insert, length + 1))
        a, b = frag[:length], revcomp(frag[-length:])
        a, b = mutate(rng, a, p % 5), mutate(rng, b, 5 if p % 7 == 0 else (p + 2) % 5)
        if p % 2:
            a, b = b, a
        if p % 29 == 28:
            b = "".join(rng.choice(list("ACGT"), length))
        r1.append(fastq_record(f"pair{p}/1", a))
        r2.append(fastq_record(f"pair{p}/2", b))
    with gzip.open(paths["r1.fq.gz"], "wt") as fh:
        fh.writelines(r1)
    with gzip.open(paths["r2.fq.gz"], "wt") as fh:
        fh.writelines(r2)
    with open(paths["pairs.fq"], "w") as fh:
        fh.writelines(x for pair in zip(r1, r2) for x in pair)
    return paths


def run_cli(argv: list):
    """cli.main, its log lines kept back (they are shown when it fails)."""
    from .cli import main
    text = io.StringIO()
    with contextlib.redirect_stderr(text):
        status = main(argv)
    if status != 0:
        raise RuntimeError(f"`gpualign {' '.join(argv)}` failed: {text.getvalue().strip()[-2000:]}")


def warm_up(backend: str, threads: int = 2):
    """Index a random genome and map reads through every code path that runs numba functions."""
    import numba
    from .backends import gpu
    from .workflow.chunks import merge_sorted_bams, split_pairs
    from .batches import read_interleaved_fastq
    from .genome import load_genome
    from .index import load_index
    from .mapper import map_reads
    from .options import MapParams
    if backend == "cuda":
        gpu.use("numba")   # kernels compile (or load) through numba here; their machine code is stored after
    saved_threads = numba.get_num_threads()
    rng = np.random.default_rng(GENOME_SEED)
    with tempfile.TemporaryDirectory(prefix="gpualign-compile-") as tmp, jitcache.compiling():
        paths = write_inputs(tmp, rng)
        prefix = os.path.join(tmp, "genome")   # not "ref": its PREFIX.fa would be the reference itself
        out = lambda name: os.path.join(tmp, name)  # noqa: E731
        common = ["--backend", backend, "-t", str(threads)]
        try:
            run_cli(["index", paths["ref.fa"], "-p", prefix])
            run_cli(["map", *common, "-R", r"@RG\tID:u1\tSM:s1", "-C", prefix, paths["se.fq.gz"], "-o", out("se.bam")])
            run_cli(["map", *common, prefix, paths["se.fq"], "-o", out("se.sam")])
            run_cli(["map", *common, "--unsorted", prefix, paths["se.fq"], "-o", out("se.unsorted.bam")])
            run_cli(["map", *common, "-R", r"@RG\tID:u2\tSM:s1", prefix, paths["r1.fq.gz"], paths["r2.fq.gz"],
                     "-o", out("pe.bam"), "--markdup", "--optical-distance", "100", "--markdup-metrics", out("pe.txt")])
            run_cli(["map", *common, "-p", prefix, paths["pairs.fq"], "-o", out("pe.sam")])
            # the workflow's own path: pairs split into chunks, a chunk mapped as interleaved mates
            parts = [out("part0.fq"), out("part1.fq")]
            split_pairs(paths["r1.fq.gz"], paths["r2.fq.gz"], parts, threads)
            params = MapParams()
            genome = load_genome(prefix + ".2bit.npy", prefix + ".nmask.npy", prefix + ".contigs.tsv")
            index = load_index(prefix + ".idx.npz")
            reads = read_interleaved_fastq(parts[1], index.k, params.batch_size, threads, allow_empty=True)
            map_reads(genome, index, reads, out("chunk.bam"), params, backend_name=backend, threads=threads,
                      read_group={"ID": "u3", "SM": "s1"}, log=lambda line: None, compression_level=1, sort=True,
                      index_path=out("chunk.bam.bai"), paired=True)
            # the merge of chunks and units, duplicates marked across them (optical ones counted)
            merge_sorted_bams([out("pe.bam"), out("chunk.bam")], out("merged.bam"), threads, markdup=True,
                              optical_distance=100, metrics=out("merged.txt"))
        finally:
            numba.set_num_threads(saved_threads)


@contextlib.contextmanager
def counting_compilations():
    """Names of the functions numba compiles (rather than loads from its cache) inside the block."""
    from numba.core import event
    names = []

    class Listener(event.Listener):
        def on_start(self, ev):
            func = ev.data["dispatcher"].py_func
            names.append(f"{func.__module__}.{func.__qualname__}")

        def on_end(self, ev):
            pass

    before = cuda_misses()
    with event.install_listener("numba:compile", Listener()):
        yield names
    for name, count in cuda_misses().items():
        if count > before.get(name, 0):
            names.append(name)


def cuda_misses() -> dict:
    """CUDA kernels of the backend's kernel modules compiled in this process (numba-cuda's own
    counters: its kernel compiles do not raise numba's compile event)."""
    found = {}
    for module in ("cuda_kernels", "resident_kernels"):
        mod = sys.modules.get(f"{__package__}.backends.{module}")
        for attr in dir(mod) if mod is not None else ():
            disp = getattr(mod, attr)
            misses = getattr(disp, "_cache_misses", None)
            if misses is not None and type(disp).__module__.startswith("numba.cuda"):
                found[f"{disp.py_func.__module__}.{disp.py_func.__qualname__}"] = sum(misses.values())
    return found


def store_cuda_kernels(log):
    """Keep the machine code of the kernels the warm-up ran, for mapping runs to launch without
    numba.cuda (cuda_driver.py); where that fails, runs use numba.cuda as before."""
    from . import cuda_driver as driver
    from .backends import gpu
    try:
        store = driver.stored_kernels(gpu.kernel_modules().values())
        driver.save_store(jitcache.kernel_store_path(), store)
    except Exception as exc:   # numba-cuda's internals moved: the runs still work through numba
        log(f"warning: could not store the kernels' machine code ({type(exc).__name__}: {exc}); "
            "mapping runs will load them through numba.cuda (about 1 s more a start)")
        return
    log(f"stored the machine code of {sum(len(rows) for rows in store.values())} kernel overloads "
        f"({len(store)} kernels) for launches without numba.cuda")


def compiled_in_fresh_process(backend: str) -> list:
    """What a new process running the warm-up still compiles (it should load everything)."""
    argv, env = jitcache.compile_command(backend)
    code = f"from gpualign.compile import check_main; check_main({backend!r})"
    done = subprocess.run([sys.executable, "-c", code], env=env, stdin=subprocess.DEVNULL, capture_output=True,
                          text=True)
    if done.returncode != 0:
        raise RuntimeError(f"checking the cache failed: {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def check_main(backend: str):
    with counting_compilations() as names:
        warm_up(backend)
    print(json.dumps(sorted(set(names))))


def compile_kernels(backend: str = "auto", log=print, check: bool = True) -> dict:
    """Compile every kernel of the backend (auto: the one `map --backend auto` would use) into the
    cache, mark it compiled for this machine, and (check) make sure a fresh process compiles nothing.
    Returns what it did: backend, cache folder, seconds, and the functions a fresh process compiled."""
    from numba.core import config
    from .backends import get_backend
    name = get_backend(backend, log).NAME
    folder = jitcache.cache_dir()
    if name == "cuda" and config.ENABLE_CUDASIM:
        log("NUMBA_ENABLE_CUDASIM=1: the CUDA simulator runs kernels as Python, there is nothing to compile")
        return {"backend": name, "cache": folder, "seconds": 0.0, "compiled": [], "fresh_process_compiled": []}
    if jitcache.is_compiled(name):
        log(f"kernels for the {name} backend are compiled already; checking them in {folder}")
    else:
        log(f"compiling kernels for the {name} backend, {jitcache.EXPECTED.get(name, 'a minute or more')}; "
            f"cache: {folder} (NUMBA_CACHE_DIR moves it)")
    start = time.perf_counter()
    with counting_compilations() as names:
        warm_up(name)
    seconds = time.perf_counter() - start
    if name == "cuda":
        store_cuda_kernels(log)
    jitcache.mark_compiled(name, seconds)
    log(f"{len(set(names))} functions compiled, the rest loaded from the cache, in {seconds:.1f} s")
    result = {"backend": name, "cache": folder, "seconds": seconds, "compiled": sorted(set(names)),
              "fresh_process_compiled": None}
    if check:
        again = compiled_in_fresh_process(name)
        result["fresh_process_compiled"] = again
        if again:
            log(f"warning: a fresh process still compiled {len(again)} functions (not cached: a bug, please "
                f"report it): {', '.join(again[:10])}")
        else:
            log("checked: a fresh process loads every kernel from the cache")
    return result


def run(args, log) -> int:
    """`gpualign compile [--backend B] [--no-check]` (cli.py dispatches here)."""
    compile_kernels(args.backend, log, check=not args.no_check)
    return 0


__all__ = ["compile_kernels", "warm_up", "counting_compilations"]
