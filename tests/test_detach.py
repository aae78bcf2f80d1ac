"""detach.run: the command's status and output come back from the child that did the work, the
parent passes signals on, and neither outlives the other's death."""

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def program(body: str) -> list[str]:
    """A command whose main() is `body`, run through detach.run and ended as cli.entry_point ends."""
    code = textwrap.dedent("""
        import os, sys, time
        from gpualign import detach
        def main():
        {body}
        status = detach.run(main)
        sys.stdout.flush()
        os._exit(status)
    """).format(body=textwrap.indent(textwrap.dedent(body), "    "))
    return [sys.executable, "-c", code]


def environment(**env) -> dict:
    """This test's environment, detaching (whatever the caller's), with the checkout importable."""
    out = {k: v for k, v in os.environ.items() if k != "GPUALIGN_NO_DETACH"}
    out.update(PYTHONPATH=str(ROOT), **env)
    return out


def run(body: str, **env) -> subprocess.CompletedProcess:
    """The program run to its end; its CompletedProcess has the command's pid too."""
    with subprocess.Popen(program(body), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env=environment(**env)) as proc:
        out, err = proc.communicate(timeout=60)
    done = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    done.pid = proc.pid
    return done


def test_status_and_output_come_back_from_a_child():
    proc = run("""
        print("out", os.getpid(), os.getppid())
        print("err", file=sys.stderr)
        return 3
    """)
    assert proc.returncode == 3
    assert proc.stderr == "err\n"
    word, pid, ppid = proc.stdout.split()
    assert word == "out" and int(pid) != proc.pid and int(ppid) == proc.pid   # main ran in the command's child


def test_not_detached_when_asked():
    proc = run("print(os.getpid()); return 0", GPUALIGN_NO_DETACH="1")
    assert proc.returncode == 0 and int(proc.stdout) == proc.pid


@pytest.mark.parametrize("body, status, stderr", [
    ("sys.exit(2)", 2, ""),
    ("sys.exit('no such thing')", 1, "no such thing\n"),
    ("raise ValueError('broken')", 1, "ValueError: broken"),
    ("raise KeyboardInterrupt", 130, ""),
])
def test_exits_and_errors_in_main(body, status, stderr):
    proc = run(body)
    assert proc.returncode == status
    assert stderr in proc.stderr and (stderr or proc.stderr == "")


def test_a_child_killed_ends_the_command_as_a_killed_process_would():
    proc = run("os.kill(os.getpid(), 9); time.sleep(30)")
    assert proc.returncode == 128 + 9


def wait_for(path: Path, timeout=30.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().endswith("\n"):
            return path.read_text()
        time.sleep(0.02)
    raise AssertionError(f"{path} never written")


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_sigterm_to_the_command_reaches_the_child(tmp_path):
    marker = tmp_path / "child"
    with subprocess.Popen(program(f"open({str(marker)!r}, 'w').write(str(os.getpid()) + '\\n'); time.sleep(60)"),
                          env=environment()) as proc:
        child = int(wait_for(marker))
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 128 + signal.SIGTERM
    deadline = time.monotonic() + 10
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not alive(child)


def test_the_child_dies_with_a_killed_command(tmp_path):
    marker = tmp_path / "child"
    with subprocess.Popen(program(f"open({str(marker)!r}, 'w').write(str(os.getpid()) + '\\n'); time.sleep(60)"),
                          env=environment()) as proc:
        child = int(wait_for(marker))
        proc.kill()
        proc.wait(timeout=30)
    deadline = time.monotonic() + 10
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not alive(child)
