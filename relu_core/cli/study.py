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
import re
import sys
from pathlib import Path

from relu_core import validation
from relu_core.cli import shared
from relu_core.errors import InputError
from relu_core.studies import STUDIES

#: The studies of one run (``STUDIES``), then ``objectives``: one model per training objective, trained here.
STUDY_NAMES = (*STUDIES, "objectives")


def _unknown_study(parser: argparse.ArgumentParser):
    """``parser.error`` that names an unknown study in the project's words (argparse says "invalid choice")."""
    error = parser.error

    def study_error(message: str) -> None:
        found = re.search(r"argument NAME: invalid choice: '([^']*)'", message)
        if found:
            message = f"unknown study {found.group(1)!r}; choose one of: {', '.join(STUDY_NAMES)}"
        error(message)

    return study_error


def _common(parser: argparse.ArgumentParser, *, run: bool) -> None:
    """The options every study takes (``run``: the flags naming the run a study of one run reads)."""
    if run:
        shared.add_run_arguments(
            parser,
            "logits file (.npz/.csv/.parquet); default: the default run (Fashion-MNIST when here, else digits)",
            required=False,
        )
    parser.add_argument(
        "--download",
        action="store_true",
        help="download a registered data set of --dataset when missing (e.g. MNIST's training split)",
    )
    parser.add_argument(
        "--bootstrap", default="1000", help="paired bootstrap resamples per point (default 1000; 0: none)"
    )
    parser.add_argument(
        "--device", default="auto", choices=["auto", "cpu", "cuda", "mps"], type=shared.available_device
    )
    parser.add_argument("--json", action="store_true", help="print the result as one JSON object")


def add_parser(sub) -> None:
    """Register the ``study`` subcommand and, under it, one parser per study: ``study NAME --help`` lists that
    study's options only."""
    st = sub.add_parser(
        "study",
        help="run one of the paper's studies: " + ", ".join(STUDY_NAMES),
        description="Mean ± std over seeds, the paired Rel-U − Doctor difference with its 95 % bootstrap interval; "
        "D* fitted on tuning splits only. Results are cached by their settings.",
    )
    st.error = _unknown_study(st)
    names = st.add_subparsers(dest="name", metavar="NAME", required=True, parser_class=type(st))
    for name, study in STUDIES.items():
        one = names.add_parser(name, help=study.description, description=study.description)
        _common(one, run=True)
        one.add_argument(
            "--seeds", default=None, help="number of seeded splits (default 10; the ε ablation on a CPU: 3)"
        )
        if name in ("ablation", "calibration", "paper-protocol"):
            one.add_argument("--val-fraction", default="0.5", help="tuning fraction (default 0.5)")
        if name == "paper-protocol":
            one.add_argument(
                "--eps-grid",
                default=None,
                metavar="GRID",
                help="also search ε from rung 3 on: 'authors' (0, 0.0005, ..., 0.004), 'cpu' (0, 0.001, 0.002, "
                "0.004) or comma-separated values; needs --model (a logits file cannot be perturbed); hours on a CPU "
                "for CIFAR-10 with the authors' grid",
            )
        if name in ("tuning-split", "mismatch"):
            one.add_argument(
                "--fractions",
                default="0.1,0.2,0.33,0.5",
                help="tuning fractions (comma-separated, default 0.1,0.2,0.33,0.5)",
            )
        if name == "ablation":
            one.add_argument("--axes", default="lambda,temperature", help="ablation axes: lambda,temperature,eps")
            one.add_argument("--lambdas", default=None, help="λ grid (default 0,0.1,...,1)")
            one.add_argument("--temperatures", default=None, help="T grid (default log grid 0.1..1000)")
            one.add_argument("--epsilons", default=None, help="ε grid (default the paper's, 0..0.004)")
            one.add_argument(
                "--subsample",
                default="auto",
                help="images for the ε ablation: a number, all, or auto (1000 on a CPU, all on a GPU)",
            )
        if name == "mismatch":
            one.add_argument("--other", default="cifar100-exact", help="the other data set (default cifar100-exact)")
            one.add_argument(
                "--exclude",
                default=None,
                help="comma-separated classes of the other set to drop (default: the paper's 13 for CIFAR-100, "
                "none otherwise; 'none' for none)",
            )
        one.add_argument("--no-cache", action="store_true", help="recompute even when a cached result exists")
        one.add_argument("--out", metavar="DIR", help="also write CSVs, result.json and the figures (HTML + CSV) here")
        one.set_defaults(handler=handle)
    add_objectives_parser(names)


