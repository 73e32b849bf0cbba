"""The training-objectives table without training (synthetic runs): the answer in one sentence from the paired
verdicts, the narrow summary table, the paper's reference rows where data set and network match (injected here:
the project records none), and what the command prints where it has none."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from relu_core import protocol, runs, stats
from relu_core.cli import study as studies_cli
from relu_core.studies import objectives, paper_table
from relu_core.training import recipes


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


def test_the_recorded_paper_row_is_the_issue_s_quotation_and_says_so(cifar_like) -> None:
    (quoted,) = paper_table.TABLE1
    assert (quoted.dataset, quoted.model, quoted.objective) == ("cifar10", "resnet34_cifar", "mixup")
    assert quoted.accuracy is None and quoted.fpr95 == {"doctor": 26.8, "relu": 19.0}
    assert "issue 35" in quoted.source and "not read in the paper" in quoted.source
    table = cifar_like.reference_table()
    paper = table[table["row"] == paper_table.LABEL].iloc[0]
    assert (paper["accuracy"], paper["MSP FPR95 %"], paper["Rel-U FPR95 %"]) == ("not given", "not given", "19.0")
    printed = studies_cli.format_objectives(cifar_like)
    # the objective without a recorded row is named; the one with it is not
    note = paper_table.not_recorded("cifar10", "resnet34_cifar", ["cross-entropy", "mixup"])
    assert note in printed and "cross-entropy" in note and "mixup" not in note
    assert paper_table.not_recorded("cifar10", "resnet34_cifar", ["mixup"]) is None
    assert paper_table.not_recorded("cifar10", "resnet9", ["cross-entropy"]) is None  # not the paper's network


def test_the_paper_rows_show_under_ours_with_the_difference(cifar_like, monkeypatch) -> None:
    monkeypatch.setattr(paper_table, "TABLE1", ())
    assert cifar_like.reference_rows() == [] and cifar_like.reference_table().empty  # none recorded
    assert paper_table.NOT_RECORDED in studies_cli.format_objectives(cifar_like)
    injected = paper_table.PaperRow(
        "cifar10", "resnet34_cifar", "mixup", 95.0, {"msp": 30.0, "doctor": 26.0, "relu": 20.0}, "a test, not the paper"
    )
    monkeypatch.setattr(paper_table, "TABLE1", (injected,))
    table = cifar_like.reference_table()
    assert list(table["row"]) == ["ours", "ours, oracle", paper_table.LABEL]
    assert list(table["objective"]) == ["mixup"] * 3
    ours = cifar_like.rows[1]
    relu = 100 * ours.result.mean("relu", "fpr95")
    assert table.iloc[0]["Rel-U FPR95 %"] == f"{relu:.1f} ({relu - 20.0:+.1f})"
    assert table.iloc[1]["Rel-U FPR95 %"].startswith(f"{100 * ours.oracle.mean('relu', 'fpr95'):.1f} (")
    assert table.iloc[0]["ODIN FPR95 %"] == f"{100 * ours.result.mean('odin', 'fpr95'):.1f}"  # the paper gave none
    assert table.iloc[2]["ODIN FPR95 %"] == "not given" and table.iloc[2]["source"] == "a test, not the paper"
    printed = studies_cli.format_objectives(cifar_like)
    assert paper_table.LABEL in printed and paper_table.NOT_RECORDED not in printed
    assert "cross-entropy are not recorded" in printed  # the objective the injected table lacks
    assert cifar_like.to_dict()["paper_reference"][0]["label"] == paper_table.LABEL
    other = _result(cifar_like.rows, dataset="cifar10", model="resnet9")
    assert other.reference_rows() == []  # not one of the paper's networks
    assert paper_table.NOT_RECORDED not in studies_cli.format_objectives(other)


@pytest.mark.slow
def test_the_page_offers_cifar10_with_its_network_recipe_and_epoch_cap(shared_data) -> None:
    """Choosing CIFAR-10 on the page gives its network (resnet9_small on a CPU), the fast recipe and that pair's
    epoch cap, and every one of the paper's objectives (dead-leaves outliers for OpenMix); back on digits, its
    own network, recipe and cap, OpenMix left out in one line. Nothing is trained: the study is not run."""
    from apptest_pages import OBJECTIVES_PAGE, app

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
