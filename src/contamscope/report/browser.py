"""Open a report in headless Chromium and say what the page did (for tests and speed checks).

Chromium is driven through the DevTools protocol over ``--remote-debugging-pipe`` (file
descriptors 3 and 4, NUL-separated JSON), so no websocket library or network port is needed.
Collected: console errors and uncaught exceptions, the time from navigation start to the load
event and until the page marks itself ready, the results of JavaScript probes, and a screenshot.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["CHROMIUM_FLAGS", "PageCheck", "find_chromium", "check_page"]

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
)
"""Flags every launch uses (no sandbox: CI containers run as root)."""


def find_chromium() -> str | None:
    """Path of a Chromium binary (``$CHROMIUM``, ``chromium``, ``chromium-browser``) or None."""
    env = os.environ.get("CHROMIUM")
    if env:
        return env if Path(env).exists() else shutil.which(env)
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


@dataclass
class PageCheck:
    """What happened when a page was opened."""

    errors: list[str] = field(default_factory=list)
    """Console errors, uncaught exceptions and failed loads, one line each."""
    load_ms: float | None = None
    """Navigation start to the load event, as the page's own performance timing reports it."""
    ready_ms: float | None = None
    """Navigation start until ``window.__reportReady`` became true (scripts finished)."""
    probes: dict[str, Any] = field(default_factory=dict)
    """Result of each JavaScript probe expression, by name."""
    screenshot: Path | None = None
    """PNG of the first screen, when asked for."""


class _Pipe:
    def __init__(self, proc: subprocess.Popen[bytes], wfd: int, rfd: int) -> None:
        self.proc, self.wfd, self.rfd = proc, wfd, rfd
        self.buf = b""
        self.next_id = 0
        self.events: list[dict[str, Any]] = []

    def send(
        self, method: str, params: dict[str, Any] | None = None, session: str | None = None
    ) -> int:
        self.next_id += 1
        msg: dict[str, Any] = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.wfd, json.dumps(msg).encode() + b"\0")
        return self.next_id

    def _read_one(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("Chromium did not answer in time")
            ready, _, _ = select.select([self.rfd], [], [], left)
            if ready:
                chunk = os.read(self.rfd, 1 << 20)
                if not chunk:
                    raise RuntimeError("Chromium closed the DevTools pipe")
                self.buf += chunk
        raw, self.buf = self.buf.split(b"\0", 1)
        return json.loads(raw)  # type: ignore[no-any-return]

    def call(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        session: str | None = None,
        timeout: float = 30.0,
    ) -> dict[str, Any]:
        want = self.send(method, params, session)
        deadline = time.monotonic() + timeout
        while True:
            msg = self._read_one(deadline)
            if msg.get("id") == want:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})  # type: ignore[no-any-return]
            if "method" in msg:
                self.events.append(msg)

    def wait_event(self, method: str, timeout: float) -> dict[str, Any]:
        for i, ev in enumerate(self.events):
            if ev["method"] == method:
                return self.events.pop(i)
        deadline = time.monotonic() + timeout
        while True:
            msg = self._read_one(deadline)
            if msg.get("method") == method:
                return msg
            if "method" in msg:
                self.events.append(msg)


def _errors_from(events: list[dict[str, Any]]) -> list[str]:
    out = []
    for ev in events:
        m, p = ev["method"], ev.get("params", {})
        if m == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            desc = (d.get("exception") or {}).get("description") or d.get("text")
            out.append(f"uncaught exception: {desc}")
        elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            args = " ".join(
                str(a.get("value", a.get("description", ""))) for a in p.get("args", [])
            )
            out.append(f"console.{p['type']}: {args}")
        elif m == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            e = p["entry"]
            out.append(f"{e.get('source')}: {e.get('text')} {e.get('url', '')}".strip())
    return out


