"""``python -m relu_core export``: a run's fitted detector written as a deployable PyTorch ExportedProgram
(``.pt2``), ONNX graph (``.onnx``) or legacy TorchScript module (``.pt``) with its JSON card beside it
(``FILE.pt2.json``: the card of that one file; ``relu_core.detector_export``), at a target TPR or coverage or at a
guaranteed risk (``--risk``, ``--delta``). Bad input exits with code 2 and one line (handled by
``relu_core.cli``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from relu_core import validation
from relu_core.cli import shared
from relu_core.errors import InputError, printable


def add_parser(sub) -> None:
    """Register ``export`` on the CLI's subparsers."""
    ex = sub.add_parser(
        "export",
        help="write a run's fitted detector as an ExportedProgram (.pt2), ONNX (.onnx) or legacy TorchScript (.pt), "
        "with a JSON card",
        description="The detector is fitted on the run's seeded tuning split. Its threshold is the lowest reaching "
        "the target TPR (or coverage) on that split, or, with --risk, the one certified to keep at most R errors "
        "among accepted with confidence 1 − D, on a calibration half of the other samples (the card states the "
        "guarantee, the calibration size and the assumptions). The card gives its TPR, FPR, coverage and risk on "
        "the evaluation split with 95% bootstrap intervals. The module takes logits (or, with --input images, "
        "uint8 images (N, H, W, C) through the run's model) and returns (prediction, uncertainty, accept).",
    )
    ex.add_argument("--run", metavar="ID", help="a run this machine has computed or loaded (its id, as in a URL)")
    shared.add_run_arguments(ex, "logits file (.npz/.csv/.parquet)", required=False)
    ex.add_argument("--detector", default="relu", help="relu, doctor or msp (default relu)")
    ex.add_argument("--lambda", dest="lam", default="0.5", help="Rel-U's λ in [0, 1], or auto")
    ex.add_argument("--temperature", default="1", help="softmax temperature T (MSP: 1)")
    target = ex.add_mutually_exclusive_group()
    target.add_argument("--target-tpr", default=None, help="the operating point: this TPR on the tuning split (0.95)")
    target.add_argument("--target-coverage", default=None, help="or this coverage on the tuning split")
    target.add_argument(
        "--target-errors",
        default=None,
        help="or catch (reject) this share of the errors on the tuning split: the errors-positive operating point",
    )
    target.add_argument(
        "--risk",
        default=None,
        metavar="R",
        help="or a guaranteed risk: at most R errors among accepted (e.g. 0.02), certified on a calibration split",
    )
    ex.add_argument("--delta", default=None, metavar="D", help="with --risk: the guarantee's confidence is 1 − D (0.1)")
    ex.add_argument("--val-fraction", default="0.5", help="tuning split fraction (default 0.5)")
    ex.add_argument("--seed", default="0", help="split seed (default 0), also the bootstrap's")
    ex.add_argument(
        "--bootstrap",
        default="1000",
        help="bootstrap resamples of the evaluation split (default 1000; 0: none, the card then gives no intervals)",
    )
    ex.add_argument("--input", choices=["logits", "images"], default="logits", help="what the module takes")
    ex.add_argument(
        "--out",
        required=True,
        metavar="FILE.pt2|FILE.onnx|FILE.pt",
        help="the detector file (.pt: legacy TorchScript); its card goes beside it as FILE.pt2.json",
    )
    shared.add_engine_arguments(ex)
    ex.set_defaults(handler=_cmd_export)


