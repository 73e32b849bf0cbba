"""Hostile input on the command line: exit code 2 and exactly one ``error: ...`` line on stderr, never a
traceback (in-process ``cli.main`` for the cases, a few real subprocesses for the end-to-end promise)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import hostile_files as hf
import numpy as np
import pytest

from relu_core import cli, limits

REPO = Path(__file__).resolve().parents[2]


def _cli(argv: list[str], capsys: pytest.CaptureFixture) -> tuple[int, str]:
    status = cli.main(argv)
    err = capsys.readouterr().err
    return status, err


def _one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err
    return lines[0].lower()


@pytest.mark.parametrize("name", list(hf.LOGITS_FILES))
def test_evaluate_refuses_hostile_logits_file(name, tmp_path, capsys):
    data, message = hf.LOGITS_FILES[name]
    path = tmp_path / f"{name}.npz"
    path.write_bytes(data)
    status, err = _cli(["evaluate", "--logits", str(path), "--seeds", "1"], capsys)
    assert status == 2
    assert message.lower() in _one_error_line(err)


@pytest.mark.parametrize(
    "limit, message",
    [
        ("MEMORY_BUDGET_BYTES", "more than the memory budget of 100 bytes"),  # an array over the memory budget
        ("MAX_LOGITS_VALUES", "max_logits_values"),  # too many logits: the limit is named
    ],
    ids=["memory-budget", "too-many-logits"],
)
def test_evaluate_refuses_logits_over_a_limit(limit, message, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(limits, limit, 100)
    path = tmp_path / "big.npz"
    path.write_bytes(hf.npz(logits=hf.LOGITS, labels=hf.LABELS))
    status, err = _cli(["evaluate", "--logits", str(path)], capsys)
    assert status == 2 and message in _one_error_line(err)


def test_evaluate_refuses_a_csv_beyond_the_class_limit(tmp_path, capsys):
    header = ",".join([f"c{k}" for k in range(1001)] + ["label"])
    (tmp_path / "wide.csv").write_text(
        header + "\n" + ",".join(["0"] * 1001 + ["0"]) * 1 + "\n" + ",".join(["1"] * 1001 + ["1"]) + "\n"
    )
    status, err = _cli(["evaluate", "--logits", str(tmp_path / "wide.csv")], capsys)
    assert status == 2 and "limit of 1,000" in _one_error_line(err)


@pytest.mark.parametrize("name", [*hf.BAD_SCRIPTED, "scripted-nan-weights", "state-nan", "state-inf"])
def test_evaluate_refuses_hostile_models(name, bad_models, capsys):
    status, err = _cli(hf.evaluate_argv(bad_models[name], "--methods", "msp"), capsys)
    line = _one_error_line(err)
    expected = hf.BAD_SCRIPTED[name][1] if name in hf.BAD_SCRIPTED else "nan or infinite weights"
    assert status == 2 and expected in line


@pytest.mark.parametrize(
    "spec, message",
    [
        ("npz:{dir}/bomb.npz", "announces shape"),
        ("npz:{dir}/single.npz", "single .npy array"),
        ("zip:{dir}/nozip.zip", "not a valid zip"),
    ],
)
def test_logits_command_refuses_hostile_data_sets(spec, message, tmp_path, capsys):
    (tmp_path / "bomb.npz").write_bytes(hf.allocation_bomb("x", (10**7, 32, 32, 3), y=np.zeros(4, int)))
    (tmp_path / "single.npz").write_bytes(hf.npy(np.zeros((4, 8, 8), np.uint8)))
    (tmp_path / "nozip.zip").write_bytes(b"no zip here")
    status, err = _cli(
        [
            "logits",
            "--model",
            "cnn8",
            "--dataset",
            spec.format(dir=tmp_path),
            "--out",
            str(tmp_path / "out.npz"),
            "--device",
            "cpu",
        ],
        capsys,
    )
    assert status == 2 and message in _one_error_line(err)


def _subprocess(args: list[str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    return subprocess.run(
        [sys.executable, "-m", "relu_core", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        check=False,
        text=True,
        timeout=300,
    )


@pytest.mark.slow
def test_subprocess_allocation_bomb_exits_2_with_one_line(tmp_path):
    (tmp_path / "bomb.npz").write_bytes(hf.LOGITS_BOMB)
    done = _subprocess(["evaluate", "--logits", str(tmp_path / "bomb.npz")])
    assert done.returncode == 2 and "announces shape" in _one_error_line(done.stderr)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["tuple", "dict", "raises"])
def test_subprocess_hostile_torchscript_exits_2_with_one_line(name, bad_models):
    done = _subprocess(hf.evaluate_argv(bad_models[name], "--methods", "msp"))
    assert done.returncode == 2 and hf.BAD_SCRIPTED[name][1] in _one_error_line(done.stderr)
