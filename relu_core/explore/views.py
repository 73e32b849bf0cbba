"""A view: everything Explore (and the Start page, the report, the CLI ``report`` and ``bench/``) shows for one
run at one :class:`Setting`: Rel-U fitted on the tuning split, every detector scored, ROC / risk-coverage curves
and metrics on the evaluation split, D*, and the Rel-U − Doctor paired bootstrap (a background job, so that a
slider never waits on it).

:func:`view` keeps views in one bounded process-wide cache, :data:`VIEWS`, keyed on the run's id and the setting
(at the default operating point: the operating point only moves the marks on the curves, which each view keeps
per operating point, :meth:`View.marked`). It takes the run itself: the run need not be registered."""

from __future__ import annotations

import functools
import html
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from relu_core import cache, detectors, figures, jobs, metric_info, metrics, protocol, risk_control, stats, threads
from relu_core.explore import cached, eps
from relu_core.explore import guarantee as guarantee_module
from relu_core.explore.setting import Setting
from relu_core.registry import LRURegistry

#: Thin ROC / risk-coverage lines to this many points when drawing (metrics use every sample).
CURVE_POINTS = 400
#: The TPR whose point every ROC curve marks (the metrics table's FPR95, placed by ``metrics.operating_point``).
ROC_MARK_TPR = 0.95
#: How long a view's panel waits for its paired bootstrap before showing it when it lands instead.
PAIRED_WAIT_S = 0.3

#: The views of this process, least recently used dropped: (run id, where its algebra ran
#: (:func:`cached.device_key`), setting at the default operating point, key of the ε pass whose scores it shows or
#: None) -> :class:`View`.
VIEWS = LRURegistry(32)
#: The detector views that do not change with λ (every detector's but Rel-U's, without ε), shared by the views of
#: every λ: (run id, where its algebra ran, detector key, T for Doctor (the others keep their standard one), tuning
#: fraction, seed) -> :class:`DetectorView`.
FIXED_DETECTOR_VIEWS = LRURegistry(32)


def clear() -> None:
    """Empties every cache of a view's computation (the views, the fixed detectors' views and
    :func:`cached.clear`'s per-run pieces and λ grids), as a fresh server process would find them."""
    cached.clear()
    VIEWS.clear()
    FIXED_DETECTOR_VIEWS.clear()


@dataclass
class DetectorView:
    """One detector on a view: uncertainty on every sample and on the evaluation split, curves, metrics."""

    name: str
    all_scores: Callable[[], np.ndarray] = field(repr=False)  # every sample's uncertainty, computed on first use
    eval_uncertainty: np.ndarray
    fpr: np.ndarray
    tpr: np.ndarray
    coverage: np.ndarray
    risk: np.ndarray
    summary: dict[str, float]

    @functools.cached_property
    def uncertainty(self) -> np.ndarray:
        """Uncertainty on every sample (not replaced by perturbed scores). Rel-U's costs N x C² multiply-adds and
        only the galleries read it, so a view computes it when first asked; the curves need the evaluation split's."""
        return self.all_scores()


class Marked:
    """What a view shows at one operating point: each detector's point, and the ROC, risk-coverage and
    generalised risk-coverage figures of the shown detectors with their points marked, each built when first
    asked (a page draws two of the three).

    ``eval_idx`` / ``correct_eval``: the samples the points are read on, the view's evaluation split, or, at a
    guaranteed risk, its evaluation half (``guarantee``: the :class:`~relu_core.explore.guarantee.GuaranteeView`,
    whose calibration half certified the thresholds)."""

    def __init__(
        self,
        view: View,
        points: dict[str, metrics.OperatingPoint],
        at_target: dict[str, metrics.OperatingPoint],
        guarantee: guarantee_module.GuaranteeView | None = None,
        positive: str = "correct",
    ):
        self.points = points
        #: The convention of the ROC's open circles (``Setting.fpr_positive``).
        self.positive = positive
        self.guarantee = guarantee
        self.eval_idx = view.eval_idx if guarantee is None else guarantee.eval_idx
        self.correct_eval = view.correct_eval if guarantee is None else guarantee.correct_eval
        self._view = view
        self._at_target = at_target

    @functools.cached_property
    def roc(self):
        return roc_figure(self._view, self.points, self._at_target, self.positive)

    @functools.cached_property
    def rc(self):
        return risk_coverage_figure(self._view, self.points, guarantee=self.guarantee)

    @functools.cached_property
    def generalized_rc(self):
        return risk_coverage_figure(self._view, self.points, generalized=True, guarantee=self.guarantee)


