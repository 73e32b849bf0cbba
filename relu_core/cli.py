"""Headless command line: ``python -m relu_core {evaluate,demo,logits,models,datasets,report,study,baselines}``.

Every bad input (missing or malformed file, NaN logits, wrong shapes, labels out of range, an unknown
method, model or data set, a fraction outside (0, 1), a one-class split) ends with exit code 2 and one
line ``error: ...`` on stderr, never a traceback; a cancelled run (Ctrl-C) ends with exit code 130.
Long work draws a text progress bar on stderr; results go to stdout.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
import warnings
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

import numpy as np

from relu_core import validation
from relu_core.errors import Cancelled, InputError
from relu_core.validation import parse_fraction, parse_int

if TYPE_CHECKING:
    from relu_core.runs import Run

EXIT_BAD_INPUT = 2
EXIT_CANCELLED = 130


class _UsageError(Exception):
    """A command-line usage error, reported as one line like every other bad input."""


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs) -> None:
        # no abbreviations: "--seed 3" would silently mean evaluate's "--seeds 3" (report's --seed is a split seed)
        super().__init__(*args, **{"allow_abbrev": False, **kwargs})

    def error(self, message: str) -> None:  # argparse would print the usage block and exit
        raise _UsageError(message)


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
def _parse_temperature(text: str) -> float | dict[str, float]:
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


def _parse_lambda(text: str) -> float | str:
    from relu_core.detectors import check_lambda

    if text.strip().lower() == "auto":
        return "auto"
    try:
        return check_lambda(float(text))
    except ValueError:
        raise InputError(f"--lambda must be a number in [0, 1] or 'auto', got {text!r}") from None


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m relu_core", description="Rel-U Studio, headless.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)

    ev = sub.add_parser(
        "evaluate",
        help="evaluate misclassification detectors on logits (or on a model and a data set)",
        description="Seeded tuning/evaluation splits; detectors fitted on the tuning part, metrics on the "
        "evaluation part, mean and std over seeds. FPR at 95% TPR takes correctly classified samples as "
        "positives.",
    )
    add_run_arguments(
        ev,
        "npz with logits (N, C), labels (N,) [, class_names]; or a .csv/.parquet with one column per class and "
        "a label column",
        required=True,
    )
    ev.add_argument(
        "--methods",
        default=None,
        help="comma-separated detector keys or names (default: every detector; with --eps, every detector "
        "input pre-processing is defined for)",
    )
    ev.add_argument(
        "--temperature",
        default=None,
        help="T for every detector (MSP uses 1), optionally per method, e.g. 1.5,odin=1000; default: "
        "each detector's own, 1 and 1000 for ODIN (at T=1 it would rank exactly like MSP)",
    )
    ev.add_argument("--lambda", dest="lam", default="0.5", help="Rel-U's lam in [0, 1], or auto = N+/(N+ + N-)")
    ev.add_argument("--val-fraction", default="0.5", help="share of each seed's split used for tuning, in (0, 1)")
    ev.add_argument("--seeds", default="10", help="number of seeded splits (default 10)")
    pick = ev.add_mutually_exclusive_group()
    pick.add_argument(
        "--select",
        action="store_true",
        help="select T (and lam) per seed over the paper's grid by k-fold cross-validation on the "
        "tuning part (replaces --temperature/--lambda)",
    )
    pick.add_argument(
        "--oracle",
        action="store_true",
        help="select T (and lam) on the evaluation part (optimistic, labelled oracle; replaces --temperature/--lambda)",
    )
    ev.add_argument(
        "--criterion",
        default="fpr95",
        choices=["fpr95", "auroc", "aurc", "eaurc"],
        help="selection criterion for --select/--oracle (default fpr95)",
    )
    ev.add_argument("--folds", default="5", help="cross-validation folds for --select (default 5)")
    ev.add_argument(
        "--eps",
        type=float,
        default=0.0,
        help="input pre-processing magnitude (needs --model); D* is fitted on clean tuning logits",
    )
    _add_engine_arguments(ev)
    ev.add_argument(
        "--fpr-positive",
        choices=["correct", "error"],
        default="correct",
        help="which samples are the positives for FPR at 95%% TPR: correct (the paper's, default) "
        "or error; the table and the JSON name the convention",
    )
    ev.add_argument(
        "--bootstrap",
        default="1000",
        help="paired bootstrap resamples for the Rel-U − Doctor interval (default 1000; 0: none)",
    )
    ev.add_argument(
        "--json", action="store_true", help="print one JSON object keyed by method (Rel-U's row holds minus_doctor)"
    )
    ev.set_defaults(handler=_cmd_evaluate)

    demo = sub.add_parser("demo", help="the default run end to end (Fashion-MNIST, else digits), all detectors")
    demo.add_argument("--seeds", default="10", help="number of seeded splits (default 10)")
    demo.add_argument("--json", action="store_true", help="print one JSON object keyed by method")
    demo.set_defaults(handler=_cmd_demo)

    lg = sub.add_parser("logits", help="compute a model's logits on a data set and write them to an npz")
    lg.add_argument("--model", required=True, metavar="NAME")
    lg.add_argument("--weights", metavar="FILE", help="checkpoint, or hf:REPO (see evaluate --help)")
    lg.add_argument("--dataset", required=True, metavar="SPEC")
    lg.add_argument("--out", required=True, metavar="FILE.npz")
    _add_engine_arguments(lg)
    lg.set_defaults(handler=_cmd_logits)

    sub.add_parser("models", help="list the model names the CLI accepts").set_defaults(handler=_cmd_models)
    sub.add_parser("datasets", help="list the data sets the CLI accepts and whether they are available").set_defaults(
        handler=_cmd_datasets
    )
    # `report`, `baselines` and `study` register themselves, implemented beside what they run.
    from relu_core import baselines_cli, report_cli, train_cli
    from relu_core.studies import cli as studies_cli

    report_cli.add_parser(sub)
    baselines_cli.add_parser(sub)
    studies_cli.add_parser(sub)
    train_cli.add_parser(sub)
    return parser


def add_run_arguments(parser: argparse.ArgumentParser, logits_help: str, *, required: bool) -> None:
    """The flags naming a run, shared by ``evaluate``, ``baselines`` and ``study``: ``--logits FILE`` or
    ``--model NAME`` (one of them, or neither unless ``required``), with ``--weights`` and ``--dataset``."""
    source = parser.add_mutually_exclusive_group(required=required)
    source.add_argument("--logits", metavar="FILE", help=logits_help)
    source.add_argument("--model", metavar="NAME", help="a registered model (see `models`); needs --dataset")
    parser.add_argument(
        "--weights",
        metavar="FILE",
        help="checkpoint for --model (default: its known weights), or hf:REPO for one of the authors' "
        "Hugging Face Hub checkpoints (e.g. hf:edadaltocg/resnet34_cifar10; downloaded once)",
    )
    parser.add_argument(
        "--dataset", metavar="SPEC", help="a registered data set, imagefolder:PATH, npz:PATH or zip:PATH"
    )


def _add_engine_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda", "mps"])
    parser.add_argument("--batch-size", default=None, help="inference batch size (default: chosen for the device)")
    parser.add_argument("--download", action="store_true", help="download a registered data set if missing")


# ---------------------------------------------------------------------------------------- logits io
def load_logits_file(path: str | Path):
    """A :class:`~relu_core.runs.Run` from a logits file (.npz, .csv or .parquet, as the app's upload)."""
    from relu_core import runs

    path = Path(path)
    if path.is_dir():
        raise InputError(f"{path} is a directory, not a logits file")
    if not path.is_file():
        if path.exists():
            raise InputError(f"{path} is not a regular file (a device or a pipe), not a logits file")
        raise FileNotFoundError(f"no such file: {path}")
    return runs.load_logits_upload(path.read_bytes(), path.name)


def write_logits_npz(path: str | Path, logits: np.ndarray, labels: np.ndarray, class_names: Sequence[str]) -> Path:
    """Write the npz atomically (:func:`relu_core.cache.atomic_write`) into an existing directory."""
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


# ------------------------------------------------------------------------------------------ output
def format_table(result, *, title: str = "") -> str:
    """An aligned text table of an :class:`~relu_core.protocol.EvaluationResult` (mean ± std over seeds),
    the settings each method used, and the paired Rel-U − Doctor difference when both were evaluated."""
    from relu_core.protocol import FALLBACK_LABEL, describe_values

    def pm(key: str, metric: str) -> str:
        return f"{result.mean(key, metric):.4f} ± {result.std(key, metric):.4f}"

    def lam_cell(key: str) -> str:
        text = describe_values([lam for _, lam in result.params[key]])
        n_fallback = sum(result.fallback[key])
        if n_fallback:
            text += (
                f" ({FALLBACK_LABEL}"
                + ("" if n_fallback == len(result.seeds) else f" on {n_fallback}/{len(result.seeds)} seeds")
                + ")"
            )
        return text

    searched = any(n > 1 for n in result.n_settings.values())
    header = [
        "method",
        "T",
        "λ",
        *(["settings searched"] if searched else []),
        "FPR95 (lower)",
        "AUROC (higher)",
        "AURC (lower)",
        "E-AURC (lower)",
    ]
    n_text = len(header) - 4
    rows = [
        [
            result.names[key],
            describe_values([t for t, _ in result.params[key]]),
            lam_cell(key),
            *([str(result.n_settings[key])] if searched else []),
            pm(key, "fpr95"),
            pm(key, "auroc"),
            pm(key, "aurc"),
            pm(key, "eaurc"),
        ]
        for key in result.methods
    ]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def fmt(row: list[str]) -> str:  # text columns left-aligned, numbers right-aligned
        return "  ".join(c.ljust(w) if i < n_text else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))

    acc = result.accuracy
    lines = [title] if title else []
    lines += [
        f"{result.fpr_convention}; mean ± std over {len(result.seeds)} seed(s).",
        f"Split per seed: {result.n_tune} tuning / {result.n_eval} evaluation samples "
        f"(tuning fraction {result.tune_fraction:g}, stratified by correctness).",
        f"Hyperparameters: {result.selection}; input pre-processing ε = {result.eps:g}"
        + (" (scores on perturbed inputs)" if result.perturbed else "")
        + ".",
        f"Classifier accuracy on the evaluation part: {acc.mean():.4f} ± {acc.std():.4f}",
        "",
        fmt(header),
        "  ".join("-" * w for w in widths),
        *(fmt(r) for r in rows),
    ]
    paired = result.paired_summary()
    if paired is not None:
        n_resamples = next(iter(paired.values()))["n_resamples"]
        lines += [
            "",
            f"Rel-U − Doctor on the same splits (mean ± std over seeds; 95 % paired bootstrap interval of "
            f"the mean, {n_resamples} resamples of the evaluation samples):",
        ]
        for metric, row in paired.items():
            lines.append(f"  {row['mean']:+.4f} ± {row['std']:.4f}   {row['verdict']}")
    return "\n".join(lines)


