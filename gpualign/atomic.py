"""Write-then-rename, so an interrupted run never leaves a half file that a rerun would trust."""

import contextlib
import os


@contextlib.contextmanager
def atomic_path(path: str):
    """Yield a temporary path beside `path`; rename it onto `path` only if the block succeeds."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    base = os.path.basename(path)
    # keep the extension last: pysam and numpy pick formats from it
    tmp = os.path.join(directory, f".{base}.tmp{os.getpid()}.{base.split('.', 1)[-1] if '.' in base else 'tmp'}")
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
