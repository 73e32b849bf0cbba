"""Small BatchNorm CNNs for 8x8 grey (scikit-learn digits), 28x28 grey (MNIST / Fashion-MNIST) and 32x32 RGB
inputs, trained on CPU by :mod:`relu_core.training`."""

from __future__ import annotations

import torch
from torch import nn


def _conv_bn_relu(in_channels: int, out_channels: int) -> list[nn.Module]:
    return [
        nn.Conv2d(in_channels, out_channels, 3, padding=1, bias=False),
        nn.BatchNorm2d(out_channels),
        nn.ReLU(inplace=True),
    ]


class SmallCNN(nn.Module):
    """Stages of (3x3 conv, BatchNorm, ReLU) x ``convs`` followed by 2x2 max-pooling, then a linear head.

    ``stages`` lists ``(width, convs)``; the head reads the flattened ``final_size`` x ``final_size`` map.
    """

    def __init__(
        self,
        stages: tuple[tuple[int, int], ...],
        input_size: int,
        num_classes: int,
        in_channels: int,
        dropout: float,
    ) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        channels, size = in_channels, input_size
        for width, convs in stages:
            for _ in range(convs):
                layers += _conv_bn_relu(channels, width)
                channels = width
            layers.append(nn.MaxPool2d(2))
            size //= 2
        self.features = nn.Sequential(*layers)
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(channels * size * size, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.dropout(torch.flatten(self.features(x), 1)))


def cnn8(num_classes: int = 10, in_channels: int = 1) -> SmallCNN:
    """CNN for 8x8 images (scikit-learn digits): 32-64 channels, 1x1 map into the head (0.06 M parameters)."""
    return SmallCNN(((32, 1), (64, 1), (64, 1)), 8, num_classes, in_channels, dropout=0.2)


def cnn28(num_classes: int = 10, in_channels: int = 1) -> SmallCNN:
    """CNN for 28x28 images (MNIST, Fashion-MNIST): 32-64-128 channels, 3x3 map into the head (0.1 M parameters)."""
    return SmallCNN(((32, 1), (64, 1), (128, 1)), 28, num_classes, in_channels, dropout=0.25)


def cnn32(num_classes: int = 10, in_channels: int = 3) -> SmallCNN:
    """CNN for 32x32 RGB images: two convolutions per stage, 32-64-128 channels (0.15 M parameters)."""
    return SmallCNN(((32, 2), (64, 2), (128, 1)), 32, num_classes, in_channels, dropout=0.25)
