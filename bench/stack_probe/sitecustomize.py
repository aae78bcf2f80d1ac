# Benchmarks only: what every thread of a gpualign process is doing during its first seconds, sampled, to find
# what holds the others up (the GIL held by a long C call, a lock). GPUALIGN_BENCH_STACKS=SECONDS turns it on:
#   ENV_B="PYTHONPATH=/tmp/site:$PWD:$PWD/bench/stack_probe GPUALIGN_BENCH_STACKS=1.5" bash bench/gpu_trace.sh
# A daemon thread wakes every 2 ms for that many seconds and writes, beside $GPUALIGN_TRACE, the time since the
# interpreter started (the trace's own clock: time.perf_counter), the gap since its last wake-up (a gap far over
# 2 ms: the GIL was held without a switch) and each thread's innermost frames. bench/stack_probe/report.py reads it.
import os
import sys
import threading
import time

_seconds = float(os.environ.get("GPUALIGN_BENCH_STACKS", "0") or 0)
_trace = os.environ.get("GPUALIGN_TRACE", "")


def _frames(frame, depth=4):
    out = []
    while frame is not None and len(out) < depth:
        code = frame.f_code
        out.append(f"{os.path.basename(code.co_filename)}:{frame.f_lineno}:{code.co_name}")
        frame = frame.f_back
    return " < ".join(out)


def _sample():
    names = {}
    rows = []
    start = last = time.perf_counter()
    while last - start < _seconds:
        time.sleep(0.002)
        now = time.perf_counter()
        for t in threading.enumerate():
            names[t.ident] = t.name
        frames = sys._current_frames()
        me = threading.get_ident()
        for ident, frame in frames.items():
            if ident != me:
                rows.append(f"{now:.6f}\t{(now - last) * 1e3:.2f}\t{names.get(ident, ident)}\t{_frames(frame)}\n")
        last = now
    with open(_trace + ".stacks.tsv", "w") as fh:
        fh.write(f"# epoch_at_perf0={time.time() - time.perf_counter():.6f}\n")
        fh.writelines(rows)


if _seconds > 0 and _trace:
    threading.Thread(target=_sample, name="stack probe", daemon=True).start()
