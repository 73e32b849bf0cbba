"""Fixtures of the hostile-input suite: small files written once per session (scripted models, checkpoints)."""

from __future__ import annotations

from pathlib import Path

import hostile_files as hf
import pytest


@pytest.fixture(scope="session")
def hostile_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("hostile")


@pytest.fixture(scope="session")
def bad_models(hostile_dir: Path) -> dict[str, Path]:
    """Every hostile checkpoint by name: the scripted models of ``BAD_SCRIPTED`` and bad state dicts."""
    files = {name: hf.script(cls(), hostile_dir / f"{name}.pt") for name, (cls, _) in hf.BAD_SCRIPTED.items()}
    files["scripted-nan-weights"] = hf.scripted_nan_weights(hostile_dir / "scripted_nan_weights.pt")
    files["state-nan"] = hf.state_dict_file(hostile_dir / "state_nan.pt", float("nan"))
    files["state-inf"] = hf.state_dict_file(hostile_dir / "state_inf.pt", float("inf"))
    return files
