"""``python -m relu_core export``: a run's fitted detector written as a deployable TorchScript module (``.pt``) or
ONNX graph (``.onnx``) with its JSON card beside it (``relu_core.detector_export``). Bad input exits with code 2
and one line (handled by ``relu_core.cli``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from relu_core import cli_shared, validation
from relu_core.errors import InputError


def add_parser(sub) -> None:
    """Register ``export`` on the CLI's subparsers."""
    ex = sub.add_parser(
        "export",
        help="write a run's fitted detector as TorchScript (.pt) or ONNX (.onnx), with a JSON card",
        description="The detector is fitted on the run's seeded tuning split, its threshold is the lowest reaching "
        "the target TPR (or coverage) there; the card gives its TPR and FPR on the evaluation split with 95% "
        "bootstrap intervals. The module takes logits (or, with --input images, uint8 images (N, H, W, C) "
        "through the run's model) and returns (prediction, uncertainty, accept).",
    )
    ex.add_argument("--run", metavar="ID", help="a run this machine has computed or loaded (its id, as in a URL)")
    cli_shared.add_run_arguments(ex, "logits file (.npz/.csv/.parquet)", required=False)
    ex.add_argument("--detector", default="relu", help="relu, doctor or msp (default relu)")
    ex.add_argument("--lambda", dest="lam", default="0.5", help="Rel-U's λ in [0, 1], or auto")
    ex.add_argument("--temperature", default="1", help="softmax temperature T (MSP: 1)")
    target = ex.add_mutually_exclusive_group()
    target.add_argument("--target-tpr", default=None, help="the operating point: this TPR on the tuning split (0.95)")
    target.add_argument("--target-coverage", default=None, help="or this coverage on the tuning split")
    ex.add_argument("--val-fraction", default="0.5", help="tuning split fraction (default 0.5)")
    ex.add_argument("--seed", default="0", help="split seed (default 0), also the bootstrap's")
    ex.add_argument("--bootstrap", default="1000", help="bootstrap resamples of the evaluation split (default 1000)")
    ex.add_argument("--input", choices=["logits", "images"], default="logits", help="what the module takes")
    ex.add_argument("--out", required=True, metavar="FILE.onnx|FILE.pt", help="the card goes beside it (FILE.json)")
    cli_shared.add_engine_arguments(ex)
    ex.set_defaults(handler=_cmd_export)


def _number(text: str, flag: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise InputError(f"{flag} must be a number, got {text!r}") from None


def _run(args: argparse.Namespace, bar: cli_shared.ProgressBar, batch_size: int | None):
    """The run that ``--run ID``, or the flags of :func:`cli_shared.add_run_arguments`, name."""
    named = [args.run is not None, args.logits is not None, args.model is not None or cli_shared.onnx_weights(args)]
    if sum(named) != 1:
        raise InputError("name one run: --run ID, --logits FILE, or --model NAME (or --weights FILE.onnx) --dataset")
    if args.run is None:
        return cli_shared.run_from_args(args, bar, batch_size)[0]
    from relu_core import runs

    if args.weights is not None or args.dataset is not None:
        raise InputError("--weights and --dataset go with --model, not with --run")
    run = runs.reopen(args.run.strip(), progress=bar)
    bar.close()
    return run


def _cmd_export(args: argparse.Namespace, bar: cli_shared.ProgressBar) -> int:
    from relu_core import cache, detector_export, explore, protocol

    out = validation.output_file(args.out)
    if out.suffix.lower() not in detector_export.SUFFIXES:
        raise InputError(f"--out must end in {' or '.join(detector_export.SUFFIXES)}, got {out.name!r}")
    card_path = validation.output_file(out.with_suffix(".json"), "the card")
    temperature = _number(args.temperature, "--temperature")
    lam = cli_shared.parse_lambda(args.lam)
    fraction = validation.parse_fraction(args.val_fraction, "--val-fraction")
    seed = validation.parse_int(args.seed, "--seed", minimum=0)
    n_resamples = validation.parse_int(args.bootstrap, "--bootstrap", minimum=1)
    kind, target = ("coverage", args.target_coverage) if args.target_coverage is not None else ("tpr", args.target_tpr)
    target = _number(target or "0.95", f"--target-{kind}")
    if not 0 < target <= 1:
        raise InputError(f"--target-{kind} must lie in (0, 1], got {target:g}")
    batch_size = None if args.batch_size is None else validation.parse_int(args.batch_size, "--batch-size", minimum=1)
    setting = explore.Setting(temperature=temperature, lam=lam, tune_fraction=fraction, seed=seed, op_kind=kind)
    detector_export.unfitted(args.detector, setting)  # checked before the run is computed
    run = _run(args, bar, batch_size)
    protocol.check_evaluable(protocol.correctness(run.logits, run.labels))
    fitted = detector_export.fit_deployable(
        run,
        args.detector,
        temperature=temperature,
        lam=lam,
        tune_fraction=fraction,
        seed=seed,
        op_kind=kind,
        op_target=target,
        n_resamples=n_resamples,
    )
    files = {out.name: args.input}
    content = detector_export.export(run, fitted, out.suffix.lower(), args.input, files)
    card = detector_export.card(run, fitted, files)
    cache.atomic_write(out, lambda stream: stream.write(content))
    cache.write_document(card_path, json.dumps(card, indent=2, ensure_ascii=False))
    evaluation = fitted.evaluation
    print(
        f"wrote {out} and {Path(card_path).name}: {fitted.detector.name}, threshold {fitted.threshold:.6g} "
        f"({kind} ≥ {target:g} on the tuning split); evaluation split: TPR {evaluation['tpr'].estimate:.4f} "
        f"[{evaluation['tpr'].low:.4f}, {evaluation['tpr'].high:.4f}], FPR {evaluation['fpr'].estimate:.4f} "
        f"[{evaluation['fpr'].low:.4f}, {evaluation['fpr'].high:.4f}]"
    )
    return 0
