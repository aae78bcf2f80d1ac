"""cuda_driver.py's host-side parts, which need no GPU: kernel arguments typed as numba types them (so
a launch finds the overload `gpualign compile` stored) and laid out as numba's kernels take them, and
device arrays' slices, views and reshapes. The launches themselves are checked on a GPU: records
through the driver equal numba.cuda's and the CPU backend's (BENCHMARKS.md)."""

import ctypes
import threading

import numba
import numpy as np
import pytest

from gpualign import cuda_driver
from gpualign.cuda_driver import DeviceArray, arg_code, arg_words, numba_arg_code


class FakeAllocation:
    """Device memory stand-in: only its address is read."""
    ptr = 0x7F0000001000


def device(shape, dtype):
    return DeviceArray(shape, dtype, FakeAllocation())


@pytest.mark.parametrize("host", [np.zeros(7, np.int64), np.zeros((5, 3), np.int64), np.zeros(9, np.uint8),
                                  np.zeros(4, np.int32), np.zeros(6, np.bool_), np.zeros(2, np.uint32)])
def test_an_array_is_typed_and_laid_out_as_numba_does(host):
    dev = device(host.shape, host.dtype)
    assert arg_code(dev) == numba_arg_code(numba.typeof(host))
    # numba's array argument: meminfo, parent, nitems, itemsize, data, shape..., strides...
    assert arg_words(dev, arg_code(dev)) == [0, 0, host.size, host.itemsize, FakeAllocation.ptr,
                                             *host.shape, *host.strides]


@pytest.mark.parametrize("value", [True, False, np.bool_(True), 3, -1, 2**40, np.int64(-7), np.int32(-2),
                                   np.uint8(200), 0.25, np.float32(1.5)])
def test_a_scalar_is_typed_as_numba_types_it(value):
    assert arg_code(value) == numba_arg_code(numba.typeof(value))


def test_scalar_words_hold_the_c_value_in_their_low_bytes():
    as_bytes = lambda word: int(word).to_bytes(8, "little")  # noqa: E731
    assert as_bytes(arg_words(-1, "i64")[0]) == np.int64(-1).tobytes()
    assert as_bytes(arg_words(np.int32(-2), "i32")[0])[:4] == np.int32(-2).tobytes()
    assert as_bytes(arg_words(True, "b")[0])[:1] == b"\x01"
    assert as_bytes(arg_words(0.25, "f64")[0]) == np.float64(0.25).tobytes()
    assert as_bytes(arg_words(np.float32(1.5), "f32")[0])[:4] == np.float32(1.5).tobytes()


def test_slices_views_and_reshapes_address_the_same_bytes_as_numpy():
    base = FakeAllocation.ptr
    buf = device((1000,), np.uint8)
    words = buf[:800].view(np.int64)
    assert (words.shape, words.ptr) == ((100,), base)
    rows = words.reshape((25, 4))
    assert rows.strides == (32, 8) and rows.shape == (25, 4)
    part = rows[3:10]
    assert (part.shape, part.ptr, part.nbytes) == ((7, 4), base + 3 * 32, 7 * 32)
    assert part[2:].ptr == base + 5 * 32 and part[5:2].shape == (0, 4) and part[:100].shape == (7, 4)
    with pytest.raises(ValueError):
        buf[:801].view(np.int64)
    with pytest.raises(TypeError):
        buf[::2]


def test_a_launch_without_stored_code_says_so():
    kernel = cuda_driver.Kernel("cuda_kernels._exact_kernel", {})
    with pytest.raises(cuda_driver.DriverError, match="no machine code stored"):
        kernel[1, 32](device((4,), np.int64), 3)


def test_async_copies_of_page_locked_memory_keep_the_gil():
    """An asynchronous copy of pinned_array's memory returns at once, so it is made holding the GIL
    (_quick_call), through any view the staging buffers hand out; pageable memory, which the driver
    copies before returning, lets go of it (_call)."""
    owner = (ctypes.c_uint8 * 64)()
    owner._keeper = cuda_driver._PinnedBuffer(0)   # as pinned_array keeps its memory (freeing 0 does nothing here)
    pinned = np.frombuffer(owner, dtype=np.uint8)[:48].view(np.int64).reshape(2, 3)
    assert cuda_driver._async_call(pinned) is cuda_driver._quick_call
    assert cuda_driver._async_call(pinned[1]) is cuda_driver._quick_call
    assert cuda_driver._async_call(np.zeros(6, dtype=np.int64)) is cuda_driver._call
    assert cuda_driver._async_call(np.frombuffer((ctypes.c_uint8 * 8)(), dtype=np.uint8)) is cuda_driver._call


class _Library:
    """The driver's calls as ctypes would make them, each returning the code it is given (0: success)."""

    def __init__(self, codes):
        self.codes, self.calls = codes, []

    def __getattr__(self, name):
        return lambda *args: (self.calls.append(name), self.codes.get(name, 0))[1]


def test_a_trace_shows_each_driver_wait_as_a_step_of_its_own(monkeypatch):
    """With GPUALIGN_TRACE, a call that may wait (_call) and a release (_release) are steps named after the
    driver function, on the calling thread; a failed call still raises; without a trace nothing is recorded."""
    lib = _Library({"cuStreamSynchronize": 700, "cuGetErrorName": 0})
    monkeypatch.setattr(cuda_driver, "_lib", lib)
    monkeypatch.setattr(cuda_driver.trace, "_events", [])
    monkeypatch.delenv("GPUALIGN_TRACE", raising=False)
    cuda_driver._call("cuMemAlloc_v2", 1, 2)
    assert cuda_driver.trace._events == [] and lib.calls == ["cuMemAlloc_v2"]
    monkeypatch.setenv("GPUALIGN_TRACE", "unused.tsv")   # written only by trace.write
    cuda_driver._call("cuMemAlloc_v2", 1, 2)
    cuda_driver._release("cuMemFreeHost", 3)
    with pytest.raises(cuda_driver.DriverError, match="cuStreamSynchronize"):
        cuda_driver._call("cuStreamSynchronize", 4)
    steps = [(thread, step) for thread, step, start, end, cpu in cuda_driver.trace._events]
    me = threading.current_thread().name
    assert steps == [(me, "driver cuMemAlloc_v2"), (me, "driver cuMemFreeHost"), (me, "driver cuStreamSynchronize")]
    assert all(start <= end for _, _, start, end, _ in cuda_driver.trace._events)
