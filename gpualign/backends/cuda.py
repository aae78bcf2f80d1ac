"""CUDA backend, host side: one thread per read (exact match, seeding) or per read-candidate pair
(extension, traceback), the kernels in cuda_kernels.py and resident_kernels.py.

Two layers, after numba-cuda's examples: private launchers (upload, grid from launch.py, launch,
copy back); public *_stage functions with the same signatures as cpu.py. The mapper's usual path is
resident.py's chain, built on the same launchers, which keeps a batch on the GPU between stages;
the *_stage functions serve the paired path's rescue and traceback, and tests. Memory, streams,
events and kernels come from gpu.py: the CUDA driver through ctypes with stored machine code on a
GPU (cuda_driver.py), numba.cuda in its simulator and while compiling.

Every host thread that calls a stage gets its own CUDA stream and its own device buffers, one per
named slot, kept from batch to batch in an Arena (a mapping thread's planned for full batches), so
the mapper can keep several batches in flight (BATCHES_IN_FLIGHT): one batch's uploads, kernels and
copies back run while another thread does host work on its batch.
"""

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .. import extend, trace
from ..errors import InputError
from ..batches import fragments_per_batch
from ..md import md_bound
from ..reads import word_offsets
from ..seed import scratch_words
from ..cuda_driver import submitted_at
from . import gpu, launch
from ..extend import EXT_COLUMNS, RESCUE_COLUMNS, TR_COLUMNS, TR_NOPS

NAME = "cuda"
# Mapping threads, each with its own stream: one batch's host work overlaps the others' GPU work.
# On the H100 (10 M reads, 5 Mbp): 1 in flight 31.7 s, 2 27.4 s, 3 22.3 s (BENCHMARKS.md); on an H200 host
# (2026-11-26) 4 against 3: E. coli pairs 3.41-3.60 s against 3.53-3.66, chrX pairs 2.44-2.77 against 2.50-2.73;
# 5 no better than 4.
BATCHES_IN_FLIGHT = 4
RESCUE_BLOCKS = 16384        # blocks of a rescue launch, a task a block at a time
RESEED_CHUNK = 16384         # reads re-seeded per launch: 128 KB of hit scratch each, 2 GB per thread
K = gpu.Kernels("cuda_kernels")   # the kernels (cuda_kernels.py), as gpu.py hands them out


_resident = {}
_resident_lock = threading.Lock()


def _resident_key(arr):
    return id(arr), arr.__array_interface__["data"][0], arr.shape


def _on_device(arr):
    """Genome and index arrays go to the GPU once per process, not once per batch; from their files
    where they are memory-mapped and big (upload_from_file)."""
    key = _resident_key(arr)
    with _resident_lock:
        if key not in _resident:
            with trace.span("GPU genome and index upload"):
                mapped = (isinstance(arr, np.memmap) and arr.filename and arr.ndim == 1 and arr.flags.c_contiguous
                          and arr.nbytes >= UPLOAD_FROM_FILE_MIN)
                dev = upload_from_file(arr) if mapped else gpu.api().to_device(np.ascontiguousarray(arr))
                _resident[key] = (arr, dev)
        return _resident[key][1]


UPLOAD_CHUNK = 64 << 20   # bytes a page-locked buffer of upload_from_file holds
# ... and the smallest array it uploads: below this a plain copy through the mapping is sooner than making
# UPLOAD_THREADS page-locked buffers (a bacterial or chromosome index's arrays are 20-150 MB; a human's 1-12 GB)
UPLOAD_FROM_FILE_MIN = 256 << 20
UPLOAD_THREADS = 4        # ... and the threads reading into one each (H100 host, 1-16 threads: 6-13 GB/s, best at 4)


def upload_from_file(arr: np.memmap):
    """A memory-mapped 1-d array's device copy, read from its file rather than through the mapping:
    UPLOAD_THREADS threads each read a chunk at a time into a page-locked buffer of their own
    (pread: a copy from the page cache, no page faults) and copy it up on their own stream while
    the others read. The mapping's pages are never touched, so a human index (14.5 GB) adds nothing
    to the process's resident set; reading it through the mapping faulted in every page (18.2 GB
    peak) at about 9 GB/s on the GPU host, against 13 GB/s this way (the copy bandwidth is 55 GB/s:
    the copies out of the page cache are the bound)."""
    api = gpu.api()
    dev = api.device_array(arr.shape, arr.dtype)
    raw = dev.view(np.uint8)
    nbytes, step = arr.nbytes, UPLOAD_CHUNK * UPLOAD_THREADS
    fd = os.open(arr.filename, os.O_RDONLY)
    try:
        def part(first):
            buf, stream = api.pinned_array(UPLOAD_CHUNK, dtype=np.uint8), api.stream()
            for start in range(first, nbytes, step):
                n = min(UPLOAD_CHUNK, nbytes - start)
                stream.synchronize()   # the buffer's last copy up is done
                read_at(fd, buf[:n], arr.offset + start, arr.filename)
                raw[start:start + n].copy_to_device(buf[:n], stream=stream)
            stream.synchronize()
        with ThreadPoolExecutor(max_workers=UPLOAD_THREADS, thread_name_prefix="upload") as pool:
            list(pool.map(part, range(0, min(nbytes, step), UPLOAD_CHUNK)))
    finally:
        os.close(fd)
    return dev


