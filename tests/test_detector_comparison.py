"""relu_core.detector_comparison against direct computations: the metrics table and its difference row, the colouring of
significant differences, the operating-point table, and the errors one detector catches and the other misses."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score

from relu_core import detector_comparison, metrics, stats


@pytest.fixture(scope="module")
def scored():
    rng = np.random.default_rng(3)
    correct = rng.random(400) < 0.8
    a = rng.normal(size=400) + 1.5 * ~correct  # two detectors that see the errors differently
    b = rng.normal(size=400) + 1.0 * ~correct
    return correct, a, b


def test_metrics_table_rows_columns_and_difference(scored):
    correct, a, b = scored
    summaries = {"Rel-U": metrics.summary(a, correct), "Doctor": metrics.summary(b, correct)}
    table = detector_comparison.metrics_table(summaries, 0.8, difference=("Rel-U", "Doctor"))
    assert list(table.columns) == ["FPR95 ↓", "AUROC ↑", "AURC ↓", "E-AURC ↓", "AUGRC ↓", "accuracy"]
    assert list(table.index) == ["Rel-U", "Doctor", "Rel-U − Doctor"]
    assert table.loc["Rel-U", "AUROC ↑"] == pytest.approx(roc_auc_score(correct, -a), rel=1e-9)
    assert table.loc["Doctor", "FPR95 ↓"] == pytest.approx(metrics.fpr_at_tpr(b, correct), rel=1e-9)
    columns = (
        ("FPR95 ↓", "fpr95"),
        ("AUROC ↑", "auroc"),
        ("AURC ↓", "aurc"),
        ("E-AURC ↓", "eaurc"),
        ("AUGRC ↓", "augrc"),
    )
    for column, key in columns:
        assert table.loc["Rel-U − Doctor", column] == pytest.approx(summaries["Rel-U"][key] - summaries["Doctor"][key])
    assert table.loc["Rel-U − Doctor", "accuracy"] == 0 and table.dtypes.eq(float).all()


def test_metrics_table_without_both_rows_has_no_difference(scored):
    correct, a, _ = scored
    table = detector_comparison.metrics_table(
        {"Rel-U": metrics.summary(a, correct)}, 0.8, difference=("Rel-U", "Doctor")
    )
    assert list(table.index) == ["Rel-U"]
    assert list(detector_comparison.metrics_table({"Rel-U": metrics.summary(a, correct)}, 0.8).index) == ["Rel-U"]


def _paired(metric: str, estimate: float, low: float, high: float, higher: bool) -> stats.PairedDifference:
    return stats.PairedDifference(metric, estimate, low, high, higher, 1000)


def test_difference_classes_colour_only_significant_cells_of_the_difference_row(scored):
    correct, a, b = scored
    table = detector_comparison.metrics_table(
        {"Rel-U": metrics.summary(a, correct), "Doctor": metrics.summary(b, correct)},
        0.8,
        difference=("Rel-U", "Doctor"),
    )
    paired = {
        "fpr95": _paired("fpr95", -0.1, -0.2, -0.05, False),  # significant, Rel-U better (lower)
        "auroc": _paired("auroc", -0.02, -0.03, -0.01, True),  # significant, Rel-U worse (lower)
        "aurc": _paired("aurc", 0.001, -0.001, 0.003, False),
    }  # covers 0: plain
    classes = detector_comparison.difference_classes(table, paired, "Rel-U − Doctor")
    row, columns = list(table.index).index("Rel-U − Doctor"), list(table.columns)
    assert classes == {
        (row, columns.index("FPR95 ↓")): detector_comparison.BETTER_CLASS,
        (row, columns.index("AUROC ↑")): detector_comparison.WORSE_CLASS,
    }
    real = stats.paired_bootstrap(a, b, correct, n_resamples=200, seed=0)  # the real thing: keys match headers
    assert set(detector_comparison.significant_columns(real)) <= set(table.columns)
    assert detector_comparison.difference_classes(table.drop("Rel-U − Doctor"), paired, "Rel-U − Doctor") == {}


def test_paired_rows_one_per_metric_with_interval_and_verdict():
    paired = {
        "fpr95": _paired("fpr95", -0.1, -0.2, -0.05, False),
        "auroc": _paired("auroc", -0.02, -0.03, -0.01, True),
        "aurc": _paired("aurc", 0.001, -0.001, 0.003, False),
    }
    rows = detector_comparison.paired_rows(paired).set_index("metric")
    assert list(rows.index) == ["FPR95", "AUROC", "AURC"]
    assert rows.loc["FPR95", "Rel-U − Doctor"] == "-0.1000"
    assert rows.loc["AUROC", "95 % CI (paired bootstrap)"] == "-0.0300 to -0.0100"
    assert rows["verdict"].tolist() == ["Rel-U better", "Doctor better", "no significant difference"]
    ninety = stats.PairedDifference("aurc", 0.001, -0.001, 0.003, False, 1000, confidence=0.9)
    assert "90 % CI (paired bootstrap)" in detector_comparison.paired_rows({"aurc": ninety}).columns


def test_threshold_format_one_per_column():
    assert detector_comparison.threshold_format([0.135, 0.5061, -8.512, 0.0]) == "%.4f"
    assert detector_comparison.threshold_format([0.135, 3.2e-5]) == "%.3e"  # four decimals would show 0.0000
    assert detector_comparison.threshold_format([0.5, 2.5e5]) == "%.3e"
    assert detector_comparison.threshold_format([np.inf, 0.25]) == "%.4f"  # a point accepting everything


def test_operating_table_counts_match_direct_computation(scored):
    correct, a, b = scored
    points = {
        "Rel-U": metrics.operating_point(a, correct, "tpr", 0.9),
        "Doctor": metrics.operating_point(b, correct, "coverage", 0.7),
    }
    table = detector_comparison.operating_table(points, correct)
    assert list(table.index) == ["Rel-U", "Doctor"]
    for name, scores in (("Rel-U", a), ("Doctor", b)):
        accepted = scores <= table.loc[name, "threshold"]
        assert table.loc[name, "accepted"] == accepted.sum()
        assert table.loc[name, "errors caught"] == (~correct & ~accepted).sum()
        assert table.loc[name, "errors missed"] == (~correct & accepted).sum()
        assert table.loc[name, "coverage"] == pytest.approx(accepted.mean())
    assert table.loc["Rel-U", "TPR"] >= 0.9 and table.loc["Doctor", "coverage"] >= 0.7


def test_caught_by_one_against_a_loop(scored):
    correct, a, b = scored
    indices = np.arange(1000, 1000 + correct.size) * 3  # the split's sample ids, not positions
    accepted_a, accepted_b = a <= np.quantile(a, 0.8), b <= np.quantile(b, 0.8)
    only_a, only_b = detector_comparison.caught_by_one(indices, correct, accepted_a, accepted_b)
    expected_a = [i for i, c, x, y in zip(indices, correct, accepted_a, accepted_b) if not c and not x and y]
    expected_b = [i for i, c, x, y in zip(indices, correct, accepted_a, accepted_b) if not c and x and not y]
    assert only_a.tolist() == expected_a and only_b.tolist() == expected_b
    assert expected_a and expected_b  # the fixture has errors of both kinds
    none_a, none_b = detector_comparison.caught_by_one(indices, correct, accepted_a, accepted_a)
    assert none_a.size == none_b.size == 0
    assert isinstance(detector_comparison.metrics_table({}, 0.5), pd.DataFrame)


def test_outcome_column_gives_one_sign_convention_per_table():
    frame = pd.DataFrame(
        {
            "metric": ["fpr95", "auroc", "aurc", "auroc"],
            "estimate": [-0.05, -0.02, 0.001, 0.01],
            "ci_low": [-0.08, -0.03, -0.002, np.nan],
            "ci_high": [-0.01, -0.01, 0.004, np.nan],
            "verdict": ["", "", "", "AUROC: no interval (no bootstrap)"],
        }
    )
    assert detector_comparison.outcome_column(frame) == [
        "Rel-U better",  # a lower FPR95
        "Doctor better",  # a lower AUROC
        "no significant difference",
        "no interval (no bootstrap)",
    ]
