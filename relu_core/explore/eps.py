"""Input pre-processing (ε) on a view, in two stages: on a CPU a stated subsample of the evaluation split is
scored first (shown at once), then the whole split; on a GPU the whole split at once. Each stage is a background
job (:data:`jobs.MANAGER`) shared by every session asking for it; :func:`eps_pass` says what to show meanwhile
(the last result of this setting, else the clean scores) and never blocks."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from relu_core import detectors, jobs, preprocessing
from relu_core.errors import InputError
from relu_core.explore import cached
from relu_core.explore.setting import Setting

#: On CPU an ε pass first scores this many evaluation images (shown at once), then the whole split.
EPS_SUBSAMPLE = 1000


def device_name() -> str:
    """The device the engine would compute on (named in the progress box; a GPU computes ε passes whole)."""
    try:
        from relu_core import engine

        device = engine.select_device("auto")
    except ImportError:
        return "cpu"
    if device.type == "cuda":
        import torch

        return f"GPU ({torch.cuda.get_device_name(device)})"
    return str(device)


@dataclass(frozen=True, eq=False)
class Perturbed:
    """Rel-U and Doctor uncertainty (``scores``: key -> (M,)) on inputs pre-processed with magnitude ``eps``,
    on ``subset`` of the evaluation split (None: the whole split); ``key`` is its job's (it names the result in
    the view cache)."""

    eps: float
    subset: np.ndarray | None
    scores: dict[str, np.ndarray]
    key: str


def eps_subsample(run, setting: Setting) -> np.ndarray | None:
    """The evaluation-split subsample an ε pass computes first on CPU (seeded, sorted), or None (a GPU, or an
    evaluation split of at most :data:`EPS_SUBSAMPLE` samples: the whole split at once).

    Stratified by correctness: errors in the split's proportion, and at least one when the split has any, so
    the subsample's curves and metrics are defined even for an accurate model (a plain draw of 100 of a
    98 %-accurate model's 449 evaluation samples holds no error about one time in ten)."""
    _, eval_idx = cached.split_for(run, setting.tune_fraction, setting.seed)
    if eval_idx.size <= EPS_SUBSAMPLE or device_name().startswith("GPU"):
        return None
    correct = cached.correctness(run)[1][eval_idx]
    wrong, right = eval_idx[~correct], eval_idx[correct]
    n_wrong = min(wrong.size, max(1, round(EPS_SUBSAMPLE * wrong.size / eval_idx.size))) if wrong.size else 0
    n_right = min(right.size, EPS_SUBSAMPLE - n_wrong)
    rng = np.random.default_rng(setting.seed)
    return np.sort(
        np.concatenate([rng.choice(wrong, n_wrong, replace=False), rng.choice(right, n_right, replace=False)])
    )


def eps_job_key(run_id: str, setting: Setting, subset: np.ndarray | None) -> str:
    """The key of :func:`eps_job`'s job for this setting (e.g. to remember that it failed without asking again)."""
    s = setting
    part = "all" if subset is None else f"sub{subset.size}"
    return f"eps:{run_id}:{s.temperature:g}:{s.lam}:{s.tune_fraction:g}:{s.seed}:{s.eps:g}:{part}"


def perturb(run, setting: Setting, subset: np.ndarray | None, progress=None, cancel=None) -> Perturbed:
    """Rel-U and Doctor on inputs pre-processed with the setting's ε (``preprocessing.perturbed_scores``; the
    engine caches it on disk), on ``subset`` of the evaluation split or the whole split when None. Rel-U is
    fitted on the clean tuning split, as in the paper."""
    if run.model is None or run.images is None:
        raise InputError("input pre-processing needs the model and the images; this run has logits only")
    _, eval_idx = cached.split_for(run, setting.tune_fraction, setting.seed)
    fitted = {"relu": cached.fitted_relu(run, setting), "doctor": detectors.Doctor(setting.temperature)}
    scores = {
        key: np.asarray(
            preprocessing.perturbed_scores(
                run.model,
                run.images,
                detector,
                setting.eps,
                mean=run.mean,
                std=run.std,
                indices=eval_idx if subset is None else subset,
                progress=progress,
                cancel=cancel,
            ),
            dtype=np.float64,
        )
        for key, detector in fitted.items()
    }
    return Perturbed(setting.eps, subset, scores, eps_job_key(run.run_id, setting, subset))


