"""What the command line's commands share: the flags naming a run and the engine, the parsing of T and λ,
the run those flags name, and the progress bar every handler draws on stderr.

Every command module of :mod:`relu_core.cli` (``evaluate``, ``logits``, ``report``, ``baselines``, ``study``,
``train``, ``export``) imports this one and no other command module; the package's ``__init__`` registers them and turns a failure into its
exit code. Heavy modules (runs, detectors, protocol) load inside the functions that need them, so that
``--help`` stays fast.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from relu_core.errors import InputError

if TYPE_CHECKING:
    from relu_core.runs import Run


class ProgressBar:
    """``progress(done, total, message)`` callback drawing a one-line bar on a stream (stderr).

    Nothing is drawn for work that ends within ``delay`` seconds. On a terminal the line is redrawn in
    place (at most every ``min_interval`` seconds); elsewhere (logs, pipes) one line per 10 % step.
    """

    def __init__(self, stream: TextIO | None = None, width: int = 28, delay: float = 1.0, min_interval: float = 0.1):
        self.stream = stream if stream is not None else sys.stderr
        self.width = width
        self.delay = delay
        self.min_interval = min_interval
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._start: float | None = None
        self._last_draw = 0.0
        self._last_step = -1
        self._open = False

    def __call__(self, done: int, total: int, message: str = "") -> None:
        now = time.monotonic()
        if self._start is None:
            self._start = now
        if now - self._start < self.delay:
            return
        fraction = min(max(done / total, 0.0), 1.0) if total > 0 else 0.0
        finished = total > 0 and done >= total
        filled = int(round(fraction * self.width))
        line = f"[{'#' * filled}{'-' * (self.width - filled)}] {fraction:6.1%} {message}"
        if self.tty:
            if not finished and now - self._last_draw < self.min_interval:
                return
            self.stream.write("\r" + line[:120].ljust(120) + ("\n" if finished else ""))
        else:
            step = int(fraction * 10)
            if step < self._last_step:  # a new phase restarted the count
                self._last_step = -1
            if step == self._last_step:
                return
            self._last_step = step
            self.stream.write(line + "\n")
        self._last_draw = now
        self._open = not finished
        self.stream.flush()

    def close(self) -> None:
        """End an unfinished terminal line; the next phase starts its own delay."""
        if self._open and self.tty:
            self.stream.write("\n")
            self.stream.flush()
        self._open = False
        self._start = None
        self._last_step = -1


# -------------------------------------------------------------------------------------- arguments
def parse_temperature(text: str) -> float | dict[str, float]:
    """``1.5`` (every detector) or ``1.5,odin=1000`` (a default then per-method values)."""
    from relu_core.detectors import check_temperature, protocol_keys
    from relu_core.protocol import resolve_methods

    default: float | None = None
    per_method: dict[str, float] = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        key, _, value = part.rpartition("=")
        try:
            number = check_temperature(float(value))
        except ValueError:
            raise InputError(
                f"--temperature expects positive numbers like 1.5 or 1.5,odin=1000, got {text!r}"
            ) from None
        if key:
            per_method[resolve_methods([key])[0]] = number
        else:
            default = number
    if default is None and not per_method:
        raise InputError("--temperature is empty")
    if not per_method:
        return default
    return {k: per_method.get(k, 1.0 if default is None else default) for k in protocol_keys()}


def parse_lambda(text: str) -> float | str:
    from relu_core.detectors import check_lambda

    if text.strip().lower() == "auto":
        return "auto"
    try:
        return check_lambda(float(text))
    except ValueError:
        raise InputError(f"--lambda must be a number in [0, 1] or 'auto', got {text!r}") from None


#: ``--eps-grid``'s named grids: the authors' whole ε grid, and the bounded subset for 2 CPU cores.
EPS_GRID_NAMES = ("authors", "cpu")
EPS_GRID_HELP = (
    "also select ε inside the tuning part, jointly with T and λ (with --select; --oracle: on the evaluation part): "
    "'authors' (0, 0.0005, ..., 0.004, the authors' grid), 'cpu' (0, 0.001, 0.002, 0.004: a subset of it for 2 CPU "
    "cores) or comma-separated values; needs --model (a logits file cannot be perturbed); the output names the grid"
)


def parse_eps_grid(text: str, flag: str = "--eps-grid") -> tuple[float, ...]:
    """``authors``, ``cpu`` or comma-separated ε values (``protocol.check_epsilons``), InputError otherwise."""
    from relu_core import protocol

    name = text.strip().lower()
    if name == "authors":
        return protocol.AUTHORS_EPSILONS
    if name == "cpu":
        from relu_core import preprocessing

        return preprocessing.CPU_EPSILONS
    return protocol.check_epsilons(parse_grid(text, flag, "ε values, or authors or cpu"))


def parse_grid(text: str, flag: str, what: str = "numbers") -> tuple[float, ...]:
    """Comma-separated numbers (a grid a selection searches), InputError naming ``flag`` otherwise."""
    try:
        values = tuple(float(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise InputError(f"{flag} expects comma-separated {what}, got {text!r}") from None
    if not values:
        raise InputError(f"{flag} is empty")
    return values


WEIGHTS_HELP = (
    "checkpoint for --model (default: its known weights), or hf:REPO for one of the authors' Hugging Face Hub "
    "checkpoints (e.g. hf:edadaltocg/resnet34_cifar10; downloaded once), or an ONNX classifier FILE.onnx "
    "(without --model; run by onnxruntime; no ε: it needs gradients)"
)


def onnx_weights(args: argparse.Namespace) -> bool:
    """Whether ``--weights`` names an ONNX classifier (by its suffix)."""
    from relu_core.onnx_model import is_onnx

    return args.weights is not None and is_onnx(args.weights)


def add_run_arguments(parser: argparse.ArgumentParser, logits_help: str, *, required: bool) -> None:
    """The flags naming a run, shared by ``evaluate``, ``baselines`` and ``study``: ``--logits FILE`` or
    ``--model NAME`` (one of them, or neither unless ``required``; with ``required``, ``--weights FILE.onnx``
    alone names a model too: :func:`run_from_args` checks it), with ``--weights`` and ``--dataset``."""
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--logits", metavar="FILE", help=logits_help)
    source.add_argument("--model", metavar="NAME", help="a registered model (see `models`); needs --dataset")
    parser.add_argument("--weights", metavar="FILE", help=WEIGHTS_HELP)
    parser.set_defaults(run_required=required)
    parser.add_argument(
        "--dataset", metavar="SPEC", help="a registered data set, imagefolder:PATH, npz:PATH or zip:PATH"
    )


def available_device(name: str) -> str:
    """``--device`` as given, once the device is found on this machine: checked when the flags are read, so
    that ``--device cuda`` without a GPU fails before any data is loaded or decoded."""
    if name not in ("auto", "cpu"):
        from relu_core import engine

        try:
            engine.select_device(name)
        except InputError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    return name


def add_engine_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of the engine that computes a model's logits: ``--device`` (:func:`available_device`),
    ``--batch-size``, ``--download``."""
    parser.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda", "mps"], type=available_device)
    parser.add_argument("--batch-size", default=None, help="inference batch size (default: chosen for the device)")
    parser.add_argument("--download", action="store_true", help="download a registered data set if missing")


