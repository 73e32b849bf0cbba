"""The CIFAR ResNets of He et al. (2016), section 4.2: ResNet-(6n+2) with the parameter-free "option A" shortcut.

Module names follow the widely used akamaster implementation, so its pretrained CIFAR-10 state dicts
(``module.`` prefix stripped) load with ``strict=True``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from relu_core.errors import InputError


class _PadShortcut(nn.Module):
    """Option-A shortcut: subsample by 2 and zero-pad the channels equally on both sides (no parameters)."""

    def __init__(self, pad_channels: int) -> None:
        super().__init__()
        self.pad_channels = pad_channels

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.pad(x[:, :, ::2, ::2], (0, 0, 0, 0, self.pad_channels, self.pad_channels))


class _CifarBasicBlock(nn.Module):
    def __init__(self, in_planes: int, planes: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        changes_shape = stride != 1 or in_planes != planes
        self.shortcut = _PadShortcut(planes // 4) if changes_shape else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class CifarResNet(nn.Module):
    """ResNet-(6n+2) for 32x32 inputs: 16/32/64 channels, option-A shortcuts, global pooling, ``linear``."""

    def __init__(self, depth: int, num_classes: int = 10, in_channels: int = 3) -> None:
        super().__init__()
        if (depth - 2) % 6 != 0:
            raise InputError(f"CIFAR ResNet depth must be 6n+2, got {depth}")
        blocks = (depth - 2) // 6
        self.conv1 = nn.Conv2d(in_channels, 16, 3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.layer1 = self._stage(16, 16, blocks, stride=1)
        self.layer2 = self._stage(16, 32, blocks, stride=2)
        self.layer3 = self._stage(32, 64, blocks, stride=2)
        self.linear = nn.Linear(64, num_classes)
        for module in self.modules():
            if isinstance(module, (nn.Conv2d, nn.Linear)):
                nn.init.kaiming_normal_(module.weight)

    @staticmethod
    def _stage(in_planes: int, planes: int, blocks: int, stride: int) -> nn.Sequential:
        layers = [_CifarBasicBlock(in_planes, planes, stride)]
        layers += [_CifarBasicBlock(planes, planes, 1) for _ in range(blocks - 1)]
        return nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.layer3(self.layer2(self.layer1(out)))
        return self.linear(torch.flatten(F.adaptive_avg_pool2d(out, 1), 1))


def resnet20(num_classes: int = 10, in_channels: int = 3) -> CifarResNet:
    """CIFAR ResNet-20 (0.27 M parameters)."""
    return CifarResNet(20, num_classes, in_channels)


def resnet32(num_classes: int = 10, in_channels: int = 3) -> CifarResNet:
    """CIFAR ResNet-32 (0.46 M parameters)."""
    return CifarResNet(32, num_classes, in_channels)


def resnet44(num_classes: int = 10, in_channels: int = 3) -> CifarResNet:
    """CIFAR ResNet-44 (0.66 M parameters)."""
    return CifarResNet(44, num_classes, in_channels)


def resnet56(num_classes: int = 10, in_channels: int = 3) -> CifarResNet:
    """CIFAR ResNet-56 (0.85 M parameters)."""
    return CifarResNet(56, num_classes, in_channels)


def resnet110(num_classes: int = 10, in_channels: int = 3) -> CifarResNet:
    """CIFAR ResNet-110 (1.7 M parameters)."""
    return CifarResNet(110, num_classes, in_channels)
