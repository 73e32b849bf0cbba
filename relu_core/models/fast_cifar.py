"""ResNet-9 (Page, "How to train your ResNet", myrtle.ai 2018; the network airbench descends from, without its
whitening layer): a small residual network that reaches about 94 % on CIFAR-10 in 24 epochs, the ``fast`` training
recipe's network (:mod:`relu_core.training.recipes`).

Layers, for a base width ``w`` (64 in ``resnet9``, 16 in ``resnet9_small``, its CPU-sized sibling): conv-BN-ReLU
to w; conv-BN-ReLU to 2w, 2x2 max-pool, a residual block (two conv-BN-ReLU); conv-BN-ReLU to 4w, max-pool;
conv-BN-ReLU to 8w, max-pool, a residual block; global max-pool; a linear head without bias whose output is
multiplied by 0.125 (the logits' scale Page trains with).
"""

from __future__ import annotations

import torch
from torch import nn

#: The head's output scale (Page's ``Mul(0.125)``).
LOGIT_SCALE = 0.125


def _conv_bn(in_channels: int, out_channels: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(in_channels, out_channels, 3, padding=1, bias=False),
        nn.BatchNorm2d(out_channels),
        nn.ReLU(inplace=True),
    )


class Residual(nn.Module):
    """``x + conv_bn(conv_bn(x))`` at a constant width."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.body = nn.Sequential(_conv_bn(channels, channels), _conv_bn(channels, channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.body(x)


class ResNet9(nn.Module):
    """ResNet-9 of base width ``width`` for 32x32 images."""

    def __init__(self, num_classes: int = 10, in_channels: int = 3, width: int = 64) -> None:
        super().__init__()
        w = width
        self.features = nn.Sequential(
            _conv_bn(in_channels, w),
            _conv_bn(w, 2 * w),
            nn.MaxPool2d(2),
            Residual(2 * w),
            _conv_bn(2 * w, 4 * w),
            nn.MaxPool2d(2),
            _conv_bn(4 * w, 8 * w),
            nn.MaxPool2d(2),
            Residual(8 * w),
            nn.AdaptiveMaxPool2d(1),
            nn.Flatten(),
        )
        self.classifier = nn.Linear(8 * w, num_classes, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x)) * LOGIT_SCALE


def resnet9(num_classes: int = 10, in_channels: int = 3) -> ResNet9:
    """ResNet-9, base width 64 (6.6 M parameters): the ``fast`` recipe's network on a GPU."""
    return ResNet9(num_classes, in_channels, 64)


def resnet9_small(num_classes: int = 10, in_channels: int = 3) -> ResNet9:
    """ResNet-9, base width 16 (0.41 M parameters, a sixteenth of the multiply-adds): the ``fast`` recipe on a CPU."""
    return ResNet9(num_classes, in_channels, 16)
