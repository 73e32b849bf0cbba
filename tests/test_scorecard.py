"""The Start page's scorecard (``relu_core.scorecard``): its rows in a fixed order and wording, built from jobs
(computing, then ready) and from a finished training-objectives table; on the Start page (AppTest); the settings
every page shares (``studio.session.share``), changed on one page and read on another."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from relu_core import jobs, protocol, runs, scorecard
from relu_core.errors import Cancelled
from relu_core.studies import objectives

TITLES = [title for _, title, _ in scorecard.SETTINGS]


def _logits_run(seed: int = 1, n: int = 400, dataset_name: str = "") -> runs.Run:
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 4, n)
    logits = rng.normal(size=(n, 4)).astype(np.float32) + 1.5 * np.eye(4, dtype=np.float32)[labels]
    return runs.Run.from_logits(
        logits, labels, tuple("abcd"), source=f"scorecard logits {seed}", dataset_name=dataset_name
    )


def _wait(run, key: str, shared: scorecard.Shared) -> None:
    assert jobs.MANAGER.get(scorecard.job_key(run, key, shared)).wait(120)


def test_the_verdict_words_are_the_same_whoever_wins() -> None:
    relu = scorecard.plain_verdict({"fpr95": "Rel-U better", "auroc": "Rel-U better"})
    doctor = scorecard.plain_verdict({"fpr95": "Doctor better", "auroc": "Doctor better"})
    assert relu == "Rel-U tells errors from correct predictions better"
    assert doctor == relu.replace("Rel-U", "Doctor")
    mixed = scorecard.plain_verdict({"fpr95": "Rel-U better", "auroc": "Doctor better"})
    assert mixed == "Mixed: Rel-U better on false alarms (FPR95), Doctor better on ranking (AUROC)"
    assert scorecard.plain_verdict({"fpr95": "no significant difference", "auroc": "no significant difference"}) == (
        "No clear difference between Rel-U and Doctor"
    )
    counted = scorecard.count_outcomes(["Rel-U better", "Doctor better", "Doctor better", "x"], "fpr95")
    assert counted == "FPR95: Rel-U 1, Doctor 2, neither 1"
    assert scorecard.plain_count(3, 1, "corruption") == "Rel-U better on more corruptions"
    assert scorecard.plain_count(1, 3, "corruption") == "Doctor better on more corruptions"
    assert scorecard.plain_count(0, 0, "corruption") == "No clear difference between Rel-U and Doctor on any corruption"


def test_rows_come_in_order_computing_then_with_the_paired_interval() -> None:
    run = _logits_run()
    shared = scorecard.Shared(seeds=2)
    release = threading.Event()

    def blocked(progress, cancel):
        progress(1, 4, "seed 1/4")
        release.wait(60)
        raise Cancelled("released")

    key = scorecard.job_key(run, "in_distribution", shared)
    jobs.MANAGER.submit(key, "blocked", blocked)
    scorecard.start(run, shared)  # a running job is kept
    try:
        rows = scorecard.rows(run, shared)
        assert [r.title for r in rows] == TITLES
        assert rows[0].state == scorecard.COMPUTING and rows[0].fraction == 0.25 and "seed 1/4" in rows[0].verdict
        # a run of logits only: no model to run on other images or on corruptions; no objectives table yet
        # a logits-only run: every setting it cannot have is worded alike (the objectives row said "Not computed
        # yet" though no table could ever be of its data set)
        assert [r.state for r in rows[1:4]] == [scorecard.UNSUPPORTED] * 3
        assert all(r.verdict.startswith("Not available for this run (") for r in rows[1:4])
        assert "this run has logits only" in rows[3].verdict
    finally:
        release.set()
    jobs.MANAGER.get(key).wait(60)
    scorecard.start(run, shared)  # the cancelled job is submitted again
    _wait(run, "in_distribution", shared)
    first = scorecard.rows(run, shared)[0]
    direct = protocol.evaluate(run.logits, run.labels, protocol.PAIRED, tune_fraction=0.5, seeds=2)
    expected = direct.paired
    assert first.state == scorecard.READY
    assert first.verdict == scorecard.plain_verdict({m: expected[m].outcome() for m in scorecard.METRICS})
    # each metric's verdict, then both FPR95 operating points in words
    assert first.details == (*(expected[m].verdict() for m in scorecard.METRICS), *direct.operating_points())
    assert first.details[-1].startswith("Catch 95 % of the errors")
    fpr = expected["fpr95"]
    assert first.intervals.startswith(f"FPR95 {fpr.estimate:+.3f} [{fpr.low:+.3f}, {fpr.high:+.3f}] · AUROC ")
    assert "mean over 2 seeds" in first.note


def test_the_objectives_row_reads_a_finished_table_and_names_its_settings() -> None:
    run = _logits_run(2, dataset_name="digits")
    table_runs = [_logits_run(s) for s in (3, 4)]
    rows = tuple(
        objectives.ObjectiveRow(name, r, protocol.evaluate(r.logits, r.labels, protocol.PAIRED, seeds=2))
        for name, r in zip(("cross_entropy", "mixup"), table_runs, strict=True)
    )
    table = objectives.ObjectivesResult("digits", "cnn8", 2, 0, None, (0, 1), 0.5, "tuning", rows)
    job = jobs.MANAGER.submit("test-objectives-table", "objectives", lambda progress, cancel: table)
    assert job.wait(30)
    shared = scorecard.Shared(seeds=2)
    row = scorecard.rows(run, shared)[3]
    outcomes = {m: [r.result.paired[m].outcome() for r in rows] for m in scorecard.METRICS}
    assert row.state == scorecard.READY and row.page == "objectives"
    counts = " · ".join(scorecard.count_outcomes(outcomes[m], m) for m in scorecard.METRICS)
    assert row.intervals == f"{counts} (of 2 objectives)"
    wins = sum(o.count("Rel-U better") for o in outcomes.values())
    assert row.verdict == scorecard.plain_count(
        wins, sum(o.count("Doctor better") for o in outcomes.values()), "objective"
    )
    assert row.note == "cnn8 on digits, 2 seeds"
    # a table computed with other settings than the shared ones says so
    assert "computed at 2 seeds (not the shared settings)" in scorecard.rows(run, scorecard.Shared(seeds=3))[3].note
    jobs.MANAGER.forget(job.key)


def test_the_guaranteed_risk_row_says_how_many_predictions_each_lets_you_act_on() -> None:
    from relu_core import risk_control

    run = _logits_run(6, n=3000)
    shared = scorecard.Shared(seeds=2)
    correct = protocol.correctness(run.logits, run.labels)
    tune, _ = protocol.split_indices(correct.size, 0.5, 0, stratify=correct)
    risk = scorecard.guarantee_risk(run, shared)
    half = (1 - correct[tune].mean()) / 2  # half the tuning split's error rate, rounded down onto the choices
    assert risk <= half and risk == risk_control.default_risk(correct[tune]) and risk in risk_control.RISK_CHOICES
    scorecard.start(run, shared)
    _wait(run, "guaranteed_risk", shared)
    row = scorecard.rows(run, shared)[4]
    assert row.title == "At a guaranteed risk" and row.state == scorecard.READY and row.page == "explore"
    expected = risk_control.at_risk(run.logits, run.labels, risk=risk, delta=0.1, seeds=2)
    coverage = {
        name: expected.summary(k)["evaluation_coverage"] for k, name in (("relu", "Rel-U"), ("doctor", "Doctor"))
    }
    assert row.verdict == risk_control.sentence(risk, 0.1, coverage)
    assert row.verdict.startswith(f"At most {risk_control.percent(risk)} errors among accepted, with 90 % confidence")
    d = expected.minus_doctor
    assert row.intervals == (  # in points, like the sentence's percentages (a fraction beside them misled)
        f"Rel-U − Doctor coverage {100 * d.estimate:+.1f} points [{100 * d.low:+.1f}, {100 * d.high:+.1f}] (over the "
        f"seeds {100 * d.draw_low:+.1f} to {100 * d.draw_high:+.1f})"
    )
    assert row.details == (d.verdict(),)
    assert "half the model's error rate on the tuning split" in row.note and "mean over 2 seeds" in row.note


# ------------------------------------------------------------------------------------------- the pages


@pytest.mark.slow
def test_start_shows_the_scorecard_computing_then_its_verdicts(pages) -> None:
    run = _logits_run(5)
    shared = scorecard.Shared()
    release = threading.Event()

    def blocked(progress, cancel):
        progress(2, 5, "seed 2/5")
        release.wait(60)
        raise Cancelled("released")

    key = scorecard.job_key(run, "in_distribution", shared)
    jobs.MANAGER.submit(key, "blocked", blocked)
    try:
        at = pages.open("Start.py", run)
        pages.ok(at)
        texts = [m.value for m in at.markdown]
        for title in TITLES:
            assert f"**{title}**" in texts
        assert "Computing: seed 2/5" in texts and at.get("progress")
        assert any(m.value.startswith("A classifier is sometimes wrong") for m in at.markdown)  # the plain words
        assert "This run has logits only: no images to show." in [c.value for c in at.caption]
    finally:
        release.set()
    jobs.MANAGER.get(key).wait(60)
    at.run()  # the page submits the job again (the blocked one was cancelled)
    _wait(run, "in_distribution", shared)
    at.run()
    pages.ok(at)
    ready = scorecard.rows(run, shared)[0]
    texts = [m.value for m in at.markdown]
    assert ready.state == scorecard.READY and ready.verdict in texts
    assert ready.intervals in [c.value for c in at.caption]
    links = [link.proto.label for link in at.get("page_link")]
    assert links == ["Open Explore", "Open Studies", "Open Corruptions", "Open Training objectives", "Open Explore"]
    # the mismatch row's link opens that study on Studies (its AppTest: test_studies_page.py), the guaranteed-risk
    # row's opens Explore at its r* and δ (tests/test_app.py::test_the_scorecards_guarantee_link_opens_explore_there)
    risk = scorecard.guarantee_risk(run, shared)
    assert [link.proto.query_string for link in at.get("page_link")] == [
        "",
        "study=mismatch",
        "",
        "",
        f"guarantee={risk:g}%2C0.1",
    ]


@pytest.mark.slow
def test_a_shared_setting_changed_on_one_page_is_read_on_the_others(pages, digits_run, monkeypatch) -> None:
    from relu_core.explore import views

    monkeypatch.setattr(views, "PAIRED_WAIT_S", 600.0)  # Start's verdict waits for its bootstrap (a browser polls)
    from apptest_pages import BASELINES, EXPLORE, START

    at = pages.open("Corruptions.py", digits_run, rob_subsample=64)
    assert at.select_slider(key="rob_tune_fraction").value == 0.5  # the shared default
    at.select_slider(key="rob_tune_fraction").set_value(0.2).run()
    at.number_input(key="rob_seeds").set_value(2).run()
    pages.ok(at)
    at.switch_page(BASELINES).run()
    pages.no_exceptions(at)
    assert at.select_slider(key="bl_tune_fraction").value == 0.2 and at.number_input(key="bl_seeds").value == 2
    at.switch_page(EXPLORE).run()
    pages.no_exceptions(at)
    assert at.select_slider(key="ex_tune_fraction").value == 0.2
    at.slider(key="ex_lam").set_value(0.3).run()
    at.switch_page(START).run()
    pages.no_exceptions(at)
    words = "tuning split 20% · 2 seeds · T = 1 · λ = 0.3 · ε = 0"
    assert any(words in m.value for m in at.markdown)  # above the scorecard
    assert any(words in c.value for c in at.sidebar.caption)  # the one place every page shows them
    assert at.info[0].value.startswith("Rel-U vs Doctor at the default settings (T = 1, λ = 0.3, 20% tuning split")


@pytest.mark.slow
def test_the_sidebar_says_the_shared_values_in_force_on_the_page_that_moved_them(pages, digits_run) -> None:
    """Issue 34: the sidebar's line kept λ = 0.5 after λ moved on Explore or came from a shared link; the frame drew
    it before the page tied its widgets to the shared values."""
    from apptest_pages import EXPLORE, app

    from relu_core import runs

    def line(at) -> str:
        (caption,) = [c.value for c in at.sidebar.caption if c.value.startswith("**Shared settings**")]
        return caption

    at = pages.open("Explore.py", digits_run)
    assert "λ = 0.5 ·" in line(at)
    at.slider(key="ex_lam").set_value(0.3).run()
    pages.no_exceptions(at)
    assert "λ = 0.3 ·" in line(at)
    runs.register_run(digits_run)
    linked = app(EXPLORE, 120)
    linked.session_state["run_id"] = digits_run.run_id
    linked.query_params.update({"lam": "0.7", "tune": "0.2"})
    linked.run()
    pages.no_exceptions(linked)
    assert "tuning split 20% · 3 seeds · T = 1 · λ = 0.7 ·" in line(linked)


def test_a_guarantee_neither_detector_can_give_is_one_short_line_with_its_reasons_in_the_details() -> None:
    """A nearly perfect classifier on few samples: r* = half its small error rate needs more calibration samples than
    the split has, so the row says so in one line and keeps each detector's reason for its tooltip."""
    rng = np.random.default_rng(3)
    labels = rng.integers(0, 4, 300)
    logits = rng.normal(size=(300, 4)).astype(np.float32) + 3.5 * np.eye(4, dtype=np.float32)[labels]
    run = runs.Run.from_logits(logits, labels, tuple("abcd"), source="nearly perfect (test)")
    assert 0.01 < np.mean(logits.argmax(1) != labels) < 0.06  # a few errors: r* of 0.5 % to 2.5 %
    shared = scorecard.Shared(seeds=2)
    scorecard.start(run, shared)
    _wait(run, "guaranteed_risk", shared)
    row = scorecard.rows(run, shared)[4]
    assert row.state == scorecard.READY
    assert row.verdict.endswith(": neither Rel-U nor Doctor can guarantee it here.")
    assert [d.split(":")[0] for d in row.details[:2]] == ["Rel-U", "Doctor"]
    assert all("too few calibration samples" in d for d in row.details[:2])
