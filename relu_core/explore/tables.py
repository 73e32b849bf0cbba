"""A view in words and tables: the metrics, the paired differences, the operating point, the settings and the
verdicts, as data frames and as the HTML the app and the report draw (``report.table_html``); and the display
helpers the study pages share."""

from __future__ import annotations

import numpy as np
import pandas as pd

from relu_core import detector_comparison, detectors, operating_points, protocol, report, risk_control, stats
from relu_core.explore.setting import Setting
from relu_core.explore.views import View

#: What the operating-point table shows (``what``: the target, ``Setting.target_words``).
OPERATING_NOTE = (
    "Each detector's threshold is the lowest reaching {what} on the evaluation split; it accepts the predictions "
    "with uncertainty ≤ threshold. Errors caught = misclassified and rejected."
)
#: The paired table while its bootstrap runs.
PAIRED_PENDING_HTML = "<p>computing the paired bootstrap interval of Rel-U − Doctor …</p>"
#: The metrics the one-line verdicts name.
VERDICT_METRICS = ("auroc", "fpr95", "aurc")


def _paired_names() -> tuple[str, str]:
    relu, doctor = (detectors.label(k) for k in protocol.PAIRED)
    return relu, doctor


def metrics_table(view: View) -> pd.DataFrame:
    """The shown detectors' metrics on the evaluation split, with the Rel-U − Doctor row."""
    return detector_comparison.metrics_table(
        {view.detectors[k].name: view.detectors[k].summary for k in view.setting.detectors},
        view.accuracy_eval,
        difference=_paired_names(),
    )


def metrics_html(view: View) -> str:
    """:func:`metrics_table` as HTML, the Rel-U − Doctor cells coloured where the paired interval excludes 0."""
    table = metrics_table(view)
    classes = detector_comparison.difference_classes(
        table, view.paired, detector_comparison.difference_label(*_paired_names())
    )
    return report.table_html(table, classes=classes)


def paired_html(view: View, pending: bool) -> str:
    """Rel-U − Doctor with its paired intervals; ``pending``: its bootstrap is still running (else, without an
    interval, nothing)."""
    if view.paired:
        return report.table_html(detector_comparison.paired_rows(view.paired), index=False)
    return PAIRED_PENDING_HTML if pending else ""


def operating_table(view: View, setting: Setting) -> pd.DataFrame:
    """The shown detectors at ``setting``'s operating point (at a guaranteed risk: on the evaluation half, the
    thresholds certified on the calibration half)."""
    marked = view.marked(setting)
    return detector_comparison.operating_table(
        {view.detectors[k].name: marked.points[k] for k in view.setting.detectors}, marked.correct_eval
    )


def operating_html(view: View, setting: Setting) -> str:
    table = operating_table(view, setting)
    return report.table_html(table, formats={"threshold": detector_comparison.threshold_format(table["threshold"])})


#: What the operating-point table shows at the errors-caught operating point (errors positive).
ERRORS_NOTE = (
    "Each detector's threshold is the highest still rejecting at least {share} of the errors on the evaluation split "
    "(catch {share} of the errors: the good predictions rejected with them are lost); it accepts the predictions "
    "with uncertainty ≤ threshold. Errors caught = misclassified and rejected."
)


def operating_note(view: View, setting: Setting) -> str:
    """What the operating table shows, in words: the target (``Setting.target_words``) and where the thresholds
    come from; at a guaranteed risk, the guarantee in plain words first."""
    if setting.op_kind == "errors":
        return ERRORS_NOTE.format(share=f"{setting.op_target:.0%}")
    if not setting.guaranteed:
        return OPERATING_NOTE.format(what=setting.target_words())
    certified = view.marked(setting).guarantee
    paired = certified.ensure_paired()
    relu, doctor = _paired_names()
    return (
        f"{certified.sentence()} {relu} − {doctor} in coverage on the evaluation half, at the same guarantee: "
        f"{paired.verdict()}. {certified.realised_note()} {certified.note()} Errors caught = misclassified and "
        "rejected."
    )


#: The guarantee's paired line while its bootstrap runs.
GUARANTEE_PENDING_HTML = "<p>computing the paired bootstrap interval of Rel-U − Doctor in coverage …</p>"


def guarantee_html(view: View, setting: Setting, pending: bool = False) -> str:
    """The guaranteed-risk table of the shown detectors (certificate on the calibration half, realised risk and
    coverage on the evaluation half) and Rel-U − Doctor in coverage with its paired interval (``pending``: its
    bootstrap is still running)."""
    certified = view.marked(setting).guarantee
    table = certified.table(view.setting.detectors)
    html = report.table_html(table, formats={"threshold": detector_comparison.threshold_format(table["threshold"])})
    paired = certified.paired
    if paired is None and pending:
        html += GUARANTEE_PENDING_HTML
    if paired is not None:
        relu, doctor = _paired_names()
        html += (
            f"<p>{relu} − {doctor} in coverage on the evaluation half, at the same guarantee: "
            f"{_escape(paired.verdict())}. The interval: a paired bootstrap of the evaluation half "
            f"({paired.n_resamples:,} resamples) with the certified thresholds fixed; the range: each detector "
            f"certified again on random re-cuts of the same samples; {_escape(risk_control.VERDICT_RULE)}.</p>"
        )
    return html


