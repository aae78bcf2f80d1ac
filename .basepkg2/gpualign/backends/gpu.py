"""Which CUDA runtime the backend's host code (cuda.py, resident.py) calls, decided once per process
at its first use:

- the driver API through ctypes (cuda_driver.py), launching the machine code `gpualign compile` stored
  for this GPU and these sources: a mapping run on a GPU, without importing numba.cuda (about 1 s
  of each start);
- numba.cuda, with the kernels of cuda_kernels.py and resident_kernels.py: in numba's CUDA simulator
  (the tests), inside `gpualign compile` (which compiles them and stores their machine code), where
  nothing is stored yet, and where GPUALIGN_CUDA_RUNTIME=numba asks for it (comparisons).

The same machine code runs either way, so the records are the same.
"""

import contextlib
import os
import pickle
import threading

ENV = "GPUALIGN_CUDA_RUNTIME"   # 'numba' forces numba.cuda; unset: the driver where code is stored

_runtime = None
_forced = None
_lock = threading.Lock()


class _Numba:
    """numba.cuda and its kernel dispatchers."""
    name = "numba"

    def __init__(self):
        from numba import cuda
        self.api = cuda
        # numba-cuda's first launch of a kernel loads its module into the context, which two threads
        # at once corrupt, and numba's CUDA simulator swaps module state while a kernel runs: launches
        # take turns. A launch is queued on the thread's stream and returns at once on a GPU.
        self._turns = threading.Lock()

    def turns(self):
        return self._turns

    def kernel(self, module: str, name: str):
        return getattr(kernel_modules()[module], name)


class _Driver:
    """cuda_driver.py and the kernels of the store, all loaded into the context up front."""
    name = "driver"

    def __init__(self, kernels: dict):
        from .. import cuda_driver
        self.api = cuda_driver
        self.kernels = kernels
        for name, kernel in kernels.items():
            module, attr = name.rsplit(".", 1)
            kernel.fallback = lambda module=module, attr=attr: getattr(kernel_modules()[module], attr)

    def kernel(self, module: str, name: str):
        return self.kernels[f"{module}.{name}"]

    @staticmethod
    def turns():
        return contextlib.nullcontext()


def kernel_modules() -> dict:
    """The numba.cuda kernel modules by name (importing them compiles nothing; it imports numba.cuda)."""
    from . import cuda_kernels, resident_kernels
    return {"cuda_kernels": cuda_kernels, "resident_kernels": resident_kernels}


def use(name: str):
    """Force a runtime for this process ('numba': compile.py compiles through it), before first use."""
    global _forced
    _forced = name


def runtime():
    global _runtime
    if _runtime is None:
        with _lock:
            if _runtime is None:
                _runtime = _pick()
    return _runtime


def _pick():
    from numba.core import config
    if config.ENABLE_CUDASIM or (_forced or os.environ.get(ENV)) == "numba":
        return _Numba()
    from .. import cuda_driver, jitcache
    path = jitcache.kernel_store_path()
    if not os.path.exists(path):
        return _Numba()
    try:
        return _Driver(cuda_driver.load_store(path))
    except (OSError, EOFError, pickle.UnpicklingError, cuda_driver.DriverError):
        return _Numba()


def api():
    """numba.cuda, or cuda_driver.py with the same calls."""
    return runtime().api


def launch_turns():
    return runtime().turns()


def name_of(kernel) -> str:
    name = getattr(kernel, "name", None)
    return name.rsplit(".", 1)[-1] if isinstance(name, str) else kernel.py_func.__name__


class Kernels:
    """The kernels of one kernel module (cuda_kernels, resident_kernels) as the runtime has them:
    Kernels('cuda_kernels')._exact_kernel."""

    def __init__(self, module: str):
        self._module = module

    def __getattr__(self, name):
        return runtime().kernel(self._module, name)