def check_page(
    path: Path,
    *,
    probes: dict[str, str] | None = None,
    screenshot: Path | None = None,
    width: int = 1280,
    height: int = 1600,
    timeout: float = 60.0,
    chromium: str | None = None,
    media: str | None = None,
) -> PageCheck:
    """Open ``path`` (a local HTML file) in headless Chromium and report errors, timings, probes.

    ``probes`` maps names to JavaScript expressions evaluated after the page is ready (their JSON
    value is returned); ``media`` (``"print"``) emulates that CSS media type. Raises
    ``FileNotFoundError`` when no Chromium is installed.
    """
    binary = chromium or find_chromium()
    if binary is None:
        raise FileNotFoundError("chromium is not installed")
    url = Path(path).resolve().as_uri()
    to_chrome_r, to_chrome_w = os.pipe()
    from_chrome_r, from_chrome_w = os.pipe()
    profile = tempfile.mkdtemp(prefix="contamscope-chromium-")

    def _fds() -> None:  # in the child: the pipes become fds 3 (read) and 4 (write)
        r = fcntl.fcntl(to_chrome_r, fcntl.F_DUPFD, 10)
        w = fcntl.fcntl(from_chrome_w, fcntl.F_DUPFD, 10)
        os.dup2(r, 3)  # dup2 targets are inheritable; every other fd is close-on-exec
        os.dup2(w, 4)

    proc = subprocess.Popen(
        [
            binary,
            *CHROMIUM_FLAGS,
            "--remote-debugging-pipe",
            f"--user-data-dir={profile}",
            "--no-first-run",
            "--no-default-browser-check",
            f"--window-size={width},{height}",
            "about:blank",
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        close_fds=False,
        preexec_fn=_fds,
    )
    os.close(to_chrome_r)
    os.close(from_chrome_w)
    pipe = _Pipe(proc, to_chrome_w, from_chrome_r)
    result = PageCheck()
    try:
        target = pipe.call("Target.createTarget", {"url": "about:blank"}, timeout=timeout)
        att = pipe.call("Target.attachToTarget", {"targetId": target["targetId"], "flatten": True})
        sid = att["sessionId"]
        for domain in ("Runtime.enable", "Log.enable", "Page.enable"):
            pipe.call(domain, session=sid)
        pipe.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
            session=sid,
        )
        if media is not None:
            pipe.call("Emulation.setEmulatedMedia", {"media": media}, session=sid)
        pipe.call("Page.navigate", {"url": url}, session=sid, timeout=timeout)
        pipe.wait_event("Page.loadEventFired", timeout)

        def js(expr: str) -> Any:
            r = pipe.call(
                "Runtime.evaluate",
                {"expression": expr, "returnByValue": True, "awaitPromise": True},
                session=sid,
                timeout=timeout,
            )
            if "exceptionDetails" in r:
                raise RuntimeError(f"probe {expr!r} failed: {r['exceptionDetails'].get('text')}")
            return r.get("result", {}).get("value")

        deadline = time.monotonic() + timeout
        while not js("!!window.__reportReady") and time.monotonic() < deadline:
            if _errors_from(pipe.events):
                break  # a script failed: the page will never be ready
            time.sleep(0.05)
        t = js(
            "JSON.stringify({load: performance.timing.loadEventEnd - performance.timing.navigationStart,"
            " ready: window.__reportReadyAt || null})"
        )
        timing = json.loads(t)
        result.load_ms = float(timing["load"]) if timing["load"] is not None else None
        result.ready_ms = float(timing["ready"]) if timing["ready"] is not None else None
        for name, expr in (probes or {}).items():
            result.probes[name] = js(expr)
        if screenshot is not None:
            shot = pipe.call("Page.captureScreenshot", {"format": "png"}, session=sid)
            screenshot.write_bytes(base64.b64decode(shot["data"]))
            result.screenshot = screenshot
        # drain anything logged late
        pipe.call("Runtime.evaluate", {"expression": "1"}, session=sid)
        result.errors = _errors_from(pipe.events)
    finally:
        try:
            pipe.send("Browser.close")
            proc.wait(timeout=10)
        except Exception:  # noqa: BLE001 - closing a browser that already went away
            proc.kill()
            proc.wait()
        os.close(to_chrome_w)
        os.close(from_chrome_r)
        shutil.rmtree(profile, ignore_errors=True)
    return result
