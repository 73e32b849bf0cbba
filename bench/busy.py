"""A bounded background load for the benchmarks: one process spinning on one core.

``with one_core_busy(): ...`` starts it, waits until it runs, and kills it on exit; it also stops by
itself after ``limit_s`` seconds, so a benchmark killed midway leaves nothing behind for long.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

_SPIN = "import time\nend = time.monotonic() + {limit}\nwhile time.monotonic() < end:\n    pass\n"


@contextmanager
def one_core_busy(limit_s: float = 900.0) -> Iterator[None]:
    """Saturate one core with a spinning child process for the duration of the block (at most ``limit_s``)."""
    spinner = subprocess.Popen([sys.executable, "-c", _SPIN.format(limit=float(limit_s))])
    time.sleep(0.5)  # let it get going before anything is timed
    try:
        yield
    finally:
        spinner.kill()
        spinner.wait()
