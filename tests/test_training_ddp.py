"""Training under torchrun: two CPU processes (gloo, DistributedDataParallel) take the steps one process takes, with
MixUp and a random crop + flip (each rank augments its share of the global batch as one process would)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn
from torchrun import torchrun

from relu_core import datasets
from relu_core.models import Normalization
from relu_core.training import Objective, loop
from relu_core.training.augment import Augmentation

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
    from relu_core.training.augment import Augmentation

    train = datasets.load_dataset("digits", split="train")
    trained = loop.fit(
        lambda: nn.Sequential(nn.Flatten(), nn.Linear(64, 10)),
        Normalization((0.5,), (0.5,)),
        train.images[:{n}],
        train.labels[:{n}],
        10,
        objective=Objective("mixup"),
        augmentation=Augmentation(1, True),
        **{settings},
    )
    weights = {{name: t.numpy() for name, t in trained.model.state_dict().items()}}
    accuracy = np.array([r.heldout_accuracy for r in trained.history])
    np.savez(sys.argv[1] + f"/rank{{distributed.rank()}}.npz", accuracy=accuracy, **weights)
    """
).format(n=N_IMAGES, settings=SETTINGS)


@pytest.mark.slow
def test_two_gloo_processes_train_as_one(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    result = torchrun(script, str(tmp_path))
    assert result.returncode == 0, result.stderr[-3000:]

    train = datasets.load_dataset("digits", split="train")
    single = loop.fit(
        lambda: nn.Sequential(nn.Flatten(), nn.Linear(64, 10)),
        Normalization((0.5,), (0.5,)),
        train.images[:N_IMAGES],
        train.labels[:N_IMAGES],
        10,
        objective=Objective("mixup"),
        augmentation=Augmentation(1, True),
        **SETTINGS,
    )
    expected = single.model.state_dict()
    ranks = [np.load(tmp_path / f"rank{rank}.npz") for rank in (0, 1)]
    for stored in ranks:  # both ranks end with the single process's weights (float sums in another order)
        for name, tensor in expected.items():
            torch.testing.assert_close(torch.from_numpy(stored[name]), tensor, rtol=1e-4, atol=1e-5)
        assert stored["accuracy"].tolist() == pytest.approx([r.heldout_accuracy for r in single.history])
