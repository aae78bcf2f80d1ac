"""Opening plain or gzip text inputs, with one clear line for every way one can fail.

An input is a path or `-` (stdin), opened once: a pipe, a FIFO or `<(...)` cannot be read twice,
so the two bytes that tell gzip from plain text are read from the stream itself and handed back to
it (`Prefixed`) rather than read by a second open. Gzip is decoded by one of three decoders over
that same stream: rapidgzip (several threads; only for big regular files, which it can seek),
isal's igzip (about twice zlib's speed), or zlib (Python's gzip, the fallback). rapidgzip runs in
a process of its own (DecodingProcess), out of the reach of this process's GIL. Whatever a decoder
raises, wherever in the file, becomes `WHAT F: corrupt or truncated gzip data (...)`.
"""

import collections
import ctypes
import gzip
import io
import itertools
import os
import queue
import re
import stat
import subprocess
import sys
import threading

from .errors import InputError
from . import trace

# Compressed bytes isal inflates a call. It releases the GIL while it inflates and takes it back after
# each call, waiting behind any thread running Python (up to the 5 ms switch interval): with its own
# 512 KiB, a file decoded beside a busy Python thread (the imports at start, the mapper's own Python)
# took 2.9-3.1x as long as alone on the 2-core machine; with 16 MiB, 1.7-2.1x (1.4-1.6x beside work
# that does not hold the GIL: the cores shared).
ISAL_READ_BUFFER = 16 << 20

try:  # isal decodes gzip about twice as fast as zlib; optional
    from isal import igzip as _igzip
    _igzip.READ_BUFFER_SIZE = ISAL_READ_BUFFER   # what IGzipFile's reader is made with (isal 1.x)
except ImportError:  # pragma: no cover - isal is in the pinned env, zlib is the fallback
    _igzip = None

STDIN = "-"
GZIP_MAGIC = b"\x1f\x8b"
PIPE_BUFFER = 1 << 20          # buffer of a non-seekable input (a pipe read gives 64 KiB at most)
DECODERS = ("rapidgzip", "isal", "zlib")
PARALLEL_GZIP_MIN = 64 << 20  # reads (fastq.chunks): compressed bytes from which rapidgzip decodes on several threads
# ... and the threads it needs to be worth it. rapidgzip spends 3.5-4 times isal's CPU a byte (on the
# 16-core GPU host: 66-76 MB per CPU-second against 253-276), for 1.5x isal's speed on 8 threads and 2x on 16.
# Each file of a pair gets half the threads: with 8 each, isal on both files ended a 2 M-pair run 0.5 s sooner
# (5.8 s against 6.3 s); a single file on 16 threads is faster with rapidgzip (3.5-4.5 s against 5.7-5.9 s).
PARALLEL_GZIP_THREADS = 12
READ_BLOCK = 48 << 20        # reads: decompressed bytes read at a time (a batch holds at most this)
RAMP_STEPS = 4               # ramp_sizes: the first batches halve this many times


def shown(path: str) -> str:
    """The input's name in messages: `-` is stdin."""
    return "stdin" if path == STDIN else path


def check_input(path: str, what: str):
    """One line for an input that cannot be opened as a file: missing, or a folder (`-` is stdin)."""
    if path == STDIN:
        return
    if not os.path.exists(path):
        raise InputError(f"{what} {path}: no such file")
    if os.path.isdir(path):
        raise InputError(f"{what} {path}: is a directory")


class Prefixed(io.RawIOBase):
    """A raw stream that gives `head` (bytes already read from `raw`) first, then the rest of `raw`:
    sniffing a pipe's first bytes this way consumes nothing. Only an empty read is the end."""

    def __init__(self, head: bytes, raw):
        super().__init__()
        self._head = memoryview(head)
        self._raw = raw

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        if self._head:
            n = min(len(b), len(self._head))
            b[:n] = self._head[:n]
            self._head = self._head[n:]
            return n
        return self._raw.readinto(b)

    def close(self):
        try:
            self._raw.close()
        finally:
            super().close()


def read_head(raw, size: int) -> bytes:
    """The first `size` bytes of a raw stream (fewer only at its end): a pipe may give them piecemeal."""
    head = b""
    while len(head) < size:
        part = raw.read(size - len(head))
        if not part:
            break
        head += part
    return head


