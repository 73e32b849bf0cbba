"""Runs compared side by side (relu_core.compare, app_pages/Compare.py): the table against a direct computation
(scikit-learn for AUROC), the differences between runs and Rel-U − Doctor against the paired bootstrap called
directly, the refusals, the overlay figure and the page under AppTest."""

from __future__ import annotations

import numpy as np
import pytest
from apptest_charts import charts
from apptest_pages import COMPARE, app
from sklearn.metrics import roc_auc_score

from relu_core import compare, detectors, figures, metrics, protocol, stats
from relu_core.errors import Cancelled, InputError
from relu_core.runs import Run

N, C = 600, 5


def _run(scale: float, seed: int, labels: np.ndarray, name: str) -> Run:
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(labels.size, C)).astype(np.float32) + scale * np.eye(C, dtype=np.float32)[labels]
    return Run.from_logits(logits, labels, tuple("abcde"), source=name)


@pytest.fixture(scope="module")
def two_runs() -> list[Run]:
    labels = np.random.default_rng(0).integers(0, C, N)
    return [_run(1.5, 1, labels, "weaker model"), _run(2.5, 2, labels, "stronger model")]


def test_table_is_each_runs_detectors_on_the_shared_split(two_runs):
    result = compare.compare_runs(two_runs, keys=("doctor", "relu"), seeds=2, n_resamples=0)
    labels = two_runs[0].labels
    correct = [r.logits.argmax(1) == labels for r in two_runs]
    strata = correct[0].astype(int) + 2 * correct[1].astype(int)  # every pattern of right and wrong
    for r, run in enumerate(two_runs):
        for key in ("doctor", "relu"):
            aurocs, accuracies = [], []
            for seed in (0, 1):
                tune, evaluation = protocol.split_indices(N, 0.5, seed, stratify=strata)
                detector = detectors.make_detector(key, 1.0, 0.5).fit(run.logits[tune], labels[tune])
                uncertainty = detector.score(run.logits[evaluation])
                aurocs.append(roc_auc_score(correct[r][evaluation], -uncertainty))
                accuracies.append(correct[r][evaluation].mean())
            row = result.table[(result.table["run"] == result.run_labels[r])]
            row = row[row["detector"] == detectors.label(key)].iloc[0]
            assert row["auroc"] == pytest.approx(np.mean(aurocs), abs=1e-12)
            assert row["auroc_std"] == pytest.approx(np.std(aurocs), abs=1e-12)
            assert row["accuracy"] == pytest.approx(np.mean(accuracies), abs=1e-12)
    # each run keeps its share of errors in both parts (stratified on the joint correctness)
    tune, evaluation = protocol.split_indices(N, 0.5, 0, stratify=strata)
    for flags in correct:
        assert abs(flags[tune].mean() - flags[evaluation].mean()) < 0.01
    assert result.n_tune + result.n_eval == N


def test_differences_and_relu_minus_doctor_are_the_paired_bootstrap(two_runs):
    result = compare.compare_runs(two_runs, keys=("doctor", "relu"), seeds=1, n_resamples=300)
    labels = two_runs[0].labels
    correct = [r.logits.argmax(1) == labels for r in two_runs]
    tune, evaluation = protocol.split_indices(N, 0.5, 0, stratify=correct[0] + 2 * correct[1])
    scores = [
        {
            key: detectors.make_detector(key, 1.0, 0.5)
            .fit(run.logits[tune], labels[tune])
            .score(run.logits[evaluation])
            for key in ("doctor", "relu")
        }
        for run in two_runs
    ]
    flags = [c[evaluation] for c in correct]
    expected = stats.paired_bootstrap(scores[1]["relu"], scores[0]["relu"], (flags[1], flags[0]), n_resamples=300)
    rows = result.differences[result.differences["detector"] == "Rel-U"].set_index("metric")
    for metric, diff in expected.items():
        assert rows.loc[metric, "estimate"] == pytest.approx(diff.estimate, abs=1e-12)
        assert (rows.loc[metric, "ci_low"], rows.loc[metric, "ci_high"]) == pytest.approx((diff.low, diff.high))
        assert rows.loc[metric, "verdict"] == diff.verdict("Rel-U on run 2", "Rel-U on run 1")
    direct = metrics.auroc(scores[1]["relu"], flags[1]) - metrics.auroc(scores[0]["relu"], flags[0])
    assert rows.loc["auroc", "mean"] == pytest.approx(direct, abs=1e-12)
    within = result.relu_minus_doctor[result.relu_minus_doctor["run"] == result.run_labels[0]].set_index("metric")
    ours = stats.paired_bootstrap(scores[0]["relu"], scores[0]["doctor"], flags[0], n_resamples=300)
    for metric, diff in ours.items():
        assert (within.loc[metric, "ci_low"], within.loc[metric, "ci_high"]) == pytest.approx((diff.low, diff.high))
        assert within.loc[metric, "verdict"] == diff.verdict()
    # the curves are the first seed's, on each run's own correctness
    fpr, tpr, auc, coverage, risk, area = result.curves[(result.run_labels[1], "Rel-U")]
    assert auc == pytest.approx(metrics.auroc(scores[1]["relu"], flags[1]))
    assert area == pytest.approx(metrics.aurc(scores[1]["relu"], flags[1]))


