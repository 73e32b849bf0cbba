"""Hostile input to Compare runs (issue 37, #7 and #11): runs whose joint pattern of right and wrong holds a
single sample are compared, never refused with an internal group number; a chosen run that the server's bounded
run registry dropped is said on the page, with the way to load it again."""

from __future__ import annotations

import numpy as np
from apptest_pages import COMPARE, app

from relu_core import limits, protocol, run_comparison, runs
from relu_core.runs import Run

N, C = 200, 4


def _pair_with_one_odd_sample() -> list[Run]:
    """Two uploads of the same 200 samples: the second run is the first but for one sample that only it gets right,
    so the pattern (first wrong, second right) holds one sample."""
    rng = np.random.default_rng(3)
    labels = rng.integers(0, C, N)
    logits = rng.normal(size=(N, C)).astype(np.float32) + 2.0 * np.eye(C, dtype=np.float32)[labels]
    first = logits.copy()
    wrong = np.flatnonzero(first.argmax(1) != labels)
    assert wrong.size >= 4
    second = first.copy()
    second[wrong[0], labels[wrong[0]]] += 50.0  # right in the second run only
    return [
        Run.from_logits(first, labels, tuple("abcd"), source="upload a.npz"),
        Run.from_logits(second, labels, tuple("abcd"), source="upload b.npz"),
    ]


def test_a_joint_pattern_of_one_sample_is_compared_not_refused():
    pair = _pair_with_one_odd_sample()
    correct = np.stack([protocol.correctness(r.logits, r.labels) for r in pair])
    assert np.sum(~correct[0] & correct[1]) == 1
    result = run_comparison.compare_runs(pair, keys=("doctor", "relu"), seeds=3, n_resamples=50)
    assert result.n_tune + result.n_eval == N and len(result.differences) == 2 * 4


def test_runs_with_two_errors_each_in_lone_patterns_are_split_in_both_parts():
    """Run 2's only two errors sit in patterns of one sample each (run 1 right on one, wrong on the other): merged
    into one stratum, so each part of every seed holds one of them."""
    rng = np.random.default_rng(5)
    labels = rng.integers(0, C, N)
    base = np.eye(C, dtype=np.float32)[labels] * 5 + rng.normal(size=(N, C)).astype(np.float32) * 0.1
    first, second = base.copy(), base.copy()
    first[:20] = np.roll(first[:20], 1, axis=1)  # run 1 wrong on samples 0..19
    second[[0, 50]] = np.roll(second[[0, 50]], 1, axis=1)  # run 2 wrong on 0 (run 1 wrong too) and 50 (run 1 right)
    pair = [Run.from_logits(x, labels, tuple("abcd"), source=f"run {i}") for i, x in enumerate((first, second))]
    result = run_comparison.compare_runs(pair, keys=("doctor",), seeds=5, n_resamples=0)
    assert result.n_eval > 0


def test_joint_strata_keep_two_samples_each_and_every_run_in_both_parts():
    rng = np.random.default_rng(0)
    for _ in range(300):
        n_runs, n = int(rng.integers(2, 5)), int(rng.integers(60, 300))
        correct = rng.random((n_runs, n)) < rng.uniform(0.5, 0.995, size=(n_runs, 1))
        if any(c.sum() < 2 or (~c).sum() < 2 for c in correct):
            continue
        strata = run_comparison.joint_strata(correct)
        assert np.unique(strata, return_counts=True)[1].min() >= 2
        tune, evaluation = protocol.split_indices(n, 0.5, 0, stratify=strata)
        for flags in correct:
            for part in (tune, evaluation):
                assert flags[part].any() and not flags[part].all()


def test_a_chosen_run_dropped_from_the_registry_is_said_with_how_to_load_it_again():
    pair = _pair_with_one_odd_sample()
    third = Run.from_logits(pair[1].logits + 0.5, pair[1].labels, tuple("abcd"), source="upload c.npz")
    chosen = [*pair, third]
    for run in chosen:
        runs.register_run(run)
        runs.remember(run)  # the machine's record: the page offers to load it again from the cache
    at = app(COMPARE, 120)
    at.session_state["run_id"] = chosen[0].run_id
    at.session_state["run_ids"] = [r.run_id for r in chosen]
    at.run()
    assert not at.exception and at.multiselect(key="cmp_runs").value == [r.run_id for r in chosen]
    for i in range(limits.MAX_RUNS):  # other sessions' runs push the oldest out of the bounded registry
        rng = np.random.default_rng(100 + i)
        runs.register_run(Run.from_logits(rng.normal(size=(20, 3)), rng.integers(0, 3, 20), tuple("xyz"), source="x"))
        runs.RUNS.get(chosen[0].run_id)  # the current run stays in use
        runs.RUNS.get(chosen[1].run_id)
    assert third.run_id not in runs.RUNS and chosen[0].run_id in runs.RUNS
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    notices = [w.value for w in at.warning if "dropped" in w.value]
    assert len(notices) == 1 and "upload c.npz" in notices[0] and "Load it again" in notices[0]
    assert at.multiselect(key="cmp_runs").value == [r.run_id for r in pair]
    at.button(key=f"cmp_reload_{third.run_id}").click().run()
    for _ in range(60):  # the reload is a background job; its run joins the session on a later run
        at.run()
        if third.run_id in at.multiselect(key="cmp_runs").value:
            break
    assert at.multiselect(key="cmp_runs").value == [r.run_id for r in chosen]
    assert not [w.value for w in at.warning if "dropped" in w.value]
