"""The model registry: architecture names, their specs (builder, input, normalisation), known weights, and which
models fit which registered data set.

Architectures (``MODELS``):

* ``resnet20 resnet32 resnet44 resnet56 resnet110``: the CIFAR ResNets of He et al. (2016) with the
  parameter-free "option A" shortcut (:mod:`relu_core.models.resnet_cifar`). The shared pretrained CIFAR-10
  weights (akamaster) expect RGB in [0, 1] normalised with the ImageNet statistics (0.485, 0.456, 0.406) /
  (0.229, 0.224, 0.225).
* ``resnet18_cifar resnet34_cifar densenet121_cifar``: the CIFAR variants used by the Rel-U paper
  (:mod:`relu_core.models.paper_cifar`), whose checkpoints the authors publish on the Hugging Face Hub
  (``HUB_MODELS``). Normalisation: the CIFAR-10 statistics the authors trained with, mean (0.4914, 0.4822,
  0.4465) and std (0.2023, 0.1994, 0.2010).
* ``resnet9 resnet9_small``: ResNet-9 (Page 2018; :mod:`relu_core.models.fast_cifar`), the ``fast`` training
  recipe's network, at base width 64 (GPU) and 16 (CPU); trained here on CIFAR-10, normalised with the CIFAR-10
  statistics.
* ``cnn8 cnn28 cnn32``: small BatchNorm CNNs (:mod:`relu_core.models.small_cnn`) trained on CPU by
  :mod:`relu_core.training`. They normalise with mean 0.5 and std 0.5 per channel (maps [0, 1] to [-1, 1];
  BatchNorm makes the exact values matter little).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from torch import nn

from relu_core import paths
from relu_core.errors import InputError
from relu_core.models.fast_cifar import resnet9, resnet9_small
from relu_core.models.normalization import (
    CIFAR10_MEAN,
    CIFAR10_STD,
    CIFAR100_MEAN,
    CIFAR100_STD,
    IMAGENET_MEAN,
    IMAGENET_STD,
    Normalization,
)
from relu_core.models.paper_cifar import (
    densenet121_cifar,
    resnet18_cifar,
    resnet34_cifar,
)
from relu_core.models.resnet_cifar import (
    resnet20,
    resnet32,
    resnet44,
    resnet56,
    resnet110,
)
from relu_core.models.small_cnn import cnn8, cnn28, cnn32

AKAMASTER_DIR = Path("weights") / "cifar10_resnet_akamaster"


@dataclass(frozen=True)
class ModelSpec:
    """One architecture: its builder ``builder(num_classes=..., in_channels=...)`` and expected input."""

    name: str
    builder: Callable[..., nn.Module]
    input_size: int
    in_channels: int
    mean: tuple[float, ...]
    std: tuple[float, ...]
    description: str

    @property
    def normalization(self) -> Normalization:
        """The input normalisation the architecture's weights expect."""
        return Normalization(self.mean, self.std)


_HALF = 0.5


def _cifar_resnet_spec(name: str, builder: Callable[..., nn.Module], depth: int) -> ModelSpec:
    return ModelSpec(
        name,
        builder,
        32,
        3,
        IMAGENET_MEAN,
        IMAGENET_STD,
        f"CIFAR ResNet-{depth} (He et al., option A); pretrained CIFAR-10 weights for depths 20-56 in the shared data",
    )


MODELS: dict[str, ModelSpec] = {
    "resnet20": _cifar_resnet_spec("resnet20", resnet20, 20),
    "resnet32": _cifar_resnet_spec("resnet32", resnet32, 32),
    "resnet44": _cifar_resnet_spec("resnet44", resnet44, 44),
    "resnet56": _cifar_resnet_spec("resnet56", resnet56, 56),
    "resnet110": _cifar_resnet_spec("resnet110", resnet110, 110),
    "resnet18_cifar": ModelSpec(
        "resnet18_cifar",
        resnet18_cifar,
        32,
        3,
        CIFAR10_MEAN,
        CIFAR10_STD,
        "ResNet-18, CIFAR stem (3x3 conv, no max-pool), as in the Rel-U paper",
    ),
    "resnet34_cifar": ModelSpec(
        "resnet34_cifar",
        resnet34_cifar,
        32,
        3,
        CIFAR10_MEAN,
        CIFAR10_STD,
        "ResNet-34, CIFAR stem (3x3 conv, no max-pool), as in the Rel-U paper",
    ),
    "densenet121_cifar": ModelSpec(
        "densenet121_cifar",
        densenet121_cifar,
        32,
        3,
        CIFAR10_MEAN,
        CIFAR10_STD,
        "DenseNet-BC-121 (growth 12), CIFAR stem, as in the Rel-U paper",
    ),
    "resnet9": ModelSpec(
        "resnet9",
        resnet9,
        32,
        3,
        CIFAR10_MEAN,
        CIFAR10_STD,
        "ResNet-9 (Page 2018), width 64: the fast recipe's network on a GPU (trained here)",
    ),
    "resnet9_small": ModelSpec(
        "resnet9_small",
        resnet9_small,
        32,
        3,
        CIFAR10_MEAN,
        CIFAR10_STD,
        "ResNet-9 (Page 2018), width 16: the fast recipe's network on a CPU (trained here)",
    ),
    "cnn8": ModelSpec("cnn8", cnn8, 8, 1, (_HALF,), (_HALF,), "small CNN for 8x8 grey images (digits)"),
    "cnn28": ModelSpec(
        "cnn28", cnn28, 28, 1, (_HALF,), (_HALF,), "small CNN for 28x28 grey images (Fashion-MNIST, MNIST)"
    ),
    "cnn32": ModelSpec("cnn32", cnn32, 32, 3, (_HALF,) * 3, (_HALF,) * 3, "small CNN for 32x32 RGB images"),
}

