"""Paired bootstrap of Rel-U − Doctor: every resample against the metrics recomputed on the materialised
resample (metrics are themselves checked against scikit-learn), verdicts, seeding and validation."""

from __future__ import annotations

import numpy as np
import pytest

from relu_core import metrics, stats
from relu_core.errors import InputError


def _pair(seed: int, n: int = 400, tied: bool = False, gap: float = 0.5):
    """(a, b, correct): b is a's noisier copy, so a is the better detector by a margin set by ``gap``."""
    rng = np.random.default_rng(seed)
    correct = rng.random(n) < 0.75
    correct[:2] = (True, False)
    a = rng.normal(size=n) + (~correct) * 1.5
    b = a + rng.normal(size=n) * gap
    if tied:
        a, b = np.round(a), np.round(b)
    return a, b, correct


def _draws(n: int, n_resamples: int, seed: int) -> np.ndarray:
    """The documented resampling stream: blocks of BLOCK rows of N uniform indices."""
    rng = np.random.default_rng(seed)
    blocks = [
        rng.integers(0, n, size=(min(stats.BLOCK, n_resamples - i), n)) for i in range(0, n_resamples, stats.BLOCK)
    ]
    return np.concatenate(blocks)


@pytest.mark.parametrize("positive", ["correct", "error"])
@pytest.mark.parametrize("tied", [False, True])
@pytest.mark.parametrize("seed", range(3))
def test_each_resample_equals_the_metrics_of_the_materialised_resample(seed, tied, positive):
    a, b, correct = _pair(seed, n=int(50 + 100 * seed), tied=tied)
    n_resamples = stats.BLOCK + 7  # a full block and a partial one
    got = stats.bootstrap_differences(a, b, correct, n_resamples=n_resamples, seed=seed, fpr_positive=positive)
    for r, idx in enumerate(_draws(len(a), n_resamples, seed)):
        if correct[idx].all() or not correct[idx].any():
            assert all(np.isnan(got[k][r]) for k in got)
            continue
        sa, sb = metrics.summary(a[idx], correct[idx], positive), metrics.summary(b[idx], correct[idx], positive)
        for key in ("fpr95", "auroc", "aurc", "augrc"):
            assert got[key][r] == pytest.approx(sa[key] - sb[key], abs=1e-12), (r, key)


def test_estimate_is_the_difference_on_the_samples_and_lies_in_a_sensible_interval():
    a, b, correct = _pair(0, n=2000)
    result = stats.paired_bootstrap(a, b, correct, n_resamples=1000, seed=1)
    sa, sb = metrics.summary(a, correct), metrics.summary(b, correct)
    for key, diff in result.items():
        assert diff.estimate == pytest.approx(sa[key] - sb[key], abs=1e-15)
        assert diff.low <= diff.estimate <= diff.high and diff.n_resamples == 1000
    # a is clearly better: higher AUROC, lower FPR95 and AURC, all significant
    assert result["auroc"].significant and result["auroc"].a_is_better() and result["auroc"].low > 0
    assert result["aurc"].significant and result["aurc"].high < 0
    assert result["auroc"].verdict().startswith("AUROC: Rel-U better than Doctor by ")
    assert result["auroc"].outcome() == "Rel-U better" and result["auroc"].outcome("A", "B") == "A better"
    swapped = stats.paired_bootstrap(b, a, correct, n_resamples=1000, seed=1)
    assert swapped["auroc"].verdict().startswith("AUROC: Doctor better than Rel-U by ")
    assert swapped["auroc"].outcome() == "Doctor better"


def test_verdict_states_the_winners_margin_and_its_interval():
    lower_is_better = stats.PairedDifference("fpr95", -0.1, -0.2, -0.05, False, 1000)
    assert lower_is_better.verdict() == "FPR95: Rel-U better than Doctor by 0.1000 (95 % CI 0.0500 to 0.2000)"
    doctor_wins = stats.PairedDifference("auroc", -0.0311, -0.0395, -0.0225, True, 1000)
    assert doctor_wins.verdict() == "AUROC: Doctor better than Rel-U by 0.0311 (95 % CI 0.0225 to 0.0395)"
    tie = stats.PairedDifference("aurc", 0.001, -0.001, 0.003, False, 1000, confidence=0.9)
    assert tie.verdict() == "AURC: no significant difference (Rel-U − Doctor = +0.0010, 90 % CI -0.0010 to +0.0030)"


def test_identical_detectors_show_no_significant_difference():
    a, _, correct = _pair(3)
    result = stats.paired_bootstrap(a, a.copy(), correct, n_resamples=200)
    for diff in result.values():
        assert (diff.estimate, diff.low, diff.high) == (0.0, 0.0, 0.0)
        assert not diff.significant
        assert "no significant difference" in diff.verdict() and diff.outcome() == "no significant difference"
    # a real but tiny difference on few samples is not called a win either
    a, b, correct = _pair(4, n=60, gap=0.05)
    assert not stats.paired_bootstrap(a, b, correct)["auroc"].significant


