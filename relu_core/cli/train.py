"""``python -m relu_core train``: train a classifier with one of the five objectives and keep it as a run.

Kept apart from :mod:`relu_core.training` so that building the CLI's parser imports no torch (it loads when the
command runs). Under ``torchrun --nproc-per-node K python -m relu_core train ...`` every rank trains its share of
each batch (DistributedDataParallel) and rank 0 writes and prints.
"""

from __future__ import annotations

import json
import sys

import numpy as np

from relu_core import validation
from relu_core.cli import shared
from relu_core.errors import InputError

#: The objectives and recipes the command offers (kept here so building the parser imports no torch; a test
#: checks them against ``training.OBJECTIVES`` and ``training.PRESETS``).
OBJECTIVE_CHOICES = ("cross-entropy", "logitnorm", "mixup", "regmixup", "regmixup-appendix", "openmix")
RECIPE_CHOICES = ("plain", "fast", "paper")


def _number(text: str | None, flag: str) -> float | None:
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        raise InputError(f"{flag} must be a number, got {text!r}") from None


def cmd_train(args, bar) -> int:
    """Train (or load the cached model), compute its test-split logits, remember the run, print a summary."""
    from relu_core import datasets, distributed, engine, runs, training
    from relu_core.training import estimate

    if args.dataset not in datasets.DATASETS:
        raise InputError(
            f"train needs a registered data set with a training split; choose one of: {', '.join(datasets.DATASETS)}"
        )
    model_name = shared.trainable_model_name(args.model, args.dataset)
    objective = training.Objective(
        args.objective,
        tau=_number(args.tau, "--tau"),
        alpha=_number(args.alpha, "--alpha"),
        gamma=_number(args.gamma, "--gamma"),
    )
    recipe = training.recipes.get(args.recipe or training.recipes.default_for(args.dataset))
    settings: dict[str, object] = {
        "objective": objective.settings(),
        "recipe": recipe.name,
        "epochs": training.recipes.default_epochs(recipe, model_name)
        if args.epochs is None
        else training.recipes.check_epochs(validation.parse_int(args.epochs, "--epochs", minimum=1), "--epochs"),
        "seed": validation.parse_int(args.seed, "--seed", minimum=0),
    }
    if objective.uses_outliers and not args.outliers:
        raise InputError("openmix needs --outliers (a data set of the same image size, e.g. mnist for fashion-mnist)")
    if args.outliers and not objective.uses_outliers:
        raise InputError(f"--outliers is used by openmix only, not by {objective.name}")
    if args.outliers:
        settings["outliers"] = args.outliers
    main_process = distributed.is_main_process()
    out = validation.output_file(args.out) if args.out and main_process else None  # checked before any work
    options = {"device": args.device, "download": args.download}
    bar_here = bar if main_process else None
    if main_process:  # what the training costs, before any work (the Objectives page's estimate and warning)
        device = engine.select_device(args.device).type
        objectives = [objective.name]
        for line in estimate.before_training(model_name, args.dataset, objectives, settings["epochs"], device):
            print(line, file=sys.stderr)
    # Training first: it reads the training split only and fails fast when it is missing; the run's logits on
    # the test split then load the stored weights (a cache hit).
    trained = runs.trained_model(model_name, args.dataset, settings, progress=bar_here, **options)
    bar.close()
    run = runs.logits_for(model_name, None, args.dataset, training_settings=settings, progress=bar_here, **options)
    bar.close()
    if not main_process:  # every rank trained and holds the logits; rank 0 records and prints
        return 0
    runs.remember(run)
    if out is not None:
        shared.write_logits_npz(out, run.logits, run.labels, run.class_names)
    accuracy = float(np.mean(np.argmax(run.logits, axis=1) == run.labels))
    meta = trained.metadata
    if args.json:
        curve = {name: [None if np.isnan(v) else float(v) for v in values] for name, values in trained.curve.items()}
        summary = {"run_id": run.run_id, "source": run.source, "test_accuracy": accuracy, **meta, "curve": curve}
        print(json.dumps(summary, indent=2))
        return 0
    held = meta["final_heldout_accuracy"]
    stop = "stopped early" if meta["stopped_early"] else "epoch cap reached"
    print(f"run {run.run_id}: {run.source}")
    print(
        f"  {meta['epochs_run']} epoch(s), {stop}; weights of epoch {meta['best_epoch']} "
        f"(held-out accuracy {held:.2%}); test accuracy {accuracy:.2%}; "
        f"{sum(trained.curve['seconds']):.1f} s of training on {meta['device']}"
    )
    if out is not None:
        print(f"  wrote {out}")
    return 0


def add_parser(sub) -> None:
    """Register ``train`` on the CLI's subparsers."""
    tp = sub.add_parser(
        "train",
        help="train a classifier with an objective (cross-entropy, logitnorm, mixup, regmixup, openmix) as a run",
        description="Trains on the training split with early stopping on a held-out 10 % of it (never the test "
        "split; only the epochs of the schedule's final phase count), resumes from its per-epoch checkpoint when interrupted, caches the weights with their settings "
        "and curve, and keeps the model's test-split logits as a run the app can open.",
    )
    tp.add_argument("--dataset", required=True, metavar="NAME", help="a registered data set, e.g. fashion-mnist")
    tp.add_argument(
        "--model", default="cnn", help="cnn (the data set's small CNN), resnet34, densenet121, or a registered name"
    )
    tp.add_argument(
        "--objective",
        default="cross-entropy",
        choices=list(OBJECTIVE_CHOICES),
        help="training objective (default cross-entropy; regmixup as the authors' code, regmixup-appendix as the "
        "paper's appendix)",
    )
    tp.add_argument(
        "--recipe",
        choices=list(RECIPE_CHOICES),
        help="training recipe (default: fast for CIFAR-10/100 and SVHN, plain otherwise; docs/how-to/training-objectives.md)",
    )
    tp.add_argument(
        "--epochs",
        default=None,
        help="epoch cap; early stopping may end sooner (default: the recipe's: plain 5, fast 24 (resnet9_small 14), "
        "paper 200)",
    )
    tp.add_argument("--seed", default="0", help="seed of the initialisation, the order, the held-out part (default 0)")
    tp.add_argument("--outliers", metavar="NAME", help="openmix's outlier data set (its training split, else its test)")
    tp.add_argument("--tau", help="LogitNorm's τ (default 0.04)")
    tp.add_argument(
        "--alpha",
        help="λ ~ Beta(α, α) (default: mixup 1; regmixup 20 up to 10 classes, else 10; regmixup-appendix "
        "and openmix 10)",
    )
    tp.add_argument("--gamma", help="weight of the mixed term (default: regmixup-appendix 0.5, openmix 1)")
    tp.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda", "mps"], type=shared.available_device)
    tp.add_argument("--download", action="store_true", help="download a registered data set if missing")
    tp.add_argument("--out", metavar="FILE.npz", help="also write the test-split logits to this file")
    tp.add_argument("--json", action="store_true", help="print the settings, metadata and curve as JSON")
    tp.set_defaults(handler=cmd_train)
