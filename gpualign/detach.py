"""The command returns when its outputs are done, not when the kernel has freed its memory.

Ending a process that holds gigabytes (parsed reads, records, the decoder's buffers, the CUDA context)
takes the kernel a while: 0.2-0.6 s on the GPU host after a mapping run, on the command's wall clock,
since whoever waits for the process waits for that too. So the command forks before any thread or
the GPU starts (mold, the linker, does the same): the child does the work, and once every output is
closed and in place it lets go of stdin, stdout and stderr and sends its exit status down a pipe.
The parent, which holds almost nothing, exits with that status at once; the child then ends, and
its memory is freed with no one waiting for it.

- The child dies with the parent (PR_SET_PDEATHSIG): a parent killed outright leaves nothing running.
- SIGTERM and SIGHUP to the parent are passed on; so is SIGINT, unless it came from the terminal,
  which sends it to both (a second one would interrupt the child's clean-up).
- A child that ends without a status (killed, crashed) makes the parent end as it did.
- GPUALIGN_NO_DETACH=1 (or a platform without fork, or threads already running) runs in one
  process, as before; tools that measure the process's own peak memory (/usr/bin/time) need it.
"""

import ctypes
import os
import signal
import sys
import threading
import traceback

ENV = "GPUALIGN_NO_DETACH"
FORWARDED = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
PR_SET_PDEATHSIG = 1


def run(main) -> int:
    """main() in a child process that hands its status back as soon as it has one. Returns main()'s
    status only where it ran here, undetached; otherwise parent and child both end in os._exit."""
    if not can_detach():
        return main()
    parent = os.getpid()
    status_r, status_w = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(status_r)
        _in_child(main, parent, status_w)
    os.close(status_w)
    _in_parent(child, status_r)


def can_detach() -> bool:
    return (not os.environ.get(ENV) and hasattr(os, "fork") and sys.platform.startswith("linux")
            and threading.active_count() == 1)


def _in_child(main, parent: int, status_w: int):
    _die_with(parent)
    try:
        status = main()
        status = status if isinstance(status, int) else int(status is not None)
    except SystemExit as exc:   # argparse's usage errors and --help
        status = _exit_code(exc)
    except KeyboardInterrupt:
        status = 130
    except BaseException:   # printed as the interpreter would, since os._exit below skips it
        traceback.print_exc()
        status = 1
    status = flushed(status)
    _let_go_of_stdio()
    os.write(status_w, bytes([status & 0xFF]))
    os._exit(status)


def flushed(status: int) -> int:
    """status, once stdout and stderr are flushed; 1 for 0 where a reader of stdout went away."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (BrokenPipeError, OSError):
        status = status or 1
    return status


def _exit_code(exc: SystemExit) -> int:
    if exc.code is None or isinstance(exc.code, int):
        return exc.code or 0
    print(exc.code, file=sys.stderr)
    return 1


def _die_with(parent: int):
    try:
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:   # the parent was gone before the call: nobody waits for this run
        os._exit(1)


def _let_go_of_stdio():
    """stdin, stdout and stderr onto /dev/null: a reader of our pipes sees their end when the
    parent exits, not when this process has freed its memory."""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)


def _in_parent(child: int, status_r: int):
    for sig in FORWARDED:
        signal.signal(sig, lambda sig, _frame: _forward(child, sig))
    status = os.read(status_r, 1)   # retried after a signal's handler (PEP 475)
    if status:
        os._exit(status[0])
    _, wait_status = os.waitpid(child, 0)   # ended without a status: end as it did
    code = os.waitstatus_to_exitcode(wait_status)
    os._exit(code if code >= 0 else 128 - code)


def _forward(child: int, sig: int):
    if sig == signal.SIGINT and _from_terminal():
        return
    try:
        os.kill(child, sig)
    except ProcessLookupError:
        pass


def _from_terminal() -> bool:
    """Whether a SIGINT here came from the terminal, which sends it to the child as well: stderr is
    a terminal whose foreground process group is ours (and the child's)."""
    try:
        return os.isatty(2) and os.tcgetpgrp(2) == os.getpgrp()
    except OSError:
        return False
