"""The ladder: the gap between the paper's Table 1 and the studio's verdicts taken apart, one change a rung.

For one run, Rel-U − Doctor in FPR95, AUROC and AURC (negative FPR95 / AURC and positive AUROC favour Rel-U),
rung by rung, each rung changing one thing from the rung above (rung 5 two: :data:`RUNGS` says what, in one
line). In rungs 1-4 it is the paired difference of the two detectors on the same samples; in rungs 5-6 it is the
difference of two separate means, each detector's five best rows, which may come from different seeds (so from
different evaluation splits): not paired.

1. **honest**: the studio's protocol: positives = correctly classified, the detectors' own grids
   (:data:`relu_core.detectors.TEMPERATURE_GRID`, :data:`~relu_core.detectors.LAMBDA_GRID`), T and λ selected by
   k-fold cross-validation inside each seed's tuning split (:func:`relu_core.protocol.evaluate_with_selection`);
2. **errors positive**: the same with the authors' FPR95 convention (errors are the positives) in the selection
   criterion and in the reported FPR95;
3. **authors' grids**: T over the authors' grid (:data:`relu_core.paper_protocol.TEMPERATURES`), still selected
   inside the tuning split (ε stays 0: the logits-only rungs);
4. **oracle**: the same grid selected on each seed's evaluation split;
5. **five best rows**: the authors' table aggregation (:func:`relu_core.paper_protocol.aggregate`): every
   (T, λ) setting (λ over :data:`relu_core.paper_protocol.LAMBDAS`; the authors' λ values are unknown, their
   code's default is 0.5 a run) on every seed's evaluation split, per detector the mean of its five lowest-FPR95
   rows, and FPR95 read on the thinned ROC curve (rungs 1-4 read every threshold): two changes;
6. **authors' split**: rung 5 on the authors' split (:func:`relu_core.paper_protocol.authors_split`, fit part
   ``n // r``, a fifth of the rest set aside, not stratified), seeds numbered 1..S as the authors do
   (:func:`relu_core.paper_protocol.paper_seeds`): the paper's protocol end to end on this one model (the
   authors' seed also loads a separately trained checkpoint, :data:`relu_core.paper_protocol.ONE_MODEL`).

Rungs 1-4 carry the 95 % paired bootstrap interval of the mean over seeds (:func:`relu_core.stats.pooled_bootstrap`,
conditional on the selected settings, as everywhere in the studio). Rung 4's settings are chosen on the same
samples the interval resamples: it is optimistic, more so for Rel-U with its more settings, and is labelled so
(:data:`ORACLE_INTERVAL`). Rungs 5 and 6 are a minimum over rows measured on the evaluation split: no interval is
valid for them, and they say so in words (:data:`relu_core.paper_protocol.NO_INTERVAL`). Rungs 1-5 use the
studio's seeded stratified splits at the tuning fraction (seeds as given, 0..S-1 by default); rung 6 uses
``r = round(1 / tuning fraction)`` and seeds 1..S. Every rung chooses its settings or rows by FPR95 and reads
AUROC and AURC at them (rungs 5-6: at the five lowest-FPR95 rows, as the authors' committed ``tables.py``).

The ``curves`` table: rungs 1-4 the mean and std (``ddof=0``) over seeds, ``n_seeds`` the seed count; rungs 5-6
the mean and std (``ddof=1``, pandas') of the five best rows, ``n_seeds`` the number of distinct seeds among
those rows (:data:`CURVE_NOTE`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from relu_core import detectors, metric_info, paper_protocol, protocol, stats, validation
from relu_core.progress import report
from relu_core.studies import base

NAME = "paper-protocol"
TITLE = "The paper's protocol: the Rel-U − Doctor gap taken apart, one change a rung"
#: The metrics every rung states.
METRICS: tuple[str, ...] = ("fpr95", "auroc", "aurc")
LADDER_COLUMNS = (
    "rung",
    "name",
    "changed",
    "relu_fpr95",
    "doctor_fpr95",
    "fpr95",
    "fpr95_low",
    "fpr95_high",
    "auroc",
    "auroc_low",
    "auroc_high",
    "aurc",
    "aurc_low",
    "aurc_high",
    "verdict",
)


#: Rung 4's interval in words.
ORACLE_INTERVAL = "conditional on settings chosen on these samples: optimistic, not a valid interval for the selection"
#: The two conventions of the curves table.
CURVE_NOTE = (
    "curves: rungs 1-4 the mean and std (ddof=0) over seeds; rungs 5-6 the mean and std (ddof=1) of the five best "
    "rows, n_seeds = the distinct seeds among those rows"
)
#: How rungs 5-6 differ from a paired difference.
NOT_PAIRED = "the difference of the two detectors' best-five means; rows may come from different seeds (not paired)"


@dataclass(frozen=True)
class Rung:
    """One rung: its number, short name and the one line saying what it changed from the rung above."""

    number: int
    name: str
    changed: str


RUNGS: tuple[Rung, ...] = (
    Rung(
        1,
        "honest",
        "the studio's protocol: correct samples positive, its T and λ grids, selected inside the tuning split",
    ),
    Rung(2, "errors positive", "errors are the positives (the authors' code's FPR95), in the selection and the result"),
    Rung(
        3,
        "authors' grids",
        "T over the authors' grid 0.2 … 2 (λ over the studio's λ grid), still inside the tuning split",
    ),
    Rung(
        4,
        "oracle",
        "T and λ selected on each seed's evaluation split (optimistic; its interval is " + ORACLE_INTERVAL + ")",
    ),
    Rung(
        5,
        "five best rows",
        "two changes: the authors' table, every (T, λ) × seed row on the evaluation split (λ over "
        + ", ".join(f"{x:g}" for x in paper_protocol.LAMBDAS)
        + "; the authors' λ values are unknown, their code's default 0.5 a run), mean of each detector's 5 "
        "lowest-FPR95 rows with AUROC and AURC read at those rows; and FPR95 read on the thinned ROC curve "
        "(it differs from the full one on tied scores only)",
    ),
    Rung(
        6,
        "authors' split",
        "their split: fit n // r, a fifth of the rest set aside, unstratified (shuffled by Python's random, seeds "
        "1..S as the authors number them), on this one model (the authors' seed also picks a trained checkpoint)",
    ),
)


def ratio_for(tune_fraction: float) -> int:
    """The authors' ``r`` nearest the tuning fraction (``round(1 / fraction)``, at least 2)."""
    return max(2, int(round(1.0 / validation.fraction(tune_fraction, "the tuning fraction"))))


