"""Model zoo: one builder per architecture (torchvision style), weights loaded separately and safely.

Architectures (``MODELS``):

* ``resnet20 resnet32 resnet44 resnet56 resnet110``: the CIFAR ResNets of He et al. (2016) with the
  parameter-free "option A" shortcut. Module names follow the widely used akamaster implementation, so its
  pretrained CIFAR-10 state dicts (``module.`` prefix stripped) load with ``strict=True``. Those weights
  expect RGB in [0, 1] normalised with the ImageNet statistics (0.485, 0.456, 0.406) / (0.229, 0.224, 0.225).
* ``resnet18_cifar resnet34_cifar densenet121_cifar``: the CIFAR variants used by the Rel-U paper
  (Dadalto et al., ICLR 2024), whose checkpoints the authors publish on the Hugging Face Hub (``HUB_MODELS``).
  They are torchvision's ResNet / DenseNet with the authors' stem: ResNet gets a 3x3 stride-1 ``conv1`` and
  no max-pool; DenseNet-121 is the DenseNet-BC layout (growth rate 12, 24-channel 3x3 stem without
  stem BatchNorm, ReLU or pool), which is the model behind ``edadaltocg/densenet121_cifar10``. Key names
  equal timm's, so those checkpoints load strictly. Normalisation: the CIFAR-10 statistics the authors
  trained with, mean (0.4914, 0.4822, 0.4465) and std (0.2023, 0.1994, 0.2010).
* ``cnn8 cnn28 cnn32``: small BatchNorm CNNs for 8x8 grey (scikit-learn digits), 28x28 grey
  (MNIST / Fashion-MNIST) and 32x32 RGB inputs, trained on CPU by :mod:`relu_core.training`. They normalise
  with mean 0.5 and std 0.5 per channel (maps [0, 1] to [-1, 1]; BatchNorm makes the exact values matter little).

Checkpoints are read with ``torch.load(..., weights_only=True)`` or safetensors only, never full unpickling.
"""

from __future__ import annotations

import hashlib
import io
import re
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from torchvision.models.densenet import DenseNet
from torchvision.models.resnet import BasicBlock, ResNet

from relu_core import paths
from relu_core.errors import InputError, one_line

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
CIFAR10_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR10_STD = (0.2023, 0.1994, 0.2010)
CIFAR100_MEAN = (0.5071, 0.4867, 0.4408)
CIFAR100_STD = (0.2675, 0.2565, 0.2761)

CHECKPOINT_SUFFIXES = (".pt", ".pth", ".th", ".safetensors")
AKAMASTER_DIR = Path("weights") / "cifar10_resnet_akamaster"


class CheckpointError(InputError):
    """A weights file that cannot be read, or that does not fit the chosen architecture."""


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


# --------------------------------------------------------------------------------------------------------------
# CIFAR ResNets, option A (He et al. 2016, section 4.2)


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


# --------------------------------------------------------------------------------------------------------------
# The paper's CIFAR variants of torchvision's ResNet-18/34 and DenseNet-121


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


# --------------------------------------------------------------------------------------------------------------
# Small CNNs trained on CPU by relu_core.training


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


_HALF = 0.5


def _cifar_resnet_spec(name: str, builder: Callable[..., nn.Module], depth: int) -> ModelSpec:
    return ModelSpec(
        name, builder, 32, 3, IMAGENET_MEAN, IMAGENET_STD,
        f"CIFAR ResNet-{depth} (He et al., option A); pretrained CIFAR-10 weights for depths 20-56 in the shared data",
    )


