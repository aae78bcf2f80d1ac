"""Where `gpualign map` writes, and how, decided before any work (samtools and bwa conventions).

- The format comes from `-O` or else the name's extension, case-insensitive: `.bam`, `.cram`,
  `.sam`; a name with no extension (`-`, `/dev/stdout`, a FIFO) is SAM. Any other extension is an
  error: nothing is written in a format the user did not ask for.
- BAM and CRAM are coordinate-sorted unless `--unsorted`; SAM is in read order (as `bwa mem`).
- A regular file (new or existing) is written under a temporary name beside it and renamed over
  it at the end, so an interrupted run leaves nothing half-written; the sorted BAM's `.bai` (CRAM's
  `.crai`) is written the same way. Anything else (a character device such as /dev/null, a FIFO,
  stdout, /dev/fd/N) is opened and written in place, never replaced; it gets no index file.
- A symlink is followed: its target is written, the link stays.
- An output that is one of the inputs, or a folder, is refused before any work.
Errors name the path as the user gave it.
"""

import contextlib
import os
import stat
from dataclasses import dataclass

from .atomic import atomic_path
from .errors import InputError

FORMATS = ("sam", "bam", "cram")
INDEX_SUFFIX = {"bam": ".bai", "cram": ".crai"}


@dataclass(frozen=True)
class Output:
    given: str        # as the user typed it ('-' is stdout)
    path: str         # what is opened: '-', a stream path as given, or a regular file's real path
    fmt: str          # sam, bam or cram
    sort: bool        # coordinate-sorted (bam and cram unless --unsorted)
    regular: bool     # a regular file, written under a temporary name and renamed

    @property
    def index_path(self) -> str | None:
        """The .bai/.crai written beside a sorted regular file; streams get none."""
        if self.sort and self.regular and self.fmt in INDEX_SUFFIX:
            # beside the name given, where samtools looks for it (for a symlink: beside the link)
            return os.path.realpath(self.given + INDEX_SUFFIX[self.fmt])
        return None

    def describe(self) -> str:
        order = "coordinate-sorted" if self.sort else "in read order"
        where = "stdout" if self.path == "-" else self.given
        extra = f" + {os.path.basename(self.index_path)}" if self.index_path else ""
        return f"{self.fmt.upper()} {order} to {where}{extra}"


def format_of(name: str) -> str | None:
    """The format a file name asks for; None when the name has no extension."""
    base = os.path.basename(name)
    if name == "-" or "." not in base.lstrip("."):
        return None
    ext = base.rsplit(".", 1)[1].lower()
    if ext not in FORMATS:
        raise InputError(f"output {name}: unknown format '.{base.rsplit('.', 1)[1]}' "
                         "(use a name ending in .bam, .cram or .sam, or say -O bam|cram|sam)")
    return ext


def is_stream_name(name: str) -> bool:
    """Paths that name an open file of this process rather than a file on disk: resolving them
    would give pipe:[n] or the file stdout was redirected to, which must not be replaced."""
    return (name == "-" or name in ("/dev/stdout", "/dev/stderr")
            or name.startswith(("/dev/fd/", "/proc/")))


def same_file(a_stat, b_stat) -> bool:
    return (a_stat.st_dev, a_stat.st_ino) == (b_stat.st_dev, b_stat.st_ino)


def plan_output(given: str, fmt: str | None = None, unsorted: bool = False, inputs=()) -> Output:
    """The Output for `-o given` (and `-O fmt`, `--unsorted`); `inputs` are the paths the run
    reads, none of which may be the output."""
    if not given:
        raise InputError("output: empty file name")
    path, regular = plan_file(given, inputs)
    return checked_index(Output(given, path, *sort_and_format(given, fmt, unsorted), regular))


