"""Where numba keeps compiled code for this package, and whether it is there yet.

One cache serves the CLI and the workflow alike (they run the same numba functions):

    $NUMBA_CACHE_DIR/numba-<key>/             when NUMBA_CACHE_DIR is set (a cluster's shared folder)
    ${XDG_CACHE_HOME:-~/.cache}/gpualign/numba-<key>/   otherwise (per user)

<key> is a hash of the kernel sources only: provenance.source_hash (the workflow's rerun triggers
use the same) of the modules that define jitted functions, in subpackages too, and of every
gpualign module they import, so editing cli.py, the README or the workflow keeps the cache, while
editing a kernel, or anything a kernel module imports, starts a fresh folder. The versioned
folder exists because numba checks a cached function against its own source file only: a kernel
in backends/cuda.py that calls an edited function of extend.py would load stale machine code.
Every module that defines jitted functions calls `use_versioned_cache()` before its decorators,
since numba picks a function's cache folder when it is decorated.

numba compiles on first call, for the argument types of that call: the first run of a fresh cache
spends a minute or two compiling. `gpualign compile` (compile.py) does that ahead of time and
leaves a marker per backend and machine in the folder; `map_reads` calls `ensure_compiled`, which,
when the marker is missing, says so and compiles first (one process at a time: others wait for
it), so the mapping clock and its reads/s do not include compile time.
"""

import contextlib
import fcntl
import hashlib
import json
import os
import re
import subprocess
import sys
import threading
import time

from .provenance import module_path, package_modules, source_hash

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
# what makes a module a kernel module: a numba decorator, or the call that must precede one
_JITTED = re.compile(r"^\s*(?:@(?:numba\.)?(?:cuda\.)?(?:njit|jit)\b|use_versioned_cache\(\))", re.M)
# what a cold cache costs, roughly: 63-71 s (cpu) and 53 s (cuda) on the H100 host, 90-140 s (cpu) on
# a 2-core VM (BENCHMARKS.md, "Start-up: compiling kernels")
EXPECTED = {"cpu": "one to two minutes", "cuda": "about a minute"}
# GPUALIGN_LINEINFO=1: the seeding kernels compiled with a map from machine code to source lines, for a
# profiler's per-line counts (bench/gpu_seed_profile.sh; code generation is unaffected). Given to cuda.jit
# only then, and never in the CUDA simulator, whose jit takes no such option.
LINEINFO = ({"lineinfo": True} if os.environ.get("GPUALIGN_LINEINFO") == "1"
            and os.environ.get("NUMBA_ENABLE_CUDASIM") != "1" else {})

_done = False
_key = {}
_compiling = threading.local()   # set while compile.py runs the warm-up: maps inside it do not recurse
_lock = threading.Lock()


def kernel_modules(package_dir: str | None = None) -> list:
    """Names of the package's modules that define jitted functions, subpackages included
    ('mapper', 'backends.cpu': provenance's module names)."""
    package_dir = package_dir or PACKAGE_DIR
    names = []
    for name in package_modules(package_dir):
        if name != "jitcache":
            with open(module_path(name, package_dir), encoding="utf-8") as fh:
                if _JITTED.search(fh.read()):
                    names.append(name)
    return names


def kernel_key(package_dir: str | None = None) -> str:
    """Hash of the kernel modules and every gpualign module they import (16 hex digits); of this
    copy of the package unless `package_dir` names another (computed once per process, and for this
    copy remembered across processes: remembered_key)."""
    if package_dir is not None:
        return source_hash(*kernel_modules(package_dir), package_dir=package_dir)
    if not _key:
        _key[PACKAGE_DIR] = remembered_key(PACKAGE_DIR)
    return _key[PACKAGE_DIR]


def source_stamps(names, package_dir: str) -> dict:
    """[mtime_ns, size] of the named modules' files: what numba itself checks its cache entries by."""
    stamps = {}
    for name in names:
        st = os.stat(module_path(name, package_dir))
        stamps[name] = [st.st_mtime_ns, st.st_size]
    return stamps


def remembered_key(package_dir: str) -> str:
    """kernel_key of package_dir, read from a small file beside the cache while no module file of the
    package has changed (stamps): working it out parses every module (0.26 s of each start on the
    2-core machine). The file is rewritten atomically; where it cannot be, the key is worked out."""
    path = os.path.join(cache_root(), "kernel-keys.json")
    stamps = source_stamps(package_modules(package_dir), package_dir)
    try:
        with open(path, encoding="utf-8") as fh:
            known = json.load(fh)
        entry = known.get(package_dir, {})
        if entry.get("stamps") == stamps and isinstance(entry.get("key"), str):
            return entry["key"]
    except (OSError, ValueError, AttributeError):
        known = {}
    key = source_hash(*kernel_modules(package_dir), package_dir=package_dir)
    known[package_dir] = {"stamps": stamps, "key": key}
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(known, fh)
        os.replace(tmp, path)
    except OSError:
        pass
    return key


def cache_root() -> str:
    """NUMBA_CACHE_DIR when set, else ${XDG_CACHE_HOME:-~/.cache}/gpualign."""
    given = os.environ.get("NUMBA_CACHE_DIR", "")
    if given:
        return os.path.abspath(os.path.expanduser(given))
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = xdg if os.path.isabs(xdg) else os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "gpualign")


def cache_dir(package_dir: str | None = None) -> str:
    """The versioned folder numba caches this package's compiled code in: the one this process
    uses once a kernel module is imported, else where it would be now."""
    if _done and package_dir is None:
        from numba.core import config
        return config.CACHE_DIR
    return os.path.join(cache_root(), "numba-" + kernel_key(package_dir))