def decoder_detail(exc: BaseException) -> str:
    """A decoder's reason, one short line: rapidgzip's `[Wrapper][Thread 1234]` prefixes dropped."""
    text = str(exc).strip()
    if not text:
        return type(exc).__name__
    text = re.sub(r"^(\[[^\]]*\]\s*)+", "", text.splitlines()[0])
    return text[:120] or type(exc).__name__


class Input:
    """A plain or gzip input (a path or `-`) opened once and read in blocks. `read` gives b"" only at
    the real end; any failure of the file or of its decoder is one InputError naming the input.

    decoder: None picks rapidgzip for a regular gzip file of at least `parallel_min` bytes when it
    may use at least `parallel_threads` threads, else isal (zlib without isal); "rapidgzip", "isal"
    or "zlib" force one (rapidgzip needs a regular file: a stream falls back to isal). For tests,
    and for comparing decoders.
    """

    def __init__(self, path: str, what: str, threads: int = 1, decoder: str | None = None,
                 parallel_min: int = 64 << 20, parallel_threads: int = 2):
        if decoder is not None and decoder not in DECODERS:
            raise ValueError(f"decoder {decoder!r} is not one of {DECODERS}")
        self.path, self.what, self.name = path, what, shown(path)
        self.gzip = False
        self.decoder = None          # the decoder's name, for a gzip input
        self._size = 0               # a regular file's size: whether rapidgzip is worth its threads
        self._fh = None
        self._stream = None          # the opened file under a decoder (a decoder leaves it open)
        self._ahead = None           # a decoding process's next block, read before the one handed out...
        self._ended = False          # ... and whether the process's output ended there
        self._given = 0              # bytes handed out by a decoding process (isal skips them if it takes over)
        raw = self._open_raw()
        try:
            head = self._guard(lambda: read_head(raw, 2), gz=False)
            mode = self._guard(lambda: os.fstat(raw.fileno()).st_mode, gz=False)
            regular = stat.S_ISREG(mode) and raw.seekable()
            whole = False            # a regular file read from its start: rapidgzip may open it by path
            if regular:
                self._size = os.fstat(raw.fileno()).st_size
                whole = raw.seek(-len(head), io.SEEK_CUR) == 0 and path != STDIN   # stdin may start further on
                fh = io.BufferedReader(raw)
            else:
                fh = io.BufferedReader(Prefixed(head, raw), PIPE_BUFFER)
        except BaseException:
            raw.close()
            raise
        self.gzip = head == GZIP_MAGIC
        if not self.gzip:
            self._fh = fh
            return
        self._stream = fh
        parallel = threads >= max(2, parallel_threads) and self._size >= parallel_min
        self.decoder = decoder or ("rapidgzip" if parallel else "isal")
        if self.decoder == "rapidgzip" and not whole:
            self.decoder = "isal"
        try:
            self._fh = self._guard(lambda: self._start(fh, threads))
        except BaseException:
            fh.close()
            raise

    def _start(self, fh, threads: int):
        try:
            return self._open_decoder(fh, threads)
        except (InputError, MemoryError):
            raise
        except Exception:
            if self.decoder == "zlib":
                raise
            self.decoder = "isal"   # isal, here, has the last word, as in _fall_back
            return self._open_decoder(fh, 1)

    def _open_raw(self):
        if self.path == STDIN:   # a copy of stdin: closing it leaves stdin open
            return self._guard(lambda: open(os.dup(0), "rb", buffering=0), gz=False)
        check_input(self.path, self.what)
        try:
            return open(self.path, "rb", buffering=0)
        except OSError as exc:
            raise InputError(f"{self.what} {self.name}: {exc.strerror or type(exc).__name__}") from None

    def _open_decoder(self, fh, threads: int):
        """The decoder over fh: rapidgzip in a process of its own (DecodingProcess), which opens the path
        itself to read it on several threads (fh stays open for isal, should it fail); isal or zlib here."""
        if self.decoder == "rapidgzip":
            try:
                import rapidgzip
            except ImportError:
                self.decoder = "isal"
            else:
                del rapidgzip
                return DecodingProcess(self.path, max(1, threads))
        if self.decoder == "isal" and _igzip is not None:
            return _igzip.IGzipFile(fileobj=fh, mode="rb")
        self.decoder = "zlib"
        return gzip.GzipFile(fileobj=fh, mode="rb")

    def _guard(self, action, gz: bool | None = None):
        """action(), with any failure of it (but a KeyboardInterrupt, or running out of memory) as
        the input's one-line InputError: a decoder's for a gzip input, the system's reason else."""
        gz = self.gzip if gz is None else gz
        try:
            return action()
        except (InputError, MemoryError):
            raise
        except Exception as exc:
            if gz:
                raise InputError(f"{self.what} {self.name}: corrupt or truncated gzip data "
                                 f"({decoder_detail(exc)})") from None
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else decoder_detail(exc)
            raise InputError(f"{self.what} {self.name}: {reason}") from None

    def read(self, size: int = -1) -> bytes:
        """Up to `size` bytes (all that is left for -1); fewer only at the end, b"" only there."""
        if isinstance(self._fh, DecodingProcess):
            try:
                return self._read_checked(size)
            except (InputError, MemoryError):
                raise
            except Exception:
                self._guard(self._fall_back)
        return self._guard(lambda: self._fh.read(size))

    def _read_checked(self, size: int) -> bytes:
        """The decoding process's blocks, one behind: its end is checked before its last block is
        handed out (DecodingProcess.check_end). rapidgzip ends without an error where a truncated or
        damaged file stops making sense (all of the file, or the part after the damage, then missing
        from its output, and what it made of the damaged bytes at the end of it)."""
        if size < 0:
            parts = []
            while part := self._read_checked(READ_BLOCK):
                parts.append(part)
            return b"".join(parts)
        if self._ahead is None:
            self._ahead, self._ended = self._read_process(size)
        block = self._ahead
        if len(block) > size:   # read ahead at a larger size asked before: its rest stays ahead
            block, self._ahead = block[:size], block[size:]
        else:
            if not self._ended and len(block) < size:
                # read ahead at the size asked before (a reader's first blocks grow): topped up, so that a block
                # is shorter than asked only at the end (it came a step short, and joining it to the next cost a
                # copy holding the GIL, 20 ms a 48 MB block, every block after)
                more, self._ended = self._read_process(size - len(block))
                block = memoryview(joined(block, more))   # bytes-like, as the process's own blocks
            if not self._ended:
                self._ahead, self._ended = self._read_process(size)
            else:
                self._ahead = b""
            if self._ended and not self._ahead:
                self._fh.check_end()   # before the last block goes out (and for an input it made nothing of)
        self._given += len(block)
        return block

    def _read_process(self, size: int):
        """(up to size bytes of the decoding process, whether that was its end)."""
        data = self._fh.read(size)
        return data, len(data) < size

    def _fall_back(self):
        """The decoding process failed (or stopped short): isal, here, decodes the file from its
        start, past what was handed out, and has the last word. Its verdict is the one a single
        thread gives: a file isal accepts (zero bytes after the last member, say) is read whole, and
        a damaged one fails with isal's reason."""
        fh, self._fh, self._ahead = self._fh, None, None
        try:
            fh.close()
        except Exception:   # noqa: BLE001 - a failed decoder's own cleanup; isal decides
            pass
        self.decoder = "isal"
        self._stream.seek(0)
        self._fh = self._open_decoder(self._stream, 1)
        left = self._given
        while left:
            skipped = len(self._fh.read(min(left, 1 << 24)))
            if not skipped:
                raise ValueError(f"the data ends after {self._given - left} bytes, {self._given} were given")
            left -= skipped

    def close(self):
        try:
            if self._fh is not None:
                fh, self._fh = self._fh, None
                self._guard(fh.close)
        finally:
            if self._stream is not None:
                stream, self._stream = self._stream, None
                stream.close()

    def __enter__(self):
        return self

    def __exit__(self, kind, value, traceback):
        if value is None:
            self.close()
            return
        try:   # an error is on its way already: closing must not replace it
            self.close()
        except InputError:
            pass


