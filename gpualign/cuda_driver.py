"""The CUDA driver API through ctypes: what a mapping run needs of the GPU without importing
numba.cuda, which cost about 1 s of every start on the H100 host (0.6-0.9 s to import it, 0.25 s
for its typing registries at the first launch).

- `gpualign compile` runs every kernel through numba once (compile.py), then `save_store` keeps
  each kernel's machine code (cubin), entry name and argument types beside numba's cache, for this
  GPU model and these sources (jitcache.machine_key).
- A mapping run loads that store (`load_store`) and launches the cubins with cuLaunchKernel,
  passing arguments as numba's kernels take them: an array as (meminfo, parent, nitems, itemsize,
  data, shape..., strides...), a scalar as its C type (numba-cuda's dispatcher, _prepare_args).
- Memory, streams and events are thin objects with the names of the numba.cuda calls the backend
  makes (to_device, device_array, pinned_array, stream, event; copy_to_host, copy_to_device,
  synchronize, record, elapsed_time), so backends/cuda.py runs on either (gpu.py picks).

Device 0 of the visible ones, in its primary context (the one numba uses too), as numba does.
"""

import ctypes
import os
import pickle
import struct
import threading
import time

import numpy as np

from . import trace

_lib = None
_held = None   # the same library through ctypes.PyDLL: its calls keep the GIL (_quick_call)
_ctx = None
_device = None
_init_lock = threading.Lock()
_bound = threading.local()
_c_size = ctypes.c_size_t
_c_ptr = ctypes.c_void_p


class DriverError(RuntimeError):
    pass


def _call(name, *args):
    """A driver call that may wait (a synchronize, an allocation, a copy of pageable memory), made without the
    GIL. With a trace on it is a step of its own ("driver NAME"), so that a mapping thread's waits on the driver
    stand apart on the timeline from the time it spends taking the GIL back."""
    with trace.span(f"driver {name}"):   # records nothing with the trace off
        _check(name, getattr(_lib, name)(*args))


def _release(name, handle):
    """A release from a destructor (cuMemFree_v2, cuMemFreeHost: each waits for the whole device), traced as
    _call; its result is not checked (at the process's end the driver frees everything anyway)."""
    with trace.span(f"driver {name}"):
        getattr(_lib, name)(handle)


def _quick_call(name, *args):
    """_call for a driver call that returns at once (a launch, an event's record, an asynchronous copy
    of page-locked memory), made holding the GIL: released, the calling thread must take it back
    behind every busy Python thread, which in a mapping run cost milliseconds a call (a kernel's end
    event passed before the host's clock read after its launch), each one delaying a batch's chain."""
    _check(name, getattr(_held, name)(*args))


def _check(name, rc):
    if rc != 0:
        text = ctypes.c_char_p()
        _lib.cuGetErrorName(rc, ctypes.byref(text))
        raise DriverError(f"{name}: {(text.value or b'?').decode()} ({rc})")


def init():
    """Load libcuda, initialise it and retain device 0's primary context (once per process; about
    0.2 s on the H100 host, without the GIL, so a thread can do it while the imports run)."""
    global _lib, _held, _ctx, _device
    with _init_lock:
        if _ctx is not None:
            return
        lib = ctypes.CDLL("libcuda.so.1")
        _lib, _held = lib, ctypes.PyDLL("libcuda.so.1")
        _call("cuInit", 0)
        dev, ctx = ctypes.c_int(), _c_ptr()
        _call("cuDeviceGet", ctypes.byref(dev), 0)
        _call("cuDevicePrimaryCtxRetain", ctypes.byref(ctx), dev)
        _device, _ctx = dev, ctx


def init_in_background():
    """init() on a thread of its own: the driver's start (no GIL held) overlaps the imports that
    follow; whoever needs the context next waits for it (init's lock)."""
    threading.Thread(target=available, name="CUDA init", daemon=True).start()


def available() -> bool:
    """Whether a CUDA GPU can be used (libcuda loads, initialises and has a device)."""
    try:
        init()
        return True
    except (OSError, DriverError):
        return False


def _bind():
    """Make the context current on the calling thread (the driver API keeps it per thread)."""
    if not getattr(_bound, "on", False):
        init()
        _call("cuCtxSetCurrent", _ctx)
        _bound.on = True


def device_facts() -> tuple[str, tuple[int, int]]:
    """Name and compute capability of the device, as numba reports them."""
    _bind()
    name = ctypes.create_string_buffer(256)
    _call("cuDeviceGetName", name, 256, _device)
    major, minor = ctypes.c_int(), ctypes.c_int()
    _call("cuDeviceGetAttribute", ctypes.byref(major), 75, _device)   # COMPUTE_CAPABILITY_MAJOR
    _call("cuDeviceGetAttribute", ctypes.byref(minor), 76, _device)   # COMPUTE_CAPABILITY_MINOR
    return name.value.decode(), (major.value, minor.value)


