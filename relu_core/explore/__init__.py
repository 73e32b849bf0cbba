"""The widget-free part of the app: a view of a run at one :class:`Setting` (scores, curves, metrics, D*, the
paired bootstrap), used by Explore, Start, the HTML report, the CLI ``report`` and ``bench/``; the views of λ's
neighbours; the two-stage ε pass; the view in tables, words and files.

- :mod:`~relu_core.explore.setting`: :class:`Setting`, validated once, and the choices the controls offer;
- :mod:`~relu_core.explore.cached`: the per-run pieces views share (softmax per T, splits, fixed detectors);
- :mod:`~relu_core.explore.views`: :func:`view` and its one cache, the paired bootstrap;
- :mod:`~relu_core.explore.neighbours`: the views of λ ± 0.01;
- :mod:`~relu_core.explore.eps`: input pre-processing, a subsample first then the whole split, as jobs;
- :mod:`~relu_core.explore.guarantee`: the detectors at a guaranteed risk (a calibration half certifies, the
  evaluation half shows), Rel-U − Doctor in coverage;
- :mod:`~relu_core.explore.tables`: the metrics, paired and operating tables, the settings and verdicts in words;
- :mod:`~relu_core.explore.export`: the view's data (ZIP) and its HTML report.

Nothing here imports Streamlit, so ``bench/bench_app.py`` times exactly what a slider change runs.
"""

from relu_core.explore.cached import confusion_figure
from relu_core.explore.eps import EpsMemory, EpsPass, device_name, eps_pass
from relu_core.explore.export import report_html, view_zip
from relu_core.explore.guarantee import GuaranteeView
from relu_core.explore.guarantee import paired_job as guarantee_paired_job
from relu_core.explore.guarantee import settle_paired as guarantee_settle_paired
from relu_core.explore.neighbours import neighbour_paired, neighbour_views
from relu_core.explore.setting import (
    DELTAS,
    DETECTOR_CHOICES,
    EPSILONS,
    LAM_DECIMALS,
    LAM_STEP,
    RISKS,
    TEMPERATURES,
    Setting,
)
from relu_core.explore.tables import (
    OPERATING_NOTE,
    guarantee_html,
    metrics_html,
    operating_html,
    operating_note,
    operating_points_html,
    operating_points_lines,
    paired_html,
    readable_hyperparameters,
    start_verdict,
    thumbnail,
)
from relu_core.explore.views import View, ensure_paired, paired_job, paired_job_key, paired_note, settle_paired, view

__all__ = [
    "DELTAS",
    "DETECTOR_CHOICES",
    "EPSILONS",
    "LAM_DECIMALS",
    "LAM_STEP",
    "OPERATING_NOTE",
    "RISKS",
    "TEMPERATURES",
    "EpsMemory",
    "EpsPass",
    "GuaranteeView",
    "Setting",
    "View",
    "confusion_figure",
    "device_name",
    "ensure_paired",
    "eps_pass",
    "guarantee_html",
    "guarantee_paired_job",
    "guarantee_settle_paired",
    "metrics_html",
    "neighbour_paired",
    "neighbour_views",
    "operating_html",
    "operating_note",
    "operating_points_html",
    "operating_points_lines",
    "paired_html",
    "paired_job",
    "paired_job_key",
    "paired_note",
    "readable_hyperparameters",
    "report_html",
    "settle_paired",
    "start_verdict",
    "thumbnail",
    "view",
    "view_zip",
]
