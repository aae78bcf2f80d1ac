"""Source hashes of gpualign modules: the one mechanism behind the workflow's rerun triggers and the
compile cache's folder name.

Snakemake's code trigger sees a rule's script, not the package the script imports. The workflow
puts `script_hash(<the rule's script>)` into each rule's params: the hash of the gpualign modules
the script imports and of every gpualign module those import, so editing a kernel module changes
the hash of align, and so reruns align and what follows, while the reference stages, whose modules
did not change, are kept. jitcache.py names numba's cache folder by `source_hash` of the modules
that define jitted functions, for the same reason.

Modules are named by their dotted path below the package ('mapper', 'backends.cpu', 'bam' for
bam/__init__.py, '__init__' for the package's own); 'gpualign.mapper' is accepted too. Imports are
found by reading the source (ast), at any depth, inside functions too: absolute ones
(`from gpualign.bam.sort import x`, `import gpualign.index`), relative ones at any level
(`from .core import x`, `from ..encode import x`, `from . import cpu`), and
`importlib.import_module` of a constant name. A package's `__init__.py` counts where a module
imports it or a name from it (`from . import __version__`, `from .bam import write_stats`), not
where the module only passes through it to a submodule (`from .bam.sort import x`,
`from .backends import cpu`): Python runs it then too, but what a module uses is what it names.
Only the standard library is used here: the workflow imports this module before anything else.
"""

import ast
import functools
import hashlib
import os

PACKAGE = "gpualign"
HASH_CHARS = 16
PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def _parts(name: str) -> tuple:
    """'mapper', 'gpualign.backends.cpu' -> ('mapper',), ('backends', 'cpu'); the package -> ()."""
    if name in (PACKAGE, "__init__"):
        return ()
    if name.startswith(PACKAGE + "."):
        name = name[len(PACKAGE) + 1:]
    parts = tuple(name.split("."))
    if not all(p.isidentifier() for p in parts) or "__init__" in parts:
        raise ValueError(f"source_hash: {name!r} is not a module name of the {PACKAGE} package")
    return parts


def _name(parts: tuple) -> str:
    return ".".join(parts) or "__init__"


def _locate(parts: tuple, package_dir: str):
    """(source file or None, is_package) of a module of the package; None when there is none.
    A folder is a package (Python prefers it over a module of the same name); its source is its
    __init__.py, None for a namespace package."""
    base = os.path.join(package_dir, *parts)
    if os.path.isdir(base) and (not parts or parts[-1] != "__pycache__"):
        init = os.path.join(base, "__init__.py")
        return (init if os.path.isfile(init) else None), True
    if parts and os.path.isfile(base + ".py"):
        return base + ".py", False
    return None


def module_path(name: str, package_dir: str | None = None) -> str:
    """The source file of a module ('backends.cpu' -> .../backends/cpu.py, 'bam' -> .../bam/__init__.py)."""
    package_dir = package_dir or PACKAGE_DIR
    found = _locate(_parts(name), package_dir)
    if found is None or found[0] is None:
        raise ValueError(f"source_hash: no module {name!r} in {package_dir}")
    return found[0]


def package_modules(package_dir: str | None = None) -> list:
    """Names of every module of the package, subpackages included, sorted."""
    package_dir = package_dir or PACKAGE_DIR
    names = []
    for folder, dirs, files in os.walk(package_dir):
        dirs[:] = sorted(d for d in dirs if d.isidentifier() and d != "__pycache__")
        here = tuple(os.path.relpath(folder, package_dir).split(os.sep)) if folder != package_dir else ()
        for fname in files:
            stem, ext = os.path.splitext(fname)
            if ext == ".py" and stem.isidentifier():
                names.append(_name(here if stem == "__init__" else here + (stem,)))
    return sorted(names)


def _target(here: tuple | None, level: int, module: str | None, where: str):
    """The module parts a `from` names (relative to `here`, the importing module's package; None for
    a file outside the package), or None when it is not a gpualign module."""
    if level == 0:
        parts = (module or "").split(".")
        return tuple(parts[1:]) if parts[0] == PACKAGE else None
    if here is None:
        return None   # a relative import outside the package is not ours
    if level - 1 > len(here):
        raise ValueError(f"{where}: relative import beyond the {PACKAGE} package")
    base = here[:len(here) - (level - 1)]
    return base + (tuple(module.split(".")) if module else ())


