"""The CIFAR variants of torchvision's ResNet-18/34 and DenseNet-121 used by the Rel-U paper (Dadalto et al.,
ICLR 2024), whose checkpoints the authors publish on the Hugging Face Hub.

ResNet gets a 3x3 stride-1 ``conv1`` and no max-pool; DenseNet-121 is the DenseNet-BC layout (growth rate 12,
24-channel 3x3 stem without stem BatchNorm, ReLU or pool), the model behind ``edadaltocg/densenet121_cifar10``.
Key names equal timm's, so those checkpoints load strictly.
"""

from __future__ import annotations

from torch import nn
from torchvision.models.densenet import DenseNet
from torchvision.models.resnet import BasicBlock, ResNet


def _cifar_stem_resnet(layers: list[int], num_classes: int, in_channels: int) -> ResNet:
    model = ResNet(BasicBlock, layers, num_classes=num_classes)
    model.conv1 = nn.Conv2d(in_channels, 64, kernel_size=3, stride=1, padding=1, bias=False)
    nn.init.kaiming_normal_(model.conv1.weight, mode="fan_out", nonlinearity="relu")
    model.maxpool = nn.Identity()
    return model


def resnet18_cifar(num_classes: int = 10, in_channels: int = 3) -> ResNet:
    """torchvision ResNet-18 with a 3x3 stride-1 stem and no max-pool (11.2 M parameters)."""
    return _cifar_stem_resnet([2, 2, 2, 2], num_classes, in_channels)


def resnet34_cifar(num_classes: int = 10, in_channels: int = 3) -> ResNet:
    """torchvision ResNet-34 with a 3x3 stride-1 stem and no max-pool (21.3 M parameters)."""
    return _cifar_stem_resnet([3, 4, 6, 3], num_classes, in_channels)


def densenet121_cifar(num_classes: int = 10, in_channels: int = 3) -> DenseNet:
    """DenseNet-BC-121 for 32x32 inputs (growth 12, 24-channel 3x3 stem, no stem norm/pool; 1.0 M parameters)."""
    model = DenseNet(growth_rate=12, block_config=(6, 12, 24, 16), num_init_features=24, num_classes=num_classes)
    model.features.conv0 = nn.Conv2d(in_channels, 24, kernel_size=3, stride=1, padding=1, bias=False)
    nn.init.kaiming_normal_(model.features.conv0.weight)
    # The authors' stem is the bare convolution: the first dense layer normalises and activates it.
    model.features.norm0 = nn.Identity()
    model.features.relu0 = nn.Identity()
    model.features.pool0 = nn.Identity()
    return model
