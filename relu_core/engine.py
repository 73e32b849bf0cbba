"""The logits engine: uint8 images in, float32 logits out, fast on CPU and GPU.

The engine knows models and images only: assembling a run (choosing weights, training a small CNN, loading a
data set, caching its logits by content) is :mod:`relu_core.runs`, which imports this module, never the reverse
(``tests/test_layering.py``).

Design (measured on the 2-core AVX-512 CPU of the development machine with the CIFAR ResNet-56;
see ``bench/bench_engine.py``):

- Images travel as uint8 (4x less memory traffic than float) and are converted and normalised on the
  device by the weights' :class:`~relu_core.models.Normalization`: ``(x / 255 - mean) / std``, the same
  arithmetic as torchvision's ``ToTensor`` + ``Normalize``.
- NHWC uint8 permuted to NCHW *is* the channels-last layout, so the batch goes into a channels-last model
  without a copy; channels-last roughly doubles CPU throughput of small 3x3 convolutions (oneDNN).
- Batch normalisation is folded into the preceding convolution for inference (``torch.fx``; a model that
  cannot be traced runs unchanged). The logits change only at the float32 rounding level (~1e-7).
- Default batch size: 256 on CPU, 512 on GPUs. On an idle CPU 32-128 is up to ~1.5x faster for a CIFAR
  ResNet (activations stay in the L2 cache), but each batch pays a fixed per-layer thread-synchronisation
  cost that explodes when the cores are shared (measured: 13 images/s at 32 vs 87 at 256 under load 7 on
  2 cores), so 256 is the robust default; pass ``batch_size`` to tune.
- CUDA: pinned host memory filled by a background thread one batch ahead, non-blocking copies, bf16
  autocast (fp16 where bf16 is unsupported) with the classifier layer, so the logits, in float32, outputs
  gathered on the device and copied back once. CPU default is exact float32; ``precision="bf16"`` is an
  opt-in (about 2x faster on AVX-512-BF16 CPUs, logits differ by ~1e-2).
- ``torch.compile`` is not used: compiling a ResNet takes longer on 2 cores than the inference it speeds up.
- Under ``torchrun`` (``WORLD_SIZE`` > 1) ``compute_logits`` shards the images by rank and every rank returns
  the full, re-assembled logits (see ``relu_core.distributed``).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import copy
import os
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from relu_core import distributed, threads
from relu_core.errors import Cancelled, InputError
from relu_core.models.normalization import Normalization
from relu_core.progress import Cancel, Progress

DEVICES = ("auto", "cpu", "cuda", "mps")
PRECISIONS = ("auto", "fp32", "bf16", "fp16")
CPU_BATCH_SIZE = 256
GPU_BATCH_SIZE = 512


# --------------------------------------------------------------------------- devices and precision


def select_device(preference: str | torch.device = "auto") -> torch.device:
    """The torch device for ``preference``: "auto" picks CUDA, then Apple MPS, then the CPU.

    Under ``torchrun`` a CUDA device is the rank's own GPU (``LOCAL_RANK``). Asking for a device that is
    not available raises InputError.
    """
    kind = str(preference).split(":")[0].lower()
    if kind not in DEVICES:
        raise InputError(f"unknown device {preference!r}; choose one of: {', '.join(DEVICES)}")
    mps_ok = torch.backends.mps.is_available()
    if kind == "auto":
        kind = "cuda" if torch.cuda.is_available() else "mps" if mps_ok else "cpu"
    if kind == "cuda":
        if not torch.cuda.is_available():
            raise InputError("CUDA was requested but no CUDA GPU is available (use --device cpu or auto)")
        if ":" in str(preference):
            return torch.device(str(preference))
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
    if kind == "mps" and not mps_ok:
        raise InputError("Apple MPS was requested but is not available (use --device cpu or auto)")
    return torch.device(kind)


def resolve_precision(precision: str, device: torch.device) -> str:
    """The precision actually used: "auto" is bf16 (fp16 without bf16 support) on CUDA, fp32 elsewhere."""
    if precision not in PRECISIONS:
        raise InputError(f"unknown precision {precision!r}; choose one of: {', '.join(PRECISIONS)}")
    if precision != "auto":
        return precision
    if device.type == "cuda":
        return "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    return "fp32"


def autocast(device: torch.device, precision: str) -> contextlib.AbstractContextManager:
    """Mixed precision for the forward pass; fp32 is full float32, on CUDA too (:func:`full_float32`)."""
    if precision == "fp32":
        return full_float32(device, precision)
    dtype = torch.bfloat16 if precision == "bf16" else torch.float16
    return torch.autocast(device_type=device.type, dtype=dtype)


def full_float32(device: torch.device, precision: str) -> contextlib.AbstractContextManager:
    """For fp32 work on CUDA (a forward pass, or the backward of the ε pass's gradient step): TF32 off while it
    runs (:func:`_no_tf32`); nothing otherwise."""
    return _no_tf32() if precision == "fp32" and device.type == "cuda" else contextlib.nullcontext()


_TF32_LOCK = threading.Lock()
_tf32_holders = 0
_tf32_saved: tuple[str, tuple] = ("", ())


def _tf32_switches() -> tuple[str, tuple]:
    """CUDA's TF32 switches for cuDNN's convolutions and for matrix products, through the API the process uses:
    ("legacy", the ``allow_tf32`` flags), or ("precision", the ``fp32_precision`` settings) once something set
    those (PyTorch then refuses to read the legacy flags)."""
    cudnn, matmul = torch.backends.cudnn, torch.backends.cuda.matmul
    try:
        return "legacy", (cudnn.allow_tf32, matmul.allow_tf32)
    except RuntimeError:
        return "precision", (cudnn.conv.fp32_precision, matmul.fp32_precision)


def _set_tf32_switches(api: str, values: tuple) -> None:
    cudnn, matmul = torch.backends.cudnn, torch.backends.cuda.matmul
    if api == "legacy":
        cudnn.allow_tf32, matmul.allow_tf32 = values
    else:
        cudnn.conv.fp32_precision, matmul.fp32_precision = values


@contextlib.contextmanager
def _no_tf32() -> Iterator[None]:
    """CUDA's TF32 off (convolutions and matrix products) while any fp32 work runs: PyTorch leaves it on for
    cuDNN's convolutions, whose ~1e-3 relative error moved a pretrained ResNet-20's logits by up to 0.048 on an
    H100 against the CPU's (1.9e-5 with it off; docs/results/speed.md). The switches are process-wide: the first to
    enter saves them, the last to leave restores them, so overlapping work in other threads never turns TF32 back
    on under one another; CUDA work of other threads meanwhile (a training) runs without TF32 too, slower but not
    less exact."""
    global _tf32_holders, _tf32_saved
    with _TF32_LOCK:
        if _tf32_holders == 0:
            _tf32_saved = _tf32_switches()
            api = _tf32_saved[0]
            _set_tf32_switches(api, (False, False) if api == "legacy" else ("ieee", "ieee"))
        _tf32_holders += 1
    try:
        yield
    finally:
        with _TF32_LOCK:
            _tf32_holders -= 1
            if _tf32_holders == 0:
                _set_tf32_switches(*_tf32_saved)


def default_batch_size(device: torch.device) -> int:
    """Batch size used when none is given (see the module docstring for the CPU measurements)."""
    return CPU_BATCH_SIZE if device.type == "cpu" else GPU_BATCH_SIZE


# --------------------------------------------------------------------------- model and input preparation


def model_in_channels(model: nn.Module) -> int | None:
    """Input channels of the model's first convolution (None when it has none, e.g. TorchScript)."""
    first = next((m for m in model.modules() if isinstance(m, nn.Conv2d)), None)
    return None if first is None else int(first.in_channels)


class _Float32Head(nn.Module):
    """The classifier layer run outside autocast, so mixed precision still computes the logits in float32
    (bf16 has 8 significant bits: its logits would tie and move every score by ~1e-2)."""

    def __init__(self, layer: nn.Linear) -> None:
        super().__init__()
        self.layer = layer

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.autocast(device_type=x.device.type, enabled=False):
            return self.layer(x.float())


class _ThisThreadTracer(torch.fx.Tracer):
    """``torch.fx``'s tracer, for the thread that traces only. While it traces, fx patches ``nn.Module.__call__``
    and ``__getattr__`` for the whole process; a model running in another thread meanwhile (a job beside this
    one) reached this tracer and failed ("module is not installed as a submodule"). Other threads' calls now go
    through as if nothing were patched (fx's other patches already pass through calls without proxies)."""

    def __init__(self) -> None:
        super().__init__()
        self._thread = threading.get_ident()

    def call_module(self, m, forward, args, kwargs):
        if threading.get_ident() != self._thread:
            return forward(*args, **kwargs)
        return super().call_module(m, forward, args, kwargs)

    def getattr(self, attr, attr_val, parameter_proxy_cache):
        if threading.get_ident() != self._thread:
            return attr_val
        return super().getattr(attr, attr_val, parameter_proxy_cache)


#: One trace at a time: each patches, then restores, the same process-wide methods.
_TRACING = threading.Lock()


def _fold_batchnorm(model: nn.Module) -> nn.Module:
    """``model`` (an eval-mode copy, changed in place) with BatchNorm folded into the preceding convolutions,
    traced with :class:`_ThisThreadTracer`; raises when fx cannot trace it."""
    from torch.fx.experimental.optimization import fuse

    with _TRACING:
        graph = _ThisThreadTracer().trace(model)
    return fuse(torch.fx.GraphModule(model, graph, type(model).__name__), inplace=True, no_trace=True)


def inference_model(model: nn.Module, device: torch.device, precision: str = "fp32") -> nn.Module:
    """An eval-mode copy of ``model`` on ``device``: BatchNorm folded into convolutions, channels-last.

    With a mixed ``precision`` the last ``nn.Linear`` (the classifier of every model in the zoo) runs in
    float32. The caller's model is left untouched. Models ``torch.fx`` cannot trace keep their BatchNorm
    layers; TorchScript models run as they are.
    """
    with torch.no_grad():  # a TorchScript copy made with autograd on has non-leaf parameters
        prepared = copy.deepcopy(model).eval()
    if not isinstance(prepared, torch.jit.ScriptModule):
        try:
            prepared = _fold_batchnorm(prepared)
        except Exception:  # tracing fails on data-dependent control flow: run the model as it is
            pass
        heads = [name for name, module in prepared.named_modules() if isinstance(module, nn.Linear)]
        if precision != "fp32" and heads:
            parent, _, attribute = heads[-1].rpartition(".")
            owner = prepared.get_submodule(parent)
            setattr(owner, attribute, _Float32Head(getattr(owner, attribute)))
    for parameter in prepared.parameters():
        parameter.requires_grad_(False)
    return prepared.to(device=device, memory_format=torch.channels_last)


def check_images(
    model: nn.Module, images: np.ndarray, mean: Sequence[float], std: Sequence[float], input_size: int | None
) -> None:
    """InputError unless ``images`` is uint8 (N, H, W, C) matching the model's channels and input size."""
    if not isinstance(images, np.ndarray) or images.dtype != np.uint8 or images.ndim != 4:
        shape = getattr(images, "shape", "?")
        raise InputError(f"images must be a uint8 array (N, H, W, C), got {getattr(images, 'dtype', '?')} {shape}")
    n, height, width, channels = images.shape
    if n == 0:
        raise InputError("no images to compute logits for")
    expected = model_in_channels(model)
    if expected is not None and expected != channels:
        kind = {1: "grey", 3: "RGB"}
        raise InputError(
            f"the model reads {kind.get(expected, expected)} images ({expected} channel(s)) but the data set has "
            f"{kind.get(channels, channels)} images ({channels} channel(s))"
        )
    if input_size is not None and (height, width) != (input_size, input_size):
        raise InputError(
            f"the model expects {input_size}x{input_size} images but the data set has {height}x{width} images"
        )
    for name, values in (("mean", mean), ("std", std)):
        if len(values) not in (1, channels):
            raise InputError(f"{name} must have 1 or {channels} values, got {len(values)}")
    if min(std) <= 0:
        raise InputError(f"std must be positive, got {tuple(std)}")


def host_batches(images: np.ndarray, batch_size: int, device: torch.device) -> Iterator[tuple[int, torch.Tensor]]:
    """``(start, uint8 batch on the device)`` in order.

    Each batch is copied once out of ``images`` (torch does not wrap the read-only arrays of an ``ImageSet``).
    On CUDA that copy goes into freshly allocated pinned memory, made by a background thread one batch
    ahead, and the host-to-device copy is non-blocking (PyTorch keeps a pinned block alive until the copy
    that reads it has finished, so a fresh buffer per batch never races with its reuse).
    """
    starts = range(0, images.shape[0], batch_size)
    pin = device.type == "cuda"

    def host(start: int) -> torch.Tensor:
        chunk = images[start : start + batch_size]
        batch = torch.empty(chunk.shape, dtype=torch.uint8, pin_memory=pin)
        batch.numpy()[...] = chunk
        return batch

    if not pin:
        for start in starts:
            yield start, host(start).to(device)
        return
    with concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="relu-prefetch") as pool:
        pending = pool.submit(host, starts[0])
        for index, start in enumerate(starts):
            batch = pending.result()
            if index + 1 < len(starts):
                pending = pool.submit(host, starts[index + 1])
            yield start, batch.to(device, non_blocking=True)


