"""The training-objectives table without training (synthetic runs): the answer in one sentence from the paired
verdicts, the narrow summary table, the paper's Table 1 rows of the data set (every network, each number the
shipped CSV's), and what the command prints where the paper has none."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from relu_core import protocol, runs, stats
from relu_core.cli import study as studies_cli
from relu_core.studies import objectives, paper_table
from relu_core.training import estimate, recipes


def _diff(estimate: float, low: float, high: float) -> stats.PairedDifference:
    return stats.PairedDifference("fpr95", estimate, low, high, False, 1000, 0.95)


def _stub(objective: str, diff) -> objectives.ObjectiveRow:
    return objectives.ObjectiveRow(objective, None, SimpleNamespace(paired={"fpr95": diff}))


def _result(rows, **fields) -> objectives.ObjectivesResult:
    base = {"dataset": "digits", "model": "cnn8", "epochs": 1, "train_seed": 0, "outliers": None}
    base.update({"seeds": (0, 1, 2), "tune_fraction": 0.5, "selection": "tuning", "rows": tuple(rows)})
    return objectives.ObjectivesResult(**{**base, **fields})


def test_the_answer_counts_the_fpr95_verdicts_in_one_sentence() -> None:
    doctor_better, relu_better, tied = _diff(0.05, 0.01, 0.09), _diff(-0.04, -0.07, -0.01), _diff(0.01, -0.02, 0.04)
    answer = _result(
        [_stub("cross-entropy", doctor_better), _stub("mixup", relu_better), _stub("logitnorm", tied)]
    ).answer()
    assert answer == (
        "Rel-U tells errors apart better than Doctor under 1 objective of 3 (mixup); Doctor is better than Rel-U "
        "under 1 objective of 3 (cross-entropy); no significant difference under 1 objective (FPR95, paired 95 % "
        "intervals over 3 seeds; cnn8 on digits, plain recipe, T and λ chosen inside the tuning split)."
    )
    everywhere = _result([_stub("a", doctor_better), _stub("b", doctor_better)]).answer()
    assert everywhere.startswith("Doctor is better than Rel-U under all 2 objectives (FPR95")
    assert "no verdict" in _result([_stub("a", None)]).answer()


def _logits_run(seed: int):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 10, 800)
    logits = rng.normal(size=(800, 10)).astype(np.float32)
    logits[np.arange(800), labels] += rng.normal(2.5, 1.0, 800).astype(np.float32)
    return runs.Run.from_logits(logits, labels, tuple("abcdefghij"))


@pytest.fixture(scope="module")
def cifar_like() -> objectives.ObjectivesResult:
    """A table of the paper's pair (CIFAR-10, ResNet-34) from synthetic logits, honest and oracle."""
    rows = []
    for name, seed in (("cross-entropy", 3), ("mixup", 4)):
        run = _logits_run(seed)
        options = {"seeds": 2, "n_resamples": 100}
        honest = protocol.evaluate_with_selection(run.logits, run.labels, objectives.TABLE_KEYS, **options)
        oracle = protocol.evaluate_with_selection(
            run.logits, run.labels, objectives.TABLE_KEYS, selection="oracle", **options
        )
        rows.append(objectives.ObjectiveRow(name, run, honest, oracle))
    return _result(rows, dataset="cifar10", model="resnet34_cifar", recipe="paper")


def test_the_summary_puts_the_answer_in_narrow_columns(cifar_like) -> None:
    summary = cifar_like.summary_table()
    assert list(summary.columns) == [
        "objective",
        "accuracy",
        "Rel-U − Doctor FPR95 [95 % CI]",
        "verdict (FPR95)",
        "Rel-U − Doctor FPR95, errors positive [95 % CI]",
        "verdict (errors positive)",
        "oracle: Rel-U − Doctor FPR95",
    ]
    row = cifar_like.rows[0]
    diff = row.result.paired["fpr95"]
    expected = row.result.mean("relu", "fpr95") - row.result.mean("doctor", "fpr95")
    assert summary.iloc[0, 2] == f"{expected:+.4f} [{diff.low:+.3f}, {diff.high:+.3f}]"
    assert summary.iloc[0, 3] == diff.outcome()
    assert max(len(str(v)) for v in summary.to_numpy().ravel()) <= 40  # narrow enough for 1280 pixels
    assert list(cifar_like.fpr_table().columns) == [
        "objective",
        "MSP FPR95",
        "ODIN FPR95",
        "Doctor FPR95",
        "Rel-U FPR95",
    ]