def plan_file(given: str, inputs=(), what: str = "output") -> tuple[str, bool]:
    """(path to open, whether it is a regular file) for an output named `given`: a stream name as
    given, else its real path; a regular file or a new one is written under a temporary name and
    renamed (`written`), anything else (stdout, a device, a FIFO) is written in place. A folder, a
    missing or unwritable folder, or one of `inputs` is an InputError naming `what` and `given`."""
    if is_stream_name(given):
        return given, False
    real = os.path.realpath(given)
    try:
        st = os.stat(real)
    except FileNotFoundError:
        folder = os.path.dirname(real)
        if not os.path.isdir(folder):
            raise InputError(f"{what} {given}: no such folder {os.path.dirname(given) or folder}") from None
        if not os.access(folder, os.W_OK):
            raise InputError(f"{what} {given}: folder is not writable") from None
        return real, True
    if stat.S_ISDIR(st.st_mode):
        raise InputError(f"{what} {given}: is a directory")
    if not stat.S_ISCHR(st.st_mode):   # /dev/null as input and output is harmless
        for path in inputs:
            with contextlib.suppress(OSError):
                if path and path != "-" and same_file(st, os.stat(path)):
                    raise InputError(f"{what} {given}: is also an input ({path}); choose another output name")
    regular = stat.S_ISREG(st.st_mode)
    if regular and not os.access(os.path.dirname(real), os.W_OK):
        raise InputError(f"{what} {given}: folder is not writable")
    return real, regular


@contextlib.contextmanager
def written(path: str, regular: bool):
    """The path to write for plan_file's (path, regular): a regular file's temporary, renamed onto
    it if the body succeeds; anything else itself, written in place and never replaced."""
    if not regular:
        yield path
        return
    with atomic_path(path) as tmp:
        yield tmp


def checked_index(out: Output) -> Output:
    """An index is written like its data file, so it too must be a regular file or new."""
    index = out.index_path
    if index and os.path.exists(index) and not os.path.isfile(index):
        raise InputError(f"output {out.given}: its index {index} exists and is not a regular file")
    return out


def sort_and_format(given: str, fmt: str | None, unsorted: bool) -> tuple[str, bool]:
    """(format, coordinate-sorted) of an output: -O, else the name's extension, else SAM."""
    fmt = (fmt.lower() if fmt else None) or format_of(given) or "sam"
    if fmt not in FORMATS:
        raise InputError(f"output format {fmt!r}: must be one of sam, bam, cram")
    return fmt, fmt != "sam" and not unsorted


@contextlib.contextmanager
def writing(out: Output):
    """(path to write, path of its index or None) for the body; renamed into place if it succeeds.
    A regular file's stale index (left by an earlier sorted run) is removed when this run writes
    none, so an index never describes another file."""
    if not out.regular:
        yield out.path, None
        return
    index = out.index_path
    if index is None:
        with written(out.path, True) as tmp:
            yield tmp, None
        for suffix in INDEX_SUFFIX.values():
            with contextlib.suppress(FileNotFoundError):
                stale = os.path.realpath(out.given + suffix)
                if stat.S_ISREG(os.lstat(stale).st_mode):
                    os.unlink(stale)
        return
    # the index is renamed into place after the data file, so it never sits beside a missing one
    with atomic_path(index) as tmp_index, atomic_path(out.path) as tmp:
        yield tmp, tmp_index


def scratch_dir(path: str) -> str | None:
    """Where the sort's run file goes while writing `path`: beside a regular file (named after it,
    so a rerun clears a dead run's leftovers), else (a stream) the system's temporary folder."""
    if is_stream_name(path):
        return None
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return os.path.dirname(os.path.abspath(path))
    return os.path.dirname(os.path.abspath(path)) if stat.S_ISREG(st.st_mode) else None


def open_binary(path: str):
    """A binary file object writing `path`; '-' is (a duplicate of) stdout, so closing it leaves
    the process's stdout open."""
    if path == "-":
        import sys
        sys.stdout.flush()
        return os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    return open(path, "wb")


def user_message(err: OSError, out: Output | None) -> OSError:
    """An OSError about a temporary of `out` reported under the name the user gave."""
    if out is not None and err.filename and os.path.basename(str(err.filename)).startswith(
            "." + os.path.basename(out.path) + ".tmp"):
        err.filename = out.given
    return err


__all__ = ["Output", "plan_output", "plan_file", "writing", "written", "format_of", "scratch_dir", "open_binary", "FORMATS"]