def test_refusals(two_runs):
    labels = two_runs[0].labels
    with pytest.raises(InputError, match="choose 2 to 4 runs"):
        compare.compare_runs(two_runs[:1])
    with pytest.raises(InputError, match="choose 2 to 4 runs"):
        compare.compare_runs([_run(2.0, s, labels, f"run {s}") for s in range(5)])
    with pytest.raises(InputError, match="chosen twice"):
        compare.compare_runs([two_runs[0], two_runs[0]])
    other = _run(2.0, 3, np.roll(labels, 1), "another data set")
    with pytest.raises(InputError, match="do not hold the same samples"):
        compare.compare_runs([two_runs[0], other])
    with pytest.raises(InputError, match="at least one detector"):
        compare.compare_runs(two_runs, keys=())
    perfect = Run.from_logits(np.eye(C, dtype=np.float32)[labels] * 9, labels, tuple("abcde"), source="perfect")
    with pytest.raises(InputError, match="perfect"):
        compare.compare_runs([two_runs[0], perfect], n_resamples=0)


def test_overlay_gives_each_run_a_colour_and_each_detector_a_dash():
    x = np.linspace(0, 1, 5)
    curves = {(run, det): (x, x, 0.5) for run in ("1. a", "2. b", "3. c") for det in ("Rel-U", "Doctor")}
    fig = figures.runs_curves_figure(curves, "roc")
    by_name = {t.name.split(" (")[0]: t.line for t in fig.data}
    assert by_name["1. a · Rel-U"].color == by_name["1. a · Doctor"].color != by_name["2. b · Rel-U"].color
    assert by_name["1. a · Rel-U"].dash == by_name["3. c · Rel-U"].dash != by_name["3. c · Doctor"].dash
    assert "AUROC 0.5000" in fig.data[0].name
    assert figures.runs_curves_figure(curves, "risk_coverage").layout.title.text == "Risk-coverage by run"
    with pytest.raises(ValueError):
        figures.runs_curves_figure(curves, "other")


@pytest.mark.slow
def test_page_compares_the_runs_loaded_in_the_session(two_runs):
    from relu_core import runs

    for run in two_runs:
        runs.register_run(run)
    alone = app(COMPARE, 120)
    alone.session_state["run_id"] = two_runs[0].run_id
    alone.run()
    assert not alone.exception and "Only one run is loaded" in alone.info[0].value

    at = app(COMPARE, 120)
    at.session_state["run_id"] = two_runs[1].run_id
    at.session_state["run_ids"] = [r.run_id for r in two_runs]
    at.session_state["cmp_seeds"] = 2
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.multiselect(key="cmp_runs").value == [r.run_id for r in two_runs]
    at.button(key="cmp_run").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    table = at.dataframe[0].value
    assert len(table) == 2 * 4 and set(table["detector"]) == {"MSP", "ODIN", "Doctor", "Rel-U"}
    titles = [c["layout"]["title"]["text"] for c in charts(at)]
    assert titles == ["ROC by run (positives = correct predictions)", "Risk-coverage by run"]
    differences = at.table[-1].value  # a static table: its verdicts wrap
    assert len(differences) == 4 * 4 and differences["verdict"].str.contains("on run 2|no significant").all()


def test_progress_and_cancel(two_runs):
    seen = []
    compare.compare_runs(two_runs, keys=("doctor",), seeds=2, n_resamples=0, progress=lambda *a: seen.append(a))
    assert [(done, total) for done, total, _ in seen] == [(1, 4), (2, 4), (3, 4), (4, 4)]
    with pytest.raises(Cancelled):
        compare.compare_runs(two_runs, cancel=lambda: True)