def test_same_seed_same_interval_other_seed_other_draws():
    a, b, correct = _pair(5)
    first = stats.paired_bootstrap(a, b, correct, n_resamples=300, seed=7)
    assert stats.paired_bootstrap(a, b, correct, n_resamples=300, seed=7) == first
    other = stats.bootstrap_differences(a, b, correct, n_resamples=300, seed=8)
    assert not np.array_equal(
        other["auroc"], stats.bootstrap_differences(a, b, correct, n_resamples=300, seed=7)["auroc"]
    )


def test_pooled_over_one_seed_equals_the_single_split_and_averages_seeds():
    pairs = [_pair(s, n=300) for s in range(3)]
    single = stats.paired_bootstrap(*pairs[0], n_resamples=200, seed=4)
    assert stats.pooled_bootstrap(pairs[:1], n_resamples=200, seed=4) == single
    pooled = stats.pooled_bootstrap(pairs, n_resamples=200, seed=4)
    mean = np.mean([metrics.auroc(a, c) - metrics.auroc(b, c) for a, b, c in pairs])
    assert pooled["auroc"].estimate == pytest.approx(mean, abs=1e-14)
    per_seed = [
        stats.bootstrap_differences(*p, metrics=("auroc",), n_resamples=200, seed=4 + s)["auroc"]
        for s, p in enumerate(pairs)
    ]
    low, high = np.quantile(np.mean(per_seed, axis=0), [0.025, 0.975])
    assert (pooled["auroc"].low, pooled["auroc"].high) == pytest.approx((low, high), abs=1e-14)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"metrics": ("precision",)}, "unknown metric"),
        ({"n_resamples": 0}, "n_resamples"),
        ({"n_resamples": 2.5}, "n_resamples"),
        ({"confidence": 1.0}, "confidence"),
        ({"fpr_positive": "both"}, "fpr_positive"),
    ],
)
def test_bad_options_raise(kwargs, message):
    a, b, correct = _pair(0, n=50)
    with pytest.raises(InputError, match=message):
        stats.paired_bootstrap(a, b, correct, **kwargs)


def test_bad_inputs_raise():
    a, b, correct = _pair(0, n=50)
    with pytest.raises(InputError, match="differ in length"):
        stats.paired_bootstrap(a, b[:-1], correct)
    with pytest.raises(InputError, match="correctly and wrongly"):
        stats.paired_bootstrap(a, b, np.ones(50, bool))
    with pytest.raises(InputError, match="NaN"):
        stats.paired_bootstrap(np.full(50, np.nan), b, correct)


def test_pooling_seeds_that_share_their_samples_resamples_the_samples_once():
    """Seeds' evaluation splits overlap: drawn apart, three seeds on the same samples gave an interval about
    √3 too narrow. Drawn once per resample (sample_ids), identical splits give exactly one split's interval."""
    a, b, c = _pair(7, n=400)
    single = stats.paired_bootstrap(a, b, c, n_resamples=300, seed=2)
    same = stats.pooled_bootstrap([(a, b, c)] * 3, sample_ids=[np.arange(400)] * 3, n_resamples=300, seed=2)
    assert same == single
    apart = stats.pooled_bootstrap([(a, b, c)] * 3, n_resamples=300, seed=2)
    assert apart["auroc"].high - apart["auroc"].low < 0.75 * (single["auroc"].high - single["auroc"].low)


@pytest.mark.parametrize("tied", [False, True])
def test_pooled_draws_keep_each_split_its_own_samples(tied):
    """Two seeds holding overlapping parts of 600 samples (ids in any order): each resample counts a split's
    samples as drawn from the whole population (so its size varies), and a reference built from explicit
    draws with the plain metrics agrees on every metric."""
    a, b, c = _pair(3, n=600, tied=tied)
    order = np.random.default_rng(1).permutation(600)
    first, second = order[:400], order[200:]
    pairs = [(a[first], b[first], c[first]), (a[second], b[second], c[second])]
    pooled = stats.pooled_bootstrap(pairs, sample_ids=[first, second], n_resamples=32, seed=5)
    members = np.arange(600)  # the population, in the order pooled_bootstrap numbers it
    plain = {"auroc": metrics.auroc, "fpr95": metrics.fpr_at_tpr, "aurc": metrics.aurc, "augrc": metrics.augrc}
    rng, diffs = np.random.default_rng(5), {k: [] for k in plain}
    for _ in range(2):  # the same stream, BLOCK resamples at a time
        for draw in rng.integers(0, members.size, size=(stats.BLOCK, members.size)):
            counts = np.bincount(draw, minlength=members.size)
            for key, metric in plain.items():
                per_split = []
                for ids in (first, second):
                    taken = np.repeat(ids, counts[ids])
                    per_split.append(metric(a[taken], c[taken]) - metric(b[taken], c[taken]))
                diffs[key].append(np.mean(per_split))
    for key in plain:
        low, high = np.quantile(diffs[key], [0.025, 0.975])
        assert (pooled[key].low, pooled[key].high) == pytest.approx((low, high), abs=1e-12), key


