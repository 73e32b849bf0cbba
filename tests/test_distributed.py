"""Sharded logits under torchrun (2 CPU processes, gloo) equal the single-process logits."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from relu_core import distributed, engine, models

N_IMAGES = 37  # odd: the two shards differ in length, so padding and trimming are exercised

SCRIPT = textwrap.dedent(
    """
    import sys
    import numpy as np
    import torch
    from relu_core import distributed, engine, models

    torch.manual_seed(0)
    model = models.build_model("cnn8").eval()
    images = np.random.default_rng(0).integers(0, 256, ({n}, 8, 8, 1), dtype=np.uint8)
    logits = engine.compute_logits(model, images, mean=(0.5,), std=(0.5,), device="cpu", batch_size=5)
    np.save(sys.argv[1] + f"/rank{{distributed.rank()}}.npy", logits)
    """
).format(n=N_IMAGES)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_shard_bounds_cover_in_order():
    for n, size in ((37, 2), (10, 3), (5, 5), (100, 7)):
        bounds = [distributed.shard_bounds(n, size, r) for r in range(size)]
        assert bounds[0][0] == 0 and bounds[-1][1] == n
        assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:]))
        lengths = [hi - lo for lo, hi in bounds]
        assert max(lengths) - min(lengths) <= 1 and lengths[0] == max(lengths)


@pytest.mark.slow
def test_torchrun_two_processes_gather_single_process_logits(tmp_path: Path):
    script = tmp_path / "shard.py"
    script.write_text(SCRIPT)
    repo = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": str(repo), "OMP_NUM_THREADS": "1"}
    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(name, None)
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc-per-node",
        "2",
        "--master-addr",
        "127.0.0.1",
        "--master-port",
        str(_free_port()),
        str(script),
        str(tmp_path),
    ]
    result = subprocess.run(command, env=env, cwd=repo, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]

    torch.manual_seed(0)
    model = models.build_model("cnn8").eval()
    images = np.random.default_rng(0).integers(0, 256, (N_IMAGES, 8, 8, 1), dtype=np.uint8)
    single = engine.compute_logits(model, images, mean=(0.5,), std=(0.5,), device="cpu", batch_size=5)
    for rank in (0, 1):
        gathered = np.load(tmp_path / f"rank{rank}.npy")
        assert gathered.shape == single.shape
        # Shards batch other images together: equal to float32 rounding, not bit for bit.
        np.testing.assert_allclose(gathered, single, rtol=1e-5, atol=1e-5 * np.abs(single).max())
