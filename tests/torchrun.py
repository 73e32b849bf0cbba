"""Two (or more) processes under ``torch.distributed.run`` on the CPU (gloo) for the distributed tests: a script
run with the repository importable, one thread per process, and a free port on 127.0.0.1."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from studio.headless import free_port

REPO = Path(__file__).resolve().parent.parent


def torchrun(script: Path, *args: str, processes: int = 2, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run ``script`` with ``args`` in ``processes`` processes; the caller checks ``returncode``/``stderr``."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(name, None)
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(processes)]
    command += ["--master-addr", "127.0.0.1", "--master-port", str(free_port()), str(script), *args]
    return subprocess.run(command, env=env, cwd=REPO, capture_output=True, text=True, timeout=timeout)
