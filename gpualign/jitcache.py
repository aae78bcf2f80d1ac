"""Where numba keeps compiled code for this package.

numba checks a cached function against its own source file only: a kernel in cuda.py or cpu.py
that calls an edited function of core.py would load stale machine code. Every module that defines
jitted functions calls `use_versioned_cache()` first, which points numba's cache at a folder named
after a hash of all of this package's sources, so any edit gets a fresh cache. The folder nests
under NUMBA_CACHE_DIR when that is set (the workflow sets one), else under ~/.cache/gpualign.
"""

import hashlib
import os

_done = False


def sources_digest() -> str:
    here = os.path.dirname(os.path.abspath(__file__))
    digest = hashlib.sha256()
    for name in sorted(f for f in os.listdir(here) if f.endswith(".py")):
        with open(os.path.join(here, name), "rb") as fh:
            digest.update(name.encode() + b"\0" + fh.read())
    return digest.hexdigest()[:16]


def use_versioned_cache():
    global _done
    if _done:
        return
    from numba.core import config
    base = config.CACHE_DIR or os.path.join(os.path.expanduser("~"), ".cache", "gpualign")
    config.CACHE_DIR = os.path.join(base, "numba-" + sources_digest())
    _done = True
