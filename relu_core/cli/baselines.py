"""``python -m relu_core baselines``: the baselines study (``relu_core.baselines``) from the command line.

    python -m relu_core baselines --logits run.npz [--ensemble a.npz,b.npz] [--methods relu,doctor,conformal_raps]
    python -m relu_core baselines --model resnet56 --dataset imagefolder:../shared/data/cifar10/test_jpeg_q75
        [--coverage 0.9] [--val-fraction 0.2] [--seeds 10] [--bootstrap 1000] [--json] [--out DIR]

Bad input exits with code 2 and one line on stderr (handled by ``relu_core.cli``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from relu_core import csv_text, validation
from relu_core.cli import shared
from relu_core.errors import InputError


def add_parser(sub) -> None:
    """Register the ``baselines`` subcommand on ``relu_core.cli``'s subparsers."""
    p = sub.add_parser("baselines", help="MLP, MC-Dropout, Deep Ensembles and conformal beside Rel-U and Doctor")
    shared.add_run_arguments(p, "logits file (.npz/.csv/.parquet): no model, so no MC-Dropout", required=False)
    p.add_argument(
        "--methods", default=None, help="comma-separated detector keys (default: every one this run supports)"
    )
    p.add_argument(
        "--ensemble",
        default=None,
        metavar="FILES",
        help="comma-separated logits files of the ensemble members (same samples and labels)",
    )
    p.add_argument("--coverage", default="0.9", help="conformal coverage level 1 - α of APS and RAPS (default 0.9)")
    p.add_argument("--val-fraction", default="0.2", help="tuning fraction (default 0.2)")
    p.add_argument("--seeds", default="10", help="number of seeded splits (default 10)")
    p.add_argument("--bootstrap", default="1000", help="paired bootstrap resamples (default 1000; 0: none)")
    shared.add_engine_arguments(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--out", metavar="DIR", help="write the table, per-seed values and the figures (HTML, CSV) here")
    p.set_defaults(handler=run_command)


def _members(text: str, run) -> np.ndarray:
    stack = []
    for name in [t.strip() for t in text.split(",") if t.strip()]:
        member = shared.load_logits_file(name)
        if member.logits.shape != run.logits.shape or not np.array_equal(member.labels, run.labels):
            raise InputError(
                f"ensemble member {name} does not hold the run's samples: logits "
                f"{member.logits.shape} vs {run.logits.shape}, or other labels"
            )
        stack.append(member.logits)
    if len(stack) < 2:
        raise InputError("--ensemble needs at least 2 logits files")
    return np.stack(stack)


def format_result(result, title: str) -> str:
    """The study as aligned text: one row per detector (mean ± std), Rel-U − Doctor, skipped detectors."""
    from relu_core import metric_info, protocol

    shown = [metric_info.get(m) for m in metric_info.PAIRED_KEYS]
    header = ["detector", *(f"{m.label} ({m.better})" for m in shown)]
    rows = [
        [r.detector, *(m.mean_std(getattr(r, m.key + "_mean"), getattr(r, m.key + "_std")) for m in shown)]
        for r in result.table.itertuples()
    ]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]

    def fmt(row):
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))

    conventions = (
        f"{protocol.FPR_CONVENTION}; mean ± std over {len(result.seeds)} seed(s); split per seed "
        f"{result.n_tune} tuning / {result.n_eval} evaluation samples; Rel-U λ = 0.5 and Doctor at T = 1."
    )
    lines = [title, conventions, "", fmt(header), "  ".join("-" * w for w in widths), *map(fmt, rows)]
    notes = [f"  {r.detector}: {r.note}" for r in result.table.itertuples() if r.note]
    if notes:
        lines += ["", "Notes:", *notes]
    if result.paired:
        lines += ["", "Rel-U − Doctor on the same splits (95 % paired bootstrap interval of the mean over seeds):"]
        lines += [
            f"  {metric_info.signed(row.mean)} ± {row.std:.4f}   {row.verdict}"
            for row in result.paired_frame().itertuples()
        ]
    for key, reason in result.skipped.items():
        lines.append(f"skipped {key}: {reason}")
    return "\n".join(lines)