@dataclass(eq=False)
class View:
    """One run at one setting (:attr:`setting`, at the default operating point). Under input pre-processing
    ``perturbed`` holds the ε pass whose scores replace Rel-U's and Doctor's on the evaluation split (on its
    subsample when it has one: ``eval_idx`` is then that subsample). ``paired`` (Rel-U − Doctor with its paired
    interval, per metric) is filled in when its bootstrap lands (:func:`paired_job`, :func:`ensure_paired`)."""

    run_id: str
    class_names: tuple[str, ...]
    setting: Setting
    tune_idx: np.ndarray
    eval_idx: np.ndarray
    predictions: np.ndarray
    correct: np.ndarray
    dstar: np.ndarray
    lam_used: float
    fallback: bool
    accuracy_eval: float
    perturbed: eps.Perturbed | None = None
    detectors: dict[str, DetectorView] = field(default_factory=dict)
    paired: dict[str, stats.PairedDifference] = field(default_factory=dict)
    #: Rel-U refitted on resampled tuning samples (:func:`_refitted_relu_scores`), for the paired bootstrap; None
    #: where D* stays as fitted (ε > 0, or a fit too large to repeat 1,000 times: :data:`PAIRED_REFIT_MAX_WORK`).
    refit: Callable[[np.ndarray], np.ndarray] | None = field(default=None, repr=False)
    _marked: LRURegistry = field(default_factory=lambda: LRURegistry(4), repr=False)

    @property
    def correct_eval(self) -> np.ndarray:
        return self.correct[self.eval_idx]

    @property
    def paired_other(self) -> stats.PairedDifference | None:
        """Rel-U − Doctor of FPR95 with errors positive (the other operating point), with its paired interval,
        once the bootstrap landed (:func:`paired_for` computes it with the others: :class:`PairedSet`)."""
        return getattr(self.paired, "other", None)

    def fpr95_by_positive(self, key: str) -> dict[str, float]:
        """FPR95 of detector ``key`` on the evaluation split under both conventions (``"correct"``, ``"error"``)."""
        d = self.detectors[key]
        error = metrics.fpr_at_tpr(d.eval_uncertainty, self.correct_eval, 0.95, positive="error")
        return {"correct": d.summary["fpr95"], "error": float(error)}

    @functools.cached_property
    def heat(self):
        """The D* heatmap."""
        return figures.dstar_heatmap(self.dstar, self.class_names, title=f"D* (Rel-U, λ = {self.lam_used:.3g})")

    @functools.cached_property
    def dstar_caption(self) -> str:
        """What D* is fitted on, as an HTML paragraph."""
        text = (
            f"Fitted on the tuning split ({self.tune_idx.size} samples) at T = {self.setting.temperature:g}, "
            f"λ = {self.lam_used:.3g}; normalised to unit Frobenius norm."
        )
        if self.fallback:
            text += f" {protocol.FALLBACK_LABEL}: D* is empty at this λ, so Rel-U ranks exactly like Doctor."
        return f"<p>{html.escape(text)}</p>"

    def marked(self, setting: Setting) -> Marked:
        """The operating points of every detector at ``setting``'s operating point and the curves of the shown
        ones with them marked; kept with the view (a λ press that lands on a neighbour reuses its figures)."""
        key = (setting.op_kind, setting.op_target, setting.op_delta if setting.guaranteed else None)
        found = self._marked.get(key)
        if found is None:
            at_target = self._points("errors" if setting.op_kind == "errors" else "tpr", ROC_MARK_TPR)
            if setting.guaranteed:
                certified = guarantee_module.guarantee_view(self, setting.op_target, setting.op_delta)
                found = Marked(self, certified.points, at_target, certified)
            else:
                same = key[:2] in (("tpr", ROC_MARK_TPR), ("errors", ROC_MARK_TPR))
                points = at_target if same else self._points(*key[:2])
                found = Marked(self, points, at_target, positive=setting.fpr_positive)
            self._marked[key] = found
        return found

    def _points(self, kind: str, target: float) -> dict[str, metrics.OperatingPoint]:
        return {
            k: metrics.operating_point(d.eval_uncertainty, self.correct_eval, kind, target)
            for k, d in self.detectors.items()
        }


