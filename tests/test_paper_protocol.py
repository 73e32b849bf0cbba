"""The paper's protocol (authors' code) and the ladder, checked against a small independent implementation.

The reference below is written from the facts of the authors' code (``shared/reference/paper/README.md``):
numpy softmax, D* from the two second moments (ReLU, zero diagonal, Frobenius norm), Doctor as (1 - g) / g,
ODIN as -max p, scikit-learn's ``roc_curve`` / ``roc_auc_score`` directly, the shuffle with Python's global
``random`` as ``main.py`` does it, and the five-row aggregation with pandas as ``tables.py`` does it.
"""

from __future__ import annotations

import json
import random

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score, roc_curve

from relu_core import cli, metric_info, metrics, paper_protocol, protocol
from relu_core.errors import Cancelled, InputError
from relu_core.runs import Run
from relu_core.studies import ladder


# ----------------------------------------------------------------------------------------------- reference
def ref_softmax(logits: np.ndarray, t: float) -> np.ndarray:
    z = np.asarray(logits, dtype=np.float64) / t  # float64 as the studio (the authors: float32 torch)
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def ref_matrix(probs: np.ndarray, correct: np.ndarray, lam: float) -> np.ndarray:
    pos, neg = probs[correct], probs[~correct]
    m = lam * np.einsum("ij,ik->jk", neg, neg) / len(neg) - (1 - lam) * np.einsum("ij,ik->jk", pos, pos) / len(pos)
    m = np.tril(m, -1)
    m = np.maximum(m + m.T, 0.0)
    if not (m > 0).any():
        m = 1.0 - np.eye(len(m))
    return m / np.linalg.norm(m)


def ref_score(method: str, probs: np.ndarray, matrix: np.ndarray | None = None) -> np.ndarray:
    if method == "relu":
        return np.einsum("ij,jk,ik->i", probs, matrix, probs)
    if method == "doctor":
        g = (probs**2).sum(axis=1)
        return (1 - g) / g
    return -probs.max(axis=1)  # odin, msp


def ref_fpr95(uncertainty: np.ndarray, correct: np.ndarray) -> float:
    """The authors' eval.py: roc_curve(preds != targets, scores), first index with tpr >= 0.95."""
    fprs, tprs, _ = roc_curve(~correct, uncertainty)
    return float(fprs[min(i for i, x in enumerate(tprs) if x >= 0.95)])