def joined(head, block) -> "np.ndarray":
    """head and block (bytes, memoryviews or byte arrays) as one byte array; numpy copies without the GIL,
    which a bytes concatenation of 48 MB would hold."""
    import numpy as np   # not at this module's import, which starts the decoding beside the command's other imports
    out = np.empty(len(head) + len(block), dtype=np.uint8)
    out[:len(head)] = np.frombuffer(head, dtype=np.uint8)
    out[len(head):] = np.frombuffer(block, dtype=np.uint8)
    return out


class DecodingProcess:
    """A regular gzip file decoded by rapidgzip in a process of its own (this module run as a program:
    decode_to_stdout), its output read from a pipe. In the mapper's process rapidgzip's reads kept
    taking the GIL back, each time behind whichever of its Python threads held it (up to the 5 ms
    switch interval): the 10 M E. coli reads (2.3 GB) took 4.0-4.6 s to decode there on the 16-core
    GPU host against 1.8 s alone; on the 2-core machine, beside one thread running Python, 3.7 s
    against 0.8 s (isal, with 16 MiB a call, stays here: in a process of its own it decoded two E.
    coli mate files more slowly). The pipe is read by libc's fread through ctypes, which lets go of
    the GIL for the whole block. read(size) gives up to size bytes (fewer only at the end, b"" there)
    as a memoryview; check_end raises unless the child decoded the whole file (rapidgzip ends a
    damaged one without an error: the child compares where it stopped with the file's size)."""

    def __init__(self, path: str, threads: int):
        read_end, write_end = os.pipe()
        try:
            _grow_pipe(write_end)
            self._child = subprocess.Popen([sys.executable, "-m", __name__, str(threads), path], env=_child_env(),
                                           stdin=subprocess.DEVNULL, stdout=write_end, stderr=subprocess.DEVNULL,
                                           close_fds=True)
        except BaseException:
            os.close(read_end)
            raise
        finally:
            os.close(write_end)
        self._file = _LIBC.fdopen(read_end, b"rb")
        if not self._file:
            os.close(read_end)
            self._stop_child()
            raise OSError(ctypes.get_errno(), "fdopen of the decoder's pipe failed")
        _LIBC.setvbuf(self._file, None, 2, 0)   # _IONBF: fread reads straight into the block

    def read(self, size: int = -1):
        if size < 0:
            parts = []
            while part := self.read(READ_BLOCK):
                parts.append(part)
            return b"".join(parts)
        import numpy as np   # imported by then (the reads' parser needs it); not at this module's import, which
        # starts the decoding beside the command's other imports
        block = np.empty(size, dtype=np.uint8)   # no zeroing, and its pages come in as fread fills them
        at = block.ctypes.data
        got = 0
        while got < size:
            n = _LIBC.fread(at + got, 1, size - got, self._file)
            got += n
            if got < size:
                if not _LIBC.ferror(self._file):
                    break   # the end of the decoded stream
                errno = ctypes.get_errno()
                _LIBC.clearerr(self._file)
                if errno != 4:   # EINTR: a signal's handler ran; read on
                    raise OSError(errno, os.strerror(errno))
        return memoryview(block)[:got] if got else b""

    def check_end(self):
        status = self._child.wait()
        if status:
            raise ValueError(f"the decoding process failed or stopped short (exit status {status})")

    def _stop_child(self):
        if self._child.poll() is None:
            self._child.kill()
        self._child.wait()

    def close(self):
        if self._file:
            file, self._file = self._file, None
            _LIBC.fclose(file)   # a child still writing meets a closed pipe
        self._stop_child()