def _shown(view: View) -> dict[str, DetectorView]:
    return {k: view.detectors[k] for k in view.setting.detectors}


def roc_figure(
    view: View,
    points: dict[str, metrics.OperatingPoint],
    at_target: dict[str, metrics.OperatingPoint],
    positive: str = "correct",
):
    """The ROC figure of the view's shown detectors, their operating ``points`` marked, and the points
    ``at_target`` (each detector's operating point at :data:`ROC_MARK_TPR`: of the correct predictions kept, or
    with ``positive="error"`` of the errors caught)."""
    shown = _shown(view)
    return figures.roc_figure(
        {d.name: (d.fpr, d.tpr, d.summary["auroc"]) for d in shown.values()},
        {d.name: (points[k].fpr, points[k].tpr) for k, d in shown.items()},
        target_points={d.name: (at_target[k].fpr, at_target[k].tpr) for k, d in shown.items()},
        tpr_target=ROC_MARK_TPR,
        max_points=CURVE_POINTS,
        title="ROC, evaluation split",
        target_positive=positive,
    )


def risk_coverage_figure(
    view: View,
    points: dict[str, metrics.OperatingPoint],
    generalized: bool = False,
    guarantee: guarantee_module.GuaranteeView | None = None,
):
    """The risk-coverage figure of the view's shown detectors, their operating ``points`` marked; ``generalized``:
    risk × coverage (the share of accepted errors) against coverage, with AUGRC. At a ``guarantee`` the marks are
    the certified thresholds read on the evaluation half, and the risk chart draws the line of r*."""
    shown = _shown(view)
    extra = {}
    if guarantee is not None:
        extra = {"point_label": "certified threshold (evaluation half)"}
        if not generalized:
            extra["risk_line"] = (guarantee.risk, f"r* = {risk_control.percent(guarantee.risk)} (the guarantee)")
    if generalized:
        curves = {d.name: (d.coverage, d.risk * d.coverage, d.summary["augrc"]) for d in shown.values()}
        marks = {d.name: (points[k].coverage, points[k].risk * points[k].coverage) for k, d in shown.items()}
    else:
        curves = {d.name: (d.coverage, d.risk, d.summary["aurc"]) for d in shown.values()}
        marks = {d.name: (points[k].coverage, points[k].risk) for k, d in shown.items()}
    title = f"{'Generalised risk' if generalized else 'Risk'}-coverage, evaluation split"
    marks = {name: mark for name, mark in marks.items() if all(np.isfinite(mark))}  # refused: nothing accepted
    return figures.risk_coverage_figure(
        curves, marks, generalized=generalized, max_points=CURVE_POINTS, title=title, **extra
    )


def view(run, setting: Setting, perturbed: eps.Perturbed | None = None) -> View:
    """The view of ``run`` at ``setting``, from :data:`VIEWS` or computed (:func:`compute`). Under ε > 0 it
    shows ``perturbed`` (a finished stage of :func:`eps.eps_pass`, of the setting's ε); without it the whole
    evaluation split's ε pass is computed here (headless use)."""
    scoring = setting.scoring()
    if perturbed is not None and perturbed.eps != scoring.eps:
        raise ValueError(f"the ε pass is for ε = {perturbed.eps:g}, the setting's ε is {scoring.eps:g}")
    whole_split_here = scoring.eps > 0 and perturbed is None
    if whole_split_here:
        stage = eps.eps_job_key(run.run_id, scoring, None)
    else:
        stage = None if perturbed is None else perturbed.key
    key = (run.run_id, cached.device_key(run), scoring, stage)
    found = VIEWS.get(key)
    if found is None:
        if whole_split_here:
            perturbed = eps.perturb(run, scoring, None)
        found = VIEWS[key] = compute(run, scoring, perturbed)
    return found