def _emit(result, as_json: bool, title: str) -> None:
    if as_json:
        table = result.to_dict()
        for row in table.values():  # the conventions travel with the numbers they qualify
            row["fpr95_positives"] = result.fpr_positive
            row["selection"] = result.selection
        print(json.dumps(table, indent=2))
    else:
        print(format_table(result, title=title))


# ----------------------------------------------------------------------------------------- commands
def run_from_args(args: argparse.Namespace, bar: ProgressBar, batch_size: int | None) -> tuple[Run, str]:
    """The run that ``--logits FILE`` or ``--model NAME --dataset SPEC [--weights FILE]`` names, and its title
    line; InputError for flags that do not go together."""
    if args.logits is not None:
        for flag, value in (("--weights", args.weights), ("--dataset", args.dataset)):
            if value is not None:
                raise InputError(f"{flag} goes with --model, not with --logits")
        return load_logits_file(args.logits), f"Logits: {args.logits}"
    if args.dataset is None:
        raise InputError("--model needs --dataset")
    run = _model_run(args, batch_size, bar)
    bar.close()
    return run, f"Model {args.model} on {args.dataset}: {run.source}"


def _model_run(args: argparse.Namespace, batch_size: int | None, progress: ProgressBar | None) -> Run:
    """``runs.logits_for`` of ``--model``, ``--weights`` and ``--dataset`` with the engine flags."""
    from relu_core import runs

    return runs.logits_for(
        args.model,
        args.weights,
        args.dataset,
        device=args.device,
        batch_size=batch_size,
        progress=progress,
        download=args.download,
    )