def read_at(fd: int, out: np.ndarray, offset: int, name: str):
    """Fill the byte array `out` from the file at `offset` (pread may return less at a time)."""
    view, done = memoryview(out), 0
    while done < len(view):
        got = os.preadv(fd, [view[done:]], offset + done)
        if got <= 0:
            raise OSError(f"{name}: ends before byte {offset + len(view)}")
        done += got


_local = threading.local()   # per mapping thread: stream, kept buffers, current batch


def _state():
    """This thread's stream, kept buffers and current batch, made on first use."""
    if not hasattr(_local, "stream"):
        _local.stream = gpu.api().stream()
        _local.device = Arena(_device_chunk)    # slot -> device buffer
        _local.batch = {}
        _local.kernels = []   # (name, start event, end event) of launches not on the timeline yet
        _local.events = []    # events whose kernels are on the timeline, for the next launches
        if trace.enabled():
            _gpu_reference()
    return _local


def _stream():
    return _state().stream


MIN_BUFFER = 1 << 16   # bytes: the smallest kept buffer
ALIGN = 256            # bytes: where a kept buffer starts in its arena's memory (every dtype's alignment)
MIN_CHUNK = 4 << 20    # bytes: the least an arena allocates beyond its plan


def kept_bytes(nbytes: int) -> int:
    """What a kept buffer for nbytes allocates: a quarter more, so that batches a little larger reuse it."""
    return max(nbytes, MIN_BUFFER) * 5 // 4