def add_objectives_parser(names) -> None:
    """``study objectives``: its own options (it trains its models; no run is named)."""
    ob = names.add_parser(
        "objectives",
        help="the paper's Table 1: one model per training objective, trained here, then MSP, ODIN, Doctor and Rel-U",
        description="Trains one model per objective on the data set's training split (cached; early stopping on a "
        "held-out part of it, never the test split), then evaluates MSP, ODIN, Doctor and Rel-U on its test split "
        "over seeded tuning/evaluation splits: honest selection (T and λ inside the tuning split) beside the "
        "oracle one (on the evaluation split, labelled), and the paper's own row where it matches.",
    )
    ob.add_argument("--dataset", default=None, metavar="NAME", help="a registered data set (default fashion-mnist)")
    ob.add_argument(
        "--model",
        default=None,
        metavar="NAME",
        help="the network: cnn (the data set's small CNN), resnet9, resnet9_small, resnet34, densenet121 or a "
        "registered name (default: the data set's; docs/how-to/training-objectives.md)",
    )
    ob.add_argument(
        "--objectives",
        default=None,
        help="comma-separated (default: the paper's five the data set supports; regmixup-appendix can be named)",
    )
    ob.add_argument(
        "--recipe",
        default=None,
        choices=["plain", "fast", "paper"],
        help="training recipe (default: fast for CIFAR-10/100 and SVHN, plain otherwise)",
    )
    ob.add_argument(
        "--epochs",
        default=None,
        help="epoch cap of each model (default: 1 under plain, the recipe's otherwise; resnet9_small 14)",
    )
    ob.add_argument("--train-seed", default="0", help="training seed (default 0)")
    ob.add_argument(
        "--outliers",
        default=None,
        help="OpenMix's outlier data set (default mnist for fashion-mnist, dead-leaves for CIFAR-10)",
    )
    ob.add_argument("--seeds", default=None, help="number of seeded splits (default 10)")
    ob.add_argument("--val-fraction", default="0.5", help="tuning fraction (default 0.5)")
    ob.add_argument(
        "--selection",
        default="tuning",
        choices=["tuning", "fixed"],
        help="T and λ chosen by cross-validation inside each tuning split (the paper's, default; the oracle "
        "selection is shown beside it) or fixed T = 1, λ = 0.5",
    )
    ob.add_argument("--eps-grid", default=None, metavar="GRID", help=shared.EPS_GRID_HELP + " (each trained model)")
    _common(ob, run=False)
    ob.add_argument(
        "--out",
        metavar="DIR",
        help="also write table.csv, auroc.csv, paper_reference.csv and result.json here (checked before any work)",
    )
    ob.set_defaults(handler=handle_objectives)


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
        return shared.load_logits_file(args.logits)
    if shared.onnx_weights(args):  # an ONNX classifier carries its architecture: no --model
        return shared.model_run(args, None, bar)
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
    if name in ("ablation", "calibration", "paper-protocol"):
        options["tune_fraction"] = validation.parse_fraction(args.val_fraction, "--val-fraction")  # one value
    if name == "paper-protocol" and args.eps_grid is not None:
        options["epsilons"] = shared.parse_eps_grid(args.eps_grid)
        options["device"] = args.device
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

    if result.study == "paper-protocol":  # the ladder: one rung a block, not a sweep
        from relu_core.studies import ladder

        settings = {k: v for k, v in result.settings.items() if k != "rungs"}
        notes = [f"Note: {n}" for n in result.notes]
        return "\n".join([result.title, f"Settings: {json.dumps(settings)}", *notes, ladder.ladder_text(result)])
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
    """``result.to_dict`` (strict JSON) led by the run it was computed on (the ladder's ``rungs`` too, one object a
    rung)."""
    record = {"run": {"source": run.source, "run_id": run.run_id}, **result.to_dict(strict_json=True)}
    if result.study == "paper-protocol":
        record = {"run": record["run"], "rungs": record["settings"]["rungs"], **record}
    return record


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
    """``study objectives``: every option checked and ``--out`` checked before any training; train what is
    missing, evaluate, write ``--out``, print the answer and the table (or ``--json``)."""
    from relu_core import engine, training
    from relu_core.studies import objectives
    from relu_core.training import estimate

    dataset = args.dataset or "fashion-mnist"
    model = shared.trainable_model_name(args.model or _default_model(dataset), dataset)
    chosen = None if args.objectives is None else [o.strip() for o in args.objectives.split(",") if o.strip()]
    options = {
        "objectives": chosen,
        "recipe": args.recipe,
        "epochs": None
        if args.epochs is None
        else training.recipes.check_epochs(validation.parse_int(args.epochs, "--epochs", minimum=1), "--epochs"),
        "train_seed": validation.parse_int(args.train_seed, "--train-seed", minimum=0),
        "outliers": args.outliers,
        "seeds": 10 if args.seeds is None else validation.parse_int(args.seeds, "--seeds", minimum=1),
        "tune_fraction": validation.parse_fraction(args.val_fraction, "--val-fraction"),
        "selection": args.selection,
        "n_resamples": validation.parse_int(args.bootstrap, "--bootstrap", minimum=0),
        "device": args.device,
        "epsilons": None if args.eps_grid is None else shared.parse_eps_grid(args.eps_grid),
    }
    if options["epsilons"] is not None and args.selection != "tuning":
        raise InputError("--eps-grid is searched by the selection: it goes with --selection tuning")
    out = None if args.out is None else validation.output_folder(args.out)  # before the work
    # what the training costs, before any work (the Objectives page's estimate and warning; cached models take none)
    recipe = training.recipes.get(args.recipe or training.recipes.default_for(dataset)).name
    epochs = objectives.default_epochs(recipe, model) if options["epochs"] is None else options["epochs"]
    trained = chosen or objectives.supported_objectives(dataset)
    device = engine.select_device(args.device).type
    cached = objectives.cached_objectives(
        dataset, model, trained, epochs=epochs, recipe=recipe, seed=options["train_seed"], outliers=args.outliers
    )  # read back, not trained: the page's count
    for line in estimate.before_training(model, dataset, trained, epochs, device, cached=cached):
        print(line, file=sys.stderr)
    result = objectives.objectives_study(dataset, model, **options, progress=bar)
    bar.close()
    if out is not None:  # the files first: a reader of stdout that stops early must not lose them
        written = write_objectives(result, out)
        print(f"wrote {len(written)} files to {args.out}", file=sys.stderr)
    if args.json:
        print(json.dumps(result.to_dict(), indent=1))
        return 0
    print(format_objectives(result))
    return 0


