"""Evaluation protocol: splits, evaluation over seeds against a hand-rolled loop, grid search hygiene."""

from __future__ import annotations

import numpy as np
import pytest

from relu_core import detectors, metric_info, metrics, protocol, stats, ties
from relu_core.errors import InputError


def _synthetic(n: int = 600, c: int = 6, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Logits of a mediocre classifier (about 60 % accuracy) with structured, class-dependent errors."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, c, n)
    logits = rng.normal(size=(n, c))
    logits[np.arange(n), labels] += rng.normal(1.5, 1.5, n)
    confused = (labels + 1) % c  # each class is mostly confused with the next one
    logits[np.arange(n), confused] += rng.normal(0.5, 1.0, n)
    return logits, labels


@pytest.fixture(scope="module")
def data() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    logits, labels = _synthetic()
    return logits, labels, logits.argmax(1) == labels


# ------------------------------------------------------------------------------------------ splits
@pytest.mark.parametrize("fraction", protocol.TUNE_FRACTION_PRESETS + (0.07, 0.9))
def test_split_is_a_seeded_partition_of_the_requested_size(fraction):
    n = 503
    tune, ev = protocol.split_indices(n, fraction, seed=3)
    assert len(np.intersect1d(tune, ev)) == 0
    np.testing.assert_array_equal(np.sort(np.concatenate([tune, ev])), np.arange(n))
    assert len(tune) == round(fraction * n)
    again = protocol.split_indices(n, fraction, seed=3)
    np.testing.assert_array_equal(again[0], tune)
    other = protocol.split_indices(n, fraction, seed=4)
    assert not np.array_equal(other[0], tune)


def test_stratified_split_keeps_both_classes_in_both_parts_at_the_fraction(data):
    _, _, correct = data
    for fraction in (0.1, 0.33, 0.5):
        tune, ev = protocol.split_indices(len(correct), fraction, seed=1, stratify=correct)
        np.testing.assert_array_equal(np.sort(np.concatenate([tune, ev])), np.arange(len(correct)))
        for part in (tune, ev):
            assert correct[part].any() and not correct[part].all()
        n_err = int((~correct).sum())
        assert int((~correct[tune]).sum()) == round(fraction * n_err)
    # Even 3 errors out of 1000 end up on both sides.
    rare = np.ones(1000, dtype=bool)
    rare[[5, 500, 900]] = False
    tune, ev = protocol.split_indices(1000, 0.1, seed=0, stratify=rare)
    assert (~rare[tune]).sum() >= 1 and (~rare[ev]).sum() >= 1


@pytest.mark.parametrize(
    "n, fraction, stratify",
    [
        (100, 0.0, None),
        (100, 1.0, None),
        (100, 1.5, None),
        (100, float("nan"), None),
        (1, 0.5, None),
        (3, 0.1, None),  # round(0.3) = 0 samples to tune
        (10, 0.5, np.array([True] * 9 + [False])),  # a single error cannot be on both sides
        (10, 0.5, np.ones(10, dtype=bool)),  # a one-class split
    ],
)
def test_split_rejects_degenerate_requests(n, fraction, stratify):
    with pytest.raises(InputError):
        protocol.split_indices(n, fraction, seed=0, stratify=stratify)


@pytest.mark.parametrize(
    "correct, message",
    [
        (np.ones(2000, dtype=bool), "none of the 2,000 predictions are wrong: misclassification detection needs"),
        (np.array([True] * 9 + [False]), "1 of the 10 predictions is wrong"),
        (np.array([False] * 9 + [True]), "1 of the 10 predictions is correct"),
        (np.zeros(4, dtype=bool), "none of the 4 predictions are correct"),
    ],
)
def test_unevaluable_correctness_is_said_in_words(correct, message):
    with pytest.raises(InputError, match=message) as raised:
        protocol.check_evaluable(correct)
    assert "np." not in str(raised.value)
    with pytest.raises(InputError, match=message):  # what a split of such a run says
        protocol.split_indices(correct.size, 0.5, seed=0, stratify=correct)
    protocol.check_evaluable(np.array([True, True, False, False]))  # two of each: enough


def test_split_of_integer_groups_names_the_group_plainly():
    with pytest.raises(InputError, match=r"only 1 sample in group 3: each group needs"):
        protocol.split_indices(5, 0.5, seed=0, stratify=np.array([1, 1, 3, 1, 1]))
    with pytest.raises(InputError, match=r"all 4 samples are in one group \(7\)"):
        protocol.split_indices(4, 0.5, seed=0, stratify=np.full(4, 7))


# ---------------------------------------------------------------------------------------- evaluate
def _hand_rolled(logits, labels, key, temperature, lam, fraction, seeds):
    """Per-seed metrics straight from the detector objects and metrics.summary, no shared code path."""
    correct = logits.argmax(1) == labels
    rows = []
    for seed in seeds:
        tune, ev = protocol.split_indices(len(labels), fraction, seed, stratify=correct)
        detector = detectors.make_detector(key, temperature=temperature, lam=lam)
        detector.fit(logits[tune], labels[tune])
        rows.append(metrics.summary(detector.score(logits[ev]), correct[ev]))
    return {m: np.array([r[m] for r in rows]) for m in metric_info.KEYS}


@pytest.mark.parametrize("lam", [0.5, "auto", 0.9])
def test_evaluate_matches_a_per_seed_loop_over_detectors_and_metrics(data, lam):
    logits, labels, correct = data
    temps = {"odin": 1000.0, "doctor": 1.5, "relu": 2.0, "entropy": 0.5, "energy": 1.0}
    result = protocol.evaluate(
        logits, labels, list(detectors.protocol_keys()), temperature=temps, lam=lam, tune_fraction=0.33, seeds=4
    )
    table = result.to_dict()
    assert list(table) == list(detectors.protocol_keys())
    for key in detectors.protocol_keys():
        expected = _hand_rolled(logits, labels, key, temps.get(key), lam, 0.33, range(4))
        for metric, values in expected.items():
            np.testing.assert_allclose(result.per_seed[key][metric], values, rtol=0, atol=1e-12)
            assert table[key][metric] == pytest.approx(values.mean(), abs=1e-12)
            assert table[key][f"{metric}_std"] == pytest.approx(values.std(), abs=1e-12)
    accuracies = [correct[protocol.split_indices(len(labels), 0.33, s, stratify=correct)[1]].mean() for s in range(4)]
    assert table["msp"]["accuracy"] == pytest.approx(np.mean(accuracies))
    if lam == "auto":  # N+/(N+ + N-) of the tuning part
        tune = protocol.split_indices(len(labels), 0.33, 0, stratify=correct)[0]
        assert result.params["relu"][0][1] == pytest.approx(correct[tune].mean())
    assert [result.names[k] for k in result.methods] == ["MSP", "ODIN", "Doctor", "Rel-U", "Entropy", "Energy"]
    assert result.settings("relu")["temperature"] == 2.0
    assert result.settings("odin") == {"temperature": 1000.0, "lambda": None, "eps": 0.0, "settings_searched": 1}
    assert result.settings("relu")["hamming_fallback"] is False


def test_methods_are_named_as_make_detector_names_them(data):
    logits, labels, _ = data
    assert protocol.resolve_methods("Rel-U, MSP,relu,rel_u") == ("relu", "msp")
    by_display_name = protocol.evaluate(logits, labels, ["Rel-U", "ODIN"], temperature={"Rel-U": 2.0}, seeds=2)
    by_key = protocol.evaluate(logits, labels, ["relu", "odin"], temperature={"relu": 2.0}, seeds=2)
    assert by_display_name.to_dict() == by_key.to_dict()
    assert by_key.params["relu"][0][0] == 2.0 and by_key.params["odin"][0][0] == 1.0


def test_evaluate_seed_sequence_and_float32_logits(data):
    logits, labels, _ = data
    a = protocol.evaluate(logits.astype(np.float32), labels, ["relu", "doctor"], seeds=[7, 11])
    b = protocol.evaluate(logits.astype(np.float32), labels, "relu,doctor", seeds=[7, 11])
    assert a.seeds == (7, 11) and a.to_dict() == b.to_dict()
    assert a.to_dict() != protocol.evaluate(logits, labels, ["relu", "doctor"], seeds=[7, 12]).to_dict()


def test_perturbed_scorer_replaces_the_evaluation_scores_after_a_clean_fit(data):
    logits, labels, correct = data
    calls = []

    def scorer(detector, eval_idx):
        calls.append((detector, eval_idx))
        if detector.requires_fit:
            assert detector.matrix_ is not None  # fitted before the perturbation pass
        return -np.asarray(detector.score(logits[eval_idx]))  # reversed ranking: easy to recognise

    result = protocol.evaluate(logits, labels, ["relu", "msp"], seeds=2, perturbed_scorer=scorer)
    assert len(calls) == 4 and result.perturbed
    clean = protocol.evaluate(logits, labels, ["relu", "msp"], seeds=2)
    for key in ("relu", "msp"):
        assert result.to_dict()[key]["auroc"] == pytest.approx(1 - clean.to_dict()[key]["auroc"], abs=1e-12)
    tune, ev = protocol.split_indices(len(labels), 0.5, 0, stratify=correct)
    np.testing.assert_array_equal(calls[0][1], ev)
    expected = detectors.RelU(lam=0.5).fit(logits[tune], labels[tune]).matrix_
    np.testing.assert_allclose(calls[0][0].matrix_, expected)


def test_evaluate_reports_bad_input_as_input_error(data):
    logits, labels, _ = data
    bad = logits.copy()
    bad[3, 1] = np.nan
    with pytest.raises(InputError, match="NaN"):
        protocol.evaluate(bad, labels, ["msp"], seeds=1)
    with pytest.raises(InputError, match="out of range"):
        protocol.evaluate(logits, np.where(labels == 0, 99, labels), ["msp"], seeds=1)
    with pytest.raises(InputError, match="unknown detector"):
        protocol.evaluate(logits, labels, ["msp", "mahalanobis"], seeds=1)
    with pytest.raises(InputError, match="unknown detector"):
        protocol.evaluate(logits, labels, ["msp"], temperature={"mahalanobis": 2.0}, seeds=1)
    with pytest.raises(InputError, match="none of the .* predictions are wrong"):  # a classifier without errors
        protocol.evaluate(logits, logits.argmax(1), ["msp"], seeds=1)
    for seeds in (0, protocol.MAX_SEEDS + 1, 10**30, []):
        with pytest.raises(InputError, match="seeds"):
            protocol.evaluate(logits, labels, ["msp"], seeds=seeds)
    with pytest.raises(InputError):
        protocol.evaluate(logits, labels, ["relu"], lam=1.5, seeds=1)
    with pytest.raises(InputError):
        protocol.evaluate(logits, labels, ["relu"], tune_fraction=1.0, seeds=1)


# ------------------------------------------------------------------------------------- grid search
def test_moment_form_equals_relu_matrix_including_fallbacks(data):
    logits, labels, correct = data
    probs = detectors.softmax(logits, 1.5)
    sums = protocol._moment_sums(probs, correct)
    for lam in (0.0, 0.3, 0.5, 1.0):
        np.testing.assert_allclose(
            protocol._relu_matrix_from_sums(*sums, lam), detectors.relu_matrix(probs, correct, lam), atol=1e-12
        )
    no_errors = np.ones(len(correct), dtype=bool)
    np.testing.assert_allclose(
        protocol._relu_matrix_from_sums(*protocol._moment_sums(probs, no_errors), 0.5),
        detectors.relu_matrix(probs, no_errors, 0.5),
    )


def _split(data, seed=0, fraction=0.5):
    logits, labels, correct = data
    return protocol.split_indices(len(labels), fraction, seed, stratify=correct)


GRID_T = (0.5, 1.0, 2.0, 10.0)
GRID_L = (0.0, 0.3, 0.5, 0.8, 1.0)


def test_cross_validated_grid_equals_a_direct_refit_per_pair(data):
    logits, labels, correct = data
    tune, ev = _split(data)
    grid = protocol.grid_search(
        logits, labels, tune_idx=tune, eval_idx=ev, temperatures=GRID_T, lambdas=GRID_L, n_folds=4, fold_seed=5
    )
    fold = protocol._stratified_folds(correct[tune], 4, 5)
    for i, t in enumerate(GRID_T):
        for j, lam in enumerate(GRID_L):
            values = []
            for f in range(4):
                fit, held = tune[fold != f], tune[fold == f]
                detector = detectors.RelU(lam=lam, temperature=t).fit(logits[fit], labels[fit])
                values.append(metrics.fpr_at_tpr(detector.score(logits[held]), correct[held]))
                assert len(np.intersect1d(fit, held)) == 0
            assert grid.table[i, j] == pytest.approx(np.mean(values), abs=1e-12)
    best = np.unravel_index(np.argmin(grid.table), grid.table.shape)
    assert (grid.best_temperature, grid.best_lam) == (GRID_T[best[0]], GRID_L[best[1]])
    assert grid.selection == protocol.TUNING_LABEL and grid.n_folds == 4
    assert grid.table.shape == (len(GRID_T), len(GRID_L))


def test_oracle_grid_equals_fit_on_tuning_scored_on_evaluation(data):
    logits, labels, correct = data
    tune, ev = _split(data)
    grid = protocol.grid_search(
        logits,
        labels,
        tune_idx=tune,
        eval_idx=ev,
        temperatures=GRID_T,
        lambdas=GRID_L,
        selection="oracle",
        criterion="auroc",
    )
    for i, t in enumerate(GRID_T):
        for j, lam in enumerate(GRID_L):
            detector = detectors.RelU(lam=lam, temperature=t).fit(logits[tune], labels[tune])
            assert grid.table[i, j] == pytest.approx(metrics.auroc(detector.score(logits[ev]), correct[ev]))
    assert grid.table[GRID_T.index(grid.best_temperature), GRID_L.index(grid.best_lam)] == grid.table.max()
    assert grid.selection == protocol.ORACLE_LABEL == "oracle (selected on the evaluation split)"


@pytest.mark.parametrize("method", ["relu", "doctor", "odin"])
def test_tuning_selection_never_reads_the_evaluation_part(data, method):
    logits, labels, _ = data
    tune, ev = _split(data, seed=2)
    rng = np.random.default_rng(9)
    poisoned = labels.copy()
    poisoned[ev] = rng.integers(0, logits.shape[1], len(ev))  # evaluation labels scrambled
    kwargs = dict(tune_idx=tune, eval_idx=ev, temperatures=GRID_T, lambdas=GRID_L, method=method)
    clean = protocol.grid_search(logits, labels, **kwargs)
    dirty = protocol.grid_search(logits, poisoned, **kwargs)
    np.testing.assert_array_equal(clean.table, dirty.table)
    assert (clean.best_temperature, clean.best_lam) == (dirty.best_temperature, dirty.best_lam)
    # The oracle does read it: the same poisoning changes its table.
    oracle_clean = protocol.grid_search(logits, labels, selection="oracle", **kwargs)
    oracle_dirty = protocol.grid_search(logits, poisoned, selection="oracle", **kwargs)
    assert not np.allclose(oracle_clean.table, oracle_dirty.table)
    if method != "relu":
        assert clean.best_lam is None and clean.lambdas == () and clean.table.shape == (len(GRID_T), 1)


def test_grid_defaults_and_bad_requests(data):
    logits, labels, _ = data
    tune, ev = _split(data)
    assert detectors.TEMPERATURE_GRID == (0.5, 1, 1.1, 1.2, 1.5, 2, 5, 10, 100, 1000)
    assert detectors.LAMBDA_GRID == (0.4, 0.5, 0.6, 0.8, 1.0)  # the paper's; never 0 (= Doctor) by default
    grid = protocol.grid_search(logits, labels, tune_idx=tune, eval_idx=ev)
    assert grid.table.shape == (10, 5)
    with pytest.raises(InputError):
        protocol.grid_search(logits, labels, tune_idx=tune, method="msp")
    with pytest.raises(InputError):
        protocol.grid_search(logits, labels, tune_idx=tune, criterion="accuracy")
    with pytest.raises(InputError):
        protocol.grid_search(logits, labels, tune_idx=tune, selection="oracle")  # no evaluation indices
    with pytest.raises(InputError):  # one error in the tuning part cannot be cross-validated
        few = np.concatenate([np.flatnonzero(data[2])[:50], np.flatnonzero(~data[2])[:1]])
        protocol.grid_search(logits, labels, tune_idx=few)


def test_evaluate_with_selection_is_grid_search_then_fixed_evaluation(data):
    logits, labels, correct = data
    result = protocol.evaluate_with_selection(
        logits, labels, ["msp", "relu", "doctor"], temperatures=GRID_T, lambdas=GRID_L, seeds=2, n_folds=3
    )
    assert result.selection == protocol.TUNING_LABEL
    for s in range(2):
        tune, ev = _split(data, seed=s)
        grid = protocol.grid_search(
            logits, labels, tune_idx=tune, temperatures=GRID_T, lambdas=GRID_L, n_folds=3, fold_seed=s
        )
        assert result.params["relu"][s] == (grid.best_temperature, grid.best_lam)
        detector = detectors.RelU(lam=grid.best_lam, temperature=grid.best_temperature).fit(logits[tune], labels[tune])
        summary = metrics.summary(detector.score(logits[ev]), correct[ev])
        for metric in metric_info.KEYS:
            assert result.per_seed["relu"][metric][s] == pytest.approx(summary[metric], abs=1e-12)
    assert result.params["msp"] == [(None, None), (None, None)]
    oracle = protocol.evaluate_with_selection(
        logits, labels, ["relu"], selection="oracle", temperatures=GRID_T, lambdas=GRID_L, seeds=2
    )
    assert oracle.selection == protocol.ORACLE_LABEL
    # Selecting on the evaluation part can only help the criterion it selects on (per seed, over this grid).
    fixed = protocol.evaluate(logits, labels, ["relu"], temperature=1.0, lam=0.5, seeds=2)
    assert np.all(oracle.per_seed["relu"]["fpr95"] <= fixed.per_seed["relu"]["fpr95"] + 1e-12)


def test_one_softmax_per_temperature_across_detectors_lambdas_and_seeds(data, monkeypatch):
    logits, labels, _ = data
    temperatures_seen = []
    real = detectors.softmax

    def counting(values, temperature=1.0):
        temperatures_seen.append(temperature)
        return real(values, temperature)

    monkeypatch.setattr(detectors, "softmax", counting)
    protocol.evaluate_with_selection(
        logits,
        labels,
        ["msp", "relu", "doctor", "odin", "entropy", "energy"],
        temperatures=GRID_T,
        lambdas=GRID_L,
        seeds=3,
        n_folds=3,
    )
    assert sorted(temperatures_seen) == sorted(GRID_T)  # MSP's T = 1 is in the grid; Energy needs no softmax
    temperatures_seen.clear()
    protocol.evaluate(logits, labels, ["energy"], temperature=3.0, seeds=2)
    assert temperatures_seen == []


def test_default_selection_never_returns_doctor_under_rel_u_s_name(data):
    logits, labels, _ = data
    for selection in ("tuning", "oracle"):
        result = protocol.evaluate_with_selection(
            logits, labels, ["msp", "doctor", "relu"], selection=selection, seeds=3, n_resamples=0
        )
        assert all(lam in detectors.LAMBDA_GRID for _, lam in result.params["relu"])
        assert result.fallback["relu"] == [False] * 3
        assert result.n_settings == {"msp": 1, "doctor": 10, "relu": 50}
        assert result.to_dict()["relu"]["settings_searched"] == 50


def test_lambda_zero_only_when_asked_and_then_labelled_doctor(data):
    logits, labels, _ = data
    result = protocol.evaluate(logits, labels, ["relu", "doctor"], lam=0.0, seeds=2)
    assert result.fallback["relu"] == [True, True]
    assert protocol.FALLBACK_LABEL == "Hamming fallback (= Doctor)"
    assert result.to_dict()["relu"]["hamming_fallback"] is True
    for metric in metric_info.KEYS:  # Rel-U's ranking is Doctor's: every metric equal
        np.testing.assert_allclose(result.per_seed["relu"][metric], result.per_seed["doctor"][metric], atol=1e-12)
    searched = protocol.evaluate_with_selection(logits, labels, ["relu"], lambdas=(0.0, 0.5), seeds=2, n_resamples=0)
    assert searched.n_settings["relu"] == 20


def test_settings_used_are_reported_per_seed_when_selected(data):
    logits, labels, _ = data
    result = protocol.evaluate_with_selection(logits, labels, ["relu", "odin"], seeds=4, n_resamples=0, eps=0.002)
    for key in ("relu", "odin"):
        used = result.settings(key)
        temperatures = [t for t, _ in result.params[key]]
        expected = temperatures[0] if len(set(temperatures)) == 1 else temperatures
        assert used["temperature"] == expected and used["eps"] == 0.002
    assert result.settings("odin")["lambda"] is None


def test_paired_difference_is_the_pooled_bootstrap_of_each_seed_s_evaluation_scores(data):
    logits, labels, correct = data
    result = protocol.evaluate(logits, labels, ["relu", "doctor", "msp"], lam=0.5, seeds=3, n_resamples=300)
    pairs, samples = [], []
    for s in range(3):
        tune, ev = protocol.split_indices(len(labels), 0.5, s, stratify=correct)
        relu = detectors.RelU(lam=0.5).fit(logits[tune], labels[tune])
        pairs.append((relu.score(logits[ev]), detectors.Doctor().score(logits[ev]), correct[ev]))
        samples.append(ev)
    expected = stats.pooled_bootstrap(pairs, sample_ids=samples, n_resamples=300)  # the seeds share samples
    for metric, diff in result.paired.items():
        assert diff.estimate == pytest.approx(expected[metric].estimate, abs=1e-12)
        assert (diff.low, diff.high) == pytest.approx((expected[metric].low, expected[metric].high), abs=1e-12)
    summary = result.paired_summary()
    np.testing.assert_allclose(
        summary["auroc"]["per_seed"], result.per_seed["relu"]["auroc"] - result.per_seed["doctor"]["auroc"]
    )
    assert summary["fpr95"]["verdict"] == result.paired["fpr95"].verdict()
    assert result.to_dict()["relu"]["minus_doctor"] == summary
    assert "minus_doctor" not in result.to_dict()["doctor"]
    assert protocol.evaluate(logits, labels, ["relu", "msp"], seeds=2).paired is None
    with pytest.raises(InputError, match="n_resamples"):
        protocol.evaluate(logits, labels, ["relu", "doctor"], seeds=2, n_resamples=-1)


def test_select_and_fit_refuses_a_misspelt_search_option_even_without_a_search():
    rng = np.random.default_rng(0)
    logits, labels = rng.normal(size=(200, 3)), rng.integers(0, 3, 200)
    for method in ("msp", "relu"):  # MSP searches nothing, Rel-U searches (T, λ)
        with pytest.raises(TypeError, match="n_fold"):
            protocol.select_and_fit(logits, labels, method, tune_idx=np.arange(100), n_fold=3)


def test_samples_with_identical_logits_get_one_score_in_the_protocol(monkeypatch):
    from tests.test_fast_paths import _tied_logits

    logits, labels = _tied_logits(1200, 30, 4)
    twins = ties.twins(logits)
    assert twins is not None and np.unique(twins).size <= 40
    correct = logits.argmax(1) == labels
    rows, fit_rows = np.arange(1, 1200, 2), np.arange(0, 1200, 2)
    # a BLAS product may round the same row differently at different positions (machine-dependent): make it so
    real = detectors.quadratic_score
    monkeypatch.setattr(detectors, "quadratic_score", lambda p, m, r=None: real(p, m, r) + 1e-18 * np.arange(len(p)))

    def split_groups(scores: np.ndarray) -> int:
        return sum(np.unique(scores[twins[rows] == twin]).size > 1 for twin in np.unique(twins[rows]))

    cache = protocol._ProbsCache(logits)
    relu = protocol._fit(detectors.make_detector("relu", temperature=1.5), cache, correct, fit_rows)
    with monkeypatch.context() as off:
        off.setattr(ties, "tied_equal", lambda twins_of, at, values: values)
        assert split_groups(protocol._score(relu, cache, rows)) > 0  # the ties this guards against
    for key in ("relu", "doctor", "msp", "energy"):
        detector = protocol._fit(detectors.make_detector(key, temperature=1.5), cache, correct, fit_rows)
        assert split_groups(protocol._score(detector, cache, rows)) == 0, key
    # the grid search's Rel-U scores too: its criterion is the same with and without the position noise
    grid = ((1.0, 1.5), (0.3, 0.7), fit_rows, [rows[:300], rows[300:]], "auroc", False)
    noisy = protocol._grid_table(correct, protocol._ProbsCache(logits), "relu", *grid)
    monkeypatch.setattr(detectors, "quadratic_score", real)
    np.testing.assert_array_equal(noisy, protocol._grid_table(correct, protocol._ProbsCache(logits), "relu", *grid))
    assert ties.twins(np.random.default_rng(0).normal(size=(300, 30))) is None
