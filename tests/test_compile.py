"""Compiling kernels: the cache's place and name (jitcache.py) and `gpualign compile` (compile.py).

The cache key tests work on a copy of the package. The command tests run `gpualign` in
subprocesses, from a copy of the package taken when they start (so that an edit of the checkout
during the run changes nothing), against a fresh NUMBA_CACHE_DIR: one real compile (module fixture
`compiled`, a minute or two), then maps that must load everything from it, and a map on a cache
whose "compiled" marker is gone, which compiles first and says so once.
"""

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from gpualign import jitcache
from gpualign.provenance import module_closure, module_path, package_modules

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "resources" / "demo"
COMPILING = "compiling kernels for the cpu backend"
# runs `gpualign ARGS...` and prints, last, the functions numba compiled (not loaded from the cache)
COUNTING = ("import json, sys\n"
            "from gpualign.compile import counting_compilations\n"
            "with counting_compilations() as names:\n"
            "    from gpualign.cli import main\n"
            "    status = main(sys.argv[1:])\n"
            "print(json.dumps(sorted(set(names))))\n"
            "sys.exit(status)\n")


# ---- the cache key ----------------------------------------------------------------------------


@pytest.fixture
def package(tmp_path) -> Path:
    dest = tmp_path / "gpualign"
    shutil.copytree(REPO / "gpualign", dest, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def edit(path: Path):
    path.write_text(path.read_text() + "\n# edited\n")


def test_key_follows_kernels_and_what_they_import_only(package):
    """Editing a module changes the key exactly when a kernel module is, or imports, it (subpackages
    included; tests/test_provenance.py checks the import walk itself on a fake package)."""
    kernels = jitcache.kernel_modules(str(package))
    closure = set(module_closure(*kernels, package_dir=str(package)))
    files = sorted(Path(module_path(name, str(package))).relative_to(package).as_posix()
                   for name in package_modules(str(package)))
    assert {"backends/cpu.py", "backends/cuda_kernels.py", "backends/resident_kernels.py", "encode.py"} <= closure
    assert not {"cli.py", "compile.py", "__main__.py", "backends/cuda.py", "backends/resident.py"} & closure
    key = jitcache.kernel_key(str(package))
    for rel in files:
        edit(package / rel)
        now = jitcache.kernel_key(str(package))
        assert (now != key) == (rel in closure), rel
        key = now


def test_key_is_this_copys():
    assert jitcache.kernel_key() == jitcache.kernel_key(str(REPO / "gpualign"))
    assert re.fullmatch(r"[0-9a-f]{16}", jitcache.kernel_key())


def test_remembered_key_is_the_worked_out_one_and_follows_edits(package, monkeypatch, tmp_path):
    """The key a start reads back from kernel-keys.json is the one source_hash works out; an edited module
    (a new stamp) makes it work the key out again, and a damaged file is rewritten, not trusted."""
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "cache"))
    remembered = tmp_path / "cache" / "kernel-keys.json"
    want = jitcache.kernel_key(str(package))
    assert jitcache.remembered_key(str(package)) == want and remembered.exists()
    worked_out = []
    monkeypatch.setattr(jitcache, "source_hash", lambda *a, **k: worked_out.append(1) or want)
    assert jitcache.remembered_key(str(package)) == want and not worked_out     # read back
    monkeypatch.undo()
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "cache"))
    edit(package / "extend.py")
    edited = jitcache.kernel_key(str(package))
    assert edited != want and jitcache.remembered_key(str(package)) == edited
    remembered.write_text("{not json")
    assert jitcache.remembered_key(str(package)) == edited
    assert json.loads(remembered.read_text())[str(package)]["key"] == edited


def test_every_kernel_module_versions_the_cache_before_its_first_decorator():
    decorator = re.compile(r"^@(numba\.)?(cuda\.)?(njit|jit)\b", re.M)
    modules = jitcache.kernel_modules()
    assert {"backends.cpu", "backends.cuda_kernels", "backends.resident_kernels"} <= set(modules)
    for name in modules:
        text = Path(module_path(name)).read_text()
        first = decorator.search(text)
        assert first and "use_versioned_cache()" in text[:first.start()], name


def test_cache_root(monkeypatch, tmp_path):
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "shared"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert jitcache.cache_root() == str(tmp_path / "shared")
    monkeypatch.delenv("NUMBA_CACHE_DIR")
    assert jitcache.cache_root() == str(tmp_path / "xdg" / "gpualign")
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert jitcache.cache_root() == str(tmp_path / "home" / ".cache" / "gpualign")


# ---- gpualign compile, then map ---------------------------------------------------------------


def environment(cache: Path, code: Path) -> dict:
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache), PYTHONPATH=str(code))
    env["NUMBA_ENABLE_CUDASIM"] = "0"   # the session's simulator (conftest.py) is not for these
    return env


def gpualign(cache: Path, code: Path, *args, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpualign", *args], env=environment(cache, code), cwd=cwd,
                          capture_output=True, text=True, timeout=900)


