"""``python -m relu_core evaluate`` and ``demo``: detectors evaluated on seeded splits of a run, as a text
table or JSON (``relu_core.protocol``). Bad input exits with code 2 and one line (handled by ``relu_core.cli``).
"""

from __future__ import annotations

import argparse
import json
import math
import sys

import numpy as np

from relu_core import metric_info, progress
from relu_core.cli import shared
from relu_core.errors import InputError
from relu_core.validation import parse_fraction, parse_int

#: Work estimated to take this long or more is announced on stderr before it starts (seconds).
LONG_WORK_S = 10.0


def add_parser(sub) -> None:
    """Register ``evaluate`` and ``demo`` on the CLI's subparsers."""
    ev = sub.add_parser(
        "evaluate",
        help="evaluate misclassification detectors on logits (or on a model and a data set)",
        description="Seeded tuning/evaluation splits; detectors fitted on the tuning part, metrics on the "
        "evaluation part, mean and std over seeds. FPR at 95% TPR takes correctly classified samples as "
        "positives.",
    )
    shared.add_run_arguments(
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
        "--protocol",
        choices=["honest", "oracle", "paper"],
        default=None,
        help="how settings are chosen: honest (= --select, inside the tuning split), oracle (= --oracle) or paper: "
        "the paper's protocol as the authors' code runs it (their T grid, λ grid, split n // r, errors-positive "
        "thinned FPR95, the five lowest-FPR95 setting x seed rows with every metric read at them; seeds 1..S, one "
        "model for every seed; no interval; ε: --eps-grid on a model run; λ: --lambda-grid, e.g. 0.5, the authors' "
        "code default)",
    )
    ev.add_argument(
        "--r",
        default="2",
        help="--protocol paper: the fit part is n // r (the authors offer 10 and 2; default 2, their table's)",
    )
    ev.add_argument(
        "--criterion",
        default="fpr95",
        choices=list(metric_info.KEYS),
        help="selection criterion for --select/--oracle (default fpr95)",
    )
    ev.add_argument("--folds", default="5", help="cross-validation folds for --select (default 5)")
    ev.add_argument("--eps-grid", default=None, metavar="GRID", help=shared.EPS_GRID_HELP)
    ev.add_argument(
        "--t-grid",
        default=None,
        metavar="T,...",
        help="the temperatures --select/--oracle search (default: each detector's grid); e.g. 1,1.5 to bound an "
        "ε selection on a CPU",
    )
    ev.add_argument(
        "--lambda-grid",
        default=None,
        metavar="L,...",
        help="the λ values --select/--oracle search for Rel-U; with --protocol paper the λ rows (default the studio's "
        "λ grid; 0.5 alone is the authors' code default, their λ values are unknown)",
    )
    ev.add_argument(
        "--eps",
        type=float,
        default=0.0,
        help="input pre-processing magnitude (needs --model; not for ONNX models: it needs gradients); D* is "
        "fitted on clean tuning logits",
    )
    shared.add_engine_arguments(ev)
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
        "--risk",
        default=None,
        metavar="R",
        help="also deploy each detector at a guaranteed risk: the threshold keeping at most R errors among accepted "
        "(e.g. 0.02) with confidence 1 − D, certified on a calibration half of each seed's evaluation part; the "
        "other half shows the realised risk and coverage",
    )
    ev.add_argument("--delta", default=None, metavar="D", help="with --risk: the guarantee's confidence is 1 − D (0.1)")
    ev.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object keyed by method (Rel-U's row holds minus_doctor), and paper_reference: the "
        "paper's Table 1 rows of the run's data set",
    )
    ev.set_defaults(handler=_cmd_evaluate)

    demo = sub.add_parser("demo", help="the default run end to end (Fashion-MNIST, else digits), all detectors")
    demo.add_argument("--seeds", default="10", help="number of seeded splits (default 10)")
    demo.add_argument("--json", action="store_true", help="print one JSON object keyed by method")
    demo.set_defaults(handler=_cmd_demo)


