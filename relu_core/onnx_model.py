"""ONNX classifiers: a model file checked before anything runs, then its logits computed with onnxruntime.

An ONNX file is read from its bytes (an upload or a file alike) and refused in one line (:class:`CheckpointError`)
when it is truncated or not ONNX, larger than :data:`relu_core.limits.MEMORY_BUDGET_BYTES`, declares tensors
(initializers, constants, subgraphs included) whose sizes add up beyond that budget, points at external data
files (never read: they could name any file of the server), uses operators outside the standard domains (custom
ops) or operators the ONNX checker does not know, or does not take one float (N, C, H, W) image batch.

The logits go through the engine's one batched loop (:func:`relu_core.engine.batched_outputs`: cancel, progress,
the finiteness check) and its output check (:func:`relu_core.engine.check_outputs`: 2-D, one row per image,
floating point), with the images normalised by :class:`~relu_core.models.Normalization` as for any model.
onnxruntime runs on the CPU, or on CUDA where its CUDA provider is installed. An ONNX model has no gradients
here, so input pre-processing (ε) is not available for it.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from relu_core import engine, extras, limits
from relu_core.errors import InputError, one_line
from relu_core.models.checkpoints import CheckpointError
from relu_core.models.normalization import Normalization
from relu_core.progress import Cancel, Progress

ONNX_SUFFIX = ".onnx"
#: What needs the [onnx] extra here, in the line that names it when it is missing (``extras.require``).
ONNX_PURPOSE = "running an ONNX model"
#: Operator domains onnxruntime implements itself (the ONNX standard and its ML operators); any other is custom.
STANDARD_DOMAINS = ("", "ai.onnx", "ai.onnx.ml")
#: Metadata keys an ONNX file may carry with its input normalisation (comma-separated numbers on the 0..1 scale).
MEAN_KEY, STD_KEY = "mean", "std"
#: The input element types read here, with the numpy type the images are handed over in.
INPUT_TYPES = {1: np.float32, 10: np.float16, 11: np.float64}
#: Why ε is refused for an ONNX model, in the words of the CLI and the app.
NO_EPS = "ε (input pre-processing) is not available for ONNX models: it needs the model's gradients"


def is_onnx(name: str) -> bool:
    """Whether a checkpoint's file name is an ONNX model (by its suffix)."""
    return str(name).lower().endswith(ONNX_SUFFIX)


@dataclass(frozen=True)
class OnnxClassifier:
    """A checked ONNX classifier ready to run: its onnxruntime session, its one input (name, element type, the
    static batch size, channels, height and width, None where the file leaves them free), the normalisation its
    metadata declares (None when it declares none) and the providers it runs on."""

    name: str
    session: object
    input_name: str
    input_type: type
    batch: int | None
    channels: int | None
    height: int | None
    width: int | None
    normalization: Normalization | None
    providers: tuple[str, ...]


def _graphs(graph) -> Iterator:
    """``graph`` and every subgraph held in its nodes' attributes (If / Loop / Scan bodies), depth first."""
    yield graph
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.HasField("g"):
                yield from _graphs(attribute.g)
            for sub in attribute.graphs:
                yield from _graphs(sub)


def _declared_tensors(graph) -> Iterator:
    """Every tensor a graph declares: initializers, sparse initializers and constant attributes."""
    yield from graph.initializer
    for sparse in graph.sparse_initializer:
        yield sparse.values
        yield sparse.indices
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.HasField("t"):
                yield attribute.t
            yield from attribute.tensors


def _declared_bytes(tensor, name: str) -> int:
    """The bytes ``tensor`` declares by its dims and element type (CheckpointError for a negative dim)."""
    helper = extras.require("onnx.helper", ONNX_PURPOSE)

    if any(d < 0 for d in tensor.dims):
        raise CheckpointError(f"{name} declares tensor {tensor.name!r} with a negative dimension {list(tensor.dims)}")
    try:
        itemsize = np.dtype(helper.tensor_dtype_to_np_dtype(tensor.data_type)).itemsize
    except (KeyError, TypeError, ValueError):
        itemsize = 1  # strings and unknown types: at least a byte each
    return math.prod(int(d) for d in tensor.dims) * itemsize