# ---- memory ------------------------------------------------------------------------------------


def memory_info() -> tuple[int, int]:
    """(free, total) bytes of the device's memory."""
    _bind()
    free, total = _c_size(), _c_size()
    _call("cuMemGetInfo_v2", ctypes.byref(free), ctypes.byref(total))
    return free.value, total.value


class _Allocation:
    """Device memory, freed when the last array over it goes."""

    def __init__(self, nbytes: int):
        _bind()
        self.ptr = ctypes.c_uint64()
        _call("cuMemAlloc_v2", ctypes.byref(self.ptr), _c_size(max(nbytes, 1)))
        self.ptr = self.ptr.value

    def __del__(self):
        try:
            _bind()
            _release("cuMemFree_v2", ctypes.c_uint64(self.ptr))
        except Exception:   # the process is ending: the driver frees everything anyway
            pass


class DeviceArray:
    """A C-contiguous array in device memory: shape, dtype, slices of the first axis, views and
    reshapes of the whole, copies to and from host arrays."""

    def __init__(self, shape, dtype, allocation, offset=0):
        self.shape = _shape(shape)
        self.dtype = np.dtype(dtype)
        self.ndim = len(self.shape)
        self.size = _count(self.shape)
        self.nbytes = self.size * self.dtype.itemsize
        strides, step = [], self.dtype.itemsize
        for extent in reversed(self.shape):
            strides.append(step)
            step *= extent
        self.strides = tuple(reversed(strides))
        self.allocation, self.offset = allocation, offset
        self.ptr = allocation.ptr + offset

    def __len__(self):
        return self.shape[0]

    @property
    def __cuda_array_interface__(self):
        return {"shape": self.shape, "strides": None, "typestr": self.dtype.str, "data": (self.ptr, False),
                "version": 3}

    def __getitem__(self, key):
        if not isinstance(key, slice) or key.step not in (None, 1):
            raise TypeError("device arrays take slices of their first axis only")
        start, stop, _ = key.indices(self.shape[0])
        stop = max(stop, start)
        return DeviceArray((stop - start,) + self.shape[1:], self.dtype, self.allocation,
                           self.offset + start * self.strides[0])

    def view(self, dtype):
        dtype = np.dtype(dtype)
        if self.ndim != 1 or self.nbytes % dtype.itemsize:
            raise ValueError(f"cannot view {self.shape} {self.dtype} as {dtype}")
        return DeviceArray((self.nbytes // dtype.itemsize,), dtype, self.allocation, self.offset)

    def reshape(self, shape):
        shape = _shape(shape)
        if _count(shape) != self.size:
            raise ValueError(f"cannot reshape {self.shape} to {shape}")
        return DeviceArray(shape, self.dtype, self.allocation, self.offset)

    def copy_to_host(self, host=None, stream=None):
        """Into `host` (asynchronously on `stream` where given; page-locked memory makes it so), or
        into a new array, waited for."""
        _bind()
        if host is None:
            host = np.empty(self.shape, self.dtype)
            stream = None
        _check_host(host, self.nbytes)
        if self.nbytes:
            if stream is None:
                _call("cuMemcpyDtoH_v2", _c_ptr(host.ctypes.data), ctypes.c_uint64(self.ptr), _c_size(self.nbytes))
            else:
                _async_call(host)("cuMemcpyDtoHAsync_v2", _c_ptr(host.ctypes.data), ctypes.c_uint64(self.ptr),
                                  _c_size(self.nbytes), stream.handle)
        return host

    def copy_to_device(self, host, stream=None):
        _bind()
        _check_host(host, self.nbytes)
        if self.nbytes:
            if stream is None:
                _call("cuMemcpyHtoD_v2", ctypes.c_uint64(self.ptr), _c_ptr(host.ctypes.data), _c_size(self.nbytes))
            else:
                _async_call(host)("cuMemcpyHtoDAsync_v2", ctypes.c_uint64(self.ptr), _c_ptr(host.ctypes.data),
                                  _c_size(self.nbytes), stream.handle)


def _async_call(host):
    """How to make an asynchronous copy to or from host: holding the GIL (_quick_call) where host is
    page-locked memory of pinned_array's, which the driver queues and returns from at once; else
    (pageable memory, which the driver copies before it returns) letting go of it."""
    base = host
    while isinstance(base, np.ndarray):
        base = base.base
    return _quick_call if isinstance(getattr(base, "_keeper", None), _PinnedBuffer) else _call


def _check_host(host, nbytes):
    if not host.flags.c_contiguous or host.nbytes != nbytes:
        raise ValueError(f"host array of {host.nbytes} bytes (contiguous: {host.flags.c_contiguous}) "
                         f"for {nbytes} device bytes")


def _shape(shape) -> tuple:
    """A shape as a tuple of ints (numba.cuda's calls take an int for one dimension)."""
    return tuple(int(x) for x in shape) if isinstance(shape, tuple) else (int(shape),)


def _count(shape) -> int:
    return int(np.prod(shape, dtype=np.int64))


def device_array(shape, dtype=np.uint8, stream=None):
    shape, dtype = _shape(shape), np.dtype(dtype)
    return DeviceArray(shape, dtype, _Allocation(_count(shape) * dtype.itemsize))


def to_device(arr):
    """A device copy of a host array, waited for."""
    arr = np.ascontiguousarray(arr)
    dev = device_array(arr.shape, arr.dtype)
    dev.copy_to_device(arr)
    return dev


class _PinnedBuffer:
    """Frees page-locked memory when the last numpy array over it goes."""

    def __init__(self, address: int):
        self.address = address

    def __del__(self):
        try:
            _bind()
            _release("cuMemFreeHost", _c_ptr(self.address))
        except Exception:
            pass


def pinned_array(shape, dtype=np.uint8):
    """A numpy array in page-locked host memory (copies from and to it run at full speed, and
    asynchronously)."""
    _bind()
    shape, dtype = _shape(shape), np.dtype(dtype)
    nbytes = _count(shape) * dtype.itemsize
    ptr = _c_ptr()
    _call("cuMemHostAlloc", ctypes.byref(ptr), _c_size(max(nbytes, 1)), 0)
    owner = (ctypes.c_uint8 * max(nbytes, 1)).from_address(ptr.value)
    owner._keeper = _PinnedBuffer(ptr.value)   # numpy's views of `owner` keep it, and so the memory
    return np.frombuffer(owner, dtype=np.uint8)[:nbytes].view(dtype).reshape(shape)


# ---- streams and events --------------------------------------------------------------------------


class Stream:
    def __init__(self):
        _bind()
        self.handle = _c_ptr()
        _call("cuStreamCreate", ctypes.byref(self.handle), 0)

    def synchronize(self):
        _bind()
        _call("cuStreamSynchronize", self.handle)


def stream():
    return Stream()


class Event:
    def __init__(self):
        _bind()
        self.handle = _c_ptr()
        _call("cuEventCreate", ctypes.byref(self.handle), 0)

    def record(self, stream=None):
        _bind()
        _quick_call("cuEventRecord", self.handle, stream.handle if stream is not None else _c_ptr())

    def synchronize(self):
        _bind()
        _call("cuEventSynchronize", self.handle)

    def elapsed_time(self, end) -> float:
        """Milliseconds from this event to `end` (both recorded and done, so the driver answers at once:
        made holding the GIL, as _quick_call says why)."""
        _bind()
        ms = ctypes.c_float()
        _quick_call("cuEventElapsedTime", ctypes.byref(ms), self.handle, end.handle)
        return ms.value


def event():
    return Event()


def synchronize():
    _bind()
    _call("cuCtxSynchronize")


# ---- kernels -----------------------------------------------------------------------------------


def arg_code(value):
    """The type code of a launch argument as numba would type it: ('a', dtype, ndim) for an array,
    'b' for a bool, 'i64'/'u8'/... for an integer, 'f64'/'f32' for a float."""
    if isinstance(value, DeviceArray):
        return ("a", value.dtype.str, value.ndim)
    if isinstance(value, (bool, np.bool_)):
        return "b"
    if isinstance(value, int):
        return "i64"
    if isinstance(value, float):
        return "f64"
    if isinstance(value, np.generic):
        return _scalar_code(value.dtype)
    raise TypeError(f"a kernel argument of type {type(value).__name__}")


def _scalar_code(dtype):
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return "b"
    if dtype.kind in "iuf":
        return f"{dtype.kind}{8 * dtype.itemsize}"
    raise TypeError(f"a kernel argument of dtype {dtype}")


def arg_words(value, code) -> list:
    """The 64-bit parameter slots of one argument in numba's kernel ABI (each parameter in a slot of
    its own, little-endian: narrower types use its low bytes)."""
    if code[0] == "a":
        return [0, 0, value.size, value.dtype.itemsize, value.ptr, *value.shape, *value.strides]
    if code == "f64":
        return [struct.unpack("<Q", struct.pack("<d", float(value)))[0]]
    if code == "f32":
        return [struct.unpack("<I", struct.pack("<f", float(value)))[0]]
    return [int(value) & 0xFFFFFFFFFFFFFFFF]


class Kernel:
    """A stored kernel's overloads (argument type codes -> CUfunction), launched as numba's are:
    kernel[blocks, threads, stream](*args)."""

    def __init__(self, name: str, overloads: dict):
        self.name = name
        self.overloads = overloads
        self.fallback = None   # () -> numba's dispatcher of the kernel, for arguments not stored

    def __getitem__(self, config):
        blocks, threads, *rest = config
        stream = rest[0] if rest else None
        return lambda *args: self.launch(int(blocks), int(threads), stream, args)

    def launch(self, blocks, threads, stream, args):
        codes = tuple(arg_code(a) for a in args)
        func = self.overloads.get(codes)
        if func is None:   # not run by compile.py's warm-up: numba compiles it, on the same memory
            if self.fallback is None:
                raise DriverError(f"kernel {self.name}: no machine code stored for arguments {codes}")
            _through_numba(self.fallback(), blocks, threads, stream, args)
            return
        words = []
        for value, code in zip(args, codes):
            words.extend(arg_words(value, code))
        slots = np.array(words, dtype=np.uint64)
        params = np.arange(len(words), dtype=np.uint64) * 8 + slots.ctypes.data
        _bind()
        _submitted.at = time.perf_counter()
        _quick_call("cuLaunchKernel", func, blocks, 1, 1, threads, 1, 1, 0,
                    stream.handle if stream is not None else _c_ptr(), _c_ptr(params.ctypes.data), None)


_numba_turns = threading.Lock()
_submitted = threading.local()


def submitted_at() -> float:
    """The host's clock (time.perf_counter) just before this thread's last cuLaunchKernel (0 before
    any): no kernel starts before it, while a clock read before the arguments were packed also
    counts the time this thread waited for the GIL to pack them, which a trace would take for the
    GPU's."""
    return getattr(_submitted, "at", 0.0)


def _through_numba(dispatcher, blocks, threads, stream, args):
    """A launch the store has no machine code for, by numba.cuda's dispatcher (which compiles it);
    it takes our arrays through __cuda_array_interface__ and our stream as an external one."""
    from numba import cuda
    with _numba_turns:
        on = cuda.external_stream(stream.handle.value) if stream is not None else 0
        dispatcher[blocks, threads, on](*args)


# ---- the store of machine code -----------------------------------------------------------------


def numba_arg_code(ty):
    """arg_code for a numba type of a compiled overload."""
    from numba.core import types
    from numba.np.numpy_support import as_dtype
    if isinstance(ty, types.Array):
        if ty.layout != "C":
            return None
        return ("a", as_dtype(ty.dtype).str, ty.ndim)
    if isinstance(ty, types.Boolean):
        return "b"
    if isinstance(ty, (types.Integer, types.Float)):
        return _scalar_code(as_dtype(ty))
    raise TypeError(f"a kernel argument of numba type {ty}")


def stored_kernels(modules) -> dict:
    """{'module.kernel': [(argument codes, entry name, cubin)]} of every compiled overload of the
    numba.cuda kernels in `modules` (C-contiguous array arguments only: the backend passes no
    others), linked for this device."""
    store = {}
    for module in modules:
        for attr, disp in sorted(vars(module).items()):
            overloads = getattr(disp, "overloads", None)
            if not attr.endswith("_kernel") or not isinstance(overloads, dict):
                continue
            rows = []
            for argtypes, kernel in overloads.items():
                codes = tuple(numba_arg_code(t) for t in argtypes)
                if None in codes:
                    continue
                lib = kernel._codelibrary
                rows.append((codes, lib._entry_name, _cubin_bytes(lib.get_cubin())))
            store[f"{module.__name__.rsplit('.', 1)[-1]}.{attr}"] = rows
    return store


def _cubin_bytes(cubin) -> bytes:
    """numba-cuda's linked cubin: bytes, or (newer versions) a cuda.core ObjectCode holding them."""
    kind = getattr(cubin, "code_type", "cubin")
    code = getattr(cubin, "code", cubin)
    if kind != "cubin" or not isinstance(code, (bytes, bytearray)):
        raise TypeError(f"linked code of type {kind} {type(code).__name__}, not cubin bytes")
    return bytes(code)


def save_store(path: str, store: dict):
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "wb") as fh:
        pickle.dump({"version": 1, "kernels": store}, fh)
    os.replace(tmp, path)


def load_store(path: str) -> dict:
    """{'module.kernel': Kernel}, every cubin loaded into the context."""
    with open(path, "rb") as fh:
        data = pickle.load(fh)
    if data.get("version") != 1:
        raise DriverError(f"{path}: an unknown store version")
    _bind()
    kernels = {}
    for name, rows in data["kernels"].items():
        overloads = {}
        for codes, entry, cubin in rows:
            module, func = _c_ptr(), _c_ptr()
            _call("cuModuleLoadData", ctypes.byref(module), ctypes.c_char_p(cubin))
            _call("cuModuleGetFunction", ctypes.byref(func), module, entry.encode())
            overloads[codes] = func
        kernels[name] = Kernel(name, overloads)
    return kernels