MODELS: dict[str, ModelSpec] = {
    "resnet20": _cifar_resnet_spec("resnet20", resnet20, 20),
    "resnet32": _cifar_resnet_spec("resnet32", resnet32, 32),
    "resnet44": _cifar_resnet_spec("resnet44", resnet44, 44),
    "resnet56": _cifar_resnet_spec("resnet56", resnet56, 56),
    "resnet110": _cifar_resnet_spec("resnet110", resnet110, 110),
    "resnet18_cifar": ModelSpec(
        "resnet18_cifar", resnet18_cifar, 32, 3, CIFAR10_MEAN, CIFAR10_STD,
        "ResNet-18, CIFAR stem (3x3 conv, no max-pool), as in the Rel-U paper",
    ),
    "resnet34_cifar": ModelSpec(
        "resnet34_cifar", resnet34_cifar, 32, 3, CIFAR10_MEAN, CIFAR10_STD,
        "ResNet-34, CIFAR stem (3x3 conv, no max-pool), as in the Rel-U paper",
    ),
    "densenet121_cifar": ModelSpec(
        "densenet121_cifar", densenet121_cifar, 32, 3, CIFAR10_MEAN, CIFAR10_STD,
        "DenseNet-BC-121 (growth 12), CIFAR stem, as in the Rel-U paper",
    ),
    "cnn8": ModelSpec("cnn8", cnn8, 8, 1, (_HALF,), (_HALF,), "small CNN for 8x8 grey images (digits)"),
    "cnn28": ModelSpec("cnn28", cnn28, 28, 1, (_HALF,), (_HALF,), "small CNN for 28x28 grey images (Fashion-MNIST, MNIST)"),
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


# --------------------------------------------------------------------------------------------------------------
# Checkpoints


def _torch_load_reason(exc: BaseException) -> str:
    """The specific part of a ``torch.load`` error (its boilerplate suggests ``weights_only=False``: never do that)."""
    boilerplate = ("Weights only load failed", "Check the documentation", "Please file an issue")
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", str(exc)) if p.strip()]
    details = [p for p in paragraphs if not p.startswith(boilerplate)]
    return one_line(details[0]) if details else one_line(exc)


def _preview(keys: list[str], shown: int = 5) -> str:
    head = ", ".join(keys[:shown])
    return f"{head}, ... ({len(keys)} in all)" if len(keys) > shown else head


def _unwrap(obj: object) -> object:
    """Peel ``{"state_dict": ...}`` / ``{"model": ...}`` training-checkpoint wrappers, however nested."""
    while isinstance(obj, Mapping):
        inner = next((obj[k] for k in ("state_dict", "model") if isinstance(obj.get(k), Mapping)), None)
        if inner is None:
            return obj
        obj = inner
    return obj


def _read_state_dict(path: str | Path) -> dict[str, torch.Tensor]:
    """The tensors of a state-dict file, on CPU, wrappers and ``module.`` prefixes removed."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in CHECKPOINT_SUFFIXES:
        raise CheckpointError(
            f"{path.name}: unsupported checkpoint type {suffix or '(no extension)'!r}; "
            f"use one of {', '.join(CHECKPOINT_SUFFIXES)}"
        )
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path} does not exist")
    if suffix == ".safetensors":
        from safetensors.torch import load_file

        try:
            obj: object = load_file(str(path), device="cpu")
        except Exception as exc:  # safetensors raises its own error types for every malformed header
            raise CheckpointError(f"{path.name} is not a valid safetensors checkpoint: {one_line(exc)}") from None
    elif _is_torchscript(path):
        raise CheckpointError(
            f"{path.name} is not a valid state-dict checkpoint: it is a TorchScript model (load it without an architecture)"
        )
    else:
        try:
            obj = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as exc:  # a non-pickle, a truncated zip, or a pickle with globals weights_only refuses
            raise CheckpointError(f"{path.name} is not a valid PyTorch checkpoint: {_torch_load_reason(exc)}") from None
    obj = _unwrap(obj)
    if not isinstance(obj, Mapping) or not obj:
        raise CheckpointError(
            f"{path.name} is not a valid state-dict checkpoint: expected a mapping of names to tensors, "
            f"found {type(obj).__name__}{' (empty)' if isinstance(obj, Mapping) else ''}"
        )
    not_tensors = [str(k) for k, v in obj.items() if not isinstance(k, str) or not isinstance(v, torch.Tensor)]
    if not_tensors:
        raise CheckpointError(
            f"{path.name} is not a valid state-dict checkpoint: entries that are not named tensors: "
            f"{_preview(not_tensors)}"
        )
    return {k.removeprefix("module."): v for k, v in obj.items()}


def _apply_state_dict(model: nn.Module, state: Mapping[str, torch.Tensor], source: str) -> nn.Module:
    """Strictly load ``state``; every mismatch is reported in one line before anything is copied.

    BatchNorm's ``num_batches_tracked`` counters may be absent (checkpoints from PyTorch < 0.4.1, such as
    the akamaster ResNets): they are not weights, and PyTorch itself fills them in for such files.
    """
    expected = model.state_dict()
    missing = [k for k in expected if k not in state and not k.endswith("num_batches_tracked")]
    unexpected = [k for k in state if k not in expected]
    mismatched = [
        f"{k} {tuple(state[k].shape)} in file vs {tuple(expected[k].shape)} in model"
        for k in expected
        if k in state and state[k].shape != expected[k].shape
    ]
    problems = [
        f"{label} ({len(keys)}): {_preview(keys)}"
        for label, keys in (("missing keys", missing), ("unexpected keys", unexpected), ("shape mismatches", mismatched))
        if keys
    ]
    if problems:
        raise CheckpointError(f"{source} does not fit {type(model).__name__}: " + "; ".join(problems))
    check_finite(state.items(), source)
    try:
        model.load_state_dict(dict(state), strict=True)
    except RuntimeError as exc:
        raise CheckpointError(f"{source} does not fit {type(model).__name__}: {one_line(exc)}") from None
    return model


def check_finite(named_tensors, source: str) -> None:
    """CheckpointError naming the tensors that hold NaN or infinite values (a model that cannot predict)."""
    bad = [name for name, tensor in named_tensors
           if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all())]
    if bad:
        raise CheckpointError(f"{source} holds NaN or infinite weights in {_preview(bad)}")


def load_state_dict_file(model: nn.Module, path: str | Path) -> nn.Module:
    """Load the state dict in ``path`` (``.pt .pth .th .safetensors``) into ``model`` strictly, and return it.

    ``.pt/.pth/.th`` are read with ``torch.load(path, map_location="cpu", weights_only=True)`` only (a pickle
    that would run code is refused). ``{"state_dict": ...}`` / ``{"model": ...}`` wrappers and the
    ``module.`` prefix of ``DataParallel`` are removed. Raises ``CheckpointError`` naming the missing and
    unexpected keys and the shape mismatches, or saying the file is not a checkpoint at all.
    """
    path = Path(path)
    return _apply_state_dict(model, _read_state_dict(path), path.name)


def _is_torchscript(path: Path) -> bool:
    """TorchScript archives are zips holding ``code/`` and ``constants.pkl``; ``torch.save`` zips hold neither."""
    if not zipfile.is_zipfile(path):
        return False
    with zipfile.ZipFile(path) as archive:
        return any(n.endswith("/constants.pkl") or "/code/" in n for n in archive.namelist())


def _final_layer_key(spec: ModelSpec) -> str:
    """Name of the weight of the architecture's last linear layer (found on a meta-device copy, no memory)."""
    with torch.device("meta"):
        probe = spec.builder(num_classes=2, in_channels=spec.in_channels)
    head = [name for name, module in probe.named_modules() if isinstance(module, nn.Linear)][-1]
    return f"{head}.weight"