def use_versioned_cache():
    """Point numba's cache at cache_dir(); call before the first numba decorator of a module."""
    global _done
    if _done:
        return
    from numba.core import config   # numba.cuda reads the same config object
    config.CACHE_DIR = cache_dir()
    _done = True


# ---- has this machine compiled this code yet? -------------------------------------------------


def machine_key(backend: str) -> dict:
    """What numba's cache entries depend on besides the sources: versions, the CPU or the GPU, and
    where the sources are (numba files entries by source path, and checks the file's mtime)."""
    import numba
    key = {"backend": backend, "python": sys.version.split()[0], "numba": numba.__version__,
           "package_dir": PACKAGE_DIR}
    if backend == "cuda":   # asked of the driver: importing numba.cuda costs most of a second
        import numba_cuda
        from . import cuda_driver as driver
        name, cc = driver.device_facts()
        key.update(numba_cuda=numba_cuda.__version__, gpu=name, cc=list(cc))
    else:
        from numba.core.registry import cpu_target
        key["cpu"] = list(cpu_target.target_context.codegen().magic_tuple())
    key["stamps"] = source_stamps(kernel_modules(), PACKAGE_DIR)
    return key


def _machine_digest(backend: str) -> str:
    return hashlib.sha256(json.dumps(machine_key(backend), sort_keys=True).encode()).hexdigest()[:12]


def marker_path(backend: str) -> str:
    return os.path.join(cache_dir(), f"compiled-{backend}-{_machine_digest(backend)}.json")


def kernel_store_path() -> str:
    """Where `gpualign compile` keeps the CUDA kernels' machine code for this GPU (cuda_driver.py)."""
    return os.path.join(cache_dir(), f"kernels-cuda-{_machine_digest('cuda')}.pkl")


def is_compiled(backend: str) -> bool:
    return os.path.exists(marker_path(backend))


def mark_compiled(backend: str, seconds: float):
    """Record that every kernel of `backend` is in the cache for this machine."""
    path = marker_path(backend)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    record = dict(machine_key(backend), seconds=round(seconds, 1), key=kernel_key(),
                  written=time.strftime("%Y-%m-%dT%H:%M:%S%z"))
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as fh:
        json.dump(record, fh, indent=1)
    os.replace(tmp, path)


class compiling:
    """Context in which maps are the warm-up itself: ensure_compiled leaves them alone."""

    def __enter__(self):
        _compiling.on = True

    def __exit__(self, *exc):
        _compiling.on = False


def compile_command(backend: str, check: bool = False) -> tuple[list, dict]:
    """argv and environment of `gpualign compile` for this copy of the package and this cache."""
    env = dict(os.environ, NUMBA_CACHE_DIR=os.path.dirname(cache_dir()))   # the child uses this very folder
    parent = os.path.dirname(PACKAGE_DIR)   # `-m gpualign` must find this very copy
    env["PYTHONPATH"] = os.pathsep.join(p for p in (parent, env.get("PYTHONPATH", "")) if p)
    argv = [sys.executable, "-m", "gpualign", "compile", "--backend", backend] + ([] if check else ["--no-check"])
    return argv, env


@contextlib.contextmanager
def compile_lock(backend: str, log):
    """Held while one process compiles into the folder: others on the host wait for it, then find
    the marker (flock; where the file system has no locks, nobody waits). Yields seconds waited."""
    start = time.perf_counter()
    fh = None
    try:
        os.makedirs(cache_dir(), exist_ok=True)
        fh = open(os.path.join(cache_dir(), f".compiling-{backend}.lock"), "a+")
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"another process is compiling the {backend} backend's kernels into {cache_dir()}: waiting for it")
            fcntl.flock(fh, fcntl.LOCK_EX)
    except OSError:
        pass
    try:
        yield time.perf_counter() - start
    finally:
        if fh is not None:
            fh.close()


def ensure_compiled(backend: str, log) -> float:
    """Compile every kernel of `backend` ('cpu' or 'cuda') first when this machine has not yet:
    one log line before (what, roughly how long, where), one after. Returns the seconds spent.

    The work runs as `gpualign compile` in a child process, so nothing of this process (threads,
    numba settings, the CUDA context) changes; this process then loads the kernels from the cache.
    Processes starting together (align jobs) compile once: the others wait for the first.
    A failure is a warning: the kernels then compile during mapping, as numba does by itself.
    """
    from numba.core import config
    if getattr(_compiling, "on", False) or (backend == "cuda" and config.ENABLE_CUDASIM) or config.DISABLE_JIT:
        return 0.0
    if is_compiled(backend):
        return 0.0
    with _lock, compile_lock(backend, log) as waited:
        if is_compiled(backend):
            log(f"kernels compiled by another process meanwhile ({waited:.0f} s waited, not counted as mapping time)")
            return waited
        log(f"compiling kernels for the {backend} backend: first run of this gpualign code on this machine, "
            f"{EXPECTED.get(backend, 'a minute or more')}, once; cache: {cache_dir()} "
            "(`gpualign compile` does this ahead of time; NUMBA_CACHE_DIR moves it)")
        start = time.perf_counter()
        argv, env = compile_command(backend)
        try:
            done = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True)
        except OSError as exc:
            done = subprocess.CompletedProcess(argv, 1, f"{exc}")
        seconds = time.perf_counter() - start
        if done.returncode != 0:
            last = (done.stdout or "").strip().splitlines()[-1:] or ["no output"]
            log(f"warning: compiling ahead failed ({last[0]}); kernels compile during mapping instead")
            return seconds
        log(f"compiled kernels in {seconds:.0f} s (not counted as mapping time)")
        return seconds
