"""Training under torchrun: two CPU processes (gloo, DistributedDataParallel) take the steps one process takes."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from relu_core import datasets
from relu_core.models import Normalization
from relu_core.training import Objective, loop

SETTINGS = {"epochs": 2, "seed": 0, "batch_size": 64, "holdout_fraction": 0.125, "patience": None}
N_IMAGES = 512  # 448 training images: seven batches of 64, 32 per rank; 64 held out, sharded for the accuracy

SCRIPT = textwrap.dedent(
    """
    import sys
    import numpy as np
    from torch import nn
    from relu_core import datasets, distributed
    from relu_core.models import Normalization
    from relu_core.training import Objective, loop

    train = datasets.load_dataset("digits", split="train")
    trained = loop.fit(
        lambda: nn.Sequential(nn.Flatten(), nn.Linear(64, 10)),
        Normalization((0.5,), (0.5,)),
        train.images[:{n}],
        train.labels[:{n}],
        10,
        objective=Objective("mixup"),
        **{settings},
    )
    weights = {{name: t.numpy() for name, t in trained.model.state_dict().items()}}
    accuracy = np.array([r.heldout_accuracy for r in trained.history])
    np.savez(sys.argv[1] + f"/rank{{distributed.rank()}}.npz", accuracy=accuracy, **weights)
    """
).format(n=N_IMAGES, settings=SETTINGS)


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.slow
def test_two_gloo_processes_train_as_one(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
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

    train = datasets.load_dataset("digits", split="train")
    single = loop.fit(
        lambda: nn.Sequential(nn.Flatten(), nn.Linear(64, 10)),
        Normalization((0.5,), (0.5,)),
        train.images[:N_IMAGES],
        train.labels[:N_IMAGES],
        10,
        objective=Objective("mixup"),
        **SETTINGS,
    )
    expected = single.model.state_dict()
    ranks = [np.load(tmp_path / f"rank{rank}.npz") for rank in (0, 1)]
    for stored in ranks:  # both ranks end with the single process's weights (float sums in another order)
        for name, tensor in expected.items():
            torch.testing.assert_close(torch.from_numpy(stored[name]), tensor, rtol=1e-4, atol=1e-5)
        assert stored["accuracy"].tolist() == pytest.approx([r.heldout_accuracy for r in single.history])
