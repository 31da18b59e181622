"""A minimal Chrome DevTools Protocol client for the browser test: start headless Chromium, open a page, collect
its console errors, exceptions and network requests, evaluate JavaScript, take screenshots.

Standard library only: a WebSocket client (RFC 6455, text frames, client-side masking, ping/pong, fragmentation)
over a plain socket, so the test needs no browser-automation package. Not part of the package: test tooling.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

CHROMIUM_NAMES = ("chromium", "chromium-browser", "chromium-headless-shell", "google-chrome", "chrome")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--no-first-run", "--no-default-browser-check", "--disable-extensions",
         "--disable-dev-shm-usage", "--hide-scrollbars", "--mute-audio")


def find_chromium() -> str | None:
    """The Chromium executable: `$CONCEPTLAB_CHROMIUM`, else the first of `CHROMIUM_NAMES` on PATH."""
    named = os.environ.get("CONCEPTLAB_CHROMIUM")
    if named:
        return named if Path(named).is_file() else shutil.which(named)
    return next((found for name in CHROMIUM_NAMES if (found := shutil.which(name))), None)


class WebSocket:
    """A blocking WebSocket client connection (text messages)."""

    def __init__(self, url: str, timeout: float = 30.0):
        parsed = urlparse(url)
        self.sock = socket.create_connection((parsed.hostname, parsed.port or 80), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        request = (f"GET {parsed.path or '/'} HTTP/1.1\r\nHost: {parsed.hostname}:{parsed.port}\r\n"
                   f"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                   "Sec-WebSocket-Version: 13\r\n\r\n")
        self.sock.sendall(request.encode())
        response = b""
        while b"\r\n\r\n" not in response:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ConnectionError("the DevTools endpoint closed the connection during the handshake")
            response += chunk
        head, self._buffer = response.split(b"\r\n\r\n", 1)
        if b" 101 " not in head.split(b"\r\n", 1)[0]:
            raise ConnectionError(f"WebSocket handshake refused: {head.decode(errors='replace')[:200]}")

    def _read(self, n: int) -> bytes:
        while len(self._buffer) < n:
            chunk = self.sock.recv(max(65536, n - len(self._buffer)))
            if not chunk:
                raise ConnectionError("the DevTools connection closed")
            self._buffer += chunk
        out, self._buffer = self._buffer[:n], self._buffer[n:]
        return out

    def send(self, text: str, opcode: int = 0x1) -> None:
        payload = text.encode() if isinstance(text, str) else text
        header = bytes([0x80 | opcode])
        n = len(payload)
        if n < 126:
            header += bytes([0x80 | n])
        elif n < 1 << 16:
            header += bytes([0x80 | 126]) + struct.pack("!H", n)
        else:
            header += bytes([0x80 | 127]) + struct.pack("!Q", n)
        mask = os.urandom(4)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(header + mask + masked)

    def recv(self) -> str:
        """The next text message (continuation frames joined; pings answered)."""
        parts: list[bytes] = []
        while True:
            b0, b1 = self._read(2)
            opcode, n = b0 & 0x0F, b1 & 0x7F
            if n == 126:
                n = struct.unpack("!H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack("!Q", self._read(8))[0]
            mask = self._read(4) if b1 & 0x80 else None
            payload = self._read(n)
            if mask:
                payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
            if opcode == 0x9:  # ping
                self.send(payload, opcode=0xA)
                continue
            if opcode == 0x8:
                raise ConnectionError("the DevTools connection was closed by the browser")
            if opcode in (0x0, 0x1, 0x2):
                parts.append(payload)
                if b0 & 0x80:
                    return b"".join(parts).decode()

    def close(self) -> None:
        try:
            self.send(b"", opcode=0x8)
        except OSError:
            pass
        self.sock.close()


class Browser:
    """Headless Chromium with one page, driven over the DevTools protocol; a context manager."""

    def __init__(self, executable: str, profile: Path, width: int = 1200, height: int = 900):
        self.profile = Path(profile)
        self.profile.mkdir(parents=True, exist_ok=True)
        port_file = self.profile / "DevToolsActivePort"
        port_file.unlink(missing_ok=True)
        self.process = subprocess.Popen(
            [executable, *FLAGS, f"--user-data-dir={self.profile}", "--remote-debugging-port=0",
             f"--window-size={width},{height}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
        deadline = time.time() + 60
        while not (port_file.is_file() and port_file.read_text().strip()):
            if self.process.poll() is not None:
                raise RuntimeError(f"Chromium exited ({self.process.returncode}): "
                                   f"{self.process.stderr.read().decode(errors='replace')[-500:]}")
            if time.time() > deadline:
                self.close()
                raise RuntimeError("Chromium did not open its DevTools port within 60 s")
            time.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        targets = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10).read())
        page = next(t for t in targets if t.get("type") == "page")
        self.ws = WebSocket(page["webSocketDebuggerUrl"])
        self._next = 0
        self.events: list[dict[str, Any]] = []
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable")

    def __enter__(self) -> "Browser":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def call(self, method: str, timeout: float = 60.0, **params) -> dict[str, Any]:
        """Send one command and wait for its result (events arriving meanwhile are kept in `events`)."""
        self._next += 1
        ident = self._next
        self.ws.send(json.dumps({"id": ident, "method": method, "params": params}))
        deadline = time.time() + timeout
        while time.time() < deadline:
            message = json.loads(self.ws.recv())
            if message.get("id") == ident:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            if "method" in message:
                self.events.append(message)
        raise TimeoutError(f"{method}: no answer within {timeout} s")

    def wait_for(self, event: str, timeout: float = 60.0) -> dict[str, Any]:
        deadline = time.time() + timeout
        for seen in self.events:
            if seen["method"] == event:
                return seen
        while time.time() < deadline:
            message = json.loads(self.ws.recv())
            if "method" in message:
                self.events.append(message)
                if message["method"] == event:
                    return message
        raise TimeoutError(f"no {event} within {timeout} s")

    def open(self, url: str) -> None:
        """Navigate to `url` and wait for its load event (events of earlier pages are dropped)."""
        self.events.clear()
        self.call("Page.navigate", url=url)
        self.wait_for("Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"JavaScript error: {result['exceptionDetails']}")
        return result["result"].get("value")

    def errors(self) -> list[str]:
        """Console errors, uncaught exceptions and error log entries of the current page, as lines."""
        out = []
        for e in self.events:
            p = e.get("params", {})
            if e["method"] == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append("console: " + " ".join(str(a.get("value", a.get("description", ""))) for a in p["args"]))
            elif e["method"] == "Runtime.exceptionThrown":
                out.append("exception: " + json.dumps(p.get("exceptionDetails", {}))[:300])
            elif e["method"] == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                out.append(f"log: {p['entry'].get('text')} {p['entry'].get('url', '')}")
        return out

    def requests(self) -> list[str]:
        """URLs the current page requested (the page itself included)."""
        return [e["params"]["request"]["url"] for e in self.events if e["method"] == "Network.requestWillBeSent"]

    def screenshot(self, path: Path) -> Path:
        """The whole page (not only the viewport) as a PNG."""
        size = self.call("Page.getLayoutMetrics")["cssContentSize"]
        clip = {"x": 0, "y": 0, "width": size["width"], "height": min(size["height"], 16000), "scale": 1}
        data = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True, clip=clip)["data"]
        Path(path).write_bytes(base64.b64decode(data))
        return Path(path)

    def close(self) -> None:
        if getattr(self, "ws", None) is not None:
            self.ws.close()
            self.ws = None
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)  # the browser's own process group (start_new_session)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(10)
        if self.process.stderr:
            self.process.stderr.close()