def test_the_paper_rows_of_the_data_set_show_under_ours_every_network_labelled(cifar_like) -> None:
    """Every network's Table 1 row of the data set and objective, each number the CSV's, labelled with its table;
    ours − the paper's row of our network in brackets; the other network's row says it differs from ours."""
    table = cifar_like.reference_table()
    label = paper_table.LABEL
    assert list(table["row"]) == ["ours", "ours, oracle", label, label] * 2
    assert list(table["objective"]) == ["cross-entropy"] * 4 + ["mixup"] * 4
    assert list(table["network"]) == ["resnet34_cifar", "resnet34_cifar", "ResNet-34", "DenseNet-121"] * 2
    csv_rows = {(r.network, r.objective): r for r in paper_table.rows("table1") if r.dataset == "CIFAR-10"}
    for line in table[table["row"] == label].to_dict(orient="records"):
        paper = csv_rows[(line["network"], {"cross-entropy": "CrossEntropy", "mixup": "Mixup"}[line["objective"]])]
        assert line["accuracy %"] == f"{paper.accuracy:.1f}"
        for key, name in zip(objectives.TABLE_KEYS, paper_table.DETECTOR_NAMES, strict=True):
            value = paper.values[f"{key}_fpr95"]
            assert line[f"{name} FPR95 %"] == f"{value.mean:.1f} ({value.std:.1f})"
        same = line["network"] == "ResNet-34"
        assert line["note"].endswith("the same network as ours") == same
        assert ("a different network from ours (resnet34_cifar)" in line["note"]) == (not same)
    ours = cifar_like.rows[1]  # mixup: the paper's ResNet-34 row has Rel-U 19.0
    relu = 100 * ours.result.mean("relu", "fpr95")
    assert table.iloc[4]["Rel-U FPR95 %"] == f"{relu:.1f} ({relu - 19.0:+.1f})"
    assert table.iloc[5]["Rel-U FPR95 %"].startswith(f"{100 * ours.oracle.mean('relu', 'fpr95'):.1f} (")
    printed = studies_cli.format_objectives(cifar_like)
    assert paper_table.objectives_heading() in printed and "five-best" in printed
    assert paper_table.not_recorded("cifar10", "resnet34_cifar", ["cross-entropy", "mixup"]) is None
    record = cifar_like.to_dict()["paper_reference"]
    assert [(r["network"], r["objective"]) for r in record] == [
        ("ResNet-34", "CrossEntropy"),
        ("DenseNet-121", "CrossEntropy"),
        ("ResNet-34", "Mixup"),
        ("DenseNet-121", "Mixup"),
    ]
    assert record[2]["label"] == label and record[2]["values"]["relu_fpr95"]["mean"] == 19.0
    assert record[2]["accuracy_percent"] == 96.1 and "different network" in record[3]["network_note"]


def test_out_writes_the_paper_s_rows_as_csv(cifar_like, tmp_path) -> None:
    import csv

    studies_cli.write_objectives(cifar_like, tmp_path)
    with open(tmp_path / "paper_reference.csv", newline="", encoding="utf-8") as handle:
        written = [row for row in csv.DictReader(handle) if row["row"] == paper_table.LABEL]
    with open(paper_table.PACKAGED_FOLDER / "table1_fpr95.csv", newline="", encoding="utf-8") as handle:
        table1 = {(r["network"], r["objective"]): r for r in csv.DictReader(handle) if r["dataset"] == "CIFAR-10"}
    assert len(written) == 4
    for row in written:
        cells = table1[(row["network"], {"cross-entropy": "CrossEntropy", "mixup": "Mixup"}[row["objective"]])]
        assert row["Doctor FPR95 %"] == f"{float(cells['doctor_fpr95']):.1f} ({float(cells['doctor_std']):.1f})"
    record = json.loads((tmp_path / "result.json").read_text())
    assert {r["label"] for r in record["paper_reference"]} == {paper_table.LABEL}


