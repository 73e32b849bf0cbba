"""AppTest of app_pages/Corruptions.py: radar plots with one vertex per corruption, accuracy bars, table, gallery."""

from __future__ import annotations

import dataclasses
import json

import pytest
from apptest_charts import charts
from streamlit.testing.v1 import AppTest

from relu_core import corruptions

pytestmark = pytest.mark.slow  # AppTest of whole pages on a trained default run


def _figures(at: AppTest) -> dict[str, dict]:
    specs = charts(at)
    return {spec["layout"]["title"]["text"]: spec for spec in specs}


def _one(figures: dict[str, dict], start: str) -> dict:
    matches = [spec for title, spec in figures.items() if title.startswith(start)]
    assert len(matches) == 1, list(figures)
    return matches[0]


def test_study_draws_radar_plots_over_all_19_corruptions(pages, digits_run) -> None:
    at = pages.open("Corruptions.py", digits_run, rob_subsample=64, rob_seeds=2)
    pages.no_exceptions(at)
    assert any("Run the study" in info.value for info in at.info)
    assert not charts(at)
    at.button(key="rob_run").click().run()
    pages.no_exceptions(at)
    assert not at.error, [e.value for e in at.error]
    figures = _figures(at)
    for start in ("AUROC", "FPR at 95 % TPR"):
        radar = _one(figures, start)
        polygons = [t for t in radar["data"] if not t["name"].endswith(" significantly better")]  # not the stars
        assert {trace["name"] for trace in polygons} == {"Rel-U", "Doctor"}
        assert all(trace["type"] == "scatterpolar" for trace in radar["data"])
        for trace in polygons:
            assert trace["theta"] == [*corruptions.CORRUPTIONS, corruptions.CORRUPTIONS[0]]  # closed polygon
    bars = _one(figures, "Accuracy per corruption")
    assert bars["data"][0]["x"] == list(corruptions.CORRUPTIONS)
    table = next(df.value for df in at.dataframe if "auroc" in df.value.columns)
    assert len(table) == 20 * 2 and "±" in table["auroc"].iloc[0]  # the clean images first, then 19 corruptions
    assert (table["corruption"] == "clean").sum() == 2
    # Rel-U − Doctor, paired, for every corruption and metric, with the count of significant wins and losses
    paired = next(df.value for df in at.dataframe if any(c.startswith("95 % CI of the mean") for c in df.value.columns))
    # T and λ are selected on the clean tuning splits: the interval's header says it holds for them only
    assert "95 % CI of the mean (conditional on the selected settings)" in paired.columns
    assert len(paired) == 20 * 4 and set(paired["metric"]) == {"FPR95", "AUROC", "AURC", "AUGRC"}
    assert set(paired["verdict"]) <= {"no significant difference", "Rel-U better", "Doctor better"}  # numbers: before
    # the verdict column wide enough for "no significant difference" (sized on the first rows, it cut it at 1280 px)
    paired_columns = next(
        json.loads(df.proto.columns) for df in at.dataframe if any(c.startswith("95 % CI") for c in df.value.columns)
    )
    assert paired_columns["verdict"]["width"] >= 190
    assert any("of 19 corruptions (95 % paired bootstrap" in m.value for m in at.markdown)
    assert any("without a correction for the 19 comparisons" in c.value for c in at.caption)  # multiplicity said
    for start, label in (("AUROC", "AUROC"), ("FPR at 95 % TPR", "FPR95")):  # the radars mark where, and who wins
        angular = _one(figures, start)["layout"]["polar"]["angularaxis"]
        rows = paired[(paired["metric"] == label) & (paired["verdict"] != "no significant difference")]
        winners = {(c, v.removesuffix(" better")) for c, v in zip(rows["corruption"], rows["verdict"]) if c != "clean"}
        shown = {
            (axis, text.rsplit("★ ", 1)[1].removesuffix("</b>"))
            for axis, text in zip(angular["tickvals"], angular["ticktext"])
            if "★" in text
        }
        assert shown == winners
    assert any("Settings searched" in c.value and "Rel-U 50" in c.value for c in at.caption)
    assert {b.proto.label.split(" (")[0] for b in at.get("download_button")} >= {"Table", "Per-seed values"}
    # the gallery: one row of 6 images (clean + 5 severities) per corruption
    rows = at.get("image")
    assert len(rows) == len(corruptions.CORRUPTIONS)
    for row in rows:
        assert [image.caption for image in row.proto.imgs] == ["clean", *(f"severity {s}" for s in range(1, 6))]
    assert len({image.url for image in rows[0].proto.imgs}) == 6  # every severity looks different
    for name, row in zip(corruptions.CORRUPTIONS, rows):  # and every corruption shows at severity 5 on 8x8 digits
        assert row.proto.imgs[5].url != row.proto.imgs[0].url, name


