"""The training-objectives table (relu_core.studies.objectives, the paper's Table 1): each row is the protocol run
directly on that objective's model, the best FPR95 is marked, bad choices are refused before any training; the
``study objectives`` command; the page under AppTest."""

from __future__ import annotations

import json

import numpy as np
import pytest
from apptest_pages import OBJECTIVES_PAGE, app

from relu_core import cli, protocol, stats
from relu_core.errors import InputError
from relu_core.studies import objectives

pytestmark = pytest.mark.slow  # trains small CNNs on digits (about a second each)

CHOSEN = ("cross-entropy", "logitnorm")


@pytest.fixture(scope="module")
def study():
    return objectives.objectives_study("digits", "cnn8", objectives=CHOSEN, epochs=1, seeds=2, n_resamples=100)


def test_each_row_is_the_protocol_on_that_objectives_model(study):
    assert [row.objective for row in study.rows] == list(CHOSEN)
    for row in study.rows:
        again = objectives.objective_run("digits", "cnn8", row.objective, epochs=1)
        assert again.run_id == row.run.run_id  # trained once, then read from the cache
        direct = protocol.evaluate_with_selection(
            row.run.logits, row.run.labels, objectives.TABLE_KEYS, seeds=2, tune_fraction=0.5, n_resamples=100
        )
        for key in objectives.TABLE_KEYS:
            np.testing.assert_allclose(row.result.per_seed[key]["fpr95"], direct.per_seed[key]["fpr95"])
        assert row.result.paired["fpr95"].low == pytest.approx(direct.paired["fpr95"].low)
        assert row.accuracy == pytest.approx(np.mean(row.run.logits.argmax(1) == row.run.labels))
        assert row.objective in row.run.source
    assert study.rows[0].run.run_id != study.rows[1].run.run_id


def test_each_row_also_holds_the_oracle_selection_labelled_so(study):
    for row in study.rows:
        direct = protocol.evaluate_with_selection(
            row.run.logits,
            row.run.labels,
            objectives.TABLE_KEYS,
            seeds=2,
            tune_fraction=0.5,
            n_resamples=100,
            selection="oracle",
        )
        assert row.oracle.selection == protocol.ORACLE_LABEL
        for key in objectives.TABLE_KEYS:
            np.testing.assert_allclose(row.oracle.per_seed[key]["fpr95"], direct.per_seed[key]["fpr95"])
        # the evaluation split chose: never worse for Rel-U on that split than choosing inside the tuning split
        assert row.oracle.mean("relu", "fpr95") <= row.result.mean("relu", "fpr95") + 1e-12
    assert "Rel-U − Doctor FPR95, oracle" in study.table().columns
    assert study.to_dict()["objectives"]["logitnorm"]["oracle"]["selection"] == protocol.ORACLE_LABEL


def test_table_marks_the_best_fpr95_and_states_rel_u_minus_doctor(study):
    table = study.table()
    assert list(table["objective"]) == list(CHOSEN)
    fpr_columns = [c for c in table.columns if c.endswith("FPR95") and "−" not in c]
    assert fpr_columns == ["MSP FPR95", "ODIN FPR95", "Doctor FPR95", "Rel-U FPR95"]
    for (_, line), row in zip(table.iterrows(), study.rows, strict=True):
        means = {k: row.result.mean(k, "fpr95") for k in objectives.TABLE_KEYS}
        best = min(means.values())
        for key, column in zip(objectives.TABLE_KEYS, fpr_columns, strict=True):
            assert line[column].endswith(" *") == (means[key] == best)
        assert line["verdict"].startswith("FPR95: ")
        assert "95 % CI" in line["Rel-U − Doctor FPR95"]
        # T and λ selected per seed: the interval says it holds for the selected settings, read back or not
        assert stats.CONDITIONAL_LABEL in line["Rel-U − Doctor FPR95"] and stats.CONDITIONAL_LABEL in line["verdict"]
    as_json = json.loads(json.dumps(study.to_dict()))
    assert as_json["selection"] == "tuning" and set(as_json["objectives"]) == set(CHOSEN)
    minus_doctor = as_json["objectives"]["logitnorm"]["detectors"]["relu"]["minus_doctor"]
    assert all(row["conditional_on_selection"] is True for row in minus_doctor.values())
    reread = objectives._from_arrays(objectives._to_arrays(study.rows[0].result))
    assert all(d.conditional for d in reread.paired.values())


