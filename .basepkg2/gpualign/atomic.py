"""Write-then-rename, so an interrupted run never leaves a half file that a rerun would trust."""

import contextlib
import os
import re
import shutil


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_temporaries(directory: str, base: str):
    """Temporary files of `base` left by processes that died (SIGKILL runs no cleanup)."""
    for name in os.listdir(directory):
        m = re.fullmatch(re.escape(f".{base}.tmp") + r"(\d+)(\..*)?", name)
        if m and int(m.group(1)) != os.getpid() and not _alive(int(m.group(1))):
            path = os.path.join(directory, name)
            if os.path.isdir(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)


@contextlib.contextmanager
def atomic_path(path: str):
    """Yield a temporary path beside `path`; rename it onto `path` only if the block succeeds."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    base = os.path.basename(path)
    remove_stale_temporaries(directory, base)
    # keep the extension last: pysam and numpy pick formats from it
    tmp = os.path.join(directory, f".{base}.tmp{os.getpid()}.{base.split('.', 1)[-1] if '.' in base else 'tmp'}")
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
