"""The Explore compute path of ``relu_core.explore`` without Streamlit: no Streamlit import, a setting checked once,
bounded LRU caches keyed on run ids and plain hyperparameters (a run need not be registered), the cached values
equal to an independent computation, one view shared by Explore and the report, the λ-neighbours and the
two-stage ε pass."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from relu_core import explore, runs
from relu_core.errors import InputError
from relu_core.explore import cached, export, views
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
    run_id = run.run_id
    first = cached.probs_at(run, 2.0)
    shifted = np.exp((run.logits - run.logits.max(axis=1, keepdims=True)) / 2.0)
    np.testing.assert_allclose(first, shifted / shifted.sum(axis=1, keepdims=True), rtol=1e-5)
    assert cached.probs_at(run, 2.0) is first  # computed once per (run, T)
    bound = cached.probs_at.cache.bound
    for k in range(bound + 5):
        cached.probs_at(run, 0.1 + k)
    assert len(cached.probs_at.cache) == bound  # least recently used dropped
    assert (run_id, 2.0) not in cached.probs_at.cache
    assert cached.probs_at(run, 2.0) is not first and np.allclose(cached.probs_at(run, 2.0), first)


def test_split_is_stratified_by_correctness_and_the_view_scores_every_detector():
    run_id = runs.register_run(_run(1))
    run = runs.get_run(run_id)
    predictions, correct = cached.correctness(run)
    np.testing.assert_array_equal(correct, predictions == run.labels)
    tune, evaluation = cached.split_for(run, 0.5, 3)
    assert np.intersect1d(tune, evaluation).size == 0 and tune.size + evaluation.size == correct.size
    assert correct[tune].mean() == pytest.approx(correct[evaluation].mean(), abs=0.02)
    view = explore.view(run, explore.Setting(seed=3, detectors=("relu", "doctor", "msp")))
    assert set(view.detectors) == {"relu", "doctor", "msp"} and not view.paired
    msp = -cached.probs_at(run, 1.0).max(axis=1)  # MSP: -max p at T = 1, computed here
    np.testing.assert_allclose(view.detectors["msp"].uncertainty, msp, rtol=1e-5, atol=1e-7)
    np.testing.assert_array_equal(view.eval_idx, evaluation)


def test_view_files_zip_holds_the_exact_dstar_every_chart_the_metrics_and_the_settings():
    import io
    import json
    import zipfile

    import pandas as pd

    from relu_core import detector_comparison, figures, metrics, report

    run = _run(5)
    setting = explore.Setting()
    view = explore.view(run, setting)
    correct = view.correct[view.eval_idx]
    points = {k: metrics.operating_point(d.eval_uncertainty, correct, "tpr", 0.95) for k, d in view.detectors.items()}
    marked = view.marked(setting)
    assert all(marked.points[k].threshold == points[k].threshold for k in points)
    heat, roc, rc = view.heat, marked.roc, marked.rc
    _, cm_fig = explore.confusion_figure(run, 0.5, 0)
    figs = {"dstar": heat, "confusion": cm_fig, "roc": roc, "risk_coverage": rc}
    shared = export.view_figures(run, view, setting)  # the figures Explore draws are the report's and the ZIP's
    assert all(shared[name] is fig for name, fig in figs.items())
    table = pd.DataFrame({"AUROC": [0.8, 0.7]}, index=["Rel-U", "Doctor"])
    settings = {"λ": "0.5", "split seed": 0}
    paired = views.paired_for(view)
    operating = detector_comparison.operating_table({view.detectors[k].name: points[k] for k in points}, correct)
    provenance = report.provenance(run)
    files = export.view_files(
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


# ------------------------------------------------------------------------------- the setting


def test_a_setting_is_checked_once_when_made_and_its_defaults_are_the_apps():
    from relu_core import protocol
    from studio import session

    default = explore.Setting()
    assert (default.temperature, default.lam, default.eps, default.tune_fraction, default.seed) == (1.0, 0.5, 0, 0.5, 0)
    assert default.detectors == protocol.PAIRED and (default.op_kind, default.op_target) == ("tpr", 0.95)
    widgets = session.explore_defaults()  # the page's widgets start from the same values, written once
    assert widgets[session.EX_LAM] == default.lam and widgets[session.EX_TEMPERATURE] == default.temperature
    assert widgets[session.EX_DETECTORS] == list(default.detectors) and widgets[session.EX_OP_TARGET] == 0.95
    for bad, message in [
        ({"temperature": 0}, "temperature"),
        ({"lam": 1.5}, "lambda"),
        ({"lam": "half"}, "lambda"),
        ({"eps": -0.001}, "ε"),
        ({"tune_fraction": 1.0}, "tuning split fraction"),
        ({"seed": -1}, "split seed"),
        ({"seed": True}, "split seed"),
        ({"detectors": ("relu", "bogus")}, "bogus"),
        ({"detectors": ()}, "method"),
        ({"op_kind": "fpr"}, "operating point"),
        ({"op_target": 0.0}, "target"),
    ]:
        with pytest.raises(InputError, match=message) as error:
            explore.Setting(**bad)
        assert "\n" not in str(error.value)
        with pytest.raises(InputError):
            default.replace(**bad)  # a changed setting is checked like a new one
    same = explore.Setting(lam=np.float64(0.5), seed=np.int64(0), detectors=["relu", "doctor"])
    assert same == default and hash(same) == hash(default)  # plain values: one cache key per setting
    assert default.replace(op_kind="coverage", op_target=0.5).scoring() == default


def test_lambda_is_checked_when_the_setting_is_made_not_in_the_fit(monkeypatch):
    from relu_core import detectors

    calls, real = [], detectors.check_lambda
    monkeypatch.setattr(detectors, "check_lambda", lambda lam: calls.append(lam) or real(lam))
    setting = explore.Setting(lam=0.3)
    assert calls == [0.3]
    relu = detectors.RelU(lam=setting.lam)  # the detector's own check, when it is made
    calls.clear()
    run = _run(7)
    probs = cached.probs_at(run, 1.0)
    _, correct = cached.correctness(run)
    relu.fit_probs(probs, correct)
    auto = detectors.RelU(lam="auto")
    calls.clear()
    auto.fit_probs(probs, correct)
    assert calls == [] and auto.lam_ == pytest.approx(correct.mean())  # the fit resolves "auto", checks nothing


# ------------------------------------------------------------------------------- one view, shared


def test_a_view_of_an_unregistered_run_is_computed_once_per_setting(monkeypatch):
    run = _run(8)
    assert run.run_id not in runs.RUNS
    computed, real = [], views.compute
    monkeypatch.setattr(views, "compute", lambda *args: computed.append(args[1]) or real(*args))
    setting = explore.Setting(lam=0.4, detectors=("relu", "doctor", "energy"))
    first = explore.view(run, setting)
    assert run.run_id not in runs.RUNS  # nothing registered on the way
    assert explore.view(run, setting.replace(op_kind="coverage", op_target=0.7)) is first  # marks only
    assert explore.view(run, explore.Setting(lam=0.4, detectors=["relu", "doctor", "energy"])) is first
    assert computed == [setting]
    assert first.marked(setting) is first.marked(setting)  # the figures of an operating point, built once
    assert first.marked(setting.replace(op_target=0.8)).points["relu"].tpr >= 0.8
    assert explore.view(run, setting.replace(lam=0.41)) is not first and len(computed) == 2
    assert (run.run_id, cached.device_key(run), setting.scoring(), None) in views.VIEWS


def test_the_report_is_built_from_the_view_explore_shows(tmp_path, monkeypatch):
    import html
    import re

    from relu_core import cli

    labels = np.random.default_rng(9).integers(0, 4, 400)
    logits = (np.random.default_rng(10).normal(size=(400, 4)) + 2.0 * np.eye(4)[labels]).astype(np.float32)
    path = tmp_path / "run.npz"
    np.savez(path, logits=logits, labels=labels)
    run = runs.load_logits_upload(path.read_bytes(), path.name)
    setting = explore.Setting(temperature=1.5, lam=0.6, seed=2)
    shown = explore.view(run, setting)  # what Explore draws at this setting
    computed, real = [], views.compute
    monkeypatch.setattr(views, "compute", lambda *args: computed.append(args) or real(*args))
    text = explore.report_html(run, explore.view(run, setting), setting)
    assert not computed and shown.paired  # the same view, its interval now with it for the page too
    doctor = re.search(r"<tr><th>Doctor</th>(.*?)</tr>", text).group(1)
    assert re.findall(r'data-value="([^"]+)"', doctor)[1] == repr(shown.detectors["doctor"].summary["auroc"])
    assert html.escape(shown.paired["auroc"].verdict()) in text and "<h2>Operating point</h2>" in text
    out = tmp_path / "report.html"
    args = ["report", "--logits", str(path), "--out", str(out), "--temperature", "1.5", "--lambda", "0.6"]
    assert cli.main([*args, "--seed", "2"]) == 0  # the CLI's report: the same view again, computed no more
    assert not computed and html.escape(shown.paired["auroc"].verdict()) in out.read_text(encoding="utf-8")


def test_the_lambda_neighbours_are_the_views_at_those_lambdas():
    run = _run(11)
    setting = explore.Setting(lam=0.5)
    found = explore.neighbour_views(run, setting)
    assert sorted(found) == [0.49, 0.51]
    assert all(found[lam] is explore.view(run, setting.replace(lam=lam)) for lam in found)
    assert sorted(explore.neighbour_views(run, setting.replace(lam=1.0))) == [0.99]
    assert explore.neighbour_views(run, setting.replace(lam="auto")) == {}
    assert explore.neighbour_views(run, setting.replace(eps=0.001)) == {}  # an ε pass is per λ
    neighbour = found[0.49]
    assert explore.neighbour_paired(neighbour, start=False)  # not started: still to come
    job = explore.paired_job(neighbour)
    assert job.wait(60)
    assert not explore.neighbour_paired(neighbour, start=False) and neighbour.paired == views.paired_for(neighbour)


# ------------------------------------------------------------------------------- the two-stage ε pass


def test_eps_pass_shows_the_subsample_then_the_whole_split_and_remembers_a_failure(monkeypatch):
    import threading

    from relu_core import jobs
    from relu_core.explore import eps

    run = _run(12)
    gates = {None: threading.Event(), "sub": threading.Event()}
    calls = []

    def fake_perturb(run_, setting, subset, progress=None, cancel=None):  # the engine's pass, stood in for
        calls.append((setting.eps, None if subset is None else subset.size))
        gates[None if subset is None else "sub"].wait(60)
        if setting.eps == 0.002:
            raise InputError("the pass failed here")
        _, eval_idx = cached.split_for(run_, setting.tune_fraction, setting.seed)
        rows = eval_idx if subset is None else subset
        scores = {k: -cached.probs_at(run_, 1.0)[rows].max(axis=1) for k in ("relu", "doctor")}
        return eps.Perturbed(setting.eps, subset, scores, eps.eps_job_key(run_.run_id, setting, subset))

    monkeypatch.setattr(eps, "perturb", fake_perturb)
    monkeypatch.setattr(eps, "device_name", lambda: "cpu")
    monkeypatch.setattr(eps, "EPS_SUBSAMPLE", 50)  # 150 evaluation samples: a subsample first
    memory, setting = explore.EpsMemory(), explore.Setting(eps=0.001)
    try:
        first = explore.eps_pass(run, setting, memory, session="s1")
        assert first.setting == setting.replace(eps=0.0) and first.perturbed is None  # never blocks
        assert first.note == "ε = 0.001 is being computed; shown meanwhile: clean scores (ε = 0)"
        assert first.step == "step 1 of 2" and first.job.running and not first.done
        gates["sub"].set()
        assert first.job.wait(60) and first.job.state == jobs.DONE
        second = explore.eps_pass(run, setting, memory, session="s1")
        assert second.setting == setting and second.perturbed.subset.size == 50
        assert second.note == "ε = 0.001 on a subsample of 50 evaluation images" and second.step == "step 2 of 2"
        assert explore.view(run, second.setting, second.perturbed).eval_idx.size == 50  # the metrics' samples
        gates[None].set()
        assert second.job.wait(60) and second.job.state == jobs.DONE
        third = explore.eps_pass(run, setting, memory, session="s1")
        assert third.done and third.job is None and third.note == "ε = 0.001 on the whole evaluation split"
        assert explore.view(run, third.setting, third.perturbed).eval_idx.size == 150
        failing = setting.replace(eps=0.002)
        gates["sub"].clear()  # the failing pass waits until it is let go: no race decides what is read
        pending = explore.eps_pass(run, failing, memory, session="s1")
        assert pending.job is not None and pending.job.running and not pending.failed
        gates["sub"].set()
        assert pending.job.wait(60) and pending.job.state == jobs.FAILED
        tried = len(calls)
        # the very next look says it failed (it used to submit the pass again, replacing the failed job, and saw
        # the failure only when the new attempt failed first: a failing pass was retried for ever, unsaid)
        shown = explore.eps_pass(run, failing, memory, session="s1")
        assert len(calls) == tried and shown.job is None
        assert shown.failed == "the pass failed here" and not shown.done
        assert shown.note == "ε = 0.002 could not be computed; shown meanwhile: ε = 0.001 on the whole evaluation split"
        assert explore.eps_pass(run, failing, memory, session="s1").failed and len(calls) == tried  # not again
        memory.retry()  # unless asked
        gates["sub"].clear()
        again = explore.eps_pass(run, failing, memory, session="s1")
        gates["sub"].set()
        assert again.job is not None and again.job.wait(60) and again.job.state == jobs.FAILED
        again = explore.eps_pass(run, failing, memory, session="s1")
        assert len(calls) == tried + 1 and again.failed and again.job is None
    finally:
        for gate in gates.values():
            gate.set()


def test_the_eps_subsample_keeps_the_errors_share_and_at_least_one(monkeypatch):
    """The ε pass's first stage is stratified by correctness: a plain draw of few samples from an accurate model
    could hold no error, and then no curve or metric is defined."""
    from relu_core import protocol
    from relu_core.explore import eps

    rng = np.random.default_rng(3)
    labels = rng.integers(0, 5, 4000)
    logits = np.eye(5, dtype=np.float32)[labels] * 4 + rng.normal(0, 0.1, (4000, 5)).astype(np.float32)
    wrong = rng.choice(4000, 12, replace=False)  # 0.3 % errors
    logits[wrong] = np.roll(logits[wrong], 1, axis=1)
    run = Run.from_logits(logits, labels, tuple("abcde"))
    monkeypatch.setattr(eps, "device_name", lambda: "cpu")
    monkeypatch.setattr(eps, "EPS_SUBSAMPLE", 50)
    setting = explore.Setting()
    subset = eps.eps_subsample(run, setting)
    _, eval_idx = cached.split_for(run, setting.tune_fraction, setting.seed)
    correct = protocol.correctness(logits, labels)
    assert subset.size == 50 and np.all(np.isin(subset, eval_idx)) and np.all(np.diff(subset) > 0)
    assert 1 <= (~correct[subset]).sum() <= 2  # 50 × 0.3 % rounds to 0: one error kept all the same
    monkeypatch.setattr(eps, "EPS_SUBSAMPLE", 1000)
    subset = eps.eps_subsample(run, setting)
    share = (~correct[eval_idx]).mean()
    assert abs((~correct[subset]).mean() - share) <= 1 / 1000 + 1e-12