@threads.small_work
def compute(run, setting: Setting, perturbed: eps.Perturbed | None = None) -> View:
    """The view of ``run`` at ``setting`` (uncached: :func:`view` caches it). Rel-U and Doctor are always
    computed (D* and the paired comparison need them). Without ε, the detectors that do not depend on λ (Doctor
    and the training-free baselines) come with their curves and metrics from :data:`FIXED_DETECTOR_VIEWS`.
    Rel-U's evaluation scores come from the (run, T, split)'s λ grid when it is ready and λ is on it
    (:func:`cached.ready_lambda_grid`), else from the dense ``p^T D* p`` (and the grid's job is started), on
    the run's torch device when it has one (:func:`cached.slider_device`; on a GPU there is no grid). Clean
    scores of samples with identical logits are made equal (:func:`cached.tied_equal`); ε-perturbed ones are not."""
    predictions, correct = cached.correctness(run)
    tune_idx, eval_idx = cached.split_for(run, setting.tune_fraction, setting.seed)
    if perturbed is not None and perturbed.subset is not None:
        eval_idx = perturbed.subset
    probs = cached.scoring_probs(run, setting.temperature)
    relu = cached.fitted_relu(run, setting)
    relu_eval = grid = None
    grid_at = (run, setting.temperature, setting.tune_fraction, setting.seed)
    if perturbed is None:  # Rel-U's scores at every λ of the slider, prepared in the background once per (T, split)
        grid = cached.ready_lambda_grid(*grid_at)
        if grid is not None:
            relu_eval = grid.scores_at(relu.lam_)
    scores = {"doctor": cached.doctor_at(run, setting.temperature)}
    for key in setting.detectors:
        if key not in scores and key != "relu":
            scores[key] = cached.fixed_scores(run, key)
    correct_eval = correct[eval_idx]
    result = View(
        run.run_id,
        tuple(run.class_names),
        setting,
        tune_idx,
        eval_idx,
        predictions,
        correct,
        relu.matrix_,
        float(relu.lam_),
        bool(relu.fallback_),
        float(correct_eval.mean()),
        perturbed,
    )
    if perturbed is None and len(correct) * len(run.class_names) ** 2 <= PAIRED_REFIT_MAX_WORK:
        result.refit = functools.partial(_refitted_relu_scores, run, setting, tune_idx, eval_idx)
    replaced = perturbed.scores if perturbed is not None else {}
    for key in dict.fromkeys([*setting.detectors, *protocol.PAIRED]):
        if key == "relu":
            # the softmax is fetched again when asked, so that a cached view never holds on to it (N x C float64)
            all_scores = functools.partial(_every_relu_score, run, relu)
            if key in replaced:
                eval_u = replaced[key]
            elif relu_eval is not None:
                eval_u = relu_eval
            else:
                eval_u = cached.as_numpy(detectors.quadratic_score(probs, relu.matrix_, eval_idx))
        elif perturbed is None:  # the same on every λ: kept across λ moves
            result.detectors[key] = _fixed_detector_view(run, key, setting, scores[key], eval_idx, correct_eval)
            continue
        else:
            all_scores = functools.partial(np.asarray, scores[key])
            eval_u = replaced[key] if key in replaced else scores[key][eval_idx]
        if key not in replaced:  # ε-perturbed inputs of identical clean logits need not score alike: never tied
            eval_u = cached.tied_equal(run, eval_idx, eval_u)
        result.detectors[key] = detector_view(key, all_scores, eval_u, correct_eval)
    if perturbed is None and grid is None:  # started once this view is done, so that the two do not share the CPUs
        cached.lambda_grid_job(*grid_at)
    return result


def _fixed_detector_view(
    run, key: str, setting: Setting, scores: np.ndarray, eval_idx: np.ndarray, correct_eval: np.ndarray
) -> DetectorView:
    """The view of a detector that does not depend on λ, from :data:`FIXED_DETECTOR_VIEWS` or computed there."""
    temperature = setting.temperature if key == "doctor" else None  # the others keep their standard T
    fixed_key = (run.run_id, cached.device_key(run), key, temperature, setting.tune_fraction, setting.seed)
    found = FIXED_DETECTOR_VIEWS.get(fixed_key)
    if found is None:
        eval_u = cached.tied_equal(run, eval_idx, scores[eval_idx])
        found = FIXED_DETECTOR_VIEWS[fixed_key] = detector_view(key, scores, eval_u, correct_eval)
    return found