@functools.lru_cache(maxsize=4096)
def _import_statements(path: str, stamp: tuple) -> tuple:
    """The imports of the file at `path` as (level, module, names): `from ..a.b import c, d` is
    (2, 'a.b', ('c', 'd')), `import a.b` is (0, 'a.b', ()), `importlib.import_module('.a', ...)`
    with a constant name is (1, 'a', ()). `stamp` (mtime, size) keys the cache."""
    with open(path, "rb") as fh:
        tree = ast.parse(fh.read(), filename=path)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            found.append((node.level, node.module, tuple(alias.name for alias in node.names)))
        elif isinstance(node, ast.Import):
            found.extend((0, alias.name, ()) for alias in node.names)
        elif (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)
              and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module"):
            name = node.args[0].value
            dots = len(name) - len(name.lstrip("."))
            found.append((dots, name[dots:] or None, ()))
    return tuple(found)


def _imports(path: str, here: tuple | None, package_dir: str) -> set:
    """gpualign modules (as parts) that the file at `path` imports; `here` is the package the file
    is in (() for gpualign's top level, None for a file outside the package, such as a script)."""
    st = os.stat(path)
    found = set()
    for level, module, names in _import_statements(os.path.abspath(path), (st.st_mtime_ns, st.st_size)):
        target = _target(here, level, module, path)
        if target is None:
            continue
        if not names:   # import gpualign.a.b, import_module(...)
            found.add(target)
        for name in names:   # from target import name: a submodule, or else a name of target
            sub = target + (name,)
            found.add(sub if name != "*" and _locate(sub, package_dir) is not None else target)
    return found


def _closure(roots: list, package_dir: str, importer: str | None = None) -> list:
    """Source files (relative, '/'-separated) of the modules `roots` (parts) and all they import;
    `importer` names the file that imports the roots, for messages."""
    todo, seen, files = [(parts, importer) for parts in roots], set(), set()
    while todo:
        parts, importer = todo.pop()
        if parts in seen:
            continue
        seen.add(parts)
        found = _locate(parts, package_dir)
        if found is None:
            by = f"{importer} imports {'.'.join((PACKAGE,) + parts)}: " if importer else ""
            raise ValueError(f"source_hash: {by}no module {_name(parts)!r} in {package_dir}")
        path, is_package = found
        if path is None:   # a namespace package: no code of its own
            continue
        rel = os.path.relpath(path, package_dir).replace(os.sep, "/")
        files.add(rel)
        here = parts if is_package else parts[:-1]
        todo.extend((p, rel) for p in _imports(path, here, package_dir) - seen)
    return sorted(files)


def module_closure(*names: str, package_dir: str | None = None) -> list:
    """The named modules and every gpualign module they import, transitively, as sorted file paths
    relative to the package folder ('mapper.py', 'backends/cpu.py', 'bam/__init__.py')."""
    return _closure([_parts(n) for n in names], package_dir or PACKAGE_DIR)


def imported_modules(path: str, package_dir: str | None = None) -> list:
    """Names of the gpualign modules that a file outside the package (a workflow script) imports."""
    return sorted(_name(parts) for parts in _imports(path, None, package_dir or PACKAGE_DIR))


def _digest(files: list, package_dir: str) -> str:
    digest = hashlib.sha256()
    for rel in files:
        with open(os.path.join(package_dir, *rel.split("/")), "rb") as fh:
            data = fh.read()
        digest.update(f"{rel}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()[:HASH_CHARS]


def source_hash(*names: str, package_dir: str | None = None) -> str:
    """First 16 hex digits of the sha256 of the named modules' source and of every gpualign module
    they import (module_closure).

    `package_dir` is the gpualign source folder to read (default: the one this file is in). The hash
    covers file paths and bytes, in sorted order, so it changes exactly when one of those files does.
    """
    if not names:
        raise ValueError("source_hash: name at least one module")
    package_dir = package_dir or PACKAGE_DIR
    return _digest(module_closure(*names, package_dir=package_dir), package_dir)


def script_hash(path: str, package_dir: str | None = None) -> str:
    """source_hash of the gpualign modules a script outside the package imports (a workflow rule's
    script), and of theirs; the hash of no files when it imports none."""
    package_dir = package_dir or PACKAGE_DIR
    roots = [_parts(n) for n in imported_modules(path, package_dir)]
    return _digest(_closure(roots, package_dir, importer=path), package_dir)


__all__ = ["source_hash", "script_hash", "module_closure", "imported_modules", "package_modules", "module_path"]