def forward(net: nn.Module, x: torch.Tensor, precision: str) -> torch.Tensor:
    """``net(x)`` under the ``precision``'s autocast, as float32 (N, classes); InputError when the model cannot
    read ``x``, or runs out of memory (the message suggests a smaller batch)."""
    try:
        with autocast(x.device, precision):
            out = net(x)
    except torch.OutOfMemoryError:
        raise InputError(
            f"out of memory on {x.device} with batches of {x.shape[0]} images: pass a smaller batch size"
        ) from None
    except torch.jit.Error as exc:  # an exception raised inside a TorchScript forward: keep its last line
        lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
        raise InputError(f"the model raised an error in forward: {(lines or ['?'])[-1][:160]}") from None
    except RuntimeError as exc:  # shape errors surface as RuntimeError deep inside the model
        first = str(exc).strip().splitlines()[0][:160]
        asked = re.search(r"can't allocate memory: you tried to allocate (\d+) bytes|out of memory", str(exc))
        if asked:  # the model's own allocation failed: not a question of the images' size
            size = f"{int(asked.group(1)):,} bytes" if asked.group(1) else "more memory"
            raise InputError(
                f"the model failed in forward: it asked for {size}, more than {x.device} can give "
                f"(batches of {x.shape[0]} images)"
            ) from None
        channels, height, width = x.shape[1:]
        raise InputError(f"the model cannot read {height}x{width} images with {channels} channel(s): {first}") from None
    return check_outputs(out, x.shape[0])