def _number(text: str, flag: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise InputError(f"{flag} must be a number, got {text!r}") from None


def _run(args: argparse.Namespace, bar: shared.ProgressBar, batch_size: int | None):
    """The run that ``--run ID``, or the flags of :func:`shared.add_run_arguments`, name."""
    named = [args.run is not None, args.logits is not None, args.model is not None or shared.onnx_weights(args)]
    if sum(named) != 1:
        raise InputError("name one run: --run ID, --logits FILE, or --model NAME (or --weights FILE.onnx) --dataset")
    if args.run is None:
        return shared.run_from_args(args, bar, batch_size)[0]
    from relu_core import runs

    if args.weights is not None or args.dataset is not None:
        raise InputError("--weights and --dataset go with --model, not with --run")
    run = runs.reopen(args.run.strip(), progress=bar)
    bar.close()
    return run


def card_path(out: Path) -> Path:
    """Where the card of ``out`` goes: beside it, named after the whole file (``detector.onnx.json``), so that two
    files of one stem never share a card. InputError when a file there is not a card of ``out``
    (``detector_export.is_card_of``: a user's own JSON of any shape is kept, never replaced)."""
    from relu_core import detector_export

    path = validation.output_file(out.with_name(f"{out.name}.json"), "the card")
    if path.exists():
        try:
            ours = detector_export.is_card_of(json.loads(path.read_text(encoding="utf-8")), out.name)
        except (OSError, UnicodeDecodeError, ValueError, RecursionError):
            ours = False
        if not ours:
            raise InputError(
                f"the card would replace {printable(path.name)}, which is not the card of {printable(out.name)}: "
                "move it away or choose another --out"
            )
    return path


def _operating_point(args: argparse.Namespace) -> tuple[str, float, float]:
    """(kind, target, δ) from --target-tpr, --target-coverage, --target-errors or --risk/--delta."""
    from relu_core import risk_control  # it loads torch: not at import, so that --help stays fast

    if args.delta is not None and args.risk is None:
        raise InputError("--delta goes with --risk (the confidence of a guaranteed risk)")
    if args.risk is not None:
        risk = risk_control.check_risk(_number(args.risk, "--risk"), "--risk")
        delta = risk_control.DEFAULT_DELTA if args.delta is None else _number(args.delta, "--delta")
        return "risk", *risk_control.check_certifiable(risk, risk_control.check_delta(delta, "--delta"), "--risk")
    kind, target = ("tpr", args.target_tpr)
    if args.target_coverage is not None:
        kind, target = "coverage", args.target_coverage
    elif args.target_errors is not None:
        kind, target = "errors", args.target_errors
    value = _number(target or "0.95", f"--target-{kind}")
    if not 0 < value <= 1:
        raise InputError(f"--target-{kind} must lie in (0, 1], got {value:g}")
    return kind, value, risk_control.DEFAULT_DELTA


def _rate(rate) -> str:
    if rate.estimate != rate.estimate:  # NaN: 0/0
        return "undefined"
    if not rate.n_resamples:  # --bootstrap 0, or no resample where the rate is defined
        return f"{rate.estimate:.4f} (no interval)"
    return f"{rate.estimate:.4f} [{rate.low:.4f}, {rate.high:.4f}]"


def _cmd_export(args: argparse.Namespace, bar: shared.ProgressBar) -> int:
    from relu_core import cache, detector_export, explore, extras, protocol

    out = validation.output_file(args.out)
    suffix = out.suffix.lower()
    if suffix not in detector_export.SUFFIXES:
        raise InputError(f"--out must end in {', '.join(detector_export.SUFFIXES)}, got {printable(out.name)!r}")
    if suffix == ".onnx":
        extras.require("onnx", detector_export.ONNX_PURPOSE)
    card_file = card_path(out)
    temperature = _number(args.temperature, "--temperature")
    lam = shared.parse_lambda(args.lam)
    fraction = validation.parse_fraction(args.val_fraction, "--val-fraction")
    seed = validation.parse_int(args.seed, "--seed", minimum=0)
    n_resamples = validation.parse_int(args.bootstrap, "--bootstrap", minimum=0)  # 0: no intervals, as evaluate
    kind, target, delta = _operating_point(args)
    batch_size = None if args.batch_size is None else validation.parse_int(args.batch_size, "--batch-size", minimum=1)
    setting = explore.Setting(
        temperature=temperature,
        lam=lam,
        tune_fraction=fraction,
        seed=seed,
        op_kind=kind,
        op_target=target,
        op_delta=delta,
    )
    detector_export.unfitted(args.detector, setting)  # checked before the run is computed
    run = _run(args, bar, batch_size)
    protocol.check_evaluable(protocol.correctness(run.logits, run.labels))
    fitted = detector_export.from_setting(run, setting, args.detector, n_resamples=n_resamples)
    files = {out.name: args.input}
    content = detector_export.export(run, fitted, suffix, args.input, files)
    card = detector_export.card(run, fitted, files)
    cache.atomic_write(out, lambda stream: stream.write(content), mode=cache.DOCUMENT_MODE)
    cache.write_document(card_file, json.dumps(card, indent=2, ensure_ascii=False, allow_nan=False))
    evaluation = fitted.evaluation
    g = fitted.guarantee
    if g is not None:
        chosen = (
            f"certified for {g.guarantee_words()} on {g.n_calibration:,} calibration samples (coverage "
            f"{g.coverage:.4f}, bound {g.bound:.4f})"
        )
        measured = f"risk {_rate(evaluation['risk'])}, coverage {_rate(evaluation['coverage'])}"
    else:
        chosen = f"{kind} ≥ {target:g} on the tuning split"
        measured = f"TPR {_rate(evaluation['tpr'])}, FPR {_rate(evaluation['fpr'])}"
    print(
        f"wrote {printable(str(out))} and {printable(card_file.name)}: {fitted.detector.name}, threshold "
        f"{fitted.threshold:.6g} ({chosen}); evaluation split ({fitted.n_eval:,} samples): {measured}"
    )
    return 0
