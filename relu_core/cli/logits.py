"""``python -m relu_core logits``, ``models`` and ``datasets``: a model's logits on a data set written to an
npz, and the model names and data sets the CLI accepts. Bad input exits with code 2 and one line (handled by
``relu_core.cli``).
"""

from __future__ import annotations

import argparse

import numpy as np

from relu_core import validation
from relu_core.cli import shared
from relu_core.validation import parse_int


def add_parser(sub) -> None:
    """Register ``logits``, ``models`` and ``datasets`` on the CLI's subparsers."""
    lg = sub.add_parser("logits", help="compute a model's logits on a data set and write them to an npz")
    lg.add_argument("--model", metavar="NAME", help="a registered model (see `models`); not with an ONNX --weights")
    lg.add_argument("--weights", metavar="FILE", help=shared.WEIGHTS_HELP)
    lg.add_argument("--dataset", required=True, metavar="SPEC")
    lg.add_argument("--out", required=True, metavar="FILE.npz")
    shared.add_engine_arguments(lg)
    lg.set_defaults(handler=_cmd_logits)

    sub.add_parser("models", help="list the model names the CLI accepts").set_defaults(handler=_cmd_models)
    sub.add_parser("datasets", help="list the data sets the CLI accepts and whether they are available").set_defaults(
        handler=_cmd_datasets
    )


def _cmd_logits(args: argparse.Namespace, bar: shared.ProgressBar) -> int:
    from relu_core import distributed

    batch_size = None if args.batch_size is None else parse_int(args.batch_size, "--batch-size", minimum=1)
    main_process = distributed.is_main_process()
    out = validation.output_file(args.out) if main_process else None  # before the model runs; rank 0 writes
    run = shared.model_run(args, batch_size, bar if main_process else None)
    bar.close()
    if not main_process:  # under torchrun every rank holds the gathered logits; rank 0 writes them
        return 0
    shared.write_logits_npz(out, run.logits, run.labels, run.class_names)
    accuracy = float(np.mean(np.argmax(run.logits, axis=1) == run.labels))
    print(f"wrote {out}: logits {run.logits.shape[0]} x {run.logits.shape[1]}, accuracy {accuracy:.4f} ({run.source})")
    return 0


def _cmd_models(args: argparse.Namespace, bar: shared.ProgressBar) -> int:
    from relu_core import models

    for name, spec in models.MODELS.items():
        size = f"{spec.input_size}x{spec.input_size}x{spec.in_channels}"
        weights = models.pretrained_weights(name)
        known = f"  [pretrained: {weights}]" if weights is not None else ""
        print(f"{name:<18} {size:<9} {spec.description}{known}")
    return 0


def _cmd_datasets(args: argparse.Namespace, bar: shared.ProgressBar) -> int:
    from relu_core import datasets

    for info in datasets.list_datasets():
        if info.available:
            where = f"available: {info.location}"
        else:
            where = "not found locally" + (" (logits/evaluate --download fetches it)" if info.downloadable else "")
        print(f"{info.name:<16} {info.description}\n{'':<16} {where}")
    print("Also: imagefolder:PATH (class/image folders), zip:PATH (a zipped image folder), npz:PATH (x, y)")
    return 0