def check_outputs(out: object, rows: int) -> torch.Tensor:
    """``out`` as float32 when it is a floating-point (``rows``, classes) tensor; else InputError. (Finiteness
    is checked once over all batches in :func:`batched_outputs`, so a GPU is not synchronised per batch.)"""
    if not isinstance(out, torch.Tensor):
        raise InputError(
            f"the model returned a {type(out).__name__}, not a tensor: its forward must return "
            "one (N, classes) tensor of logits"
        )
    if out.ndim != 2 or out.shape[0] != rows:
        raise InputError(f"the model must return (N, classes) logits with N = {rows}, got shape {tuple(out.shape)}")
    if not out.is_floating_point():
        raise InputError(f"the model must return floating-point logits, got {out.dtype}")
    return out.float()


def batched_outputs(
    step: Callable[[torch.Tensor], torch.Tensor],
    images: np.ndarray,
    *,
    device: torch.device,
    batch_size: int,
    task: str,
    progress: Progress | None = None,
    cancel: Cancel | None = None,
) -> np.ndarray:
    """Float32 (N, C) array of ``step(uint8 NHWC batch on the device)`` over ``images``, in order.

    The one batched loop of the engine (plain logits, perturbed logits): ``cancel()`` is asked before every
    batch (True raises ``Cancelled``), ``progress(done, total, "<task> done/total")`` is called after it,
    and the outputs stay on the device until one final copy back. Every batch must give as many columns as
    the first (InputError otherwise).
    """
    if batch_size < 1:
        raise InputError(f"batch size must be positive, got {batch_size}")
    total = images.shape[0]
    outputs: torch.Tensor | None = None
    for start, batch in host_batches(images, batch_size, device):
        if cancel is not None and cancel():
            raise Cancelled(f"{task} cancelled")
        out = step(batch)
        if outputs is None:
            outputs = torch.empty((total, out.shape[1]), dtype=torch.float32, device=device)
        elif out.shape[1:] != outputs.shape[1:]:  # a model whose width depends on its batch
            raise InputError(
                f"the model returned {outputs.shape[1]} outputs per image for the first batch but "
                f"{out.shape[1]} for images {start + 1}-{start + out.shape[0]}: it must return the same "
                "number (one per class) for every batch"
            )
        outputs[start : start + out.shape[0]] = out
        if progress is not None:
            done = start + out.shape[0]
            progress(done, total, f"{task} {done}/{total}")
    assert outputs is not None  # images is non-empty (check_images)
    if not bool(torch.isfinite(outputs).all()):
        raise InputError("the model returned NaN or infinite logits")
    return outputs.cpu().numpy()


