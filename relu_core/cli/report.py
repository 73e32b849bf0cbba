"""``python -m relu_core report``: the Explore report of a logits file, from the command line.

Kept apart from :mod:`relu_core.report` so that building the CLI's parser imports neither torch nor the
report's dependencies (they load when the command runs)."""

from __future__ import annotations

import numpy as np

from relu_core import validation
from relu_core.cli import shared
from relu_core.errors import InputError


def cmd_report(args) -> int:
    """``python -m relu_core report``: the report of a logits file at fixed settings."""
    from relu_core import explore, protocol
    from relu_core.report import write_report

    try:
        temperature = float(args.temperature)
    except ValueError:
        temperature = float("nan")
    if not (np.isfinite(temperature) and temperature > 0):
        raise InputError(f"--temperature must be one positive number, got {args.temperature!r}")
    fraction = validation.parse_fraction(args.val_fraction, "--val-fraction")
    seed = validation.parse_int(args.seed, "--seed", minimum=0)
    lam = shared.parse_lambda(args.lam)
    validation.output_file(args.out)
    run = shared.load_logits_file(args.logits)
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    setting = explore.Setting(
        temperature=temperature, lam=lam, tune_fraction=fraction, seed=seed, detectors=(*protocol.PAIRED, *methods)
    )
    text = explore.report_html(run, explore.view(run, setting), setting, logits_file=args.logits)
    out = write_report(args.out, text)
    print(f"wrote {out} ({len(text.encode()) / 1e6:.1f} MB, self-contained: opens offline)")
    return 0


def add_parser(sub) -> None:
    """Register ``report`` on the CLI's subparsers."""
    rp = sub.add_parser("report", help="write a self-contained HTML report (figures, metrics, provenance)")
    rp.add_argument("--logits", required=True, metavar="FILE.npz", help="logits file (.npz, .csv or .parquet)")
    rp.add_argument("--out", required=True, metavar="FILE.html")
    rp.add_argument("--methods", default="relu,doctor", help="comma-separated detectors (Rel-U and Doctor always)")
    rp.add_argument("--temperature", default="1.0", help="T of Rel-U and Doctor (default 1)")
    rp.add_argument("--lambda", dest="lam", default="0.5", help="Rel-U's λ in [0, 1], or auto")
    rp.add_argument("--val-fraction", default="0.5", help="tuning split fraction (default 0.5)")
    rp.add_argument("--seed", default="0", help="split seed (default 0)")
    rp.set_defaults(handler=lambda args, bar: cmd_report(args))
