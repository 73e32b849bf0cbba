"""AppTest of every page: the default run loads, the Explore controls drive the figures and the metrics,
uploads (good and bad) go through the real sidebar code path, and a bad file never loses the current run.

The default run trains the small digits CNN once per test session (conftest.py gives the session its own
cache directory); every later AppTest reuses it from the engine's cache and the process-wide run registry.
Each test opens its own AppTest (its own session state), so no test depends on another's widget state.
"""

from __future__ import annotations

import base64
import io
import json
import re

import numpy as np
import pytest
from apptest_charts import charts, html_texts, tables
from apptest_pages import CORRUPTIONS, EXPLORE, app
from streamlit.testing.v1 import AppTest

pytestmark = pytest.mark.slow  # AppTest of whole pages on a trained default run

TIMEOUT = 300  # the first default run trains a small CNN; later runs read the cache


def _no_exceptions(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


def _charts(at: AppTest) -> list[dict]:
    return charts(at)


def _figure(at: AppTest, title_start: str) -> dict:
    for spec in _charts(at):
        title = spec["layout"].get("title", {}).get("text", "")
        if title.startswith(title_start):
            return spec
    raise AssertionError(f"no figure titled {title_start!r}")


def _array(value) -> np.ndarray:
    """A plotly JSON array: a list, or plotly's typed-array encoding ``{"dtype", "bdata", "shape"}``."""
    if isinstance(value, dict):
        flat = np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"])
        shape = value.get("shape")
        return flat.reshape([int(n) for n in str(shape).split(",")]) if shape else flat
    return np.asarray(value, dtype=float)


def _tables(at: AppTest) -> list:
    """Every table on the page: the HTML ones (Explore's, which follow λ) and the dataframes."""
    return tables(at) + [df.value for df in at.dataframe]


def _metrics(at: AppTest):
    return _table_with(at, "AUROC ↑")


def _table_with(at: AppTest, column: str):
    """The first table on the page that has ``column``."""
    return next(table for table in _tables(at) if column in table.columns)


def _npz(**arrays) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def _big_cell_run():
    """A run with images whose confusion cell (0, 0) holds far more than two gallery pages in either split, built
    from seeded numbers (a trained model's cells depend on its weights: on one CPU digits' (3, 3) held 48)."""
    from relu_core.runs import Run

    rng = np.random.default_rng(7)
    n = 600
    labels = np.where(rng.random(n) < 0.6, 0, rng.integers(1, 3, n))  # class 0: about 360 samples
    logits = rng.normal(size=(n, 3))
    logits[np.arange(n), labels] += 3.0  # about 90 % correct
    images = rng.integers(0, 256, (n, 8, 8, 1), dtype=np.uint8)
    return Run(
        run_id="gallery-big-cell",
        logits=logits.astype(np.float32),
        labels=labels,
        class_names=("a", "b", "c"),
        images=images,
        dataset_name="synthetic",
        source="seeded synthetic logits and images (test)",
    )


@pytest.fixture
def explore() -> AppTest:
    """A fresh Explore page in its own session for each test (no test sees another's widget state); the run
    and the computation behind the page come from the process-wide registry and caches, so only the first
    one trains and computes."""
    at = app(EXPLORE, TIMEOUT).run()
    _no_exceptions(at)
    return at


def _settle(at: AppTest, timeout: float = TIMEOUT) -> AppTest:
    """Wait for every background job to end, then rerun the page (as the jobs panel's refresh does)."""
    from relu_core import jobs

    for job in jobs.MANAGER.jobs():
        assert job.wait(timeout), f"job {job.key} did not end"
    return at.run()


def test_start_page_opens_on_dstar_confusion_and_verdict(monkeypatch):
    from relu_core.explore import views

    monkeypatch.setattr(views, "PAIRED_WAIT_S", 600.0)  # the verdict waits for its bootstrap (a browser polls)
    at = app(timeout=TIMEOUT).run()
    _no_exceptions(at)
    assert not at.error
    titles = [spec["layout"]["title"]["text"] for spec in _charts(at)]
    assert titles[0].startswith("D* (Rel-U") and titles[1].startswith("Confusion matrix")
    verdict = at.info[0].value
    assert verdict.startswith("Rel-U vs Doctor at the default settings")
    assert "AUROC: " in verdict and "95 % CI" in verdict
    # the verdict is the paired bootstrap of the evaluation split at the default settings, recomputed here
    import refit_reference

    from relu_core import detectors, protocol, runs

    run = runs.get_run(at.session_state["run_id"])
    correct = protocol.correctness(run.logits, run.labels)
    tune, evaluation = protocol.split_indices(len(correct), 0.5, 0, stratify=correct)
    probs = detectors.softmax(run.logits, 1.0)
    paired = refit_reference.refitted_paired(probs, correct, tune, evaluation, 0.5, seed=0)  # D* refitted
    assert paired["auroc"].verdict() in verdict
    errors = next(m for m in at.metric if m.label == f"errors of {len(run.labels):,}")
    assert int(errors.value.replace(",", "")) == int((run.logits.argmax(1) != run.labels).sum())
    assert at.button(key="start_explore").label == "Explore this run"
    assert "fixed in advance, not tuned" in " ".join(c.value for c in at.caption)  # whoever the verdict favours
    assert not any("Preparing" in str(c.value) for c in at.markdown)  # the preparing box is gone


def test_sidebar_picker_opens_on_the_current_runs_data_set_and_model():
    from relu_core import runs

    rng = np.random.default_rng(0)
    labels = rng.integers(0, 10, 400)
    logits = rng.normal(size=(400, 10)).astype(np.float32) + 3 * np.eye(10, dtype=np.float32)[labels]
    recipe = (("model_name", "cnn28"), ("dataset_spec", "mnist"))  # not the first of either list
    run = runs.Run.from_logits(logits, labels, tuple(map(str, range(10))), source="cnn28 on mnist", recipe=recipe)
    runs.register_run(run)
    at = app(timeout=TIMEOUT)
    at.session_state["run_id"] = run.run_id
    at.run()
    _no_exceptions(at)
    assert at.selectbox(key="pick_dataset").value == "mnist"
    assert at.selectbox(key="pick_model").value == "cnn28"


def test_start_page_says_why_a_run_cannot_be_evaluated():
    from relu_core import runs

    labels = np.arange(40) % 4
    run = runs.Run.from_logits(np.eye(4, dtype=np.float32)[labels], labels, tuple("abcd"), source="perfect")
    runs.register_run(run)  # as a run cached before uploads were checked would be
    at = app(timeout=TIMEOUT)
    at.session_state["run_id"] = run.run_id
    at.run()
    _no_exceptions(at)
    assert "none of the 40 predictions are wrong" in at.error[0].value
    assert any("another run in the sidebar" in c.value for c in at.caption)
    assert at.selectbox(key="pick_dataset")  # and the sidebar is there to load one


def test_explore_shows_every_panel_on_the_default(explore):
    titles = [spec["layout"]["title"]["text"] for spec in _charts(explore)]
    assert titles[0].startswith("D* (Rel-U")
    assert any(t.startswith("Confusion matrix") for t in titles)
    assert any(t.startswith("ROC") for t in titles)
    assert any(t.startswith("Risk-coverage") for t in titles)
    roc = _figure(explore, "ROC")
    names = [trace.get("name", "") for trace in roc["data"]]
    assert any(n.startswith("Rel-U (AUROC") for n in names) and any(n.startswith("Doctor (AUROC") for n in names)
    table = _metrics(explore)
    assert {"Rel-U", "Doctor", "Rel-U − Doctor"} <= set(table.index)
    assert np.isclose(
        table.loc["Rel-U − Doctor", "AUROC ↑"], table.loc["Rel-U", "AUROC ↑"] - table.loc["Doctor", "AUROC ↑"]
    )
    assert table.loc["Rel-U − Doctor", "accuracy"] == 0  # one classifier: a number, never a blank "None" cell
    assert "green where Rel-U is significantly better, red where Doctor is" in " ".join(
        c.value for c in explore.caption
    )
    # Rel-U − Doctor with its paired interval and a verdict in words, consistent with the metrics table
    paired = _table_with(explore, "95 % CI (paired bootstrap)").set_index("metric")
    assert list(paired.index) == ["FPR95", "AUROC", "AURC", "AUGRC"]
    assert float(paired.loc["AUROC", "Rel-U − Doctor"]) == pytest.approx(
        table.loc["Rel-U − Doctor", "AUROC ↑"], abs=1e-4
    )
    for verdict in paired["verdict"]:
        assert verdict.startswith(("no significant difference", "Rel-U better", "Doctor better"))
    # the default operating point (TPR >= 95 %) is the metrics table's FPR-at-95 %-TPR point
    op = _table_with(explore, "threshold")
    np.testing.assert_allclose(op.loc[["Rel-U", "Doctor"], "FPR"], table.loc[["Rel-U", "Doctor"], "FPR95 ↓"])
    # the cell gallery opens on the run's most frequent confusion (off the diagonal)
    counts = _array(_figure(explore, "Confusion matrix")["data"][1]["z"]).astype(float)
    pick = explore.session_state["ex_gallery_pick"]
    pair = pick["ex_pair_true"], pick["ex_pair_pred"]
    assert pair[0] != pair[1] and counts[pair] == np.nanmax(counts)
    # the view is in the URL
    assert explore.query_params["lam"] == "0.5" and explore.query_params["T"] == "1"


def test_risk_coverage_toggle_draws_the_generalised_curve_with_the_tables_augrc(explore):
    selective = _figure(explore, "Risk-coverage")
    explore.toggle(key="ex_generalized_risk").set_value(True).run()
    _no_exceptions(explore)
    generalized = _figure(explore, "Generalised risk-coverage")
    assert not any(spec["layout"]["title"]["text"].startswith("Risk-coverage") for spec in _charts(explore))
    table = _metrics(explore)
    for name in ("Rel-U", "Doctor"):
        (line,) = [t for t in generalized["data"] if t.get("name", "").startswith(f"{name} (")]
        assert line["name"] == f"{name} (AUGRC {table.loc[name, 'AUGRC ↓']:.4f})"
        (before,) = [t for t in selective["data"] if t.get("name", "").startswith(f"{name} (")]
        # the generalised risk is the selective risk times the coverage, point by point
        np.testing.assert_allclose(_array(line["y"]), _array(before["y"]) * _array(before["x"]), atol=1e-12)
    assert generalized["layout"]["yaxis"]["title"]["text"].startswith("generalised risk")


def test_moving_lambda_changes_dstar_and_metrics(explore):
    before_z = _array(_figure(explore, "D* (Rel-U")["data"][0]["z"])
    before = _metrics(explore).loc["Rel-U"].copy()
    explore.slider(key="ex_lam").set_value(0.05).run()
    _no_exceptions(explore)
    after = _figure(explore, "D* (Rel-U")
    assert "λ = 0.05" in after["layout"]["title"]["text"]
    assert not np.allclose(_array(after["data"][0]["z"]), before_z)
    assert not np.allclose(_metrics(explore).loc["Rel-U"].to_numpy(dtype=float), before.to_numpy(dtype=float))
    assert explore.query_params["lam"] == "0.05"


def test_moving_temperature_changes_dstar_and_metrics(explore):
    assert explore.slider(key="ex_lam").value == 0.5  # where D* is learned (at λ ≈ 0 it is the Hamming fallback)
    before_z = _array(_figure(explore, "D* (Rel-U")["data"][0]["z"])
    before = _metrics(explore).loc["Doctor"].copy()
    explore.select_slider(key="ex_temperature").set_value(10.0).run()
    _no_exceptions(explore)
    after_z = _array(_figure(explore, "D* (Rel-U")["data"][0]["z"])
    assert not np.allclose(after_z, before_z)
    assert not np.allclose(_metrics(explore).loc["Doctor"].to_numpy(dtype=float), before.to_numpy(dtype=float))
    assert explore.query_params["T"] == "10"


def test_auto_lambda_and_extra_detectors(explore):
    explore.checkbox(key="ex_lam_auto").check().run()
    explore.multiselect(key="ex_detectors").set_value(["relu", "doctor", "msp", "energy"]).run()
    _no_exceptions(explore)
    assert explore.query_params["lam"] == "auto"
    assert {"MSP", "Energy"} <= set(_metrics(explore).index)
    assert explore.slider(key="ex_lam").disabled
    # the λ used, beside the disabled slider and in D*'s title
    (used,) = [c.value.removeprefix("auto: λ = ") for c in explore.caption if c.value.startswith("auto: λ = ")]
    assert f"λ = {used})" in _figure(explore, "D* (Rel-U")["layout"]["title"]["text"]


def _open_tab(at, label: str) -> None:
    at.session_state["ex_detail_tab"] = label
    at.run()
    _no_exceptions(at)


def test_detail_tabs_draw_only_the_open_one(pages):
    """The operating table opens first; the galleries are neither computed nor drawn until their tab opens. On a
    seeded run whose Rel-U and Doctor disagree on some errors (a trained model's errors need not include one)."""
    from relu_core import detector_comparison
    from relu_core import explore as views

    run = _big_cell_run()
    setting = views.Setting()
    view = views.view(run, setting)
    points = view.marked(setting).points
    caught = detector_comparison.caught_by_one(
        view.eval_idx, view.correct_eval, points["relu"].accepted, points["doctor"].accepted
    )
    assert any(part.size for part in caught)  # the property the galleries below need
    explore = pages.open("Explore.py", run)
    _no_exceptions(explore)
    captions = " ".join(c.value for c in explore.caption)
    assert "lowest reaching TPR ≥ 95%" in captions and "samples with true class" not in captions
    assert not any(m.value.startswith("**Caught by") for m in explore.markdown)
    _open_tab(explore, "Errors only one detector catches")
    assert {m.value.split(":")[0] for m in explore.markdown if m.value.startswith("**Caught by")} == {
        "**Caught by Rel-U, missed by Doctor",
        "**Caught by Doctor, missed by Rel-U",
    }
    assert not any("threshold" in table.columns for table in _tables(explore))
    # the errors' images say their classes (they differ); the scope is the split the metrics use
    captions = [image.caption for row in explore.get("image") for image in row.proto.imgs]
    assert captions and all(re.fullmatch(r"#\d+ · .+ → .+ · Rel-U \S+ · Doctor \S+", c) for c in captions)
    assert "Errors of the evaluation split that one detector rejects" in " ".join(c.value for c in explore.caption)
    _open_tab(explore, "Samples of a confusion cell")
    assert " with true class " in " ".join(c.value for c in explore.caption)
    # a cell's images share their classes, named once above them: the captions hold the index and the scores
    captions = [image.caption for row in explore.get("image") for image in row.proto.imgs]
    assert captions and all(re.fullmatch(r"#\d+ · Rel-U \S+ · Doctor \S+", c) for c in captions), captions[:3]


def test_a_gallery_that_fails_says_so_in_one_line_and_keeps_the_panel(explore, monkeypatch):
    from relu_core.explore import views

    def out_of_memory(run, relu):
        raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(views, "_every_relu_score", out_of_memory)  # every sample's Rel-U score, for the galleries
    explore.slider(key="ex_lam").set_value(0.37).run()  # a view not computed before: it scores through the patch
    _no_exceptions(explore)
    _open_tab(explore, "Samples of a confusion cell")  # no exception reaches the page
    (error,) = [e.value for e in explore.error]
    assert "Samples of a confusion cell" in error and "CUDA out of memory" in error and "Traceback" not in error
    assert "Rel-U" in _metrics(explore).index  # the panel above the tabs is still drawn


def test_a_gallery_shows_more_on_request_and_starts_again_for_another_cell(pages):
    explore = pages.open("Explore.py", _big_cell_run())
    _no_exceptions(explore)
    _open_tab(explore, "Samples of a confusion cell")
    explore.selectbox(key="ex_pair_true").set_value(0).run()
    explore.selectbox(key="ex_pair_pred").set_value(0).run()  # the diagonal: far more than one page of samples

    def shown() -> tuple[int, int, int]:
        images = sum(len(row.proto.imgs) for row in explore.get("image"))
        caption = next(c.value for c in explore.caption if c.value.startswith("showing "))
        first, total = map(int, re.fullmatch(r"showing (\d+) of (\d+)", caption).groups())
        return images, first, total

    images, first, total = shown()
    assert images == first == 24 and total > 48
    explore.button(key="ex_gallery_more_cell").click().run()
    _no_exceptions(explore)
    assert shown() == (48, 48, total)
    explore.selectbox(key="ex_pair_pred").set_value(1).run()  # another cell: one page again
    explore.selectbox(key="ex_pair_pred").set_value(0).run()
    assert shown()[:2] == (24, 24)


def test_cell_gallery_keeps_its_pair_across_tabs(explore):
    _open_tab(explore, "Samples of a confusion cell")
    explore.selectbox(key="ex_pair_true").set_value(3).run()
    explore.selectbox(key="ex_pair_pred").set_value(3).run()
    explore.radio(key="ex_gallery_split").set_value("evaluation split").run()
    _open_tab(explore, "Operating point")  # its widgets are not drawn here: Streamlit drops their state
    _open_tab(explore, "Samples of a confusion cell")
    assert "samples with true class 3 predicted as 3 in the evaluation split" in " ".join(
        c.value for c in explore.caption
    )
    assert explore.radio(key="ex_gallery_split").value == "evaluation split"
    explore.switch_page(CORRUPTIONS).run()  # a visit to another page drops every Explore widget
    explore.switch_page(EXPLORE).run()
    _open_tab(explore, "Samples of a confusion cell")
    assert "samples with true class 3 predicted as 3 in the evaluation split" in " ".join(
        c.value for c in explore.caption
    )


def test_class_pair_gallery_and_operating_point(explore):
    _open_tab(explore, "Samples of a confusion cell")
    explore.selectbox(key="ex_pair_true").set_value(3).run()
    explore.selectbox(key="ex_pair_pred").set_value(3).run()
    assert "samples with true class 3 predicted as 3" in " ".join(c.value for c in explore.caption)
    _open_tab(explore, "Operating point")
    explore.radio(key="ex_op_kind").set_value("coverage").run()
    _no_exceptions(explore)
    captions = " ".join(c.value for c in explore.caption)
    assert "coverage ≥ 95%" in captions
    op = _table_with(explore, "threshold")
    assert (op["coverage"] >= 0.95).all()
    n_eval = int(re.search(r"Evaluation split: (\d+) samples", captions).group(1))
    n_errors = round(n_eval * (1 - _metrics(explore).loc["Rel-U", "accuracy"]))
    assert (op["accepted"] + op["rejected"] == n_eval).all()
    assert (op["errors caught"] + op["errors missed"] == n_errors).all()
    np.testing.assert_allclose(op["coverage"], op["accepted"] / n_eval)
    np.testing.assert_allclose(op["TPR"], (op["accepted"] - op["errors missed"]) / (n_eval - n_errors))


def test_input_preprocessing_on_demand(explore):
    assert not explore.checkbox(key="ex_lam_auto").value
    clean = _metrics(explore).loc[["Rel-U", "Doctor"]].copy()
    explore.select_slider(key="ex_eps").set_value(0.002).run()
    _no_exceptions(explore)
    assert "being computed" in " ".join(c.value for c in explore.caption)  # never blocks: clean scores meanwhile
    _settle(explore)
    assert not explore.error, [e.value for e in explore.error]
    assert "pre-processed" in " ".join(c.value for c in explore.caption)
    perturbed = _metrics(explore).loc[["Rel-U", "Doctor"]]
    # The scores move with ε; the rank metrics need not (a model with a handful of errors may keep every rank, and
    # the weights trained here differ by commit and CPU), so the page's metrics are checked against the library's
    # on the perturbed scores, and the scores against the clean ones.
    from relu_core import explore as views
    from relu_core import metrics, runs
    from relu_core.explore import eps as eps_pass

    run = runs.get_run(explore.session_state["run_id"])
    setting = views.Setting(eps=0.002)
    result = eps_pass.perturb(run, setting, None)  # the engine's disk cache: the page's own pass, read again
    view = views.view(run, setting.replace(eps=0.0))
    for key, label in (("relu", "Rel-U"), ("doctor", "Doctor")):
        assert not np.allclose(result.scores[key], view.detectors[key].eval_uncertainty)  # ε changed the scores
        expected = metrics.auroc(result.scores[key], view.correct_eval)
        assert np.isclose(float(perturbed.loc[label, "AUROC ↑"]), expected, atol=5e-7)
    if np.allclose(perturbed.to_numpy(dtype=float), clean.to_numpy(dtype=float)):
        print("ε = 0.002 kept every rank on this run's weights: metrics unchanged, scores changed")
    assert explore.query_params["eps"] == "0.002"


def test_url_parameters_set_the_view():
    at = app(EXPLORE, TIMEOUT)
    at.query_params.update({"lam": "0.3", "T": "2", "tune": "0.33", "seed": "4", "eps": "0.0012"})
    at.run()
    _no_exceptions(at)
    assert at.slider(key="ex_lam").value == 0.3
    assert at.select_slider(key="ex_temperature").value == 2.0
    assert at.select_slider(key="ex_tune_fraction").value == 0.33
    assert at.number_input(key="ex_seed").value == 4
    assert "T = 2" in " ".join(html_texts(at))  # D*'s caption


def test_url_parameters_set_a_guaranteed_risk_and_write_it_back():
    """A link with r* and δ opens the guaranteed-risk operating point (a value between the choices goes to the
    nearest); the page writes them back while that operating point is chosen, and drops them when it is not."""
    at = app(EXPLORE, TIMEOUT)
    at.query_params.update({"risk": "0.049", "delta": "0.05"})
    at.run()
    _no_exceptions(at)
    assert at.radio(key="ex_op_kind").value == "guaranteed risk"
    assert at.select_slider(key="ex_op_risk").value == 0.05 and at.select_slider(key="ex_op_delta").value == 0.05
    assert "risk=0.049 is not one of the control's values: 0.05 is used" in " ".join(w.value for w in at.warning)
    assert (at.query_params["risk"], at.query_params["delta"]) == ("0.05", "0.05")
    at.radio(key="ex_op_kind").set_value("target TPR").run()
    assert "risk" not in at.query_params and "delta" not in at.query_params


def test_the_scorecards_guarantee_link_opens_explore_there():
    """The Start scorecard's last row links to Explore with ``guarantee=r*,δ`` (test_scorecard.py): Explore opens at
    that guaranteed risk once, and the parameter leaves the URL so the page's own choices then hold."""
    at = app(EXPLORE, TIMEOUT).run()
    _no_exceptions(at)
    assert at.radio(key="ex_op_kind").value == "target TPR"
    at.query_params["guarantee"] = "0.02,0.1"  # as the link sets it on a page switch
    at.run()
    _no_exceptions(at)
    assert at.radio(key="ex_op_kind").value == "guaranteed risk"
    assert at.select_slider(key="ex_op_risk").value == 0.02 and at.select_slider(key="ex_op_delta").value == 0.1
    assert "guarantee" not in at.query_params
    at.select_slider(key="ex_op_risk").set_value(0.05).run()  # the user's own choice then holds
    assert at.select_slider(key="ex_op_risk").value == 0.05


# ----------------------------------------------------------------------------------------- uploads


def _upload_logits(at: AppTest, name: str, content: bytes) -> AppTest:
    at.file_uploader(key="upload_logits").upload(name, content).run()
    at.button(key="upload_logits_load").click().run()
    if at.session_state["pending_jobs"]:  # a background job: still running, its outcome comes on the next run
        _settle(at)
    return at


@pytest.fixture()
def start() -> AppTest:
    at = app(timeout=TIMEOUT).run()
    _no_exceptions(at)
    return at


def test_good_logits_upload_becomes_the_current_run(start):
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(4), 50)
    logits = rng.normal(size=(200, 4)) + 3 * np.eye(4)[labels] * rng.random((200, 1))
    _upload_logits(start, "mine.npz", _npz(logits=logits, labels=labels, class_names=np.array(["a", "b", "c", "d"])))
    _no_exceptions(start)
    assert not start.error, [e.value for e in start.error]
    assert any(m.label == "errors of 200" for m in start.metric)  # the upload is the current run
    said = [box.value for box in start.sidebar.success]  # and the sidebar says so, once
    assert len(said) == 1 and said[0].startswith("Loading mine.npz: done, now the current run (mine.npz")
    start.run()
    assert not start.sidebar.success
    start.session_state["ex_eps"] = 0.002  # left over from a run with a model
    start.switch_page(EXPLORE).run()
    _no_exceptions(start)
    assert start.select_slider(key="ex_eps").disabled  # logits only: no input pre-processing
    assert start.select_slider(key="ex_eps").value == 0.0 and start.query_params["eps"] == "0"
    assert _figure(start, "D* (Rel-U")["data"][0]["x"] == ["a", "b", "c", "d"]


