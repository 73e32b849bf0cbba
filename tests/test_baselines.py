"""The four extra baselines (MLP, MC-Dropout, Deep Ensembles, conformal APS), the registry, the baselines study
and its command line, checked against independent computations."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
import torch
from scipy.special import softmax as scipy_softmax
from sklearn.metrics import roc_auc_score
from torch import nn

from relu_core import baselines, cli, detectors, metrics, protocol, stats
from relu_core.errors import Cancelled, InputError


def _planted(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Soft-predictions whose error signal is planted where neither max p nor Gini sees it: errors put their
    second-largest mass on class 0, correct samples on another class; the top probability has one law."""
    rng = np.random.default_rng(seed)
    c = 6
    error = rng.random(n) < 0.3
    top = rng.uniform(0.5, 0.9, n)
    probs = np.zeros((n, c))
    top_class = rng.integers(1, c, n)
    runner = np.where(error, 0, (top_class % (c - 1)) + 1)
    rest = 1.0 - top
    probs[np.arange(n), top_class] = top
    probs[np.arange(n), runner] += 0.8 * rest
    probs += (0.2 * rest / c)[:, None]
    return probs / probs.sum(1, keepdims=True), ~error


# ------------------------------------------------------------------------------------------ registry
def test_registry_declares_every_detector_once() -> None:
    registry = detectors.REGISTRY
    assert list(registry)[:6] == ["msp", "odin", "doctor", "relu", "entropy", "energy"]
    assert set(baselines.BASELINE_KEYS) <= set(registry)
    assert registry["relu"].requires_fit and not registry["doctor"].requires_fit
    assert (
        registry["mlp"].requires_fit and registry["conformal"].requires_fit and registry["conformal_raps"].requires_fit
    )
    assert registry["mc_dropout"].needs_model and registry["deep_ensemble"].needs_model
    assert registry["mc_dropout"].name == "MC-Dropout"
    assert detectors.register_detector(baselines.MLPDetector) is baselines.MLPDetector  # idempotent
    assert registry["mlp"] is baselines.MLPDetector

    class OtherMLP(detectors.Doctor):
        key, name = "mlp", "MLP"

    with pytest.raises(ValueError, match="already registered"):
        detectors.register_detector(OtherMLP)
    # none of the baselines runs through the protocol (they need the model, or labels to fit)
    assert not set(baselines.BASELINE_KEYS) & set(detectors.protocol_keys())


# ------------------------------------------------------------------------------------------ MLP
def test_mlp_beats_chance_on_a_planted_signal_that_doctor_misses() -> None:
    probs, correct = _planted(3000, 0)
    tune, ev = np.arange(1000), np.arange(1000, 3000)
    mlp = baselines.MLPDetector(seed=0).fit_probs(probs[tune], correct[tune])
    u = mlp.score_probs(probs[ev])
    assert 0.0 <= u.min() and u.max() <= 1.0
    auc = roc_auc_score(correct[ev], -u)
    doctor = roc_auc_score(correct[ev], -detectors.gini(probs[ev]))
    assert auc > 0.9 and doctor < 0.6, (auc, doctor)
    assert metrics.auroc(u, correct[ev]) == pytest.approx(auc)
    assert 1 <= mlp.epochs_ <= mlp.max_epochs


def test_mlp_is_deterministic_given_its_seed_and_leaves_global_rng_alone() -> None:
    probs, correct = _planted(600, 1)
    torch.manual_seed(123)
    before = torch.rand(1)
    torch.manual_seed(123)
    a = baselines.MLPDetector(seed=3).fit_probs(probs, correct).score_probs(probs)
    assert torch.rand(1) == before  # training forked the global torch RNG
    b = baselines.MLPDetector(seed=3).fit_probs(probs, correct).score_probs(probs)
    c = baselines.MLPDetector(seed=4).fit_probs(probs, correct).score_probs(probs)
    np.testing.assert_allclose(a, b, rtol=1e-6)
    assert not np.allclose(a, c)


