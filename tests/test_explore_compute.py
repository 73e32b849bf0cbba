"""The Explore compute path of ``relu_core.explore`` without Streamlit: no Streamlit import, bounded LRU caches
keyed on run ids and plain hyperparameters, and the cached values equal an independent computation."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from relu_core import explore
from relu_core.runs import Run


def _run(seed: int, n: int = 300, n_classes: int = 5) -> Run:
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, n_classes, n)
    logits = (rng.normal(size=(n, n_classes)) + 2.0 * np.eye(n_classes)[labels]).astype(np.float32)
    names = tuple(f"c{k}" for k in range(n_classes))
    return Run.from_logits(
        logits,
        labels,
        names,
        source=f"synthetic {seed}",
    )


def test_the_library_side_imports_no_streamlit():
    code = "import sys, relu_core.explore; assert 'streamlit' not in sys.modules, 'streamlit imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_softmax_cache_is_keyed_on_run_and_temperature_and_bounded():
    run = _run(0)
    run_id = explore.register_run(run)
    first = explore.probs_at(run_id, 2.0)
    shifted = np.exp((run.logits - run.logits.max(axis=1, keepdims=True)) / 2.0)
    np.testing.assert_allclose(first, shifted / shifted.sum(axis=1, keepdims=True), rtol=1e-5)
    assert explore.probs_at(run_id, 2.0) is first  # computed once per (run, T)
    bound = explore.probs_at.cache.bound
    for k in range(bound + 5):
        explore.probs_at(run_id, 0.1 + k)
    assert len(explore.probs_at.cache) == bound  # least recently used dropped
    assert (run_id, 2.0) not in explore.probs_at.cache
    assert explore.probs_at(run_id, 2.0) is not first and np.allclose(explore.probs_at(run_id, 2.0), first)


def test_split_is_stratified_by_correctness_and_the_view_scores_every_detector():
    run_id = explore.register_run(_run(1))
    predictions, correct = explore.correctness(run_id)
    np.testing.assert_array_equal(correct, predictions == explore.get_run(run_id).labels)
    tune, evaluation = explore.split_for(run_id, 0.5, 3)
    assert np.intersect1d(tune, evaluation).size == 0 and tune.size + evaluation.size == correct.size
    assert correct[tune].mean() == pytest.approx(correct[evaluation].mean(), abs=0.02)
    view = explore.explore(run_id, 1.0, 0.5, 0.5, 3, ["relu", "doctor", "msp"])
    assert set(view.detectors) == {"relu", "doctor", "msp"} and not view.paired
    msp = -explore.probs_at(run_id, 1.0).max(axis=1)  # MSP: -max p at T = 1, computed here
    np.testing.assert_allclose(view.detectors["msp"].uncertainty, msp, rtol=1e-5, atol=1e-7)
    np.testing.assert_array_equal(view.eval_idx, evaluation)


def test_view_files_zip_holds_the_exact_dstar_every_chart_the_metrics_and_the_settings():
    import io
    import json
    import zipfile

    import pandas as pd

    from relu_core import comparison, figures, metrics, report

    run = _run(5)
    run_id = explore.register_run(run)
    view = explore.explore(run_id, 1.0, 0.5, 0.5, 0, ["relu", "doctor"])
    correct = view.correct[view.eval_idx]
    points = {k: metrics.operating_point(d.eval_uncertainty, correct, "tpr", 0.95) for k, d in view.detectors.items()}
    heat, roc, rc = explore.view_figures(view, list(run.class_names), points, ["relu", "doctor"])
    _, cm_fig = explore.confusion_figure(run_id, 0.5, 0)
    figs = {"dstar": heat, "confusion": cm_fig, "roc": roc, "risk_coverage": rc}
    table = pd.DataFrame({"AUROC": [0.8, 0.7]}, index=["Rel-U", "Doctor"])
    settings = {"λ": "0.5", "split seed": 0}
    paired = explore.paired_for(view, 0)
    operating = comparison.operating_table({view.detectors[k].name: points[k] for k in points}, correct)
    provenance = report.provenance(run)
    files = explore.view_files(
        view, figs, table, settings, run.class_names, paired=paired, operating=operating, provenance=provenance
    )
    data = report.data_zip(files)
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        assert sorted(archive.namelist()) == sorted(
            [
                "dstar_matrix.csv",
                "dstar.npy",
                "confusion.csv",
                "roc.csv",
                "risk_coverage.csv",
                "metrics.csv",
                "paired.csv",
                "operating_point.csv",
                "settings.json",
            ]
        )
        differences = pd.read_csv(io.BytesIO(archive.read("paired.csv"))).set_index("metric")
        for metric, diff in paired.items():  # the intervals travel with the numbers
            assert differences.loc[metric, ["relu_minus_doctor", "ci_low", "ci_high"]].tolist() == pytest.approx(
                [diff.estimate, diff.low, diff.high], abs=1e-12
            )
        table_back = pd.read_csv(io.BytesIO(archive.read("operating_point.csv")), index_col=0)
        assert table_back["threshold"].tolist() == pytest.approx(operating["threshold"].tolist(), rel=1e-12)
        np.testing.assert_array_equal(np.load(io.BytesIO(archive.read("dstar.npy"))), view.dstar)
        matrix = pd.read_csv(io.BytesIO(archive.read("dstar_matrix.csv")), index_col=0)
        assert list(matrix.columns) == list(run.class_names)
        np.testing.assert_allclose(matrix.to_numpy(), view.dstar, rtol=1e-12)
        assert archive.read("roc.csv").decode() == figures.figure_csv(roc)
        described = json.loads(archive.read("settings.json"))
        assert described["settings"] == {"λ": "0.5", "split seed": "0"}
        assert described["provenance"]["run id"] == run.run_id and "version: numpy" in described["provenance"]
        assert pd.read_csv(io.BytesIO(archive.read("metrics.csv")), index_col=0)["AUROC"].tolist() == [0.8, 0.7]
