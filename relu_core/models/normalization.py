"""The input normalisation that travels with a model's weights (as torchvision's weights carry their transforms)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
CIFAR10_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR10_STD = (0.2023, 0.1994, 0.2010)
CIFAR100_MEAN = (0.5071, 0.4867, 0.4408)
CIFAR100_STD = (0.2675, 0.2565, 0.2761)


@dataclass(frozen=True)
class Normalization:
    """Per-channel ``mean`` and ``std`` on the 0..1 scale: a pixel ``x`` (uint8) enters the model as
    ``(x / 255 - mean) / std``, the arithmetic of torchvision's ``ToTensor`` + ``Normalize``.

    The one implementation used by the engine (logits, perturbed inputs, features) and by training.
    """

    mean: tuple[float, ...]
    std: tuple[float, ...]

    def on(self, device: torch.device) -> Callable[[torch.Tensor], torch.Tensor]:
        """uint8 NHWC batch on ``device`` -> float32 NCHW (channels-last memory: the permuted view, no copy)."""
        mean = torch.tensor(self.mean, dtype=torch.float32, device=device).view(1, -1, 1, 1)
        std = torch.tensor(self.std, dtype=torch.float32, device=device).view(1, -1, 1, 1)

        def normalise(batch_uint8: torch.Tensor) -> torch.Tensor:
            return batch_uint8.permute(0, 3, 1, 2).float().div_(255.0).sub_(mean).div_(std)

        return normalise