def test_fixed_settings_are_the_protocol_at_t1_and_lambda_half():
    fixed = objectives.objectives_study(
        "digits", "cnn8", objectives=("cross-entropy",), epochs=1, seeds=2, selection="fixed", n_resamples=0
    )
    run = fixed.rows[0].run
    direct = protocol.evaluate(run.logits, run.labels, objectives.TABLE_KEYS, temperature=None, seeds=2, n_resamples=0)
    np.testing.assert_allclose(fixed.rows[0].result.per_seed["relu"]["auroc"], direct.per_seed["relu"]["auroc"])
    assert fixed.rows[0].result.params["odin"][0][0] == 1000


def test_bad_choices_are_refused_before_any_training():
    with pytest.raises(InputError, match="unknown objective 'nope'"):
        objectives.objectives_study("digits", "cnn8", objectives=("cross-entropy", "nope"))
    with pytest.raises(InputError, match="selection"):
        objectives.objectives_study("digits", "cnn8", selection="oracle")
    with pytest.raises(InputError, match="openmix needs an outlier data set for digits"):
        objectives.objective_run("digits", "cnn8", "openmix", epochs=1)


def test_study_objectives_command(tmp_path, capsys):
    code = cli.main(
        ["study", "objectives", "--dataset", "digits", "--model", "cnn8", "--objectives", "cross-entropy,logitnorm"]
        + ["--epochs", "1", "--seeds", "2", "--bootstrap", "50", "--json"]
    )
    assert code == 0
    printed = json.loads(capsys.readouterr().out)
    assert set(printed["objectives"]) == set(CHOSEN) and printed["dataset"] == "digits"
    again = ["study", "objectives", "--dataset", "digits", "--model", "cnn8", "--objectives", "cross-entropy,logitnorm"]
    assert cli.main(again + ["--epochs", "1", "--seeds", "1", "--bootstrap", "0"]) == 0
    # both models are read back now: the estimate on stderr counts none to train, as the page does
    assert "No training: 2 models of cnn8 (cross-entropy, logitnorm) cached." in capsys.readouterr().err
    assert cli.main(["study", "objectives", "--dataset", "digits", "--objectives", "nope"]) == 2
    assert "unknown objective" in capsys.readouterr().err


def test_page_trains_what_is_missing_and_opens_a_row_in_explore():
    at = app(OBJECTIVES_PAGE, 300)
    at.session_state["obj_dataset"] = "digits"
    at.session_state["obj_objectives"] = list(CHOSEN)
    at.session_state["obj_epochs"] = 1
    at.session_state["obj_seeds"] = 2
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    # the heading is a subheader as on every other page (a title wrapped to two lines at 1280 x 720)
    assert not at.title and at.subheader[0].value == "Training objectives: where does Rel-U help?"
    at.button(key="obj_run").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    summary = at.dataframe[0].value  # the answer per objective first, in narrow columns
    assert list(summary["objective"]) == list(CHOSEN)
    assert list(summary.columns)[2:] == [
        "Rel-U − Doctor FPR95 [95 % CI]",
        "verdict (FPR95)",
        "Rel-U − Doctor FPR95, errors positive [95 % CI]",
        "verdict (errors positive)",
        "oracle: Rel-U − Doctor FPR95",
        "paper's protocol: Rel-U − Doctor FPR95 (errors positive)",
    ]
    assert "Rel-U FPR95" in at.dataframe[1].value.columns
    answer = at.markdown[0].value  # the title's question answered first, in one sentence
    assert answer.startswith("**") and "FPR95, paired 95 % intervals over 2 seeds" in answer
    at.button(key="obj_open_logitnorm").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.subheader[0].value == "Explore: Rel-U vs Doctor"
    assert "logitnorm" in at.caption[0].value


def test_a_table_of_cached_models_is_read_back_exactly(study, monkeypatch):
    calls = []
    real = protocol.evaluate_with_selection
    monkeypatch.setattr(protocol, "evaluate_with_selection", lambda *a, **k: calls.append(1) or real(*a, **k))
    again = objectives.objectives_study("digits", "cnn8", objectives=CHOSEN, epochs=1, seeds=2, n_resamples=100)
    assert not calls  # every row read back from the cache
    assert json.dumps(again.to_dict(), sort_keys=True) == json.dumps(study.to_dict(), sort_keys=True)
    assert again.table().equals(study.table())
    objectives.objectives_study("digits", "cnn8", objectives=CHOSEN[:1], epochs=1, seeds=3, n_resamples=100)
    assert len(calls) == 2  # other settings: computed, honest and oracle
