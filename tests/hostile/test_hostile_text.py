"""Untrusted text (class names, file names, run names, URL values) in what the app, the CLI and the report write
and show: every CSV through one writer (``relu_core.csv_text``) whose text cells round-trip and are never a
spreadsheet formula, and nothing a user names shown as Markdown or HTML."""

from __future__ import annotations

import csv
import io
import zipfile

import numpy as np
import pandas as pd

from relu_core import csv_text, explore, figures, runs

#: Class names that broke the D* CSV (a quote shifted its columns) or that a spreadsheet runs as formulas.
HOSTILE_NAMES = ('say "hi", then', "=1+1", "+SUM(A1)", "-2", "@cmd", "\tx", "'quoted", "line\nbreak")


def _read_back(text: str) -> list[list[str]]:
    return [[csv_text.read_cell(c) for c in row] for row in csv.reader(io.StringIO(text))]


def _no_formula_cell(text: str) -> None:
    for row in csv.reader(io.StringIO(text)):
        for c in row:
            # a number may start with "-"; any other cell starting like a formula is text marked with "'"
            if c[:1] in ("=", "+", "-", "@", "\t", "\r"):
                float(c)


def test_dstar_csv_keeps_every_column_and_no_formula():
    matrix = np.arange(64, dtype=np.float64).reshape(8, 8) / 7 - 3
    text = figures.matrix_csv(matrix, HOSTILE_NAMES)
    rows = _read_back(text)
    assert [len(r) for r in rows] == [9] * 9  # the header had 6 fields and the rows 5 with a quote in a name
    assert rows[0][1:] == list(HOSTILE_NAMES) and [r[0] for r in rows[1:]] == list(HOSTILE_NAMES)
    assert np.array([[float(c) for c in r[1:]] for r in rows[1:]]).tolist() == matrix.tolist()  # exact
    _no_formula_cell(text)
    frame = pd.read_csv(io.StringIO(text), index_col=0)
    assert [csv_text.read_cell(c) for c in frame.columns] == list(HOSTILE_NAMES)
    assert frame.to_numpy().tolist() == matrix.tolist()


def test_figure_csv_round_trips_class_names():
    text = figures.figure_csv(figures.confusion_heatmap(np.eye(8) * 3 + 1, list(HOSTILE_NAMES)))
    _no_formula_cell(text)
    rows = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False)
    assert set(rows["x"].map(csv_text.read_cell)) == set(HOSTILE_NAMES)


def test_frame_csv_round_trips_text_and_keeps_numbers():
    frame = pd.DataFrame({"=name": list(HOSTILE_NAMES), "value": np.linspace(-1, 1, len(HOSTILE_NAMES))})
    text = csv_text.frame_csv(frame)
    _no_formula_cell(text)
    back = pd.read_csv(io.StringIO(text), keep_default_na=False)
    assert [csv_text.read_cell(c) for c in back.columns] == ["=name", "value"]
    assert back.iloc[:, 0].map(csv_text.read_cell).tolist() == list(HOSTILE_NAMES)
    assert back["value"].tolist() == frame["value"].tolist()  # numbers stay numbers, "-1.0" included


def test_the_view_zip_holds_the_class_names_as_text():
    labels = np.repeat(np.arange(8), 30)
    rng = np.random.default_rng(1)
    logits = (rng.normal(size=(240, 8)) + 2 * np.eye(8)[labels]).astype(np.float32)
    run = runs.Run.from_logits(logits, labels, HOSTILE_NAMES, source="hostile.npz")
    setting = explore.Setting()
    with zipfile.ZipFile(io.BytesIO(explore.view_zip(run, explore.view(run, setting), setting))) as archive:
        texts = {n: archive.read(n).decode() for n in archive.namelist() if n.endswith(".csv")}
    rows = _read_back(texts["dstar_matrix.csv"])
    assert rows[0][1:] == list(HOSTILE_NAMES) and {len(r) for r in rows} == {9}
    for text in texts.values():
        _no_formula_cell(text)
        assert len({len(r) for r in csv.reader(io.StringIO(text))}) == 1  # every row as wide as its header
