"""AppTest of app_pages/Baselines.py: the study table, Rel-U − Doctor, the ROC and risk-coverage figures, downloads."""

from __future__ import annotations

import dataclasses

import pytest
from apptest_charts import charts

pytestmark = pytest.mark.slow  # AppTest of a whole page, MLP training


def test_study_table_paired_interval_figures_and_downloads(pages, digits_run) -> None:
    at = pages.open("Baselines.py", digits_run, bl_seeds=2)
    pages.ok(at)
    assert any("Run the study" in info.value for info in at.info)
    assert any("Deep Ensembles" in info.value for info in at.info)  # no offline ensemble for this linear model
    assert not charts(at)
    at.button(key="bl_run").click().run()
    pages.ok(at)
    table = next(df.value for df in at.dataframe if "detector" in df.value.columns)
    assert list(table["detector"]) == [
        "Rel-U",
        "Doctor",
        "MSP",
        "MLP",
        "MC-Dropout",
        "Conformal (APS)",
        "Conformal (RAPS)",
    ]
    assert all("±" in v for v in table["AUROC ↑"])  # short headers: the table fits 1280 x 720 (browser test)
    assert list(table.columns) == ["detector", "learned", "FPR95 ↓", "AUROC ↑", "AURC ↓", "AUGRC ↓"]
    assert any(
        c.value.startswith("Each row: one detector") and "How they ran: MC-Dropout: " in c.value for c in at.caption
    )
    paired = next(df.value for df in at.dataframe if "verdict" in df.value.columns)
    assert list(paired["metric"]) == ["FPR95", "AUROC", "AURC", "AUGRC"]
    ci_column = next(c for c in paired.columns if c.endswith("CI (paired bootstrap)"))  # e.g. "95 % CI ..."
    level = ci_column.split(" CI")[0]
    assert any(c.value.startswith(f"{level} paired bootstrap interval of the mean") for c in at.caption)
    specs = charts(at)
    titles = [spec["layout"]["title"]["text"] for spec in specs]
    assert titles[0].startswith("ROC") and titles[1].startswith("Risk-coverage")
    for spec in specs:
        assert {"Rel-U", "Doctor", "MLP", "MC-Dropout", "Conformal (APS)"} <= {
            t.get("legendgroup") for t in spec["data"]
        }
    captions = [c.value for c in at.caption]
    assert any("Only Rel-U − Doctor is tested" in c for c in captions)  # the rest is not a ranking
    assert any(c.startswith("Each curve shows, for one detector") for c in captions)
    assert any(c.startswith("Each curve shows the error rate") for c in captions)
    labels = {b.proto.label for b in at.get("download_button")}
    assert {
        "Table (CSV)",
        "Per-seed values (CSV)",
        "ROC (HTML)",
        "ROC data (CSV)",
        "Risk-coverage (HTML)",
        "Risk-coverage data (CSV)",
    } <= labels
    # a changed setting keeps the last study on screen and says so
    at.slider(key="bl_coverage").set_value(0.8).run()
    assert any("settings changed" in info.value for info in at.info)
    assert len(charts(at)) == 2


def test_logits_only_run_offers_the_logit_detectors_only(pages, digits_run) -> None:
    logits_only = dataclasses.replace(digits_run, images=None, model=None, run_id="digits-logits-only-baselines")
    at = pages.open("Baselines.py", logits_only)
    pages.ok(at)
    options = at.multiselect(key="bl_detectors").options
    assert "MC-Dropout" not in options and "Deep Ensembles" not in options and "MLP" in options
    assert any("MC-Dropout needs a run with a model" in info.value for info in at.info)
    at.multiselect(key="bl_detectors").set_value([]).run()
    assert at.button(key="bl_run").disabled
    assert any("at least one detector" in w.value for w in at.warning)


def test_deep_ensembles_that_would_train_models_is_offered_but_not_preselected(pages, digits_run) -> None:
    # a small-CNN run on a registered data set: its ensemble would be 5 CNNs trained here
    cnn_run = dataclasses.replace(
        digits_run, model_name="cnn8", dataset_name="digits-test", run_id="digits-cnn8-baselines"
    )
    at = pages.open("Baselines.py", cnn_run)
    pages.ok(at)
    detectors_box = at.multiselect(key="bl_detectors")
    assert "Deep Ensembles" in detectors_box.options and "deep_ensemble" not in detectors_box.value
    assert {"relu", "doctor", "mlp"} <= set(detectors_box.value)
    assert any("Deep Ensembles trains 5 cnn8 models" in c.value for c in at.caption)
