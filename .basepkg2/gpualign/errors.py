"""One exception type for bad input: the CLI prints its message as one line and exits non-zero."""

import contextlib
import sys


class InputError(Exception):
    """Bad input or an unusable resource. The message names the file, the line or record, and the problem."""

    def __init__(self, message: str):
        super().__init__(" ".join(str(message).split()))


def one_line(err: BaseException, target: str = "") -> str:
    """The one-line message of an InputError, or of a failed read or write (an OSError, as from a
    full disk): its file, else `target` (what was being written), and the system's reason."""
    if isinstance(err, OSError):
        name = err.filename or target
        reason = err.strerror or " ".join(str(err).split()) or type(err).__name__
        return f"{name}: {reason}" if name else reason
    return str(err)


@contextlib.contextmanager
def job_errors(rule: str, log, target: str = ""):
    """Around a workflow script's work: an InputError or OSError becomes `error: ...` in the job's
    log and `{rule}: error: ...` on Snakemake's stderr, one line each, and exit status 1."""
    try:
        yield
    except (InputError, OSError) as err:   # OSError: a full disk, say
        message = one_line(err, target)
        print(f"error: {message}", file=log)
        print(f"{rule}: error: {message}", file=sys.__stderr__)
        sys.exit(1)