def test_another_network_still_sees_the_paper_s_rows_and_a_data_set_without_says_so(cifar_like) -> None:
    other = _result(cifar_like.rows, dataset="cifar10", model="resnet9")
    table = other.reference_table()
    assert set(table.loc[table["row"] == paper_table.LABEL, "network"]) == {"ResNet-34", "DenseNet-121"}
    notes = table.loc[table["row"] == paper_table.LABEL, "note"]
    assert len(notes) == 4 and all("different network from ours (resnet9)" in n for n in notes)
    assert "(+" not in table.iloc[0]["Rel-U FPR95 %"] and "(-" not in table.iloc[0]["Rel-U FPR95 %"]
    elsewhere = _result(cifar_like.rows, dataset="fashion-mnist", model="cnn28")
    assert elsewhere.reference_rows() == [] and elsewhere.reference_table().empty
    printed = studies_cli.format_objectives(elsewhere)
    assert paper_table.no_table("table1", "fashion-mnist") in printed
    assert elsewhere.to_dict()["paper_reference"] == []


@pytest.mark.slow
def test_the_page_offers_cifar10_with_its_network_recipe_and_epoch_cap(shared_data, monkeypatch) -> None:
    """Choosing CIFAR-10 on the page gives its network (resnet9_small on a CPU), the fast recipe and that pair's
    epoch cap, and every one of the paper's objectives (dead-leaves outliers for OpenMix); back on digits, its
    own network, recipe and cap, OpenMix left out in one line. Nothing is trained: the study is not run. The
    estimate reads the machine's load, so the page is shown a quiet machine (the reference the throughputs were
    measured on): a busy one rightly warns even for the CPU network (tests/test_training_estimate.py)."""
    from apptest_pages import OBJECTIVES_PAGE, app

    quiet = estimate.Machine(threads=estimate.REFERENCE_THREADS, load=0.0, cores=2)
    monkeypatch.setattr(estimate, "current_machine", lambda threads=None, load=None: quiet)

    at = app(OBJECTIVES_PAGE, 120)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert "cifar10" in at.selectbox(key="obj_dataset").options
    at.selectbox(key="obj_dataset").set_value("cifar10").run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.selectbox(key="obj_model").value == "resnet9_small"
    assert at.selectbox(key="obj_recipe").value == "fast"
    assert at.number_input(key="obj_epochs").value == recipes.EPOCHS_BY_MODEL[("fast", "resnet9_small")]
    assert at.multiselect(key="obj_objectives").value == list(objectives.OBJECTIVES)
    assert any("dead-leaves" in c.value for c in at.caption)
    assert not at.warning  # the CPU's own network: an estimate, no warning
    assert any("Training 5 models of resnet9_small on the CPU: about" in i.value for i in at.info)
    at.selectbox(key="obj_model").set_value("resnet34_cifar").run()
    (warning,) = at.warning
    assert (
        warning.value.startswith("No GPU here: resnet34_cifar takes up to about")
        and "resnet9_small is" in warning.value
    )
    at.selectbox(key="obj_model").set_value("resnet9_small").run()
    assert not at.warning
    at.selectbox(key="obj_recipe").set_value("paper").run()
    assert at.number_input(key="obj_epochs").value == 200
    at.selectbox(key="obj_dataset").set_value("digits").run()
    assert at.selectbox(key="obj_model").value == "cnn8" and at.selectbox(key="obj_recipe").value == "plain"
    assert at.number_input(key="obj_epochs").value == objectives.TABLE_EPOCHS
    assert "openmix" not in at.multiselect(key="obj_objectives").value
    assert any(c.value.startswith("OpenMix is left out") for c in at.caption)
