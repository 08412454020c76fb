"""Headless Chromium driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``:
NUL-terminated JSON on file descriptors 3 and 4), so tests need no websocket library and
open no port. Used to check that a page renders, what its DOM holds, that it logged no
console error and fetched nothing, and to take a screenshot."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FLAGS = (
    "--headless",
    "--no-sandbox",  # CI runs as root
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-dev-shm-usage",
    "--remote-debugging-pipe",
)


def chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


@dataclass
class PageResult:
    """What a page did while it loaded."""

    console: list[dict[str, Any]] = field(default_factory=list)  # console.* calls
    errors: list[str] = field(default_factory=list)  # exceptions, error log entries
    requests: list[str] = field(default_factory=list)  # every URL the page asked for
    values: dict[str, Any] = field(default_factory=dict)  # the probes' results
    screenshot: bytes = b""


class Browser:
    """One headless Chromium process and a page target attached in flat mode."""

    def __init__(self, binary: str, timeout_s: float = 60.0):
        self.timeout_s = timeout_s
        self._profile = tempfile.mkdtemp(prefix="looprun-chromium-")
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()
        # the child reads commands on fd 3 and writes replies on fd 4
        self.proc = subprocess.Popen(
            [binary, *FLAGS, f"--user-data-dir={self._profile}", "about:blank"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            pass_fds=(3, 4),
            preexec_fn=lambda: (os.dup2(to_child_r, 3), os.dup2(from_child_w, 4)),
            start_new_session=True,
        )
        os.close(to_child_r)
        os.close(from_child_w)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []
        self.session = ""

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.send("Browser.close")
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, 9)
            self.proc.wait()
        for fd in (self._to_child, self._from_child):
            with contextlib.suppress(OSError):
                os.close(fd)
        if self.proc.stderr is not None:
            self.proc.stderr.close()
        shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the protocol -------------------------------------------------------------------

    def send(self, method: str, params: dict[str, Any] | None = None, session: bool = False):
        self._next_id += 1
        msg: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = self.session
        os.write(self._to_child, json.dumps(msg).encode() + b"\0")
        want = self._next_id
        while True:
            reply = self._read()
            if reply.get("id") == want:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def _read(self) -> dict[str, Any]:
        deadline = time.monotonic() + self.timeout_s
        while b"\0" not in self._buffer:
            if time.monotonic() > deadline:
                raise TimeoutError("chromium did not answer")
            chunk = os.read(self._from_child, 1 << 16)
            if not chunk:
                err = self.proc.stderr.read().decode(errors="replace") if self.proc.stderr else ""
                raise RuntimeError(f"chromium closed the pipe: {err[-2000:]}")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(raw)

    def wait_for(self, method: str) -> dict[str, Any]:
        for i, e in enumerate(self.events):
            if e.get("method") == method:
                return self.events.pop(i)
        while True:
            e = self._read()
            if e.get("method") == method:
                return e
            self.events.append(e)

    # -- a page -------------------------------------------------------------------------

    def load(
        self, url: str, probes: dict[str, str], width: int = 1200, height: int = 900
    ) -> PageResult:
        """Open ``url``, wait for its load event, evaluate each probe (a JS expression
        returning JSON-able data) and take a full-page screenshot."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable", session=True)
        self.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
            session=True,
        )
        self.events.clear()
        self.send("Page.navigate", {"url": url}, session=True)
        self.wait_for("Page.loadEventFired")
        out = PageResult()
        for name, expr in probes.items():
            res = self.send(
                "Runtime.evaluate", {"expression": expr, "returnByValue": True}, session=True
            )
            if "exceptionDetails" in res:
                out.errors.append(f"probe {name}: {res['exceptionDetails']}")
            out.values[name] = res.get("result", {}).get("value")
        shot = self.send(
            "Page.captureScreenshot",
            {"format": "png", "captureBeyondViewport": True},
            session=True,
        )
        out.screenshot = base64.b64decode(shot["data"])
        for e in self.events:
            method, params = e.get("method"), e.get("params", {})
            if method == "Runtime.consoleAPICalled":
                out.console.append(params)
                if params.get("type") in ("error", "assert"):
                    out.errors.append(f"console.{params.get('type')}: {params.get('args')}")
            elif method == "Runtime.exceptionThrown":
                out.errors.append(f"exception: {params.get('exceptionDetails')}")
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                out.errors.append(f"log: {params['entry'].get('text')}")
            elif method == "Network.requestWillBeSent":
                out.requests.append(params.get("request", {}).get("url", ""))
        return out


def open_page(path: Path, probes: dict[str, str], screenshot: Path | None = None) -> PageResult:
    """Render a local file in headless Chromium; write the screenshot if asked."""
    binary = chromium()
    if binary is None:
        raise RuntimeError("chromium is not installed (.ci/run installs it with apt)")
    with Browser(binary) as browser:
        result = browser.load(path.resolve().as_uri(), probes)
    if screenshot is not None:
        screenshot.write_bytes(result.screenshot)
    return result