@pytest.mark.parametrize(
    "name, content, message",
    [
        ("truncated.npz", _npz(logits=np.zeros((20, 3)), labels=np.zeros(20, dtype=int))[:40], ""),
        ("nan.npz", _npz(logits=np.full((20, 3), np.nan), labels=np.zeros(20, dtype=int)), "finite"),
        ("range.npz", _npz(logits=np.zeros((20, 3)), labels=np.full(20, 7)), ""),
        ("empty.csv", b"", "empty"),
        # well-formed, but nothing to detect: every prediction right, or a single error
        ("allright.npz", _npz(logits=np.eye(3)[np.arange(30) % 3], labels=np.arange(30) % 3), "none of the 30"),
        ("oneerror.npz", _npz(logits=np.eye(3)[np.arange(30) % 3], labels=np.r_[1, np.arange(1, 30) % 3]), "1 of"),
    ],
    ids=["truncated-npz", "nan-logits", "labels-out-of-range", "empty-csv", "no-errors", "one-error"],
)
def test_bad_logits_upload_shows_an_error_and_keeps_the_run(start, name, content, message):
    before = start.session_state["run_id"]
    _upload_logits(start, name, content)
    _no_exceptions(start)
    assert len(start.error) == 1
    assert not any(box.error for box in start.status)  # under the collapsed status box, not hidden inside it
    text = start.error[0].value
    assert "\n" not in text and "Traceback" not in text and message in text.lower()
    # said in the form the user loaded the file from, beside its button (issue 34: it came at the top of the
    # sidebar, out of view of the upload)
    (form,) = [e for e in start.sidebar.expander if e.label == "Upload logits"]
    assert [e.value for e in form.error] == [text]
    assert start.session_state["run_id"] == before
    start.switch_page(EXPLORE).run()  # still usable
    _no_exceptions(start)
    assert _figure(start, "D* (Rel-U")