def _selected(
    run, common: base.Options, tune_fraction: float, rung: int, progress, eps: dict
) -> protocol.EvaluationResult:
    """Rungs 1-4 through :func:`relu_core.protocol.evaluate_with_selection` (Rel-U and Doctor); ``eps`` (the
    ``epsilons`` and ``perturbation`` of an ε search, or empty) from rung 3 on."""
    errors = rung >= 2
    authors_grid = rung >= 3
    return protocol.evaluate_with_selection(
        run.logits,
        run.labels,
        list(protocol.PAIRED),
        selection="oracle" if rung >= 4 else "tuning",
        temperatures=paper_protocol.TEMPERATURES if authors_grid else None,
        lambdas=paper_protocol.LAMBDAS if authors_grid else None,
        tune_fraction=tune_fraction,
        seeds=common.seeds,
        criterion="fpr95",
        criterion_positive="error" if errors else "correct",
        fpr_positive="error" if errors else "correct",
        n_resamples=common.n_resamples,
        progress=progress,
        cancel=common.cancel,
        **(eps if authors_grid else {}),
    )


def rungs_for(epsilons: Sequence[float] | None) -> tuple[Rung, ...]:
    """:data:`RUNGS`, rung 3 saying that it adds the ε grid when ``epsilons`` are searched, and rungs 4-5 that
    their settings include ε (rung 6 is rung 5 on another split)."""
    if not epsilons:
        return RUNGS
    grid = ", ".join(f"{e:g}" for e in epsilons)
    third = Rung(
        3,
        "authors' grids",
        f"T over the authors' grid 0.2 … 2 and ε over {grid} (λ over the studio's "
        "λ grid), still inside the tuning split",
    )
    fourth = dataclasses.replace(RUNGS[3], changed=RUNGS[3].changed.replace("T and λ selected", "T, λ and ε selected"))
    fifth = dataclasses.replace(
        RUNGS[4], changed=RUNGS[4].changed.replace("every (T, λ) × seed", "every (T, λ, ε) × seed")
    )
    return (*RUNGS[:2], third, fourth, fifth, RUNGS[5])


