"""An optional timeline of a run: thread, step, start and end of every timed step, written as TSV
when the environment variable GPUALIGN_TRACE names a file (bench/timeline.py reads it and says
what the wall clock waited on). Off, a step costs one dictionary lookup."""

import contextlib
import os
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
    start = time.perf_counter()
    try:
        yield
    finally:
        record(step, start, time.perf_counter())


def record(step: str, start: float, end: float, thread: str | None = None):
    """Add a step already timed (perf_counter seconds), on the calling thread or a named one (the
    GPU's kernels, timed by CUDA events, are on a thread of their own)."""
    if enabled():
        with _lock:
            _events.append((thread or threading.current_thread().name, step, start, end))


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
        fh.write("thread\tstep\tstart\tend\n")
        for thread, step, start, end in events:
            fh.write(f"{thread}\t{step}\t{start - t0:.6f}\t{end - t0:.6f}\n")