def test_model_upload_preselects_the_architecture_its_weights_fit(start):
    import io

    import torch

    from relu_core.models import build_model

    buffer = io.BytesIO()
    torch.save(build_model("cnn8", 10).state_dict(), buffer)
    assert start.selectbox(key="upload_arch").value != "cnn8"
    start.file_uploader(key="upload_model").upload("weights.pt", buffer.getvalue()).run()
    _no_exceptions(start)
    assert start.selectbox(key="upload_arch").value == "cnn8"
    assert any(c.value == "The weights fit cnn8." for c in start.caption)
    start.selectbox(key="upload_arch").set_value("cnn28").run()  # the user's choice stands on later runs
    assert start.selectbox(key="upload_arch").value == "cnn28"


def test_non_checkpoint_model_upload_shows_an_error(start):
    before = start.session_state["run_id"]
    start.file_uploader(key="upload_model").upload("model.pt", b"this is not a checkpoint").run()
    start.selectbox(key="upload_arch").set_value("cnn8")
    start.selectbox(key="upload_registered").set_value("digits").run()
    start.button(key="upload_compute").click().run()
    _settle(start)  # the upload runs as a background job; its failure is reported once, in the sidebar
    _no_exceptions(start)
    assert len(start.error) == 1 and "model.pt" in start.error[0].value
    assert start.session_state["run_id"] == before
    start.run()
    assert not start.error  # once