def _rows_rung(rows: paper_protocol.Rows) -> dict[str, dict[str, paper_protocol.Aggregate]]:
    return paper_protocol.aggregates_of(rows)  # the five lowest-FPR95 rows, every metric read at them


def run_study(
    run, *, tune_fraction: float = 0.5, epsilons: Sequence[float] | None = None, device: str = "auto", **options
) -> base.StudyResult:
    """The ladder on ``run``; the keyword ``options`` as :func:`base.options`.

    ``epsilons`` None (default): ε = 0 on every rung (logits only). An ε grid (e.g.
    :data:`relu_core.paper_protocol.EPSILONS`; needs the run's model and images, else one InputError line) is
    searched from rung 3 on: jointly with T and λ in rungs 3-4 (:func:`relu_core.protocol.evaluate_with_selection`
    with ``relu_core.preprocessing.make_perturbation(run)``: one backward pass per fitted detector, one forward
    pass per ε, on ``device``), and as rows in rungs 5-6. On two CPU cores the authors' whole grid takes hours on
    CIFAR-10; a GPU or a smaller grid (``preprocessing.CPU_EPSILONS``) is the way.

    Returns a :class:`~relu_core.studies.base.StudyResult` whose ``tables["ladder"]`` is the ladder
    (:data:`LADDER_COLUMNS`, one row per rung: Rel-U − Doctor per metric, the interval for rungs 1-4, NaN bounds
    and the words of :data:`relu_core.paper_protocol.NO_INTERVAL` for rungs 5-6), ``paired`` the rows of
    :func:`relu_core.stats.paired_rows` per rung (series ``"ladder"``, x = the rung), ``curves`` each detector's
    mean and std per rung and metric, and ``settings["rungs"]`` one JSON object per rung.
    """
    tune_fraction = validation.fraction(tune_fraction, "the tuning fraction")
    common = base.options(**options)
    r = ratio_for(tune_fraction)
    eps: dict = {}
    steps = len(RUNGS)
    # The rung whose work runs now: the ε passes report into it (a pass over thousands of images takes seconds to
    # minutes on a CPU, and the selection itself reports only once a detector is chosen).
    current = [0]

    def eps_progress(done, total, message):
        k = current[0]
        report(common.progress, k / steps, 1, f"rung {k + 1}: ε pass, {message}")

    if epsilons is not None:
        from relu_core import preprocessing

        epsilons = protocol.check_epsilons(epsilons)
        eps = {
            "epsilons": epsilons,
            "perturbation": preprocessing.make_perturbation(
                run, device=device, precision=paper_protocol.PRECISION, progress=eps_progress, cancel=common.cancel
            ),  # float32 as the authors' code, not bf16 autocast on a GPU
        }
    steps_rungs = rungs_for(epsilons)

    def compute() -> base.StudyResult:
        curves: list[dict] = []
        paired: list[dict] = []
        per_seed: list[dict] = []
        ladder: list[dict] = []
        objects: list[dict] = []
        notes: list[str] = []

        def step(k: int):
            current[0] = k

            def progress(done, total, message):
                report(common.progress, (k + done / max(total, 1)) / steps, 1, f"rung {k + 1}: {message}")

            return progress

        for k, rung in enumerate(steps_rungs[:4]):
            base.checkpoint(common.cancel, "the ladder")
            result = _selected(run, common, tune_fraction, rung.number, step(k), eps)
            summary = result.paired_summary() or {}
            pooled = {m: result.paired[m] for m in METRICS} if result.paired else {}
            rows = stats.paired_rows({m: result.difference_per_seed(m) for m in METRICS}, pooled)
            if rung.number == 4:  # settings chosen on the samples the interval resamples
                rows = [{**row, "verdict": f"{row['verdict']} ({ORACLE_INTERVAL})"} for row in rows]
            for key in protocol.PAIRED:
                for m in METRICS:
                    curves.append(
                        {
                            "series": "ladder",
                            "x": float(rung.number),
                            "detector": detectors.label(key),
                            "metric": m,
                            "mean": result.mean(key, m),
                            "std": result.std(key, m),
                            "n_seeds": len(result.seeds),
                        }
                    )
                    per_seed += [
                        {
                            "series": "ladder",
                            "x": float(rung.number),
                            "detector": detectors.label(key),
                            "metric": m,
                            "seed": int(s),
                            "value": float(v),
                        }
                        for s, v in zip(result.seeds, result.per_seed[key][m])
                    ]
            paired += [
                {"series": "ladder", "x": float(rung.number), **{c: row[c] for c in stats.PAIRED_ROW_COLUMNS}}
                for row in rows
            ]
            by_metric = {row["metric"]: row for row in rows}
            ladder.append(
                {
                    "rung": rung.number,
                    "name": rung.name,
                    "changed": rung.changed,
                    "relu_fpr95": result.mean("relu", "fpr95"),
                    "doctor_fpr95": result.mean("doctor", "fpr95"),
                    **{
                        f"{m}{suffix}": by_metric[m][col]
                        for m in METRICS
                        for suffix, col in (("", "estimate"), ("_low", "ci_low"), ("_high", "ci_high"))
                    },
                    "verdict": by_metric["fpr95"]["verdict"],
                }
            )
            objects.append(
                {
                    "rung": rung.number,
                    "name": rung.name,
                    "changed": rung.changed,
                    "selection": result.selection,
                    "fpr_convention": result.fpr_convention,
                    "settings": {key: result.settings(key) for key in protocol.PAIRED},
                    "relu": {m: result.mean("relu", m) for m in METRICS},
                    "doctor": {m: result.mean("doctor", m) for m in METRICS},
                    "relu_minus_doctor": {m: summary.get(m) for m in METRICS},
                    "interval": ORACLE_INTERVAL if rung.number == 4 else "conditional on the selected settings",
                }
            )

        # rungs 5 and 6: every setting a row, the five best per detector and metric
        grids = {"temperatures": paper_protocol.TEMPERATURES, "lambdas": paper_protocol.LAMBDAS}
        if eps:
            grids.update(eps)
        correct = protocol.correctness(run.logits, run.labels)
        studio_splits = [(s, t, e) for s, t, e in protocol.seeded_splits(correct, tune_fraction, common.seeds)]
        base.checkpoint(common.cancel, "the ladder")
        rows5 = paper_protocol.setting_rows(
            run.logits,
            run.labels,
            studio_splits,
            methods=protocol.PAIRED,
            **grids,
            progress=step(4),
            cancel=common.cancel,
        )
        base.checkpoint(common.cancel, "the ladder")
        authors = paper_protocol.evaluate(
            run.logits,
            run.labels,
            r=r,
            seeds=paper_protocol.paper_seeds(len(common.seeds)),  # 1..S, as the authors number them
            methods=protocol.PAIRED,
            **grids,
            progress=step(5),
            cancel=common.cancel,
        )
        for rung, rows, aggregates, fpr_note in (
            (steps_rungs[4], rows5, _rows_rung(rows5), "FPR95 with errors positive on the thinned curve"),
            (RUNGS[5], authors.rows, authors.aggregates, "FPR95 with errors positive on the thinned curve"),
        ):
            diffs = {m: aggregates[m]["relu"].mean - aggregates[m]["doctor"].mean for m in METRICS}
            for key in protocol.PAIRED:
                for m in METRICS:
                    agg = aggregates[m][key]
                    curves.append(
                        {
                            "series": "ladder",
                            "x": float(rung.number),
                            "detector": detectors.label(key),
                            "metric": m,
                            "mean": agg.mean,
                            "std": agg.std,
                            "n_seeds": len(set(rows.seed[list(agg.rows)].tolist())),  # of the five rows
                        }
                    )
            for m in METRICS:
                label = metric_info.get(m).label
                paired.append(
                    {
                        "series": "ladder",
                        "x": float(rung.number),
                        "metric": m,
                        "mean": diffs[m],
                        "std": np.nan,
                        "estimate": diffs[m],
                        "ci_low": np.nan,
                        "ci_high": np.nan,
                        "significant": False,
                        "verdict": f"{label}: Rel-U − Doctor = {metric_info.signed(diffs[m])}, {NOT_PAIRED}; "
                        f"{paper_protocol.NO_INTERVAL}",
                    }
                )
            ladder.append(
                {
                    "rung": rung.number,
                    "name": rung.name,
                    "changed": rung.changed,
                    "relu_fpr95": aggregates["fpr95"]["relu"].mean,
                    "doctor_fpr95": aggregates["fpr95"]["doctor"].mean,
                    **{
                        f"{m}{suffix}": (diffs[m] if suffix == "" else np.nan)
                        for m in METRICS
                        for suffix in ("", "_low", "_high")
                    },
                    "verdict": f"FPR95: Rel-U − Doctor = {metric_info.signed(diffs['fpr95'])} (best-five means, not "
                    "paired); no interval (a minimum over rows)",
                }
            )
            objects.append(
                {
                    "rung": rung.number,
                    "name": rung.name,
                    "changed": rung.changed,
                    "selection": f"{paper_protocol.TOP_K} lowest-FPR95 rows per detector over every setting x seed, "
                    "on the evaluation split; AUROC, AURC and accuracy read at those rows (tables.py as committed)",
                    "difference": NOT_PAIRED,
                    "lambdas": list(paper_protocol.LAMBDAS),
                    "lambdas_note": paper_protocol.lambda_note(paper_protocol.LAMBDAS),
                    "fpr_convention": paper_protocol.FPR_CONVENTION,
                    "rows_per_detector": {k: int(np.count_nonzero(rows.method == k)) for k in protocol.PAIRED},
                    "relu": {
                        m: {"mean": aggregates[m]["relu"].mean, "std": _finite(aggregates[m]["relu"].std)}
                        for m in (*METRICS, "accuracy")
                    },
                    "doctor": {
                        m: {"mean": aggregates[m]["doctor"].mean, "std": _finite(aggregates[m]["doctor"].std)}
                        for m in (*METRICS, "accuracy")
                    },
                    "std": "ddof=1 over the five rows (the spread of five rows, not a standard error)",
                    "relu_minus_doctor": {m: {"estimate": diffs[m], "interval": None} for m in METRICS},
                    "interval": paper_protocol.NO_INTERVAL,
                    "five_best": {k: [rows.record(i) for i in aggregates["fpr95"][k].rows] for k in protocol.PAIRED},
                }
            )
        for obj, rows in ((objects[4], rows5), (objects[5], authors.rows)):
            thinned = int(np.count_nonzero(rows.values["fpr95"] != rows.values["fpr95_full"]))
            obj["thinned_curve_differs"] = f"{thinned} of {len(rows)} rows"
            if thinned:
                notes.append(
                    f"rung {obj['rung']}: in {thinned} of {len(rows)} rows the thinned ROC curve's FPR95 differs from "
                    "the full curve's (tied scores)"
                )
        objects[-1]["seeds"] = list(authors.seeds)
        objects[-1]["model"] = paper_protocol.ONE_MODEL
        objects[-1]["split"] = {
            "r": r,
            "fit": authors.sizes[0],
            "set_aside": authors.sizes[1],
            "evaluated": authors.sizes[2],
        }
        if rows5.fallback.any() or authors.rows.fallback.any():
            notes.append("some Rel-U rows used the Hamming fallback D* (= Doctor's ranking)")
        if eps:
            notes.append(f"ε searched from rung 3 on: {protocol.describe_eps_grid(eps['epsilons'])}")
        else:
            notes.append("ε = 0 on every rung (logits only); the authors also search ε where a model is present")
        notes.append(
            f"rungs 1-5: the studio's stratified splits at tuning fraction {tune_fraction:g}, seeds "
            f"{', '.join(map(str, common.seeds))}; rung 6: the authors' split, r = {r}, seeds "
            f"{', '.join(map(str, authors.seeds))} (the authors number from 1), on this one model"
        )
        notes.append(f"rung 4: its interval is {ORACLE_INTERVAL}")
        notes.append(CURVE_NOTE)
        if eps:
            notes.append(f"ε path in {paper_protocol.PRECISION} (the authors' float32), scores in float64")
        report(common.progress, 1, 1, "done")
        settings = {
            "seeds": list(common.seeds),
            "tune_fraction": tune_fraction,
            "r": r,
            "n_resamples": common.n_resamples,
            "authors_temperatures": list(paper_protocol.TEMPERATURES),
            "lambdas": list(paper_protocol.LAMBDAS),
            "rung6_seeds": list(authors.seeds),
            "rows_selected_by": paper_protocol.SELECT_BY,
            "eps": 0.0 if not eps else list(eps["epsilons"]),
            "rungs": objects,
        }
        return base.StudyResult(
            NAME,
            TITLE,
            pd.DataFrame(curves, columns=list(base.CURVE_COLUMNS)),
            pd.DataFrame(paired, columns=list(base.PAIRED_COLUMNS)),
            pd.DataFrame(per_seed, columns=list(base.PER_SEED_COLUMNS)),
            settings,
            {},
            {"ladder": pd.DataFrame(ladder, columns=list(LADDER_COLUMNS))},
            notes,
        )

    key = {"tune_fraction": tune_fraction, "r": r, "version": 3}
    if eps:  # the model's weights are the logits' (the run's content)
        key["epsilons"] = list(eps["epsilons"])
    return common.cached(NAME, run, key, compute)


