"""``python -m relu_core study NAME ...``: the studies without the dashboard (same numbers as the Studies page).

The run is the default one (Fashion-MNIST + a small CNN when the data set is on the machine, else digits; as
``python -m relu_core demo``) unless ``--logits`` or ``--model``/``--dataset`` name another; the output names
it. Text tables go to stdout (``--json``: one JSON object, NaN written as null); ``--out DIR`` also writes
every frame as CSV, ``result.json`` and each figure as standalone HTML and CSV. Bad input exits with code 2
and one line (handled by :mod:`relu_core.cli`). Heavy imports happen inside the handler, so ``--help`` and the
other commands stay fast.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from relu_core import cli_shared, validation
from relu_core.errors import InputError
from relu_core.studies import STUDIES

#: The studies of one run (``STUDIES``), then ``objectives``: one model per training objective, trained here.
STUDY_NAMES = (*STUDIES, "objectives")


def add_parser(sub) -> None:
    """Register the ``study`` subcommand on the main parser's subparsers."""
    st = sub.add_parser(
        "study",
        help="run one of the paper's studies: " + ", ".join(STUDY_NAMES),
        description="Mean ± std over seeds, the paired Rel-U − Doctor difference with its 95 % bootstrap interval; "
        "D* fitted on tuning splits only. Results are cached by their settings.",
    )
    st.add_argument("name", metavar="NAME", help=" | ".join(STUDY_NAMES))
    cli_shared.add_run_arguments(
        st,
        "logits file (.npz/.csv/.parquet); default: the default run (Fashion-MNIST when here, else digits)",
        required=False,
    )
    st.add_argument(
        "--download",
        action="store_true",
        help="download a registered data set of --dataset when missing (e.g. MNIST's training split)",
    )
    st.add_argument("--seeds", default=None, help="number of seeded splits (default 10; the ε ablation on a CPU: 3)")
    st.add_argument("--val-fraction", default="0.5", help="tuning fraction for ablation and calibration (default 0.5)")
    st.add_argument(
        "--fractions",
        default="0.1,0.2,0.33,0.5",
        help="tuning fractions for tuning-split and mismatch (comma-separated, default 0.1,0.2,0.33,0.5)",
    )
    st.add_argument("--axes", default="lambda,temperature", help="ablation axes: lambda,temperature,eps")
    st.add_argument("--lambdas", default=None, help="ablation λ grid (default 0,0.1,...,1)")
    st.add_argument("--temperatures", default=None, help="ablation T grid (default log grid 0.1..1000)")
    st.add_argument("--epsilons", default=None, help="ablation ε grid (default the paper's, 0..0.004)")
    st.add_argument(
        "--subsample",
        default="auto",
        help="images for the ε ablation: a number, all, or auto (1000 on a CPU, all on a GPU)",
    )
    st.add_argument("--other", default="cifar100-exact", help="mismatch: the other data set (default cifar100-exact)")
    st.add_argument(
        "--exclude",
        default=None,
        help="mismatch: comma-separated classes of the other set to drop (default: the paper's 13 for "
        "CIFAR-100, none otherwise; 'none' for none)",
    )
    objectives = st.add_argument_group("objectives (the paper's Table 1: --dataset, --model cnn by default)")
    objectives.add_argument("--objectives", default=None, help="comma-separated (default: all five)")
    objectives.add_argument(
        "--epochs", default=None, help="epoch cap of each model (default: the table's, studies.objectives.TABLE_EPOCHS)"
    )
    objectives.add_argument("--train-seed", default="0", help="training seed (default 0)")
    objectives.add_argument(
        "--outliers", default=None, help="OpenMix's outlier data set (default mnist for fashion-mnist)"
    )
    objectives.add_argument(
        "--selection",
        default="tuning",
        choices=["tuning", "fixed"],
        help="T and λ chosen by cross-validation inside each tuning split (the paper's, default) or fixed T = 1, λ = 0.5",
    )
    st.add_argument("--bootstrap", default="1000", help="paired bootstrap resamples per point (default 1000; 0: none)")
    st.add_argument(
        "--device", default="auto", choices=["auto", "cpu", "cuda", "mps"], type=cli_shared.available_device
    )
    st.add_argument("--no-cache", action="store_true", help="recompute even when a cached result exists")
    st.add_argument("--json", action="store_true", help="print the result as one JSON object")
    st.add_argument("--out", metavar="DIR", help="also write CSVs, result.json and the figures (HTML + CSV) here")
    st.set_defaults(handler=handle)