# --------------------------------------------------------------------------- logits


@dataclass(frozen=True)
class Inference:
    """A model's pass over images, set up by :func:`inference`: the device, precision and batch size resolved,
    the normalisation and the callbacks. Shared by plain logits and perturbed inputs
    (:mod:`relu_core.preprocessing`)."""

    model: nn.Module
    normalization: Normalization
    device: torch.device
    precision: str
    batch_size: int
    progress: Progress | None
    cancel: Cancel | None

    def outputs(
        self, step: Callable[[nn.Module, torch.Tensor], torch.Tensor], images_uint8_nhwc: np.ndarray, task: str
    ) -> np.ndarray:
        """Float32 ``step(inference copy of the model, normalised batch)`` over the images, in order
        (:func:`batched_outputs`)."""
        net = inference_model(self.model, self.device, self.precision)
        normalise = self.normalization.on(self.device)
        on_cpu = self.device.type == "cpu"
        with threads.model_work() if on_cpu else contextlib.nullcontext(lambda: None) as recheck:

            def batch_step(batch: torch.Tensor) -> torch.Tensor:
                recheck()
                return step(net, normalise(batch))

            return batched_outputs(
                batch_step,
                images_uint8_nhwc,
                device=self.device,
                batch_size=self.batch_size,
                task=task,
                progress=self.progress,
                cancel=self.cancel,
            )