def _cmd_evaluate(args: argparse.Namespace, bar: ProgressBar) -> int:
    from relu_core import protocol

    methods = protocol.resolve_methods(args.methods)
    temperature = None if args.temperature is None else _parse_temperature(args.temperature)
    lam = _parse_lambda(args.lam)
    fraction = parse_fraction(args.val_fraction, "--val-fraction")
    seeds = parse_int(args.seeds, "--seeds", minimum=1)
    folds = parse_int(args.folds, "--folds", minimum=2)
    n_resamples = parse_int(args.bootstrap, "--bootstrap", minimum=0)  # 0: no interval
    batch_size = None if args.batch_size is None else parse_int(args.batch_size, "--batch-size", minimum=1)
    if not math.isfinite(args.eps) or args.eps < 0:
        raise InputError(f"--eps must be a non-negative number, got {args.eps}")
    if args.eps > 0:  # checked before the model runs
        from relu_core import detectors, preprocessing

        perturbable = [k for k in methods if detectors.REGISTRY[k].perturbation]
        if args.methods is None:
            methods = perturbable
        elif len(perturbable) < len(methods):
            preprocessing.check_detector(next(detectors.REGISTRY[k]() for k in methods if k not in perturbable))
    perturbed_scorer = None
    if args.logits is not None and args.eps > 0:
        raise InputError("--eps perturbs the inputs, so it needs --model and --dataset instead of --logits")
    run, title = run_from_args(args, bar, batch_size)
    logits, labels = run.logits, run.labels
    if args.logits is None:
        from relu_core import distributed

        if not distributed.is_main_process():  # under torchrun the other ranks only helped with the logits
            return 0
        if args.eps > 0:
            from relu_core import preprocessing

            perturbed_scorer = preprocessing.make_perturbed_scorer(
                run, args.eps, device=args.device, batch_size=batch_size
            )
            title += f" (input pre-processing eps={args.eps:g})"
    options = {  # what both protocols take alike
        "tune_fraction": fraction,
        "seeds": seeds,
        "perturbed_scorer": perturbed_scorer,
        "eps": args.eps,
        "progress": bar,
        "fpr_positive": args.fpr_positive,
        "n_resamples": n_resamples,
    }
    if args.select or args.oracle:
        selection = "oracle" if args.oracle else "tuning"
        result = protocol.evaluate_with_selection(
            logits, labels, methods, selection=selection, n_folds=folds, criterion=args.criterion, **options
        )
    else:
        result = protocol.evaluate(logits, labels, methods, temperature=temperature, lam=lam, **options)
    bar.close()
    _emit(result, args.json, title)
    return 0