def detector_view(
    key: str,
    uncertainty: np.ndarray | Callable[[], np.ndarray],
    eval_uncertainty: np.ndarray,
    correct_eval: np.ndarray,
) -> DetectorView:
    """The :class:`DetectorView` of detector ``key``: its curves and metrics on the evaluation split;
    ``uncertainty`` (every sample's) as an array or a function that computes it when first asked."""
    all_scores = uncertainty if callable(uncertainty) else functools.partial(np.asarray, uncertainty)
    fpr, tpr, _ = metrics.roc_curve(eval_uncertainty, correct_eval)
    coverage, risk = metrics.risk_coverage_curve(eval_uncertainty, correct_eval)
    summary = metrics.summary(eval_uncertainty, correct_eval)
    return DetectorView(detectors.label(key), all_scores, eval_uncertainty, fpr, tpr, coverage, risk, summary)


def _every_relu_score(run, relu: detectors.RelU) -> np.ndarray:
    """Rel-U's uncertainty on every sample of ``run`` (a view's :attr:`DetectorView.uncertainty`)."""
    return cached.as_numpy(relu.score_probs(cached.scoring_probs(run, relu.temperature)))


# ------------------------------------------------------------------------------- the paired bootstrap


#: Explore's paired bootstrap refits D* in every resample (:func:`paired_for`) when one fit and scoring, N x C²
#: multiply-adds, is at most this: 10,000 samples of 10 classes (10^6) take about 0.5-1 s on two cores (50,000 of 10
#: took 5.8 s with the machine busy), and the Start page waits for it. Above it D* stays as fitted on the tuning
#: split and the interval says so.
PAIRED_REFIT_MAX_WORK = 2e6


def _refitted_relu_scores(run, setting: Setting, tune_idx, eval_idx, weights: np.ndarray) -> np.ndarray:
    """Rel-U's scores of the evaluation samples with D* refitted on the tuning samples weighted by each row of
    ``weights`` (a resample's draw counts), at the setting's T and λ (``"auto"`` resolved per fit)."""
    probs = cached.probs_at(run, setting.temperature)
    correct = cached.correctness(run)[1]
    matrices = detectors.weighted_relu_matrices(probs[tune_idx], correct[tune_idx], weights, setting.lam)
    return detectors.quadratic_scores(probs[eval_idx], matrices)


class PairedSet(dict):
    """Rel-U − Doctor per metric (a dict, metric key -> :class:`stats.PairedDifference`, FPR95 with correct
    predictions positive) and ``other``: FPR95 with errors positive, the other operating point, its own paired
    interval from the same resampling (None when not computed)."""

    other: stats.PairedDifference | None = None


def paired_for(view: View, cancel=None) -> dict[str, stats.PairedDifference]:
    """Rel-U − Doctor on the view's evaluation split with its paired bootstrap interval (1,000 resamples seeded
    with the split seed; Explore runs it as :func:`paired_job`). Where :attr:`View.refit` is set, each resample
    draws the tuning and the evaluation samples together and D* is refitted on the tuning samples drawn
    (``stats.refitted_paired``: the interval includes how much the fit varies; a second or two at 10,000 samples of
    10 classes); otherwise the evaluation samples alone are resampled with D* as fitted (conditional on that fit,
    :func:`paired_note`)."""
    relu, doctor = (view.detectors[k].eval_uncertainty for k in protocol.PAIRED)
    if view.refit is None:
        found = PairedSet(stats.paired_bootstrap(relu, doctor, view.correct_eval, seed=view.setting.seed))
        found.other = stats.paired_bootstrap(
            relu, doctor, view.correct_eval, seed=view.setting.seed, metrics=("fpr95",), fpr_positive="error"
        )["fpr95"]
        return found
    a, b = (view.detectors[k].summary for k in protocol.PAIRED)
    estimates = {m: a[m] - b[m] for m in metric_info.PAIRED_KEYS}
    common = {"seed": view.setting.seed, "cancel": cancel}
    found = PairedSet(
        stats.refitted_paired(view.refit, doctor, view.correct, view.tune_idx, view.eval_idx, estimates, **common)
    )
    a_err, b_err = (view.fpr95_by_positive(k)["error"] for k in protocol.PAIRED)
    found.other = stats.refitted_paired(
        view.refit,
        doctor,
        view.correct,
        view.tune_idx,
        view.eval_idx,
        {"fpr95": a_err - b_err},
        fpr_positive="error",
        **common,
    )["fpr95"]
    return found