def inference(
    model: nn.Module,
    images_uint8_nhwc: np.ndarray,
    *,
    mean: Sequence[float],
    std: Sequence[float],
    device: str | torch.device = "auto",
    batch_size: int | None = None,
    precision: str = "auto",
    input_size: int | None = None,
    progress: Progress | None = None,
    cancel: Cancel | None = None,
) -> Inference:
    """The checked set-up of ``model`` on uint8 NHWC images normalised with ``mean``/``std`` (per channel, on
    the 0..1 scale); its keywords are the options of :func:`compute_logits` and
    :func:`relu_core.preprocessing.perturbed_scores`, documented here once.

    ``batch_size=None`` picks :func:`default_batch_size`; ``precision`` is "auto" (bf16/fp16 autocast on CUDA,
    exact fp32 elsewhere), "fp32", "bf16" or "fp16"; ``input_size`` (the model spec's H = W) is checked when
    given. ``progress(done, total, message)`` is called after every batch; ``cancel()`` returning True raises
    ``Cancelled``. Raises InputError for images the model cannot read or a batch size below 1.
    """
    check_images(model, images_uint8_nhwc, mean, std, input_size)
    device = select_device(device)
    batch_size = default_batch_size(device) if batch_size is None else int(batch_size)
    if batch_size < 1:
        raise InputError(f"batch size must be positive, got {batch_size}")
    normalization = Normalization(tuple(mean), tuple(std))
    return Inference(model, normalization, device, resolve_precision(precision, device), batch_size, progress, cancel)


def compute_logits(model: nn.Module, images_uint8_nhwc: np.ndarray, *, shard: bool = True, **options) -> np.ndarray:
    """Float32 logits (N, C) of ``model`` on uint8 NHWC images; the keyword ``options`` (``mean`` and ``std``,
    required; ``device``, ``batch_size``, ``precision``, ``input_size``, ``progress``, ``cancel``) as
    :func:`inference`.

    Under ``torchrun`` with ``shard=True`` each rank computes a contiguous shard and all ranks return the full
    logits in the original order. Raises InputError for images the model cannot read.
    """
    setup = inference(model, images_uint8_nhwc, **options)
    if shard and distributed.world_size() > 1:
        return distributed.sharded_logits(
            lambda start, stop, dev: compute_logits(
                model, images_uint8_nhwc[start:stop], shard=False, **{**options, "device": dev}
            ),
            images_uint8_nhwc.shape[0],
            setup.device,
        )

    def logits(net: nn.Module, x: torch.Tensor) -> torch.Tensor:
        with torch.inference_mode():
            return forward(net, x, setup.precision)

    return setup.outputs(logits, images_uint8_nhwc, "logits")