# ---------------------------------------------------------------------------------- the run they name
def load_logits_file(path: str | Path):
    """:func:`relu_core.runs.load_logits` (imported on use: ``--help`` loads no torch)."""
    from relu_core import runs

    return runs.load_logits(path)


def run_from_args(args: argparse.Namespace, bar: ProgressBar, batch_size: int | None) -> tuple[Run, str]:
    """The run that ``--logits FILE`` or ``--model NAME --dataset SPEC [--weights FILE]`` names, and its title
    line; InputError for flags that do not go together."""
    if args.logits is not None:
        for flag, value in (("--weights", args.weights), ("--dataset", args.dataset)):
            if value is not None:
                raise InputError(f"{flag} goes with --model, not with --logits")
        return load_logits_file(args.logits), f"Logits: {args.logits}"
    if args.model is None and not onnx_weights(args):
        if args.run_required:
            raise InputError("one of the arguments --logits --model (or --weights FILE.onnx) is required")
    run = model_run(args, batch_size, bar)
    bar.close()
    return run, f"Model {args.model or args.weights} on {args.dataset}: {run.source}"


def model_run(args: argparse.Namespace, batch_size: int | None, progress: ProgressBar | None) -> Run:
    """``runs.logits_for`` of ``--model``, ``--weights`` and ``--dataset`` with the engine flags, or
    ``runs.onnx_run`` of ``--weights FILE.onnx`` (which carries its architecture: no ``--model``)."""
    from relu_core import runs

    if args.dataset is None:
        raise InputError(f"{'--weights FILE.onnx' if onnx_weights(args) else '--model'} needs --dataset")
    if onnx_weights(args):
        if args.model is not None:
            raise InputError("an ONNX model carries its own architecture: give --weights FILE.onnx without --model")
        return runs.onnx_run(
            args.weights,
            args.dataset,
            device=args.device,
            batch_size=batch_size,
            progress=progress,
            download=args.download,
        )
    if args.model is None:
        raise InputError("--model is required (or --weights FILE.onnx)")
    return runs.logits_for(
        args.model,
        args.weights,
        args.dataset,
        device=args.device,
        batch_size=batch_size,
        progress=progress,
        download=args.download,
    )


def write_logits_npz(path: str | Path, logits, labels, class_names: Sequence[str]) -> Path:
    """Write the npz atomically (:func:`relu_core.cache.atomic_write`) into an existing directory (the
    ``logits`` and ``train`` commands' ``--out``)."""
    import numpy as np

    from relu_core import cache

    path = Path(path)
    if not path.parent.is_dir():
        raise FileNotFoundError(f"no such directory: {path.parent}")
    arrays = {
        "logits": np.asarray(logits, dtype=np.float32),
        "labels": np.asarray(labels, dtype=np.int64),
        "class_names": np.asarray(list(class_names), dtype=str),
    }
    return cache.atomic_write(path, lambda stream: np.savez(stream, **arrays))


#: Short names of the paper's CIFAR architectures (``train --model resnet34``).
MODEL_ALIASES = {"resnet34": "resnet34_cifar", "densenet121": "densenet121_cifar"}


def trainable_model_name(text: str, dataset: str) -> str:
    """The model ``train`` and ``study objectives`` train: ``cnn``, the small CNN that fits ``dataset``;
    ``resnet34`` / ``densenet121``, the CIFAR variants; or a registered name."""
    from relu_core import models

    if text == "cnn":
        fitting = [name for name in models.DATASET_MODELS.get(dataset, ()) if name.startswith("cnn")]
        if not fitting:
            raise InputError(f"no small CNN fits {dataset!r}; choose --model by name (see `models`)")
        return fitting[0]
    return models.get_spec(MODEL_ALIASES.get(text, text)).name