def test_cancelled_job_keeps_the_previous_run():
    from relu_core import runs
    from relu_core.errors import Cancelled

    def job(progress, cancel):
        progress(1, 2, "half way")
        raise Cancelled("stopped")

    def app():
        import streamlit as st

        from studio import jobbox, sidebar

        run = sidebar.current_run()
        st.write(f"current {run.run_id}")
        if st.button("go", key="go"):
            jobbox.run_job("test job", st.session_state["job"], key="test:cancelled-job")

    at = AppTest.from_function(app, default_timeout=TIMEOUT)
    at.session_state["job"] = job
    at.run()
    before = at.session_state["run_id"]
    at.button(key="go").click().run()
    _no_exceptions(at)
    assert [w.value for w in at.warning] == ["test job: cancelled."]
    assert not any(box.warning for box in at.status)
    assert at.session_state["run_id"] == before
    assert before in runs.RUNS


def test_logits_upload_is_a_background_job_that_survives_a_page_change(start, monkeypatch):
    import threading

    from relu_core import runs
    from studio import sidebar

    release, real_load = threading.Event(), sidebar.load_upload

    def gated(*args, **kwargs):  # a big upload: still being read when the user changes page
        release.wait(60)
        return real_load(*args, **kwargs)

    monkeypatch.setattr(sidebar, "load_upload", gated)
    labels = np.repeat(np.arange(4), 30)
    logits = np.random.default_rng(1).normal(size=(120, 4)) + 2 * np.eye(4)[labels]
    data = _npz(logits=logits, labels=labels, class_names=np.array(["w", "x", "y", "z"]))
    expected = runs.load_logits_upload(data, "late.npz").run_id
    before = start.session_state["run_id"]
    start.file_uploader(key="upload_logits").upload("late.npz", data).run()
    start.button(key="upload_logits_load").click().run()
    _no_exceptions(start)
    assert "Jobs" in [h.value for h in start.sidebar.subheader]  # in the jobs panel, with its progress
    assert any(p.proto.text.startswith("Loading late.npz") for p in start.sidebar.get("progress"))
    assert start.session_state["run_id"] == before
    start.switch_page(EXPLORE).run()  # the page is left while the upload is read
    _no_exceptions(start)
    release.set()
    _settle(start)
    _no_exceptions(start)
    assert start.session_state["run_id"] == expected  # picked up on the page the session is on now
    assert [box.value.split(":")[0] for box in start.sidebar.success] == ["Loading late.npz"]
    assert _figure(start, "D* (Rel-U")["data"][0]["x"] == ["w", "x", "y", "z"]