def test_pooled_bootstrap_refuses_mismatched_sample_ids():
    a, b, c = _pair(0, n=50)
    with pytest.raises(InputError, match="one array per pair"):
        stats.pooled_bootstrap([(a, b, c)], sample_ids=[np.arange(49)], n_resamples=10)
    with pytest.raises(InputError, match="repeats a sample"):
        stats.pooled_bootstrap([(a, b, c)], sample_ids=[np.zeros(50, dtype=int)], n_resamples=10)


@pytest.mark.parametrize("positive, rare", [("error", False), ("correct", True)])
@pytest.mark.parametrize("tied", [False, True])
def test_fpr95_skips_the_resamples_that_leave_it_undefined(positive, rare, tied):
    """Two samples of the rare kind: many resamples draw none, where FPR95 (like AUROC) is undefined; they were
    given a made-up value and entered the interval."""
    rng = np.random.default_rng(0)
    correct = np.ones(40, dtype=bool) if not rare else np.zeros(40, dtype=bool)
    correct[:2] = rare
    a, b = rng.normal(size=40), rng.normal(size=40)
    if tied:
        a, b = np.round(a), np.round(b)
    got = stats.paired_bootstrap(a, b, correct, n_resamples=400, fpr_positive=positive)
    assert got["fpr95"].n_resamples == got["auroc"].n_resamples < 400


@pytest.mark.parametrize("tied", [False, True])
def test_two_classifiers_on_the_same_samples_each_use_their_own_correctness(tied):
    """A pair of correctness arrays (two runs of one data set): each resample scores A with A's correctness and
    B with B's, on the same drawn samples."""
    a, _, correct_a = _pair(3, n=120, tied=tied)
    b, _, correct_b = _pair(4, n=120, tied=tied)
    n_resamples = stats.BLOCK + 3
    got = stats.bootstrap_differences(a, b, (correct_a, correct_b), n_resamples=n_resamples, seed=2)
    for r, idx in enumerate(_draws(len(a), n_resamples, 2)):
        if any(flags[idx].all() or not flags[idx].any() for flags in (correct_a, correct_b)):
            continue
        sa, sb = metrics.summary(a[idx], correct_a[idx]), metrics.summary(b[idx], correct_b[idx])
        for key in ("fpr95", "auroc", "aurc", "augrc"):
            assert got[key][r] == pytest.approx(sa[key] - sb[key], abs=1e-12), (r, key)
    result = stats.paired_bootstrap(a, b, (correct_a, correct_b), n_resamples=200)
    sa, sb = metrics.summary(a, correct_a), metrics.summary(b, correct_b)
    assert result["auroc"].estimate == pytest.approx(sa["auroc"] - sb["auroc"], abs=1e-15)
    with pytest.raises(InputError, match="same samples"):
        stats.paired_bootstrap(a, b[:-1], (correct_a, correct_b[:-1]))


@pytest.mark.parametrize("positive", ["correct", "error"])
@pytest.mark.parametrize("tied", [False, True])
def test_rescored_metrics_equal_the_metrics_of_each_materialised_resample(tied, positive):
    """Scores that change with the resample (a detector refitted in each): every row sorted on its own, ties within
    a row (copies of one sample, equal scores of others) one group, as metrics.summary of the materialised resample."""
    rng = np.random.default_rng(7)
    n, rows = 70, stats.BLOCK + 5
    correct = rng.random(n) < 0.7
    correct[:2] = (True, False)
    scores = rng.normal(size=(rows, n)) - correct
    if tied:
        scores = np.round(2 * scores) / 2
    counts = rng.multinomial(n, np.full(n, 1 / n), size=rows).T
    got = stats.rescored_metrics(scores, correct, counts, fpr_positive=positive)
    for r in range(rows):
        drawn = np.repeat(np.arange(n), counts[:, r])
        expected = metrics.summary(scores[r, drawn], correct[drawn], positive)
        for key, values in got.items():
            assert values[r] == pytest.approx(expected[key], abs=1e-12), (key, r)
    # one score vector for every row: the fixed-order path gives the same
    fixed = stats.resampled_metrics(scores[0], correct, counts, fpr_positive=positive)
    again = stats.rescored_metrics(np.tile(scores[0], (rows, 1)), correct, counts, fpr_positive=positive)
    for key in fixed:
        np.testing.assert_allclose(again[key], fixed[key], atol=1e-12)


def test_rescored_metrics_leave_undefined_resamples_nan_and_refuse_bad_shapes():
    correct = np.array([True, True, False, False])
    counts = np.array([[2, 1], [2, 1], [0, 1], [0, 1]])  # resample 0 draws no error
    got = stats.rescored_metrics(np.tile([0.1, 0.2, 0.3, 0.4], (2, 1)), correct, counts)
    assert np.isnan(got["auroc"][0]) and np.isnan(got["fpr95"][0]) and got["auroc"][1] == 1.0
    with pytest.raises(InputError, match="one column per row"):
        stats.rescored_metrics(np.zeros((3, 4)), correct, counts)
    with pytest.raises(InputError, match="draw counts"):
        stats.rescored_metrics(np.zeros((2, 4)), correct, -counts)
