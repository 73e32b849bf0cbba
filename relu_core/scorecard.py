"""The Start page's scorecard: Rel-U against Doctor on one run in each of the paper's settings the run supports,
each row with its verdict in plain words and its paired interval. No Streamlit here.

The settings, always in this order and worded alike whoever wins (:data:`SETTINGS`): in-distribution errors
(the run's own test samples, :func:`relu_core.protocol.evaluate` at the shared T, λ, tuning fraction and seeds),
label-domain mismatch (:mod:`relu_core.studies.mismatch` at the shared tuning fraction and seeds), corruptions
(:func:`relu_core.robustness.mismatch_study`: significant wins and losses counted over the corruptions) and
training objectives (wins and losses counted over the objectives of a finished training-objectives table of the
run's data set: never trained from here, minutes of training are the Objectives page's to start) and a guaranteed
risk (:func:`relu_core.risk_control.at_risk` at r* = half the model's error rate, δ = 0.1: how many predictions each
detector lets you act on with at most r* errors among them).

:func:`start` submits the missing computations as background jobs (``relu_core.jobs``; each reads its study's
disk cache first, so a cached result lands at once) and :func:`rows` turns the jobs, finished or running, into
:class:`Row`\\ s.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from relu_core import (
    corruptions,
    datasets,
    detector_comparison,
    jobs,
    metric_info,
    protocol,
    risk_control,
    robustness,
    stats,
)
from relu_core.errors import InputError
from relu_core.progress import count
from relu_core.registry import LRURegistry

#: The metrics every row reports, in this order.
METRICS = ("fpr95", "auroc")
#: (key, title, the page that shows it in full: a name of ``studio.frame``) of each setting, in the card's order.
SETTINGS = (
    ("in_distribution", "In-distribution errors", "explore"),
    ("mismatch", "Label-domain mismatch", "studies"),
    ("corruptions", "Corruptions", "corruptions"),
    ("objectives", "Training objectives", "objectives"),
    ("guaranteed_risk", "At a guaranteed risk", "explore"),
)
#: The confidence of the scorecard's guarantee: 1 − δ = 90 %.
GUARANTEE_DELTA = 0.1
#: The start of every scorecard job's key.
JOB_PREFIX = "scorecard:"
#: A row's states.
READY, COMPUTING, FAILED, UNSUPPORTED, NOT_RUN = "ready", "computing", "failed", "unsupported", "not run"


@dataclass(frozen=True)
class Shared:
    """The settings every page shares by default: the tuning fraction, the number of split seeds, T, λ and ε.
    A result computed at other values names them (:attr:`Row.note`)."""

    tune_fraction: float = 0.5
    seeds: int = 3
    temperature: float = 1.0
    lam: float = 0.5
    eps: float = 0.0

    def words(self) -> str:
        """The settings in one line, e.g. "tuning split 50 % · 3 seeds · T = 1 · λ = 0.5 · ε = 0"."""
        seeds = count(self.seeds, "seed")
        return f"tuning split {self.tune_fraction:.0%} · {seeds} · T = {self.temperature:g} · λ = {self.lam:g} · ε = {self.eps:g}"


@dataclass(frozen=True)
class Row:
    """One setting of the card: its ``title`` and ``page``, its ``state`` (:data:`READY` ...), the ``verdict`` in
    plain words (or what is happening), the ``intervals`` (one line: the numbers per metric), the ``details`` (each
    metric's verdict in full), the job's ``fraction`` done while computing, and a ``note`` (how it was computed,
    settings that differ from the shared ones)."""

    key: str
    title: str
    page: str
    state: str
    verdict: str
    intervals: str = ""
    details: tuple[str, ...] = ()
    fraction: float = 0.0
    note: str = ""


# ------------------------------------------------------------------------------------------- the computations


def registered_dataset(run) -> str:
    """The registered data set a run was computed on (its recipe's spec), else its data set's name."""
    return str(dict(run.recipe or ()).get("dataset_spec") or run.dataset_name or "")


def other_datasets(run) -> list[str]:
    """The data sets on this machine the run's model can take for the mismatch study: its image shape, another
    data set than the run's own (empty without a model and images)."""
    if run.model is None or run.images is None:
        return []
    shape, own = tuple(run.images.shape[1:]), registered_dataset(run)
    return [
        i.name
        for i in datasets.list_datasets()
        if i.available
        and tuple(i.image_shape) == shape
        and i.name != own
        and not (run.dataset_name or "").startswith(f"{i.name}-")  # "digits-test" is digits
    ]


def _in_distribution(run, shared: Shared):
    def work(progress, cancel):
        return protocol.evaluate(
            run.logits,
            run.labels,
            protocol.PAIRED,
            temperature=shared.temperature,
            lam=shared.lam,
            tune_fraction=shared.tune_fraction,
            seeds=shared.seeds,
            progress=progress,
            cancel=cancel,
        )

    return work


def mismatch_options(run, shared: Shared) -> dict:
    """The arguments of the scorecard's mismatch study of ``run`` (a run it supports): the first other data set on
    the machine, the shared tuning fraction and seeds, the bootstrap's default resamples, written as the Studies page
    writes them, so that the page can show this study's result (:func:`finished`) without a run of its own."""
    return {
        "seeds": shared.seeds,
        "n_resamples": stats.DEFAULT_RESAMPLES,
        "fractions": [shared.tune_fraction],
        "other": other_datasets(run)[0],
    }


def _mismatch(run, shared: Shared):
    options = mismatch_options(run, shared)

    def work(progress, cancel):
        from relu_core.studies import mismatch

        return mismatch.run_study(run, **options, progress=progress, cancel=cancel)

    return work


#: The scorecard's r* per (run id, tuning fraction): the Start page asks for it on every rerun of the card (its
#: link), and on a large run the argmax and the stratified split take tens of milliseconds.
_GUARANTEE_RISKS = LRURegistry(64)


def guarantee_risk(run, shared: Shared) -> float:
    """The scorecard's r*: half the model's error rate on the first seed's tuning split (known before any
    calibration or evaluation sample is read; ``risk_control.default_risk``), so that the row asks for a real
    improvement on the model whatever its accuracy."""
    key = (run.run_id, shared.tune_fraction)
    found = _GUARANTEE_RISKS.get(key)
    if found is None:
        correct = protocol.correctness(run.logits, run.labels)
        tune, _ = protocol.split_indices(correct.size, shared.tune_fraction, 0, stratify=correct)
        found = _GUARANTEE_RISKS[key] = risk_control.default_risk(correct[tune])
    return found


def _guaranteed(run, shared: Shared):
    risk = guarantee_risk(run, shared)

    def work(progress, cancel):
        return risk_control.at_risk(
            run.logits,
            run.labels,
            protocol.PAIRED,
            risk=risk,
            delta=GUARANTEE_DELTA,
            temperature=shared.temperature,
            lam=shared.lam,
            tune_fraction=shared.tune_fraction,
            seeds=shared.seeds,
            progress=progress,
            cancel=cancel,
        )

    return work


def corruption_options(run, shared: Shared) -> dict:
    """The arguments of the scorecard's corruption study of ``run``: the Corruptions page's defaults (severity,
    Rel-U and Doctor, every corruption, the selection criterion, the CPU's subsample) at the shared tuning fraction
    and seeds, written as that page writes them, so that the page can show this study's result
    (:func:`finished`) without a run of its own."""
    subsample = robustness.default_subsample()
    return {
        "severity": robustness.DEFAULT_SEVERITY,
        "tune_fraction": shared.tune_fraction,
        "seeds": tuple(range(shared.seeds)),
        "subsample": None if subsample is None or subsample >= len(run.labels) else subsample,
        "detector_keys": tuple(protocol.PAIRED),
        "corruption_names": tuple(corruptions.CORRUPTIONS),
        "criterion": robustness.DEFAULT_CRITERION,
    }


def _corruptions(run, shared: Shared):
    options = corruption_options(run, shared)

    def work(progress, cancel):
        return robustness.mismatch_study(run, **options, progress=progress, cancel=cancel)

    return work


def finished(run, key: str, shared: Shared):
    """The result of the scorecard's job of setting ``key`` on ``run`` at ``shared`` once it has finished, else
    None."""
    job = jobs.MANAGER.get(job_key(run, key, shared))
    return job.result if job is not None and job.state == jobs.DONE else None


def _supported(run, key: str) -> str | None:
    """Why ``run`` cannot have the setting ``key`` (None when it can)."""
    if key == "mismatch":
        if run.model is None or run.images is None:
            return "needs the run's model and images (this run has logits only)"
        if not other_datasets(run):
            return "no other data set of this run's image size is on this machine"
    if key == "corruptions":
        try:
            robustness.check_run(run)
        except InputError as exc:
            return str(exc)
    if key == "objectives":
        from relu_core.studies import objectives

        dataset = registered_dataset(run)
        if dataset not in objectives.trainable_datasets():
            trains = "the Training objectives page trains its own models on a registered data set's training split"
            if run.model is None or run.images is None:
                return f"{trains}; this run has logits only, of no such data set"
            return f"{trains}, and {dataset or 'this run’s data set'} is not one it can train on this machine"
    return None


def job_key(run, key: str, shared: Shared) -> str:
    """The background job of setting ``key`` on ``run`` at ``shared`` (jobs asking for the same work share it)."""
    return f"{JOB_PREFIX}{key}:{run.run_id}:{shared}"


#: The jobs lane of the card's computations: they run one at a time, so that the card, which nobody waits on,
#: takes one core of a busy machine and not the ones a slider's rerun needs (``jobs.JobManager.submit``).
LANE = "scorecard"
#: The rows whose studies take minutes (the others seconds): submitted to the lane last.
SLOW_ROWS = frozenset({"mismatch", "corruptions"})


def start(run, shared: Shared) -> None:
    """Submit the card's missing computations on ``run`` as background jobs (a running, finished or failed one is
    kept: its row shows it; a cancelled one starts again). The training objectives are never started here."""
    work = {
        "in_distribution": lambda: _in_distribution(run, shared),
        "corruptions": lambda: _corruptions(run, shared),
        "guaranteed_risk": lambda: _guaranteed(run, shared),
    }
    if _supported(run, "mismatch") is None:
        work["mismatch"] = lambda: _mismatch(run, shared)

    def submit(key: str, title: str) -> None:
        job = jobs.MANAGER.get(job_key(run, key, shared))
        if key in work and _supported(run, key) is None and (job is None or job.state == jobs.CANCELLED):
            jobs.MANAGER.submit(job_key(run, key, shared), f"Scorecard: {title.lower()}", work[key](), lane=LANE)

    # the lane runs them in this order: the quick rows, the paper's procedure, then the rows that take minutes
    for key, title, _ in SETTINGS:
        if key not in SLOW_ROWS:
            submit(key, title)
    start_paper(run, shared)
    for key, title, _ in SETTINGS:
        if key in SLOW_ROWS:
            submit(key, title)


# ------------------------------------------------------------------------------------------- the paper's procedure
#: The job key's setting name of the card's sentence on the paper's procedure (:func:`paper_sentence`).
PAPER = "paper_protocol"
#: The largest run (samples x classes²) whose ladder the card starts by itself: 10,000 x 100² (CIFAR-100) is 1e8;
#: above 1e9 its grid searches (55 settings x 5 folds x 6 rungs of C x C moments) would hold the CPU for long.
PAPER_MAX_WORK = 1e9


def _paper_too_large(run) -> bool:
    n, c = np.shape(run.logits)
    return float(n) * float(c) ** 2 > PAPER_MAX_WORK


def start_paper(run, shared: Shared) -> None:
    """Submit the ladder (:mod:`relu_core.studies.ladder`) on ``run`` at the shared tuning fraction and seeds as a
    background job, unless one is running, finished or failed (a cancelled one starts again)."""
    key = job_key(run, PAPER, shared)
    job = jobs.MANAGER.get(key)
    if _paper_too_large(run):
        return
    if job is None or job.state == jobs.CANCELLED:

        def work(progress, cancel):
            from relu_core.studies import ladder

            return ladder.run_study(
                run, tune_fraction=shared.tune_fraction, seeds=shared.seeds, progress=progress, cancel=cancel
            )

        jobs.MANAGER.submit(key, "Scorecard: the paper's procedure", work, lane=LANE)


def paper_words(ladder_table: pd.DataFrame) -> str:
    """One plain sentence from the ladder (``tables["ladder"]``): what the paper's procedure (rung 6, the authors'
    protocol end to end) would report, and what the honest protocol (rung 1) measures, with its interval.

    Examples
    --------
    >>> table = pd.DataFrame({"rung": [1, 6], "fpr95": [0.003, -0.030], "fpr95_low": [-0.021, float("nan")],
    ...                       "fpr95_high": [0.027, float("nan")]})
    >>> paper_words(table)  # doctest: +NORMALIZE_WHITESPACE
    "The paper's procedure would report Rel-U 3.0 points ahead here (FPR95, errors as positives, the mean of each
    detector's five lowest-FPR95 setting × seed rows on this one model, no interval); honestly measured it is +0.3 points [-2.1, +2.7] for
    Rel-U − Doctor (FPR95, selection inside the tuning split): no significant difference."
    """
    by_rung = ladder_table.set_index("rung")
    paper = -100.0 * float(by_rung.loc[6, "fpr95"])  # FPR95: lower is better, so ahead = Doctor's minus Rel-U's
    honest, low, high = (100.0 * float(by_rung.loc[1, c]) for c in ("fpr95", "fpr95_low", "fpr95_high"))
    if round(paper, 1) == 0:
        reported = "no difference between Rel-U and Doctor"
    else:
        reported = f"{'Rel-U' if paper > 0 else 'Doctor'} {abs(paper):.1f} points ahead"
    measured = f"{honest:+.1f} points"
    if np.isfinite(low):
        outcome = "no significant difference" if low <= 0 <= high else ("Rel-U better" if high < 0 else "Doctor better")
        measured += (
            f" [{low:+.1f}, {high:+.1f}] for Rel-U − Doctor (FPR95, selection inside the tuning split): {outcome}"
        )
    else:
        measured += " for Rel-U − Doctor (FPR95, selection inside the tuning split; no bootstrap interval)"
    return (
        f"The paper's procedure would report {reported} here (FPR95, errors as positives, the mean of each detector's "
        f"five lowest-FPR95 setting × seed rows on this one model, no interval); honestly measured it is {measured}."
    )


def paper_sentence(run, shared: Shared) -> str:
    """The card's sentence on the paper's procedure for ``run`` (:func:`paper_words`), or what its job is doing;
    "" before it was submitted."""
    if _paper_too_large(run):
        return (
            "The paper's procedure is not run by itself on a run this large: the Studies page's paper-protocol "
            "study (or python -m relu_core study paper-protocol) takes the gap apart rung by rung."
        )
    job = jobs.MANAGER.get(job_key(run, PAPER, shared))
    if job is None or job.state == jobs.CANCELLED:
        return ""
    if job.running:
        return f"The paper's procedure on this run: computing ({job.message})"
    if job.state == jobs.FAILED:
        return f"The paper's procedure on this run could not be computed: {job.error}"
    return paper_words(job.result.tables["ladder"])


# ------------------------------------------------------------------------------------------- the rows


def plain_verdict(outcomes: dict[str, str]) -> str:
    """Who is better in plain words from the ``outcomes`` per metric ("Rel-U better", "Doctor better", "no
    significant difference"; :data:`METRICS`), worded alike for either detector."""
    found = [outcomes[m] for m in METRICS]
    if found[0] == found[1]:
        if found[0] == "no significant difference":
            return "No clear difference between Rel-U and Doctor"
        return f"{found[0].split()[0]} tells errors from correct predictions better"
    return f"Mixed: {found[0]} on false alarms (FPR95), {found[1]} on ranking (AUROC)"


def _interval(metric: str, estimate: float, low: float, high: float) -> str:
    """ "FPR95 +0.278 [-0.037, +0.667]": Rel-U − Doctor and its interval."""
    signed = metric_info.signed
    return f"{metric_info.get(metric).label} {signed(estimate, 3)} [{signed(low, 3)}, {signed(high, 3)}]"


def _from_differences(differences: dict[str, stats.PairedDifference]) -> tuple[str, str, tuple[str, ...]]:
    verdict = plain_verdict({m: differences[m].outcome() for m in METRICS})
    numbers = " · ".join(_interval(m, d.estimate, d.low, d.high) for m, d in ((m, differences[m]) for m in METRICS))
    return verdict, numbers, tuple(differences[m].verdict() for m in METRICS)


def _from_frame(paired: pd.DataFrame) -> tuple[str, str, tuple[str, ...]]:
    """A paired frame with one row per metric (``stats.PAIRED_ROW_COLUMNS``)."""
    by_metric = paired.set_index("metric")
    outcomes = dict(zip(paired["metric"], detector_comparison.outcome_column(paired), strict=True))
    numbers = " · ".join(
        _interval(m, *(float(by_metric.loc[m, c]) for c in ("estimate", "ci_low", "ci_high"))) for m in METRICS
    )
    details = tuple(str(by_metric.loc[m, "verdict"]) for m in METRICS)
    return plain_verdict(outcomes), numbers, details


def count_outcomes(outcomes: list[str], metric: str) -> str:
    """ "FPR95: Rel-U W, Doctor L, neither N": on how many items each is significantly better."""
    wins, losses = outcomes.count("Rel-U better"), outcomes.count("Doctor better")
    return f"{metric_info.get(metric).label}: Rel-U {wins}, Doctor {losses}, neither {len(outcomes) - wins - losses}"


def plain_count(wins: int, losses: int, noun: str) -> str:
    """Who wins more often over the ``noun``\\ s in plain words, worded alike for either detector."""
    if wins == losses == 0:
        return f"No clear difference between Rel-U and Doctor on any {noun}"
    if wins == losses:
        return f"Rel-U and Doctor each better as often, over the {noun}s"
    return f"{'Rel-U' if wins > losses else 'Doctor'} better on more {noun}s"


def _counted(paired: pd.DataFrame, noun: str) -> tuple[str, str, tuple[str, ...]]:
    """Significant wins and losses over the rows of ``paired`` (one per item and metric)."""
    lines, wins, losses, n = [], 0, 0, 0
    for metric in METRICS:
        outcomes = detector_comparison.outcome_column(paired[paired["metric"] == metric])
        lines.append(count_outcomes(outcomes, metric))
        wins += outcomes.count("Rel-U better")
        losses += outcomes.count("Doctor better")
        n = len(outcomes)
    counts = " · ".join(lines) + f" (of {count(n, noun)})"
    return plain_count(wins, losses, noun), counts, ()


def _differs(shared: Shared, used: dict[str, object]) -> str:
    """The settings ``used`` by a result that differ from the ``shared`` ones, in words ("" when none)."""
    words = {"tune_fraction": "tuning split", "seeds": "seeds", "temperature": "T", "lam": "λ"}
    shown = {
        name: value
        for name, value in used.items()
        if value != getattr(shared, name)
        and not (isinstance(value, float) and np.isclose(value, getattr(shared, name)))
    }
    if not shown:
        return ""
    text = ", ".join(
        f"{words[n]} {v:.0%}" if n == "tune_fraction" else f"{words[n]} {v:g}" if n != "seeds" else f"{v} seeds"
        for n, v in shown.items()
    )
    return f"computed at {text} (not the shared settings)"


def _ready(key: str, result, shared: Shared) -> tuple[str, str, tuple[str, ...], str]:
    """(verdict, intervals, details, note) of a finished computation of setting ``key``."""
    if key == "in_distribution":
        if not result.paired:
            raise InputError("no paired interval")
        verdict, intervals, details = _from_differences(result.paired)
        details = (*details, *result.operating_points())  # both FPR95 operating points, each with its interval
        note = f"mean over {len(result.seeds)} seeds, {shared.tune_fraction:.0%} tuning split, T and λ fixed" + (
            f", ε = 0 (not the shared ε = {shared.eps:g}: input pre-processing is Explore's)" if shared.eps else ""
        )
        return verdict, intervals, details, note
    if key == "mismatch":
        paired = result.paired[np.isclose(result.paired["x"], shared.tune_fraction)]
        verdict, intervals, details = _from_frame(paired)
        settings = result.settings
        note = f"{settings['in_distribution']} mixed with {settings['other']}, " + (
            _differs(shared, {"temperature": settings["T"], "lam": settings["lambda"]})
            or f"{len(settings['seeds'])} seeds"
        )
        return verdict, intervals, details, note
    if key == "guaranteed_risk":
        return _ready_guarantee(result, shared)
    if key == "corruptions":
        corrupted = result.paired[result.paired["corruption"] != robustness.CLEAN]
        verdict, intervals, details = _counted(corrupted, "corruption")
        note = (
            f"severity {result.severity}, {min(result.n_eval):,} images per corruption, T and λ chosen on the clean "
            "tuning split (not the shared T and λ)"
        )
        return verdict, intervals, details, note
    frames = []
    for row in result.rows:  # training objectives: an ObjectivesResult
        for metric in METRICS:
            diff = (row.result.paired or {}).get(metric)
            if diff is not None:
                frames.append(
                    {
                        "metric": metric,
                        "estimate": diff.estimate,
                        "ci_low": diff.low,
                        "ci_high": diff.high,
                        "verdict": diff.verdict(),
                    }
                )
    verdict, intervals, details = _counted(
        pd.DataFrame(frames, columns=["metric", "estimate", "ci_low", "ci_high", "verdict"]), "objective"
    )
    note = f"{result.model} on {result.dataset}, " + (
        _differs(shared, {"tune_fraction": result.tune_fraction, "seeds": len(result.seeds)})
        or f"{len(result.seeds)} seeds"
    )
    return verdict, intervals, details, note


def _ready_guarantee(result, shared: Shared) -> tuple[str, str, tuple[str, ...], str]:
    """The guaranteed-risk row: the guarantee in plain words with the coverage each detector gives on new samples
    (the evaluation halves, mean over the seeds), Rel-U − Doctor in coverage with its paired interval."""
    names = dict(zip(protocol.PAIRED, ("Rel-U", "Doctor"), strict=True))
    coverage: dict[str, float | str] = {}
    refusals = []
    for key in protocol.PAIRED:
        summary = result.summary(key)
        coverage[names[key]] = summary["evaluation_coverage"] if summary["certified"] else ""
        if not summary["certified"]:  # the reason in the row's details: the card keeps one short line per setting
            refusals.append(f"{names[key]}: {'; '.join(summary['refusals'])}")
    verdict = risk_control.sentence(result.risk, result.delta, coverage)
    d = result.minus_doctor
    # in points of coverage, as the sentence's percentages and the verdict say it (not a fraction beside them)
    intervals = (
        ""
        if d is None
        else (f"Rel-U − Doctor coverage {100 * d.estimate:+.1f} points [{100 * d.low:+.1f}, {100 * d.high:+.1f}]")
    )
    if d is not None and d.draws:
        intervals += f" (over the seeds {100 * d.draw_low:+.1f} to {100 * d.draw_high:+.1f})"
    details = tuple(refusals) + (() if d is None else (d.verdict(),))
    n_cal = result.per_seed[protocol.PAIRED[0]][0].certificate.n_calibration
    note = (
        f"r* = half the model's error rate on the tuning split, rounded down onto Explore's choices ({risk_control.percent(result.risk)}), "
        f"δ = {result.delta:g}; each threshold certified on a calibration half of the evaluation split "
        f"({n_cal:,} samples), the coverage read on the other half; mean over {len(result.seeds)} seeds; the "
        "interval is a paired bootstrap of the evaluation samples for the certified thresholds, the range in "
        f"brackets how much the seeds' calibration draws move it; {risk_control.VERDICT_RULE}"
    )
    return verdict, intervals, details, note


def _interval_words(label: str, estimate: float, low: float, high: float) -> str:
    """ "coverage +0.019 [-0.006, +0.044]": Rel-U − Doctor and its interval."""
    signed = metric_info.signed
    return f"{label} {signed(estimate, 3)} [{signed(low, 3)}, {signed(high, 3)}]"


def _ready_row(key: str, title: str, page: str, ready: tuple[str, str, tuple[str, ...], str]) -> Row:
    verdict, intervals, details, note = ready
    return Row(key, title, page, READY, verdict, intervals, details, note=note)


def objectives_result(dataset: str, shared: Shared):
    """The latest finished training-objectives table of ``dataset`` among the jobs (the shared settings' one
    first), or None: the Objectives page computes it, the card only reads it."""
    from relu_core.studies import objectives

    found = [
        job.result
        for job in jobs.MANAGER.jobs()
        if job.state == jobs.DONE
        and isinstance(job.result, objectives.ObjectivesResult)
        and job.result.dataset == dataset
    ]
    matching = [r for r in found if len(r.seeds) == shared.seeds and np.isclose(r.tune_fraction, shared.tune_fraction)]
    return (matching or found or [None])[-1]


def rows(run, shared: Shared) -> list[Row]:
    """The card's rows on ``run`` at ``shared``, one per setting of :data:`SETTINGS` in that order, from the jobs
    :func:`start` submitted (computing, failed or finished) and a finished training-objectives table."""
    out = []
    for key, title, page in SETTINGS:
        why = _supported(run, key)
        if why is not None:
            out.append(Row(key, title, page, UNSUPPORTED, f"Not available for this run ({why})"))
            continue
        if key == "objectives":
            result = objectives_result(registered_dataset(run), shared)
            if result is None:
                out.append(
                    Row(
                        key,
                        title,
                        page,
                        NOT_RUN,
                        "Not computed yet: the Training objectives page trains one model per objective (minutes)",
                    )
                )
                continue
            out.append(_ready_row(key, title, page, _ready(key, result, shared)))
            continue
        job = jobs.MANAGER.get(job_key(run, key, shared))
        if job is None or job.state == jobs.CANCELLED:
            out.append(Row(key, title, page, NOT_RUN, "Not computed (cancelled)" if job else "Not started"))
        elif job.running:
            out.append(Row(key, title, page, COMPUTING, f"Computing: {job.message}", fraction=job.fraction))
        elif job.state == jobs.FAILED:
            out.append(Row(key, title, page, FAILED, f"Could not be computed: {job.error}"))
        else:
            try:
                ready = _ready(key, job.result, shared)
            except InputError as exc:
                out.append(Row(key, title, page, FAILED, f"Could not be computed: {exc}"))
                continue
            out.append(_ready_row(key, title, page, ready))
    return out
