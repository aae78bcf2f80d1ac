"""Source hashes (gpualign/provenance.py): the import closure of a module, subpackages included, and
the hash over it that the workflow's rules (params.code) and the compile cache (jitcache) share.

Most tests work on a small fake gpualign package written under tmp_path, laid out as the real one
is meant to be (backends/ and bam/ subpackages, relative imports at several levels), so they do not
depend on where the real package's modules are at the moment.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpualign import jitcache
from gpualign.provenance import (imported_modules, module_closure, module_path, package_modules, script_hash,
                                 source_hash)

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = REPO / "workflow" / "scripts"

FAKE = {
    "__init__.py": "__version__ = '1'\n",
    "a.py": "from .b import f\n",
    "b.py": "def f():\n    from . import c, __version__\n",
    "c.py": "import numpy\nx = 1\n",
    "d.py": "from gpualign.c import x\n",
    "encode.py": "TABLE = b'ACGTN'\n",
    "sam.py": "from .encode import TABLE\nmd_nm = None\n",
    "jitcache.py": "def use_versioned_cache():\n    pass\n",
    "mapper.py": "from .backends import get_backend\nfrom .bam.sort import SortedBam\n",
    "cli.py": "import gpualign.mapper\nfrom gpualign import __version__\n",
    "dyn.py": "import importlib\nbgzf = importlib.import_module('.bam.bgzf', __package__)\n",
    "beyond.py": "from ..outside import x\n",
    "stale.py": "from .gone import x\n",
    "backends/__init__.py": ("def get_backend(name):\n    from . import cpu\n"
                             "    if name == 'cuda':\n        from . import cuda\n"),
    "backends/cpu.py": ("from ..jitcache import use_versioned_cache\nuse_versioned_cache()\n"
                        "from numba import njit\nfrom ..encode import TABLE\nfrom . import launch\n\n\n"
                        "@njit(cache=True)\ndef kernel(x):\n    return x\n"),
    "backends/cuda.py": ("from ..jitcache import use_versioned_cache\nuse_versioned_cache()\n"
                         "from numba import cuda\nfrom .launch import THREADS\nfrom .. import encode\n\n\n"
                         "@cuda.jit(cache=True)\ndef kernel(x):\n    pass\n"),
    "backends/launch.py": "THREADS = 128\n",
    "bam/__init__.py": "'''BAM output.'''\nfrom .stats import write_stats\n",
    "bam/records.py": "from ..encode import TABLE\nfrom ..sam import md_nm\nencode_record = None\n",
    "bam/sort.py": "from .records import encode_record\nfrom .bgzf import write_block\nSortedBam = None\n",
    "bam/bgzf.py": "import zlib\nwrite_block = None\n",
    "bam/stats.py": "import pysam\nwrite_stats = None\n",
}


@pytest.fixture
def fake(tmp_path) -> Path:
    """The fake package: tmp_path/gpualign."""
    pkg = tmp_path / "gpualign"
    for rel, text in FAKE.items():
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        (pkg / rel).write_text(text)
    return pkg


def edit(path: Path):
    path.write_text(path.read_text() + "# edited\n")


def test_top_level_imports(fake):
    """Relative and absolute imports, inside functions too; __init__.py where a name is imported from it."""
    assert module_closure("a", package_dir=str(fake)) == ["__init__.py", "a.py", "b.py", "c.py"]
    assert module_closure("gpualign.d", package_dir=str(fake)) == ["c.py", "d.py"]
    assert module_closure("cli", package_dir=str(fake)) == module_closure("cli", "mapper", "__init__",
                                                                          package_dir=str(fake))


def test_subpackages(fake):
    # ..encode from a subpackage; `from . import launch` is the submodule, not backends/__init__.py
    assert module_closure("backends.cpu", package_dir=str(fake)) == [
        "backends/cpu.py", "backends/launch.py", "encode.py", "jitcache.py"]
    assert module_closure("gpualign.backends.cuda", package_dir=str(fake)) == [
        "backends/cuda.py", "backends/launch.py", "encode.py", "jitcache.py"]
    # a name from a package is its __init__.py, and what that imports (both backends, lazily)
    assert module_closure("mapper", package_dir=str(fake)) == [
        "backends/__init__.py", "backends/cpu.py", "backends/cuda.py", "backends/launch.py", "bam/bgzf.py",
        "bam/records.py", "bam/sort.py", "encode.py", "jitcache.py", "mapper.py", "sam.py"]
    # a submodule through its package leaves the package's __init__.py (and its re-exports) out
    assert "bam/__init__.py" not in module_closure("bam.sort", package_dir=str(fake))
    assert module_closure("bam", package_dir=str(fake)) == ["bam/__init__.py", "bam/stats.py"]
    # importlib.import_module of a constant name, relative to the package
    assert module_closure("dyn", package_dir=str(fake)) == ["bam/bgzf.py", "dyn.py"]


def test_names_and_files(fake):
    assert package_modules(str(fake)) == sorted(
        ["__init__", "a", "b", "c", "d", "encode", "sam", "jitcache", "mapper", "cli", "dyn", "beyond", "stale",
         "backends", "backends.cpu", "backends.cuda", "backends.launch",
         "bam", "bam.records", "bam.sort", "bam.bgzf", "bam.stats"])
    assert module_path("bam", str(fake)) == str(fake / "bam" / "__init__.py")
    assert module_path("gpualign.backends.cpu", str(fake)) == str(fake / "backends" / "cpu.py")
    assert module_path("gpualign", str(fake)) == str(fake / "__init__.py")
    # a package wins over a module of the same name, as in Python
    (fake / "bam.py").write_text("x = 1\n")
    assert module_path("bam", str(fake)) == str(fake / "bam" / "__init__.py")
    for bad in ("bam/sort", "bam..sort", "bam.__init__", ""):
        with pytest.raises(ValueError, match="is not a module name"):
            module_path(bad, str(fake))


def test_errors_name_the_module(fake):
    with pytest.raises(ValueError, match="no module 'zz'"):
        source_hash("zz", package_dir=str(fake))
    with pytest.raises(ValueError, match=r"stale.py imports gpualign.gone: no module 'gone'"):
        source_hash("stale", package_dir=str(fake))
    with pytest.raises(ValueError, match="beyond.py: relative import beyond the gpualign package"):
        source_hash("beyond", package_dir=str(fake))
    with pytest.raises(ValueError, match="name at least one module"):
        source_hash(package_dir=str(fake))


def test_hash_changes_exactly_with_the_closure(fake):
    names = ["a", "b", "c", "d", "mapper", "backends.cpu", "backends.cuda", "bam", "bam.sort", "bam.stats"]

    def hashes():
        return {name: source_hash(name, package_dir=str(fake)) for name in names}

    before = hashes()
    assert all(len(h) == 16 for h in before.values()) and len(set(before.values())) == len(names)
    os.utime(fake / "backends" / "launch.py", ns=(1, 1))   # a new time alone changes nothing
    assert hashes() == before
    for rel, changed in [
        ("b.py", {"a", "b"}),
        ("backends/launch.py", {"mapper", "backends.cpu", "backends.cuda"}),
        ("encode.py", {"mapper", "backends.cpu", "backends.cuda", "bam.sort"}),
        ("backends/__init__.py", {"mapper"}),
        ("bam/__init__.py", {"bam"}),
        ("bam/stats.py", {"bam", "bam.stats"}),
    ]:
        edit(fake / rel)
        after = hashes()
        assert {name for name in names if after[name] != before[name]} == changed, rel
        before = after


def test_script_outside_the_package(fake, tmp_path):
    """A workflow script: its absolute gpualign imports; relative ones are not the package's."""
    script = tmp_path / "script.py"
    script.write_text("import os\nimport gpualign.backends.cpu\nfrom gpualign.bam.sort import SortedBam\n"
                      "from gpualign import c, __version__\nfrom .local import thing\n"
                      "def later():\n    from gpualign.bam import write_stats\n")
    assert imported_modules(str(script), str(fake)) == ["__init__", "backends.cpu", "bam", "bam.sort", "c"]
    assert script_hash(str(script), str(fake)) == source_hash("__init__", "backends.cpu", "bam", "bam.sort", "c",
                                                              package_dir=str(fake))
    before = script_hash(str(script), str(fake))
    edit(fake / "backends" / "launch.py")
    assert script_hash(str(script), str(fake)) != before
    (tmp_path / "none.py").write_text("import os\n")
    assert imported_modules(str(tmp_path / "none.py"), str(fake)) == []
    assert len(script_hash(str(tmp_path / "none.py"), str(fake))) == 16
    (tmp_path / "stale.py").write_text("from gpualign.params import MapParams\n")
    with pytest.raises(ValueError, match=r"stale.py imports gpualign.params: no module 'params'"):
        script_hash(str(tmp_path / "stale.py"), str(fake))