def carved_bytes(nbytes: int) -> int:
    """What a kept buffer for nbytes takes of its arena: kept_bytes, to the next ALIGN."""
    return -(-kept_bytes(nbytes) // ALIGN) * ALIGN


def _device_chunk(nbytes: int):
    return gpu.api().device_array(nbytes, dtype=np.uint8)


class Arena:
    """A thread's kept device buffers, one per named slot, kept from batch to batch and carved in turn
    from a few large allocations that are released only with the thread: a batch allocates and frees
    nothing. On the GPU host each allocation and release went through the driver's lock, and a
    release waited for the whole device: with a buffer each, made as a run's first batches grew
    (fastq.ramp_sizes) and freed as they outgrew them, the mapping threads spent 1.6 of their 3.2 s
    of the chrX reads in those calls (and in page-locked buffers' alike), and every launch behind
    one of them waited (BENCHMARKS.md, eighteenth session).
    planned: slot -> bytes a full batch needs (resident.device_slots), made in one allocation at once,
    and each slot carved at its planned size the first time (not at a small batch's); a slot beyond
    the plan, or grown past it, is carved from a further allocation of at least MIN_CHUNK."""

    def __init__(self, allocate, planned=None):
        self.allocate = allocate
        self.planned = dict(planned or {})
        self.chunks = []          # every allocation, kept until the arena goes
        self.room, self.used = None, 0
        self.slots = {}           # slot -> (buffer, {(shape, dtype): view})
        if self.planned:
            self._allocate(sum(carved_bytes(b) for b in self.planned.values()))

    def fits(self, planned) -> bool:
        """Whether every slot of `planned` has at least its bytes in this arena's plan."""
        return all(self.planned.get(slot, -1) >= nbytes for slot, nbytes in planned.items())

    def _allocate(self, nbytes: int):
        self.room, self.used = self.allocate(nbytes), 0
        self.chunks.append(self.room)

    def _carve(self, nbytes: int):
        size = -(-nbytes // ALIGN) * ALIGN
        if self.room is None or self.used + size > len(self.room):
            self._allocate(max(size, MIN_CHUNK))
        buf = self.room[self.used:self.used + nbytes]
        self.used += size
        return buf

    def kept(self, slot: str, shape, dtype):
        """An array of shape and dtype over the slot's buffer, which is made (the first time, and again
        whenever a batch needs more) a quarter larger than the larger of its planned size and what this
        asks. The views are kept too (batches mostly have one size), so a batch does not pay Python for
        them again."""
        shape = tuple(int(x) for x in shape) if isinstance(shape, tuple) else (int(shape),)
        dtype = np.dtype(dtype)
        nbytes = int(np.prod(shape)) * dtype.itemsize
        buf, views = self.slots.get(slot, (None, None))
        if buf is None or buf.nbytes < nbytes:
            buf, views = self._carve(kept_bytes(max(nbytes, self.planned.get(slot, 0)))), {}
            self.slots[slot] = (buf, views)
        view = views.get((shape, dtype))
        if view is None:
            view = views[(shape, dtype)] = buf[:nbytes].view(dtype).reshape(shape)
        return view


_prepared = []   # device arenas made ahead of the mapping threads (prepare_buffers), for sized_for to take
_prepared_lock = threading.Lock()


def prepare_buffers(planned_for, p, paired: bool):
    """Makes the mapping threads' device buffers ahead, on a thread of its own while the run starts
    (the imports and the first batch's reading hold the GIL; an allocation lets go of it): one arena
    a thread in flight, each planned for full batches of reads of PLAN_READ_LENGTH bases.
    planned_for: batch_plan's (longest read -> (batches in flight, reads a batch)). Only where the GPU
    holds the most batches in flight at the full size: then no read length asks for more threads
    than these, and sized_for takes one for any batch no larger (else each thread makes its own).
    Arenas an earlier run of the process left untaken (a run of fewer batches than threads) count
    towards these where they fit the plan, and are released where they do not."""
    in_flight, n = planned_for(PLAN_READ_LENGTH, quiet=True)
    if in_flight < BATCHES_IN_FLIGHT or memory_info()[1] >= 1 << 60:   # (numba's simulator: host memory)
        return
    from .resident import device_slots
    planned = device_slots(n, PLAN_READ_LENGTH, p, not paired)
    with _prepared_lock:
        _prepared[:] = [a for a in _prepared if a.fits(planned)][:in_flight]
        missing = in_flight - len(_prepared)
    with trace.span("GPU buffers made ahead"):
        for _ in range(missing):
            arena = Arena(_device_chunk, planned)
            with _prepared_lock:
                _prepared.append(arena)


def sized_for(n: int, maxlen: int, p, paired: bool):
    """Called on each mapping thread before its first batch: its device buffers become an arena planned
    for a batch of n reads of at most maxlen bases (one made ahead by prepare_buffers where one is as
    large, else made now), whatever smaller batch comes first. Arenas made ahead that are too small are
    released here, before any batch."""
    from .resident import device_slots
    planned = device_slots(n, maxlen, p, not paired)
    state = _state()
    with _prepared_lock:
        fitting = [a for a in _prepared if a.fits(planned)]
        _prepared.clear()
        arena = fitting.pop() if fitting else None
        _prepared.extend(fitting)
    state.device = arena or Arena(_device_chunk, planned)


GPU_RESERVE = 1 << 30   # bytes of the GPU left to the context, the kernels' code and the allocator's rounding
MIN_SINGLE_BATCH = 25_000   # reads: plan_batches makes single-end batches no smaller than this


def memory_info() -> tuple[int, int]:
    """(free, total) bytes of the GPU's memory (numba's simulator: unlimited)."""
    api = gpu.api()
    if hasattr(api, "memory_info"):
        return api.memory_info()
    free, total = api.current_context().get_memory_info()
    return (int(free) if free != float("inf") else 1 << 62), (int(total) if total != float("inf") else 1 << 62)


def resident_bytes(genome, index) -> int:
    """GPU bytes of what goes up once per process and is not up yet: the genome image and the index."""
    arrays = (genome.packed, genome.nmask, genome.offsets, genome.ends, index.offsets, index.positions)
    with _resident_lock:
        return sum(a.nbytes for a in arrays if _resident_key(a) not in _resident)


def batch_bytes(n: int, maxlen: int, p, single_end: bool) -> int:
    """GPU bytes a thread's kept buffers take for a batch of n reads of at most maxlen bases (its arena)."""
    from .resident import device_slots
    return sum(carved_bytes(b) for b in device_slots(n, maxlen, p, single_end).values())


def plan_batches(free: int, fixed: int, per_batch, batch_size: int, paired: bool, most: int | None = None):
    """(batches in flight, reads a batch) that fit `free` bytes of GPU memory beside `fixed` (the genome
    and index) and GPU_RESERVE, per_batch(reads) bytes each: most in flight at the full batch size
    where they fit; else fewer, two at least, at halved sizes (single-end, down to MIN_SINGLE_BATCH:
    batches in flight hide the host's work, which a smaller batch costs little); else one. Paired
    batches keep their size (whole insert-size blocks). None fits: InputError, one line that says
    how much is needed and what to change."""
    most = BATCHES_IN_FLIGHT if most is None else most
    sizes = [batch_size]
    while not paired and sizes[-1] // 2 >= MIN_SINGLE_BATCH:
        sizes.append(sizes[-1] // 2)
    tries = [(k, s) for s in sizes for k in range(most, 1, -1)] + [(1, s) for s in sizes]
    for in_flight, size in tries:
        if fixed + GPU_RESERVE + in_flight * per_batch(size) <= free:
            return in_flight, size
    gib = lambda b: f"{b / (1 << 30):.1f} GiB"  # noqa: E731
    need = fixed + GPU_RESERVE + per_batch(sizes[-1])
    raise InputError(f"backend cuda: this index needs {gib(need)} of GPU memory (genome and index {gib(fixed)}, "
                     f"a batch of {sizes[-1]} reads {gib(per_batch(sizes[-1]))}, {gib(GPU_RESERVE)} for CUDA), "
                     f"but the GPU has {gib(free)} free: use a GPU with more memory, or --backend cpu")


PLAN_READ_LENGTH = 150   # bases: the reads batch_plan checks the index's fit for, before any is read


def batch_plan(genome, index, p, paired: bool, log=None):
    """Called before anything goes up: checks that the genome and index fit the GPU beside one
    batch (InputError if not, rather than a failed allocation later), and returns the plan for
    the reads' longest length, maxlen -> (batches in flight, reads a batch), logged."""
    free, total = memory_info()
    fixed = resident_bytes(genome, index)
    size = 2 * fragments_per_batch(p.batch_size, p.tuning.insert_block) if paired else p.batch_size

    def per_batch(maxlen):
        return lambda n: batch_bytes(n, maxlen, p, not paired)

    plan_batches(free, fixed, per_batch(PLAN_READ_LENGTH), size, paired)

    def planned(maxlen: int, quiet: bool = False):
        in_flight, reads = plan_batches(free, fixed, per_batch(maxlen), size, paired)
        if log and total < 1 << 60 and not quiet:
            log(f"GPU memory: {total / (1 << 30):.1f} GiB, {free / (1 << 30):.1f} free; genome and index "
                f"{fixed / (1 << 30):.1f} GiB, a batch of {reads} reads {per_batch(maxlen)(reads) / (1 << 30):.1f} GiB:"
                f" {in_flight} batch{'es' if in_flight > 1 else ''} in flight")
        return in_flight, reads
    return planned


def _empty(slot: str, shape, dtype):
    """A device array for `slot` (its content is what the slot held last). A thread's stream orders
    a slot's reuse after every earlier use by the same thread."""
    return _state().device.kept(slot, shape, dtype)


def _upload(slot: str, arr):
    """arr in the device buffer for `slot`, copied on this thread's stream straight from host memory:
    the driver stages it through page-locked memory of its own and returns once arr is copied there.
    Page-locked buffers of our own, a thread's for each slot, cost more than they gave: making them
    pinned their pages under the driver's lock while every other thread waited, and each copy went
    through them and a copy of its own (GPU host, untraced, medians of three: 2 M chrX reads 1.68 s
    without them, 1.79 with them made once a thread, 1.89 as they were; 10 M E. coli reads 3.84, 4.05,
    3.98; BENCHMARKS.md, eighteenth session)."""
    arr = np.ascontiguousarray(arr)
    with trace.span("GPU upload"):
        dev = _empty(slot, arr.shape, arr.dtype)
        if arr.size:   # (numba's simulator refuses an empty copy)
            dev.copy_to_device(arr, stream=_stream())
        return dev


def _upload_pieces(slot: str, pieces):
    """Byte arrays on the GPU as one, each copied to its place in the device buffer for `slot` (as _upload)."""
    with trace.span("GPU upload"):
        dev, at = _empty(slot, (sum(len(p) for p in pieces),), np.uint8), 0
        for piece in pieces:
            if len(piece):
                dev[at:at + len(piece)].copy_to_device(np.ascontiguousarray(piece), stream=_stream())
            at += len(piece)
        return dev


def _fetch(*device_arrays):
    """Copies back on this thread's stream into new host arrays (the driver stages them and returns once
    each is there), which later batches cannot overwrite."""
    stream = _stream()
    with trace.span("GPU wait and copy back"):
        out = [np.empty(a.shape, a.dtype) for a in device_arrays]
        for a, host in zip(device_arrays, out):
            if host.size:   # (numba's simulator refuses an empty copy)
                a.copy_to_host(host, stream=stream)
        stream.synchronize()
    _kernels_on_timeline()
    return out


def prepare_reads(reads):
    """The batch as the reader made it: what the stages need beyond the codes is derived on the GPU."""
    return reads


def _read_arrays(reads, *fields):
    """A batch's read arrays on the GPU, uploaded once for all its stages; each thread keeps only
    its current batch. Arrays the reader left out (reads.DERIVED) are made there from the codes."""
    state = _state()
    if state.batch.get("reads") is not reads:
        state.batch = {"reads": reads}
    for f in fields:
        if f not in state.batch:
            if getattr(reads, f) is None:
                _derive_on_device(reads, state.batch)
            else:
                state.batch[f] = _upload(f, getattr(reads, f))
    return tuple(state.batch[f] for f in fields)


def _derive_on_device(reads, arrays):
    """Reverse complements, packed words and header bins of a batch, made by a thread per read."""
    n = len(reads)
    word_off = word_offsets(reads.read_off)
    for f in ("codes", "read_off"):
        if f not in arrays:
            arrays[f] = _upload(f, getattr(reads, f))
    arrays["word_off"] = _upload("word_off", word_off)
    arrays.update(_derived_buffers(n, len(reads.codes), int(word_off[-1])))
    _launch(K._derive_kernel, n, arrays["codes"], arrays["read_off"], arrays["word_off"], reads.k,
            *(arrays[f] for f in ("rc_codes", "packed", "rc_packed", "hbin", "rc_hbin")))


def _derived_buffers(n: int, bases: int, words: int):
    """Device buffers for what a kernel derives from a batch's codes (reads.DERIVED but word_off): n
    reads of `bases` bases in all, `words` packed words."""
    words = max(words, 1)
    return {"rc_codes": _empty("rc_codes", max(bases, 1), np.uint8),
            "packed": _empty("packed", words, np.uint32), "rc_packed": _empty("rc_packed", words, np.uint32),
            "hbin": _empty("hbin", max(n, 1), np.int64), "rc_hbin": _empty("rc_hbin", max(n, 1), np.int64)}


def _launch(kernel, n, *args):
    """The kernel over n items, a thread each, on this thread's stream."""
    if n > 0:
        _enqueue(kernel, launch.blocks_for(n), launch.THREADS_PER_BLOCK, *args)


def _launch_blocks(kernel, blocks, nthreads, *args):
    """A kernel of `blocks` blocks of nthreads threads (a block an item), on this thread's stream."""
    _enqueue(kernel, blocks, nthreads, *args)


def _launch_block(kernel, nthreads, *args):
    """A kernel of one block (a scan over the whole batch), on this thread's stream."""
    _enqueue(kernel, 1, nthreads, *args)


def scan_on_device(values, first, n, start):
    """start[0] = 0 and start[i + 1] = the sum of values[first:first + i + 1], on this thread's stream:
    each tile of launch.SCAN_THREADS values summed by a block, the tiles' sums scanned by one block,
    each tile scanned from its start (cuda_kernels._tile_sums_kernel, _scan_sums_kernel,
    _scan_tiles_kernel). start may be values itself with first = 1 (sizes in start[1:])."""
    threads = launch.block_threads(launch.SCAN_THREADS, launch.SCAN_SHARED, "a scan")
    tiles = max(1, -(-n // threads))
    sums = _empty("scan tile sums", tiles, np.int64)
    _launch_blocks(K._tile_sums_kernel, tiles, threads, values, first, n, sums)
    _launch_block(K._scan_sums_kernel, threads, sums)
    _launch_blocks(K._scan_tiles_kernel, tiles, threads, values, first, n, sums, start)


def _enqueue(kernel, blocks, threads, *args):
    stream, timed = _stream(), trace.enabled()
    with trace.span("GPU launch (turns)"), gpu.launch_turns():
        if timed:   # both events at hand first: making one lets go of the GIL, and a tiny kernel's end event,
            # made after its launch, passed when this thread had the GIL back (0.6 ms a scan kernel)
            start, end = _event(), _event()
            start.record(stream=stream)
        handed = time.perf_counter()
        kernel[blocks, threads, stream](*args)
        if timed:
            end.record(stream=stream)
            handed = max(handed, submitted_at())   # a stored kernel's: just before the driver had it
            _state().kernels.append((gpu.name_of(kernel).strip("_"), start, end, handed))


# With a trace on, every launch is bracketed by CUDA events; the kernels a thread launched go on the
# timeline (thread "GPU", so that its coverage is the GPU's busy time) once its stream has been
# waited for, placed by their distance from one reference event whose host time is known. A kernel
# starts no earlier than the host handed it over (a stored kernel's: the clock read just before
# cuLaunchKernel; numba's: before its launch): where its stream had nothing left to run, its start
# event passes at once, and the host's time before the launch (taking the GIL back after recording
# that event, and packing the arguments, with many busy threads) would count as the GPU's. Each
# kernel also goes on thread "GPU, from its start event" as its events bracket it.
_gpu_clock = []


def _gpu_reference():
    """The reference event, recorded once, before any kernel."""
    with _resident_lock:
        if not _gpu_clock:
            reference = gpu.api().event()
            reference.record()
            reference.synchronize()
            _gpu_clock.extend((reference, time.perf_counter()))


def _event():
    """An event for a launch's timing: one this thread used before where it has one (making one is a driver
    call that lets go of the GIL and waits behind every other thread's driver calls: with a trace on, the
    mapping threads spent 1.1 s of a 2 s chrX run making events, 3.5 s of a 4.5 s E. coli run)."""
    events = _state().events
    return events.pop() if events else gpu.api().event()


def _kernels_on_timeline():
    state = _state()
    if not state.kernels:
        return
    reference, t0 = _gpu_clock
    for name, start, end, handed in state.kernels:
        began, ended = (t0 + reference.elapsed_time(e) / 1e3 for e in (start, end))
        trace.record(f"GPU {name}", max(began, handed), max(ended, handed), thread="GPU")
        trace.record(f"GPU {name} (from its start event)", began, ended, thread="GPU, from its start event")
        state.events.extend((start, end))   # both passed (the stream was waited for): free to record again
    state.kernels.clear()


def _genome_args(genome):
    return (_on_device(genome.packed), _on_device(genome.nmask), _on_device(genome.offsets),
            _on_device(genome.ends))


def exact_stage(reads, genome, index, p):
    n = len(reads)
    counts = _empty("exact counts", max(n, 1), np.int64)          # written for every read
    keys = _empty("exact keys", max(n, 1) * p.max_exact, np.int64)   # read only below counts
    _launch(K._exact_kernel, n, *_read_arrays(reads, "packed", "rc_packed", "word_off", "read_off", "hbin", "rc_hbin"),
            *_genome_args(genome), _on_device(index.offsets),
            _on_device(index.positions), index.max_occ, p.max_exact, counts, keys)
    counts, keys = _fetch(counts[:n], keys[:n * p.max_exact])
    return counts, keys.reshape(n, p.max_exact)


def candidate_stage(reads, sel, index, p):
    m = len(sel)
    ncand = _empty("ncand", max(m, 1), np.int64)   # the kernel writes every entry
    keys = _empty("candidate keys", max(m, 1) * p.max_candidates, np.int64)   # read only below ncand
    votes = _empty("votes", max(m, 1) * p.max_candidates, np.int64)
    dropped = _empty("dropped", max(m, 1), np.int64)
    hits = _empty("hits", max(m, 1) * scratch_words(p.max_hits), np.int64)   # hits, merge and seed scratch
    _launch(K._candidate_kernel, m, _upload("sel", np.asarray(sel, dtype=np.int64)),
            *_read_arrays(reads, "codes", "rc_codes", "read_off"), reads.k, _on_device(index.offsets),
            _on_device(index.positions), index.max_occ, p.max_indels, hits, p.max_hits, p.max_candidates,
            ncand, keys, votes, dropped)
    ncand, keys, votes, dropped = _fetch(ncand[:m], keys[:m * p.max_candidates], votes[:m * p.max_candidates],
                                         dropped[:m])
    return ncand, keys.reshape(m, p.max_candidates), votes.reshape(m, p.max_candidates), dropped


def extend_stage(reads, genome, pair_read, pair_key, p):
    m = len(pair_read)
    out = _empty("extension", (max(m, 1), EXT_COLUMNS), np.int64)   # every column written
    counters = _upload("extension counters", np.array([m, 0], dtype=np.int64))
    extend_on_device(m, counters[:1], _upload("pair_read", np.asarray(pair_read, dtype=np.int64)),
                     _upload("pair_key", np.asarray(pair_key, dtype=np.int64)),
                     _read_arrays(reads, "codes", "rc_codes", "read_off"), genome, p, out, counters[1:])
    return _fetch(out[:m])[0]


def extend_on_device(bound, count, pair_read, pair_key, read_arrays, genome, p, out, nopen):
    """Rows of out for the first count[-1] (at most bound) pairs, device arrays: open_pair for every
    pair, then close_pair for those it left open, listed with the zeroed counter nopen. The DPs run
    with their band rows in shared memory where the band is narrow (t <= launch.NARROW_T)."""
    if bound == 0:
        return
    t, opened = p.max_indels, _empty("open pairs", bound, np.int64)
    scoring = (t, p.match, p.mismatch, p.gap_open, p.gap_extend, p.clip_penalty)
    at = (*read_arrays, *_genome_args(genome), genome.size, *scoring)
    _launch(K._open_pairs_kernel, bound, count, pair_read, pair_key, *at, out, nopen, opened)
    blocks, threads = listed_dps_grid(bound, t, launch.CLOSE_BLOCKS, "a close-pairs block")
    _launch_blocks(K._close_pairs_kernel if t <= launch.NARROW_T else K._close_wide_pairs_kernel, blocks, threads,
                   nopen, opened, pair_read, pair_key, *at, _empty("no traceback", 1, np.uint8), out)   # not written


def listed_dps_grid(bound: int, t: int, most_blocks: int, what: str):
    """(blocks, threads) of a launch looping over at most `bound` listed DPs: for a narrow band
    (t <= launch.NARROW_T) blocks of launch.CLOSE_THREADS threads sharing shared-memory band rows,
    else of launch.THREADS_PER_BLOCK; at most most_blocks blocks."""
    threads = (launch.block_threads(launch.CLOSE_THREADS, launch.CLOSE_SHARED_THREADS, what)
               if t <= launch.NARROW_T else launch.THREADS_PER_BLOCK)
    return max(1, min(-(-bound // threads), most_blocks)), threads


def traceback_stage(reads, genome, sel_read, sel_key, sel_local, p):
    m = len(sel_read)
    maxlen = int(reads.lengths.max(initial=1))
    # CIGAR op j of pair x at [j * m + x]: only as many rows as the longest CIGAR come back;
    # nothing is uploaded for outputs the kernel writes in full
    ops = _empty("ops", max(m, 1) * (2 * maxlen + 2), np.uint8)
    lens = _empty("lens", max(m, 1) * (2 * maxlen + 2), np.int32)
    out = _empty("traceback", (max(m, 1), TR_COLUMNS), np.int64)
    ints = _upload("traceback integers", np.concatenate([np.asarray(a, dtype=np.int64) for a in
                                                         (sel_read, sel_key, sel_local, [0])]))
    sel_read, sel_key, sel_local, ntrace = ints[:m], ints[m:2 * m], ints[2 * m:3 * m], ints[3 * m:]
    listed = _empty("listed traces", max(m, 1), np.int64)
    read_arrays = _read_arrays(reads, "codes", "rc_codes", "read_off")
    scoring = (p.max_indels, p.match, p.mismatch, p.gap_open, p.gap_extend)
    _launch(K._open_traces_kernel, m, sel_read, sel_key, sel_local, *read_arrays, *_genome_args(genome), genome.size,
            *scoring, ops, lens, out, ntrace, listed)
    close_traces_on_device(m, ntrace, listed, False, sel_read, sel_key, sel_local, read_arrays, genome, p, maxlen,
                           ops, lens, out)
    md_off, text, nm = md_on_device(False, sel_read, sel_key, read_arrays, ops, lens, out, genome, maxlen,
                                    p.max_indels)
    out, md_off, nm = _fetch(out[:m], md_off, nm[:m])
    width = max(1, int(out[:, TR_NOPS].max(initial=0)))
    ops, lens, text = _fetch(ops[:width * m], lens[:width * m], text[:int(md_off[m])])
    return (*extend.tidy_cigars(ops.reshape(width, m).T, lens.reshape(width, m).T, out[:, TR_NOPS]), out,
            (text, md_off, nm))


def close_trace_grid(bound: int, t: int):
    """(blocks, threads) of a close-traces launch for at most `bound` listed rows (listed_dps_grid, at most
    launch.TRACE_BLOCKS blocks), each thread with its own traceback bytes: they scale with the grid, not the batch."""
    return listed_dps_grid(bound, t, launch.TRACE_BLOCKS, "a close-traces block")


def close_trace_bytes(bound: int, maxlen: int, t: int) -> int:
    """The traceback bytes of a close-traces launch (close_trace_grid): maxlen * (2t+1) a thread."""
    blocks, threads = close_trace_grid(bound, t)
    return blocks * threads * maxlen * (2 * t + 1)


def close_traces_on_device(bound, ntrace, listed, by_read, sel_read, sel_key, sel_local, read_arrays, genome, p, maxlen,
                           ops, lens, out):
    """close_trace for the ntrace[0] (at most bound) rows open_trace listed: their DPs with traceback in
    warps of their own, band rows in shared memory where the band is narrow (t <= launch.NARROW_T)."""
    if bound == 0:
        return
    t = p.max_indels
    blocks, threads = close_trace_grid(bound, t)
    tb = _empty("traceback bytes", close_trace_bytes(bound, maxlen, t), np.uint8)
    _launch_blocks(K._close_traces_kernel if t <= launch.NARROW_T else K._close_wide_traces_kernel, blocks, threads,
                   ntrace, listed, by_read, sel_read, sel_key, sel_local, *read_arrays, *_genome_args(genome),
                   genome.size, t, p.match, p.mismatch, p.gap_open, p.gap_extend, maxlen, tb, ops, lens, out)


def md_on_device(by_read, sel_read, sel_key, read_arrays, ops, lens, trace, genome, maxlen, t):
    """The MD and NM of the traceback's rows (one a key of sel_key, in the GPU's CIGAR layout), made
    on the GPU from its traceback: (offsets, text, NM) as device arrays, the sizes measured, summed
    by a scan, then the strings written (cuda_kernels._md_kernel, scan_on_device)."""
    rows = sel_key.shape[0]
    md_off = _empty("md offsets", rows + 1, np.int64)
    nm = _empty("nm", max(rows, 1), np.int64)
    text = _empty("md text", md_bound(rows, maxlen, t), np.uint8)
    args = (sel_read, sel_key, *read_arrays, ops, lens, trace, _on_device(genome.packed), _on_device(genome.nmask),
            md_off, text, nm)
    _launch(K._md_kernel, rows, False, by_read, *args)
    scan_on_device(md_off, 1, rows, md_off)
    _launch(K._md_kernel, rows, True, by_read, *args)
    return md_off, text, nm


def record_allowance(maxlen: int, rg_len: int, t: int) -> int:
    """Bytes a BAM record of a read of at most maxlen bases takes beyond its name, SEQ and QUAL:
    the fixed fields and the name's terminator and RG exactly, and an allowance for CIGAR and tags
    that holds 2t + 1 operations and the longest MD of the band (md.md_bound)."""
    ops = 2 * t + 3   # soft clips included
    tags = 7 + 3 + md_bound(1, maxlen, t) + 1 + 7 + 7   # NM, MD, AS, XS
    return 36 + 1 + (rg_len + 4 if rg_len else 0) + 4 * ops + tags


def record_capacity(shape, rg_len: int, t: int) -> int:
    """Bytes the GPU's buffer for a single-end batch's BAM records is given (records_on_device), from
    lengths alone (shape: resident.BatchShape): names, SEQ and QUAL exactly and record_allowance a read.
    A record may exceed its allowance (more operations); the batch overflows only where the sum does."""
    n, bases = shape.n, shape.bases
    return n * record_allowance(shape.maxlen, rg_len, t) + shape.name_bytes + (bases + n) // 2 + bases


def records_on_device(by_read, row_of, choice, proper, paired, read_arrays, ops, lens, trace, md, genome, rg,
                      capacity):
    """Each read's BAM record made on the GPU by bam/records.py's own function (cuda_kernels._records_kernel:
    measured, the sizes summed by a scan, written), from the traceback's rows as they lie on the GPU:
    (offsets, bytes, sort keys) as device arrays. The bytes are written only where all fit `capacity`
    (offsets[-1] tells). choice: (key, mapq, score, sub); read_arrays: (names, name_off, codes,
    quals, read_off); md: (text, offsets, nm); ops, lens: [op, row]; a read's row is its own (by_read)
    or row_of's; rg: the read group ID's bytes."""
    n = read_arrays[-1].shape[0] - 1
    rec_off = _empty("record offsets", n + 1, np.int64)
    keys = _empty("record keys", max(n, 1), np.int64)
    buf = _empty("records", capacity, np.uint8)
    key, mapq, score, sub = choice
    text, md_off, nm = md
    args = (by_read, row_of, key, mapq, score, sub, proper, paired, *read_arrays, ops, lens, trace, text, md_off, nm,
            _on_device(genome.offsets), _upload("read group", rg) if len(rg) else _empty("read group", 0, np.uint8),
            rec_off, buf, keys)
    _launch(K._records_kernel, n, False, *args)
    scan_on_device(rec_off, 1, n, rec_off)
    _launch(K._records_kernel, n, True, *args)
    return rec_off, buf, keys


def rescue_stage(reads, genome, task_read, task_strand, task_start, task_len, p):
    """rescue_align of each task, a block of threads a task (rescue_block.py)."""
    m = len(task_read)
    threads = launch.RESCUE_THREADS
    if not 1 <= threads <= 32:   # the kernel's shared arrays hold a warp
        raise ValueError(f"rescue: {threads} threads a block; 1 to 32 are supported")
    if -(-int(reads.lengths.max(initial=0)) // threads) > launch.RESCUE_MAX_ROWS:   # each thread's rows must fit
        raise ValueError(f"rescue: reads of {reads.lengths.max()} bases need more than {threads} threads a block")
    out = _empty("rescue", (max(m, 1), RESCUE_COLUMNS), np.int64)
    tasks = [_upload(name, np.asarray(a, dtype=np.int64)) for name, a in
             (("task_read", task_read), ("task_strand", task_strand), ("task_start", task_start), ("task_len", task_len))]
    if m:
        _launch_blocks(K._rescue_block_kernel, min(m, RESCUE_BLOCKS), threads, *tasks,
                       *_read_arrays(reads, "codes", "rc_codes", "read_off"), _on_device(genome.packed),
                       _on_device(genome.nmask), p.match, p.mismatch, p.gap_open, p.gap_extend, out)
    return _fetch(out[:m])[0]


# The single-end batch resident on the GPU from exact match to traceback; it builds on the launchers above.
from .resident import candidates_and_choice, single_end_batch  # noqa: E402, F401
