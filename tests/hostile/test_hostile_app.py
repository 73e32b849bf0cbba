"""Hostile uploads through the real sidebar (Streamlit AppTest): one error line under the status box, no
Streamlit exception box, and the previous run stays current; a valid scripted CNN becomes the current run."""

from __future__ import annotations

import re
from pathlib import Path

import hostile_files as hf
import numpy as np
import pytest
import torch
from apptest_charts import charts
from apptest_pages import EXPLORE, app
from streamlit.testing.v1 import AppTest

from relu_core import limits, runs

pytestmark = pytest.mark.slow  # AppTest of whole pages on the trained default run

TIMEOUT = 300


@pytest.fixture()
def start() -> AppTest:
    at = app(timeout=TIMEOUT).run()
    assert not at.exception
    return at


def _one_error_kept(at: AppTest, before: str) -> str:
    assert not at.exception, [e.value for e in at.exception]
    assert len(at.error) == 1, [e.value for e in at.error]
    text = at.error[0].value
    assert "\n" not in text and "Traceback" not in text
    assert at.session_state["run_id"] == before
    return text.lower()


def _upload_logits(at: AppTest, name: str, content: bytes) -> None:
    at.file_uploader(key="upload_logits").upload(name, content).run()
    at.button(key="upload_logits_load").click().run()
    if at.session_state["pending_jobs"]:  # a background job: still running, its outcome comes on the next run
        _settle(at)


@pytest.mark.parametrize("name", ["npy-saved-as-npz", "allocation-bomb", "5000-classes", "object-array"])
def test_hostile_logits_upload(start, name):
    data, message = hf.LOGITS_FILES[name]
    before = start.session_state["run_id"]
    _upload_logits(start, f"{name}.npz", data)
    assert message.lower() in _one_error_kept(start, before)


def _upload_model(at: AppTest, path: Path) -> None:
    at.file_uploader(key="upload_model").upload("model.pt", path.read_bytes()).run()
    at.selectbox(key="upload_arch").set_value("cnn8")
    at.selectbox(key="upload_registered").set_value("digits").run()
    at.button(key="upload_compute").click().run()
    _settle(at)  # the upload runs as a background job; its outcome reaches the page on the next run


def _settle(at: AppTest) -> None:
    from relu_core import jobs

    for job in jobs.MANAGER.jobs():
        assert job.wait(120), f"job {job.key} did not end"
    at.run()


@pytest.mark.parametrize("name", ["tuple", "dict", "nan", "raises", "state-nan"])
def test_hostile_model_upload(start, bad_models, name):
    before = start.session_state["run_id"]
    _upload_model(start, bad_models[name])
    expected = hf.BAD_SCRIPTED[name][1] if name in hf.BAD_SCRIPTED else "nan or infinite weights"
    assert expected in _one_error_kept(start, before)


def test_unexpected_error_shows_one_line_with_a_reference(start, monkeypatch):
    def broken(data, filename):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(runs, "load_logits_upload", broken)
    before = start.session_state["run_id"]
    _upload_logits(start, "fine.npz", hf.npz(logits=hf.LOGITS, labels=hf.LABELS))
    text = _one_error_kept(start, before)
    assert re.search(r"unexpected error in .* \(reference [0-9a-f]{8}\): zerodivisionerror: a bug", text)


def test_valid_scripted_cnn_becomes_the_run_with_eps(start, tmp_path):
    path = tmp_path / "cnn8_scripted.pt"
    torch.jit.script(runs.small_cnn("cnn8", "digits")).save(str(path))
    _upload_model(start, path)
    assert not start.exception and not start.error, [e.value for e in start.error]
    run_id = start.session_state["run_id"]
    start.switch_page(EXPLORE).run()
    assert not start.exception
    start.select_slider(key="ex_eps").set_value(0.002).run()
    _settle(start)  # the ε pass is a background job (subsample first, then the whole split)
    assert not start.exception and not start.error, [e.value for e in start.error]
    assert "pre-processed" in " ".join(c.value for c in start.caption)
    assert start.session_state["run_id"] == run_id
    start.session_state["ex_detail_tab"] = "Samples of a confusion cell"
    start.run()
    assert start.get("imgs") or start.get("image")  # the gallery draws the run's images


def test_1000_class_upload_keeps_explore_interactive(start):
    rng = np.random.default_rng(0)
    labels = np.arange(5000) % 1000
    logits = rng.normal(size=(5000, 1000)).astype(np.float32) + 4 * np.eye(1000, dtype=np.float32)[labels]
    _upload_logits(start, "thousand.npz", hf.npz(logits=logits, labels=labels))
    assert not start.exception and not start.error, [e.value for e in start.error]
    start.switch_page(EXPLORE).run(timeout=120)
    assert not start.exception
    start.slider(key="ex_lam").set_value(0.8).run(timeout=60)
    assert not start.exception and not start.error
    heatmaps = charts(start)
    titled = [s for s in heatmaps if "top 50 of 1000 classes" in s["layout"].get("title", {}).get("text", "")]
    assert len(titled) >= 2  # D* and the confusion matrix
    assert all(len(s["data"][0]["x"]) == limits.FIGURE_MAX_CLASSES for s in titled)


def test_unexpected_error_in_explore_shows_one_line_with_a_reference(monkeypatch):
    from relu_core import explore

    def broken(*args, **kwargs):
        raise IndexError("a bug in the compute path")

    monkeypatch.setattr(explore, "view", broken)
    at = app(EXPLORE, TIMEOUT).run()
    assert not at.exception, [e.value for e in at.exception]
    assert len(at.error) == 1
    assert re.search(r"unexpected error in Explore \(reference [0-9a-f]{8}\): IndexError", at.error[0].value)