def paired_note(view: View) -> str:
    """How the view's paired interval was made, in words (the page's caption, the report's note)."""
    first = next(iter(view.paired.values()), None)
    confidence, n_resamples = (first.confidence, first.n_resamples) if first else (0.95, stats.DEFAULT_RESAMPLES)
    if view.refit is not None:
        return (
            f"{100 * confidence:g} % percentile interval over {n_resamples:,} paired bootstrap resamples of the "
            "tuning and evaluation samples together, Rel-U's D* refitted on each resample's tuning samples (the "
            "same resample scores both detectors): the interval includes how much the fit itself varies."
        )
    why = (
        "input pre-processing (ε) is computed for the fitted D* only"
        if view.perturbed is not None
        else "refitting it 1,000 times would cost too much for this many samples and classes"
    )
    return (
        f"{100 * confidence:g} % percentile interval over {n_resamples:,} paired bootstrap resamples of the "
        "evaluation samples (the same resample scores both detectors). Rel-U's D* stays as fitted on the tuning "
        f"split ({why}), so the interval is conditional on that fit and narrower than one that refits it."
    )


def paired_job_key(view: View) -> str:
    """The key of :func:`paired_job`: the content the bootstrap depends on (both detectors' evaluation scores,
    the correctness, the seed; with D* refitted, the tuning samples and the setting's T and λ too)."""
    relu, doctor = (view.detectors[k].eval_uncertainty for k in protocol.PAIRED)
    parts = [relu, doctor, view.correct_eval, np.int64(view.setting.seed)]
    refit = ""
    if view.refit is not None:
        parts += [view.tune_idx, view.eval_idx, view.correct]
        refit = f":refit:{view.run_id}:{view.setting.temperature:g}:{view.setting.lam}"
    return f"paired:{cache.array_digest(*parts)}{refit}"


def paired_job_label(view: View) -> str:
    """What the jobs panel calls :func:`paired_job`: the bootstraps of λ's neighbours run beside the view's own, so
    each is named by its λ and T (two identical "paired bootstrap: starting" rows told nothing)."""
    lam = f"λ auto = {view.lam_used:.3g}" if view.setting.lam == "auto" else f"λ = {view.setting.lam:g}"
    return f"Rel-U − Doctor paired bootstrap at {lam}, T = {view.setting.temperature:g}"


def paired_job(view: View) -> jobs.Job:
    """:func:`paired_for` as a background job, keyed by the content it depends on (:func:`paired_job_key`): a
    setting seen again, in any session, reuses its result."""

    def work(progress, cancel):
        progress(0, 0, f"resampling {view.eval_idx.size:,} evaluation samples")
        return paired_for(view, cancel)

    return jobs.MANAGER.submit(paired_job_key(view), paired_job_label(view), work)


def ensure_paired(view: View) -> dict[str, stats.PairedDifference]:
    """The view's paired differences, computed here when its bootstrap has not landed (a report, the Start page)."""
    if not view.paired:
        view.paired = paired_for(view)
    return view.paired


def settle_paired(view: View, job: jobs.Job | None) -> tuple[bool, str]:
    """Waits up to :data:`PAIRED_WAIT_S` for the view's paired bootstrap ``job`` and keeps its result with the
    view. Returns (whether it is still running, the message of a failure): a failed or cancelled job is
    forgotten, so that asking again retries."""
    if job is None:
        return False, ""
    return job.settle(PAIRED_WAIT_S, lambda result: setattr(view, "paired", result))