def _default_model(dataset: str) -> str:
    from relu_core import engine, models

    choices = models.trainable_models(dataset, gpu=engine.select_device("auto").type == "cuda")
    return choices[0] if choices else "cnn"


def format_objectives(result) -> str:
    """The answer in one sentence, the settings, the table (honest beside oracle), AUROC, the paper's rows."""
    from relu_core.studies import paper_table

    lines = [
        result.answer(),
        f"Training objectives: {result.model} on {result.dataset}, {result.recipe} recipe, epoch cap {result.epochs}, "
        f"{len(result.seeds)} seeds, selection {result.selection}; FPR95 mean (std), * the row's best",
        *(f"Note: {note}" for note in result.notes),
        result.table().to_string(index=False),
        "",
        result.auroc_table().to_string(index=False),
    ]
    if both := result.operating_points():  # the two FPR95 conventions, each with its interval
        lines += ["", "Both operating points (honest selection, mean over seeds):", *(f"  {line}" for line in both)]
    reference = result.reference_table()
    if not reference.empty:
        lines += ["", paper_table.objectives_heading(), reference.to_string(index=False)]
        lines += [f"Note: {note}" for note in (result.images_note(),) if note]
    missing = paper_table.not_recorded(result.dataset, result.model, [row.objective for row in result.rows])
    if missing:
        lines += ["", missing]
    return "\n".join(lines)


def write_objectives(result, folder: Path) -> list[Path]:
    """``table.csv``, ``auroc.csv``, ``paper_reference.csv`` (when the paper has rows for it) and ``result.json``
    under ``folder`` (created if missing), each written atomically (``cache.write_document``)."""
    from relu_core import cache, csv_text

    folder = validation.output_folder(folder)
    texts = {
        "table.csv": csv_text.frame_csv(result.table()),
        "auroc.csv": csv_text.frame_csv(result.auroc_table()),
        "result.json": json.dumps(result.to_dict(), indent=1),
    }
    reference = result.reference_table()
    if not reference.empty:
        texts["paper_reference.csv"] = csv_text.frame_csv(reference)
    return [cache.write_document(folder / name, text) for name, text in texts.items()]


def handle(args: argparse.Namespace, bar) -> int:
    from relu_core import studies

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
        print(json.dumps(_with_paper(_with_run(result, run), result, run), indent=1))
    else:
        print(f"Run: {run.source or 'logits'} (run id {run.run_id})\n{format_result(result)}")
        print(_paper_text(result, run), end="")
    return 0


def _with_paper(record: dict, result, run) -> dict:
    """``record`` with the paper's rows of the study (``paper_reference``: the calibration study's tab:calibration,
    the paper's protocol study's Table 1 rows of the data set); other studies' as they are."""
    from relu_core.studies import calibration, ladder, paper_table

    if result.study == calibration.NAME:
        return {**record, "paper_reference": calibration.paper_reference_dict(run)}
    if result.study == ladder.NAME:
        dataset, model = run.dataset_name, run.model_name or None
        found = paper_table.objective_rows(dataset, list(paper_table.OBJECTIVES.values()), model=model)
        return {
            **record,
            "paper_reference": {
                "heading": paper_table.ladder_heading(),
                "rows": [{**row.to_dict(), "network_note": paper_table.network_note(row, model)} for row in found],
                "note": None if found else paper_table.no_table("table1", dataset),
                "images_note": paper_table.images_note(run) if found else None,  # as the text shows it
            },
        }
    return record


def _paper_text(result, run) -> str:
    """The paper's rows beside ours, for the studies the paper has a table of (calibration; the paper's protocol
    study: Table 1), else ""."""
    from relu_core.studies import calibration, ladder, paper_table

    if result.study == calibration.NAME:
        frame, notes = calibration.paper_reference(result, run)
        heading = calibration.paper_heading()
    elif result.study == ladder.NAME:
        frame, notes = paper_table.ladder_reference(run)
        heading = paper_table.ladder_heading()
    else:
        return ""
    lines = [""]
    if not frame.empty:
        lines += [heading, frame.to_string(index=False)]
    return "\n".join(lines + notes) + "\n"
