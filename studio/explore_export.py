"""Explore's export buttons: the view's data (ZIP), its detector for deployment (``relu_core.detector_export``)
and the report (one HTML file), each built when its button is clicked; and why the detector cannot be exported
where it cannot (a guarantee no threshold can be certified for)."""

from __future__ import annotations

import streamlit as st

from relu_core import detector_export, explore, protocol
from studio import page, session
from studio.text import plain


def export_refusal(view: explore.View, setting: explore.Setting) -> str:
    """Why Rel-U cannot be exported at ``setting`` (one line), "" when it can: at a guaranteed risk, when no
    threshold can be certified on the calibration half."""
    if not setting.guaranteed:
        return ""
    certificate = view.marked(setting).guarantee.results[protocol.PAIRED[0]].certificate
    if certificate.certified:
        return ""
    return f"Rel-U cannot be exported at this guarantee: {certificate.refusal}"


#: The help of each export button (the detector's unless it cannot be exported: then why not).
DATA_HELP = (
    "D* (CSV, .npy), the data of every chart, the metrics, Rel-U − Doctor with its intervals and the operating "
    "point (CSV), and the settings with the run's provenance (JSON)."
)
DETECTOR_HELP = (
    "Rel-U at this T, λ, split and operating point, fitted on the tuning split, as a PyTorch ExportedProgram "
    "(.pt2, torch.export) and an ONNX graph (logits in; images in too when the run has a PyTorch model) "
    "returning (prediction, uncertainty, accept), with a JSON card: settings, provenance, TPR/FPR, coverage "
    "and risk on the evaluation split with intervals; at a guaranteed risk, the certified threshold, the "
    "guarantee, the calibration size and its assumptions. Input pre-processing (ε) is not part of it."
)
REPORT_HELP = (
    "One HTML file of this view (interactive figures, metrics with intervals, settings, provenance) that opens offline."
)


def export_buttons(run, view: explore.View, setting: explore.Setting, eps_note: str) -> None:
    """One row: the view's data as a ZIP, its detector for deployment (a ZIP: ``detector_export``) and "Download
    report", the view as one self-contained HTML file; each built when its button is clicked (one click: the report
    holds plotly.js, about 5 MB, so it is not rebuilt on every slider move). Each chart's camera button saves its
    PNG. Few elements: every one is redrawn on each move."""
    row = st.container(horizontal=True)
    why_not = export_refusal(view, setting)
    buttons = (  # label, what it downloads (built on the click), file name, mime type, key, help, disabled
        (
            "Data of this view (ZIP)",
            lambda: explore.view_zip(run, view, setting, eps_note=eps_note),
            "relu_studio_view.zip",
            "application/zip",
            session.EX_DL_DATA,
            DATA_HELP,
            False,
        ),
        (
            "Export this detector",
            lambda: detector_export.export_zip(run, detector_export.from_setting(run, setting)),
            "relu_detector.zip",
            "application/zip",
            session.EX_DL_DETECTOR,
            why_not or DETECTOR_HELP,
            bool(why_not),
        ),
        (
            "Download report",
            lambda: explore.report_html(run, view, setting, eps_note=eps_note),
            "relu_studio_report.html",
            "text/html",
            session.EX_DL_REPORT,
            REPORT_HELP,
            False,
        ),
    )
    for label, build, file_name, mime, key, help_text, disabled in buttons:
        row.download_button(
            label,
            build,
            file_name=page.run_tagged(file_name),
            mime=mime,
            on_click="ignore",
            key=key,
            disabled=disabled,
            help=help_text,
        )
    if why_not:  # said on the page, not only in the disabled button's tooltip
        st.caption(plain(why_not))