def _finite(value: float) -> float | None:
    return None if not np.isfinite(value) else float(value)


def rung_objects(result: base.StudyResult) -> list[dict]:
    """One JSON object per rung (``settings["rungs"]``)."""
    return list(result.settings["rungs"])


def ladder_text(result: base.StudyResult, rungs: Sequence[int] | None = None) -> str:
    """The ladder as text lines: per rung what it changed and Rel-U − Doctor per metric with its interval or the
    words saying why there is none."""
    table = result.tables["ladder"]
    lines = []
    for row in table.itertuples(index=False):
        if rungs is not None and row.rung not in rungs:
            continue
        parts = []
        for m in METRICS:
            value, low, high = getattr(row, m), getattr(row, f"{m}_low"), getattr(row, f"{m}_high")
            label = metric_info.get(m).label
            interval = f" [{metric_info.signed(low)}, {metric_info.signed(high)}]" if np.isfinite(low) else ""
            parts.append(f"{label} {metric_info.signed(value)}{interval}")
        lines.append(f"{row.rung}. {row.name}: {row.changed}")
        lines.append(f"   Rel-U − Doctor: {'; '.join(parts)}")
        lines.append(f"   {row.verdict}")
    return "\n".join(lines)


def display_table(result: base.StudyResult) -> pd.DataFrame:
    """The ladder for a page, all in percentage points: per rung Rel-U − Doctor per metric with its interval
    (rungs 1-4) or "no interval" (5-6), the FPR95 verdict in a few words, each detector's FPR95, and last (it is
    long) what the rung changed. The full verdicts, in fractions, stay in the study's ``ladder`` table (its CSV)."""
    out = []
    for row in result.tables["ladder"].itertuples(index=False):
        line = {"rung": f"{row.rung}. {row.name}"}
        for m in METRICS:
            value, low, high = (100 * float(getattr(row, f"{m}{s}")) for s in ("", "_low", "_high"))
            digits = 2 if m == "aurc" else 1  # AURC differences are a tenth of the others'
            interval = f" [{low:+.{digits}f}, {high:+.{digits}f}]" if np.isfinite(low) else " (no interval)"
            line[f"Rel-U − Doctor {metric_info.get(m).label} (points)"] = f"{value:+.{digits}f}{interval}"
        line["FPR95 verdict"] = _short_verdict(100 * row.fpr95, 100 * row.fpr95_low, 100 * row.fpr95_high)
        if row.rung == 4:
            line["FPR95 verdict"] += f" ({ORACLE_INTERVAL})"
        line["Rel-U FPR95 %"] = f"{100 * row.relu_fpr95:.1f}"
        line["Doctor FPR95 %"] = f"{100 * row.doctor_fpr95:.1f}"
        line["what it changed"] = row.changed
        out.append(line)
    return pd.DataFrame(out)


def _short_verdict(points: float, low: float, high: float) -> str:
    """The FPR95 verdict of a rung in points (the lower FPR95 wins): by its interval on rungs 1-4, and only the
    difference's sign, said as such, where no interval is valid (rungs 5-6)."""
    if not np.isfinite(points):
        return "undefined"
    if not np.isfinite(low):
        leader = "Rel-U" if points < 0 else "Doctor"
        return f"{leader} lower by {abs(points):.1f} (no valid interval)"
    if low > 0:
        return f"Doctor better by {points:.1f}"
    if high < 0:
        return f"Rel-U better by {-points:.1f}"
    return "no significant difference"
