"""A report for stakeholders: one self-contained HTML file of a view (openable offline, no server).

:func:`render_html` writes the figures (interactive plotly, with plotly.js inlined once, so the file needs no
network), the metrics with the Rel-U − Doctor paired intervals, the paper's published numbers for the run's data
set as labelled reference rows (``studies.paper_table``), every setting and the run's provenance (model, weights
hash, data set, split seed, package versions). ``explore.report_html`` fills it from a view: the one the
Explore page shows, or a logits file's (``python -m relu_core report --logits F.npz --out r.html``).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import html
import importlib.metadata
import io
import platform
import stat
import time
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from relu_core import cache, detector_comparison, figures, paths, protocol, stats

if TYPE_CHECKING:  # pandas and plotly load on use: registering the CLI subcommand stays cheap
    import pandas as pd

#: Packages whose versions the provenance lists (those missing here are skipped).
PACKAGES = ("numpy", "scipy", "scikit-learn", "torch", "torchvision", "plotly", "pandas", "streamlit")

_STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto; max-width: 1200px;
       color: #222; padding: 0 1em; }
h1 { font-size: 1.6em; } h2 { font-size: 1.25em; margin-top: 1.6em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: 0.6em 0; } th, td { border: 1px solid #ccc; padding: 4px 10px;
text-align: right; } th { background: #f3f3f3; } td:first-child, th:first-child { text-align: left; }
.verdict { font-size: 1.1em; padding: 0.6em 1em; background: #eef5ff; border-left: 4px solid #1f77b4; }
.grid { display: grid; grid-template-columns: 1fr 1fr; gap: 1em; } .note { color: #555; font-size: 0.9em; }
.better { background: #c7e9c0; font-weight: bold; } .worse { background: #fcbba1; font-weight: bold; }
"""


def package_versions() -> dict[str, str]:
    """Python and the installed versions of :data:`PACKAGES`."""
    versions = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return versions


def _weights_hash(run) -> str:
    """The SHA-256 of the run's model: its weights (``models.weights_hash``), an ONNX model's file, or none."""
    from relu_core import models  # torch: only needed for a run with a model

    if run.model is not None:
        return models.weights_hash(run.model)
    if getattr(run, "onnx_sha256", ""):
        return f"{run.onnx_sha256} (the ONNX file {run.onnx_file})"
    return "— (logits only)"


def provenance(run, *, logits_file: str | Path | None = None) -> dict[str, str]:
    """Where a run comes from: its id and source, the model and the SHA-256 of its weights, the data set (its
    folder relative to the data root or the cache, ``paths.shown_path``), the logits file's name and SHA-256
    (when given), the package versions, the platform and the time of the report. No absolute server path."""
    from relu_core import datasets

    info = {
        "run id": run.run_id,
        "source": run.source or "—",
        "model": run.model_name or "— (logits only)",
        "weights SHA-256": _weights_hash(run),
        "data set": run.dataset_name or "—",
        "samples × classes": f"{len(run):,} × {run.n_classes}",
    }
    spec = dict(run.recipe).get("dataset_spec")
    registered = {info.name: info for info in datasets.list_datasets()}.get(spec)
    if registered is not None:  # where its images came from: "cifar10" may be the JPEG (shifted) test set
        where = paths.shown_path(registered.location) if registered.location else "—"
        info["data set source"] = f"{registered.description}; read from {where}"
    if logits_file is not None:  # by its name and content hash: the server's folders are no one else's business
        info["logits file"] = Path(logits_file).name
        info["logits file SHA-256"] = hashlib.sha256(Path(logits_file).read_bytes()).hexdigest()
    info.update({f"version: {name}": version for name, version in package_versions().items()})
    info["platform"] = platform.platform()
    info["generated"] = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return info


def table_html(
    frame: pd.DataFrame,
    *,
    index: bool = True,
    classes: Mapping[tuple[int, int], str] | None = None,
    formats: Mapping[str, str] | None = None,
    digits: int = 4,
) -> str:
    """A small escaped HTML table (the report's, and the app's tables that follow a slider). ``classes`` maps
    (row, column) positions to a CSS class; ``formats`` maps columns to a printf format for their floats (else
    ``digits`` decimals). A float cell carries its exact value in ``data-value`` (a non-finite one shows empty)."""
    classes, formats = classes or {}, formats or {}

    def cell(value: object, column: object) -> str:
        if isinstance(value, (float, np.floating)):
            shown = formats.get(str(column), f"%.{digits}f") % value if np.isfinite(value) else ""
            return f' data-value="{float(value)!r}">{shown}'
        return f">{html.escape(str(value))}"

    columns = list(frame.columns)
    head = ([""] if index else []) + [html.escape(str(c)) for c in columns]
    rows = []
    # itertuples keeps each column's type (iterrows would make a row of counts beside rates all floats)
    for r, (name, *row) in enumerate(frame.itertuples(name=None)):
        cells = [f"<th>{html.escape(str(name))}</th>"] if index else []
        cells += [
            f'<td class="{classes[(r, c)]}"{cell(v, columns[c])}</td>'
            if (r, c) in classes
            else f"<td{cell(v, columns[c])}</td>"
            for c, v in enumerate(row)
        ]
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return "<table><tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr>" + "".join(rows) + "</table>"