def load_model_file(path: str | Path, arch: str | None = None, num_classes: int | None = None) -> nn.Module:
    """A model in eval mode from a TorchScript file, or from a state dict for architecture ``arch``.

    For a state dict, ``num_classes`` defaults to the output size of the checkpoint's final layer.
    """
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path} does not exist")
    if _is_torchscript(path):
        try:
            scripted = torch.jit.load(str(path), map_location="cpu").eval()
        except Exception as exc:  # a damaged archive surfaces as several error types
            raise CheckpointError(f"{path.name} is not a valid TorchScript model: {one_line(exc)}") from None
        check_finite([*scripted.named_parameters(), *scripted.named_buffers()], path.name)
        return scripted
    if arch is None:
        raise CheckpointError(
            f"{path.name} holds a state dict, not a TorchScript model: choose its architecture ({', '.join(MODELS)})"
        )
    spec = get_spec(arch)
    state = _read_state_dict(path)
    if num_classes is None:
        key = _final_layer_key(spec)
        if key not in state or state[key].ndim != 2:
            raise CheckpointError(f"{path.name} does not fit {arch}: no final layer weight {key!r} in the file")
        num_classes = int(state[key].shape[0])
    model = build_model(arch, num_classes)
    return _apply_state_dict(model, state, path.name).eval()


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


def load_hub_model(repo_id: str) -> nn.Module:
    """A pretrained model from the Hugging Face Hub, in eval mode (needs the internet on first use).

    The authors' checkpoints (``HUB_MODELS``) are built here with the matching architecture and their
    ``pytorch_model.bin`` is downloaded once into ``cache_dir("hub")`` and loaded with ``weights_only=True``:
    timm cannot build them from the Hub alone, since their CIFAR stem is set in the authors' code. Any other
    repository goes through ``timm.create_model("hf_hub:" + repo_id, pretrained=True)`` (timm is optional).
    Raises InputError when offline, when timm is missing, or when the repository is not a model.
    """
    entry = HUB_MODELS.get(repo_id)
    if entry is not None:
        target = paths.cache_dir("hub") / f"{repo_id.replace('/', '--')}.pth"
        if not target.is_file():
            url = f"https://huggingface.co/{repo_id}/resolve/main/pytorch_model.bin"
            try:
                torch.hub.download_url_to_file(url, str(target), progress=False)
            except Exception as exc:  # URLError, HTTPError, socket and SSL errors all mean "could not fetch"
                raise InputError(
                    f"could not download {repo_id} from the Hugging Face Hub (connect to the internet): {one_line(exc)}"
                ) from None
        return load_state_dict_file(build_model(entry.arch, entry.num_classes), target).eval()
    try:
        import timm
    except ImportError:
        raise InputError(
            f"{repo_id} is not one of the authors' models ({', '.join(HUB_MODELS)}); "
            "for other Hub models install timm (pip install timm) and connect to the internet"
        ) from None
    try:
        model = timm.create_model("hf_hub:" + repo_id, pretrained=True)
    except Exception as exc:  # timm and huggingface_hub raise many types for offline / unknown repositories
        raise InputError(f"could not load {repo_id} through timm (offline, or not a timm model?): {one_line(exc)}") from None
    return model.eval()


def weights_hash(model: nn.Module) -> str:
    """SHA-256 (hex) of the state dict: every entry's name, dtype, shape and raw bytes, in name order.

    A TorchScript model is hashed as its serialised archive instead: its code and constants define what it
    computes as much as its tensors (deterministic for one file; re-scripting may rename types).
    """
    digest = hashlib.sha256()
    if isinstance(model, torch.jit.ScriptModule):
        archive = io.BytesIO()
        torch.jit.save(model, archive)
        digest.update(archive.getvalue())
        return digest.hexdigest()
    for name, tensor in sorted(model.state_dict().items()):
        data = tensor.detach().to("cpu").contiguous()
        digest.update(f"{name}|{data.dtype}|{tuple(data.shape)}\n".encode())
        digest.update(data.reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()
