# probe: when the interpreter reached site, when os._exit was called, what the process held then;
# PROBE_RESET=1: reset the CUDA primary context first (frees device memory and pinned host buffers)
import os, sys, time
_site_at = time.time()
_real_exit = os._exit


def _status():
    out = {}
    try:
        for line in open("/proc/self/status"):
            if line.split(":")[0] in ("VmRSS", "VmHWM", "VmPin", "VmLck", "Threads"):
                out[line.split(":")[0]] = line.split(":")[1].strip()
    except OSError:
        pass
    try:
        for line in open("/proc/self/smaps_rollup"):
            k = line.split(":")[0]
            if k in ("Rss", "Anonymous", "AnonHugePages", "Private_Clean", "Private_Dirty", "Shared_Clean"):
                out[k] = line.split(":")[1].strip()
    except OSError:
        pass
    return out


def _exit(status):
    t = time.time()
    msg = f"[probe] site_at={_site_at:.4f} exit_at={t:.4f} {_status()}"
    if os.environ.get("PROBE_RESET"):
        try:
            from gpualign import cuda_driver as d
            if d._ctx is not None:
                d._bind()
                t2 = time.time()
                rc = d._lib.cuDevicePrimaryCtxReset_v2(d._device)
                msg += f" reset_rc={rc} reset_s={time.time() - t2:.4f}"
        except Exception as exc:
            msg += f" reset_failed={exc!r}"
        msg += f" after_reset={time.time():.4f}"
    try:
        sys.stderr.write(msg + "\n")
        sys.stderr.flush()
    except Exception:
        pass
    _real_exit(status)


os._exit = _exit