def test_a_job_cancelled_from_its_progress_box_is_said_there():
    from relu_core import jobs

    key = "test:cancelled-from-its-box"
    jobs.MANAGER.forget(key)

    def app():
        import threading
        import time

        import streamlit as st
        from streamlit.runtime.scriptrunner import add_script_run_ctx

        from relu_core import jobs
        from relu_core.errors import Cancelled
        from studio import jobbox, sidebar

        key = "test:cancelled-from-its-box"
        sidebar.sidebar_run_picker()

        def study(progress, cancel):
            progress(1, 2, "half way")
            while not cancel():
                time.sleep(0.02)
            raise Cancelled("stopped")

        def press_cancel() -> None:  # what the box's Cancel button does, in this session's context
            jobbox._cancel_from_box(jobs.MANAGER.get(key))

        if not st.session_state.get("started"):  # the page's Run button, pressed once
            st.session_state["started"] = True
            timer = threading.Timer(0.5, press_cancel)
            add_script_run_ctx(timer)
            timer.start()
            st.write(f"shown: {jobbox.run_job('a study', study, key=key, select=False)}")

    at = AppTest.from_function(app, default_timeout=TIMEOUT).run()
    _no_exceptions(at)
    assert "shown: None" in [m.value for m in at.main.markdown]
    said = [w.value for w in at.main.warning if "a study" in w.value]
    assert said == ["a study: cancelled."]  # where Cancel was pressed
    assert jobs.MANAGER.get(key) is None  # forgotten: asking again retries
    at.run()
    _no_exceptions(at)
    assert not any("a study" in w.value for w in at.warning)  # said once, not again in the sidebar


