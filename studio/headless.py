"""The app served headless and Debian's Chromium to drive it: one recipe for the browser tests and
``bench/bench_browser.py``.

Chromium is Debian's ``/usr/bin/chromium`` (apt), never a browser downloaded by ``playwright install``.

**Waits on a busy machine**: a test waits for a condition, never for a fixed time, and its limit is a ceiling
for a quiet machine scaled by :func:`slowdown` (:func:`wait_ms`, :func:`wait_s`): a fresh clone's suite at a load
of 5-12 on 2 cores timed out after 150 s waiting for Explore's figures, which took 11-15 s by hand.
"""

from __future__ import annotations

import os
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


#: The most :func:`slowdown` scales a limit by (a ceiling still: a wait that never ends is a failure to see).
MAX_SLOWDOWN = 8.0
#: How long :func:`slowdown` spins to see what share of a core this process gets, and how long a reading lasts.
SPIN_S = 0.2
READING_S = 30.0
_reading: tuple[float, float] | None = None  # (when, slowdown)


def slowdown(now: float | None = None) -> float:
    """How many times slower than on a quiet machine work runs here now, at least 1 and at most
    :data:`MAX_SLOWDOWN`: the larger of (a) the wall time over the CPU time of :data:`SPIN_S` of pure-Python
    spinning (a thread that gets a third of a core reads 3) and (b) the 1-minute load average per CPU (the
    server, the browser and the test share them). Read again after :data:`READING_S` seconds."""
    global _reading
    now = time.monotonic() if now is None else now
    if _reading is not None and now - _reading[0] < READING_S:
        return _reading[1]
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    try:
        load = os.getloadavg()[0] / cpus
    except OSError:
        load = 0.0
    factor = min(MAX_SLOWDOWN, max(1.0, _spin_ratio(SPIN_S), load))
    _reading = (now, factor)
    return factor


def _spin_ratio(spin_s: float) -> float:
    """Wall time over this thread's CPU time while it spins for ``spin_s`` seconds."""
    wall0, cpu0 = time.perf_counter(), time.thread_time()
    while time.perf_counter() - wall0 < spin_s:
        pass
    return (time.perf_counter() - wall0) / max(time.thread_time() - cpu0, 1e-3)


def wait_ms(quiet_ms: float) -> float:
    """A wait's limit in milliseconds (Playwright's ``timeout=``): ``quiet_ms``, enough on a quiet machine, times
    :func:`slowdown`."""
    return quiet_ms * slowdown()


def wait_s(quiet_s: float) -> float:
    """:func:`wait_ms` in seconds (AppTest's ``default_timeout``, a deadline of a polling loop)."""
    return quiet_s * slowdown()