def test_mlp_fit_logits_equals_fit_on_softmax_and_refuses_one_class() -> None:
    rng = np.random.default_rng(0)
    logits = rng.normal(0, 2, (400, 5))
    labels = rng.integers(0, 5, 400)
    labels[:200] = logits[:200].argmax(1)
    a = baselines.MLPDetector(seed=0).fit(logits, labels).score(logits)
    probs = detectors.softmax(logits)
    b = baselines.MLPDetector(seed=0).fit_probs(probs, logits.argmax(1) == labels).score_probs(probs)
    np.testing.assert_allclose(a, b, rtol=1e-5)
    with pytest.raises(InputError):
        baselines.MLPDetector().fit_probs(probs, np.ones(400, bool))
    with pytest.raises(InputError, match="not fitted"):
        baselines.MLPDetector().score_probs(probs)


# ------------------------------------------------------------------------------------------ Deep Ensembles
def test_deep_ensemble_is_msp_of_the_manual_average() -> None:
    rng = np.random.default_rng(0)
    members = [rng.normal(0, 3, (50, 4)) for _ in range(3)]
    manual = (members[0] + members[1] + members[2]) / 3
    expected = -scipy_softmax(manual, axis=1).max(axis=1)
    np.testing.assert_allclose(baselines.DeepEnsemble().score(members), expected, rtol=1e-12)
    np.testing.assert_allclose(baselines.DeepEnsemble().score(np.stack(members)), expected, rtol=1e-12)
    np.testing.assert_allclose(baselines.average_logits(members), manual, rtol=1e-12)
    with pytest.raises(InputError, match="at least 2 models"):
        baselines.DeepEnsemble().score(members[0])
    with pytest.raises(InputError, match="differ in shape"):
        baselines.DeepEnsemble().score([members[0], members[1][:10]])
    with pytest.raises(InputError):
        baselines.DeepEnsemble().score_probs(scipy_softmax(manual, axis=1))


# ------------------------------------------------------------------------------------------ MC-Dropout
def test_mc_dropout_features_are_the_heads_input(digits_run) -> None:
    features, head = baselines.head_features(
        digits_run.model, digits_run.images, digits_run.mean, digits_run.std, device="cpu"
    )
    flat = (digits_run.images.reshape(len(digits_run.images), -1) / 255.0 - 0.5) / 0.5  # Flatten -> Linear
    np.testing.assert_allclose(features, flat, rtol=1e-5, atol=1e-6)
    with torch.no_grad():
        np.testing.assert_allclose(head(torch.from_numpy(features)).numpy(), digits_run.logits, rtol=1e-4, atol=1e-4)


def test_mc_dropout_seeded_differs_from_plain_and_is_unbiased(digits_run) -> None:
    run = digits_run
    args = (run.model, run.images, run.mean, run.std)
    features, head = baselines.head_features(*args, device="cpu")
    a = baselines.MCDropout(seed=0).score_features(features, head)
    b = baselines.MCDropout(seed=0).score_features(*baselines.head_features(*args, device="cpu", batch_size=7))
    c = baselines.MCDropout(seed=1).score_features(features, head)
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)  # same seed, any batch size
    assert not np.allclose(a, c)
    plain = detectors.Entropy().score(run.logits)
    assert not np.allclose(a, plain, rtol=1e-3)
    # p = 0 is the plain model; entropy of its softmax
    np.testing.assert_allclose(baselines.MCDropout(p=0.0).score_features(features, head), plain, rtol=1e-4, atol=1e-6)
    # inverted dropout keeps the head's expectation: the mean of many passes approaches the plain logits
    many = baselines.MCDropout(passes=400, seed=0).head_logits(features[:100], head)
    one_pass = np.abs(many[0] - run.logits[:100]).mean()
    averaged = np.abs(many.mean(0) - run.logits[:100]).mean()
    assert averaged < 0.12 * one_pass, (averaged, one_pass)