_AKAMASTER_MODELS = ("resnet20", "resnet32", "resnet44", "resnet56")


@dataclass(frozen=True)
class HubModel:
    """A checkpoint the Rel-U authors publish on the Hugging Face Hub, and how to read it."""

    arch: str
    num_classes: int
    mean: tuple[float, ...]
    std: tuple[float, ...]

    @property
    def normalization(self) -> Normalization:
        """The input normalisation the checkpoint was trained with."""
        return Normalization(self.mean, self.std)


HUB_MODELS: dict[str, HubModel] = {
    "edadaltocg/resnet18_cifar10": HubModel("resnet18_cifar", 10, CIFAR10_MEAN, CIFAR10_STD),
    "edadaltocg/resnet34_cifar10": HubModel("resnet34_cifar", 10, CIFAR10_MEAN, CIFAR10_STD),
    "edadaltocg/densenet121_cifar10": HubModel("densenet121_cifar", 10, CIFAR10_MEAN, CIFAR10_STD),
    "edadaltocg/resnet18_cifar100": HubModel("resnet18_cifar", 100, CIFAR100_MEAN, CIFAR100_STD),
    "edadaltocg/resnet34_cifar100": HubModel("resnet34_cifar", 100, CIFAR100_MEAN, CIFAR100_STD),
    "edadaltocg/densenet121_cifar100": HubModel("densenet121_cifar", 100, CIFAR100_MEAN, CIFAR100_STD),
}


def get_spec(name: str) -> ModelSpec:
    """The ``ModelSpec`` registered as ``name`` (InputError naming the choices otherwise)."""
    try:
        return MODELS[name]
    except KeyError:
        raise InputError(f"unknown model {name!r}; choose one of: {', '.join(MODELS)}") from None


def build_model(name: str, num_classes: int = 10, in_channels: int | None = None) -> nn.Module:
    """A freshly initialised ``name`` with ``num_classes`` outputs (``in_channels`` defaults to the spec's)."""
    spec = get_spec(name)
    if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 1:
        raise InputError(f"num_classes must be a positive integer, got {num_classes!r}")
    channels = spec.in_channels if in_channels is None else in_channels
    if isinstance(channels, bool) or not isinstance(channels, int) or channels < 1:
        raise InputError(f"in_channels must be a positive integer, got {in_channels!r}")
    return spec.builder(num_classes=num_classes, in_channels=channels)


def pretrained_weights(name: str) -> Path | None:
    """The shared pretrained CIFAR-10 checkpoint of ``name`` (akamaster ResNet-20/32/44/56), or None.

    Searches ``weights/cifar10_resnet_akamaster/<name>-<sha256 prefix>.th`` under ``paths.data_dirs()``.
    """
    get_spec(name)
    if name not in _AKAMASTER_MODELS:
        return None
    for root in paths.data_dirs():
        found = sorted((root / AKAMASTER_DIR).glob(f"{name}-*.th"))
        if found:
            return found[0]
    return None


#: Registered data sets -> the models that fit them (input size and channels), best first.
DATASET_MODELS: dict[str, tuple[str, ...]] = {
    "digits": ("cnn8",),
    "mnist": ("cnn28",),
    "fashion-mnist": ("cnn28",),
    "cifar10": ("resnet20", "resnet32", "resnet44", "resnet56", "cnn32"),
    "cifar10-exact": ("resnet20", "resnet32", "resnet44", "resnet56", "cnn32"),
    "cifar100": ("cnn32",),
    "cifar100-exact": ("cnn32",),
    "svhn": ("cnn32",),
    "dead-leaves": (),  # OpenMix's outliers: one class, nothing to classify
}


#: Registered data sets -> the architectures ``train`` and the Training objectives page train on them, the default
#: first on a CPU (a GPU's default: :func:`trainable_models`); any registered model of the data set's input size can
#: be named on the command line.
TRAINABLE_MODELS: dict[str, tuple[str, ...]] = {
    "digits": ("cnn8",),
    "mnist": ("cnn28",),
    "fashion-mnist": ("cnn28",),
    "cifar10": ("resnet9_small", "resnet9", "cnn32", "resnet34_cifar", "densenet121_cifar", "resnet18_cifar"),
    "cifar100": ("resnet9_small", "resnet9", "cnn32", "resnet34_cifar", "densenet121_cifar", "resnet18_cifar"),
    "svhn": ("resnet9_small", "resnet9", "cnn32"),
}
#: What a GPU trains by default where it differs from the CPU's first choice.
GPU_DEFAULT_MODELS = {"cifar10": "resnet9", "cifar100": "resnet9", "svhn": "resnet9"}


def trainable_models(dataset_name: str, gpu: bool = False) -> list[str]:
    """The architectures trained here on ``dataset_name`` (:data:`TRAINABLE_MODELS`), the default first (on a
    ``gpu``: :data:`GPU_DEFAULT_MODELS`)."""
    names = list(TRAINABLE_MODELS.get(dataset_name, ()))
    preferred = GPU_DEFAULT_MODELS.get(dataset_name) if gpu else None
    if preferred in names:
        names.remove(preferred)
        names.insert(0, preferred)
    return names


def fitting_models(dataset_name: str) -> list[str]:
    """Models that can run on ``dataset_name``: pretrained CIFAR ResNets only when their weights are found,
    small CNNs always (trained on demand and cached)."""
    names = []
    for name in DATASET_MODELS.get(dataset_name, ("cnn32",)):
        if name.startswith("cnn") or pretrained_weights(name) is not None:
            names.append(name)
    return names