def check_onnx(data: bytes, name: str):
    """The parsed ``onnx.ModelProto`` of ``data``, once every check of the module docstring passes."""
    onnx = extras.require("onnx", ONNX_PURPOSE)
    DecodeError = extras.require("google.protobuf.message", ONNX_PURPOSE).DecodeError  # noqa: N806 - a class

    if not data:
        raise CheckpointError(f"{name} is empty")
    if len(data) > limits.MEMORY_BUDGET_BYTES:
        raise CheckpointError(
            f"{name} holds {len(data):,} bytes, more than the limit of "
            f"{limits.size_in_words(limits.MEMORY_BUDGET_BYTES)} (relu_core.limits.MEMORY_BUDGET_BYTES)"
        )
    try:
        model = onnx.load_model_from_string(data)
    except (DecodeError, ValueError, RuntimeError) as exc:
        raise CheckpointError(f"{name} is not a valid ONNX model (truncated or not ONNX): {one_line(exc)}") from None
    if not model.graph.node:
        raise CheckpointError(f"{name} is not a valid ONNX model: its graph has no operators")
    declared = 0
    local_domains = {function.domain for function in model.functions}
    for graph in _graphs(model.graph):
        for tensor in _declared_tensors(graph):
            if tensor.data_location == onnx.TensorProto.EXTERNAL:
                raise CheckpointError(
                    f"{name} keeps tensor {tensor.name!r} in an external data file, which is never read here: "
                    "save the model as one file (onnx.save(model, path, save_as_external_data=False))"
                )
            declared += _declared_bytes(tensor, name)
        custom = sorted(
            {f"{n.op_type} ({n.domain})" for n in graph.node if n.domain not in STANDARD_DOMAINS + tuple(local_domains)}
        )
        if custom:
            raise CheckpointError(f"{name} uses custom operators that onnxruntime here cannot run: {', '.join(custom)}")
    if declared > limits.MEMORY_BUDGET_BYTES:
        raise CheckpointError(
            f"{name} declares tensors of {declared:,} bytes in all, more than the limit of "
            f"{limits.size_in_words(limits.MEMORY_BUDGET_BYTES)} (relu_core.limits.MEMORY_BUDGET_BYTES)"
        )
    try:
        onnx.checker.check_model(model)
    except (onnx.checker.ValidationError, ValueError, RuntimeError) as exc:
        raise CheckpointError(f"{name} is not a valid ONNX model: {one_line(exc, 200)}") from None
    return model


def _normalization(model, name: str) -> Normalization | None:
    """The normalisation in the model's metadata (``mean`` and ``std``), None when it declares none."""
    props = {p.key: p.value for p in model.metadata_props}
    if MEAN_KEY not in props and STD_KEY not in props:
        return None
    try:
        mean, std = (tuple(float(v) for v in props[key].strip("[]() ").split(",")) for key in (MEAN_KEY, STD_KEY))
    except (KeyError, ValueError):
        raise CheckpointError(
            f"{name}: the metadata's mean and std must both be comma-separated numbers, e.g. 0.5,0.5,0.5"
        ) from None
    if not all(map(math.isfinite, mean + std)) or min(std) <= 0:
        raise CheckpointError(f"{name}: the metadata's mean and std must be finite, std positive")
    return Normalization(mean, std)


def providers(device: str = "auto") -> tuple[str, ...]:
    """onnxruntime's providers for ``device``: "auto" takes CUDA when its provider is installed, else the CPU."""
    onnxruntime = extras.require("onnxruntime", ONNX_PURPOSE)

    available = onnxruntime.get_available_providers()
    kind = str(device).split(":")[0].lower()
    if kind not in ("auto", "cpu", "cuda"):
        raise InputError(f"ONNX models run on the CPU or on CUDA, not on {device!r}: use --device auto, cpu or cuda")
    if kind == "cuda" and "CUDAExecutionProvider" not in available:
        raise InputError("CUDA was requested but onnxruntime has no CUDA provider here (use --device cpu or auto)")
    if kind != "cpu" and "CUDAExecutionProvider" in available:
        return ("CUDAExecutionProvider", "CPUExecutionProvider")
    return ("CPUExecutionProvider",)