def _cmd_demo(args: argparse.Namespace, bar: ProgressBar) -> int:
    from relu_core import paths, protocol, runs

    seeds = parse_int(args.seeds, "--seeds", minimum=1)
    run = runs.default_run(progress=bar)
    bar.close()
    # Every detector at its own default temperature: ODIN at its customary T = 1000 (at T = 1 it would rank
    # exactly like MSP), the others at T = 1.
    result = protocol.evaluate(run.logits, run.labels, None, temperature=None, seeds=seeds, progress=bar)
    bar.close()
    _emit(result, args.json, f"Demo: {run.source}")
    print(f"Model weights and logits are cached under {paths.cache_dir()}", file=sys.stderr)
    return 0


def _cmd_logits(args: argparse.Namespace, bar: ProgressBar) -> int:
    from relu_core import distributed

    batch_size = None if args.batch_size is None else parse_int(args.batch_size, "--batch-size", minimum=1)
    main_process = distributed.is_main_process()
    out = validation.output_file(args.out) if main_process else None  # before the model runs; rank 0 writes
    run = _model_run(args, batch_size, bar if main_process else None)
    bar.close()
    if not main_process:  # under torchrun every rank holds the gathered logits; rank 0 writes them
        return 0
    write_logits_npz(out, run.logits, run.labels, run.class_names)
    accuracy = float(np.mean(np.argmax(run.logits, axis=1) == run.labels))
    print(f"wrote {out}: logits {run.logits.shape[0]} x {run.logits.shape[1]}, accuracy {accuracy:.4f} ({run.source})")
    return 0