def data_zip(files: Mapping[str, str | bytes]) -> bytes:
    """One ZIP archive (deflated) of ``files``: name -> content, text written as UTF-8; every member a regular
    file of mode ``cache.DOCUMENT_MODE`` (0644, as the CLI writes its files; ``ZipFile.writestr`` with a bare name
    gives 0600, readable by its owner only once unzipped), dated when written."""
    buffer = io.BytesIO()
    now = time.localtime()[:6]
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, content in files.items():
            info = zipfile.ZipInfo(name, date_time=now)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = (stat.S_IFREG | cache.DOCUMENT_MODE) << 16
            archive.writestr(info, content.encode() if isinstance(content, str) else content)
    return buffer.getvalue()


def render_html(
    *,
    title: str,
    verdict: str,
    settings: Mapping[str, object],
    provenance_info: Mapping[str, str],
    figs: Sequence,
    metrics_table: pd.DataFrame,
    paired: Mapping[str, stats.PairedDifference],
    operating_table: pd.DataFrame | None = None,
    operating_note: str = "",
    paired_note: str = "",
    paper_reference: tuple[str, str, pd.DataFrame, Sequence[str]] | None = None,
) -> str:
    """The report as one HTML string: plotly.js is inlined once (the first figure), so it opens offline.
    ``operating_table`` (``detector_comparison.operating_table``, with ``operating_note`` under it), when given, is the
    view's operating point; ``paired_note`` says how the paired intervals were made; ``paper_reference``, when
    given, is the paper's section: ``(title, heading, rows, notes)`` (``studies.paper_table.table1_reference``: the
    paper's rows of the run's data set, their heading and notes; empty rows: the notes alone, the line saying the
    paper has none)."""
    import pandas as pd

    classes = detector_comparison.difference_classes(
        metrics_table, paired, detector_comparison.difference_label("Rel-U", "Doctor")
    )
    charts = [
        fig.to_html(
            full_html=False,
            include_plotlyjs=(i == 0),
            config={"displaylogo": False, "modeBarButtonsToRemove": list(figures.MODEBAR_REMOVED)},
            default_width="100%",
            default_height="460px",
        )
        for i, fig in enumerate(figs)
    ]
    settings_frame = pd.DataFrame({"value": [str(v) for v in settings.values()]}, index=list(settings))
    prov_frame = pd.DataFrame({"value": list(provenance_info.values())}, index=list(provenance_info))
    body = f"""<h1>{html.escape(title)}</h1>
<p class="verdict">{html.escape(verdict)}</p>
<h2>D* and the confusion matrix</h2><div class="grid">{"".join(f"<div>{c}</div>" for c in charts[:2])}</div>
<h2>ROC and risk-coverage (evaluation split)</h2><div class="grid">{"".join(f"<div>{c}</div>" for c in charts[2:])}</div>
<h2>Metrics on the evaluation split</h2>{table_html(metrics_table, classes=classes)}
<p class="note">{html.escape(protocol.FPR_CONVENTION)}. The difference row is coloured only where its paired
interval excludes 0 (green: Rel-U better, red: Doctor better).</p>
<h2>Is Rel-U better than Doctor here?</h2>{table_html(detector_comparison.paired_rows(paired).set_index("metric"))}
<p class="note">{html.escape(paired_note)}</p>
{_operating_html(operating_table, operating_note)}{_paper_html(paper_reference)}<h2>Settings</h2>{table_html(settings_frame)}
<h2>Provenance</h2>{table_html(prov_frame)}
<p class="note">Made with Rel-U Studio. Rel-U: Dadalto et al., A Data-Driven Measure of Relative Uncertainty for
Misclassification Detection, ICLR 2024.</p>"""
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f"<style>{_STYLE}</style></head><body>{body}</body></html>\n"
    )


def _operating_html(table: pd.DataFrame | None, note: str) -> str:
    if table is None:
        return ""
    formats = {"threshold": detector_comparison.threshold_format(table["threshold"])}  # detectors' scales differ
    return f'<h2>Operating point</h2>{table_html(table, formats=formats)}<p class="note">{html.escape(note)}</p>\n'


def _paper_html(reference: tuple[str, str, pd.DataFrame, Sequence[str]] | None) -> str:
    """The paper's section: its title, the heading (label, units, selection) and rows when there are rows, then
    each note; "" without a reference."""
    if reference is None:
        return ""
    title, heading, rows, notes = reference
    table = "" if rows.empty else f'<p class="note">{html.escape(heading)}</p>{table_html(rows, index=False)}'
    lines = "".join(f'<p class="note">{html.escape(note)}</p>' for note in notes)
    return f'<h2 id="paper-reference">{html.escape(title)}</h2>{table}{lines}\n'


def write_report(path: str | Path, text: str) -> Path:
    """Write the report into an existing directory (``cache.write_document``: atomic, readable like any
    document the user saves)."""
    from relu_core import cache

    path = Path(path)
    if not path.parent.is_dir():
        raise FileNotFoundError(f"no such directory: {path.parent}")
    return cache.write_document(path, text)
