"""ONNX classifiers: a model file checked before anything runs, then its logits computed with onnxruntime.

An ONNX file is read from its bytes (an upload or a file alike) and refused in one line (:class:`CheckpointError`)
when it is truncated or not ONNX, larger than :data:`relu_core.limits.MEMORY_BUDGET_BYTES`, declares tensors
(initializers, constants, subgraphs included) whose sizes add up beyond that budget, points at external data
files (never read: they could name any file of the server), uses operators outside the standard domains (custom
ops) or operators the ONNX checker does not know, or does not take one float (N, C, H, W) image batch.

Refused too, before onnxruntime sees the file: more than :data:`relu_core.limits.MAX_ONNX_NODES` operators, an
opset newer than this onnx/onnxruntime runs, a fixed batch larger than
:data:`relu_core.limits.MAX_ONNX_STATIC_BATCH`.

onnxruntime runs the model in a process of its own (:mod:`relu_core.onnx_worker`): its memory capped at
:data:`relu_core.limits.ONNX_MEMORY_BYTES` (plus twice the file's size), loading bounded by
:data:`relu_core.limits.ONNX_LOAD_SECONDS` and each batch by :data:`relu_core.limits.ONNX_BATCH_SECONDS`, killed at
once on cancel; what goes wrong there comes back as one
line (the bytes a failed allocation asked for, the time limit, an output of strings), without onnxruntime's
internals.

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

from relu_core import engine, extras, limits, onnx_worker, threads
from relu_core.errors import LOGGER, InputError, one_line
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
    """A checked ONNX classifier ready to run: the process its onnxruntime session lives in
    (:class:`relu_core.onnx_worker.OnnxProcess`, ended when this object goes), its one input (name, element type,
    the static batch size, channels, height and width, None where the file leaves them free), the normalisation
    its metadata declares (None when it declares none) and the providers it runs on."""

    name: str
    process: onnx_worker.OnnxProcess
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
    _check_size_and_opset(model, name)
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


def _check_size_and_opset(model, name: str) -> None:
    """CheckpointError when the model has more than :data:`relu_core.limits.MAX_ONNX_NODES` operators (its
    subgraphs and functions counted) or names an ONNX opset newer than the onnx package here knows (onnxruntime
    runs the same ones: beyond them it fails with its C++ internals)."""
    import onnx

    nodes = sum(len(graph.node) for graph in _graphs(model.graph))
    nodes += sum(len(graph.node) for function in model.functions for graph in _function_graphs(function))
    if nodes > limits.MAX_ONNX_NODES:
        raise CheckpointError(
            f"{name} has {nodes:,} operators, more than the limit of {limits.MAX_ONNX_NODES:,} "
            "(relu_core.limits.MAX_ONNX_NODES)"
        )
    newest = onnx.defs.onnx_opset_version()
    for opset in model.opset_import:
        if opset.domain in ("", "ai.onnx") and opset.version > newest:
            raise CheckpointError(
                f"{name} uses ONNX opset {opset.version}, newer than the opsets up to {newest} that onnxruntime "
                f"runs here: export it again with opset {newest} or lower (torch.onnx.export(..., opset_version=17))"
            )


def _function_graphs(function) -> Iterator:
    """A model-local function's nodes as a graph, and the subgraphs they hold."""
    from onnx import helper

    yield from _graphs(helper.make_graph(list(function.node), function.name, [], []))


def _normalization(model, name: str) -> Normalization | None:
    """The normalisation in the model's metadata (``mean`` and ``std``), None when it declares none."""
    props = {p.key: p.value for p in model.metadata_props}
    if MEAN_KEY not in props and STD_KEY not in props:
        return None
    try:
        mean, std = (tuple(float(v) for v in props[key].strip("[]() ").split(",")) for key in (MEAN_KEY, STD_KEY))
    except (KeyError, ValueError):
        raise CheckpointError(
            f"{name} carries its own normalisation metadata, which must give both mean and std as comma-separated "
            f"numbers (e.g. 0.5,0.5,0.5), not mean={props.get(MEAN_KEY, '(none)')[:40]!r}, "
            f"std={props.get(STD_KEY, '(none)')[:40]!r}: fix or remove the file's metadata (onnx.helper.set_model_props)"
        ) from None
    if not all(map(math.isfinite, mean + std)) or min(std) <= 0 or len(mean) != len(std):
        raise CheckpointError(
            f"{name} carries its own normalisation metadata, mean {props[MEAN_KEY][:40]!r} and std "
            f"{props[STD_KEY][:40]!r}, which must be finite numbers of equal count with every std positive: fix or "
            "remove the file's metadata (onnx.helper.set_model_props)"
        )
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


