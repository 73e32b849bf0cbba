"""Hostile input, round five, on the export: a user's own ``FILE.pt2.json`` that is not a card is kept (one line,
exit 2), whatever its JSON; ``--bootstrap 0`` means what it means for ``evaluate`` (no intervals, said on the
card); a row exactly on the threshold gets the same accept decision in a batch of 1 and of 1,000."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch

from relu_core import cli, detector_export, explore, runs

USERS_FILES = {
    "notes": {"my": "notes", "about": "d.pt2"},
    "files-a-number": {"files": 5},
    "files-a-string": {"files": "d.pt2 and other files"},
    "files-a-list": {"files": ["d.pt2"]},
    "files-a-dict": {"files": {"d.pt2": "mine"}, "todo": "export it"},
    "a-list": ["d.pt2"],
    "null": None,
}


def _one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err
    return lines[0]


@pytest.fixture(scope="module")
def logits_file(digits_run, tmp_path_factory):
    path = tmp_path_factory.mktemp("kept") / "digits.npz"
    np.savez(path, logits=digits_run.logits, labels=digits_run.labels, class_names=np.array(digits_run.class_names))
    return path


@pytest.mark.parametrize("name", list(USERS_FILES))
def test_a_users_json_beside_the_output_is_never_replaced(name, logits_file, tmp_path, capsys):
    out = tmp_path / "d.pt2"
    users = tmp_path / "d.pt2.json"
    text = json.dumps(USERS_FILES[name])
    users.write_text(text)
    status = cli.main(["export", "--logits", str(logits_file), "--out", str(out), "--bootstrap", "20"])
    line = _one_error_line(capsys.readouterr().err)
    assert status == 2 and "is not the card of d.pt2" in line
    assert users.read_text() == text and not out.exists()


def test_the_exports_own_card_is_rewritten(logits_file, tmp_path, capsys):
    out = tmp_path / "d.pt2"
    argv = ["export", "--logits", str(logits_file), "--out", str(out), "--bootstrap", "20"]
    assert cli.main(argv) == 0
    first = json.loads((tmp_path / "d.pt2.json").read_text())
    assert cli.main([*argv, "--target-tpr", "0.9"]) == 0  # its own card: replaced by the new one
    assert json.loads((tmp_path / "d.pt2.json").read_text())["operating_point"] != first["operating_point"]
    capsys.readouterr()


def test_export_takes_bootstrap_0_as_evaluate_does(logits_file, tmp_path, capsys):
    out = tmp_path / "d.pt2"
    status = cli.main(["export", "--logits", str(logits_file), "--out", str(out), "--bootstrap", "0"])
    captured = capsys.readouterr()
    assert status == 0, captured.err
    card = json.loads((tmp_path / "d.pt2.json").read_text(), parse_constant=lambda c: pytest.fail(c))
    evaluation = card["operating_point"]["evaluation"]
    assert "no bootstrap" in evaluation["intervals"]
    for rate in ("tpr", "fpr", "coverage", "risk"):
        assert evaluation[rate]["ci_low"] is None and evaluation[rate]["n_resamples"] == 0
    assert evaluation["tpr"]["estimate"] is not None
    assert "nan" not in captured.out.lower() and "no interval" in captured.out
    assert cli.main(["export", "--logits", str(logits_file), "--out", str(out), "--bootstrap", "-1"]) == 2
    capsys.readouterr()


# ------------------------------------------------------------------------------------------- the tie rule
@pytest.fixture(scope="module")
def wide_run(tmp_path_factory):
    """100 classes: Rel-U's matrix product rounds a row differently in a batch of 1 and in a batch of 1,000."""
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 100, 3000)
    logits = (rng.normal(size=(3000, 100)) * 2 + 4 * np.eye(100)[labels]).astype(np.float32)
    path = tmp_path_factory.mktemp("wide") / "wide.npz"
    np.savez(path, logits=logits, labels=labels)
    return runs.load_logits(path)


def _decisions(program, logits: torch.Tensor, rows: np.ndarray, batch: int) -> np.ndarray:
    """Each of ``rows``' accept decision when it is fed first in a batch of ``batch`` rows."""
    out = []
    with torch.no_grad():
        for i in rows:
            chunk = torch.cat([logits[i : i + 1], logits[:0] if batch == 1 else logits[: batch - 1]])
            out.append(bool(program(chunk)[2][0]))
    return np.array(out)


@pytest.mark.parametrize("key", ["relu", "doctor", "msp"])
@pytest.mark.parametrize("setting", [explore.Setting(), explore.Setting(op_kind="risk", op_target=0.5)])
def test_a_row_on_the_threshold_is_decided_alike_in_any_batch(key, setting, wide_run, tmp_path):
    fitted = detector_export.from_setting(wide_run, setting, key, n_resamples=20)
    logits = torch.from_numpy(wide_run.logits)
    module = detector_export.LogitsDetector(fitted)
    with torch.no_grad():
        scores = module(logits)[1].numpy()  # each row's score in one batch of all
    card = detector_export.card(wide_run, fitted, {"d.pt2": "logits"})
    assert "tie rule" in card["outputs"]["accept"] and card["threshold"] == fitted.threshold
    # the fitted threshold, then 60 rows' own scores as thresholds: each such row lies exactly on its threshold
    rows = np.random.default_rng(1).choice(len(scores), 60, replace=False)
    for threshold, row in [(fitted.threshold, None), *((float(scores[i]), i) for i in rows)]:
        slack = detector_export.tie_slack(threshold, scores)
        moved = dataclasses.replace(fitted, threshold=threshold, tie_slack=slack)
        if row is None:  # the exported file itself
            content = detector_export.export(wide_run, moved, ".pt2", "logits", {"d.pt2": "logits"})
            (tmp_path / "d.pt2").write_bytes(content)
            program = torch.export.load(tmp_path / "d.pt2").module()
        else:  # the module it exports (the same forward)
            program = detector_export.LogitsDetector(moved)
        on = np.flatnonzero(scores == threshold) if row is None else np.array([row])
        by_batch = [_decisions(program, logits, on, batch) for batch in (1, 7, 1000)]
        assert all(d.all() for d in by_batch), (threshold, by_batch)  # on the threshold: accepted, in any batch
