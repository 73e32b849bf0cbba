"""The views of λ's neighbours (λ ± :data:`LAM_STEP`), computed with each view so that the browser can show
them the moment the λ slider reaches them, before the server reruns (``studio.live_chart.Follow``)."""

from __future__ import annotations

import logging

from relu_core import jobs
from relu_core.explore import cached, views
from relu_core.explore.setting import LAM_DECIMALS, LAM_STEP, Setting

_LOG = logging.getLogger(__name__)

#: Neighbours are computed only for runs whose views and bootstraps are cheap: the dense Rel-U score costs
#: N × C² multiply-adds (10k × 100: 10⁸, a few ms; 50k × 1000: 5·10¹⁰, seconds) and the paired bootstrap
#: ~N·10³. Once the (T, split)'s λ grid is ready (``cached.ready_lambda_grid``) a neighbour's Rel-U scores are
#: read from it, and on a GPU (``cached.on_gpu``) they take milliseconds: then only
#: :data:`FOLLOW_MAX_SAMPLES` bounds them.
FOLLOW_MAX_WORK = cached.GRID_MIN_WORK
FOLLOW_MAX_SAMPLES = 50_000


def follows_lambda(run, setting: Setting) -> bool:
    """Whether λ's neighbours are computed: not under λ auto, nor under ε (the pass is per λ), nor for a run too
    large (:data:`FOLLOW_MAX_SAMPLES`; :data:`FOLLOW_MAX_WORK` unless its dense algebra runs on a GPU or the λ
    grid of its T and split is ready)."""
    n, c = len(run.labels), len(run.class_names)
    if setting.lam == "auto" or setting.eps != 0 or n > FOLLOW_MAX_SAMPLES:
        return False
    if n * c * c <= FOLLOW_MAX_WORK or cached.on_gpu(run):
        return True
    return cached.ready_lambda_grid(run, setting.temperature, setting.tune_fraction, setting.seed) is not None


def neighbour_views(run, setting: Setting) -> dict[float, views.View]:
    """λ's neighbours in [0, 1] -> their views (none when :func:`follows_lambda` says no). A neighbour that
    cannot be computed is left out (a move there then waits for the server, which says what failed)."""
    if not follows_lambda(run, setting):
        return {}
    found = {}
    for lam in (round(setting.lam - LAM_STEP, LAM_DECIMALS), round(setting.lam + LAM_STEP, LAM_DECIMALS)):
        if 0.0 <= lam <= 1.0:
            try:
                found[lam] = views.view(run, setting.replace(lam=lam))
            except Exception:  # noqa: BLE001 - logged; the server's own view of it says what failed
                _LOG.exception("the view of λ = %s could not be computed", lam)
    return found


def neighbour_paired(view: views.View, *, start: bool) -> bool:
    """Takes a neighbour's paired bootstrap result when it has landed; with ``start`` (once the shown view's own
    has landed, so that it never waits behind them) starts it when missing. Returns whether the interval is still
    to come (False once landed, or when its job failed: the server's own view will say why)."""
    if view.paired:
        return False
    job = views.paired_job(view) if start else jobs.MANAGER.get(views.paired_job_key(view))
    if job is not None and job.state == jobs.DONE:
        view.paired = job.result
    return not view.paired and not (job is not None and job.state in (jobs.FAILED, jobs.CANCELLED))
