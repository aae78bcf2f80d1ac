# probe: when the interpreter reached site, when os._exit was called, what the process held then;
# PROBE_RESET=1: reset the CUDA primary context first (frees device memory and pinned host buffers); the resident
# memory by kind of mapping (heap, anonymous, huge pages, files, device) goes to stderr as [probe-maps];
# PROBE_TRIM=1: malloc_trim(0) at the exit, timed, and the memory it leaves
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


def _maps():
    """Resident MB (and in huge pages) by kind of mapping, and the ten largest anonymous mappings' resident MB."""
    kinds, anon, cur, kind = {}, [], None, None
    try:
        for line in open("/proc/self/smaps"):
            parts = line.split()
            if not parts[0].endswith(":"):
                name = parts[5] if len(parts) > 5 else "[anon]"
                if name.startswith("/dev/"):
                    kind = "device:" + os.path.basename(name)
                elif name.startswith("/"):
                    kind = "lib" if ".so" in name else "file"
                else:
                    kind = name
                cur = kinds.setdefault(kind, [0, 0, 0])
                cur[0] += 1
            elif parts[0] == "Rss:":
                cur[1] += int(parts[1])
                if kind == "[anon]":
                    anon.append(int(parts[1]))
            elif parts[0] == "AnonHugePages:":
                cur[2] += int(parts[1])
    except OSError:
        return ""
    table = " ".join(f"{k}={v[1] >> 10}MB/{v[0]}maps/{v[2] >> 10}MBhuge"
                     for k, v in sorted(kinds.items(), key=lambda kv: -kv[1][1]))
    return f"[probe-maps] {table} largest_anon_MB={[a >> 10 for a in sorted(anon)[::-1][:10]]}"


def _exit(status):
    t = time.time()
    maps = _maps()
    if os.environ.get("PROBE_TRIM"):   # what malloc_trim takes here, and what it leaves the exit
        import ctypes
        t2 = time.time()
        ctypes.CDLL("libc.so.6").malloc_trim(0)
        maps += f" trim_s={time.time() - t2:.4f} after_trim: {_maps()}"
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
        sys.stderr.write(msg + "\n" + maps + "\n")
        sys.stderr.flush()
    except Exception:
        pass
    _real_exit(status)


os._exit = _exit
