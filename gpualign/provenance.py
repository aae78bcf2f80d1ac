"""Source hashes of gpualign modules, so the workflow reruns a stage when the code it runs changes.

Snakemake's code trigger sees a rule's script, not the package the script imports. The workflow
puts `source_hash(<modules the rule's script imports>)` into each rule's params: editing a kernel
module (core.py, cpu.py, cuda.py, ...) changes the hash of align, and so reruns align and what
follows, while the reference stages, whose modules did not change, are kept.

A module's hash covers the module and every gpualign module it imports, directly or inside a
function (`from .core import ...`, `from . import cuda`), found by reading the source, so a rule
lists only the modules its script imports. `__init__.py` counts only where a module imports a
name from it (`from . import __version__`). Only the standard library is used here: the
workflow imports this module before anything else.
"""

import ast
import hashlib
import os

PACKAGE = "gpualign"
HASH_CHARS = 16


def _module_name(name: str) -> str:
    """'mapper', 'gpualign.mapper' -> 'mapper'; the package itself -> '__init__'."""
    if name == PACKAGE:
        return "__init__"
    if name.startswith(PACKAGE + "."):
        name = name[len(PACKAGE) + 1:]
    if not name or "." in name or "/" in name or os.sep in name:
        raise ValueError(f"source_hash: {name!r} is not a module of the {PACKAGE} package")
    return name


def _imports(path: str, package_dir: str) -> set:
    """gpualign modules that the module at `path` imports (relative or absolute, at any depth)."""
    with open(path, "rb") as fh:
        tree = ast.parse(fh.read(), filename=path)
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1:                                   # from .core import x
                sub = node.module
            elif node.level == 0 and (node.module or "").split(".")[0] == PACKAGE:
                sub = node.module.partition(".")[2] or None       # from gpualign.core import x
            else:
                continue
            if sub:
                found.add(sub.split(".")[0])
            else:                                                 # from . import cuda, __version__
                for alias in node.names:
                    is_module = os.path.exists(os.path.join(package_dir, alias.name + ".py"))
                    found.add(alias.name if is_module else "__init__")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == PACKAGE and len(parts) > 1:
                    found.add(parts[1])
    return found


def module_closure(*names: str, package_dir: str | None = None) -> list:
    """The named modules and every gpualign module they import, transitively, as sorted file names."""
    package_dir = package_dir or os.path.dirname(os.path.abspath(__file__))
    todo = [_module_name(n) for n in names]
    seen = set()
    while todo:
        mod = todo.pop()
        if mod in seen:
            continue
        path = os.path.join(package_dir, mod + ".py")
        if not os.path.isfile(path):
            raise ValueError(f"source_hash: no module {mod!r} in {package_dir}")
        seen.add(mod)
        todo.extend(_imports(path, package_dir) - seen)
    return sorted(m + ".py" for m in seen)


def source_hash(*names: str, package_dir: str | None = None, follow_imports: bool = True) -> str:
    """First 16 hex digits of the sha256 of the named modules' source (and their imports').

    `names` are module names ('mapper' or 'gpualign.mapper'); `package_dir` is the gpualign source
    folder to read (default: the one this file is in). The hash covers file names and bytes, in
    sorted order, so it changes exactly when one of those files does.
    """
    if not names:
        raise ValueError("source_hash: name at least one module")
    package_dir = package_dir or os.path.dirname(os.path.abspath(__file__))
    if follow_imports:
        files = module_closure(*names, package_dir=package_dir)
    else:
        files = sorted({_module_name(n) + ".py" for n in names})
    digest = hashlib.sha256()
    for fname in files:
        with open(os.path.join(package_dir, fname), "rb") as fh:
            data = fh.read()
        digest.update(f"{fname}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()[:HASH_CHARS]


__all__ = ["source_hash", "module_closure"]