def _child_env() -> dict:
    """The environment with this package's folder first on PYTHONPATH: the child finds the package
    that started it, however this process found it."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    paths = [here] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return dict(os.environ, PYTHONPATH=os.pathsep.join(paths))


def _libc():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.fdopen.restype, libc.fdopen.argtypes = ctypes.c_void_p, (ctypes.c_int, ctypes.c_char_p)
    libc.setvbuf.argtypes = (ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_size_t)
    libc.fread.restype = ctypes.c_size_t
    libc.fread.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_void_p)
    for name in ("ferror", "clearerr", "fclose"):
        getattr(libc, name).argtypes = (ctypes.c_void_p,)
    return libc


_LIBC = _libc()
PIPE_GROWN = 1 << 20   # the decoder's pipe (64 KiB by default): a write and a read a MiB


def _grow_pipe(fd: int):
    try:
        import fcntl
        fcntl.fcntl(fd, 1031, PIPE_GROWN)   # F_SETPIPE_SZ (Linux); elsewhere, or above the system's limit, as it is
    except (ImportError, OSError):
        pass


def decode_to_stdout(threads: int, path: str) -> int:
    """DecodingProcess's child: the file decoded by rapidgzip on `threads` threads, to stdout; status 0
    only where all of it was decoded (rapidgzip stops without an error where a damaged file stops
    making sense: its end must be the file's, its last member's trailer decoded), 3 where it stopped
    short, 1 on an error. The decoder fills blocks on a thread of its own while this one writes them:
    a pipe holds 1 MiB, and a decoder that waits for the reader to drain it (a thread among many, on a
    busy machine) waits on that reader's turns."""
    free, full = queue.Queue(), queue.Queue()
    for _ in range(CHILD_BLOCKS):
        free.put(bytearray(CHILD_BLOCK))
    outcome = {}
    decoding = threading.Thread(target=_decode_blocks, args=(threads, path, free, full, outcome))
    decoding.start()
    try:
        while (item := full.get()) is not None:
            block, n = item
            view = memoryview(block)[:n]
            while view:
                view = view[os.write(1, view):]
            free.put(block)
    except BrokenPipeError:   # the reader went away
        os._exit(1)   # the decoding thread is not waited for
    decoding.join()
    return outcome["status"]


