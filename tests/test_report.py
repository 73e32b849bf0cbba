"""The stakeholder report: one self-contained HTML file (relu_core.report), from the CLI and opened offline in
Debian's Chromium (the recipe of tests/test_browser.py)."""

from __future__ import annotations

import hashlib
import html
import io
import json
import re
import shutil
import stat
import subprocess
import zipfile
from pathlib import Path

import numpy as np
import pytest
import refit_reference
from sklearn.metrics import roc_auc_score

from relu_core import cli, detectors, explore, protocol, report, runs, stats
from studio.headless import wait_ms

RNG = np.random.default_rng(3)
LABELS = RNG.integers(0, 4, 600)
LOGITS = (RNG.normal(size=(600, 4)) + 2.5 * np.eye(4)[LABELS] * RNG.random((600, 1))).astype(np.float32)
NAMES = ("cat", "dog", "owl", "<emu>")  # a name that must be escaped


@pytest.fixture(scope="module")
def logits_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("report") / "run.npz"
    np.savez(path, logits=LOGITS, labels=LABELS, class_names=np.array(NAMES))
    return path


def _cells(text: str, row: str) -> list[str]:
    match = re.search(rf"<tr><th>{re.escape(html.escape(row))}</th>(.*?)</tr>", text)
    assert match, f"no row {row!r}"
    return re.findall(r"<td[^>]*>(.*?)</td>", match.group(1))


def test_report_holds_metrics_intervals_settings_and_provenance(logits_file):
    run = runs.load_logits_upload(logits_file.read_bytes(), logits_file.name)
    setting = explore.Setting(temperature=1.5, lam=0.6, tune_fraction=0.5, seed=2, detectors=("relu", "doctor", "msp"))
    text = explore.report_html(run, explore.view(run, setting), setting, logits_file=logits_file)
    assert text.startswith("<!DOCTYPE html>") and "<emu>" not in text  # class names reach the page escaped
    # plotly.js inline exactly once, four figures, no script or stylesheet from the network
    assert text.count("plotly.js v") >= 1 and len(re.findall(r"Plotly\.newPlot\(", text)) == 4
    assert not re.search(r"<script[^>]+src=", text)  # nothing loaded from elsewhere (the browser test checks it)
    # the metrics, recomputed independently: Doctor's AUROC with scikit-learn on the same evaluation split
    correct = protocol.correctness(LOGITS, LABELS)
    tune, evaluation = protocol.split_indices(len(correct), 0.5, 2, stratify=correct)
    probs = detectors.softmax(LOGITS, 1.5)
    gini = 1 - (probs[evaluation] ** 2).sum(1)
    auroc = roc_auc_score(correct[evaluation], -gini)
    assert float(_cells(text, "Doctor")[1]) == pytest.approx(auroc, abs=1e-4)
    assert {"Rel-U", "Doctor", "MSP", "Rel-U − Doctor"} <= set(re.findall(r"<tr><th>([^<]+)</th><td", text))
    paired = refit_reference.refitted_paired(probs, correct, tune, evaluation, 0.6, seed=2)  # D* refitted
    assert html.escape(paired["auroc"].verdict()) in text
    assert _cells(text, "AUROC")[1] == f"{paired['auroc'].low:+.4f} to {paired['auroc'].high:+.4f}"
    assert html.escape("D* refitted on each resample's tuning samples") in text
    # settings and provenance
    assert _cells(text, "T (Rel-U, Doctor)") == ["1.5"] and _cells(text, "split seed") == ["2"]
    assert _cells(text, "λ") == ["0.6"]
    assert _cells(text, "logits file SHA-256") == [hashlib.sha256(logits_file.read_bytes()).hexdigest()]
    assert _cells(text, "run id") == [run.run_id]
    assert re.fullmatch(r"\d+\.\d+.*", _cells(text, "version: numpy")[0])
    assert _cells(text, "weights SHA-256") == ["— (logits only)"]


