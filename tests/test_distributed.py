"""Sharded logits under torchrun (2 CPU processes, gloo) equal the single-process logits."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
from torchrun import torchrun

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
    result = torchrun(script, str(tmp_path))
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