def counting(cache: Path, code: Path, *args, cwd) -> tuple[subprocess.CompletedProcess, list]:
    """`gpualign ARGS` run from the package in folder `code`, and the functions numba compiled in it."""
    proc = subprocess.run([sys.executable, "-c", COUNTING, *args], env=environment(cache, code), cwd=cwd,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr
    return proc, json.loads(proc.stdout.strip().splitlines()[-1])


def versioned(cache: Path) -> Path:
    (folder,) = cache.glob("numba-*")
    return folder


@dataclass
class Compiled:
    root: Path
    code: Path        # the folder holding the copy of the package that ran
    cache: Path
    proc: subprocess.CompletedProcess
    compiled_by_index: list


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> Compiled:
    """A fresh cache after `gpualign compile --backend cpu`, and a demo index built with it."""
    root = tmp_path_factory.mktemp("compile")
    code = root / "code"
    shutil.copytree(REPO / "gpualign", code / "gpualign", ignore=shutil.ignore_patterns("__pycache__"))
    cache = root / "cache"
    proc = gpualign(cache, code, "compile", "--backend", "cpu", cwd=root)
    assert proc.returncode == 0, proc.stderr
    _, by_index = counting(cache, code, "index", str(DEMO / "lambda.fa"), "-p", str(root / "lambda"), cwd=root)
    return Compiled(root, code, cache, proc, by_index)


@pytest.mark.slow
def test_compile_writes_the_cache_and_says_where(compiled):
    cache, proc = compiled.cache, compiled.proc
    folder = versioned(cache)
    assert folder.name == "numba-" + jitcache.kernel_key(str(compiled.code / "gpualign"))
    lines = proc.stderr.splitlines()
    assert [line for line in lines if COMPILING in line] == [lines[0]]
    assert str(folder) in lines[0]
    assert "checked: a fresh process loads every kernel from the cache" in proc.stderr
    assert "warning" not in proc.stderr
    assert any(folder.rglob("*.nbi")) and any(folder.rglob("*.nbc"))
    assert len(list(folder.glob("compiled-cpu-*.json"))) == 1


@pytest.mark.slow
def test_index_and_map_after_compile_compile_nothing(compiled):
    root, code, cache = compiled.root, compiled.code, compiled.cache
    assert compiled.compiled_by_index == []
    proc, names = counting(cache, code, "map", str(root / "lambda"), str(DEMO / "reads.fq.gz"), "-o",
                           str(root / "single.bam"), "--backend", "cpu", cwd=root)
    assert names == [] and COMPILING not in proc.stderr
    assert (root / "single.bam.bai").exists()
    pairs = [str(DEMO / f"pairs_R{m}.fq.gz") for m in (1, 2)]
    proc, names = counting(cache, code, "map", str(root / "lambda"), *pairs, "-o", str(root / "pairs.bam"),
                           "--backend", "cpu", "-t", "2", cwd=root)
    assert names == [] and COMPILING not in proc.stderr


@pytest.mark.slow
def test_cold_maps_compile_first_once_and_say_so(compiled, tmp_path):
    root, code, cold = compiled.root, compiled.code, tmp_path / "cache"
    # the compiled code, without the marker that says so: a map must compile first (here the child
    # finds everything in numba's files, so the test does not pay a second real compile). Two maps
    # start together: one compiles, the other waits for it.
    shutil.copytree(compiled.cache, cold, ignore=shutil.ignore_patterns("compiled-*.json"))
    procs = [subprocess.Popen([sys.executable, "-c", COUNTING, "map", str(root / "lambda"), str(DEMO / "reads.fq.gz"),
                               "-o", str(tmp_path / f"out{i}.bam"), "--backend", "cpu"],
                              env=environment(cold, code), cwd=tmp_path, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for i in range(2)]
    outputs = [proc.communicate(timeout=900) for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0], outputs
    logs = [err for _, err in outputs]
    assert sum(COMPILING in err for err in logs) == 1, logs
    first = next(err for err in logs if COMPILING in err)
    lines = first.splitlines()
    assert len([line for line in lines if COMPILING in line]) == 1
    assert str(versioned(cold)) in first
    assert re.search(r"compiled kernels in \d+ s \(not counted as mapping time\)", first), first
    start = next(i for i, line in enumerate(lines) if COMPILING in line)
    assert not any("mapped" in line or "done:" in line for line in lines[:start])
    for out, err in outputs:
        assert json.loads(out.strip().splitlines()[-1]) == []   # the mapping processes loaded everything
        assert "warning" not in err
    assert len(list(versioned(cold).glob("compiled-cpu-*.json"))) == 1
    again = gpualign(cold, code, "map", str(root / "lambda"), str(DEMO / "reads.fq.gz"), "-o",
                     str(tmp_path / "again.bam"), "--backend", "cpu", cwd=tmp_path)
    assert again.returncode == 0 and COMPILING not in again.stderr and "waiting" not in again.stderr
