"""An optional timeline of a run: thread, step, start and end of every timed step, and the CPU seconds
its thread spent in it, written as TSV when the environment variable GPUALIGN_TRACE names a file
(bench/timeline.py reads it and says what the wall clock waited on and where the CPU went); below the
steps, the CPU seconds of every thread of the process still running, named or not (numba's parallel
workers, a decoder's own threads), and the process's user and system seconds. Off, a step costs one
dictionary lookup. With GPUALIGN_TRACE_GIL=1 as well, a probe thread sleeps a millisecond at a time and records
each wake-up that came later than GIL_LATE as "GIL wait (probe)": how long a thread that lets go of the GIL (a
driver call, a copy, a sleep) waited to run Python again, at each moment of the run."""

import contextlib
import os
import resource
import threading
import time

_events = []
_lock = threading.Lock()


def enabled() -> bool:
    return bool(os.environ.get("GPUALIGN_TRACE"))


@contextlib.contextmanager
def span(step: str):
    if not enabled():
        yield
        return
    start, cpu = time.perf_counter(), time.thread_time()
    try:
        yield
    finally:
        record(step, start, time.perf_counter(), cpu=time.thread_time() - cpu)


GIL_PROBE_SLEEP = 0.001   # seconds the probe sleeps between wake-ups
GIL_LATE = 0.002          # a wake-up this much later than asked is recorded


def start_gil_probe():
    """With GPUALIGN_TRACE and GPUALIGN_TRACE_GIL set, start the probe (a daemon thread "GIL probe") once."""
    if enabled() and os.environ.get("GPUALIGN_TRACE_GIL") and not _probing:
        _probing.append(threading.Thread(target=_probe_gil, name="GIL probe", daemon=True))
        _probing[0].start()


_probing = []


def _probe_gil(rounds: int | None = None):
    """Sleep GIL_PROBE_SLEEP at a time, recording each late wake-up (its lateness as the step), `rounds`
    times (None: until the process ends)."""
    done = 0
    while rounds is None or done < rounds:
        asked = time.perf_counter() + GIL_PROBE_SLEEP
        time.sleep(GIL_PROBE_SLEEP)
        now = time.perf_counter()
        if now - asked > GIL_LATE:
            record("GIL wait (probe)", asked, now, cpu=0.0)
        done += 1


def record(step: str, start: float, end: float, thread: str | None = None, cpu: float | None = None):
    """Add a step already timed (perf_counter seconds), on the calling thread or a named one (the
    GPU's kernels, timed by CUDA events, are on a thread of their own); cpu: the calling thread's CPU
    seconds in it, where known."""
    if enabled():
        with _lock:
            _events.append((thread or threading.current_thread().name, step, start, end, cpu))


def stat_fields(path: str) -> list:
    """The fields of a /proc stat file after the command's name (in parentheses, which may hold spaces):
    the file's third field first."""
    with open(path) as fh:
        return fh.read().rsplit(")", 1)[1].split()


def process_started() -> float | None:
    """When this process started, in perf_counter seconds (Linux's /proc, to the clock tick; None
    elsewhere): the interpreter's start and the imports before the first step, in a trace."""
    try:
        ticks = int(stat_fields("/proc/self/stat")[19])   # starttime: clock ticks since boot
        return time.perf_counter() - (time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def since_process_start(step: str):
    """Record `step` from the process's start until now (nothing where the start is unknown), on the main thread:
    its CPU seconds so far are the step's."""
    if enabled() and (start := process_started()) is not None:
        now = time.perf_counter()
        start = min(start, now)
        record(step, start, now, cpu=min(time.thread_time(), now - start))


def thread_cpu_seconds() -> list:
    """(thread name, or 'unnamed' for threads Python did not start, CPU seconds) of every thread of the
    process now, from /proc (Linux; empty elsewhere)."""
    names = {t.native_id: t.name for t in threading.enumerate()}
    tick = os.sysconf("SC_CLK_TCK")
    out = []
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return out
    for tid in tasks:
        try:
            fields = stat_fields(f"/proc/self/task/{tid}/stat")
        except OSError:
            continue
        out.append((names.get(int(tid), "unnamed"), (int(fields[11]) + int(fields[12])) / tick))   # utime, stime
    return out


def write():
    """Write the steps so far to $GPUALIGN_TRACE (times from the first step) and forget them."""
    path = os.environ.get("GPUALIGN_TRACE")
    if not path:
        return
    with _lock:
        events = sorted(_events, key=lambda e: e[2])
        _events.clear()
    t0 = events[0][2] if events else 0.0
    t0_epoch = time.time() - (time.perf_counter() - t0)
    with open(path, "w") as fh:
        fh.write(f"# t0_epoch={t0_epoch:.6f} (Unix time of the first step's start; times below are from it)\n")
        fh.write("thread\tstep\tstart\tend\tcpu\n")
        for thread, step, start, end, cpu in events:
            fh.write(f"{thread}\t{step}\t{start - t0:.6f}\t{end - t0:.6f}\t{'' if cpu is None else f'{cpu:.6f}'}\n")
        for name, seconds in thread_cpu_seconds():
            fh.write(f"# thread_cpu\t{name}\t{seconds:.2f}\n")
        used = resource.getrusage(resource.RUSAGE_SELF)   # every thread's, those that ended too
        fh.write(f"# process_cpu\t{used.ru_utime:.2f}\t{used.ru_stime:.2f}\n")