def _cmd_models(args: argparse.Namespace, bar: ProgressBar) -> int:
    from relu_core import models

    for name, spec in models.MODELS.items():
        size = f"{spec.input_size}x{spec.input_size}x{spec.in_channels}"
        weights = models.pretrained_weights(name)
        known = f"  [pretrained: {weights}]" if weights is not None else ""
        print(f"{name:<18} {size:<9} {spec.description}{known}")
    return 0


def _cmd_datasets(args: argparse.Namespace, bar: ProgressBar) -> int:
    from relu_core import datasets

    for info in datasets.list_datasets():
        if info.available:
            where = f"available: {info.location}"
        else:
            where = "not found locally" + (" (logits/evaluate --download fetches it)" if info.downloadable else "")
        print(f"{info.name:<16} {info.description}\n{'':<16} {where}")
    print("Also: imagefolder:PATH (class/image folders), zip:PATH (a zipped image folder), npz:PATH (x, y)")
    return 0


# --------------------------------------------------------------------------------------------- main
def _one_line(exc: BaseException) -> str:
    if isinstance(exc, FileNotFoundError) and exc.filename:
        text = f"no such file: {exc.filename}"
    else:
        text = str(exc) or type(exc).__name__
    return " ".join(text.split())


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit status (0 ok, 2 bad input, 1 runtime failure, 130 cancelled).

    Warnings raised on the way (e.g. numpy's overflow warning on a hostile file) are held back: a failed
    run prints only its one error line, a successful one prints each distinct warning as one line.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        status = _run(argv)
    if status == 0:
        for message in dict.fromkeys(_one_line(w.message) for w in caught):
            print(f"warning: {message}", file=sys.stderr)
    return status


def _run(argv: Sequence[str] | None) -> int:
    bar = ProgressBar(sys.stderr)
    try:
        args = build_parser().parse_args(argv)
        return args.handler(args, bar)
    except SystemExit as exc:  # --help
        return int(exc.code or 0)
    except BrokenPipeError:  # the reader of stdout stopped early (``| head``): nothing to say to it any more
        bar.close()
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error while exiting
        return 1
    except (Cancelled, KeyboardInterrupt):
        bar.close()
        print("error: cancelled", file=sys.stderr)
        return EXIT_CANCELLED
    except (_UsageError, ValueError, OSError, zipfile.BadZipFile, EOFError) as exc:
        bar.close()
        print(f"error: {_one_line(exc)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except RuntimeError as exc:  # e.g. a model that cannot read these inputs: still one line, no traceback
        bar.close()
        print(f"error: {_one_line(exc).split(' Exception raised from')[0]}", file=sys.stderr)
        return 1
    except Exception as exc:  # noqa: BLE001 - a bug or an exhausted resource: one line, never a traceback
        bar.close()
        print(f"error: unexpected {type(exc).__name__}: {_one_line(exc)}", file=sys.stderr)
        return 1
