"""The app served headless and Debian's Chromium to drive it: one recipe for the browser tests and
``bench/bench_browser.py``.

Chromium is Debian's ``/usr/bin/chromium`` (apt), never a browser downloaded by ``playwright install``.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import IO

REPO = Path(__file__).resolve().parent.parent
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def serve(env: Mapping[str, str], log: IO | int = subprocess.DEVNULL, timeout: float = 60.0, checkout: Path = REPO):
    """``streamlit run app.py`` of ``checkout`` (this one by default; ``Start.py`` in a checkout from before
    app.py, for ``bench_browser.py --against``) headless on 127.0.0.1 (a free port) with ``env``; returns
    ``(process, url)`` once ``/_stcore/health`` answers ``ok``. Raises RuntimeError (after stopping it) when the
    server exits or is not up within ``timeout`` seconds; its output goes to ``log``."""
    port = free_port()
    entry = "app.py" if (Path(checkout) / "app.py").exists() else "Start.py"
    server = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", entry, "--server.headless", "true"]
        + ["--server.address", "127.0.0.1", "--server.port", str(port), "--browser.gatherUsageStats", "false"],
        cwd=checkout,
        env=dict(env),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout
    while server.poll() is None and time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                if response.read().strip() == b"ok":
                    return server, url
        except OSError:
            time.sleep(0.3)
    stop(server)
    raise RuntimeError("streamlit did not start")


def stop(server: subprocess.Popen) -> None:
    """Terminate the server, killing it if it has not exited after 10 s."""
    server.terminate()
    try:
        server.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.kill()
