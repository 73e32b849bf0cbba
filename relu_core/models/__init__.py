"""Model zoo: one builder per architecture (torchvision style), a registry of names, specs and known weights,
and checkpoints loaded separately and safely.

- :mod:`~relu_core.models.resnet_cifar`, :mod:`~relu_core.models.paper_cifar`, :mod:`~relu_core.models.small_cnn`:
  the architectures;
- :mod:`~relu_core.models.normalization`: the input normalisation that travels with the weights;
- :mod:`~relu_core.models.registry`: ``MODELS`` (name -> :class:`ModelSpec`), ``HUB_MODELS``, pretrained weights on
  this machine, and which models fit which registered data set;
- :mod:`~relu_core.models.checkpoints`: state dicts (``torch.load(..., weights_only=True)`` or safetensors only),
  TorchScript, from a file or from bytes (an upload), the Hub, and :func:`weights_hash`.
"""

from __future__ import annotations

from relu_core.models.checkpoints import (
    CHECKPOINT_SUFFIXES,
    CheckpointError,
    architectures_for,
    check_weights,
    load_hub_model,
    load_model_bytes,
    load_model_file,
    load_state_dict_file,
    weights_hash,
)
from relu_core.models.normalization import Normalization
from relu_core.models.paper_cifar import (
    densenet121_cifar,
    resnet18_cifar,
    resnet34_cifar,
)
from relu_core.models.registry import (
    DATASET_MODELS,
    HUB_MODELS,
    MODELS,
    TRAINABLE_MODELS,
    HubModel,
    ModelSpec,
    build_model,
    fitting_models,
    get_spec,
    pretrained_weights,
    trainable_models,
)
from relu_core.models.resnet_cifar import (
    CifarResNet,
    resnet20,
    resnet32,
    resnet44,
    resnet56,
    resnet110,
)
from relu_core.models.small_cnn import SmallCNN, cnn8, cnn28, cnn32

__all__ = [
    "architectures_for",
    "CHECKPOINT_SUFFIXES",
    "DATASET_MODELS",
    "HUB_MODELS",
    "MODELS",
    "CheckpointError",
    "CifarResNet",
    "HubModel",
    "ModelSpec",
    "Normalization",
    "SmallCNN",
    "TRAINABLE_MODELS",
    "build_model",
    "check_weights",
    "cnn8",
    "cnn28",
    "cnn32",
    "densenet121_cifar",
    "fitting_models",
    "get_spec",
    "load_hub_model",
    "load_model_bytes",
    "load_model_file",
    "load_state_dict_file",
    "pretrained_weights",
    "resnet18_cifar",
    "resnet20",
    "resnet32",
    "resnet34_cifar",
    "resnet44",
    "resnet56",
    "resnet110",
    "trainable_models",
    "weights_hash",
]
