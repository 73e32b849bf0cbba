"""The paper's rows where the pages and the CLI show them (AppTest of the Studies, Baselines, Corruptions and
Objectives pages; the CLI's --json): every paper number shown equals the shipped CSV's, read here with the csv
module, and names its table; a data set without a paper table says so in one line."""

from __future__ import annotations

import csv
import dataclasses
import json
from pathlib import Path

import pytest

from relu_core.studies import paper_table
from studio import session

pytestmark = pytest.mark.slow  # AppTest of whole pages

TABLES = Path(__file__).resolve().parent.parent / "relu_core" / "reference" / "paper"


def _csv(name: str) -> list[dict[str, str]]:
    with open(TABLES / name, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def _percent(cells: dict[str, str], value: str, std: str) -> str:
    return f"{float(cells[value]):.1f} ({float(cells[std]):.1f})"


def _cifar(run, model: str = "resnet34_cifar"):
    """``run`` presented as a CIFAR-10 run of ``model`` (the paper's tables are matched by these names only), under
    its own run id: the run registry and the studies' cache are keyed on it, and another test's digits result of the
    same run id would otherwise be served."""
    return dataclasses.replace(run, dataset_name="cifar10-test", model_name=model, run_id=f"{run.run_id}-as-{model}")


def _frame_with(at, label: str):
    return [df.value for df in at.dataframe if "row" in df.value.columns and label in set(df.value["row"])]


def test_the_calibration_study_shows_tab_calibration_beside_ours(pages) -> None:
    from test_studies import synthetic_run

    at = pages.open(
        "Studies.py",
        _cifar(synthetic_run(seed=21, c=10)),
        **{session.STUDY_NAME: "calibration", session.STUDY_BOOTSTRAP: 0, session.STUDY_SEEDS: 2},
    )
    at.button(key=session.run_button_key(session.STUDIES_PAGE)).click().run()
    pages.ok(at)
    label = paper_table.TABLES["calibration"].label
    (frame,) = _frame_with(at, label)
    assert list(frame["network"]) == ["resnet34_cifar", "ResNet-34", "DenseNet-121"]
    expected = {c["network"]: c for c in _csv("table_calibration_fpr95.csv") if c["dataset"] == "CIFAR-10"}
    for line in frame[frame["row"] == label].to_dict(orient="records"):
        cells = expected[line["network"]]
        assert line["ECE, T = 1"] == f"{float(cells['ece_T1']):.2f}"
        assert line["Doctor FPR95 %, T = 1"] == _percent(cells, "doctor_uncal_fpr95", "doctor_uncal_std")
        assert line["Rel-U FPR95 %, calibrated"] == _percent(cells, "relu_cal_fpr95", "relu_cal_std")
    assert any(label in m.value and "the paper's units" in m.value for m in at.markdown)


def test_a_run_without_a_paper_table_says_so_in_one_line(pages) -> None:
    from test_studies import synthetic_run

    at = pages.open(
        "Studies.py",
        dataclasses.replace(synthetic_run(seed=22), dataset_name="fashion-mnist-test"),
        **{session.STUDY_NAME: "calibration", session.STUDY_BOOTSTRAP: 0, session.STUDY_SEEDS: 2},
    )
    at.button(key=session.run_button_key(session.STUDIES_PAGE)).click().run()
    pages.ok(at)
    assert not _frame_with(at, paper_table.TABLES["calibration"].label)
    lines = [c.value for c in at.caption if c.value.startswith("No paper reference")]
    assert lines == [paper_table.no_table("calibration", "fashion-mnist")]


def test_the_baselines_page_shows_the_bayesian_and_conformal_tables(pages) -> None:
    from test_studies import synthetic_run

    at = pages.open(
        "Baselines.py",
        _cifar(synthetic_run(seed=23, c=10), model="resnet56"),
        **{session.BL_SEEDS: 2, session.BL_DETECTORS: ["relu", "doctor", "msp", "conformal"]},
    )
    at.button(key=session.run_button_key(session.BASELINES_PAGE)).click().run()
    pages.ok(at)
    bayes_label, conformal_label = paper_table.TABLES["bayes"].label, paper_table.TABLES["conformal"].label
    (bayes,) = _frame_with(at, bayes_label)
    (conformal,) = _frame_with(at, conformal_label)
    assert bayes.iloc[0]["MC-Dropout FPR95 %"] == "not run"
    for line in bayes[bayes["row"] == bayes_label].to_dict(orient="records"):
        (cells,) = [
            c for c in _csv("table_bayes_fpr95.csv") if (c["network"], c["dataset"]) == (line["network"], "CIFAR-10")
        ]
        assert line["Deep Ensembles FPR95 %"] == _percent(cells, "deep_ensembles_fpr95", "deep_ensembles_std")
        assert line["Rel-U FPR95 %"] == _percent(cells, "relu_fpr95", "relu_std")
        assert "a different network from ours (resnet56)" in line["note"]
    paper_rows = conformal[conformal["row"] == conformal_label].to_dict(orient="records")
    assert len(paper_rows) == 6
    for line in paper_rows:
        (cells,) = [
            c
            for c in _csv("table_conformal_fpr95.csv")
            if (c["network"], c["dataset"], c["objective"]) == (line["network"], "CIFAR-10", line["objective"])
        ]
        assert line["Conf. FPR95 %"] == _percent(cells, "conformal_fpr95", "conformal_std")
        assert line["Doctor FPR95 %"] == _percent(cells, "doctor_fpr95", "doctor_std")
        assert f"{float(cells['accuracy']):.1f} % accuracy" in line["note"]
        assert line["accuracy %"] == f"{float(cells['accuracy']):.1f}"
    assert conformal.iloc[0]["accuracy %"] == bayes.iloc[0]["accuracy %"] != ""  # ours, measured


def test_the_corruptions_page_shows_the_cifar10_c_rows_at_the_paper_s_split(pages, digits_run) -> None:
    run = _cifar(digits_run)
    at = pages.open("Corruptions.py", run, rob_subsample=48, rob_seeds=2)
    at.button(key="rob_run").click().run()
    pages.no_exceptions(at)
    assert not at.error, [e.value for e in at.error]
    labels = {paper_table.TABLES[key].label: key for key in paper_table.CORRUPTION_TABLES}
    frames = [df.value for df in at.dataframe if "row" in df.value.columns and "corruption" in df.value.columns]
    (frame,) = frames
    shown = frame[frame["row"].isin(labels)]
    assert len(shown) == 19 * 2
    split = paper_table.nearest_split(float(at.session_state[session.ROB_TUNE_FRACTION]))
    for line in shown.to_dict(orient="records"):
        file = paper_table.TABLES[labels[line["row"]]].file
        (cells,) = [
            c
            for c in _csv(file)
            if paper_table.corruption_name(c["corruption"]) == line["corruption"]
            and int(c["tuning_split_percent"]) == split
        ]
        assert line["Rel-U AUROC"] == f"{float(cells['relu_auroc']):.2f} ± {float(cells['relu_auroc_std']):.2f}"
        assert line["Doctor FPR95"] == f"{float(cells['doctor_fpr95']):.2f} ± {float(cells['doctor_fpr95_std']):.2f}"
    assert any("fractions (0.31 = 31 %)" in m.value for m in at.markdown)


def test_the_objectives_page_shows_every_network_s_table1_rows(pages, digits_run, monkeypatch) -> None:
    from test_objectives_table import _logits_run, _result

    from relu_core import protocol
    from relu_core.studies import objectives

    rows = []
    for name, seed in (("cross-entropy", 3), ("mixup", 4)):
        run = _logits_run(seed)
        honest = protocol.evaluate_with_selection(
            run.logits, run.labels, objectives.TABLE_KEYS, seeds=2, n_resamples=50
        )
        rows.append(objectives.ObjectiveRow(name, run, honest, None))
    stub = _result(rows, dataset="digits", model="cnn8", recipe="plain")
    monkeypatch.setattr(
        objectives, "objectives_study", lambda **_: dataclasses.replace(stub, dataset="cifar10", model="resnet9")
    )
    at = pages.open("Objectives.py", digits_run)
    at.button(key=session.run_button_key(session.OBJECTIVES_PAGE)).click().run()
    pages.ok(at)
    (frame,) = _frame_with(at, paper_table.LABEL)
    paper = frame[frame["row"] == paper_table.LABEL]
    assert len(paper) == 4 and set(paper["network"]) == {"ResNet-34", "DenseNet-121"}
    names = {"cross-entropy": "CrossEntropy", "mixup": "Mixup"}
    for line in paper.to_dict(orient="records"):
        (cells,) = [
            c
            for c in _csv("table1_fpr95.csv")
            if (c["network"], c["dataset"], c["objective"]) == (line["network"], "CIFAR-10", names[line["objective"]])
        ]
        assert line["Rel-U FPR95 %"] == _percent(cells, "relu_fpr95", "relu_std")
        assert line["MSP FPR95 %"] == _percent(cells, "msp_fpr95", "msp_std")
        assert line["accuracy %"] == f"{float(cells['accuracy']):.1f}"
        assert "a different network from ours (resnet9)" in line["note"]
    assert any(paper_table.LABEL in m.value and "five-best" in m.value for m in at.markdown)


def test_the_cli_json_of_the_calibration_study_carries_the_paper_s_rows(tmp_path, capsys) -> None:
    import numpy as np

    from relu_core.cli import main

    rng = np.random.default_rng(5)
    labels = rng.integers(0, 10, 600)
    logits = (rng.normal(size=(600, 10)) + 2.5 * np.eye(10)[labels]).astype(np.float32)
    path = tmp_path / "cifar10-test.npz"  # a logits file's data set is its name
    np.savez(path, logits=logits, labels=labels)
    code = main(["study", "calibration", "--logits", str(path), "--seeds", "2", "--bootstrap", "0", "--json"])
    assert code == 0
    record = json.loads(capsys.readouterr().out)["paper_reference"]
    assert record["note"] is None and "tab:calibration" in record["heading"]
    expected = [c for c in _csv("table_calibration_fpr95.csv") if c["dataset"] == "CIFAR-10"]
    assert [r["network"] for r in record["rows"]] == [c["network"] for c in expected]
    for row, cells in zip(record["rows"], expected, strict=True):
        assert row["label"] == paper_table.TABLES["calibration"].label
        assert row["values"]["relu_cal_fpr95"] == {
            "mean": float(cells["relu_cal_fpr95"]),
            "std": float(cells["relu_cal_std"]),
            "unit": "percent",
        }
        assert row["values"]["ece_T1"]["unit"] == "fraction"


def test_the_paper_protocol_study_shows_table1_rows_of_the_data_set(pages) -> None:
    from test_studies import synthetic_run

    at = pages.open(
        "Studies.py",
        _cifar(synthetic_run(seed=24, c=10), model="resnet20"),
        **{session.STUDY_NAME: "paper-protocol", session.STUDY_BOOTSTRAP: 50, session.STUDY_SEEDS: 2},
    )
    at.button(key=session.run_button_key(session.STUDIES_PAGE)).click().run()
    pages.ok(at)
    (frame,) = _frame_with(at, paper_table.LABEL)
    raw = [c for c in _csv("table1_fpr95.csv") if c["dataset"] == "CIFAR-10"]
    assert len(frame) == len(raw)
    for line in frame.to_dict(orient="records"):
        (cells,) = [c for c in raw if (c["network"], c["objective"]) == (line["network"], line["objective"])]
        assert line["Doctor FPR95 %"] == _percent(cells, "doctor_fpr95", "doctor_std")
        assert line["Rel-U − Doctor (points)"] == f"{float(cells['relu_fpr95']) - float(cells['doctor_fpr95']):+.1f}"
    assert any(m.value == paper_table.ladder_heading() for m in at.markdown)
