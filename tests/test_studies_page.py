"""AppTest of app_pages/Studies.py: each study runs on the current run and draws its figures with a sentence,
CSV and HTML downloads; studies that need a model say so on a logits-only run; bad options give one line."""

from __future__ import annotations

import dataclasses

import pytest
from apptest_charts import charts
from streamlit.testing.v1 import AppTest
from test_studies import synthetic_run

pytestmark = pytest.mark.slow  # AppTest of a whole page


def _page(pages, run, **state) -> AppTest:
    """The Studies page on ``run`` with a small bootstrap and two seeds unless ``state`` says otherwise."""
    return pages.open("Studies.py", run, **{"study_bootstrap": 50, "study_seeds": 2, **state})


def _titles(at: AppTest) -> list[str]:
    return [chart["layout"]["title"]["text"] for chart in charts(at)]


@pytest.mark.parametrize(
    "name, titles",
    [
        (
            "ablation",
            [
                "FPR at 95 % TPR (lower is better) against λ",
                "AUROC (higher is better) against λ",
                "Rel-U − Doctor, FPR at 95 % TPR, with the 95 % paired bootstrap interval",
                "FPR at 95 % TPR (lower is better) against T",
                "AUROC (higher is better) against T",
                "Rel-U − Doctor, FPR at 95 % TPR, with the 95 % paired bootstrap interval",
            ],
        ),
        (
            "tuning-split",
            [
                "FPR at 95 % TPR (lower is better) against tuning fraction",
                "AUROC (higher is better) against tuning fraction",
                "Rel-U − Doctor, FPR at 95 % TPR, with the 95 % paired bootstrap interval",
            ],
        ),
        (
            "calibration",
            [
                "FPR at 95 % TPR (lower is better) against temperature scaling",
                "AUROC (higher is better) against temperature scaling",
                "Rel-U − Doctor, FPR at 95 % TPR, with the 95 % paired bootstrap interval",
                "Reliability diagram (evaluation splits, all seeds pooled)",
            ],
        ),
    ],
)
def test_each_study_runs_and_draws_its_figures(pages, name, titles) -> None:
    at = _page(pages, synthetic_run(), study_name=name)
    pages.ok(at)
    assert not charts(at) and any("Run the study" in i.value for i in at.info)
    at.button(key="study_run").click().run()
    pages.ok(at)
    assert _titles(at) == titles
    captions = [c.value for c in at.caption]
    assert any(c.startswith("2 seeds") for c in captions)
    assert sum(
        c.startswith(("Each line", "The difference", "Each point", "FPR at 95 % TPR (lower", "AUROC (higher"))
        for c in captions
    ) == len(titles)
    labels = [b.proto.label for b in at.get("download_button")]
    assert labels.count("data (CSV)") == len(titles) and labels.count("interactive figure (HTML)") == len(titles)
    assert {"curves.csv", "paired.csv", "per_seed.csv"} <= set(labels)
    formats = {chart["config"]["toImageButtonOptions"]["format"] for chart in charts(at)}
    assert formats == {"png"}
    # the interval's header says "conditional on the selected settings" where a setting was fitted (calibration)
    paired = next(df.value for df in at.dataframe if any(c.startswith("95 % CI of the mean") for c in df.value.columns))
    assert set(paired["verdict"]) <= {"no significant difference", "Rel-U better", "Doctor better"}  # numbers: before
    if name == "calibration":
        summary = next(df.value for df in at.dataframe if "quantity" in df.value.columns)
        assert summary["quantity"].tolist()[:2] == ["ECE", "NLL"]


def test_camera_button_saves_svg_when_asked(pages) -> None:
    at = _page(pages, synthetic_run(), study_name="tuning-split")
    at.button(key="study_run").click().run()
    at.radio(key="study_image_format").set_value("svg").run()
    pages.ok(at)
    drawn = charts(at)
    assert drawn and all(c["config"]["toImageButtonOptions"]["format"] == "svg" for c in drawn)


def test_logits_only_run_offers_no_eps_and_no_mismatch(pages) -> None:
    at = _page(pages, synthetic_run(), study_name="ablation")
    pages.ok(at)
    assert at.multiselect(key="study_axes").options == ["λ (0..1)", "T (0.1..1000, log)"]
    at = _page(pages, synthetic_run(), study_name="mismatch")
    pages.ok(at)
    assert any("needs" in i.value or "runs the model on another data set" in i.value for i in at.info)
    assert not [b for b in at.button if b.key == "study_run"]


def test_bad_extra_fraction_gives_one_line(pages) -> None:
    at = _page(pages, synthetic_run(), study_name="tuning-split", study_extra_fractions="0.3, abc")
    assert not at.exception
    assert len(at.error) == 1 and "not a number" in at.error[0].value