def test_report_cli_writes_the_file_and_refuses_bad_input(logits_file, tmp_path, capsys):
    out = tmp_path / "report.html"
    assert cli.main(["report", "--logits", str(logits_file), "--out", str(out), "--lambda", "auto"]) == 0
    assert out.read_text(encoding="utf-8").rstrip().endswith("</html>") and "wrote" in capsys.readouterr().out
    assert out.stat().st_mode & 0o777 == 0o644 and not list(tmp_path.glob(".tmp-*"))  # atomic, readable by all
    for argv, message in [
        (["--logits", str(tmp_path / "missing.npz")], "no such file"),
        (["--logits", str(logits_file), "--lambda", "2"], "--lambda"),
        (["--logits", str(logits_file), "--temperature", "-1"], "--temperature"),
        (["--logits", str(logits_file), "--methods", "relu,bogus"], "bogus"),
    ]:
        assert cli.main(["report", *argv, "--out", str(tmp_path / "bad.html")]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("error:") and message in err and "\n" not in err
    assert not (tmp_path / "bad.html").exists()
    assert cli.main(["report", "--logits", str(logits_file), "--out", str(tmp_path / "no" / "r.html")]) == 2


@pytest.mark.browser
@pytest.mark.slow
def test_report_opens_offline_in_chromium(logits_file, tmp_path, chromium):
    out = tmp_path / "report.html"
    assert cli.main(["report", "--logits", str(logits_file), "--out", str(out)]) == 0
    requests, errors = [], []
    context = chromium.new_context(offline=True, viewport={"width": 1280, "height": 900})
    try:
        page = context.new_page()
        page.on("request", lambda r: requests.append(r.url))
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(out.as_uri())
        page.wait_for_function(
            "document.querySelectorAll('.js-plotly-plot .main-svg').length >= 4", timeout=wait_ms(30_000)
        )
        titles = json.loads(
            page.evaluate(
                "JSON.stringify([...document.querySelectorAll('.js-plotly-plot')].map(p => p.layout.title.text))"
            )
        )
    finally:
        context.close()
    assert [t.split(" ")[0].rstrip(",") for t in titles] == ["D*", "Confusion", "ROC", "Risk-coverage"]
    assert not errors
    assert all(url.startswith(("file:", "data:", "blob:")) for url in requests), requests


def test_report_states_the_intervals_own_confidence():
    import pandas as pd
    import plotly.graph_objects as go

    paired = {"auroc": stats.PairedDifference("auroc", 0.01, -0.02, 0.04, True, 500, confidence=0.9)}
    view = {
        "title": "t",
        "verdict": "v",
        "settings": {"λ": 0.5},
        "provenance_info": {"run id": "x"},
        "figs": [go.Figure()],
        "metrics_table": pd.DataFrame({"AUROC ↑": [0.9]}, index=["Rel-U"]),
        "paired": paired,
    }
    run = runs.Run.from_logits(LOGITS, LABELS, tuple(NAMES))
    shown = explore.view(run, explore.Setting())
    shown.paired = paired  # the note says the interval's own confidence and resample count, whatever they are
    note = explore.paired_note(shown)
    assert note.startswith("90 % percentile interval over 500 paired bootstrap resamples") and "95 %" not in note
    text = report.render_html(**view, paired_note=note)
    assert html.escape(note) in text and "95 %" not in text
    assert "90 % CI (paired bootstrap)" in text
    assert "Operating point" not in text
    operating = pd.DataFrame({"threshold": [1.234e-05], "TPR": [0.95], "accepted": [4610]}, index=["Rel-U"])
    with_point = report.render_html(**view, operating_table=operating, operating_note="the lowest reaching TPR ≥ 95%")
    assert "<h2>Operating point</h2>" in with_point and ">1.234e-05<" in with_point and "TPR ≥ 95%" in with_point
    assert ">4610<" in with_point  # a count stays an integer beside the rates


def test_provenance_says_where_a_registered_data_set_was_read(shared_data):
    """ "cifar10" may be the JPEG test set (shifted by compression): the report names the files it read."""
    from relu_core import runs

    run = runs.logits_for("resnet20", None, "cifar10-exact")
    info = report.provenance(run)
    assert info["data set source"].startswith("CIFAR-10 test set, first 1,017 images, pixel-exact; read from ")
    assert info["data set source"].endswith("cifar10_test_lossless_prefix1017.npz")


def test_data_zip_members_unzip_readable_by_everyone(tmp_path):
    """Explore's ZIPs ("Data of this view", "Export this detector") hold regular files of mode 0644, as the CLI
    writes its files: ``ZipFile.writestr`` with a bare name stored 0600, so that an unzipped detector card was
    readable by its owner only (seen by a new user; this test fails on the code before)."""
    data = report.data_zip({"detector.json": '{"a": 1}', "dstar.npy": b"\x93NUMPY"})
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        infos = archive.infolist()
        assert [i.filename for i in infos] == ["detector.json", "dstar.npy"]
        for info in infos:
            mode = info.external_attr >> 16
            assert stat.S_ISREG(mode) and stat.S_IMODE(mode) == 0o644, (info.filename, oct(mode))
            assert info.compress_type == zipfile.ZIP_DEFLATED
        assert archive.read("detector.json") == b'{"a": 1}'
    if shutil.which("unzip"):  # Info-ZIP applies the stored mode (under the umask)
        (tmp_path / "x.zip").write_bytes(data)
        subprocess.run(["unzip", "-q", str(tmp_path / "x.zip"), "-d", str(tmp_path / "out")], check=True)
        assert stat.S_IMODE((tmp_path / "out" / "detector.json").stat().st_mode) & 0o044 == 0o044