def test_a_shared_job_cancelled_by_another_session_says_so():
    import threading

    from relu_core import jobs

    key = "test:cancelled-elsewhere"
    jobs.MANAGER.forget(key)

    def app():
        import time

        import streamlit as st

        from relu_core.errors import Cancelled
        from studio import jobbox

        def study(progress, cancel):
            while not cancel():
                time.sleep(0.02)
            raise Cancelled("stopped")

        st.write(f"shown: {jobbox.run_job('a study', study, key='test:cancelled-elsewhere', select=False)}")

    def cancel_elsewhere():  # the same study, asked for and then cancelled in another browser session
        while jobs.MANAGER.get(key) is None:
            time.sleep(0.02)
        jobs.MANAGER.get(key).cancel(by="another session")

    import time

    threading.Thread(target=cancel_elsewhere).start()
    at = AppTest.from_function(app, default_timeout=TIMEOUT).run()
    _no_exceptions(at)
    assert [w.value for w in at.warning] == ["a study: cancelled from another browser session."]


def test_cifar10_with_pretrained_resnet_shows_class_names(start, shared_data):
    from relu_core import models

    if models.pretrained_weights("resnet20") is None:
        pytest.skip("the shared ResNet-20 weights are not present")
    start.selectbox(key="pick_dataset").set_value("cifar10-exact").run()
    assert "resnet20" in start.selectbox(key="pick_model").options
    start.selectbox(key="pick_model").set_value("resnet20").run()
    start.button(key="pick_compute").click().run()
    try:
        _settle(start)
        _no_exceptions(start)
        assert not start.error, [e.value for e in start.error]
        accuracy = next(m for m in start.metric if m.label == "accuracy")
        assert float(accuracy.value.rstrip("%")) > 85  # ResNet-20 on the 1,017 lossless CIFAR-10 images
        start.switch_page(EXPLORE).run()
        _no_exceptions(start)
        names = _figure(start, "D* (Rel-U")["data"][0]["x"]
        assert names[3] == "cat" and names[5] == "dog"
        assert _figure(start, "Confusion matrix")["data"][0]["x"] == names
    finally:
        _drop_running_jobs()  # Explore's λ-neighbour bootstraps on 1,017 images: half a minute nobody reads


def _drop_running_jobs() -> None:
    """Cancel and forget the background jobs still running (a page's prefetches), so that a later test's
    :func:`_settle` does not wait for work of this test's run; forgotten, a later page asking for one starts it
    again instead of finding it cancelled."""
    from relu_core import jobs

    running = [job for job in jobs.MANAGER.jobs() if job.running]
    for job in running:
        job.cancel()
    for job in running:
        assert job.wait(TIMEOUT), f"job {job.key} did not stop when cancelled"
        jobs.MANAGER.forget(job.key)


def test_download_report_is_one_click_and_self_contained(monkeypatch):
    """ "Download report" is the download itself (no second "Save" button), its file made when it is clicked
    (a deferred download: not rebuilt on every rerun). AppTest's runtime keeps no deferred file, so the test
    takes each one's maker as the page registers it."""
    from streamlit.runtime.media_file_manager import MediaFileManager

    makers = {}
    register = MediaFileManager.add_deferred

    def spy(self, make, *args, **kwargs):
        makers[kwargs.get("file_name")] = make
        return register(self, make, *args, **kwargs)

    monkeypatch.setattr(MediaFileManager, "add_deferred", spy)
    explore = app(EXPLORE, TIMEOUT).run()
    _no_exceptions(explore)
    buttons = explore.get("download_button")
    # one button for the view's data (explore.view_zip), one for its detector (detector_export.export_zip), one
    # for the report: few elements per slider move
    assert [b.label for b in buttons] == ["Data of this view (ZIP)", "Export this detector", "Download report"]
    assert all(b.proto.deferred_file_id for b in buttons)  # each file made on its click, in that one click
    run_id = explore.session_state["run_id"]
    (make,) = (m for name, m in makers.items() if name == f"relu_studio_report_run-{run_id[:8]}.html")
    html_text = make()
    assert html_text.startswith("<!DOCTYPE html>") and "Is Rel-U better than Doctor here?" in html_text
    assert run_id in html_text and "version: numpy" in html_text
    assert "<h2>Operating point</h2>" in html_text and "lowest reaching TPR ≥ 95%" in html_text


def test_shared_url_names_the_run_and_reopens_it():
    from relu_core import runs

    at = app(EXPLORE, TIMEOUT).run()
    _no_exceptions(at)
    run_id = at.session_state["run_id"]
    assert at.query_params["run"] == run_id and "cnn8" in at.query_params["run_name"]
    # a fresh server process knows no run: the link reopens it from this machine's record (cached logits)
    runs.RUNS.clear()
    fresh = app(EXPLORE, TIMEOUT)
    fresh.query_params.update({"run": run_id, "lam": "0.3"})
    fresh.run()
    _no_exceptions(fresh)
    assert fresh.session_state["run_id"] == run_id and not fresh.warning, [w.value for w in fresh.warning]
    assert fresh.slider(key="ex_lam").value == 0.3
    # a run this machine never saw: a clear notice naming it, and the current run stays usable
    other = app(EXPLORE, TIMEOUT)
    other.query_params.update({"run": "0123456789abcdef", "run_name": "resnet56 on cifar10"})
    other.run()
    _no_exceptions(other)
    assert "0123456789abcdef (resnet56 on cifar10), which is not on this machine" in other.warning[0].value
    assert _figure(other, "D* (Rel-U")


def test_eps_subsample_first_then_whole_split_and_a_new_value_cancels(monkeypatch):
    from relu_core import jobs
    from relu_core.explore import eps

    monkeypatch.setattr(eps, "EPS_SUBSAMPLE", 100)  # digits' 449 evaluation images: subsample first
    monkeypatch.setattr(eps, "device_name", lambda: "cpu")
    at = app(EXPLORE, TIMEOUT).run()
    at.select_slider(key="ex_eps").set_value(0.0005).run()
    first = [j for j in jobs.MANAGER.jobs() if ":0.0005:sub100" in j.key]
    at.select_slider(key="ex_eps").set_value(0.001).run()  # a new value: the previous pass is cancelled
    assert first and first[0].wait(TIMEOUT) and first[0].state in (jobs.CANCELLED, jobs.DONE)
    _settle(at)  # the subsample is done: shown, and the whole split starts in the background
    _no_exceptions(at)
    captions = " ".join(c.value for c in at.caption)
    assert "ε = 0.001 on a subsample of 100 evaluation images" in captions
    assert "Evaluation split: 100 samples" in captions
    _settle(at)
    captions = " ".join(c.value for c in at.caption)
    assert "ε = 0.001 on the whole evaluation split" in captions
    assert "Evaluation split: 449 samples" in captions or "Evaluation split: 450 samples" in captions
    at.select_slider(key="ex_eps").set_value(0.0).run()