def _numbers(flag: str, text: str | None) -> list[float] | None:
    if text is None:
        return None
    try:
        values = [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise InputError(f"{flag} must be comma-separated numbers, got {text!r}") from None
    if not values:
        raise InputError(f"{flag} is empty")
    return values


def _load_run(args, bar):
    from relu_core import runs

    if args.logits is not None:
        if args.weights or args.dataset:
            raise InputError("--weights and --dataset go with --model, not with --logits")
        return cli_shared.load_logits_file(args.logits)
    if cli_shared.onnx_weights(args):  # an ONNX classifier carries its architecture: no --model
        return cli_shared.model_run(args, None, bar)
    if args.model is not None:
        if args.dataset is None:
            raise InputError("--model needs --dataset")
        return runs.logits_for(
            args.model, args.weights, args.dataset, device=args.device, progress=bar, download=args.download
        )
    if args.dataset or args.weights:
        raise InputError("--dataset and --weights need --model (an ONNX classifier: --weights FILE.onnx --dataset)")
    return runs.default_run(progress=bar)


def options_from_args(name: str, args) -> dict:
    """The keyword options of ``STUDIES[name].run`` from the parsed arguments (validated there)."""
    seeds = None if args.seeds is None else validation.parse_int(args.seeds, "--seeds", minimum=1)
    options: dict = {
        "seeds": seeds,
        "n_resamples": validation.parse_int(args.bootstrap, "--bootstrap", minimum=0),
        "use_cache": not args.no_cache,
    }
    if name in ("ablation", "calibration"):
        options["tune_fraction"] = validation.parse_fraction(args.val_fraction, "--val-fraction")  # one value
    if name in ("tuning-split", "mismatch"):
        options["fractions"] = _numbers("--fractions", args.fractions)
    if name == "ablation":
        options["axes"] = [a.strip() for a in args.axes.split(",") if a.strip()]
        for key, flag in (("lambdas", "--lambdas"), ("temperatures", "--temperatures"), ("epsilons", "--epsilons")):
            values = _numbers(flag, getattr(args, key))
            if values is not None:
                options[key] = values
        text = args.subsample.strip().lower()
        options["subsample"] = (
            "auto"
            if text == "auto"
            else None
            if text == "all"
            else validation.parse_int(text, "--subsample", minimum=0)
        )
        options["device"] = args.device
    if name == "mismatch":
        options["other"] = args.other
        if args.exclude is not None:
            options["exclude"] = (
                ()
                if args.exclude.strip().lower() == "none"
                else [c.strip() for c in args.exclude.split(",") if c.strip()]
            )
        options["device"] = args.device
    return options


def format_result(result) -> str:
    """Text tables: per series, x against each detector's FPR95 and AUROC (mean ± std), then Rel-U − Doctor."""
    from relu_core import metric_info

    lines = [result.title, f"Settings: {json.dumps(result.settings)}", *(f"Note: {n}" for n in result.notes)]
    for series, info in result.series.items():
        rows = result.curves[result.curves["series"] == series]
        detectors = list(dict.fromkeys(rows["detector"]))
        lines += [
            "",
            (
                f"[{series}] {info.get('x_label', series)}; mean ± std over seeds "
                f"({metric_info.FPR95.name}, positives = correctly classified)"
            ),
        ]
        header = [info.get("x_label", "x")] + [f"{d} {m}" for m in ("fpr95", "auroc") for d in detectors]
        table = [header]
        for x in dict.fromkeys(rows["x"]):
            at = rows[rows["x"] == x].set_index(["detector", "metric"])
            table.append(
                [f"{x:g}"]
                + [
                    f"{at.loc[(d, m), 'mean']:.4f} ± {at.loc[(d, m), 'std']:.4f}"
                    for m in ("fpr95", "auroc")
                    for d in detectors
                ]
            )
        widths = [max(len(r[i]) for r in table) for i in range(len(header))]
        lines += ["  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in table]
        paired = result.paired[(result.paired["series"] == series) & (result.paired["metric"] == "fpr95")]
        if not paired.empty:
            lines.append("Rel-U − Doctor, FPR95 (mean ± std over seeds; verdict from the 95 % paired bootstrap):")
            lines += [
                f"  {x:g}: {metric_info.signed(m)} ± {s:.4f}   {v}"
                for x, m, s, v in zip(paired["x"], paired["mean"], paired["std"], paired["verdict"])
            ]
    for name, table in result.tables.items():
        if name in ("summary", "temperatures"):
            lines += ["", f"[{name}]", table.to_string(index=False, float_format=lambda v: f"{v:.4f}")]
    return "\n".join(lines)


def _with_run(result, run) -> dict:
    """``result.to_dict`` (strict JSON) led by the run it was computed on."""
    return {"run": {"source": run.source, "run_id": run.run_id}, **result.to_dict(strict_json=True)}


def write_outputs(result, folder: str | Path, run) -> list[Path]:
    """Every CSV, ``result.json`` (naming ``run``) and each figure (HTML + CSV) under ``folder`` (created if
    missing), each file written atomically (``cache.write_document``)."""
    from relu_core import cache
    from relu_core.studies import figures

    folder = validation.output_folder(folder)
    texts = dict(result.csv_files())
    texts["result.json"] = json.dumps(_with_run(result, run), indent=1)
    for slug, fig, sentence in figures.figures_for(result):
        texts[f"{slug}.html"] = figures.figure_html(fig, sentence)
        texts[f"{slug}.csv"] = figures.figure_csv(fig)
    return [cache.write_document(folder / name, text) for name, text in texts.items()]


def handle_objectives(args: argparse.Namespace, bar) -> int:
    """``study objectives``: train what is missing, evaluate, print the table (or ``--json``)."""
    from relu_core.studies import objectives

    if args.logits is not None or args.weights is not None:
        raise InputError("study objectives trains its models: give --dataset (and --model), not --logits or --weights")
    dataset = args.dataset or "fashion-mnist"
    result = objectives.objectives_study(
        dataset,
        cli_shared.trainable_model_name(args.model or "cnn", dataset),
        objectives=objectives.OBJECTIVES
        if args.objectives is None
        else [o.strip() for o in args.objectives.split(",") if o.strip()],
        epochs=objectives.TABLE_EPOCHS
        if args.epochs is None
        else validation.parse_int(args.epochs, "--epochs", minimum=1),
        train_seed=validation.parse_int(args.train_seed, "--train-seed", minimum=0),
        outliers=args.outliers,
        seeds=10 if args.seeds is None else validation.parse_int(args.seeds, "--seeds", minimum=1),
        tune_fraction=validation.parse_fraction(args.val_fraction, "--val-fraction"),
        selection=args.selection,
        n_resamples=validation.parse_int(args.bootstrap, "--bootstrap", minimum=0),
        device=args.device,
        progress=bar,
    )
    bar.close()
    if args.json:
        print(json.dumps(result.to_dict(), indent=1))
    else:
        print(
            f"Training objectives: {result.model} on {result.dataset}, epoch cap {result.epochs}, "
            f"{len(result.seeds)} seeds, selection {result.selection}; FPR95 mean (std), * the row's best\n"
            + result.table().to_string(index=False)
        )
    return 0


def handle(args: argparse.Namespace, bar) -> int:
    from relu_core import studies

    if args.name == "objectives":
        return handle_objectives(args, bar)
    study = studies.get(args.name)
    options = options_from_args(study.name, args)
    if args.out is not None:
        validation.output_folder(args.out)  # before the work
    run = _load_run(args, bar)
    bar.close()
    result = study.run(run, progress=bar, **options)
    bar.close()
    if args.out is not None:  # the files first: a reader of stdout that stops early must not lose them
        written = write_outputs(result, args.out, run)
        print(f"wrote {len(written)} files to {args.out}", file=sys.stderr)
    if args.json:
        print(json.dumps(_with_run(result, run), indent=1))
    else:
        print(f"Run: {run.source or 'logits'} (run id {run.run_id})\n{format_result(result)}")
    return 0