def _escape(text: str) -> str:
    import html

    return html.escape(text)


def settings_in_words(view: View, setting: Setting, eps_note: str = "") -> dict[str, object]:
    """Every setting of the view in words (the report's and the exported data's); ``eps_note`` says which ε
    pass is shown (``eps.EpsPass.note``), ``setting`` gives the operating point."""
    s = view.setting
    return {
        "T (Rel-U, Doctor)": f"{s.temperature:g}",
        "λ": s.lam_words(),
        "λ used": f"{view.lam_used:.4g}",
        "D*": protocol.FALLBACK_LABEL if view.fallback else "learned on the tuning split",
        "ε (input pre-processing)": eps_note or f"{s.eps:g}",
        "tuning split fraction": f"{s.tune_fraction:g}",
        "split seed": s.seed,
        "tuning / evaluated samples": f"{view.tune_idx.size:,} / {view.eval_idx.size:,}",
        "errors among the evaluated": f"{int((~view.correct_eval).sum()):,}",
        "detectors": ", ".join(view.detectors[k].name for k in s.detectors),
        "operating point": setting.target_words(),
        "selection": "fixed settings (no search)",
    }


def verdict(paired: dict[str, stats.PairedDifference]) -> str:
    """Rel-U vs Doctor in one line (AUROC, FPR95, AURC with their intervals)."""
    return "Rel-U vs Doctor: " + "; ".join(paired[m].verdict() for m in VERDICT_METRICS) + "."


def operating_points_lines(view: View) -> list[str]:
    """Rel-U vs Doctor on the evaluation split at both operating points in plain words ("keep 95 % of the correct
    predictions: …", "catch 95 % of the errors: …"), each with its paired interval once the bootstrap landed."""
    relu, doctor = _paired_names()
    values = {p: {} for p in operating_points.POSITIVES}
    for key, name in zip(protocol.PAIRED, (relu, doctor), strict=True):
        for positive, value in view.fpr95_by_positive(key).items():
            values[positive][name] = value
    differences = {"correct": view.paired.get("fpr95"), "error": view.paired_other}
    return operating_points.sentences(values, differences, (relu, doctor))


def operating_points_html(view: View) -> str:
    """:func:`operating_points_lines` as an HTML list (Explore's metrics; nothing until the bootstrap landed)."""
    if not view.paired:
        return ""
    items = "".join(f"<li>{_escape(line)}</li>" for line in operating_points_lines(view))
    return f"<p>At both operating points (FPR at 95 % TPR, each convention its own question):</p><ul>{items}</ul>"


def start_verdict(view: View) -> str:
    """The Start page's line: Rel-U vs Doctor on the evaluation split at the view's setting (AUROC and FPR95,
    each with its paired 95 % interval, "no significant difference" where it covers 0)."""
    s = view.setting
    settings = f"T = {s.temperature:g}, λ = {s.lam_words()}, {s.tune_fraction:.0%} tuning split, seed {s.seed}"
    n_errors = int((~view.correct_eval).sum())
    return (
        f"Rel-U vs Doctor at the default settings ({settings}; {view.eval_idx.size:,} evaluation samples, "
        f"{n_errors:,} errors): "
        + "; ".join(view.paired[m].verdict() for m in ("auroc", "fpr95"))
        + ". "
        + " ".join(operating_points_lines(view))
    )


# ------------------------------------------------------------------------------- the study pages' helpers


def readable_hyperparameters(frame: pd.DataFrame) -> pd.DataFrame:
    """The selected hyperparameters with readable headers: T, λ (– where none), the fallback in words."""
    return pd.DataFrame(
        {
            "seed": frame["seed"],
            "detector": frame["detector"],
            "T": [f"{t:g}" for t in frame["temperature"]],
            "λ": ["–" if lam is None or pd.isna(lam) else f"{lam:g}" for lam in frame["lam"]],
            "D*": [
                protocol.FALLBACK_LABEL if f else ("learned" if d == "Rel-U" else "–")
                for f, d in zip(frame["hamming_fallback"], frame["detector"])
            ],
            "settings searched": frame["settings_searched"],
        }
    )


def thumbnail(image: np.ndarray, size: int = 72) -> np.ndarray:
    """An uint8 (H, W, C) image scaled up (nearest neighbour) so that tiny images stay visible."""
    image = image[..., 0] if image.shape[-1] == 1 else image
    factor = max(1, size // max(image.shape[:2]))
    return np.repeat(np.repeat(image, factor, axis=0), factor, axis=1)