def test_mc_dropout_refuses_logits_and_models_without_a_head(digits_run) -> None:
    with pytest.raises(InputError, match="not logits"):
        baselines.MCDropout().score(digits_run.logits)
    with pytest.raises(InputError, match="not logits"):
        baselines.MCDropout().score_probs(detectors.softmax(digits_run.logits))
    run = digits_run
    no_linear = nn.Sequential(nn.Conv2d(1, 10, 8), nn.Flatten())
    with pytest.raises(InputError, match="last nn.Linear"):
        baselines.head_features(no_linear, run.images[:8], run.mean, run.std, device="cpu")
    not_last = nn.Sequential(nn.Flatten(), nn.Linear(64, 10), nn.Tanh())
    with pytest.raises(InputError, match="not its output layer"):
        baselines.head_features(not_last, run.images[:8], run.mean, run.std, device="cpu")
    for bad in ({"p": 1.0}, {"passes": 0}, {"passes": 2.5}):
        with pytest.raises(InputError):
            baselines.MCDropout(**bad)


# ------------------------------------------------------------------------------------------ conformal
def _calibrated(n: int, c: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """Logits and labels drawn from softmax(logits): an exchangeable, calibrated toy problem."""
    logits = rng.normal(0, 2.5, (n, c))
    probs = scipy_softmax(logits, axis=1)
    labels = (probs.cumsum(1) < rng.random(n)[:, None]).sum(1).clip(max=c - 1)
    return logits, labels


CONFORMAL = {
    "APS": lambda coverage, **kw: baselines.ConformalAPS(coverage, **kw),
    "RAPS": lambda coverage, **kw: baselines.ConformalRAPS(coverage, k_reg=2, lam=0.05, **kw),
}


@pytest.mark.parametrize("method", list(CONFORMAL))
@pytest.mark.parametrize("randomized", [True, False])
@pytest.mark.parametrize("coverage", [0.8, 0.9, 0.95])
def test_conformal_sets_reach_their_coverage_on_held_out_data(coverage: float, randomized: bool, method: str) -> None:
    rng = np.random.default_rng(int(coverage * 100))
    n_cal, n_test, repeats = 1000, 5000, 20
    seen = []
    for _ in range(repeats):
        logits, labels = _calibrated(n_cal + n_test, 10, rng)
        detector = CONFORMAL[method](coverage, randomized=randomized, seed=len(seen)).fit(
            logits[:n_cal], labels[:n_cal]
        )
        sets = detector.prediction_sets(detectors.softmax(logits[n_cal:]))
        seen.append(sets[np.arange(n_test), labels[n_cal:]].mean())
    # The mean over calibration draws of the coverage lies in [1 - α, 1 - α + 1/(n + 1)] for the randomised
    # sets (at or above 1 - α for the deterministic ones, which are larger: not checked above); its standard error
    # here is about sqrt(α (1 - α) / n_cal / repeats) <= 0.003, so 3 standard errors of tolerance.
    mean = float(np.mean(seen))
    tolerance = 3 * math.sqrt(coverage * (1 - coverage) / n_cal / repeats) + 3 * math.sqrt(
        coverage * (1 - coverage) / n_test / repeats
    )
    assert coverage - tolerance <= mean, (mean, tolerance)
    if randomized:
        assert mean <= coverage + 1 / (n_cal + 1) + tolerance, (mean, tolerance)


def test_conformal_sets_and_score_against_a_naive_loop() -> None:
    rng = np.random.default_rng(5)
    logits, labels = _calibrated(300, 5, rng)
    probs = detectors.softmax(logits)
    detector = baselines.ConformalAPS(0.9, randomized=False).fit(logits[:200], labels[:200])
    # q: the ceil((n + 1)(1 - α))-th smallest calibration score, the score by a Python loop
    cal_scores = [sum(p for p in probs[i] if p > probs[i, labels[i]]) + probs[i, labels[i]] for i in range(200)]
    assert detector.qhat_ == pytest.approx(np.sort(cal_scores)[math.ceil(201 * 0.9) - 1], rel=1e-12)
    sets = detector.prediction_sets(probs[200:])
    for row, p in zip(sets, probs[200:]):
        naive = {c for c in range(5) if sum(q for q in p if q > p[c]) + p[c] <= detector.qhat_ + 1e-12}
        assert set(np.flatnonzero(row)) == naive
    u = detector.score(logits[200:])
    second = np.sort(probs[200:], axis=1)[:, -2]
    np.testing.assert_allclose(u, np.where(sets.sum(1) > 1, second, 0.0), rtol=1e-12)
    assert ((u > 0) == (detector.set_sizes(probs[200:]) > 1)).all()  # u > 0 is the "more than one label" rule
    # randomised: the mass before c plus u times p_c, u drawn from the documented streams
    randomised = baselines.ConformalAPS(0.9, seed=7).fit(logits[:200], labels[:200])
    u_cal = np.random.default_rng([7, 0]).random(200)
    cal = [sum(p for p in probs[i] if p > probs[i, labels[i]]) + u_cal[i] * probs[i, labels[i]] for i in range(200)]
    assert randomised.qhat_ == pytest.approx(np.sort(cal)[math.ceil(201 * 0.9) - 1], rel=1e-12)
    u_test = np.random.default_rng([7, 1]).random(100)
    for row, p, v in zip(randomised.prediction_sets(probs[200:]), probs[200:], u_test):
        naive = {c for c in range(5) if sum(q for q in p if q > p[c]) + v * p[c] <= randomised.qhat_ + 1e-12}
        assert set(np.flatnonzero(row)) == naive


def test_raps_sets_and_scores_against_a_naive_loop_and_smaller_than_aps() -> None:
    """RAPS (Angelopoulos et al. 2021): E(x, c) = mass ranked before c + u p_c + λ max(0, rank(c) - k_reg), by a
    Python loop; λ = 0 is APS exactly; the penalty keeps sets smaller than APS's at the same coverage."""
    rng = np.random.default_rng(11)
    logits, labels = _calibrated(1200, 8, rng)
    logits = logits / 3.0  # a diffuse model: APS's sets are large, RAPS's penalty matters
    probs = detectors.softmax(logits)
    k_reg, lam = 2, 0.05
    raps = baselines.ConformalRAPS(0.9, seed=3, k_reg=k_reg, lam=lam).fit(logits[:600], labels[:600])

    def naive_score(p, c, v):
        rank = 1 + sum(q > p[c] for q in p)
        return sum(q for q in p if q > p[c]) + v * p[c] + lam * max(0, rank - k_reg)

    u_cal = np.random.default_rng([3, 0]).random(600)
    cal = [naive_score(probs[i], labels[i], u_cal[i]) for i in range(600)]
    assert raps.qhat_ == pytest.approx(np.sort(cal)[math.ceil(601 * 0.9) - 1], rel=1e-12)
    u_test = np.random.default_rng([3, 1]).random(600)
    sets = raps.prediction_sets(probs[600:])
    for row, p, v in zip(sets, probs[600:], u_test):
        assert set(np.flatnonzero(row)) == {c for c in range(8) if naive_score(p, c, v) <= raps.qhat_ + 1e-12}
    second = np.sort(probs[600:], axis=1)[:, -2]
    np.testing.assert_allclose(raps.score(logits[600:]), np.where(sets.sum(1) > 1, second, 0.0), rtol=1e-12)
    aps = baselines.ConformalAPS(0.9, seed=3).fit(logits[:600], labels[:600])
    unpenalised = baselines.ConformalRAPS(0.9, seed=3, lam=0.0).fit(logits[:600], labels[:600])
    assert unpenalised.qhat_ == aps.qhat_
    np.testing.assert_array_equal(unpenalised.prediction_sets(probs[600:]), aps.prediction_sets(probs[600:]))
    assert sets.sum(1).mean() < aps.prediction_sets(probs[600:]).sum(1).mean()
    assert repr(raps).endswith("k_reg=2, lam=0.05)")
    with pytest.raises(InputError, match="k_reg"):
        baselines.ConformalRAPS(k_reg=-1)
    with pytest.raises(InputError, match="λ"):
        baselines.ConformalRAPS(lam=-0.1)


def test_conformal_edge_cases() -> None:
    rng = np.random.default_rng(0)
    logits, labels = _calibrated(5, 4, rng)
    tiny = baselines.ConformalAPS(0.95, randomized=False).fit(logits, labels)  # ceil(6 * 0.95) = 6 > 5: every label
    assert tiny.qhat_ == math.inf and (tiny.set_sizes(detectors.softmax(logits)) == 4).all()
    with pytest.raises(InputError, match="labels"):
        baselines.ConformalAPS().fit_probs(detectors.softmax(logits), np.ones(5, bool))
    with pytest.raises(InputError, match="not calibrated"):
        baselines.ConformalAPS().score(logits)
    for bad in (0.0, 1.0, 1.5):
        with pytest.raises(InputError):
            baselines.ConformalAPS(bad)


# ------------------------------------------------------------------------------------------ the study
def test_study_matches_direct_computations_and_mlp_sees_only_tuning_rows(digits_run, monkeypatch) -> None:
    seen = []
    original = baselines.MLPDetector.fit_probs

    def spy(self, probs, correct):
        seen.append(np.array(probs))
        return original(self, probs, correct)

    monkeypatch.setattr(baselines.MLPDetector, "fit_probs", spy)
    result = baselines.baselines_study(digits_run, seeds=(0, 1), n_resamples=200, device="cpu")
    assert set(result.table["key"]) == {"relu", "doctor", "msp", "mlp", "mc_dropout", "conformal", "conformal_raps"}
    assert "deep_ensemble" in result.skipped
    correct = protocol.correctness(digits_run.logits, digits_run.labels)
    pairs, samples = [], []
    for seed, probs in zip((0, 1), seen):
        tune, ev = protocol.split_indices(len(correct), 0.2, seed, stratify=correct)
        np.testing.assert_allclose(probs, detectors.softmax(digits_run.logits[tune]), rtol=1e-6)  # tuning rows only
        doctor = detectors.Doctor().score(digits_run.logits[ev])
        relu = detectors.RelU(0.5).fit(digits_run.logits[tune], digits_run.labels[tune]).score(digits_run.logits[ev])
        values = result.per_seed[(result.per_seed["seed"] == seed) & (result.per_seed["key"] == "doctor")]
        got = dict(zip(values["metric"], values["value"]))
        assert got["auroc"] == pytest.approx(roc_auc_score(correct[ev], -doctor))
        assert got["fpr95"] == pytest.approx(metrics.fpr_at_tpr(doctor, correct[ev]))
        assert got["aurc"] == pytest.approx(metrics.aurc(doctor, correct[ev]))
        pairs.append((relu, doctor, correct[ev]))
        samples.append(ev)
    expected = stats.pooled_bootstrap(pairs, sample_ids=samples, n_resamples=200)  # the seeds share samples
    assert expected["auroc"] != stats.pooled_bootstrap(pairs, n_resamples=200)["auroc"]
    for metric, diff in expected.items():
        assert result.paired[metric].low == pytest.approx(diff.low)
        assert result.paired[metric].estimate == pytest.approx(diff.estimate)
    row = result.table.set_index("key").loc["doctor"]
    per_seed = result.per_seed[(result.per_seed["key"] == "doctor") & (result.per_seed["metric"] == "auroc")]
    assert row["auroc_mean"] == pytest.approx(per_seed["value"].mean())
    for key in baselines.CONFORMAL_KEYS:
        assert "coverage on the evaluation split" in result.table.set_index("key").loc[key, "note"]
    roc, _ = baselines.study_figures(result)
    names = {t.legendgroup for t in roc.data if t.legendgroup}
    assert {"Rel-U", "Doctor", "MLP", "MC-Dropout", "Conformal (APS)", "Conformal (RAPS)"} <= names
    assert len(result.paired_frame()) == 4  # FPR95, AUROC, AURC, AUGRC


def test_study_with_given_members_and_on_logits_only_runs(digits_run) -> None:
    logits_only = dataclasses.replace(digits_run, images=None, model=None, run_id="logits-only")
    rng = np.random.default_rng(0)
    members = np.stack([digits_run.logits + rng.normal(0, 1, digits_run.logits.shape) for _ in range(3)])
    result = baselines.baselines_study(
        logits_only, keys=["doctor", "deep_ensemble"], seeds=(0,), n_resamples=0, member_logits=members
    )
    correct = protocol.correctness(digits_run.logits, digits_run.labels)
    _, ev = protocol.split_indices(len(correct), 0.2, 0, stratify=correct)
    expected = -scipy_softmax(members.mean(0)[ev], axis=1).max(1)
    got = result.per_seed.query("key == 'deep_ensemble' and metric == 'auroc'")["value"].iloc[0]
    assert got == pytest.approx(roc_auc_score(correct[ev], -expected))
    assert result.paired == {}
    default = baselines.baselines_study(logits_only, seeds=(0,), n_resamples=0)
    assert set(default.skipped) == {"mc_dropout", "deep_ensemble"}
    with pytest.raises(InputError, match="model"):
        baselines.baselines_study(logits_only, keys=["mc_dropout"], seeds=(0,))
    for bad in ({"keys": ["nope"]}, {"tune_fraction": 1.0}, {"seeds": ()}, {"coverage": 0.0}):
        with pytest.raises(InputError):
            baselines.baselines_study(logits_only, **bad)
    with pytest.raises(Cancelled):
        baselines.baselines_study(logits_only, seeds=(0,), cancel=lambda: True)


# ------------------------------------------------------------------------------------------ command line
@pytest.fixture()
def logits_file(tmp_path, digits_run):
    path = tmp_path / "run.npz"
    np.savez(path, logits=digits_run.logits, labels=digits_run.labels)
    return path


def test_cli_writes_table_json_and_figures(logits_file, tmp_path, capsys) -> None:
    out = tmp_path / "out"
    status = cli.main(
        ["baselines", "--logits", str(logits_file), "--seeds", "2", "--bootstrap", "100", "--json", "--out", str(out)]
    )
    captured = capsys.readouterr()
    assert status == 0, captured.err
    data = json.loads(captured.out)
    assert set(data["detectors"]) == {"relu", "doctor", "msp", "mlp", "conformal", "conformal_raps"}
    assert set(data["skipped"]) == {"mc_dropout", "deep_ensemble"} and data["fpr95_positives"] == "correct"
    assert set(data["minus_doctor"]) == {"fpr95", "auroc", "aurc", "augrc"}
    assert sorted(p.name for p in out.iterdir()) == [
        "baselines.csv",
        "baselines_per_seed.csv",
        "risk_coverage.csv",
        "risk_coverage.html",
        "roc.csv",
        "roc.html",
    ]  # written atomically (cache.write_document): no temporary file left, readable by all
    assert all(p.stat().st_mode & 0o777 == 0o644 for p in out.iterdir())
    assert (out / "roc.html").read_text(encoding="utf-8").rstrip().endswith("</html>")
    status = cli.main(["baselines", "--logits", str(logits_file), "--seeds", "1", "--methods", "relu,doctor"])
    text = capsys.readouterr().out
    assert status == 0 and "Rel-U − Doctor" in text and "positives = correctly classified" in text


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--methods", "mc_dropout"], "model"),
        (["--methods", "nope"], "unknown detector"),
        (["--coverage", "1.5"], "--coverage"),
        (["--seeds", "0"], "--seeds"),
        (["--ensemble", "missing.npz,other.npz"], "no such file"),
        (["--dataset", "digits"], "--dataset goes with --model"),
    ],
)
def test_cli_bad_input_exits_2_with_one_line(logits_file, capsys, argv, message) -> None:
    status = cli.main(["baselines", "--logits", str(logits_file), *argv])
    err = capsys.readouterr().err
    assert status == 2 and message in err and err.count("\n") == 1, err