def _json(result) -> dict:
    table = {r["key"]: {k: v for k, v in r.items() if k != "key"} for r in result.table.to_dict("records")}
    paired = {
        row["metric"]: {k: row[k] for k in ("mean", "std", "estimate", "ci_low", "ci_high", "significant", "verdict")}
        for row in result.paired_frame().to_dict("records")
    }
    return {
        "detectors": table,
        "minus_doctor": paired,
        "skipped": result.skipped,
        "fpr95_positives": "correct",
        "seeds": list(result.seeds),
        "tune_fraction": result.tune_fraction,
        "coverage": result.coverage,
        "n_tune": result.n_tune,
        "n_eval": result.n_eval,
    }


def write_outputs(result, out: Path) -> list[Path]:
    """The table, the per-seed values and both figures (HTML and their data as CSV) under ``out``, each file
    written atomically (``cache.write_document``)."""
    from relu_core import baselines, cache, figures

    out = validation.output_folder(out)
    written = {
        out / "baselines.csv": csv_text.frame_csv(result.table),
        out / "baselines_per_seed.csv": csv_text.frame_csv(result.per_seed),
    }
    for name, fig in zip(("roc", "risk_coverage"), baselines.study_figures(result)):
        written[out / f"{name}.html"] = fig.to_html(include_plotlyjs=True, full_html=True)
        written[out / f"{name}.csv"] = figures.figure_csv(fig)
    return [cache.write_document(path, text) for path, text in written.items()]


def run_command(args: argparse.Namespace, bar) -> int:
    from relu_core import baselines

    coverage = validation.parse_fraction(args.coverage, "--coverage")
    fraction = validation.parse_fraction(args.val_fraction, "--val-fraction")
    seeds = validation.parse_int(args.seeds, "--seeds", minimum=1)
    n_resamples = validation.parse_int(args.bootstrap, "--bootstrap", minimum=0)  # 0: no interval
    batch_size = None if args.batch_size is None else validation.parse_int(args.batch_size, "--batch-size", minimum=1)
    keys = None if args.methods is None else [k.strip() for k in args.methods.split(",") if k.strip()]
    out = None if args.out is None else validation.output_folder(args.out)  # before the work
    if args.logits is None and args.model is None and not shared.onnx_weights(args):  # (both: argparse refuses)
        raise InputError("give either --logits FILE, or --model NAME (or --weights FILE.onnx) with --dataset")
    run, title = shared.run_from_args(args, bar, batch_size)
    members = None if args.ensemble is None else _members(args.ensemble, run)
    result = baselines.baselines_study(
        run,
        keys=keys,
        tune_fraction=fraction,
        seeds=range(seeds),
        coverage=coverage,
        member_logits=members,
        n_resamples=n_resamples,
        device=args.device,
        batch_size=batch_size,
        progress=bar,
    )
    bar.close()
    if out is not None:  # the files first: a reader of stdout that stops early must not lose them
        for path in write_outputs(result, out):
            print(f"wrote {path}", file=sys.stderr)
    if args.json:
        record = {**_json(result), "paper_reference": baselines.paper_reference_dict(run)}
        print(json.dumps(record, indent=2, default=str))
    else:
        print(format_result(result, title))
        print(format_paper(result, run))
    return 0


def format_paper(result, run) -> str:
    """The paper's Bayesian and conformal rows of the run's data set beside ours (or one line each saying the paper
    has none)."""
    from relu_core import baselines

    lines = []
    for key, (frame, notes) in baselines.paper_reference(result, run).items():
        lines.append("")
        if not frame.empty:
            lines += [baselines.paper_heading(key), frame.to_string(index=False)]
        lines += notes
    return "\n".join(lines)
