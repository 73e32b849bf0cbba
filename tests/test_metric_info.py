"""One way to state a result: the metrics are declared once (``relu_core.metric_info``) and every Rel-U − Doctor row
comes from one builder (``stats.paired_rows``). Every table reads its columns from the declaration, no other module
spells a metric's label, and the builder gives the rows each consumer used to build on its own (the references
below are those former builders, written out)."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from relu_core import (
    baselines,
    cli,
    detector_comparison,
    metric_info,
    metrics,
    protocol,
    robustness,
    stats,
)
from relu_core.cli import evaluate as evaluate_cli
from relu_core.errors import InputError
from relu_core.studies import base
from relu_core.studies import figures as study_figures

ROOT = Path(__file__).resolve().parents[1]
PAIRED_KEYS = ("fpr95", "auroc", "aurc", "augrc")


@pytest.fixture(scope="module")
def scored():
    rng = np.random.default_rng(5)
    correct = rng.random(300) < 0.75
    relu = rng.normal(size=300) + 1.4 * ~correct
    doctor = rng.normal(size=300) + 1.0 * ~correct
    return correct, relu, doctor


@pytest.fixture(scope="module")
def logits_labels():
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 4, 240)
    logits = rng.normal(size=(240, 4)) + 2.0 * np.eye(4)[labels] * (rng.random(240) < 0.7)[:, None]
    return logits, labels


# ------------------------------------------------------------------------------------------ the declaration
def test_the_declaration_is_what_the_formulas_compute(scored):
    correct, relu, doctor = scored
    assert tuple(metrics.summary(relu, correct)) == metric_info.KEYS == ("fpr95", "auroc", "aurc", "eaurc", "augrc")
    assert (
        tuple(stats.paired_bootstrap(relu, doctor, correct, n_resamples=20)) == metric_info.PAIRED_KEYS == PAIRED_KEYS
    )
    assert [m.header for m in metric_info.METRICS] == ["FPR95 ↓", "AUROC ↑", "AURC ↓", "E-AURC ↓", "AUGRC ↓"]
    assert metric_info.FPR95.title == "FPR at 95 % TPR (lower is better)"
    assert metric_info.AUROC.mean_std(0.91234, 0.0123) == "0.9123 ± 0.0123"
    with pytest.raises(InputError, match="unknown criterion 'nope'; choose from fpr95, auroc, aurc, eaurc, augrc"):
        metric_info.get("nope", "criterion")


def test_every_table_takes_its_columns_from_the_declaration(scored, logits_labels, tmp_path, capsys):
    correct, relu, _ = scored
    table = detector_comparison.metrics_table({"Rel-U": metrics.summary(relu, correct)}, 0.75)
    assert list(table.columns) == [*(m.header for m in metric_info.METRICS), "accuracy"]
    assert baselines.TABLE_COLUMNS[4:-1] == tuple(f"{k}_{s}" for k in PAIRED_KEYS for s in ("mean", "std"))
    assert robustness.METRIC_NAMES == (*PAIRED_KEYS, "accuracy")
    assert base.PAIRED_COLUMNS == ("series", "x", *stats.PAIRED_ROW_COLUMNS)
    assert robustness.PAIRED_COLUMNS == ("corruption", *stats.PAIRED_ROW_COLUMNS)
    logits, labels = logits_labels
    np.savez(tmp_path / "run.npz", logits=logits, labels=labels)
    assert cli.main(["evaluate", "--logits", str(tmp_path / "run.npz"), "--select", "--criterion", "nope"]) == 2
    choices = capsys.readouterr().err.split("choose from", 1)[1]
    assert [k for k in metric_info.KEYS if k in choices] == list(metric_info.KEYS)  # the selection criteria
    text = evaluate_cli.format_table(protocol.evaluate(logits, labels, ["relu", "doctor"], seeds=2, n_resamples=0))
    header = next(line for line in text.splitlines() if line.startswith("method"))
    assert header.split()[-10:] == [w for m in metric_info.METRICS for w in (m.label, f"({m.better})")]


def test_no_other_module_spells_a_metric_label():
    """Labels, names, headers and "(... is better)" are spelled in ``metric_info`` only: elsewhere they are read."""
    spelled = {text for m in metric_info.METRICS for text in (m.label, m.name, m.header, m.title)}
    files = [
        *(ROOT / "relu_core").rglob("*.py"),
        *(ROOT / "app_pages").glob("*.py"),
        *(ROOT / "studio").glob("*.py"),
        ROOT / "app.py",
    ]
    found = []
    for path in files:
        if path.name == "metric_info.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                text = node.value.strip()
                if text in spelled or "is better)" in text or "↑" in text or "↓" in text:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {text!r}")
    assert not found, found


# ------------------------------------------------------------------------------------------ the one row builder
def _old_row(metric: str, per_seed, diff: stats.PairedDifference | None) -> dict:
    """The rows of ``studies.base``, ``baselines`` and ``robustness`` before they shared the builder."""
    per_seed = np.asarray(per_seed, dtype=float)
    mean, std = float(per_seed.mean()), float(per_seed.std())
    if diff is None:
        label = {"fpr95": "FPR95", "auroc": "AUROC", "aurc": "AURC", "augrc": "AUGRC"}[metric]
        return dict(
            zip(
                stats.PAIRED_ROW_COLUMNS,
                (metric, mean, std, mean, np.nan, np.nan, False, f"{label}: no bootstrap interval (0 resamples)"),
            )
        )
    return {
        "metric": metric,
        "mean": mean,
        "std": std,
        "estimate": diff.estimate,
        "ci_low": diff.low,
        "ci_high": diff.high,
        "significant": diff.significant,
        "verdict": diff.verdict(),
    }


@pytest.mark.parametrize("n_resamples", [0, 60])
def test_the_cli_minus_doctor_object_is_unchanged(logits_labels, n_resamples):
    logits, labels = logits_labels
    result = protocol.evaluate(logits, labels, ["relu", "doctor"], seeds=3, n_resamples=n_resamples)
    expected = {}
    for metric in PAIRED_KEYS:  # protocol.EvaluationResult.paired_summary before the builder
        per_seed = result.difference_per_seed(metric)
        diff = None if result.paired is None else result.paired[metric]
        expected[metric] = {
            "mean": float(np.mean(per_seed)),
            "std": float(np.std(per_seed)),
            "per_seed": [float(v) for v in per_seed],
            "ci_low": None if diff is None else diff.low,
            "ci_high": None if diff is None else diff.high,
            "confidence": None if diff is None else diff.confidence,
            "n_resamples": 0 if diff is None else diff.n_resamples,
            "significant": None if diff is None else diff.significant,
            "conditional_on_selection": False,  # added since: fixed settings, so never conditional
            "verdict": (
                f"{ {'fpr95': 'FPR95', 'auroc': 'AUROC', 'aurc': 'AURC', 'augrc': 'AUGRC'}[metric] }: no bootstrap interval (0 resamples)"
                if diff is None
                else diff.verdict()
            ),
        }
    got = result.paired_summary()
    assert got == expected and list(got) == list(expected)
    assert all(list(row) == list(expected[m]) for m, row in got.items())  # the keys, in their order


@pytest.mark.parametrize("n_resamples", [0, 60])
def test_a_studys_rows_are_the_builders(scored, n_resamples):
    correct, relu, doctor = scored
    rng = np.random.default_rng(1)
    collector, triples, samples = base.Collector(), [], []
    for seed in range(3):
        ev = np.sort(rng.choice(len(correct), 200, replace=False))
        collector.add("s", 0.5, base.RELU, seed, relu[ev], correct[ev], samples=ev)
        collector.add("s", 0.5, base.DOCTOR, seed, doctor[ev], correct[ev], samples=ev)
        triples.append((relu[ev], doctor[ev], correct[ev]))
        samples.append(ev)
    _, paired, _ = collector.finish(n_resamples)
    pooled = stats.pooled_bootstrap(triples, sample_ids=samples, n_resamples=n_resamples) if n_resamples else {}
    expected = []
    for metric in PAIRED_KEYS:
        diffs = [metrics.summary(a, c)[metric] - metrics.summary(b, c)[metric] for a, b, c in triples]
        expected.append({"series": "s", "x": 0.5, **_old_row(metric, diffs, pooled.get(metric))})
    pd.testing.assert_frame_equal(paired, pd.DataFrame(expected, columns=list(base.PAIRED_COLUMNS)))


def test_the_baselines_and_corruption_rows_are_the_builders(scored):
    correct, relu, doctor = scored
    seeds, pairs, records = (0, 1, 2), [], []
    for seed in seeds:
        ev = np.arange(seed * 30, seed * 30 + 200)
        pairs.append((relu[ev], doctor[ev], correct[ev], ev))
        for key, name, u in (("relu", "Rel-U", relu[ev]), ("doctor", "Doctor", doctor[ev])):
            summary = metrics.summary(u, correct[ev])
            records += [(seed, key, name, m, summary[m]) for m in PAIRED_KEYS]
    per_seed = pd.DataFrame(records, columns=["seed", "key", "detector", "metric", "value"])
    pooled = stats.pooled_bootstrap([p[:3] for p in pairs], sample_ids=[p[3] for p in pairs], n_resamples=80)

    def differences(metric):
        pivot = per_seed[per_seed["metric"] == metric].pivot(index="seed", columns="key", values="value")
        return (pivot["relu"] - pivot["doctor"]).to_numpy()

    result = baselines.BaselinesResult(
        table=pd.DataFrame(), per_seed=per_seed, paired=pooled, skipped={}, curves={}, seeds=seeds,
        tune_fraction=0.2, coverage=0.9, n_tune=100, n_eval=200,
    )  # fmt: skip
    expected = pd.DataFrame([_old_row(m, differences(m), pooled[m]) for m in PAIRED_KEYS])
    pd.testing.assert_frame_equal(result.paired_frame(), expected)

    # the corruption study: a seed whose images hold one class only has NaN metrics and is left out of mean ± std
    corrupted = per_seed.assign(corruption="fog")
    corrupted.loc[corrupted["seed"] == 2, "value"] = np.nan
    frame = robustness._paired_frame(corrupted, {"fog": pairs[:2]})
    pooled_two = stats.conditional_on_selection(  # the study selects T and λ: its intervals say so (since)
        stats.pooled_bootstrap([p[:3] for p in pairs[:2]], sample_ids=[p[3] for p in pairs[:2]])
    )
    expected = pd.DataFrame(
        [{"corruption": "fog", **_old_row(m, differences(m)[:2], pooled_two[m])} for m in PAIRED_KEYS]
    )
    pd.testing.assert_frame_equal(frame, expected)

    # the Corruptions page's count of significant wins and losses reads the verdicts' one rule
    for metric in PAIRED_KEYS:
        rows = frame[frame["metric"] == metric]
        higher = metric == "auroc"  # the page's own rule before
        wins = int((rows["significant"] & ((rows["estimate"] > 0) == higher)).sum())
        losses = int((rows["significant"] & ((rows["estimate"] > 0) != higher)).sum())
        outcomes = detector_comparison.outcome_column(rows)
        assert (outcomes.count("Rel-U better"), outcomes.count("Doctor better")) == (wins, losses)


def test_the_rows_in_words_are_the_former_tables():
    frame = pd.DataFrame(
        {
            "series": ["lambda", "lambda"],
            "x": [0.5, 1.0],
            "metric": ["fpr95", "auroc"],
            "mean": [-0.05, 0.01],
            "std": [0.02, 0.005],
            "estimate": [-0.05, 0.01],
            "ci_low": [-0.08, np.nan],
            "ci_high": [-0.01, np.nan],
            "significant": [True, False],
            "verdict": ["", "AUROC: no bootstrap interval (0 resamples)"],
        }
    )
    old = pd.DataFrame(  # explore.paired_table (corruptions) and studies.figures.paired_table, one sign convention
        {
            "series": ["lambda", "lambda"],
            "point": ["0.5", "1"],
            "metric": ["FPR95", "AUROC"],
            "Rel-U − Doctor (mean ± std over seeds)": ["-0.0500 ± 0.0200", "+0.0100 ± 0.0050"],
            "95 % CI of the mean": ["-0.0800 to -0.0100", "–"],
            "verdict": ["Rel-U better", "no bootstrap interval (0 resamples)"],
        }
    )
    result = base.StudyResult("s", "t", pd.DataFrame(), frame, pd.DataFrame(), {})
    pd.testing.assert_frame_equal(study_figures.paired_table(result), old)
    by_corruption = detector_comparison.paired_table(frame.iloc[:1], corruption=["fog"])
    pd.testing.assert_frame_equal(by_corruption, old.iloc[:1].drop(columns=["series", "point"]).assign(
        corruption=["fog"])[["corruption", *old.columns[2:]]])  # fmt: skip


def test_a_difference_that_rounds_to_zero_has_no_sign() -> None:
    signed = metric_info.signed
    assert [signed(v) for v in (-1e-6, -0.0, 0.0, 4e-5)] == ["+0.0000"] * 4
    assert (signed(0.01234), signed(-0.5), signed(-0.00051, 3), signed(2.5e-4, 3)) == (
        "+0.0123",
        "-0.5000",
        "-0.001",
        "+0.000",
    )
    from relu_core import detector_comparison, stats

    tiny = stats.PairedDifference("augrc", -2e-6, -3e-5, 1e-5, False, 1000)
    row = detector_comparison.paired_rows({"augrc": tiny}).iloc[0]
    assert row["Rel-U − Doctor"] == "+0.0000" and "-0.0000" not in " ".join(map(str, row))