# ------------------------------------------------------------------------------------------ output
def format_table(result, *, title: str = "") -> str:
    """An aligned text table of an :class:`~relu_core.protocol.EvaluationResult` (mean ± std over seeds),
    the settings each method used, and the paired Rel-U − Doctor difference when both were evaluated."""
    from relu_core import stats
    from relu_core.protocol import FALLBACK_LABEL, describe_values

    def pm(key: str, metric: metric_info.Metric) -> str:
        return metric.mean_std(result.mean(key, metric.key), result.std(key, metric.key))

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
    eps_selected = result.eps_per_seed is not None
    header = [
        "method",
        "T",
        "λ",
        *(["ε"] if eps_selected else []),
        *(["settings searched"] if searched else []),
        *(f"{m.label} ({m.better})" for m in metric_info.METRICS),
    ]
    n_text = len(header) - len(metric_info.METRICS)
    rows = [
        [
            result.names[key],
            describe_values([t for t, _ in result.params[key]]),
            lam_cell(key),
            *([describe_values(result.eps_per_seed[key])] if eps_selected else []),
            *([str(result.n_settings[key])] if searched else []),
            *(pm(key, m) for m in metric_info.METRICS),
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
        f"Hyperparameters: {result.selection}; {result.eps_label}"
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
        first = next(iter(paired.values()))
        lines += [
            "",
            f"Rel-U − Doctor on the same splits (mean ± std over seeds; 95 % paired bootstrap interval of "
            f"the mean, {first['n_resamples']} resamples of the evaluation samples"
            + (
                f"; the interval is {stats.CONDITIONAL_LABEL}: the selection itself is not resampled, so as a "
                "comparison of each detector with its own selection it is too narrow"
                if first["conditional_on_selection"]
                else ""
            )
            + "):",
        ]
        for metric, row in paired.items():
            lines.append(f"  {metric_info.signed(row['mean'])} ± {row['std']:.4f}   {row['verdict']}")
    both = result.operating_points()
    if both:  # the two FPR95 conventions answer two questions: both are stated, each with its interval
        lines += ["", "Both operating points (mean over seeds):", *(f"  {line}" for line in both)]
    return "\n".join(lines)


def guarantee_json(at_risk) -> dict[str, dict]:
    """Per method, its deployment at a guaranteed risk (``risk_control.AtRiskResult.summary``); Rel-U's holds
    ``minus_doctor``: its coverage on the evaluation split minus Doctor's, with the paired bootstrap interval."""
    out = {key: at_risk.summary(key) for key in at_risk.methods}
    d = at_risk.minus_doctor
    if d is not None:
        per_seed = np.asarray(at_risk.minus_doctor_per_seed)
        out["relu"]["minus_doctor"] = {
            **d.to_dict(),
            "mean": float(per_seed.mean()),
            "std": float(per_seed.std()),
            "per_seed": per_seed.tolist(),
        }
    return out


def format_guarantee(at_risk, names: dict[str, str]) -> str:
    """The text block of ``evaluate --risk``: the guarantee in plain words, per method its certified and realised
    coverage and risk, and Rel-U − Doctor in coverage with its interval."""
    from relu_core import risk_control

    pct = risk_control.percent
    summaries = {key: at_risk.summary(key) for key in at_risk.methods}
    n_seeds = len(at_risk.seeds)
    coverage = {
        names[k]: v["evaluation_coverage"] if v["certified"] else "; ".join(v["refusals"]) for k, v in summaries.items()
    }
    first = at_risk.per_seed[at_risk.methods[0]][0]
    lines = [
        "",
        risk_control.sentence(
            at_risk.risk, at_risk.delta, coverage, f"coverage on the evaluation split, mean of {n_seeds} seed(s)"
        ),
        f"Each threshold is certified on a calibration half of each seed's evaluation part ({first.certificate.n_calibration:,} "
        f"samples), the realised risk and coverage read on the other half ({first.evaluation.n:,}); "
        f"{risk_control.METHOD}. Assumes {risk_control.ASSUMPTIONS}.",
    ]
    for key, v in summaries.items():
        if not v["certified"]:
            lines.append(f"  {names[key]}: no threshold certified on any seed ({'; '.join(v['refusals'])})")
            continue
        refused = n_seeds - v["certified"]
        lines.append(
            f"  {names[key]}: certified coverage {pct(v['certified_coverage'])} (calibration split); evaluation split: "
            f"coverage {pct(v['evaluation_coverage'])}, risk {pct(v['evaluation_risk'])} (above r* on "
            f"{v['evaluation_risk_above_target']} of {v['certified']} seed(s))"
            + (f"; refused on {refused} seed(s): {'; '.join(v['refusals'])}" if refused else "")
        )
    if at_risk.minus_doctor is not None:
        lines.append(
            "  Rel-U − Doctor, coverage on the evaluation split at the same guarantee: "
            + at_risk.minus_doctor.verdict()
            + " (the interval: a paired bootstrap of the evaluation samples, the certified thresholds fixed)"
        )
    return "\n".join(lines)


#: The one key of ``evaluate --json`` that is not a detector's: the paper's Table 1 rows of the run's data set.
PAPER_KEY = "paper_reference"


def _emit(result, as_json: bool, title: str, at_risk=None, run=None) -> None:
    """The result as text or JSON (keyed by method); with ``run``, the paper's Table 1 rows of its data set too:
    the text's last block, the JSON's :data:`PAPER_KEY` (``paper_table.table1_reference_dict``)."""
    from relu_core.studies import paper_table

    if as_json:
        table = result.to_dict()
        for row in table.values():  # the conventions travel with the numbers they qualify
            row["fpr95_positives"] = result.fpr_positive
            row["selection"] = result.selection
            if result.eps_grid is not None:
                row["eps_selection"] = result.eps_label
        if at_risk is not None:
            for key, guarantee in guarantee_json(at_risk).items():
                table[key]["guarantee"] = guarantee
        if run is not None:
            table[PAPER_KEY] = paper_table.table1_reference_dict(run)
        print(json.dumps(table, indent=2))
    else:
        text = format_table(result, title=title) + ("" if at_risk is None else format_guarantee(at_risk, result.names))
        print(text + ("" if run is None else "\n\n" + paper_table.table1_text(run)))


def _guarantee_options(args: argparse.Namespace) -> tuple[float, float] | None:
    """(r*, δ) of --risk/--delta, None without --risk; checked before any work."""
    from relu_core import risk_control

    if args.risk is None:
        if args.delta is not None:
            raise InputError("--delta goes with --risk (the confidence of a guaranteed risk)")
        return None
    if args.select or args.oracle:
        raise InputError("--risk deploys fixed settings: it does not go with --select or --oracle")
    if args.eps > 0:
        raise InputError("--risk certifies clean scores: it does not go with --eps")
    try:
        risk = float(args.risk)
        delta = risk_control.DEFAULT_DELTA if args.delta is None else float(args.delta)
    except ValueError:
        raise InputError(f"--risk and --delta must be numbers, got {args.risk!r} and {args.delta!r}") from None
    risk, delta = risk_control.check_risk(risk, "--risk"), risk_control.check_delta(delta, "--delta")
    return risk_control.check_certifiable(risk, delta, "--risk")


def _cmd_evaluate(args: argparse.Namespace, bar: shared.ProgressBar) -> int:
    from relu_core import protocol

    if args.protocol is not None:
        if args.select or args.oracle:
            raise InputError("--protocol names the selection itself: it does not go with --select or --oracle")
        if args.protocol == "paper":
            return _cmd_paper(args, bar)
        args.select, args.oracle = args.protocol == "honest", args.protocol == "oracle"

    methods = protocol.resolve_methods(args.methods)
    temperature = None if args.temperature is None else shared.parse_temperature(args.temperature)
    lam = shared.parse_lambda(args.lam)
    fraction = parse_fraction(args.val_fraction, "--val-fraction")
    seeds = parse_int(args.seeds, "--seeds", minimum=1)
    folds = parse_int(args.folds, "--folds", minimum=2)
    n_resamples = parse_int(args.bootstrap, "--bootstrap", minimum=0)  # 0: no interval
    batch_size = None if args.batch_size is None else parse_int(args.batch_size, "--batch-size", minimum=1)
    if not math.isfinite(args.eps) or args.eps < 0:
        raise InputError(f"--eps must be a non-negative number, got {args.eps}")
    guarantee = _guarantee_options(args)
    eps_grid, grids = _selection_grids(args)
    if eps_grid is not None and shared.onnx_weights(args):
        from relu_core.onnx_model import NO_EPS

        raise InputError(NO_EPS)
    if args.eps > 0 and shared.onnx_weights(args):
        from relu_core.onnx_model import NO_EPS

        raise InputError(NO_EPS)
    if args.eps > 0:  # checked before the model runs
        from relu_core import detectors, preprocessing

        perturbable = [k for k in methods if detectors.REGISTRY[k].perturbation]
        if args.methods is None:
            methods = perturbable
        elif len(perturbable) < len(methods):
            preprocessing.check_detector(next(detectors.REGISTRY[k]() for k in methods if k not in perturbable))
    perturbed_scorer = perturbation = None
    if args.logits is not None and args.eps > 0:
        raise InputError("--eps perturbs the inputs, so it needs --model and --dataset instead of --logits")
    if args.logits is not None and eps_grid is not None:
        raise InputError(
            "--eps-grid selects ε by perturbing the inputs, so it needs --model and --dataset: a logits file cannot "
            "be perturbed"
        )
    run, title = shared.run_from_args(args, bar, batch_size)
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
        if eps_grid is not None:
            from relu_core import preprocessing

            perturbation = preprocessing.make_perturbation(run, device=args.device, batch_size=batch_size, progress=bar)
    n_seeds = len(protocol.resolve_seeds(seeds))  # checked first: the estimate names valid work only
    protocol.check_resamples(n_resamples)
    estimate = protocol.evaluation_seconds(len(labels), logits.shape[1], n_seeds, methods, n_resamples, fraction)
    if estimate >= LONG_WORK_S:  # said before the work, on stderr: stdout holds only the result
        at_least = "at least " if (args.select or args.oracle) else ""
        print(
            f"note: {logits.shape[0]:,} x {logits.shape[1]:,} logits, {n_seeds} seed(s), {len(methods)} detector(s), "
            f"{n_resamples:,} bootstrap resamples take {at_least}{progress.duration_words(estimate)} on a 2-core "
            "machine (protocol.EVALUATION_RATES); fewer --seeds or --bootstrap 0 shorten it",
            file=sys.stderr,
        )
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
        if eps_grid is not None:
            options.update(epsilons=eps_grid, perturbation=perturbation)
            del options["perturbed_scorer"], options["eps"]
        result = protocol.evaluate_with_selection(
            logits, labels, methods, selection=selection, n_folds=folds, criterion=args.criterion, **grids, **options
        )
    else:
        result = protocol.evaluate(logits, labels, methods, temperature=temperature, lam=lam, **options)
    at_risk = None
    if guarantee is not None:
        from relu_core import risk_control

        at_risk = risk_control.at_risk(
            logits,
            labels,
            methods,
            risk=guarantee[0],
            delta=guarantee[1],
            temperature=temperature,
            lam=lam,
            tune_fraction=fraction,
            seeds=seeds,
            n_resamples=n_resamples,
            progress=bar,
        )
    bar.close()
    if perturbation is not None:  # what ε selection cost, on stderr: stdout holds only the result
        print(
            f"ε selection: {perturbation.backward_images:,} images through one backward pass each, "
            f"{perturbation.forward_images:,} forward passes, {progress.duration_words(perturbation.seconds)} in the "
            "model",
            file=sys.stderr,
        )
    _emit(result, args.json, title, at_risk, run)
    return 0


def _selection_grids(args: argparse.Namespace) -> tuple[tuple[float, ...] | None, dict[str, tuple[float, ...]]]:
    """``--eps-grid`` (None when not given) and the ``--t-grid``/``--lambda-grid`` options of the selection;
    InputError for flags that need --select or --oracle, or that do not go together."""
    given = [
        flag
        for flag, value in (
            ("--eps-grid", args.eps_grid),
            ("--t-grid", args.t_grid),
            ("--lambda-grid", args.lambda_grid),
        )
        if value is not None
    ]
    if given and not (args.select or args.oracle):
        raise InputError(f"{given[0]} is a grid to select over: it goes with --select or --oracle")
    grids: dict[str, tuple[float, ...]] = {}
    if args.t_grid is not None:
        grids["temperatures"] = shared.parse_grid(args.t_grid, "--t-grid", "temperatures")
    if args.lambda_grid is not None:
        grids["lambdas"] = shared.parse_grid(args.lambda_grid, "--lambda-grid", "λ values in [0, 1]")
    if args.eps_grid is None:
        return None, grids
    if args.eps > 0:
        raise InputError("--eps-grid selects ε: it does not go with a fixed --eps")
    return shared.parse_eps_grid(args.eps_grid), grids


def _cmd_demo(args: argparse.Namespace, bar: shared.ProgressBar) -> int:
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


def _cmd_paper(args: argparse.Namespace, bar: shared.ProgressBar) -> int:
    """``evaluate --protocol paper``: :func:`relu_core.paper_protocol.evaluate` on the run the flags name (ε = 0 on
    logits; with a model, ``--eps-grid`` adds an ε grid: authors (or paper), cpu or values), its text or JSON."""
    from relu_core import paper_protocol, protocol

    ignored = [f for f, v in (("--temperature", args.temperature), ("--risk", args.risk)) if v is not None]
    if args.fpr_positive != "correct":
        ignored.append("--fpr-positive")
    if ignored:
        raise InputError(f"{ignored[0]} does not go with --protocol paper (it has its own grids and FPR95 convention)")
    r = parse_int(args.r, "--r", minimum=2)
    seeds = parse_int(args.seeds, "--seeds", minimum=1)
    methods = paper_protocol.METHODS if args.methods is None else protocol.resolve_methods(args.methods)
    batch_size = None if args.batch_size is None else parse_int(args.batch_size, "--batch-size", minimum=1)
    epsilons: tuple[float, ...] = (0.0,)
    if getattr(args, "eps_grid", None) is not None:
        text = "authors" if args.eps_grid.strip().lower() == "paper" else args.eps_grid
        epsilons = shared.parse_eps_grid(text)  # authors (or paper), cpu or values
        if args.logits is not None or shared.onnx_weights(args):
            raise InputError("ε > 0 needs the run's model and images (input pre-processing): this run has logits only")
    run, title = shared.run_from_args(args, bar, batch_size)
    perturbation = None
    if any(e > 0 for e in epsilons):
        from relu_core import preprocessing

        perturbation = preprocessing.make_perturbation(
            run, device=args.device, batch_size=batch_size, precision=paper_protocol.PRECISION
        )  # float32 as the authors' code, not bf16 autocast on a GPU
    lambdas, temperatures = paper_protocol.LAMBDAS, paper_protocol.TEMPERATURES
    if getattr(args, "lambda_grid", None) is not None:
        lambdas = shared.parse_grid(args.lambda_grid, "--lambda-grid", "λ values in [0, 1]")
    if getattr(args, "t_grid", None) is not None:  # honoured, not silently dropped: the authors' grid by default
        temperatures = shared.parse_grid(args.t_grid, "--t-grid", "temperatures")
    result = paper_protocol.evaluate(
        run.logits,
        run.labels,
        r=r,
        seeds=seeds,
        methods=methods,
        temperatures=temperatures,
        lambdas=lambdas,
        epsilons=epsilons,
        perturbation=perturbation,
        progress=bar,
    )
    bar.close()
    from relu_core.studies import paper_table

    if args.json:
        reference = {PAPER_KEY: paper_table.table1_reference_dict(run)}
        print(json.dumps({"run": title, **result.to_dict(), **reference}, indent=1, allow_nan=False))
        return 0
    print(paper_text(result, title) + "\n\n" + paper_table.table1_text(run))
    return 0


def paper_text(result, title: str) -> str:
    """The paper's protocol as text: what ran, per method the mean (std) of its five best rows, Rel-U − Doctor."""
    from relu_core import metric_info, paper_protocol

    fit, aside, evaluated = result.sizes
    lines = [
        f"{title}: {result.label}",
        f"Split: {result.n:,} samples, r = {result.r}: {fit:,} fit, {aside:,} set aside, {evaluated:,} evaluated; "
        f"seeds {', '.join(map(str, result.seeds))}",
        f"Grids: T {', '.join(f'{t:g}' for t in result.temperatures)}; ε {', '.join(f'{e:g}' for e in result.epsilons)}; "
        f"λ {', '.join(f'{x:g}' for x in result.lambdas)}",
        f"{result.fpr_convention}; each value the mean (std, ddof=1) over the method's {paper_protocol.TOP_K} best "
        "rows over every setting x seed, measured on the evaluation part",
        f"Rows: {paper_protocol.SELECTION_LABELS.get(result.select_by, result.select_by)}",
        *(f"Note: {n}" for n in result.notes),
    ]
    methods = list(dict.fromkeys(result.rows.method.tolist()))
    header = ["method", *(metric_info.get(m).header for m in paper_protocol.ROW_METRICS), "accuracy"]
    table = [header]
    for key in methods:
        cells = [result.aggregates[m][key] for m in paper_protocol.REPORTED]
        table.append([key, *(f"{a.mean:.4f} ({a.std:.4f})" if a.std == a.std else f"{a.mean:.4f}" for a in cells)])
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in table]
    if "relu" in methods and "doctor" in methods:
        diffs = "; ".join(
            f"{metric_info.get(m).label} {metric_info.signed(result.difference(m))}" for m in paper_protocol.ROW_METRICS
        )
        lines.append(f"Rel-U − Doctor: {diffs} ({paper_protocol.NO_INTERVAL})")
    return "\n".join(lines)