def load_onnx(data: bytes, name: str, device: str = "auto", cancel: Cancel | None = None) -> OnnxClassifier:
    """A checked ONNX classifier from a file's bytes (:func:`check_onnx`), its onnxruntime session made in a
    process of its own (:mod:`relu_core.onnx_worker`), bounded in memory and time; ``cancel()`` True stops it
    (``Cancelled``)."""
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
    if dims[0] is not None and not 1 <= dims[0] <= limits.MAX_ONNX_STATIC_BATCH:
        raise CheckpointError(
            f"{name} takes a fixed batch of {dims[0]:,} images, outside 1 to {limits.MAX_ONNX_STATIC_BATCH:,} "
            "(relu_core.limits.MAX_ONNX_STATIC_BATCH): export it with a free batch axis (torch.onnx.export's "
            "dynamic_axes) or a smaller fixed batch"
        )
    normalization = _normalization(model, name)
    chosen = providers(device)
    process = onnx_worker.OnnxProcess(
        data,
        chosen,
        memory_bytes=limits.ONNX_MEMORY_BYTES + 2 * len(data),
        threads=threads.model_threads(),
    )
    try:
        process.start(limits.ONNX_LOAD_SECONDS, cancel)
    except onnx_worker.WorkerFailure as failure:
        raise CheckpointError(_failure_line(failure, process, name, "loading it")) from None
    return OnnxClassifier(
        name, process, inputs[0].name, INPUT_TYPES[tensor_type.elem_type], *dims, normalization, chosen
    )


def _failure_line(failure: onnx_worker.WorkerFailure, process: onnx_worker.OnnxProcess, name: str, doing: str) -> str:
    """One line for what went wrong in the model's process while ``doing`` ("loading it", "running a batch of 256
    8x8 images with 1 channel(s)"), saying what to do."""
    detail = failure.detail
    limit = process.memory_bytes
    if failure.kind == "memory":
        asked = f"asked for {detail['bytes']:,} bytes" if detail.get("bytes") else "ran out of memory"
        return (
            f"the ONNX model {name} {asked} while {doing}, more than its memory limit of {limits.size_in_words(limit)} "
            "(relu_core.limits.ONNX_MEMORY_BYTES plus twice its size): a smaller --batch-size may fit, else the model "
            "cannot run here"
        )
    if failure.kind == "time":
        limit = "ONNX_LOAD_SECONDS" if doing == "loading it" else "ONNX_BATCH_SECONDS"
        return (
            f"the ONNX model {name} took more than {detail['seconds']:g} s {doing} and was stopped "
            f"(relu_core.limits.{limit}): it may never end (a Loop without a bound); use a smaller --batch-size or "
            "another model"
        )
    if failure.kind == "ended":
        LOGGER.warning("the process of ONNX model %s ended: %s", name, process.log_tail())
        return (
            f"the ONNX model {name} ended its process ({onnx_worker.signal_name(detail.get('returncode'))}) while "
            f"{doing}: out of memory on this machine, or onnxruntime crashed on it; try a smaller --batch-size"
        )
    if failure.kind == "not-numbers":
        return (
            f"the ONNX model {name} returns {detail.get('dtype')} values (text, not numbers) as its first output: "
            "it must return the logits, a float (N, classes) tensor"
        )
    if failure.kind == "not-a-tensor":
        return (
            f"the ONNX model {name} returns a {detail.get('type')} (a sequence or map, not a tensor) as its first "
            "output: it must return the logits, a float (N, classes) tensor"
        )
    if failure.kind == "opset":
        return f"onnxruntime here cannot run {name}: it uses an opset newer than it knows; export it with opset 17"
    verb = "cannot load" if doing == "loading it" else "failed"
    message = one_line(detail.get("message", ""), 200)
    return (
        f"onnxruntime {verb} {name}: {message}"
        if verb == "cannot load"
        else f"the ONNX model {name} failed while {doing}: {message}"
    )


def check_images(model: OnnxClassifier, images: np.ndarray, normalization: Normalization) -> None:
    """InputError unless ``images`` (uint8 NHWC) have the channels and size the model's input declares (the
    engine's checks of dtype, rank, mean and std first)."""
    try:
        engine.check_images(nn.Identity(), images, normalization.mean, normalization.std, None)
    except InputError as error:
        if normalization != model.normalization or "must have 1 or" not in str(error):
            raise
        raise InputError(
            f"{model.name} carries its own normalisation metadata (mean {normalization.mean}, std "
            f"{normalization.std}), which does not fit these images ({error}): fix or remove the file's metadata"
        ) from None
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
            out = model.process.run(model.input_name, x, limits.ONNX_BATCH_SECONDS, cancel, limits.ONNX_LOAD_SECONDS)
        except onnx_worker.WorkerFailure as failure:
            _, height, width, channels = batch.shape
            doing = f"running a batch of {x.shape[0]:,} {height}x{width} images with {channels} channel(s)"
            raise InputError(_failure_line(failure, model.process, model.name, doing)) from None
        out = torch.from_numpy(np.array(out))  # writable, the process's answer copied once
        if isinstance(out, torch.Tensor) and model.batch is not None and out.ndim >= 1:
            out = out[:rows]
        return engine.check_outputs(out, rows)

    return engine.batched_outputs(
        step, images_uint8_nhwc, device=cpu, batch_size=batch_size, task="logits", progress=progress, cancel=cancel
    )