def loaded_by_import(names: list, package: Path) -> set:
    """Files of `package` (relative) that Python loads on importing the named modules, in a fresh process."""
    code = (f"import importlib, json, sys\nfor n in {['gpualign.' + n for n in names]!r}:\n"
            "    importlib.import_module(n)\n"
            "print(json.dumps(sorted(m.__file__ for n, m in sys.modules.items()\n"
            "                        if n.startswith('gpualign') and getattr(m, '__file__', None))))\n")
    env = dict(os.environ, PYTHONPATH=str(package.parent), NUMBA_ENABLE_CUDASIM="0")
    proc = subprocess.run([sys.executable, "-c", code], cwd=package.parent, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    return {os.path.relpath(p, package).replace(os.sep, "/") for p in json.loads(proc.stdout.splitlines()[-1])}


def passed_through(loaded: set, package: Path) -> set:
    """The closure of the package __init__.py files among `loaded`: Python runs them on the way to a
    submodule, and they are left out of a closure (on purpose) where no name of them is imported."""
    inits = [rel.removesuffix("__init__.py").rstrip("/").replace("/", ".") or "__init__"
             for rel in loaded if rel.endswith("__init__.py")]
    return set(module_closure(*inits, package_dir=str(package)))


def test_closure_covers_what_python_imports(fake):
    """What Python loads on importing modules is in their closure, but for the packages passed through.
    A dynamic import the walker cannot see would show here."""
    loaded = loaded_by_import(["mapper", "dyn"], fake)
    assert "bam/stats.py" in loaded   # bam/__init__.py's re-export, run on the way to bam.sort
    assert loaded - passed_through(loaded, fake) <= set(module_closure("mapper", "dyn", package_dir=str(fake)))


# ---- jitcache: the compile cache's key is the same mechanism ----------------------------------


def test_kernel_key_over_subpackages(fake):
    assert jitcache.kernel_modules(str(fake)) == ["backends.cpu", "backends.cuda"]
    key = jitcache.kernel_key(str(fake))
    assert key == source_hash("backends.cpu", "backends.cuda", package_dir=str(fake))
    edit(fake / "bam" / "stats.py")
    edit(fake / "mapper.py")
    assert jitcache.kernel_key(str(fake)) == key
    edit(fake / "encode.py")   # imported by a kernel module with `from ..encode import`
    assert jitcache.kernel_key(str(fake)) != key
    (fake / "bam" / "bai.py").write_text("from numba import njit\n\n\n@njit\ndef bins(x):\n    return x\n")
    assert jitcache.kernel_modules(str(fake)) == ["backends.cpu", "backends.cuda", "bam.bai"]


# ---- the real package and the workflow's scripts ----------------------------------------------


def script_closure(name: str) -> set:
    return set(module_closure(*imported_modules(str(SCRIPTS / name))))


def test_align_code_covers_every_kernel_and_the_reference_stages_none_of_the_mapper():
    align = script_closure("align.py")
    kernels = {os.path.relpath(module_path(m), REPO / "gpualign").replace(os.sep, "/")
               for m in jitcache.kernel_modules()}
    # the merge's kernels (bam/merge.py) are the merge scripts', so a change there reruns the merges only
    merges = script_closure("merge_units.py") & script_closure("merge_chunks.py")
    assert kernels - {"bam/merge.py"} <= align and "bam/merge.py" in merges - align
    backends = {rel for rel in align if rel.startswith("backends/")}
    assert {"backends/cpu.py", "backends/cuda.py", "backends/cuda_kernels.py", "backends/resident_kernels.py"} <= backends
    for script in ("mask_reference.py", "pack_reference.py", "index_reference.py"):
        closure = script_closure(script)
        assert "mapper.py" not in closure and not closure & backends, script


def test_align_code_covers_what_its_imports_load():
    """The modules Python loads for align's imports are in align's code hash, but for the packages
    passed through: a dynamic import the walker cannot see would show here."""
    package = REPO / "gpualign"
    names = [n for n in imported_modules(str(SCRIPTS / "align.py")) if n != "__init__"]
    loaded = loaded_by_import(names, package)
    assert loaded - passed_through(loaded, package) <= script_closure("align.py")