def load_onnx(data: bytes, name: str, device: str = "auto") -> OnnxClassifier:
    """A checked ONNX classifier from a file's bytes (:func:`check_onnx`), its onnxruntime session made."""
    onnxruntime = extras.require("onnxruntime", ONNX_PURPOSE)

    model = check_onnx(data, name)
    initializers = {tensor.name for tensor in model.graph.initializer}
    inputs = [value for value in model.graph.input if value.name not in initializers]
    if len(inputs) != 1:
        raise CheckpointError(f"{name} must take one input (an image batch), it takes {len(inputs)}")
    tensor_type = inputs[0].type.tensor_type
    if not inputs[0].type.HasField("tensor_type") or tensor_type.elem_type not in INPUT_TYPES:
        raise CheckpointError(f"{name} must take a float tensor of images (N, C, H, W)")
    dims = [d.dim_value if d.HasField("dim_value") else None for d in tensor_type.shape.dim]
    if not tensor_type.HasField("shape") or len(dims) != 4:
        raise CheckpointError(
            f"{name} must take images of rank 4 (N, C, H, W), its input {inputs[0].name!r} has rank "
            f"{len(dims) if tensor_type.HasField('shape') else 'unknown'}"
        )
    if dims[1] not in (None, 1, 3):
        raise CheckpointError(f"{name} takes {dims[1]} channels: images have 1 (grey) or 3 (RGB)")
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3  # errors only: they become our one line
    chosen = providers(device)
    try:
        session = onnxruntime.InferenceSession(data, sess_options=options, providers=list(chosen))
    except Exception as exc:  # onnxruntime raises its own Fail / InvalidGraph / NotImplemented types
        raise CheckpointError(f"onnxruntime cannot load {name}: {one_line(exc, 200)}") from None
    return OnnxClassifier(
        name,
        session,
        inputs[0].name,
        INPUT_TYPES[tensor_type.elem_type],
        *dims,
        _normalization(model, name),
        chosen,
    )


def check_images(model: OnnxClassifier, images: np.ndarray, normalization: Normalization) -> None:
    """InputError unless ``images`` (uint8 NHWC) have the channels and size the model's input declares (the
    engine's checks of dtype, rank, mean and std first)."""
    engine.check_images(nn.Identity(), images, normalization.mean, normalization.std, None)
    _, height, width, channels = images.shape
    if model.channels is not None and model.channels != channels:
        raise InputError(
            f"the ONNX model reads images with {model.channels} channel(s) but the data set's have {channels}"
        )
    size = (model.height or height, model.width or width)
    if size != (height, width):
        raise InputError(f"the ONNX model expects {size[0]}x{size[1]} images but the data set has {height}x{width}")


def compute_logits(
    model: OnnxClassifier,
    images_uint8_nhwc: np.ndarray,
    normalization: Normalization,
    *,
    batch_size: int | None = None,
    progress: Progress | None = None,
    cancel: Cancel | None = None,
) -> np.ndarray:
    """Float32 logits (N, C) of the ONNX ``model`` on uint8 NHWC images normalised by ``normalization``, in
    batches of ``batch_size`` (the model's static batch size when it has one, else the engine's CPU default)."""
    check_images(model, images_uint8_nhwc, normalization)
    if model.batch is not None:
        batch_size = model.batch
    batch_size = engine.CPU_BATCH_SIZE if batch_size is None else int(batch_size)
    cpu = torch.device("cpu")
    normalise = normalization.on(cpu)

    def step(batch: torch.Tensor) -> torch.Tensor:
        rows = batch.shape[0]
        x = np.ascontiguousarray(normalise(batch).numpy(), dtype=model.input_type)
        if model.batch is not None and rows < model.batch:  # the last batch, padded to the fixed size
            x = np.concatenate([x, np.zeros((model.batch - rows, *x.shape[1:]), dtype=x.dtype)])
        try:
            out = model.session.run(None, {model.input_name: x})[0]
        except Exception as exc:  # onnxruntime's Fail / InvalidArgument / RuntimeException
            _, height, width, channels = batch.shape
            raise InputError(
                f"the ONNX model cannot read {height}x{width} images with {channels} channel(s): {one_line(exc, 160)}"
            ) from None
        out = torch.from_numpy(np.asarray(out)) if isinstance(out, np.ndarray) else out
        if isinstance(out, torch.Tensor) and model.batch is not None and out.ndim >= 1:
            out = out[:rows]
        return engine.check_outputs(out, rows)

    return engine.batched_outputs(
        step, images_uint8_nhwc, device=cpu, batch_size=batch_size, task="logits", progress=progress, cancel=cancel
    )