def test_eps_progress_names_its_step(monkeypatch):
    """The whole split's pass starts its progress at 0 after the subsample's: the bar says which step it is.
    Meanwhile the subsample's results are shown, and the errors one detector catches come from it too."""
    import threading

    from relu_core import jobs
    from relu_core.explore import eps

    monkeypatch.setattr(eps, "EPS_SUBSAMPLE", 100)
    monkeypatch.setattr(eps, "device_name", lambda: "cpu")
    whole_split_may_run, real = threading.Event(), eps.preprocessing.perturbed_scores

    def gated(*args, indices, **kwargs):
        if len(indices) > 100:
            whole_split_may_run.wait(TIMEOUT)
        return real(*args, indices=indices, **kwargs)

    monkeypatch.setattr(eps.preprocessing, "perturbed_scores", gated)
    at = app(EXPLORE, TIMEOUT).run()
    try:
        at.select_slider(key="ex_eps").set_value(0.0014).run()
        subsample = [j for j in jobs.MANAGER.jobs() if ":0.0014:sub100" in j.key]
        assert subsample and subsample[0].wait(TIMEOUT) and subsample[0].state == jobs.DONE
        at.run()
        _no_exceptions(at)
        bars = [bar.proto.text for bar in at.get("progress")]
        assert any(t.startswith("updating (step 2 of 2): Input pre-processing ε = 0.0014 on the whole") for t in bars)
        _open_tab(at, "Errors only one detector catches")  # drawn from the subsample the metrics use
        assert "Errors of the ε pass's subsample (100 images)" in " ".join(c.value for c in at.caption)
    finally:
        whole_split_may_run.set()
    _settle(at)
    assert [bar.proto.text for bar in at.get("progress")] == ["ε pass done"]  # the bar stays: no layout jump
    at.select_slider(key="ex_eps").set_value(0.0).run()
    assert not at.get("progress")


def test_a_failed_eps_pass_is_not_called_done(monkeypatch):
    from relu_core.errors import InputError
    from relu_core.explore import eps

    monkeypatch.setattr(eps, "EPS_SUBSAMPLE", 100)
    monkeypatch.setattr(eps, "device_name", lambda: "cpu")
    real, whole_split_calls = eps.preprocessing.perturbed_scores, []

    def whole_split_fails(*args, indices, **kwargs):
        if len(indices) > 100:
            whole_split_calls.append(len(indices))
            raise InputError("the whole split's pass failed here")
        return real(*args, indices=indices, **kwargs)

    monkeypatch.setattr(eps.preprocessing, "perturbed_scores", whole_split_fails)
    at = app(EXPLORE, TIMEOUT).run()
    at.select_slider(key="ex_eps").set_value(0.0016).run()
    for _ in range(8):  # the subsample's pass ends, then the whole split's fails (the sidebar may tell first)
        _settle(at)
        _no_exceptions(at)
        if any("the whole split's pass failed here" in e.value for e in at.error):
            break
    else:
        pytest.fail("the failure was never shown")
    assert "ε pass done" not in [bar.proto.text for bar in at.get("progress")]
    captions = " ".join(c.value for c in at.caption)
    assert "ε = 0.0016 could not be computed; shown meanwhile: ε = 0.0016 on a subsample of 100" in captions
    tried = len(whole_split_calls)  # one per detector (Rel-U's call failed first)
    at.slider(key="ex_op_target").set_value(0.8).run()  # another rerun neither asks again nor repeats the failure
    _no_exceptions(at)
    assert len(whole_split_calls) == tried and not at.get("progress")
    assert [e.value for e in at.error] == ["the whole split's pass failed here"]
    at.button(key="ex_eps_retry").click().run()  # unless the user asks
    _settle(at)
    assert len(whole_split_calls) > tried
    at.select_slider(key="ex_eps").set_value(0.0).run()


def test_widgets_that_keep_the_setting_reuse_the_view(monkeypatch):
    from relu_core.explore import views
    from relu_core.registry import LRURegistry

    calls, drawn = [], []
    real_compute, real_figures = views.compute, views.roc_figure

    def counted(run, setting, *args):
        calls.append(setting)
        return real_compute(run, setting, *args)

    def counted_figures(view, *args, **kwargs):
        drawn.append(view.lam_used)
        return real_figures(view, *args, **kwargs)

    monkeypatch.setattr(views, "VIEWS", LRURegistry(views.VIEWS.bound))  # no view of an earlier test
    monkeypatch.setattr(views, "compute", counted)
    monkeypatch.setattr(views, "roc_figure", counted_figures)
    at = app(EXPLORE, TIMEOUT).run()
    _no_exceptions(at)
    assert sorted(call.lam for call in calls) == [0.49, 0.5, 0.51]  # λ and its neighbours, sent for the browser
    assert sorted(drawn) == [0.49, 0.5, 0.51]
    at.slider(key="ex_op_target").set_value(0.8).run()  # the operating point: same setting, same views ...
    _no_exceptions(at)
    assert len(calls) == 3 and sorted(drawn[3:]) == [0.49, 0.5, 0.51]  # ... figures with new marks
    at.slider(key="ex_lam").set_value(0.51).run()  # a neighbour: only its new neighbour is computed and drawn
    _no_exceptions(at)
    assert len(calls) == 4 and calls[-1].lam == 0.52 and drawn[6:] == [0.52]
    at.slider(key="ex_lam").set_value(0.8).run()  # a new λ: it and its neighbours, each once
    _no_exceptions(at)
    assert sorted(call.lam for call in calls[4:]) == [0.79, 0.8, 0.81]


def test_the_paired_bootstrap_never_holds_the_charts(monkeypatch):
    import threading

    from relu_core import explore, jobs, runs
    from relu_core.explore import views
    from relu_core.registry import LRURegistry

    monkeypatch.setattr(views, "VIEWS", LRURegistry(views.VIEWS.bound))  # no view holding its interval already
    for job in jobs.MANAGER.jobs():  # an earlier test may hold this setting's result already
        if job.key.startswith("paired:"):
            jobs.MANAGER.forget(job.key)
    real_paired_for, release = views.paired_for, threading.Event()

    def slow(view, cancel=None):
        release.wait(60)
        return real_paired_for(view, cancel)

    monkeypatch.setattr(views, "paired_for", slow)
    at = app(EXPLORE, TIMEOUT).run()
    _no_exceptions(at)
    assert _figure(at, "D*") and _figure(at, "ROC")  # the charts are drawn while the bootstrap runs
    assert any("computing the paired bootstrap" in text for text in html_texts(at))
    assert not any("95 % CI (paired bootstrap)" in table.columns for table in _tables(at))
    assert _follow_payloads(at)["paired"]["poll_ms"] == 500  # the browser asks for the panel again meanwhile
    release.set()
    _settle(at)  # as the browser's next poll does, once the job has landed
    _no_exceptions(at)
    assert "poll_ms" not in _follow_payloads(at)["paired"]
    paired = _table_with(at, "95 % CI (paired bootstrap)").set_index("metric")
    expected = real_paired_for(explore.view(runs.get_run(at.session_state["run_id"]), explore.Setting()))
    assert float(paired.loc["AUROC", "Rel-U − Doctor"]) == pytest.approx(expected["auroc"].estimate, abs=1e-4)


