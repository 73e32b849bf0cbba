"""The paper's published tables as shipped in the package: identical to the shared reference copy, read number for
number (checked here against an independent parse with the csv module), in their units with explicit conversions,
labelled with their table, and matched to our data sets, objectives, corruptions and splits; the studies' reference
frames carry the same numbers."""

from __future__ import annotations

import csv
import os
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from relu_core.errors import InputError
from relu_core.studies import calibration, paper_table

REPO = Path(__file__).resolve().parent.parent
PACKAGED = REPO / "relu_core" / "reference" / "paper"


def _shared_reference() -> Path | None:
    """``../shared/reference/paper`` beside the checkout (or under RELU_STUDIO_DATA's parent), None if absent."""
    candidates = [REPO.parent / "shared" / "reference" / "paper"]
    if os.environ.get("RELU_STUDIO_DATA"):
        candidates.append(Path(os.environ["RELU_STUDIO_DATA"]).parent / "reference" / "paper")
    return next((c for c in candidates if c.is_dir()), None)


def _raw(key: str) -> list[dict[str, str]]:
    with open(PACKAGED / paper_table.TABLES[key].file, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def test_every_table_is_shipped_and_identical_to_the_shared_reference() -> None:
    shipped = sorted(p.name for p in PACKAGED.glob("*.csv"))
    assert shipped == sorted(table.file for table in paper_table.TABLES.values())
    reference = _shared_reference()
    if reference is None:
        pytest.skip("../shared/reference/paper is absent")
    assert sorted(p.name for p in reference.glob("*.csv")) == shipped
    for name in shipped:
        assert (PACKAGED / name).read_bytes() == (reference / name).read_bytes(), name


def test_the_tables_have_the_paper_s_row_counts() -> None:
    counts = {key: len(paper_table.rows(key)) for key in paper_table.TABLES}
    assert counts == {
        "table1": 20,
        "conformal": 12,
        "calibration": 5,
        "bayes": 4,
        "corruption_densenet121": 76,
        "corruption_resnet34": 76,
    }
    for key in paper_table.CORRUPTION_TABLES:
        found = paper_table.rows(key)
        assert {row.tuning_split_percent for row in found} == set(paper_table.CORRUPTION_SPLITS)
        assert len({row.corruption for row in found}) == 19


@pytest.mark.parametrize("key", list(paper_table.TABLES))
def test_every_number_is_the_csv_s_with_its_std_and_unit(key) -> None:
    raw = _raw(key)
    parsed = paper_table.rows(key)
    assert len(raw) == len(parsed)
    percent = key in ("table1", "conformal", "bayes")
    for cells, row in zip(raw, parsed, strict=True):
        assert row.label == paper_table.TABLES[key].label
        for column, text in cells.items():
            if column in ("network", "dataset", "objective", "corruption", "tuning_split_percent", "accuracy"):
                continue
            if column.endswith("_std"):
                continue
            value = row.value(column)
            assert value.mean == float(text)
            expected_unit = (
                paper_table.FRACTION
                if key.startswith("corruption") or column.startswith("ece")
                else paper_table.PERCENT
            )
            assert value.unit == expected_unit, (key, column)
            if percent:
                assert value.unit == paper_table.PERCENT
        # the std: the "<detector>_std" of Table 1's layout, "<column>_std" of the corruption tables'
        for column in cells:
            if not column.endswith("_std"):
                continue
            stem = column.removesuffix("_std")
            owner = stem if stem in row.values else next(c for c in row.values if c.startswith(stem + "_"))
            assert row.value(owner).std == float(cells[column])
        if "accuracy" in cells:
            assert row.accuracy == float(cells["accuracy"])
        if "objective" in cells:
            assert row.objective == cells["objective"]
        if "corruption" in cells:
            assert (row.corruption, row.tuning_split_percent) == (
                cells["corruption"],
                int(cells["tuning_split_percent"]),
            )


def test_labels_name_the_tables() -> None:
    assert paper_table.LABEL == "paper, Table 1 (tab:main_misclassification_detection)"
    assert paper_table.TABLES["calibration"].label == "paper, its calibration table (tab:calibration)"
    assert (
        paper_table.TABLES["corruption_resnet34"].label == "paper, its ResNet-34 CIFAR-10-C table (tab:r34corruption)"
    )
    assert "five-best" in paper_table.TABLES["table1"].selection
    assert "evaluation split" in paper_table.TABLES["table1"].selection


def test_units_convert_explicitly() -> None:
    fraction = paper_table.Value(0.31, 0.02, paper_table.FRACTION)
    converted = fraction.percent()
    assert (converted.mean, converted.std, converted.unit) == (pytest.approx(31.0), pytest.approx(2.0), "percent")
    assert fraction.percent().fraction().mean == pytest.approx(0.31)
    assert fraction.fraction() is fraction
    percent = paper_table.Value(14.3, None, paper_table.PERCENT)
    assert (percent.fraction().mean, percent.fraction().std, percent.fraction().unit) == (
        pytest.approx(0.143),
        None,
        "fraction",
    )
    assert (percent.text(), fraction.text()) == ("14.3", "0.31 ± 0.02")
    assert paper_table.Value(14.3, 0.2, paper_table.PERCENT).text() == "14.3 (0.2)"
    row = paper_table.corruption_rows("cifar10", ["brightness"], 0.1, model="resnet34_cifar")[0]
    assert row.network == "ResNet-34" and row.value("doctor_fpr95").percent().mean == pytest.approx(30.0)


def test_our_names_map_to_the_paper_s() -> None:
    assert [paper_table.paper_dataset(n) for n in ("cifar10", "cifar10-test", "cifar10-exact-test", "cifar100")] == [
        "CIFAR-10",
        "CIFAR-10",
        "CIFAR-10",
        "CIFAR-100",
    ]
    assert paper_table.paper_dataset("fashion-mnist-test") is None and paper_table.paper_dataset("") is None
    assert paper_table.corruption_name("Jpeg compression") == "jpeg_compression"
    from relu_core import corruptions

    names = {paper_table.corruption_name(r.corruption) for r in paper_table.rows("corruption_resnet34")}
    assert names == set(corruptions.CORRUPTIONS)
    assert paper_table.objective_of("regmixup") == ("RegMixUp", "")
    assert paper_table.objective_of("regmixup-appendix")[0] == "RegMixUp"
    assert paper_table.objective_of("nothing") == (None, "")
    assert (paper_table.nearest_split(1 / 3), paper_table.nearest_split(0.2), paper_table.nearest_split(0.4)) == (
        33,
        20,
        33,
    )
    assert paper_table.split_matches(1 / 3) and not paper_table.split_matches(0.4)


def test_rows_for_a_data_set_put_our_network_first_and_note_the_others() -> None:
    rows = paper_table.objective_rows("cifar10", ["mixup", "cross-entropy"], model="densenet121_cifar")
    assert [(r.objective, r.network) for r in rows] == [
        ("Mixup", "DenseNet-121"),
        ("Mixup", "ResNet-34"),
        ("CrossEntropy", "DenseNet-121"),
        ("CrossEntropy", "ResNet-34"),
    ]
    assert rows[1].value("relu_fpr95").mean == 19.0 and rows[1].accuracy == 96.1
    assert paper_table.network_note(rows[0], "densenet121_cifar").endswith("the same network as ours")
    assert "a different network from ours (resnet9)" in paper_table.network_note(rows[1], "resnet9")
    assert "ResNet-34, 96.1 % accuracy" in paper_table.network_note(rows[1], "resnet9")
    assert paper_table.objective_rows("fashion-mnist", ["mixup"]) == []
    assert paper_table.calibration_rows("imagenet")[0].network == "ResNet-50"
    bayes = paper_table.bayes_rows("cifar10", model="resnet34_cifar")
    assert [b.network for b in bayes] == ["ResNet-34", "DenseNet-121"]
    assert bayes[0].accuracy == 95.4 and "CrossEntropy row" in bayes[0].accuracy_source
    assert paper_table.calibration_rows("cifar10")[0].accuracy is None  # the table prints none
    assert len(paper_table.corruption_rows("cifar10", None, 0.2)) == 38
    assert paper_table.corruption_rows("cifar100", None, 0.2) == []


def test_a_data_set_without_a_table_says_so_in_one_line() -> None:
    line = paper_table.no_table("table1", "fashion-mnist-test")
    assert "\n" not in line and "fashion-mnist" in line and paper_table.LABEL in line
    assert paper_table.not_recorded("fashion-mnist", "cnn28", ["mixup"]) == line
    assert paper_table.not_recorded("cifar10", "resnet9", ["mixup"]) is None
    assert "regmixup-appendix" not in (paper_table.not_recorded("cifar10", "resnet9", ["regmixup-appendix"]) or "")
    with pytest.raises(InputError, match="unknown paper table"):
        paper_table.rows("table9")
    with pytest.raises(InputError, match="no column"):
        paper_table.rows("table1")[0].value("nothing")


def test_to_dict_is_strict_json_with_label_units_and_selection() -> None:
    import json

    record = paper_table.rows("table1")[0].to_dict()
    assert json.loads(json.dumps(record, allow_nan=False)) == record
    assert record["label"] == paper_table.LABEL and record["model"] == "densenet121_cifar"
    assert record["values"]["relu_fpr95"] == {"mean": 18.3, "std": 0.2, "unit": "percent"}
    assert "five-best" in record["selection"] and record["units"].startswith("percent")


# ----------------------------------------------------------------------------------- the studies' frames


def _calibration_result() -> SimpleNamespace:
    fpr, auroc = "FPR at 95 % TPR", "AUROC"
    summary = pd.DataFrame(
        [
            ("ECE", 0.031, 0.002, 0.012, 0.001),
            ("NLL", 0.3, 0.01, 0.29, 0.01),
            (f"Doctor {fpr}", 0.25, 0.01, 0.24, 0.01),
            (f"Doctor {auroc}", 0.9, 0.01, 0.9, 0.01),
            (f"Rel-U {fpr}", 0.27, 0.02, 0.23, 0.02),
            (f"Rel-U {auroc}", 0.9, 0.01, 0.9, 0.01),
        ],
        columns=["quantity", "uncalibrated_mean", "uncalibrated_std", "calibrated_mean", "calibrated_std"],
    )
    return SimpleNamespace(tables={"summary": summary}, study=calibration.NAME)


def test_the_calibration_reference_shows_ours_and_the_paper_s_rows_in_the_paper_s_units() -> None:
    run = SimpleNamespace(dataset_name="cifar10-test", model_name="resnet56", source="test_jpeg_q75 folder")
    frame, notes = calibration.paper_reference(_calibration_result(), run)
    assert list(frame["row"]) == [
        "ours",
        paper_table.TABLES["calibration"].label,
        paper_table.TABLES["calibration"].label,
    ]
    assert frame.iloc[0]["Rel-U FPR95 %, T = 1"] == "27.0 (2.0)"  # ours converted to %
    assert frame.iloc[0]["ECE, T = 1"] == "0.031 (0.002)"  # a fraction, as the paper's ECE
    paper_rows = paper_table.calibration_rows("cifar10")
    for line, row in zip(frame.iloc[1:].to_dict(orient="records"), paper_rows, strict=True):
        assert line["network"] == row.network
        assert line["Doctor FPR95 %, calibrated"] == row.value("doctor_cal_fpr95").text()
        assert line["ECE, T = 1"] == row.value("ece_T1").text()
        assert "a different network from ours (resnet56)" in line["note"]
    assert any("JPEG" in note for note in notes)
    empty, notes = calibration.paper_reference(_calibration_result(), SimpleNamespace(dataset_name="mnist-test"))
    assert empty.empty and len(notes) == 1 and "No paper reference for mnist" in notes[0]
    record = calibration.paper_reference_dict(run)
    assert [r["network"] for r in record["rows"]] == ["DenseNet-121", "ResNet-34"] and record["note"] is None
    assert "JPEG" in record["images_note"]


def _corruption_result(tune_fraction: float, severity: int = 5) -> SimpleNamespace:
    rows = []
    for corruption in ("clean", "fog", "jpeg_compression"):
        for detector in ("Doctor", "Rel-U"):
            for metric, value in (("auroc", 0.8), ("fpr95", 0.5), ("aurc", 0.1)):
                rows.append((corruption, severity, detector, metric, value, 0.01))
    table = pd.DataFrame(rows, columns=["corruption", "severity", "detector", "metric", "mean", "std"])
    return SimpleNamespace(table=table, tune_fraction=tune_fraction, severity=severity)


def test_the_corruption_reference_shows_the_paper_s_split_per_corruption() -> None:
    run = SimpleNamespace(dataset_name="cifar10-test", model_name="resnet34_cifar", source="")
    frame, notes = paper_table.corruption_reference(_corruption_result(0.2), run)
    assert list(frame["corruption"]) == ["fog"] * 3 + ["jpeg_compression"] * 3
    assert list(frame["network"]) == ["resnet34_cifar", "ResNet-34", "DenseNet-121"] * 2
    for line in frame.to_dict(orient="records"):
        if line["row"] == "ours":
            assert line["Rel-U FPR95"] == "0.50 ± 0.01"
            continue
        key = "corruption_resnet34" if line["network"] == "ResNet-34" else "corruption_densenet121"
        assert line["row"] == paper_table.TABLES[key].label
        (cells,) = [
            c
            for c in _raw(key)
            if paper_table.corruption_name(c["corruption"]) == line["corruption"] and c["tuning_split_percent"] == "20"
        ]
        assert line["Rel-U FPR95"] == f"{float(cells['relu_fpr95']):.2f} ± {float(cells['relu_fpr95_std']):.2f}"
        assert line["Doctor AUROC"] == f"{float(cells['doctor_auroc']):.2f} ± {float(cells['doctor_auroc_std']):.2f}"
        assert "tuning split 20 %" in line["note"]
    assert notes == [n for n in (paper_table.images_note(run),) if n]  # the JPEG folder, where it is CIFAR-10's
    assert "the paper's 20 % tuning split, as ours" in paper_table.corruption_heading(0.2)
    assert "nearest tuning split, 33 %" in paper_table.corruption_heading(0.4)
    _, notes = paper_table.corruption_reference(_corruption_result(0.4, severity=3), run)
    assert any("severity 5" in n for n in notes)
    empty, notes = paper_table.corruption_reference(_corruption_result(0.2), SimpleNamespace(dataset_name="svhn-test"))
    assert empty.empty and notes == [paper_table.no_table("corruption", "svhn")]


def test_nothing_is_read_twice() -> None:
    assert paper_table.rows("table1") is paper_table.rows("table1")
    total = sum(float(cells["relu_fpr95"]) for cells in _raw("table1"))
    assert np.isclose(sum(r.value("relu_fpr95").mean for r in paper_table.rows("table1")), total)


def test_the_ladder_shows_table1_rows_and_the_paper_s_gap_in_points() -> None:
    from relu_core.cli import study as study_cli

    run = SimpleNamespace(dataset_name="cifar10-test", model_name="resnet56", source="")
    frame, _notes = paper_table.ladder_reference(run)
    raw = [c for c in _raw("table1") if c["dataset"] == "CIFAR-10"]
    assert len(frame) == len(raw) == 10
    for line in frame.to_dict(orient="records"):
        (cells,) = [c for c in raw if (c["network"], c["objective"]) == (line["network"], line["objective"])]
        gap = float(cells["relu_fpr95"]) - float(cells["doctor_fpr95"])
        assert line["Rel-U − Doctor (points)"] == f"{gap:+.1f}"
        assert line["Rel-U FPR95 %"] == f"{float(cells['relu_fpr95']):.1f} ({float(cells['relu_std']):.1f})"
        assert line["row"] == paper_table.LABEL and "different network from ours (resnet56)" in line["note"]
    result = SimpleNamespace(study="paper-protocol")
    record = study_cli._with_paper({}, result, run)["paper_reference"]
    assert len(record["rows"]) == 10 and record["note"] is None and "five-best" in record["heading"]
    assert paper_table.ladder_heading() in study_cli._paper_text(result, run)
    other = SimpleNamespace(dataset_name="digits-test", model_name="cnn8", source="")
    assert study_cli._with_paper({}, result, other)["paper_reference"]["note"] == paper_table.no_table(
        "table1", "digits"
    )
    assert paper_table.no_table("table1", "digits") in study_cli._paper_text(result, other)
    assert study_cli._with_paper({"a": 1}, SimpleNamespace(study="ablation"), run) == {"a": 1}


def test_the_cached_rows_cannot_be_changed_by_a_caller() -> None:
    row = paper_table.rows("table1")[0]
    with pytest.raises(TypeError):
        row.values["relu_fpr95"] = paper_table.Value(0.0, None, paper_table.PERCENT)
    assert paper_table.rows("table1")[0].value("relu_fpr95").mean == float(_raw("table1")[0]["relu_fpr95"])


def test_a_data_set_without_either_baselines_table_gets_one_line() -> None:
    from relu_core import baselines

    table = pd.DataFrame([{"key": "relu", "fpr95_mean": 0.2, "fpr95_std": 0.01}])
    result = SimpleNamespace(table=table)
    out = baselines.paper_reference(result, SimpleNamespace(dataset_name="svhn-test", model_name="cnn32", source=""))
    lines = [line for _frame, notes in out.values() for line in notes]
    assert all(frame.empty for frame, _ in out.values()) and len(lines) == 1
    assert lines[0].startswith("No paper reference for svhn:") and "tab:bayes" in lines[0]
    shown = baselines.paper_reference(result, SimpleNamespace(dataset_name="cifar100-test", model_name="", source=""))
    frame, _ = shown["bayes"]
    assert list(frame["network"]) == ["logits only", "DenseNet-121", "ResNet-34"]
    assert frame.iloc[0]["Rel-U FPR95 %"] == "20.0 (1.0)" and frame.iloc[0]["MLP FPR95 %"] == "not run"
