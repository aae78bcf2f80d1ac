"""Headless Chromium for tests, driven over the DevTools protocol on a pipe.

`--remote-debugging-pipe` makes Chromium read commands from its fd 3 and write replies and events to
its fd 4, each a JSON message ending in a NUL byte. So a test needs no websocket client and no
browser download (playwright, selenium and pyppeteer each bring their own): Debian's `chromium`
package and the standard library are enough.
"""

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_chromium() -> str | None:
    for name in CANDIDATES:
        path = shutil.which(name)
        if path:
            return path
    return None


class CDPError(RuntimeError):
    pass


class Chromium:
    """One headless browser with one page: `navigate`, `evaluate`, `screenshot`. A context manager."""

    def __init__(self, binary: str, width: int = 1600, height: int = 1000, timeout: float = 60.0):
        self.binary, self.width, self.height, self.timeout = binary, width, height, timeout
        self.next_id = 0
        self.buffer = b""
        self.events = []
        self.session = None

    def __enter__(self):
        self.profile = tempfile.TemporaryDirectory(prefix="gpualign-chromium-")
        commands_r, self.commands = os.pipe()   # we write to it, Chromium reads it as fd 3
        self.replies, replies_w = os.pipe()     # Chromium writes it as fd 4, we read it

        def onto_fds_3_and_4():   # in the child, before exec: above 10 first, so neither clobbers the other
            high_r = fcntl.fcntl(commands_r, fcntl.F_DUPFD, 10)
            high_w = fcntl.fcntl(replies_w, fcntl.F_DUPFD, 10)
            os.dup2(high_r, 3)
            os.dup2(high_w, 4)

        self.stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            [self.binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
             "--no-first-run", "--no-default-browser-check", "--hide-scrollbars", "--remote-debugging-pipe",
             f"--user-data-dir={self.profile.name}", f"--window-size={self.width},{self.height}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.stderr,
            pass_fds=(3, 4), preexec_fn=onto_fds_3_and_4)
        os.close(commands_r)
        os.close(replies_w)
        try:
            target = self.call("Target.createTarget", {"url": "about:blank"}, browser=True)["targetId"]
            self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True},
                                     browser=True)["sessionId"]
            self.call("Page.enable")
            self.call("Runtime.enable")
            self.call("Emulation.setDeviceMetricsOverride",
                      {"width": self.width, "height": self.height, "deviceScaleFactor": 1, "mobile": False})
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc):
        if self.proc.poll() is None:
            try:
                self.call("Browser.close", browser=True, timeout=10)
            except (CDPError, OSError):
                pass
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for fd in (self.commands, self.replies):
            try:
                os.close(fd)
            except OSError:
                pass
        self.stderr.close()
        self.profile.cleanup()

    def log_tail(self) -> str:
        """The end of Chromium's stderr, for a failure's message."""
        self.stderr.seek(0)
        return self.stderr.read()[-3000:].decode(errors="replace")

    # ---- the protocol -------------------------------------------------------------------------

    def call(self, method: str, params: dict | None = None, browser: bool = False, timeout: float | None = None):
        """Send a command (to the page's session unless `browser`), wait for its reply, return its result."""
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if not browser:
            message["sessionId"] = self.session
        os.write(self.commands, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            reply = self.receive(deadline, method)
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise CDPError(f"{method}: {reply['error']}")
                return reply["result"]
            if "method" in reply:
                self.events.append(reply)

    def receive(self, deadline: float, waiting_for: str) -> dict:
        while b"\0" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise CDPError(f"{waiting_for}: no answer from Chromium in time\n{self.log_tail()}")
            ready, _, _ = select.select([self.replies], [], [], left)
            if ready:
                chunk = os.read(self.replies, 1 << 20)
                if not chunk:
                    raise CDPError(f"{waiting_for}: Chromium closed its pipe\n{self.log_tail()}")
                self.buffer += chunk
        message, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(message)

    def wait_event(self, method: str, timeout: float | None = None) -> dict:
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            for i, event in enumerate(self.events):
                if event["method"] == method:
                    return self.events.pop(i)
            reply = self.receive(deadline, method)
            if "method" in reply:
                self.events.append(reply)

    # ---- what tests use -----------------------------------------------------------------------

    def navigate(self, url: str):
        """Load a page and wait for its load event (scripts in it have run)."""
        self.events.clear()
        result = self.call("Page.navigate", {"url": url})
        if result.get("errorText"):
            raise CDPError(f"navigate {url}: {result['errorText']}")
        self.wait_event("Page.loadEventFired")

    def evaluate(self, expression: str):
        """The value of a JavaScript expression in the page (a promise is awaited)."""
        result = self.call("Runtime.evaluate", {"expression": expression, "awaitPromise": True,
                                                "returnByValue": True})
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            raise CDPError(f"JavaScript: {details.get('exception', {}).get('description') or details.get('text')}")
        return result["result"].get("value")

    def exceptions(self) -> list:
        """Uncaught JavaScript exceptions of the page so far (Runtime.exceptionThrown)."""
        return [e["params"]["exceptionDetails"] for e in self.events if e["method"] == "Runtime.exceptionThrown"]

    def screenshot(self, path: str):
        data = self.call("Page.captureScreenshot", {"format": "png"})["data"]
        with open(path, "wb") as fh:
            fh.write(base64.b64decode(data))