def eps_job(run, setting: Setting, subset: np.ndarray | None, *, session: str) -> jobs.Job:
    """:func:`perturb` as a background job, shared by every session asking for the same setting; a new setting
    asked by ``session`` (a session id) cancels that session's previous ε passes, so only the last value is
    computed. Its result is a :class:`Perturbed`."""
    what = "the whole evaluation split" if subset is None else f"{subset.size:,} evaluation images"
    part = "all" if subset is None else f"sub{subset.size}"
    return jobs.MANAGER.submit(
        eps_job_key(run.run_id, setting, subset),
        f"Input pre-processing ε = {setting.eps:g} on {what}",
        lambda progress, cancel: perturb(run, setting, subset, progress, cancel),
        group=f"eps:{session}:{part}",
    )


@dataclass
class EpsMemory:
    """A session's memory of its ε passes: the last result shown with what it was fitted on (kept on screen
    while the next value runs), and the passes that failed (job key -> message: not asked again until
    :meth:`retry`)."""

    last: tuple[tuple, Perturbed] | None = None
    failed: dict[str, str] = field(default_factory=dict)

    def retry(self) -> None:
        self.failed.clear()


@dataclass(frozen=True)
class EpsPass:
    """What the panels show under input pre-processing: ``setting`` is the one shown (its ε that of
    ``perturbed``, the best finished result, or 0 while there is none: the clean scores), ``note`` says so;
    ``job`` is the pass still running (None when none), ``step`` its place among the passes ("step 2 of 2"; ""
    when there is one), ``done`` whether the whole split's result for the ε asked is the one shown, ``failed``
    the message of a pass of this setting that failed ("" when none)."""

    setting: Setting
    perturbed: Perturbed | None = None
    note: str = ""
    job: jobs.Job | None = None
    step: str = ""
    done: bool = False
    failed: str = ""


def eps_pass(run, setting: Setting, memory: EpsMemory, *, session: str) -> EpsPass:
    """The ε pass of ``setting`` for a session (its ``memory`` and id), never blocking: starts or joins the
    stage still to compute (the subsample, then the whole split) and says what to show meanwhile."""
    if setting.eps == 0:
        return EpsPass(setting)
    fitted_on = (run.run_id, setting.temperature, setting.lam, setting.tune_fraction, setting.seed)
    subset = eps_subsample(run, setting)
    stages = ([subset] if subset is not None else []) + [None]
    shown, pending, step, failed = None, None, "", ""
    for n, stage in enumerate(stages):
        key = eps_job_key(run.run_id, setting, stage)
        if key in memory.failed:
            failed = memory.failed[key]
            break
        # a pass that failed since the last rerun is read before asking again: submitting replaces a failed job,
        # so the failure would be seen only when the new attempt failed before this line (a race the page lost
        # run after run, retrying a failing pass for ever without a word)
        ended = jobs.MANAGER.get(key)
        job = (
            ended if ended is not None and ended.state == jobs.FAILED else eps_job(run, setting, stage, session=session)
        )
        if job.state == jobs.DONE:
            shown = job.result
            continue
        if job.state == jobs.FAILED:
            failed = memory.failed[key] = job.error
            jobs.MANAGER.forget(job.key)  # another session asking for it tries again
        else:
            pending, step = job, f"step {n + 1} of {len(stages)}" if len(stages) > 1 else ""
        break
    if shown is not None:
        memory.last = (fitted_on, shown)
    elif memory.last is not None and memory.last[0] == fitted_on:
        shown = memory.last[1]
    state = f"ε = {setting.eps:g} could not be computed" if failed else f"ε = {setting.eps:g} is being computed"
    if shown is None:
        note = f"{state}; shown meanwhile: clean scores (ε = 0)"
        return EpsPass(setting.replace(eps=0.0), None, note, pending, step, failed=failed)
    where = (
        "the whole evaluation split"
        if shown.subset is None
        else f"a subsample of {shown.subset.size:,} evaluation images"
    )
    note = f"ε = {shown.eps:g} on {where}"
    if shown.eps != setting.eps or failed:
        note = f"{state}; shown meanwhile: {note}"
    done = shown.eps == setting.eps and shown.subset is None
    return EpsPass(setting.replace(eps=shown.eps), shown, note, pending, step, done, failed)
