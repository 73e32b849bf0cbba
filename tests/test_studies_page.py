"""AppTest of pages/3_Studies.py: each study runs on the current run and draws its figures with a sentence,
CSV and HTML downloads; studies that need a model say so on a logits-only run; bad options give one line."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest
from test_robustness import tiny_digits_run
from test_studies import synthetic_run

import ui_common

pytestmark = pytest.mark.slow  # AppTest of a whole page

PAGE = str(Path(__file__).resolve().parent.parent / "pages" / "3_Studies.py")
TIMEOUT = 120


def _page(run, **state) -> AppTest:
    ui_common.register_run(run)
    at = AppTest.from_file(PAGE, default_timeout=TIMEOUT)
    at.session_state["run_id"] = run.run_id
    at.session_state["study_bootstrap"] = 50
    at.session_state["study_seeds"] = 2
    for key, value in state.items():
        at.session_state[key] = value
    return at.run()


def _ok(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def _titles(at: AppTest) -> list[str]:
    return [json.loads(chart.proto.spec)["layout"]["title"]["text"] for chart in at.get("plotly_chart")]


@pytest.mark.parametrize("name, titles", [
    ("ablation", ["FPR at 95 % TPR (lower is better) against λ", "AUROC (higher is better) against λ",
                  "Rel-U − Doctor, FPR at 95 % TPR, with the 95 % paired bootstrap interval",
                  "FPR at 95 % TPR (lower is better) against T", "AUROC (higher is better) against T",
                  "Rel-U − Doctor, FPR at 95 % TPR, with the 95 % paired bootstrap interval"]),
    ("tuning-split", ["FPR at 95 % TPR (lower is better) against tuning fraction",
                      "AUROC (higher is better) against tuning fraction",
                      "Rel-U − Doctor, FPR at 95 % TPR, with the 95 % paired bootstrap interval"]),
    ("calibration", ["FPR at 95 % TPR (lower is better) against temperature scaling",
                     "AUROC (higher is better) against temperature scaling",
                     "Rel-U − Doctor, FPR at 95 % TPR, with the 95 % paired bootstrap interval",
                     "Reliability diagram (evaluation splits, all seeds pooled)"]),
])
def test_each_study_runs_and_draws_its_figures(name, titles) -> None:
    at = _page(synthetic_run(), study_name=name)
    _ok(at)
    assert not at.get("plotly_chart") and any("Run the study" in i.value for i in at.info)
    at.button(key="study_run").click().run()
    _ok(at)
    assert _titles(at) == titles
    captions = [c.value for c in at.caption]
    assert any(c.startswith("2 seed(s)") for c in captions)
    assert sum(c.startswith(("Each line", "The difference", "Each point", "FPR at 95 % TPR (lower", "AUROC (higher"))
               for c in captions) == len(titles)
    labels = [b.proto.label for b in at.get("download_button")]
    assert labels.count("data (CSV)") == len(titles) and labels.count("interactive figure (HTML)") == len(titles)
    assert {"curves.csv", "paired.csv", "per_seed.csv"} <= set(labels)
    formats = {json.loads(chart.proto.config)["toImageButtonOptions"]["format"] for chart in at.get("plotly_chart")}
    assert formats == {"png"}
    paired = next(df.value for df in at.dataframe if "95 % CI of the mean" in df.value.columns)
    assert all(v.startswith(("no significant difference", "Rel-U better", "Doctor better")) for v in paired["verdict"])
    if name == "calibration":
        summary = next(df.value for df in at.dataframe if "quantity" in df.value.columns)
        assert summary["quantity"].tolist()[:2] == ["ECE", "NLL"]


def test_camera_button_saves_svg_when_asked() -> None:
    at = _page(synthetic_run(), study_name="tuning-split")
    at.button(key="study_run").click().run()
    at.radio(key="study_image_format").set_value("svg").run()
    _ok(at)
    charts = at.get("plotly_chart")
    assert charts and all(json.loads(c.proto.config)["toImageButtonOptions"]["format"] == "svg" for c in charts)


def test_logits_only_run_offers_no_eps_and_no_mismatch() -> None:
    at = _page(synthetic_run(), study_name="ablation")
    _ok(at)
    assert at.multiselect(key="study_axes").options == ["λ (0..1)", "T (0.1..1000, log)"]
    at = _page(synthetic_run(), study_name="mismatch")
    _ok(at)
    assert any("needs" in i.value or "runs the model on another data set" in i.value for i in at.info)
    assert not [b for b in at.button if b.key == "study_run"]


def test_bad_extra_fraction_gives_one_line() -> None:
    at = _page(synthetic_run(), study_name="tuning-split", study_extra_fractions="0.3, abc")
    assert not at.exception
    assert len(at.error) == 1 and "not a number" in at.error[0].value


def test_mismatch_offers_only_sets_the_model_can_take(shared_data, monkeypatch) -> None:
    # digits (8x8x1): no other set on this machine fits, so none is offered and the page says why
    at = _page(tiny_digits_run(), study_name="mismatch", study_other="cifar100-exact")
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any("No other data set on this machine has 8x8x1 images" in i.value for i in at.info)
    assert not [b for b in at.button if b.key == "study_run"]
    # with a fitting set available, exactly the fitting ones (not the run's own) are offered
    from relu_core import datasets

    real = datasets.list_datasets()
    fake = dataclasses.replace(real[0], name="more-digits", available=True, image_shape=(8, 8, 1))
    monkeypatch.setattr(datasets, "list_datasets", lambda: [*real, fake])
    at = _page(tiny_digits_run(), study_name="mismatch", study_other="cifar100-exact")
    assert not at.exception
    assert at.selectbox(key="study_other").options == ["more-digits"]
    assert at.selectbox(key="study_other").value == "more-digits"


def test_eps_axis_runs_on_a_model_run() -> None:
    at = _page(tiny_digits_run(), study_name="ablation", study_axes=["eps"], study_subsample=300)
    _ok(at)
    at.button(key="study_run").click().run()
    _ok(at)
    assert _titles(at)[0] == "FPR at 95 % TPR (lower is better) against ε"
    assert any("ε axis: 2 seed(s) on 300 images" in c.value for c in at.caption)


def test_empty_axes_say_choose_an_axis() -> None:
    at = _page(synthetic_run(), study_name="ablation", study_axes=[])
    at.button(key="study_run").click().run()
    assert not at.exception
    assert len(at.error) == 1 and "choose at least one axis" in at.error[0].value, [e.value for e in at.error]


def test_settings_caption_is_readable_not_a_python_dict() -> None:
    at = _page(synthetic_run(), study_name="calibration")
    at.button(key="study_run").click().run()
    _ok(at)
    caption = next(c.value for c in at.caption if "settings:" in c.value)
    assert "{" not in caption and "'" not in caption and "[" not in caption, caption
    assert "tune fraction: 0.5" in caption and "lambda: 0.5" in caption, caption


def test_intro_states_the_convention_once() -> None:
    at = _page(synthetic_run())
    intro = next(m.value for m in at.markdown if "Every study fits D*" in m.value)
    assert intro.count("correctly classified") == 1, intro


def test_a_study_finished_elsewhere_is_picked_up_without_running_it_again(monkeypatch) -> None:
    # The study runs as a background job keyed by its settings: a session that left the page (or another
    # session) finds the finished result instead of computing it again.
    from relu_core.studies import STUDIES

    run = synthetic_run()
    first = _page(run, study_name="tuning-split")
    first.button(key="study_run").click().run()
    _ok(first)
    shown = _titles(first)
    assert shown

    def must_not_run(*args, **kwargs):
        raise AssertionError("the finished study should have been picked up")

    monkeypatch.setattr(STUDIES["tuning-split"].module, "run_study", must_not_run)
    again = _page(run, study_name="tuning-split")  # a fresh session: no results of its own, no click
    _ok(again)
    assert _titles(again) == shown