CHILD_BLOCK = 16 << 20   # a decoding process's blocks...
CHILD_BLOCKS = 8         # ... and how many it may fill ahead of the pipe


def _decode_blocks(threads, path, free, full, outcome):
    """decode_to_stdout's decoding thread: blocks from `free`, filled, to `full` (block, bytes), then
    None; the status in outcome["status"]."""
    try:
        import rapidgzip
        with rapidgzip.open(path, parallelization=threads) as fh:
            while True:
                block = free.get()
                n = fh.readinto(block)
                if not n:
                    break
                full.put((block, n))
            used = (fh.tell_compressed() + 7) // 8
        outcome["status"] = 0 if used == os.path.getsize(path) else 3
    except Exception as exc:   # noqa: BLE001 - the parent's isal has the last word on the file
        print(decoder_detail(exc), file=sys.stderr)
        outcome["status"] = 1
    finally:
        full.put(None)


def iter_line_blocks(path: str, what: str, block: int = 1 << 24):
    """(text, number of its first line) of a plain or gzip file (or `-`), read `block` bytes at a time
    and cut after a line end: each text is whole lines (the file's last may lack its line end). A
    reference of gigabases is never held whole, and its millions of lines need no Python each."""
    with Input(path, what) as fh:
        tail, lineno = b"", 1
        while True:
            data = fh.read(block)
            if not data:
                break
            data = tail + data
            cut = data.rfind(b"\n") + 1
            tail = data[cut:]
            if cut:
                yield data[:cut], lineno
                lineno += data.count(b"\n", 0, cut)
        if tail:
            yield tail, lineno


def ramp_sizes(batch_size: int):
    """Batch sizes that start small: 1/16, 1/8, 1/4 and 1/2 of batch_size, then batch_size. The
    first batch is parsed, and the mapper's first stages start, after a sixteenth of the reading."""
    for shift in range(RAMP_STEPS, 0, -1):
        yield max(1, batch_size >> shift)
    while True:
        yield batch_size


class EarlyInput:
    """An Input opened and decoded on a thread of its own from a command's start, while the command
    still imports its libraries (half a second and more of numba and pysam before the first read),
    in blocks of `sizes`. The reader that would open the same input with the same settings takes it
    instead (opened): the bytes read ahead, then the rest, the same as one Input gives, an error
    where it was met. Read in the block sizes the reader will ask for (`sizes`), so that it meets
    the blocks, and an error, where it would have met them itself. What nobody takes is stopped and
    closed by drop_early."""

    def __init__(self, key: tuple, sizes: list):
        self.key, self._sizes = key, sizes
        self._blocks = collections.deque()
        self._input = None
        self._error = None
        self._eof = False
        self._stop = threading.Event()
        # not a daemon: a decoder (rapidgzip) still running when the interpreter exits aborts it
        self._thread = threading.Thread(target=self._run, name="early decode")
        self._thread.start()

    def _run(self):
        try:
            self._input = Input(*self.key)
            for size in self._sizes:
                if self._stop.is_set():
                    return
                with trace.span("decode early"):
                    block = self._input.read(size)
                if not block:
                    self._eof = True
                    return
                self._blocks.append(block)
        except BaseException as exc:  # raised to the reader where the input gave it
            self._error = exc

    def stop(self):
        self._stop.set()
        self._thread.join()

    def taken(self):
        """Stops reading ahead; the input, its early bytes served first."""
        self.stop()
        return _Resumed(self._input, self._blocks, self._error, self._eof)


def _one(parts):
    """Blocks as one: a lone block as it was read (the reader asks for the sizes the early thread read, and after
    them every block is the input's own), for joining copies it holding the GIL, 20 ms a 48 MB block on the GPU
    host, every block of a run."""
    return parts[0] if len(parts) == 1 else b"".join(parts)