def test_the_start_page_s_finished_study_is_shown_without_a_press(pages, digits_run) -> None:
    from relu_core import jobs, robustness, scorecard
    from studio import session

    shared = scorecard.Shared(seeds=1)  # shared settings of this test only: no other test's scorecard job
    study = robustness.mismatch_study(
        digits_run, subsample=64, seeds=(0,), corruption_names=corruptions.CORRUPTIONS[:3], device="cpu"
    )
    key = scorecard.job_key(digits_run, "corruptions", shared)
    job = jobs.MANAGER.submit(key, "Scorecard: corruptions", lambda progress, cancel: study)
    try:
        assert job.wait(60) and job.state == jobs.DONE
        at = pages.open("Corruptions.py", digits_run, **{session.SHARED: dict(vars(shared))})
        pages.no_exceptions(at)
        assert not any("Run the study" in info.value for info in at.info)  # nothing to press: shown at once
        assert _one(_figures(at), "AUROC")  # the scorecard's result, drawn
        at.select_slider(key="rob_severity").set_value(3).run()  # other settings: a study of their own
        pages.no_exceptions(at)
        assert any("settings changed since this study was run" in info.value for info in at.info)
    finally:
        jobs.MANAGER.forget(key)


def test_changed_settings_keep_the_last_study_and_say_so(pages, digits_run) -> None:
    names = ["gaussian_noise", "contrast", "fog"]
    at = pages.open("Corruptions.py", digits_run, rob_subsample=64, rob_seeds=1, rob_corruptions=names)
    at.button(key="rob_run").click().run()
    pages.no_exceptions(at)
    assert _one(_figures(at), "AUROC")["data"][0]["theta"] == [*names, names[0]]
    at.select_slider(key="rob_severity").set_value(3).run()
    assert any("settings changed" in info.value for info in at.info)
    assert _one(_figures(at), "AUROC")["layout"]["title"]["text"].startswith(
        "AUROC (higher is better)<br><sup>severity 5, mean over"
    )
    at.multiselect(key="rob_corruptions").set_value(names[:2]).run()
    assert at.button(key="rob_run").disabled
    assert any("at least 3 corruptions" in w.value for w in at.warning)


def test_runs_without_model_or_images_are_explained(pages, digits_run) -> None:
    logits_only = dataclasses.replace(digits_run, images=None, model=None, run_id="digits-logits-only")
    at = pages.open("Corruptions.py", logits_only)
    pages.no_exceptions(at)
    assert any("images" in info.value and "sidebar" in info.value for info in at.info)
    assert not charts(at) and not at.get("image")


def test_settings_survive_a_visit_to_another_page(pages, digits_run) -> None:
    at = pages.open("Corruptions.py", digits_run, rob_subsample=64)
    at.select_slider(key="rob_severity").set_value(3).run()
    at.number_input(key="rob_seeds").set_value(4).run()
    kept = at.session_state["rob_kept"]  # the plain copy a run of another page leaves alone
    shared = at.session_state["shared_setting"]  # the seeds are every page's (studio.session.share)
    assert (kept["rob_severity"], shared["seeds"]) == (3, 4)
    # back from another page: Streamlit has dropped the widgets' state, only the plain copies are left
    back = pages.open("Corruptions.py", digits_run, rob_kept=dict(kept), shared_setting=dict(shared))
    pages.no_exceptions(back)
    assert back.select_slider(key="rob_severity").value == 3
    assert back.number_input(key="rob_seeds").value == 4
