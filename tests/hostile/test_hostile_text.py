"""Untrusted text (class names, file names, run names, URL values) in what the app, the CLI and the report write
and show: every CSV through one writer (``relu_core.csv_text``) whose text cells round-trip and are never a
spreadsheet formula, and nothing a user names shown as Markdown or HTML."""

from __future__ import annotations

import csv
import html
import io
import re
import zipfile

import numpy as np
import pandas as pd
import pytest
from apptest_pages import EXPLORE, app

from relu_core import csv_text, explore, figures, runs
from studio import text as text_module

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


# ------------------------------------------------------------------ nothing a user names renders as Markdown

#: AppTest's limit for one script run: the first trains the default digits model, minutes on a busy machine.
TIMEOUT = 900
LINK = "[log in again](http://evil.example/login)"
MARKUP_NAMES = ("<script>alert(1)</script>", "**bold** _it_", "[x](http://evil.example)", "$x$ :red[y]", "ok")


def _markup_left(markdown: str) -> list[str]:
    """What in Streamlit Markdown ``markdown`` could still render as a link, HTML, emphasis, code or a formula
    (a backslash-escaped character is text)."""
    unescaped = re.sub(r"\\.", "", markdown)
    return re.findall(r"[\[\]<>`*$~]|https?://|www\.|\w@\w|(?<!\w)_|_(?!\w)|^\s*(?:#|[-+] |\d+[.)] )", unescaped)


@pytest.mark.parametrize(
    "text",
    [
        LINK,
        "[click me](http://x).npz",
        *MARKUP_NAMES,
        "# heading",
        "1. item",
        "- item",
        "see www.evil.example",
        "a@b.c",
    ],
)
def test_plain_leaves_no_markup_and_keeps_the_words(text):
    shown = text_module.plain(text)
    assert not _markup_left(shown), shown
    words = re.sub(r"\\(.)", r"\1", shown).replace("\u2060", "")
    assert words == text  # the escapes are all that was added


def test_plain_keeps_ordinary_messages_as_they_are():
    for text in ("announces shape (100000000, 100000)", "#12 · cat → dog · Rel-U 0.31", "relu_core.limits.max_classes"):
        assert text_module.plain(text) == text


def _shown_texts(at) -> list[str]:
    """Every Markdown body the page shows: boxes, captions, markdown, subheaders and image captions."""
    elements = [*at.warning, *at.error, *at.success, *at.info, *at.caption, *at.markdown, *at.subheader]
    captions = [image.caption for row in at.get("image") for image in row.proto.imgs]
    return [e.value for e in elements] + captions


@pytest.mark.slow
def test_a_shared_links_run_name_is_no_link_in_the_notice():
    at = app(timeout=TIMEOUT)
    at.query_params.update({"run": "0123456789abcdef", "run_name": f"{LINK} <b>now</b>"})
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    notice = next(w.value for w in at.warning if "This link is for run" in w.value)
    assert "log in again" in notice and not _markup_left(notice), notice


@pytest.mark.slow
def test_an_uploads_file_and_class_names_are_shown_as_text():
    from relu_core import jobs

    at = app(timeout=TIMEOUT).run()
    labels = np.repeat(np.arange(len(MARKUP_NAMES)), 40)
    rng = np.random.default_rng(2)
    logits = (rng.normal(size=(labels.size, len(MARKUP_NAMES))) + 2 * np.eye(len(MARKUP_NAMES))[labels]).astype(
        np.float32
    )
    buffer = io.BytesIO()
    np.savez(buffer, logits=logits, labels=labels, class_names=np.array(MARKUP_NAMES))
    at.file_uploader(key="upload_logits").upload("[click me](http://x).npz", buffer.getvalue()).run()
    shown = []  # over every run: the sidebar says a job's end once, on the run that notices it
    at.button(key="upload_logits_load").click().run()
    shown += _shown_texts(at)
    for job in jobs.MANAGER.jobs():
        assert job.wait(120), f"job {job.key} did not end"
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    shown += _shown_texts(at)
    at.switch_page(EXPLORE).run()
    at.session_state["ex_detail_tab"] = "Samples of a confusion cell"
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    shown += _shown_texts(at)
    assert any("click me" in text for text in shown), shown  # the upload's name is there, as text
    assert any("with true class" in text for text in shown), shown  # and so are its class names
    assert not [text for text in shown if _hostile_markup_left(text)]


def _hostile_markup_left(markdown: str) -> list[str]:
    """The Markdown of the upload's name and class names (not the page's own bold or code) still in effect."""
    unescaped = re.sub(r"\\.", "", markdown)
    return re.findall(r"\]\(|<(?:script|b|a)\b|https?://|www\.|\*\*bold|\$x\$|:red\[|(?<!\w)_it_", unescaped)


def test_the_report_shows_hostile_class_and_file_names_as_text():
    labels = np.repeat(np.arange(len(MARKUP_NAMES)), 40)
    rng = np.random.default_rng(3)
    logits = (rng.normal(size=(labels.size, len(MARKUP_NAMES))) + 2 * np.eye(len(MARKUP_NAMES))[labels]).astype(
        np.float32
    )
    run = runs.Run.from_logits(logits, labels, MARKUP_NAMES, source="<img src=x onerror=alert(1)>.npz")
    setting = explore.Setting()
    text = explore.report_html(run, explore.view(run, setting), setting)
    assert "<script>alert" not in text and "<img src=x" not in text
    assert html.escape("<img src=x onerror=alert(1)>.npz") in text  # the title and the provenance name it


def test_matrix_figures_show_class_names_as_text_and_their_csv_as_given():
    names = ('<a href="http://evil.example">x</a>', "<b>bold</b>", "a &amp; b", "plain")
    for fig in (figures.dstar_heatmap(np.ones((4, 4)) - np.eye(4), names), figures.confusion_heatmap(np.eye(4), names)):
        for trace in fig.data:
            assert not any("<" in str(v) for v in (*trace.x, *trace.y)), trace.x  # plotly reads <a href> as a link
        rows = pd.read_csv(io.StringIO(figures.figure_csv(fig)), dtype=str, keep_default_na=False)
        assert set(rows["x"].map(csv_text.read_cell)) == set(names)