def ref_split(n: int, r: int, seed: int):
    random.seed(seed)
    indices = list(range(n))
    random.shuffle(indices)
    n_fit = n // r
    rest = indices[n_fit:]
    return np.array(indices[:n_fit]), np.array(rest[len(rest) // 5 :])


def ref_rows(logits, labels, splits, temperatures, lambdas, methods=("msp", "odin", "doctor", "relu")):
    correct = logits.argmax(1) == labels
    rows = []
    for seed, fit, ev in splits:
        for method in methods:
            grid = (
                [(1.0, None)]
                if method == "msp"
                else [(t, lam) for t in temperatures for lam in (lambdas if method == "relu" else [None])]
            )
            for t, lam in grid:
                probs = ref_softmax(logits, t)
                matrix = ref_matrix(probs[fit], correct[fit], lam) if method == "relu" else None
                u = ref_score(method, probs[ev], matrix)
                rows.append(
                    {
                        "method": method,
                        "temperature": t,
                        "lbd": lam,
                        "seed": seed,
                        "fpr": ref_fpr95(u, correct[ev]),
                        "auc": roc_auc_score(~correct[ev], u),
                        "accuracy": float(np.mean(correct[ev])),
                    }
                )
    return pd.DataFrame(rows)


def ref_table(df: pd.DataFrame, metric: str = "fpr") -> pd.DataFrame:
    """tables.py: sort by (method, metric), keep each method's last five (the best), then the mean and std of
    every column it aggregates (fpr, auc, accuracy) over those same five rows (the committed script's
    ``metric = "fpr"`` selects the rows for every column)."""
    res = df.sort_values(["method", metric], ascending=metric == "auc")
    res = res.groupby("method").tail(5)
    return res.groupby("method").agg({c: ["mean", "std"] for c in ("fpr", "auc", "accuracy")})


def synthetic(n: int = 600, c: int = 4, seed: int = 0, scale: float = 1.5):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, c, n)
    logits = rng.normal(size=(n, c)) + scale * np.eye(c)[labels]
    return logits, labels


# ---------------------------------------------------------------------------------------------------- split
def test_split_arithmetic_and_the_authors_permutation():
    assert paper_protocol.split_sizes(10_000, 10) == (1000, 1800, 7200)
    assert paper_protocol.split_sizes(10_000, 2) == (5000, 1000, 4000)
    assert paper_protocol.split_sizes(10_001, 2) == (5000, 1000, 4001)
    for n, r, seed in ((10_000, 10, 1), (10_000, 2, 7), (1_001, 3, 0)):
        fit, aside, ev = paper_protocol.authors_split(n, r, seed)
        ref_fit, ref_ev = ref_split(n, r, seed)
        np.testing.assert_array_equal(fit, ref_fit)
        np.testing.assert_array_equal(ev, ref_ev)
        assert (len(fit), len(aside), len(ev)) == paper_protocol.split_sizes(n, r)
        together = np.concatenate([fit, aside, ev])
        np.testing.assert_array_equal(np.sort(together), np.arange(n))  # disjoint and covering
    assert not np.array_equal(paper_protocol.authors_split(100, 2, 1)[0], paper_protocol.authors_split(100, 2, 2)[0])


def test_bad_split_options_are_one_line():
    with pytest.raises(InputError, match="ratio"):
        paper_protocol.split_sizes(100, 1)
    with pytest.raises(InputError, match="empty"):
        paper_protocol.authors_split(3, 4, 0)


# --------------------------------------------------------------------------------------------------- FPR95
def test_fpr95_equals_sklearn_thinned_curve_on_tied_scores():
    rng = np.random.default_rng(1)
    checked = 0
    for _ in range(300):
        n = int(rng.integers(30, 200))
        u = rng.integers(0, int(rng.integers(2, 12)), n).astype(float)  # heavy ties
        c = rng.random(n) < rng.uniform(0.2, 0.9)
        if c.all() or not c.any():
            continue
        assert paper_protocol.fpr95(u, c) == pytest.approx(ref_fpr95(u, c), abs=1e-12)
        assert metrics.fpr_at_tpr(u, c, positive="error") <= paper_protocol.fpr95(u, c) + 1e-12
        checked += 1
    assert checked > 200


def test_the_thinned_curve_can_skip_the_crossing_point():
    # 40 errors: 37 alone at the top, then three groups of (1 error, 1 correct) on one straight line, then 10 correct.
    u = np.r_[np.arange(37) + 10.0, 3, 3, 2, 2, 1, 1, np.zeros(10)]
    c = np.r_[np.zeros(37, bool), [False, True] * 3, np.ones(10, bool)]
    full_fpr, full_tpr, _ = roc_curve(~c, u, drop_intermediate=False)
    assert full_fpr[np.argmax(full_tpr >= 0.95)] == pytest.approx(1 / 13)  # the full curve crosses at value 3
    assert metrics.fpr_at_tpr(u, c, positive="error") == pytest.approx(1 / 13)
    assert paper_protocol.fpr95(u, c) == pytest.approx(3 / 13)  # the thinned curve dropped the points at 3 and 2
    assert paper_protocol.fpr95(u, c) == pytest.approx(ref_fpr95(u, c))


def test_fpr95_orientation_higher_uncertainty_is_an_error():
    c = np.array([True] * 50 + [False] * 50)
    u = np.r_[np.zeros(50), np.ones(50)] + np.linspace(0, 0.01, 100)
    assert paper_protocol.fpr95(u, c) == 0.0  # errors scored higher: caught without flagging a correct one
    assert paper_protocol.fpr95(-u, c) == 1.0


def test_roc_curve_with_errors_positive_is_sklearns():
    rng = np.random.default_rng(2)
    u = rng.integers(0, 5, 80).astype(float)
    c = rng.random(80) < 0.6
    for thinned in (True, False):
        ours = metrics.roc_curve(u, c, drop_intermediate=thinned, positive="error")
        theirs = roc_curve(~c, u, drop_intermediate=thinned)
        for a, b in zip(ours, theirs):
            np.testing.assert_allclose(a, b)


# ---------------------------------------------------------------------------------------------------- rows
def test_every_setting_row_matches_the_reference():
    logits, labels = synthetic()
    temps, lams = (0.4, 1.0, 2.0), (0.5, 1.0)
    splits = [(s, *(lambda f, ev: (f, ev))(*ref_split(len(labels), 2, s))) for s in (1, 2)]
    rows = paper_protocol.setting_rows(logits, labels, splits, temperatures=temps, lambdas=lams)
    ref = ref_rows(logits, labels, splits, temps, lams)
    assert len(rows) == len(ref) == 2 * (1 + 3 + 3 + 6)
    np.testing.assert_array_equal(rows.method.astype(str), ref["method"].to_numpy(str))
    np.testing.assert_allclose(rows.values["fpr95"], ref["fpr"], atol=1e-9)
    np.testing.assert_allclose(rows.values["auroc"], ref["auc"], atol=1e-9)
    np.testing.assert_array_equal(rows.seed, ref["seed"])


def test_the_five_row_aggregation_matches_the_authors_table_script():
    logits, labels = synthetic(seed=3)
    temps, lams = paper_protocol.TEMPERATURES, (0.4, 0.5, 1.0)
    splits = [(s, *ref_split(len(labels), 2, s)) for s in (1, 2, 3)]
    rows = paper_protocol.setting_rows(logits, labels, splits, temperatures=temps, lambdas=lams)
    ref = ref_rows(logits, labels, splits, temps, lams)
    # the committed script: the five lowest-FPR rows, every column read at them (the default)
    by_fpr = ref_table(ref, "fpr")
    for metric, ref_metric in (("fpr95", "fpr"), ("auroc", "auc"), ("accuracy", "accuracy")):
        agg = paper_protocol.aggregate(rows, metric)
        for method in ("odin", "doctor", "relu"):
            assert agg[method].selected_by == "fpr95"
            assert agg[method].mean == pytest.approx(by_fpr.loc[method, (ref_metric, "mean")], abs=1e-9)
            assert agg[method].std == pytest.approx(by_fpr.loc[method, (ref_metric, "std")], abs=1e-9)
    # the option: each metric its own five best (the script with its metric line edited)
    for metric, ref_metric in (("fpr95", "fpr"), ("auroc", "auc")):
        agg = paper_protocol.aggregate(rows, metric, select_by=None)
        table = ref_table(ref, ref_metric)
        for method in ("odin", "doctor", "relu"):
            assert agg[method].mean == pytest.approx(table.loc[method, (ref_metric, "mean")], abs=1e-9)
            assert agg[method].std == pytest.approx(table.loc[method, (ref_metric, "std")], abs=1e-9)
            assert len(agg[method].rows) == 5
        assert np.isnan(table.loc["msp", (ref_metric, "std")]) or agg["msp"].std == pytest.approx(
            table.loc["msp", (ref_metric, "std")], abs=1e-9
        )


def test_ties_at_the_fifth_place_go_to_the_last_rows_as_pandas_tail_does():
    fpr = np.array([0.3, 0.1, 0.2, 0.2, 0.2, 0.5, 0.1, 0.2, 0.4])
    auc = np.arange(fpr.size) / 10.0  # tells the rows apart
    rows = paper_protocol.Rows(
        method=np.array(["relu"] * fpr.size, dtype=object),
        temperature=np.ones(fpr.size),
        eps=np.zeros(fpr.size),
        lam=np.full(fpr.size, 0.5),
        seed=np.arange(fpr.size),
        fallback=np.zeros(fpr.size, bool),
        accuracy=np.ones(fpr.size),
        values={"fpr95": fpr, "auroc": auc, "aurc": fpr},
    )
    kept = paper_protocol.aggregate(rows, "fpr95")["relu"].rows
    df = pd.DataFrame({"method": "relu", "fpr": fpr, "auc": auc})
    tail = df.sort_values(["method", "fpr"], ascending=False).groupby("method").tail(5)
    assert sorted(kept) == sorted(tail.index.tolist())
    assert float(np.mean(auc[list(kept)])) == pytest.approx(tail["auc"].mean())


def test_the_protocol_end_to_end_equals_the_reference():
    logits, labels = synthetic(n=500, seed=4)
    result = paper_protocol.evaluate(logits, labels, r=2, seeds=3, lambdas=(0.5, 0.8))
    splits = [(s, *ref_split(500, 2, s)) for s in (1, 2, 3)]
    table = ref_table(ref_rows(logits, labels, splits, paper_protocol.TEMPERATURES, (0.5, 0.8)))
    expected = table.loc["relu", ("fpr", "mean")] - table.loc["doctor", ("fpr", "mean")]
    assert result.difference("fpr95") == pytest.approx(expected, abs=1e-9)
    for metric, ref_metric in (("auroc", "auc"), ("accuracy", "accuracy")):  # read at the lowest-FPR rows
        expected = table.loc["relu", (ref_metric, "mean")] - table.loc["doctor", (ref_metric, "mean")]
        assert result.difference(metric) == pytest.approx(expected, abs=1e-9)
    for key in ("doctor", "relu"):  # every metric's mean over the same five rows
        assert {result.aggregates[m][key].rows for m in paper_protocol.REPORTED} == {
            result.aggregates["fpr95"][key].rows
        }
    own = paper_protocol.evaluate(logits, labels, r=2, seeds=3, lambdas=(0.5, 0.8), select_by=None)
    by_auc = ref_table(ref_rows(logits, labels, splits, paper_protocol.TEMPERATURES, (0.5, 0.8)), "auc")
    expected = by_auc.loc["relu", ("auc", "mean")] - by_auc.loc["doctor", ("auc", "mean")]
    assert own.difference("auroc") == pytest.approx(expected, abs=1e-9)
    assert "edited" in own.to_dict()["selection"] and "as committed" in result.to_dict()["selection"]
    record = result.to_dict()
    json.dumps(record, allow_nan=False)
    assert record["protocol"] == paper_protocol.LABEL
    assert record["rows_per_method"] == {"msp": 3, "odin": 33, "doctor": 33, "relu": 66}
    assert "no confidence interval" in record["interval"]
    assert record["seeds"] == [1, 2, 3] and any("best.pth" in n for n in record["notes"])
    assert any("λ over 0.5, 0.8" in n and "unknown" in n for n in record["notes"])


def test_eps_needs_a_model_and_calls_one_backward_pass_per_fitted_detector():
    logits, labels = synthetic(n=300, seed=5)
    with pytest.raises(InputError, match="logits only"):
        paper_protocol.evaluate(logits, labels, seeds=1, epsilons=(0.0, 0.001))
    calls = []

    def perturbation(detector, rows, epsilons):
        calls.append((detector.key, len(rows), tuple(epsilons)))
        clean = np.asarray(detector.score(logits[rows]), dtype=np.float64)
        return np.stack([clean + 0.0 * e for e in epsilons])  # a stand-in: the clean scores at every ε

    result = paper_protocol.evaluate(
        logits,
        labels,
        seeds=1,
        temperatures=(1.0, 2.0),
        lambdas=(0.5, 1.0),
        epsilons=(0.0, 0.001, 0.002),
        perturbation=perturbation,
    )
    # one call per (T, λ) of each method that pre-processes (MSP runs at ε = 0 only), every ε > 0 at once
    assert sorted(calls) == sorted(
        [("odin", 120, (0.001, 0.002))] * 2
        + [("doctor", 120, (0.001, 0.002))] * 2
        + [("relu", 120, (0.001, 0.002))] * 4
    )
    assert len(result.rows) == 1 + 2 * 3 + 2 * 3 + 4 * 3
    clean = result.rows.eps == 0
    for key in ("odin", "doctor", "relu"):
        at = result.rows.method == key
        for e in (0.001, 0.002):
            np.testing.assert_allclose(
                result.rows.values["fpr95"][at & clean], result.rows.values["fpr95"][at & (result.rows.eps == e)]
            )


def test_only_the_papers_methods():
    logits, labels = synthetic(n=200)
    with pytest.raises(InputError, match="paper's protocol runs"):
        paper_protocol.evaluate(logits, labels, seeds=1, methods=["entropy"])


# ---------------------------------------------------------------------------------------------------- ladder
def _run(logits, labels) -> Run:
    return Run("test-ladder", logits, labels, tuple("abcd"), source="synthetic (test)")


def test_the_ladder_rungs_agree_with_the_reference():
    logits, labels = synthetic(n=800, seed=6)
    result = ladder.run_study(_run(logits, labels), seeds=2, n_resamples=50, use_cache=False)
    table = result.tables["ladder"]
    assert table["rung"].tolist() == [1, 2, 3, 4, 5, 6]
    assert all(table["changed"].str.len() > 10)
    assert np.isfinite(table.loc[table["rung"] <= 4, ["fpr95_low", "fpr95_high"]].to_numpy()).all()
    assert table.loc[table["rung"] >= 5, ["fpr95_low", "fpr95_high"]].isna().all().all()
    assert all("no interval" in v for v in table.loc[table["rung"] >= 5, "verdict"])
    rungs = result.settings["rungs"]
    assert [r["rung"] for r in rungs] == [1, 2, 3, 4, 5, 6] and rungs[4]["interval"] == paper_protocol.NO_INTERVAL

    correct = logits.argmax(1) == labels
    lams = paper_protocol.LAMBDAS
    # rung 5: every (T, λ) row on the studio's stratified splits, five best per detector
    studio = [(s, t, e) for s, t, e in protocol.seeded_splits(correct, 0.5, (0, 1))]
    ref5 = ref_table(ref_rows(logits, labels, studio, paper_protocol.TEMPERATURES, lams, ("doctor", "relu")))
    # rung 6: the same on the authors' split (r = 2, seeds numbered 1..S as the authors do)
    authors = [(s, *ref_split(800, 2, s)) for s in (1, 2)]
    ref6 = ref_table(ref_rows(logits, labels, authors, paper_protocol.TEMPERATURES, lams, ("doctor", "relu")))
    by_rung = table.set_index("rung")
    for rung, ref in ((5, ref5), (6, ref6)):  # AUROC read at the five lowest-FPR rows (tables.py as committed)
        for m, ref_m in (("fpr95", "fpr"), ("auroc", "auc")):
            expected = ref.loc["relu", (ref_m, "mean")] - ref.loc["doctor", (ref_m, "mean")]
            assert by_rung.loc[rung, m] == pytest.approx(expected, abs=1e-9)
        assert "not paired" in by_rung.loc[rung, "verdict"]
    assert rungs[5]["seeds"] == [1, 2] and result.settings["rung6_seeds"] == [1, 2]
    assert "one model" in rungs[5]["changed"] and "best.pth" in rungs[5]["model"]
    assert "0.4, 0.5, 0.6, 0.8, 1" in rungs[4]["changed"] and "unknown" in rungs[4]["changed"]
    assert rungs[4]["relu"]["accuracy"]["mean"] == pytest.approx(ref5.loc["relu", ("accuracy", "mean")])
    # rung 4: the interval is kept, labelled as conditional on settings chosen on the same samples
    assert "not a valid interval" in by_rung.loc[4, "verdict"] and "not a valid interval" in rungs[3]["interval"]
    assert "not a valid interval" in ladder.ladder_text(result)
    curves = result.curves[(result.curves["x"] >= 5) & (result.curves["metric"] == "fpr95")]
    assert curves["n_seeds"].between(1, 2).all()  # distinct seeds among the five rows, not the row count

    # rungs 2-4 read FPR95 with errors positive (every threshold) at the settings they selected
    per_seed = result.per_seed
    for rung in (2, 3, 4):
        temps = rungs[rung - 1]["settings"]["doctor"]["temperature"]
        temps = temps if isinstance(temps, list) else [temps, temps]
        for i, (seed, _tune, ev) in enumerate(studio):
            u = ref_score("doctor", ref_softmax(logits[ev], temps[i]))
            fpr, tpr, _ = roc_curve(~correct[ev], u, drop_intermediate=False)
            got = per_seed[
                (per_seed["x"] == rung)
                & (per_seed["detector"] == "Doctor")
                & (per_seed["metric"] == "fpr95")
                & (per_seed["seed"] == seed)
            ]["value"].item()
            assert got == pytest.approx(fpr[np.argmax(tpr >= 0.95)], abs=1e-9)
    # rung 3 onwards searches the authors' T grid; rung 1 the studio's
    assert rungs[2]["settings"]["relu"]["settings_searched"] == len(paper_protocol.TEMPERATURES) * len(lams)
    assert rungs[0]["settings"]["relu"]["settings_searched"] != rungs[2]["settings"]["relu"]["settings_searched"]


def test_the_cli_prints_one_object_a_rung(tmp_path, capsys):
    logits, labels = synthetic(n=500, seed=7)
    path = tmp_path / "run.npz"
    np.savez(path, logits=logits, labels=labels)
    rc = cli.main(["study", "paper-protocol", "--logits", str(path), "--seeds", "2", "--bootstrap", "0", "--json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert [r["rung"] for r in out["rungs"]] == [1, 2, 3, 4, 5, 6]
    assert out["rungs"][5]["relu_minus_doctor"]["fpr95"]["interval"] is None
    assert "not a valid interval" in out["rungs"][3]["interval"] and out["rungs"][5]["seeds"] == [1, 2]
    rc = cli.main(["study", "paper-protocol", "--logits", str(path), "--seeds", "2", "--bootstrap", "0"])
    text = capsys.readouterr().out
    assert rc == 0 and "6. authors' split" in text and "no interval" in text
    assert "not a valid interval for the selection" in text and "one model" in text
    assert cli.main(["study", "paper-protocol", "--logits", str(path), "--val-fraction", "2"]) == 2


def test_evaluate_protocol_paper_equals_the_library(tmp_path, capsys):
    logits, labels = synthetic(n=500, seed=8)
    path = tmp_path / "run.npz"
    np.savez(path, logits=logits, labels=labels)
    rc = cli.main(["evaluate", "--logits", str(path), "--protocol", "paper", "--seeds", "2", "--r", "10", "--json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    expected = paper_protocol.evaluate(logits, labels, r=10, seeds=2)
    assert out["relu_minus_doctor"]["fpr95"] == pytest.approx(expected.difference("fpr95"))
    assert (out["fit"], out["set_aside"], out["evaluated"]) == (50, 90, 360)
    assert out["seeds"] == [1, 2] and "as committed" in out["selection"]
    assert out["relu_minus_doctor"]["auroc"] == pytest.approx(expected.difference("auroc"))
    rc = cli.main(["evaluate", "--logits", str(path), "--protocol", "paper", "--seeds", "2", "--lambda-grid", "0.5"])
    text = capsys.readouterr().out
    assert rc == 0 and "; λ 0.5\n" in text and "accuracy" in text and "lowest FPR95" in text
    expected = paper_protocol.evaluate(logits, labels, r=2, seeds=2, lambdas=(0.5,))
    assert expected.to_dict()["rows_per_method"]["relu"] == expected.to_dict()["rows_per_method"]["doctor"]
    label = metric_info.get("fpr95").label
    assert f"{label} {metric_info.signed(expected.difference('fpr95'))}" in text  # the λ = 0.5 rows
    # --t-grid is honoured (it was silently dropped): the rows per method follow the given grid
    rc = cli.main(["evaluate", "--logits", str(path), "--protocol", "paper", "--seeds", "2", "--t-grid", "1", "--json"])
    one_t = json.loads(capsys.readouterr().out)
    small = paper_protocol.evaluate(logits, labels, r=2, seeds=2, temperatures=(1.0,))
    assert rc == 0 and one_t["rows_per_method"] == small.to_dict()["rows_per_method"]
    assert one_t["rows_per_method"]["doctor"] < expected.to_dict()["rows_per_method"]["doctor"] * 11
    assert cli.main(["evaluate", "--logits", str(path), "--protocol", "paper", "--lambda-grid", "2"]) == 2
    assert cli.main(["evaluate", "--logits", str(path), "--protocol", "paper", "--select"]) == 2
    assert cli.main(["evaluate", "--logits", str(path), "--protocol", "paper", "--r", "1"]) == 2
    assert cli.main(["evaluate", "--logits", str(path), "--protocol", "paper", "--eps-grid", "paper"]) == 2
    assert "logits only" in capsys.readouterr().err
    assert cli.main(["evaluate", "--logits", str(path), "--protocol", "honest", "--seeds", "2", "--json"]) == 0
    honest = json.loads(capsys.readouterr().out)
    assert "tuning" in honest["relu"]["selection"]


@pytest.mark.slow  # AppTest of a whole page
def test_the_studies_page_runs_the_ladder_as_a_study(pages):
    from apptest_charts import charts
    from test_studies import synthetic_run

    at = pages.open("Studies.py", synthetic_run(), study_bootstrap=50, study_seeds=2, study_name="paper-protocol")
    pages.ok(at)
    at.button(key="study_run").click().run()
    pages.ok(at)
    titles = [chart["layout"]["title"]["text"] for chart in charts(at)]
    assert titles == ["Rel-U − Doctor, FPR at 95 % TPR, rung by rung (below 0: Rel-U better)"]
    ladder_frame = next(df.value for df in at.dataframe if "what it changed" in df.value.columns)
    assert [r.split(".")[0] for r in ladder_frame["rung"]] == ["1", "2", "3", "4", "5", "6"]
    assert ladder_frame["Rel-U − Doctor FPR95 (points)"].iloc[5].endswith("(no interval)")
    assert any("no interval is valid" in c.value for c in at.caption)
    assert any(ladder.ORACLE_INTERVAL in c.value for c in at.caption)
    assert ladder.ORACLE_INTERVAL in ladder_frame["FPR95 verdict"].iloc[3]
    assert ladder_frame["FPR95 verdict"].iloc[5].endswith("(no valid interval)")
    # everything in points, as the chart's axis
    assert "(points)" in charts(at)[0]["layout"]["yaxis"]["title"]["text"]
    assert list(ladder_frame.columns)[-1] == "what it changed"  # the long text last, the numbers in view
    assert not any("rungs:" in c.value or "not the shared T" in c.value for c in at.caption)  # a result, not a setting


def test_the_objectives_tables_paper_column_is_the_paper_protocol():
    from relu_core.studies import objectives

    logits, labels = synthetic(n=400, seed=9)
    run = Run("test-objectives-paper", logits, labels, tuple("abcd"))
    summary = objectives.paper_summary(run, (0, 1, 2), 0.5)
    expected = paper_protocol.evaluate(logits, labels, r=2, seeds=(1, 2, 3))  # three seeds, numbered from 1
    assert summary["seeds"] == [1, 2, 3]
    assert summary["relu_minus_doctor"]["fpr95"] == pytest.approx(expected.difference("fpr95"))
    assert objectives.paper_summary(run, (0, 1, 2), 0.5) == summary  # read back from the cache
    assert objectives._paper_difference(summary).endswith("(no interval)")


def test_the_scorecards_sentence_on_the_papers_procedure():
    from relu_core import jobs, scorecard

    logits, labels = synthetic(n=600, seed=10)
    run = Run("test-scorecard-paper", logits, labels, tuple("abcd"))
    shared = scorecard.Shared(seeds=2)
    assert scorecard.paper_sentence(run, shared) == ""
    scorecard.start_paper(run, shared)
    job = jobs.MANAGER.get(scorecard.job_key(run, scorecard.PAPER, shared))
    assert job is not None and job.wait(timeout=600)
    sentence = scorecard.paper_sentence(run, shared)
    table = ladder.run_study(run, seeds=2).tables["ladder"].set_index("rung")  # the job's result, from the cache
    paper_points = -100 * table.loc[6, "fpr95"]
    assert sentence.startswith("The paper's procedure would report")
    assert f"{abs(paper_points):.1f} points ahead" in sentence or "no difference" in sentence
    assert f"{100 * table.loc[1, 'fpr95']:+.1f} points [" in sentence


def _reference_fpr(u: np.ndarray, correct: np.ndarray, errors: bool) -> float:
    fpr, tpr, _ = (
        roc_curve(~correct, u, drop_intermediate=False) if errors else roc_curve(correct, -u, drop_intermediate=False)
    )
    return float(fpr[np.argmax(tpr >= 0.95)])


@pytest.mark.slow  # a real model's logits (1,017 lossless CIFAR-10 test images through the pretrained ResNet-20)
def test_the_ladder_on_a_pretrained_resnet_agrees_with_the_reference(shared_data):
    from relu_core import runs

    run = runs.logits_for("resnet20", None, "cifar10-exact", device="cpu")
    logits, labels = np.asarray(run.logits), np.asarray(run.labels)
    seeds = (0, 1, 2)
    result = ladder.run_study(run, seeds=seeds, n_resamples=0, use_cache=False)
    table = result.tables["ladder"].set_index("rung")
    correct = logits.argmax(1) == labels
    lams = paper_protocol.LAMBDAS
    studio = list(protocol.seeded_splits(correct, 0.5, seeds))
    authors = [(s, *ref_split(len(labels), 2, s)) for s in paper_protocol.paper_seeds(len(seeds))]
    for rung, splits in ((5, studio), (6, authors)):
        ref = ref_table(ref_rows(logits, labels, splits, paper_protocol.TEMPERATURES, lams, ("doctor", "relu")))
        for m, ref_m in (("fpr95", "fpr"), ("auroc", "auc")):
            expected = ref.loc["relu", (ref_m, "mean")] - ref.loc["doctor", (ref_m, "mean")]
            assert table.loc[rung, m] == pytest.approx(expected, abs=1e-9)
    per_seed = result.per_seed.set_index(["x", "detector", "metric", "seed"])["value"]
    for rung in (1, 2, 3, 4):
        used = result.settings["rungs"][rung - 1]["settings"]
        for key, label in (("doctor", "Doctor"), ("relu", "Rel-U")):
            temps, lams_used = used[key]["temperature"], used[key]["lambda"]
            temps = temps if isinstance(temps, list) else [temps] * len(seeds)
            lams_used = lams_used if isinstance(lams_used, list) else [lams_used] * len(seeds)
            for i, (seed, tune, ev) in enumerate(studio):
                probs = ref_softmax(logits, temps[i])
                matrix = ref_matrix(probs[tune], correct[tune], lams_used[i]) if key == "relu" else None
                expected = _reference_fpr(ref_score(key, probs[ev], matrix), correct[ev], errors=rung >= 2)
                assert per_seed[(float(rung), label, "fpr95", seed)] == pytest.approx(expected, abs=1e-9)


def test_the_eps_path_runs_in_float32_in_the_ladder(monkeypatch):
    from relu_core import preprocessing

    logits, labels = synthetic(n=300, seed=12)
    asked = []

    def fake_make_perturbation(run, **engine_kw):
        asked.append(engine_kw.get("precision"))

        def perturbation(detector, rows, epsilons):
            clean = np.asarray(detector.score(run.logits[rows]), dtype=np.float64)
            return np.stack([clean for _ in epsilons])

        return perturbation

    monkeypatch.setattr(preprocessing, "make_perturbation", fake_make_perturbation)
    result = ladder.run_study(_run(logits, labels), seeds=1, n_resamples=0, epsilons=(0.0, 0.001), use_cache=False)
    assert asked == ["fp32"] and paper_protocol.PRECISION == "fp32"
    assert any("fp32" in n for n in result.notes)


def test_the_ladder_reports_and_cancels_inside_the_eps_passes(monkeypatch):
    """An ε pass over a CIFAR-10 split takes minutes on a CPU: its batches move the ladder's message (naming the
    rung) and the ladder's cancel stops it mid-pass, not only between rungs."""
    from relu_core import preprocessing

    logits, labels = synthetic(n=300, seed=12)
    inside = {"pass": False}

    def fake_make_perturbation(run, **engine_kw):
        def perturbation(detector, rows, epsilons):
            engine_kw["progress"](1, 2, "perturbed 1/2")
            inside["pass"] = True
            cancel = engine_kw["cancel"]  # the ladder's own (None when it was given none)
            if cancel is not None and cancel():
                raise Cancelled("perturbed cancelled")
            inside["pass"] = False
            clean = np.asarray(detector.score(run.logits[rows]), dtype=np.float64)
            return np.stack([clean for _ in epsilons])

        return perturbation

    monkeypatch.setattr(preprocessing, "make_perturbation", fake_make_perturbation)
    messages = []
    options = {"seeds": 1, "n_resamples": 0, "epsilons": (0.0, 0.001), "use_cache": False}
    result = ladder.run_study(_run(logits, labels), progress=lambda done, total, m: messages.append(m), **options)
    eps_rungs = {m.split(":")[0] for m in messages if "ε pass, perturbed 1/2" in m}
    assert eps_rungs == {"rung 3", "rung 4", "rung 5", "rung 6"}  # rungs 1-2 are ε = 0: no pass
    changed = [rung["changed"] for rung in result.settings["rungs"]]  # each rung says that ε is in its settings
    assert "ε over 0, 0.001" in changed[2] and "T, λ and ε selected" in changed[3]
    assert "every (T, λ, ε) × seed row" in changed[4] and "ε" not in changed[0] + changed[1]

    with pytest.raises(Cancelled):
        ladder.run_study(_run(logits, labels), cancel=lambda: inside["pass"], **options)


def test_the_ladder_refuses_eps_on_logits_in_one_line():
    logits, labels = synthetic(n=300, seed=11)
    with pytest.raises(InputError, match="logits"):
        ladder.run_study(_run(logits, labels), seeds=2, n_resamples=0, epsilons=(0.0, 0.001))


@pytest.mark.slow  # input pre-processing through a small model
def test_the_ladder_searches_eps_from_rung_3_on_a_model_run(digits_run):
    result = ladder.run_study(digits_run, seeds=2, n_resamples=0, epsilons=(0.0, 0.002), use_cache=False)
    rungs = result.settings["rungs"]
    assert "ε over 0, 0.002" in rungs[2]["changed"]
    assert all(rungs[k]["settings"]["relu"]["eps"] == 0.0 for k in (0, 1))  # rungs 1-2: no ε
    searched = rungs[2]["settings"]["relu"]["settings_searched"]
    assert searched == len(paper_protocol.TEMPERATURES) * len(paper_protocol.LAMBDAS) * 2
    assert (
        rungs[4]["rows_per_detector"]["relu"] == 2 * len(paper_protocol.TEMPERATURES) * len(paper_protocol.LAMBDAS) * 2
    )
    assert result.settings["eps"] == [0.0, 0.002]


def test_the_scorecard_leaves_a_large_run_to_the_studies_page():
    from relu_core import jobs, scorecard

    run = Run("test-scorecard-large", np.zeros((2, 40_000)), np.array([0, 1]), ("a", "b"))  # 2 x 40,000² > 1e9
    shared = scorecard.Shared(seeds=2)
    scorecard.start_paper(run, shared)
    assert jobs.MANAGER.get(scorecard.job_key(run, scorecard.PAPER, shared)) is None
    assert "Studies page" in scorecard.paper_sentence(run, shared)