def test_mismatch_offers_only_sets_the_model_can_take(pages, digits_run, shared_data, monkeypatch) -> None:
    # digits (8x8x1): no other set on this machine fits, so none is offered and the page says why
    at = _page(pages, digits_run, study_name="mismatch", study_other="cifar100-exact")
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any("No other data set on this machine has 8x8x1 images" in i.value for i in at.info)
    assert not [b for b in at.button if b.key == "study_run"]
    # with a fitting set available, exactly the fitting ones (not the run's own) are offered
    from relu_core import datasets

    real = datasets.list_datasets()
    fake = dataclasses.replace(real[0], name="more-digits", available=True, image_shape=(8, 8, 1))
    monkeypatch.setattr(datasets, "list_datasets", lambda: [*real, fake])
    at = _page(pages, digits_run, study_name="mismatch", study_other="cifar100-exact")
    assert not at.exception
    assert at.selectbox(key="study_other").options == ["more-digits"]
    assert at.selectbox(key="study_other").value == "more-digits"


def test_eps_axis_runs_on_a_model_run(pages, digits_run) -> None:
    at = _page(pages, digits_run, study_name="ablation", study_axes=["eps"], study_subsample=300)
    pages.ok(at)
    at.button(key="study_run").click().run()
    pages.ok(at)
    assert _titles(at)[0] == "FPR at 95 % TPR (lower is better) against ε"
    assert any("ε axis: 2 seeds on 300 images" in c.value for c in at.caption)


def test_empty_axes_say_choose_an_axis(pages) -> None:
    at = _page(pages, synthetic_run(), study_name="ablation", study_axes=[])
    at.button(key="study_run").click().run()
    assert not at.exception
    assert len(at.error) == 1 and "choose at least one axis" in at.error[0].value, [e.value for e in at.error]


def test_settings_caption_is_readable_not_a_python_dict(pages) -> None:
    at = _page(pages, synthetic_run(), study_name="calibration")
    at.button(key="study_run").click().run()
    pages.ok(at)
    caption = next(c.value for c in at.caption if "settings:" in c.value)
    assert "{" not in caption and "'" not in caption and "[" not in caption, caption
    assert "tuning fraction: 0.5" in caption and "λ: 0.5" in caption and "T_cal fitted in" in caption, caption


def test_intro_states_the_convention_once(pages) -> None:
    at = _page(pages, synthetic_run())
    intro = next(m.value for m in at.markdown if "Every study fits D*" in m.value)
    assert intro.count("correctly classified") == 1, intro


def test_a_study_finished_elsewhere_is_picked_up_without_running_it_again(pages, monkeypatch) -> None:
    # The study runs as a background job keyed by its settings: a session that left the page (or another
    # session) finds the finished result instead of computing it again.
    from relu_core.studies import STUDIES

    run = synthetic_run()
    first = _page(pages, run, study_name="tuning-split")
    first.button(key="study_run").click().run()
    pages.ok(first)
    shown = _titles(first)
    assert shown

    def must_not_run(*args, **kwargs):
        raise AssertionError("the finished study should have been picked up")

    monkeypatch.setattr(STUDIES["tuning-split"].module, "run_study", must_not_run)
    again = _page(pages, run, study_name="tuning-split")  # a fresh session: no results of its own, no click
    pages.ok(again)
    assert _titles(again) == shown


def test_the_scorecards_mismatch_link_opens_its_result(pages, digits_run, monkeypatch) -> None:
    """Issue 34: the Start scorecard's "Open Studies" on the label-domain mismatch row opened the ablation study
    asking for a press; its link (``study=mismatch``) now opens the mismatch study at the scorecard's settings, its
    finished result shown at once."""
    from apptest_pages import STUDIES, app

    from relu_core import jobs, runs, scorecard
    from relu_core.studies import mismatch

    monkeypatch.setattr(scorecard, "other_datasets", lambda run: ["digits"])  # a set the 8x8 model can take
    shared = scorecard.Shared()
    result = mismatch.run_study(digits_run, **scorecard.mismatch_options(digits_run, shared))
    key = scorecard.job_key(digits_run, "mismatch", shared)
    jobs.MANAGER.submit(key, "scorecard mismatch", lambda progress, cancel: result).wait(30)
    try:
        runs.register_run(digits_run)
        at = app(STUDIES, 120)
        at.session_state["run_id"] = digits_run.run_id
        at.query_params["study"] = "mismatch"
        at.run()
        pages.ok(at)
        assert at.radio(key="study_name").value == "mismatch"
        assert not [i.value for i in at.info if "Press" in i.value]  # no press asked: the scorecard's result
        assert _titles(at)[0] == "FPR at 95 % TPR (lower is better) against tuning fraction"
        assert at.multiselect(key="study_fractions").value == [0.5] and "study" not in at.query_params
    finally:
        jobs.MANAGER.forget(key)
