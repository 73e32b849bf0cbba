"""A view as files: its data (a ZIP of CSVs, the exact D* and the settings) and the self-contained HTML report
(``report.render_html``). The Explore page exports the view it shows and the CLI ``report`` the view of a logits
file: the same view, the same code."""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from relu_core import csv_text, figures, report, stats
from relu_core.explore import cached, tables, views
from relu_core.explore.setting import Setting
from relu_core.explore.views import View, ensure_paired
from relu_core.studies import paper_table


def view_figures(run, view: View, setting: Setting) -> dict[str, object]:
    """The view's figures by file stem: D*, the tuning split's confusion matrix, ROC and risk-coverage (the
    operating points of ``setting`` marked)."""
    marked = view.marked(setting)
    _, confusion = cached.confusion_figure(run, view.setting.tune_fraction, view.setting.seed)
    return {"dstar": view.heat, "confusion": confusion, "roc": marked.roc, "risk_coverage": marked.rc}


def report_html(run, view: View, setting: Setting, *, eps_note: str = "", logits_file: str | Path | None = None) -> str:
    """The report of ``view`` (of ``run``, at ``setting``'s operating point): its figures, metrics with the
    paired intervals (computed here when its bootstrap has not landed), operating point, the paper's Table 1 rows
    of the run's data set (``paper_table.table1_reference``; one line where the paper has none), settings in words
    and the run's provenance (``logits_file``: the file it was read from, hashed)."""
    paired = ensure_paired(view)
    rows, notes = paper_table.table1_reference(run)
    return report.render_html(
        title=f"Rel-U Studio report: {run.source or run.run_id}",
        verdict=" ".join([tables.verdict(paired), *tables.operating_points_lines(view)]),  # both FPR95 questions
        settings=tables.settings_in_words(view, setting, eps_note),
        provenance_info=report.provenance(run, logits_file=logits_file),
        figs=list(view_figures(run, view, setting).values()),
        metrics_table=tables.metrics_table(view),
        paired=paired,
        operating_table=tables.operating_table(view, setting),
        operating_note=tables.operating_note(view, setting),
        paired_note=views.paired_note(view),
        paper_reference=(paper_table.REFERENCE_TITLE, paper_table.table1_heading(), rows, notes),
    )


def view_zip(run, view: View, setting: Setting, *, eps_note: str = "") -> bytes:
    """:func:`view_files` of ``view`` as one ZIP archive, with the paper's Table 1 rows of the run's data set
    (``paper_table.table1_reference``) where the paper has any."""
    rows, notes = paper_table.table1_reference(run)
    files = view_files(
        view,
        view_figures(run, view, setting),
        tables.metrics_table(view),
        tables.settings_in_words(view, setting, eps_note),
        view.class_names,
        paired=ensure_paired(view),
        operating=tables.operating_table(view, setting),
        provenance=report.provenance(run),
        paper_reference=(rows, notes),
    )
    return report.data_zip(files)


def view_files(
    view: View,
    figs: dict[str, object],
    table: pd.DataFrame,
    settings: dict[str, object],
    class_names: Sequence[str],
    *,
    paired: dict[str, stats.PairedDifference],
    operating: pd.DataFrame,
    provenance: dict[str, str],
    paper_reference: tuple[pd.DataFrame, Sequence[str]] | None = None,
) -> dict[str, str | bytes]:
    """The data of a view, file name -> content: the fitted D* (``dstar_matrix.csv`` with class names,
    ``dstar.npy`` exact), each figure of ``figs`` but the D* heatmap as ``<name>.csv`` (its traces' data, as
    drawn: curves of at most a few hundred points, ``figures.figure_csv``), the metrics ``table``
    (``metrics.csv``), the ``paired`` Rel-U − Doctor differences with their intervals (``paired.csv``), the
    ``operating`` point table (``operating_point.csv``), and the ``settings`` with the run's ``provenance``
    (``settings.json``: run id, model, weights hash, data set, versions). ``paper_reference`` (rows, notes), when
    given: the rows as ``paper_reference.csv`` (none where there are no rows) and, in ``settings.json``, its title,
    heading and notes under ``paper_reference``."""
    buffer = io.BytesIO()
    np.save(buffer, view.dstar)
    paired_csv = pd.DataFrame(
        [
            {
                "metric": m,
                "relu_minus_doctor": d.estimate,
                "ci_low": d.low,
                "ci_high": d.high,
                "confidence": d.confidence,
                "n_resamples": d.n_resamples,
                "significant": d.significant,
                "verdict": d.verdict(),
            }
            for m, d in paired.items()
        ]
    )
    described = {"settings": {k: str(v) for k, v in settings.items()}, "provenance": dict(provenance)}
    paper_files = {}
    if paper_reference is not None:
        rows, notes = paper_reference
        described["paper_reference"] = {
            "title": paper_table.REFERENCE_TITLE,
            "heading": paper_table.table1_heading() if not rows.empty else None,
            "notes": list(notes),
        }
        if not rows.empty:
            paper_files["paper_reference.csv"] = csv_text.frame_csv(rows)
    return {
        "dstar_matrix.csv": figures.matrix_csv(view.dstar, class_names),
        "dstar.npy": buffer.getvalue(),
        **{f"{name}.csv": figures.figure_csv(fig) for name, fig in figs.items() if name != "dstar"},
        "metrics.csv": csv_text.frame_csv(table, index=True),
        "paired.csv": csv_text.frame_csv(paired_csv),
        "operating_point.csv": csv_text.frame_csv(operating, index=True),
        **paper_files,
        "settings.json": json.dumps(described, indent=2, ensure_ascii=False),
    }