class _Resumed:
    """EarlyInput's input as the reader takes it: read(size) serves the bytes read ahead first (cut
    and joined to `size`, as Input.read would give them), then reads on; an error the early thread met
    is raised after its bytes."""

    def __init__(self, input_, blocks, error, eof):
        self._input, self._blocks, self._error, self._eof = input_, blocks, error, eof

    def __getattr__(self, name):   # decoder, gzip, path: the input's
        return getattr(self._input, name)

    def read(self, size: int = -1) -> bytes:
        parts, want = [], size
        while self._blocks and want != 0:
            block = self._blocks.popleft()
            if 0 <= want < len(block):
                block, rest = block[:want], block[want:]
                self._blocks.appendleft(rest)
            parts.append(block)
            want -= len(block)
        if self._blocks or want == 0:
            return _one(parts)
        if self._error is not None:
            if parts:   # the bytes before the error first, as one Input hands them out
                return _one(parts)
            raise self._error
        if not self._eof:
            parts.append(self._input.read(-1 if size < 0 else want))
        return _one(parts)

    def close(self):
        if self._input is not None:
            self._input.close()

    def __enter__(self):
        return self

    def __exit__(self, kind, value, traceback):
        if self._input is not None:
            self._input.__exit__(kind, value, traceback)


_early = {}   # Input arguments -> EarlyInput
_early_lock = threading.Lock()


def decode_early(key: tuple, sizes: list):
    """Starts decoding Input(*key) now, in blocks of `sizes`, for opened() to take later (regular
    files only: a pipe's bytes must go to whoever reads it)."""
    path = key[0]
    if path == STDIN or not os.path.isfile(path):
        return
    with _early_lock:
        if key not in _early:
            _early[key] = EarlyInput(key, sizes)


def opened(*key):
    """Input(*key), or the one decode_early began with these arguments."""
    with _early_lock:
        early = _early.pop(key, None)
    return early.taken() if early is not None else Input(*key)


def drop_early():
    """Stops and closes every early input nobody took (a command that ends before reading)."""
    with _early_lock:
        left = list(_early.values())
        _early.clear()
    for early in left:
        early.taken().close()


# Decoded bytes a reader may hold ahead of the batches being cut (fastq.chunks), and decode while the command starts:
# DECODE_AHEAD, or an eighth of the memory available. With 96 MB ahead rapidgzip's process waited whenever the
# mapper fell behind, and with 144 MB it waited out most of the command's start (0.69 s on the GPU host).
DECODE_AHEAD = 1 << 30


def decode_ahead_bytes() -> int:
    """DECODE_AHEAD, or an eighth of the memory available where that is less; two read blocks at least."""
    return max(2 * READ_BLOCK, min(DECODE_AHEAD, available_memory() // 8))


def available_memory() -> int:
    """Bytes of memory available (Linux's MemAvailable, free pages elsewhere; 0 where unknown)."""
    try:
        with open("/proc/meminfo", "rb") as fh:
            for line in fh:
                if line.startswith(b"MemAvailable:"):
                    return int(line.split()[1]) << 10
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return 0


def start_decoding(paths: list, threads: int, ramp: bool):
    """Begin decoding the reads of a map command (one file, or the two mate files) at once, each as
    fastq.chunks will open and read it (in ramp_sizes' blocks with ramp, else whole blocks; mate files
    with half the threads each, as fastq.read_pair_batches reads them), decode_ahead_bytes in all: the
    mapper's imports and start take half a second, and a run of pairs is bound by decoding its files."""
    early = decode_ahead_bytes() // len(paths)
    ends = itertools.takewhile(lambda n: n <= early, itertools.accumulate(
        ramp_sizes(READ_BLOCK) if ramp else itertools.repeat(READ_BLOCK)))
    ends = list(ends)
    sizes = [b - a for a, b in zip([0] + ends, ends)]
    per_file = threads if len(paths) == 1 else max(1, threads // 2)
    for path in paths:
        decode_early((path, "reads", per_file, None, PARALLEL_GZIP_MIN, PARALLEL_GZIP_THREADS), sizes)


__all__ = ["Input", "Prefixed", "STDIN", "check_input", "decode_early", "drop_early", "iter_line_blocks", "joined",
           "opened", "ramp_sizes", "shown", "start_decoding"]


if __name__ == "__main__":   # DecodingProcess's child
    sys.exit(decode_to_stdout(int(sys.argv[1]), sys.argv[2]))
