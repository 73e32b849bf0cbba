"""Rel-U Studio core library: misclassification detectors, their metrics and the evaluation protocol.

The public API is the names in :data:`__all__`; everything else lives in the submodules and may change::

    import relu_core as rc

    detector = rc.RelU(lam=0.5).fit(tune_logits, tune_labels)    # D* from the tuning split only
    uncertainty = detector.score(eval_logits)                    # higher = more likely misclassified
    rc.fpr_at_tpr(uncertainty, eval_correct), rc.auroc(uncertainty, eval_correct)
    result = rc.evaluate(logits, labels, ["relu", "doctor"])     # seeded splits, Rel-U − Doctor interval

Detectors (``fit`` on a tuning split, ``score`` on another): :class:`RelU`, :class:`Doctor`, :class:`MSP`,
:class:`ODIN`, :class:`Entropy`, :class:`Energy`, :func:`make_detector`. Metrics (positives are the correctly
classified samples): :func:`roc_curve`, :func:`fpr_at_tpr`, :func:`auroc`, :func:`risk_coverage_curve`,
:func:`aurc`, :func:`eaurc`, :func:`operating_point`, :func:`accuracy`, :func:`ece`. The protocol:
:func:`split_indices`, :func:`evaluate`; the paired comparison: :func:`paired_bootstrap`; a threshold with a
guaranteed risk among accepted predictions: :func:`guaranteed_risk`. Figures (plotly):
:func:`dstar_heatmap`, :func:`confusion_heatmap`, :func:`roc_figure`, :func:`risk_coverage_figure`. Logits:
:func:`load_logits` (a file), :func:`logits_for` (a model on a data set). Bad input raises :class:`InputError`.

The names are imported on first use (PEP 562 ``__getattr__``): ``import relu_core`` loads neither torch nor
plotly (eagerly it took seconds), and changes no thread setting. Nothing in this package imports Streamlit;
the app in ``app.py`` and ``app_pages/`` is a thin layer on top.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

#: Each public name and the submodule that defines it.
_EXPORTS: dict[str, str] = {
    "InputError": "errors",
    # detectors
    "Detector": "detectors",
    "RelU": "detectors",
    "Doctor": "detectors",
    "MSP": "detectors",
    "ODIN": "detectors",
    "Entropy": "detectors",
    "Energy": "detectors",
    "make_detector": "detectors",
    "softmax": "detectors",
    "relu_matrix": "detectors",
    # metrics
    "roc_curve": "metrics",
    "fpr_at_tpr": "metrics",
    "auroc": "metrics",
    "risk_coverage_curve": "metrics",
    "aurc": "metrics",
    "eaurc": "metrics",
    "augrc": "metrics",
    "operating_point": "metrics",
    "accuracy": "metrics",
    "ece": "metrics",
    # protocol and the paired comparison
    "split_indices": "protocol",
    "evaluate": "protocol",
    "paired_bootstrap": "stats",
    # deploying with a guarantee
    "guaranteed_risk": "risk_control",
    # figures
    "dstar_heatmap": "figures",
    "confusion_heatmap": "figures",
    "roc_figure": "figures",
    "risk_coverage_figure": "figures",
    # logits
    "Run": "runs",
    "load_logits": "runs",
    "logits_for": "runs",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> object:
    """Import the public name ``name`` from its submodule on first access, then keep it in the package."""
    if name not in _EXPORTS:
        raise AttributeError(f"module 'relu_core' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"relu_core.{_EXPORTS[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