def test_a_study_that_failed_while_its_page_was_left_says_so_there_too():
    """The sidebar says it once where the session is; the study's own page says it on the next visit."""
    from relu_core import jobs

    key = "test:failed-while-away"
    jobs.MANAGER.forget(key)

    def app():
        import streamlit as st

        from relu_core.errors import InputError
        from studio import jobbox, sidebar

        def study(progress, cancel):
            raise InputError("the study could not run")

        sidebar.sidebar_run_picker()
        if not st.session_state.get("started"):  # the study page's Run button; then the user goes elsewhere
            st.session_state["started"] = True
            jobbox.start_job("test:failed-while-away", "a study", study, select=False)
        elif st.session_state.get("back"):  # back on the study's page
            st.write(f"shown: {jobbox.job_result('test:failed-while-away')}")

    at = AppTest.from_function(app, default_timeout=TIMEOUT).run()
    _settle(at)
    _no_exceptions(at)
    assert [e.value for e in at.sidebar.error] == ["a study failed: the study could not run"]
    at.session_state["back"] = True
    at.run()
    assert [e.value for e in at.main.error] == ["the study could not run"]
    assert "shown: None" in [m.value for m in at.main.markdown]
    at.run()
    assert not at.error  # said once on each
    assert jobs.MANAGER.get(key) is None  # asking again retries


def test_a_job_started_before_the_page_was_left_is_picked_up_on_return():
    import threading

    from relu_core import jobs

    gate = threading.Event()

    def study(progress, cancel):  # started by a page the user then left: it goes on in its worker thread
        progress(1, 2, "half way")
        gate.wait(60)
        return "the study's result"

    key = "test:picked-up-on-return"
    jobs.MANAGER.forget(key)
    jobs.MANAGER.submit(key, "a study", study)

    def app():
        import streamlit as st

        from studio import jobbox

        st.write(f"shown: {jobbox.job_result('test:picked-up-on-return')}")

    threading.Timer(0.5, gate.set).start()
    at = AppTest.from_function(app, default_timeout=TIMEOUT).run()  # waits with the job's progress box
    _no_exceptions(at)
    assert "shown: the study's result" in [m.value for m in at.markdown]
    jobs.MANAGER.forget(key)
    assert "shown: None" in [m.value for m in at.run().markdown]  # nothing to pick up


def _follow_payloads(at: AppTest) -> dict[str, dict]:
    """Explore's elements that follow λ, by key: the payload each component got."""
    return {
        element.proto.id.rsplit("ex_chart_", 1)[-1]: json.loads(json.loads(element.proto.json))
        for element in at.get("bidi_component")
        if "ex_chart_" in element.proto.id
    }


def test_lambda_neighbours_are_exactly_the_views_the_server_draws_there(explore):
    """Each element that follows λ gets the views of λ ± 0.01; moved there (either way), the server's own view
    is the same (same id: the browser, which showed the neighbour at once, redraws nothing). None are sent
    under λ auto or ε (whose pass is per λ); each run is numbered one more than the last."""
    following = {"dstar", "roc", "risk_coverage", "dstar_caption", "metrics", "paired", "operating_points", "operating"}
    for lam, neighbour in ((0.51, "0.51"), (0.5, "0.50")):
        _settle(explore)  # every paired bootstrap has landed, the neighbours' too
        sent = _follow_payloads(explore)
        assert {name for name, payload in sent.items() if "follow" in payload} == following
        assert all(sent[name]["follow"]["slider"] == "st-key-ex_lam" for name in following)
        assert len({sent[name]["follow"]["run"] for name in following}) == 1
        assert "follow" not in sent["confusion"]  # it does not depend on λ
        explore.slider(key="ex_lam").set_value(lam).run()
        _no_exceptions(explore)
        now = _follow_payloads(explore)
        assert {name: now[name]["view"] for name in following} == {
            name: sent[name]["follow"]["views"][neighbour]["id"] for name in following
        }
        assert now["dstar"]["follow"]["run"] == sent["dstar"]["follow"]["run"] + 1
        assert f"λ = {lam:g})" in _figure(explore, "D* (Rel-U")["layout"]["title"]["text"]
    assert set(now["metrics"]["follow"]["views"]) == {"0.49", "0.51"}
    explore.select_slider(key="ex_eps").set_value(0.002).run()
    assert not any("follow" in payload for payload in _follow_payloads(explore).values())
    explore.select_slider(key="ex_eps").set_value(0.0).run()
    explore.checkbox(key="ex_lam_auto").check().run()
    assert not any("follow" in payload for payload in _follow_payloads(explore).values())


def test_start_does_not_wait_for_the_verdicts_bootstrap(monkeypatch):
    """Issue 43: after "done, now the current run" Start kept the previous run greyed out for seconds, its script
    computing the paired bootstrap before it drew anything. The bootstrap now runs as a background job and a line
    stands for the verdict (polling its fragment) until it lands."""
    import threading

    from relu_core import jobs
    from relu_core.explore import views

    release = threading.Event()
    submit = jobs.MANAGER.submit

    def held(key, label, work, **kwargs):  # the verdict's bootstrap waits until released
        if key.startswith("paired:"):
            return submit(key + ":held", label, lambda p, c: (release.wait(120), work(p, c))[1], **kwargs)
        return submit(key, label, work, **kwargs)

    monkeypatch.setattr(jobs.MANAGER, "submit", held)
    views.clear()
    try:
        at = app(timeout=TIMEOUT).run()
        _no_exceptions(at)
        assert not any(info.value.startswith("Rel-U vs Doctor at the default settings") for info in at.info)
        titles = [spec["layout"]["title"]["text"] for spec in _charts(at)]
        assert titles[0].startswith("D* (Rel-U")  # the page was drawn meanwhile
    finally:
        release.set()
    held_jobs = [job for job in jobs.MANAGER.jobs() if job.key.endswith(":held")]
    assert held_jobs and all(job.wait(TIMEOUT) for job in held_jobs)
    at.run()
    assert at.info[0].value.startswith("Rel-U vs Doctor at the default settings")