def test_cli_needs_a_source(capsys) -> None:
    assert cli.main(["baselines"]) == 2
    assert capsys.readouterr().err.startswith("error: give either --logits")


# ------------------------------------------------------------------------------------------ offline ensembles
@pytest.mark.slow
def test_offline_ensemble_of_the_shared_cifar_resnets(shared_data) -> None:
    from relu_core import engine, models
    from relu_core.runs import Run

    data = np.load(shared_data / "cifar10" / "cifar10_test_lossless_prefix1017.npz")
    images, labels = data["x"][:96], data["y"][:96].astype(np.int64)
    spec = models.get_spec("resnet20")
    model = models.load_state_dict_file(models.build_model("resnet20"), models.pretrained_weights("resnet20"))
    logits = engine.compute_logits(model, images, mean=spec.mean, std=spec.std, device="cpu")
    run = Run(
        "cifar-prefix-96",
        logits,
        labels,
        tuple(map(str, range(10))),
        images=images,
        model=model.eval(),
        model_name="resnet20",
        mean=spec.mean,
        std=spec.std,
        dataset_name="cifar10-exact-test",
    )
    assert baselines.available_keys(run)["deep_ensemble"] is None
    names, stack = baselines.ensemble_logits(run, device="cpu")
    assert names == baselines.CIFAR_RESNETS and stack.shape == (4, 96, 10)
    np.testing.assert_allclose(stack[0], logits, rtol=1e-4, atol=1e-4)  # the run's own model is a member
    assert (stack.mean(0).argmax(1) == labels).mean() > 0.85
    result = baselines.baselines_study(
        run, keys=["doctor", "deep_ensemble"], seeds=(0,), n_resamples=0, device="cpu", tune_fraction=0.5
    )
    assert "resnet56" in result.table.set_index("key").loc["deep_ensemble", "note"]


@pytest.mark.slow
def test_offline_ensemble_of_small_cnns_trained_with_seeds(monkeypatch) -> None:
    from relu_core import runs

    assert baselines.ENSEMBLE_SEEDS == 5
    monkeypatch.setattr(baselines, "ENSEMBLE_SEEDS", 2)  # two trainings instead of five keep the test short
    run = runs.logits_for("cnn8", None, "digits", device="cpu")
    names, stack = baselines.ensemble_logits(run, device="cpu")
    assert names == ("cnn8 seed 0", "cnn8 seed 1") and stack.shape == (2, *run.logits.shape)
    np.testing.assert_allclose(stack[0], run.logits, rtol=1e-4, atol=1e-4)  # seed 0 is the run's own model
    assert not np.allclose(stack[1], stack[0], atol=1e-2)


def test_mlp_on_a_tiny_tuning_split_names_the_split():
    """--val-fraction 0.002 on 1,017 samples said "1 of the 3 predictions is wrong" without saying which."""
    probs = np.full((3, 2), 0.5)
    with pytest.raises(InputError, match="MLP: the tuning split holds 3 samples, 1 of them misclassified"):
        baselines.MLPDetector().fit_probs(probs, np.array([True, True, False]))
